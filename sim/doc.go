// Package sim runs a call chain of real services on loopback and writes down
// what really happened, so budgetd's findings can be checked against it.
//
// A Scenario (a YAML file, see docs/experiments.md) describes a chain: a
// client at the edge and the hops below it, each with a timeout policy,
// retries, its own work, injected latency and transit delay, and whether it
// stops working when its caller leaves. Run starts one HTTP server per hop on
// 127.0.0.1, each instrumented with the OpenTelemetry Go SDK (its own
// TracerProvider and service.name, otelhttp on both sides, spans exported
// over OTLP), records the budget attributes of docs/attributes.md on those
// spans — through package budget for the deadline policy, by hand for the
// others — and drives requests through the chain.
//
// While it runs, the simulator observes the chain from the inside: every
// call attempt, every handler invocation, the instant each caller stopped
// waiting and the instant each handler stopped working. From that it
// computes the ground truth (Truth): calls per hop, calls of the leaf,
// end-to-end latency, success, and the work done after the caller gave up,
// defined exactly as budgetd's orphaned_work detector defines it (DESIGN §5)
// so the two can be compared figure by figure.
//
// Time is scaled: a scenario is written in the units of the system it models
// (a 30 s timeout, 14 s database queries) and runs at time_scale of that
// (0.05: one scenario second is 50 ms), so a scenario takes seconds. The
// spans, and so everything budgetd reports, are in real (scaled) time; Truth
// gives every duration in both.
package sim
