package analyze

import (
	"math/rand/v2"
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

// TestRoundReusesNodesCleanly: a round's chunks share their nodes
// (nodeArena), so a span judged in a later chunk must not see what a span
// of an earlier one left in its node. Every fixture's traces, repeated in
// a shuffled order over three chunks (the arena grows while the first is
// built), give in one round what each gives judged alone in the same order
// (inference off: it is the one thing a chunk's traces share).
func TestRoundReusesNodesCleanly(t *testing.T) {
	var ts []*schema.Trace
	for _, f := range fixtures() {
		byTrace := map[schema.TraceID][]schema.Span{}
		var order []schema.TraceID
		for _, s := range f.spans() {
			if _, ok := byTrace[s.TraceID]; !ok {
				order = append(order, s.TraceID)
			}
			byTrace[s.TraceID] = append(byTrace[s.TraceID], s)
		}
		for _, id := range order {
			ts = append(ts, schema.NewTrace(byTrace[id]))
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var round []*schema.Trace
	for len(round) < 3*inferChunk {
		round = append(round, ts[rng.IntN(len(ts))])
	}
	require.Greater(t, len(round), 2*inferChunk)
	cfg := testConfig()
	cfg.Infer.Enabled = false

	alone := New(cfg)
	got := New(cfg).Traces(round, testNow)
	findings := 0
	for i, tr := range round {
		want := alone.Trace(tr, testNow)
		require.Equal(t, want.Findings, got[i].Findings, "trace %d", i)
		require.Equal(t, want.Hops, got[i].Hops, "trace %d", i)
		require.Equal(t, want.Skews, got[i].Skews, "trace %d", i)
		findings += len(want.Findings)
	}
	require.Greater(t, findings, len(round)/4, "the round is mostly traces with findings")
}
