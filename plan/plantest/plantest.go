// Package plantest builds stored hops for tests of `budgetd plan
// --from-store`: a checkout path whose every figure is known, so a test can
// assert the chain the store yields to the millisecond.
package plantest

import (
	"strings"
	"time"

	"github.com/budgetd/budgetd/schema"
)

// The checkout path the hops describe, one element per hop. Postgres
// records no span of its own: only its callers' CLIENT spans know it.
const (
	Web       = "web:GET /checkout"
	Order     = "order:POST /order"
	Inventory = "inventory:reserve"
	Postgres  = "postgres:SELECT"

	// Traces is the number of requests; the first Retried of them retry
	// their call to inventory once.
	Traces  = 20
	Retried = 5
)

// Path joins elements the way the analyzer writes a path.
func Path(elems ...string) string { return strings.Join(elems, " > ") }

// CheckoutHops returns the hops of Traces requests starting at start, one
// second apart. In every request:
//
//   - web (root, budget 2000 ms) works 50 ms and calls order with a 1800 ms
//     timeout, max_attempts 1; the call takes 20 ms longer than order's
//     SERVER span;
//   - order works 180 ms and calls inventory with a 600 ms timeout,
//     max_attempts 2: a 400 ms call (inventory's span 385 ms), preceded in
//     the first Retried requests by a failed 300 ms attempt (span 290 ms);
//   - every inventory entry calls postgres once for 100 ms.
func CheckoutHops(start time.Time) []schema.Hop {
	var hops []schema.Hop
	ms := func(v int) uint64 { return uint64(v) * uint64(time.Millisecond) }
	for r := range Traces {
		tid := schema.TraceID{0x9a, 0x17, byte(r >> 8), byte(r)}
		next := 0
		sid := func() schema.SpanID {
			next++
			return schema.SpanID{0x5e, byte(r >> 8), byte(r), byte(next)}
		}
		t0 := uint64(start.UnixNano()) + uint64(r)*uint64(time.Second)
		root := Path(Web)
		type attempt struct{ client, server int }
		attempts := []attempt{{400, 385}}
		if r < Retried {
			attempts = []attempt{{300, 290}, {400, 385}}
		}
		orderDur := 180
		for _, a := range attempts {
			orderDur += a.client
		}
		webDur := 50 + orderDur + 20

		webID := sid()
		hops = append(hops, schema.Hop{TraceID: tid, SpanID: webID, Service: "web", Operation: "GET /checkout",
			Kind: schema.KindServer, Path: root, RootPath: root, StartNs: t0, DurationNs: ms(webDur),
			BudgetMs: schema.Ms(2000), RemainingMs: schema.Ms(2000), BudgetSource: string(schema.SourceEdge)})

		toOrder, orderID := sid(), sid()
		p2 := Path(Web, Order)
		hops = append(hops,
			schema.Hop{TraceID: tid, SpanID: toOrder, ParentSpanID: webID, Service: "web", Operation: "POST order",
				Kind: schema.KindClient, Path: p2, RootPath: root, CallerService: "web", CallerOperation: "GET /checkout",
				CalleeService: "order", CalleeOperation: "POST /order", StartNs: t0 + ms(40), DurationNs: ms(orderDur + 20),
				TimeoutMs: schema.Ms(1800), Attempt: 1, MaxAttempts: 1},
			schema.Hop{TraceID: tid, SpanID: orderID, ParentSpanID: toOrder, Service: "order", Operation: "POST /order",
				Kind: schema.KindServer, Path: p2, RootPath: root, CallerService: "web", CallerOperation: "GET /checkout",
				CalleeService: "order", CalleeOperation: "POST /order", StartNs: t0 + ms(50), DurationNs: ms(orderDur)})

		p3, p4 := Path(Web, Order, Inventory), Path(Web, Order, Inventory, Postgres)
		at := t0 + ms(50+180)
		for i, a := range attempts {
			call, entry, query := sid(), sid(), sid()
			hops = append(hops,
				schema.Hop{TraceID: tid, SpanID: call, ParentSpanID: orderID, Service: "order", Operation: "POST reserve",
					Kind: schema.KindClient, Path: p3, RootPath: root, CallerService: "order", CallerOperation: "POST /order",
					CalleeService: "inventory", CalleeOperation: "reserve", StartNs: at, DurationNs: ms(a.client),
					IsError: i < len(attempts)-1, TimeoutMs: schema.Ms(600), Attempt: uint32(i + 1), MaxAttempts: 2},
				schema.Hop{TraceID: tid, SpanID: entry, ParentSpanID: call, Service: "inventory", Operation: "reserve",
					Kind: schema.KindServer, Path: p3, RootPath: root, CallerService: "order", CallerOperation: "POST /order",
					CalleeService: "inventory", CalleeOperation: "reserve", StartNs: at + ms(5), DurationNs: ms(a.server)},
				schema.Hop{TraceID: tid, SpanID: query, ParentSpanID: entry, Service: "inventory", Operation: "SELECT",
					Kind: schema.KindClient, Path: p4, RootPath: root, CallerService: "inventory", CallerOperation: "reserve",
					CalleeService: "postgres", CalleeOperation: "SELECT", StartNs: at + ms(10), DurationNs: ms(100), Attempt: 1})
			at += ms(a.client)
		}
	}
	return hops
}
