package durable

import (
	"context"
	"errors"

	"github.com/budgetd/budgetd/schema"
)

// Durability is the contract ingest calls: where an accepted request's
// spans become durable, so the request can be acknowledged. The OTLP
// handlers acknowledge a request only after Commit returned nil for its
// spans, which is what makes "nothing acknowledged is lost" hold. Both
// modes — the write-ahead log (Durable) and direct store writes (Batcher) —
// store the spans through one writer and then hand them to the analysis
// Sink, so ingest neither writes nor analyses anything itself.
type Durability interface {
	// Admits reports, before a request is decoded, whether spans decoded
	// from a protobuf request of protoBytes bytes may fit. False should mean
	// Commit would refuse them: under overload, senders retry, and decoding
	// requests that are refused anyway takes the CPU the store needs to
	// catch up. A wrong false costs the sender a retry, never data.
	Admits(protoBytes int) bool
	// Commit makes spans durable or returns why not. It returns when that
	// is decided or ctx ends, whichever is first. Errors matching
	// ErrOverloaded or ErrClosed, wrapping store.ErrUnavailable or a
	// context error tell the sender to retry later. Commit must not modify
	// spans; the caller must not modify them after Commit returned (they
	// go on to the analysis).
	Commit(ctx context.Context, spans []schema.Span) error
	// Shutdown stops accepting spans and finishes what was accepted,
	// giving up when ctx ends. Ingest calls it once no handler can call
	// Commit any more.
	Shutdown(ctx context.Context) error
	// Stalled returns why the write path cannot store what it accepted
	// (for /readyz), or nil.
	Stalled() error
}

// CopyingDurability is a Durability whose Commit copies what it keeps of
// the spans before it returns, whatever it returns (the write-ahead log
// encodes them into its record), so the caller may reuse the spans'
// memory, their strings' included, as soon as Commit has returned.
type CopyingDurability interface {
	Durability
	// CommitCopies only marks the guarantee.
	CommitCopies()
}

// ErrOverloaded is returned by Commit when the spans do not fit. It is
// momentary: the handlers answer 503 / UNAVAILABLE with a retry delay.
var ErrOverloaded = errors.New("ingest queue full")

// ErrClosed is returned by Commit after Shutdown began.
var ErrClosed = errors.New("ingest shutting down")

// Sink receives every batch of spans once the store has it, for analysis.
// Spans is called on the write path's goroutine, so it must not block: an
// implementation hands the spans to its own bounded queue and counts what
// it drops. The spans are read-only (spans of one resource share their
// ResourceAttrs); the Sink may keep them.
type Sink interface {
	Spans(spans []schema.Span)
}

// NopSink is a Sink that ignores spans.
type NopSink struct{}

// Spans implements Sink.
func (NopSink) Spans([]schema.Span) {}
