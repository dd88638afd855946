package analyze

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/schema"
)

// Tests of DESIGN §5 "Rules that real systems' traces need": shapes that
// real instrumentation and architectures produce, each with a positive, a
// negative and an edge case.

func grpcCode(n int64) schema.Attr { return schema.Int(schema.AttrRPCGRPCStatusCode, n) }
func httpCode(n int64) schema.Attr { return schema.Int(schema.AttrHTTPStatusCode, n) }
func oldHTTPCode(n int64) schema.Attr {
	return schema.Int(schema.AttrHTTPStatusCodeOld, n)
}

// TestAnsweredOrGaveUp: a CLIENT span bounds its SERVER span (clock skew)
// only when it got the server's answer.
func TestAnsweredOrGaveUp(t *testing.T) {
	// The server starts 300 ms after the client ended and runs 80 ms.
	late := func(clientStatus schema.StatusCode, clientAttrs, serverAttrs []schema.Attr, serverStatus schema.StatusCode) []schema.Span {
		return build(1,
			sp{id: 1, svc: "web", name: "GET /", kind: server, start: 0, end: 120},
			sp{id: 2, parent: 1, svc: "web", name: "GET /stock", kind: client, start: 10, end: 110, status: clientStatus, attrs: clientAttrs},
			sp{id: 3, parent: 2, svc: "stock", name: "GET /stock", kind: server, start: 410, end: 490, status: serverStatus, attrs: serverAttrs},
		)
	}
	tests := []struct {
		name     string
		spans    []schema.Span
		skewed   bool
		orphaned float64
	}{
		{name: "client OK: skew", spans: late(schema.StatusOK, nil, nil, schema.StatusUnset), skewed: true},
		{name: "both failed with the same code: skew",
			spans:  late(schema.StatusError, attrs(httpCode(503)), attrs(httpCode(503)), schema.StatusError),
			skewed: true},
		{name: "both failed with the same code in old and new semconv: skew",
			spans:  late(schema.StatusError, attrs(oldHTTPCode(503)), attrs(httpCode(503)), schema.StatusError),
			skewed: true},
		{name: "both failed, no codes: skew",
			spans:  late(schema.StatusError, nil, nil, schema.StatusError),
			skewed: true},
		{name: "client failed, server succeeded: gave up",
			spans:    late(schema.StatusError, nil, nil, schema.StatusUnset),
			orphaned: 80},
		{name: "different answers: gave up",
			spans:    late(schema.StatusError, attrs(httpCode(502)), attrs(httpCode(500)), schema.StatusError),
			orphaned: 80},
		{name: "gRPC client cancelled (string code): gave up",
			spans: late(schema.StatusError, attrs(schema.Str(schema.AttrRPCResponseStatusCode, "CANCELLED")),
				attrs(schema.Str(schema.AttrRPCResponseStatusCode, "OK")), schema.StatusUnset),
			orphaned: 80},
		{name: "gRPC client deadline exceeded (old int code): gave up",
			spans:    late(schema.StatusError, attrs(grpcCode(4)), attrs(grpcCode(0)), schema.StatusUnset),
			orphaned: 80},
		{name: "HTTP 504 at the client in old semconv: gave up",
			spans:    late(schema.StatusError, attrs(oldHTTPCode(504)), attrs(oldHTTPCode(200)), schema.StatusUnset),
			orphaned: 80},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := analyzeRecordedOnly(t, tt.spans)
			require.Equal(t, tt.skewed, len(r.Skews) == 1, "skews %+v", r.Skews)
			ow := ofKind(r.Findings, schema.KindOrphanedWork)
			if tt.orphaned == 0 {
				require.Empty(t, ow)
				return
			}
			// The server started after the client gave up: orphaned in full,
			// and expired on arrival besides.
			require.Len(t, ow, 1)
			require.InDelta(t, tt.orphaned, ow[0].Evidence["orphaned_ms"], 1e-6)
			ea := ofKind(r.Findings, schema.KindExpiredOnArrival)
			require.Len(t, ea, 1)
			require.InDelta(t, -300, ea[0].Evidence["remaining_ms"], 1e-6)
		})
	}
}

// TestAsynchronousBoundary: a deadline crosses PRODUCER → CONSUMER only in
// a budget the message carries.
func TestAsynchronousBoundary(t *testing.T) {
	// The request has 300 ms and ends at 50; the job runs from 500 to 800
	// and calls a database with a 1 s timeout.
	job := func(consumerAttrs ...schema.Attr) []schema.Span {
		return build(1,
			sp{id: 1, svc: "web", name: "POST /orders", kind: client, start: 0, end: 50, attrs: attrs(rem(300), tmo(300))},
			sp{id: 2, parent: 1, svc: "orders", name: "POST /orders", kind: server, start: 2, end: 48},
			sp{id: 3, parent: 2, svc: "orders", name: "orders publish", kind: producer, start: 10, end: 12,
				attrs: attrs(schema.Str("messaging.system", "kafka"))},
			sp{id: 4, parent: 3, svc: "billing", name: "orders process", kind: consumer, start: 500, end: 800, attrs: consumerAttrs},
			sp{id: 5, parent: 4, svc: "billing", name: "SELECT", kind: client, start: 510, end: 790, attrs: attrs(tmo(1000), peerSvc("db"))},
		)
	}
	t.Run("no budget in the message: a new chain", func(t *testing.T) {
		r := analyzeSpans(t, job())
		require.Empty(t, r.Findings)
		require.Nil(t, hopOf(t, r, 4).RemainingMs)
		require.Nil(t, hopOf(t, r, 5).RemainingMs)
		require.Zero(t, hopOf(t, r, 4).OrphanedMs)
	})
	t.Run("the message carries a budget that expired before processing", func(t *testing.T) {
		r := analyzeSpans(t, job(rem(-190)))
		requireFindings(t, r.Findings, schema.KindExpiredOnArrival, []want{{span: 4, severity: schema.SeverityWarning,
			evidence: map[string]float64{"remaining_ms": -190, "duration_ms": 300}}})
		requireFindings(t, r.Findings, schema.KindOrphanedWork, []want{{span: 4, severity: schema.SeverityWarning,
			evidence: map[string]float64{"orphaned_ms": 300}}})
		requireFindings(t, r.Findings, schema.KindTimeoutInversion, []want{{span: 5, severity: schema.SeverityCritical,
			evidence: map[string]float64{"remaining_ms": -200, "timeout_ms": 1000}}})
	})
	t.Run("the message carries a budget of its own in a header", func(t *testing.T) {
		r := analyzeSpans(t, job(headerTimeoutMs("2000")))
		require.Empty(t, r.Findings, "2 s from the consumer's start is enough for a 1 s query, and a job's budget is no reset")
	})
	t.Run("a link is no parent", func(t *testing.T) {
		spans := job()
		// The consumer in a trace of its own, linked to the request.
		spans[3].ParentSpanID = schema.SpanID{}
		spans[3].Links = []schema.Link{{TraceID: spans[0].TraceID, SpanID: spans[2].SpanID}}
		r := analyzeSpans(t, spans)
		require.Empty(t, r.Findings)
	})
}

// TestFanOutAndHedgesAreNotRetries: concurrent siblings with the same
// callee are separate calls.
func TestFanOutAndHedgesAreNotRetries(t *testing.T) {
	shard := func(id int, start, end float64, status schema.StatusCode) sp {
		return sp{id: id, parent: 1, svc: "search", name: "GET /shard", kind: client, start: start, end: end, status: status,
			attrs: attrs(peerSvc("index"), tmo(200))}
	}
	retryKinds := func(fs []schema.Finding) []schema.Finding {
		var out []schema.Finding
		for _, k := range []schema.Kind{schema.KindRetryAmplification, schema.KindRetryWithoutBudget, schema.KindUnfundedRetryPolicy} {
			out = append(out, ofKind(fs, k)...)
		}
		return out
	}
	root := sp{id: 1, svc: "search", name: "GET /search", kind: server, start: 0, end: 240, attrs: attrs(rem(250))}
	t.Run("fan-out to four shards, one fails", func(t *testing.T) {
		r := analyzeSpans(t, build(1, root,
			shard(2, 10, 60, schema.StatusUnset), shard(3, 10, 80, schema.StatusError),
			shard(4, 11, 90, schema.StatusUnset), shard(5, 11, 120, schema.StatusUnset)))
		require.Empty(t, retryKinds(r.Findings))
		for _, id := range []int{2, 3, 4, 5} {
			require.Equal(t, uint32(1), hopOf(t, r, id).Attempt)
		}
	})
	t.Run("fan-out to four shards, one retried once", func(t *testing.T) {
		r := analyzeSpans(t, build(1, root,
			shard(2, 10, 60, schema.StatusUnset), shard(3, 10, 30, schema.StatusError),
			shard(4, 11, 90, schema.StatusUnset), shard(5, 11, 120, schema.StatusUnset),
			shard(6, 35, 70, schema.StatusUnset)))
		require.Equal(t, uint32(2), hopOf(t, r, 6).Attempt)
		require.Empty(t, ofKind(r.Findings, schema.KindRetryAmplification), "5 calls where 4 were planned")
	})
	t.Run("one call retried three times is amplification", func(t *testing.T) {
		r := analyzeSpans(t, build(1, root,
			shard(2, 10, 30, schema.StatusError), shard(3, 35, 55, schema.StatusError), shard(4, 60, 80, schema.StatusUnset)))
		require.Len(t, ofKind(r.Findings, schema.KindRetryAmplification), 1)
	})
	t.Run("a hedge: a second concurrent call, the loser cancelled", func(t *testing.T) {
		r := analyzeSpans(t, build(1, root,
			sp{id: 2, parent: 1, svc: "search", name: "GET /shard", kind: client, start: 10, end: 95, status: schema.StatusError,
				attrs: attrs(peerSvc("index"), schema.Str(schema.AttrErrorType, "context canceled"))},
			sp{id: 3, parent: 1, svc: "search", name: "GET /shard", kind: client, start: 60, end: 95, attrs: attrs(peerSvc("index"))},
			sp{id: 4, parent: 2, svc: "index", name: "GET /shard", kind: server, start: 11, end: 97},
			sp{id: 5, parent: 3, svc: "index", name: "GET /shard", kind: server, start: 61, end: 94},
		))
		require.Empty(t, retryKinds(r.Findings))
		require.Equal(t, uint32(1), hopOf(t, r, 3).Attempt)
		require.Empty(t, ofKind(r.Findings, schema.KindOrphanedWork), "the loser stopped 2 ms after it was cancelled")
	})
}

// nativeDeadlineChain is a gRPC chain without any budget attribute: the
// edge client gives gateway a 400 ms deadline, every hop passes its
// context on, and the database, slow this time, stops when the deadline
// passes. Inner hops end with DEADLINE_EXCEEDED or CANCELLED, as grpc-go
// races the hop's own deadline timer against the caller's reset.
func nativeDeadlineChain(n int, slow bool) []schema.Span {
	off := float64(n%5) * 0.3 // scheduling jitter
	if !slow {
		return build(n,
			sp{id: 1, svc: "edge", name: "shop.Gateway/Buy", kind: client, start: 0, end: 40 + off, attrs: attrs(grpcCode(0))},
			sp{id: 2, parent: 1, svc: "gateway", name: "shop.Gateway/Buy", kind: server, start: 0.5, end: 39.5 + off, attrs: attrs(grpcCode(0))},
			sp{id: 3, parent: 2, svc: "gateway", name: "shop.Order/Place", kind: client, start: 1, end: 39 + off, attrs: attrs(grpcCode(0))},
			sp{id: 4, parent: 3, svc: "order", name: "shop.Order/Place", kind: server, start: 1.5, end: 38.5 + off, attrs: attrs(grpcCode(0))},
			sp{id: 5, parent: 4, svc: "order", name: "shop.DB/Query", kind: client, start: 2, end: 38 + off, attrs: attrs(grpcCode(0))},
			sp{id: 6, parent: 5, svc: "db", name: "shop.DB/Query", kind: server, start: 2.5, end: 37.5 + off, attrs: attrs(grpcCode(0))},
		)
	}
	inner := int64(4)
	if n%2 == 0 {
		inner = 1
	}
	return build(n,
		sp{id: 1, svc: "edge", name: "shop.Gateway/Buy", kind: client, start: 0, end: 400.6 + off, status: schema.StatusError, attrs: attrs(grpcCode(4))},
		sp{id: 2, parent: 1, svc: "gateway", name: "shop.Gateway/Buy", kind: server, start: 0.5, end: 401 + off, status: schema.StatusError, attrs: attrs(grpcCode(inner))},
		sp{id: 3, parent: 2, svc: "gateway", name: "shop.Order/Place", kind: client, start: 1, end: 400.9 + off, status: schema.StatusError, attrs: attrs(grpcCode(4))},
		sp{id: 4, parent: 3, svc: "order", name: "shop.Order/Place", kind: server, start: 1.5, end: 401.2 + off, status: schema.StatusError, attrs: attrs(grpcCode(inner))},
		sp{id: 5, parent: 4, svc: "order", name: "shop.DB/Query", kind: client, start: 2, end: 401.1 + off, status: schema.StatusError, attrs: attrs(grpcCode(4))},
		sp{id: 6, parent: 5, svc: "db", name: "shop.DB/Query", kind: server, start: 2.5, end: 401.4 + off, status: schema.StatusError, attrs: attrs(grpcCode(inner))},
	)
}

// TestNativeDeadlinePropagationIsClean: a chain that passes one deadline
// on raises nothing, although every edge's timed-out calls pile up at the
// same 400 ms.
func TestNativeDeadlinePropagationIsClean(t *testing.T) {
	var batch [][]schema.Span
	for n := 1; n <= 40; n++ {
		batch = append(batch, nativeDeadlineChain(n, n%3 != 0))
	}
	a := New(testConfig())
	for _, r := range a.Traces(traces(batch...), testNow) {
		require.Empty(t, r.Findings)
	}
	require.Empty(t, a.EdgeFindings(testNow))
	var spans []schema.Span
	for _, b := range batch {
		spans = append(spans, b...)
	}
	require.Empty(t, Analyze(spans, testNow, testConfig()).Findings)
}

// TestResetBelowNativeDeadline: order calls the database with
// context.WithTimeout(context.WithoutCancel(ctx), 1 s): the trace goes on,
// the deadline does not. The database keeps working after everyone above
// gave up, and order's 1 s timeout is beyond what the request had left.
func TestResetBelowNativeDeadline(t *testing.T) {
	var spans []schema.Span
	for n := 1; n <= 20; n++ {
		off := float64(n%5) * 0.3
		spans = append(spans, build(n,
			sp{id: 1, svc: "edge", name: "shop.Gateway/Buy", kind: client, start: 0, end: 400.6 + off, status: schema.StatusError, attrs: attrs(grpcCode(4))},
			sp{id: 2, parent: 1, svc: "gateway", name: "shop.Gateway/Buy", kind: server, start: 0.5, end: 401 + off, status: schema.StatusError, attrs: attrs(grpcCode(4))},
			sp{id: 3, parent: 2, svc: "gateway", name: "shop.Order/Place", kind: client, start: 1, end: 400.9 + off, status: schema.StatusError, attrs: attrs(grpcCode(4))},
			sp{id: 4, parent: 3, svc: "order", name: "shop.Order/Place", kind: server, start: 1.5, end: 1003 + off, status: schema.StatusError, attrs: attrs(grpcCode(4))},
			sp{id: 5, parent: 4, svc: "order", name: "shop.DB/Query", kind: client, start: 2, end: 1002 + off, status: schema.StatusError, attrs: attrs(grpcCode(4))},
			sp{id: 6, parent: 5, svc: "db", name: "shop.DB/Query", kind: server, start: 2.5, end: 1002.5 + off, status: schema.StatusError, attrs: attrs(grpcCode(4))},
		)...)
	}
	rep := Analyze(spans, testNow, testConfig())
	byKind := map[schema.Kind]map[string]int{}
	for _, f := range rep.Findings {
		if byKind[f.Kind] == nil {
			byKind[f.Kind] = map[string]int{}
		}
		byKind[f.Kind][f.Service]++
	}
	require.Equal(t, map[string]int{"order": 20, "db": 20}, byKind[schema.KindOrphanedWork])
	require.Equal(t, map[string]int{"order": 20}, byKind[schema.KindTimeoutInversion])
	for _, f := range ofKind(rep.Findings, schema.KindTimeoutInversion) {
		require.Equal(t, 1.0, f.Evidence["inferred"])
		require.InDelta(t, 1000, f.Evidence["timeout_ms"], 5)
		require.InDelta(t, 399, f.Evidence["remaining_ms"], 2)
	}
}

// TestCalleeStoppingAtThePropagatedDeadline: a callee that stops at the
// deadline its caller passed down is no latency_inversion, though its p99
// is the caller's timeout; one that runs on past it is.
func TestCalleeStoppingAtThePropagatedDeadline(t *testing.T) {
	edge := func(n int, calleeEnd float64) []schema.Span {
		return build(n,
			sp{id: 1, svc: "client", name: "checkout", kind: client, start: 0, end: min(calleeEnd, 500) + 0.5, attrs: attrs(rem(500), tmo(500))},
			sp{id: 2, parent: 1, svc: "gateway", name: "POST /checkout", kind: server, start: 0.2, end: calleeEnd,
				attrs: attrs(rem(499.8), source(schema.SourcePropagated))},
		)
	}
	run := func(slowEnd float64) []schema.Finding {
		cfg := testConfig()
		cfg.MinEdgeSamples = 5
		a := New(cfg)
		var batch [][]schema.Span
		for n := 1; n <= 20; n++ {
			end := 100.0
			if n%2 == 0 {
				end = slowEnd
			}
			batch = append(batch, edge(n, end))
		}
		a.Traces(traces(batch...), testNow)
		return a.EdgeFindings(testNow)
	}
	require.Empty(t, run(500.1), "the gateway stopped at the deadline it was given")
	require.Len(t, run(900), 1, "the gateway ran 400 ms past it")
}

// TestPartialTrace: a hop sampled out is judged on what is there.
func TestPartialTrace(t *testing.T) {
	// The order service's spans are missing: the pricing server's parent
	// (order's client span) is not in the trace.
	spans := build(1,
		sp{id: 1, svc: "gateway", name: "GET /checkout", kind: server, start: 0, end: 300, attrs: attrs(rem(500))},
		sp{id: 2, parent: 1, svc: "gateway", name: "POST /order", kind: client, start: 5, end: 290, attrs: attrs(tmo(450))},
		sp{id: 4, parent: missing, svc: "pricing", name: "POST /price", kind: server, start: 20, end: 200,
			attrs: attrs(rem(5000), source(schema.SourcePropagated))},
		sp{id: 5, parent: 4, svc: "pricing", name: "SELECT", kind: client, start: 30, end: 190, attrs: attrs(tmo(1000), peerSvc("db"))},
	)
	r := analyzeSpans(t, spans)
	require.Empty(t, ofKind(r.Findings, schema.KindBudgetReset), "nothing is invented about the missing caller")
	require.Empty(t, ofKind(r.Findings, schema.KindOrphanedWork))
	require.Empty(t, ofKind(r.Findings, schema.KindExpiredOnArrival))
	// What pricing recorded of its own still counts.
	require.Empty(t, ofKind(r.Findings, schema.KindTimeoutInversion), "1 s timeout within the 5 s pricing was given")
	require.Equal(t, pathMissing+"pricing:POST /price", hopOf(t, r, 4).Path)
}

// TestRootThatPassesOnAnAnswerHasNoDeadlineOfItsOwn: a client whose
// request fails because the gateway's two 700 ms attempts ran out answers
// its user with the gateway's 504, 1,430 ms in. That is the gateway's
// timing, not a deadline of the client's: estimating one from it would
// judge the gateway's second attempt (started with 700 ms of "deadline"
// left) against the sum of its own timeouts.
func TestRootThatPassesOnAnAnswerHasNoDeadlineOfItsOwn(t *testing.T) {
	var spans []schema.Span
	for n := 1; n <= 20; n++ {
		off := float64(n%4) * 0.4
		spans = append(spans, build(n,
			sp{id: 1, svc: "client", name: "checkout", kind: internal, start: 0, end: 1431.7 + off, status: schema.StatusError, attrs: attrs(httpCode(504))},
			sp{id: 2, parent: 1, svc: "client", name: "POST /checkout", kind: client, start: 0.1, end: 1431.6 + off, status: schema.StatusError, attrs: attrs(httpCode(504))},
			sp{id: 3, parent: 2, svc: "gateway", name: "POST /checkout", kind: server, start: 1.9, end: 1431.5 + off, status: schema.StatusError, attrs: attrs(httpCode(504))},
			sp{id: 4, parent: 3, svc: "gateway", name: "POST /order", kind: client, start: 4, end: 705, status: schema.StatusError, attrs: attrs(timedOut(), peerSvc("order"))},
			sp{id: 5, parent: 3, svc: "gateway", name: "POST /order", kind: client, start: 730 + off, end: 1431 + off, status: schema.StatusError, attrs: attrs(timedOut(), peerSvc("order"))},
		)...)
	}
	rep := Analyze(spans, testNow, testConfig())
	require.Empty(t, ofKind(rep.Findings, schema.KindTimeoutInversion))
	require.Len(t, ofKind(rep.Findings, schema.KindRetryAmplification), 0)
}

// TestEdgeClientTimeoutIsItsOwnDeadline: a user-facing client (an INTERNAL
// root span) gives up at 1.5 s, and so does its one call. Without
// attributes both waits cluster at 1.5 s; they are one deadline, not a call
// that waits as long as its caller has left.
func TestEdgeClientTimeoutIsItsOwnDeadline(t *testing.T) {
	var spans []schema.Span
	for n := 1; n <= 20; n++ {
		off := float64(n%4) * 0.3
		spans = append(spans, build(n,
			sp{id: 1, svc: "mobile", name: "checkout", kind: internal, start: 0, end: 1500.5 + off, status: schema.StatusError, attrs: attrs(timedOut())},
			sp{id: 2, parent: 1, svc: "mobile", name: "POST /checkout", kind: client, start: 0.1, end: 1500.4 + off, status: schema.StatusError, attrs: attrs(timedOut(), peerSvc("gateway"))},
			sp{id: 3, parent: 2, svc: "gateway", name: "POST /checkout", kind: server, start: 1, end: 2500},
		)...)
	}
	rep := Analyze(spans, testNow, testConfig())
	require.Empty(t, ofKind(rep.Findings, schema.KindTimeoutInversion))
	require.Len(t, ofKind(rep.Findings, schema.KindOrphanedWork), 20, "the gateway's work after the user left is still seen")
}

// A root whose one call times out with it has no timeout of its own on that
// call (TestEdgeClientTimeoutIsItsOwnDeadline), yet its caller is as patient
// as that deadline: a callee that works on past it is a latency_inversion,
// inferred from the deadline wait; one that stops at the same deadline is
// not; and a recorded timeout wins over the wait.
func TestDeadlineWaitJudgesLatency(t *testing.T) {
	chain := func(calleeEnd float64, callAttrs ...schema.Attr) []schema.Span {
		var spans []schema.Span
		for n := 1; n <= 20; n++ {
			off := float64(n%4) * 0.3
			spans = append(spans, build(n,
				sp{id: 1, svc: "mobile", name: "checkout", kind: internal, start: 0, end: 1500.5 + off, status: schema.StatusError, attrs: attrs(timedOut())},
				sp{id: 2, parent: 1, svc: "mobile", name: "POST /checkout", kind: client, start: 0.1, end: 1500.4 + off, status: schema.StatusError,
					attrs: append(attrs(timedOut(), peerSvc("gateway")), callAttrs...)},
				sp{id: 3, parent: 2, svc: "gateway", name: "POST /checkout", kind: server, start: 1, end: calleeEnd + off},
			)...)
		}
		return spans
	}
	t.Run("callee works on", func(t *testing.T) {
		li := ofKind(Analyze(chain(2500), testNow, testConfig()).Findings, schema.KindLatencyInversion)
		require.Len(t, li, 1)
		require.Equal(t, "gateway", li[0].CalleeService)
		require.Equal(t, 1.0, li[0].Evidence["inferred"])
		require.InDelta(t, 1500.5, li[0].Evidence["timeout_ms"], 1.5, "the deadline wait")
	})
	t.Run("callee stops at the deadline", func(t *testing.T) {
		require.Empty(t, ofKind(Analyze(chain(1500.4), testNow, testConfig()).Findings, schema.KindLatencyInversion))
	})
	t.Run("a recorded timeout wins", func(t *testing.T) {
		require.Empty(t, ofKind(Analyze(chain(2500, tmo(3000)), testNow, testConfig()).Findings, schema.KindLatencyInversion))
	})
	t.Run("inference off", func(t *testing.T) {
		cfg := testConfig()
		cfg.Infer.Enabled = false
		require.Empty(t, ofKind(Analyze(chain(2500), testNow, cfg).Findings, schema.KindLatencyInversion))
	})
}

// The time a request spends on the way to a hop is allowed to the hop's
// budget only when the call passed a relative budget on (which the hop's
// clock restarts on arrival). A plain HTTP call that passed nothing on
// restarts no clock: a timeout 15 ms past what the root's deadline leaves is
// an inversion however long the request took to arrive.
func TestTransitAllowedOnlyToRelativeBudgets(t *testing.T) {
	chain := func(callAttrs ...schema.Attr) []schema.Span {
		return build(1,
			sp{id: 1, svc: "mobile", name: "checkout", kind: internal, start: 0, end: 600, attrs: attrs(rem(1500), source(schema.SourceEdge))},
			sp{id: 2, parent: 1, svc: "mobile", name: "POST /checkout", kind: client, start: 0, end: 590, attrs: append(attrs(tmo(1400), peerSvc("gateway")), callAttrs...)},
			sp{id: 3, parent: 2, svc: "gateway", name: "POST /checkout", kind: server, start: 30, end: 580},
			sp{id: 4, parent: 3, svc: "gateway", name: "POST /order", kind: client, start: 35, end: 570, attrs: attrs(tmo(1480), peerSvc("order"))},
			sp{id: 5, parent: 4, svc: "order", name: "POST /order", kind: server, start: 36, end: 560},
		)
	}
	inversions := func(spans []schema.Span) []schema.Finding {
		return ofKind(analyzeRecordedOnly(t, spans).Findings, schema.KindTimeoutInversion)
	}
	t.Run("nothing passed on", func(t *testing.T) {
		ti := inversions(chain())
		require.Len(t, ti, 1)
		require.Equal(t, "order", ti[0].CalleeService)
		require.InDelta(t, 1465, ti[0].Evidence["remaining_ms"], 0.01)
	})
	t.Run("a relative budget passed on", func(t *testing.T) {
		require.Empty(t, inversions(chain(schema.Double(schema.AttrPropagatedMs, 1500))), "the gateway's clock restarted 30 ms later")
	})
	t.Run("gRPC passes its deadline on", func(t *testing.T) {
		require.Empty(t, inversions(chain(schema.Str(schema.AttrRPCSystem, "grpc"))))
	})
}
