package budget_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/trace"

	"github.com/budgetd/budgetd/budget"
)

// forward is a hop's handler: it calls url with the request's context and
// answers with the callee's status, or 504 when the budget ran out.
func forward(client *http.Client, url string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, url, nil)
		if err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		resp, err := client.Do(req)
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				w.WriteHeader(http.StatusGatewayTimeout)
				return
			}
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		w.WriteHeader(resp.StatusCode)
	}
}

// waitForCancel is a handler that would work far longer than any budget in
// these tests, but stops when its context ends and reports why on seen.
func waitForCancel(seen chan<- error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		long := time.NewTimer(time.Minute)
		defer long.Stop()
		select {
		case <-r.Context().Done():
			seen <- r.Context().Err()
			w.WriteHeader(http.StatusGatewayTimeout)
		case <-long.C:
			seen <- nil
		}
	}
}

// plainClient is an uninstrumented client without a budget: the user's
// browser at the edge.
func plainClient(t *testing.T) *http.Client {
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	return &http.Client{Transport: base, Timeout: time.Minute}
}

func TestChainIsBoundedByEdgeBudget(t *testing.T) {
	const (
		hops       = 5
		edgeBudget = 300 * time.Millisecond
		margin     = 10 * time.Millisecond
	)
	tr := newTracing(t)
	lastSaw := make(chan error, 1)

	// Built from the last hop up. Inner hops keep the library defaults: 5 s
	// for a request without a budget, which none of them should need.
	servers := make([]*httptest.Server, hops)
	servers[hops-1] = tr.server(t, "hop5", budget.DefaultServerConfig(), waitForCancel(lastSaw))
	for i := hops - 2; i >= 0; i-- {
		cfg := budget.DefaultServerConfig()
		if i == 0 {
			cfg.Default, cfg.Edge = edgeBudget, true
		}
		client := tr.client(t, &budget.Transport{ResponseMargin: margin})
		servers[i] = tr.server(t, fmt.Sprintf("hop%d", i+1), cfg, forward(client, servers[i+1].URL))
	}

	start := time.Now()
	resp, err := plainClient(t).Get(servers[0].URL)
	require.NoError(t, err)
	_ = resp.Body.Close()
	elapsed := time.Since(start)

	require.Equal(t, http.StatusGatewayTimeout, resp.StatusCode)
	// Generous slack: the point is that a handler working for a minute, four
	// hops down, cannot hold the user longer than the edge budget.
	require.Less(t, elapsed, edgeBudget+time.Second)
	// The last hop's deadline and its caller giving up fall within a network
	// transit of each other; either may end the work first.
	require.Error(t, <-lastSaw, "the last hop's work was cancelled")

	for _, s := range servers {
		s.Close() // Waits for the handlers, so every span has ended.
	}

	edge := tr.spanNamed(t, "hop1")
	requireSource(t, edge, budget.SourceEdge)
	require.Equal(t, float64(edgeBudget.Milliseconds()), floatAttr(t, edge, budget.AttrRemainingMs))

	caller := edge
	for i := 2; i <= hops; i++ {
		callee := tr.spanNamed(t, fmt.Sprintf("hop%d", i))
		calls := tr.children(caller, trace.SpanKindClient)
		require.Len(t, calls, 1, "hop%d makes one call", i-1)
		call := calls[0]

		callerLeft := floatAttr(t, caller, budget.AttrRemainingMs)
		timeout := floatAttr(t, call, budget.AttrTimeoutMs)
		sent := floatAttr(t, call, budget.AttrPropagatedMs)
		require.Less(t, timeout, callerLeft-float64(margin.Milliseconds()), "hop%d's call fits in its budget after the margin", i-1)
		require.LessOrEqual(t, sent, timeout, "hop%d never sends more than it waits", i-1)
		require.Equal(t, int64(1), mustAttr(t, call, budget.AttrAttempt).AsInt64())

		requireSource(t, callee, budget.SourcePropagated)
		require.Equal(t, sent, floatAttr(t, callee, budget.AttrRemainingMs), "hop%d starts with what hop%d sent", i, i-1)
		require.Less(t, floatAttr(t, callee, budget.AttrRemainingMs), callerLeft, "the budget shrinks at every hop")
		caller = callee
	}
	requireOneCancellation(t, caller)
}

func TestMiddlewareRefusesRequestsWithoutEnoughBudget(t *testing.T) {
	tests := []struct {
		name    string
		cfg     func(*budget.ServerConfig)
		header  http.Header
		refused bool
	}{
		{
			name:    "nothing left",
			header:  http.Header{budget.HeaderTimeoutMs: {"0"}},
			refused: true,
		},
		{
			name:    "grpc-timeout of zero",
			header:  http.Header{budget.HeaderGRPCTimeout: {"0n"}},
			refused: true,
		},
		{
			name:    "below the minimum",
			cfg:     func(c *budget.ServerConfig) { c.Min = 50 * time.Millisecond },
			header:  http.Header{budget.HeaderTimeoutMs: {"20"}},
			refused: true,
		},
		{
			name: "deadline already past",
			cfg:  func(c *budget.ServerConfig) { c.AcceptDeadlineHeader = true },
			header: http.Header{budget.HeaderDeadline: {
				strconv.FormatInt(time.Now().Add(-time.Second).UnixMilli(), 10)}},
			refused: true,
		},
		{
			name:   "enough",
			cfg:    func(c *budget.ServerConfig) { c.Min = 50 * time.Millisecond },
			header: http.Header{budget.HeaderTimeoutMs: {"5000"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newTracing(t)
			cfg := budget.DefaultServerConfig()
			if tt.cfg != nil {
				tt.cfg(&cfg)
			}
			var calls atomic.Int32
			ts := tr.server(t, "svc", cfg, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
				calls.Add(1)
			}))

			req, err := http.NewRequest(http.MethodGet, ts.URL, nil)
			require.NoError(t, err)
			req.Header = tt.header
			resp, err := plainClient(t).Do(req)
			require.NoError(t, err)
			_ = resp.Body.Close()
			ts.Close()

			span := tr.spanNamed(t, "svc")
			rejected, hasRejected := attr(span, budget.AttrRejected)
			if tt.refused {
				require.Equal(t, http.StatusGatewayTimeout, resp.StatusCode)
				require.Zero(t, calls.Load(), "the handler must not run")
				require.True(t, hasRejected && rejected.AsBool())
			} else {
				require.Equal(t, http.StatusOK, resp.StatusCode)
				require.Equal(t, int32(1), calls.Load())
				require.False(t, hasRejected)
			}
			requireSource(t, span, budget.SourcePropagated)
		})
	}
}

// TestHostileHeadersCannotExtendBudget sends budgets that are huge, far in
// the future, negative or garbage. None may give the handler more than Max,
// and garbage counts as no budget at all.
func TestHostileHeadersCannotExtendBudget(t *testing.T) {
	const (
		dflt = time.Second
		maxB = 2 * time.Second
		skew = 50 * time.Millisecond
	)
	inAYear := strconv.FormatInt(time.Now().Add(365*24*time.Hour).UnixMilli(), 10)
	soon := strconv.FormatInt(time.Now().Add(500*time.Millisecond).UnixMilli(), 10)
	tests := []struct {
		name         string
		header       http.Header
		acceptDL     bool
		wantSource   string
		wantMs       float64 // exact budget.remaining_ms, or its upper bound when atMost
		atMost       bool
		wantRejected bool
	}{
		{name: "huge milliseconds", header: http.Header{budget.HeaderTimeoutMs: {"9007199254740992"}}, wantSource: budget.SourcePropagated, wantMs: 2000},
		{name: "beyond 2^53", header: http.Header{budget.HeaderTimeoutMs: {"99999999999999999999"}}, wantSource: budget.SourceDefault, wantMs: 1000},
		{name: "negative", header: http.Header{budget.HeaderTimeoutMs: {"-5"}}, wantSource: budget.SourceDefault, wantMs: 1000},
		{name: "exponent", header: http.Header{budget.HeaderTimeoutMs: {"1e9"}}, wantSource: budget.SourceDefault, wantMs: 1000},
		{name: "unit", header: http.Header{budget.HeaderTimeoutMs: {"500ms"}}, wantSource: budget.SourceDefault, wantMs: 1000},
		{name: "garbage", header: http.Header{budget.HeaderTimeoutMs: {"soon"}}, wantSource: budget.SourceDefault, wantMs: 1000},
		{name: "empty", header: http.Header{budget.HeaderTimeoutMs: {""}}, wantSource: budget.SourceDefault, wantMs: 1000},
		{name: "NaN", header: http.Header{budget.HeaderTimeoutMs: {"NaN"}}, wantSource: budget.SourceDefault, wantMs: 1000},
		{name: "huge grpc-timeout", header: http.Header{budget.HeaderGRPCTimeout: {"99999999H"}}, wantSource: budget.SourcePropagated, wantMs: 2000},
		{name: "grpc-timeout with 9 digits", header: http.Header{budget.HeaderGRPCTimeout: {"123456789m"}}, wantSource: budget.SourceDefault, wantMs: 1000},
		{name: "grpc-timeout without unit", header: http.Header{budget.HeaderGRPCTimeout: {"250"}}, wantSource: budget.SourceDefault, wantMs: 1000},
		{name: "deadline in a year", header: http.Header{budget.HeaderDeadline: {inAYear}}, acceptDL: true, wantSource: budget.SourcePropagated, wantMs: 2000},
		{name: "deadline header not enabled", header: http.Header{budget.HeaderDeadline: {inAYear}}, wantSource: budget.SourceDefault, wantMs: 1000},
		{name: "deadline less the skew", header: http.Header{budget.HeaderDeadline: {soon}}, acceptDL: true, wantSource: budget.SourcePropagated, wantMs: 450, atMost: true},
		{name: "negative deadline", header: http.Header{budget.HeaderDeadline: {"-1"}}, acceptDL: true, wantSource: budget.SourceDefault, wantMs: 1000},
		{
			name: "the smallest of several wins",
			header: http.Header{
				budget.HeaderTimeoutMs:   {"300"},
				budget.HeaderGRPCTimeout: {"10S"},
				budget.HeaderDeadline:    {inAYear},
			},
			acceptDL: true, wantSource: budget.SourcePropagated, wantMs: 300,
		},
		{name: "the smallest of several lines wins", header: http.Header{budget.HeaderTimeoutMs: {"5000", "250"}}, wantSource: budget.SourcePropagated, wantMs: 250},
		{name: "a bad line is skipped", header: http.Header{budget.HeaderTimeoutMs: {"abc", "250"}}, wantSource: budget.SourcePropagated, wantMs: 250},
		{name: "fractional milliseconds", header: http.Header{budget.HeaderTimeoutMs: {"12.5"}}, wantSource: budget.SourcePropagated, wantMs: 12.5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newTracing(t)
			cfg := budget.ServerConfig{Default: dflt, Max: maxB, MaxClockSkew: skew, AcceptDeadlineHeader: tt.acceptDL}
			left := make(chan time.Duration, 1)
			ts := tr.server(t, "svc", cfg, http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
				dl, ok := r.Context().Deadline()
				if !ok {
					left <- -1
					return
				}
				left <- time.Until(dl)
			}))

			req, err := http.NewRequest(http.MethodGet, ts.URL, nil)
			require.NoError(t, err)
			req.Header = tt.header
			resp, err := plainClient(t).Do(req)
			require.NoError(t, err)
			_ = resp.Body.Close()
			ts.Close()

			require.Equal(t, http.StatusOK, resp.StatusCode)
			got := <-left
			require.Positive(t, got, "the handler runs with a deadline")
			require.LessOrEqual(t, got, maxB)

			span := tr.spanNamed(t, "svc")
			requireSource(t, span, tt.wantSource)
			remaining := floatAttr(t, span, budget.AttrRemainingMs)
			if tt.atMost {
				require.LessOrEqual(t, remaining, tt.wantMs)
				require.Positive(t, remaining)
			} else {
				require.Equal(t, tt.wantMs, remaining)
			}
		})
	}
}

// rewriteBudget is a hostile or broken proxy between two hops: it replaces
// the budget header with an hour.
type rewriteBudget struct{ base http.RoundTripper }

func (rw rewriteBudget) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set(budget.HeaderTimeoutMs, "3600000")
	return rw.base.RoundTrip(req)
}

// TestRewrittenBudgetStillEndsAtCallerDeadline shows the budget cannot grow
// along the chain even when a hop in between lies about it: the callee clamps
// the claim to its Max, and the caller's own deadline still cancels the call,
// which the callee sees as its caller disconnecting.
func TestRewrittenBudgetStillEndsAtCallerDeadline(t *testing.T) {
	tr := newTracing(t)
	calleeSaw := make(chan error, 1)
	callee := tr.server(t, "callee", budget.DefaultServerConfig(), waitForCancel(calleeSaw))

	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	client := &http.Client{Transport: otelhttp.NewTransport(
		&budget.Transport{Base: rewriteBudget{base: base}, ResponseMargin: 10 * time.Millisecond},
		otelhttp.WithTracerProvider(tr.tp), otelhttp.WithPropagators(propagator))}
	cfg := budget.DefaultServerConfig()
	cfg.Default, cfg.Edge = 200*time.Millisecond, true
	caller := tr.server(t, "caller", cfg, forward(client, callee.URL))

	resp, err := plainClient(t).Get(caller.URL)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusGatewayTimeout, resp.StatusCode)
	require.ErrorIs(t, <-calleeSaw, context.Canceled, "the callee stops when its caller gives up")
	caller.Close()
	callee.Close()

	calleeSpan := tr.spanNamed(t, "callee")
	require.Equal(t, float64(30_000), floatAttr(t, calleeSpan, budget.AttrRemainingMs), "an hour is clamped to Max")
	require.Equal(t, []string{budget.CancelCallerDisconnect}, cancelSources(calleeSpan))
	call := tr.children(tr.spanNamed(t, "caller"), trace.SpanKindClient)
	require.Len(t, call, 1)
	require.Less(t, floatAttr(t, call[0], budget.AttrTimeoutMs), float64(200))
}

// TestCallerDisconnectReachesDownstream: the user goes away while the second
// hop works. Both hops see their context end, and say the caller left.
func TestCallerDisconnectReachesDownstream(t *testing.T) {
	tr := newTracing(t)
	started := make(chan struct{})
	downstreamSaw := make(chan error, 1)
	down := tr.server(t, "down", budget.DefaultServerConfig(), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		waitForCancel(downstreamSaw)(w, r)
	}))
	cfg := budget.DefaultServerConfig()
	cfg.Default, cfg.Edge = time.Minute, true
	cfg.Max = time.Minute
	up := tr.server(t, "up", cfg, forward(tr.client(t, &budget.Transport{}), down.URL))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, up.URL, nil)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		resp, err := plainClient(t).Do(req)
		if err == nil {
			_ = resp.Body.Close()
		}
		done <- err
	}()
	<-started
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	require.ErrorIs(t, <-downstreamSaw, context.Canceled, "cancellation reached the downstream handler")
	up.Close()
	down.Close()

	require.Equal(t, []string{budget.CancelCallerDisconnect}, cancelSources(tr.spanNamed(t, "down")))
	require.Equal(t, []string{budget.CancelCallerDisconnect}, cancelSources(tr.spanNamed(t, "up")))
}

// TestNoCancelEventWhenHandlerFinishes: the context ending after the handler
// returned is the normal end of a request, not a cancellation.
func TestNoCancelEventWhenHandlerFinishes(t *testing.T) {
	tr := newTracing(t)
	ts := tr.server(t, "svc", budget.DefaultServerConfig(), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	resp, err := plainClient(t).Get(ts.URL)
	require.NoError(t, err)
	_ = resp.Body.Close()
	ts.Close()

	span := tr.spanNamed(t, "svc")
	require.Empty(t, cancelSources(span))
	requireSource(t, span, budget.SourceDefault)
	require.Equal(t, float64(5000), floatAttr(t, span, budget.AttrRemainingMs))
}

// TestTransportWrappingOrder: otelhttp must wrap budget.Transport. The other
// way round, the figures land on the caller's span, where budgetd does not
// look for them.
func TestTransportWrappingOrder(t *testing.T) {
	tests := []struct {
		name      string
		transport func(tr *tracing, base http.RoundTripper) http.RoundTripper
		onClient  bool
	}{
		{
			name: "otelhttp outside",
			transport: func(tr *tracing, base http.RoundTripper) http.RoundTripper {
				return otelhttp.NewTransport(&budget.Transport{Base: base},
					otelhttp.WithTracerProvider(tr.tp), otelhttp.WithPropagators(propagator))
			},
			onClient: true,
		},
		{
			name: "otelhttp inside",
			transport: func(tr *tracing, base http.RoundTripper) http.RoundTripper {
				return &budget.Transport{Base: otelhttp.NewTransport(base,
					otelhttp.WithTracerProvider(tr.tp), otelhttp.WithPropagators(propagator))}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newTracing(t)
			ts := tr.server(t, "svc", budget.DefaultServerConfig(), http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			base := &http.Transport{}
			t.Cleanup(base.CloseIdleConnections)
			client := &http.Client{Transport: tt.transport(tr, base)}

			ctx, parent := tr.tp.Tracer("test").Start(context.Background(), "parent")
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL, nil)
			require.NoError(t, err)
			resp, err := client.Do(req)
			require.NoError(t, err)
			_ = resp.Body.Close()
			parent.End()
			ts.Close()

			parentSpan := tr.spanNamed(t, "parent")
			calls := tr.children(parentSpan, trace.SpanKindClient)
			require.Len(t, calls, 1)
			_, onClient := attr(calls[0], budget.AttrTimeoutMs)
			_, onParent := attr(parentSpan, budget.AttrTimeoutMs)
			require.Equal(t, tt.onClient, onClient, "budget.timeout_ms on the CLIENT span")
			require.Equal(t, !tt.onClient, onParent, "budget.timeout_ms on the caller's span")
			// The budget is propagated either way.
			requireSource(t, tr.spanNamed(t, "svc"), budget.SourcePropagated)
		})
	}
}

// closeRecorder is a request body that remembers being closed.
type closeRecorder struct {
	io.Reader
	closed atomic.Bool
}

func (c *closeRecorder) Close() error {
	c.closed.Store(true)
	return nil
}

func TestTransportRefusesSpentBudget(t *testing.T) {
	tr := newTracing(t)
	var calls atomic.Int32
	ts := tr.server(t, "svc", budget.DefaultServerConfig(), http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		calls.Add(1)
	}))
	client := tr.client(t, &budget.Transport{ResponseMargin: 50 * time.Millisecond})

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	body := &closeRecorder{Reader: strings.NewReader("payload")}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL, body)
	require.NoError(t, err)
	_, err = client.Do(req)

	require.ErrorIs(t, err, budget.ErrBudgetExhausted)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	var uerr *url.Error
	require.ErrorAs(t, err, &uerr)
	require.True(t, uerr.Timeout())
	require.True(t, body.closed.Load(), "a RoundTripper closes the request body, even when it refuses")
	ts.Close()
	require.Zero(t, calls.Load())

	call := tr.ended()
	require.Len(t, call, 1, "only the CLIENT span: nothing reached the server")
	errType, _ := attr(call[0], "error.type")
	require.Equal(t, "budget_exhausted", errType.AsString())
	require.Equal(t, int64(1), mustAttr(t, call[0], budget.AttrAttempt).AsInt64())
	_, hasTimeout := attr(call[0], budget.AttrTimeoutMs)
	require.False(t, hasTimeout, "a call that was not sent had no timeout")
}

func TestTransportBoundsEachCall(t *testing.T) {
	tests := []struct {
		name        string
		transport   budget.Transport
		ctxTimeout  time.Duration // 0: no deadline
		wantHeader  bool
		wantMaxMs   int64 // upper bound of the header value
		wantExactMs int64 // exact header value when > 0
	}{
		{name: "own timeout without a budget", transport: budget.Transport{Timeout: 100 * time.Millisecond}, wantHeader: true, wantExactMs: 100},
		{name: "own timeout shorter than the budget", transport: budget.Transport{Timeout: 100 * time.Millisecond}, ctxTimeout: 5 * time.Second, wantHeader: true, wantExactMs: 100},
		{name: "budget shorter than own timeout", transport: budget.Transport{Timeout: time.Minute, ResponseMargin: 20 * time.Millisecond}, ctxTimeout: 2 * time.Second, wantHeader: true, wantMaxMs: 1980},
		{name: "grpc-timeout too", transport: budget.Transport{Timeout: 1500 * time.Millisecond, SendGRPCTimeout: true}, wantHeader: true, wantExactMs: 1500},
		{name: "nothing to send", transport: budget.Transport{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newTracing(t)
			got := make(chan http.Header, 1)
			ts := tr.server(t, "svc", budget.DefaultServerConfig(), http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
				got <- r.Header.Clone()
			}))
			bt := tt.transport
			client := tr.client(t, &bt)
			ctx := context.Background()
			if tt.ctxTimeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.ctxTimeout)
				defer cancel()
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL, nil)
			require.NoError(t, err)
			resp, err := client.Do(req)
			require.NoError(t, err)
			_ = resp.Body.Close()
			ts.Close()

			h := <-got
			server := tr.spanNamed(t, "svc")
			call := tr.spanNamed(t, "HTTP GET")
			require.Equal(t, trace.SpanKindClient, call.SpanKind())
			if !tt.wantHeader {
				require.Empty(t, h.Get(budget.HeaderTimeoutMs))
				requireSource(t, server, budget.SourceDefault)
				_, hasTimeout := attr(call, budget.AttrTimeoutMs)
				require.False(t, hasTimeout)
				return
			}
			sent, err := strconv.ParseInt(h.Get(budget.HeaderTimeoutMs), 10, 64)
			require.NoError(t, err)
			if tt.wantExactMs > 0 {
				require.Equal(t, tt.wantExactMs, sent)
			} else {
				require.LessOrEqual(t, sent, tt.wantMaxMs)
				require.Positive(t, sent)
			}
			if tt.transport.SendGRPCTimeout {
				require.Equal(t, strconv.FormatInt(sent, 10)+"m", h.Get(budget.HeaderGRPCTimeout))
			}
			require.Equal(t, float64(sent), floatAttr(t, call, budget.AttrPropagatedMs))
			require.GreaterOrEqual(t, floatAttr(t, call, budget.AttrTimeoutMs), float64(sent))
			requireSource(t, server, budget.SourcePropagated)
			require.Equal(t, float64(sent), floatAttr(t, server, budget.AttrRemainingMs))
		})
	}
}

// TestTransportBoundCoversResponseBody: a callee that sends its headers and
// then stalls cannot hold the caller past its budget.
func TestTransportBoundCoversResponseBody(t *testing.T) {
	tr := newTracing(t)
	stalled := make(chan error, 1)
	// A callee that ignores budgets: only the caller hanging up stops it.
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		stalled <- r.Context().Err()
	}))
	t.Cleanup(ts.Close)
	client := tr.client(t, &budget.Transport{Timeout: 100 * time.Millisecond})
	resp, err := client.Get(ts.URL)
	require.NoError(t, err)
	_, err = io.ReadAll(resp.Body)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NoError(t, resp.Body.Close())
	require.ErrorIs(t, <-stalled, context.Canceled, "the callee saw its caller hang up")
}

func TestServerConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*budget.ServerConfig)
		wantErr string
	}{
		{name: "defaults", mutate: func(*budget.ServerConfig) {}},
		{name: "zero default", mutate: func(c *budget.ServerConfig) { c.Default = 0 }, wantErr: "ServerConfig.Default must be > 0"},
		{name: "zero max", mutate: func(c *budget.ServerConfig) { c.Max = 0 }, wantErr: "ServerConfig.Max must be > 0"},
		{name: "default above max", mutate: func(c *budget.ServerConfig) { c.Default = time.Hour }, wantErr: "ServerConfig.Default must be ≤ Max"},
		{name: "negative min", mutate: func(c *budget.ServerConfig) { c.Min = -1 }, wantErr: "ServerConfig.Min must be ≥ 0"},
		{name: "min above default", mutate: func(c *budget.ServerConfig) { c.Min = time.Minute }, wantErr: "ServerConfig.Min must be ≤ Default"},
		{name: "negative skew", mutate: func(c *budget.ServerConfig) { c.MaxClockSkew = -1 }, wantErr: "ServerConfig.MaxClockSkew must be ≥ 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := budget.DefaultServerConfig()
			tt.mutate(&cfg)
			srv, err := budget.NewServer(cfg)
			if tt.wantErr == "" {
				require.NoError(t, err)
				require.NotNil(t, srv)
				return
			}
			require.ErrorContains(t, err, tt.wantErr)
			require.Nil(t, srv)
		})
	}
}

// TestDeadlineCancelsHandler: a caller that keeps waiting sent 50 ms; the
// handler's context ends at the deadline, and the span says so.
func TestDeadlineCancelsHandler(t *testing.T) {
	tr := newTracing(t)
	saw := make(chan error, 1)
	ts := tr.server(t, "svc", budget.DefaultServerConfig(), waitForCancel(saw))
	req, err := http.NewRequest(http.MethodGet, ts.URL, nil)
	require.NoError(t, err)
	req.Header.Set(budget.HeaderTimeoutMs, "50")
	resp, err := plainClient(t).Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	ts.Close()

	require.Equal(t, http.StatusGatewayTimeout, resp.StatusCode)
	require.ErrorIs(t, <-saw, context.DeadlineExceeded)
	require.Equal(t, []string{budget.CancelDeadline}, cancelSources(tr.spanNamed(t, "svc")))
}

// TestBudgetClockStartsAtTheSpanStart: whatever runs between the SERVER
// span's start and the budget middleware (here 30 ms of it) is part of the
// request's time, so the deadline is the span's start plus the budget, and
// the recorded budget.remaining_ms is the budget at the span's start, the
// instant budgetd measures it from.
func TestBudgetClockStartsAtTheSpanStart(t *testing.T) {
	tr := newTracing(t)
	srv, err := budget.NewServer(budget.DefaultServerConfig())
	require.NoError(t, err)
	var deadline time.Time
	inner := srv.Middleware(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		deadline, _ = r.Context().Deadline()
	}))
	slowBefore := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(30 * time.Millisecond) // the work before the middleware: a slow auth check
		inner.ServeHTTP(w, r)
	})
	ts := httptest.NewServer(otelhttp.NewHandler(slowBefore, "order", otelhttp.WithTracerProvider(tr.tp)))
	req, err := http.NewRequest(http.MethodGet, ts.URL, nil)
	require.NoError(t, err)
	req.Header.Set(budget.HeaderTimeoutMs, "400")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	ts.Close()

	spans := tr.rec.Ended()
	require.Len(t, spans, 1)
	start := spans[0].StartTime()
	require.WithinDuration(t, start.Add(400*time.Millisecond), deadline, time.Millisecond,
		"the deadline counts from the span's start, not from the middleware 30 ms later")
	var remaining float64
	for _, a := range spans[0].Attributes() {
		if a.Key == budget.AttrRemainingMs {
			remaining = a.Value.AsFloat64()
		}
	}
	require.InDelta(t, 400, remaining, 0.001)
}
