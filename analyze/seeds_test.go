package analyze

import (
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/schema"
)

// kindCounts counts findings per kind.
func kindCounts(fs []schema.Finding) map[schema.Kind]int {
	out := map[schema.Kind]int{}
	for _, f := range fs {
		out[f.Kind]++
	}
	return out
}

// orphaned sums orphaned work per service.
func orphaned(fs []schema.Finding) (map[string]float64, float64) {
	per := map[string]float64{}
	total := 0.0
	for _, f := range ofKind(fs, schema.KindOrphanedWork) {
		per[f.Service] += f.Evidence["orphaned_ms"]
		total += f.Evidence["orphaned_ms"]
	}
	return per, total
}

// Seed 000: independent timeouts at every hop of a checkout.
func TestSeedCheckoutIndependentTimeouts(t *testing.T) {
	r := analyzeRecordedOnly(t, checkoutIndependentTimeouts(1))

	// Each path's first hop carries how many times the request went down
	// it, as Summarize counts it: the store aggregates calls per trace
	// from these.
	perPath := map[string]uint32{}
	for _, h := range r.Hops {
		if h.PathCalls > 0 {
			_, dup := perPath[h.Path]
			require.False(t, dup, "one hop per path carries the count: %s", h.Path)
			perPath[h.Path] = h.PathCalls
		}
	}
	for _, p := range Summarize(r.Hops, nil) {
		require.EqualValues(t, p.MaxCallsPerTrace, perPath[p.Path], p.Path)
	}
	require.EqualValues(t, 12, perPath["mobile:checkout > gateway:POST /checkout > order:POST /order > pricing:POST /price > db:SELECT prices"])

	// 2 × 2 × 3 = 12 database queries for one checkout, multiplied at all
	// three levels that retry.
	amp := ofKind(r.Findings, schema.KindRetryAmplification)
	require.Len(t, amp, 1)
	require.Equal(t, map[string]float64{"calls": 12, "levels": 3}, amp[0].Evidence)
	require.Equal(t, schema.SeverityCritical, amp[0].Severity)
	require.Equal(t, "mobile:checkout > gateway:POST /checkout > order:POST /order > pricing:POST /price > db:SELECT prices", amp[0].Path)

	// Everything after the mobile client gave up at 30 s is orphaned, across
	// exactly three services (the database records no server span). Each
	// figure is S.end − max(S.start, G(S)).
	per, total := orphaned(r.Findings)
	services := make([]string, 0, len(per))
	for s := range per {
		services = append(services, s)
	}
	sort.Strings(services)
	require.Equal(t, []string{"gateway", "order", "pricing"}, services)
	require.Equal(t, map[string]float64{
		"gateway": 30030,                         // runs 10..60030; G = 30000, the mobile client's end
		"order":   10050 + 40020,                 // 30..40050 from 30000; the retry 30030..70050 from its arrival
		"pricing": 22030 + 32070 + 42020 + 42020, // the first from 20040, its own caller's timeout; the others from 30000 or arrival
	}, per)
	require.Equal(t, 218240.0, total)

	// The second order and the last two pricing calls started after the
	// user had gone.
	require.Equal(t, 3, kindCounts(r.Findings)[schema.KindExpiredOnArrival])
	require.Len(t, r.Findings, 1+7+3, "only amplification, orphaned work and expired arrivals: no hop recorded a budget")
	for _, f := range ofKind(r.Findings, schema.KindOrphanedWork) {
		require.Equal(t, schema.SeverityCritical, f.Severity)
	}

	// With inference, each caller's recorded timeout is a deadline for
	// everything below it, so the hops' timeouts are judged against what
	// their callers left them: the gateway's 30 s under the mobile
	// client's 30 s, every retry after a caller above gave up, and order's
	// second attempt on pricing, started with 9960 ms left after the first
	// ran its whole 20 s without an answer (the trace's own evidence).
	inf := analyzeSpans(t, checkoutIndependentTimeouts(1))
	recorded, inferred := splitInferred(inf.Findings)
	require.Equal(t, r.Findings, recorded, "inference adds findings and changes none")
	require.Equal(t, map[schema.Kind]int{schema.KindTimeoutInversion: 16, schema.KindRetryWithoutBudget: 10}, kindCounts(inferred))
	for _, f := range inferred {
		require.Equal(t, 1.0, f.Evidence["confidence"], "every timeout was recorded; only the deadline was worked out")
		if f.Kind == schema.KindTimeoutInversion {
			require.GreaterOrEqual(t, f.Evidence["timeout_ms"], f.Evidence["remaining_ms"])
		}
	}
	first := ofKind(inferred, schema.KindTimeoutInversion)[0]
	require.Equal(t, "gateway", first.CallerService)
	require.Equal(t, "order", first.CalleeService)
	require.Equal(t, map[string]float64{"remaining_ms": 29980, "timeout_ms": 30000, "inferred": 1, "confidence": 1}, first.Evidence)
}

// Seed 000 fixed: one deadline at the edge, propagated and respected.
func TestSeedCheckoutWithDeadline(t *testing.T) {
	r := analyzeSpans(t, checkoutWithDeadline(1))
	require.Empty(t, r.Findings)
	queries := 0
	for _, h := range r.Hops {
		if h.CalleeService == "db" {
			queries++
		}
	}
	require.Equal(t, 1, queries, "one query per checkout instead of 12")
	for _, h := range r.Hops {
		require.NotNil(t, h.RemainingMs, "every hop knows its remaining budget")
		require.Zero(t, h.OrphanedMs)
	}
}

// Seed 002: a four-hop chain funded correctly, 2000 → 1900 → 1800 → 1700.
func TestSeedFourHopChainFunded(t *testing.T) {
	r := analyzeSpans(t, fourHopChain(1))
	require.Empty(t, r.Findings)
	want := map[string]float64{"web": 2000, "gateway": 1900, "order": 1800, "inventory": 1700}
	for _, h := range r.Hops {
		if h.Kind == schema.KindServer {
			require.Equal(t, want[h.Service], *h.RemainingMs, h.Service)
		}
	}
	db := hopOf(t, r, 8)
	require.Equal(t, 1670.0, *db.RemainingMs, "2 × 780 + 100 = 1660 fits in the 1670 ms left")
}

// Seed 002 with a retry added to order → inventory without re-budgeting.
func TestSeedFourHopChainUnfundedRetry(t *testing.T) {
	r := analyzeSpans(t, fourHopChainUnfundedRetry(1))
	require.Equal(t, map[schema.Kind]int{
		schema.KindUnfundedRetryPolicy: 2, // order's new policy, and inventory's under the late retry
		schema.KindTimeoutInversion:    2, // the late retry and its database call
		schema.KindRetryWithoutBudget:  1,
		schema.KindBudgetReset:         1, // the retry sends the usual 1700 ms downstream
		schema.KindExpiredOnArrival:    1,
		schema.KindOrphanedWork:        4,
		schema.KindRetryAmplification:  1,
	}, kindCounts(r.Findings))

	unfunded := ofKind(r.Findings, schema.KindUnfundedRetryPolicy)[0]
	require.Equal(t, "order", unfunded.Service)
	require.Equal(t, "inventory", unfunded.CalleeService)
	require.Equal(t, map[string]float64{
		"remaining_ms": 1740, "required_ms": 3500, "max_attempts": 2, "timeout_ms": 1700, "backoff_ms": 100,
	}, unfunded.Evidence, "2 × 1700 + 100 = 3500 ms needed with 1740 left")
	require.Equal(t, schema.SeverityCritical, unfunded.Severity)

	retry := ofKind(r.Findings, schema.KindRetryWithoutBudget)[0]
	require.Equal(t, map[string]float64{"remaining_ms": -60, "attempt": 2}, retry.Evidence,
		"the retry starts at 2060, 60 ms after the 2000 ms deadline")

	reset := ofKind(r.Findings, schema.KindBudgetReset)[0]
	require.Equal(t, map[string]float64{"remaining_ms": -60, "received_ms": 1700}, reset.Evidence)

	amp := ofKind(r.Findings, schema.KindRetryAmplification)[0]
	require.Equal(t, map[string]float64{"calls": 3, "levels": 2}, amp.Evidence)

	_, total := orphaned(r.Findings)
	require.Equal(t, 20.0+480+60+260, total)
}

// Seed 004: a gateway's 10 s timeout in front of a service waiting 30 s.
func TestSeedGatewayRetriesSlowService(t *testing.T) {
	r := analyzeRecordedOnly(t, gatewayRetriesSlowService(1, false, 13000))

	partner := 0
	for _, h := range r.Hops {
		if h.CalleeService == "partner-api" {
			partner++
		}
	}
	require.Equal(t, 2, partner, "the gateway's retry doubles the load on the slow partner")
	require.Equal(t, map[schema.Kind]int{schema.KindOrphanedWork: 2}, kindCounts(r.Findings),
		"without budgets only the orphaned work shows; two calls stay under the amplification threshold")
	per, _ := orphaned(r.Findings)
	require.Equal(t, map[string]float64{"quote": 2 * 3045}, per, "each quote finishes 13045 ms after it started, 3045 ms after the gateway left")
	require.EqualValues(t, 2, hopOf(t, r, 5).Attempt, "the gateway's second call is a retry of the timed-out first")

	// Inference takes the gateway's recorded 10 s timeout as the quote
	// service's deadline, and its 30 s timeout is an inversion.
	r = analyzeSpans(t, gatewayRetriesSlowService(1, false, 13000))
	inv := ofKind(r.Findings, schema.KindTimeoutInversion)
	require.Len(t, inv, 2)
	require.Equal(t, map[string]float64{"remaining_ms": 9980, "timeout_ms": 30000, "inferred": 1, "confidence": 1}, inv[0].Evidence)

	// With Envoy in front, the quote service learns the 10 s budget from
	// x-envoy-expected-rq-timeout-ms, and its 30 s timeout is an inversion.
	r = analyzeSpans(t, gatewayRetriesSlowService(1, true, 13000))
	inv = ofKind(r.Findings, schema.KindTimeoutInversion)
	require.Len(t, inv, 2)
	require.Equal(t, map[string]float64{"remaining_ms": 9985, "timeout_ms": 30000}, inv[0].Evidence)
	require.Equal(t, schema.SeverityCritical, inv[0].Severity)
	require.True(t, hopOf(t, r, 3).Inferred)

	// Over many such requests the edge itself is inverted: the quote
	// service's p99 is above the gateway's timeout.
	a := New(testConfig())
	for n := 1; n <= 20; n++ {
		a.Trace(schema.NewTrace(gatewayRetriesSlowService(n, false, 12000+float64(n)*100)), testNow)
	}
	fs := a.EdgeFindings(testNow)
	require.Len(t, fs, 1)
	require.Equal(t, "gateway", fs[0].CallerService)
	require.Equal(t, "quote", fs[0].CalleeService)
	require.Equal(t, 10000.0, fs[0].Evidence["timeout_ms"])
	require.Equal(t, 40.0, fs[0].Evidence["samples"], "two attempts per request")
	require.InEpsilon(t, 14040, fs[0].Evidence["p99_ms"], sketchAlpha)
	require.Equal(t, schema.SeverityCritical, fs[0].Severity)
}
