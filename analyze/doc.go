// Package analyze runs budgetd's detectors (DESIGN §5): it rebuilds each
// trace's call tree, works out how much of the end-to-end deadline every hop
// really had, and reports where the chain of timeouts, budgets and retries
// does not add up.
//
// The package is pure. It does no I/O, reads no clock (callers pass now) and
// holds no package-level state, so the streaming pipeline and the offline
// `budgetd analyze` share it and tests are exact. Analyzer keeps the only
// state, bounded per-edge statistics, and is safe for concurrent use.
//
// # Entry points
//
// Analyzer.Trace analyses one assembled trace: one schema.Hop per span, the
// per-trace findings, and the clock-skew corrections it applied.
// Analyzer.Edges and Analyzer.EdgeFindings read the windowed edge statistics
// and the latency_inversion findings built from them. Analyze does all of it
// for a batch of spans offline, and EdgeStatsFromHops computes the same edge
// statistics from stored hops. Thin leaves out the hops a store need not
// keep (work inside a service that its parent's hop says all of), and
// Rebuild puts them back from a trace's spans.
//
// # Hops and paths
//
// An entry span starts a hop: a root, a span whose parent is missing, a
// SERVER or a CONSUMER span. Its path is the "service:operation" of every
// entry from the root down to it, joined by " > ". A CLIENT or PRODUCER span's
// path is its enclosing entry's path followed by its callee, named by the
// callee's SERVER/CONSUMER span or, when the callee recorded none, by the
// call's peer.service, server.address, db.system.name, db.system,
// messaging.system or rpc.service attribute ("unknown" when none is set) and
// the call's span name. The callee is resolved once per logical call, so all
// attempts share a path. A subtree whose parent is missing has a path
// starting with "… > "; paths stop growing after 64 elements and end in "…".
//
// # Attempts
//
// CLIENT/PRODUCER siblings with the same name and peer are candidate attempts
// of one logical call, in start order. An explicit attempt number (from
// budgetread.Read on the call, or on the callee's span from headers such as
// x-envoy-attempt-count) decides: 1, or a number not above the previous one,
// starts a new call. Without one, a sibling continues a call whose last
// attempt failed (error status, timeout, 5xx, 429, a gRPC error) and had
// ended when it started; identical successful or overlapping siblings are
// separate calls, as in a handler that queries a table in a loop, fans out
// to shards or hedges a request.
//
// # Time and budget
//
// R at a span is the minimum, over the span and its ancestors carrying
// budget.remaining_ms (or a budget inferred from headers), of that budget
// minus the time elapsed since that ancestor started; a reset below never
// raises it. A recorded budget may have been read up to the skew tolerance
// after its span started (a middleware runs after the SERVER span began),
// and a budget passed on as a relative figure restarts at each arrival, so
// the verdicts that need R to be small enough must hold for that much more
// (clockSlack, docs/attributes.md §3b).
//
// Asynchronous boundaries: a CONSUMER span under another service's span, or
// any child of a PRODUCER span, starts a new chain. Nobody waits for it, so
// neither the publisher's deadline nor its callers giving up reach it;
// only a budget the message carried (on the consumer's span) does.
//
// G, the instant a span's callers stopped waiting, is the earliest
// of the ends of its CLIENT ancestors (a PRODUCER does not wait), the root
// deadline (the root's start plus its budget or, when the root carries none,
// that of the topmost hop with budget.source=edge) and any budget.cancelled
// event on the span or its ancestors.
//
// Clock skew: a CLIENT span that got its server's answer (gotAnswer: it
// neither timed out nor was cancelled, in any status convention, and it
// succeeded or failed with the same outcome as its server) bounds its
// SERVER child. A child sticking out by more than the
// skew tolerance is moved, with its subtree, to the middle of the client (or
// to the client's start when it is longer than the client) and reported as a
// Skew. A client that gave up bounds nothing, so its server running late is
// reported as orphaned work, never corrected away.
//
// # Severity
//
// A figure off by a factor of two is no tuning matter, so:
//
//   - timeout_inversion: critical when the timeout is at least twice the
//     remaining budget or nothing was left; warning otherwise.
//   - budget_reset: critical when the received budget is at least twice what
//     was left or nothing was left; warning otherwise (and for a bare
//     budget.source=default).
//   - unfunded_retry_policy: critical when the policy needs at least twice
//     the time left or nothing was left; warning otherwise.
//   - latency_inversion: critical when the callee's median, not only its
//     p99, reaches the caller's median timeout; warning otherwise.
//   - orphaned_work: critical from 1 s, warning from 100 ms, info below.
//   - expired_on_arrival: critical when the expired request ran 1 s or more;
//     warning otherwise.
//   - retry_amplification: critical when retries multiplied at three or more
//     levels, or calls reach three times the threshold; warning otherwise.
//   - retry_without_budget: critical when nothing was left; warning when
//     some time was left but less than the edge's median latency.
//
// # Retry amplification
//
// Per trace, the leaf calls (CLIENT/PRODUCER spans with no call below) are
// grouped by path; calls is the size of a group and levels the number of
// distinct call paths above and including those calls where a logical call
// was attempted more than once. It fires at levels ≥ 2, or when one level
// retried and calls reach the threshold times the calls the path would have
// had without retries: fan-out without retries is not amplification, and
// neither is one retried shard among many.
//
// # Edge statistics
//
// An edge is caller service/operation → callee service/operation. Each call
// attempt contributes a call (a retry when its attempt is > 1), its timeout,
// and a latency: the callee's own SERVER/CONSUMER span when it recorded one
// (the caller's span stops at its timeout, the callee's does not), the call
// span otherwise; a PRODUCER's own span, since it never waits for its
// consumer. A callee that stopped at the deadline it was given, or with its
// caller's giving up, counts as a call but not as a latency: that is when its budget ran out, not how long
// its work takes. An entry span whose caller's client was not instrumented
// counts as a call with its own duration. Latency quantiles come from a
// bounded log-bucketed sketch with 1 % relative error; timeouts are counted
// exactly while an edge has at most 32 distinct values and sketched beyond.
// The Analyzer keeps, per edge, ten time slices covering the window, and at
// most MaxEdges edges: samples of new edges beyond that are refused and
// counted until old edges leave the window.
package analyze
