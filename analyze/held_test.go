package analyze

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/ingest"
	"github.com/budgetd/budgetd/ingest/ingesttest"
	"github.com/budgetd/budgetd/schema"
)

// TestHeldSpanIsCompact packs spans as assembly holds them and expects each
// to unpack into exactly what Compact keeps of it: every fixture, realistic
// generated spans, and spans that stretch the packing (every kept key, long
// strings whose lengths take several bytes, attribute counts that take one
// to three, events with and without a cancellation source, other events and
// attributes to drop).
func TestHeldSpanIsCompact(t *testing.T) {
	var spans []schema.Span
	for _, fs := range fixtureSpans(t) {
		spans = append(spans, fs...)
	}
	conv, err := ingest.NewConverter(ingest.DefaultLimits())
	require.NoError(t, err)
	spans = append(spans, conv.Convert(ingesttest.Spans(1, 2_000)).Spans...)

	require.LessOrEqual(t, len(heldKeys), 256, "a held attribute keeps its key's place in a byte")
	long := strings.Repeat("x", 70_000)
	var every schema.Attributes
	for i, k := range heldKeys {
		every = append(every, schema.Attr{Key: k, Type: schema.AttrType(i % 5), Value: strings.Repeat("v", i*40)})
		every = append(every, schema.Str("dropped."+k, "y"))
	}
	// Counts of kept attributes whose length takes one, two and three bytes.
	for _, n := range []int{127, 128, 200, 20_000} {
		var many schema.Attributes
		for i := range n {
			many = append(many, schema.Str("peer.service", strconv.Itoa(i)), schema.Str("other", "o"))
		}
		spans = append(spans, schema.Span{Service: "many", Attrs: many, StatusCode: schema.StatusError,
			Events: []schema.Event{{TimeNs: 3, Name: schema.EventCancelled}}})
	}
	spans = append(spans,
		schema.Span{},
		schema.Span{Service: long, Name: long[:300], StatusCode: schema.StatusError, StatusMessage: "context deadline exceeded",
			Kind: schema.KindConsumer, StartNs: 1<<63 + 5, EndNs: 1<<64 - 1, Attrs: every},
		schema.Span{Service: "s", Name: "n", Attrs: schema.Attributes{schema.Str("peer.service", long)},
			Events: []schema.Event{
				{TimeNs: 1, Name: schema.EventCancelled},
				{TimeNs: 2, Name: schema.EventException, Attrs: schema.Attributes{schema.Str(schema.AttrExceptionType, "TimeoutError")}},
				{TimeNs: 1<<64 - 1, Name: schema.EventCancelled, Attrs: schema.Attributes{schema.Str("other", "o"), schema.Str(schema.AttrCancelSource, long[:200])}},
			}},
	)
	all := Assembled{ID: schema.TraceID{9}}
	for i := range spans {
		s := &spans[i]
		s.TraceID, s.SpanID, s.ParentSpanID = schema.TraceID{byte(i), 1}, schema.SpanID{byte(i), 2}, schema.SpanID{byte(i), 3}
		h, packed := holdOne(s)
		require.Equal(t, Compact(*s), h.span(s.TraceID, packed, nil), "span %d: %s %s", i, s.Service, s.Name)
		_, after := pack(s, []byte(all.packed))
		require.Equal(t, packed, string(after[len(all.packed):]), "span %d: packed after others as alone", i)
		require.Equal(t, len(Compact(*s).Attrs), int(h.attrs), "span %d: attribute count", i)
		h.at = uint32(len(all.packed))
		all.held = append(all.held, h)
		all.packed += packed
	}
	require.Greater(t, len(spans), 2_000)

	// Unpacked together, the spans' attributes share one slice, each
	// capped so that an append to one leaves the next alone.
	unpacked := all.Spans()
	for i := range spans {
		want := Compact(spans[i])
		want.TraceID = all.ID
		require.Equal(t, want, unpacked[i], "span %d", i)
		require.Equal(t, len(unpacked[i].Attrs), cap(unpacked[i].Attrs), "span %d", i)
	}
}

// BenchmarkHold measures packing a realistic span as assembly does for
// every span the drain stores (ns/span).
func BenchmarkHold(b *testing.B) {
	conv, err := ingest.NewConverter(ingest.DefaultLimits())
	require.NoError(b, err)
	spans := conv.Convert(ingesttest.Spans(1, 10_000)).Spans
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = buf[:0]
		for i := range spans {
			_, buf = pack(&spans[i], buf)
		}
		if len(buf) == 0 {
			b.Fatal("nothing packed")
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(spans)), "ns/span")
}

// holdOne packs s alone, as the first span of its trace.
func holdOne(s *schema.Span) (heldSpan, string) {
	h, b := pack(s, nil)
	h.n = uint32(len(b))
	return h, string(b)
}
