package analyze

import (
	"time"

	"github.com/budgetd/budgetd/schema"
)

// timeoutInversions reports every call attempt whose timeout is at least the
// time the request had left when the attempt started (DESIGN §5,
// timeout_inversion). Such a timeout can only ever be spent waiting for a
// result nobody upstream will read.
//
// Severity: critical when the timeout is at least twice what was left, or
// nothing was left at all; warning otherwise.
func (v *view) timeoutInversions(now time.Time, out []schema.Finding) []schema.Finding {
	for i := range v.n {
		nd := &v.n[i]
		if nd.call < 0 || nd.facts.TimeoutMs == nil {
			continue
		}
		r, ok := v.remaining(i)
		if !ok {
			continue
		}
		timeout := *nd.facts.TimeoutMs
		if timeout < r {
			continue
		}
		sev := schema.SeverityWarning
		if atLeastTwice(timeout, r) {
			sev = schema.SeverityCritical
		}
		msg := v.spanService(i) + " gave " + nd.calleeSvc + " a " + fmtMs(timeout) +
			" ms timeout while " + leftText(v.rootService(i), r) +
			"; derive the timeout from the remaining budget."
		out = append(out, v.spanFinding(schema.KindTimeoutInversion, i, sev, now, map[string]float64{
			"remaining_ms": r,
			"timeout_ms":   timeout,
		}, msg))
	}
	return out
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
