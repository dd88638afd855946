package analyze

import (
	"encoding/json"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/schema"
)

func TestAnalyzeSummarisesPaths(t *testing.T) {
	var spans []schema.Span
	spans = append(spans, checkoutIndependentTimeouts(1)...)
	spans = append(spans, checkoutIndependentTimeouts(2)...)
	spans = append(spans, fourHopChain(3)...)
	rand.New(rand.NewSource(5)).Shuffle(len(spans), func(i, j int) { spans[i], spans[j] = spans[j], spans[i] })

	cfg := DefaultConfig()
	cfg.Infer.Enabled = false // the figures below are from recorded budgets and timing
	rep := Analyze(spans, testNow, cfg)
	require.Len(t, rep.Findings, 2*11)
	for i := 1; i < len(rep.Findings); i++ {
		a, b := rep.Findings[i-1], rep.Findings[i]
		require.LessOrEqual(t, a.TraceID+a.SpanID, b.TraceID+b.SpanID, "findings are sorted")
	}

	paths := map[string]PathSummary{}
	for i, p := range rep.Paths {
		paths[p.Path] = p
		if i > 0 {
			require.Less(t, rep.Paths[i-1].Path, p.Path, "paths are sorted")
		}
	}
	db := paths["mobile:checkout > gateway:POST /checkout > order:POST /order > pricing:POST /price > db:SELECT prices"]
	require.Equal(t, PathSummary{
		Path:             "mobile:checkout > gateway:POST /checkout > order:POST /order > pricing:POST /price > db:SELECT prices",
		Requests:         2,
		FindingsByKind:   map[string]int{"retry_amplification": 2},
		MaxCallsPerTrace: 12,
	}, db)
	pricing := paths["mobile:checkout > gateway:POST /checkout > order:POST /order > pricing:POST /price"]
	require.Equal(t, 2*(22030.0+32070+42020+42020), pricing.OrphanedMs)
	require.Equal(t, map[string]int{"orphaned_work": 8, "expired_on_arrival": 4}, pricing.FindingsByKind)
	require.Equal(t, 4, pricing.MaxCallsPerTrace)

	web := paths["web:GET /checkout"]
	require.Equal(t, 1, web.Requests)
	require.Equal(t, 1, web.MaxCallsPerTrace)
	require.Empty(t, web.FindingsByKind)

	// The output does not depend on the input order.
	rand.New(rand.NewSource(6)).Shuffle(len(spans), func(i, j int) { spans[i], spans[j] = spans[j], spans[i] })
	require.Equal(t, rep, Analyze(spans, testNow, cfg))
}

func TestAnalyzeEdgeFindingsCountOnPaths(t *testing.T) {
	var spans []schema.Span
	for n := 1; n <= 20; n++ {
		spans = append(spans, gatewayRetriesSlowService(n, false, 13000)...)
	}
	rep := Analyze(spans, testNow, DefaultConfig())
	li := ofKind(rep.Findings, schema.KindLatencyInversion)
	require.Len(t, li, 1)
	require.Equal(t, rep.Findings[0], li[0], "edge findings sort first")
	for _, p := range rep.Paths {
		if p.Path == "gateway:GET /quote > quote:GET /quote" {
			require.Equal(t, map[string]int{"latency_inversion": 1, "orphaned_work": 40}, p.FindingsByKind)
			require.Equal(t, 20, p.Requests)
			require.Equal(t, 2, p.MaxCallsPerTrace)
			return
		}
	}
	require.Fail(t, "path missing")
}

func TestAnalyzeJSONShape(t *testing.T) {
	b, err := json.Marshal(Analyze(nil, testNow, DefaultConfig()))
	require.NoError(t, err)
	require.JSONEq(t, `{"findings":[],"paths":[]}`, string(b))

	b, err = json.Marshal(Analyze(fourHopChainUnfundedRetry(1), testNow, DefaultConfig()))
	require.NoError(t, err)
	var doc struct {
		Findings []map[string]any `json:"findings"`
		Paths    []map[string]any `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(b, &doc))
	require.NotEmpty(t, doc.Findings)
	for _, f := range doc.Findings {
		require.ElementsMatch(t, []string{"id", "kind", "severity", "trace_id", "span_id", "service", "operation",
			"caller_service", "callee_service", "path", "detected_at", "evidence", "message"}, keys(f))
		require.Equal(t, "2025-03-01T12:00:00Z", f["detected_at"])
	}
	for _, p := range doc.Paths {
		require.ElementsMatch(t, []string{"path", "requests", "findings_by_kind", "orphaned_ms", "max_calls_per_trace"}, keys(p))
	}
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
