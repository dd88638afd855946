package analyze

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/schema"
)

func TestTimeoutInversion(t *testing.T) {
	tests := []struct {
		name  string
		spans []schema.Span
		want  []want
		skews int
	}{
		{
			name: "timeout over twice the remaining budget is critical",
			spans: build(1,
				sp{id: 1, svc: "gateway", name: "GET /checkout", kind: server, start: 0, end: 1200, attrs: attrs(rem(1000))},
				sp{id: 2, parent: 1, svc: "gateway", name: "POST /order", kind: client, start: 100, end: 1100, attrs: attrs(tmo(2000), peerSvc("order"))},
			),
			want: []want{{span: 2, severity: schema.SeverityCritical, evidence: map[string]float64{"remaining_ms": 900, "timeout_ms": 2000}}},
		},
		{
			name: "timeout slightly over the remaining budget is a warning",
			spans: build(1,
				sp{id: 1, svc: "gateway", name: "GET /checkout", kind: server, start: 0, end: 1200, attrs: attrs(rem(1000))},
				sp{id: 2, parent: 1, svc: "gateway", name: "POST /order", kind: client, start: 100, end: 1100, attrs: attrs(tmo(1000))},
			),
			want: []want{{span: 2, severity: schema.SeverityWarning, evidence: map[string]float64{"remaining_ms": 900, "timeout_ms": 1000}}},
		},
		{
			name: "timeout equal to the remaining budget is an inversion",
			spans: build(1,
				sp{id: 1, svc: "gateway", name: "GET /checkout", kind: server, start: 0, end: 1200, attrs: attrs(rem(1000))},
				sp{id: 2, parent: 1, svc: "gateway", name: "POST /order", kind: client, start: 0, end: 1000, attrs: attrs(tmo(1000))},
			),
			want: []want{{span: 2, severity: schema.SeverityWarning, evidence: map[string]float64{"remaining_ms": 1000, "timeout_ms": 1000}}},
		},
		{
			// The gateway's middleware may have read its budget up to 5 ms
			// (the skew tolerance) after its span started, and the two
			// spans' start times may disagree by the skew tolerance (a
			// wall clock stepped between them): a timeout those explain is
			// no inversion.
			name: "timeout within the clock-start allowance and the skew tolerance",
			spans: build(1,
				sp{id: 1, svc: "gateway", name: "GET /checkout", kind: server, start: 0, end: 1200, attrs: attrs(rem(1000))},
				sp{id: 2, parent: 1, svc: "gateway", name: "POST /order", kind: client, start: 100, end: 1100, attrs: attrs(tmo(909.9))},
			),
		},
		{
			name: "timeout just past the clock-start allowance and the skew tolerance",
			spans: build(1,
				sp{id: 1, svc: "gateway", name: "GET /checkout", kind: server, start: 0, end: 1200, attrs: attrs(rem(1000))},
				sp{id: 2, parent: 1, svc: "gateway", name: "POST /order", kind: client, start: 100, end: 1100, attrs: attrs(tmo(910))},
			),
			want: []want{{span: 2, severity: schema.SeverityWarning, evidence: map[string]float64{"remaining_ms": 900, "timeout_ms": 910}}},
		},
		{
			// No clock reading enters it: the call started after the
			// budget was read, so a timeout of the whole budget is more
			// than was left, by however little time passed.
			name: "timeout of the whole budget a millisecond later",
			spans: build(1,
				sp{id: 1, svc: "gateway", name: "GET /checkout", kind: server, start: 0, end: 1200, attrs: attrs(rem(1000))},
				sp{id: 2, parent: 1, svc: "gateway", name: "POST /order", kind: client, start: 1, end: 1100, attrs: attrs(tmo(1000))},
			),
			want: []want{{span: 2, severity: schema.SeverityWarning, evidence: map[string]float64{"remaining_ms": 999, "timeout_ms": 1000}}},
		},
		{
			name: "timeout of the budget a hop above received",
			spans: build(1,
				sp{id: 1, svc: "edge", name: "GET /", kind: server, start: 0, end: 1200, attrs: attrs(rem(1000))},
				sp{id: 2, parent: 1, svc: "edge", name: "GET", kind: client, start: 1, end: 1100, attrs: attrs(tmo(800))},
				sp{id: 3, parent: 2, svc: "order", name: "POST /order", kind: server, start: 2, end: 1000, attrs: attrs(rem(798))},
				sp{id: 4, parent: 3, svc: "order", name: "POST /price", kind: client, start: 3, end: 900, attrs: attrs(tmo(798))},
			),
			want: []want{{span: 4, severity: schema.SeverityWarning, evidence: map[string]float64{"remaining_ms": 797, "timeout_ms": 798}}},
		},
		{
			name: "timeout inside the remaining budget",
			spans: build(1,
				sp{id: 1, svc: "gateway", name: "GET /checkout", kind: server, start: 0, end: 1200, attrs: attrs(rem(1000))},
				sp{id: 2, parent: 1, svc: "gateway", name: "POST /order", kind: client, start: 100, end: 1100, attrs: attrs(tmo(899))},
			),
		},
		{
			name: "no budget attributes anywhere",
			spans: build(1,
				sp{id: 1, svc: "gateway", name: "GET /checkout", kind: server, start: 0, end: 1200},
				sp{id: 2, parent: 1, svc: "gateway", name: "POST /order", kind: client, start: 100, end: 1100, attrs: attrs(tmo(30000))},
			),
		},
		{
			name: "budget only from an x-request-timeout-ms header",
			spans: build(1,
				sp{id: 1, svc: "gateway", name: "GET /checkout", kind: server, start: 0, end: 1200, attrs: attrs(headerTimeoutMs("1000"))},
				sp{id: 2, parent: 1, svc: "gateway", name: "POST /order", kind: client, start: 100, end: 1100, attrs: attrs(tmo(2000))},
			),
			want: []want{{span: 2, severity: schema.SeverityCritical, evidence: map[string]float64{"remaining_ms": 900, "timeout_ms": 2000}}},
		},
		{
			name: "budget only from grpc-timeout metadata",
			spans: build(1,
				sp{id: 1, svc: "pricing", name: "Price", kind: server, start: 0, end: 1200, attrs: attrs(grpcTimeout("1S"))},
				sp{id: 2, parent: 1, svc: "pricing", name: "SELECT", kind: client, start: 100, end: 1100, attrs: attrs(tmo(15000), peerSvc("db"))},
			),
			want: []want{{span: 2, severity: schema.SeverityCritical, evidence: map[string]float64{"remaining_ms": 900, "timeout_ms": 15000}}},
		},
		{
			name: "missing parent: the orphan's own budget still counts",
			spans: build(1,
				sp{id: 1, parent: missing, svc: "pricing", name: "Price", kind: server, start: 0, end: 700, attrs: attrs(rem(500))},
				sp{id: 2, parent: 1, svc: "pricing", name: "SELECT", kind: client, start: 100, end: 600, attrs: attrs(tmo(800))},
			),
			want: []want{{span: 2, severity: schema.SeverityCritical, evidence: map[string]float64{"remaining_ms": 400, "timeout_ms": 800}}},
		},
		{
			name: "a reset budget below does not buy more time",
			spans: build(1,
				sp{id: 1, svc: "gateway", name: "GET /checkout", kind: server, start: 0, end: 1000, attrs: attrs(rem(1000))},
				sp{id: 2, parent: 1, svc: "gateway", name: "POST /order", kind: client, start: 10, end: 990, attrs: attrs(tmo(900))},
				sp{id: 3, parent: 2, svc: "order", name: "POST /order", kind: server, start: 20, end: 980, attrs: attrs(rem(30000), source(schema.SourceDefault))},
				sp{id: 4, parent: 3, svc: "order", name: "POST /price", kind: client, start: 30, end: 970, attrs: attrs(tmo(5000))},
			),
			want: []want{{span: 4, severity: schema.SeverityCritical, evidence: map[string]float64{"remaining_ms": 970, "timeout_ms": 5000}}},
		},
		{
			name: "clock skew outside tolerance is corrected before judging",
			spans: build(1,
				sp{id: 1, svc: "gateway", name: "GET /checkout", kind: server, start: 0, end: 600, attrs: attrs(rem(1000))},
				sp{id: 2, parent: 1, svc: "gateway", name: "POST /order", kind: client, start: 0, end: 500, attrs: attrs(tmo(900))},
				// order's clock runs 10 s ahead: recorded at 10000 it really
				// ran inside the client's 0..500.
				sp{id: 3, parent: 2, svc: "order", name: "POST /order", kind: server, start: 10000, end: 10400, attrs: attrs(rem(890))},
				sp{id: 4, parent: 3, svc: "order", name: "POST /price", kind: client, start: 10050, end: 10350, attrs: attrs(tmo(800))},
			),
			skews: 1,
		},
		{
			name: "clock skew inside tolerance is left alone",
			spans: build(1,
				sp{id: 1, svc: "gateway", name: "GET /checkout", kind: server, start: 0, end: 600, attrs: attrs(rem(1000))},
				sp{id: 2, parent: 1, svc: "gateway", name: "POST /order", kind: client, start: 10, end: 500, attrs: attrs(tmo(900))},
				sp{id: 3, parent: 2, svc: "order", name: "POST /order", kind: server, start: 7, end: 503, attrs: attrs(rem(990))},
				sp{id: 4, parent: 3, svc: "order", name: "POST /price", kind: client, start: 20, end: 400, attrs: attrs(tmo(975))},
			),
			// Unshifted, R at span 4 is min(1000 − 20, 990 − 13) = 977 > 975.
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := analyzeSpans(t, tt.spans)
			requireFindings(t, r.Findings, schema.KindTimeoutInversion, tt.want)
			require.Len(t, r.Skews, tt.skews)
		})
	}
}
