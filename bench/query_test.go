package bench

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/store"
	"github.com/budgetd/budgetd/store/embedded"
)

// TestQueriesOnAFilledStore runs the query mode on a small fill, under
// ingest: the fill lies in time order over the hour and the ingest after
// it, every query answers, the trace view finds the hops of the traces
// it reads, the problems list lists problems, the store holds exactly the
// fill's spans and those the ingest counted, and every table the fill writes
// has bytes on disk. On an empty store the mode
// refuses to time reads of nothing.
func TestQueriesOnAFilledStore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := embedded.Open(ctx, embedded.Config{DataDir: t.TempDir(), Database: "query"})
	require.NoError(t, err)
	defer st.Close()

	_, err = Queries(ctx, st, 1)
	require.ErrorContains(t, err, "no spans in the window")
	_, err = BytesPerSpan(ctx, st)
	require.ErrorContains(t, err, "no spans stored")

	require.NoError(t, Fill(ctx, st, 20_000, 10_000))
	// In time order over the hour Queries reads, as traffic writes: each
	// half of it holds half the spans.
	half := uint64(30 * time.Minute)
	for _, w := range []store.Window{{SinceNs: fillStart, UntilNs: fillStart + half - 1}, {SinceNs: fillStart + half, UntilNs: fillStart + 2*half - 1}} {
		spans, err := st.Spans(ctx, w, 0)
		require.NoError(t, err)
		require.Equal(t, 10_000, len(spans), "spans in %v", w)
	}
	in := StartIngest(ctx, st, 2_000)
	lat, err := Queries(ctx, st, 3)
	ingested, rate, ingestErr := in.Stop() // before the store closes
	require.NoError(t, err)
	err = ingestErr
	require.NoError(t, err)
	require.Positive(t, ingested)
	require.Positive(t, rate)
	stored, err := st.CountRows(ctx, "spans")
	require.NoError(t, err)
	require.EqualValues(t, 20_000+ingested, stored, "the fill's spans and every span the ingest counted")
	after, err := st.Spans(ctx, store.Window{SinceNs: fillStart + 2*half, UntilNs: fillStart + 4*half}, 0)
	require.NoError(t, err)
	require.Equal(t, ingested, len(after), "the ingest carries on after the fill's hour")
	require.ElementsMatch(t, []string{"trace by id", "trace view", "findings first page", "paths, 1 h", "edges, 1 h", "problems, 1 h"}, slices.Collect(maps.Keys(lat)))
	for name, p := range lat {
		require.Positive(t, p[0], name)
		require.GreaterOrEqual(t, p[1], p[0], name)
	}

	tables, err := BytesPerSpan(ctx, st)
	require.NoError(t, err)
	for _, name := range []string{"spans", "trace_index", "hops", "findings", "problem_stats"} {
		require.Positive(t, tables[name], name)
	}
	t.Logf("bytes per span by table: %v", tables)
}
