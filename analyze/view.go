package analyze

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/budgetd/budgetd/analyze/budgetread"
	"github.com/budgetd/budgetd/schema"
)

// maxTimeNs caps span and event times. Recorded times are unsigned and may be
// garbage; capping them well inside int64 lets the analysis subtract and
// shift times without overflow checks.
const maxTimeNs = int64(1) << 61

// maxBudgetMs caps a budget or timeout at about 31 years. budgetread.Read
// accepts up to 2^53 ms, which as nanoseconds would overflow; no real budget
// comes near the cap, so clamping changes no verdict.
const maxBudgetMs = 1e12

// maxPathElems bounds the number of "service:operation" elements of a path.
// Deeper paths end in "…" and stop growing, so a pathological recursion
// cannot make every hop carry a path of quadratic total size.
const maxPathElems = 64

// Path separators and markers.
const (
	pathSep       = " > "
	pathTruncated = "…"
	// pathMissing starts the path of a subtree whose parent span is not in
	// the trace, so such paths never mix with complete ones.
	pathMissing = "…" + pathSep
)

// unknownService names a callee that no attribute identifies.
const unknownService = "unknown"

// giveUpReason says what made a caller stop waiting, for messages.
type giveUpReason uint8

const (
	giveUpNone     giveUpReason = iota
	giveUpClient                // a CLIENT ancestor ended
	giveUpDeadline              // the root deadline passed
	giveUpCancel                // a budget.cancelled event
)

// node is what the analysis knows about one span of the trace, by index.
type node struct {
	facts  budgetread.Facts
	parent int // parent index, -1 for tops
	top    int // index of the root or orphan the span hangs from
	entry  int // the enclosing entry span: nearest ancestor-or-self that is an entry

	// start and end are nanoseconds on the clock of the client that called
	// into this span's subtree, after skew correction (shift is what was
	// added to the recorded times).
	start, end, shift int64

	hasDeadline bool
	deadline    int64 // D: earliest deadline of any budgeted ancestor-or-self
	clockSlack  int64 // how much later D may really be: the clockSlack of the span that set it plus the transits since
	hasEdge     bool
	edge        int64 // the root deadline: the root's budget, or the topmost source=edge one
	// ceiling is the smallest budget (budget.remaining_ms) recorded at or
	// above the span, in milliseconds: no call below it can have had more
	// time left, however the hosts' clocks read (budgetCeiling).
	hasCeiling bool
	ceiling    float64

	hasGiveUp bool
	giveUp    int64 // G: earliest instant a caller on the ancestor chain stopped waiting
	giveUpWhy giveUpReason
	giveUpBy  string // the service that stopped waiting (giveUpClient), or the cancel source

	entryPath  string // for entries: the path ending in this span
	entryDepth int    // number of elements of entryPath
	path       string // the hop's path

	call      int    // logical call index for CLIENT/PRODUCER spans, -1 otherwise
	attempt   uint32 // 1-based attempt for calls, 0 otherwise
	isError   bool
	failed    bool // isError, or a response a retry policy retries (HTTP 429)
	orphanNs  int64
	callDesc  bool   // a CLIENT/PRODUCER span lies below this span
	callerSvc string // Hop.CallerService
	callerOp  string
	calleeSvc string // Hop.CalleeService
	calleeOp  string

	// Inference (infer.go), where the spans recorded nothing: the call's
	// effective timeout, the deadline its callers' timeouts set, and the
	// entry point's own deadline.
	timeout     inferredMs // CLIENT calls: recorded budget.timeout_ms, else the edge's estimate
	infDeadline inferredAt // earliest of the entry deadline and every CLIENT ancestor's start + timeout
	infEdge     inferredAt // the root entry's estimated deadline
	giveUpInf   float64    // confidence of G when G is infEdge; 0 when G was not inferred
}

// logicalCall is one call a handler made, with all its attempts.
type logicalCall struct {
	spans      []int // attempts in start order
	calleeSvc  string
	calleeOp   string
	multiplied bool // the call was attempted more than once
}

// view is one trace prepared for the detectors. Everything in it is derived
// from the spans alone; edge statistics come in from outside.
type view struct {
	cfg     Config
	tolNs   int64
	t       *schema.Trace
	traceID string
	n       []node
	order   []int // parents before children
	calls   []logicalCall
	skews   []Skew
	hops    []schema.Hop
}

// newView prepares t for the detectors, in nodes, one zeroed node a span
// (nil: allocated).
func newView(t *schema.Trace, cfg Config, nodes []node) *view {
	if nodes == nil {
		nodes = make([]node, len(t.Spans))
	}
	v := &view{
		cfg:     cfg,
		tolNs:   cfg.toleranceNs(),
		t:       t,
		traceID: t.ID.String(),
		n:       nodes,
	}
	for i := range t.Spans {
		s := &t.Spans[i]
		nd := &v.n[i]
		nd.facts = sanitizeFacts(budgetread.Read(s))
		nd.parent = t.Parent(i)
		nd.call = -1
		nd.isError, nd.failed = outcome(s, &nd.facts)
	}
	v.walkOrder()
	v.groupCalls()
	v.correctSkew()
	v.budgets()
	v.paths()
	v.callDescendants()
	return v
}

// finish infers what the spans did not record (est nil: nothing), computes
// the orphaned work and builds the hops into hops, which holds one zero hop
// for each span (nil: a slice of its own). The detectors run after it.
func (v *view) finish(est estimateFunc, hops []schema.Hop) {
	if est != nil {
		v.infer(est)
	}
	v.orphans()
	if hops == nil {
		hops = make([]schema.Hop, len(v.n))
	}
	v.buildHops(hops)
}

// sanitizeFacts clamps the millisecond figures budgetread.Read returns to
// ±maxBudgetMs so they convert to nanoseconds without overflow.
func sanitizeFacts(f budgetread.Facts) budgetread.Facts {
	f.RemainingMs = clampMs(f.RemainingMs)
	f.TimeoutMs = clampMs(f.TimeoutMs)
	f.PropagatedMs = clampMs(f.PropagatedMs)
	f.BackoffMs = clampMs(f.BackoffMs)
	return f
}

func clampMs(p *float64) *float64 {
	switch {
	case p == nil:
		return nil
	case math.IsNaN(*p):
		return nil
	case *p > maxBudgetMs:
		return schema.Ms(maxBudgetMs)
	case *p < -maxBudgetMs:
		return schema.Ms(-maxBudgetMs)
	}
	return p
}

// clampTime converts a recorded time to the signed range the analysis uses.
func clampTime(ns uint64) int64 {
	if ns > uint64(maxTimeNs) {
		return maxTimeNs
	}
	return int64(ns)
}

// msToNs converts a (clamped) millisecond figure to nanoseconds.
func msToNs(ms float64) int64 { return int64(math.Round(ms * 1e6)) }

// nsToMs converts nanoseconds to milliseconds.
func nsToMs(ns int64) float64 { return float64(ns) / 1e6 }

// intAttr reads an integer attribute, or -1 when it is absent or unusable.
func intAttr(as schema.Attributes, key string) int64 {
	a, ok := as.Get(key)
	if !ok {
		return -1
	}
	n, err := strconv.ParseInt(a.Value, 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(a.Value, 64)
		if ferr != nil || f != math.Trunc(f) || math.Abs(f) > 1e15 {
			return -1
		}
		n = int64(f)
	}
	return n
}

// span returns span i of the trace.
func (v *view) span(i int) *schema.Span { return &v.t.Spans[i] }

// spanService names span i's service, for messages.
func (v *view) spanService(i int) string { return serviceName(v.t.Spans[i].Service) }

// isEntry reports whether span i starts a hop: a root or orphan (the top of
// whatever is known), a SERVER or a CONSUMER span.
func (v *view) isEntry(i int) bool {
	return v.n[i].parent < 0 || v.t.Spans[i].Kind.IsEntry()
}

// walkOrder lists the spans parents first, and records each span's top and
// enclosing entry. It is iterative so that a deep chain cannot exhaust the
// stack.
func (v *view) walkOrder() {
	v.order = make([]int, 0, len(v.n))
	for _, top := range v.t.Tops() {
		v.n[top].top = top
		v.n[top].entry = top
		v.order = append(v.order, top)
	}
	for k := 0; k < len(v.order); k++ {
		p := v.order[k]
		for _, c := range v.t.Children[p] {
			v.n[c].top = v.n[p].top
			if v.isEntry(c) {
				v.n[c].entry = c
			} else {
				v.n[c].entry = v.n[p].entry
			}
			v.order = append(v.order, c)
		}
	}
}

// entryChild returns the first SERVER/CONSUMER child of span i, or -1.
func (v *view) entryChild(i int) int {
	for _, c := range v.t.Children[i] {
		if v.t.Spans[c].Kind.IsEntry() {
			return c
		}
	}
	return -1
}

// peerAttrs name the service a call goes to, in order of preference.
var peerAttrs = [...]string{"peer.service", "server.address", "db.system.name", "db.system", "messaging.system", "rpc.service"}

// peer names the service a call goes to from the call's own attributes, for
// calls whose callee recorded no span.
func peer(s *schema.Span) string {
	for _, k := range peerAttrs {
		if a, ok := s.Attrs.Get(k); ok && a.Value != "" {
			return a.Value
		}
	}
	return ""
}

// groupCalls splits the CLIENT/PRODUCER children of every span into logical
// calls and numbers their attempts.
//
// Siblings with the same name and peer are candidate attempts of one call.
// An explicit attempt number (from the call, or from the callee's request
// headers) decides: 1, or a number not above the previous one, starts a new
// call. Without one, a sibling continues the previous call only when the
// previous attempt failed and had ended: a handler that queries the same
// table three times in a loop made three calls, not three attempts.
func (v *view) groupCalls() {
	var cands []attemptCand
	group := func(ids []int) {
		cands = cands[:0]
		for _, i := range ids {
			if s := &v.t.Spans[i]; s.Kind.IsCall() {
				cands = append(cands, attemptCand{name: s.Name, peer: peer(s), i: i})
			}
		}
		// Stable: within a group the start order of ids is kept.
		slices.SortStableFunc(cands, func(a, b attemptCand) int {
			if c := strings.Compare(a.name, b.name); c != 0 {
				return c
			}
			return strings.Compare(a.peer, b.peer)
		})
		for k := 0; k < len(cands); {
			e := k + 1
			for e < len(cands) && cands[e].name == cands[k].name && cands[e].peer == cands[k].peer {
				e++
			}
			v.splitAttempts(cands[k:e])
			k = e
		}
	}
	for _, p := range v.order {
		if len(v.t.Children[p]) > 0 {
			group(v.t.Children[p])
		}
	}
	// Tops have no siblings to be grouped with: each is its own call.
	for _, top := range v.t.Tops() {
		if v.t.Spans[top].Kind.IsCall() {
			v.splitAttempts([]attemptCand{{i: top}})
		}
	}
	v.resolveCallees()
}

// maxRetryScan bounds how many of the calls opened last a sibling without
// an attempt number is matched against, so a handler that fans out
// thousands of failing calls costs linear time
// (BenchmarkManyFailedSiblings): a retry of a call opened more than 64
// calls before it is taken for a new call.
const maxRetryScan = 64

// attemptCand is a CLIENT/PRODUCER span that may be an attempt of a call.
type attemptCand struct {
	name, peer string
	i          int
}

// splitAttempts numbers the attempts among candidate siblings, in start
// order, and opens logical calls.
//
// An explicit attempt number continues the call continued or opened last
// when it is above that call's last attempt, and starts a new call
// otherwise. Without one, a sibling is the next attempt of a call whose last
// attempt failed and had ended when the sibling started (the latest-ended
// such call among the maxRetryScan calls opened last, when several fan-out
// calls failed); otherwise it is a new call. Concurrent siblings are
// therefore never attempts of one another: fan-out to shards and hedged
// requests are separate calls (DESIGN §5).
func (v *view) splitAttempts(cands []attemptCand) {
	type open struct {
		call    int
		last    int    // span of the call's latest attempt
		attempt uint32 // its attempt number
	}
	var opens []open
	recent := -1 // the open call continued or opened last
	for _, c := range cands {
		i := c.i
		explicit := v.n[i].facts.Attempt
		if explicit == 0 {
			if ec := v.entryChild(i); ec >= 0 {
				explicit = v.n[ec].facts.Attempt
			}
		}
		cont := -1 // index in opens of the call i continues
		attempt := uint32(1)
		switch {
		case explicit > 0:
			attempt = explicit
			if recent >= 0 && explicit > opens[recent].attempt {
				cont = recent
			}
		default:
			start := v.t.Spans[i].StartNs
			for k := len(opens) - 1; k >= max(len(opens)-maxRetryScan, 0); k-- {
				last := &v.t.Spans[opens[k].last]
				if !v.n[opens[k].last].failed || start < last.EndNs {
					continue
				}
				if cont < 0 || last.EndNs > v.t.Spans[opens[cont].last].EndNs {
					cont = k
				}
			}
			if cont >= 0 {
				attempt = opens[cont].attempt + 1
			}
		}
		if cont < 0 {
			v.calls = append(v.calls, logicalCall{})
			opens = append(opens, open{call: len(v.calls) - 1})
			cont = len(opens) - 1
		}
		o := &opens[cont]
		lc := &v.calls[o.call]
		lc.spans = append(lc.spans, i)
		if attempt > 1 || len(lc.spans) > 1 {
			lc.multiplied = true
		}
		v.n[i].call = o.call
		v.n[i].attempt = attempt
		o.last, o.attempt = i, attempt
		recent = cont
	}
}

// resolveCallees names the callee of every logical call once for all its
// attempts, so that an attempt that never reached the callee (and so has no
// server span) gets the same path as the attempts that did.
//
// A call none of whose attempts was answered takes the callee that answered
// the same caller's calls of the same name to the same peer elsewhere in the
// trace: under retries, the last attempt below a retried call is often cut
// off before the callee records anything, and naming it from its peer
// attribute (an address) would file it under a path of its own, splitting
// one leaf edge in two and undercounting its calls. When those calls were
// answered by different callees (an address in front of several services),
// or by none, or the call names no peer, it is named from its own
// attributes.
func (v *view) resolveCallees() {
	var unanswered []int
	for ci := range v.calls {
		lc := &v.calls[ci]
		for _, i := range lc.spans {
			if ec := v.entryChild(i); ec >= 0 {
				s := &v.t.Spans[ec]
				lc.calleeSvc, lc.calleeOp = serviceName(s.Service), s.Name
				break
			}
		}
		if lc.calleeSvc == "" {
			unanswered = append(unanswered, ci)
		}
	}
	if len(unanswered) == 0 {
		return
	}
	type via struct{ caller, name, peer string }
	viaOf := func(lc *logicalCall) via {
		s := &v.t.Spans[lc.spans[0]]
		return via{s.Service, s.Name, peer(s)}
	}
	type target struct{ svc, op string }
	answered := map[via]target{}
	ambiguous := map[via]bool{}
	for ci := range v.calls {
		lc := &v.calls[ci]
		if lc.calleeSvc == "" {
			continue
		}
		key, t := viaOf(lc), target{lc.calleeSvc, lc.calleeOp}
		if prev, ok := answered[key]; ok && prev != t {
			ambiguous[key] = true
		}
		answered[key] = t
	}
	for _, ci := range unanswered {
		lc := &v.calls[ci]
		key := viaOf(lc)
		if t, ok := answered[key]; ok && key.peer != "" && !ambiguous[key] {
			lc.calleeSvc, lc.calleeOp = t.svc, t.op
			continue
		}
		lc.calleeSvc, lc.calleeOp = key.peer, v.t.Spans[lc.spans[0]].Name
		if lc.calleeSvc == "" {
			lc.calleeSvc = unknownService
		}
	}
}

// serviceName returns s, or the OpenTelemetry placeholder for a resource
// without service.name.
func serviceName(s string) string {
	if s == "" {
		return "unknown_service"
	}
	return s
}

// budgets computes, parents first, each span's deadline D, the root deadline
// and the give-up instant G.
//
// Nothing crosses an asynchronous boundary (asyncStart) unless the message
// carried a budget: a consumer starts a new chain, whose deadline is the one
// its message brought, if any, and whose callers are nobody.
func (v *view) budgets() {
	for _, i := range v.order {
		nd := &v.n[i]
		async := v.asyncStart(i)
		if p := nd.parent; p >= 0 && !async {
			pn := &v.n[p]
			nd.hasDeadline, nd.deadline, nd.clockSlack = pn.hasDeadline, pn.deadline, pn.clockSlack
			// A budget passed down as a relative figure starts again when
			// the request arrives: the time in transit is the callee's too.
			// (bounded by the call's own duration, so a server clock that
			// runs far ahead cannot buy a subtree more than its call took).
			// A call that passed nothing on restarts no clock: the deadline
			// above stays where it was.
			if v.t.Spans[p].Kind == schema.KindClient && v.isEntry(i) && v.passesRelativeBudget(p, i) {
				nd.clockSlack += min(max(nd.start-pn.start, 0), pn.end-pn.start)
			}
			nd.hasEdge, nd.edge = pn.hasEdge, pn.edge
			nd.hasCeiling, nd.ceiling = pn.hasCeiling, pn.ceiling
			nd.hasGiveUp, nd.giveUp, nd.giveUpWhy, nd.giveUpBy = pn.hasGiveUp, pn.giveUp, pn.giveUpWhy, pn.giveUpBy
			if v.t.Spans[p].Kind == schema.KindClient {
				nd.earlierGiveUp(pn.end, giveUpClient, serviceName(v.t.Spans[p].Service))
			}
		}
		if r := nd.facts.RemainingMs; r != nil {
			if !nd.hasCeiling || *r < nd.ceiling {
				nd.hasCeiling, nd.ceiling = true, *r
			}
			d := nd.start + msToNs(*r)
			own := v.clockSlack(i)
			if !nd.hasDeadline || d < nd.deadline {
				nd.hasDeadline, nd.deadline, nd.clockSlack = true, d, own
			} else {
				// The hop says what it had: its own deadline is at most d
				// (read up to own later), whatever the transits above.
				nd.clockSlack = min(nd.clockSlack, d-nd.deadline+own)
			}
			// The root deadline is the root's budget. When the root has none
			// (a browser or mobile client without instrumentation for it),
			// the topmost hop that set the budget by policy stands in. A
			// message's budget is the root deadline of the chain it starts.
			if !nd.hasEdge && (async || v.isRoot(nd.top) && (nd.parent < 0 || nd.facts.Source == schema.SourceEdge)) {
				nd.hasEdge, nd.edge = true, d
			}
		}
		if nd.hasEdge {
			nd.earlierGiveUp(nd.edge, giveUpDeadline, "")
		}
		for _, c := range nd.facts.Cancellations {
			nd.earlierGiveUp(clampTime(c.TimeNs)+nd.shift, giveUpCancel, c.Source)
		}
	}
}

// passesRelativeBudget reports whether call p may have passed its budget
// to entry i as a relative figure, which i's clock then restarted on
// arrival: p records the budget it sent (budget.propagated_ms, or a budget
// request header), i records one it received, or the call is gRPC, whose
// clients send the caller's deadline as grpc-timeout whenever there is one.
// A plain HTTP call that records none of these passed no budget on.
func (v *view) passesRelativeBudget(p, i int) bool {
	return v.n[p].facts.PropagatedMs != nil || v.n[i].facts.RemainingMs != nil ||
		isGRPC(v.t.Spans[p].Attrs) || isGRPC(v.t.Spans[i].Attrs)
}

// asyncStart reports whether span i starts a new chain of waiting across an
// asynchronous boundary (DESIGN §5): it is a child of a PRODUCER span, or a
// CONSUMER span under a span of another service. Whoever published the
// message did not wait for it to be processed, so neither their deadline
// nor their giving up reaches the consumer, unless the message carried a
// budget of its own (budget.remaining_ms or a budget header on the
// consumer's span). Span links never carry a deadline: they are not
// parents.
func (v *view) asyncStart(i int) bool {
	p := v.n[i].parent
	if p < 0 {
		return false
	}
	ps, s := &v.t.Spans[p], &v.t.Spans[i]
	return ps.Kind == schema.KindProducer || (s.Kind == schema.KindConsumer && ps.Service != s.Service)
}

// clockSlack returns how much later than span i's start its recorded
// budget may have been read (nanoseconds).
//
// budget.remaining_ms is the budget the hop had when it started the
// request, but instrumentation reads it where it can: a middleware or an
// interceptor that runs after the SERVER span started and before the
// handler's first operation. Which instant in between is not recorded. R is
// computed from the span's start, and the verdicts that rest on R being
// small enough (timeout_inversion, budget_reset, unfunded_retry_policy,
// expired_on_arrival) must also hold had the clock started this much later:
// up to the start of the span's first child (or its end), and no more than
// the skew tolerance. A budget read from a request header was sent before
// the span started and needs no allowance, nor does a CLIENT span carrying
// the edge budget (no middleware runs there). Below, each hop that received
// the budget as a relative figure (a header, grpc-timeout) started its clock
// on arrival, so the time between its caller's CLIENT span and its own
// start is added (budgets), at most the call's duration, where the call
// passed a relative budget on at all (passesRelativeBudget). That transit is
// measured, not guessed: under load it reaches tens of milliseconds, and a
// deadline passed on as a relative figure really is that much later below.
// A hop that records its budget says how much later its own deadline is
// (its deadline minus D, plus its own clockSlack), and the allowance below
// it is no more than that.
func (v *view) clockSlack(i int) int64 {
	nd := &v.n[i]
	if nd.facts.Inferred || !v.t.Spans[i].Kind.IsEntry() {
		return 0
	}
	at := min(nd.end, nd.start+v.tolNs)
	for _, c := range v.t.Children[i] {
		at = min(at, v.n[c].start)
	}
	return max(at-nd.start, 0)
}

// orphans computes the orphaned work of entry spans from G. Where no root
// deadline was recorded, the entry point's inferred one stands in.
func (v *view) orphans() {
	for i := range v.n {
		nd := &v.n[i]
		if !nd.hasEdge && nd.infEdge.known && (!nd.hasGiveUp || nd.infEdge.at < nd.giveUp) {
			nd.earlierGiveUp(nd.infEdge.at, giveUpDeadline, "")
			nd.giveUpInf = nd.infEdge.conf
		}
		if v.t.Spans[i].Kind.IsEntry() && nd.hasGiveUp {
			from := max(nd.start, nd.giveUp)
			if over := nd.end - from; over > v.tolNs {
				nd.orphanNs = over
			}
		}
	}
}

// earlierGiveUp records at as the give-up instant when it is the earliest so
// far.
func (nd *node) earlierGiveUp(at int64, why giveUpReason, by string) {
	if !nd.hasGiveUp || at < nd.giveUp {
		nd.hasGiveUp, nd.giveUp, nd.giveUpWhy, nd.giveUpBy = true, at, why, by
	}
}

// slackMs is span i's clockSlack in milliseconds: how much more than R the
// request may really have had left at span i (0 when R was not recorded).
func (v *view) slackMs(i int) float64 { return nsToMs(v.n[i].clockSlack) }

// overBudget reports whether need, a call's timeout or what its retry
// policy needs, is at least what the request had left when call span i
// started: r. Either may be recorded or inferred.
//
// Two comparisons, each sound however the clocks read. need reaching the
// smallest budget recorded at or above the call (ceiling), when need is
// recorded, needs no clock
// reading: the call started after every budget above it was read, so it
// had less. Otherwise r is a difference of two clock readings (the span
// that set the deadline, and this one), which may be on different hosts;
// and even on one host, time synchronisation steps the wall clock the
// spans' start times come from, not the monotonic clock their durations
// come from. need must pass r, with the allowance for where the budget's
// clock started (clockSlack, recorded deadlines only), by the skew
// tolerance.
func (v *view) overBudget(i int, need inferredMs, r inferredMs) bool {
	nd := &v.n[i]
	if !need.inferred && nd.hasCeiling && need.ms >= nd.ceiling {
		return true
	}
	left := r.ms + nsToMs(v.tolNs)
	if !r.inferred {
		left += v.slackMs(i)
	}
	return need.ms >= left
}

// remaining returns R at span i's start: the deadline D minus the start.
func (v *view) remaining(i int) (float64, bool) {
	nd := &v.n[i]
	if !nd.hasDeadline {
		return 0, false
	}
	return nsToMs(nd.deadline - nd.start), true
}

// paths computes every span's path and caller/callee names, parents first.
func (v *view) paths() {
	for _, i := range v.order {
		nd := &v.n[i]
		s := &v.t.Spans[i]
		if v.isEntry(i) {
			elem := serviceName(s.Service) + ":" + s.Name
			switch {
			case nd.parent < 0 && v.isRoot(i):
				nd.entryPath, nd.entryDepth = elem, 1
			case nd.parent < 0:
				nd.entryPath, nd.entryDepth = pathMissing+elem, 2
			default:
				pe := &v.n[v.n[nd.parent].entry]
				nd.entryPath, nd.entryDepth = extendPath(pe.entryPath, pe.entryDepth, elem)
				ps := &v.t.Spans[v.n[nd.parent].entry]
				nd.callerSvc, nd.callerOp = serviceName(ps.Service), ps.Name
				nd.calleeSvc, nd.calleeOp = serviceName(s.Service), s.Name
			}
			nd.path = nd.entryPath
		} else {
			nd.path = v.n[nd.entry].entryPath
		}
		if nd.call >= 0 {
			lc := &v.calls[nd.call]
			en := &v.n[nd.entry]
			es := &v.t.Spans[nd.entry]
			nd.path, _ = extendPath(en.entryPath, en.entryDepth, lc.calleeSvc+":"+lc.calleeOp)
			nd.callerSvc, nd.callerOp = serviceName(es.Service), es.Name
			nd.calleeSvc, nd.calleeOp = lc.calleeSvc, lc.calleeOp
		}
	}
}

// isRoot reports whether top span i is a real root (no parent id) rather
// than a span whose parent is missing.
func (v *view) isRoot(i int) bool { return v.t.Spans[i].ParentSpanID.IsZero() }

// extendPath appends elem to a path of depth elements, or marks the path as
// truncated once it holds maxPathElems.
func extendPath(path string, depth int, elem string) (string, int) {
	switch {
	case depth < maxPathElems:
		return path + pathSep + elem, depth + 1
	case depth == maxPathElems:
		return path + pathSep + pathTruncated, depth + 1
	}
	return path, depth
}

// callDescendants marks the spans with a CLIENT/PRODUCER span below them,
// children before parents.
func (v *view) callDescendants() {
	for k := len(v.order) - 1; k >= 0; k-- {
		i := v.order[k]
		if p := v.n[i].parent; p >= 0 && (v.n[i].callDesc || v.t.Spans[i].Kind.IsCall()) {
			v.n[p].callDesc = true
		}
	}
}

// buildHops fills one schema.Hop per span, in the trace's span order.
func (v *view) buildHops(hops []schema.Hop) {
	v.hops = hops
	for i := range v.n {
		s := &v.t.Spans[i]
		nd := &v.n[i]
		h := &v.hops[i]
		h.TraceID = s.TraceID
		h.SpanID = s.SpanID
		h.ParentSpanID = s.ParentSpanID
		h.Service = serviceName(s.Service)
		h.Operation = s.Name
		h.Kind = s.Kind
		h.Path = nd.path
		h.RootPath = v.n[nd.top].entryPath
		h.CallerService, h.CallerOperation = nd.callerSvc, nd.callerOp
		h.CalleeService, h.CalleeOperation = nd.calleeSvc, nd.calleeOp
		h.StartNs = s.StartNs
		h.DurationNs = s.DurationNs()
		if s.Kind.IsCall() {
			if ec := v.entryChild(i); ec >= 0 {
				h.CalleeDurationNs = v.t.Spans[ec].DurationNs()
			}
		}
		h.IsError = nd.isError
		h.TimedOut = nd.facts.TimedOut
		if r, ok := v.remaining(i); ok {
			h.RemainingMs = schema.Ms(r)
		}
		h.BudgetMs = copyMs(nd.facts.RemainingMs)
		h.BudgetSource = string(nd.facts.Source)
		h.TimeoutMs = copyMs(nd.facts.TimeoutMs)
		h.Attempt = nd.attempt
		h.MaxAttempts = nd.facts.MaxAttempts
		h.OrphanedMs = nsToMs(nd.orphanNs)
		h.Rejected = nd.facts.Rejected
		h.Inferred = nd.facts.Inferred
		if r, ok := v.effectiveRemaining(i); ok && r.inferred {
			h.InferredRemainingMs, h.InferenceConfidence = schema.Ms(r.ms), r.conf
		}
		if nd.facts.TimeoutMs == nil && nd.timeout.inferred {
			h.InferredTimeoutMs, h.InferenceConfidence = schema.Ms(nd.timeout.ms), nd.timeout.conf
		}
	}
	setPathCalls(v.hops)
}

// setPathCalls sets Hop.PathCalls on the first entry or call hop of each
// path: the path's entry hops in the trace, or its call hops when it has
// no entry hop (the store's entryHop and callHop conditions). Not on a hop
// of work inside a service, which Thin may leave out of the store.
func setPathCalls(hops []schema.Hop) {
	type count struct {
		first          int
		entries, calls uint32
	}
	byPath := make(map[string]*count)
	for i := range hops {
		h := &hops[i]
		call, entry := h.Kind.IsCall(), h.Kind.IsEntry() || h.ParentSpanID.IsZero()
		if !call && !entry {
			continue
		}
		c := byPath[h.Path]
		if c == nil {
			c = &count{first: i}
			byPath[h.Path] = c
		}
		if call {
			c.calls++
		} else {
			c.entries++
		}
	}
	for _, c := range byPath {
		n := c.entries
		if n == 0 {
			n = c.calls
		}
		hops[c.first].PathCalls = n
	}
}

// copyMs copies an optional figure so hops never alias the facts' storage.
func copyMs(p *float64) *float64 {
	if p == nil {
		return nil
	}
	return schema.Ms(*p)
}
