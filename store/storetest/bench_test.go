package storetest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/schema"
)

// TestSpanBatchTraces checks the benchmarks' data is what they claim:
// traces of 10 spans, each span the child of the one before, no trace id
// shared between traces or between seeds, and trace ids as random as the
// OpenTelemetry SDKs make them (the bytes they take on disk depend on it).
func TestSpanBatchTraces(t *testing.T) {
	spans := append(SpanBatch(7, 1000), SpanBatch(8, 1000)...)
	byTrace := map[schema.TraceID][]schema.Span{}
	var ones [16]int // per byte of the id, how many of the traces' ids have its low bit set
	for _, s := range spans {
		if len(byTrace[s.TraceID]) == 0 {
			for i, b := range s.TraceID {
				ones[i] += int(b & 1)
			}
		}
		byTrace[s.TraceID] = append(byTrace[s.TraceID], s)
	}
	require.Len(t, byTrace, 200)
	for i, n := range ones {
		require.InDelta(t, 100, n, 40, "byte %d of the trace ids is not random", i)
	}
	for _, trace := range byTrace {
		require.Len(t, trace, 10)
		require.Equal(t, schema.SpanID{}, trace[0].ParentSpanID, "the first span is the root")
		for i := 1; i < len(trace); i++ {
			require.Equal(t, trace[i-1].SpanID, trace[i].ParentSpanID)
		}
	}
}

// TestHopBatchIsAnalysed checks BenchmarkWriteHops writes what the pipeline
// stores: the analysed, thinned hops of SpanBatch's traces, stamped with
// their analysis time, entries and calls with their paths and budgets.
func TestHopBatchIsAnalysed(t *testing.T) {
	spans := SpanBatch(3, 1000)
	hops := HopBatch(3, 1000)
	require.NotEmpty(t, hops)
	require.LessOrEqual(t, len(hops), len(spans), "at most a hop a span")
	traces := map[schema.TraceID]bool{}
	for _, s := range spans {
		traces[s.TraceID] = true
	}
	kinds := map[schema.SpanKind]int{}
	budgets := 0
	for _, h := range hops {
		require.True(t, traces[h.TraceID], "hop of a trace not in the batch")
		require.NotEmpty(t, h.Path)
		require.NotZero(t, h.AnalyzedNs)
		kinds[h.Kind]++
		if h.RemainingMs != nil || h.BudgetMs != nil {
			budgets++
		}
	}
	require.NotZero(t, kinds[schema.KindServer], "entries")
	require.NotZero(t, kinds[schema.KindClient], "calls")
	require.NotZero(t, budgets, "hops with a budget")
}
