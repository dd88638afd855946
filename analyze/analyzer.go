package analyze

import (
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
	edges     map[edgeKey]*edgeWindow
	refused   uint64
	late      uint64
	sweptAt   int64 // slice epoch of the last sweep of expired edges
	hasSwept  bool
	scratchAg edgeAgg
}

// edgeWindow is the ring of slices of one edge.
type edgeWindow struct {
	slices [edgeSlices]edgeSlice
	newest int64 // newest epoch recorded
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
		edges:   map[edgeKey]*edgeWindow{},
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
	v := newView(t, a.cfg)
	res := v.detect(now, func(k edgeKey) (float64, bool) { return a.p50(k, now) })
	a.record(v.hops, now)
	return res
}

// detect runs the per-trace detectors.
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
	nowNs := now.UnixNano()
	nowEpoch := a.epoch(nowNs)
	oldest := nowEpoch - edgeSlices + 1
	a.mu.Lock()
	defer a.mu.Unlock()
	eachCall(hops, func(s callSample) {
		// A sample from the future (a skewed host) counts as now, so it
		// cannot push the window forward and evict current data.
		at := min(clampTime(s.startNs), nowNs)
		ep := a.epoch(at)
		if ep < oldest {
			a.late++
			return
		}
		w := a.edges[s.key]
		if w == nil {
			if len(a.edges) >= a.cfg.MaxEdges {
				a.sweep(nowEpoch)
			}
			if len(a.edges) >= a.cfg.MaxEdges {
				a.refused++
				return
			}
			w = &edgeWindow{newest: -1 << 62}
			for i := range w.slices {
				w.slices[i].epoch = -1 << 62
			}
			a.edges[s.key] = w
		}
		sl := &w.slices[mod(ep, edgeSlices)]
		switch {
		case sl.epoch == ep:
		case sl.epoch < ep:
			*sl = edgeSlice{epoch: ep}
		default:
			a.late++
			return
		}
		sl.agg.add(&s)
		w.newest = max(w.newest, ep)
	})
}

func mod(a, m int64) int64 { return ((a % m) + m) % m }

// sweep drops edges with no slice left in the window. It runs at most once
// per slice, so a full table does not cost a scan per refused sample.
func (a *Analyzer) sweep(nowEpoch int64) {
	if a.hasSwept && a.sweptAt == nowEpoch {
		return
	}
	a.hasSwept, a.sweptAt = true, nowEpoch
	for k, w := range a.edges {
		if w.newest <= nowEpoch-edgeSlices {
			delete(a.edges, k)
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
	w := a.edges[k]
	if w == nil {
		return 0, false
	}
	a.scratchAg = edgeAgg{latency: sketch{bins: a.scratchAg.latency.bins[:0]}}
	w.window(a.epoch(now.UnixNano()), &a.scratchAg)
	return a.scratchAg.p50(a.cfg.MinEdgeSamples)
}

// Edges returns the statistics of every edge with calls in the window ending
// at now, sorted by caller service, caller operation, callee service and
// callee operation. Edges with no call left in the window are dropped.
func (a *Analyzer) Edges(now time.Time) []EdgeStats {
	nowEpoch := a.epoch(now.UnixNano())
	a.mu.Lock()
	defer a.mu.Unlock()
	aggs := make(map[edgeKey]*edgeAgg, len(a.edges))
	for k, w := range a.edges {
		if w.newest <= nowEpoch-edgeSlices {
			delete(a.edges, k)
			continue
		}
		agg := &edgeAgg{}
		w.window(nowEpoch, agg)
		if agg.calls > 0 {
			aggs[k] = agg
		}
	}
	return sortedStats(aggs)
}

// EdgeFindings returns the latency_inversion findings of the window ending
// at now (see LatencyInversions).
func (a *Analyzer) EdgeFindings(now time.Time) []schema.Finding {
	return LatencyInversions(a.Edges(now), a.cfg.MinEdgeSamples, now)
}

// Counters returns the Analyzer's counters.
func (a *Analyzer) Counters() Counters {
	a.mu.Lock()
	defer a.mu.Unlock()
	return Counters{Edges: len(a.edges), RefusedSamples: a.refused, LateSamples: a.late}
}
