package analyze

import (
	"sort"
	"strings"
	"time"

	"github.com/budgetd/budgetd/schema"
)

// Report is the outcome of an offline analysis, the document
// `budgetd analyze --output json` prints.
type Report struct {
	Findings []schema.Finding `json:"findings"`
	Paths    []PathSummary    `json:"paths"`
}

// PathSummary aggregates the hops of one path over the analysed traces.
type PathSummary struct {
	Path string `json:"path"`
	// Requests is the number of traces in which the path occurs.
	Requests int `json:"requests"`
	// FindingsByKind counts the findings on the path. An edge finding
	// (latency_inversion) counts on every path that ends with its edge.
	FindingsByKind map[string]int `json:"findings_by_kind"`
	// OrphanedMs sums the orphaned work of the path's hops.
	OrphanedMs float64 `json:"orphaned_ms"`
	// MaxCallsPerTrace is the most times one trace went down the path: its
	// call spans (attempts included), or its entry spans where the path
	// has no call span.
	MaxCallsPerTrace int `json:"max_calls_per_trace"`
}

// Analyze runs every detector over spans, which may mix many traces in any
// order, and summarises the result per path. now stamps the findings.
//
// Unlike a long-running Analyzer, which judges each trace against the edge
// statistics of the traces before it, Analyze first derives the edge
// statistics of all the spans given (without a time window: the spans are the
// window) and then runs the detectors, so its output does not depend on the
// order of traces in the input. Findings and paths are sorted.
func Analyze(spans []schema.Span, now time.Time, cfg Config) Report {
	cfg = cfg.sanitized()
	byTrace := map[schema.TraceID][]schema.Span{}
	for i := range spans {
		byTrace[spans[i].TraceID] = append(byTrace[spans[i].TraceID], spans[i])
	}
	ids := make([]schema.TraceID, 0, len(byTrace))
	for id := range byTrace {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(a, b int) bool { return string(ids[a][:]) < string(ids[b][:]) })

	views := make([]*view, 0, len(ids))
	for _, id := range ids {
		views = append(views, newView(schema.NewTrace(byTrace[id]), cfg, nil))
	}
	// How long callers waited is gathered from every trace before any is
	// judged, so inferred timeouts draw on all the input.
	waits := map[edgeKey]*edgeAgg{}
	if cfg.Infer.Enabled {
		for _, v := range views {
			v.waitSamples(func(w waitSample) { aggOf(waits, w.key).addWait(&w) })
		}
	}
	estimates := map[edgeKey]Estimate{}
	for k, a := range waits {
		if e, ok := a.wait.estimate(cfg.SkewToleranceMs); ok {
			estimates[k] = e
		}
	}
	var est estimateFunc
	if cfg.Infer.Enabled {
		est = func(k edgeKey) (Estimate, bool) {
			e, ok := estimates[k]
			return e, ok && e.usable(cfg.Infer)
		}
	}
	var hops []schema.Hop
	for _, v := range views {
		v.finish(est, nil)
		hops = append(hops, v.hops...)
	}
	aggs := edgeAggs(hops)
	for k, w := range waits {
		aggOf(aggs, k).wait = w.wait
	}
	edges := sortedStats(aggs, cfg.SkewToleranceMs)
	byKey := map[edgeKey]EdgeStats{}
	for _, e := range edges {
		byKey[edgeKey{e.CallerService, e.CallerOperation, e.CalleeService, e.CalleeOperation}] = e
	}
	p50 := func(k edgeKey) (float64, bool) {
		e, ok := byKey[k]
		if !ok || e.P50Ms == nil || e.LatencySamples < uint64(cfg.MinEdgeSamples) {
			return 0, false
		}
		return *e.P50Ms, true
	}

	findings := []schema.Finding{}
	for _, v := range views {
		findings = append(findings, v.detect(now, p50).Findings...)
	}
	findings = append(findings, LatencyInversions(edges, cfg, now)...)
	sortFindings(findings)
	return Report{Findings: findings, Paths: Summarize(hops, findings)}
}

// Summarize aggregates hops (of any number of traces) and their findings per
// path, sorted by path.
func Summarize(hops []schema.Hop, findings []schema.Finding) []PathSummary {
	type traceCount struct {
		calls, entries int
	}
	type agg struct {
		sum    PathSummary
		traces map[schema.TraceID]*traceCount
	}
	paths := map[string]*agg{}
	get := func(p string) *agg {
		a := paths[p]
		if a == nil {
			a = &agg{sum: PathSummary{Path: p, FindingsByKind: map[string]int{}}, traces: map[schema.TraceID]*traceCount{}}
			paths[p] = a
		}
		return a
	}
	for i := range hops {
		h := &hops[i]
		a := get(h.Path)
		tc := a.traces[h.TraceID]
		if tc == nil {
			tc = &traceCount{}
			a.traces[h.TraceID] = tc
		}
		switch {
		case h.Kind.IsCall():
			tc.calls++
		case h.Kind.IsEntry() || h.ParentSpanID.IsZero():
			tc.entries++
		}
		a.sum.OrphanedMs += h.OrphanedMs
	}
	for _, a := range paths {
		a.sum.Requests = len(a.traces)
		for _, tc := range a.traces {
			n := tc.calls
			if n == 0 {
				n = tc.entries
			}
			a.sum.MaxCallsPerTrace = max(a.sum.MaxCallsPerTrace, n)
		}
	}
	for i := range findings {
		f := &findings[i]
		if f.TraceID != "" {
			if a := paths[f.Path]; a != nil {
				a.sum.FindingsByKind[string(f.Kind)]++
			}
			continue
		}
		for p, a := range paths {
			if p == f.Path || strings.HasSuffix(p, pathSep+f.Path) {
				a.sum.FindingsByKind[string(f.Kind)]++
			}
		}
	}
	out := make([]PathSummary, 0, len(paths))
	for _, a := range paths {
		out = append(out, a.sum)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Path < out[b].Path })
	return out
}
