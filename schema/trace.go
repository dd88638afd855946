package schema

import (
	"bytes"
	"cmp"
	"slices"
	"sort"
)

// Trace is the spans of one trace indexed as a tree. Build it with NewTrace.
//
// The tree is defensive about hostile or partial input: a duplicate span id
// keeps the first span, a span that is its own parent or sits on a parent cycle
// is treated as a span whose parent is missing, so every span is reachable
// from Roots or Orphans exactly once and a walk from them always terminates.
type Trace struct {
	ID    TraceID
	Spans []Span // in start order (ties by span id), duplicates removed

	// Children maps a span's index in Spans to its children's indexes, in
	// start order.
	Children map[int][]int
	// Roots are indexes of spans with no parent.
	Roots []int
	// Orphans are indexes of spans whose parent is not in the trace (still
	// in flight, dropped, or sampled away), or that sat on a parent cycle.
	Orphans []int
	// Duplicates counts spans dropped because their span id was already seen.
	Duplicates int

	index  map[SpanID]int
	parent []int // parent index per span, -1 when none
}

// NewTrace builds the tree for spans, which must all share one trace id (the
// id of the first span is used). The slice is copied; the caller keeps it.
// Building is iterative and O(n log n), so a trace shaped as one very deep
// chain costs no more than a flat one.
func NewTrace(spans []Span) *Trace { return newTrace(spans, false) }

// NewTraceInPlace is NewTrace for a caller done with spans: the trace takes
// the slice and puts it in order in place instead of copying it (unless it
// holds duplicates), so the caller must not use it afterwards. The analysis
// builds every trace it judges; copying their spans was a twentieth of what
// the process allocated under load (docs/performance.md, step 44).
func NewTraceInPlace(spans []Span) *Trace { return newTrace(spans, true) }

func newTrace(spans []Span, inPlace bool) *Trace {
	t := &Trace{Children: make(map[int][]int), index: make(map[SpanID]int, len(spans))}
	if len(spans) == 0 {
		return t
	}
	t.ID = spans[0].TraceID

	// Keep the first span of each id. The index maps ids to positions in
	// spans for now, and to positions in t.Spans once sorted.
	order := make([]int, 0, len(spans))
	for i := range spans {
		if _, dup := t.index[spans[i].SpanID]; dup {
			t.Duplicates++
			continue
		}
		t.index[spans[i].SpanID] = i
		order = append(order, i)
	}
	// Sort positions rather than Spans: a Span is hundreds of bytes, and
	// moving them around inside the sort dominated the build. Ids are unique
	// by now, so the order is total and stability does not matter.
	slices.SortFunc(order, func(i, j int) int {
		a, b := &spans[i], &spans[j]
		if c := cmp.Compare(a.StartNs, b.StartNs); c != 0 {
			return c
		}
		return bytes.Compare(a.SpanID[:], b.SpanID[:])
	})
	if inPlace && t.Duplicates == 0 {
		permute(spans, order)
		t.Spans = spans
	} else {
		t.Spans = make([]Span, len(order))
		for k, i := range order {
			t.Spans[k] = spans[i]
		}
	}
	for k := range t.Spans {
		t.index[t.Spans[k].SpanID] = k
	}

	t.parent = make([]int, len(t.Spans))
	for i := range t.Spans {
		s := &t.Spans[i]
		t.parent[i] = -1
		switch p, ok := t.index[s.ParentSpanID]; {
		case s.ParentSpanID.IsZero():
			t.Roots = append(t.Roots, i)
		case !ok || p == i:
			t.Orphans = append(t.Orphans, i)
		default:
			t.parent[i] = p
		}
	}
	t.breakCycles()
	t.buildChildren()
	return t
}

// permute puts spans in order in place: the span at order[k] moves to k,
// following each cycle of the permutation with one span set aside, so each
// span moves once. order must be a permutation of spans' indexes; it is
// left as the identity.
func permute(spans []Span, order []int) {
	for k := range order {
		if order[k] == k {
			continue
		}
		aside := spans[k]
		j := k
		for {
			from := order[j]
			order[j] = j
			if from == k {
				spans[j] = aside
				break
			}
			spans[j] = spans[from]
			j = from
		}
	}
}

// buildChildren fills Children from the parent links. All child lists share
// one backing array (a counting sort by parent) instead of growing one slice
// per parent; each list's capacity is capped at its length so that a caller
// appending to one cannot overwrite its neighbour. Filling in index order
// keeps each list in start order.
func (t *Trace) buildChildren() {
	start := make([]int, len(t.Spans)+1) // start[p+1] counts p's children first
	parents := 0
	for _, p := range t.parent {
		if p >= 0 {
			if start[p+1] == 0 {
				parents++
			}
			start[p+1]++
		}
	}
	for i := 1; i < len(start); i++ {
		start[i] += start[i-1]
	}
	all := make([]int, start[len(start)-1])
	next := make([]int, len(t.Spans))
	copy(next, start)
	for i, p := range t.parent {
		if p >= 0 {
			all[next[p]] = i
			next[p]++
		}
	}
	t.Children = make(map[int][]int, parents)
	for p := range t.Spans {
		if lo, hi := start[p], start[p+1]; hi > lo {
			t.Children[p] = all[lo:hi:hi]
		}
	}
}

// breakCycles finds spans whose parent chain never reaches a root or orphan
// and cuts each cycle once, above its earliest span, turning that span into an
// orphan. It is linear and iterative, so a chain of any depth is safe: every
// span is coloured once and every cycle is walked once more to find its cut.
func (t *Trace) breakCycles() {
	const (
		unvisited = iota
		onStack
		done
	)
	state := make([]uint8, len(t.Spans))
	var chain []int
	for start := range t.Spans {
		chain = chain[:0]
		i := start
		for i >= 0 && state[i] == unvisited {
			state[i] = onStack
			chain = append(chain, i)
			i = t.parent[i]
		}
		if i >= 0 && state[i] == onStack {
			// i is on the chain just walked: a cycle. Cut it above its
			// earliest span (the lowest index, as Spans are in start
			// order), which is the likeliest real ancestor of the others.
			// Cutting where the walk happened to enter would depend on
			// which span the walk started from.
			cut := i
			for j := t.parent[i]; j != i; j = t.parent[j] {
				cut = min(cut, j)
			}
			t.parent[cut] = -1
			t.Orphans = append(t.Orphans, cut)
		}
		for _, c := range chain {
			state[c] = done
		}
	}
	sort.Ints(t.Orphans)
}

// Lookup returns the index of the span with the given id.
func (t *Trace) Lookup(id SpanID) (int, bool) {
	i, ok := t.index[id]
	return i, ok
}

// Parent returns the index of span i's parent, or -1 when it is a root or its
// parent is missing.
func (t *Trace) Parent(i int) int { return t.parent[i] }

// Tops returns the starting points of a walk over the whole trace: the roots,
// then the spans whose parent is missing.
func (t *Trace) Tops() []int {
	out := make([]int, 0, len(t.Roots)+len(t.Orphans))
	out = append(out, t.Roots...)
	return append(out, t.Orphans...)
}
