package budget

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"
)

// GRPCClient bounds outgoing unary gRPC calls the way Transport bounds HTTP
// requests. grpc-go already sends what is left of the context deadline as
// grpc-timeout, so the interceptor only has to shorten that deadline: to the
// remaining budget minus ResponseMargin, or to Timeout when that is shorter.
// With nothing left it fails the call with an error that matches
// ErrBudgetExhausted and carries DEADLINE_EXCEEDED, without sending it.
// The zero GRPCClient is usable.
type GRPCClient struct {
	// ResponseMargin is kept back from the remaining budget for this hop's
	// work after the call returns; see Transport.ResponseMargin.
	ResponseMargin time.Duration
	// Timeout, when > 0, is the longest any single call may take; see
	// Transport.Timeout.
	Timeout time.Duration
}

type clientAttrsKey struct{}

// UnaryClientInterceptor returns the interceptor. Its budget.timeout_ms,
// budget.propagated_ms and attempt attributes belong on the CLIENT span,
// which otelgrpc starts in its stats handler only after interceptors ran, so
// they travel in the context: wrap the client's stats handler with
// ClientStatsHandler to record them.
func (c GRPCClient) UnaryClientInterceptor() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
		invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		limit, bounded, err := callLimit(ctx, time.Now(), c.ResponseMargin, c.Timeout)
		if err != nil {
			return err
		}
		attrs := attemptFrom(ctx).attrs()
		if bounded {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, limit)
			defer cancel()
			// grpc-go sends the deadline as grpc-timeout when the stream
			// starts, a moment later, so the callee gets at most this.
			attrs = append(attrs,
				attribute.Float64(AttrTimeoutMs, ms(limit)),
				attribute.Float64(AttrPropagatedMs, ms(limit)),
			)
		}
		ctx = context.WithValue(ctx, clientAttrsKey{}, attrs)
		return invoker(ctx, method, req, reply, cc, opts...)
	}
}

// ClientStatsHandler wraps a client stats handler, normally
// otelgrpc.NewClientHandler(), and adds the figures of
// GRPCClient.UnaryClientInterceptor to the span it starts for each attempt:
//
//	grpc.WithStatsHandler(budget.ClientStatsHandler(otelgrpc.NewClientHandler()))
//
// A nil h records nothing.
func ClientStatsHandler(h stats.Handler) stats.Handler {
	return clientStats{h: h}
}

type clientStats struct {
	h stats.Handler
}

// TagRPC implements stats.Handler.
func (c clientStats) TagRPC(ctx context.Context, info *stats.RPCTagInfo) context.Context {
	if c.h == nil {
		return ctx
	}
	ctx = c.h.TagRPC(ctx, info)
	if attrs, ok := ctx.Value(clientAttrsKey{}).([]attribute.KeyValue); ok {
		span := trace.SpanFromContext(ctx)
		span.SetAttributes(attrs...)
		// The interceptor computed the timeout before this span started;
		// measured from the span's start, the attempt's deadline leaves it
		// a little less, and that is the timeout budgetd compares with what
		// the request had left at the span's start.
		if dl, ok := ctx.Deadline(); ok && hasTimeout(attrs) {
			if at := spanStart(ctx); at.Before(dl) {
				span.SetAttributes(attribute.Float64(AttrTimeoutMs, ms(dl.Sub(at))))
			}
		}
	}
	return ctx
}

// HandleRPC implements stats.Handler.
func (c clientStats) HandleRPC(ctx context.Context, s stats.RPCStats) {
	if c.h != nil {
		c.h.HandleRPC(ctx, s)
	}
}

// TagConn implements stats.Handler.
func (c clientStats) TagConn(ctx context.Context, info *stats.ConnTagInfo) context.Context {
	if c.h == nil {
		return ctx
	}
	return c.h.TagConn(ctx, info)
}

// HandleConn implements stats.Handler.
func (c clientStats) HandleConn(ctx context.Context, s stats.ConnStats) {
	if c.h != nil {
		c.h.HandleConn(ctx, s)
	}
}

// hasTimeout reports whether attrs carry budget.timeout_ms.
func hasTimeout(attrs []attribute.KeyValue) bool {
	for _, a := range attrs {
		if a.Key == AttrTimeoutMs {
			return true
		}
	}
	return false
}
