// Package otelfollow follows the otel_traces table the OpenTelemetry
// Collector's ClickHouse exporter writes, for `budgetd serve` with
// follow.otel_traces configured: every poll it finds the traces that
// became due, reads them whole (store/oteltraces, read-only) and commits
// their spans to budgetd's own write path (durable.Durability), the path
// OTLP requests take, so they are stored in budgetd's spans table and
// analysed by the streaming pipeline exactly as if a Collector had sent
// them.
//
// Due rule: a trace is due when the latest end (Timestamp + Duration) of
// its spans is at or before now − settle. The position is the end up to
// which every trace has been handed over; each poll takes the traces whose
// latest end lies in (position, now − settle], in the order they end, and
// then stores the new position in budgetd's database (follow_positions),
// so a restart resumes there. A trace's latest end lies in exactly one such
// window, so it is handed over once; a span written after its trace was
// handed over and ending after it moves the trace into a later window, and
// the analysis re-opens the trace as it does for late OTLP spans.
//
// Nothing is analysed twice: before committing, the spans budgetd already
// stores are left out (the store's MissingSpans), and the write path's
// resend filter (ingest.durability.dedup) catches those committed but not
// yet stored — the window between a commit and the saved position, should
// the process die in it.
package otelfollow
