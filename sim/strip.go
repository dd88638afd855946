package sim

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/budgetd/budgetd/schema"
)

// budgetHeaderAttrs are the recorded request headers budgetd reads a budget
// from when budget.* is absent (DESIGN §4). Stripping removes them too: a
// service with no budget instrumentation records neither.
var budgetHeaderAttrs = map[attribute.Key]bool{
	schema.AttrHeaderRequestTimeoutMs: true,
	schema.AttrHeaderGRPCTimeout:      true,
	schema.AttrMetadataGRPCTimeout:    true,
	schema.AttrHeaderEnvoyExpectedMs:  true,
	schema.AttrHeaderRequestDeadline:  true,
}

// isBudgetKey reports whether an attribute or event name belongs to the
// budget contract.
func isBudgetKey(k string) bool {
	return strings.HasPrefix(k, "budget.") || budgetHeaderAttrs[attribute.Key(k)]
}

// strippingExporter removes every budget.* attribute and event and every
// budget header attribute from the spans before they are exported, so a run
// shows what budgetd finds in a system with no budget instrumentation at
// all: span kinds, names, times and status codes only.
type strippingExporter struct {
	sdktrace.SpanExporter
}

func (e strippingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	out := make([]sdktrace.ReadOnlySpan, len(spans))
	for i, s := range spans {
		out[i] = strippedSpan{s}
	}
	return e.SpanExporter.ExportSpans(ctx, out)
}

// strippedSpan is a span without its budget attributes and events.
type strippedSpan struct {
	sdktrace.ReadOnlySpan
}

func (s strippedSpan) Attributes() []attribute.KeyValue {
	return StripBudgetAttrs(s.ReadOnlySpan.Attributes())
}

func (s strippedSpan) Events() []sdktrace.Event {
	return StripBudgetEvents(s.ReadOnlySpan.Events())
}

// StripBudgetEvents returns evs without the budget events (budget.cancelled)
// and with StripBudgetAttrs applied to the others: what a service with no
// budget instrumentation records. sim/shapes strips its spans with it too.
func StripBudgetEvents(evs []sdktrace.Event) []sdktrace.Event {
	var out []sdktrace.Event
	for _, e := range evs {
		if isBudgetKey(e.Name) {
			continue
		}
		e.Attributes = StripBudgetAttrs(e.Attributes)
		out = append(out, e)
	}
	return out
}

// StripBudgetAttrs returns kvs without the budget.* attributes and the
// budget header attributes budgetd reads a budget from.
func StripBudgetAttrs(kvs []attribute.KeyValue) []attribute.KeyValue {
	out := make([]attribute.KeyValue, 0, len(kvs))
	for _, kv := range kvs {
		if !isBudgetKey(string(kv.Key)) {
			out = append(out, kv)
		}
	}
	return out
}
