package analyze

import (
	"math"
	"math/rand"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSketchLnGammaMatchesAlpha(t *testing.T) {
	require.InDelta(t, math.Log((1+sketchAlpha)/(1-sketchAlpha)), sketchLnGamma, 1e-15)
}

// exactQuantile is the nearest-rank quantile of sorted values.
func exactQuantile(sorted []float64, q float64) float64 {
	rank := int(math.Ceil(q * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

func TestSketchQuantiles(t *testing.T) {
	tests := []struct {
		name string
		gen  func(r *rand.Rand) float64
	}{
		{name: "log-normal around 200 ms", gen: func(r *rand.Rand) float64 { return math.Exp(r.NormFloat64() + math.Log(200)) }},
		{name: "uniform 1 to 2 ms", gen: func(r *rand.Rand) float64 { return 1 + r.Float64() }},
		{name: "bimodal fast and timing out", gen: func(r *rand.Rand) float64 {
			if r.Intn(10) == 0 {
				return 15000 + r.Float64()*10
			}
			return 20 + r.Float64()*5
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rand.New(rand.NewSource(1))
			var s sketch
			vals := make([]float64, 5000)
			for i := range vals {
				vals[i] = tt.gen(r)
				s.add(vals[i])
			}
			sort.Float64s(vals)
			for _, q := range []float64{0.01, 0.5, 0.9, 0.99, 1} {
				got, ok := s.quantile(q)
				require.True(t, ok)
				want := exactQuantile(vals, q)
				require.InEpsilon(t, want, got, sketchAlpha+1e-9, "q=%v", q)
			}
			require.EqualValues(t, len(vals), s.count)
		})
	}
}

func TestSketchBoundsItsMemory(t *testing.T) {
	var s sketch
	for v := 2e-3; v < 1e13; v *= 1.005 {
		s.add(v)
	}
	require.LessOrEqual(t, len(s.bins), sketchMaxBins)
	// Collapsing merges the lowest buckets; the top stays accurate.
	got, ok := s.quantile(1)
	require.True(t, ok)
	require.InEpsilon(t, maxBudgetMs, got, sketchAlpha+1e-9)
}

func TestSketchEdgeValues(t *testing.T) {
	tests := []struct {
		name string
		vals []float64
		q    float64
		want float64
		ok   bool
	}{
		{name: "empty", q: 0.5},
		{name: "zeros and negatives count as zero", vals: []float64{0, -5, math.NaN()}, q: 1, want: 0, ok: true},
		{name: "zero below a real value", vals: []float64{0, 100}, q: 0.5, want: 0, ok: true},
		{name: "single value", vals: []float64{1234}, q: 0.99, want: 1234, ok: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s sketch
			for _, v := range tt.vals {
				s.add(v)
			}
			got, ok := s.quantile(tt.q)
			require.Equal(t, tt.ok, ok)
			if tt.want == 0 {
				require.Zero(t, got)
			} else {
				require.InEpsilon(t, tt.want, got, sketchAlpha)
			}
		})
	}
}

func TestSketchMergeEqualsAddingAll(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	var a, b, all sketch
	for i := 0; i < 1000; i++ {
		v := r.ExpFloat64() * 100
		all.add(v)
		if i%2 == 0 {
			a.add(v)
		} else {
			b.add(v)
		}
	}
	a.merge(&b)
	require.Equal(t, all, a)
}

func TestValueTable(t *testing.T) {
	tests := []struct {
		name string
		vals []float64
		want float64
		n    uint64
	}{
		{name: "exact median of few values", vals: []float64{1000, 1000, 2000}, want: 1000, n: 3},
		{name: "lower median of an even count", vals: []float64{1000, 2000}, want: 1000, n: 2},
		{name: "NaN ignored", vals: []float64{math.NaN(), 700}, want: 700, n: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var vt valueTable
			for _, v := range tt.vals {
				vt.add(v)
			}
			got, ok := vt.median()
			require.True(t, ok)
			require.Equal(t, tt.want, got)
			require.Equal(t, tt.n, vt.count())
		})
	}
	t.Run("many distinct values turn the table into a sketch", func(t *testing.T) {
		var vt valueTable
		for i := 1; i <= 1000; i++ {
			vt.add(float64(i))
		}
		require.NotNil(t, vt.sk)
		require.Empty(t, vt.vals)
		require.EqualValues(t, 1000, vt.count())
		got, _ := vt.median()
		require.InEpsilon(t, 500, got, sketchAlpha)
	})
	t.Run("the mode depends on the values, not on how they were merged", func(t *testing.T) {
		var all, a, b valueTable
		for i := 1; i <= 40; i++ {
			all.add(float64(i))
			if i <= 20 {
				a.add(float64(i))
			} else {
				b.add(float64(i))
			}
		}
		require.Nil(t, a.sk)
		require.Nil(t, b.sk)
		a.merge(&b)
		require.Equal(t, all, a)
	})
	t.Run("empty", func(t *testing.T) {
		var vt valueTable
		_, ok := vt.median()
		require.False(t, ok)
	})
}
