// Package plan does the budget arithmetic for a planned chain of hops, the
// check DESIGN §1 promises for CI: before a chain of timeouts and retry
// policies ships, work out how much of the client's budget each hop receives
// and report every place where the configuration cannot hold.
//
// # The model
//
// A Chain is an ordered list of hops, the first being where the budget is set
// (a client or an edge service). Hop k receives a budget for the call into it
// (the client's budget for the first hop, the budget hop k−1 passed down for
// the others). When the hop is called with retries, its attempts and the
// backoffs between them share that budget:
//
//	per attempt = (budget − backoff × (attempts − 1)) / attempts
//
// truncated to whole milliseconds. Inside each attempt the hop spends its own
// work and reserves transit (a high percentile of its downstream call's
// network time, not the median) and slack; the rest is what it passes down to
// the next hop. A hop's timeout, retry policy and p50 therefore describe how
// it is called: they are the figures the caller configures and the latency the
// caller observes, which is also where traces record them (budget.timeout_ms
// and budget.max_attempts live on the caller's CLIENT span).
//
// # Violations
//
// Check reports, with the hop and the numbers: a configured per-attempt
// timeout above the budget the hop receives (timeout_inversion); a timeout
// not below the one configured above it, or a hop that passes down all it
// received (not_decreasing); attempts and backoffs that need more than the
// budget (unfunded_retry_policy); a budget that reaches zero
// (non_positive_budget, reported where it first happens); and attempts that
// get less time than the hop's observed median (budget_below_p50).
//
// Suggest proposes a split that holds: per-attempt timeouts equal to the
// budgets the plan computes; when the chain does not fit the client's budget,
// the allowances scaled down until it does, or, when retries leave too
// little for that, fewer attempts; and the smallest client budget that fits
// the chain as planned.
//
// FromStore builds a Chain from the hops budgetd has observed on one call
// path; the package is otherwise pure.
package plan
