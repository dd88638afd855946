package analyze

import (
	"math"
	"slices"

	"github.com/budgetd/budgetd/schema"
)

// Zero-instrumentation inference (docs/attributes.md, "Without budget
// attributes"). A caller with a fixed timeout gives up on a slow callee at
// that timeout every time, so the durations of its calls that timed out pile
// up at one value. budgetd estimates each edge's effective timeout from that
// pile, and each entry point's deadline from its own timed-out requests, and
// runs the timing detectors on the estimates where a hop recorded nothing.
// Recorded attributes always win.

// InferConfig is what a user sets for inference (analyze.infer).
type InferConfig struct {
	// Enabled turns inference on. Off, the detectors use recorded budgets
	// and timeouts only.
	Enabled bool `yaml:"enabled" json:"enabled"`
	// MinSamples is the number of timed-out calls that must agree on a
	// value before it is used as an edge's timeout.
	MinSamples int `yaml:"min_samples" json:"min_samples"`
	// MinConfidence is the confidence (0 to 1) an estimate needs before the
	// detectors use it.
	MinConfidence float64 `yaml:"min_confidence" json:"min_confidence"`
}

// The defaults of DefaultInferConfig.
const (
	defaultInferMinSamples    = 5
	defaultInferMinConfidence = 0.5
)

// DefaultInferConfig returns inference on, with five agreeing samples and a
// confidence of 0.5 needed before an estimate is used.
func DefaultInferConfig() InferConfig {
	return InferConfig{Enabled: true, MinSamples: defaultInferMinSamples, MinConfidence: defaultInferMinConfidence}
}

// The wait histogram records how long callers waited, in log buckets of
// relative width 0.2 % (a 1,500 ms timeout is placed within ±1.5 ms), fine
// enough that two hops with the same configured timeout get the same
// estimate, and bounded at waitMaxBins buckets per edge and time slice.
const (
	waitLnGamma = 0.002 // ln of the bucket ratio
	waitMaxBins = 128
	// clusterWidth is how far above its lowest value a cluster of timed-out
	// durations may spread (2 %, or the skew tolerance when that is wider):
	// the timer fires late by scheduling delay, never early.
	clusterWidth = 0.02
	// maxAnswered is how many of the longest answered calls an edge keeps,
	// per slice, to find calls that waited longer than an estimate allows.
	maxAnswered = 8
	// supportPrior damps the confidence of estimates from few samples:
	// support is k / (k + supportPrior).
	supportPrior = 2
)

// waitHist is a histogram of the durations callers waited before giving up.
// The zero value is empty.
type waitHist struct {
	bins  []bin // sorted by idx
	count uint64
}

func waitIndex(ms float64) int32 {
	ms = min(max(ms, sketchMinMs), maxBudgetMs)
	return int32(math.Ceil(math.Log(ms) / waitLnGamma))
}

// waitValue is the value reported for bucket idx: the middle of the bucket.
func waitValue(idx int32) float64 {
	return math.Exp((float64(idx) - 0.5) * waitLnGamma)
}

func (h *waitHist) add(ms float64) {
	if math.IsNaN(ms) {
		return
	}
	h.count++
	h.bins = addBin(h.bins, waitIndex(ms), 1, waitMaxBins)
}

func (h *waitHist) merge(o *waitHist) {
	h.count += o.count
	for _, b := range o.bins {
		h.bins = addBin(h.bins, b.idx, b.n, waitMaxBins)
	}
}

// cluster returns the densest cluster of durations: the run of buckets
// within clusterWidth (or tolMs) of its lowest that holds the most values,
// the higher one on a tie (a timeout bounds waits from above). est is the
// cluster's median, k the values in it.
func (h *waitHist) cluster(tolMs float64) (est float64, k uint64, ok bool) {
	if len(h.bins) == 0 {
		return 0, 0, false
	}
	bestLo, bestHi := 0, 0
	var best, sum uint64
	hi := 0
	for lo := range h.bins {
		limit := waitValue(h.bins[lo].idx)
		limit += max(clusterWidth*limit, tolMs)
		for hi < len(h.bins) && waitValue(h.bins[hi].idx) <= limit {
			sum += uint64(h.bins[hi].n)
			hi++
		}
		if sum >= best {
			best, bestLo, bestHi = sum, lo, hi
		}
		sum -= uint64(h.bins[lo].n)
	}
	rank := (best + 1) / 2
	var cum uint64
	for _, b := range h.bins[bestLo:bestHi] {
		cum += uint64(b.n)
		if cum >= rank {
			return waitValue(b.idx), best, true
		}
	}
	return waitValue(h.bins[bestHi-1].idx), best, true
}

// longest keeps the maxAnswered longest waits of calls that got an answer,
// longest first.
type longest struct {
	ms []float64
}

func (l *longest) add(ms float64) {
	if math.IsNaN(ms) || (len(l.ms) == maxAnswered && ms <= l.ms[len(l.ms)-1]) {
		return
	}
	k, _ := slices.BinarySearchFunc(l.ms, ms, func(a, b float64) int {
		switch {
		case a > b:
			return -1
		case a < b:
			return 1
		}
		return 0
	})
	l.ms = slices.Insert(l.ms, k, ms)
	if len(l.ms) > maxAnswered {
		l.ms = l.ms[:maxAnswered]
	}
}

func (l *longest) merge(o *longest) {
	for _, v := range o.ms {
		l.add(v)
	}
}

// above counts the kept waits longer than ms.
func (l *longest) above(ms float64) int {
	n := 0
	for _, v := range l.ms {
		if v > ms {
			n++
		}
	}
	return n
}

// waitAgg is what an edge (or an entry point) knows about how long its
// callers wait.
type waitAgg struct {
	gaveUp   waitHist // calls that ended because the caller stopped waiting
	answered longest  // calls that got an answer
	// atDeadline holds calls that timed out when a deadline above them
	// passed (endsWithAncestor): the caller waited as long as its deadline
	// let it, which is no timeout of its own but is how patient it was.
	atDeadline waitHist
}

func (a *waitAgg) merge(o *waitAgg) {
	a.gaveUp.merge(&o.gaveUp)
	a.answered.merge(&o.answered)
	a.atDeadline.merge(&o.atDeadline)
}

// Estimate is an inferred timeout.
type Estimate struct {
	// Ms is the estimated timeout: the median of the densest cluster of
	// timed-out durations.
	Ms float64 `json:"ms"`
	// Samples is the number of timed-out calls in that cluster; TimedOut
	// the number of timed-out calls in all.
	Samples  uint64 `json:"samples"`
	TimedOut uint64 `json:"timed_out"`
	// Confidence, from 0 to 1, is agreement × support: agreement is the
	// share of the evidence that fits the estimate, Samples over TimedOut
	// plus the answered calls that waited longer than the estimate (a
	// caller that waited longer has no such timeout, or not always);
	// support is Samples / (Samples + 2), so a handful of samples is never
	// certain.
	Confidence float64 `json:"confidence"`
}

// estimate infers the timeout from the aggregate, tolMs wide at least.
func (a *waitAgg) estimate(tolMs float64) (Estimate, bool) {
	return a.estimateFrom(&a.gaveUp, tolMs)
}

// deadlineWait estimates, the same way, how long the caller waits on calls
// its deadline ends: what latency_inversion compares the callee's tail with
// when the caller has no timeout of its own.
func (a *waitAgg) deadlineWait(tolMs float64) (Estimate, bool) {
	return a.estimateFrom(&a.atDeadline, tolMs)
}

func (a *waitAgg) estimateFrom(h *waitHist, tolMs float64) (Estimate, bool) {
	est, k, ok := h.cluster(tolMs)
	if !ok {
		return Estimate{}, false
	}
	over := uint64(a.answered.above(est + max(clusterWidth*est, tolMs)))
	n := h.count
	agreement := float64(k) / float64(n+over)
	support := float64(k) / float64(k+supportPrior)
	return Estimate{Ms: est, Samples: k, TimedOut: n, Confidence: agreement * support}, true
}

// usable reports whether the estimate is good enough for the detectors.
func (e Estimate) usable(c InferConfig) bool {
	return c.Enabled && e.Samples >= uint64(max(c.MinSamples, 1)) && e.Confidence >= c.MinConfidence
}

// waitSample is one observation of how long a caller waited.
type waitSample struct {
	key     edgeKey
	startNs uint64
	ms      float64
	gaveUp  bool // the caller stopped waiting; otherwise it got an answer
	// atDeadline: the caller stopped waiting when a deadline above it
	// passed, not at a timeout of its own (endsWithAncestor).
	atDeadline bool
}

// entryKey is the key under which an entry point's own deadline is
// estimated: an edge with no caller.
func entryKey(svc, op string) edgeKey { return edgeKey{calleeSvc: svc, calleeOp: op} }

// waitSamples lists how long each caller in the trace waited: every CLIENT
// span (a call) and every root entry (an entry point, for its deadline).
//
// A call counts as the caller giving up when its status says it timed out
// (not cancelled: a cancelled call ended when someone above gave up), no
// budget.cancelled event says otherwise, and it was not answered by its
// callee (calleeAnswered): a 504 the callee sent back at its own timeout says
// nothing about the caller's. A root counts as giving up when it
// timed out itself (a 504 or 408 it answered, error.type timeout). A call
// that timed out when a deadline above it passed (endsWithAncestor) is
// marked atDeadline: it shows how long the caller waited, not a timeout.
func (v *view) waitSamples(fn func(waitSample)) {
	for i := range v.n {
		nd := &v.n[i]
		s := &v.t.Spans[i]
		var key edgeKey
		switch {
		case nd.call >= 0 && s.Kind == schema.KindClient:
			key = edgeKey{nd.callerSvc, nd.callerOp, nd.calleeSvc, nd.calleeOp}
		case nd.parent < 0 && v.isRoot(i) && !s.Kind.IsCall():
			key = entryKey(serviceName(s.Service), s.Name)
		default:
			continue
		}
		f := &nd.facts
		w := waitSample{key: key, startNs: s.StartNs, ms: nsToMs(nd.end - nd.start)}
		switch {
		case f.Cancelled || len(f.Cancellations) > 0:
			continue
		case f.TimedOut:
			if v.calleeAnswered(i) || v.passesOnAnswer(i) {
				continue
			}
			w.gaveUp, w.atDeadline = true, v.endsWithAncestor(i)
		case nd.isError && !v.answered(i):
			continue // failed without an answer: a refused connection, a reset
		}
		fn(w)
	}
}

// passesOnAnswer reports whether entry i ended, within one timer width,
// when one of its own calls got an answer: a timed-out entry that only
// passed on the 504 its callee sent (after its retries ran out, say) shows
// its callee's timing, not a deadline of its own, and estimating one from
// it would judge the callee's timeouts against their own sum.
func (v *view) passesOnAnswer(i int) bool {
	if v.t.Spans[i].Kind.IsCall() {
		return false
	}
	nd := &v.n[i]
	width := max(int64(clusterWidth*float64(nd.end-nd.start)), v.tolNs)
	for c := range v.n {
		cn := &v.n[c]
		if cn.call < 0 || cn.entry != i || v.t.Spans[c].Kind != schema.KindClient {
			continue
		}
		answered := v.calleeAnswered(c) || (!cn.facts.TimedOut && v.answered(c))
		if answered && cn.end >= nd.end-width && cn.end <= nd.end+width {
			return true
		}
	}
	return false
}

// endsWithAncestor reports whether timed-out call i ended when a deadline
// above it did (DESIGN §5, the recommended design is clean): at the instant
// a caller on its ancestor chain stopped waiting (G: a CLIENT ancestor's
// end, the root deadline, a cancellation), at the recorded deadline D, or
// at the end of the root entry when that timed out itself. A hop that passes
// its caller's deadline on (grpc-go does it natively with grpc-timeout)
// times out at the same instant as everyone above it; that wait is the
// caller's deadline, no evidence of a timeout of the hop's own, and
// clustering it would "infer" a timeout on every edge that always reaches
// what is left. The instants agree within the width of one timer's firings
// (clusterWidth of the wait, at least the skew tolerance). A call whose own
// timeout fires first ends earlier than all of them and is kept.
func (v *view) endsWithAncestor(i int) bool {
	nd := &v.n[i]
	width := max(int64(clusterWidth*float64(nd.end-nd.start)), v.tolNs)
	near := func(at int64) bool { return at <= nd.end+width && at >= nd.end-width }
	if nd.hasGiveUp && near(nd.giveUp) {
		return true
	}
	if nd.hasDeadline && near(nd.deadline) {
		return true
	}
	// The root entry's own end: a root that timed out at the instant its
	// call did either gave up with it (one deadline) or failed because of
	// it, and then the call's timeout was below the root's deadline and
	// cannot be an inversion either. An inner hop's end is no such
	// evidence: a hop that reset the deadline returns when its own call
	// times out, long after the deadline above it. Such a call's wait still
	// says how patient its caller is (waitAgg.atDeadline).
	j := i
	for ; v.n[j].parent >= 0; j = v.n[j].parent {
		if v.asyncStart(j) {
			return false
		}
	}
	rf := &v.n[j].facts
	return j != i && v.isRoot(j) && !v.t.Spans[j].Kind.IsCall() && rf.TimedOut && !rf.Cancelled && near(v.n[j].end)
}

// calleeAnswered reports whether timed-out call i ended with an answer: an
// HTTP status (a 504 or 408) and a callee span that ended no later than the
// call. That is the callee's own deadline speaking, not the caller's timer.
// A call with no HTTP status got no answer (its caller's timer fired); one
// whose callee ran on past it was answered by something in between, a proxy
// on the caller's side giving up for it.
func (v *view) calleeAnswered(i int) bool {
	if httpStatus(v.t.Spans[i].Attrs) < 0 {
		return false
	}
	ec := v.entryChild(i)
	return ec >= 0 && v.n[ec].end <= v.n[i].end+v.tolNs
}

// answered reports whether span i shows that an answer came back: a status
// code, in either semantic-convention generation, or no error at all.
func (v *view) answered(i int) bool {
	return !v.n[i].isError || responseCode(v.t.Spans[i].Attrs) != ""
}

// estimateFunc returns an edge's timeout estimate when it is usable.
type estimateFunc func(k edgeKey) (Estimate, bool)

// inferredMs is a figure in milliseconds and how sure budgetd is of it:
// confidence 1 for a recorded value, an estimate's confidence otherwise.
type inferredMs struct {
	known    bool
	ms       float64
	conf     float64
	inferred bool // estimated rather than recorded
}

// inferredAt is an instant (view nanoseconds) and its confidence.
type inferredAt struct {
	known bool
	at    int64
	conf  float64
}

// earlier keeps at when it comes before what is known.
func (d *inferredAt) earlier(at int64, conf float64) {
	if !d.known || at < d.at {
		*d = inferredAt{known: true, at: at, conf: conf}
	}
}

// infer works out, parents first, each call's effective timeout (recorded,
// or its edge's estimate) and each span's inferred deadline: the earliest
// of its entry point's estimated deadline and, for every CLIENT ancestor,
// the instant that caller stops waiting (its start plus its timeout). A
// caller that stops waiting ends the request for everything below it, so
// that deadline is the budget the callee really has, recorded or not.
func (v *view) infer(est estimateFunc) {
	for _, i := range v.order {
		nd := &v.n[i]
		s := &v.t.Spans[i]
		if p := nd.parent; p >= 0 && !v.asyncStart(i) {
			pn := &v.n[p]
			nd.infDeadline, nd.infEdge = pn.infDeadline, pn.infEdge
			if v.t.Spans[p].Kind == schema.KindClient && pn.timeout.known {
				nd.infDeadline.earlier(pn.start+msToNs(pn.timeout.ms), pn.timeout.conf)
			}
		} else if v.isRoot(i) && !s.Kind.IsCall() {
			if e, ok := est(entryKey(serviceName(s.Service), s.Name)); ok {
				nd.infEdge.earlier(nd.start+msToNs(e.Ms), e.Confidence)
				nd.infDeadline = nd.infEdge
			}
		}
		if nd.call < 0 || s.Kind != schema.KindClient {
			continue
		}
		if t := nd.facts.TimeoutMs; t != nil {
			nd.timeout = inferredMs{known: true, ms: *t, conf: 1}
		} else if e, ok := est(edgeKey{nd.callerSvc, nd.callerOp, nd.calleeSvc, nd.calleeOp}); ok {
			nd.timeout = inferredMs{known: true, ms: e.Ms, conf: e.Confidence, inferred: true}
		}
	}
}

// effectiveRemaining returns R at span i's start: the recorded one when an
// ancestor carried a budget (recorded attributes win), else the one from
// the inferred deadline, with its confidence.
func (v *view) effectiveRemaining(i int) (inferredMs, bool) {
	if r, ok := v.remaining(i); ok {
		return inferredMs{known: true, ms: r, conf: 1}, true
	}
	nd := &v.n[i]
	if !nd.infDeadline.known {
		return inferredMs{}, false
	}
	return inferredMs{known: true, ms: nsToMs(nd.infDeadline.at - nd.start), conf: nd.infDeadline.conf, inferred: true}, true
}

// markInferred adds the inference evidence to a finding's evidence when
// any figure it rests on was not recorded.
func markInferred(ev map[string]float64, figs ...inferredMs) {
	conf, inferred := 1.0, false
	for _, f := range figs {
		if f.inferred {
			inferred = true
			conf = min(conf, f.conf)
		}
	}
	if inferred {
		ev["inferred"] = 1
		ev["confidence"] = math.Round(conf*100) / 100
	}
}
