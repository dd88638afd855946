package analyze

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/schema"
)

func TestExpiredOnArrival(t *testing.T) {
	tests := []struct {
		name  string
		spans []schema.Span
		want  []want
	}{
		{
			name: "arrives after the root deadline",
			spans: build(1,
				sp{id: 1, svc: "gateway", name: "GET /checkout", kind: server, start: 0, end: 3000, attrs: attrs(rem(1000))},
				sp{id: 2, parent: 1, svc: "gateway", name: "POST /order", kind: client, start: 100, end: 2900, attrs: attrs(tmo(5000))},
				sp{id: 3, parent: 2, svc: "order", name: "POST /order", kind: server, start: 1200, end: 1500},
			),
			want: []want{{span: 3, severity: schema.SeverityWarning, evidence: map[string]float64{"remaining_ms": -200, "duration_ms": 300}}},
		},
		{
			name: "an expired request that ran a second is critical",
			spans: build(1,
				sp{id: 3, parent: missing, svc: "order", name: "POST /order", kind: server, start: 0, end: 1500, attrs: attrs(rem(-5))},
			),
			want: []want{{span: 3, severity: schema.SeverityCritical, evidence: map[string]float64{"remaining_ms": -5, "duration_ms": 1500}}},
		},
		{
			// order had 100 ms from t=20 (R at pricing: −8 ms, 5 ms of
			// it allowed for where order's clock started), but pricing's
			// start time and order's may disagree by the skew tolerance
			// (two hosts, or a stepped wall clock).
			name: "arrives less than the skew tolerance past a deadline above",
			spans: build(1,
				sp{id: 1, svc: "gateway", name: "GET /checkout", kind: server, start: 0, end: 3000, attrs: attrs(rem(1000))},
				sp{id: 2, parent: 1, svc: "gateway", name: "POST /order", kind: client, start: 10, end: 900, attrs: attrs(tmo(800))},
				sp{id: 3, parent: 2, svc: "order", name: "POST /order", kind: server, start: 20, end: 800, attrs: attrs(rem(100))},
				sp{id: 4, parent: 3, svc: "order", name: "POST /price", kind: client, start: 30, end: 700, attrs: attrs(peerSvc("pricing"))},
				sp{id: 5, parent: 4, svc: "pricing", name: "POST /price", kind: server, start: 128, end: 600},
			),
		},
		{
			name: "zero budget from a header",
			spans: build(1,
				sp{id: 3, parent: missing, svc: "order", name: "POST /order", kind: server, start: 0, end: 20, attrs: attrs(headerTimeoutMs("0"))},
			),
			want: []want{{span: 3, severity: schema.SeverityWarning, evidence: map[string]float64{"remaining_ms": 0, "duration_ms": 20}}},
		},
		{
			name: "rejected on arrival is the right thing to do",
			spans: build(1,
				sp{id: 3, parent: missing, svc: "order", name: "POST /order", kind: server, start: 0, end: 1, attrs: attrs(rem(-5), schema.Bool(schema.AttrRejected, true))},
			),
		},
		{
			name: "arrives after its client gave up, with no budget known",
			spans: build(1,
				sp{id: 1, svc: "gateway", name: "GET /checkout", kind: server, start: 0, end: 600},
				sp{id: 2, parent: 1, svc: "gateway", name: "POST /order", kind: client, start: 0, end: 500, attrs: attrs(timedOut())},
				sp{id: 3, parent: 2, svc: "order", name: "POST /order", kind: server, start: 700, end: 900},
			),
			want: []want{{span: 3, severity: schema.SeverityWarning, evidence: map[string]float64{"remaining_ms": -200, "duration_ms": 200}}},
		},
		{
			name: "arrives with budget left",
			spans: build(1,
				sp{id: 1, svc: "gateway", name: "GET /checkout", kind: server, start: 0, end: 600, attrs: attrs(rem(1000))},
				sp{id: 2, parent: 1, svc: "gateway", name: "POST /order", kind: client, start: 0, end: 500, attrs: attrs(tmo(900))},
				sp{id: 3, parent: 2, svc: "order", name: "POST /order", kind: server, start: 10, end: 490, attrs: attrs(rem(880))},
			),
		},
		{
			name: "clock skew: apparently late, really inside its answered client",
			spans: build(1,
				sp{id: 1, svc: "gateway", name: "GET /checkout", kind: server, start: 0, end: 600, attrs: attrs(rem(1000))},
				sp{id: 2, parent: 1, svc: "gateway", name: "POST /order", kind: client, start: 0, end: 500, attrs: attrs(tmo(900))},
				sp{id: 3, parent: 2, svc: "order", name: "POST /order", kind: server, start: 5000, end: 5400},
			),
		},
		{
			name: "no budget attributes and no client giving up",
			spans: build(1,
				sp{id: 1, svc: "gateway", name: "GET /checkout", kind: server, start: 0, end: 600},
				sp{id: 3, parent: 1, svc: "order", name: "POST /order", kind: server, start: 5000, end: 5400},
			),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := analyzeSpans(t, tt.spans)
			requireFindings(t, r.Findings, schema.KindExpiredOnArrival, tt.want)
		})
	}
}

func TestExpiredOnArrivalSkewIsReported(t *testing.T) {
	r := analyzeSpans(t, build(1,
		sp{id: 1, svc: "gateway", name: "GET /checkout", kind: server, start: 0, end: 600, attrs: attrs(rem(1000))},
		sp{id: 2, parent: 1, svc: "gateway", name: "POST /order", kind: client, start: 0, end: 500, attrs: attrs(tmo(900))},
		sp{id: 3, parent: 2, svc: "order", name: "POST /order", kind: server, start: 5000, end: 5400},
	))
	require.Equal(t, []Skew{{
		TraceID: traceID(1).String(), ClientSpanID: spanID(2).String(), ServerSpanID: spanID(3).String(),
		ClientService: "gateway", ServerService: "order", SkewMs: 4950, ShiftMs: -4950,
	}}, r.Skews)
	require.InDelta(t, 950.0, *hopOf(t, r, 3).RemainingMs, 1e-9, "R after the shift: the server started at 50")
}
