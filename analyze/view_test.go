package analyze

import (
	"encoding/json"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/analyze/budgetread"
	"github.com/budgetd/budgetd/schema"
)

func TestHopFields(t *testing.T) {
	r := analyzeSpans(t, build(1,
		sp{id: 1, svc: "mobile", name: "checkout", kind: client, start: 0, end: 1000, attrs: attrs(rem(2000), tmo(1500))},
		sp{id: 2, parent: 1, svc: "gateway", name: "POST /checkout", kind: server, start: 10, end: 990, attrs: attrs(headerTimeoutMs("1480"))},
		sp{id: 3, parent: 2, svc: "gateway", name: "POST", kind: client, start: 20, end: 520, attrs: attrs(peerSvc("order"), tmo(500), maxAttempts(2), timedOut())},
		sp{id: 4, parent: 2, svc: "gateway", name: "POST", kind: client, start: 530, end: 980, attrs: attrs(peerSvc("order"), tmo(450), maxAttempts(2))},
		sp{id: 5, parent: 4, svc: "order", name: "POST /order", kind: server, start: 540, end: 970, attrs: attrs(rem(440))},
		sp{id: 6, parent: 5, svc: "order", name: "SELECT orders", kind: client, start: 550, end: 560, status: schema.StatusError, attrs: attrs(schema.Str("server.address", "pg.internal"))},
		sp{id: 7, parent: 5, svc: "order", name: "render", kind: internal, start: 560, end: 570},
	))
	require.Len(t, r.Hops, 7)

	root := hopOf(t, r, 1)
	require.Equal(t, "mobile:checkout > gateway:POST /checkout", root.Path, "a root call's path ends at its callee")
	require.Equal(t, "mobile:checkout", root.RootPath)
	require.Equal(t, "mobile", root.CallerService)
	require.Equal(t, "gateway", root.CalleeService)
	require.Equal(t, 2000.0, *root.RemainingMs)
	require.Equal(t, 2000.0, *root.BudgetMs)
	require.EqualValues(t, 1, root.Attempt)
	require.EqualValues(t, 980e6, root.CalleeDurationNs, "a call carries its callee's own duration")

	gw := hopOf(t, r, 2)
	require.Equal(t, "mobile:checkout > gateway:POST /checkout", gw.Path)
	require.Equal(t, "mobile:checkout", gw.RootPath)
	require.Equal(t, "mobile", gw.CallerService)
	require.Equal(t, "checkout", gw.CallerOperation)
	require.Equal(t, "gateway", gw.CalleeService)
	require.Equal(t, "POST /checkout", gw.CalleeOperation)
	require.True(t, gw.Inferred, "the budget came from a header")
	require.Equal(t, 1480.0, *gw.BudgetMs)
	require.Equal(t, 1480.0, *gw.RemainingMs)
	require.Zero(t, gw.Attempt)
	require.Equal(t, schema.KindServer, gw.Kind)

	first, retry := hopOf(t, r, 3), hopOf(t, r, 4)
	require.Zero(t, first.CalleeDurationNs, "an attempt the callee never saw has no callee duration")
	require.EqualValues(t, 430e6, retry.CalleeDurationNs)
	require.Equal(t, "mobile:checkout > gateway:POST /checkout > order:POST /order", first.Path,
		"the attempt that never reached order is named after the attempt that did")
	require.Equal(t, first.Path, retry.Path, "retries collapse onto one path")
	require.Equal(t, "order", first.CalleeService)
	require.Equal(t, "POST /order", first.CalleeOperation)
	require.EqualValues(t, 1, first.Attempt)
	require.EqualValues(t, 2, retry.Attempt)
	require.EqualValues(t, 2, retry.MaxAttempts)
	require.True(t, first.TimedOut)
	require.True(t, first.IsError)
	require.False(t, retry.IsError)
	require.Equal(t, 450.0, *retry.TimeoutMs)
	require.InDelta(t, 1480-520, *retry.RemainingMs, 1e-9)

	order := hopOf(t, r, 5)
	require.Equal(t, retry.Path, order.Path)
	require.InDelta(t, 440, *order.RemainingMs, 1e-9)

	db := hopOf(t, r, 6)
	require.Equal(t, order.Path+" > pg.internal:SELECT orders", db.Path)
	require.Equal(t, "order", db.CallerService)
	require.Equal(t, "POST /order", db.CallerOperation)
	require.Equal(t, "pg.internal", db.CalleeService)
	require.True(t, db.IsError)

	render := hopOf(t, r, 7)
	require.Equal(t, order.Path, render.Path, "internal spans sit on their entry's path")
	require.Empty(t, render.CallerService)
	require.Zero(t, render.Attempt)
}

func TestPaths(t *testing.T) {
	deep := []sp{{id: 1, svc: "s", name: "op", kind: server, start: 0, end: 1000}}
	for i := 2; i <= 100; i++ {
		deep = append(deep, sp{id: i, parent: i - 1, svc: "s", name: "op", kind: server, start: float64(i), end: 1000 - float64(i)})
	}
	tests := []struct {
		name  string
		spans []schema.Span
		span  int
		path  string
	}{
		{
			name: "missing parent marks the path as incomplete",
			spans: build(1,
				sp{id: 1, parent: missing, svc: "pricing", name: "Price", kind: server, start: 0, end: 10},
				sp{id: 2, parent: 1, svc: "pricing", name: "SELECT", kind: client, start: 1, end: 9, attrs: attrs(schema.Str("db.system.name", "postgresql"))},
			),
			span: 2,
			path: "… > pricing:Price > postgresql:SELECT",
		},
		{
			name: "a callee nothing names",
			spans: build(1,
				sp{id: 1, svc: "pricing", name: "Price", kind: server, start: 0, end: 10},
				sp{id: 2, parent: 1, svc: "pricing", name: "GET", kind: client, start: 1, end: 9},
			),
			span: 2,
			path: "pricing:Price > unknown:GET",
		},
		{
			// The retried order call's second attempt reached a pricing
			// whose own call was cut off before the database recorded
			// anything: it takes the callee that answered pricing's
			// identical call in the first attempt.
			name: "an unanswered call is named by the answered calls to its peer",
			spans: build(1,
				sp{id: 1, svc: "order", name: "Order", kind: server, start: 0, end: 100},
				sp{id: 2, parent: 1, svc: "order", name: "GET", kind: client, start: 1, end: 50, status: schema.StatusError, attrs: attrs(host("pricing.internal"))},
				sp{id: 3, parent: 2, svc: "pricing", name: "Price", kind: server, start: 2, end: 49},
				sp{id: 4, parent: 3, svc: "pricing", name: "SELECT", kind: client, start: 3, end: 48, attrs: attrs(host("db.internal"))},
				sp{id: 5, parent: 4, svc: "db", name: "SELECT prices", kind: server, start: 4, end: 47},
				sp{id: 6, parent: 1, svc: "order", name: "GET", kind: client, start: 51, end: 99, attrs: attrs(host("pricing.internal"))},
				sp{id: 7, parent: 6, svc: "pricing", name: "Price", kind: server, start: 52, end: 98},
				sp{id: 8, parent: 7, svc: "pricing", name: "SELECT", kind: client, start: 53, end: 97, status: schema.StatusError, attrs: attrs(host("db.internal"))},
			),
			span: 8,
			path: "order:Order > pricing:Price > db:SELECT prices",
		},
		{
			name: "an unanswered call to a peer that several callees answered is named by the peer",
			spans: build(1,
				sp{id: 1, svc: "web", name: "GET /", kind: server, start: 0, end: 100},
				sp{id: 2, parent: 1, svc: "web", name: "GET", kind: client, start: 1, end: 10, attrs: attrs(host("lb.internal"))},
				sp{id: 3, parent: 2, svc: "cart", name: "GET /cart", kind: server, start: 2, end: 9},
				sp{id: 4, parent: 1, svc: "web", name: "GET", kind: client, start: 1, end: 10, attrs: attrs(host("lb.internal"))},
				sp{id: 5, parent: 4, svc: "user", name: "GET /user", kind: server, start: 2, end: 9},
				sp{id: 6, parent: 1, svc: "web", name: "GET", kind: client, start: 11, end: 20, status: schema.StatusError, attrs: attrs(host("lb.internal"))},
			),
			span: 6,
			path: "web:GET / > lb.internal:GET",
		},
		{
			name: "an unanswered call without a peer is not named after another callee",
			spans: build(1,
				sp{id: 1, svc: "web", name: "GET /", kind: server, start: 0, end: 100},
				sp{id: 2, parent: 1, svc: "web", name: "GET", kind: client, start: 1, end: 10},
				sp{id: 3, parent: 2, svc: "cart", name: "GET /cart", kind: server, start: 2, end: 9},
				sp{id: 4, parent: 1, svc: "web", name: "GET", kind: client, start: 11, end: 20},
			),
			span: 4,
			path: "web:GET / > unknown:GET",
		},
		{
			name: "a span without service.name",
			spans: build(1,
				sp{id: 1, name: "Price", kind: server, start: 0, end: 10},
			),
			span: 1,
			path: "unknown_service:Price",
		},
		{
			name: "an entry directly under an entry",
			spans: build(1,
				sp{id: 1, svc: "gateway", name: "GET /", kind: server, start: 0, end: 10},
				sp{id: 2, parent: 1, svc: "web", name: "render", kind: internal, start: 1, end: 9},
				sp{id: 3, parent: 2, svc: "queue", name: "consume", kind: consumer, start: 2, end: 8},
			),
			span: 3,
			path: "gateway:GET / > queue:consume",
		},
		{
			name:  "a path stops growing after 64 elements",
			spans: build(1, deep...),
			span:  100,
			path:  strings.Repeat("s:op > ", 64) + "…",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.path, hopOf(t, analyzeSpans(t, tt.spans), tt.span).Path)
		})
	}
}

func TestAttemptInference(t *testing.T) {
	call := func(id int, start, end float64, status schema.StatusCode, as ...schema.Attr) sp {
		return sp{id: id, parent: 1, svc: "order", name: "GET", kind: client, start: start, end: end, status: status, attrs: append(as, peerSvc("stock"))}
	}
	root := sp{id: 1, svc: "order", name: "POST /order", kind: server, start: 0, end: 100}
	tests := []struct {
		name     string
		spans    []schema.Span
		attempts []uint32 // of spans 2, 3, 4
	}{
		{
			name:     "siblings after failures are attempts",
			spans:    build(1, root, call(2, 1, 10, schema.StatusError), call(3, 11, 20, schema.StatusError), call(4, 21, 30, schema.StatusUnset)),
			attempts: []uint32{1, 2, 3},
		},
		{
			name:     "siblings after successes are separate calls",
			spans:    build(1, root, call(2, 1, 10, schema.StatusOK), call(3, 11, 20, schema.StatusOK), call(4, 21, 30, schema.StatusOK)),
			attempts: []uint32{1, 1, 1},
		},
		{
			name:     "overlapping siblings are parallel calls",
			spans:    build(1, root, call(2, 1, 10, schema.StatusError), call(3, 5, 20, schema.StatusError), call(4, 21, 30, schema.StatusUnset)),
			attempts: []uint32{1, 1, 2},
		},
		{
			name:     "http.request.resend_count decides on its own",
			spans:    build(1, root, call(2, 1, 10, schema.StatusOK, resend(0)), call(3, 11, 20, schema.StatusOK, resend(1)), call(4, 21, 30, schema.StatusOK, resend(0))),
			attempts: []uint32{1, 2, 1},
		},
		{
			name: "an attempt header seen by the callee",
			spans: build(1, root, call(2, 1, 10, schema.StatusOK), call(3, 11, 20, schema.StatusOK), call(4, 21, 30, schema.StatusOK),
				sp{id: 5, parent: 3, svc: "stock", name: "GET /stock", kind: server, start: 12, end: 19, attrs: attrs(schema.Strings(schema.AttrHeaderEnvoyAttempt, "2"))}),
			attempts: []uint32{1, 2, 1},
		},
		{
			name:     "a 429 is retried",
			spans:    build(1, root, call(2, 1, 10, schema.StatusUnset, schema.Int(schema.AttrHTTPStatusCode, 429)), call(3, 11, 20, schema.StatusUnset), call(4, 21, 30, schema.StatusUnset)),
			attempts: []uint32{1, 2, 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := analyzeSpans(t, tt.spans)
			for k, want := range tt.attempts {
				require.Equal(t, want, hopOf(t, r, k+2).Attempt, "span %d", k+2)
			}
		})
	}
}

func TestFindingIDsAreStable(t *testing.T) {
	spans := retryChain(1, []int{2, 2, 3}, false)
	first := analyzeSpans(t, spans)
	require.NotEmpty(t, first.Findings)
	shuffled := append([]schema.Span(nil), spans...)
	rand.New(rand.NewSource(4)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	again := analyzeSpans(t, shuffled)
	require.Equal(t, first.Findings, again.Findings)
	require.Len(t, FindingID(schema.KindOrphanedWork, "a", "b"), 32)
	require.NotEqual(t, FindingID(schema.KindOrphanedWork, "a", "b"), FindingID(schema.KindExpiredOnArrival, "a", "b"))
	require.NotEqual(t, FindingID(schema.KindOrphanedWork, "ab", ""), FindingID(schema.KindOrphanedWork, "a", "b"))
}

func TestHostileInput(t *testing.T) {
	tests := []struct {
		name  string
		spans []schema.Span
	}{
		{name: "empty trace"},
		{
			name: "times at the ends of the range, ending before starting",
			spans: []schema.Span{
				{TraceID: traceID(1), SpanID: spanID(1), Kind: server, StartNs: math.MaxUint64, EndNs: 0, Attrs: attrs(rem(budgetread.MaxMs))},
				{TraceID: traceID(1), SpanID: spanID(2), ParentSpanID: spanID(1), Kind: client, StartNs: 0, EndNs: math.MaxUint64,
					Attrs: attrs(tmo(budgetread.MaxMs), maxAttempts(math.MaxUint32), backoff(budgetread.MaxMs), attempt(math.MaxUint32))},
				{TraceID: traceID(1), SpanID: spanID(3), ParentSpanID: spanID(2), Kind: server, StartNs: 1, EndNs: math.MaxUint64,
					Attrs: attrs(rem(-budgetread.MaxMs)), Events: []schema.Event{{Name: schema.EventCancelled, TimeNs: math.MaxUint64}}},
			},
		},
		{
			name: "garbage numbers",
			spans: build(1,
				sp{id: 1, svc: "a", name: "x", kind: server, start: 0, end: 10, attrs: attrs(schema.Str(schema.AttrRemainingMs, "NaN"), schema.Double(schema.AttrTimeoutMs, math.Inf(1)))},
				sp{id: 2, parent: 1, svc: "a", name: "y", kind: client, start: 1, end: 9, attrs: attrs(schema.Str(schema.AttrTimeoutMs, "1e400"), schema.Str(schema.AttrHTTPStatusCode, "x"))},
			),
		},
		{
			name: "a parent cycle",
			spans: build(1,
				sp{id: 1, parent: 3, svc: "a", name: "x", kind: server, start: 0, end: 10, attrs: attrs(rem(5))},
				sp{id: 2, parent: 1, svc: "a", name: "y", kind: client, start: 1, end: 9, attrs: attrs(tmo(50))},
				sp{id: 3, parent: 2, svc: "b", name: "z", kind: server, start: 2, end: 8, attrs: attrs(rem(500))},
			),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := analyzeSpans(t, tt.spans)
			require.Len(t, r.Hops, len(tt.spans))
			_, err := json.Marshal(r)
			require.NoError(t, err, "findings and hops must always encode")
			for _, f := range r.Findings {
				require.True(t, schema.ValidKind(f.Kind))
				require.True(t, schema.ValidSeverity(f.Severity))
			}
		})
	}
}

func TestDeepChainDoesNotRecurse(t *testing.T) {
	const depth = 20000
	specs := make([]sp, 0, depth)
	for i := 1; i <= depth; i++ {
		kind := server
		if i%2 == 0 {
			kind = client
		}
		specs = append(specs, sp{id: i, parent: i - 1, svc: "s", name: "op", kind: kind, start: float64(i) / 1000, end: 1e6 - float64(i)/1000})
	}
	// Local ids only go up to 65535; remap the parent of the root.
	specs[0].parent = 0
	r := analyzeSpans(t, build(1, specs...))
	require.Len(t, r.Hops, depth)
}
