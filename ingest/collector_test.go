package ingest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/budgetd/budgetd/proctest"
	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/store"
	"github.com/budgetd/budgetd/store/chsql"
)

// Where `make test-setup` (scripts/install-otelcol.sh and
// scripts/install-telemetrygen.sh) puts the real OTLP senders.
const (
	otelcolPath      = ".cache/otelcol/otelcol-budgetd"
	telemetrygenPath = ".cache/bin/telemetrygen"
)

// collectorSpans is how many spans the Collector test sends: enough for
// the Collector's exporters to split them over several requests.
const collectorSpans = 3000

// TestCollector puts budgetd behind a real OpenTelemetry Collector, as
// users deploy it: the SDK sends spans to the Collector's OTLP receiver and
// the Collector exports them to budgetd with its otlp_grpc exporter (zstd),
// its otlp_http exporter (protobuf, gzip) and otlp_http with JSON, each to
// its own budgetd and database. Every span must arrive exactly once, and
// identical over the three paths.
func TestCollector(t *testing.T) {
	bin := proctest.Tool(t, otelcolPath)
	for _, eng := range engines() {
		t.Run(eng.name, func(t *testing.T) {
			inst := eng.start(t)
			type target struct {
				name string
				st   *chsql.Store
				ts   *testServer
			}
			targets := make([]target, 3)
			for i, name := range []string{"grpc", "http", "json"} {
				st := inst.open(t)
				targets[i] = target{name: name, st: st, ts: startServer(t, st, testConfig())}
			}
			receiver := proctest.FreeAddr(t)
			config := fmt.Sprintf(`receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %[1]s
exporters:
  otlp_grpc:
    endpoint: %[2]s
    compression: zstd
    tls:
      insecure: true
  otlp_http:
    endpoint: http://%[3]s
    compression: gzip
  otlp_http/json:
    endpoint: http://%[4]s
    encoding: json
    compression: zstd
service:
  telemetry:
    logs:
      level: warn
    metrics:
      level: none
  pipelines:
    traces/grpc:
      receivers: [otlp]
      exporters: [otlp_grpc]
    traces/http:
      receivers: [otlp]
      exporters: [otlp_http]
    traces/json:
      receivers: [otlp]
      exporters: [otlp_http/json]
`, receiver, targets[0].ts.grpcAddr, targets[1].ts.httpAddr, targets[2].ts.httpAddr)
			col := proctest.StartConfigured(t, "the Collector", bin, config, receiver)

			sent := sendThroughCollector(t, receiver, collectorSpans)
			for _, tg := range targets {
				waitFor(t, "the Collector to deliver over "+tg.name, func() bool {
					distinct, _ := distinctSpans(t, tg.st)
					return distinct >= uint64(collectorSpans)
				})
			}
			// Stopping the Collector flushes whatever it still holds: a
			// duplicate would show now.
			col.Stop(t)
			var first []schema.Span
			for _, tg := range targets {
				distinct, rows := distinctSpans(t, tg.st)
				require.Equal(t, uint64(collectorSpans), distinct, "spans stored over %s", tg.name)
				require.Equal(t, uint64(collectorSpans), rows, "spans stored exactly once over %s", tg.name)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				got, _, err := tg.st.Trace(ctx, sent, store.TraceLimits{})
				cancel()
				require.NoError(t, err)
				if first == nil {
					first = got
					continue
				}
				require.Equal(t, first, got, "a trace stored over %s differs from over grpc", tg.name)
			}
		})
	}
}

// sendThroughCollector sends n spans, in traces of ten, to an OTLP/gRPC
// receiver with the SDK and returns one of the trace ids.
func sendThroughCollector(t *testing.T, receiver string, n int) schema.TraceID {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(receiver), otlptracegrpc.WithInsecure())
	require.NoError(t, err)
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "through-collector"))),
		sdktrace.WithSampler(sdktrace.AlwaysSample()),
		// A queue for every span: the SDK drops what does not fit, and
		// this test counts.
		sdktrace.WithBatcher(exp, sdktrace.WithMaxQueueSize(n), sdktrace.WithMaxExportBatchSize(500)),
	)
	tracer := tp.Tracer("budgetd/ingest/test")
	var first trace.TraceID
	for i := 0; i < n; i += 10 {
		rctx, root := tracer.Start(ctx, "GET /", trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.Int("i", i), attribute.StringSlice("http.request.header.x-request-timeout-ms", []string{"1500"})))
		if i == 0 {
			first = root.SpanContext().TraceID()
		}
		for j := 1; j < 10; j++ {
			_, c := tracer.Start(rctx, "call "+strconv.Itoa(j), trace.WithSpanKind(trace.SpanKindClient),
				trace.WithAttributes(attribute.Int64("budget.timeout_ms", int64(100*j))))
			c.AddEvent("sent")
			c.End()
		}
		root.End()
	}
	require.NoError(t, tp.ForceFlush(ctx))
	require.NoError(t, tp.Shutdown(ctx))
	return schema.TraceID(first)
}

// telemetrygen's load: workers × traces × (1 root + child spans) spans.
const (
	telemetrygenWorkers    = 4
	telemetrygenTraces     = 5000 // per worker
	telemetrygenChildSpans = 4
	telemetrygenSpans      = telemetrygenWorkers * telemetrygenTraces * (1 + telemetrygenChildSpans)
)

// TestTelemetrygen sends 100k spans from telemetrygen, the OpenTelemetry
// load generator, over OTLP/gRPC and checks that every one is stored once.
func TestTelemetrygen(t *testing.T) {
	bin := proctest.Tool(t, telemetrygenPath)
	for _, eng := range engines() {
		t.Run(eng.name, func(t *testing.T) {
			st := eng.start(t).open(t)
			ts := startServer(t, st, testConfig())
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, "traces",
				"--otlp-insecure", "--otlp-endpoint", ts.grpcAddr,
				"--workers", strconv.Itoa(telemetrygenWorkers),
				"--traces", strconv.Itoa(telemetrygenTraces),
				"--child-spans", strconv.Itoa(telemetrygenChildSpans),
				"--rate", "0", "--batch-size", "1000")
			// telemetrygen generates faster than any exporter sends; a
			// queue holding every span keeps the SDK from dropping any.
			cmd.Env = append(os.Environ(), "OTEL_BSP_MAX_QUEUE_SIZE="+strconv.Itoa(telemetrygenSpans))
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "telemetrygen: %s", out)
			distinct, rows := distinctSpans(t, st)
			require.Equal(t, uint64(telemetrygenSpans), distinct, "spans stored")
			require.Equal(t, uint64(telemetrygenSpans), rows, "spans stored exactly once")
			require.Equal(t, float64(telemetrygenSpans),
				metricValue(t, ts, "budgetd_ingest_spans_accepted_total", map[string]string{"transport": transportGRPC}))
		})
	}
}
