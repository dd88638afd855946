package analyze

import (
	"math"
	"time"

	"github.com/budgetd/budgetd/schema"
)

// budgetResets reports entry spans that started with more budget than their
// caller had left, or that say they fell back to a local default while the
// caller's budget was known (DESIGN §5, budget_reset). The edge deadline
// still bounds everything below such a hop, so the extra time it believes it
// has is only ever spent after its caller has gone.
//
// The caller's side is R at the parent span's start: the CLIENT span of the
// call, or the parent itself when the call was not instrumented. A budget
// may exceed it by the skew tolerance, since R and the received budget are
// measured on different hosts. A CONSUMER span across a queue (asyncStart)
// is never compared: it starts a chain of its own, and a budget its message
// carries is the job's.
//
// Severity: critical when the received budget is at least twice what was
// left (or nothing was left); warning otherwise, and for a bare
// budget.source=default without a recorded budget.
func (v *view) budgetResets(now time.Time, out []schema.Finding) []schema.Finding {
	tolMs := v.cfg.SkewToleranceMs
	for i := range v.n {
		nd := &v.n[i]
		if nd.parent < 0 || !v.span(i).Kind.IsEntry() {
			continue
		}
		// A consumer starts a chain of its own: whatever budget its message
		// carries is the job's, not a reset of the publisher's.
		if v.asyncStart(i) {
			continue
		}
		r, ok := v.remaining(nd.parent)
		if !ok {
			continue
		}
		received := nd.facts.RemainingMs
		increased := received != nil && *received > r+tolMs+v.slackMs(nd.parent)
		if !increased && nd.facts.Source != schema.SourceDefault {
			continue
		}
		ev := map[string]float64{"remaining_ms": r}
		callerLeft := nd.callerSvc + " had " + fmtMs(r) + " ms left when it called"
		if math.Round(r) <= 0 {
			callerLeft = "the deadline had passed " + fmtMs(-r) + " ms before " + nd.callerSvc + " called"
		}
		sev := schema.SeverityWarning
		var msg string
		if received != nil {
			ev["received_ms"] = *received
			if atLeastTwice(*received, r) {
				sev = schema.SeverityCritical
			}
			msg = v.spanService(i) + " started with a " + fmtMs(*received) + " ms budget although " +
				callerLeft + "; propagate the caller's remaining budget instead of a local one."
		} else {
			// received_ms is left out: the hop said it used a default but
			// not how large, and a made-up number would mislead.
			msg = v.spanService(i) + " used a local default budget although " + callerLeft +
				"; propagate the caller's remaining budget instead."
		}
		out = append(out, v.spanFinding(schema.KindBudgetReset, i, sev, now, ev, msg))
	}
	return out
}
