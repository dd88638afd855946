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
