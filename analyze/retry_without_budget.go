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
// expected_ms is the edge's p50. Before the edge has MinEdgeSamples, the
// trace's own evidence stands in (earlierAttemptsNeed): when every earlier
// attempt of the same call timed out, the shortest of them is what an
// attempt needs at least, and a retry started with less time left cannot
// finish either (an attempt with nothing left fires without it). expected_ms
// is left out when neither is known and the attempt fires on R ≤ 0 alone.
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
		fromTrace := false
		if !known && r > 0 {
			expected, known = v.earlierAttemptsNeed(i)
			fromTrace = known
		}
		if r+v.slackMs(i) > 0 && !(known && r < expected) {
			continue
		}
		ev := map[string]float64{"remaining_ms": r, "attempt": float64(nd.attempt)}
		markInferred(ev, eff)
		sev := schema.SeverityCritical
		tail := ""
		switch {
		case fromTrace:
			ev["expected_ms"] = expected
			tail = " while every earlier attempt ran " + fmtMs(expected) + " ms or more without an answer"
		case known:
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

// earlierAttemptsNeed returns the least time an attempt of call span i's
// logical call needs, as the trace itself shows it: the shortest of the
// earlier attempts, when every one of them timed out (in any convention,
// not cancelled) and so ran for at least that long without an answer. An
// earlier attempt that failed fast, or was cancelled, says nothing about
// how long the work takes.
func (v *view) earlierAttemptsNeed(i int) (float64, bool) {
	nd := &v.n[i]
	need, any := 0.0, false
	for _, j := range v.calls[nd.call].spans {
		if j == i || v.n[j].attempt >= nd.attempt || v.n[j].start >= nd.start {
			continue
		}
		f := &v.n[j].facts
		if !f.TimedOut || f.Cancelled || len(f.Cancellations) > 0 {
			return 0, false
		}
		d := nsToMs(v.n[j].end - v.n[j].start)
		if !any || d < need {
			need, any = d, true
		}
	}
	return need, any
}
