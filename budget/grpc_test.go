package budget_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/budgetd/budgetd/budget"
)

const checkMethod = "grpc.health.v1.Health/Check"

// grpcSpans returns the ended spans of the health check of the given kind.
func (tr *tracing) grpcSpans(kind trace.SpanKind) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range tr.ended() {
		if s.Name() == checkMethod && s.SpanKind() == kind {
			out = append(out, s)
		}
	}
	return out
}

// oneGRPCSpan returns the only health check span of the given kind.
func (tr *tracing) oneGRPCSpan(t *testing.T, kind trace.SpanKind) sdktrace.ReadOnlySpan {
	t.Helper()
	spans := tr.grpcSpans(kind)
	require.Len(t, spans, 1, "%v spans", kind)
	return spans[0]
}

// check makes one health check call.
func check(ctx context.Context, client healthpb.HealthClient) error {
	_, err := client.Check(ctx, &healthpb.HealthCheckRequest{})
	return err
}

func TestGRPCServerGivesEdgeDefault(t *testing.T) {
	tr := newTracing(t)
	cfg := budget.DefaultServerConfig()
	cfg.Default, cfg.Edge = 2*time.Second, true
	left := make(chan time.Duration, 1)
	addr := tr.grpcServer(t, cfg, func(ctx context.Context) error {
		dl, ok := ctx.Deadline()
		if !ok {
			left <- -1
			return nil
		}
		left <- time.Until(dl)
		return nil
	})
	client := tr.grpcClient(t, addr, nil)

	require.NoError(t, check(context.Background(), client))
	got := <-left
	require.Positive(t, got, "the handler runs with a deadline")
	require.LessOrEqual(t, got, 2*time.Second)
	require.Eventually(t, func() bool { return len(tr.grpcSpans(trace.SpanKindServer)) == 1 }, 5*time.Second, 5*time.Millisecond)

	server := tr.oneGRPCSpan(t, trace.SpanKindServer)
	requireSource(t, server, budget.SourceEdge)
	require.Equal(t, float64(2000), floatAttr(t, server, budget.AttrRemainingMs))
}

func TestGRPCDeadlineBoundsAndCancelsTheCallee(t *testing.T) {
	tr := newTracing(t)
	saw := make(chan error, 1)
	addr := tr.grpcServer(t, budget.DefaultServerConfig(), func(ctx context.Context) error {
		long := time.NewTimer(time.Minute)
		defer long.Stop()
		select {
		case <-ctx.Done():
			saw <- ctx.Err()
			return status.FromContextError(ctx.Err()).Err()
		case <-long.C:
			saw <- nil
			return nil
		}
	})
	const margin = 10 * time.Millisecond
	client := tr.grpcClient(t, addr, &budget.GRPCClient{ResponseMargin: margin})

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := check(ctx, client)
	require.Equal(t, codes.DeadlineExceeded, status.Code(err))
	require.Less(t, time.Since(start), 300*time.Millisecond+time.Second)
	// The callee's deadline and the caller giving up fall within a network
	// transit of each other; either may end the work first.
	require.Error(t, <-saw, "the callee's work was cancelled")
	require.Eventually(t, func() bool { return len(tr.grpcSpans(trace.SpanKindServer)) == 1 }, 5*time.Second, 5*time.Millisecond)

	call := tr.oneGRPCSpan(t, trace.SpanKindClient)
	timeout := floatAttr(t, call, budget.AttrTimeoutMs)
	require.LessOrEqual(t, timeout, float64(300-margin.Milliseconds()))
	// The timeout counts from the CLIENT span's start, which otelgrpc began
	// after the interceptor computed what it sends: the attempt's deadline
	// is the same instant, so the timeout is at most what was sent.
	require.LessOrEqual(t, timeout, floatAttr(t, call, budget.AttrPropagatedMs))
	require.InDelta(t, floatAttr(t, call, budget.AttrPropagatedMs), timeout, 50)
	require.Equal(t, int64(1), mustAttr(t, call, budget.AttrAttempt).AsInt64())

	server := tr.oneGRPCSpan(t, trace.SpanKindServer)
	requireSource(t, server, budget.SourcePropagated)
	require.LessOrEqual(t, floatAttr(t, server, budget.AttrRemainingMs), timeout, "the callee got no more than the call's timeout")
	requireOneCancellation(t, server)
}

func TestGRPCServerRefusesBelowMin(t *testing.T) {
	tr := newTracing(t)
	cfg := budget.DefaultServerConfig()
	cfg.Min = 500 * time.Millisecond
	var calls atomic.Int32
	addr := tr.grpcServer(t, cfg, func(context.Context) error {
		calls.Add(1)
		return nil
	})
	client := tr.grpcClient(t, addr, nil) // No client interceptor: the caller sends what it has.

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := check(ctx, client)
	require.Equal(t, codes.DeadlineExceeded, status.Code(err))
	require.Zero(t, calls.Load(), "the handler must not run")
	require.Eventually(t, func() bool { return len(tr.grpcSpans(trace.SpanKindServer)) == 1 }, 5*time.Second, 5*time.Millisecond)

	server := tr.oneGRPCSpan(t, trace.SpanKindServer)
	require.True(t, mustAttr(t, server, budget.AttrRejected).AsBool())
	requireSource(t, server, budget.SourcePropagated)
	require.Less(t, floatAttr(t, server, budget.AttrRemainingMs), float64(100))
}

func TestGRPCServerClampsToMax(t *testing.T) {
	tr := newTracing(t)
	cfg := budget.DefaultServerConfig()
	cfg.Default, cfg.Max = 500*time.Millisecond, time.Second
	left := make(chan time.Duration, 1)
	addr := tr.grpcServer(t, cfg, func(ctx context.Context) error {
		dl, _ := ctx.Deadline()
		left <- time.Until(dl)
		return nil
	})
	client := tr.grpcClient(t, addr, &budget.GRPCClient{})

	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	require.NoError(t, check(ctx, client))
	require.LessOrEqual(t, <-left, time.Second)
	require.Eventually(t, func() bool { return len(tr.grpcSpans(trace.SpanKindServer)) == 1 }, 5*time.Second, 5*time.Millisecond)

	server := tr.oneGRPCSpan(t, trace.SpanKindServer)
	requireSource(t, server, budget.SourcePropagated)
	require.Equal(t, float64(1000), floatAttr(t, server, budget.AttrRemainingMs), "an hour is clamped to Max")
}

func TestGRPCClientRefusesSpentBudget(t *testing.T) {
	tr := newTracing(t)
	var calls atomic.Int32
	addr := tr.grpcServer(t, budget.DefaultServerConfig(), func(context.Context) error {
		calls.Add(1)
		return nil
	})
	client := tr.grpcClient(t, addr, &budget.GRPCClient{ResponseMargin: 50 * time.Millisecond})

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	err := check(ctx, client)
	require.ErrorIs(t, err, budget.ErrBudgetExhausted)
	require.Equal(t, codes.DeadlineExceeded, status.Code(err))
	require.Zero(t, calls.Load())
	require.Empty(t, tr.grpcSpans(trace.SpanKindClient), "the call never started")
}

func TestGRPCCallerDisconnectReachesCallee(t *testing.T) {
	tr := newTracing(t)
	started := make(chan struct{})
	saw := make(chan error, 1)
	addr := tr.grpcServer(t, budget.DefaultServerConfig(), func(ctx context.Context) error {
		close(started)
		<-ctx.Done()
		saw <- ctx.Err()
		return ctx.Err()
	})
	client := tr.grpcClient(t, addr, &budget.GRPCClient{})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- check(ctx, client) }()
	<-started
	cancel()
	require.Equal(t, codes.Canceled, status.Code(<-done))
	require.ErrorIs(t, <-saw, context.Canceled)
	require.Eventually(t, func() bool { return len(tr.grpcSpans(trace.SpanKindServer)) == 1 }, 5*time.Second, 5*time.Millisecond)

	server := tr.oneGRPCSpan(t, trace.SpanKindServer)
	requireSource(t, server, budget.SourceDefault)
	require.Equal(t, []string{budget.CancelCallerDisconnect}, cancelSources(server))
}

func TestGRPCRetryRecordsAttempts(t *testing.T) {
	tr := newTracing(t)
	var calls atomic.Int32
	addr := tr.grpcServer(t, budget.DefaultServerConfig(), func(context.Context) error {
		if calls.Add(1) < 3 {
			return status.Error(codes.Unavailable, "warming up")
		}
		return nil
	})
	client := tr.grpcClient(t, addr, &budget.GRPCClient{ResponseMargin: 5 * time.Millisecond})

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p := budget.RetryPolicy{MaxAttempts: 4, Backoff: 5 * time.Millisecond, MinAttempt: 20 * time.Millisecond,
		Retryable: func(err error) bool { return status.Code(err) == codes.Unavailable }}
	err := budget.Retry(ctx, p, func(ctx context.Context, _ int) error { return check(ctx, client) })
	require.NoError(t, err)
	require.Equal(t, int32(3), calls.Load())
	require.Eventually(t, func() bool { return len(tr.grpcSpans(trace.SpanKindClient)) == 3 }, 5*time.Second, 5*time.Millisecond)

	var attempts []int64
	for _, c := range tr.grpcSpans(trace.SpanKindClient) {
		attempts = append(attempts, mustAttr(t, c, budget.AttrAttempt).AsInt64())
		require.Equal(t, int64(4), mustAttr(t, c, budget.AttrMaxAttempts).AsInt64())
		require.Equal(t, float64(5), floatAttr(t, c, budget.AttrBackoffMs))
		require.Positive(t, floatAttr(t, c, budget.AttrTimeoutMs))
	}
	slices.Sort(attempts)
	require.Equal(t, []int64{1, 2, 3}, attempts)
}

// TestGRPCServerDeadlineCancelsHandler: the caller would wait 5 s, but the
// server allows 100 ms; the handler's context ends at that deadline.
func TestGRPCServerDeadlineCancelsHandler(t *testing.T) {
	tr := newTracing(t)
	cfg := budget.DefaultServerConfig()
	cfg.Default, cfg.Max = 100*time.Millisecond, 100*time.Millisecond
	saw := make(chan error, 1)
	addr := tr.grpcServer(t, cfg, func(ctx context.Context) error {
		<-ctx.Done()
		saw <- ctx.Err()
		return status.FromContextError(ctx.Err()).Err()
	})
	client := tr.grpcClient(t, addr, &budget.GRPCClient{})

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.Equal(t, codes.DeadlineExceeded, status.Code(check(ctx, client)))
	require.ErrorIs(t, <-saw, context.DeadlineExceeded)
	require.Eventually(t, func() bool { return len(tr.grpcSpans(trace.SpanKindServer)) == 1 }, 5*time.Second, 5*time.Millisecond)

	server := tr.oneGRPCSpan(t, trace.SpanKindServer)
	require.Equal(t, float64(100), floatAttr(t, server, budget.AttrRemainingMs))
	require.Equal(t, []string{budget.CancelDeadline}, cancelSources(server))
}
