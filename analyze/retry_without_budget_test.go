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
			// The edge's median is not trusted yet, but the trace shows the
			// first attempt ran 700 ms to its timeout: 250 ms cannot do.
			name:  "too few samples: the earlier attempt's timeout stands in",
			warm:  19,
			spans: retry(750),
			want:  []want{{span: 3, severity: schema.SeverityWarning, evidence: map[string]float64{"remaining_ms": 250, "attempt": 2, "expected_ms": 700}}},
		},
		{
			// A first attempt that failed fast (a 503 after 20 ms) says
			// nothing about how long the work takes.
			name: "too few samples and an earlier attempt that failed fast",
			warm: 19,
			spans: build(1,
				sp{id: 1, svc: "order", name: "POST /order", kind: server, start: 0, end: 1300, attrs: attrs(rem(1000))},
				sp{id: 2, parent: 1, svc: "order", name: "GET", kind: client, start: 700, end: 720, status: schema.StatusError,
					attrs: attrs(peerSvc("stock"), tmo(700), schema.Int(schema.AttrHTTPStatusCode, 503))},
				sp{id: 3, parent: 1, svc: "order", name: "GET", kind: client, start: 750, end: 850, attrs: attrs(peerSvc("stock"))},
			),
		},
		{
			// Two attempts timed out after 300 and 350 ms: 250 ms left is
			// less than either needed.
			name: "too few samples: the shortest of several timed-out attempts",
			spans: build(1,
				sp{id: 1, svc: "order", name: "POST /order", kind: server, start: 0, end: 1300, attrs: attrs(rem(1000))},
				sp{id: 2, parent: 1, svc: "order", name: "GET", kind: client, start: 10, end: 360, attrs: attrs(peerSvc("stock"), timedOut())},
				sp{id: 3, parent: 1, svc: "order", name: "GET", kind: client, start: 400, end: 700, attrs: attrs(peerSvc("stock"), timedOut())},
				sp{id: 4, parent: 1, svc: "order", name: "GET", kind: client, start: 750, end: 850, attrs: attrs(peerSvc("stock"))},
			),
			want: []want{
				{span: 4, severity: schema.SeverityWarning, evidence: map[string]float64{"remaining_ms": 250, "attempt": 3, "expected_ms": 300}},
			},
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
