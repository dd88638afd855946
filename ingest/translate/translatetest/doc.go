// Package translatetest writes OTLP traces as Jaeger JSON and Zipkin v2 JSON
// the way real producers do, for tests of package translate and of
// `budgetd analyze` on those formats: JaegerJSON mirrors what Jaeger v2's
// query service answers for traces it received over OTLP (the Collector's
// traces_to_jaegerproto.go, then Jaeger's UI model), ZipkinJSON what the
// Collector's Zipkin exporter posts (from_translator.go of v0.161.0 with its
// default feature gates, then zipkin-go's JSON encoding, which lower-cases
// span and service names).
//
// JaegerLosses and ZipkinLosses say what of a trace the format cannot carry,
// so a test can leave out, by a rule and with the reason, the fixtures it
// cannot expect to survive the trip. RequireSameFindings compares two
// analyses.
package translatetest
