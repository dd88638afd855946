package schema

// Hop is one analysed span: where it sits on its call path and what budget it
// had. The analyzer makes one Hop per span; per-path and per-edge figures are
// aggregates over hops, so the store never self-joins spans at query time.
// The store keeps every hop but those analyze.Thin leaves out: work inside a
// service whose parent's hop says all of it, which analyze.Rebuild rebuilds.
//
// For a CLIENT/PRODUCER span the hop is a call on the edge
// CallerService/CallerOperation → CalleeService/CalleeOperation; for a
// SERVER/CONSUMER span it is the entry of that edge seen from the callee.
type Hop struct {
	TraceID      TraceID
	SpanID       SpanID
	ParentSpanID SpanID
	Service      string
	Operation    string
	Kind         SpanKind
	Path         string // "svc:op > svc:op > …", retries collapsed
	RootPath     string // path of the trace's root entry, to group hops by request type

	CallerService   string
	CallerOperation string
	CalleeService   string
	CalleeOperation string

	StartNs    uint64
	DurationNs uint64
	// CalleeDurationNs is, for a call, how long the callee's own entry span
	// took (0 when the callee recorded none). A call that timed out ends at
	// the caller's timeout, so edge latency figures use this when known.
	CalleeDurationNs uint64
	IsError          bool // status error, or an error/timeout status code
	TimedOut         bool // the call ended in a timeout or cancellation

	// RemainingMs is the time the request really had left at this span's
	// start (R(C) in DESIGN §5), when any ancestor carried a budget.
	RemainingMs *float64
	// BudgetMs is the budget.remaining_ms recorded on this span itself.
	BudgetMs     *float64
	BudgetSource string
	TimeoutMs    *float64
	Attempt      uint32 // 1-based; 0 when not a call
	MaxAttempts  uint32
	OrphanedMs   float64 // work after the caller gave up, 0 when none
	Rejected     bool
	Inferred     bool // budget facts inferred rather than recorded

	// InferredTimeoutMs is, for a call that recorded no timeout, the
	// timeout estimated from the durations of its edge's timed-out calls
	// (zero-instrumentation inference); nil when none was usable.
	InferredTimeoutMs *float64
	// InferredRemainingMs is, for a span without a recorded budget above
	// it, what was left at its start of the earliest deadline its callers'
	// timeouts (recorded or inferred) set; nil when none is known.
	InferredRemainingMs *float64
	// InferenceConfidence (0 to 1) is how sure budgetd is of the inferred
	// figures: the timeout's when there is one, else the remaining budget's;
	// 0 when nothing was inferred.
	InferenceConfidence float64

	// PathCalls is set on the first hop (in span order) of each path in
	// the trace: how many times the trace went down the path — its entry
	// hops, or its call hops where the path has no entry hop (an
	// uninstrumented callee). 0 on every other hop. Calls per trace per path
	// are then a plain aggregate instead of a grouping by path and trace.
	PathCalls uint32

	// AnalyzedNs is when the analysis that wrote this hop ran (Unix ns). A
	// trace re-opened by late spans is analysed again; the store keeps the
	// latest analysis of each span. Zero for hops from offline analysis.
	AnalyzedNs uint64
}

// Ms is a helper for building optional millisecond figures.
func Ms(v float64) *float64 { return &v }

// EdgeState is one replica's statistics of one edge over its edge window,
// shared through the store so that every replica judges edge-level
// verdicts (latency_inversion) over the samples of all of them (DESIGN §7).
// State is opaque here: the analysis encodes and merges it.
type EdgeState struct {
	// Replica names the budgetd process that wrote the state.
	Replica string
	// EvaluatedNs is when the replica took the state (Unix nanoseconds).
	EvaluatedNs     uint64
	CallerService   string
	CallerOperation string
	CalleeService   string
	CalleeOperation string
	State           []byte
}
