package budget

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Request headers that carry a budget. Transport writes HeaderTimeoutMs (and
// HeaderGRPCTimeout when asked); Server reads all three.
const (
	// HeaderTimeoutMs carries the remaining budget in decimal milliseconds.
	HeaderTimeoutMs = "X-Request-Timeout-Ms"
	// HeaderGRPCTimeout carries the remaining budget in the grpc-timeout
	// grammar (1 to 8 digits and a unit: H M S m u n).
	HeaderGRPCTimeout = "Grpc-Timeout"
	// HeaderDeadline carries an absolute deadline in Unix epoch
	// milliseconds. It depends on the two hosts' clocks agreeing, so Server
	// reads it only when ServerConfig.AcceptDeadlineHeader is set.
	HeaderDeadline = "X-Request-Deadline"
)

// Span attribute and event names. They mirror the budget attribute contract
// in docs/attributes.md (and budgetd's schema package, which this package
// must not import); change them only together with that page.
const (
	AttrRemainingMs  = "budget.remaining_ms"  // SERVER: budget left when the hop started the request
	AttrSource       = "budget.source"        // SERVER: propagated | edge | default
	AttrTimeoutMs    = "budget.timeout_ms"    // CLIENT: timeout this attempt was given
	AttrPropagatedMs = "budget.propagated_ms" // CLIENT: budget sent downstream
	AttrAttempt      = "budget.attempt"       // CLIENT: 1-based attempt number
	AttrMaxAttempts  = "budget.max_attempts"  // CLIENT: retry policy in force
	AttrBackoffMs    = "budget.backoff_ms"    // CLIENT: retry policy in force
	AttrRejected     = "budget.rejected"      // SERVER: refused because the budget was too small
	EventCancelled   = "budget.cancelled"     // the hop observed cancellation of its work
	AttrCancelSource = "budget.cancel_source" // on EventCancelled: deadline | caller_disconnect
)

// Values of AttrSource.
const (
	// SourcePropagated: the caller sent the budget.
	SourcePropagated = "propagated"
	// SourceEdge: the request arrived without a budget at an entry point,
	// which set one by policy.
	SourceEdge = "edge"
	// SourceDefault: the request arrived without a budget at an inner
	// service, which fell back to a local default. The chain of budgets was
	// reset here; budgetd reports it as budget_reset.
	SourceDefault = "default"
)

// Values of AttrCancelSource.
const (
	// CancelDeadline: the request's deadline passed while the work ran.
	CancelDeadline = "deadline"
	// CancelCallerDisconnect: the caller went away (closed the connection,
	// reset the stream) before the deadline.
	CancelCallerDisconnect = "caller_disconnect"
)

// ErrBudgetExhausted reports that work was not started because the remaining
// budget could not pay for it: Transport and GRPCClient refuse to send a call
// with nothing left after the response margin, and Retry refuses an attempt
// (or the wait before it) that cannot finish in time.
//
// Errors that match it with errors.Is also match context.DeadlineExceeded,
// report Timeout() == true (as net.Error does) and carry the gRPC status
// DEADLINE_EXCEEDED, so code that maps deadline errors to 504 or to a gRPC
// status handles them without knowing this package.
var ErrBudgetExhausted = errors.New("budget exhausted")

// exhaustedError is the error behind ErrBudgetExhausted; detail says what was
// not started and why.
type exhaustedError struct {
	detail string
}

func (e *exhaustedError) Error() string { return e.detail + ": " + ErrBudgetExhausted.Error() }

// Is makes the error match ErrBudgetExhausted and context.DeadlineExceeded:
// the deadline has not passed yet, but the time left is too short to use.
func (e *exhaustedError) Is(target error) bool {
	return target == ErrBudgetExhausted || target == context.DeadlineExceeded
}

// Timeout reports true, so url.Error.Timeout() and net.Error checks treat a
// refused call as a timeout.
func (e *exhaustedError) Timeout() bool { return true }

// ErrorType names the error for OpenTelemetry's error.type attribute, which
// otelhttp records on the CLIENT span of a refused request. It is distinct
// from "timeout" on purpose: a call refused before it was sent is a sign of
// saturation upstream, not of a slow dependency.
func (e *exhaustedError) ErrorType() string { return "budget_exhausted" }

// GRPCStatus lets grpc-go send a refusal as DEADLINE_EXCEEDED.
func (e *exhaustedError) GRPCStatus() *status.Status {
	return status.New(codes.DeadlineExceeded, e.Error())
}

// Attempt tells Transport and GRPCClient which attempt of a logical call the
// current request is, and under which retry policy, so they can record
// budget.attempt, budget.max_attempts and budget.backoff_ms on its CLIENT
// span. Retry sets it; a retry loop of your own can set it with WithAttempt.
type Attempt struct {
	// Number is the 1-based attempt number.
	Number int
	// Max is the number of attempts the policy allows in total; 0 when
	// unknown, in which case no policy attributes are recorded.
	Max int
	// Backoff is the policy's base wait between attempts.
	Backoff time.Duration
}

type attemptKey struct{}

// WithAttempt returns a context that carries a, for the Transport or
// GRPCClient that sends the request.
func WithAttempt(ctx context.Context, a Attempt) context.Context {
	return context.WithValue(ctx, attemptKey{}, a)
}

// attemptFrom returns the attempt ctx carries; without one the call is a
// first attempt under no known policy.
func attemptFrom(ctx context.Context) Attempt {
	if a, ok := ctx.Value(attemptKey{}).(Attempt); ok && a.Number >= 1 {
		return a
	}
	return Attempt{Number: 1}
}

// attrs returns the CLIENT span attributes that describe a.
func (a Attempt) attrs() []attribute.KeyValue {
	kv := []attribute.KeyValue{attribute.Int(AttrAttempt, a.Number)}
	if a.Max > 0 {
		kv = append(kv,
			attribute.Int(AttrMaxAttempts, a.Max),
			attribute.Float64(AttrBackoffMs, ms(a.Backoff)),
		)
	}
	return kv
}

// ms converts d to the fractional milliseconds the attributes carry.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// callLimit works out how long an outgoing call started at now may take: what
// is left of ctx's deadline after margin, capped by timeout when that is > 0.
// bounded is false when neither a deadline nor a timeout applies. A call with
// less than a millisecond is refused, because the budget it could send
// downstream would be zero: the callee would reject it anyway, after a round
// trip.
func callLimit(ctx context.Context, now time.Time, margin, timeout time.Duration) (limit time.Duration, bounded bool, err error) {
	margin = max(margin, 0)
	dl, hasDeadline := ctx.Deadline()
	if hasDeadline {
		limit, bounded = dl.Sub(now)-margin, true
	}
	if timeout > 0 && (!bounded || timeout < limit) {
		limit, bounded = timeout, true
	}
	if bounded && limit < time.Millisecond {
		detail := "send request: timeout " + timeout.String()
		if hasDeadline {
			detail = "send request: " + dl.Sub(now).String() + " left, response margin " + margin.String()
		}
		return 0, false, &exhaustedError{detail: detail}
	}
	return limit, bounded, nil
}
