package groundtruth

import (
	"fmt"
	"sort"
	"time"

	"github.com/budgetd/budgetd/schema"
)

// The margins of the ground truth (see the package comment).
//
// budgetd ignores overruns up to its skew tolerance (5 ms) and measures them
// between span ends; the truth measures between in-process instants. An
// invocation's end is taken where its instrumentation ends its span, but a
// caller's give-up is noted when its call returns, and on a loaded machine
// the two clocks' readings of one case differ by a millisecond or two. So
// NoiseMargin sits below the tolerance by that much: a case of 3 to 5 ms in
// process may be 5.0x ms in its spans, and whether budgetd reports it is a
// coin flip the truth does not score.
//
// A timeout or a retry policy is compared with the time left (R) two ways
// (JudgeOver): exactly, when it reaches the request's whole budget, which
// needs no clock reading, and otherwise with the skew tolerance, since R is
// a difference of clock readings. A case counts from ExactMargin past R in
// the first way and from ClearMargin in the second; one at least
// NoiseMargin on the good side is clearly fine.
//
// Every instant is the wall clock's, the clock the spans' start times are
// read from (Builder strips the monotonic readings): time synchronisation
// steps it, on this machine by a millisecond every few hundred under load,
// while the spans' durations (and the in-process timers) follow the
// monotonic clock. budgetd can only see the spans, so the truth judges the
// instants the spans record.
const (
	ClearMargin = 20 * time.Millisecond
	NoiseMargin = 3 * time.Millisecond
	ExactMargin = time.Millisecond
	// MinSamples is how many timed-out calls an edge needs before budgetd
	// can infer its timeout (analyze.infer.min_samples).
	MinSamples = 5
	// MinEdgeSamples is how many calls an edge needs before its latency
	// quantiles count (analyze.min_edge_samples).
	MinEdgeSamples = 20
	// RetryAmplificationThreshold is analyze.retry_amplification_threshold's
	// default.
	RetryAmplificationThreshold = 3
)

// Expect is one finding the truth says budgetd should report. Callee is the
// callee service for kinds reported on a call (timeout_inversion,
// unfunded_retry_policy, retry_without_budget, retry_amplification,
// latency_inversion) and "" for kinds reported on an entry span
// (orphaned_work, expired_on_arrival, budget_reset). TraceID is "" for
// latency_inversion, which is judged per edge.
type Expect struct {
	Kind    schema.Kind
	TraceID string
	Service string
	Callee  string
}

// Truth is what really happened in one scenario run.
type Truth struct {
	Scenario string
	Stripped bool
	Requests int
	// Expected are the problems that really happened, measured in process,
	// and that budgetd can see in the spans of this run (a stripped run
	// expects only what DESIGN §5 says is visible without attributes).
	Expected []Expect
	// Ambiguous are borderline cases (within the margins of a threshold) and
	// cases budgetd may or may not be able to see; they are not scored.
	Ambiguous []Expect
	// Notes say what the truth measured of a case (the first instance of
	// each; a clean one only where no instance was expected or ambiguous),
	// to read next to a miss or a false finding.
	Notes map[Expect]string
}

// Clean reports whether the truth expects no finding at all.
func (t Truth) Clean() bool { return len(t.Expected) == 0 }

// Verdict is the truth about one case.
type Verdict int

const (
	No Verdict = iota
	Yes
	Unsure
)

// Judge classifies an overrun d of a threshold budgetd applies with its
// skew tolerance (orphaned work, a late start): real from ClearMargin,
// clearly not up to NoiseMargin, ambiguous in between.
func Judge(d time.Duration) Verdict {
	switch {
	case d >= ClearMargin:
		return Yes
	case d <= NoiseMargin:
		return No
	}
	return Unsure
}

// JudgeOver classifies a timeout or retry policy that needs over more than
// the time left: as JudgeExact when clockFree (it needs at least the whole
// budget a caller above had, which budgetd decides without reading a
// clock), and otherwise real only from ClearMargin, ambiguous from
// ExactMargin.
func JudgeOver(over time.Duration, clockFree bool) Verdict {
	v := JudgeExact(over)
	if v == Yes && !clockFree && over < ClearMargin {
		return Unsure
	}
	return v
}

// JudgeExact classifies by how far d is past a threshold budgetd applies
// without a tolerance (timeout ≥ R): real from ExactMargin, clearly not from
// NoiseMargin on the good side, ambiguous in between.
func JudgeExact(d time.Duration) Verdict {
	switch {
	case d >= ExactMargin:
		return Yes
	case d <= -NoiseMargin:
		return No
	}
	return Unsure
}

// Builder assembles a Truth from a Log.
type Builder struct {
	t     Truth
	log   *Log
	seenE map[Expect]bool
	seenA map[Expect]bool
}

// New starts the Truth of a run of scenario name; stripped says budget
// attributes were removed from its spans.
//
// It strips the monotonic clock readings from log's instants, in place, so
// that every comparison reads the wall clock, as the spans do.
func New(name string, stripped bool, log *Log) *Builder {
	log.wallClock()
	return &Builder{
		t: Truth{Scenario: name, Stripped: stripped, Requests: len(log.Requests)}, log: log,
		seenE: map[Expect]bool{}, seenA: map[Expect]bool{},
	}
}

// Add records case e with verdict v.
func (b *Builder) Add(v Verdict, e Expect) { b.AddNoted(v, e, "") }

// AddNoted records case e with verdict v and, when it is expected, a note
// of what was measured.
func (b *Builder) AddNoted(v Verdict, e Expect, note string) {
	switch v {
	case Yes:
		if !b.seenE[e] {
			b.seenE[e] = true
			b.t.Expected = append(b.t.Expected, e)
			b.note(e, note)
		}
	case Unsure:
		if !b.seenA[e] {
			b.seenA[e] = true
			b.t.Ambiguous = append(b.t.Ambiguous, e)
			if note != "" {
				b.note(e, "ambiguous: "+note)
			}
		}
	case No:
		if _, noted := b.t.Notes[e]; !noted && note != "" {
			b.note(e, "clean: "+note)
		}
	}
}

// note keeps text as e's note, unless it is empty.
func (b *Builder) note(e Expect, text string) {
	if text == "" {
		return
	}
	if b.t.Notes == nil {
		b.t.Notes = map[Expect]string{}
	}
	b.t.Notes[e] = text
}

// Truth returns the Truth built; an Expect that is also Ambiguous (two
// spans of one service in one trace, judged differently) stays Expected.
func (b *Builder) Truth() Truth {
	amb := b.t.Ambiguous[:0:0]
	for _, e := range b.t.Ambiguous {
		if !b.seenE[e] {
			amb = append(amb, e)
		}
	}
	b.t.Ambiguous = amb
	return b.t
}

// Standard judges what most scenarios expect: orphaned work, inversions and
// latency inversions, the last two as far as the run's attributes let
// budgetd know the timeouts (all of them recorded, or only estimated when
// stripped).
func (b *Builder) Standard() *Builder {
	b.Orphans()
	b.Inversions(!b.t.Stripped)
	b.LatencyAll(!b.t.Stripped)
	return b
}

// GiveUp returns G for invocation i: the earliest instant a caller on its
// chain stopped waiting (every call up to the edge, the edge's deadline, a
// cancellation a handler on the chain observed and recorded as an event —
// not in a stripped run), or the deadline its message carried. A consumer of a message without a budget starts a new
// chain that nobody waits for (DESIGN §5, asynchronous boundaries); so does
// one whose budget was stripped from the spans, since then the trace cannot
// show that the deadline crossed.
func (b *Builder) GiveUp(i int) (time.Time, bool) {
	var g time.Time
	ok := false
	earlier := func(t time.Time) {
		if !t.IsZero() && (!ok || t.Before(g)) {
			g, ok = t, true
		}
	}
	for inv := b.log.Invs[i]; ; {
		if !b.t.Stripped {
			// A hop that saw its request cancelled records a
			// budget.cancelled event; stripped, the span shows none.
			earlier(inv.CancelAt)
		}
		if inv.Call < 0 {
			if inv.Edge || !b.t.Stripped {
				earlier(inv.MsgDeadline)
			}
			return g, ok
		}
		c := b.log.Calls[inv.Call]
		earlier(c.End)
		if c.Parent < 0 {
			if rq := b.request(c.Trace); rq != nil {
				earlier(rq.Deadline)
			}
			return g, ok
		}
		inv = b.log.Invs[c.Parent]
	}
}

// edgeBudget returns the budget the request of trace set at the edge.
func (b *Builder) edgeBudget(trace string) (time.Duration, bool) {
	rq := b.request(trace)
	if rq == nil || rq.Deadline.IsZero() {
		return 0, false
	}
	return rq.Deadline.Sub(rq.Start), true
}

// reachesBudget reports whether need is at least the request's whole budget
// (recorded), or, without budget attributes, the timeout of the call that
// reached the caller of c: what budgetd compares without a clock reading.
func (b *Builder) reachesBudget(c *Call, need time.Duration, recorded bool) bool {
	if recorded {
		budget, ok := b.edgeBudget(c.Trace)
		return ok && need >= budget
	}
	if c.Parent < 0 {
		return false
	}
	inv := b.log.Invs[c.Parent]
	if inv.Call < 0 {
		return false
	}
	up := b.log.Calls[inv.Call].OwnTimeout
	return up > 0 && need >= up
}

func (b *Builder) request(traceID string) *Request {
	for _, rq := range b.log.Requests {
		if rq.Trace == traceID {
			return rq
		}
	}
	return nil
}

// Orphans adds orphaned_work for every invocation that worked past G, and
// expired_on_arrival for every one that started after G and was not
// rejected (DESIGN §5).
func (b *Builder) Orphans() {
	for i, inv := range b.log.Invs {
		g, ok := b.GiveUp(i)
		if !ok {
			continue
		}
		from := inv.Start
		if g.After(from) {
			from = g
		}
		b.AddNoted(Judge(inv.End.Sub(from)), Expect{Kind: schema.KindOrphanedWork, TraceID: inv.Trace, Service: inv.Service},
			fmt.Sprintf("worked %v past G", inv.End.Sub(from)))
		if !inv.Rejected {
			b.AddNoted(Judge(inv.Start.Sub(g)), Expect{Kind: schema.KindExpiredOnArrival, TraceID: inv.Trace, Service: inv.Service},
				fmt.Sprintf("started %v after G", inv.Start.Sub(g)))
		}
	}
}

// Deadline returns the deadline D that bounds a call made by invocation
// parent (-1: the edge); D minus the call's start is R (DESIGN §5). With
// budget attributes recorded (recorded), D is the request's deadline, the budget the
// spans carry: recorded budgets decide R, and callers' timeouts do not
// enter it. Without them, D is the earliest instant by which some caller
// above would stop waiting whatever happened: the edge's deadline and every
// call's own timer up the chain, which is what budgetd infers R from.
func (b *Builder) Deadline(trace string, parent int, recorded bool) (time.Time, bool) {
	if recorded {
		return b.timersDeadline(trace, -1)
	}
	return b.timersDeadline(trace, parent)
}

// timersDeadline is the earliest of the edge's deadline and every own timer
// of the calls above invocation parent.
func (b *Builder) timersDeadline(trace string, parent int) (time.Time, bool) {
	var d time.Time
	ok := false
	earlier := func(t time.Time) {
		if !t.IsZero() && (!ok || t.Before(d)) {
			d, ok = t, true
		}
	}
	for p := parent; ; {
		if p < 0 {
			if rq := b.request(trace); rq != nil {
				earlier(rq.Deadline)
			}
			return d, ok
		}
		inv := b.log.Invs[p]
		if inv.Call < 0 {
			return d, ok
		}
		c := b.log.Calls[inv.Call]
		if c.OwnTimeout > 0 {
			earlier(c.Start.Add(c.OwnTimeout))
		}
		p = c.Parent
	}
}

// timerFires counts, per caller → callee edge, the calls that ended because
// their own timer fired: what budgetd infers an edge's timeout from. budgetd
// trusts an estimate only with confidence k/(k+2) · k/(n+slower) of at least
// 0.5, where k are the fires that cluster at the timer (within one timer's
// width: on a loaded machine a fired call's span can end tens of
// milliseconds late), n all the fires and slower the answered calls longer
// than the timer by more than that width (a callee whose work takes nearly
// the timeout answers past it about as often as the timer fires). An edge
// whose confidence is not clearly met (0.6) counts no fires.
func (b *Builder) timerFires() map[[2]string]int {
	type count struct{ fired, clustered, slower int }
	counts := map[[2]string]*count{}
	for _, c := range b.log.Calls {
		k := [2]string{c.Caller, c.Callee}
		n := counts[k]
		if n == nil {
			n = &count{}
			counts[k] = n
		}
		late := c.End.Sub(c.Start) - c.OwnTimeout
		switch {
		case c.TimerFired:
			n.fired++
			if late <= stopWidth(c.OwnTimeout) {
				n.clustered++
			}
		case !c.GaveUp && c.OwnTimeout > 0 && late > stopWidth(c.OwnTimeout):
			n.slower++
		}
	}
	out := map[[2]string]int{}
	for k, n := range counts {
		f := float64(n.clustered)
		if n.clustered > 0 && f/(f+2)*f/float64(n.fired+n.slower) >= 0.6 {
			out[k] = n.clustered
		}
	}
	return out
}

// Inversions adds timeout_inversion for every call whose own timer is at
// least the time the request had left (R) when it started. A call bounded
// only by the deadline it inherited waits no longer than R and is clean.
//
// Without attributes (stripped, or a scenario that records none), budgetd
// knows a timeout only from calls that ended at it: a call is expected only
// when its edge's timer fired at least MinSamples times and so did the timer
// that set R (timerFires); otherwise a real inversion is Ambiguous.
func (b *Builder) Inversions(recorded bool) {
	fires := b.timerFires()
	for _, c := range b.log.Calls {
		if c.OwnTimeout <= 0 || c.Parent < 0 {
			continue
		}
		d, ok := b.Deadline(c.Trace, c.Parent, recorded)
		if !ok {
			continue
		}
		over := c.OwnTimeout - d.Sub(c.Start)
		v := JudgeOver(over, b.reachesBudget(c, c.OwnTimeout, recorded))
		if c.Start.Add(c.OwnTimeout).Equal(d) {
			// The timer is the deadline itself (the edge's call, timed by
			// the budget it sets): one clock, no inversion.
			v = No
		}
		if v == Yes && !recorded && (fires[[2]string{c.Caller, c.Callee}] < MinSamples || !b.deadlineObservable(c, fires) ||
			over < c.OwnTimeout/100) {
			// budgetd estimates both the timeout and the deadline from
			// timed-out calls, each to within its histogram's buckets and
			// the spread of a timer's firings: a margin under 1 % of the
			// timeout is not told apart.
			v = Unsure
		}
		note := fmt.Sprintf("timeout %v, R %v", c.OwnTimeout, d.Sub(c.Start))
		if !recorded {
			note += fmt.Sprintf(", the edge's timer counted as fired %d times", fires[[2]string{c.Caller, c.Callee}])
		}
		b.AddNoted(v, Expect{Kind: schema.KindTimeoutInversion, TraceID: c.Trace, Service: c.Caller, Callee: c.Callee}, note)
	}
}

// deadlineObservable reports whether the timer that sets R for call c fired
// often enough for budgetd to infer it: some call above c with its own
// timer on an edge whose timer fired MinSamples times.
func (b *Builder) deadlineObservable(c *Call, fires map[[2]string]int) bool {
	for p := c.Parent; p >= 0; {
		inv := b.log.Invs[p]
		if inv.Call < 0 {
			return false
		}
		up := b.log.Calls[inv.Call]
		if up.OwnTimeout > 0 && fires[[2]string{up.Caller, up.Callee}] >= MinSamples {
			return true
		}
		p = up.Parent
	}
	return false
}

// latency adds latency_inversion on the edge caller → callee when the
// callee's slow tail outlived its caller's patience: so many of its calls
// ended with the caller timing out (a cancelled call, such as a losing
// hedge, is no timeout) while the callee kept working for at least
// ClearMargin past one timer's width that the p99 lies well inside that
// tail (twice the samples at or above the p99, p99Tail): budgetd's p99 is a
// sketch over the callees' spans, and a tail of one or two calls is a coin
// flip. budgetd judges an edge on MinEdgeSamples latency samples, and a
// callee that stopped with its caller or at its deadline is none (lat): an
// edge with too few is clean, one that may have too few is Ambiguous.
// With a smaller tail, or when the caller's timeout cannot be known (known
// false), the case is Ambiguous. A callee that stops at the deadline it was
// given has no such tail and is clean (DESIGN §5, the recommended design).
func (b *Builder) latency(caller, callee string, known bool, lat *edgeLatency) {
	tail, near := 0, 0
	for ci, c := range b.log.Calls {
		if c.Caller != caller || c.Callee != callee {
			continue
		}
		if !c.TimedOut {
			// A call answered about when its timer fired (the answer won
			// the race), or whose callee's span ended late after
			// answering, leaves a latency sample at the timeout: not the
			// tail of a latency_inversion, but one budgetd's p99 over a
			// few dozen samples can land on.
			d := c.End.Sub(c.Start)
			for _, inv := range b.log.Invs {
				if inv.Call == ci {
					d = max(d, inv.End.Sub(inv.Start))
				}
			}
			if c.OwnTimeout > 0 && d >= c.OwnTimeout-stopWidth(c.OwnTimeout) {
				near++
			}
			continue
		}
		// budgetd takes a callee that ends within one timer's width of the
		// call as stopping with it, measured between span ends: the tail
		// starts past that.
		width := stopWidth(c.End.Sub(c.Start))
		for _, inv := range b.log.Invs {
			if inv.Call != ci {
				continue
			}
			switch v := Judge(inv.End.Sub(c.End) - width); {
			case v == Yes && b.stoppedEarly(c, inv) == No:
				tail++
			case v != No:
				near++
			}
		}
	}
	least, most := lat.counted()
	e := Expect{Kind: schema.KindLatencyInversion, Service: caller, Callee: callee}
	switch {
	case most < MinEdgeSamples || tail+near == 0:
		b.AddNoted(No, e, fmt.Sprintf("%d latency samples, %d timed out with the callee working on (%d near)", most, tail, near))
	case tail >= 2*p99Tail(most) && known && least >= MinEdgeSamples:
		b.AddNoted(Yes, e, fmt.Sprintf("%d of %d latency samples timed out with the callee working on (%d near)", tail, least, near))
	default:
		b.AddNoted(Unsure, e, fmt.Sprintf("%d to %d latency samples, %d timed out with the callee working on (%d near)", least, most, tail, near))
	}
}

// p99Tail is how many of n samples lie at or above their p99 when it is
// interpolated linearly between ranks (as ClickHouse's quantile and
// budgetd's sketch do, within 1 %): the samples from rank ⌊0.99·(n−1)⌋ up.
func p99Tail(n int) int {
	return n - int(0.99*float64(n-1))
}

// LatencyAll judges latency_inversion on every edge of the run. The
// caller's timeout is known when the run records budgets (every call under
// a deadline records budget.timeout_ms) or when the caller's own fixed
// timer fired on at least MinSamples calls (budgetd infers it).
func (b *Builder) LatencyAll(recorded bool) {
	fires := b.timerFires()
	lat := b.edgeLatencies()
	for _, k := range b.edges() {
		b.latency(k[0], k[1], recorded || fires[k] >= MinSamples, lat[k])
	}
}

// edges returns every caller → callee edge of the run, in first-call order.
func (b *Builder) edges() [][2]string {
	seen := map[[2]string]bool{}
	var out [][2]string
	for _, c := range b.log.Calls {
		k := [2]string{c.Caller, c.Callee}
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

// Entries adds kind on every invocation of service for which pick says so.
func (b *Builder) Entries(kind schema.Kind, service string, pick func(inv *Invocation) Verdict) {
	for _, inv := range b.log.Invs {
		if inv.Service == service {
			b.Add(pick(inv), Expect{Kind: kind, TraceID: inv.Trace, Service: service})
		}
	}
}

// logicalCalls groups the attempts of each logical call, in attempt order.
func (b *Builder) logicalCalls() [][]int {
	index := map[int]int{}
	var out [][]int
	for i, c := range b.log.Calls {
		if c.Logical < 0 {
			continue
		}
		g, ok := index[c.Logical]
		if !ok {
			g = len(out)
			index[c.Logical] = g
			out = append(out, nil)
		}
		out[g] = append(out[g], i)
	}
	for _, g := range out {
		sort.Slice(g, func(x, y int) bool { return b.log.Calls[g[x]].Attempt < b.log.Calls[g[y]].Attempt })
	}
	return out
}
