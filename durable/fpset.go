package durable

import (
	"math/bits"
	"runtime"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// fpSet is a set of span fingerprints in one flat table with linear
// probing. Go's map spends about 38 bytes per uint64 key at the sizes
// deduplication holds (millions), and a lookup that misses — every fresh
// span, in every generation — walks a directory, a table and a group; here
// an entry is 8 bytes at a load of at most 3/4, and a miss reads one or two
// cache lines.
//
// The table need not be a power of two long (a fingerprint's home is a
// multiply-high of its hash by the length), so a set made for n
// fingerprints takes 4n/3 slots, 10.7 bytes a fingerprint, and a
// generation that grew by doubling is packed when it closes (Pack): a
// power-of-two table would be between 3/8 and 3/4 full, 11–21 bytes a
// fingerprint (17.6 over a window under a steady load, against 11.4 now:
// TestSeenTablesUnderLoad).
//
// The table is mapped from the OS outside Go's heap (fpMapping). A full
// dedup window holds millions of fingerprints — 128 MB of a 305 MB live
// heap after five minutes at 35k spans a second — and Go's collector lets
// its heap grow to twice what is live, so in the heap they cost twice
// their size in RSS; mapped, once (docs/performance.md, Round 2's steps 36
// and 37).
type fpSet struct {
	slots []uint64 // 0 is an empty slot; a fingerprint 0 is kept as 1
	n     int
	mem   *fpMapping // what slots is mapped in
	// touched is the sum of the slots HasEach read ahead: kept only so
	// the compiler does not drop those reads.
	touched uint64
}

// fpSetMinSlots is the table's first size.
const fpSetMinSlots = 1024

// newFPSet returns a set sized for n fingerprints without growing.
func newFPSet(n int) *fpSet {
	s := &fpSet{mem: &fpMapping{}}
	// The mapping goes back to the OS with the set: a generation that
	// ages out is simply dropped, as a heap table would be.
	runtime.AddCleanup(s, (*fpMapping).unmap, s.mem)
	s.resize(slotsFor(n))
	return s
}

// slotsFor is the smallest table that holds n fingerprints at a load of at
// most 3/4.
func slotsFor(n int) int {
	return max(fpSetMinSlots, (4*n+2)/3)
}

// Len is the number of fingerprints in the set.
func (s *fpSet) Len() int { return s.n }

// Has reports whether fp is in the set.
func (s *fpSet) Has(fp uint64) bool {
	_, found := s.find(nonZero(fp))
	return found
}

// HasEach sets known[i] for each fps[i] in the set, skipping those known
// already. It reads the home slots of a group of fingerprints before it
// looks any of them up: those reads do not depend on each other, so their
// cache misses are in flight together, and the lookups after them find
// the slots in cache.
func (s *fpSet) HasEach(fps []uint64, known []bool) {
	const groupLen = 16
	for lo := 0; lo < len(fps); lo += groupLen {
		group := fps[lo:min(lo+groupLen, len(fps))]
		var touched uint64
		for _, fp := range group {
			touched += s.slots[s.home(nonZero(fp))]
		}
		s.touched += touched
		for i, fp := range group {
			if !known[lo+i] {
				known[lo+i] = s.Has(fp)
			}
		}
	}
}

// Add puts fp in the set; false when it was there already.
func (s *fpSet) Add(fp uint64) bool {
	fp = nonZero(fp)
	if 4*(s.n+1) > 3*len(s.slots) {
		s.resize(2 * len(s.slots))
	}
	i, found := s.find(fp)
	if found {
		return false
	}
	s.slots[i] = fp
	s.n++
	return true
}

// find returns fp's slot, or the empty slot that ends its run. The table
// always has an empty slot (its load stays at most 3/4), so it ends.
func (s *fpSet) find(fp uint64) (i int, found bool) {
	for i = s.home(fp); s.slots[i] != 0; i = s.next(i) {
		if s.slots[i] == fp {
			return i, true
		}
	}
	return i, false
}

// next is the slot after i, the first after the last.
func (s *fpSet) next(i int) int {
	if i++; i == len(s.slots) {
		return 0
	}
	return i
}

// Pack moves the set into the smallest table that holds it at a load of
// at most 3/4, when that saves at least an eighth of the table: a
// generation is packed when it stops taking new spans, since one that
// outgrew the table it was made with doubled it.
func (s *fpSet) Pack() {
	if size := slotsFor(s.n); 8*size <= 7*len(s.slots) {
		s.resize(size)
	}
}

// Remove takes fp out of the set; false when it was not there. The
// entries after it in its run move back so no lookup stops short at the
// hole (backward-shift deletion: no tombstones to clean up later).
func (s *fpSet) Remove(fp uint64) bool {
	fp = nonZero(fp)
	i, found := s.find(fp)
	if !found {
		return false
	}
	for j := s.next(i); s.slots[j] != 0; j = s.next(j) {
		// The entry at j may fill the hole at i unless its home lies
		// cyclically in (i, j]: moving it before its home would hide it.
		h := s.home(s.slots[j])
		if (i < j && i < h && h <= j) || (i > j && (i < h || h <= j)) {
			continue
		}
		s.slots[i] = s.slots[j]
		i = j
	}
	s.slots[i] = 0
	s.n--
	return true
}

// home is fp's first slot: the high word of a multiplicative hash times
// the table's length, which maps the hash evenly onto any length and reads
// its top bits, the best mixed (a fingerprint's low bits, FNV-1a's, are
// mixed less than its high ones).
func (s *fpSet) home(fp uint64) int {
	hi, _ := bits.Mul64(fp*0x9E3779B97F4A7C15, uint64(len(s.slots)))
	return int(hi)
}

// resize moves every fingerprint into a table of size slots; size must
// leave room for them at a load of at most 3/4.
func (s *fpSet) resize(size int) {
	old := s.slots
	next := &fpMapping{}
	s.slots = next.slots(size)
	for _, fp := range old {
		if fp == 0 {
			continue
		}
		i := s.home(fp)
		for s.slots[i] != 0 {
			i = s.next(i)
		}
		s.slots[i] = fp
	}
	// The old table has been read: its mapping goes, the new one is the
	// set's (the same fpMapping, which the set's cleanup holds).
	s.mem.unmap()
	*s.mem = *next
}

// nonZero keeps fingerprint 0 as 1, since 0 marks an empty slot. The two
// become one fingerprint: a collision as likely as any other.
func nonZero(fp uint64) uint64 {
	if fp == 0 {
		return 1
	}
	return fp
}

// fpMapping is memory of an fpSet's table mapped from the OS: zeroed, as
// an empty table is, and not Go's to scan, count or collect. Where the OS
// refuses a mapping the table is taken from Go's heap instead (the set's
// slots then keep it alive, and there is nothing to unmap).
type fpMapping struct {
	b []byte // the mapping; nil for none or a table in the heap
}

// fpMappedBytes is the memory of every fpSet table mapped now.
var fpMappedBytes atomic.Int64

// slots maps a table of size slots.
func (m *fpMapping) slots(size int) []uint64 {
	b, err := syscall.Mmap(-1, 0, size*8, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return make([]uint64, size)
	}
	m.b = b
	fpMappedBytes.Add(int64(len(b)))
	return unsafe.Slice((*uint64)(unsafe.Pointer(&b[0])), size)
}

// unmap gives the mapping back; nothing may read the table after.
func (m *fpMapping) unmap() {
	if m.b != nil && syscall.Munmap(m.b) == nil {
		fpMappedBytes.Add(-int64(len(m.b)))
	}
	m.b = nil
}
