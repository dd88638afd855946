package ingest

import (
	"runtime"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/budgetd/budgetd/ingest/ingesttest"
)

// decodedAlloc is the heap ConvertProto allocates converting msg.
func decodedAlloc(t *testing.T, msg []byte) int64 {
	t.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	c, err := NewConverter(DefaultLimits())
	require.NoError(t, err)
	res, err := c.ConvertProto(msg)
	require.NoError(t, err)
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(res)
	return int64(after.TotalAlloc - before.TotalAlloc)
}

// manyAttrs is one request of spans spans with perSpan attributes each,
// set by put, and events and links of as many attributes each.
func manyAttrs(t *testing.T, spans, perSpan, events int, put func(m pcommon.Map, key string)) []byte {
	t.Helper()
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	for a := range perSpan {
		put(rs.Resource().Attributes(), "r"+strconv.Itoa(a))
	}
	ss := rs.ScopeSpans().AppendEmpty().Spans()
	for i := range spans {
		sp := ss.AppendEmpty()
		// Valid spans, which the conversion keeps.
		sp.SetTraceID(pcommon.TraceID{1, byte(i), byte(i >> 8)})
		sp.SetSpanID(pcommon.SpanID{1, byte(i), byte(i >> 8)})
		sp.SetStartTimestamp(1_000)
		sp.SetEndTimestamp(2_000)
		for a := range perSpan {
			put(sp.Attributes(), strconv.Itoa(a))
		}
		for range events {
			ev := sp.Events().AppendEmpty()
			lk := sp.Links().AppendEmpty()
			for a := range perSpan {
				put(ev.Attributes(), strconv.Itoa(a))
				put(lk.Attributes(), strconv.Itoa(a))
			}
		}
	}
	msg, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	require.NoError(t, err)
	return msg
}

// TestDecodedSizeBoundsDecoding checks the estimate the in-flight budget
// charges against what ConvertProto really allocates converting a
// request, from a realistic one (2.6 times its size) to the smallest
// attributes there are (5.7 times): never below it, and never more than
// twice it, so the budget neither lets memory run past it nor refuses what
// fits.
func TestDecodedSizeBoundsDecoding(t *testing.T) {
	nested := func(m pcommon.Map, key string) {
		s := m.PutEmptySlice(key)
		for range 4 {
			s.AppendEmpty().SetEmptyMap().PutEmptySlice("x").AppendEmpty()
		}
	}
	cases := map[string][]byte{
		"realistic spans":    mustMarshal(t, ingesttest.Spans(1, 1000)),
		"int attributes":     manyAttrs(t, 200, 1000, 0, func(m pcommon.Map, k string) { m.PutInt(k, 1<<31) }),
		"empty attributes":   manyAttrs(t, 200, 1000, 0, func(m pcommon.Map, k string) { m.PutEmpty(k) }),
		"empty strings":      manyAttrs(t, 200, 1000, 0, func(m pcommon.Map, k string) { m.PutStr(k, "") }),
		"long strings":       manyAttrs(t, 100, 100, 0, func(m pcommon.Map, k string) { m.PutStr(k, string(make([]byte, 2000))) }),
		"events and links":   manyAttrs(t, 100, 10, 50, func(m pcommon.Map, k string) { m.PutBool(k, true) }),
		"nested values":      manyAttrs(t, 100, 100, 0, nested),
		"empty spans":        manyAttrs(t, 20000, 0, 0, nil),
		"spans with 1 event": manyAttrs(t, 5000, 0, 1, nil),
	}
	for name, msg := range cases {
		t.Run(name, func(t *testing.T) {
			got, est := decodedAlloc(t, msg), decodedSize(msg)
			t.Logf("%s, %d bytes: decoded %d (%.1f×), estimated %d (%.1f×)", name, len(msg), got, float64(got)/float64(len(msg)), est, float64(est)/float64(len(msg)))
			require.GreaterOrEqual(t, est, got, "the estimate is a bound")
			require.LessOrEqual(t, est, 2*got, "the estimate does not charge twice what decoding takes")
		})
	}
}

// TestDecodedSizeOfDeepNesting checks that a value nested far deeper than
// any instrumentation writes is estimated without following it (no
// recursion per level) and still charged at least its size.
func TestDecodedSizeOfDeepNesting(t *testing.T) {
	// A span attribute whose value is an array holding one value holding
	// an array..., 100,000 deep. The sizes are worked out inside out
	// first, so the message is written front to back in one pass.
	const depth = 100_000
	lenLen := func(n int) int { return len(protowire.AppendVarint(nil, uint64(n))) }
	value := make([]int, depth+1) // value[k]: an AnyValue k arrays deep
	array := make([]int, depth+1) // array[k]: the ArrayValue inside value[k]
	for k := 1; k <= depth; k++ {
		array[k] = 1 + lenLen(value[k-1]) + value[k-1]
		value[k] = 1 + lenLen(array[k]) + array[k]
	}
	field := func(b []byte, tag byte, n int) []byte { return protowire.AppendVarint(append(b, tag), uint64(n)) }
	kv := 1 + lenLen(value[depth]) + value[depth]
	span := 1 + lenLen(kv) + kv
	scope := 1 + lenLen(span) + span
	rs := 1 + lenLen(scope) + scope
	msg := field(nil, 0x0a, rs)          // request.resource_spans
	msg = field(msg, 0x12, scope)        // ResourceSpans.scope_spans
	msg = field(msg, 0x12, span)         // ScopeSpans.spans
	msg = field(msg, 0x4a, kv)           // Span.attributes
	msg = field(msg, 0x12, value[depth]) // KeyValue.value
	for k := depth; k >= 1; k-- {
		msg = field(msg, 0x2a, array[k])   // AnyValue.array_value
		msg = field(msg, 0x0a, value[k-1]) // ArrayValue.values
	}
	require.Equal(t, 1+lenLen(rs)+rs, len(msg))
	require.Greater(t, decodedSize(msg), int64(len(msg))*decodedPerAttr/4)
}

func mustMarshal(t testing.TB, td ptrace.Traces) []byte {
	t.Helper()
	msg, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	require.NoError(t, err)
	return msg
}

// FuzzDecodedSize checks that the scan takes any bytes, well-formed or
// not, without failing, never charges less than the bytes themselves, and
// sums what reading every field with protowire sums (itemsByProtowire):
// items reads the common shapes in line.
func FuzzDecodedSize(f *testing.F) {
	f.Add(mustMarshal(f, ingesttest.Spans(1, 20)))
	f.Add([]byte{0x0a, 0x05, 0x12, 0x03, 0x12, 0x01, 0x4a})
	f.Add([]byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f})
	// Spans whose attribute follows a field of each shape items reads in
	// line or leaves to protowire, so that a shape read wrong miscounts.
	attr := protowire.AppendBytes(protowire.AppendTag(nil, fieldSpanAttrs, protowire.BytesType), []byte{0x0a, 0x01, 'k'})
	for _, field := range [][]byte{
		protowire.AppendFixed32(protowire.AppendTag(nil, 16, protowire.Fixed32Type), 7), // a tag of two bytes
		protowire.AppendFixed32(protowire.AppendTag(nil, 14, protowire.Fixed32Type), 7),
		protowire.AppendFixed64(protowire.AppendTag(nil, 7, protowire.Fixed64Type), 7),
		protowire.AppendVarint(protowire.AppendTag(nil, 6, protowire.VarintType), 2),
		protowire.AppendVarint(protowire.AppendTag(nil, 6, protowire.VarintType), 300),
		protowire.AppendBytes(protowire.AppendTag(nil, 5, protowire.BytesType), make([]byte, 200)), // a length of two bytes
		protowire.AppendTag(protowire.AppendVarint(protowire.AppendTag(nil, 3, protowire.StartGroupType), 9), 3, protowire.EndGroupType),
		protowire.AppendTag(nil, 4, protowire.EndGroupType),
		{0x0e, 0x01}, // wire type 6
		{0x00, 0x01}, // field 0
		{0x39, 0x01}, // a fixed64 cut short
	} {
		span := append(append(append([]byte(nil), attr...), field...), attr...)
		scope := protowire.AppendBytes(protowire.AppendTag(nil, fieldSpans, protowire.BytesType), span)
		rs := protowire.AppendBytes(protowire.AppendTag(nil, fieldScopeSpans, protowire.BytesType), scope)
		f.Add(protowire.AppendBytes(protowire.AppendTag(nil, fieldResourceSpans, protowire.BytesType), rs))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		require.GreaterOrEqual(t, decodedSize(msg), int64(len(msg)))
		require.Equal(t, itemsByProtowire(msg, requestLevel, 0), items(msg, requestLevel, 0))
	})
}

// itemsByProtowire is items reading every field with protowire, as it did
// before it read the common shapes in line.
func itemsByProtowire(msg []byte, l level, depth int) int64 {
	if depth > maxScanDepth {
		return int64(len(msg)) / 2 * decodedPerAttr
	}
	var sum int64
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return sum
		}
		msg = msg[n:]
		if typ != protowire.BytesType {
			n = protowire.ConsumeFieldValue(num, typ, msg)
			if n < 0 {
				return sum
			}
			msg = msg[n:]
			continue
		}
		body, n := protowire.ConsumeBytes(msg)
		if n < 0 {
			return sum
		}
		msg = msg[n:]
		if next, cost, ok := child(l, num); ok {
			sum += cost + itemsByProtowire(body, next, depth+1)
		}
	}
	return sum
}
