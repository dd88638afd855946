package analyze

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/schema"
)

func TestOrphanedWork(t *testing.T) {
	tests := []struct {
		name    string
		spans   []schema.Span
		want    []want
		message string // a fragment of the first finding's message
		skews   int
	}{
		{
			name: "server keeps running after its client timed out",
			spans: build(1,
				sp{id: 1, svc: "gateway", name: "GET /checkout", kind: server, start: 0, end: 1010},
				sp{id: 2, parent: 1, svc: "gateway", name: "POST /order", kind: client, start: 0, end: 1000, attrs: attrs(tmo(1000), timedOut())},
				sp{id: 3, parent: 2, svc: "order", name: "POST /order", kind: server, start: 10, end: 3000},
			),
			want:    []want{{span: 3, severity: schema.SeverityCritical, evidence: map[string]float64{"orphaned_ms": 2000}}},
			message: "order kept working 2000 ms after gateway stopped waiting",
		},
		{
			name: "server inside a client that got its answer",
			spans: build(1,
				sp{id: 1, svc: "gateway", name: "GET /checkout", kind: server, start: 0, end: 1010},
				sp{id: 2, parent: 1, svc: "gateway", name: "POST /order", kind: client, start: 0, end: 1000},
				sp{id: 3, parent: 2, svc: "order", name: "POST /order", kind: server, start: 10, end: 990},
			),
		},
		{
			name: "overrun inside the skew tolerance",
			spans: build(1,
				sp{id: 1, svc: "gateway", name: "GET /checkout", kind: server, start: 0, end: 1010},
				sp{id: 2, parent: 1, svc: "gateway", name: "POST /order", kind: client, start: 0, end: 1000, attrs: attrs(timedOut())},
				sp{id: 3, parent: 2, svc: "order", name: "POST /order", kind: server, start: 10, end: 1004},
			),
		},
		{
			name: "overrun under a client that got its answer is clock skew, not orphaned work",
			spans: build(1,
				sp{id: 1, svc: "gateway", name: "GET /checkout", kind: server, start: 0, end: 1010},
				sp{id: 2, parent: 1, svc: "gateway", name: "POST /order", kind: client, start: 0, end: 1000},
				sp{id: 3, parent: 2, svc: "order", name: "POST /order", kind: server, start: 210, end: 1200},
			),
			skews: 1,
		},
		{
			name: "a client that gave up bounds nothing: the overrun is never adjusted away",
			spans: build(1,
				sp{id: 1, svc: "gateway", name: "GET /checkout", kind: server, start: 0, end: 1010},
				sp{id: 2, parent: 1, svc: "gateway", name: "POST /order", kind: client, start: 0, end: 1000, status: schema.StatusError, attrs: attrs(schema.Int(schema.AttrHTTPStatusCode, 504))},
				sp{id: 3, parent: 2, svc: "order", name: "POST /order", kind: server, start: 210, end: 1200},
			),
			want: []want{{span: 3, severity: schema.SeverityWarning, evidence: map[string]float64{"orphaned_ms": 200}}},
		},
		{
			// The message carried what was left of the request's budget:
			// its deadline crosses the queue.
			name: "consumer running past the deadline its message carried",
			spans: build(1,
				sp{id: 1, svc: "checkout", name: "POST /checkout", kind: server, start: 0, end: 200, attrs: attrs(rem(1000))},
				sp{id: 2, parent: 1, svc: "checkout", name: "publish order", kind: producer, start: 50, end: 60},
				sp{id: 3, parent: 2, svc: "mailer", name: "process order", kind: consumer, start: 100, end: 1800, attrs: attrs(rem(900))},
			),
			want:    []want{{span: 3, severity: schema.SeverityWarning, evidence: map[string]float64{"orphaned_ms": 800}}},
			message: "after the request's deadline passed",
		},
		{
			// Asynchronous work: nobody waits for the consumer, and a
			// message without a budget starts a chain of its own.
			name: "consumer of a message without a budget runs past the publisher's deadline",
			spans: build(1,
				sp{id: 1, svc: "checkout", name: "POST /checkout", kind: server, start: 0, end: 200, attrs: attrs(rem(1000))},
				sp{id: 2, parent: 1, svc: "checkout", name: "publish order", kind: producer, start: 50, end: 60},
				sp{id: 3, parent: 2, svc: "mailer", name: "process order", kind: consumer, start: 100, end: 1800},
			),
		},
		{
			name: "consumer started after the publisher's client gave up",
			spans: build(1,
				sp{id: 1, svc: "web", name: "POST /signup", kind: client, start: 0, end: 100},
				sp{id: 2, parent: 1, svc: "accounts", name: "POST /signup", kind: server, start: 5, end: 90},
				sp{id: 3, parent: 2, svc: "accounts", name: "publish welcome", kind: producer, start: 50, end: 60},
				sp{id: 4, parent: 3, svc: "mailer", name: "process welcome", kind: consumer, start: 400, end: 900},
			),
		},
		{
			name: "work after a budget.cancelled event",
			spans: build(1,
				sp{id: 1, svc: "gateway", name: "GET /checkout", kind: server, start: 0, end: 3000},
				sp{id: 2, parent: 1, svc: "gateway", name: "POST /order", kind: client, start: 0, end: 2990},
				sp{id: 3, parent: 2, svc: "order", name: "POST /order", kind: server, start: 10, end: 2000, events: cancelledAt(500, "caller_disconnect")},
			),
			want:    []want{{span: 3, severity: schema.SeverityCritical, evidence: map[string]float64{"orphaned_ms": 1500}}},
			message: "cancelled (caller_disconnect)",
		},
		{
			name: "a grandparent client that gave up bounds the whole subtree",
			spans: build(1,
				sp{id: 1, svc: "gateway", name: "GET /checkout", kind: server, start: 0, end: 1010},
				sp{id: 2, parent: 1, svc: "gateway", name: "POST /order", kind: client, start: 0, end: 1000, attrs: attrs(timedOut())},
				sp{id: 3, parent: 2, svc: "order", name: "POST /order", kind: server, start: 10, end: 1500},
				sp{id: 4, parent: 3, svc: "order", name: "POST /price", kind: client, start: 20, end: 1450},
				sp{id: 5, parent: 4, svc: "pricing", name: "POST /price", kind: server, start: 30, end: 1440},
			),
			want: []want{
				{span: 3, severity: schema.SeverityWarning, evidence: map[string]float64{"orphaned_ms": 500}},
				{span: 5, severity: schema.SeverityWarning, evidence: map[string]float64{"orphaned_ms": 440}},
			},
		},
		{
			name: "a short overrun is info",
			spans: build(1,
				sp{id: 1, svc: "gateway", name: "GET /checkout", kind: server, start: 0, end: 1010},
				sp{id: 2, parent: 1, svc: "gateway", name: "POST /order", kind: client, start: 0, end: 1000, attrs: attrs(timedOut())},
				sp{id: 3, parent: 2, svc: "order", name: "POST /order", kind: server, start: 10, end: 1050},
			),
			want: []want{{span: 3, severity: schema.SeverityInfo, evidence: map[string]float64{"orphaned_ms": 50}}},
		},
		{
			name: "missing parent: nobody known to have given up",
			spans: build(1,
				sp{id: 3, parent: missing, svc: "order", name: "POST /order", kind: server, start: 10, end: 60000},
			),
		},
		{
			name: "no budget attributes and no client: nothing bounds the root",
			spans: build(1,
				sp{id: 1, svc: "gateway", name: "GET /checkout", kind: server, start: 0, end: 60000},
			),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := analyzeSpans(t, tt.spans)
			requireFindings(t, r.Findings, schema.KindOrphanedWork, tt.want)
			require.Len(t, r.Skews, tt.skews)
			if tt.message != "" {
				require.Contains(t, ofKind(r.Findings, schema.KindOrphanedWork)[0].Message, tt.message)
			}
			for _, w := range tt.want {
				require.InDelta(t, w.evidence["orphaned_ms"], hopOf(t, r, w.span).OrphanedMs, 1e-9)
			}
		})
	}
}
