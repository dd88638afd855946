// Package shapes is a corpus of realistic trace shapes produced by real,
// unmodified OpenTelemetry instrumentation, each with a ground truth measured
// inside the process, and the scoring that compares budgetd's findings with
// that truth.
//
// Every scenario starts real services on 127.0.0.1 — gRPC servers and
// clients instrumented with otelgrpc's stats handlers, HTTP servers and
// clients instrumented with otelhttp, an in-process queue instrumented by
// hand per the OpenTelemetry messaging conventions — each with its own
// sdktrace.TracerProvider and service.name. Each provider exports through the
// real OTLP trace exporter (otlptrace.New) over an in-memory otlptrace.Client
// that marshals the exporter's ResourceSpans into an ExportTraceServiceRequest;
// the bytes are decoded and converted by package ingest exactly as a file
// given to `budgetd analyze` is (ingest.ReadSpans), so what the detectors see
// is what budgetd would have received over the wire.
//
// While a scenario runs, a recorder notes from the inside every call (when
// the caller started and stopped waiting, the timeout it set itself, the
// deadline it inherited) and every handler invocation (when it started and
// stopped working, which call caused it, the deadline a message carried).
// Truth derives from those instants the findings a correct budgetd must
// report (package sim/groundtruth, with its margins) so that no scored case
// is borderline; cases within the margins are Ambiguous and not scored.
//
// Run a scenario with Options.Strip to remove every budget.* attribute and
// event before export (the system as it looks without budget
// instrumentation). Truth then expects only what DESIGN §5 says budgetd can
// still tell from span kinds, names, times and status codes.
package shapes
