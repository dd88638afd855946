package analyze

import (
	"testing"

	"github.com/budgetd/budgetd/schema"
)

func TestBudgetReset(t *testing.T) {
	// caller is a gateway with 1000 ms that calls order at t=100 (R = 900).
	caller := func(extra ...sp) []schema.Span {
		specs := []sp{
			{id: 1, svc: "gateway", name: "GET /checkout", kind: server, start: 0, end: 1200, attrs: attrs(rem(1000))},
			{id: 2, parent: 1, svc: "gateway", name: "POST /order", kind: client, start: 100, end: 1000, attrs: attrs(tmo(850))},
		}
		return build(1, append(specs, extra...)...)
	}
	tests := []struct {
		name  string
		spans []schema.Span
		want  []want
	}{
		{
			name:  "local default far above what was left is critical",
			spans: caller(sp{id: 3, parent: 2, svc: "order", name: "POST /order", kind: server, start: 110, end: 990, attrs: attrs(rem(30000), source(schema.SourceDefault))}),
			want:  []want{{span: 3, severity: schema.SeverityCritical, evidence: map[string]float64{"remaining_ms": 900, "received_ms": 30000}}},
		},
		{
			name:  "increase without a source attribute",
			spans: caller(sp{id: 3, parent: 2, svc: "order", name: "POST /order", kind: server, start: 110, end: 990, attrs: attrs(rem(1200))}),
			want:  []want{{span: 3, severity: schema.SeverityWarning, evidence: map[string]float64{"remaining_ms": 900, "received_ms": 1200}}},
		},
		{
			name:  "source=default below what was left still resets the chain",
			spans: caller(sp{id: 3, parent: 2, svc: "order", name: "POST /order", kind: server, start: 110, end: 990, attrs: attrs(rem(500), source(schema.SourceDefault))}),
			want:  []want{{span: 3, severity: schema.SeverityWarning, evidence: map[string]float64{"remaining_ms": 900, "received_ms": 500}}},
		},
		{
			name:  "source=default without a number has no received_ms",
			spans: caller(sp{id: 3, parent: 2, svc: "order", name: "POST /order", kind: server, start: 110, end: 990, attrs: attrs(source(schema.SourceDefault))}),
			want:  []want{{span: 3, severity: schema.SeverityWarning, evidence: map[string]float64{"remaining_ms": 900}}},
		},
		{
			name:  "propagated budget below what was left",
			spans: caller(sp{id: 3, parent: 2, svc: "order", name: "POST /order", kind: server, start: 110, end: 990, attrs: attrs(rem(840), source(schema.SourcePropagated))}),
		},
		{
			name:  "increase inside the skew tolerance",
			spans: caller(sp{id: 3, parent: 2, svc: "order", name: "POST /order", kind: server, start: 110, end: 990, attrs: attrs(rem(905))}),
		},
		{
			// The skew tolerance (5 ms) plus the caller's clock-start
			// allowance (5 ms: its budget may have been read up to then).
			name:  "increase just outside the skew tolerance and the clock-start allowance",
			spans: caller(sp{id: 3, parent: 2, svc: "order", name: "POST /order", kind: server, start: 110, end: 990, attrs: attrs(rem(910.5))}),
			want:  []want{{span: 3, severity: schema.SeverityWarning, evidence: map[string]float64{"remaining_ms": 900, "received_ms": 910.5}}},
		},
		{
			// The library's middleware started its clock 9 ms after the
			// gateway's span: the callee's budget is what was really left.
			name:  "increase within the clock-start allowance",
			spans: caller(sp{id: 3, parent: 2, svc: "order", name: "POST /order", kind: server, start: 110, end: 990, attrs: attrs(rem(909))}),
		},
		{
			name:  "budget received only as a header",
			spans: caller(sp{id: 3, parent: 2, svc: "order", name: "POST /order", kind: server, start: 110, end: 990, attrs: attrs(headerTimeoutMs("30000"))}),
			want:  []want{{span: 3, severity: schema.SeverityCritical, evidence: map[string]float64{"remaining_ms": 900, "received_ms": 30000}}},
		},
		{
			name: "no budget upstream: nothing to reset",
			spans: build(1,
				sp{id: 1, svc: "gateway", name: "GET /checkout", kind: server, start: 0, end: 1200},
				sp{id: 2, parent: 1, svc: "gateway", name: "POST /order", kind: client, start: 100, end: 1000},
				sp{id: 3, parent: 2, svc: "order", name: "POST /order", kind: server, start: 110, end: 990, attrs: attrs(rem(30000), source(schema.SourceDefault))},
			),
		},
		{
			name: "missing parent: nothing to compare with",
			spans: build(1,
				sp{id: 3, parent: missing, svc: "order", name: "POST /order", kind: server, start: 110, end: 990, attrs: attrs(rem(30000), source(schema.SourceDefault))},
			),
		},
		{
			name: "entry directly under an entry compares with the parent's budget",
			spans: build(1,
				sp{id: 1, svc: "gateway", name: "GET /checkout", kind: server, start: 0, end: 1200, attrs: attrs(rem(1000))},
				sp{id: 3, parent: 1, svc: "order", name: "POST /order", kind: server, start: 100, end: 990, attrs: attrs(rem(5000))},
			),
			want: []want{{span: 3, severity: schema.SeverityCritical, evidence: map[string]float64{"remaining_ms": 1000, "received_ms": 5000}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			requireFindings(t, analyzeSpans(t, tt.spans).Findings, schema.KindBudgetReset, tt.want)
		})
	}
}
