package chsql

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/store"
)

// TestIndexedSizeWithin checks when a trace's lookup rows let it be read
// without sizing its spans first: only when every row counted bytes and
// the sums are inside both limits.
func TestIndexedSizeWithin(t *testing.T) {
	lim := store.TraceLimits{Spans: 100, Bytes: 1000}
	sized := func(rows ...[3]uint64) indexedSize {
		var z indexedSize
		for _, r := range rows {
			z.add(r[0], r[1], r[2])
		}
		return z
	}
	require.True(t, sized([3]uint64{10, 600, 250}, [3]uint64{5, 400, 400}).within(lim), "1,000 bytes in 15 spans")
	require.False(t, sized([3]uint64{10, 600, 250}, [3]uint64{5, 401, 401}).within(lim), "a byte over")
	require.False(t, sized([3]uint64{101, 500, 500}).within(lim), "a span over")
	require.True(t, sized([3]uint64{101, 500, 500}).within(store.TraceLimits{Bytes: 1000}), "no span limit")
	require.False(t, sized([3]uint64{10, 600, 250}, [3]uint64{5, 0, 0}).within(lim), "a row from before the lookup counted bytes")
}
