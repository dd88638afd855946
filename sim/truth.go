package sim

import (
	"math"
	"sort"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/sim/groundtruth"
)

// Ms is one duration in both clocks: Real is what the spans (and so budgetd)
// show, Scenario is Real divided by the scenario's time scale, in the units
// the scenario file was written in.
type Ms struct {
	Real     float64 `json:"real_ms"`
	Scenario float64 `json:"scenario_ms"`
}

// Truth is what the simulator observed of one run, from the inside.
//
// Orphaned work is defined as budgetd's orphaned_work detector defines it
// (DESIGN §5), so the two are comparable: for every handler invocation H of
// a hop, G(H) is the earliest instant at which someone above it stopped
// waiting — the end of the call attempt that reached H (measured by the
// caller when the attempt returned: response read, timeout or
// cancellation), the same for every call above it, the root deadline (the
// root span's start plus the edge budget) and any cancellation H or a hop
// above it observed while running (the instants at which the
// budget.cancelled events are recorded). H's orphaned work is
// H.end − max(H.start, G(H)) when that exceeds the tolerance (budgetd's
// analyze.skew_tolerance_ms), else zero. The start and end are taken by the
// handler itself, inside its SERVER span.
type Truth struct {
	Scenario  string  `json:"scenario"`
	Policy    string  `json:"policy"`
	TimeScale float64 `json:"time_scale"`
	// OrphanToleranceMs is the real-time tolerance below which an overrun
	// is not counted, as budgetd's analyze.skew_tolerance_ms.
	OrphanToleranceMs float64 `json:"orphan_tolerance_real_ms"`
	// EdgeBudget is the client's edge budget.
	EdgeBudget Ms `json:"edge_budget"`
	// RootPath is the budgetd path of the client's root span and LeafPath
	// that of the leaf hop, "service:operation > …".
	RootPath string         `json:"root_path"`
	LeafPath string         `json:"leaf_path"`
	Hops     []HopTruth     `json:"hops"`
	Summary  Summary        `json:"summary"`
	Requests []RequestTruth `json:"requests"`
	Spans    SpanCounts     `json:"spans"`
	// Findings are the findings a correct budgetd reports on this run,
	// judged per finding kind from the same observations (package
	// groundtruth), for the run's spans as exported: stripped of budget
	// attributes or not.
	Findings groundtruth.Truth `json:"-"`
}

// HopTruth sums one hop over the run.
type HopTruth struct {
	Service string `json:"service"`
	Path    string `json:"path"`
	// Calls is how many requests reached the hop's server (including those
	// it refused for lack of budget); Attempts how many call attempts its
	// caller started towards it (including attempts that never arrived).
	Calls        int `json:"calls"`
	Attempts     int `json:"attempts"`
	OrphanedWork Ms  `json:"orphaned_work"`
	// ReceivedBudgetP50 is the median budget the hop received in
	// x-request-timeout-ms, when it received any.
	ReceivedBudgetP50 *Ms `json:"received_budget_p50,omitempty"`
}

// Summary aggregates the requests.
type Summary struct {
	Requests    int     `json:"requests"`
	Succeeded   int     `json:"succeeded"`
	Failed      int     `json:"failed"`
	SuccessRate float64 `json:"success_rate"`
	// End-to-end latency as the client saw it, from the start of the root
	// span to its end; quantiles interpolate linearly between ranks.
	LatencyP50 Ms `json:"latency_p50"`
	LatencyP99 Ms `json:"latency_p99"`
	LatencyMax Ms `json:"latency_max"`
	// Calls reaching the leaf hop: in all, per request (mean over every
	// request, and over the requests that reached it at all) and the most
	// in one request.
	LeafCalls               int     `json:"leaf_calls"`
	LeafCallsMean           float64 `json:"leaf_calls_mean"`
	LeafCallsMeanWhenCalled float64 `json:"leaf_calls_mean_when_called"`
	LeafCallsMax            int     `json:"leaf_calls_max"`
	// Orphaned work in all, and per failed request (the orphaned work of
	// the failed requests divided by their number).
	OrphanedWork                 Ms `json:"orphaned_work"`
	OrphanedWorkPerFailedRequest Ms `json:"orphaned_work_per_failed_request"`
	// BusyAfterClientLeftPerFailedRequest is the mean, over the failed
	// requests, of RequestTruth.BusyAfterClientLeft.
	BusyAfterClientLeftPerFailedRequest Ms `json:"busy_after_client_left_per_failed_request"`
}

// RequestTruth is one request of the client.
type RequestTruth struct {
	Index   int    `json:"index"`
	TraceID string `json:"trace_id"`
	Success bool   `json:"success"`
	// Status is the HTTP status the client finally got; 0 when its last
	// attempt got no answer (timeout, refusal).
	Status  int `json:"status"`
	Latency Ms  `json:"latency"`
	// Calls is the number of requests that reached each hop, by service;
	// Attempts the number of call attempts towards it, including those
	// that never reached it (cancelled or refused on the way).
	Calls        map[string]int `json:"calls"`
	Attempts     map[string]int `json:"attempts"`
	LeafCalls    int            `json:"leaf_calls"`
	LeafAttempts int            `json:"leaf_attempts"`
	OrphanedWork Ms             `json:"orphaned_work"`
	// BusyAfterClientLeft is how long the chain kept working on the request
	// after the client stopped waiting: the latest end of any of its
	// handlers minus the end of the root span (0 when all had stopped). It
	// is wall-clock time, unlike OrphanedWork, which adds up every hop's
	// overrun; budgetd does not report it.
	BusyAfterClientLeft Ms `json:"busy_after_client_left"`
	// OrphanedByService splits OrphanedWork by hop (hops with none left out).
	OrphanedByService map[string]Ms `json:"orphaned_by_service,omitempty"`
}

// SpanCounts counts the spans the run exported.
type SpanCounts struct {
	// Exported spans were acknowledged by the OTLP endpoint; Failed ones
	// were not (the exporter gave up on them).
	Exported int64 `json:"exported"`
	Failed   int64 `json:"failed"`
}

// recorder collects what the hops and the client observe while the chain
// runs. It is safe for concurrent use. Ids are 1-based indexes; call parent
// 0 stands for the client's root span.
type recorder struct {
	mu       sync.Mutex
	calls    []callRec
	invs     []invRec
	reqs     []reqRec
	logicals int
	// spans maps the spans bound with bindSpan, until they end.
	spans map[trace.SpanID]spanOf
}

// callRec is one call attempt.
type callRec struct {
	req, parent, callee int
	start, end          time.Time
	// policy is the retry policy and ownTimeout the timer the caller set
	// for this attempt itself (0: only the deadline it inherited bounds
	// it); logical numbers the logical call the attempt belongs to.
	policy     retryPolicy
	ownTimeout time.Duration
	// gaveUp says the caller stopped waiting without an answer, timedOut
	// that a deadline or timer ended the wait.
	gaveUp, timedOut bool
}

// retryPolicy is what a call attempt knows of its logical call.
type retryPolicy struct {
	logical, attempt int
	// maxAttempts and backoff as recorded in the attempt's attributes; 0
	// when the caller records none (it pays retries from the budget).
	maxAttempts int
	backoff     time.Duration
}

// invRec is one handler invocation of a hop.
type invRec struct {
	req, hop, call int
	start, end     time.Time
	cancelAt       time.Time // zero: no cancellation observed while it ran
	budgetMs       float64   // received budget in real ms; NaN when none
	rejected       bool      // refused by the budget middleware
	spanEnd        bool      // start and end are the SERVER span's own (spanClock)
	spanCancel     bool      // cancelAt is the SERVER span's budget.cancelled event (spanClock)
}

// reqRec is one request of the client.
type reqRec struct {
	traceID         string
	start, end      time.Time
	deadline        time.Time // root span start + edge budget
	status          int
	success, filled bool
}

func newRecorder(requests int) *recorder {
	return &recorder{reqs: make([]reqRec, requests)}
}

// newLogical returns the number of a new logical call.
func (r *recorder) newLogical() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.logicals++
	return r.logicals
}

func (r *recorder) startCall(req, parent, callee int, policy retryPolicy, ownTimeout time.Duration, at time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, callRec{req: req, parent: parent, callee: callee, start: at, policy: policy, ownTimeout: ownTimeout})
	return len(r.calls)
}

// endCall records when the caller stopped waiting for call id; the first
// record counts (an attempt that got no answer is recorded when its CLIENT
// span ended, before the attempt returns), and the CLIENT span's own end
// time replaces it (spanEnded).
func (r *recorder) endCall(id int, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c := &r.calls[id-1]; c.end.IsZero() {
		c.end = at
	}
}

// gaveUp records that the caller stopped waiting for call id without an
// answer, because a deadline or timer fired (timedOut) or not.
func (r *recorder) gaveUp(id int, timedOut bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := &r.calls[id-1]
	c.gaveUp, c.timedOut = true, timedOut
}

func (r *recorder) startInvocation(req, hop, call int, budgetMs float64, at time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.invs = append(r.invs, invRec{req: req, hop: hop, call: call, start: at, budgetMs: budgetMs})
	return len(r.invs)
}

// endInvocation records how invocation id ended; at is its end and
// cancelAt when it saw its request cancelled, unless its SERVER span's own
// readings of them are known already.
func (r *recorder) endInvocation(id int, at, cancelAt time.Time, rejected bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	inv := &r.invs[id-1]
	if !inv.spanEnd {
		inv.end = at
	}
	if !inv.spanCancel {
		inv.cancelAt = cancelAt
	}
	inv.rejected = rejected
}

// spanEnded records what span id recorded. For a bound CLIENT span, its
// end is its call attempt's end, whatever was recorded before. For a bound
// SERVER span, its start and end are its invocation's, and its
// budget.cancelled event, when it has one, is the invocation's
// cancellation. (A call's start stays the simulator's reading: its own
// timer started then, before the CLIENT span did.)
func (r *recorder) spanEnded(id trace.SpanID, read spanReadings) {
	r.mu.Lock()
	defer r.mu.Unlock()
	of, ok := r.spans[id]
	if !ok {
		return
	}
	delete(r.spans, id)
	switch {
	case of.call > 0:
		r.calls[of.call-1].end = read.end
	case of.inv > 0:
		inv := &r.invs[of.inv-1]
		inv.start, inv.end, inv.spanEnd = read.start, read.end, true
		if !read.cancelled.IsZero() {
			inv.cancelAt, inv.spanCancel = read.cancelled, true
		}
	}
}

func (r *recorder) request(i int, rec reqRec) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec.filled = true
	r.reqs[i] = rec
}

// plan is what truth needs to know about the chain.
type plan struct {
	scenario  string
	policy    string
	scale     float64
	tolerance time.Duration
	edge      time.Duration
	rootPath  string
	client    string   // the client's service
	services  []string // per hop
	paths     []string // per hop
	stripped  bool     // the spans lose their budget attributes
	// resets says, per hop, that the hop starts a budget of its own when
	// it receives none (the deadline policy's default budget).
	resets []bool
}

// truth computes the Truth of a finished run. Requests the run did not get
// to (it was cancelled) are left out.
func (r *recorder) truth(p plan) *Truth {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.wallClock()
	ms := func(d time.Duration) Ms {
		real := float64(d) / float64(time.Millisecond)
		return Ms{Real: real, Scenario: real / p.scale}
	}
	leaf := len(p.services) - 1
	t := &Truth{
		Scenario: p.scenario, Policy: p.policy, TimeScale: p.scale,
		OrphanToleranceMs: float64(p.tolerance) / float64(time.Millisecond),
		EdgeBudget:        ms(p.edge),
		RootPath:          p.rootPath, LeafPath: p.paths[leaf],
	}

	// G and orphaned work per invocation. A caller's invocation always has
	// a lower id than the invocations its calls reach, so one pass in id
	// order sees every parent first.
	giveUp := make([]time.Time, len(r.invs)+1)
	orphaned := make([]time.Duration, len(r.invs)+1)
	for id := 1; id <= len(r.invs); id++ {
		inv := &r.invs[id-1]
		g := r.reqs[inv.req].deadline
		if inv.call > 0 {
			c := &r.calls[inv.call-1]
			g = earliest(g, c.end)
			if c.parent > 0 {
				g = earliest(g, giveUp[c.parent])
			}
		}
		g = earliest(g, inv.cancelAt)
		giveUp[id] = g
		if over := inv.end.Sub(later(inv.start, g)); over > p.tolerance {
			orphaned[id] = over
		}
	}

	hops := make([]HopTruth, len(p.services))
	hopOrphaned := make([]time.Duration, len(p.services))
	budgets := make([][]float64, len(p.services))
	for i := range hops {
		hops[i] = HopTruth{Service: p.services[i], Path: p.paths[i]}
	}
	type perReq struct {
		calls    map[string]int
		attempts map[string]int
		orphaned time.Duration
		bySvc    map[string]time.Duration
		lastEnd  time.Time
	}
	reqs := make([]perReq, len(r.reqs))
	for i := range reqs {
		reqs[i] = perReq{calls: map[string]int{}, attempts: map[string]int{}, bySvc: map[string]time.Duration{}}
	}
	for _, c := range r.calls {
		hops[c.callee].Attempts++
		reqs[c.req].attempts[p.services[c.callee]]++
	}
	for id := 1; id <= len(r.invs); id++ {
		inv := &r.invs[id-1]
		svc := p.services[inv.hop]
		h := &hops[inv.hop]
		h.Calls++
		hopOrphaned[inv.hop] += orphaned[id]
		if !math.IsNaN(inv.budgetMs) {
			budgets[inv.hop] = append(budgets[inv.hop], inv.budgetMs)
		}
		pr := &reqs[inv.req]
		pr.calls[svc]++
		pr.lastEnd = later(pr.lastEnd, inv.end)
		if orphaned[id] > 0 {
			pr.orphaned += orphaned[id]
			pr.bySvc[svc] += orphaned[id]
		}
	}
	for i, b := range budgets {
		hops[i].OrphanedWork = ms(hopOrphaned[i])
		if len(b) > 0 {
			sort.Float64s(b)
			p50 := quantile(b, 0.5)
			hops[i].ReceivedBudgetP50 = &Ms{Real: p50, Scenario: p50 / p.scale}
		}
	}
	t.Hops = hops

	s := &t.Summary
	var latencies []float64
	var orphanedAll, orphanedFailed, busyFailed time.Duration
	called := 0
	for i, rr := range r.reqs {
		if !rr.filled {
			continue
		}
		pr := reqs[i]
		rt := RequestTruth{
			Index: i, TraceID: rr.traceID, Success: rr.success, Status: rr.status,
			Latency: ms(rr.end.Sub(rr.start)), Calls: pr.calls, Attempts: pr.attempts,
			LeafCalls: pr.calls[p.services[leaf]], LeafAttempts: pr.attempts[p.services[leaf]],
			OrphanedWork: ms(pr.orphaned), BusyAfterClientLeft: ms(max(pr.lastEnd.Sub(rr.end), 0)),
		}
		for svc, d := range pr.bySvc {
			if rt.OrphanedByService == nil {
				rt.OrphanedByService = map[string]Ms{}
			}
			rt.OrphanedByService[svc] = ms(d)
		}
		t.Requests = append(t.Requests, rt)
		latencies = append(latencies, rt.Latency.Real)
		s.Requests++
		if rr.success {
			s.Succeeded++
		} else {
			s.Failed++
			orphanedFailed += pr.orphaned
			busyFailed += max(pr.lastEnd.Sub(rr.end), 0)
		}
		orphanedAll += pr.orphaned
		s.LeafCalls += rt.LeafCalls
		s.LeafCallsMax = max(s.LeafCallsMax, rt.LeafCalls)
		if rt.LeafCalls > 0 {
			called++
		}
	}
	if s.Requests > 0 {
		s.SuccessRate = float64(s.Succeeded) / float64(s.Requests)
		s.LeafCallsMean = float64(s.LeafCalls) / float64(s.Requests)
		sort.Float64s(latencies)
		real := func(v float64) Ms { return Ms{Real: v, Scenario: v / p.scale} }
		s.LatencyP50 = real(quantile(latencies, 0.5))
		s.LatencyP99 = real(quantile(latencies, 0.99))
		s.LatencyMax = real(latencies[len(latencies)-1])
	}
	if called > 0 {
		s.LeafCallsMeanWhenCalled = float64(s.LeafCalls) / float64(called)
	}
	s.OrphanedWork = ms(orphanedAll)
	if s.Failed > 0 {
		s.OrphanedWorkPerFailedRequest = ms(orphanedFailed / time.Duration(s.Failed))
		s.BusyAfterClientLeftPerFailedRequest = ms(busyFailed / time.Duration(s.Failed))
	}
	t.Findings = r.findings(p)
	return t
}

// wallClock strips the monotonic clock readings from every instant
// recorded (the caller holds r.mu), so that the summary, like the findings
// (groundtruth.New), reads the wall clock the spans' start times come from.
func (r *recorder) wallClock() {
	for i := range r.reqs {
		rq := &r.reqs[i]
		rq.start, rq.end, rq.deadline = rq.start.Round(0), rq.end.Round(0), rq.deadline.Round(0)
	}
	for i := range r.calls {
		c := &r.calls[i]
		c.start, c.end = c.start.Round(0), c.end.Round(0)
	}
	for i := range r.invs {
		inv := &r.invs[i]
		inv.start, inv.end, inv.cancelAt = inv.start.Round(0), inv.end.Round(0), inv.cancelAt.Round(0)
	}
}

// findings judges, per finding kind, what a correct budgetd reports on the
// run (the caller holds r.mu). Every kind of DESIGN §5 applies to the
// chain: work past the give-up instant, timeouts against what was left,
// retry policies against it, retries that multiply, slow tails against the
// caller's patience, and budgets that grow on the way down.
func (r *recorder) findings(p plan) groundtruth.Truth {
	log := r.groundLog(p)
	b := groundtruth.New(p.scenario, p.stripped, &log)
	b.Orphans()
	b.Inversions(!p.stripped)
	b.LatencyAll(!p.stripped)
	b.UnfundedRetryPolicies()
	b.RetriesWithoutBudget()
	b.RetryAmplification()
	r.budgetResets(b, p)
	return b.Truth()
}

// groundLog converts the observations to package groundtruth's form.
func (r *recorder) groundLog(p plan) groundtruth.Log {
	var log groundtruth.Log
	for _, rr := range r.reqs {
		if rr.filled {
			log.Requests = append(log.Requests, &groundtruth.Request{Trace: rr.traceID, Start: rr.start, Deadline: rr.deadline})
		}
	}
	traceOf := func(req int) string { return r.reqs[req].traceID }
	for _, c := range r.calls {
		caller := p.client
		if c.parent > 0 {
			caller = p.services[r.invs[c.parent-1].hop]
		}
		log.Calls = append(log.Calls, &groundtruth.Call{
			Trace: traceOf(c.req), Caller: caller, Callee: p.services[c.callee], Parent: c.parent - 1,
			Start: c.start, End: c.end, OwnTimeout: c.ownTimeout,
			TimerFired: c.timedOut && ownTimerEnded(c), GaveUp: c.gaveUp, TimedOut: c.timedOut,
			Logical: c.policy.logical, Attempt: c.policy.attempt,
			MaxAttempts: c.policy.maxAttempts, Backoff: c.policy.backoff,
		})
	}
	for _, inv := range r.invs {
		log.Invs = append(log.Invs, &groundtruth.Invocation{
			Trace: traceOf(inv.req), Service: p.services[inv.hop], Call: inv.call - 1,
			Start: inv.start, End: inv.end, CancelAt: inv.cancelAt, Rejected: inv.rejected,
		})
	}
	return log
}

// budgetResets adds budget_reset on every invocation that received more
// budget than its caller had left when the call started, or none at all
// under a deadline policy although the request had a deadline: the hop then
// starts a new budget of its own (DESIGN §5). Only recorded budgets show it.
//
// A received budget is compared with what its caller had by its own clock
// (the budget it received, less the time since it arrived), not with the
// edge's deadline: a relative budget restarts at every hop on arrival, so
// under load each hop's deadline lies a little later than the edge's, by
// the time its request spent on the way — the recommended design, not a
// reset (docs/attributes.md §3b).
func (r *recorder) budgetResets(b *groundtruth.Builder, p plan) {
	if p.stripped {
		return
	}
	for _, inv := range r.invs {
		if inv.call == 0 {
			continue
		}
		c := &r.calls[inv.call-1]
		trace := r.reqs[inv.req].traceID
		d, ok := b.Deadline(trace, c.parent-1, true)
		if !ok {
			continue
		}
		e := groundtruth.Expect{Kind: schema.KindBudgetReset, TraceID: trace, Service: p.services[inv.hop]}
		left := d.Sub(c.start)
		if c.parent > 0 {
			if up := &r.invs[c.parent-1]; !math.IsNaN(up.budgetMs) {
				left = msDuration(up.budgetMs) - c.start.Sub(up.start)
			}
		}
		switch {
		case !math.IsNaN(inv.budgetMs):
			b.Add(groundtruth.Judge(msDuration(inv.budgetMs)-left), e)
		case inv.hop < len(p.resets) && p.resets[inv.hop]:
			b.Add(groundtruth.Yes, e)
		}
	}
}

func msDuration(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }

// quantile returns the q-quantile of sorted values, interpolating linearly
// between the two nearest ranks (as ClickHouse's quantile does on samples
// that fit its reservoir).
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	pos := q * float64(len(sorted)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(sorted)-1)
	return sorted[lo] + (pos-float64(lo))*(sorted[hi]-sorted[lo])
}

// earliest returns the earlier of a and b, ignoring a zero b.
func earliest(a, b time.Time) time.Time {
	if b.IsZero() || (!a.IsZero() && a.Before(b)) {
		return a
	}
	return b
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// ownTimerEnded reports whether call c ended at its own timer rather than
// earlier, at the deadline it inherited: only such calls show budgetd the
// timer's value (under load an inherited deadline cuts calls at varying
// lengths, which tell nothing about the timer). The timer starts just
// before the call's recorded start, hence the millisecond.
func ownTimerEnded(c callRec) bool {
	return c.ownTimeout > 0 && c.end.Sub(c.start) >= c.ownTimeout-time.Millisecond
}
