// Package bench measures budgetd against the OpenTelemetry Collector on the
// same machine with the same load: the harness (cmd/budgetd-bench) starts
// each target as a real process, drives it with OTLP/gRPC requests of
// realistic spans from concurrent clients, and reports sustained spans/s,
// CPU seconds per million spans, peak RSS and acknowledgement latency.
// docs/performance.md has the figures and the command.
package bench
