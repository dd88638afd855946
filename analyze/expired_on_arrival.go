package analyze

import (
	"math"
	"time"

	"github.com/budgetd/budgetd/schema"
)

// expiredOnArrival reports SERVER/CONSUMER spans that started with no budget
// left, or after their caller had already stopped waiting, and still did the
// work instead of rejecting it (DESIGN §5, expired_on_arrival). A hop that
// set budget.rejected refused the work and is doing the right thing.
//
// remaining_ms is R at the span's start, or G − start when the span started
// after G and that is smaller (or no budget is known): how long before its
// arrival the caller had gone, as a negative figure.
//
// Severity: critical when the expired request still ran for a second or
// more; warning otherwise.
func (v *view) expiredOnArrival(now time.Time, out []schema.Finding) []schema.Finding {
	for i := range v.n {
		nd := &v.n[i]
		if !v.span(i).Kind.IsEntry() || nd.facts.Rejected {
			continue
		}
		r, ok := v.remaining(i)
		late := nd.hasGiveUp && nd.start > nd.giveUp+v.tolNs
		// A budget the span itself recorded as spent needs no clock
		// reading; R from a deadline above is a difference of two spans'
		// start times, which may disagree by the skew tolerance
		// (overBudget).
		spent := ok && r+v.slackMs(i)+nsToMs(v.tolNs) <= 0
		if own := nd.facts.RemainingMs; own != nil && *own <= 0 {
			spent = true
		}
		if !spent && !late {
			continue
		}
		when := ""
		if !ok || (late && nsToMs(nd.giveUp-nd.start) < r) {
			r = nsToMs(nd.giveUp - nd.start)
			when = " " + fmtMs(-r) + " ms after " + nd.giveUpText()
		} else if math.Round(r) < 0 {
			when = " " + fmtMs(-r) + " ms past its deadline"
		} else {
			when = " with no time left"
		}
		d := nsToMs(nd.end - nd.start)
		sev := schema.SeverityWarning
		if d >= 1000 {
			sev = schema.SeverityCritical
		}
		msg := v.spanService(i) + " started " + v.span(i).Name + when + " and still ran " +
			fmtMs(d) + " ms; reject requests whose budget is already spent."
		out = append(out, v.spanFinding(schema.KindExpiredOnArrival, i, sev, now, map[string]float64{
			"remaining_ms": r,
			"duration_ms":  d,
		}, msg))
	}
	return out
}
