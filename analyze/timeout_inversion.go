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
// evidence inferred = 1 and the confidence of the weakest estimate. A call
// whose estimated timeout reaches its caller's own (reachesCallerTimeout)
// is an inversion too.
//
// Where each clock started is allowed for (docs/attributes.md §3b): the
// budget that bounds the call may have been read up to clockSlack after its
// span began, and every hop below that received it as a relative figure
// restarted it on arrival. The call is an inversion only when it is one for
// every such instant, and by more than the skew tolerance, since R is a
// difference of two spans' clock readings — unless the timeout reaches a
// budget recorded at or above the call, which needs no clock (overBudget).
// A recorded timeout counts from the CLIENT span's start.
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
		// A call that carries the budget itself (the edge client) sets
		// the deadline with its timeout: the two are one clock.
		if own := nd.facts.RemainingMs; own != nil && !timeout.inferred && timeout.ms <= *own && r.ms >= *own {
			continue
		}
		over := v.overBudget(i, timeout, r)
		reachesCaller := !over && v.reachesCallerTimeout(i, timeout)
		if !over && !reachesCaller {
			continue
		}
		sev := schema.SeverityWarning
		if atLeastTwice(timeout.ms, r.ms) {
			sev = schema.SeverityCritical
		}
		msg := v.inversionMessage(i, timeout, r)
		ev := map[string]float64{"remaining_ms": r.ms, "timeout_ms": timeout.ms}
		if reachesCaller {
			ev["caller_timeout_ms"] = v.n[v.n[nd.entry].parent].timeout.ms
		}
		markInferred(ev, timeout, r)
		out = append(out, v.spanFinding(schema.KindTimeoutInversion, i, sev, now, ev, msg))
	}
	return out
}

// reachesCallerTimeout reports whether call i's timeout, when either it or
// the timeout of the call that reached i's service was inferred, is at
// least that caller's timeout, give or take one histogram bucket: two hops
// configured with the same timeout get estimates a bucket apart when their
// timers fire on either side of a bucket edge, and then the elapsed time
// alone would hide the inversion. Margins below a bucket (0.2 %) are not
// told apart from equal timeouts.
func (v *view) reachesCallerTimeout(i int, timeout inferredMs) bool {
	in := v.n[v.n[i].entry].parent
	if in < 0 || !v.n[in].timeout.known {
		return false
	}
	callerTimeout := v.n[in].timeout
	if !timeout.inferred && !callerTimeout.inferred {
		return false
	}
	// Adjacent buckets are exactly one bucket ratio apart; half a bucket
	// more keeps rounding from deciding.
	return timeout.ms >= callerTimeout.ms/math.Exp(1.5*waitLnGamma)
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
