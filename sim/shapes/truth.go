package shapes

import (
	"context"
	"errors"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/budgetd/budgetd/schema"
)

// The margins of the ground truth. A case at least clearMargin past a
// threshold is real; one within noiseMargin of it (or on the good side) is
// clearly not; anything in between is Ambiguous and not scored.
//
// budgetd ignores overruns up to its skew tolerance (5 ms) and measures them
// between span ends; the truth measures between in-process instants. An
// invocation's end is taken where its instrumentation ends its span
// (deferEnd), but a caller's give-up is noted when its call returns, and on
// a loaded machine the two clocks' readings of one case differ by a
// millisecond or two. So noiseMargin sits below the tolerance by that much:
// a case of 3 to 5 ms in process may be 5.0x ms in its spans, and whether
// budgetd reports it is a coin flip the truth does not score.
const (
	clearMargin = 20 * time.Millisecond
	noiseMargin = 3 * time.Millisecond
	// minSamples is how many timed-out calls an edge needs before budgetd
	// can infer its timeout (analyze.infer.min_samples).
	minSamples = 5
	// minEdgeSamples is how many calls an edge needs before its latency
	// quantiles count (analyze.min_edge_samples).
	minEdgeSamples = 20
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
}

// Clean reports whether the truth expects no finding at all.
func (t Truth) Clean() bool { return len(t.Expected) == 0 }

// Score counts one kind's findings against the truth.
type Score struct {
	Kind       schema.Kind
	TP, FP, FN int
}

// Recall is TP / (TP + FN), or 1 when nothing was expected.
func (s Score) Recall() float64 {
	if s.TP+s.FN == 0 {
		return 1
	}
	return float64(s.TP) / float64(s.TP+s.FN)
}

// callKinds are the kinds reported on a call span (or, for
// latency_inversion, on an edge), whose key includes the callee.
var callKinds = map[schema.Kind]bool{
	schema.KindTimeoutInversion:    true,
	schema.KindUnfundedRetryPolicy: true,
	schema.KindRetryWithoutBudget:  true,
	schema.KindRetryAmplification:  true,
	schema.KindLatencyInversion:    true,
}

// keyOf is the scoring key of a finding: several findings with one key count
// once.
func keyOf(f *schema.Finding) Expect {
	e := Expect{Kind: f.Kind, TraceID: f.TraceID, Service: f.Service}
	if callKinds[f.Kind] {
		e.Callee = f.CalleeService
	}
	return e
}

// ScoreFindings scores findings against truth, one Score per kind of
// schema.Kinds. A finding matches an Expect on kind, trace id, service and,
// for call kinds, callee service; a finding that matches an Ambiguous case
// is not counted.
func ScoreFindings(findings []schema.Finding, truth Truth) []Score {
	expected := map[Expect]bool{}
	for _, e := range truth.Expected {
		expected[e] = true
	}
	ambiguous := map[Expect]bool{}
	for _, e := range truth.Ambiguous {
		ambiguous[e] = true
	}
	found := map[Expect]bool{}
	for i := range findings {
		found[keyOf(&findings[i])] = true
	}
	byKind := map[schema.Kind]*Score{}
	for _, k := range schema.Kinds {
		byKind[k] = &Score{Kind: k}
	}
	get := func(k schema.Kind) *Score {
		s := byKind[k]
		if s == nil {
			s = &Score{Kind: k}
			byKind[k] = s
		}
		return s
	}
	for k := range found {
		switch {
		case expected[k]:
			get(k.Kind).TP++
		case !ambiguous[k]:
			get(k.Kind).FP++
		}
	}
	for k := range expected {
		if !found[k] {
			get(k.Kind).FN++
		}
	}
	out := make([]Score, 0, len(byKind))
	for _, s := range byKind {
		out = append(out, *s)
	}
	sort.Slice(out, func(a, b int) bool { return kindOrder(out[a].Kind) < kindOrder(out[b].Kind) })
	return out
}

func kindOrder(k schema.Kind) int {
	for i, v := range schema.Kinds {
		if v == k {
			return i
		}
	}
	return len(schema.Kinds)
}

// recorder notes, from inside the services, every call and every handler
// invocation of one scenario run. It is safe for concurrent use.
type recorder struct {
	mu    sync.Mutex
	reqs  []*request
	calls []*callRec
	invs  []*invRec
}

// request is one request sent at the edge.
type request struct {
	trace    string
	start    time.Time
	deadline time.Time // the edge's deadline; zero when it set none
}

// callRec is one call attempt, from the caller's side.
type callRec struct {
	trace          string
	caller, callee string
	parent         int // invocation that made the call; -1 for the edge
	start, end     time.Time
	// ownTimeout is a timer the caller set for this call itself (not
	// derived from the deadline it inherited); 0 when none.
	ownTimeout time.Duration
	// timerFired says the call ended because ownTimeout fired, or, for a
	// call through a proxy with a timeout, because the proxy's fired.
	timerFired bool
	// gaveUp says the caller stopped waiting without the callee's answer;
	// timedOut that it did so because a deadline or timer fired (not a
	// cancellation, such as a hedge that lost).
	gaveUp, timedOut bool
}

// invRec is one handler invocation (or one message processed).
type invRec struct {
	trace, service string
	call           int // the call that caused it; -1 for a message consumer
	start, end     time.Time
	// msgDeadline is the deadline the message carried (a consumer); zero
	// when the message carried no budget.
	msgDeadline time.Time
	// edge marks the entry point's own invocation: msgDeadline is then its
	// own deadline, the user's patience, which budgetd also infers from
	// the entry point's timed-out requests when no budget is recorded.
	edge     bool
	rejected bool
}

type invKey struct{}

// edgeRequest records a request sent at the edge from ctx, which holds its
// root span.
func (r *recorder) edgeRequest(ctx context.Context, start, deadline time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reqs = append(r.reqs, &request{trace: traceOf(ctx), start: start, deadline: deadline})
}

func traceOf(ctx context.Context) string {
	return trace.SpanContextFromContext(ctx).TraceID().String()
}

// startCall records the start of a call from the invocation in ctx (or the
// edge) to callee, and returns its id.
func (r *recorder) startCall(ctx context.Context, caller, callee string, ownTimeout time.Duration) int {
	parent := -1
	if p, ok := ctx.Value(invKey{}).(int); ok {
		parent = p
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, &callRec{
		trace: traceOf(ctx), caller: caller, callee: callee, parent: parent,
		start: time.Now(), ownTimeout: ownTimeout,
	})
	return len(r.calls) - 1
}

// endCall records that the caller stopped waiting for call id.
func (r *recorder) endCall(id int, ctxErr error, timerFired bool) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.calls[id]
	c.end, c.timerFired = now, timerFired
	c.gaveUp = ctxErr != nil
	c.timedOut = errors.Is(ctxErr, context.DeadlineExceeded)
}

// startInv records that service started handling call (-1 for a message)
// and returns ctx carrying the invocation, for the calls it makes.
func (r *recorder) startInv(ctx context.Context, service string, call int, msgDeadline time.Time) (context.Context, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.invs = append(r.invs, &invRec{
		trace: traceOf(ctx), service: service, call: call, start: time.Now(), msgDeadline: msgDeadline,
	})
	id := len(r.invs) - 1
	return context.WithValue(ctx, invKey{}, id), id
}

// startEdge records the entry point's own invocation, whose deadline is
// the edge budget.
func (r *recorder) startEdge(ctx context.Context, deadline time.Time) (context.Context, int) {
	ctx, id := r.startInv(ctx, "edge", -1, deadline)
	r.mu.Lock()
	r.invs[id].edge = true
	r.mu.Unlock()
	return ctx, id
}

// invEnd carries, from the handler to the code that wraps its
// instrumentation, the invocation whose end that outer code records (-1:
// none yet, e.g. a call the budget interceptor refused).
type invEnd struct{ id atomic.Int64 }

type invEndKey struct{}

// deferEnd returns ctx carrying a fresh invEnd: an invocation started
// below it is ended by endDeferred, after the instrumentation around the
// handler (otelhttp, otelgrpc) has ended its span, not when the handler
// returns. A server's work ends when its answer is out, which is when its
// span ends and what orphaned_work measures.
func deferEnd(ctx context.Context) (context.Context, *invEnd) {
	e := &invEnd{}
	e.id.Store(-1)
	return context.WithValue(ctx, invEndKey{}, e), e
}

// finishInv ends invocation id now, or leaves it to endDeferred when ctx
// came through deferEnd.
func (r *recorder) finishInv(ctx context.Context, id int) {
	if e, ok := ctx.Value(invEndKey{}).(*invEnd); ok {
		e.id.Store(int64(id))
		return
	}
	r.endInv(id, false)
}

// endDeferred ends the invocation finishInv left to e, if any.
func (r *recorder) endDeferred(e *invEnd) {
	if id := e.id.Load(); id >= 0 {
		r.endInv(int(id), false)
	}
}

// endInv records that invocation id stopped working.
func (r *recorder) endInv(id int, rejected bool) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.invs[id].end, r.invs[id].rejected = now, rejected
}

// judge classifies a measured amount against a threshold at zero: real
// (≥ clearMargin), clearly not (≤ noiseMargin) or ambiguous.
type verdict int

const (
	no verdict = iota
	yes
	unsure
)

func judge(d time.Duration) verdict {
	switch {
	case d >= clearMargin:
		return yes
	case d <= noiseMargin:
		return no
	}
	return unsure
}

// truthBuilder assembles a Truth from the recorder's observations.
type truthBuilder struct {
	t     Truth
	r     *recorder
	seenE map[Expect]bool
	seenA map[Expect]bool
}

func newTruth(name string, strip bool, r *recorder) *truthBuilder {
	r.mu.Lock()
	n := len(r.reqs)
	r.mu.Unlock()
	return &truthBuilder{
		t: Truth{Scenario: name, Stripped: strip, Requests: n}, r: r,
		seenE: map[Expect]bool{}, seenA: map[Expect]bool{},
	}
}

func (b *truthBuilder) add(v verdict, e Expect) {
	switch v {
	case yes:
		if !b.seenE[e] {
			b.seenE[e] = true
			b.t.Expected = append(b.t.Expected, e)
		}
	case unsure:
		if !b.seenA[e] {
			b.seenA[e] = true
			b.t.Ambiguous = append(b.t.Ambiguous, e)
		}
	}
}

// truth returns the Truth built; an Expect that is also Ambiguous (two
// spans of one service in one trace, judged differently) stays Expected.
func (b *truthBuilder) truth() Truth {
	amb := b.t.Ambiguous[:0:0]
	for _, e := range b.t.Ambiguous {
		if !b.seenE[e] {
			amb = append(amb, e)
		}
	}
	b.t.Ambiguous = amb
	return b.t
}

// giveUp returns G for invocation i: the earliest instant a caller on its
// chain stopped waiting (every call up to the edge), or the deadline its
// message carried. A consumer of a message without a budget starts a new
// chain that nobody waits for (DESIGN §5, asynchronous boundaries); so does
// one whose budget was stripped from the spans, since then the trace cannot
// show that the deadline crossed.
func (b *truthBuilder) giveUp(i int) (time.Time, bool) {
	var g time.Time
	ok := false
	earlier := func(t time.Time) {
		if !ok || t.Before(g) {
			g, ok = t, true
		}
	}
	for inv := b.r.invs[i]; ; {
		if inv.call < 0 {
			if !inv.msgDeadline.IsZero() && (inv.edge || !b.t.Stripped) {
				earlier(inv.msgDeadline)
			}
			return g, ok
		}
		c := b.r.calls[inv.call]
		earlier(c.end)
		if c.parent < 0 {
			if rq := b.request(c.trace); rq != nil && !rq.deadline.IsZero() {
				earlier(rq.deadline)
			}
			return g, ok
		}
		inv = b.r.invs[c.parent]
	}
}

func (b *truthBuilder) request(traceID string) *request {
	for _, rq := range b.r.reqs {
		if rq.trace == traceID {
			return rq
		}
	}
	return nil
}

// orphans adds orphaned_work for every invocation that worked past G, and
// expired_on_arrival for every one that started after G and was not
// rejected (DESIGN §5).
func (b *truthBuilder) orphans() {
	for i, inv := range b.r.invs {
		g, ok := b.giveUp(i)
		if !ok {
			continue
		}
		from := inv.start
		if g.After(from) {
			from = g
		}
		b.add(judge(inv.end.Sub(from)), Expect{Kind: schema.KindOrphanedWork, TraceID: inv.trace, Service: inv.service})
		if !inv.rejected {
			b.add(judge(inv.start.Sub(g)), Expect{Kind: schema.KindExpiredOnArrival, TraceID: inv.trace, Service: inv.service})
		}
	}
}

// chainDeadline returns the earliest instant by which some caller on
// invocation i's chain would stop waiting whatever happened: the edge's
// deadline and every call's own timer.
func (b *truthBuilder) chainDeadline(i int) (time.Time, bool) {
	var d time.Time
	ok := false
	earlier := func(t time.Time) {
		if !ok || t.Before(d) {
			d, ok = t, true
		}
	}
	for inv := b.r.invs[i]; inv.call >= 0; {
		c := b.r.calls[inv.call]
		if c.ownTimeout > 0 {
			earlier(c.start.Add(c.ownTimeout))
		}
		if c.parent < 0 {
			if rq := b.request(c.trace); rq != nil && !rq.deadline.IsZero() {
				earlier(rq.deadline)
			}
			break
		}
		inv = b.r.invs[c.parent]
	}
	return d, ok
}

// timerFires counts, per caller → callee edge, the calls that ended because
// their own timer fired: what budgetd infers an edge's timeout from.
func (b *truthBuilder) timerFires() map[[2]string]int {
	n := map[[2]string]int{}
	for _, c := range b.r.calls {
		if c.timerFired {
			n[[2]string{c.caller, c.callee}]++
		}
	}
	return n
}

// inversions adds timeout_inversion for every call whose own timer is at
// least the time the request had left (R) when it started. A call bounded
// only by the deadline it inherited waits no longer than R and is clean.
//
// Without attributes (stripped, or a scenario that records none), budgetd
// knows a timeout only from calls that ended at it: a call is expected only
// when its edge's timer fired at least minSamples times and so did the timer
// that set R; otherwise a real inversion is Ambiguous.
func (b *truthBuilder) inversions(recorded bool) {
	fires := b.timerFires()
	for _, c := range b.r.calls {
		if c.ownTimeout <= 0 || c.parent < 0 {
			continue
		}
		d, ok := b.chainDeadline(c.parent)
		if !ok {
			continue
		}
		v := judge(c.ownTimeout - d.Sub(c.start))
		if v == yes && !recorded && (fires[[2]string{c.caller, c.callee}] < minSamples || !b.deadlineObservable(c, fires)) {
			v = unsure
		}
		b.add(v, Expect{Kind: schema.KindTimeoutInversion, TraceID: c.trace, Service: c.caller, Callee: c.callee})
	}
}

// deadlineObservable reports whether the timer that sets R for call c fired
// often enough for budgetd to infer it: some call above c with its own
// timer on an edge whose timer fired minSamples times.
func (b *truthBuilder) deadlineObservable(c *callRec, fires map[[2]string]int) bool {
	for p := c.parent; p >= 0; {
		inv := b.r.invs[p]
		if inv.call < 0 {
			return false
		}
		up := b.r.calls[inv.call]
		if up.ownTimeout > 0 && fires[[2]string{up.caller, up.callee}] >= minSamples {
			return true
		}
		p = up.parent
	}
	return false
}

// latency adds latency_inversion on the edge caller → callee when the
// callee's slow tail outlived its caller's patience: more than 1.5 % of its
// calls (so the p99 lies in the tail) ended with the caller timing out (a
// cancelled call, such as a losing hedge, is no timeout) while
// the callee kept working for at least clearMargin. With a tail between 0
// and 1.5 %, or when the caller's timeout cannot be known (known false),
// the case is Ambiguous. A callee that stops at the deadline it was given
// has no such tail and is clean (DESIGN §5, the recommended design).
func (b *truthBuilder) latency(caller, callee string, known bool) {
	n, tail, near := 0, 0, 0
	for ci, c := range b.r.calls {
		if c.caller != caller || c.callee != callee {
			continue
		}
		n++
		if !c.timedOut {
			continue
		}
		for _, inv := range b.r.invs {
			if inv.call != ci {
				continue
			}
			switch judge(inv.end.Sub(c.end)) {
			case yes:
				tail++
			case unsure:
				near++
			}
		}
	}
	e := Expect{Kind: schema.KindLatencyInversion, Service: caller, Callee: callee}
	switch {
	case n < minEdgeSamples || tail+near == 0:
		b.add(no, e)
	case float64(tail) > 0.015*float64(n) && known:
		b.add(yes, e)
	default:
		b.add(unsure, e)
	}
}

// entries adds kind on every invocation of service for which pick says so.
func (b *truthBuilder) entries(kind schema.Kind, service string, pick func(inv *invRec) verdict) {
	for _, inv := range b.r.invs {
		if inv.service == service {
			b.add(pick(inv), Expect{Kind: kind, TraceID: inv.trace, Service: service})
		}
	}
}

// latencyAll judges latency_inversion on every synchronous edge of the run.
// The caller's timeout is known when the run records budgets (every call
// under a deadline records budget.timeout_ms) or when the caller's own
// fixed timer fired on at least minSamples calls (budgetd infers it).
// standard judges what most scenarios expect: orphaned work, inversions and
// latency inversions, the last two as far as the run's attributes let
// budgetd know the timeouts (all of them recorded, or only estimated when
// stripped).
func (b *truthBuilder) standard() *truthBuilder {
	b.orphans()
	b.inversions(!b.t.Stripped)
	b.latencyAll(!b.t.Stripped)
	return b
}

// latencyNotInferable judges every edge's latency_inversion as one whose
// timeout budgetd cannot know: a real one is ambiguous, not expected.
func (b *truthBuilder) latencyNotInferable() {
	seen := map[[2]string]bool{}
	for _, c := range b.r.calls {
		k := [2]string{c.caller, c.callee}
		if !seen[k] {
			seen[k] = true
			b.latency(c.caller, c.callee, false)
		}
	}
}

func (b *truthBuilder) latencyAll(recorded bool) {
	fires := b.timerFires()
	seen := map[[2]string]bool{}
	for _, c := range b.r.calls {
		k := [2]string{c.caller, c.callee}
		if seen[k] {
			continue
		}
		seen[k] = true
		b.latency(c.caller, c.callee, recorded || fires[k] >= minSamples)
	}
}
