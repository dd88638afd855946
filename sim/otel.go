package sim

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Protocols of Config.Protocol.
const (
	ProtocolGRPC = "grpc"
	ProtocolHTTP = "http"
)

// maxQueuedSpans bounds each provider's export queue. The processors block
// rather than drop when it is full, so the ground truth and the exported
// spans never disagree because of a silent drop.
const maxQueuedSpans = 16384

// spanCounter counts the spans the exporters delivered and lost.
type spanCounter struct {
	exported, failed atomic.Int64
}

// countingExporter counts what its exporter delivered.
type countingExporter struct {
	sdktrace.SpanExporter
	n *spanCounter
}

func (e countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := e.SpanExporter.ExportSpans(ctx, spans)
	if err != nil {
		e.n.failed.Add(int64(len(spans)))
	} else {
		e.n.exported.Add(int64(len(spans)))
	}
	return err
}

// newExporter returns an OTLP exporter for cfg's endpoint: host:port
// (plaintext) or a URL (http:// for plaintext, https:// for TLS; for
// OTLP/HTTP a URL without a path posts to /v1/traces).
func newExporter(ctx context.Context, cfg Config) (sdktrace.SpanExporter, error) {
	isURL := strings.Contains(cfg.Endpoint, "://")
	switch cfg.Protocol {
	case ProtocolHTTP:
		opt := otlptracehttp.WithEndpoint(cfg.Endpoint)
		opts := []otlptracehttp.Option{otlptracehttp.WithInsecure()}
		if isURL {
			u, err := url.Parse(cfg.Endpoint)
			if err != nil {
				return nil, fmt.Errorf("parse otlp endpoint: %w", err)
			}
			// A bare base URL means the standard path, as for the
			// OTEL_EXPORTER_OTLP_ENDPOINT variable.
			if u.Path == "" || u.Path == "/" {
				u.Path = "/v1/traces"
			}
			opt, opts = otlptracehttp.WithEndpointURL(u.String()), nil
		}
		exp, err := otlptracehttp.New(ctx, append(opts, opt)...)
		if err != nil {
			return nil, fmt.Errorf("create otlp/http exporter: %w", err)
		}
		return exp, nil
	default:
		opt := otlptracegrpc.WithEndpoint(cfg.Endpoint)
		opts := []otlptracegrpc.Option{otlptracegrpc.WithInsecure()}
		if isURL {
			opt, opts = otlptracegrpc.WithEndpointURL(cfg.Endpoint), nil
		}
		exp, err := otlptracegrpc.New(ctx, append(opts, opt)...)
		if err != nil {
			return nil, fmt.Errorf("create otlp/grpc exporter: %w", err)
		}
		return exp, nil
	}
}

// newProvider returns a TracerProvider for one service: its own resource,
// a batch processor and its own exporter, as a separately deployed service
// would have, and the recorder's span clock.
func newProvider(ctx context.Context, cfg Config, service string, n *spanCounter, rec *recorder) (*sdktrace.TracerProvider, error) {
	exp, err := newExporter(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if cfg.StripBudget {
		exp = strippingExporter{exp}
	}
	res := resource.NewSchemaless(attribute.String("service.name", service))
	return sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithSpanProcessor(spanClock{rec}),
		sdktrace.WithBatcher(countingExporter{SpanExporter: exp, n: n},
			sdktrace.WithBatchTimeout(cfg.BatchTimeout),
			sdktrace.WithMaxQueueSize(maxQueuedSpans),
			sdktrace.WithBlocking(),
		),
	), nil
}
