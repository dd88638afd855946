package budgetread

import "github.com/budgetd/budgetd/schema"

// Cancellation is one budget.cancelled event on a span.
type Cancellation struct {
	TimeNs uint64
	Source string // caller_disconnect | deadline | upstream | "" when not recorded
}

// Facts is what one span says about its deadline budget, read from the
// budget.* attributes or, where those are absent, inferred from the fallbacks
// of DESIGN §4. Pointers are nil when the span says nothing.
type Facts struct {
	RemainingMs  *float64
	Source       schema.BudgetSource
	TimeoutMs    *float64
	PropagatedMs *float64
	Attempt      uint32 // 1-based; 0 when unknown
	MaxAttempts  uint32 // 0 when unknown
	BackoffMs    *float64
	Rejected     bool
	// TimedOut is true when the span's status says the call ended in a
	// timeout or a cancellation: it gave up, or was given up on, rather than
	// getting its answer. The evidence and its precedence are those of
	// docs/attributes.md §3: error.type, gRPC and HTTP status codes in both
	// semantic-convention generations, and, on a failed span without an RPC
	// status, the status description and exception events.
	TimedOut bool
	// Cancelled is true when the status says the call was cancelled rather
	// than timed out (error.type containing "cancel", gRPC 1, HTTP 499,
	// "context canceled", TaskCanceledException…): someone above gave up,
	// so the span's duration says nothing about its own timeout. TimedOut
	// is true too. A cancellation the evidence explains by a timeout (.NET's
	// "canceled due to the configured HttpClient.Timeout") is a timeout.
	Cancelled     bool
	Cancellations []Cancellation
	// Inferred is true when RemainingMs came from a header fallback rather
	// than budget.remaining_ms. On a CLIENT/PRODUCER span the request
	// headers are the budget sent downstream, so there the fallback fills
	// PropagatedMs instead and Inferred says that PropagatedMs was inferred.
	Inferred bool
	// Invalid lists the attributes whose values could not be used. They were
	// ignored; callers count them.
	Invalid []InvalidValue
}

// InvalidValue names an attribute whose value was ignored, and why.
type InvalidValue struct {
	Key    string
	Reason string
}
