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
//
// An edge whose caller recorded no timeout is judged on its inferred timeout
// (EdgeStats.InferredTimeout) when that is usable under cfg.Infer, or else
// on how long the caller waited when a deadline above it ended its calls
// (EdgeStats.DeadlineWait: a caller without a timeout of its own is as
// patient as its deadline); the finding then carries evidence inferred = 1
// and the estimate's confidence. Callees that stop at that same deadline
// are no latency samples (stoppedAtDeadline), so the recommended design,
// where every hop spends one deadline, is not flagged.
func LatencyInversions(edges []EdgeStats, cfg Config, now time.Time) []schema.Finding {
	var out []schema.Finding
	for _, e := range edges {
		if e.LatencySamples < uint64(max(cfg.MinEdgeSamples, 1)) || e.P99Ms == nil {
			continue
		}
		var timeout inferredMs
		switch {
		case e.TimeoutMs != nil:
			timeout = inferredMs{known: true, ms: *e.TimeoutMs, conf: 1}
		case e.InferredTimeout != nil && e.InferredTimeout.usable(cfg.Infer):
			timeout = inferredMs{known: true, ms: e.InferredTimeout.Ms, conf: e.InferredTimeout.Confidence, inferred: true}
		case e.DeadlineWait != nil && e.DeadlineWait.usable(cfg.Infer):
			timeout = inferredMs{known: true, ms: e.DeadlineWait.Ms, conf: e.DeadlineWait.Confidence, inferred: true}
		default:
			continue
		}
		p99 := *e.P99Ms
		if p99 < timeout.ms {
			continue
		}
		sev := schema.SeverityWarning
		if e.P50Ms != nil && *e.P50Ms >= timeout.ms {
			sev = schema.SeverityCritical
		}
		msg := e.CalleeService + " answers " + e.CallerService + " in " + fmtMs(p99) +
			" ms at p99 but " + e.CallerService + " waits " + waitText(timeout) + " over " +
			strconv.FormatUint(e.LatencySamples, 10) + " calls; raise the caller's budget or make the callee faster."
		ev := map[string]float64{"timeout_ms": timeout.ms, "p99_ms": p99, "samples": float64(e.LatencySamples)}
		markInferred(ev, timeout)
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
			Evidence:      ev,
			Message:       msg,
		})
	}
	return out
}

// waitText says how long a caller waits: "a median 500 ms" when recorded,
// "about 500 ms (inferred)" when estimated.
func waitText(t inferredMs) string {
	if t.inferred {
		return "about " + fmtMs(t.ms) + " ms (inferred from timed-out calls)"
	}
	return "a median " + fmtMs(t.ms) + " ms"
}
