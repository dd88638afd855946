// Package translate turns trace files of other tracing systems into OTLP
// pdata, so that `budgetd analyze` reads them through the same Converter,
// limits and rejected-span counting as OTLP files (package ingest detects
// the format and calls Jaeger or Zipkin).
//
// It reads two JSON formats:
//
//   - Jaeger JSON: the query API's response to GET /api/traces and
//     /api/traces/{id}, which is also what the Jaeger UI downloads,
//     {"data":[{"traceID":…,"spans":[…],"processes":{…}}]}, or one such
//     trace object on its own.
//   - Zipkin v2 JSON: an array of spans, as POSTed to /api/v2/spans and
//     returned by GET /api/v2/trace/{id}.
//
// The mapping is the OpenTelemetry Collector's (opentelemetry-collector-contrib
// pkg/translator/jaeger, jaegerproto_to_traces.go, and
// pkg/translator/zipkin/zipkinv2, to_translator.go), so a trace reads the same
// whether the Collector received it or budgetd read it from a file. Where this
// package differs, the comment at the place says why; docs/formats.md lists
// what each format can and cannot carry for budgetd.
//
// The translators only decode and map. Invalid ids of the all-zero kind,
// times that end before they start and oversized values are left to the
// Converter, which rejects, cuts and counts them as it does for OTLP; what
// cannot be decoded at all (a malformed id, a negative time, a tag whose
// value does not match its type) is an error naming the span.
package translate
