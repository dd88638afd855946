package analyze

import (
	"github.com/budgetd/budgetd/schema"
)

// The scenarios of the seed articles, as span specs. They are used by the
// seed tests and written to fixtures/ as OTLP/JSON for the golden tests.

// checkoutIndependentTimeouts is seed 000: mobile → gateway → order →
// pricing → db, each hop with its own timeout and retry count and no budget
// at all. The database is degraded (every query fails after 14 s), so
// pricing tries it 3 times, order tries pricing twice (20 s timeout), and the
// gateway tries order twice (30 s timeout): 2 × 2 × 3 = 12 queries. The
// mobile client gives up at 30 s; everything after that is work nobody
// waits for. Transit is 10 ms per hop.
func checkoutIndependentTimeouts(n int) []schema.Span {
	b := &specBuilder{}
	mobile := b.add(sp{parent: 0, svc: "mobile", name: "checkout", kind: client, start: 0, end: 30000,
		attrs: attrs(tmo(30000), timedOut(), peerSvc("gateway"))})
	gwStart := 10.0
	gw := b.add(sp{parent: mobile, svc: "gateway", name: "POST /checkout", kind: server, start: gwStart})
	t := gwStart + 10
	for a := 1; a <= 2; a++ {
		c := b.add(sp{parent: gw, svc: "gateway", name: "POST /order", kind: client, start: t, end: t + 30000,
			attrs: attrs(tmo(30000), maxAttempts(2), timedOut(), peerSvc("order"))})
		b.orderHop(c, t+10)
		t += 30000
	}
	b.setEnd(gw, t+10, schema.StatusError)
	return build(n, b.specs...)
}

// orderHop is order's handler in seed 000: two attempts on pricing with a
// 20 s timeout; both time out because pricing needs 3 × 14 s.
func (b *specBuilder) orderHop(parent int, start float64) {
	o := b.add(sp{parent: parent, svc: "order", name: "POST /order", kind: server, start: start})
	t := start + 10
	for a := 1; a <= 2; a++ {
		c := b.add(sp{parent: o, svc: "order", name: "POST /price", kind: client, start: t, end: t + 20000,
			attrs: attrs(tmo(20000), maxAttempts(2), timedOut(), peerSvc("pricing"))})
		b.pricingHop(c, t+10)
		t += 20000
	}
	b.setEnd(o, t+10, schema.StatusError)
}

// pricingHop is pricing's handler in seed 000: three queries with a 15 s
// timeout, each failing after 14 s.
func (b *specBuilder) pricingHop(parent int, start float64) {
	p := b.add(sp{parent: parent, svc: "pricing", name: "POST /price", kind: server, start: start})
	t := start + 10
	for a := 1; a <= 3; a++ {
		b.add(sp{parent: p, svc: "pricing", name: "SELECT prices", kind: client, start: t, end: t + 14000, status: schema.StatusError,
			attrs: attrs(tmo(15000), maxAttempts(3), schema.Str("db.system.name", "postgresql"), schema.Str("server.address", "db"))})
		t += 14000
	}
	b.setEnd(p, t+10, schema.StatusError)
}

// checkoutWithDeadline is seed 000 after the fix: the mobile client sets a
// 10 s deadline, every hop propagates what is left and derives its timeout
// from it, and nobody retries without the budget for it. The degraded
// database gets one query, which is given up at the deadline along with
// everything above it.
func checkoutWithDeadline(n int) []schema.Span {
	b := &specBuilder{}
	mobile := b.add(sp{svc: "mobile", name: "checkout", kind: client, start: 0, end: 10000,
		attrs: attrs(rem(10000), source(schema.SourceEdge), tmo(9990), timedOut(), peerSvc("gateway"))})
	gw := b.add(sp{parent: mobile, svc: "gateway", name: "POST /checkout", kind: server, start: 10, end: 9995,
		status: schema.StatusError, attrs: attrs(rem(9980), source(schema.SourcePropagated))})
	gc := b.add(sp{parent: gw, svc: "gateway", name: "POST /order", kind: client, start: 20, end: 9990,
		attrs: attrs(tmo(9960), timedOut(), peerSvc("order"), schema.Double(schema.AttrPropagatedMs, 9960))})
	o := b.add(sp{parent: gc, svc: "order", name: "POST /order", kind: server, start: 30, end: 9985,
		status: schema.StatusError, attrs: attrs(rem(9950), source(schema.SourcePropagated))})
	oc := b.add(sp{parent: o, svc: "order", name: "POST /price", kind: client, start: 40, end: 9980,
		attrs: attrs(tmo(9930), timedOut(), peerSvc("pricing"))})
	p := b.add(sp{parent: oc, svc: "pricing", name: "POST /price", kind: server, start: 50, end: 9975,
		status: schema.StatusError, attrs: attrs(rem(9920), source(schema.SourcePropagated))})
	b.add(sp{parent: p, svc: "pricing", name: "SELECT prices", kind: client, start: 60, end: 9965,
		attrs: attrs(tmo(9900), timedOut(), schema.Str("db.system.name", "postgresql"), schema.Str("server.address", "db"))})
	return build(n, b.specs...)
}

// fourHopChain is seed 002: web (2000 ms at the edge) → gateway → order →
// inventory → db, each hop passing down what it has left minus its own work
// and transit: 2000 → 1900 → 1800 → 1700 ms. Inventory divides what it has
// between two database attempts and a backoff: 2 × 780 + 100 = 1660 ms of
// the 1670 ms left when it calls. The database answers in 200 ms.
func fourHopChain(n int) []schema.Span {
	b := &specBuilder{}
	web := b.add(sp{svc: "web", name: "GET /checkout", kind: server, start: 0, end: 760, attrs: attrs(rem(2000), source(schema.SourceEdge))})
	wc := b.add(sp{parent: web, svc: "web", name: "POST /api/checkout", kind: client, start: 40, end: 720, attrs: attrs(tmo(1900), peerSvc("gateway"))})
	gw := b.add(sp{parent: wc, svc: "gateway", name: "POST /api/checkout", kind: server, start: 100, end: 680, attrs: attrs(rem(1900), source(schema.SourcePropagated))})
	gc := b.add(sp{parent: gw, svc: "gateway", name: "POST /order", kind: client, start: 150, end: 660, attrs: attrs(tmo(1800), peerSvc("order"))})
	o := b.add(sp{parent: gc, svc: "order", name: "POST /order", kind: server, start: 200, end: 620, attrs: attrs(rem(1800), source(schema.SourcePropagated))})
	oc := b.add(sp{parent: o, svc: "order", name: "GET /stock", kind: client, start: 260, end: 600, attrs: attrs(tmo(1700), peerSvc("inventory"))})
	inv := b.add(sp{parent: oc, svc: "inventory", name: "GET /stock", kind: server, start: 300, end: 560, attrs: attrs(rem(1700), source(schema.SourcePropagated))})
	b.add(sp{parent: inv, svc: "inventory", name: "SELECT stock", kind: client, start: 330, end: 530,
		attrs: attrs(tmo(780), maxAttempts(2), backoff(100), attempt(1), schema.Str("db.system.name", "postgresql"))})
	return build(n, b.specs...)
}

// fourHopChainUnfundedRetry is seed 002 after someone adds a retry to
// order's call to inventory (2 attempts, 100 ms backoff) without
// re-budgeting: the per-attempt timeout stays 1700 ms. On a day the database
// is slow, inventory's two database attempts time out (780 ms each), order's
// first attempt times out at 1960, and order retries at 2060, after the
// 2000 ms deadline, sending its usual 1700 ms downstream.
func fourHopChainUnfundedRetry(n int) []schema.Span {
	b := &specBuilder{}
	web := b.add(sp{svc: "web", name: "GET /checkout", kind: server, start: 0, end: 1950, status: schema.StatusError, attrs: attrs(rem(2000), source(schema.SourceEdge))})
	wc := b.add(sp{parent: web, svc: "web", name: "POST /api/checkout", kind: client, start: 40, end: 1940, attrs: attrs(tmo(1900), timedOut(), peerSvc("gateway"))})
	gw := b.add(sp{parent: wc, svc: "gateway", name: "POST /api/checkout", kind: server, start: 100, end: 1960, status: schema.StatusError, attrs: attrs(rem(1900), source(schema.SourcePropagated))})
	gc := b.add(sp{parent: gw, svc: "gateway", name: "POST /order", kind: client, start: 150, end: 1950, attrs: attrs(tmo(1800), timedOut(), peerSvc("order"))})
	o := b.add(sp{parent: gc, svc: "order", name: "POST /order", kind: server, start: 200, end: 2420, attrs: attrs(rem(1800), source(schema.SourcePropagated))})

	oc1 := b.add(sp{parent: o, svc: "order", name: "GET /stock", kind: client, start: 260, end: 1960,
		attrs: attrs(tmo(1700), maxAttempts(2), backoff(100), timedOut(), peerSvc("inventory"))})
	inv1 := b.add(sp{parent: oc1, svc: "inventory", name: "GET /stock", kind: server, start: 300, end: 2000, status: schema.StatusError,
		attrs: attrs(rem(1700), source(schema.SourcePropagated))})
	b.add(sp{parent: inv1, svc: "inventory", name: "SELECT stock", kind: client, start: 330, end: 1110,
		attrs: attrs(tmo(780), maxAttempts(2), backoff(100), attempt(1), timedOut(), schema.Str("db.system.name", "postgresql"))})
	b.add(sp{parent: inv1, svc: "inventory", name: "SELECT stock", kind: client, start: 1210, end: 1990,
		attrs: attrs(tmo(780), maxAttempts(2), backoff(100), attempt(2), timedOut(), schema.Str("db.system.name", "postgresql"))})

	oc2 := b.add(sp{parent: o, svc: "order", name: "GET /stock", kind: client, start: 2060, end: 2400,
		attrs: attrs(tmo(1700), maxAttempts(2), backoff(100), peerSvc("inventory"))})
	inv2 := b.add(sp{parent: oc2, svc: "inventory", name: "GET /stock", kind: server, start: 2100, end: 2360,
		attrs: attrs(rem(1700), source(schema.SourcePropagated))})
	b.add(sp{parent: inv2, svc: "inventory", name: "SELECT stock", kind: client, start: 2130, end: 2330,
		attrs: attrs(tmo(780), maxAttempts(2), backoff(100), attempt(1), schema.Str("db.system.name", "postgresql"))})
	return build(n, b.specs...)
}

// gatewayRetriesSlowService is seed 004: a gateway with a 10 s timeout in
// front of a quote service that waits up to 30 s on a partner API, which
// has a bad day and answers in 13 s. The gateway gives up at 10 s and
// retries, so the partner gets two requests for one quote and the first
// quote is finished 3 s after nobody wants it. No hop records a budget.
// With envoy, the gateway announces its timeout the way Envoy does
// (x-envoy-expected-rq-timeout-ms), which budgetd reads as the quote
// service's budget.
func gatewayRetriesSlowService(n int, envoy bool, partnerMs float64) []schema.Span {
	b := &specBuilder{}
	gw := b.add(sp{svc: "gateway", name: "GET /quote", kind: server, start: 0, end: 20020, status: schema.StatusError})
	t := 10.0
	for a := 1; a <= 2; a++ {
		c := b.add(sp{parent: gw, svc: "gateway", name: "GET /quote", kind: client, start: t, end: t + 10000,
			attrs: attrs(tmo(10000), timedOut(), peerSvc("quote"))})
		s := sp{parent: c, svc: "quote", name: "GET /quote", kind: server, start: t + 5, end: t + 5 + partnerMs + 40}
		if envoy {
			s.attrs = attrs(schema.Strings(schema.AttrHeaderEnvoyExpectedMs, "10000"), schema.Strings(schema.AttrHeaderEnvoyAttempt, string(rune('0'+a))))
		}
		q := b.add(s)
		b.add(sp{parent: q, svc: "quote", name: "POST /rates", kind: client, start: t + 20, end: t + 20 + partnerMs,
			attrs: attrs(tmo(30000), peerSvc("partner-api"))})
		t += 10000
	}
	return build(n, b.specs...)
}

// specBuilder numbers span specs as they are added.
type specBuilder struct {
	specs []sp
}

// add appends s with the next id and returns the id.
func (b *specBuilder) add(s sp) int {
	s.id = len(b.specs) + 1
	b.specs = append(b.specs, s)
	return s.id
}

// setEnd sets the end (and status) of a span added earlier, for handlers
// whose end depends on their calls.
func (b *specBuilder) setEnd(id int, end float64, status schema.StatusCode) {
	b.specs[id-1].end = end
	b.specs[id-1].status = status
}
