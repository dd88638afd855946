package bench

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/store/embedded"
)

// TestInsertFloorInsertsAndMeasures runs the floor measurement on a few
// hundred rows: the spans table must end up holding the fill plus every row
// the measurement says it inserted (none deduplicated away, although each
// insert repeats the same block), and the CPU it measured must be some.
func TestInsertFloorInsertsAndMeasures(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	st, err := embedded.Open(ctx, embedded.Config{DataDir: t.TempDir(), Database: "floor"})
	require.NoError(t, err)
	defer st.Close()

	spans, err := Requests(2, 100).Spans()
	require.NoError(t, err)
	require.Len(t, spans, 200)
	require.NoError(t, FillSpans(ctx, st, spans, 150))

	const minRows = 1000
	f, err := MeasureInsertFloor(ctx, st, minRows)
	require.NoError(t, err)
	require.GreaterOrEqual(t, f.Rows, uint64(minRows))
	require.Zero(t, f.Rows%uint64(len(spans)), "whole copies of the %d rows", len(spans))
	stored, err := st.CountRows(ctx, "spans")
	require.NoError(t, err)
	require.Equal(t, uint64(len(spans))+f.Rows, stored, "rows in the spans table")
	t.Logf("%d rows in %s, %s CPU: %.2f CPU s per 1M rows", f.Rows, f.Elapsed, f.CPU, f.CPUPerMillion())
	require.Positive(t, f.CPU, "CPU of the insert window")
	require.Positive(t, f.CPUPerMillion())
}
