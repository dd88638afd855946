package analyze

import (
	"time"

	"github.com/budgetd/budgetd/schema"
)

// orphanedWork reports SERVER/CONSUMER spans that kept running after G, the
// earliest instant a caller on their ancestor chain stopped waiting (DESIGN
// §5, orphaned_work): a CLIENT ancestor's end, the root deadline, or a
// budget.cancelled event. The amount is S.end − max(S.start, G), already
// computed (and the skew tolerance applied) when the view was built.
//
// Severity: critical from one second of orphaned work, warning from 100 ms,
// info below.
func (v *view) orphanedWork(now time.Time, out []schema.Finding) []schema.Finding {
	for i := range v.n {
		nd := &v.n[i]
		if nd.orphanNs <= 0 {
			continue
		}
		ms := nsToMs(nd.orphanNs)
		sev := schema.SeverityInfo
		switch {
		case ms >= 1000:
			sev = schema.SeverityCritical
		case ms >= 100:
			sev = schema.SeverityWarning
		}
		msg := v.spanService(i) + " kept working " + fmtMs(ms) + " ms after " + nd.giveUpText() +
			"; propagate cancellation and stop work whose caller has gone."
		ev := map[string]float64{"orphaned_ms": ms}
		if nd.giveUpInf > 0 {
			// G is the entry point's estimated deadline.
			markInferred(ev, inferredMs{inferred: true, conf: nd.giveUpInf})
		}
		out = append(out, v.spanFinding(schema.KindOrphanedWork, i, sev, now, ev, msg))
	}
	return out
}

// giveUpText says who stopped waiting, for messages.
func (nd *node) giveUpText() string {
	switch nd.giveUpWhy {
	case giveUpClient:
		return nd.giveUpBy + " stopped waiting"
	case giveUpDeadline:
		if nd.giveUpInf > 0 {
			return "the request's inferred deadline passed"
		}
		return "the request's deadline passed"
	case giveUpCancel:
		if nd.giveUpBy != "" {
			return "the request was cancelled (" + nd.giveUpBy + ")"
		}
		return "the request was cancelled"
	}
	return "its caller stopped waiting"
}
