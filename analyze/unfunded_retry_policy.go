package analyze

import (
	"strconv"
	"time"

	"github.com/budgetd/budgetd/schema"
)

// unfundedRetryPolicies reports logical calls whose retry policy needs more
// time than the request had left when the call began (DESIGN §5,
// unfunded_retry_policy): max_attempts·timeout + (max_attempts−1)·backoff
// > R. The policy is judged once per logical call, at its first attempt
// (the earliest one recorded, if the first is missing), because that is when
// the budget to fund all attempts was known.
//
// The policy is read from the first attempt, each missing figure taken from
// a later attempt; a missing backoff counts as zero. A policy of one attempt
// is a plain timeout, which timeout_inversion already judges.
//
// A call that propagates its budget (budget.propagated_ms recorded on an
// attempt) is not judged: it sends each attempt what is left, so every
// attempt is bounded by the remaining budget and the policy cannot overrun
// it — which is exactly what a budget-paid retry (the budget library's
// Retry) looks like, and what the fix for this finding recommends.
//
// Severity: critical when the policy needs at least twice the time left (or
// none was left); warning otherwise.
func (v *view) unfundedRetryPolicies(now time.Time, out []schema.Finding) []schema.Finding {
	for ci := range v.calls {
		lc := &v.calls[ci]
		first := lc.spans[0]
		r, ok := v.remaining(first)
		if !ok {
			continue
		}
		var maxAttempts uint32
		var timeout, backoff *float64
		propagates := false
		for _, i := range lc.spans {
			f := &v.n[i].facts
			propagates = propagates || f.PropagatedMs != nil
			if maxAttempts == 0 {
				maxAttempts = f.MaxAttempts
			}
			if timeout == nil {
				timeout = f.TimeoutMs
			}
			if backoff == nil {
				backoff = f.BackoffMs
			}
		}
		if maxAttempts < 2 || timeout == nil || propagates {
			continue
		}
		b := 0.0
		if backoff != nil {
			b = *backoff
		}
		n := float64(maxAttempts)
		required := n*(*timeout) + (n-1)*b
		if !v.overBudget(first, inferredMs{known: true, ms: required}, inferredMs{known: true, ms: r}) {
			continue
		}
		sev := schema.SeverityWarning
		if atLeastTwice(required, r) {
			sev = schema.SeverityCritical
		}
		msg := v.spanService(first) + " allows " + strconv.FormatUint(uint64(maxAttempts), 10) + " attempts of " +
			fmtMs(*timeout) + " ms on " + lc.calleeSvc + " with " + fmtMs(b) + " ms backoff, needing " +
			fmtMs(required) + " ms while " + leftText(v.rootService(first), r) +
			"; size the attempts from the remaining budget."
		out = append(out, v.spanFinding(schema.KindUnfundedRetryPolicy, first, sev, now, map[string]float64{
			"remaining_ms": r,
			"required_ms":  required,
			"max_attempts": n,
			"timeout_ms":   *timeout,
			"backoff_ms":   b,
		}, msg))
	}
	return out
}
