package ingest

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/store"
)

// sdkClient builds an OpenTelemetry Go SDK exporter aimed at a test server.
type sdkClient struct {
	name string
	new  func(ctx context.Context, ts *testServer) (sdktrace.SpanExporter, error)
}

// sdkClients are the SDK's two OTLP exporters with each compression they
// offer (gzip; zstd is tested with a plain gRPC client). Retries are off so a failure shows as a failure, not a delay.
func sdkClients() []sdkClient {
	grpcClient := func(name, compressor string) sdkClient {
		return sdkClient{name: name, new: func(ctx context.Context, ts *testServer) (sdktrace.SpanExporter, error) {
			opts := []otlptracegrpc.Option{
				otlptracegrpc.WithEndpoint(ts.grpcAddr), otlptracegrpc.WithInsecure(),
				otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: false}),
			}
			if compressor != "" {
				opts = append(opts, otlptracegrpc.WithCompressor(compressor))
			}
			return otlptracegrpc.New(ctx, opts...)
		}}
	}
	httpClient := func(name string, c otlptracehttp.Compression) sdkClient {
		return sdkClient{name: name, new: func(ctx context.Context, ts *testServer) (sdktrace.SpanExporter, error) {
			return otlptracehttp.New(ctx,
				otlptracehttp.WithEndpoint(ts.httpAddr), otlptracehttp.WithInsecure(),
				otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}),
				otlptracehttp.WithCompression(c))
		}}
	}
	return []sdkClient{
		grpcClient("grpc", ""),
		grpcClient("grpc gzip", "gzip"),
		httpClient("http protobuf", otlptracehttp.NoCompression),
		httpClient("http gzip", otlptracehttp.GzipCompression),
	}
}

// TestSDKExporters sends spans carrying every field OTLP has through the
// OpenTelemetry Go SDK's exporters and reads them back from the store. The
// exporter's flush returns only after budgetd acknowledged, and budgetd
// acknowledges only after the spans are committed, so they must be
// readable at once, every field as sent.
func TestSDKExporters(t *testing.T) {
	for _, eng := range engines() {
		t.Run(eng.name, func(t *testing.T) {
			st := eng.start(t).open(t)
			ts := startServer(t, st, testConfig())
			var total uint64
			for _, c := range sdkClients() {
				t.Run(c.name, func(t *testing.T) {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					exp, err := c.new(ctx, ts)
					require.NoError(t, err)
					sent := sendSDKSpans(t, exp, "checkout-"+strings.ReplaceAll(c.name, " ", "-"))
					total += uint64(len(sent))

					want := make([]schema.Span, len(sent))
					for i, s := range sent {
						want[i] = schemaSpan(s)
					}
					got, _, err := st.Trace(ctx, want[0].TraceID, store.TraceLimits{})
					require.NoError(t, err)
					sortSpans(want)
					sortSpans(got)
					require.Equal(t, want, got)
					require.Equal(t, total, countRows(t, st), "every span stored exactly once")
				})
			}
		})
	}
}

// sendSDKSpans records one trace with every kind, status, attribute type,
// events and links through exp, and returns the spans as the SDK saw them.
func sendSDKSpans(t *testing.T, exp sdktrace.SpanExporter, service string) tracetest.SpanStubs {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mem := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithResource(resource.NewSchemaless(
			attribute.String("service.name", service),
			attribute.String("deployment.environment.name", "test"),
			attribute.Int("process.pid", 4242),
		)),
		sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithSyncer(mem),
		sdktrace.WithBatcher(exp),
	)
	tracer := tp.Tracer("budgetd/ingest/test", trace.WithInstrumentationVersion("1.2.3"))

	// Recent (ingest.span_times refuses spans a week old), with nanoseconds.
	base := time.Now().Add(-time.Minute).Truncate(time.Second).Add(123_456_789)
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }

	// A remote parent gives the root a parent span id and a trace state.
	ts, err := trace.ParseTraceState("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE")
	require.NoError(t, err)
	// One trace per service name, so the clients' traces stay apart.
	sum := sha256.Sum256([]byte(service))
	parent := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID(sum[:16]),
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled,
		TraceState: ts,
		Remote:     true,
	})
	rctx := trace.ContextWithRemoteSpanContext(ctx, parent)
	linked := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		SpanID:     trace.SpanID{0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18},
		TraceState: ts,
	})

	rctx, root := tracer.Start(rctx, "POST /checkout", trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(at(0)),
		trace.WithAttributes(
			attribute.String("http.request.method", "POST"),
			attribute.String("unicode", "žluťoučký kůň ✓"),
			attribute.Bool("app.cache_hit", true),
			attribute.Int64("budget.remaining_ms", 2500),
			attribute.Int64("big", -9_007_199_254_740_993),
			attribute.Float64("ratio", 0.25),
			attribute.Float64("tiny", 1e-300),
			attribute.StringSlice("http.request.header.x-request-timeout-ms", []string{"2500"}),
			attribute.Int64Slice("ints", []int64{1, -2, 3}),
			attribute.Float64Slice("floats", []float64{1.5, 2e21}),
			attribute.BoolSlice("bools", []bool{true, false}),
			attribute.ByteSlice("bytes", []byte{0xde, 0xad, 0xbe, 0xef}),
			attribute.Slice("mixed", attribute.StringValue("a"), attribute.Int64Value(1), attribute.BoolValue(false)),
			attribute.Map("map", attribute.String("a", "x"), attribute.Int64("b", 2), attribute.Float64Slice("c", []float64{0.5})),
		))
	root.AddEvent("budget.cancelled", trace.WithTimestamp(at(40)),
		trace.WithAttributes(attribute.String("budget.cancel_source", "deadline")))
	root.AddEvent("marker", trace.WithTimestamp(at(41)))

	cctx, call := tracer.Start(rctx, "POST /charges", trace.WithSpanKind(trace.SpanKindClient), trace.WithTimestamp(at(1)),
		trace.WithAttributes(attribute.Int64("budget.timeout_ms", 800), attribute.Int64("budget.attempt", 1)),
		trace.WithLinks(trace.Link{SpanContext: linked, Attributes: []attribute.KeyValue{attribute.String("link.kind", "retry-of")}},
			trace.Link{SpanContext: linked}))
	_, work := tracer.Start(cctx, "score", trace.WithSpanKind(trace.SpanKindInternal), trace.WithTimestamp(at(2)))
	work.End(trace.WithTimestamp(at(2)))       // zero duration
	call.SetStatus(codes.Ok, "ignored for ok") // OTLP keeps no message for OK
	call.End(trace.WithTimestamp(at(30)))
	_, produce := tracer.Start(rctx, "orders publish", trace.WithSpanKind(trace.SpanKindProducer), trace.WithTimestamp(at(31)))
	produce.End(trace.WithTimestamp(at(32)))
	_, consume := tracer.Start(rctx, "orders process", trace.WithSpanKind(trace.SpanKindConsumer), trace.WithTimestamp(at(33)))
	consume.SetStatus(codes.Error, "queue closed")
	consume.End(trace.WithTimestamp(at(39)))
	root.SetStatus(codes.Error, "context deadline exceeded")
	root.End(trace.WithTimestamp(at(45)))

	require.NoError(t, tp.ForceFlush(ctx), "export to budgetd")
	// Read before Shutdown, which empties the in-memory exporter.
	spans := mem.GetSpans()
	require.NoError(t, tp.Shutdown(ctx))
	require.Len(t, spans, 5)
	return spans
}

// schemaSpan is the schema.Span budgetd must store for a span the SDK
// exported, built from the SDK's own record rather than through ingest's
// converter.
func schemaSpan(s tracetest.SpanStub) schema.Span {
	out := schema.Span{
		TraceID:       schema.TraceID(s.SpanContext.TraceID()),
		SpanID:        schema.SpanID(s.SpanContext.SpanID()),
		ParentSpanID:  schema.SpanID(s.Parent.SpanID()),
		TraceState:    s.SpanContext.TraceState().String(),
		Name:          s.Name,
		Kind:          schema.SpanKind(s.SpanKind),
		StartNs:       uint64(s.StartTime.UnixNano()),
		EndNs:         uint64(s.EndTime.UnixNano()),
		StatusCode:    schema.StatusCode(s.Status.Code),
		ScopeName:     s.InstrumentationScope.Name,
		ScopeVersion:  s.InstrumentationScope.Version,
		ResourceAttrs: sdkAttrs(s.Resource.Attributes()),
		Attrs:         sdkAttrs(s.Attributes),
	}
	// The SDK numbers status codes Unset, Error, Ok; OTLP Unset, Ok, Error.
	switch s.Status.Code {
	case codes.Ok:
		out.StatusCode = schema.StatusOK
	case codes.Error:
		out.StatusCode = schema.StatusError
		out.StatusMessage = s.Status.Description
	}
	for _, kv := range s.Resource.Attributes() {
		if kv.Key == "service.name" {
			out.Service = kv.Value.AsString()
		}
	}
	for _, e := range s.Events {
		out.Events = append(out.Events, schema.Event{TimeNs: uint64(e.Time.UnixNano()), Name: e.Name, Attrs: sdkAttrs(e.Attributes)})
	}
	for _, l := range s.Links {
		// The SDK's OTLP exporters do not send a link's trace state
		// (v1.47 leaves Span_Link.trace_state empty), so none arrives.
		out.Links = append(out.Links, schema.Link{
			TraceID: schema.TraceID(l.SpanContext.TraceID()),
			SpanID:  schema.SpanID(l.SpanContext.SpanID()),
			Attrs:   sdkAttrs(l.Attributes),
		})
	}
	return out
}

// sdkAttrs renders SDK attributes in schema's canonical forms (see
// schema.Attr): JSON, as encoding/json writes it, for arrays and maps.
func sdkAttrs(kvs []attribute.KeyValue) schema.Attributes {
	if len(kvs) == 0 {
		return nil
	}
	out := make(schema.Attributes, len(kvs))
	for i, kv := range kvs {
		a := schema.Attr{Key: string(kv.Key)}
		v := kv.Value
		switch v.Type() {
		case attribute.STRING:
			a.Type, a.Value = schema.AttrString, v.AsString()
		case attribute.BOOL:
			a.Type, a.Value = schema.AttrBool, strconv.FormatBool(v.AsBool())
		case attribute.INT64:
			a.Type, a.Value = schema.AttrInt, strconv.FormatInt(v.AsInt64(), 10)
		case attribute.FLOAT64:
			a.Type, a.Value = schema.AttrDouble, strconv.FormatFloat(v.AsFloat64(), 'g', -1, 64)
		case attribute.BYTESLICE:
			a.Type, a.Value = schema.AttrBytes, base64.StdEncoding.EncodeToString(v.AsByteSlice())
		case attribute.MAP:
			a.Type, a.Value = schema.AttrMap, mustJSON(jsonValue(v))
		default: // the slices
			a.Type, a.Value = schema.AttrSlice, mustJSON(jsonValue(v))
		}
		out[i] = a
	}
	return out
}

// jsonValue returns v as the Go value encoding/json renders canonically.
func jsonValue(v attribute.Value) any {
	switch v.Type() {
	case attribute.SLICE:
		out := []any{}
		for _, e := range v.AsSlice() {
			out = append(out, jsonValue(e))
		}
		return out
	case attribute.MAP:
		out := map[string]any{}
		for _, kv := range v.AsMap() {
			out[string(kv.Key)] = jsonValue(kv.Value)
		}
		return out
	}
	return v.AsInterface()
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// sortSpans orders spans by span id, for comparing sets of spans.
func sortSpans(spans []schema.Span) {
	sort.Slice(spans, func(i, j int) bool {
		return string(spans[i].SpanID[:]) < string(spans[j].SpanID[:])
	})
}
