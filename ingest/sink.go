package ingest

import "github.com/budgetd/budgetd/schema"

// Sink receives the spans of every committed request, for analysis. Spans
// is called on the request's goroutine after its spans are durable and
// before the sender is answered, so it must not block: an implementation
// hands the spans to its own bounded queue and counts what it drops. The
// spans are read-only (spans of one resource share their ResourceAttrs);
// the Sink may keep them.
type Sink interface {
	Spans(spans []schema.Span)
}

// NopSink is a Sink that ignores spans.
type NopSink struct{}

// Spans implements Sink.
func (NopSink) Spans([]schema.Span) {}
