package analyze

import (
	"math"
	"slices"
	"sort"
)

// The latency sketch is a log-bucketed histogram in the manner of DDSketch:
// bucket i holds values in (γ^(i−1), γ^i] with γ = (1+α)/(1−α), and a
// quantile is reported as 2γ^i/(γ+1), which is within a relative error α of
// every value in the bucket. With α = 1 % a latency of 1234 ms is reported
// as something in [1222, 1246].
const (
	sketchAlpha = 0.01
	// sketchLnGamma is ln((1+α)/(1−α)) for α = 0.01; a test checks it.
	sketchLnGamma = 0.020000666706669536
	// sketchMinMs is the smallest value given its own bucket; anything at or
	// below it (including zero and negative durations) counts as zero.
	sketchMinMs = 1e-3
	// sketchMaxBins bounds a sketch's memory at 512 buckets of 8 bytes. 512
	// buckets at 1 % span a factor of about 28,000 (say 1 ms to 28 s) before
	// the lowest buckets are merged, which costs accuracy only at the low
	// end, far from the p50 and p99 the detectors read.
	sketchMaxBins = 512
)

// bin is one non-empty sketch bucket.
type bin struct {
	idx int32
	n   uint32
}

// sketch is a sparse, bounded quantile sketch of millisecond values. The
// zero value is empty and ready to use.
type sketch struct {
	bins  []bin // sorted by idx
	zeros uint64
	count uint64
}

// binIndex returns the bucket of a value above sketchMinMs. Values are capped
// at maxBudgetMs so the index fits an int32.
func binIndex(ms float64) int32 {
	ms = min(ms, maxBudgetMs)
	return int32(math.Ceil(math.Log(ms) / sketchLnGamma))
}

// binValue is the value reported for bucket idx.
func binValue(idx int32) float64 {
	g := math.Exp(sketchLnGamma)
	return 2 * math.Exp(float64(idx)*sketchLnGamma) / (g + 1)
}

// add records one value.
func (s *sketch) add(ms float64) { s.addN(ms, 1) }

// addN records a value n times.
func (s *sketch) addN(ms float64, n uint64) {
	s.count += n
	if math.IsNaN(ms) || ms <= sketchMinMs {
		s.zeros += n
		return
	}
	s.addBin(binIndex(ms), uint32(min(n, math.MaxUint32)))
}

// addBin adds n to bucket idx, merging the two lowest buckets when the
// sketch would exceed sketchMaxBins.
func (s *sketch) addBin(idx int32, n uint32) { s.bins = addBin(s.bins, idx, n, sketchMaxBins) }

// addBin adds n to bucket idx of bins (sorted by idx) and returns the
// result. When that makes more than maxBins buckets, the two lowest are
// merged: accuracy is given up at the low end, far from the quantiles and
// timeouts read at the high end.
func addBin(bins []bin, idx int32, n uint32, maxBins int) []bin {
	k := sort.Search(len(bins), func(j int) bool { return bins[j].idx >= idx })
	if k < len(bins) && bins[k].idx == idx {
		bins[k].n = satAdd32(bins[k].n, n)
		return bins
	}
	bins = slices.Insert(bins, k, bin{idx: idx, n: n})
	if len(bins) > maxBins {
		bins[1].n = satAdd32(bins[1].n, bins[0].n)
		bins = append(bins[:0], bins[1:]...)
	}
	return bins
}

func satAdd32(a, b uint32) uint32 {
	if a > math.MaxUint32-b {
		return math.MaxUint32
	}
	return a + b
}

// merge adds o's values to s.
func (s *sketch) merge(o *sketch) {
	s.count += o.count
	s.zeros += o.zeros
	for _, b := range o.bins {
		s.addBin(b.idx, b.n)
	}
}

// quantile returns the nearest-rank q-quantile (the smallest recorded value
// with at least ⌈q·count⌉ values at or below it), within relative error α.
func (s *sketch) quantile(q float64) (float64, bool) {
	if s.count == 0 {
		return 0, false
	}
	rank := uint64(math.Ceil(q * float64(s.count)))
	rank = min(max(rank, 1), s.count)
	cum := s.zeros
	if cum >= rank {
		return 0, true
	}
	for _, b := range s.bins {
		cum += uint64(b.n)
		if cum >= rank {
			return binValue(b.idx), true
		}
	}
	// Only reachable when saturated bucket counts lost some values.
	return binValue(s.bins[len(s.bins)-1].idx), true
}

// valueTableMax bounds the distinct values a valueTable keeps exactly.
const valueTableMax = 32

// valueCount is one distinct value and how often it was seen.
type valueCount struct {
	v float64
	n uint64
}

// valueTable counts values exactly while there are few distinct ones, and
// turns into a sketch when there are more. Timeouts are configuration in a
// system with fixed timeouts, so a caller uses a handful of values and the
// median timeout reads "10000 ms" rather than a sketch's "9983 ms"; in a
// system that derives timeouts from the remaining budget every call has its
// own, and the sketch keeps memory bounded. Whether a table ends up exact
// depends only on the set of values added, not on their order, so merged
// windows and a single pass over the same hops agree.
type valueTable struct {
	vals []valueCount // sorted by v; unused once sk is set
	sk   *sketch
}

// add records one value.
func (t *valueTable) add(v float64) { t.addN(v, 1) }

func (t *valueTable) addN(v float64, n uint64) {
	if math.IsNaN(v) {
		return
	}
	if t.sk != nil {
		t.sk.addN(v, n)
		return
	}
	k := sort.Search(len(t.vals), func(j int) bool { return t.vals[j].v >= v })
	if k < len(t.vals) && t.vals[k].v == v {
		t.vals[k].n += n
		return
	}
	if len(t.vals) >= valueTableMax {
		t.toSketch()
		t.sk.addN(v, n)
		return
	}
	t.vals = append(t.vals, valueCount{})
	copy(t.vals[k+1:], t.vals[k:])
	t.vals[k] = valueCount{v: v, n: n}
}

// toSketch moves the exact counts into a sketch.
func (t *valueTable) toSketch() {
	t.sk = &sketch{}
	for _, c := range t.vals {
		t.sk.addN(c.v, c.n)
	}
	t.vals = nil
}

// merge adds o's counts to t.
func (t *valueTable) merge(o *valueTable) {
	if o.sk != nil {
		if t.sk == nil {
			t.toSketch()
		}
		t.sk.merge(o.sk)
		return
	}
	for _, c := range o.vals {
		t.addN(c.v, c.n)
	}
}

// count returns the number of values recorded.
func (t *valueTable) count() uint64 {
	if t.sk != nil {
		return t.sk.count
	}
	var n uint64
	for _, c := range t.vals {
		n += c.n
	}
	return n
}

// median returns the lower median (nearest rank ⌈n/2⌉).
func (t *valueTable) median() (float64, bool) {
	if t.sk != nil {
		return t.sk.quantile(0.5)
	}
	n := t.count()
	if n == 0 {
		return 0, false
	}
	rank := (n + 1) / 2
	var cum uint64
	for _, c := range t.vals {
		cum += c.n
		if cum >= rank {
			return c.v, true
		}
	}
	return t.vals[len(t.vals)-1].v, true
}
