// Package oteltraces reads the traces the OpenTelemetry Collector's
// ClickHouse exporter (contrib clickhouseexporter) writes, from its
// otel_traces table, for `budgetd analyze --from-otel-traces` (Read) and
// for `serve` following the table (Table.Due and Table.Traces, used by
// ingest/otelfollow).
//
// It only reads: it learns the table's layout from system.columns, builds
// its SELECT from the columns that exist, and never creates or alters
// anything in the source database. Required columns (TraceId, SpanId,
// ParentSpanId, SpanName, SpanKind, ServiceName, Timestamp, Duration,
// StatusCode) must exist; the others (TraceState, StatusMessage, ScopeName,
// ScopeVersion, the attribute maps, the Events and Links nested columns)
// are read when present. When the exporter's trace-id lookup
// (<table>_trace_id_ts: TraceId, Start, End) exists it narrows the reads of
// the chosen traces to the time range they cover.
//
// Rows become ptrace.Traces and go through the ingest Converter, the path
// trace files take, so limits, kinds, status codes and attribute handling
// are the same. What the table cannot give back: attribute types (the
// exporter stores every value as a string, so a numeric attribute arrives
// as its decimal text; budgetd's budget attribute readers accept numbers
// written as strings), dropped-attribute counts, span flags and the
// resource's and scope's own attributes beyond ResourceAttributes.
package oteltraces
