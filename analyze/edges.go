package analyze

import (
	"math"
	"sort"

	"github.com/budgetd/budgetd/schema"
)

// EdgeStats describes one edge, caller service/operation → callee
// service/operation, over a window of traces.
type EdgeStats struct {
	CallerService   string `json:"caller_service"`
	CallerOperation string `json:"caller_operation"`
	CalleeService   string `json:"callee_service"`
	CalleeOperation string `json:"callee_operation"`
	// Calls counts call attempts on the edge; Retries those with attempt > 1.
	Calls      uint64  `json:"calls"`
	Retries    uint64  `json:"retries"`
	RetryRatio float64 `json:"retry_ratio"` // Retries / Calls
	// TimeoutMs is the caller's median timeout over TimeoutSamples attempts
	// that recorded one; nil when none did.
	TimeoutMs      *float64 `json:"timeout_ms"`
	TimeoutSamples uint64   `json:"timeout_samples"`
	// P50Ms and P99Ms are the callee's latency quantiles (within 1 %) over
	// LatencySamples calls; nil when there are none. A call's latency is the
	// callee's own SERVER/CONSUMER span when it recorded one, since the
	// caller's span stops at its timeout, and the call span otherwise.
	P50Ms          *float64 `json:"p50_ms"`
	P99Ms          *float64 `json:"p99_ms"`
	LatencySamples uint64   `json:"latency_samples"`
	// InferredTimeout is the caller's timeout as estimated from the
	// durations of its calls that timed out (infer.go), whether or not the
	// caller recorded one; nil when no call timed out.
	InferredTimeout *Estimate `json:"inferred_timeout,omitempty"`
	// DeadlineWait is how long the caller waited on calls that timed out
	// when a deadline above it passed, estimated the same way: the
	// patience its deadline gives it, where it has no timeout of its own.
	// nil when no such call timed out.
	DeadlineWait *Estimate `json:"deadline_wait,omitempty"`
}

// edgeKey identifies an edge.
type edgeKey struct {
	callerSvc, callerOp, calleeSvc, calleeOp string
}

func (k edgeKey) less(o edgeKey) bool {
	switch {
	case k.callerSvc != o.callerSvc:
		return k.callerSvc < o.callerSvc
	case k.callerOp != o.callerOp:
		return k.callerOp < o.callerOp
	case k.calleeSvc != o.calleeSvc:
		return k.calleeSvc < o.calleeSvc
	}
	return k.calleeOp < o.calleeOp
}

// callSample is what one call contributes to its edge.
type callSample struct {
	key        edgeKey
	startNs    uint64
	retry      bool
	hasTimeout bool
	timeoutMs  float64
	latencyMs  float64
	// atDeadline marks a callee that stopped at the deadline it was given
	// (stoppedAtDeadline): its latency says when the budget ran out, not
	// how long the work takes, so it is counted as a call but kept out of
	// the latency quantiles.
	atDeadline bool
}

// stoppedAtDeadline reports whether entry hop h ended when its budget ran
// out (stoppedAt its remaining budget, recorded or inferred). Such a
// callee honoured the deadline its caller passed down; a caller whose
// timeout is that same deadline sees it "take" exactly its timeout, which
// is no latency_inversion (DESIGN §5, the recommended design is clean).
func stoppedAtDeadline(h *schema.Hop) bool {
	d := nsToMs(int64(h.DurationNs))
	if b := h.BudgetMs; b != nil && *b > 0 && stoppedAt(d, *b, h.TimedOut) {
		return true // the budget it received
	}
	r := h.RemainingMs
	if r == nil {
		r = h.InferredRemainingMs
	}
	if r == nil || *r <= 0 {
		return false
	}
	return stoppedAt(d, *r, h.TimedOut)
}

// stoppedWithCall reports whether callee hop s ended when its caller's call
// c gave up (timed out or was cancelled): a callee that honours the
// deadline its caller passed down stops at that very instant, however late
// a loaded machine makes both. Its latency then says when the caller
// stopped waiting, not how long the work takes; a callee that runs on after
// its caller gave up is not this, and counts.
func stoppedWithCall(c, s *schema.Hop) bool {
	if !c.TimedOut {
		return false
	}
	callEnd := nsToMs(int64(c.DurationNs))
	end := nsToMs(int64(s.StartNs+s.DurationNs) - int64(c.StartNs))
	return stoppedAt(end, callEnd, s.TimedOut)
}

// stoppedAt reports whether a hop that ended at ms (from the instant the
// deadline is counted from) stopped at a deadline at deadlineMs: within
// the width of one timer's firings of it (nearMs), or, when the hop's own
// span says a timeout or a cancellation ended it (timedOut), up to
// lateNoticeMs more after it. On a loaded machine a callee that honours its
// deadline can notice it late, by more than a timer's width: its threads
// wait for a core while the deadline passes (two cores under the race
// detector put sim/shapes' grpc_deadline callees 5–12 ms past a 380 ms
// deadline). A callee that answers after its deadline, or times out on a
// longer timeout of its own, counts.
func stoppedAt(ms, deadlineMs float64, timedOut bool) bool {
	if nearMs(ms, deadlineMs) {
		return true
	}
	return timedOut && ms > deadlineMs && ms-deadlineMs <= timerWidthMs(ms, deadlineMs)+lateNoticeMs
}

// lateNoticeMs is how much later than a timer's width past its deadline a
// timed-out callee may end and still have stopped at it: the margin past
// which the simulator's ground truth counts a callee as working on
// (docs/experiments.md, latency_inversion), four skew tolerances.
const lateNoticeMs = 4 * defaultSkewToleranceMs

// nearMs reports whether two durations agree within the width of one
// timer's firings (timerWidthMs).
func nearMs(a, b float64) bool {
	return math.Abs(a-b) <= timerWidthMs(a, b)
}

// timerWidthMs is the width of one timer's firings around durations a and
// b: clusterWidth of the larger, at least the default skew tolerance.
func timerWidthMs(a, b float64) float64 {
	return max(clusterWidth*max(a, b), defaultSkewToleranceMs)
}

// spanRef identifies a span across traces.
type spanRef struct {
	trace schema.TraceID
	span  schema.SpanID
}

// eachCall derives the edge samples of hops. It is the one definition of an
// edge sample, used both by Analyzer.Trace and by EdgeStatsFromHops, so the
// streaming and the offline figures agree:
//
//   - every CLIENT/PRODUCER hop is a call on its Caller → Callee edge; its
//     latency is the duration of its first SERVER/CONSUMER child hop, or its
//     own when the callee recorded no span;
//   - a SERVER/CONSUMER hop with a caller whose parent is not a call (the
//     caller's client was not instrumented) is a call too, with its own
//     duration as latency.
func eachCall(hops []schema.Hop, fn func(callSample)) {
	child := make(map[spanRef]int, len(hops)/2+1) // call → its first entry child
	calls := make(map[spanRef]bool, len(hops)/2+1)
	for i := range hops {
		if hops[i].Kind.IsCall() {
			calls[spanRef{hops[i].TraceID, hops[i].SpanID}] = true
		}
	}
	for i := range hops {
		h := &hops[i]
		if !h.Kind.IsEntry() || h.ParentSpanID.IsZero() {
			continue
		}
		ref := spanRef{h.TraceID, h.ParentSpanID}
		if !calls[ref] {
			continue
		}
		if j, ok := child[ref]; !ok || h.StartNs < hops[j].StartNs ||
			(h.StartNs == hops[j].StartNs && string(h.SpanID[:]) < string(hops[j].SpanID[:])) {
			child[ref] = i
		}
	}
	for i := range hops {
		h := &hops[i]
		key := edgeKey{h.CallerService, h.CallerOperation, h.CalleeService, h.CalleeOperation}
		switch {
		case h.Kind.IsCall():
			s := callSample{key: key, startNs: h.StartNs, retry: h.Attempt > 1, latencyMs: nsToMs(int64(h.DurationNs))}
			// A producer waits for the broker, not for the consumer, which
			// runs later: its latency is its own.
			if j, ok := child[spanRef{h.TraceID, h.SpanID}]; ok && h.Kind == schema.KindClient {
				s.latencyMs = nsToMs(int64(hops[j].DurationNs))
				s.atDeadline = stoppedAtDeadline(&hops[j]) || stoppedWithCall(h, &hops[j])
			}
			if h.TimeoutMs != nil {
				s.hasTimeout, s.timeoutMs = true, *h.TimeoutMs
			}
			fn(s)
		case h.Kind.IsEntry() && h.CallerService != "" && !calls[spanRef{h.TraceID, h.ParentSpanID}]:
			fn(callSample{key: key, startNs: h.StartNs, latencyMs: nsToMs(int64(h.DurationNs)), atDeadline: stoppedAtDeadline(h)})
		}
	}
}

// edgeAgg accumulates the samples of one edge (in one time slice, for the
// Analyzer). Its size is bounded by the sketch and the value table.
type edgeAgg struct {
	calls, retries uint64
	latency        sketch
	timeouts       valueTable
	wait           waitAgg
}

func (a *edgeAgg) add(s *callSample) {
	a.calls++
	if s.retry {
		a.retries++
	}
	if !s.atDeadline {
		a.latency.add(s.latencyMs)
	}
	if s.hasTimeout {
		a.timeouts.add(s.timeoutMs)
	}
}

func (a *edgeAgg) merge(o *edgeAgg) {
	a.calls += o.calls
	a.retries += o.retries
	a.latency.merge(&o.latency)
	a.timeouts.merge(&o.timeouts)
	a.wait.merge(&o.wait)
}

// addWait records how long a caller waited on the edge.
func (a *edgeAgg) addWait(w *waitSample) {
	switch {
	case w.atDeadline:
		a.wait.atDeadline.add(w.ms)
	case w.gaveUp:
		a.wait.gaveUp.add(w.ms)
	default:
		a.wait.answered.add(w.ms)
	}
}

// stats turns an aggregate into EdgeStats; tolMs is the skew tolerance,
// the narrowest a cluster of timed-out durations is.
func (a *edgeAgg) stats(k edgeKey, tolMs float64) EdgeStats {
	e := EdgeStats{
		CallerService: k.callerSvc, CallerOperation: k.callerOp,
		CalleeService: k.calleeSvc, CalleeOperation: k.calleeOp,
		Calls: a.calls, Retries: a.retries,
		TimeoutSamples: a.timeouts.count(),
		LatencySamples: a.latency.count,
	}
	if a.calls > 0 {
		e.RetryRatio = float64(a.retries) / float64(a.calls)
	}
	if v, ok := a.timeouts.median(); ok {
		e.TimeoutMs = schema.Ms(v)
	}
	if v, ok := a.latency.quantile(0.5); ok {
		e.P50Ms = schema.Ms(v)
	}
	if v, ok := a.latency.quantile(0.99); ok {
		e.P99Ms = schema.Ms(v)
	}
	if est, ok := a.wait.estimate(tolMs); ok {
		e.InferredTimeout = &est
	}
	if est, ok := a.wait.deadlineWait(tolMs); ok {
		e.DeadlineWait = &est
	}
	return e
}

// p50 returns the median latency once the aggregate holds minSamples.
func (a *edgeAgg) p50(minSamples int) (float64, bool) {
	if a.latency.count < uint64(max(minSamples, 1)) {
		return 0, false
	}
	return a.latency.quantile(0.5)
}

// EdgeStatsFromHops computes the statistics of every edge in hops, with the
// same rules and the same sketch as Analyzer.Edges, but over all the hops
// given rather than over a window: the offline path selects the window when
// it reads the hops table. Hops of many traces may be mixed, in any order.
// The result is sorted by caller service, caller operation, callee service
// and callee operation.
//
// Hops do not say how long callers waited before giving up, so the result
// has no inferred timeouts; Analyze adds them from the traces.
func EdgeStatsFromHops(hops []schema.Hop) []EdgeStats {
	return sortedStats(edgeAggs(hops), 0)
}

// edgeAggs aggregates the calls among hops per edge, without a window.
func edgeAggs(hops []schema.Hop) map[edgeKey]*edgeAgg {
	aggs := map[edgeKey]*edgeAgg{}
	eachCall(hops, func(s callSample) {
		aggOf(aggs, s.key).add(&s)
	})
	return aggs
}

// aggOf returns k's aggregate, creating it.
func aggOf(aggs map[edgeKey]*edgeAgg, k edgeKey) *edgeAgg {
	a := aggs[k]
	if a == nil {
		a = &edgeAgg{}
		aggs[k] = a
	}
	return a
}

// sortedStats returns the statistics of the edges with calls; entry points
// (edges without a caller, which only hold waits) are left out.
func sortedStats(aggs map[edgeKey]*edgeAgg, tolMs float64) []EdgeStats {
	keys := make([]edgeKey, 0, len(aggs))
	for k := range aggs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool { return keys[a].less(keys[b]) })
	out := make([]EdgeStats, 0, len(keys))
	for _, k := range keys {
		if aggs[k].calls > 0 {
			out = append(out, aggs[k].stats(k, tolMs))
		}
	}
	return out
}
