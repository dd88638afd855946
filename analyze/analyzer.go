package analyze

import (
	"slices"
	"sync"
	"time"

	"github.com/budgetd/budgetd/schema"
)

// edgeSlices is the number of time slices an edge window is cut into. The
// window slides a slice at a time: a 15-minute window covers between 13.5
// and 15 minutes of samples.
const edgeSlices = 10

// Result is what the per-trace detectors make of one trace.
type Result struct {
	// Hops has one row per span, in the trace's span order.
	Hops []schema.Hop
	// Findings are the trace's findings, sorted by span, kind and id.
	Findings []schema.Finding
	// Skews lists the client/server pairs whose clocks were corrected.
	Skews []Skew
}

// Counters reports what an Analyzer holds and what it had to drop.
type Counters struct {
	// Edges is the number of edges currently tracked.
	Edges int
	// RefusedSamples counts call samples not recorded because MaxEdges
	// edges were tracked and the sample's edge was new.
	RefusedSamples uint64
	// LateSamples counts call samples not recorded because they started
	// before the window (or before a slice already reused for newer data).
	LateSamples uint64
	// WaitEdges, RefusedWaits and LateWaits are the same for the waits
	// inference draws on (how long callers waited, per edge and entry
	// point), kept apart so they never crowd out call statistics.
	WaitEdges    int
	RefusedWaits uint64
	LateWaits    uint64
}

// Analyzer runs the detectors over traces and keeps bounded per-edge
// statistics across them: per edge, a ring of time slices, each with call
// and retry counts, a latency sketch and a timeout table.
//
// An Analyzer is safe for concurrent use by multiple goroutines: the
// per-trace analysis runs without a lock, and only reading and recording edge
// statistics takes the Analyzer's mutex.
type Analyzer struct {
	cfg     Config
	sliceNs int64

	mu        sync.Mutex
	edges     windows // call statistics
	waits     windows // how long callers waited, for inference
	scratchAg edgeAgg
}

// windows is a bounded set of edge windows with its counters.
type windows struct {
	m        map[edgeKey]*edgeWindow
	refused  uint64
	late     uint64
	sweptAt  int64 // slice epoch of the last sweep of expired edges
	hasSwept bool
}

// edgeWindow is the ring of slices of one edge.
type edgeWindow struct {
	slices [edgeSlices]edgeSlice
	newest int64 // newest epoch recorded

	// waits changes whenever the window's wait samples change; the cached
	// timeout estimate is valid for one waits value and one epoch.
	waits    uint64
	est      Estimate
	estOK    bool
	estWaits uint64
	estEpoch int64
	hasEst   bool
}

// edgeSlice is one slice of an edge's window; epoch < 0 marks it unused.
type edgeSlice struct {
	epoch int64
	agg   edgeAgg
}

// New returns an Analyzer. cfg should have passed Validate; settings it
// would reject are replaced by their defaults.
func New(cfg Config) *Analyzer {
	cfg = cfg.sanitized()
	return &Analyzer{
		cfg:     cfg,
		sliceNs: int64(cfg.EdgeWindow) / edgeSlices,
		edges:   windows{m: map[edgeKey]*edgeWindow{}},
		waits:   windows{m: map[edgeKey]*edgeWindow{}},
	}
}

// Config returns the configuration the Analyzer runs with.
func (a *Analyzer) Config() Config { return a.cfg }

// Trace runs every per-trace detector over t and then records the trace's
// calls in the edge statistics. now stamps the findings and places the
// window; the retry_without_budget p50 test reads the edge statistics as
// they were before this trace.
//
// A trace analysed again (re-opened by late spans) yields the same finding
// ids, but its calls are recorded again.
func (a *Analyzer) Trace(t *schema.Trace, now time.Time) Result {
	return a.Traces([]*schema.Trace{t}, now)[0]
}

// inferChunk is the number of traces Traces prepares at once: their waits
// are recorded before any of them is judged, so the first traces of a
// batch already benefit from the timeouts the others show, while memory
// stays bounded by a chunk's views.
const inferChunk = 256

// Traces analyses several traces, as Trace does each, but first records how
// long every caller in them waited, so inferred timeouts (infer.go) draw on
// the whole batch. Results are in the order of ts.
func (a *Analyzer) Traces(ts []*schema.Trace, now time.Time) []Result {
	spans := 0
	for _, t := range ts {
		spans += len(t.Spans)
	}
	results, _ := a.Round(len(ts), func(i int) *schema.Trace { return ts[i] }, spans, now)
	return results
}

// Round analyses n traces as Traces does, building the i-th with trace(i)
// only when its chunk of inferChunk is judged, so a round's traces and
// views are never all in memory at once (a loaded pipeline's round is tens
// of thousands of spans). It returns the results in order and every
// result's hops in one slice, each Result.Hops its window of it, so that a
// caller writing them all need not copy them. spans is the sum of the
// traces' span counts (one hop each), as far as the caller knows it: more
// costs a copy of the hops so far, never a wrong result.
func (a *Analyzer) Round(n int, trace func(i int) *schema.Trace, spans int, now time.Time) ([]Result, []schema.Hop) {
	out := make([]Result, 0, n)
	hops := make([]schema.Hop, 0, spans)
	var est estimateFunc
	if a.cfg.Infer.Enabled {
		est = func(k edgeKey) (Estimate, bool) { return a.estimate(k, now) }
	}
	var nodes nodeArena
	for from := 0; from < n; from += inferChunk {
		nodes.reset() // the previous chunk's views are done with
		views := make([]*view, min(n-from, inferChunk))
		for i := range views {
			t := trace(from + i)
			views[i] = newView(t, a.cfg, nodes.take(len(t.Spans)))
		}
		a.recordWaits(views, now)
		for _, v := range views {
			hops = slices.Grow(hops, len(v.n))
			at := len(hops)
			hops = hops[:at+len(v.n)]
			v.finish(est, hops[at:len(hops):len(hops)])
			out = append(out, v.detect(now, func(k edgeKey) (float64, bool) { return a.p50(k, now) }))
			a.record(v.hops, now)
		}
	}
	return out, hops
}

// nodeArena hands out the views' nodes of one chunk of a round from one
// slice, taken back whole when the next chunk starts: a round's nodes were
// its largest allocation (a node is 488 bytes a span;
// docs/performance.md, step 44).
type nodeArena struct {
	buf  []node
	used int
}

// take returns n zeroed nodes. When buf is short it is replaced by a larger
// one; the views holding the old one keep it until they are done.
func (a *nodeArena) take(n int) []node {
	if a.used+n > len(a.buf) {
		a.buf = make([]node, max(2*len(a.buf), n))
		a.used = 0
	}
	nodes := a.buf[a.used : a.used+n : a.used+n]
	a.used += n
	clear(nodes)
	return nodes
}

// reset takes every node back.
func (a *nodeArena) reset() { a.used = 0 }

// detect runs the per-trace detectors. The view is finished (finish).
func (v *view) detect(now time.Time, p50 p50Func) Result {
	var fs []schema.Finding
	fs = v.timeoutInversions(now, fs)
	fs = v.budgetResets(now, fs)
	fs = v.unfundedRetryPolicies(now, fs)
	fs = v.orphanedWork(now, fs)
	fs = v.expiredOnArrival(now, fs)
	fs = v.retryAmplifications(now, fs)
	fs = v.retriesWithoutBudget(now, p50, fs)
	sortFindings(fs)
	return Result{Hops: v.hops, Findings: fs, Skews: v.skews}
}

// epoch returns the slice number of a time.
func (a *Analyzer) epoch(ns int64) int64 {
	if ns < 0 {
		return (ns - a.sliceNs + 1) / a.sliceNs
	}
	return ns / a.sliceNs
}

// record adds the calls among hops to the edge windows.
func (a *Analyzer) record(hops []schema.Hop, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	eachCall(hops, func(s callSample) {
		if agg := a.slice(&a.edges, s.key, s.startNs, now, true); agg != nil {
			agg.add(&s)
		}
	})
}

// recordWaits adds how long the callers in views waited to the edge
// windows.
func (a *Analyzer) recordWaits(views []*view, now time.Time) {
	if !a.cfg.Infer.Enabled {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, v := range views {
		v.waitSamples(func(w waitSample) {
			// Only a call that timed out opens an edge's wait window: the
			// answered calls of edges that never time out are not kept.
			if agg := a.slice(&a.waits, w.key, w.startNs, now, w.gaveUp); agg != nil {
				agg.addWait(&w)
				a.waits.m[w.key].waits++
			}
		})
	}
}

// slice returns the aggregate of the time slice of ws a sample of edge k
// started at startNs belongs to, creating the edge (when create is set) and
// resetting a reused slice as needed; nil when the sample is refused (too
// many edges), late, or of an edge not tracked and not to be created. The
// caller holds a.mu.
func (a *Analyzer) slice(ws *windows, k edgeKey, startNs uint64, now time.Time, create bool) *edgeAgg {
	nowNs := now.UnixNano()
	nowEpoch := a.epoch(nowNs)
	// A sample from the future (a skewed host) counts as now, so it cannot
	// push the window forward and evict current data.
	at := min(clampTime(startNs), nowNs)
	ep := a.epoch(at)
	if ep < nowEpoch-edgeSlices+1 {
		ws.late++
		return nil
	}
	w := ws.m[k]
	if w == nil && !create {
		return nil
	}
	if w == nil {
		if len(ws.m) >= a.cfg.MaxEdges {
			ws.sweep(nowEpoch)
		}
		if len(ws.m) >= a.cfg.MaxEdges {
			ws.refused++
			return nil
		}
		w = &edgeWindow{newest: -1 << 62}
		for i := range w.slices {
			w.slices[i].epoch = -1 << 62
		}
		ws.m[k] = w
	}
	sl := &w.slices[mod(ep, edgeSlices)]
	switch {
	case sl.epoch == ep:
	case sl.epoch < ep:
		*sl = edgeSlice{epoch: ep}
		w.waits++ // the slice's waits are gone: a cached estimate is stale
	default:
		ws.late++
		return nil
	}
	w.newest = max(w.newest, ep)
	return &sl.agg
}

func mod(a, m int64) int64 { return ((a % m) + m) % m }

// sweep drops edges with no slice left in the window. It runs at most once
// per slice, so a full table does not cost a scan per refused sample.
func (ws *windows) sweep(nowEpoch int64) {
	if ws.hasSwept && ws.sweptAt == nowEpoch {
		return
	}
	ws.hasSwept, ws.sweptAt = true, nowEpoch
	for k, w := range ws.m {
		if w.newest <= nowEpoch-edgeSlices {
			delete(ws.m, k)
		}
	}
}

// window merges the slices of w inside the window ending at nowEpoch into
// dst.
func (w *edgeWindow) window(nowEpoch int64, dst *edgeAgg) {
	for i := range w.slices {
		sl := &w.slices[i]
		if sl.epoch > nowEpoch-edgeSlices && sl.epoch <= nowEpoch {
			dst.merge(&sl.agg)
		}
	}
}

// p50 returns an edge's windowed median latency once it has enough samples.
func (a *Analyzer) p50(k edgeKey, now time.Time) (float64, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	w := a.edges.m[k]
	if w == nil {
		return 0, false
	}
	a.scratchAg = edgeAgg{latency: sketch{bins: a.scratchAg.latency.bins[:0]}}
	w.window(a.epoch(now.UnixNano()), &a.scratchAg)
	return a.scratchAg.p50(a.cfg.MinEdgeSamples)
}

// estimate returns edge k's timeout estimate over the window ending at now,
// when it is usable (InferConfig). Estimates are cached per edge until the
// edge's wait samples or the window change, since every call of every trace
// without a recorded timeout asks.
func (a *Analyzer) estimate(k edgeKey, now time.Time) (Estimate, bool) {
	nowEpoch := a.epoch(now.UnixNano())
	a.mu.Lock()
	defer a.mu.Unlock()
	w := a.waits.m[k]
	if w == nil {
		return Estimate{}, false
	}
	if !w.hasEst || w.estWaits != w.waits || w.estEpoch != nowEpoch {
		var agg waitAgg
		for i := range w.slices {
			sl := &w.slices[i]
			if sl.epoch > nowEpoch-edgeSlices && sl.epoch <= nowEpoch {
				agg.merge(&sl.agg.wait)
			}
		}
		w.est, w.estOK = agg.estimate(a.cfg.SkewToleranceMs)
		w.hasEst, w.estWaits, w.estEpoch = true, w.waits, nowEpoch
	}
	return w.est, w.estOK && w.est.usable(a.cfg.Infer)
}

// Edges returns the statistics of every edge with calls in the window ending
// at now, sorted by caller service, caller operation, callee service and
// callee operation. Edges with no call left in the window are dropped.
func (a *Analyzer) Edges(now time.Time) []EdgeStats {
	return sortedStats(a.windowAggs(now), a.cfg.SkewToleranceMs)
}

// windowAggs returns the aggregate of every edge with calls over the
// window ending at now, its waits included, and forgets edges whose
// window has passed.
func (a *Analyzer) windowAggs(now time.Time) map[edgeKey]*edgeAgg {
	nowEpoch := a.epoch(now.UnixNano())
	a.mu.Lock()
	defer a.mu.Unlock()
	aggs := make(map[edgeKey]*edgeAgg, len(a.edges.m))
	for k, w := range a.edges.m {
		if w.newest <= nowEpoch-edgeSlices {
			delete(a.edges.m, k)
			continue
		}
		agg := &edgeAgg{}
		w.window(nowEpoch, agg)
		if agg.calls > 0 {
			aggs[k] = agg
		}
	}
	for k, w := range a.waits.m {
		if w.newest <= nowEpoch-edgeSlices {
			delete(a.waits.m, k)
			continue
		}
		if agg := aggs[k]; agg != nil {
			w.window(nowEpoch, agg) // wait windows hold waits only
		}
	}
	return aggs
}

// EdgeFindings returns the latency_inversion findings of the window ending
// at now (see LatencyInversions).
func (a *Analyzer) EdgeFindings(now time.Time) []schema.Finding {
	return LatencyInversions(a.Edges(now), a.cfg, now)
}

// Counters returns the Analyzer's counters.
func (a *Analyzer) Counters() Counters {
	a.mu.Lock()
	defer a.mu.Unlock()
	return Counters{
		Edges: len(a.edges.m), RefusedSamples: a.edges.refused, LateSamples: a.edges.late,
		WaitEdges: len(a.waits.m), RefusedWaits: a.waits.refused, LateWaits: a.waits.late,
	}
}
