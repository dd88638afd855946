package analyze

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/schema"
)

// randomTraces makes n traces of every shape the analysis treats apart:
// handler and middleware spans inside services (INTERNAL, some recording a
// budget, a timeout or an error of their own), calls with and without a
// callee span, retries, messages, clocks skewed past the tolerance, roots
// with and without a budget, and spans whose parent is missing.
func randomTraces(seed uint64, n int) [][]schema.Span {
	r := rand.New(rand.NewPCG(seed, 7))
	services := []string{"gateway", "order", "pricing", "stock", ""}
	var out [][]schema.Span
	for t := range n {
		var specs []sp
		id := 0
		var add func(parent int, svc string, kind schema.SpanKind, start, end float64, depth int)
		add = func(parent int, svc string, kind schema.SpanKind, start, end float64, depth int) {
			id++
			me := id
			s := sp{id: me, parent: parent, svc: svc, name: "op" + string(rune('a'+r.IntN(3))), kind: kind, start: start, end: end}
			switch {
			case kind == schema.KindServer && r.IntN(2) == 0:
				s.attrs = attrs(rem(float64(50 + r.IntN(500))))
			case kind == schema.KindClient:
				s.attrs = attrs(tmo(float64(20+r.IntN(400))), attempt(1))
				if r.IntN(4) == 0 {
					s.attrs = append(s.attrs, timedOut())
					s.status = schema.StatusError
				}
			case kind == schema.KindInternal && r.IntN(8) == 0:
				s.attrs = attrs(rem(float64(10 + r.IntN(300))))
			case kind == schema.KindInternal && r.IntN(8) == 0:
				s.status = schema.StatusError
			case kind == schema.KindInternal && r.IntN(10) == 0:
				s.attrs = attrs(timedOut())
			}
			specs = append(specs, s)
			if depth >= 4 || end-start < 4 {
				return
			}
			at := start + 1
			for range r.IntN(4) {
				span := (end - at) / 2
				if span < 2 {
					break
				}
				cs, ce := at, at+span*r.Float64()
				switch k := r.IntN(10); {
				case k < 5 && kind != schema.KindClient && kind != schema.KindProducer:
					add(me, svc, schema.KindInternal, cs, ce, depth+1)
				case k < 8:
					add(me, svc, schema.KindClient, cs, ce, depth+1)
					if r.IntN(5) > 0 {
						callee := services[r.IntN(len(services))]
						ss, se := cs+0.2, ce-0.2
						if r.IntN(6) == 0 { // a server clock ahead of its client's
							ss, se = ss+40, se+40
						}
						add(id, callee, schema.KindServer, ss, se, depth+1)
					}
				default:
					add(me, svc, schema.KindProducer, cs, cs+0.5, depth+1)
					add(id, services[r.IntN(len(services))], schema.KindConsumer, ce, ce+span, depth+1)
				}
				at = ce + 0.5
			}
		}
		rootKind := schema.KindServer
		if r.IntN(3) == 0 {
			rootKind = schema.KindInternal
		}
		add(0, services[r.IntN(len(services))], rootKind, 0, float64(100+r.IntN(400)), 0)
		if r.IntN(5) == 0 && len(specs) > 2 {
			specs = slices.Delete(specs, 1, 2) // a partial trace: its children's parent is missing
		}
		out = append(out, build(t+1, specs...))
	}
	return out
}

// fullAndThin analyses traces with one Analyzer (so timeouts are
// inferred across them) and returns each trace's hops, and all of them
// thinned in one call, as the pipeline stores a round's.
func fullAndThin(t *testing.T, traces [][]schema.Span) (full [][]schema.Hop, thin []schema.Hop) {
	t.Helper()
	ts := make([]*schema.Trace, len(traces))
	for i, spans := range traces {
		ts[i] = schema.NewTrace(spans)
	}
	var all []schema.Hop
	for _, r := range New(testConfig()).Traces(ts, testNow) {
		full = append(full, slices.Clone(r.Hops))
		all = append(all, r.Hops...)
	}
	return full, Thin(all)
}

func TestThinLeavesOutOnlyWhatRebuildPutsBack(t *testing.T) {
	traces := randomTraces(1, 2000)
	full, thin := fullAndThin(t, traces)
	stored := map[schema.TraceID][]schema.Hop{}
	for _, h := range thin {
		stored[h.TraceID] = append(stored[h.TraceID], h)
	}
	var hops, left, remaining, inferred int
	for i, spans := range traces {
		want := full[i]
		kept := stored[spans[0].TraceID]
		got := Rebuild(spans, slices.Clone(kept))
		require.Len(t, got, len(want), "trace %d", i+1)
		byID := map[schema.SpanID]*schema.Hop{}
		for k := range got {
			byID[got[k].SpanID] = &got[k]
		}
		isKept := map[schema.SpanID]bool{}
		for _, h := range kept {
			isKept[h.SpanID] = true
		}
		for k := range want {
			h := &want[k]
			g := byID[h.SpanID]
			require.NotNil(t, g, "trace %d span %s", i+1, h.SpanID)
			require.True(t, sameHop(h, g), "trace %d span %s: rebuilt %+v, analysed %+v", i+1, h.SpanID, *g, *h)
			hops++
			if isKept[h.SpanID] {
				continue
			}
			left++
			require.False(t, h.Kind.IsEntry() || h.Kind.IsCall() || h.ParentSpanID.IsZero(), "an entry, call or root left out: %+v", *h)
			require.Zero(t, h.PathCalls)
			if h.RemainingMs != nil {
				remaining++
			}
			if h.InferredRemainingMs != nil {
				inferred++
			}
		}
	}
	t.Logf("%d hops, %d left out (%d with a budget left, %d inferred)", hops, left, remaining, inferred)
	// The check must have had every kind of figure to carry down.
	require.Greater(t, left, hops/10)
	require.Positive(t, remaining)
	require.Positive(t, inferred)
}

func TestThinKeepsWhatASpanRecords(t *testing.T) {
	spans := build(1,
		sp{id: 1, svc: "gw", name: "GET /", kind: schema.KindServer, start: 0, end: 100, attrs: attrs(rem(200))},
		sp{id: 2, parent: 1, svc: "gw", name: "handler", kind: schema.KindInternal, start: 1, end: 90},
		sp{id: 3, parent: 2, svc: "gw", name: "own budget", kind: schema.KindInternal, start: 2, end: 80, attrs: attrs(rem(50))},
		sp{id: 4, parent: 2, svc: "gw", name: "failed", kind: schema.KindInternal, start: 3, end: 10, status: schema.StatusError},
		sp{id: 5, parent: 2, svc: "db", name: "another service", kind: schema.KindInternal, start: 4, end: 10},
		sp{id: 6, parent: 2, svc: "gw", name: "SELECT", kind: schema.KindClient, start: 11, end: 20},
		sp{id: 7, parent: 6, svc: "gw", name: "under a call", kind: schema.KindInternal, start: 12, end: 19},
	)
	r := analyzeSpans(t, spans)
	var kept []schema.SpanID
	for _, h := range Thin(slices.Clone(r.Hops)) {
		kept = append(kept, h.SpanID)
	}
	// The handler says nothing of its own, nor does the span another
	// service recorded without an entry (the analysis puts it on the
	// handler's path, with its deadline). The span under the client is
	// on the entry's path, not on the call's: it keeps its hop.
	require.ElementsMatch(t, []schema.SpanID{spanID(1), spanID(3), spanID(4), spanID(6), spanID(7)}, kept)
}

func TestThinKeepsATraceWhoseSpanIDsRepeat(t *testing.T) {
	for _, n := range []int{3, 40} { // searched and indexed
		specs := []sp{{id: 1, svc: "gw", name: "GET /", kind: schema.KindServer, start: 0, end: 100, attrs: attrs(rem(200))}}
		for k := 2; k <= n; k++ {
			specs = append(specs, sp{id: k, parent: 1, svc: "gw", name: "work", kind: schema.KindInternal, start: float64(k), end: float64(k + 1)})
		}
		hops := analyzeSpans(t, build(1, specs...)).Hops
		require.Len(t, Thin(slices.Clone(hops)), 1, "n=%d", n)
		hops = append(hops, hops[len(hops)-1]) // the same span twice
		require.Len(t, Thin(hops), n+1, "n=%d", n)
	}
}

func TestRebuildWithoutAnAncestorsHop(t *testing.T) {
	spans := build(1,
		sp{id: 1, svc: "gw", name: "GET /", kind: schema.KindServer, start: 0, end: 100, attrs: attrs(rem(200))},
		sp{id: 2, parent: 1, svc: "gw", name: "handler", kind: schema.KindInternal, start: 1, end: 90},
		sp{id: 3, parent: missing, svc: "gw", name: "orphan", kind: schema.KindInternal, start: 1, end: 90},
		sp{id: 4, parent: 3, svc: "gw", name: "below the orphan", kind: schema.KindInternal, start: 2, end: 80},
		sp{id: 5, parent: 6, svc: "gw", name: "a loop", kind: schema.KindInternal, start: 2, end: 80},
		sp{id: 6, parent: 5, svc: "gw", name: "a loop", kind: schema.KindInternal, start: 2, end: 80},
	)
	entry := analyzeSpans(t, spans[:1]).Hops
	got := Rebuild(spans, entry)
	require.Len(t, got, 2)
	require.Equal(t, spanID(2), got[1].SpanID)
	require.Equal(t, 199.0, *got[1].RemainingMs)
	require.Equal(t, "gw:GET /", got[1].Path)
	// A trace not analysed yet has no hops to rebuild from.
	require.Empty(t, Rebuild(spans, nil))
}

// TestRebuildWhenHopsRepeat: hops stored twice (a batch written again
// after a lost acknowledgement) may outnumber the spans while a span
// still has none.
func TestRebuildWhenHopsRepeat(t *testing.T) {
	spans := build(1,
		sp{id: 1, svc: "gw", name: "GET /", kind: schema.KindServer, start: 0, end: 100, attrs: attrs(rem(200))},
		sp{id: 2, parent: 1, svc: "gw", name: "handler", kind: schema.KindInternal, start: 1, end: 90},
	)
	full := analyzeSpans(t, spans).Hops
	stored := Thin(slices.Clone(full))
	require.Len(t, stored, 1)
	got := Rebuild(spans, append(stored, stored...))
	require.Len(t, got, 3)
	require.True(t, sameHop(&full[1], &got[2]), "rebuilt %+v, analysed %+v", got[2], full[1])
}

// TestSameHopComparesEveryField guards Thin against a field added to
// schema.Hop and forgotten by sameHop: a hop differing there would be left
// out and rebuilt without it.
func TestSameHopComparesEveryField(t *testing.T) {
	base := schema.Hop{RemainingMs: schema.Ms(1), BudgetMs: schema.Ms(1), TimeoutMs: schema.Ms(1),
		InferredTimeoutMs: schema.Ms(1), InferredRemainingMs: schema.Ms(1)}
	typ := reflect.TypeFor[schema.Hop]()
	for i := range typ.NumField() {
		other := base
		other.RemainingMs, other.BudgetMs, other.TimeoutMs = schema.Ms(1), schema.Ms(1), schema.Ms(1)
		other.InferredTimeoutMs, other.InferredRemainingMs = schema.Ms(1), schema.Ms(1)
		require.True(t, sameHop(&base, &other))
		f := reflect.ValueOf(&other).Elem().Field(i)
		switch f.Kind() {
		case reflect.Pointer:
			f.Set(reflect.ValueOf(schema.Ms(2)))
		case reflect.String:
			f.SetString("x")
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Float32, reflect.Float64:
			f.SetFloat(3)
		case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			f.SetUint(3)
		case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Int:
			f.SetInt(3)
		case reflect.Array:
			f.Index(0).SetUint(1)
		default:
			t.Fatalf("field %s: kind %s not covered by this test", typ.Field(i).Name, f.Kind())
		}
		require.False(t, sameHop(&base, &other), "sameHop ignores %s", typ.Field(i).Name)
	}
}

func BenchmarkThin(b *testing.B) {
	traces := randomTraces(2, 500)
	ts := make([]*schema.Trace, len(traces))
	for i, spans := range traces {
		ts[i] = schema.NewTrace(spans)
	}
	var all []schema.Hop
	for _, r := range New(testConfig()).Traces(ts, testNow) {
		all = append(all, r.Hops...)
	}
	buf := make([]schema.Hop, len(all))
	b.ReportAllocs()
	for b.Loop() {
		copy(buf, all)
		Thin(buf)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(all)), "ns/hop")
}
