package analyze

import (
	"testing"

	"github.com/budgetd/budgetd/schema"
)

// warmEdge feeds a traces of order → stock calls taking latency ms each.
func warmEdge(a *Analyzer, traces int, latency float64) {
	for n := 0; n < traces; n++ {
		a.Trace(schema.NewTrace(build(100+n,
			sp{id: 1, svc: "order", name: "POST /order", kind: server, start: 0, end: latency + 20},
			sp{id: 2, parent: 1, svc: "order", name: "GET", kind: client, start: 10, end: 10 + latency, attrs: attrs(peerSvc("stock"), tmo(700))},
		)), testNow)
	}
}

func TestRetryWithoutBudget(t *testing.T) {
	// order has 1000 ms; its first call to stock times out at 710.
	retry := func(start float64, as ...schema.Attr) []schema.Span {
		return build(1,
			sp{id: 1, svc: "order", name: "POST /order", kind: server, start: 0, end: 1300, attrs: attrs(rem(1000))},
			sp{id: 2, parent: 1, svc: "order", name: "GET", kind: client, start: 10, end: 710, attrs: attrs(peerSvc("stock"), tmo(700), timedOut())},
			sp{id: 3, parent: 1, svc: "order", name: "GET", kind: client, start: start, end: start + 100, attrs: append(as, peerSvc("stock"))},
		)
	}
	tests := []struct {
		name   string
		warm   int
		spans  []schema.Span
		want   []want
		approx []string
	}{
		{
			name:  "retry with no time left",
			spans: retry(1100),
			want:  []want{{span: 3, severity: schema.SeverityCritical, evidence: map[string]float64{"remaining_ms": -100, "attempt": 2}}},
		},
		{
			name:   "retry with less time than the edge's median",
			warm:   20,
			spans:  retry(750),
			want:   []want{{span: 3, severity: schema.SeverityWarning, evidence: map[string]float64{"remaining_ms": 250, "attempt": 2, "expected_ms": 500}}},
			approx: []string{"expected_ms"},
		},
		{
			name:   "retry with no time left on a known edge carries the median",
			warm:   20,
			spans:  retry(1000),
			want:   []want{{span: 3, severity: schema.SeverityCritical, evidence: map[string]float64{"remaining_ms": 0, "attempt": 2, "expected_ms": 500}}},
			approx: []string{"expected_ms"},
		},
		{
			name:  "too few samples to trust the median",
			warm:  19,
			spans: retry(750),
		},
		{
			name:  "retry with more time than the median",
			warm:  20,
			spans: retry(400),
		},
		{
			name: "a first attempt is never a retry",
			spans: build(1,
				sp{id: 1, svc: "order", name: "POST /order", kind: server, start: 0, end: 1300, attrs: attrs(rem(1000))},
				sp{id: 2, parent: 1, svc: "order", name: "GET", kind: client, start: 1100, end: 1200, attrs: attrs(peerSvc("stock"))},
			),
		},
		{
			name: "attempt known only from http.request.resend_count",
			spans: build(1,
				sp{id: 1, svc: "order", name: "POST /order", kind: server, start: 0, end: 1300, attrs: attrs(rem(1000))},
				sp{id: 3, parent: 1, svc: "order", name: "GET", kind: client, start: 1100, end: 1200, attrs: attrs(peerSvc("stock"), resend(2))},
			),
			want: []want{{span: 3, severity: schema.SeverityCritical, evidence: map[string]float64{"remaining_ms": -100, "attempt": 3}}},
		},
		{
			name: "no budget attributes",
			spans: build(1,
				sp{id: 1, svc: "order", name: "POST /order", kind: server, start: 0, end: 1300},
				sp{id: 2, parent: 1, svc: "order", name: "GET", kind: client, start: 10, end: 710, attrs: attrs(peerSvc("stock"), timedOut())},
				sp{id: 3, parent: 1, svc: "order", name: "GET", kind: client, start: 1100, end: 1200, attrs: attrs(peerSvc("stock"))},
			),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := New(testConfig())
			warmEdge(a, tt.warm, 500)
			r := a.Trace(schema.NewTrace(tt.spans), testNow)
			requireFindings(t, r.Findings, schema.KindRetryWithoutBudget, tt.want, tt.approx...)
		})
	}
}
