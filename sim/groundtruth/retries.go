package groundtruth

import (
	"fmt"
	"strings"
	"time"

	"github.com/budgetd/budgetd/schema"
)

// UnfundedRetryPolicies adds unfunded_retry_policy for every logical call
// whose recorded retry policy needs more than R at its first attempt:
// MaxAttempts·timeout + (MaxAttempts−1)·Backoff > R (DESIGN §5). It needs
// the policy in the attributes, so a stripped run expects none.
func (b *Builder) UnfundedRetryPolicies() {
	if b.t.Stripped {
		return
	}
	for _, g := range b.logicalCalls() {
		c := b.log.Calls[g[0]]
		if c.Attempt != 1 || c.MaxAttempts < 2 || c.OwnTimeout <= 0 {
			continue
		}
		d, ok := b.Deadline(c.Trace, c.Parent, !b.t.Stripped)
		if !ok {
			continue
		}
		n := time.Duration(c.MaxAttempts)
		required := n*c.OwnTimeout + (n-1)*c.Backoff
		b.Add(JudgeOver(required-d.Sub(c.Start), b.reachesBudget(c, required, true)), Expect{Kind: schema.KindUnfundedRetryPolicy, TraceID: c.Trace, Service: c.Caller, Callee: c.Callee})
	}
}

// RetriesWithoutBudget adds retry_without_budget for every attempt after the
// first that started with nothing left, or with less left than a call of
// its edge needs (DESIGN §5). What a call needs is the edge's median
// latency once the edge has MinEdgeSamples latency samples, or the trace's
// own evidence: every earlier attempt of the call timed out, so the
// shortest of them is the least an attempt needs. budgetd uses the median
// when the edge's statistics have enough samples by the time it analyses
// the trace, and the trace's evidence before that; an attempt the two judge
// differently is Ambiguous. The median is known only to a band
// (edgeLatency.medianBand), and one within 10 % or ClearMargin of R is too
// close to call.
//
// Without attributes R is known only where the deadline that sets it can
// be inferred (its timer fired often enough); elsewhere a real case is
// Ambiguous.
func (b *Builder) RetriesWithoutBudget() {
	lat := b.edgeLatencies()
	fires := b.timerFires()
	for _, g := range b.logicalCalls() {
		for k, ci := range g {
			c := b.log.Calls[ci]
			if c.Attempt < 2 {
				continue
			}
			d, ok := b.Deadline(c.Trace, c.Parent, !b.t.Stripped)
			if !ok {
				continue
			}
			r := d.Sub(c.Start)
			e := Expect{Kind: schema.KindRetryWithoutBudget, TraceID: c.Trace, Service: c.Caller, Callee: c.Callee}
			var v Verdict
			why := ""
			switch {
			case r <= -ClearMargin:
				v = Yes
			case r < ClearMargin:
				v = Unsure
			default:
				fromTrace, need := b.earlierAttemptsNeed(g[:k])
				why = fmt.Sprintf(", earlier attempts need %v", need)
				if lo, hi, ok := lat[[2]string{c.Caller, c.Callee}].medianBand(); ok {
					v = agree(needsBand(lo, hi, r), fromTrace(r))
					why += fmt.Sprintf(", edge median %v to %v", lo, hi)
				} else {
					v = fromTrace(r)
				}
			}
			if v == Yes && b.t.Stripped && !b.deadlineObservable(c, fires) && !b.edgeDeadlineObservable() {
				v = Unsure
			}
			b.AddNoted(v, e, fmt.Sprintf("attempt %d with R %v%s", c.Attempt, r, why))
		}
	}
}

// needsBand judges whether an attempt that needs somewhere from lo to hi
// can finish with r left: Yes only when it cannot for any of them, No only
// when it can for all.
func needsBand(lo, hi, r time.Duration) Verdict {
	return agree(needs(lo, r), needs(hi, r))
}

// needs judges whether an attempt that needs need can finish with r left.
// The margin is wide (10 % of need): budgetd's median is a sketch over the
// samples it holds when it analyses the trace, not over the whole run.
func needs(need, r time.Duration) Verdict {
	margin := max(ClearMargin, need/10)
	switch {
	case need-r >= margin:
		return Yes
	case r-need >= margin:
		return No
	}
	return Unsure
}

// agree combines two judgements of one case: their verdict when they agree,
// otherwise Unsure.
func agree(a, b Verdict) Verdict {
	if a == b {
		return a
	}
	return Unsure
}

// earlierAttemptsNeed returns the verdict the trace's own evidence gives an
// attempt after the attempts earlier: when every one of them timed out, an
// attempt needs at least the shortest of them; otherwise the trace says
// nothing and budgetd does not fire on it.
func (b *Builder) earlierAttemptsNeed(earlier []int) (func(r time.Duration) Verdict, time.Duration) {
	never := func(time.Duration) Verdict { return No }
	var need time.Duration
	for i, ci := range earlier {
		c := b.log.Calls[ci]
		if !c.TimedOut {
			return never, 0
		}
		if d := c.End.Sub(c.Start); i == 0 || d < need {
			need = d
		}
	}
	if len(earlier) == 0 {
		return never, 0
	}
	return func(r time.Duration) Verdict { return needs(need, r) }, need
}

// edgeDeadlineObservable reports whether budgetd can infer the edge's own
// deadline without attributes: the calls from the edge timed out at least
// MinSamples times.
func (b *Builder) edgeDeadlineObservable() bool {
	n := 0
	for _, c := range b.log.Calls {
		if c.Parent < 0 && c.TimedOut {
			n++
		}
	}
	return n >= MinSamples
}

// RetryAmplification adds retry_amplification per trace and leaf path: the
// calls that reached the same leaf edge the same way, when retries
// multiplied at two or more levels of the path, or at one level and the
// calls reach RetryAmplificationThreshold times the calls the path would
// have had without any retry (DESIGN §5). A leaf call is one whose callee
// made no call. The counts are exact, so no case is Ambiguous.
func (b *Builder) RetryAmplification() {
	calledBelow := make([]bool, len(b.log.Calls))
	for _, c := range b.log.Calls {
		if c.Parent >= 0 {
			if up := b.log.Invs[c.Parent].Call; up >= 0 {
				calledBelow[up] = true
			}
		}
	}
	type group struct {
		trace, caller, callee string
		calls, firstTries     int
		retried               map[int]bool // depths of the steps whose logical call was attempted more than once
	}
	attempts := map[int]int{} // per logical call
	for _, c := range b.log.Calls {
		if c.Logical >= 0 {
			attempts[c.Logical]++
		}
	}
	groups := map[string]*group{}
	var order []string
	for i, c := range b.log.Calls {
		if calledBelow[i] {
			continue
		}
		path, steps := b.pathOf(i)
		key := c.Trace + " " + path
		g := groups[key]
		if g == nil {
			g = &group{trace: c.Trace, caller: c.Caller, callee: c.Callee, retried: map[int]bool{}}
			groups[key] = g
			order = append(order, key)
		}
		g.calls++
		first := true
		for depth, s := range steps {
			if s.Attempt > 1 {
				first = false
			}
			if s.Logical >= 0 && attempts[s.Logical] > 1 {
				g.retried[depth] = true
			}
		}
		if first {
			g.firstTries++
		}
	}
	for _, key := range order {
		g := groups[key]
		levels := len(g.retried)
		v := No
		if g.calls >= 2 && (levels >= 2 || (levels == 1 && g.calls >= RetryAmplificationThreshold*max(g.firstTries, 1))) {
			v = Yes
		}
		b.Add(v, Expect{Kind: schema.KindRetryAmplification, TraceID: g.trace, Service: g.caller, Callee: g.callee})
	}
}

// pathOf returns call i's path of services from the edge down, and its
// calls, the edge's first.
func (b *Builder) pathOf(i int) (string, []*Call) {
	var steps []*Call
	for ci := i; ci >= 0; {
		c := b.log.Calls[ci]
		steps = append(steps, c)
		if c.Parent < 0 {
			break
		}
		ci = b.log.Invs[c.Parent].Call
	}
	names := make([]string, 0, len(steps)+1)
	for k := len(steps) - 1; k >= 0; k-- {
		if k == len(steps)-1 {
			names = append(names, steps[k].Caller)
		}
		names = append(names, steps[k].Callee)
	}
	for l, r := 0, len(steps)-1; l < r; l, r = l+1, r-1 {
		steps[l], steps[r] = steps[r], steps[l]
	}
	return strings.Join(names, ">"), steps
}
