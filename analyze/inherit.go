package analyze

import (
	"math"

	"github.com/budgetd/budgetd/schema"
)

// Hops a store need not keep. Much of what real instrumentation records
// is work inside one service: a framework's handler or middleware span, a
// function traced by hand. Such a span has a hop like any other, but it
// says nothing its parent's does not: the same path, the same deadline
// seen a little later, no budget, timeout or attempt of its own. Thin
// leaves out every hop that Inherit rebuilds exactly from its parent's,
// and Rebuild puts them back for a reader that has the trace's spans (the
// trace view). What the store keeps is every entry, every call, and every
// span that records something of its own.
//
// The rule is a check, not a list of span kinds: a hop is left out only
// when rebuilding it gives the same hop, field for field, so a case the
// check does not foresee (a shifted clock, a deadline of its own) keeps
// its row.

// Inherit returns the hop of span s below the span whose hop is parent,
// for a span that records nothing of its own: parent's path, what parent
// had left minus the time between their starts, and nothing else.
func Inherit(parent *schema.Hop, s *schema.Span) schema.Hop {
	h := schema.Hop{
		TraceID: s.TraceID, SpanID: s.SpanID, ParentSpanID: s.ParentSpanID,
		Service: serviceName(s.Service), Operation: s.Name, Kind: s.Kind,
		StartNs: s.StartNs, DurationNs: s.DurationNs(),
		Path: parent.Path, RootPath: parent.RootPath, AnalyzedNs: parent.AnalyzedNs,
	}
	if parent.RemainingMs != nil {
		h.RemainingMs = schema.Ms(leftAt(*parent.RemainingMs, parent.StartNs, h.StartNs))
	}
	if parent.InferredRemainingMs != nil {
		h.InferredRemainingMs = schema.Ms(leftAt(*parent.InferredRemainingMs, parent.StartNs, h.StartNs))
		h.InferenceConfidence = parent.InferenceConfidence
	}
	return h
}

// inherits reports whether Inherit rebuilds h exactly from parent's hop.
// It is Inherit compared with h field for field (sameHop), without
// allocating: it runs on every hop the analysis makes.
func inherits(h, parent *schema.Hop) bool {
	if h.ParentSpanID.IsZero() {
		return false
	}
	want := schema.Hop{
		TraceID: h.TraceID, SpanID: h.SpanID, ParentSpanID: h.ParentSpanID,
		Service: h.Service, Operation: h.Operation, Kind: h.Kind,
		StartNs: h.StartNs, DurationNs: h.DurationNs,
		Path: parent.Path, RootPath: parent.RootPath, AnalyzedNs: parent.AnalyzedNs,
	}
	var ok bool
	if want.RemainingMs, ok = isLeftAt(h.RemainingMs, parent.RemainingMs, parent.StartNs, h.StartNs); !ok {
		return false
	}
	if want.InferredRemainingMs, ok = isLeftAt(h.InferredRemainingMs, parent.InferredRemainingMs, parent.StartNs, h.StartNs); !ok {
		return false
	}
	if want.InferredRemainingMs != nil {
		want.InferenceConfidence = parent.InferenceConfidence
	}
	return sameHop(h, &want)
}

// isLeftAt reports whether got is what a request with ms left at from has
// left at to (leftAt), both absent or both present, and returns got to
// stand for that figure.
func isLeftAt(got, ms *float64, from, to uint64) (*float64, bool) {
	if got == nil || ms == nil {
		return nil, got == nil && ms == nil
	}
	return got, math.Float64bits(*got) == math.Float64bits(leftAt(*ms, from, to))
}

// leftAt is what a request with ms left at from has left at to, computed
// as the analysis computes it (the deadline in nanoseconds minus the
// start): ms came from a whole number of nanoseconds, which msToNs gets
// back exactly for any budget under 26 days.
func leftAt(ms float64, from, to uint64) float64 {
	deadline := msToNs(ms) + int64(from)
	return nsToMs(deadline - int64(to))
}

// Thin returns hops without those Inherit rebuilds exactly from their
// parent's hop, in order, in hops' own array. A parent is looked for among
// the hops of the same trace next to each other (as a Result's are); a
// trace whose span ids repeat keeps every hop, since a reader could not
// tell which parent was meant.
func Thin(hops []schema.Hop) []schema.Hop {
	kept := hops[:0]
	var ids spanIndex
	var drop []bool
	for from := 0; from < len(hops); {
		to := from + 1
		for to < len(hops) && hops[to].TraceID == hops[from].TraceID {
			to++
		}
		trace := hops[from:to]
		// Decided over the whole trace before any hop moves: kept hops
		// are copied down over the ones left out.
		drop = append(drop[:0], make([]bool, len(trace))...)
		if ids.reset(trace) {
			for i := range trace {
				if p := ids.find(trace[i].ParentSpanID); p >= 0 && p != i && inherits(&trace[i], &trace[p]) {
					drop[i] = true
				}
			}
		}
		for i := range trace {
			if !drop[i] {
				kept = append(kept, trace[i])
			}
		}
		from = to
	}
	return kept
}

// spanIndex finds a trace's hops by span id: a short trace by search, a
// long one through a map made once and reused.
type spanIndex struct {
	trace []schema.Hop
	m     map[schema.SpanID]int
}

// searched is the longest trace searched rather than indexed.
const searched = 16

// reset indexes trace and reports whether its span ids are unique.
func (x *spanIndex) reset(trace []schema.Hop) bool {
	x.trace = trace
	if len(trace) <= searched {
		for i := range trace {
			for j := range i {
				if trace[i].SpanID == trace[j].SpanID {
					return false
				}
			}
		}
		return true
	}
	if x.m == nil {
		x.m = make(map[schema.SpanID]int, len(trace))
	}
	clear(x.m)
	for i := range trace {
		if _, seen := x.m[trace[i].SpanID]; seen {
			return false
		}
		x.m[trace[i].SpanID] = i
	}
	return true
}

// find returns the index of the hop of span id, or -1.
func (x *spanIndex) find(id schema.SpanID) int {
	if len(x.trace) > searched {
		if i, ok := x.m[id]; ok {
			return i
		}
		return -1
	}
	for i := range x.trace {
		if x.trace[i].SpanID == id {
			return i
		}
	}
	return -1
}

// sameHop reports whether a and b are equal in every field, optional
// figures by value.
func sameHop(a, b *schema.Hop) bool {
	return a.TraceID == b.TraceID && a.SpanID == b.SpanID && a.ParentSpanID == b.ParentSpanID &&
		a.Service == b.Service && a.Operation == b.Operation && a.Kind == b.Kind &&
		a.Path == b.Path && a.RootPath == b.RootPath &&
		a.CallerService == b.CallerService && a.CallerOperation == b.CallerOperation &&
		a.CalleeService == b.CalleeService && a.CalleeOperation == b.CalleeOperation &&
		a.StartNs == b.StartNs && a.DurationNs == b.DurationNs && a.CalleeDurationNs == b.CalleeDurationNs &&
		a.IsError == b.IsError && a.TimedOut == b.TimedOut &&
		sameMs(a.RemainingMs, b.RemainingMs) && sameMs(a.BudgetMs, b.BudgetMs) && a.BudgetSource == b.BudgetSource &&
		sameMs(a.TimeoutMs, b.TimeoutMs) && a.Attempt == b.Attempt && a.MaxAttempts == b.MaxAttempts &&
		math.Float64bits(a.OrphanedMs) == math.Float64bits(b.OrphanedMs) &&
		a.Rejected == b.Rejected && a.Inferred == b.Inferred &&
		sameMs(a.InferredTimeoutMs, b.InferredTimeoutMs) && sameMs(a.InferredRemainingMs, b.InferredRemainingMs) &&
		math.Float64bits(a.InferenceConfidence) == math.Float64bits(b.InferenceConfidence) &&
		a.PathCalls == b.PathCalls && a.AnalyzedNs == b.AnalyzedNs
}

// sameMs reports whether two optional figures are both absent or hold the
// same bits.
func sameMs(a, b *float64) bool {
	if a == nil || b == nil {
		return a == b
	}
	return math.Float64bits(*a) == math.Float64bits(*b)
}

// Rebuild returns hops (a trace's stored hops) with a hop added for every
// span of spans that has none but whose nearest ancestor with one is
// among spans: the hops Thin left out, rebuilt parents first. A span with
// no such ancestor (its parent not read, or its trace not analysed yet)
// gets none.
func Rebuild(spans []schema.Span, hops []schema.Hop) []schema.Hop {
	// Not skipped when there are as many hops as spans: a batch stored
	// twice (a retry after a lost acknowledgement, a replay) stores its
	// hops twice, and some spans may still have none.
	if len(hops) == 0 {
		return hops
	}
	hopAt := make(map[schema.SpanID]int, len(spans))
	for i := range hops {
		hopAt[hops[i].SpanID] = i
	}
	spanAt := make(map[schema.SpanID]int, len(spans))
	for i := range spans {
		spanAt[spans[i].SpanID] = i
	}
	none := make(map[schema.SpanID]bool) // spans known to have no ancestor with a hop
	var chain []int
	for i := range spans {
		// Up to the nearest span with a hop, then down again.
		chain = chain[:0]
		for j := i; ; {
			id := spans[j].SpanID
			if _, ok := hopAt[id]; ok {
				break
			}
			p, ok := spanAt[spans[j].ParentSpanID]
			if !ok || none[id] || len(chain) == len(spans) {
				for _, k := range chain {
					none[spans[k].SpanID] = true
				}
				none[id] = true
				chain = chain[:0]
				break
			}
			chain = append(chain, j)
			j = p
		}
		for k := len(chain) - 1; k >= 0; k-- {
			s := &spans[chain[k]]
			h := Inherit(&hops[hopAt[s.ParentSpanID]], s)
			hopAt[s.SpanID] = len(hops)
			hops = append(hops, h)
		}
	}
	return hops
}
