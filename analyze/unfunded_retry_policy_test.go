package analyze

import (
	"testing"

	"github.com/budgetd/budgetd/schema"
)

func TestUnfundedRetryPolicy(t *testing.T) {
	// inventory has 1700 ms and calls db at t=30, so R = 1670 there.
	chain := func(calls ...sp) []schema.Span {
		specs := []sp{{id: 1, svc: "inventory", name: "GET /stock", kind: server, start: 0, end: 1690, attrs: attrs(rem(1700))}}
		return build(1, append(specs, calls...)...)
	}
	db := func(id int, start, end float64, as ...schema.Attr) sp {
		return sp{id: id, parent: 1, svc: "inventory", name: "SELECT stock", kind: client, start: start, end: end, attrs: append(as, peerSvc("db"))}
	}
	tests := []struct {
		name  string
		spans []schema.Span
		want  []want
	}{
		{
			name:  "two attempts of 900 ms with 100 ms backoff need 1900 ms",
			spans: chain(db(2, 30, 200, tmo(900), maxAttempts(2), backoff(100))),
			want: []want{{span: 2, severity: schema.SeverityWarning, evidence: map[string]float64{
				"remaining_ms": 1670, "required_ms": 1900, "max_attempts": 2, "timeout_ms": 900, "backoff_ms": 100}}},
		},
		{
			// R is a difference of two spans' wall-clock start times: an
			// excess the skew tolerance explains is not judged.
			name:  "a policy needing less than the skew tolerance past what was left",
			spans: chain(db(2, 30, 200, tmo(835), maxAttempts(2), backoff(9))),
		},
		{
			// No clock reading enters it: the call started after the
			// budget was read.
			name:  "a policy needing the whole budget a millisecond after it was read",
			spans: chain(db(2, 1, 200, tmo(800), maxAttempts(2), backoff(100))),
			want: []want{{span: 2, severity: schema.SeverityWarning, evidence: map[string]float64{
				"remaining_ms": 1699, "required_ms": 1700, "max_attempts": 2, "timeout_ms": 800, "backoff_ms": 100}}},
		},
		{
			name:  "a policy divided from the budget is funded",
			spans: chain(db(2, 30, 200, tmo(780), maxAttempts(2), backoff(100))),
		},
		{
			name:  "a policy needing over twice the budget is critical",
			spans: chain(db(2, 30, 200, tmo(2000), maxAttempts(3), backoff(50))),
			want: []want{{span: 2, severity: schema.SeverityCritical, evidence: map[string]float64{
				"remaining_ms": 1670, "required_ms": 6100, "max_attempts": 3, "timeout_ms": 2000, "backoff_ms": 50}}},
		},
		{
			// A budget-paid retry sends each attempt what is left and is
			// bounded by it: its policy cannot overrun the budget.
			name:  "a call that propagates its budget is not judged",
			spans: chain(db(2, 30, 200, tmo(1665), maxAttempts(3), backoff(100), schema.Int(schema.AttrPropagatedMs, 1665))),
		},
		{
			name:  "missing backoff counts as none",
			spans: chain(db(2, 30, 200, tmo(900), maxAttempts(2))),
			want: []want{{span: 2, severity: schema.SeverityWarning, evidence: map[string]float64{
				"remaining_ms": 1670, "required_ms": 1800, "max_attempts": 2, "timeout_ms": 900, "backoff_ms": 0}}},
		},
		{
			name: "judged once per logical call, at its first attempt",
			spans: chain(
				db(2, 30, 930, tmo(900), maxAttempts(2), backoff(100), timedOut()),
				db(3, 1030, 1200, tmo(900), maxAttempts(2), backoff(100)),
			),
			want: []want{{span: 2, severity: schema.SeverityWarning, evidence: map[string]float64{
				"remaining_ms": 1670, "required_ms": 1900, "max_attempts": 2, "timeout_ms": 900, "backoff_ms": 100}}},
		},
		{
			name:  "first attempt missing: judged at the earliest recorded one",
			spans: chain(db(3, 1030, 1200, tmo(900), maxAttempts(2), backoff(100), attempt(2))),
			want: []want{{span: 3, severity: schema.SeverityCritical, evidence: map[string]float64{
				"remaining_ms": 670, "required_ms": 1900, "max_attempts": 2, "timeout_ms": 900, "backoff_ms": 100}}},
		},
		{
			name: "policy read from a later attempt when the first lacks it",
			spans: chain(
				db(2, 30, 930, tmo(900), timedOut()),
				db(3, 1030, 1200, tmo(900), maxAttempts(2), backoff(100)),
			),
			want: []want{{span: 2, severity: schema.SeverityWarning, evidence: map[string]float64{
				"remaining_ms": 1670, "required_ms": 1900, "max_attempts": 2, "timeout_ms": 900, "backoff_ms": 100}}},
		},
		{
			name:  "a single attempt is left to timeout_inversion",
			spans: chain(db(2, 30, 200, tmo(1800), maxAttempts(1))),
		},
		{
			name: "no budget attributes",
			spans: build(1,
				sp{id: 1, svc: "inventory", name: "GET /stock", kind: server, start: 0, end: 1690},
				sp{id: 2, parent: 1, svc: "inventory", name: "SELECT stock", kind: client, start: 30, end: 200, attrs: attrs(tmo(900), maxAttempts(5))},
			),
		},
		{
			name: "missing parent with its own budget",
			spans: build(1,
				sp{id: 1, parent: missing, svc: "inventory", name: "GET /stock", kind: server, start: 0, end: 1690, attrs: attrs(rem(1000))},
				sp{id: 2, parent: 1, svc: "inventory", name: "SELECT stock", kind: client, start: 0, end: 200, attrs: attrs(tmo(400), maxAttempts(3), backoff(10))},
			),
			want: []want{{span: 2, severity: schema.SeverityWarning, evidence: map[string]float64{
				"remaining_ms": 1000, "required_ms": 1220, "max_attempts": 3, "timeout_ms": 400, "backoff_ms": 10}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			requireFindings(t, analyzeSpans(t, tt.spans).Findings, schema.KindUnfundedRetryPolicy, tt.want)
		})
	}
}
