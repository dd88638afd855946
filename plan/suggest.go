package plan

import (
	"time"
)

// Suggestion is a split of the client's budget that holds, as far as one
// exists: allowances as planned when they fit, otherwise scaled down
// together; fewer attempts where even allowances of zero do not fit; and
// per-attempt timeouts equal to the budgets that split gives.
type Suggestion struct {
	// Scale is the factor applied to every hop's own work, transit and
	// slack: 1 when the chain fits as planned.
	Scale float64
	// FewerAttempts is set when retry policies had to be cut; Hops holds
	// the attempts that fit.
	FewerAttempts bool
	// MinBudget is the smallest client budget, in whole milliseconds, that
	// holds with the allowances as planned.
	MinBudget time.Duration
	// Hops is the suggested chain: allowances after scaling and Timeout set
	// to each hop's per-attempt budget. It is empty when no split holds.
	Hops []Hop
	// Plan is the check of the suggested chain.
	Plan Plan
}

// Suggest proposes a split of c's budget that holds. Allowances are scaled
// down together when the chain does not fit as planned. When even
// allowances of zero would not fit, the retry policies are the cause (each
// attempt divides the budget of every hop below it), so attempts are cut one
// at a time, always at the hop with the most of them and, among equals, the
// one nearest the client, until the chain fits with its allowances as
// planned or no retry is left. Observed p50s and backoffs stay as given; a
// chain that does not fit with one attempt per hop and no allowances has no
// split (Scale 0, no Hops), and MinBudget says what it would take.
func Suggest(c Chain) Suggestion {
	s := Suggestion{MinBudget: minBudget(c)}
	c = Chain{Budget: c.Budget, Hops: append([]Hop(nil), c.Hops...)}
	if !fits(scaled(c, 0)) {
		for !fits(scaled(c, 1)) {
			most := -1
			for i, h := range c.Hops {
				if h.attempts() > 1 && (most < 0 || h.attempts() > c.Hops[most].attempts()) {
					most = i
				}
			}
			if most < 0 {
				break
			}
			c.Hops[most].Attempts = c.Hops[most].attempts() - 1
			s.FewerAttempts = true
		}
		if !fits(scaled(c, 0)) {
			s.FewerAttempts = false
			return s
		}
	}
	lo, hi := 0.0, 1.0
	if fits(scaled(c, 1)) {
		lo = 1
	} else {
		// Allowances only ever take budget from the hops below them, so
		// fitting is monotone in the scale and a bisection finds the largest
		// one, to well under a millisecond of any allowance.
		for range 40 {
			mid := (lo + hi) / 2
			if fits(scaled(c, mid)) {
				lo = mid
			} else {
				hi = mid
			}
		}
	}
	sc := scaled(c, lo)
	first := Check(sc)
	for i := range sc.Hops {
		sc.Hops[i].Timeout = first.Rows[i].PerAttempt
	}
	s.Scale, s.Hops, s.Plan = lo, sc.Hops, Check(sc)
	return s
}

// fits reports whether the chain's arithmetic holds, leaving configured
// timeouts aside (the suggestion replaces them) and zero-allowance hops too
// (no split can change those).
func fits(c Chain) bool {
	for _, v := range Check(c).Violations {
		switch v.Kind {
		case KindNonPositiveBudget, KindUnfundedRetryPolicy, KindBelowP50:
			return false
		}
	}
	return true
}

// scaled returns c without configured timeouts and with every allowance
// multiplied by f, truncated to whole milliseconds.
func scaled(c Chain, f float64) Chain {
	out := Chain{Budget: c.Budget, Hops: make([]Hop, len(c.Hops))}
	mul := func(d time.Duration) time.Duration {
		if f == 1 {
			return d
		}
		return time.Duration(float64(d) * f).Truncate(time.Millisecond)
	}
	for i, h := range c.Hops {
		h.Timeout = 0
		h.OwnWork, h.Transit, h.Slack = mul(h.OwnWork), mul(h.Transit), mul(h.Slack)
		out.Hops[i] = h
	}
	return out
}

// minBudget finds the smallest whole-millisecond client budget with which
// the allowances as planned fit; 0 when even MaxDuration does not.
func minBudget(c Chain) time.Duration {
	try := func(b time.Duration) bool {
		t := scaled(c, 1)
		t.Budget = b
		return fits(t)
	}
	hi := time.Millisecond
	for !try(hi) {
		if hi >= MaxDuration {
			return 0
		}
		hi = min(hi*2, MaxDuration)
	}
	lo := time.Duration(0) // does not fit: a zero budget never does
	for hi-lo > time.Millisecond {
		mid := (lo + (hi-lo)/2).Truncate(time.Millisecond)
		if mid <= lo {
			mid = lo + time.Millisecond
		}
		if try(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}
