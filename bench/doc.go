// Package bench measures budgetd against the OpenTelemetry Collector and
// Jaeger v2 on the same machine with the same load: the harness
// (cmd/budgetd-bench) starts each target as a real process, drives it with
// OTLP/gRPC requests of realistic spans from concurrent clients, and
// reports sustained spans/s, CPU seconds per million spans, peak RSS and
// acknowledgement latency, next to the floor: the Collector's cost of
// receiving plus the embedded engine's cost of storing the same rows
// (floor.go). docs/performance.md has the figures and the command.
package bench
