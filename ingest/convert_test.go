package ingest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/budgetd/budgetd/analyze/budgetread"
	"github.com/budgetd/budgetd/schema"
)

var (
	testTraceID = pcommon.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36}
	testSpanID  = pcommon.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7}
	testParent  = pcommon.SpanID{0x53, 0x99, 0x5c, 0x3f, 0x42, 0xcd, 0x8a, 0xd8}
	linkTraceID = pcommon.TraceID{0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10}
	linkSpanID  = pcommon.SpanID{0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18}
)

func newTestConverter(t testing.TB, limits Limits) *Converter {
	t.Helper()
	c, err := NewConverter(limits)
	require.NoError(t, err)
	return c
}

// newSpan returns a Traces with one resource, one scope and one valid span
// to be filled in by the caller.
func newSpan() (ptrace.Traces, pcommon.Resource, ptrace.Span) {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	ss := rs.ScopeSpans().AppendEmpty()
	sp := ss.Spans().AppendEmpty()
	sp.SetTraceID(testTraceID)
	sp.SetSpanID(testSpanID)
	sp.SetStartTimestamp(1_000)
	sp.SetEndTimestamp(2_000)
	return td, rs.Resource(), sp
}

// putEveryType puts one attribute of every pcommon value type into m.
func putEveryType(m pcommon.Map) {
	m.PutStr("str", "hello")
	m.PutStr("str.empty", "")
	m.PutBool("bool.true", true)
	m.PutBool("bool.false", false)
	m.PutInt("int.small", 7)
	m.PutInt("int.big", 1234567890123)
	m.PutInt("int.neg", -42)
	m.PutDouble("double", 1.5)
	m.PutDouble("double.exp", 1e21)
	m.PutDouble("double.nan", math.NaN())
	m.PutEmptyBytes("bytes").FromRaw([]byte{0xde, 0xad, 0xbe, 0xef})
	m.PutEmpty("empty")
	m.PutEmptySlice(schema.AttrHeaderRequestTimeoutMs).FromRaw([]any{"1500"})
	s := m.PutEmptySlice("slice.mixed")
	s.AppendEmpty().SetStr("a")
	s.AppendEmpty().SetInt(1)
	s.AppendEmpty().SetDouble(2.5)
	s.AppendEmpty().SetBool(true)
	s.AppendEmpty().SetEmptyBytes().FromRaw([]byte("hi"))
	s.AppendEmpty() // empty value: null
	s.AppendEmpty().SetEmptySlice().AppendEmpty().SetStr("nested")
	s.AppendEmpty().SetEmptyMap().PutInt("k", 3)
	mm := m.PutEmptyMap("map")
	mm.PutStr("z", "last key first")
	mm.PutDouble("inf", math.Inf(-1))
	mm.PutEmptyMap("inner").PutEmptySlice("list").AppendEmpty().SetDouble(1e-7)
}

// everyTypeAttrs is what putEveryType's attributes convert to.
func everyTypeAttrs() schema.Attributes {
	return schema.Attributes{
		{Key: "str", Type: schema.AttrString, Value: "hello"},
		{Key: "str.empty", Type: schema.AttrString, Value: ""},
		{Key: "bool.true", Type: schema.AttrBool, Value: "true"},
		{Key: "bool.false", Type: schema.AttrBool, Value: "false"},
		{Key: "int.small", Type: schema.AttrInt, Value: "7"},
		{Key: "int.big", Type: schema.AttrInt, Value: "1234567890123"},
		{Key: "int.neg", Type: schema.AttrInt, Value: "-42"},
		{Key: "double", Type: schema.AttrDouble, Value: "1.5"},
		{Key: "double.exp", Type: schema.AttrDouble, Value: "1e+21"},
		{Key: "double.nan", Type: schema.AttrDouble, Value: "NaN"},
		{Key: "bytes", Type: schema.AttrBytes, Value: "3q2+7w=="},
		{Key: "empty", Type: schema.AttrEmpty, Value: ""},
		schema.Strings(schema.AttrHeaderRequestTimeoutMs, "1500"),
		{Key: "slice.mixed", Type: schema.AttrSlice, Value: `["a",1,2.5,true,"aGk=",null,["nested"],{"k":3}]`},
		{Key: "map", Type: schema.AttrMap, Value: `{"z":"last key first","inf":"-Infinity","inner":{"list":[1e-7]}}`},
	}
}

func TestConvertEveryField(t *testing.T) {
	td, res, sp := newSpan()
	res.Attributes().PutStr("service.name", "checkout")
	putEveryType(res.Attributes())
	scope := td.ResourceSpans().At(0).ScopeSpans().At(0).Scope()
	scope.SetName("go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp")
	scope.SetVersion("0.62.0")
	scope.Attributes().PutStr("scope.attr", "not stored")

	sp.SetParentSpanID(testParent)
	sp.TraceState().FromRaw("vendor=abc,budget=1")
	sp.SetName("POST /orders")
	sp.SetKind(ptrace.SpanKindServer)
	sp.SetStartTimestamp(1_700_000_000_000_000_000)
	sp.SetEndTimestamp(1_700_000_000_250_000_000)
	sp.Status().SetCode(ptrace.StatusCodeError)
	sp.Status().SetMessage("deadline exceeded")
	putEveryType(sp.Attributes())
	sp.Attributes().PutInt(schema.AttrRemainingMs, 1500)

	ev := sp.Events().AppendEmpty()
	ev.SetName(schema.EventCancelled)
	ev.SetTimestamp(1_700_000_000_200_000_000)
	ev.Attributes().PutStr(schema.AttrCancelSource, "deadline")
	ev.Attributes().PutInt("budget.late_ms", 50)
	sp.Events().AppendEmpty().SetName("no attributes")

	link := sp.Links().AppendEmpty()
	link.SetTraceID(linkTraceID)
	link.SetSpanID(linkSpanID)
	link.TraceState().FromRaw("other=1")
	link.Attributes().PutStr("link.kind", "follows_from")
	link.Attributes().PutDouble("link.weight", 0.5)

	c := newTestConverter(t, DefaultLimits())
	got := c.Convert(td)

	wantRes := append(schema.Attributes{schema.Str("service.name", "checkout")}, everyTypeAttrs()...)
	wantAttrs := append(everyTypeAttrs(), schema.Int(schema.AttrRemainingMs, 1500))
	want := schema.Span{
		TraceID:       schema.TraceID(testTraceID),
		SpanID:        schema.SpanID(testSpanID),
		ParentSpanID:  schema.SpanID(testParent),
		TraceState:    "vendor=abc,budget=1",
		Service:       "checkout",
		Name:          "POST /orders",
		Kind:          schema.KindServer,
		StartNs:       1_700_000_000_000_000_000,
		EndNs:         1_700_000_000_250_000_000,
		StatusCode:    schema.StatusError,
		StatusMessage: "deadline exceeded",
		ScopeName:     "go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp",
		ScopeVersion:  "0.62.0",
		ResourceAttrs: wantRes,
		Attrs:         wantAttrs,
		Events: []schema.Event{
			{
				TimeNs: 1_700_000_000_200_000_000,
				Name:   schema.EventCancelled,
				Attrs: schema.Attributes{
					schema.Str(schema.AttrCancelSource, "deadline"),
					schema.Int("budget.late_ms", 50),
				},
			},
			{Name: "no attributes"},
		},
		Links: []schema.Link{{
			TraceID:    schema.TraceID(linkTraceID),
			SpanID:     schema.SpanID(linkSpanID),
			TraceState: "other=1",
			Attrs: schema.Attributes{
				schema.Str("link.kind", "follows_from"),
				schema.Double("link.weight", 0.5),
			},
		}},
	}
	require.Equal(t, ConvertResult{Spans: []schema.Span{want}, Received: 1}, got)
	fromWire, err := c.ConvertProto(marshalProto(t, td))
	require.NoError(t, err)
	require.Equal(t, got, fromWire, "the same from the protobuf")

	// The converted span feeds the budget reader as the analyzer will use it.
	facts := budgetread.Read(&got.Spans[0])
	require.Equal(t, schema.Ms(1500), facts.RemainingMs)
	require.Equal(t, []budgetread.Cancellation{{TimeNs: 1_700_000_000_200_000_000, Source: "deadline"}}, facts.Cancellations)
}

func TestConvertKindsAndStatus(t *testing.T) {
	tests := []struct {
		name       string
		kind       ptrace.SpanKind
		status     ptrace.StatusCode
		wantKind   schema.SpanKind
		wantStatus schema.StatusCode
	}{
		{"unspecified", ptrace.SpanKindUnspecified, ptrace.StatusCodeUnset, schema.KindUnspecified, schema.StatusUnset},
		{"internal", ptrace.SpanKindInternal, ptrace.StatusCodeOk, schema.KindInternal, schema.StatusOK},
		{"server", ptrace.SpanKindServer, ptrace.StatusCodeError, schema.KindServer, schema.StatusError},
		{"client", ptrace.SpanKindClient, ptrace.StatusCodeUnset, schema.KindClient, schema.StatusUnset},
		{"producer", ptrace.SpanKindProducer, ptrace.StatusCodeUnset, schema.KindProducer, schema.StatusUnset},
		{"consumer", ptrace.SpanKindConsumer, ptrace.StatusCodeUnset, schema.KindConsumer, schema.StatusUnset},
		{"out of range becomes unspecified", ptrace.SpanKind(300), ptrace.StatusCode(-1), schema.KindUnspecified, schema.StatusUnset},
	}
	c := newTestConverter(t, DefaultLimits())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			td, _, sp := newSpan()
			sp.SetKind(tt.kind)
			sp.Status().SetCode(tt.status)
			got := c.Convert(td)
			require.Len(t, got.Spans, 1)
			require.Equal(t, tt.wantKind, got.Spans[0].Kind)
			require.Equal(t, tt.wantStatus, got.Spans[0].StatusCode)
		})
	}
}

func TestConvertServiceName(t *testing.T) {
	tests := []struct {
		name   string
		limits func(*Limits)
		attrs  func(pcommon.Map)
		want   string
	}{
		{"present", nil, func(m pcommon.Map) { m.PutStr("service.name", "cart") }, "cart"},
		{"absent", nil, func(m pcommon.Map) { m.PutStr("host.name", "h1") }, UnknownService},
		{"no resource attributes", nil, func(pcommon.Map) {}, UnknownService},
		{"empty", nil, func(m pcommon.Map) { m.PutStr("service.name", "") }, UnknownService},
		{"not a string", nil, func(m pcommon.Map) { m.PutInt("service.name", 42) }, "42"},
		{
			"cut by the resource attribute limit",
			func(l *Limits) { l.MaxResourceAttrs = 1 },
			func(m pcommon.Map) { m.PutStr("host.name", "h1"); m.PutStr("service.name", "payment") },
			"payment",
		},
		{
			"repaired",
			nil,
			func(m pcommon.Map) { m.PutStr("service.name", "pay\xffment") },
			"pay\uFFFDment",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			limits := DefaultLimits()
			if tt.limits != nil {
				tt.limits(&limits)
			}
			td, res, _ := newSpan()
			tt.attrs(res.Attributes())
			got := newTestConverter(t, limits).Convert(td)
			require.Len(t, got.Spans, 1)
			require.Equal(t, tt.want, got.Spans[0].Service)
		})
	}
}

func TestConvertSharesResourceAcrossSpans(t *testing.T) {
	td, res, _ := newSpan()
	res.Attributes().PutStr("service.name", "cart")
	res.Attributes().PutInt("process.pid", 4242)
	second := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().AppendEmpty()
	second.SetTraceID(testTraceID)
	second.SetSpanID(testParent)

	c := newTestConverter(t, DefaultLimits())
	got := c.Convert(td)
	require.Len(t, got.Spans, 2)
	a, b := got.Spans[0].ResourceAttrs, got.Spans[1].ResourceAttrs
	require.Equal(t, schema.Attributes{schema.Str("service.name", "cart"), schema.Int("process.pid", 4242)}, a)
	require.Same(t, &a[0], &b[0], "one resource, one attribute slice")
	require.Equal(t, len(a), cap(a), "full slice: appending copies instead of writing into the shared array")
}

// TestConvertJSONMatchesEncodingJSON checks that arrays and maps are encoded
// byte for byte as encoding/json encodes pcommon's raw values, which is also
// how schema.Strings encodes header values.
func TestConvertJSONMatchesEncodingJSON(t *testing.T) {
	tests := []struct {
		name string
		raw  any // []any or map[string]any; maps with one key, as pdata keeps wire order and Go sorts
	}{
		{"strings", []any{"1500", "2000"}},
		{"empty slice", []any{}},
		{"html and controls", []any{"<a href=\"x\">&amp;</a>", "tab\tnl\ncr\rbs\\ bell\a nul\x00 bs\b ff\f"}},
		{"line separators", []any{"a\u2028b\u2029c"}},
		{"unicode", []any{"é €😀"}},
		{"invalid utf-8", []any{"bad\xff\xfebyte"}},
		{"numbers", []any{int64(0), int64(-1), int64(math.MaxInt64), int64(math.MinInt64)}},
		{"doubles", []any{0.0, -0.0, 1.0, 0.1, 1e20, 1e21, 1e-6, 1e-7, 123456789.125, -2.5e-300, math.MaxFloat64, math.SmallestNonzeroFloat64}},
		{"bools and null", []any{true, false, nil}},
		{"bytes", []any{[]byte{0, 1, 2, 250}, []byte("hi")}},
		{"nested", []any{[]any{[]any{"deep"}}, map[string]any{"k": []any{int64(1)}}}},
		{"map", map[string]any{"a<b": map[string]any{"x": "y"}}},
		{"empty map", map[string]any{}},
	}
	c := newTestConverter(t, DefaultLimits())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			td, _, sp := newSpan()
			switch raw := tt.raw.(type) {
			case []any:
				require.NoError(t, sp.Attributes().PutEmptySlice("v").FromRaw(raw))
			case map[string]any:
				require.NoError(t, sp.Attributes().PutEmptyMap("v").FromRaw(raw))
			}
			v, _ := sp.Attributes().Get("v")
			want, err := json.Marshal(v.AsRaw())
			require.NoError(t, err)

			got := c.Convert(td)
			require.Len(t, got.Spans, 1)
			require.Equal(t, string(want), got.Spans[0].Attrs[0].Value)
		})
	}
}

func TestConvertEmptyBytesInArray(t *testing.T) {
	// pcommon's AsRaw turns empty bytes into a nil slice, which
	// encoding/json writes as null; an empty value is not a missing one.
	td, _, sp := newSpan()
	sp.Attributes().PutEmptySlice("v").AppendEmpty().SetEmptyBytes()
	c := newTestConverter(t, DefaultLimits())
	got := c.Convert(td)
	require.Equal(t, schema.Attributes{{Key: "v", Type: schema.AttrSlice, Value: `[""]`}}, got.Spans[0].Attrs)
}

// TestConvertCutsKeysAndNames sends the request an audit found running
// budgetd out of memory: one resource attribute with a 100 KB key over
// 5,000 spans (the key was copied into every row of the insert block).
// Keys, names, scope fields and trace states are cut and counted.
func TestConvertCutsKeysAndNames(t *testing.T) {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "svc")
	rs.Resource().Attributes().PutStr(strings.Repeat("k", 100_000), "v")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName(strings.Repeat("s", 5000))
	ss.Scope().SetVersion("1.0")
	long := strings.Repeat("n", 3000)
	for i := range 5000 {
		sp := ss.Spans().AppendEmpty()
		sp.SetTraceID(testTraceID)
		sp.SetSpanID(pcommon.SpanID{1, byte(i >> 8), byte(i)})
		sp.SetStartTimestamp(1000)
		sp.SetEndTimestamp(2000)
		if i == 0 {
			sp.SetName(long + "é")
			sp.TraceState().FromRaw(long)
			sp.Status().SetMessage(long)
			sp.Attributes().PutStr(strings.Repeat("a", 300), "x")
			sp.Events().AppendEmpty().SetName(long)
		}
	}
	c := newTestConverter(t, DefaultLimits())
	got := c.Convert(td)
	require.Len(t, got.Spans, 5000)
	first := got.Spans[0]
	require.Len(t, first.ResourceAttrs[1].Key, 256)
	require.Len(t, first.ScopeName, 1024)
	require.Equal(t, long[:1024], first.Name)
	require.Equal(t, long[:1024], first.TraceState)
	require.Equal(t, long[:2048], first.StatusMessage, "a status message is capped like a value")
	require.Len(t, first.Attrs[0].Key, 256)
	require.Len(t, first.Events[0].Name, 1024)
	require.Equal(t, Stats{TruncatedKeys: 2, TruncatedNames: 4, TruncatedValues: 1}, got.Stats,
		"the resource's key is cut once, not once per span")
}

func TestConvertTruncation(t *testing.T) {
	const limit = 2048
	ascii := strings.Repeat("a", limit)
	tests := []struct {
		name      string
		put       func(pcommon.Map)
		wantType  schema.AttrType
		want      string // expected value, or "" to check validity only
		truncated int
	}{
		{"string at the limit is kept", func(m pcommon.Map) { m.PutStr("v", ascii) }, schema.AttrString, ascii, 0},
		{"string one byte over", func(m pcommon.Map) { m.PutStr("v", ascii+"b") }, schema.AttrString, ascii, 1},
		{"two-byte rune across the boundary", func(m pcommon.Map) { m.PutStr("v", ascii[:limit-1]+"é") }, schema.AttrString, ascii[:limit-1], 1},
		{"three-byte rune across the boundary", func(m pcommon.Map) { m.PutStr("v", ascii[:limit-2]+"€x") }, schema.AttrString, ascii[:limit-2], 1},
		{"four-byte rune across the boundary", func(m pcommon.Map) { m.PutStr("v", ascii[:limit-1]+"😀") }, schema.AttrString, ascii[:limit-1], 1},
		{"rune ending at the boundary is kept", func(m pcommon.Map) { m.PutStr("v", ascii[:limit-2]+"é"+"tail") }, schema.AttrString, ascii[:limit-2] + "é", 1},
		{"all multi-byte", func(m pcommon.Map) { m.PutStr("v", strings.Repeat("€", 1000)) }, schema.AttrString, strings.Repeat("€", 682), 1},
		{
			"bytes cut to whole base64 quanta",
			func(m pcommon.Map) { m.PutEmptyBytes("v").FromRaw([]byte(strings.Repeat("x", 3000))) },
			schema.AttrBytes,
			base64.StdEncoding.EncodeToString([]byte(strings.Repeat("x", 1536))),
			1,
		},
		{
			"array keeps whole elements",
			func(m pcommon.Map) {
				s := m.PutEmptySlice("v")
				for range 300 {
					s.AppendEmpty().SetStr("0123456789")
				}
			},
			schema.AttrSlice,
			"[" + strings.TrimSuffix(strings.Repeat(`"0123456789",`, 157), ",") + "]",
			1,
		},
		{
			"array with one huge element becomes empty",
			func(m pcommon.Map) { m.PutEmptySlice("v").AppendEmpty().SetStr(ascii) },
			schema.AttrSlice,
			"[]",
			1,
		},
		{
			"map keeps whole entries",
			func(m pcommon.Map) {
				mm := m.PutEmptyMap("v")
				mm.PutStr("small", "x")
				mm.PutStr("huge", ascii)
			},
			schema.AttrMap,
			`{"small":"x"}`,
			1,
		},
		{
			"short values are untouched",
			func(m pcommon.Map) { m.PutEmptySlice("v").FromRaw([]any{"1500"}) },
			schema.AttrSlice,
			`["1500"]`,
			0,
		},
	}
	c := newTestConverter(t, DefaultLimits())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			td, _, sp := newSpan()
			tt.put(sp.Attributes())
			got := c.Convert(td)
			require.Len(t, got.Spans, 1)
			a := got.Spans[0].Attrs[0]
			require.Equal(t, tt.wantType, a.Type)
			require.Equal(t, tt.want, a.Value)
			require.LessOrEqual(t, len(a.Value), limit)
			require.True(t, utf8.ValidString(a.Value))
			if a.Type == schema.AttrSlice || a.Type == schema.AttrMap {
				require.True(t, json.Valid([]byte(a.Value)), a.Value)
			}
			require.Equal(t, Stats{TruncatedValues: tt.truncated}, got.Stats)
		})
	}
}

func TestConvertCountLimits(t *testing.T) {
	limits := DefaultLimits()
	limits.MaxSpanAttrs = 2
	limits.MaxResourceAttrs = 1
	limits.MaxEventAttrs = 1
	limits.MaxLinkAttrs = 1
	limits.MaxSpanEvents = 2
	limits.MaxSpanLinks = 1

	td, res, sp := newSpan()
	res.Attributes().PutStr("service.name", "cart")
	res.Attributes().PutStr("host.name", "dropped")
	for _, k := range []string{"a", "b", "c", "d"} {
		sp.Attributes().PutStr(k, k)
	}
	for _, name := range []string{"e1", "e2", "e3"} {
		ev := sp.Events().AppendEmpty()
		ev.SetName(name)
		ev.Attributes().PutStr("kept", "1")
		ev.Attributes().PutStr("dropped", "1")
	}
	for range 3 {
		l := sp.Links().AppendEmpty()
		l.SetTraceID(linkTraceID)
		l.Attributes().PutStr("kept", "1")
		l.Attributes().PutStr("dropped", "1")
	}

	got := newTestConverter(t, limits).Convert(td)
	require.Len(t, got.Spans, 1)
	s := got.Spans[0]
	require.Equal(t, schema.Attributes{schema.Str("a", "a"), schema.Str("b", "b")}, s.Attrs, "the first attributes in wire order are kept")
	require.Equal(t, schema.Attributes{schema.Str("service.name", "cart")}, s.ResourceAttrs)
	require.Len(t, s.Events, 2)
	require.Equal(t, "e2", s.Events[1].Name)
	require.Equal(t, schema.Attributes{schema.Str("kept", "1")}, s.Events[0].Attrs)
	require.Len(t, s.Links, 1)
	require.Equal(t, schema.Attributes{schema.Str("kept", "1")}, s.Links[0].Attrs)
	require.Equal(t, Stats{
		DroppedAttrs:  2 + 1 + 2*1 + 1*1, // span, resource, kept events, kept link
		DroppedEvents: 1,
		DroppedLinks:  2,
	}, got.Stats)
}

func TestConvertRejects(t *testing.T) {
	type spanSpec struct {
		traceID    pcommon.TraceID
		spanID     pcommon.SpanID
		start, end uint64
	}
	good := spanSpec{testTraceID, testSpanID, 10, 20}
	zeroTrace := spanSpec{pcommon.TraceID{}, testSpanID, 10, 20}
	zeroSpan := spanSpec{testTraceID, pcommon.SpanID{}, 10, 20}
	backwards := spanSpec{testTraceID, testSpanID, 20, 10}
	noEnd := spanSpec{testTraceID, testSpanID, 20, 0}
	instant := spanSpec{testTraceID, testSpanID, 20, 20}

	tests := []struct {
		name       string
		spans      []spanSpec
		wantKept   int
		wantStats  Stats
		wantReason string
	}{
		{"all good", []spanSpec{good, good, instant}, 3, Stats{}, ""},
		{"zero trace id", []spanSpec{good, zeroTrace}, 1, Stats{RejectedZeroTraceID: 1}, "trace_id is missing or all zero (1 span)"},
		{"zero span id", []spanSpec{zeroSpan, good}, 1, Stats{RejectedZeroSpanID: 1}, "span_id is missing or all zero (1 span)"},
		{"end before start", []spanSpec{backwards, noEnd, good}, 1, Stats{RejectedEndBeforeStart: 2}, "end_time_unix_nano is before start_time_unix_nano (2 spans)"},
		{
			"most common reason first",
			[]spanSpec{zeroTrace, backwards, good, backwards, zeroSpan, backwards},
			1,
			Stats{RejectedZeroTraceID: 1, RejectedZeroSpanID: 1, RejectedEndBeforeStart: 3},
			"end_time_unix_nano is before start_time_unix_nano (3 spans); trace_id is missing or all zero (1 span); span_id is missing or all zero (1 span)",
		},
		{"all bad", []spanSpec{zeroTrace, zeroTrace}, 0, Stats{RejectedZeroTraceID: 2}, "trace_id is missing or all zero (2 spans)"},
	}
	c := newTestConverter(t, DefaultLimits())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			td := ptrace.NewTraces()
			spans := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
			for i, s := range tt.spans {
				sp := spans.AppendEmpty()
				sp.SetTraceID(s.traceID)
				sp.SetSpanID(s.spanID)
				sp.SetStartTimestamp(pcommon.Timestamp(s.start))
				sp.SetEndTimestamp(pcommon.Timestamp(s.end))
				sp.SetName(string(rune('a' + i)))
			}
			got := c.Convert(td)
			require.Len(t, got.Spans, tt.wantKept)
			for _, s := range got.Spans {
				require.False(t, s.TraceID.IsZero())
				require.False(t, s.SpanID.IsZero())
				require.GreaterOrEqual(t, s.EndNs, s.StartNs)
			}
			require.Equal(t, tt.wantStats, got.Stats)
			require.Equal(t, tt.wantStats.Rejected(), got.Rejected)
			require.Equal(t, tt.wantReason, got.RejectReason)
		})
	}
}

// TestConvertTimeWindow sends the request that once stopped storage for
// good: 101 spans on 101 different UTC days. Those outside the window are
// refused with a reason; the rest, and every span of a converter without a
// window, are kept.
func TestConvertTimeWindow(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	td := ptrace.NewTraces()
	spans := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
	add := func(start, end time.Time) {
		sp := spans.AppendEmpty()
		sp.SetTraceID(testTraceID)
		sp.SetSpanID(pcommon.SpanID{1, byte(spans.Len())})
		sp.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
		sp.SetEndTimestamp(pcommon.NewTimestampFromTime(end))
	}
	for d := range 101 {
		start := now.Add(-time.Duration(d)*24*time.Hour - time.Minute)
		add(start, start.Add(time.Second))
	}
	add(now.Add(23*time.Hour), now.Add(23*time.Hour+time.Second))   // ahead, inside
	add(now.Add(25*time.Hour), now.Add(25*time.Hour+time.Second))   // ahead, outside
	add(now.Add(-time.Second), now.Add(48*time.Hour))               // ends too far ahead
	add(time.Unix(0, 1), time.Unix(0, 2))                           // the epoch
	add(time.Unix(0, math.MaxInt64-1), time.Unix(0, math.MaxInt64)) // 2262

	base := newTestConverter(t, DefaultLimits())
	c, err := base.WithTimeWindow(DefaultSpanTimeWindow(), func() time.Time { return now })
	require.NoError(t, err)
	got := c.Convert(td)
	// Days 0..6 start within a week (day 7 starts a week and a minute ago),
	// plus the one ahead by 23 h.
	require.Len(t, got.Spans, 8)
	require.Equal(t, Stats{RejectedOutsideWindow: 106 - 8}, got.Stats)
	require.Equal(t, "start or end time is outside the window budgetd accepts around its clock (ingest.span_times) (98 spans)", got.RejectReason)
	earliest, latest := uint64(now.Add(-7*24*time.Hour).UnixNano()), uint64(now.Add(24*time.Hour).UnixNano())
	for _, s := range got.Spans {
		require.GreaterOrEqual(t, s.StartNs, earliest)
		require.LessOrEqual(t, s.EndNs, latest)
	}

	require.Len(t, base.Convert(td).Spans, 106, "without a window (offline files) every time is kept")
	_, err = base.WithTimeWindow(SpanTimeWindow{MaxAge: -time.Hour}, time.Now)
	require.ErrorContains(t, err, "ingest.span_times")
}

func TestConvertRepairsInvalidUTF8(t *testing.T) {
	td, res, sp := newSpan()
	res.Attributes().PutStr("service.name", "cart")
	scope := td.ResourceSpans().At(0).ScopeSpans().At(0).Scope()
	scope.SetName("scope\xc3")
	sp.SetName("GET /\xff\xfe")
	sp.Status().SetMessage("ok\x80")
	sp.TraceState().FromRaw("k=\xff")
	sp.Attributes().PutStr("key\xff", "value")
	sp.Attributes().PutStr("value", "a\xffb")
	sp.Attributes().PutEmptySlice("nested").AppendEmpty().SetStr("x\xffy")
	sp.Events().AppendEmpty().SetName("ev\xff")
	sp.Attributes().PutStr("valid", "€ is fine")

	c := newTestConverter(t, DefaultLimits())
	got := c.Convert(td)
	require.Len(t, got.Spans, 1)
	s := got.Spans[0]
	require.Equal(t, "scope\uFFFD", s.ScopeName)
	require.Equal(t, "GET /\uFFFD", s.Name, "a run of invalid bytes becomes one replacement")
	require.Equal(t, "ok\uFFFD", s.StatusMessage)
	require.Equal(t, "k=\uFFFD", s.TraceState)
	require.Equal(t, schema.Attributes{
		schema.Str("key\uFFFD", "value"),
		schema.Str("value", "a\uFFFDb"),
		{Key: "nested", Type: schema.AttrSlice, Value: `["x\ufffdy"]`},
		schema.Str("valid", "€ is fine"),
	}, s.Attrs)
	require.Equal(t, "ev\uFFFD", s.Events[0].Name)
	require.Equal(t, Stats{RepairedStrings: 8}, got.Stats)
}

func TestConvertEmpty(t *testing.T) {
	c := newTestConverter(t, DefaultLimits())
	got := c.Convert(ptrace.NewTraces())
	require.Empty(t, got.Spans)
	require.Zero(t, got.Rejected)

	// A resource and scope without spans yields nothing, not a span.
	td := ptrace.NewTraces()
	td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
	require.Empty(t, c.Convert(td).Spans)
}

func TestLimitsValidate(t *testing.T) {
	tests := []struct {
		name    string
		change  func(*Limits)
		wantErr string
	}{
		{"defaults", func(*Limits) {}, ""},
		{"value limit too small", func(l *Limits) { l.MaxAttrValueBytes = 8 }, "ingest.limits.max_attr_value_bytes must be >= 16"},
		{"zero span attrs", func(l *Limits) { l.MaxSpanAttrs = 0 }, "ingest.limits.max_span_attrs must be > 0"},
		{"negative resource attrs", func(l *Limits) { l.MaxResourceAttrs = -1 }, "ingest.limits.max_resource_attrs must be > 0"},
		{"zero event attrs", func(l *Limits) { l.MaxEventAttrs = 0 }, "ingest.limits.max_event_attrs must be > 0"},
		{"zero link attrs", func(l *Limits) { l.MaxLinkAttrs = 0 }, "ingest.limits.max_link_attrs must be > 0"},
		{"zero events", func(l *Limits) { l.MaxSpanEvents = 0 }, "ingest.limits.max_span_events must be > 0"},
		{"zero links", func(l *Limits) { l.MaxSpanLinks = 0 }, "ingest.limits.max_span_links must be > 0"},
		{"zero key bytes", func(l *Limits) { l.MaxAttrKeyBytes = 0 }, "ingest.limits.max_attr_key_bytes must be > 0"},
		{"zero name bytes", func(l *Limits) { l.MaxNameBytes = 0 }, "ingest.limits.max_name_bytes must be > 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := DefaultLimits()
			tt.change(&l)
			err := l.Validate()
			c, cerr := NewConverter(l)
			if tt.wantErr == "" {
				require.NoError(t, err)
				require.NoError(t, cerr)
				require.Equal(t, l, c.Limits())
				return
			}
			require.EqualError(t, err, tt.wantErr)
			require.ErrorContains(t, cerr, tt.wantErr)
			require.Nil(t, c)
		})
	}
}

func TestStatsAdd(t *testing.T) {
	s := Stats{RejectedZeroTraceID: 1, TruncatedValues: 2, DroppedLinks: 3}
	s.Add(Stats{RejectedZeroTraceID: 1, RejectedZeroSpanID: 1, RejectedEndBeforeStart: 1, RejectedOutsideWindow: 1,
		TruncatedValues: 1, RepairedStrings: 1, DroppedAttrs: 1, DroppedEvents: 1, DroppedLinks: 1})
	require.Equal(t, Stats{
		RejectedZeroTraceID: 2, RejectedZeroSpanID: 1, RejectedEndBeforeStart: 1, RejectedOutsideWindow: 1,
		TruncatedValues: 3, RepairedStrings: 1, DroppedAttrs: 1, DroppedEvents: 1, DroppedLinks: 4,
	}, s)
	require.Equal(t, 5, s.Rejected())
}

func TestConvertConcurrent(t *testing.T) {
	// One Converter serves every handler goroutine; -race checks that
	// Convert keeps its scratch state per call.
	c := newTestConverter(t, DefaultLimits())
	td, _, sp := newSpan()
	putEveryType(sp.Attributes())
	td.MarkReadOnly()
	want := c.Convert(td)
	done := make(chan ConvertResult)
	for range 4 {
		go func() { done <- c.Convert(td) }()
	}
	for range 4 {
		require.Equal(t, want, <-done)
	}
}

// TestConvertCapsResourceBytes checks that a resource's attributes are
// kept within max_resource_bytes, in wire order, service.name whatever its
// place, and the rest dropped and counted.
func TestConvertCapsResourceBytes(t *testing.T) {
	td, res, _ := newSpan()
	for i := range 40 {
		res.Attributes().PutStr(fmt.Sprintf("attr.%02d", i), strings.Repeat("v", 1017)) // 1 KiB with the key
	}
	res.Attributes().PutStr("service.name", "checkout")
	c := newTestConverter(t, DefaultLimits())
	got := c.Convert(td)
	attrs := got.Spans[0].ResourceAttrs
	require.Len(t, attrs, 33, "32 KiB hold 32 attributes of 1 KiB, and service.name")
	require.Equal(t, "attr.31", attrs[31].Key)
	require.Equal(t, "service.name", attrs[32].Key)
	require.Equal(t, "checkout", got.Spans[0].Service)
	require.Equal(t, 8, got.Stats.DroppedAttrs)
}
