package record

import (
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/schema"
)

func codecSpans() []schema.Span {
	return []schema.Span{
		{},
		{
			TraceID: schema.TraceID{1, 2, 3}, SpanID: schema.SpanID{4}, ParentSpanID: schema.SpanID{5}, TraceState: "a=b",
			Service: "checkout", Name: "POST /pay ü🚀", Kind: schema.KindClient, StartNs: 1 << 62, EndNs: 1<<62 + 5,
			StatusCode: schema.StatusError, StatusMessage: "boom\x00\xff", ScopeName: "s", ScopeVersion: "1",
			ResourceAttrs: schema.Attributes{schema.Str("service.name", "checkout")},
			Attrs:         schema.Attributes{schema.Int(schema.AttrTimeoutMs, 1500), schema.Strings(schema.AttrHeaderGRPCTimeout, "1S"), {Key: "", Type: schema.AttrEmpty}},
			Events:        []schema.Event{{TimeNs: 7, Name: schema.EventCancelled, Attrs: schema.Attributes{schema.Str(schema.AttrCancelSource, "deadline")}}, {Name: "bare"}},
			Links:         []schema.Link{{TraceID: schema.TraceID{9}, SpanID: schema.SpanID{8}, TraceState: "x", Attrs: schema.Attributes{schema.Bool("k", true)}}},
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

func TestAppendDecodedSpans(t *testing.T) {
	want := codecSpans()
	rec := AppendSpans(nil, want)
	got, err := AppendDecodedSpans(nil, rec)
	require.NoError(t, err)
	got, err = AppendDecodedSpans(got, rec)
	require.NoError(t, err)
	require.Equal(t, append(append([]schema.Span{}, want...), want...), got, "two records into one slice")

	kept, err := AppendDecodedSpans(got, rec[:len(rec)-1])
	require.ErrorIs(t, err, ErrBadEncoding)
	require.Len(t, kept, 2*len(want), "a bad record leaves what was decoded before")
}

// TestSpanCodecSharesResources checks that spans of one resource carry its
// attributes once in a record, and share them again when decoded.
func TestSpanCodecSharesResources(t *testing.T) {
	one := codecSpans()[1]
	one.ResourceAttrs = schema.Attributes{schema.Str("service.name", "checkout"), schema.Str("host.name", "node-1"), schema.Str("k8s.pod.name", "checkout-7d4b9")}
	other := one
	other.ResourceAttrs = schema.Attributes{schema.Str("service.name", "quote")}
	spans := []schema.Span{one, one, one, other, one}
	data := AppendSpans(nil, spans)
	got, err := DecodeSpans(data)
	require.NoError(t, err)
	require.Equal(t, spans, got)
	require.Same(t, &got[0].ResourceAttrs[0], &got[2].ResourceAttrs[0], "consecutive spans of one resource share it")
	require.NotSame(t, &got[0].ResourceAttrs[0], &got[4].ResourceAttrs[0], "a resource seen again after another is written again")

	unshared := []schema.Span{one, one, one, other, one}
	for i := range unshared {
		unshared[i].ResourceAttrs = append(schema.Attributes(nil), unshared[i].ResourceAttrs...)
	}
	full := AppendSpans(nil, unshared)
	require.Less(t, len(data), len(full)-100, "two repeats of a three-attribute resource are left out")
	again, err := DecodeSpans(full)
	require.NoError(t, err)
	require.Equal(t, spans, again)
}

// TestSizeIsTheRecordsLength checks Size against what AppendSpans writes:
// the spans above, and random spans whose strings, lists and numbers cross
// every uvarint length, in runs that share their resource and runs that
// do not.
func TestSizeIsTheRecordsLength(t *testing.T) {
	require.Equal(t, len(AppendSpans(nil, nil)), Size(nil))
	require.Equal(t, len(AppendSpans(nil, codecSpans())), Size(codecSpans()))

	r := rand.New(rand.NewPCG(1, 2))
	str := func() string { return strings.Repeat("x", []int{0, 1, 127, 128, 16383, 16384}[r.IntN(6)]) }
	num := func() uint64 { return r.Uint64() >> r.IntN(64) }
	attrs := func() schema.Attributes {
		as := make(schema.Attributes, []int{0, 1, 3, 200}[r.IntN(4)])
		for i := range as {
			as[i] = schema.Attr{Key: str(), Type: schema.AttrType(r.IntN(8)), Value: str()}
		}
		return as
	}
	for run := range 50 {
		spans := make([]schema.Span, r.IntN(20))
		resource := attrs()
		for i := range spans {
			s := &spans[i]
			s.TraceState, s.Service, s.Name, s.StatusMessage, s.ScopeName, s.ScopeVersion = str(), str(), str(), str(), str(), str()
			s.StartNs, s.EndNs = num(), num()
			s.ResourceAttrs, s.Attrs = resource, attrs()
			if r.IntN(3) == 0 {
				resource = attrs()
			}
			for range r.IntN(3) {
				s.Events = append(s.Events, schema.Event{TimeNs: num(), Name: str(), Attrs: attrs()})
				s.Links = append(s.Links, schema.Link{TraceState: str(), Attrs: attrs()})
			}
		}
		require.Equal(t, len(AppendSpans(nil, spans)), Size(spans), "run %d", run)
	}
}

// TestSpanCodecReadsVersion1 decodes a record written by the version 1
// codec (testdata/spans-v1.bin: codecSpans and two more copies of its
// second span), which a log written before the upgrade still holds.
func TestSpanCodecReadsVersion1(t *testing.T) {
	data, err := os.ReadFile("testdata/spans-v1.bin")
	require.NoError(t, err)
	require.EqualValues(t, 1, data[0])
	want := codecSpans()
	want = append(want, want[1], want[1])
	got, err := DecodeSpans(data)
	require.NoError(t, err)
	require.Equal(t, want, got)
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
	first := AppendSpans(nil, codecSpans()[1:2])
	resourceAt := 2 + 16 + 8 + 8 + 4 + 9 + 1 + 16 + 2 + 9 + 9 + 7 + 2 + 2 // the first span's resource count
	require.EqualValues(t, 2, first[resourceAt], "offset of the resource count")
	first[resourceAt] = 0
	_, err = DecodeSpans(first)
	require.ErrorIs(t, err, ErrBadEncoding, "the first span cannot share a previous resource")
}

// FuzzDecodeSpans: arbitrary bytes never panic, and whatever decodes
// re-encodes to bytes that decode to the same spans.
func FuzzDecodeSpans(f *testing.F) {
	f.Add(AppendSpans(nil, codecSpans()))
	f.Add([]byte{1, 0})
	if v1, err := os.ReadFile("testdata/spans-v1.bin"); err == nil {
		f.Add(v1)
	}
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
	spans := make([]schema.Span, 100)
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
	b.Run("size", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			if Size(spans) != len(data) {
				b.Fatal("size differs")
			}
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

// TestHeldBytesCountsWhatDecodingAllocates decodes a record of
// attribute-heavy spans, whose structures outweigh the record tenfold, and
// checks that the record's size plus HeldBytes is within a tenth of what
// decoding allocated; and that a resource shared by consecutive spans is
// counted once, as decoding shares it.
func TestHeldBytesCountsWhatDecodingAllocates(t *testing.T) {
	spans := make([]schema.Span, 200)
	for i := range spans {
		spans[i].Attrs = make(schema.Attributes, 500)
		for a := range spans[i].Attrs {
			spans[i].Attrs[a] = schema.Attr{Key: strconv.Itoa(a), Type: schema.AttrEmpty}
		}
	}
	rec := AppendSpans(nil, spans)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	got, err := AppendDecodedSpans(nil, rec)
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	allocated := float64(after.TotalAlloc - before.TotalAlloc)
	estimate := float64(len(rec) + HeldBytes(got))
	t.Logf("record %d bytes, decoding allocated %.0f, estimated %.0f", len(rec), allocated, estimate)
	require.InDelta(t, 1, estimate/allocated, 0.1)

	resource := schema.Attributes{schema.Str("service.name", "a"), schema.Str("host.name", "h")}
	shared := []schema.Span{{ResourceAttrs: resource}, {ResourceAttrs: resource}}
	copied := []schema.Span{{ResourceAttrs: resource}, {ResourceAttrs: slices.Clone(resource)}}
	attr := int(unsafe.Sizeof(schema.Attr{}))
	require.Equal(t, 2*attr, HeldBytes(copied)-HeldBytes(shared))
}
