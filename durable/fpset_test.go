package durable

import (
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestFPSetMatchesAMap drives a set and a map with the same random adds
// and removes. The fingerprints are picked so their home slots crowd the
// table's last slots and its first ones: runs are long, wrap around the
// end, and removals shift entries back across the wrap. A shift that hides
// an entry makes a later Has disagree with the map. The table is not a
// power of two long (1,334 slots), as a generation's table sized for the
// spans it expects is not.
func TestFPSetMatchesAMap(t *testing.T) {
	s := newFPSet(1000)
	require.Equal(t, 1334, len(s.slots))
	last := len(s.slots) - 1
	var pool []uint64
	for fp := uint64(2); len(pool) < 300; fp++ {
		if h := s.home(fp); h >= last-2 || h <= 2 || fp%997 == 0 {
			pool = append(pool, fp)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	want := map[uint64]bool{}
	for step := range 20_000 {
		fp := pool[rng.IntN(len(pool))]
		switch rng.IntN(3) {
		case 0, 1:
			require.Equal(t, !want[fp], s.Add(fp), "Add(%d) at step %d", fp, step)
			want[fp] = true
		case 2:
			require.Equal(t, want[fp], s.Remove(fp), "Remove(%d) at step %d", fp, step)
			delete(want, fp)
		}
		for _, fp := range pool {
			require.Equal(t, want[fp], s.Has(fp), "Has(%d) at step %d", fp, step)
		}
	}
	require.Equal(t, len(want), s.Len())
	require.Equal(t, last+1, len(s.slots), "the pool fits the first table: homes stay where they were picked")
}

// TestFPSetGrowsAndKeepsZero checks growth past the first table and that
// fingerprint 0, the empty slot's value, is still a member (as 1).
func TestFPSetGrowsAndKeepsZero(t *testing.T) {
	s := newFPSet(0)
	require.False(t, s.Has(0))
	require.True(t, s.Add(0))
	require.True(t, s.Has(0))
	require.False(t, s.Add(1), "0 is kept as 1")
	for fp := uint64(2); fp < 100_000; fp++ {
		s.Add(fp * 0x2545F4914F6CDD1D)
	}
	require.Equal(t, 99_999, s.Len())
	require.GreaterOrEqual(t, 3*len(s.slots), 4*s.Len(), "load stays at most 3/4")
	for fp := uint64(2); fp < 100_000; fp++ {
		require.True(t, s.Has(fp*0x2545F4914F6CDD1D))
	}
	require.True(t, s.Remove(0))
	require.False(t, s.Has(1))
}

// TestNewFPSetHoldsItsSize: a set made for n fingerprints takes them
// without growing (load reads n of them back from a generation file).
func TestNewFPSetHoldsItsSize(t *testing.T) {
	s := newFPSet(10_000)
	size := len(s.slots)
	for fp := uint64(1); fp <= 10_000; fp++ {
		s.Add(fp)
	}
	require.Equal(t, size, len(s.slots))
}

// TestFPSetTableIsOutsideTheHeap: a million fingerprints take their table
// from a mapping, not from Go's heap (where the collector would let twice
// their size build up), and every add and lookup sees it.
func TestFPSetTableIsOutsideTheHeap(t *testing.T) {
	const n = 1_000_000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	mapped := fpMappedBytes.Load()
	s := newFPSet(0)
	rng := rand.New(rand.NewPCG(1, 2))
	fps := make([]uint64, n)
	for i := range fps {
		fps[i] = rng.Uint64()
		require.True(t, s.Add(fps[i]))
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	for _, fp := range fps {
		require.True(t, s.Has(fp))
	}
	require.Equal(t, n, s.Len())
	require.GreaterOrEqual(t, fpMappedBytes.Load()-mapped, int64(8*n), "the table is mapped")
	// fps itself is 8 MB of heap; the table would be 16 MB more.
	require.Less(t, int64(after.HeapAlloc)-int64(before.HeapAlloc), int64(8*n+4<<20), "the table is not in Go's heap")
	runtime.KeepAlive(s)
}

// TestFPSetMappingIsReleased: a table a set outgrew goes back to the OS
// at once, and the table of a set nothing refers to any more once it is
// collected (a generation that ages out is simply dropped).
func TestFPSetMappingIsReleased(t *testing.T) {
	unmappedAll := func() bool {
		runtime.GC()
		return fpMappedBytes.Load() == 0
	}
	require.Eventually(t, unmappedAll, time.Minute, 10*time.Millisecond, "the earlier tests' sets are released")
	func() {
		s := newFPSet(0)
		for fp := range uint64(100_000) {
			s.Add(fp + 1)
			require.Equal(t, int64(8*len(s.slots)), fpMappedBytes.Load(), "only the set's current table is mapped")
		}
		require.Greater(t, len(s.slots), fpSetMinSlots, "the set grew")
	}()
	require.Eventually(t, unmappedAll, time.Minute, 10*time.Millisecond, "the dropped set's table is released")
}

// randomFPSet returns n random fingerprints (from seed) and a set of
// every every-th of them, with the generator to draw more.
func randomFPSet(n, every int, seed uint64) (*fpSet, []uint64, *rand.Rand) {
	s := newFPSet(0)
	rng := rand.New(rand.NewPCG(seed, seed+1))
	fps := make([]uint64, n)
	for i := range fps {
		fps[i] = rng.Uint64()
		if i%every == 0 {
			s.Add(fps[i])
		}
	}
	return s, fps, rng
}

// TestFPSetPack: a set that doubled its table is moved into the smallest
// one that holds it at a load of at most 3/4, keeping every member and
// finding no new one; a set that fills its table well is left alone.
func TestFPSetPack(t *testing.T) {
	s, fps, rng := randomFPSet(100_000, 1, 5)
	grown := len(s.slots)
	s.Pack()
	require.Less(t, len(s.slots), grown)
	require.Equal(t, slotsFor(len(fps)), len(s.slots))
	require.GreaterOrEqual(t, 3*len(s.slots), 4*s.Len(), "load stays at most 3/4")
	for _, fp := range fps {
		require.True(t, s.Has(fp))
	}
	for range 10_000 {
		require.False(t, s.Has(rng.Uint64()|1<<63))
	}
	packed := len(s.slots)
	s.Pack()
	require.Equal(t, packed, len(s.slots), "a packed set is not rebuilt")
}

// TestFPSetHasEachMatchesHas: the grouped lookup finds what Has finds,
// over a request longer than a group and not a multiple of it, and leaves
// a span known already known.
func TestFPSetHasEachMatchesHas(t *testing.T) {
	s, fps, _ := randomFPSet(1000, 3, 7)
	fps[5] = 0 // kept as 1
	s.Add(0)
	known := make([]bool, len(fps))
	known[7] = true // not in the set, known from another generation
	s.HasEach(fps, known)
	for i, fp := range fps {
		require.Equal(t, s.Has(fp) || i == 7, known[i], "fingerprint %d", i)
	}
	require.True(t, known[5])
}
