package analyze

import (
	"testing"

	"github.com/budgetd/budgetd/schema"
)

// retryChain builds root → hop1 → … → leaf where layer k makes attempts[k]
// attempts, each failed attempt timing out, and every attempt's server
// repeating the whole chain below. Times are laid out sequentially; the
// numbers only need to be consistent, not realistic.
func retryChain(n int, attempts []int, explicit bool) []schema.Span {
	var specs []sp
	id := 1
	specs = append(specs, sp{id: 1, svc: "svc0", name: "op0", kind: server, start: 0, end: 1e6})
	var grow func(parent, level int, start float64) float64
	grow = func(parent, level int, start float64) float64 {
		t := start
		for a := 1; a <= attempts[level]; a++ {
			id++
			cid := id
			c := sp{id: cid, parent: parent, svc: "svc" + itoa(level), name: "call" + itoa(level+1), kind: client, start: t}
			if explicit {
				c.attrs = append(c.attrs, attempt(int64(a)))
			}
			if a < attempts[level] {
				c.status = schema.StatusError
			}
			end := t + 1
			if level+1 < len(attempts) {
				id++
				sid := id
				sEnd := grow(sid, level+1, t+1)
				specs = append(specs, sp{id: sid, parent: cid, svc: "svc" + itoa(level+1), name: "op" + itoa(level+1), kind: server, start: t + 0.5, end: sEnd + 0.5})
				end = sEnd + 1
			} else {
				c.attrs = append(c.attrs, peerSvc("db"))
			}
			c.end = end
			specs = append(specs, c)
			t = end + 1
		}
		return t
	}
	grow(1, 0, 1)
	return build(n, specs...)
}

func itoa(i int) string { return string(rune('0' + i)) }

func TestRetryAmplification(t *testing.T) {
	tests := []struct {
		name  string
		spans []schema.Span
		want  []want
	}{
		{
			name:  "2 x 2 x 3 attempts make 12 leaf calls at 3 levels",
			spans: retryChain(1, []int{2, 2, 3}, false),
			want:  []want{{span: 6, severity: schema.SeverityCritical, evidence: map[string]float64{"calls": 12, "levels": 3}}},
		},
		{
			name:  "2 x 2 attempts make 4 calls at 2 levels",
			spans: retryChain(1, []int{2, 2}, false),
			want:  []want{{span: 4, severity: schema.SeverityWarning, evidence: map[string]float64{"calls": 4, "levels": 2}}},
		},
		{
			name:  "one level retrying up to the threshold",
			spans: retryChain(1, []int{1, 3}, false),
			want:  []want{{span: 4, severity: schema.SeverityWarning, evidence: map[string]float64{"calls": 3, "levels": 1}}},
		},
		{
			name:  "one level retrying below the threshold",
			spans: retryChain(1, []int{1, 2}, false),
		},
		{
			name:  "no retries at all",
			spans: retryChain(1, []int{1, 1, 1}, false),
		},
		{
			name:  "explicit budget.attempt numbers",
			spans: retryChain(1, []int{2, 1, 2}, true),
			want:  []want{{span: 6, severity: schema.SeverityWarning, evidence: map[string]float64{"calls": 4, "levels": 2}}},
		},
		{
			name: "fan-out without retries is not amplification",
			spans: build(1,
				sp{id: 1, svc: "order", name: "GET /order", kind: server, start: 0, end: 100},
				sp{id: 2, parent: 1, svc: "order", name: "SELECT item", kind: client, start: 1, end: 10, attrs: attrs(peerSvc("db"))},
				sp{id: 3, parent: 1, svc: "order", name: "SELECT item", kind: client, start: 11, end: 20, attrs: attrs(peerSvc("db"))},
				sp{id: 4, parent: 1, svc: "order", name: "SELECT item", kind: client, start: 21, end: 30, attrs: attrs(peerSvc("db"))},
				sp{id: 5, parent: 1, svc: "order", name: "SELECT item", kind: client, start: 31, end: 40, attrs: attrs(peerSvc("db"))},
			),
		},
		{
			name: "attempts known only from http.request.resend_count",
			spans: build(1,
				sp{id: 1, svc: "order", name: "GET /order", kind: server, start: 0, end: 100},
				sp{id: 2, parent: 1, svc: "order", name: "GET", kind: client, start: 1, end: 10, attrs: attrs(peerSvc("stock"))},
				sp{id: 3, parent: 1, svc: "order", name: "GET", kind: client, start: 11, end: 20, attrs: attrs(peerSvc("stock"), resend(1))},
				sp{id: 4, parent: 1, svc: "order", name: "GET", kind: client, start: 21, end: 30, attrs: attrs(peerSvc("stock"), resend(2))},
			),
			want: []want{{span: 2, severity: schema.SeverityWarning, evidence: map[string]float64{"calls": 3, "levels": 1}}},
		},
		{
			name: "missing parent above the retries",
			spans: build(1,
				sp{id: 1, parent: missing, svc: "order", name: "GET /order", kind: server, start: 0, end: 100},
				sp{id: 2, parent: 1, svc: "order", name: "GET", kind: client, start: 1, end: 10, status: schema.StatusError, attrs: attrs(peerSvc("stock"))},
				sp{id: 3, parent: 1, svc: "order", name: "GET", kind: client, start: 11, end: 20, status: schema.StatusError, attrs: attrs(peerSvc("stock"))},
				sp{id: 4, parent: 1, svc: "order", name: "GET", kind: client, start: 21, end: 30, attrs: attrs(peerSvc("stock"))},
			),
			want: []want{{span: 2, severity: schema.SeverityWarning, evidence: map[string]float64{"calls": 3, "levels": 1}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			requireFindings(t, analyzeSpans(t, tt.spans).Findings, schema.KindRetryAmplification, tt.want)
		})
	}
}
