package analyze

import (
	"strconv"
	"time"

	"github.com/budgetd/budgetd/schema"
)

// LatencyInversions returns a latency_inversion finding for every edge whose
// callee p99 latency is at least the caller's median timeout, among edges
// with at least minSamples latency samples and a known timeout (DESIGN §5).
// On such an edge the caller gives up on the callee's slow requests every
// time, while the callee finishes them anyway.
//
// The findings have no trace or span; their path is "caller:op > callee:op"
// and their id depends on the edge alone, so that re-evaluating a window
// replaces the edge's previous finding. Severity: critical when even the
// callee's median is at least the timeout (most calls time out); warning
// otherwise.
func LatencyInversions(edges []EdgeStats, minSamples int, now time.Time) []schema.Finding {
	var out []schema.Finding
	for _, e := range edges {
		if e.LatencySamples < uint64(max(minSamples, 1)) || e.TimeoutMs == nil || e.P99Ms == nil {
			continue
		}
		timeout, p99 := *e.TimeoutMs, *e.P99Ms
		if p99 < timeout {
			continue
		}
		sev := schema.SeverityWarning
		if e.P50Ms != nil && *e.P50Ms >= timeout {
			sev = schema.SeverityCritical
		}
		msg := e.CalleeService + " answers " + e.CallerService + " in " + fmtMs(p99) +
			" ms at p99 but " + e.CallerService + " waits a median " + fmtMs(timeout) + " ms over " +
			strconv.FormatUint(e.LatencySamples, 10) + " calls; raise the caller's budget or make the callee faster."
		out = append(out, schema.Finding{
			ID:            FindingID(schema.KindLatencyInversion, "", "", e.CallerService, e.CallerOperation, e.CalleeService, e.CalleeOperation),
			Kind:          schema.KindLatencyInversion,
			Severity:      sev,
			Service:       e.CallerService,
			Operation:     e.CallerOperation,
			CallerService: e.CallerService,
			CalleeService: e.CalleeService,
			Path:          e.CallerService + ":" + e.CallerOperation + pathSep + e.CalleeService + ":" + e.CalleeOperation,
			DetectedAt:    now,
			Evidence: map[string]float64{
				"timeout_ms": timeout,
				"p99_ms":     p99,
				"samples":    float64(e.LatencySamples),
			},
			Message: msg,
		})
	}
	return out
}
