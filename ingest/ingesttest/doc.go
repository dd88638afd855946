// Package ingesttest generates realistic OTLP trace data for tests and
// benchmarks: multi-service call trees with the budget.* attributes of
// docs/attributes.md, header fallbacks, retries, timeouts and cancellation
// events, grouped by resource the way an OpenTelemetry Collector batches
// them.
//
// The output is deterministic for a seed, so a failing test or a benchmark
// comparison can be reproduced exactly.
package ingesttest
