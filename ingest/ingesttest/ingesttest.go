package ingesttest

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Trace sizes. Real request traces of a small shop span a handful to a few
// dozen spans; these bounds keep a 1000-span batch at 50–70 traces.
const (
	minTraceSpans = 5
	maxTraceSpans = 30
)

// baseTimeNs is the start of the first generated trace: the whole hour
// before the one the process started in. Fixed for the process, so every
// call with the same seed generates the same traces; recent, so budgetd
// accepts them (ingest.span_times refuses spans more than a week old).
var baseTimeNs = uint64(time.Now().UTC().Truncate(time.Hour).Add(-time.Hour).UnixNano())

// Traces returns nTraces traces of 5 to 30 spans each, generated from seed.
func Traces(seed int64, nTraces int) ptrace.Traces {
	g := newGen(seed)
	for range nTraces {
		g.trace(minTraceSpans + g.rng.IntN(maxTraceSpans-minTraceSpans+1))
	}
	return g.td
}

// Spans returns traces holding exactly nSpans spans in total, generated from
// seed: traces of 5 to 30 spans, the last one smaller when that is what is
// left.
func Spans(seed int64, nSpans int) ptrace.Traces { return newGen(seed).traces(nSpans) }

// HandlerSpans is Spans with every request's work inside an INTERNAL span
// under its SERVER span, as the instrumentation of Spring MVC and Express
// records a request's handler: about a fifth of the spans are then work
// inside a service rather than calls between services (Express's
// middleware spans would add more).
func HandlerSpans(seed int64, nSpans int) ptrace.Traces {
	g := newGen(seed)
	g.handlers = true
	return g.traces(nSpans)
}

// traces generates traces holding exactly nSpans spans in total.
func (g *gen) traces(nSpans int) ptrace.Traces {
	for left := nSpans; left > 0; {
		left -= g.trace(min(left, minTraceSpans+g.rng.IntN(maxTraceSpans-minTraceSpans+1)))
	}
	return g.td
}

// service is one node of the generated system.
type service struct {
	name    string
	routes  []string // operations it serves
	callees []string // services it calls
	db      string   // database system it queries, "" for none
}

// topology is a small web shop. It is a function, not a package variable,
// so no test can change it for another.
func topology() map[string]service {
	return map[string]service{
		"frontend":  {name: "frontend", routes: []string{"GET /", "GET /product/{id}", "POST /cart", "POST /checkout"}, callees: []string{"checkout", "cart", "catalog", "recommend"}},
		"checkout":  {name: "checkout", routes: []string{"POST /orders", "GET /orders/{id}"}, callees: []string{"cart", "payment", "inventory", "shipping"}, db: "postgresql"},
		"cart":      {name: "cart", routes: []string{"GET /cart/{user}", "PUT /cart/{user}"}, db: "redis"},
		"catalog":   {name: "catalog", routes: []string{"GET /products", "GET /products/{id}"}, callees: []string{"inventory"}, db: "postgresql"},
		"recommend": {name: "recommend", routes: []string{"GET /recommendations"}, callees: []string{"catalog"}},
		"payment":   {name: "payment", routes: []string{"POST /charges"}, callees: []string{"fraud"}, db: "postgresql"},
		"fraud":     {name: "fraud", routes: []string{"POST /score"}, db: "redis"},
		"inventory": {name: "inventory", routes: []string{"GET /stock/{sku}", "POST /reservations"}, db: "postgresql"},
		"shipping":  {name: "shipping", routes: []string{"POST /quotes"}, db: "postgresql"},
	}
}

// gen builds one ptrace.Traces. Spans are grouped into one ResourceSpans
// per service, in order of first appearance, as a Collector batch groups
// them.
type gen struct {
	rng      *rand.Rand
	td       ptrace.Traces
	services map[string]service
	spans    map[string]ptrace.SpanSlice
	now      uint64 // start of the next trace
	handlers bool   // a SERVER span's work goes under an INTERNAL handler span (HandlerSpans)
}

func newGen(seed int64) *gen {
	return &gen{
		rng:      rand.New(rand.NewPCG(uint64(seed), 0x6275646765746421)),
		td:       ptrace.NewTraces(),
		services: topology(),
		spans:    make(map[string]ptrace.SpanSlice),
		now:      baseTimeNs,
	}
}

// slice returns the span slice of svc's resource, creating the resource on
// first use.
func (g *gen) slice(svc string) ptrace.SpanSlice {
	if s, ok := g.spans[svc]; ok {
		return s
	}
	rs := g.td.ResourceSpans().AppendEmpty()
	rs.SetSchemaUrl("https://opentelemetry.io/schemas/1.37.0")
	a := rs.Resource().Attributes()
	a.PutStr("service.name", svc)
	a.PutStr("service.namespace", "shop")
	a.PutStr("service.version", fmt.Sprintf("1.%d.%d", g.rng.IntN(20), g.rng.IntN(10)))
	a.PutStr("service.instance.id", g.hex(16))
	a.PutStr("host.name", svc+"-"+g.hex(5))
	a.PutStr("os.type", "linux")
	a.PutStr("process.runtime.name", "go")
	a.PutStr("telemetry.sdk.name", "opentelemetry")
	a.PutStr("telemetry.sdk.language", "go")
	a.PutStr("telemetry.sdk.version", "1.47.0")
	a.PutStr("deployment.environment.name", "production")
	a.PutStr("k8s.namespace.name", "shop")
	a.PutStr("k8s.pod.name", svc+"-7d9f8b6c5-"+g.hex(3))
	a.PutInt("process.pid", int64(1+g.rng.IntN(60000)))
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp")
	ss.Scope().SetVersion("0.62.0")
	g.spans[svc] = ss.Spans()
	return ss.Spans()
}

// hex returns n random bytes as hex.
func (g *gen) hex(n int) string {
	b := make([]byte, n)
	g.fill(b)
	return fmt.Sprintf("%x", b)
}

// fill fills b with random bytes, never all zero (ids must not be).
func (g *gen) fill(b []byte) {
	for i := 0; i < len(b); i += 8 {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], g.rng.Uint64()|1)
		copy(b[i:], w[:])
	}
}

// ctx is what a span passes to the spans it creates.
type ctx struct {
	traceID   pcommon.TraceID
	parent    pcommon.SpanID
	service   string // the service of the parent span
	deadline  uint64 // absolute ns; 0 when the request has no budget
	cancelled bool   // the caller gave up on this subtree
}

// trace generates one trace of at most size spans and returns how many it
// made (at least one).
func (g *gen) trace(size int) int {
	var tid pcommon.TraceID
	g.fill(tid[:])
	start := g.now + uint64(g.rng.IntN(5_000_000))
	g.now += 20_000_000 // traces start 20 ms apart
	budgetMs := int64(500 + g.rng.IntN(9500))
	c := ctx{traceID: tid, deadline: start + uint64(budgetMs)*1_000_000}
	svc := g.services["frontend"]
	_, used := g.server(c, svc, start, size, budgetMs, "edge")
	return used
}

// server generates a SERVER span of svc starting at start, with up to size
// spans in its subtree. It returns the span's end and the spans it made.
func (g *gen) server(c ctx, svc service, start uint64, size int, remainingMs int64, source string) (uint64, int) {
	sp := g.slice(svc.name).AppendEmpty()
	var id pcommon.SpanID
	g.fill(id[:])
	sp.SetTraceID(c.traceID)
	sp.SetSpanID(id)
	sp.SetParentSpanID(c.parent)
	route := svc.routes[g.rng.IntN(len(svc.routes))]
	sp.SetName(route)
	sp.SetKind(ptrace.SpanKindServer)
	if g.rng.IntN(10) == 0 {
		sp.TraceState().FromRaw("shop=" + g.hex(4))
	}
	used := 1

	method, path := splitRoute(route)
	a := sp.Attributes()
	a.PutStr("http.request.method", method)
	a.PutStr("url.path", path)
	a.PutStr("url.scheme", "http")
	a.PutStr("http.route", path)
	a.PutStr("server.address", svc.name)
	a.PutInt("server.port", 8080)
	a.PutStr("client.address", fmt.Sprintf("10.0.%d.%d", g.rng.IntN(256), g.rng.IntN(256)))
	a.PutStr("network.protocol.version", "1.1")
	a.PutStr("user_agent.original", "Go-http-client/1.1")
	a.PutInt(budgetRemaining, remainingMs)
	a.PutStr(budgetSource, source)
	if source != "edge" {
		a.PutEmptySlice(headerTimeout).FromRaw([]any{strconv.FormatInt(remainingMs, 10)})
	}
	if g.rng.IntN(4) == 0 {
		a.PutBool("app.cache_hit", g.rng.IntN(2) == 0)
	}
	if g.rng.IntN(4) == 0 {
		a.PutDouble("app.sampling_ratio", 0.25)
	}

	cur := start + uint64(200_000+g.rng.IntN(800_000))
	work := id // the parent of the request's calls and queries
	var handler ptrace.Span
	if g.handlers && size-used >= 2 {
		handler = g.slice(svc.name).AppendEmpty()
		g.fill(work[:])
		handler.SetTraceID(c.traceID)
		handler.SetSpanID(work)
		handler.SetParentSpanID(id)
		handler.SetName("handle " + route)
		handler.SetKind(ptrace.SpanKindInternal)
		handler.Attributes().PutStr("code.function.name", svc.name+".handle")
		handler.SetStartTimestamp(pcommon.Timestamp(cur))
		cur += 50_000
		used++
	}
	left := size - used
	// Calls to other services first, sharing the span budget between
	// them, then database queries take whatever is left.
	if len(svc.callees) > 0 && left >= 2 {
		k := 1 + g.rng.IntN(min(3, left/2))
		for i := range k {
			share := left / (k - i)
			callee := g.services[svc.callees[g.rng.IntN(len(svc.callees))]]
			end, n := g.call(ctx{traceID: c.traceID, parent: work, service: svc.name, deadline: c.deadline}, callee, cur, share)
			used += n
			left -= n
			cur = end + uint64(100_000+g.rng.IntN(400_000))
		}
	}
	for ; left > 0; left-- {
		cur = g.query(ctx{traceID: c.traceID, parent: work}, svc, cur) + uint64(50_000)
		used++
	}

	if work != id {
		handler.SetEndTimestamp(pcommon.Timestamp(cur))
	}
	end := cur + uint64(100_000+g.rng.IntN(500_000))
	status := int64(200)
	if c.cancelled || (c.deadline != 0 && end > c.deadline) {
		// The request outlived its budget: the server noticed only after
		// the work was done, which is the orphaned work budgetd finds.
		status = 504
		ev := sp.Events().AppendEmpty()
		ev.SetName(eventCancelled)
		ev.SetTimestamp(pcommon.Timestamp(max(start, min(c.deadline, end))))
		ev.Attributes().PutStr(cancelSource, "deadline")
		sp.Status().SetCode(ptrace.StatusCodeError)
		sp.Status().SetMessage("context deadline exceeded")
	}
	a.PutInt("http.response.status_code", status)
	sp.SetStartTimestamp(pcommon.Timestamp(start))
	sp.SetEndTimestamp(pcommon.Timestamp(end))
	return end, used
}

// call generates a CLIENT span calling callee (and the callee's SERVER span
// and subtree), with a retry when there is room for one. It returns the end
// of the last attempt and the spans made.
func (g *gen) call(c ctx, callee service, start uint64, size int) (uint64, int) {
	attempts := 1
	if size >= 4 && g.rng.IntN(6) == 0 {
		attempts = 2
	}
	maxAttempts := int64(1 + g.rng.IntN(3))
	timeoutMs := int64(100 * (1 + g.rng.IntN(30)))
	backoffMs := int64(25 * (1 + g.rng.IntN(4)))
	used := 0
	cur := start
	for attempt := 1; attempt <= attempts; attempt++ {
		share := (size - used) / (attempts - attempt + 1)
		sp := g.slice(c.service).AppendEmpty()
		var id pcommon.SpanID
		g.fill(id[:])
		sp.SetTraceID(c.traceID)
		sp.SetSpanID(id)
		sp.SetParentSpanID(c.parent)
		sp.SetKind(ptrace.SpanKindClient)
		route := callee.routes[g.rng.IntN(len(callee.routes))]
		method, path := splitRoute(route)
		sp.SetName(method)
		used++

		remainingMs := timeoutMs
		if c.deadline != 0 {
			remainingMs = min(timeoutMs, (int64(c.deadline)-int64(cur))/1_000_000)
		}
		a := sp.Attributes()
		a.PutStr("http.request.method", method)
		a.PutStr("url.full", "http://"+callee.name+":8080"+path)
		a.PutStr("server.address", callee.name)
		a.PutInt("server.port", 8080)
		a.PutStr("network.protocol.version", "1.1")
		a.PutStr("peer.service", callee.name)
		a.PutInt(budgetTimeout, timeoutMs)
		a.PutInt(budgetPropagated, remainingMs)
		a.PutInt(budgetAttempt, int64(attempt))
		a.PutInt(budgetMaxAttempts, max(maxAttempts, int64(attempts)))
		a.PutInt(budgetBackoff, backoffMs)
		a.PutEmptySlice(headerTimeout).FromRaw([]any{strconv.FormatInt(remainingMs, 10)})
		if attempt > 1 {
			a.PutInt("http.request.resend_count", int64(attempt-1))
		}

		serverStart := cur + uint64(300_000+g.rng.IntN(700_000))
		child := ctx{traceID: c.traceID, parent: id, deadline: c.deadline}
		timedOut := attempt < attempts
		if timedOut {
			child.cancelled = true
		}
		serverEnd, n := g.server(child, callee, serverStart, max(share-1, 1), remainingMs, "propagated")
		used += n
		end := serverEnd + uint64(200_000+g.rng.IntN(500_000))
		if timedOut {
			// The client gave up at its timeout while the server kept
			// going.
			end = min(end, cur+uint64(timeoutMs)*1_000_000)
			a.PutStr("error.type", "timeout")
			sp.Status().SetCode(ptrace.StatusCodeError)
			ev := sp.Events().AppendEmpty()
			ev.SetName("exception")
			ev.SetTimestamp(pcommon.Timestamp(end))
			ev.Attributes().PutStr("exception.type", "context.DeadlineExceeded")
			ev.Attributes().PutStr("exception.message", "context deadline exceeded")
		} else {
			a.PutInt("http.response.status_code", 200)
		}
		sp.SetStartTimestamp(pcommon.Timestamp(cur))
		sp.SetEndTimestamp(pcommon.Timestamp(end))
		cur = end + uint64(backoffMs)*1_000_000
	}
	return cur, used
}

// query generates a database CLIENT span of svc at start and returns its end.
func (g *gen) query(c ctx, svc service, start uint64) uint64 {
	system := svc.db
	if system == "" {
		system = "redis"
	}
	sp := g.slice(svc.name).AppendEmpty()
	var id pcommon.SpanID
	g.fill(id[:])
	sp.SetTraceID(c.traceID)
	sp.SetSpanID(id)
	sp.SetParentSpanID(c.parent)
	sp.SetKind(ptrace.SpanKindClient)
	a := sp.Attributes()
	a.PutStr("db.system.name", system)
	a.PutStr("server.address", system+".shop.svc.cluster.local")
	a.PutStr("network.peer.address", fmt.Sprintf("10.1.%d.%d", g.rng.IntN(256), g.rng.IntN(256)))
	a.PutInt("budget.timeout_ms", int64(50*(1+g.rng.IntN(10))))
	a.PutInt("budget.attempt", 1)
	a.PutStr("db.client.connection.pool.name", svc.name+"-"+system)
	dur := uint64(100_000 + g.rng.IntN(3_000_000))
	if system == "redis" {
		sp.SetName("GET")
		a.PutStr("db.operation.name", "GET")
		a.PutInt("db.namespace", 0)
		a.PutInt("server.port", 6379)
		a.PutStr("db.query.text", "GET "+svc.name+":"+g.hex(6))
	} else {
		table := [...]string{"orders", "order_items", "products", "stock", "customers"}[g.rng.IntN(5)]
		sp.SetName("SELECT " + table)
		a.PutStr("db.operation.name", "SELECT")
		a.PutStr("db.namespace", "shop")
		a.PutStr("db.collection.name", table)
		a.PutInt("server.port", 5432)
		a.PutStr("db.query.text", "SELECT id, customer_id, status, total_cents, currency, created_at, updated_at FROM "+
			table+" WHERE customer_id = $1 AND status = ANY($2) ORDER BY created_at DESC LIMIT 50")
		a.PutInt("db.response.returned_rows", int64(g.rng.IntN(50)))
		a.PutDouble("db.client.operation.duration", float64(dur)/1e9)
	}
	sp.SetStartTimestamp(pcommon.Timestamp(start))
	sp.SetEndTimestamp(pcommon.Timestamp(start + dur))
	return start + dur
}

// splitRoute splits "GET /path" into method and path.
func splitRoute(route string) (string, string) {
	for i := range len(route) {
		if route[i] == ' ' {
			return route[:i], route[i+1:]
		}
	}
	return "GET", route
}

// The budget attribute names of docs/attributes.md. They are repeated here
// rather than imported from schema so that the generator keeps producing
// the wire names even if schema's constants are ever renamed by mistake.
const (
	budgetRemaining   = "budget.remaining_ms"
	budgetSource      = "budget.source"
	budgetTimeout     = "budget.timeout_ms"
	budgetPropagated  = "budget.propagated_ms"
	budgetAttempt     = "budget.attempt"
	budgetMaxAttempts = "budget.max_attempts"
	budgetBackoff     = "budget.backoff_ms"
	eventCancelled    = "budget.cancelled"
	cancelSource      = "budget.cancel_source"
	headerTimeout     = "http.request.header.x-request-timeout-ms"
)

// AddAttributes gives every span of td n more attributes, the kind an
// application adds to its spans (ids, flags, sizes: a third each of
// strings, integers and booleans, values varying between spans), so
// benchmarks can tell how a span's cost grows with its attributes.
func AddAttributes(td ptrace.Traces, n int) {
	k := 0
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			for _, sp := range ss.Spans().All() {
				attrs := sp.Attributes()
				attrs.EnsureCapacity(attrs.Len() + n)
				for i := range n {
					k++
					name := "app.attribute_" + strconv.Itoa(i)
					switch i % 3 {
					case 0:
						attrs.PutStr(name, "value-"+strconv.Itoa(k%977))
					case 1:
						attrs.PutInt(name, int64(k%10_007))
					default:
						attrs.PutBool(name, k%2 == 0)
					}
				}
			}
		}
	}
}
