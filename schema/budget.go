package schema

// The budget attribute contract of DESIGN §4 and docs/attributes.md.
const (
	AttrRemainingMs  = "budget.remaining_ms"  // SERVER/CONSUMER: budget left when the hop started the request
	AttrSource       = "budget.source"        // SERVER: propagated | edge | default | none
	AttrTimeoutMs    = "budget.timeout_ms"    // CLIENT/PRODUCER: timeout of this attempt
	AttrPropagatedMs = "budget.propagated_ms" // CLIENT: budget sent downstream
	AttrAttempt      = "budget.attempt"       // CLIENT: 1-based attempt number
	AttrMaxAttempts  = "budget.max_attempts"  // CLIENT: retry policy in force
	AttrBackoffMs    = "budget.backoff_ms"    // CLIENT: retry policy in force
	AttrRejected     = "budget.rejected"      // SERVER: refused because the budget was too small
	EventCancelled   = "budget.cancelled"     // any span: the hop observed cancellation
	AttrCancelSource = "budget.cancel_source" // on EventCancelled: caller_disconnect | deadline | upstream
)

// Fallback attributes from which a budget is inferred when budget.* is absent.
const (
	AttrHeaderRequestTimeoutMs = "http.request.header.x-request-timeout-ms"
	AttrHeaderGRPCTimeout      = "http.request.header.grpc-timeout"
	AttrMetadataGRPCTimeout    = "rpc.request.metadata.grpc-timeout"
	AttrHeaderEnvoyExpectedMs  = "http.request.header.x-envoy-expected-rq-timeout-ms"
	AttrHeaderRequestDeadline  = "http.request.header.x-request-deadline" // absolute epoch ms
	AttrHTTPResendCount        = "http.request.resend_count"
	AttrGRPCPreviousAttempts   = "rpc.request.metadata.grpc-previous-rpc-attempts"
	AttrHeaderEnvoyAttempt     = "http.request.header.x-envoy-attempt-count"
	AttrErrorType              = "error.type"
	AttrHTTPStatusCode         = "http.response.status_code"
	AttrRPCGRPCStatusCode      = "rpc.grpc.status_code"
	// AttrRPCResponseStatusCode is the newer semantic-convention name for the
	// RPC status, a string such as "DEADLINE_EXCEEDED"; current otelgrpc
	// emits it instead of rpc.grpc.status_code.
	AttrRPCResponseStatusCode = "rpc.response.status_code"
	// AttrHTTPStatusCodeOld is the HTTP status attribute of the semantic
	// conventions before 1.20, which older instrumentations still emit
	// instead of http.response.status_code.
	AttrHTTPStatusCodeOld = "http.status_code"
	// AttrRPCSystemName and the older AttrRPCSystem name the RPC system
	// ("grpc", "jsonrpc", "dubbo", …). They say whether a number in
	// rpc.response.status_code is a gRPC code: other systems number their
	// codes differently.
	AttrRPCSystemName = "rpc.system.name"
	AttrRPCSystem     = "rpc.system"
)

// The exception event of the semantic conventions, which SDKs record when a
// span ends in an exception (RecordError, record_exception, …).
const (
	EventException       = "exception"
	AttrExceptionType    = "exception.type"
	AttrExceptionMessage = "exception.message"
)

// BudgetSource says where a hop's budget came from.
type BudgetSource string

// The budget sources.
const (
	SourceUnknown    BudgetSource = ""
	SourcePropagated BudgetSource = "propagated" // received from the caller
	SourceEdge       BudgetSource = "edge"       // set here by policy (an entry point)
	SourceDefault    BudgetSource = "default"    // a local default: the chain was reset
	SourceNone       BudgetSource = "none"       // the hop has no budget
)

// Cancellation is one budget.cancelled event on a span.
type Cancellation struct {
	TimeNs uint64
	Source string // caller_disconnect | deadline | upstream | "" when not recorded
}

// BudgetFacts is what one span says about its deadline budget, read from the
// budget.* attributes or, where those are absent, inferred from the fallbacks
// of DESIGN §4. Pointers are nil when the span says nothing.
type BudgetFacts struct {
	RemainingMs  *float64
	Source       BudgetSource
	TimeoutMs    *float64
	PropagatedMs *float64
	Attempt      uint32 // 1-based; 0 when unknown
	MaxAttempts  uint32 // 0 when unknown
	BackoffMs    *float64
	Rejected     bool
	// TimedOut is true when the span's status says the call ended in a
	// timeout or a cancellation: it gave up, or was given up on, rather than
	// getting its answer. The evidence and its precedence are those of
	// docs/attributes.md §3: error.type, gRPC and HTTP status codes in both
	// semantic-convention generations, and, on a failed span without an RPC
	// status, the status description and exception events.
	TimedOut bool
	// Cancelled is true when the status says the call was cancelled rather
	// than timed out (error.type containing "cancel", gRPC 1, HTTP 499,
	// "context canceled", TaskCanceledException…): someone above gave up,
	// so the span's duration says nothing about its own timeout. TimedOut
	// is true too. A cancellation the evidence explains by a timeout (.NET's
	// "canceled due to the configured HttpClient.Timeout") is a timeout.
	Cancelled     bool
	Cancellations []Cancellation
	// Inferred is true when RemainingMs came from a header fallback rather
	// than budget.remaining_ms. On a CLIENT/PRODUCER span the request
	// headers are the budget sent downstream, so there the fallback fills
	// PropagatedMs instead and Inferred says that PropagatedMs was inferred.
	Inferred bool
	// Invalid lists the attributes whose values could not be used. They were
	// ignored; callers count them.
	Invalid []InvalidValue
}

// InvalidValue names an attribute whose value was ignored, and why.
type InvalidValue struct {
	Key    string
	Reason string
}
