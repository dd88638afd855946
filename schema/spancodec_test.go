package schema

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func codecSpans() []Span {
	return []Span{
		{},
		{
			TraceID: TraceID{1, 2, 3}, SpanID: SpanID{4}, ParentSpanID: SpanID{5}, TraceState: "a=b",
			Service: "checkout", Name: "POST /pay ü🚀", Kind: KindClient, StartNs: 1 << 62, EndNs: 1<<62 + 5,
			StatusCode: StatusError, StatusMessage: "boom\x00\xff", ScopeName: "s", ScopeVersion: "1",
			ResourceAttrs: Attributes{Str("service.name", "checkout")},
			Attrs:         Attributes{Int(AttrTimeoutMs, 1500), Strings(AttrHeaderGRPCTimeout, "1S"), {Key: "", Type: AttrEmpty}},
			Events:        []Event{{TimeNs: 7, Name: EventCancelled, Attrs: Attributes{Str(AttrCancelSource, "deadline")}}, {Name: "bare"}},
			Links:         []Link{{TraceID: TraceID{9}, SpanID: SpanID{8}, TraceState: "x", Attrs: Attributes{Bool("k", true)}}},
		},
	}
}

func TestSpanCodecRoundTrip(t *testing.T) {
	want := codecSpans()
	got, err := DecodeSpans(AppendSpans(nil, want))
	require.NoError(t, err)
	require.Equal(t, want, got)

	empty, err := DecodeSpans(AppendSpans(nil, nil))
	require.NoError(t, err)
	require.Empty(t, empty)
}

func TestSpanCodecRejectsDamage(t *testing.T) {
	data := AppendSpans(nil, codecSpans())
	for cut := range len(data) - 1 {
		_, err := DecodeSpans(data[:cut])
		require.ErrorIs(t, err, ErrBadEncoding, "truncated at %d", cut)
	}
	_, err := DecodeSpans(append(append([]byte{}, data...), 0))
	require.ErrorIs(t, err, ErrBadEncoding, "trailing bytes")
	_, err = DecodeSpans([]byte{99})
	require.ErrorIs(t, err, ErrBadEncoding, "unknown version")
	_, err = DecodeSpans([]byte{1, 0xff, 0xff, 0xff, 0xff, 0x0f})
	require.ErrorIs(t, err, ErrBadEncoding, "a huge count is refused before allocating")
}

// FuzzDecodeSpans: arbitrary bytes never panic, and whatever decodes
// re-encodes to bytes that decode to the same spans.
func FuzzDecodeSpans(f *testing.F) {
	f.Add(AppendSpans(nil, codecSpans()))
	f.Add([]byte{1, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		spans, err := DecodeSpans(data)
		if err != nil {
			return
		}
		again, err := DecodeSpans(AppendSpans(nil, spans))
		require.NoError(t, err)
		require.Equal(t, spans, again)
	})
}

func BenchmarkSpanCodec(b *testing.B) {
	spans := make([]Span, 100)
	for i := range spans {
		spans[i] = codecSpans()[1]
	}
	data := AppendSpans(nil, spans)
	b.Run("encode", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			buf = AppendSpans(buf[:0], spans)
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeSpans(data); err != nil {
				b.Fatal(err)
			}
		}
	})
}
