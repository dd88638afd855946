package budget_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/budgetd/budgetd/budget"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// tracing is a real OpenTelemetry SDK pipeline whose ended spans the tests
// read back.
type tracing struct {
	rec *tracetest.SpanRecorder
	tp  *sdktrace.TracerProvider
}

func newTracing(t *testing.T) *tracing {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { require.NoError(t, tp.Shutdown(context.Background())) })
	return &tracing{rec: rec, tp: tp}
}

var propagator = propagation.TraceContext{}

// handler wraps h in the budget middleware and, outside it, otelhttp, whose
// SERVER span is named name.
func (tr *tracing) handler(t *testing.T, name string, cfg budget.ServerConfig, h http.Handler) http.Handler {
	t.Helper()
	srv, err := budget.NewServer(cfg)
	require.NoError(t, err)
	return otelhttp.NewHandler(srv.Middleware(h), name,
		otelhttp.WithTracerProvider(tr.tp),
		otelhttp.WithPropagators(propagator),
		otelhttp.WithSpanNameFormatter(func(op string, _ *http.Request) string { return op }))
}

// server starts a loopback HTTP server for handler. Close blocks until its
// handlers have returned, so tests close servers before reading spans.
func (tr *tracing) server(t *testing.T, name string, cfg budget.ServerConfig, h http.Handler) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer(tr.handler(t, name, cfg, h))
	t.Cleanup(ts.Close)
	return ts
}

// client returns an instrumented HTTP client: otelhttp's transport around bt,
// around a transport of its own whose idle connections are closed at the
// end of the test.
func (tr *tracing) client(t *testing.T, bt *budget.Transport) *http.Client {
	t.Helper()
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	bt.Base = base
	return &http.Client{Transport: otelhttp.NewTransport(bt,
		otelhttp.WithTracerProvider(tr.tp),
		otelhttp.WithPropagators(propagator))}
}

// ended returns the spans that have ended so far.
func (tr *tracing) ended() []sdktrace.ReadOnlySpan { return tr.rec.Ended() }

// spanNamed returns the only ended span called name.
func (tr *tracing) spanNamed(t *testing.T, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	var found []sdktrace.ReadOnlySpan
	for _, s := range tr.ended() {
		if s.Name() == name {
			found = append(found, s)
		}
	}
	require.Len(t, found, 1, "spans named %q", name)
	return found[0]
}

// children returns the ended spans whose parent is s, of the given kind.
func (tr *tracing) children(s sdktrace.ReadOnlySpan, kind trace.SpanKind) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, c := range tr.ended() {
		if c.Parent().SpanID() == s.SpanContext().SpanID() && c.SpanKind() == kind {
			out = append(out, c)
		}
	}
	return out
}

// attr returns the value of key on s.
func attr(s sdktrace.ReadOnlySpan, key string) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// floatAttr returns a float attribute that must be present.
func floatAttr(t *testing.T, s sdktrace.ReadOnlySpan, key string) float64 {
	t.Helper()
	v, ok := attr(s, key)
	require.True(t, ok, "span %q has no %s", s.Name(), key)
	return v.AsFloat64()
}

// mustAttr returns an attribute that must be present.
func mustAttr(t *testing.T, s sdktrace.ReadOnlySpan, key string) attribute.Value {
	t.Helper()
	v, ok := attr(s, key)
	require.True(t, ok, "span %q has no %s", s.Name(), key)
	return v
}

// requireSource checks budget.source on s.
func requireSource(t *testing.T, s sdktrace.ReadOnlySpan, want string) {
	t.Helper()
	require.Equal(t, want, mustAttr(t, s, budget.AttrSource).AsString(), "budget.source of %q", s.Name())
}

// cancelSources returns the budget.cancel_source of every budget.cancelled
// event on s.
func cancelSources(s sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, e := range s.Events() {
		if e.Name != budget.EventCancelled {
			continue
		}
		for _, kv := range e.Attributes {
			if string(kv.Key) == budget.AttrCancelSource {
				out = append(out, kv.Value.AsString())
			}
		}
	}
	return out
}

// requireOneCancellation checks that s recorded one budget.cancelled event,
// caused by the deadline or by the caller leaving.
func requireOneCancellation(t *testing.T, s sdktrace.ReadOnlySpan) {
	t.Helper()
	sources := cancelSources(s)
	require.Len(t, sources, 1, "budget.cancelled events on %q", s.Name())
	require.Contains(t, []string{budget.CancelDeadline, budget.CancelCallerDisconnect}, sources[0])
}

// grpcServer starts a real gRPC server on 127.0.0.1:0 with otelgrpc's stats
// handler and the budget interceptor, serving health checks with check.
func (tr *tracing) grpcServer(t *testing.T, cfg budget.ServerConfig, check checkFunc) string {
	t.Helper()
	srv, err := budget.NewServer(cfg)
	require.NoError(t, err)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	gs := grpc.NewServer(
		grpc.StatsHandler(otelgrpc.NewServerHandler(
			otelgrpc.WithTracerProvider(tr.tp), otelgrpc.WithPropagators(propagator))),
		grpc.UnaryInterceptor(srv.UnaryServerInterceptor()),
	)
	healthpb.RegisterHealthServer(gs, healthServer{check: check})
	served := make(chan error, 1)
	go func() { served <- gs.Serve(lis) }()
	t.Cleanup(func() {
		gs.Stop()
		// A test whose calls never reach the server (refused before they
		// are sent) can end before the goroutine calls Serve; Serve after
		// Stop returns ErrServerStopped. Any other error is a failure.
		if err := <-served; !errors.Is(err, grpc.ErrServerStopped) {
			require.NoError(t, err)
		}
	})
	return lis.Addr().String()
}

// grpcClient dials addr with otelgrpc's client stats handler wrapped in
// budget.ClientStatsHandler and, when c is not nil, the budget interceptor.
func (tr *tracing) grpcClient(t *testing.T, addr string, c *budget.GRPCClient) healthpb.HealthClient {
	t.Helper()
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithStatsHandler(budget.ClientStatsHandler(otelgrpc.NewClientHandler(
			otelgrpc.WithTracerProvider(tr.tp), otelgrpc.WithPropagators(propagator)))),
	}
	if c != nil {
		opts = append(opts, grpc.WithUnaryInterceptor(c.UnaryClientInterceptor()))
	}
	conn, err := grpc.NewClient(addr, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, conn.Close()) })
	return healthpb.NewHealthClient(conn)
}

type checkFunc func(ctx context.Context) error

// healthServer is a real gRPC service (the standard health service) whose
// Check runs a test's function.
type healthServer struct {
	healthpb.UnimplementedHealthServer
	check checkFunc
}

func (h healthServer) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if err := h.check(ctx); err != nil {
		return nil, err
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}
