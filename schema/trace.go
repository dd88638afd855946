package schema

import "sort"

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
func NewTrace(spans []Span) *Trace {
	t := &Trace{Children: make(map[int][]int), index: make(map[SpanID]int, len(spans))}
	if len(spans) == 0 {
		return t
	}
	t.ID = spans[0].TraceID
	t.Spans = make([]Span, 0, len(spans))
	seen := make(map[SpanID]struct{}, len(spans))
	for i := range spans {
		if _, dup := seen[spans[i].SpanID]; dup {
			t.Duplicates++
			continue
		}
		seen[spans[i].SpanID] = struct{}{}
		t.Spans = append(t.Spans, spans[i])
	}
	sort.SliceStable(t.Spans, func(i, j int) bool {
		a, b := &t.Spans[i], &t.Spans[j]
		if a.StartNs != b.StartNs {
			return a.StartNs < b.StartNs
		}
		return string(a.SpanID[:]) < string(b.SpanID[:])
	})
	for i := range t.Spans {
		t.index[t.Spans[i].SpanID] = i
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
	for i, p := range t.parent {
		if p >= 0 {
			t.Children[p] = append(t.Children[p], i)
		}
	}
	return t
}

// breakCycles finds spans whose parent chain never reaches a root or orphan
// and cuts each cycle once, turning the cut span into an orphan. It is linear:
// every span is coloured once.
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
			// i is on the chain just walked: a cycle. Cut it at i.
			t.parent[i] = -1
			t.Orphans = append(t.Orphans, i)
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
