package analyze

import (
	"math"
	"strconv"
	"time"

	"github.com/budgetd/budgetd/schema"
)

// p50Func returns the edge's median latency in ms once the edge has enough
// samples to trust it (Config.MinEdgeSamples).
type p50Func func(k edgeKey) (float64, bool)

// retriesWithoutBudget reports retry attempts (attempt > 1) that started with
// no time left, or with less time than the callee's median latency on this
// edge (DESIGN §5, retry_without_budget): an attempt that cannot finish only
// adds load to a callee that is already failing.
//
// expected_ms is the edge's p50; it is left out when the edge has too few
// samples and the attempt fires on R ≤ 0 alone.
//
// Severity: critical when nothing was left; warning when some time was left
// but less than the median call takes.
func (v *view) retriesWithoutBudget(now time.Time, p50 p50Func, out []schema.Finding) []schema.Finding {
	for i := range v.n {
		nd := &v.n[i]
		if nd.call < 0 || nd.attempt < 2 {
			continue
		}
		eff, ok := v.effectiveRemaining(i)
		if !ok {
			continue
		}
		r := eff.ms
		expected, known := 0.0, false
		if p50 != nil {
			expected, known = p50(edgeKey{nd.callerSvc, nd.callerOp, nd.calleeSvc, nd.calleeOp})
		}
		if r > 0 && !(known && r < expected) {
			continue
		}
		ev := map[string]float64{"remaining_ms": r, "attempt": float64(nd.attempt)}
		markInferred(ev, eff)
		sev := schema.SeverityCritical
		tail := ""
		if known {
			ev["expected_ms"] = expected
			tail = " while a call typically takes " + fmtMs(expected) + " ms"
		}
		if r > 0 {
			sev = schema.SeverityWarning
		}
		when := " with " + fmtMs(r) + " ms left"
		if math.Round(r) <= 0 {
			when = " " + fmtMs(-r) + " ms after the deadline"
		}
		msg := v.spanService(i) + " started attempt " + strconv.FormatUint(uint64(nd.attempt), 10) + " on " +
			nd.calleeSvc + when + tail + "; check the remaining budget before retrying."
		out = append(out, v.spanFinding(schema.KindRetryWithoutBudget, i, sev, now, ev, msg))
	}
	return out
}
