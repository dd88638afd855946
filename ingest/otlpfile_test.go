package ingest

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/budgetd/budgetd/ingest/ingesttest"
	"github.com/budgetd/budgetd/schema"
)

func marshalProto(t testing.TB, td ptrace.Traces) []byte {
	t.Helper()
	var m ptrace.ProtoMarshaler
	b, err := m.MarshalTraces(td)
	require.NoError(t, err)
	return b
}

func marshalJSON(t testing.TB, td ptrace.Traces) []byte {
	t.Helper()
	var m ptrace.JSONMarshaler
	b, err := m.MarshalTraces(td)
	require.NoError(t, err)
	return b
}

// convertAll converts every Traces and concatenates the spans.
func convertAll(c *Converter, tds []ptrace.Traces) []schema.Span {
	var spans []schema.Span
	for _, td := range tds {
		spans = append(spans, c.Convert(td).Spans...)
	}
	return spans
}

func TestReadTracesRoundTrip(t *testing.T) {
	first, second := ingesttest.Traces(1, 4), ingesttest.Traces(2, 3)
	firstJSON, secondJSON := marshalJSON(t, first), marshalJSON(t, second)
	var pretty bytes.Buffer
	require.NoError(t, json.Indent(&pretty, firstJSON, "", "  "))

	tests := []struct {
		name       string
		data       []byte
		wantFormat Format
		want       []ptrace.Traces
	}{
		{"protobuf", marshalProto(t, first), FormatProtobuf, []ptrace.Traces{first}},
		{"json", firstJSON, FormatJSON, []ptrace.Traces{first}},
		{"json with a trailing newline", append(firstJSON, '\n'), FormatJSON, []ptrace.Traces{first}},
		{"pretty-printed json", pretty.Bytes(), FormatJSON, []ptrace.Traces{first}},
		{"json after white space and a BOM", append([]byte("\xEF\xBB\xBF \n\t"), firstJSON...), FormatJSON, []ptrace.Traces{first}},
		{
			"json lines",
			bytes.Join([][]byte{firstJSON, secondJSON, nil}, []byte("\n")),
			FormatJSONLines,
			[]ptrace.Traces{first, second},
		},
		{
			"json lines with blank lines and CRLF",
			bytes.Join([][]byte{nil, firstJSON, nil, secondJSON, []byte("   "), firstJSON}, []byte("\r\n")),
			FormatJSONLines,
			[]ptrace.Traces{first, second, first},
		},
	}
	c := newTestConverter(t, DefaultLimits())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.wantFormat, DetectFormat(tt.data))
			got, err := ReadTraces(bytes.NewReader(tt.data))
			require.NoError(t, err)
			require.Len(t, got, len(tt.want))
			wantSpans := convertAll(c, tt.want)
			require.NotEmpty(t, wantSpans)
			require.Equal(t, wantSpans, convertAll(c, got))

			path := filepath.Join(t.TempDir(), "traces.otlp")
			require.NoError(t, os.WriteFile(path, tt.data, 0o600))
			fromFile, err := ReadSpansFile(path, c)
			require.NoError(t, err)
			require.Equal(t, wantSpans, fromFile)
		})
	}
}

// TestReadTracesHandWrittenJSON reads OTLP/JSON as people and other SDKs
// write it: hex ids, enums as names or numbers, int64 as strings.
func TestReadTracesHandWrittenJSON(t *testing.T) {
	const doc = `{"resourceSpans":[{
	  "resource":{"attributes":[{"key":"service.name","value":{"stringValue":"edge"}}]},
	  "scopeSpans":[{"scope":{"name":"manual","version":"1"},"spans":[
	    {"traceId":"4BF92F3577B34DA6A3CE929D0E0E4736","spanId":"00f067aa0ba902b7","name":"GET /",
	     "kind":"SPAN_KIND_SERVER","startTimeUnixNano":"1700000000000000000","endTimeUnixNano":"1700000000500000000",
	     "status":{"code":"STATUS_CODE_ERROR","message":"late"},
	     "attributes":[
	       {"key":"budget.remaining_ms","value":{"intValue":"1500"}},
	       {"key":"http.request.header.x-request-timeout-ms","value":{"arrayValue":{"values":[{"stringValue":"1500"}]}}}]},
	    {"traceId":"4bf92f3577b34da6a3ce929d0e0e4736","spanId":"53995c3f42cd8ad8","parentSpanId":"00f067aa0ba902b7",
	     "name":"call","kind":3,"startTimeUnixNano":1700000000100000000,"endTimeUnixNano":1700000000200000000,
	     "status":{"code":1}}
	  ]}]}]}`
	got, err := ReadTraces(strings.NewReader(doc))
	require.NoError(t, err)
	res := newTestConverter(t, DefaultLimits()).Convert(got[0])
	require.Len(t, res.Spans, 2)
	server, client := res.Spans[0], res.Spans[1]

	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", server.TraceID.String())
	require.Equal(t, "00f067aa0ba902b7", server.SpanID.String())
	require.Equal(t, "edge", server.Service)
	require.Equal(t, schema.KindServer, server.Kind)
	require.Equal(t, schema.StatusError, server.StatusCode)
	require.Equal(t, uint64(1_700_000_000_500_000_000), server.EndNs)
	require.Equal(t, schema.Attributes{
		schema.Int(schema.AttrRemainingMs, 1500),
		schema.Strings(schema.AttrHeaderRequestTimeoutMs, "1500"),
	}, server.Attrs)

	require.Equal(t, server.SpanID, client.ParentSpanID)
	require.Equal(t, schema.KindClient, client.Kind)
	require.Equal(t, schema.StatusOK, client.StatusCode)
	require.Equal(t, uint64(1_700_000_000_100_000_000), client.StartNs)
}

// TestReadTracesProtobufLookingLikeJSON covers a protobuf request whose
// first bytes are "\n{": the resource_spans tag and a length of 123. After
// skipping the newline it looks like JSON, and must still be read.
func TestReadTracesProtobufLookingLikeJSON(t *testing.T) {
	var data []byte
	for n := 1; n < 123 && data == nil; n++ {
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", strings.Repeat("s", n))
		sp := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
		sp.SetTraceID(testTraceID)
		sp.SetSpanID(testSpanID)
		sp.SetName("op")
		if b := marshalProto(t, td); bytes.HasPrefix(b, []byte("\n{")) {
			data = b
		}
	}
	require.NotNil(t, data, "no service name length gives a 123-byte ResourceSpans")
	require.NotEqual(t, FormatProtobuf, DetectFormat(data), "the guess is wrong; decoding must recover")

	got, err := ReadTraces(bytes.NewReader(data))
	require.NoError(t, err)
	spans := convertAll(newTestConverter(t, DefaultLimits()), got)
	require.Len(t, spans, 1)
	require.Equal(t, "op", spans[0].Name)
}

func TestReadTracesEmpty(t *testing.T) {
	tests := []struct {
		name string
		data string
	}{
		{"empty", ""},
		{"white space", " \n\r\n\t"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadTraces(strings.NewReader(tt.data))
			require.NoError(t, err)
			require.Empty(t, got)
		})
	}
}

func TestReadTracesMalformed(t *testing.T) {
	good := string(marshalJSON(t, ingesttest.Traces(1, 1)))
	tests := []struct {
		name    string
		data    string
		wantErr string // prefix of the error message
	}{
		{"truncated protobuf", "\x0a\x80\x01\x0a", "read otlp protobuf: "},
		{"protobuf with a wrong wire type", "\x0d\x00\x00\x00\x00", "read otlp protobuf: proto: wrong wireType = 5 for field ResourceSpans"},
		{"truncated json", `{"resourceSpans":[`, "read otlp json: column 19: unexpected end of JSON input"},
		{"pretty-printed json with a syntax error", "{\n  \"resourceSpans\": [\n    {]\n}", "read otlp json: line 3, column 6: invalid character ']'"},
		{"json with a bad trace id", `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"abc"}]}]}]}`, "read otlp json: "},
		{"json with the wrong type", `{"resourceSpans":{"a":1}}`, "read otlp json: "},
		{"json lines with a broken third line", good + "\n\n" + `{"resourceSpans":[` + "\n" + good, "read otlp json lines: line 3: column 19: unexpected end of JSON input"},
		{"json lines with a broken first line", `{"resourceSpans":[}` + "\n" + good, "read otlp json lines: line 1: column 19: invalid character '}'"},
		{"json lines with a bad span id", good + "\n" + `{"resourceSpans":[{"scopeSpans":[{"spans":[{"spanId":"zz"}]}]}]}`, "read otlp json lines: line 2: "},
		{"json lines with an array", good + "\n[1]", "read otlp json lines: line 2: not a JSON object"},
		{"json lines with trailing garbage", good + "\n" + good + " x", "read otlp json lines: line 2: column "},
		// Jaeger and Zipkin JSON (ingest/translate).
		{"jaeger bad span id", `{"data":[{"traceID":"1","spans":[{"spanID":"1"},{"spanID":"1"},{"spanID":"xyz"}]}]}`,
			`read jaeger json: trace 1 span 3: bad spanID "xyz"`},
		{"jaeger cut short", "{\n  \"data\": [\n    {\"traceID\": \"1\", \"spans\": [", "read jaeger json: line 3, column 32: unexpected end of JSON input"},
		{"zipkin bad id", `[{"traceId":"1","id":"q"}]`, `read zipkin json: span 1: bad id "q"`},
		{"zipkin cut short", `[{"traceId":"1",`, "read zipkin json: column 17: unexpected end of JSON input"},
		{"zipkin trailing garbage", `[] x`, "read zipkin json: column 4: invalid character 'x' after top-level value"},
		{"an object of another format", `{"result":{"resourceSpans":[]}}`,
			`read trace file: a JSON object with none of the keys of a format budgetd reads (first key "result"; OTLP/JSON has resourceSpans, Jaeger JSON data or spans, and Zipkin v2 JSON is an array)`},
		{"not a trace file", "hello, world", "read otlp protobuf: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadTraces(strings.NewReader(tt.data))
			require.Error(t, err)
			require.Nil(t, got)
			require.True(t, strings.HasPrefix(err.Error(), tt.wantErr), "error %q does not start with %q", err, tt.wantErr)
		})
	}
}

func TestReadTracesReaderError(t *testing.T) {
	boom := errors.New("disk on fire")
	_, err := ReadTraces(iotest.ErrReader(boom))
	require.ErrorIs(t, err, boom)
	require.ErrorContains(t, err, "read otlp file: ")
}

func TestReadSpansCountsAcrossRequests(t *testing.T) {
	line := func(spanID pcommon.SpanID, start, end uint64) []byte {
		td, _, sp := newSpan()
		sp.SetSpanID(spanID)
		sp.SetStartTimestamp(pcommon.Timestamp(start))
		sp.SetEndTimestamp(pcommon.Timestamp(end))
		sp.Attributes().PutStr("v", strings.Repeat("x", 3000))
		return marshalJSON(t, td)
	}
	data := bytes.Join([][]byte{
		line(testSpanID, 1, 2),
		line(pcommon.SpanID{}, 1, 2),
		line(testParent, 5, 1),
		line(testParent, 5, 6),
	}, []byte("\n"))

	c := newTestConverter(t, DefaultLimits())
	res, err := ReadSpans(bytes.NewReader(data), c)
	require.NoError(t, err)
	require.Len(t, res.Spans, 2)
	require.Equal(t, 2, res.Rejected)
	require.Equal(t, "span_id is missing or all zero (1 span); end_time_unix_nano is before start_time_unix_nano (1 span)", res.RejectReason)
	require.Equal(t, Stats{RejectedZeroSpanID: 1, RejectedEndBeforeStart: 1, TruncatedValues: 2}, res.Stats)

	path := filepath.Join(t.TempDir(), "traces.jsonl")
	require.NoError(t, os.WriteFile(path, data, 0o600))
	spans, err := ReadSpansFile(path, c)
	require.NoError(t, err)
	require.Equal(t, res.Spans, spans)
}

func TestReadSpansFileErrors(t *testing.T) {
	c := newTestConverter(t, DefaultLimits())
	dir := t.TempDir()

	_, err := ReadSpansFile(filepath.Join(dir, "missing.json"), c)
	require.ErrorIs(t, err, os.ErrNotExist)

	bad := filepath.Join(dir, "bad.jsonl")
	require.NoError(t, os.WriteFile(bad, []byte("{}\n{\n"), 0o600))
	_, err = ReadSpansFile(bad, c)
	require.EqualError(t, err, "read spans from "+bad+": read otlp json lines: line 2: column 2: unexpected end of JSON input")
}

func TestFormatString(t *testing.T) {
	require.Equal(t, "otlp protobuf", FormatProtobuf.String())
	require.Equal(t, "otlp json", FormatJSON.String())
	require.Equal(t, "otlp json lines", FormatJSONLines.String())
	require.Equal(t, "jaeger json", FormatJaegerJSON.String())
	require.Equal(t, "zipkin json", FormatZipkinJSON.String())
	require.Equal(t, "format(0)", Format(0).String())
}

// FuzzReadTraces feeds arbitrary bytes to the file reader and the converter.
// Invariant: nothing panics, and input that reads without error converts to
// spans that all have a non-zero trace and span id, end no earlier than they
// start, hold valid UTF-8 and respect the value limit (arrays and maps as
// valid JSON).
func FuzzReadTraces(f *testing.F) {
	// Small seeds: the fuzzer minimizes every input that finds new
	// coverage, and minimizing a realistic multi-kilobyte batch takes most
	// of a short run.
	td, res, sp := newSpan()
	res.Attributes().PutStr("service.name", "cart")
	putEveryType(sp.Attributes())
	sp.Events().AppendEmpty().Attributes().PutStr("k", "v")
	sp.Links().AppendEmpty().Attributes().PutInt("k", 1)
	f.Add(marshalProto(f, td))
	f.Add(marshalJSON(f, td))
	f.Add(append(append(marshalJSON(f, td), '\n'), marshalJSON(f, td)...))
	f.Add([]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"4bf92f3577b34da6a3ce929d0e0e4736","spanId":"00f067aa0ba902b7","kind":"SPAN_KIND_SERVER","attributes":[{"key":"k","value":{"arrayValue":{"values":[{"bytesValue":"aGk="},{"kvlistValue":{"values":[{"key":"x","value":{"doubleValue":"NaN"}}]}}]}}}]}]}]}]}`))
	f.Add([]byte("\n{"))
	f.Add([]byte{})
	// Jaeger and Zipkin JSON, which package translate reads.
	f.Add([]byte(`{"data":[{"traceID":"1","spans":[{"spanID":"2","startTime":1,"duration":1,"processID":"p1","tags":[{"key":"span.kind","type":"string","value":"client"}],"logs":[{"timestamp":1,"fields":[{"key":"event","type":"string","value":"exception"}]}]}],"processes":{"p1":{"serviceName":"cart","tags":[]}}}]}`))
	f.Add([]byte(`[{"traceId":"1","id":"2","kind":"SERVER","timestamp":1,"duration":1,"localEndpoint":{"serviceName":"cart"},"tags":{"http.request.header.grpc-timeout":"[\"1S\"]"},"annotations":[{"timestamp":1,"value":"e|{\"k\":\"v\"}|0"}]}]`))

	c := newTestConverter(f, DefaultLimits())
	f.Fuzz(func(t *testing.T, data []byte) {
		tds, err := ReadTraces(bytes.NewReader(data))
		if err != nil {
			require.Nil(t, tds)
			return
		}
		for _, td := range tds {
			res := c.Convert(td)
			require.Equal(t, res.Stats.Rejected(), res.Rejected)
			for _, s := range res.Spans {
				require.False(t, s.TraceID.IsZero())
				require.False(t, s.SpanID.IsZero())
				require.GreaterOrEqual(t, s.EndNs, s.StartNs)
				require.True(t, utf8.ValidString(s.Name))
				require.True(t, utf8.ValidString(s.Service))
				for _, attrs := range []schema.Attributes{s.Attrs, s.ResourceAttrs} {
					checkAttrs(t, attrs)
				}
				for _, e := range s.Events {
					require.True(t, utf8.ValidString(e.Name))
					checkAttrs(t, e.Attrs)
				}
				for _, l := range s.Links {
					checkAttrs(t, l.Attrs)
				}
			}
		}
	})
}

func checkAttrs(t *testing.T, attrs schema.Attributes) {
	t.Helper()
	for _, a := range attrs {
		require.True(t, utf8.ValidString(a.Key), "key %q", a.Key)
		require.True(t, utf8.ValidString(a.Value), "value %q", a.Value)
		require.LessOrEqual(t, len(a.Value), DefaultLimits().MaxAttrValueBytes)
		if a.Type == schema.AttrSlice || a.Type == schema.AttrMap {
			require.True(t, json.Valid([]byte(a.Value)), "value %q", a.Value)
		}
	}
}
