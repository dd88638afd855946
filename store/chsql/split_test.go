package chsql

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSplitRows(t *testing.T) {
	day := uint64(24 * time.Hour)
	flat := func(b int) func(int) int { return func(int) int { return b } }
	sameDay := func(int) uint64 { return 5 * day }

	require.Nil(t, splitRows(10, sameDay, flat(10), 50, 100), "a batch within both bounds is one insert")
	farApart := func(i int) uint64 { return uint64(i%2) * 80 * day }
	require.Nil(t, splitRows(10, farApart, flat(10), 50, 100), "two days 80 apart are two partitions: one insert")

	// Bytes: 10 rows of 30 bytes under 100 bytes a part: 3+3+3+1.
	parts := splitRows(10, sameDay, flat(30), 50, 100)
	require.Equal(t, [][]int{{0, 1, 2}, {3, 4, 5}, {6, 7, 8}, {9}}, parts)

	// A row larger than the bound is a part alone.
	sizes := []int{10, 500, 10, 10}
	require.Equal(t, [][]int{{0}, {1}, {2, 3}}, splitRows(4, sameDay, func(i int) int { return sizes[i] }, 50, 100))

	// Days: rows on days 3,1,3,2,1 with 2 days a part: days 1-2 then 3,
	// row order kept within a part.
	ds := []uint64{3, 1, 3, 2, 1}
	parts = splitRows(5, func(i int) uint64 { return ds[i] * day }, flat(1), 2, 100)
	require.Equal(t, [][]int{{1, 3, 4}, {0, 2}}, parts)

	// Both: each day part is cut by bytes too.
	parts = splitRows(5, func(i int) uint64 { return ds[i] * day }, flat(60), 2, 100)
	require.Equal(t, [][]int{{1}, {3}, {4}, {0}, {2}}, parts)
	for _, p := range parts {
		require.NotEmpty(t, p)
	}
}
