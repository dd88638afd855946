package analyze

import (
	"math/rand/v2"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/ingest"
	"github.com/budgetd/budgetd/ingest/ingesttest"
	"github.com/budgetd/budgetd/schema"
)

func asmSpan(trace, span byte) schema.Span {
	var s schema.Span
	s.TraceID[0], s.SpanID[0] = trace, span
	return s
}

func readyIDs(as []Assembled) []byte {
	var out []byte
	for _, a := range as {
		out = append(out, a.ID[0])
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func TestAssembler(t *testing.T) {
	cfg := AssemblerConfig{Idle: 10 * time.Second, MaxWait: time.Minute, MaxTraces: 2, MaxSpansPerTrace: 3, MaxSpans: 100,
		MaxBytes: 1 << 20, MaxBytesPerTrace: 1 << 20, RememberClosed: 1}
	require.NoError(t, cfg.Validate())
	t0 := time.Unix(1_700_000_000, 0)

	t.Run("idle and max wait", func(t *testing.T) {
		a := NewAssembler(cfg)
		a.Add([]schema.Span{asmSpan(1, 1)}, t0)
		a.Add([]schema.Span{asmSpan(2, 1)}, t0)
		require.Empty(t, a.Ready(t0.Add(9*time.Second), false), "not idle yet")
		// Trace 2 keeps receiving spans every 5 s; it must still go at MaxWait.
		for s := 5 * time.Second; s < time.Minute; s += 5 * time.Second {
			a.Add([]schema.Span{asmSpan(2, byte(s/time.Second))}, t0.Add(s))
			if s == 10*time.Second {
				require.Equal(t, []byte{1}, readyIDs(a.Ready(t0.Add(s), false)), "trace 1 went idle")
			}
		}
		require.Empty(t, a.Ready(t0.Add(59*time.Second), false))
		got := a.Ready(t0.Add(time.Minute), false)
		require.Equal(t, []byte{2}, readyIDs(got), "max wait bounds a busy trace")
		require.Equal(t, 3, got[0].Len(), "max spans per trace")
		require.Len(t, got[0].Spans(), 3)
		require.EqualValues(t, 9, a.Counters().DroppedSpanOverflow)
	})

	t.Run("max traces", func(t *testing.T) {
		a := NewAssembler(cfg)
		a.Add([]schema.Span{asmSpan(1, 1), asmSpan(2, 1), asmSpan(3, 1), asmSpan(3, 2)}, t0)
		traces, spans := a.Pending()
		require.Equal(t, 2, traces)
		require.Equal(t, 2, spans)
		require.EqualValues(t, 2, a.Counters().DroppedTraceOverflow)
	})

	t.Run("max spans", func(t *testing.T) {
		small := cfg
		small.MaxSpans = 4
		a := NewAssembler(small)
		a.Add([]schema.Span{asmSpan(1, 1), asmSpan(1, 2), asmSpan(1, 3), asmSpan(2, 1), asmSpan(2, 2), asmSpan(2, 3)}, t0)
		_, spans := a.Pending()
		require.Equal(t, 4, spans)
		require.EqualValues(t, 2, a.Counters().DroppedSpansFull)
		a.Add([]schema.Span{asmSpan(1, 4), asmSpan(3, 1)}, t0.Add(time.Second))
		require.EqualValues(t, 4, a.Counters().DroppedSpansFull, "a batch that finds it full")
		traces, _ := a.Pending()
		require.Equal(t, 2, traces, "and starts no trace")
		require.Len(t, a.Ready(t0, true), 2)
		_, spans = a.Pending()
		require.Zero(t, spans, "released spans no longer count")
	})

	t.Run("late spans re-open", func(t *testing.T) {
		a := NewAssembler(cfg)
		a.Add([]schema.Span{asmSpan(1, 1)}, t0)
		require.Len(t, a.Ready(t0, true), 1, "flush releases everything")
		a.Add([]schema.Span{asmSpan(1, 2)}, t0.Add(time.Second))
		got := a.Ready(t0.Add(time.Hour), false)
		require.Len(t, got, 1)
		require.True(t, got[0].Reopened)
		require.Equal(t, []schema.Span{asmSpan(1, 2)}, got[0].Spans(), "only the late span")
		require.EqualValues(t, 1, a.Counters().Reopened)

		// RememberClosed is 1: closing trace 2 forgets trace 1.
		a.Add([]schema.Span{asmSpan(2, 1)}, t0)
		a.Ready(t0, true)
		a.Add([]schema.Span{asmSpan(1, 3)}, t0)
		require.False(t, a.Ready(t0, true)[0].Reopened, "forgotten traces start afresh")
	})
}

// TestAssemblerBytes checks the byte bounds: spans past max_bytes_per_trace
// or max_bytes are dropped and counted, and released traces give their
// bytes back.
func TestAssemblerBytes(t *testing.T) {
	big := func(trace, span byte) schema.Span {
		s := asmSpan(trace, span)
		s.Name = strings.Repeat("n", 1000)
		return s
	}
	one := big(1, 1)
	_, packed := holdOne(&one)
	per := heldSpanBytes + int64(len(packed))
	cfg := AssemblerConfig{Idle: time.Second, MaxWait: time.Minute, MaxTraces: 10, MaxSpansPerTrace: 100, MaxSpans: 100,
		MaxBytes: 5 * per, MaxBytesPerTrace: 3 * per}
	require.NoError(t, cfg.Validate())
	t0 := time.Unix(1_700_000_000, 0)
	a := NewAssembler(cfg)
	a.Add([]schema.Span{big(1, 1), big(1, 2), big(1, 3), big(1, 4)}, t0)
	require.Equal(t, uint64(1), a.Counters().DroppedBytesOverflow, "the fourth span is over the trace's bound")
	a.Add([]schema.Span{big(2, 1), big(2, 2), big(2, 3)}, t0)
	require.Equal(t, uint64(1), a.Counters().DroppedBytesFull, "the third span of trace 2 is over the total")
	require.Equal(t, 5*per, a.HeldBytes())
	require.Len(t, a.Ready(t0.Add(2*time.Second), false), 2)
	require.Zero(t, a.HeldBytes(), "released traces give their bytes back")
	require.Greater(t, per, int64(1000), "a span's strings count")
}

// TestAssemblerPlacesSpansAcrossBatches sends realistic traces in three
// batches, each trace's spans interleaved with others' and split between
// batches, and expects every released trace to unpack into Compact's spans
// in arrival order: each span's bytes placed in its trace's, whichever
// batch brought them. Spans over a trace's bound are dropped (and leave no
// bytes behind).
func TestAssemblerPlacesSpansAcrossBatches(t *testing.T) {
	conv, err := ingest.NewConverter(ingest.DefaultLimits())
	require.NoError(t, err)
	spans := conv.Convert(ingesttest.Spans(7, 3_000)).Spans
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(spans), func(i, j int) { spans[i], spans[j] = spans[j], spans[i] })
	cfg := DefaultAssemblerConfig()
	cfg.MaxSpansPerTrace, cfg.MaxBytesPerTrace = 7, 1<<20
	want := map[schema.TraceID][]schema.Span{}
	for _, s := range spans {
		if len(want[s.TraceID]) < cfg.MaxSpansPerTrace {
			want[s.TraceID] = append(want[s.TraceID], Compact(s))
		}
	}
	t0 := time.Unix(1_700_000_000, 0)
	a := NewAssembler(cfg)
	a.Add(spans[:1_000], t0)
	a.Add(spans[1_000:1_001], t0)
	a.Add(spans[1_001:], t0)
	ready := a.Ready(t0.Add(cfg.Idle), false)
	require.Len(t, ready, len(want))
	for _, tr := range ready {
		require.Equal(t, want[tr.ID], tr.Spans(), "trace %s", tr.ID)
		require.Equal(t, len(tr.packed), sumPacked(tr.held), "trace %s: its bytes are its spans'", tr.ID)
	}
	require.Positive(t, a.Counters().DroppedSpanOverflow, "some traces are over the bound")
}

func sumPacked(held []heldSpan) int {
	n := 0
	for _, h := range held {
		n += int(h.n)
	}
	return n
}

// TestHeldSpanHasNoPointers keeps heldSpan free of pointers: assembly holds
// hundreds of thousands of them, and the collector skips a slice of them
// whole only while they have none (docs/performance.md, round 2 step 47).
func TestHeldSpanHasNoPointers(t *testing.T) {
	require.False(t, hasPointers(reflect.TypeFor[heldSpan]()))
	require.True(t, hasPointers(reflect.TypeFor[struct {
		a uint64
		b [2]struct{ s string }
	}]()), "a string nested in an array of structs")
}

// hasPointers reports whether a value of typ holds a pointer the collector
// follows.
func hasPointers(typ reflect.Type) bool {
	switch typ.Kind() {
	case reflect.Array:
		return typ.Len() > 0 && hasPointers(typ.Elem())
	case reflect.Struct:
		for i := range typ.NumField() {
			if hasPointers(typ.Field(i).Type) {
				return true
			}
		}
		return false
	case reflect.Pointer, reflect.String, reflect.Slice, reflect.Map, reflect.Interface, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		return true
	}
	return false
}

func TestAssemblerConfigValidate(t *testing.T) {
	c := DefaultAssemblerConfig()
	require.NoError(t, c.Validate())
	c.Idle, c.MaxTraces = 0, 0
	err := c.Validate()
	require.ErrorContains(t, err, "analyze.assembly.idle must be > 0")
	require.ErrorContains(t, err, "analyze.assembly.max_traces must be > 0")
	c = DefaultAssemblerConfig()
	c.MaxBytes, c.MaxBytesPerTrace = 1<<33, 1<<32
	require.ErrorContains(t, c.Validate(), "analyze.assembly.max_bytes_per_trace must be < 4 GiB")
}
