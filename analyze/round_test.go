package analyze

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/schema"
)

// TestRoundHopsAreTheResultsHops: Round returns every result's hops in one
// slice, each Result.Hops a window of it when the span count given is
// right (no copy), and a copy when it is short (results still right); the
// results are those Traces gives; each trace is asked for once, in order.
func TestRoundHopsAreTheResultsHops(t *testing.T) {
	var batch [][]schema.Span
	for n := 1; n <= 2*inferChunk+10; n++ { // three chunks
		batch = append(batch, zeroInstrumented(n, 1000, 3000))
	}
	ts := traces(batch...)
	spans := 0
	for _, tr := range ts {
		spans += len(tr.Spans)
	}
	want := New(testConfig()).Traces(ts, testNow)

	for _, given := range []int{spans, 0} {
		var asked []int
		results, hops := New(testConfig()).Round(len(ts), func(i int) *schema.Trace {
			asked = append(asked, i)
			return ts[i]
		}, given, testNow)
		require.Len(t, asked, len(ts))
		for i, n := range asked {
			require.Equal(t, i, n, "traces are asked for in order, once each")
		}
		require.Len(t, results, len(ts))
		require.Len(t, hops, spans)
		at := 0
		for i, r := range results {
			require.Equal(t, want[i].Findings, r.Findings)
			require.Equal(t, want[i].Hops, r.Hops)
			require.Equal(t, hops[at:at+len(r.Hops)], r.Hops)
			if given == spans {
				require.Same(t, &hops[at], &r.Hops[0], "a result's hops are its window of the round's")
				require.Equal(t, len(r.Hops), cap(r.Hops), "a window cannot be appended into its neighbour")
			}
			at += len(r.Hops)
		}
	}
}
