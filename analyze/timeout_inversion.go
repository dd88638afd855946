package analyze

import (
	"math"
	"time"

	"github.com/budgetd/budgetd/schema"
)

// timeoutInversions reports every call attempt whose timeout is at least the
// time the request had left when the attempt started (DESIGN §5,
// timeout_inversion). Such a timeout can only ever be spent waiting for a
// result nobody upstream will read.
//
// Where the spans recorded no timeout or no budget, the inferred ones stand
// in (infer.go): the edge's estimated timeout, and what was left of the
// earliest deadline a caller's own timeout set. Such findings carry
// evidence inferred = 1 and the confidence of the weakest estimate, and an
// estimate within two histogram buckets of what was left counts as reaching
// it (inferenceSlack).
//
// Severity: critical when the timeout is at least twice what was left, or
// nothing was left at all; warning otherwise.
func (v *view) timeoutInversions(now time.Time, out []schema.Finding) []schema.Finding {
	for i := range v.n {
		nd := &v.n[i]
		if nd.call < 0 {
			continue
		}
		timeout, ok := v.callTimeout(i)
		if !ok {
			continue
		}
		r, ok := v.effectiveRemaining(i)
		if !ok {
			continue
		}
		inferred := timeout.inferred || r.inferred
		slack := 0.0
		if inferred {
			slack = inferenceSlack(timeout.ms)
		}
		if timeout.ms+slack < r.ms {
			continue
		}
		sev := schema.SeverityWarning
		if atLeastTwice(timeout.ms, r.ms) {
			sev = schema.SeverityCritical
		}
		msg := v.inversionMessage(i, timeout, r)
		ev := map[string]float64{"remaining_ms": r.ms, "timeout_ms": timeout.ms}
		markInferred(ev, timeout, r)
		out = append(out, v.spanFinding(schema.KindTimeoutInversion, i, sev, now, ev, msg))
	}
	return out
}

// inversionMessage says what a timeout_inversion is about, and which of its
// figures budgetd inferred.
func (v *view) inversionMessage(i int, timeout, r inferredMs) string {
	nd := &v.n[i]
	var msg string
	if timeout.inferred {
		msg = v.spanService(i) + " waits about " + fmtMs(timeout.ms) + " ms for " + nd.calleeSvc
	} else {
		msg = v.spanService(i) + " gave " + nd.calleeSvc + " a " + fmtMs(timeout.ms) + " ms timeout"
	}
	if r.inferred {
		if math.Round(r.ms) > 0 {
			msg += " while only " + fmtMs(r.ms) + " ms were left before a caller above stopped waiting"
		} else {
			msg += " after a caller above had stopped waiting " + fmtMs(-r.ms) + " ms before"
		}
	} else {
		msg += " while " + leftText(v.rootService(i), r.ms)
	}
	if timeout.inferred {
		msg += " (inferred from its timed-out calls)"
	}
	return msg + "; derive the timeout from the remaining budget."
}

// callTimeout returns call span i's timeout: recorded budget.timeout_ms, or
// the estimate of its edge.
func (v *view) callTimeout(i int) (inferredMs, bool) {
	nd := &v.n[i]
	if t := nd.facts.TimeoutMs; t != nil {
		return inferredMs{known: true, ms: *t, conf: 1}, true
	}
	return nd.timeout, nd.timeout.known
}

// rootService names the service at the top of span i's request, the one
// whose budget the request is spending.
func (v *view) rootService(i int) string {
	top := v.n[i].top
	if !v.isRoot(top) {
		return "the request"
	}
	return v.spanService(top)
}
