package ingest

import (
	"math"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/budgetd/budgetd/ingest/ingesttest"
	"github.com/budgetd/budgetd/schema"
)

// tightLimits are limits small enough that the test requests reach every
// one of them.
func tightLimits() Limits {
	return Limits{
		MaxAttrValueBytes: 16,
		MaxAttrKeyBytes:   6,
		MaxNameBytes:      5,
		MaxSpanAttrs:      4,
		MaxResourceAttrs:  2,
		MaxResourceBytes:  30,
		MaxEventAttrs:     1,
		MaxLinkAttrs:      1,
		MaxSpanEvents:     1,
		MaxSpanLinks:      1,
	}
}

// protoConverters are the converters ConvertProto is compared under: the
// defaults, tight limits, and a time window that refuses some spans.
func protoConverters(t testing.TB) []*Converter {
	c := newTestConverter(t, DefaultLimits())
	windowed, err := c.WithTimeWindow(SpanTimeWindow{MaxAge: time.Second, MaxAhead: time.Second},
		func() time.Time { return time.Unix(0, 1_500) })
	require.NoError(t, err)
	return []*Converter{c, newTestConverter(t, tightLimits()), windowed}
}

// requireSameAsPdata checks that ConvertProto refuses msg exactly when
// pdata's decoder does, and otherwise returns what Convert returns for
// pdata's decoding of it.
func requireSameAsPdata(t *testing.T, converters []*Converter, msg []byte) {
	t.Helper()
	td, pdataErr := decodePdata(msg)
	for _, c := range converters {
		got, err := c.ConvertProto(msg)
		if pdataErr != nil {
			require.Error(t, err, "pdata refuses the message: %v", pdataErr)
			_, release, err := c.ConvertProtoReusing(msg)
			require.Error(t, err, "reusing memory: pdata refuses the message: %v", pdataErr)
			release()
			continue
		}
		require.NoError(t, err, "pdata decodes the message")
		want := c.Convert(td)
		require.Equal(t, want, got)
		reused, release, err := c.ConvertProtoReusing(msg)
		require.NoError(t, err)
		require.Equal(t, want, reused, "reusing memory")
		release()
	}
}

// decodePdata decodes msg as the handlers did before ConvertProto.
func decodePdata(msg []byte) (ptrace.Traces, error) {
	req := ptraceotlp.NewExportRequest()
	err := req.UnmarshalProto(msg)
	return req.Traces(), err
}

// protoField is a length-delimited field num holding body.
func protoField(num protowire.Number, body ...[]byte) []byte {
	b := protowire.AppendTag(nil, num, protowire.BytesType)
	return protowire.AppendBytes(b, concat(body...))
}

func concat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// fields returns msg's length-delimited fields num, in order.
func fields(t testing.TB, msg []byte, num protowire.Number) [][]byte {
	t.Helper()
	var out [][]byte
	for len(msg) > 0 {
		n, typ, tagLen := protowire.ConsumeTag(msg)
		require.GreaterOrEqual(t, tagLen, 0)
		msg = msg[tagLen:]
		valLen := protowire.ConsumeFieldValue(n, typ, msg)
		require.GreaterOrEqual(t, valLen, 0)
		if n == num && typ == protowire.BytesType {
			body, _ := protowire.ConsumeBytes(msg)
			out = append(out, body)
		}
		msg = msg[valLen:]
	}
	return out
}

// protoRequests are requests that reach every path of ConvertProto, valid
// and not: the fuzz test's seeds, and the cases TestConvertProtoMatchesPdata
// runs.
func protoRequests(t testing.TB) map[string][]byte {
	reqs := map[string][]byte{}

	everything, res, sp := newSpan()
	putEveryType(res.Attributes())
	res.Attributes().PutStr("service.name", "checkout")
	putEveryType(sp.Attributes())
	sp.SetName("a span name past the limits")
	sp.SetParentSpanID(linkSpanID)
	sp.SetKind(ptrace.SpanKindClient)
	sp.TraceState().FromRaw("k=v")
	sp.Status().SetCode(ptrace.StatusCodeError)
	sp.Status().SetMessage("deadline exceeded \xff")
	for i := range 3 {
		e := sp.Events().AppendEmpty()
		e.SetName("budget.cancelled")
		e.SetTimestamp(pcommon.Timestamp(1_500 + i))
		putEveryType(e.Attributes())
		l := sp.Links().AppendEmpty()
		l.SetTraceID(linkTraceID)
		l.SetSpanID(linkSpanID)
		l.TraceState().FromRaw("a=b")
		putEveryType(l.Attributes())
	}
	ss := everything.ResourceSpans().At(0).ScopeSpans().At(0)
	ss.Scope().SetName("scope-name-past-limits")
	ss.Scope().SetVersion("1.2.3")
	ss.Scope().Attributes().PutStr("scope.attr", "x")
	for i, mutate := range []func(ptrace.Span){
		func(s ptrace.Span) { s.SetTraceID(pcommon.TraceID{}) },
		func(s ptrace.Span) { s.SetSpanID(pcommon.SpanID{}) },
		func(s ptrace.Span) { s.SetEndTimestamp(s.StartTimestamp() - 1) },
		func(s ptrace.Span) { s.SetEndTimestamp(1 << 40) }, // outside the test window
		func(s ptrace.Span) { s.SetKind(ptrace.SpanKind(-3)) },
		func(s ptrace.Span) { s.Status().SetCode(ptrace.StatusCode(9)) },
		func(s ptrace.Span) { s.Attributes().PutStr("long.value", strings.Repeat("é", 40)) },
		func(s ptrace.Span) { s.Attributes().PutEmptyBytes("b").FromRaw([]byte(strings.Repeat("x", 40))) },
		func(s ptrace.Span) {
			sl := s.Attributes().PutEmptySlice("list")
			for range 20 {
				sl.AppendEmpty().SetStr("element")
			}
		},
		func(s ptrace.Span) {
			m := s.Attributes().PutEmptyMap("map")
			for i := range 20 {
				m.PutInt(strings.Repeat("k", i+1), int64(i))
			}
		},
	} {
		s := ss.Spans().AppendEmpty()
		sp.CopyTo(s)
		s.SetSpanID(pcommon.SpanID{byte(i + 1), 1})
		mutate(s)
	}
	// A second resource whose service.name is past MaxResourceAttrs, and
	// one whose service.name is not a string.
	for _, put := range []func(pcommon.Map){
		func(m pcommon.Map) { m.PutStr("a", "1"); m.PutStr("b", "2"); m.PutStr("service.name", "late") },
		func(m pcommon.Map) { m.PutStr("a", "1"); m.PutStr("b", "2"); m.PutInt("service.name", 7) },
		func(m pcommon.Map) { m.PutInt("service.name", 7) },
		func(m pcommon.Map) { m.PutStr("service.name", "") },
	} {
		rs := everything.ResourceSpans().AppendEmpty()
		put(rs.Resource().Attributes())
		sp.CopyTo(rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty())
	}
	valid := marshalProto(t, everything)
	reqs["every field"] = valid
	reqs["generated"] = marshalProto(t, ingesttest.Spans(1, 20))
	reqs["empty"] = nil

	rs := fields(t, valid, 1)[0]
	resource := fields(t, rs, 1)[0]
	scopeSpans := fields(t, rs, 2)[0]
	scope := fields(t, scopeSpans, 1)[0]
	span := fields(t, scopeSpans, 2)[0]
	request := func(rs ...[]byte) []byte {
		var b []byte
		for _, r := range rs {
			b = append(b, protoField(1, r)...)
		}
		return b
	}

	reqs["resource after its spans"] = request(concat(protoField(2, scopeSpans), protoField(1, resource)))
	reqs["resource sent twice"] = request(concat(protoField(1, resource), protoField(2, scopeSpans),
		protoField(1, protoField(1, protoField(1, []byte("x")), protoField(2, protoField(1, []byte("y")))))))
	reqs["scope after its spans"] = request(protoField(2, concat(protoField(2, span), protoField(1, scope))))
	reqs["scope sent twice"] = request(protoField(2, concat(protoField(1, scope), protoField(2, span),
		protoField(1, protoField(2, []byte("9.9"))))))
	reqs["deprecated scope spans"] = request(concat(protoField(1, resource), protoField(1000, scopeSpans)))
	reqs["deprecated and current scope spans"] = request(concat(protoField(1000, scopeSpans),
		protoField(2, protoField(2, span))))
	reqs["status sent twice"] = request(protoField(2, protoField(2, concat(span,
		protoField(15, protowire.AppendVarint(protowire.AppendTag(nil, 3, protowire.VarintType), 1))))))
	reqs["trace id cleared by a second one"] = request(protoField(2, protoField(2, concat(span, protoField(1)))))
	reqs["value sent twice"] = request(protoField(2, protoField(2, concat(span,
		protoField(9, protoField(1, []byte("k")), protoField(2, protoField(1, []byte("first"))), protoField(2)),
		protoField(9, protoField(1, []byte("k2")), protoField(2, protoField(1, []byte("first"))),
			protoField(2, protowire.AppendVarint(protowire.AppendTag(nil, 3, protowire.VarintType), 5))),
		protoField(9, protoField(1, []byte("strindex")), protoField(2, protowire.AppendVarint(
			protowire.AppendTag(nil, 8, protowire.VarintType), 5)))))))
	// pdata refuses a group that ends its message (it looks for one more
	// field after the group's end), so the group comes first.
	unknown := concat(
		protowire.AppendTag(nil, 95, protowire.StartGroupType),
		protowire.AppendTag(nil, 95, protowire.EndGroupType),
		protowire.AppendVarint(protowire.AppendTag(nil, 99, protowire.VarintType), 1),
		protowire.AppendFixed64(protowire.AppendTag(nil, 98, protowire.Fixed64Type), 1),
		protowire.AppendFixed32(protowire.AppendTag(nil, 97, protowire.Fixed32Type), 1),
		protoField(96, []byte("x")),
	)
	reqs["group ending a message"] = concat(valid, unknown[:2])
	// pdata ends a group at its first field that is not a group, so the
	// end tag after it is a stray one: refused.
	reqs["group holding a field"] = concat(
		protowire.AppendTag(nil, 95, protowire.StartGroupType),
		protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 1),
		protowire.AppendTag(nil, 95, protowire.EndGroupType),
		valid)
	reqs["unknown fields everywhere"] = concat(unknown, request(concat(unknown, protoField(1, concat(unknown, resource)),
		protoField(2, concat(unknown, protoField(2, concat(unknown, span)))))))
	reqs["wrong wire type"] = request(protoField(2, protoField(2, concat(span,
		protowire.AppendVarint(protowire.AppendTag(nil, 5, protowire.VarintType), 1)))))
	// A varint field sent as an empty length-delimited one: read as a
	// varint, its length byte would pass for the value and the rest parse.
	reqs["varint sent as bytes"] = request(protoField(2, protoField(2, concat(span, protoField(6)))))
	reqs["short trace id"] = request(protoField(2, protoField(2, concat(span, protoField(1, []byte{1, 2})))))
	reqs["truncated"] = valid[:len(valid)-3]
	reqs["group end first"] = protowire.AppendTag(nil, 5, protowire.EndGroupType)
	nested := func(levels int) []byte {
		v := protoField(1, []byte("leaf")) // AnyValue{string_value}
		for range levels {
			v = protoField(5, protoField(1, v)) // AnyValue{array_value{values: v}}
		}
		return request(protoField(2, protoField(2, concat(span, protoField(9, protoField(1, []byte("deep")), protoField(2, v))))))
	}
	reqs["nested 50 levels"] = nested(50)
	reqs["nested 49 levels"] = nested(49)
	reqs["nested 60 levels"] = nested(60)
	return reqs
}

// TestConvertProtoMatchesPdata holds ConvertProto to pdata's decoder and
// Convert on requests that reach every field, limit and quirk of the
// wire: fields sent twice, out of order, unknown, of the wrong type,
// deprecated, nested past the recursion limit.
func TestConvertProtoMatchesPdata(t *testing.T) {
	converters := protoConverters(t)
	reqs := protoRequests(t)
	for name, msg := range reqs {
		t.Run(name, func(t *testing.T) {
			requireSameAsPdata(t, converters, msg)
		})
	}
	// The cases reach both sides of each boundary.
	for name, decodes := range map[string]bool{
		"nested 49 levels": true, "nested 50 levels": false,
		"wrong wire type": false, "varint sent as bytes": false, "short trace id": false, "every field": true,
		"deprecated scope spans": true, "unknown fields everywhere": true, "group holding a field": false, "group ending a message": false,
	} {
		_, err := decodePdata(reqs[name])
		require.Equal(t, decodes, err == nil, name)
	}
	got, err := converters[0].ConvertProto(reqs["deprecated scope spans"])
	require.NoError(t, err)
	require.Equal(t, 11, got.Received, "spans of deprecated scope spans are read")
	require.Equal(t, 8, len(got.Spans), "and converted")
}

// FuzzConvertProto holds ConvertProto to pdata's decoder and Convert on
// any message: it refuses exactly what pdata refuses and converts the
// rest to the same spans, counts and rejections.
func FuzzConvertProto(f *testing.F) {
	// Seeds are the small requests: the fuzzer minimizes every input that
	// finds new coverage, and the time that takes grows with the input.
	for _, msg := range protoRequests(f) {
		if len(msg) <= 2048 {
			f.Add(msg)
		}
	}
	converters := protoConverters(f)
	f.Fuzz(func(t *testing.T, msg []byte) {
		requireSameAsPdata(t, converters, msg)
	})
}

// TestValueTextIsBounded checks that an array or map value whose element
// would take it past MaxAttrValueBytes is cut without writing the
// element's text: a string of control characters escapes to six times its
// size, bytes to four thirds, and either conversion would otherwise grow
// its buffer by that much for an element it drops.
func TestValueTextIsBounded(t *testing.T) {
	const big = 1 << 20
	td, _, sp := newSpan()
	list := sp.Attributes().PutEmptySlice("list")
	list.AppendEmpty().SetStr("kept")
	list.AppendEmpty().SetStr(strings.Repeat("\x01", big))
	nested := sp.Attributes().PutEmptySlice("nested")
	nested.AppendEmpty().SetEmptySlice().AppendEmpty().SetEmptyBytes().FromRaw(make([]byte, big))
	sp.Attributes().PutEmptyMap("map").PutStr("k", strings.Repeat("\u2028", big/3))
	msg := marshalProto(t, td)
	c := newTestConverter(t, DefaultLimits())

	allocated := func(convert func() ConvertResult) (ConvertResult, uint64) {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		res := convert()
		runtime.ReadMemStats(&after)
		return res, after.TotalAlloc - before.TotalAlloc
	}
	fromWire, wireBytes := allocated(func() ConvertResult {
		res, err := c.ConvertProto(msg)
		require.NoError(t, err)
		return res
	})
	fromPdata, pdataBytes := allocated(func() ConvertResult { return c.Convert(td) })
	require.Equal(t, fromPdata, fromWire)
	require.Equal(t, schema.Attributes{
		{Key: "list", Type: schema.AttrSlice, Value: `["kept"]`},
		{Key: "nested", Type: schema.AttrSlice, Value: `[]`},
		{Key: "map", Type: schema.AttrMap, Value: `{}`},
	}, fromWire.Spans[0].Attrs)
	require.Equal(t, 3, fromWire.Stats.TruncatedValues)
	// The copy of the request and the span; no text of the cut elements.
	require.Less(t, wireBytes, uint64(len(msg))+big/2, "ConvertProto allocated %d bytes for a %d-byte request", wireBytes, len(msg))
	require.Less(t, pdataBytes, uint64(big/2), "Convert allocated %d bytes", pdataBytes)
}

// TestConvertProtoReusingReusesItsMemory checks that ConvertProtoReusing
// converts request after request as ConvertProto does while taking their
// spans and attributes from the memory the request before released: a
// realistic 1,000-span request allocates a small fraction of what
// ConvertProto allocates for it (its copy, a struct and an attribute slice
// per span), and a result taken after a release is not disturbed by the
// next request's conversion until it is released itself.
func TestConvertProtoReusingReusesItsMemory(t *testing.T) {
	c := newTestConverter(t, DefaultLimits())
	first := marshalProto(t, ingesttest.Spans(1, 1000))
	second := marshalProto(t, ingesttest.Spans(2, 1000))

	want, err := c.ConvertProto(first)
	require.NoError(t, err)
	got, release, err := c.ConvertProtoReusing(first)
	require.NoError(t, err)
	require.Equal(t, want, got)
	release()

	wantSecond, err := c.ConvertProto(second)
	require.NoError(t, err)
	gotSecond, releaseSecond, err := c.ConvertProtoReusing(second)
	require.NoError(t, err)
	// Another request converted while this result is held takes other
	// memory.
	other, releaseOther, err := c.ConvertProtoReusing(first)
	require.NoError(t, err)
	require.Equal(t, wantSecond, gotSecond)
	require.Equal(t, want, other)
	releaseOther()
	releaseSecond()

	// The least of 21 calls: under the race detector sync.Pool drops a
	// quarter of what is put back, at random, and the call after a drop
	// allocates anew.
	allocated := func(convert func()) uint64 {
		least := uint64(math.MaxUint64)
		for range 21 {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			convert()
			runtime.ReadMemStats(&after)
			least = min(least, after.TotalAlloc-before.TotalAlloc)
		}
		return least
	}
	copying := allocated(func() {
		_, err := c.ConvertProto(second)
		require.NoError(t, err)
	})
	reusing := allocated(func() {
		_, release, err := c.ConvertProtoReusing(second)
		require.NoError(t, err)
		release()
	})
	t.Logf("bytes allocated per 1,000-span request: copying %d, reusing %d", copying, reusing)
	require.Less(t, reusing, copying/4)
}
