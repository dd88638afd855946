// Package ingest receives OTLP trace data and turns it into budgetd's span
// model.
//
// It and its subpackage translate are the only packages that import the
// OpenTelemetry Collector's pdata, so the rest of budgetd (analyze, store,
// api) speaks schema.Span only and a pdata upgrade touches one place.
//
// The pieces:
//
//   - Server is budgetd's OTLP endpoint, a drop-in exporter target for the
//     OpenTelemetry Collector and the SDKs (DESIGN §6): OTLP/gRPC
//     TraceService/Export on :4317 and OTLP/HTTP POST /v1/traces on :4318,
//     protobuf or JSON, gzip or zstd. Both transports share one export
//     path: decode within the size limit, Converter.Convert, commit to the
//     Durability, hand the spans to the analysis Sink, answer. A request is
//     acknowledged only after its spans are committed; malformed requests
//     get 400 / INVALID_ARGUMENT, oversized ones 413 / RESOURCE_EXHAUSTED,
//     individually invalid spans a partial_success, and overload or store
//     trouble 503 / UNAVAILABLE with a retry delay, which senders retry.
//   - Batcher is the Durability that writes to the store: one writer
//     goroutine groups concurrent requests into few, large inserts, each
//     under a dedup token its retries reuse. Package durable implements
//     the same interface with a write-ahead log.
//   - Converter turns a decoded ptrace.Traces into []schema.Span. It applies
//     the limits of DESIGN §6 (attribute values over 2 KiB are truncated;
//     attributes, events and links beyond a per-span maximum are dropped),
//     repairs invalid UTF-8, rejects spans that cannot be placed in a trace
//     (all-zero trace or span id, end before start) and counts everything it
//     changed in Stats, so the OTLP handlers can answer with partial_success
//     and export metrics without logging per span.
//   - ReadTraces and ReadSpansFile read trace files (binary protobuf,
//     OTLP/JSON, the Collector file exporter's JSON lines, and through
//     package translate Jaeger JSON and Zipkin v2 JSON) for the offline
//     `budgetd analyze FILE` path and for tests. Every format goes through
//     the same Converter, so limits and rejected spans are the same.
//
// Attribute values are stored in schema's canonical string form (see
// schema.Attr). Arrays and maps become JSON encoded exactly as encoding/json
// would encode the equivalent Go values, so an attribute built with
// schema.Strings and the same attribute received over OTLP are equal.
package ingest
