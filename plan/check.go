package plan

import (
	"fmt"
	"time"
)

// Kind names a way a plan can fail.
type Kind string

// The violation kinds. The first and third share their names with the
// runtime detectors (DESIGN §5) because they are the same rule applied to
// planned instead of observed figures.
const (
	// KindTimeoutInversion: a per-attempt timeout above the budget the hop
	// receives, so the caller may wait past its own deadline.
	KindTimeoutInversion Kind = "timeout_inversion"
	// KindNotDecreasing: a configured timeout not below the one above it (or
	// the client's budget), or a hop that passes down all it received.
	KindNotDecreasing Kind = "not_decreasing"
	// KindUnfundedRetryPolicy: attempts × timeout plus the backoffs need more
	// than the budget, or the backoffs alone use it up.
	KindUnfundedRetryPolicy Kind = "unfunded_retry_policy"
	// KindNonPositiveBudget: a hop receives or passes down no time at all.
	// Reported where it first happens; every hop below has none either.
	KindNonPositiveBudget Kind = "non_positive_budget"
	// KindBelowP50: an attempt gets less time than the hop's observed median
	// latency, so most attempts time out.
	KindBelowP50 Kind = "budget_below_p50"
)

// Violation is one way the plan does not hold, at one hop.
type Violation struct {
	Kind Kind
	// Hop is the hop's name and Index its position in the chain.
	Hop   string
	Index int
	// Message is one sentence with the numbers.
	Message string
	// Evidence holds the figures behind the message, in milliseconds
	// (attempts as a count).
	Evidence map[string]float64
}

// Row is one hop with the budgets the plan gives it.
type Row struct {
	Hop
	// Entry is the budget the hop receives for the call into it.
	Entry time.Duration
	// PerAttempt is each attempt's share of Entry; Entry itself for a
	// single attempt.
	PerAttempt time.Duration
	// PassedDown is what is left of an attempt after own work, transit and
	// slack: the next hop's Entry.
	PassedDown time.Duration
}

// Retries reports whether the hop is called more than once.
func (r Row) Retries() bool { return r.attempts() > 1 }

// Plan is the result of checking a Chain.
type Plan struct {
	Budget     time.Duration
	Rows       []Row
	Violations []Violation
	Notes      []string
	// Suggestion is set by callers that want a split printed with the plan.
	Suggestion *Suggestion
}

// Holds reports whether the plan has no violation.
func (p Plan) Holds() bool { return len(p.Violations) == 0 }

// Budgets returns the chain of budgets from the client down: each hop's
// entry budget, each attempt's share where a hop is retried, and the last
// hop's remainder when it spends anything. A plan that holds has a strictly
// decreasing sequence.
func (p Plan) Budgets() []time.Duration {
	var out []time.Duration
	for i, r := range p.Rows {
		out = append(out, r.Entry)
		if r.Retries() {
			out = append(out, r.PerAttempt)
		}
		if i == len(p.Rows)-1 && r.allowance() > 0 {
			out = append(out, r.PassedDown)
		}
	}
	return out
}

// Check does the arithmetic for c and reports every violation. It does not
// validate c: call Validate (Load and Parse do) first.
func Check(c Chain) Plan {
	p := Plan{Budget: c.Budget, Notes: append([]string(nil), c.Notes...)}
	entry := c.Budget
	// above is the nearest configured timeout above the current hop, or the
	// client's budget, which configured timeouts must stay strictly below.
	above, aboveWhat := c.Budget, "the client's budget of "+fmtMs(c.Budget)
	exhausted := false // a non-positive budget was reported; do not repeat it for every hop below
	for i, h := range c.Hops {
		n := h.attempts()
		r := Row{Hop: h, Entry: entry, PerAttempt: entry}
		if n > 1 {
			r.PerAttempt = ((entry - h.Backoff*time.Duration(n-1)) / time.Duration(n)).Truncate(time.Millisecond)
		}
		r.PassedDown = r.PerAttempt - h.allowance()
		last := i == len(c.Hops)-1
		add := func(kind Kind, ev map[string]float64, format string, args ...any) {
			p.Violations = append(p.Violations, Violation{
				Kind: kind, Hop: h.Name, Index: i, Message: fmt.Sprintf(format, args...), Evidence: ev,
			})
		}

		// Below a budget already reported as used up, every timeout exceeds
		// what is left; saying so hop after hop adds nothing.
		wasExhausted := exhausted
		if h.Timeout > 0 {
			if i > 0 && h.Timeout >= above {
				add(KindNotDecreasing, map[string]float64{"timeout_ms": ms(h.Timeout), "upstream_ms": ms(above)},
					"%s is called with a %s timeout, not below %s", h.Name, fmtMs(h.Timeout), aboveWhat)
			}
			if !wasExhausted && h.Timeout > entry {
				add(KindTimeoutInversion, map[string]float64{"timeout_ms": ms(h.Timeout), "budget_ms": ms(entry)},
					"%s is called with a %s timeout per attempt but receives only %s", h.Name, fmtMs(h.Timeout), fmtMs(entry))
			}
			if need := h.Timeout*time.Duration(n) + h.Backoff*time.Duration(n-1); !wasExhausted && n > 1 && need > entry {
				add(KindUnfundedRetryPolicy, map[string]float64{
					"budget_ms": ms(entry), "required_ms": ms(need), "attempts": float64(n),
					"timeout_ms": ms(h.Timeout), "backoff_ms": ms(h.Backoff),
				}, "%d attempts of %s%s on %s need %s but it receives %s",
					n, fmtMs(h.Timeout), withBackoff(h.Backoff), h.Name, fmtMs(need), fmtMs(entry))
			}
			above, aboveWhat = h.Timeout, "the "+fmtMs(h.Timeout)+" timeout on "+h.Name
		}

		if !exhausted {
			switch {
			case entry <= 0:
				exhausted = true
				add(KindNonPositiveBudget, map[string]float64{"budget_ms": ms(entry)},
					"%s receives %s: nothing is left of the budget, so neither it nor any hop below it can run", h.Name, fmtMs(entry))
			case r.PerAttempt <= 0:
				exhausted = true
				add(KindUnfundedRetryPolicy, map[string]float64{
					"budget_ms": ms(entry), "required_ms": ms(h.Backoff * time.Duration(n-1)), "attempts": float64(n),
					"backoff_ms": ms(h.Backoff),
				}, "the %d backoffs of %s on %s use up the %s it receives, leaving nothing for its %d attempts",
					n-1, fmtMs(h.Backoff), h.Name, fmtMs(entry), n)
			case r.PassedDown <= 0 && (!last || h.allowance() > 0):
				exhausted = true
				add(KindNonPositiveBudget, map[string]float64{
					"budget_ms": ms(r.PerAttempt), "passed_down_ms": ms(r.PassedDown),
					"own_work_ms": ms(h.OwnWork), "transit_ms": ms(h.Transit), "slack_ms": ms(h.Slack),
				}, "%s has %s left after %s own work and %s transit and slack out of %s%s",
					h.Name, fmtMs(r.PassedDown), fmtMs(h.OwnWork), fmtMs(h.Transit+h.Slack), fmtMs(r.PerAttempt), perAttemptWord(n))
			}
		}
		if !wasExhausted && r.PerAttempt > 0 && h.P50 > 0 {
			got, by := r.PerAttempt, "budget"
			if h.Timeout > 0 && h.Timeout < got {
				got, by = h.Timeout, "timeout"
			}
			if got < h.P50 {
				add(KindBelowP50, map[string]float64{"per_attempt_ms": ms(got), "p50_ms": ms(h.P50)},
					"each attempt on %s gets a %s %s, below its observed p50 of %s, so most attempts time out",
					h.Name, fmtMs(got), by, fmtMs(h.P50))
			}
		}
		if !last && h.allowance() == 0 && r.PerAttempt > 0 {
			add(KindNotDecreasing, map[string]float64{"budget_ms": ms(r.PerAttempt), "passed_down_ms": ms(r.PassedDown)},
				"%s passes down all %s it has: plan its own work, transit or slack", h.Name, fmtMs(r.PerAttempt))
		}
		p.Rows = append(p.Rows, r)
		entry = r.PassedDown
	}
	return p
}

func withBackoff(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return " with " + fmtMs(d) + " backoff"
}

func perAttemptWord(n int) string {
	if n > 1 {
		return " per attempt"
	}
	return ""
}

// ms converts a duration to (possibly fractional) milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
