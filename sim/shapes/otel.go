package shapes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/budgetd/budgetd/ingest"
	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/sim"
)

// propagators carry the trace context between services. They are passed to
// the instrumentation explicitly: the scenarios set no globals.
var propagators = propagation.TraceContext{}

// sink collects the OTLP requests the exporters of one scenario run sent.
type sink struct {
	mu   sync.Mutex
	reqs [][]byte
}

// memClient is an otlptrace.Client that delivers to a sink instead of a
// network: it receives the ResourceSpans the real OTLP exporter built and
// marshals them into the ExportTraceServiceRequest a collector would get.
type memClient struct{ s *sink }

func (memClient) Start(context.Context) error { return nil }
func (memClient) Stop(context.Context) error  { return nil }

func (c memClient) UploadTraces(_ context.Context, rss []*tracepb.ResourceSpans) error {
	b, err := proto.Marshal(&coltracepb.ExportTraceServiceRequest{ResourceSpans: rss})
	if err != nil {
		return fmt.Errorf("marshal export request: %w", err)
	}
	c.s.mu.Lock()
	c.s.reqs = append(c.s.reqs, b)
	c.s.mu.Unlock()
	return nil
}

// spans decodes and converts every request received, with budgetd's own
// conversion (the path of `budgetd analyze FILE`).
func (s *sink) spans() ([]schema.Span, error) {
	conv, err := ingest.NewConverter(ingest.DefaultLimits())
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []schema.Span
	for _, b := range s.reqs {
		res, err := ingest.ReadSpans(bytes.NewReader(b), conv)
		if err != nil {
			return nil, fmt.Errorf("convert export request: %w", err)
		}
		if res.Rejected > 0 {
			return nil, fmt.Errorf("convert export request: %d spans rejected: %s", res.Rejected, res.RejectReason)
		}
		out = append(out, res.Spans...)
	}
	return out, nil
}

// telemetry owns the TracerProviders of one scenario run.
type telemetry struct {
	strip bool
	sink  *sink
	tps   []*sdktrace.TracerProvider
}

func newTelemetry(strip bool) *telemetry { return &telemetry{strip: strip, sink: &sink{}} }

// provOpt changes how one service's spans are exported.
type provOpt struct {
	// oldSemconv renames the attributes otelhttp emits to the names of the
	// older HTTP semantic conventions (oldHTTPNames), as an older
	// instrumentation library would have recorded them.
	oldSemconv bool
	// lost drops every span of the service before export: its spans were
	// sampled out or lost on the way, so the trace has a gap.
	lost bool
}

// provider returns a TracerProvider for one service: its own resource, a
// batch processor and its own real OTLP exporter, as a separately deployed
// service would have.
func (t *telemetry) provider(ctx context.Context, service string, o provOpt) (*sdktrace.TracerProvider, error) {
	exp, err := otlptrace.New(ctx, memClient{t.sink})
	if err != nil {
		return nil, fmt.Errorf("create otlp exporter: %w", err)
	}
	var se sdktrace.SpanExporter = exp
	if o.oldSemconv || t.strip || o.lost {
		se = rewritingExporter{SpanExporter: exp, strip: t.strip, old: o.oldSemconv, drop: o.lost}
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", service))),
		sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithBatcher(se, sdktrace.WithBlocking()),
	)
	t.tps = append(t.tps, tp)
	return tp, nil
}

// shutdown flushes and stops every provider. Call it once every server has
// stopped, so every span has ended.
func (t *telemetry) shutdown(ctx context.Context) error {
	var errs []error
	for _, tp := range t.tps {
		if err := tp.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("shut down tracer provider: %w", err))
		}
	}
	return errors.Join(errs...)
}

// oldHTTPNames maps the attribute names otelhttp v0.72 emits (HTTP semantic
// conventions v1.26+) to the names of the conventions before v1.20, which
// many deployed libraries (older otelhttp, Java agent 1.x, Python, .NET)
// still emit. Server spans had net.host.name/port, client spans
// net.peer.name/port; both are handled by the kind switch in rename.
var oldHTTPNames = map[string]string{
	"http.response.status_code": "http.status_code",
	"http.request.method":       "http.method",
	"url.full":                  "http.url",
	"url.path":                  "http.target",
	"url.scheme":                "http.scheme",
	"network.protocol.version":  "http.flavor",
	"user_agent.original":       "http.user_agent",
	"client.address":            "http.client_ip",
}

// rewritingExporter removes budget attributes and events (strip), renames
// attributes to the older semantic conventions (old), or drops every span
// (drop) before the real exporter sees them.
type rewritingExporter struct {
	sdktrace.SpanExporter
	strip, old, drop bool
}

func (e rewritingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if e.drop {
		return nil
	}
	out := make([]sdktrace.ReadOnlySpan, len(spans))
	for i, s := range spans {
		out[i] = rewrittenSpan{ReadOnlySpan: s, e: e}
	}
	return e.SpanExporter.ExportSpans(ctx, out)
}

type rewrittenSpan struct {
	sdktrace.ReadOnlySpan
	e rewritingExporter
}

func (s rewrittenSpan) Attributes() []attribute.KeyValue {
	kvs := s.ReadOnlySpan.Attributes()
	if s.e.strip {
		kvs = sim.StripBudgetAttrs(kvs)
	}
	if s.e.old {
		kvs = oldSemconv(kvs, s.SpanKind().String() == "server")
	}
	return kvs
}

func (s rewrittenSpan) Events() []sdktrace.Event {
	if !s.e.strip {
		return s.ReadOnlySpan.Events()
	}
	return sim.StripBudgetEvents(s.ReadOnlySpan.Events())
}

func oldSemconv(kvs []attribute.KeyValue, server bool) []attribute.KeyValue {
	out := make([]attribute.KeyValue, 0, len(kvs))
	for _, kv := range kvs {
		k := string(kv.Key)
		switch {
		case k == "server.address" && server:
			k = "net.host.name"
		case k == "server.address":
			k = "net.peer.name"
		case k == "server.port" && server:
			k = "net.host.port"
		case k == "server.port":
			k = "net.peer.port"
		case k == "error.type":
			continue // the older conventions had no error.type
		default:
			if n, ok := oldHTTPNames[k]; ok {
				k = n
			}
		}
		out = append(out, attribute.KeyValue{Key: attribute.Key(k), Value: kv.Value})
	}
	return out
}
