package storetest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/schema"
)

// TestSpanBatchTraces checks the benchmarks' data is what they claim:
// traces of 10 spans, each span the child of the one before, and no trace
// id shared between traces.
func TestSpanBatchTraces(t *testing.T) {
	spans := SpanBatch(7, 1000)
	byTrace := map[schema.TraceID][]schema.Span{}
	for _, s := range spans {
		byTrace[s.TraceID] = append(byTrace[s.TraceID], s)
	}
	require.Len(t, byTrace, 100)
	for _, trace := range byTrace {
		require.Len(t, trace, 10)
		require.Equal(t, schema.SpanID{}, trace[0].ParentSpanID, "the first span is the root")
		for i := 1; i < len(trace); i++ {
			require.Equal(t, trace[i-1].SpanID, trace[i].ParentSpanID)
		}
	}
}
