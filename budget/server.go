package budget

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ServerConfig is the budget policy of a service for incoming requests. Start
// from DefaultServerConfig and change what your service needs.
type ServerConfig struct {
	// Default is the budget of a request that arrives without one (no usable
	// header, or a gRPC call without a deadline). Must be > 0 and ≤ Max.
	Default time.Duration
	// Max caps an incoming budget: a caller asking for more gets Max, so a
	// hostile or mistaken header cannot pin this service's resources. Must
	// be > 0.
	Max time.Duration
	// Min is the least budget worth starting the work for. A request that
	// arrives with less, or with nothing left at all, is refused at once
	// (504 Gateway Timeout, or DEADLINE_EXCEEDED for gRPC) without calling
	// the handler, and its span gets budget.rejected=true. Set it to what
	// the cheapest useful answer takes. Must be ≥ 0 and ≤ Default.
	Min time.Duration
	// Edge marks an entry point, where giving a request without a budget the
	// Default is policy (budget.source=edge). On an inner service the same
	// fallback resets the chain of budgets and is recorded as
	// budget.source=default, which budgetd reports as budget_reset.
	Edge bool
	// AcceptDeadlineHeader makes an HTTP server read the absolute
	// x-request-deadline header (Unix epoch milliseconds) besides the
	// relative ones. It is off by default because it relies on the two
	// hosts' clocks agreeing: a sender whose clock runs behind makes every
	// request look expired.
	AcceptDeadlineHeader bool
	// MaxClockSkew is the most the sender's clock may run ahead of ours. It
	// is subtracted from every budget read from x-request-deadline, so a
	// skewed clock cannot give a request more time than it was sent with.
	// Must be ≥ 0.
	MaxClockSkew time.Duration
}

// DefaultServerConfig returns the policy of an inner service: 5 s for a
// request without a budget (recorded as a chain reset), at most 30 s
// whatever the caller asks, at least 1 ms to start, and x-request-deadline
// ignored (50 ms of skew allowed when it is enabled).
func DefaultServerConfig() ServerConfig {
	return ServerConfig{
		Default:      5 * time.Second,
		Max:          30 * time.Second,
		Min:          time.Millisecond,
		MaxClockSkew: 50 * time.Millisecond,
	}
}

// Validate reports every field that breaks its documented bounds.
func (c ServerConfig) Validate() error {
	var errs []error
	if c.Default <= 0 {
		errs = append(errs, fmt.Errorf("budget: ServerConfig.Default must be > 0, got %v", c.Default))
	}
	if c.Max <= 0 {
		errs = append(errs, fmt.Errorf("budget: ServerConfig.Max must be > 0, got %v", c.Max))
	}
	if c.Default > 0 && c.Max > 0 && c.Default > c.Max {
		errs = append(errs, fmt.Errorf("budget: ServerConfig.Default must be ≤ Max (%v), got %v", c.Max, c.Default))
	}
	if c.Min < 0 {
		errs = append(errs, fmt.Errorf("budget: ServerConfig.Min must be ≥ 0, got %v", c.Min))
	}
	if c.Default > 0 && c.Min > c.Default {
		errs = append(errs, fmt.Errorf("budget: ServerConfig.Min must be ≤ Default (%v), got %v", c.Default, c.Min))
	}
	if c.MaxClockSkew < 0 {
		errs = append(errs, fmt.Errorf("budget: ServerConfig.MaxClockSkew must be ≥ 0, got %v", c.MaxClockSkew))
	}
	return errors.Join(errs...)
}

// Server applies a ServerConfig to incoming requests. It is safe for
// concurrent use and holds no per-request state.
type Server struct {
	cfg ServerConfig
}

// NewServer returns a Server for cfg, or cfg's validation error.
func NewServer(cfg ServerConfig) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Server{cfg: cfg}, nil
}

// Middleware returns next bounded by each request's budget.
//
// The budget is the smallest usable value among x-request-timeout-ms,
// grpc-timeout and (when enabled) x-request-deadline, capped at Max; Default
// when none is usable. A request with less than Min (or nothing) left gets
// 504 Gateway Timeout and next is not called. Otherwise next runs with the
// request context's deadline set to the budget, so everything that honours
// the context (outgoing calls through Transport, database drivers) stops when
// it runs out, or when the caller disconnects.
//
// The budget's clock starts when the request arrived (arrival: the start
// of the SERVER span otelhttp began), not when the middleware runs.
//
// It records budget.remaining_ms, budget.source and, on refusal,
// budget.rejected on the span of the request context, and adds the event
// budget.cancelled when the context ends before next returns. Wrap the
// result in otelhttp.NewHandler so that span is the SERVER span.
func (s *Server) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := arrival(r.Context())
		remaining, source := s.cfg.Default, s.fallbackSource()
		if d, ok := headerBudget(r.Header, now, s.cfg.AcceptDeadlineHeader, s.cfg.MaxClockSkew); ok {
			remaining, source = d, SourcePropagated
		}
		ctx, cancel, ok := s.admit(r.Context(), now, remaining, source)
		if !ok {
			http.Error(w, "request budget exhausted", http.StatusGatewayTimeout)
			return
		}
		defer cancel()
		defer watchCancel(ctx, trace.SpanFromContext(ctx))()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// UnaryServerInterceptor returns an interceptor that bounds each call by its
// budget. grpc-go has already turned the caller's grpc-timeout into the
// context deadline; the interceptor caps it at Max, gives a call without a
// deadline the Default, refuses a call with less than Min left with
// DEADLINE_EXCEEDED (the handler is not called), and records the same
// attributes and event as Middleware. Register otelgrpc.NewServerHandler()
// as the server's stats handler so the SERVER span exists when interceptors
// run.
func (s *Server) UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		now := arrival(ctx)
		remaining, source := s.cfg.Default, s.fallbackSource()
		if dl, ok := ctx.Deadline(); ok {
			remaining, source = dl.Sub(now), SourcePropagated
		}
		ctx, cancel, ok := s.admit(ctx, now, remaining, source)
		if !ok {
			return nil, status.Error(codes.DeadlineExceeded, "request budget exhausted")
		}
		defer cancel()
		defer watchCancel(ctx, trace.SpanFromContext(ctx))()
		return handler(ctx, req)
	}
}

// arrival returns when the request arrived: the start of the SERVER span in
// ctx (spanStart). The budget clock starts there rather than when this
// middleware runs, so the budget recorded on the span is the budget at the
// span's start, as the attribute contract defines budget.remaining_ms, and
// budgetd's arithmetic from span start times matches the deadline the
// service really enforces. A budget received in a header is a budget from
// when it was sent; starting its clock at arrival rather than later only
// gives this hop less time, never more.
func arrival(ctx context.Context) time.Time { return spanStart(ctx) }

// spanStart returns the start of the span in ctx when the OpenTelemetry SDK
// records it (and it is not in the future), else now.
func spanStart(ctx context.Context) time.Time {
	now := time.Now()
	if s, ok := trace.SpanFromContext(ctx).(interface{ StartTime() time.Time }); ok {
		if at := s.StartTime(); !at.IsZero() && !at.After(now) {
			return at
		}
	}
	return now
}

// fallbackSource is the budget.source of a request that brought no budget.
func (s *Server) fallbackSource() string {
	if s.cfg.Edge {
		return SourceEdge
	}
	return SourceDefault
}

// admit caps remaining at Max, records the budget on the span in parent and
// decides whether the request may run. When it may, ctx carries the deadline
// now+remaining (or parent's, when that is earlier) and cancel must be
// called; when it may not, the span is marked rejected.
func (s *Server) admit(parent context.Context, now time.Time, remaining time.Duration, source string) (ctx context.Context, cancel context.CancelFunc, ok bool) {
	remaining = min(remaining, s.cfg.Max)
	// A deadline already on the context (an outer middleware, grpc-go's own)
	// is part of the budget too: the tighter one counts.
	if dl, has := parent.Deadline(); has {
		remaining = min(remaining, dl.Sub(now))
	}
	span := trace.SpanFromContext(parent)
	span.SetAttributes(
		attribute.Float64(AttrRemainingMs, ms(remaining)),
		attribute.String(AttrSource, source),
	)
	if remaining <= 0 || remaining < s.cfg.Min {
		span.SetAttributes(attribute.Bool(AttrRejected, true))
		return nil, nil, false
	}
	ctx, cancel = context.WithDeadline(parent, now.Add(remaining))
	return ctx, cancel, true
}

// watchCancel adds the budget.cancelled event to span when ctx ends, naming
// the deadline or the caller as the cause. The returned stop must be called
// when the handler returns, before ctx is cancelled by the caller's own
// cleanup: that normal end is not a cancellation. stop makes sure the event
// is on the span before it returns, and so before the span ends.
func watchCancel(ctx context.Context, span trace.Span) (stop func()) {
	record := func() {
		source := CancelCallerDisconnect
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			source = CancelDeadline
		}
		span.AddEvent(EventCancelled, trace.WithAttributes(attribute.String(AttrCancelSource, source)))
	}
	done := make(chan struct{})
	stopAfter := context.AfterFunc(ctx, func() {
		defer close(done)
		record()
	})
	return func() {
		if !stopAfter() {
			<-done // record is running or has run.
			return
		}
		// A context closes Done before it starts its AfterFunc callbacks, so
		// a handler woken by the cancellation can return before record was
		// started. The context ended while the handler ran all the same.
		if ctx.Err() != nil {
			record()
		}
	}
}
