package schema

import (
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

func sid(n uint64) SpanID {
	var id SpanID
	binary.BigEndian.PutUint64(id[:], n)
	return id
}

// ts builds a span with id n, parent p (0 for none) and start time start.
func ts(n, p, start uint64) Span {
	var parent SpanID
	if p != 0 {
		parent = sid(p)
	}
	return Span{TraceID: TraceID{1}, SpanID: sid(n), ParentSpanID: parent, StartNs: start, EndNs: start + 10}
}

// ids maps span indexes of tr to the numbers their ids were built from.
func ids(tr *Trace, idx []int) []uint64 {
	out := []uint64{}
	for _, i := range idx {
		out = append(out, binary.BigEndian.Uint64(tr.Spans[i].SpanID[:]))
	}
	return out
}

// requireWellFormed checks the invariants every Trace must hold, whatever
// the input: each span is reached exactly once by an iterative walk from
// Tops via Children; Parent and Children agree; Lookup finds every span;
// Spans are in start order; roots have no parent id and orphans a missing,
// cyclic or self parent.
func requireWellFormed(t *testing.T, tr *Trace) {
	t.Helper()
	// Plain comparisons inside the loops: the deep-chain test runs them
	// 100,000 times, and testify's reflection is slow under -race.
	seen := make([]int, len(tr.Spans))
	stack := append([]int(nil), tr.Tops()...)
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		seen[i]++
		if seen[i] != 1 {
			require.Failf(t, "span reached twice", "span %d", i)
		}
		stack = append(stack, tr.Children[i]...)
	}
	for i := range tr.Spans {
		if seen[i] != 1 {
			require.Failf(t, "span unreachable from Tops", "span %d", i)
		}
		if got, ok := tr.Lookup(tr.Spans[i].SpanID); !ok || got != i {
			require.Failf(t, "Lookup disagrees", "span %d: got %d, %v", i, got, ok)
		}
		if p := tr.Parent(i); p >= 0 && (!slices.Contains(tr.Children[p], i) || tr.Spans[p].SpanID != tr.Spans[i].ParentSpanID) {
			require.Failf(t, "Parent and Children disagree", "span %d, parent %d", i, p)
		}
		if i > 0 && tr.Spans[i-1].StartNs > tr.Spans[i].StartNs {
			require.Failf(t, "Spans not in start order", "span %d", i)
		}
	}
	for p, kids := range tr.Children {
		for _, c := range kids {
			if tr.Parent(c) != p {
				require.Failf(t, "child's parent differs", "span %d under %d has parent %d", c, p, tr.Parent(c))
			}
		}
	}
	for _, r := range tr.Roots {
		require.True(t, tr.Spans[r].ParentSpanID.IsZero())
		require.Equal(t, -1, tr.Parent(r))
	}
	for _, o := range tr.Orphans {
		require.False(t, tr.Spans[o].ParentSpanID.IsZero())
		require.Equal(t, -1, tr.Parent(o))
	}
}

func TestNewTrace(t *testing.T) {
	tests := []struct {
		name           string
		spans          []Span
		wantOrder      []uint64 // span ids in Spans order
		wantRoots      []uint64
		wantOrphans    []uint64
		wantChildren   map[uint64][]uint64
		wantDuplicates int
	}{
		{name: "empty", spans: nil, wantOrder: []uint64{}, wantRoots: []uint64{}, wantOrphans: []uint64{}, wantChildren: map[uint64][]uint64{}},
		{
			name:         "single root",
			spans:        []Span{ts(1, 0, 100)},
			wantOrder:    []uint64{1},
			wantRoots:    []uint64{1},
			wantOrphans:  []uint64{},
			wantChildren: map[uint64][]uint64{},
		},
		{
			name:         "tree given out of order",
			spans:        []Span{ts(4, 2, 130), ts(3, 1, 120), ts(1, 0, 100), ts(2, 1, 110), ts(5, 2, 125)},
			wantOrder:    []uint64{1, 2, 3, 5, 4},
			wantRoots:    []uint64{1},
			wantOrphans:  []uint64{},
			wantChildren: map[uint64][]uint64{1: {2, 3}, 2: {5, 4}},
		},
		{
			name:         "equal start times order by span id",
			spans:        []Span{ts(9, 1, 110), ts(7, 1, 110), ts(1, 0, 100), ts(8, 1, 110)},
			wantOrder:    []uint64{1, 7, 8, 9},
			wantRoots:    []uint64{1},
			wantOrphans:  []uint64{},
			wantChildren: map[uint64][]uint64{1: {7, 8, 9}},
		},
		{
			name:         "missing parent makes an orphan with its subtree",
			spans:        []Span{ts(1, 0, 100), ts(2, 99, 110), ts(3, 2, 120)},
			wantOrder:    []uint64{1, 2, 3},
			wantRoots:    []uint64{1},
			wantOrphans:  []uint64{2},
			wantChildren: map[uint64][]uint64{2: {3}},
		},
		{
			name:         "no root at all",
			spans:        []Span{ts(2, 99, 110), ts(3, 98, 105)},
			wantOrder:    []uint64{3, 2},
			wantRoots:    []uint64{},
			wantOrphans:  []uint64{3, 2},
			wantChildren: map[uint64][]uint64{},
		},
		{
			name:         "several roots",
			spans:        []Span{ts(1, 0, 100), ts(2, 0, 90), ts(3, 2, 95)},
			wantOrder:    []uint64{2, 3, 1},
			wantRoots:    []uint64{2, 1},
			wantOrphans:  []uint64{},
			wantChildren: map[uint64][]uint64{2: {3}},
		},
		{
			name:           "duplicate span ids keep the first",
			spans:          []Span{ts(1, 0, 100), ts(2, 1, 110), ts(2, 0, 50), ts(2, 1, 120), ts(3, 2, 130)},
			wantOrder:      []uint64{1, 2, 3},
			wantRoots:      []uint64{1},
			wantOrphans:    []uint64{},
			wantChildren:   map[uint64][]uint64{1: {2}, 2: {3}},
			wantDuplicates: 2,
		},
		{
			name:         "own parent",
			spans:        []Span{ts(1, 0, 100), ts(2, 2, 110), ts(3, 2, 120)},
			wantOrder:    []uint64{1, 2, 3},
			wantRoots:    []uint64{1},
			wantOrphans:  []uint64{2},
			wantChildren: map[uint64][]uint64{2: {3}},
		},
		{
			name:         "two-cycle is cut once",
			spans:        []Span{ts(1, 2, 100), ts(2, 1, 110)},
			wantOrder:    []uint64{1, 2},
			wantRoots:    []uint64{},
			wantOrphans:  []uint64{1},
			wantChildren: map[uint64][]uint64{1: {2}},
		},
		{
			name:         "three-cycle is cut once",
			spans:        []Span{ts(3, 2, 120), ts(1, 3, 100), ts(2, 1, 110)},
			wantOrder:    []uint64{1, 2, 3},
			wantRoots:    []uint64{},
			wantOrphans:  []uint64{1},
			wantChildren: map[uint64][]uint64{1: {2}, 2: {3}},
		},
		{
			name:         "cycle with a tail hanging off it",
			spans:        []Span{ts(1, 3, 100), ts(2, 1, 110), ts(3, 2, 120), ts(4, 2, 90), ts(5, 4, 95)},
			wantOrder:    []uint64{4, 5, 1, 2, 3},
			wantRoots:    []uint64{},
			wantOrphans:  []uint64{1},
			wantChildren: map[uint64][]uint64{1: {2}, 2: {4, 3}, 4: {5}},
		},
		{
			name:         "two separate cycles beside a normal tree",
			spans:        []Span{ts(1, 0, 100), ts(2, 1, 110), ts(10, 11, 200), ts(11, 10, 210), ts(20, 22, 300), ts(21, 20, 310), ts(22, 21, 320)},
			wantOrder:    []uint64{1, 2, 10, 11, 20, 21, 22},
			wantRoots:    []uint64{1},
			wantOrphans:  []uint64{10, 20},
			wantChildren: map[uint64][]uint64{1: {2}, 10: {11}, 20: {21}, 21: {22}},
		},
		{
			name:         "own parent and a missing parent together stay sorted",
			spans:        []Span{ts(3, 3, 300), ts(2, 99, 200), ts(5, 6, 150), ts(6, 5, 160)},
			wantOrder:    []uint64{5, 6, 2, 3},
			wantRoots:    []uint64{},
			wantOrphans:  []uint64{5, 2, 3},
			wantChildren: map[uint64][]uint64{5: {6}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := NewTrace(tt.spans)
			requireWellFormed(t, tr)
			inPlace := NewTraceInPlace(slices.Clone(tt.spans))
			require.Equal(t, tr, inPlace, "NewTraceInPlace builds what NewTrace does")
			require.Equal(t, tt.wantOrder, ids(tr, indexes(len(tr.Spans))))
			require.Equal(t, tt.wantRoots, ids(tr, tr.Roots))
			require.Equal(t, tt.wantOrphans, ids(tr, tr.Orphans))
			require.Equal(t, append(append([]uint64{}, tt.wantRoots...), tt.wantOrphans...), ids(tr, tr.Tops()))
			require.Equal(t, tt.wantDuplicates, tr.Duplicates)
			children := map[uint64][]uint64{}
			for p, kids := range tr.Children {
				if len(kids) > 0 {
					children[ids(tr, []int{p})[0]] = ids(tr, kids)
				}
			}
			require.Equal(t, tt.wantChildren, children)
			if len(tt.spans) > 0 {
				require.Equal(t, tt.spans[0].TraceID, tr.ID)
			}
		})
	}
}

func indexes(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

func TestNewTraceKeepsFirstDuplicate(t *testing.T) {
	first, second := ts(2, 1, 110), ts(2, 1, 110)
	first.Name, second.Name = "first", "second"
	tr := NewTrace([]Span{ts(1, 0, 100), first, second})
	i, ok := tr.Lookup(sid(2))
	require.True(t, ok)
	require.Equal(t, "first", tr.Spans[i].Name)
	require.Equal(t, 1, tr.Duplicates)
}

func TestNewTraceCopiesInput(t *testing.T) {
	in := []Span{ts(1, 0, 100), ts(2, 1, 110)}
	tr := NewTrace(in)
	in[0].Name, in[1].ParentSpanID = "changed", SpanID{}
	require.Empty(t, tr.Spans[0].Name)
	require.Equal(t, sid(1), tr.Spans[1].ParentSpanID)
}

// TestNewTraceInPlaceTakesTheSlice: without duplicates the trace's spans
// are the caller's slice, put in order; with them, NewTrace's copy. 200
// random trees in shuffled orders (permutations with cycles of many
// lengths) give the trace NewTrace builds.
func TestNewTraceInPlaceTakesTheSlice(t *testing.T) {
	in := []Span{ts(4, 2, 130), ts(3, 1, 120), ts(1, 0, 100), ts(2, 1, 110), ts(5, 2, 125)}
	tr := NewTraceInPlace(in)
	require.Same(t, &in[0], &tr.Spans[0])
	require.Equal(t, []uint64{1, 2, 3, 5, 4}, ids(tr, indexes(len(in))))

	dup := []Span{ts(2, 1, 110), ts(1, 0, 100), ts(2, 1, 110)}
	tr = NewTraceInPlace(slices.Clone(dup))
	require.Equal(t, 1, tr.Duplicates)
	require.Equal(t, NewTrace(dup), tr)

	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		n := 1 + rng.IntN(40)
		spans := make([]Span, n)
		for i := range spans {
			parent := uint64(0)
			if i > 0 {
				parent = uint64(1 + rng.IntN(i))
			}
			spans[i] = ts(uint64(i+1), parent, uint64(100+rng.IntN(5*n)))
		}
		rng.Shuffle(n, func(i, j int) { spans[i], spans[j] = spans[j], spans[i] })
		want := NewTrace(spans)
		got := NewTraceInPlace(slices.Clone(spans))
		requireWellFormed(t, got)
		require.Equal(t, want, got)
	}
}

func TestNewTraceLookupMissing(t *testing.T) {
	tests := []struct {
		name     string
		spans    []Span
		wantTops []int
	}{
		{name: "empty", spans: nil, wantTops: []int{}},
		{name: "one span", spans: []Span{ts(1, 0, 1)}, wantTops: []int{0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := NewTrace(tt.spans)
			_, ok := tr.Lookup(sid(42))
			require.False(t, ok)
			require.Equal(t, tt.wantTops, tr.Tops())
		})
	}
}

// deepChain returns n spans, each the child of the one before, listed
// newest first so NewTrace has to sort them.
func deepChain(n int) []Span {
	spans := make([]Span, n)
	for i := range spans {
		id := uint64(i + 1)
		spans[n-1-i] = ts(id, id-1, uint64(i)*10)
	}
	return spans
}

func TestNewTraceDeepChain(t *testing.T) {
	const depth = 100_000
	tests := []struct {
		name        string
		spans       []Span
		wantRoots   int
		wantOrphans int
	}{
		{name: "chain from a root", spans: deepChain(depth), wantRoots: 1},
		{
			name: "chain closed into one long cycle",
			spans: func() []Span {
				s := deepChain(depth)
				s[len(s)-1].ParentSpanID = sid(depth) // the first span's parent is the last
				return s
			}(),
			wantOrphans: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := NewTrace(tt.spans)
			require.Len(t, tr.Spans, depth)
			require.Len(t, tr.Roots, tt.wantRoots)
			require.Len(t, tr.Orphans, tt.wantOrphans)
			requireWellFormed(t, tr)

			// Walk down iteratively and measure the depth; every span but
			// the last has exactly one child.
			i, levels := tr.Tops()[0], 1
			for len(tr.Children[i]) > 0 {
				require.Len(t, tr.Children[i], 1)
				i = tr.Children[i][0]
				levels++
			}
			require.Equal(t, depth, levels)
			// And back up through Parent.
			for levels = 1; tr.Parent(i) >= 0; levels++ {
				i = tr.Parent(i)
			}
			require.Equal(t, depth, levels)
		})
	}
}

func BenchmarkNewTraceDeepChain(b *testing.B) {
	spans := deepChain(100_000)
	b.ReportAllocs()
	for b.Loop() {
		_ = NewTrace(spans)
	}
}

// TestNewTraceChildrenAreIndependent guards the shared backing array of the
// child lists: appending to one list must not overwrite the next one.
func TestNewTraceChildrenAreIndependent(t *testing.T) {
	tr := NewTrace([]Span{ts(1, 0, 100), ts(2, 1, 110), ts(3, 2, 120), ts(4, 1, 130), ts(5, 4, 140)})
	i1, _ := tr.Lookup(sid(1))
	i2, _ := tr.Lookup(sid(2))
	i4, _ := tr.Lookup(sid(4))
	before := slices.Clone(tr.Children[i2])
	_ = append(tr.Children[i1], 99)
	require.Equal(t, before, tr.Children[i2])
	require.Equal(t, []uint64{5}, ids(tr, tr.Children[i4]))
}
