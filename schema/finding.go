package schema

import "time"

// Kind names a detector. The values are public (API, metrics, docs).
type Kind string

// The detector kinds of DESIGN §5.
const (
	KindTimeoutInversion    Kind = "timeout_inversion"
	KindBudgetReset         Kind = "budget_reset"
	KindUnfundedRetryPolicy Kind = "unfunded_retry_policy"
	KindLatencyInversion    Kind = "latency_inversion"
	KindOrphanedWork        Kind = "orphaned_work"
	KindExpiredOnArrival    Kind = "expired_on_arrival"
	KindRetryAmplification  Kind = "retry_amplification"
	KindRetryWithoutBudget  Kind = "retry_without_budget"
)

// Kinds lists every detector kind, in documentation order.
var Kinds = []Kind{
	KindTimeoutInversion, KindBudgetReset, KindUnfundedRetryPolicy, KindLatencyInversion,
	KindOrphanedWork, KindExpiredOnArrival, KindRetryAmplification, KindRetryWithoutBudget,
}

// ValidKind reports whether k is one of Kinds.
func ValidKind(k Kind) bool {
	for _, v := range Kinds {
		if v == k {
			return true
		}
	}
	return false
}

// Severity ranks a finding.
type Severity string

// The severities, least to most urgent.
const (
	SeverityInfo     Severity = "info"
	SeverityWarning  Severity = "warning"
	SeverityCritical Severity = "critical"
)

// ValidSeverity reports whether s is a known severity.
func ValidSeverity(s Severity) bool {
	return s == SeverityInfo || s == SeverityWarning || s == SeverityCritical
}

// Finding is one detector result, in exactly the shape of DESIGN §5: the API,
// `budgetd analyze --output json` and the store all carry these fields.
type Finding struct {
	ID            string             `json:"id"`
	Kind          Kind               `json:"kind"`
	Severity      Severity           `json:"severity"`
	TraceID       string             `json:"trace_id"` // lower-case hex; empty for edge aggregates
	SpanID        string             `json:"span_id"`  // lower-case hex; empty for edge aggregates
	Service       string             `json:"service"`
	Operation     string             `json:"operation"`
	CallerService string             `json:"caller_service"`
	CalleeService string             `json:"callee_service"`
	Path          string             `json:"path"`
	DetectedAt    time.Time          `json:"detected_at"` // serialised as RFC 3339
	Evidence      map[string]float64 `json:"evidence"`
	Message       string             `json:"message"`
}
