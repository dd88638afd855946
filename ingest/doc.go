// Package ingest turns OTLP trace data into budgetd's span model.
//
// It is the only package that imports the OpenTelemetry Collector's pdata,
// so the rest of budgetd (analyze, store, api) speaks schema.Span only and a
// pdata upgrade touches one place.
//
// Two pieces live here today:
//
//   - Converter turns a decoded ptrace.Traces into []schema.Span. It applies
//     the limits of DESIGN §6 (attribute values over 2 KiB are truncated;
//     attributes, events and links beyond a per-span maximum are dropped),
//     repairs invalid UTF-8, rejects spans that cannot be placed in a trace
//     (all-zero trace or span id, end before start) and counts everything it
//     changed in Stats, so the OTLP handlers can answer with partial_success
//     and export metrics without logging per span.
//   - ReadTraces and ReadSpansFile read OTLP trace files (binary protobuf,
//     OTLP/JSON, or the Collector file exporter's JSON lines) for the offline
//     `budgetd analyze FILE` path and for tests.
//
// Attribute values are stored in schema's canonical string form (see
// schema.Attr). Arrays and maps become JSON encoded exactly as encoding/json
// would encode the equivalent Go values, so an attribute built with
// schema.Strings and the same attribute received over OTLP are equal.
package ingest
