package analyze

import (
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/schema"
)

func TestWaitHistClusterFindsTheTimeout(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	var h waitHist
	// 40 calls that timed out at 1000 ms, ended up to 3 ms late by
	// scheduling; six cancelled early by someone above, anywhere below; one
	// stuck far above.
	for range 40 {
		h.add(1000 + rng.Float64()*3)
	}
	for range 6 {
		h.add(100 + rng.Float64()*800)
	}
	h.add(4000)
	est, k, ok := h.cluster(5)
	require.True(t, ok)
	require.InDelta(t, 1001.5, est, 3, "the median of the cluster, within a bucket")
	require.EqualValues(t, 40, k)

	var empty waitHist
	_, _, ok = empty.cluster(5)
	require.False(t, ok)
}

func TestWaitHistClusterPrefersTheLargerOnATie(t *testing.T) {
	var h waitHist
	for range 5 {
		h.add(300)
		h.add(900)
	}
	est, k, ok := h.cluster(5)
	require.True(t, ok)
	require.InEpsilon(t, 900, est, 0.002)
	require.EqualValues(t, 5, k)
}

func TestEstimateConfidence(t *testing.T) {
	agg := func(timedOut []float64, answered ...float64) waitAgg {
		var a waitAgg
		for _, v := range timedOut {
			a.gaveUp.add(v)
		}
		for _, v := range answered {
			a.answered.add(v)
		}
		return a
	}
	same := func(n int, v float64) []float64 {
		out := make([]float64, n)
		for i := range out {
			out[i] = v
		}
		return out
	}
	tight := agg(same(20, 500))
	e, ok := tight.estimate(5)
	require.True(t, ok)
	require.InEpsilon(t, 500, e.Ms, 0.002)
	require.EqualValues(t, 20, e.Samples)
	require.InDelta(t, 20.0/22, e.Confidence, 1e-9, "all agree: support alone, 20/(20+2)")

	few := agg(same(3, 500))
	e, _ = few.estimate(5)
	require.InDelta(t, 3.0/5, e.Confidence, 1e-9)
	require.False(t, e.usable(DefaultInferConfig()), "below the five samples the default needs")

	// Answered calls that waited longer than the estimate contradict it;
	// answered calls below it do not.
	contradicted := agg(same(20, 500), 2000, 1800, 1500, 100, 200)
	e, _ = contradicted.estimate(5)
	require.InDelta(t, (20.0/23)*(20.0/22), e.Confidence, 1e-9)

	// Timeouts spread over many values (a budget-derived timeout) make no
	// cluster: low confidence, not usable.
	var spread []float64
	for i := range 20 {
		spread = append(spread, 100+float64(i)*50)
	}
	spreadAgg := agg(spread)
	e, _ = spreadAgg.estimate(5)
	require.Less(t, e.Confidence, DefaultInferConfig().MinConfidence)
}

// zeroInstrumented is a request through gateway → order → db with no budget
// attribute at all: the gateway gives up on order after gatewayWait ms, and
// order waits orderWait ms for the database. Both calls time out (their
// durations are all budgetd has), and order keeps working after the gateway
// left.
func zeroInstrumented(n int, gatewayWait, orderWait float64) []schema.Span {
	jitter := float64(n%3) * 0.4
	return build(n,
		sp{id: 1, svc: "gateway", name: "GET /checkout", kind: server, start: 0, end: gatewayWait + 20},
		sp{id: 2, parent: 1, svc: "gateway", name: "POST /order", kind: client, start: 5, end: 5 + gatewayWait + jitter, attrs: attrs(timedOut(), peerSvc("order"))},
		sp{id: 3, parent: 2, svc: "order", name: "POST /order", kind: server, start: 6, end: 20 + orderWait},
		sp{id: 4, parent: 3, svc: "order", name: "SELECT", kind: client, start: 10, end: 10 + orderWait + jitter, attrs: attrs(timedOut(), peerSvc("db"))},
	)
}

func traces(specs ...[]schema.Span) []*schema.Trace {
	out := make([]*schema.Trace, len(specs))
	for i, s := range specs {
		out[i] = schema.NewTrace(s)
	}
	return out
}

func TestInferredTimeoutInversion(t *testing.T) {
	var batch [][]schema.Span
	for n := 1; n <= 6; n++ {
		batch = append(batch, zeroInstrumented(n, 1000, 3000))
	}
	results := New(testConfig()).Traces(traces(batch...), testNow)
	require.Len(t, results, 6)
	for _, r := range results {
		inv := ofKind(r.Findings, schema.KindTimeoutInversion)
		require.Len(t, inv, 1, "order waits 3 s for db although the gateway gives it 1 s")
		f := inv[0]
		require.Equal(t, "order", f.CallerService)
		require.Equal(t, "db", f.CalleeService)
		require.Equal(t, 1.0, f.Evidence["inferred"])
		require.InDelta(t, 3000.4, f.Evidence["timeout_ms"], 4, "the estimate of order's timeout")
		require.InDelta(t, 995.4, f.Evidence["remaining_ms"], 4, "the gateway's estimated 1000 ms, less the 5 ms before order's call")
		require.InDelta(t, 6.0/8, f.Evidence["confidence"], 0.01, "six agreeing samples: 6/(6+2)")
		require.Equal(t, schema.SeverityCritical, f.Severity)
		require.Regexp(t, `^order waits about 300\d ms for db while only 99\d ms were left before a caller above stopped waiting`, f.Message)
		require.Contains(t, f.Message, "(inferred from its timed-out calls)")

		// The hops carry the inferred figures, to be stored with the edge.
		call := hopOf(t, r, 4)
		require.Nil(t, call.TimeoutMs)
		require.NotNil(t, call.InferredTimeoutMs)
		require.InDelta(t, 3000.4, *call.InferredTimeoutMs, 4)
		require.NotNil(t, call.InferredRemainingMs)
		require.InDelta(t, 0.75, call.InferenceConfidence, 0.01)

		// Orphaned work needs no inference: the gateway's call ended.
		require.NotEmpty(t, ofKind(r.Findings, schema.KindOrphanedWork))
	}
	edges := map[string]EdgeStats{}
	a := New(testConfig())
	a.Traces(traces(batch...), testNow)
	for _, e := range a.Edges(testNow) {
		edges[e.CallerService+">"+e.CalleeService] = e
	}
	require.NotNil(t, edges["order>db"].InferredTimeout)
	require.InDelta(t, 3000.4, edges["order>db"].InferredTimeout.Ms, 4)
	require.EqualValues(t, 6, edges["order>db"].InferredTimeout.Samples)
	require.Nil(t, edges["order>db"].TimeoutMs, "nothing recorded")
}

func TestInferenceNeedsEnoughSamples(t *testing.T) {
	var batch [][]schema.Span
	for n := 1; n <= 4; n++ {
		batch = append(batch, zeroInstrumented(n, 1000, 3000))
	}
	for _, r := range New(testConfig()).Traces(traces(batch...), testNow) {
		require.Empty(t, ofKind(r.Findings, schema.KindTimeoutInversion), "four samples are below analyze.infer.min_samples")
		for _, f := range r.Findings {
			require.NotContains(t, f.Evidence, "inferred")
		}
	}
}

func TestInferenceOff(t *testing.T) {
	cfg := testConfig()
	cfg.Infer.Enabled = false
	var batch [][]schema.Span
	for n := 1; n <= 6; n++ {
		batch = append(batch, zeroInstrumented(n, 1000, 3000))
	}
	a := New(cfg)
	for _, r := range a.Traces(traces(batch...), testNow) {
		require.Empty(t, ofKind(r.Findings, schema.KindTimeoutInversion))
	}
	require.Zero(t, a.Counters().WaitEdges, "no waits are kept")
}

func TestInferenceHealthyChainFindsNothing(t *testing.T) {
	// The same chain with timeouts that shrink, seen only through calls
	// that timed out: gateway 1000 ms, order 600 ms.
	var batch [][]schema.Span
	for n := 1; n <= 8; n++ {
		batch = append(batch, zeroInstrumented(n, 1000, 600))
	}
	for _, r := range New(testConfig()).Traces(traces(batch...), testNow) {
		require.Empty(t, ofKind(r.Findings, schema.KindTimeoutInversion))
	}
}

func TestRecordedTimeoutWinsOverInference(t *testing.T) {
	var batch [][]schema.Span
	for n := 1; n <= 6; n++ {
		batch = append(batch, zeroInstrumented(n, 1000, 3000))
	}
	// One more request whose order records a 400 ms timeout on its call:
	// not an inversion, whatever the other calls of the edge show.
	recorded := zeroInstrumented(7, 1000, 400)
	recorded[3].Attrs = append(recorded[3].Attrs, tmo(400))
	batch = append(batch, recorded)
	results := New(testConfig()).Traces(traces(batch...), testNow)
	last := results[len(results)-1]
	require.Empty(t, ofKind(last.Findings, schema.KindTimeoutInversion))
	call := hopOf(t, last, 4)
	require.Nil(t, call.InferredTimeoutMs)
	require.Equal(t, 400.0, *call.TimeoutMs)
}

func TestAnswerFromTheCalleeIsNotTheCallersTimeout(t *testing.T) {
	// The gateway's calls end with a 504 that order sent at its own 700 ms
	// deadline: order's span ends first, so the 700 ms is order's timeout,
	// not the gateway's, and the gateway gets no estimate.
	var batch [][]schema.Span
	for n := 1; n <= 6; n++ {
		batch = append(batch, build(n,
			sp{id: 1, svc: "gateway", name: "GET /", kind: server, start: 0, end: 720},
			sp{id: 2, parent: 1, svc: "gateway", name: "GET order", kind: client, start: 5, end: 712,
				attrs: attrs(schema.Int(schema.AttrHTTPStatusCode, 504), peerSvc("order"))},
			sp{id: 3, parent: 2, svc: "order", name: "GET /", kind: server, start: 6, end: 708,
				attrs: attrs(schema.Int(schema.AttrHTTPStatusCode, 504))},
		))
	}
	a := New(testConfig())
	a.Traces(traces(batch...), testNow)
	for _, e := range a.Edges(testNow) {
		require.Nil(t, e.InferredTimeout, "%s → %s", e.CallerService, e.CalleeService)
	}
}

func TestInferredEntryDeadlineMakesOrphanedWork(t *testing.T) {
	// An uninstrumented load balancer in front: the gateway's own spans
	// answer 504 at its 2000 ms deadline, while its worker keeps going. The
	// trace has no client above the gateway, so only the estimated entry
	// deadline says when the request ended. (The worker is called without a
	// client span of the gateway's, so its server span hangs from the
	// gateway's.)
	var batch [][]schema.Span
	for n := 1; n <= 6; n++ {
		batch = append(batch, build(n,
			sp{id: 1, svc: "gateway", name: "GET /report", kind: server, start: 0, end: 2000 + float64(n%2),
				attrs: attrs(schema.Int(schema.AttrHTTPStatusCode, 504))},
			sp{id: 3, parent: 1, svc: "worker", name: "build report", kind: server, start: 10, end: 3500},
		))
	}
	for _, r := range New(testConfig()).Traces(traces(batch...), testNow) {
		ow := ofKind(r.Findings, schema.KindOrphanedWork)
		require.Len(t, ow, 1)
		require.Equal(t, "worker", ow[0].Service)
		require.InDelta(t, 1500, ow[0].Evidence["orphaned_ms"], 2)
		require.Equal(t, 1.0, ow[0].Evidence["inferred"])
		require.Contains(t, ow[0].Message, "inferred deadline")
	}
}

func TestOfflineAndStreamingInferenceAgree(t *testing.T) {
	var spans []schema.Span
	var batch [][]schema.Span
	for n := 1; n <= 6; n++ {
		s := zeroInstrumented(n, 1000, 3000)
		batch = append(batch, s)
		spans = append(spans, s...)
	}
	rep := Analyze(spans, testNow, testConfig())
	var streamed []schema.Finding
	for _, r := range New(testConfig()).Traces(traces(batch...), testNow) {
		streamed = append(streamed, r.Findings...)
	}
	sortFindings(streamed)
	require.Equal(t, streamed, rep.Findings)
	require.Len(t, ofKind(rep.Findings, schema.KindTimeoutInversion), 6)
}

// tightChain is a request whose order service calls the database half a
// millisecond after the gateway called it: the gateway gives up after
// gatewayWait ms, order after orderWait ms.
func tightChain(n int, gatewayWait, orderWait float64) []schema.Span {
	return build(n,
		sp{id: 1, svc: "gateway", name: "GET /", kind: server, start: 0, end: gatewayWait + 10},
		sp{id: 2, parent: 1, svc: "gateway", name: "GET order", kind: client, start: 5, end: 5 + gatewayWait, attrs: attrs(timedOut(), peerSvc("order"))},
		sp{id: 3, parent: 2, svc: "order", name: "GET /", kind: server, start: 5.2, end: 5000},
		sp{id: 4, parent: 3, svc: "order", name: "SELECT", kind: client, start: 5.5, end: 5.5 + orderWait, attrs: attrs(timedOut(), peerSvc("db"))},
	)
}

func TestInferredEqualTimeoutsAcrossABucketEdge(t *testing.T) {
	inversions := func(gatewayWait, orderWait float64) []schema.Finding {
		var batch [][]schema.Span
		for n := 1; n <= 6; n++ {
			batch = append(batch, tightChain(n, gatewayWait, orderWait))
		}
		var out []schema.Finding
		for _, r := range New(testConfig()).Traces(traces(batch...), testNow) {
			out = append(out, ofKind(r.Findings, schema.KindTimeoutInversion)...)
		}
		return out
	}
	// The same 1 s timeout at both hops, order's timer firing 0.6 ms
	// sooner: order's calls end at the instant the gateway gave up, so
	// from timing alone their wait is the gateway's deadline passed down
	// (as grpc-go does natively), not a timeout of order's own
	// (endsWithAncestor). Nothing is inferred for order → db, and nothing
	// is reported: a deadline that is passed on is the recommended design.
	require.Empty(t, inversions(1000.5, 999.9))
	// A timeout of order's own that fires apart from the gateway's, 60 ms
	// later, is seen and is an inversion.
	inv := inversions(1000.5, 1060)
	require.Len(t, inv, 6)
	require.InDelta(t, 1060, inv[0].Evidence["timeout_ms"], 2)

	// A budget-derived timeout 0.5 % below the caller's (a 5 ms margin)
	// is not an inversion.
	require.Empty(t, inversions(1000, 995))
}
