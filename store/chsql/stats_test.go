package chsql

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/store"
	"github.com/budgetd/budgetd/store/chschema"
)

func TestStatsIntervalIsTheStores(t *testing.T) {
	require.Equal(t, uint64(store.StatsInterval), chschema.StatsIntervalNs)
}

func TestStatsSplit(t *testing.T) {
	const m = chschema.StatsIntervalNs
	base := uint64(1_700_000_000_000_000_000) / m * m
	tests := []struct {
		name     string
		w        store.Window
		start    uint64
		known    bool
		from, to uint64
	}{
		{"whole minutes", store.Window{SinceNs: base, UntilNs: base + 3*m - 1}, 0, true, base, base + 3*m},
		{"partial ends", store.Window{SinceNs: base + 1, UntilNs: base + 3*m}, 0, true, base + m, base + 3*m},
		{"within one minute", store.Window{SinceNs: base + 1, UntilNs: base + m - 2}, 0, true, base + 1, base + 1},
		{"one minute exactly", store.Window{SinceNs: base, UntilNs: base + m - 1}, 0, true, base, base + m},
		{"statistics began later", store.Window{SinceNs: base, UntilNs: base + 5*m - 1}, base + 2*m + 7, true, base + 3*m, base + 5*m},
		{"statistics began after the window", store.Window{SinceNs: base, UntilNs: base + 5*m - 1}, base + 9*m, true, base, base},
		{"no record of when they began", store.Window{SinceNs: base, UntilNs: base + 5*m - 1}, 0, false, base, base},
		{"all time", store.Window{}, 0, true, 0, math.MaxUint64 / m * m},
		{"to the last nanosecond", store.Window{SinceNs: math.MaxUint64 - 1}, 0, true, math.MaxUint64 - 1, math.MaxUint64 - 1},
	}
	for _, tt := range tests {
		from, to := statsSplit(tt.w, tt.start, tt.known)
		require.Equal(t, [2]uint64{tt.from, tt.to}, [2]uint64{from, to}, tt.name)
	}
}

func TestWholeIntervalsSplitWhole(t *testing.T) {
	now := time.Date(2026, 11, 1, 13, 0, 29, 500_000_000, time.UTC)
	w := store.WholeIntervals(now.Add(-time.Hour), now)
	require.Equal(t, store.WindowOf(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC), time.Date(2026, 11, 1, 13, 0, 59, 999_999_999, time.UTC)), w)
	from, to := statsSplit(w, 0, true)
	require.Equal(t, [2]uint64{w.SinceNs, w.UntilNs + 1}, [2]uint64{from, to}, "no partial interval is left to read from the hops")
}

// TestHistogramQuantile holds the quantile of buckets to ClickHouse's
// interpolated quantile of exact values where every bucket holds one
// value, and to the bucket's mean otherwise.
func TestHistogramQuantile(t *testing.T) {
	h := histogram{{bucket: 3, n: 1, total: 900}, {bucket: 1, n: 3, total: 150}}
	require.InDelta(t, 50, h.quantile(0.5), 1e-9)
	require.InDelta(t, 50+0.97*850, h.quantile(0.99), 1e-9, "interpolated between the last two values, as quantile() is")
	require.InDelta(t, 900, h.quantile(1), 1e-9)
	require.InDelta(t, 50, h.quantile(0), 1e-9)
	require.InDelta(t, 1050.0/4, h.mean(), 1e-9)

	one := histogram{{bucket: 7, n: 3, total: 3 * 250.5}}
	require.Equal(t, 250.5, *one.median(), "equal values are exact")
	require.Nil(t, histogram{}.median())
	require.True(t, math.IsNaN(histogram{}.quantile(0.5)))

	calls := histogram{{bucket: 1, n: 5, total: 5}, {bucket: 3, n: 1, total: 3}, {bucket: 2, n: 0, total: 0}}
	require.EqualValues(t, 3, calls.highest())
	require.Zero(t, histogram{}.highest())
	require.Zero(t, histogram{}.mean())
}

func TestRecentReanalysesForgetTheOldest(t *testing.T) {
	var r recentReanalyses
	for i := range maxRecentReanalyses + 10 {
		r.add(uint64(i + 1))
		r.add(uint64(i + 1)) // a second round's record of the same time
	}
	require.False(t, r.has(1))
	require.False(t, r.has(10))
	require.True(t, r.has(11))
	require.True(t, r.has(maxRecentReanalyses+10))
	require.Len(t, r.order, maxRecentReanalyses)
}
