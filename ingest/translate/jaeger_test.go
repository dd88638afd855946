package translate_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/budgetd/budgetd/ingest/translate"
)

// jaegerDownload is a trace as the Jaeger UI downloads it: a client in
// service "order" calling "pricing", which times out, logs an exception and
// starts an asynchronous job (FOLLOWS_FROM).
const jaegerDownload = `{"data":[{"traceID":"4bf92f3577b34da6a3ce929d0e0e4736","spans":[
 {"traceID":"4bf92f3577b34da6a3ce929d0e0e4736","spanID":"00000000000000a1","operationName":"POST /price","references":[],
  "startTime":1740830000000000,"duration":900000,"processID":"p1","warnings":null,"flags":1,
  "tags":[{"key":"otel.scope.name","type":"string","value":"io.opentelemetry.okhttp"},{"key":"otel.scope.version","type":"string","value":"2.1"},
   {"key":"span.kind","type":"string","value":"client"},{"key":"budget.timeout_ms","type":"float64","value":800},
   {"key":"budget.attempt","type":"int64","value":2},{"key":"big","type":"int64","value":"9007199254740993"},
   {"key":"http.request.header.x-request-timeout-ms","type":"string","value":"[\"900\"]"},
   {"key":"raw","type":"binary","value":"aGk="},{"key":"cached","type":"bool","value":false},
   {"key":"error","type":"bool","value":true},{"key":"otel.status_code","type":"string","value":"ERROR"},
   {"key":"otel.status_description","type":"string","value":"context deadline exceeded"}],
  "logs":[{"timestamp":1740830000800000,"fields":[{"key":"event","type":"string","value":"exception"},
   {"key":"exception.type","type":"string","value":"java.net.SocketTimeoutException"}]},
   {"timestamp":1740830000850000,"fields":[{"key":"message","type":"string","value":"giving up"}]}]},
 {"traceID":"4bf92f3577b34da6a3ce929d0e0e4736","spanID":"00000000000000b2","operationName":"POST /price",
  "references":[{"refType":"CHILD_OF","traceID":"4bf92f3577b34da6a3ce929d0e0e4736","spanID":"00000000000000a1"}],
  "startTime":1740830000010000,"duration":2000000,"processID":"p2",
  "tags":[{"key":"span.kind","type":"string","value":"server"},{"key":"http.status_code","type":"int64","value":504}],"logs":[]},
 {"traceID":"4bf92f3577b34da6a3ce929d0e0e4736","spanID":"00000000000000c3","operationName":"recompute",
  "references":[{"refType":"FOLLOWS_FROM","traceID":"4bf92f3577b34da6a3ce929d0e0e4736","spanID":"00000000000000b2"},
   {"refType":"CHILD_OF","traceID":"00000000000000000000000000000abc","spanID":"0000000000000def"}],
  "startTime":1740830002000000,"duration":5,"processID":"p2","tags":[{"key":"span.kind","type":"string","value":"consumer"}],"logs":[]}],
 "processes":{"p1":{"serviceName":"order","tags":[{"key":"hostname","type":"string","value":"node-1"},{"key":"jaeger.version","type":"string","value":"Go-2.30.0"}]},
  "p2":{"serviceName":"pricing","tags":[]}},"warnings":null}],"total":0,"limit":0,"offset":0,"errors":null}`

func spansOf(td ptrace.Traces) map[string]ptrace.Span {
	out := map[string]ptrace.Span{}
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			for k := 0; k < sss.At(j).Spans().Len(); k++ {
				sp := sss.At(j).Spans().At(k)
				out[sp.SpanID().String()] = sp
			}
		}
	}
	return out
}

func TestJaegerDownload(t *testing.T) {
	td, err := translate.Jaeger([]byte(jaegerDownload))
	require.NoError(t, err)
	require.Equal(t, 3, td.SpanCount())
	require.Equal(t, 2, td.ResourceSpans().Len(), "one resource per process")

	order := td.ResourceSpans().At(0)
	require.Equal(t, map[string]any{"service.name": "order", "host.name": "node-1", "opencensus.exporterversion": "Jaeger-Go-2.30.0"},
		order.Resource().Attributes().AsRaw())
	sc := order.ScopeSpans().At(0).Scope()
	require.Equal(t, "io.opentelemetry.okhttp", sc.Name())
	require.Equal(t, "2.1", sc.Version())

	spans := spansOf(td)
	client := spans["00000000000000a1"]
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", client.TraceID().String())
	require.Equal(t, "POST /price", client.Name())
	require.Equal(t, ptrace.SpanKindClient, client.Kind())
	require.True(t, client.ParentSpanID().IsEmpty())
	require.Equal(t, pcommon.Timestamp(1740830000000000000), client.StartTimestamp())
	require.Equal(t, pcommon.Timestamp(1740830000900000000), client.EndTimestamp())
	require.Equal(t, ptrace.StatusCodeError, client.Status().Code())
	require.Equal(t, "context deadline exceeded", client.Status().Message())
	require.Equal(t, map[string]any{
		"budget.timeout_ms": 800.0, "budget.attempt": int64(2), "big": int64(9007199254740993),
		"http.request.header.x-request-timeout-ms": []any{"900"}, "raw": []byte("hi"), "cached": false,
	}, client.Attributes().AsRaw(), "kind, status and scope tags consumed; the header array restored")
	require.Equal(t, 2, client.Events().Len())
	require.Equal(t, "exception", client.Events().At(0).Name())
	require.Equal(t, map[string]any{"exception.type": "java.net.SocketTimeoutException"}, client.Events().At(0).Attributes().AsRaw())
	require.Equal(t, pcommon.Timestamp(1740830000800000000), client.Events().At(0).Timestamp())
	require.Equal(t, "log", client.Events().At(1).Name(), "a log without an event field")
	require.Zero(t, client.Links().Len())

	server := spans["00000000000000b2"]
	require.Equal(t, ptrace.SpanKindServer, server.Kind())
	require.Equal(t, "00000000000000a1", server.ParentSpanID().String())
	require.Zero(t, server.Links().Len(), "the CHILD_OF parent is not also a link")
	require.Equal(t, ptrace.StatusCodeError, server.Status().Code(), "504 without error or otel.status_code")
	v, ok := server.Attributes().Get("http.status_code")
	require.True(t, ok, "http.status_code stays an attribute")
	require.Equal(t, int64(504), v.Int())

	async := spans["00000000000000c3"]
	require.Equal(t, "00000000000000b2", async.ParentSpanID().String(), "FOLLOWS_FROM within the trace is the parent without a CHILD_OF in it")
	require.Equal(t, 2, async.Links().Len(), "the FOLLOWS_FROM parent and the other trace's span, as the Collector links them")
	require.Equal(t, map[string]any{"opentracing.ref_type": "follows_from"}, async.Links().At(0).Attributes().AsRaw())
	require.Equal(t, "00000000000000000000000000000abc", async.Links().At(1).TraceID().String())
	require.Equal(t, map[string]any{"opentracing.ref_type": "child_of"}, async.Links().At(1).Attributes().AsRaw())
	require.Equal(t, pcommon.Timestamp(1740830002000005000), async.EndTimestamp())
}

func TestJaegerStatus(t *testing.T) {
	tests := []struct {
		name    string
		tags    string
		code    ptrace.StatusCode
		message string
		left    []string // status tags left as attributes
	}{
		{"none", `[]`, ptrace.StatusCodeUnset, "", nil},
		{"error true", `[{"key":"error","type":"bool","value":true}]`, ptrace.StatusCodeError, "", nil},
		{"error false", `[{"key":"error","type":"bool","value":false}]`, ptrace.StatusCodeUnset, "", []string{"error"}},
		{"error as a string is not the bool", `[{"key":"error","type":"string","value":"true"}]`, ptrace.StatusCodeUnset, "", []string{"error"}},
		{"error with http.status_message", `[{"key":"error","type":"bool","value":true},{"key":"http.status_message","type":"string","value":"Gateway Timeout"}]`,
			ptrace.StatusCodeError, "Gateway Timeout", []string{"http.status_message"}},
		{"otel ok", `[{"key":"otel.status_code","type":"string","value":"OK"}]`, ptrace.StatusCodeOk, "", nil},
		{"otel error with description", `[{"key":"otel.status_code","type":"string","value":"ERROR"},{"key":"otel.status_description","type":"string","value":"timed out"}]`,
			ptrace.StatusCodeError, "timed out", nil},
		{"error wins over otel ok", `[{"key":"error","type":"bool","value":true},{"key":"otel.status_code","type":"string","value":"OK"}]`,
			ptrace.StatusCodeError, "", nil},
		{"otel.status_code wins over http", `[{"key":"otel.status_code","type":"string","value":"OK"},{"key":"http.status_code","type":"int64","value":504}]`,
			ptrace.StatusCodeOk, "", []string{"http.status_code"}},
		{"server 404", `[{"key":"span.kind","type":"string","value":"server"},{"key":"http.status_code","type":"int64","value":404}]`,
			ptrace.StatusCodeUnset, "", []string{"http.status_code"}},
		{"client 404", `[{"key":"span.kind","type":"string","value":"client"},{"key":"http.status_code","type":"string","value":"404"}]`,
			ptrace.StatusCodeError, "", []string{"http.status_code"}},
		{"http 200", `[{"key":"http.status_code","type":"int64","value":200}]`, ptrace.StatusCodeUnset, "", []string{"http.status_code"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := `{"data":[{"traceID":"1","spans":[{"traceID":"1","spanID":"2","startTime":1,"duration":1,"tags":` + tt.tags + `}]}]}`
			td, err := translate.Jaeger([]byte(doc))
			require.NoError(t, err)
			sp := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
			require.Equal(t, tt.code, sp.Status().Code())
			require.Equal(t, tt.message, sp.Status().Message())
			var left []string
			for k := range sp.Attributes().All() {
				left = append(left, k)
			}
			require.Equal(t, tt.left, left)
		})
	}
}

func TestJaegerForms(t *testing.T) {
	t.Run("one trace object, short ids, deprecated parentSpanID", func(t *testing.T) {
		doc := `{"traceID":"abc","spans":[{"spanID":"5","parentSpanID":"4","operationName":"op","startTime":10,"duration":2,"processID":"p1"}],
			"processes":{"p1":{"serviceName":"svc"}}}`
		td, err := translate.Jaeger([]byte(doc))
		require.NoError(t, err)
		sp := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
		require.Equal(t, "00000000000000000000000000000abc", sp.TraceID().String(), "the trace's id for a span without one")
		require.Equal(t, "0000000000000005", sp.SpanID().String())
		require.Equal(t, "0000000000000004", sp.ParentSpanID().String())
		require.Zero(t, sp.Links().Len())
	})
	t.Run("embedded process", func(t *testing.T) {
		doc := `{"data":[{"spans":[{"traceID":"1","spanID":"2","startTime":1,"duration":1,
			"process":{"serviceName":"svc","tags":[{"key":"pid","type":"int64","value":"42"}]},
			"tags":[{"key":"n","type":"int64","value":"7"},{"key":"ok","type":"bool","value":"true"},{"key":"f","type":"float64","value":"1.5"}]}]}]}`
		td, err := translate.Jaeger([]byte(doc))
		require.NoError(t, err)
		rs := td.ResourceSpans().At(0)
		require.Equal(t, map[string]any{"service.name": "svc", "pid": int64(42)}, rs.Resource().Attributes().AsRaw())
		require.Equal(t, map[string]any{"n": int64(7), "ok": true, "f": 1.5}, rs.ScopeSpans().At(0).Spans().At(0).Attributes().AsRaw())
	})
	t.Run("the same process in two traces is one resource", func(t *testing.T) {
		trace := func(id string) string {
			return `{"traceID":"` + id + `","spans":[{"traceID":"` + id + `","spanID":"1","startTime":1,"duration":1,"processID":"p1"}],
				"processes":{"p1":{"serviceName":"svc","tags":[{"key":"k","type":"string","value":"v"}]}}}`
		}
		td, err := translate.Jaeger([]byte(`{"data":[` + trace("1") + `,` + trace("2") + `]}`))
		require.NoError(t, err)
		require.Equal(t, 1, td.ResourceSpans().Len())
		require.Equal(t, 2, td.SpanCount())
	})
	t.Run("zero ids are left for the converter to reject", func(t *testing.T) {
		td, err := translate.Jaeger([]byte(`{"data":[{"spans":[{"traceID":"0","spanID":""}]}]}`))
		require.NoError(t, err)
		sp := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
		require.True(t, sp.TraceID().IsEmpty())
		require.True(t, sp.SpanID().IsEmpty())
	})
	t.Run("no data", func(t *testing.T) {
		td, err := translate.Jaeger([]byte(`{"data":[],"errors":null}`))
		require.NoError(t, err)
		require.Zero(t, td.SpanCount())
	})
}

func TestJaegerErrors(t *testing.T) {
	span := func(fields string) string {
		return `{"data":[{"traceID":"1","spans":[{"traceID":"1","spanID":"1","startTime":1,"duration":1},{"traceID":"1","spanID":"2",` + fields + `}],
			"processes":{"p1":{"serviceName":"svc","tags":[{"key":"n","type":"int64","value":"x"}]}}}]}`
	}
	tests := []struct {
		name, doc, want string
	}{
		{"bad span id", span(`"spanID":"xyz"`), `trace 1 span 2: bad spanID "xyz"`},
		{"span id too long", span(`"spanID":"00000000000000001"`), `trace 1 span 2: bad spanID "00000000000000001"`},
		{"bad trace id", span(`"traceID":"4bf92f3577b34da6a3ce929d0e0e47361"`), `trace 1 span 2: bad traceID "4bf92f3577b34da6a3ce929d0e0e47361"`},
		{"negative start", span(`"startTime":-1`), "trace 1 span 2: bad startTime: -1 is not a whole number of microseconds"},
		{"fractional duration", span(`"duration":1.5`), "trace 1 span 2: bad duration: 1.5 is not a whole number"},
		{"start past 2554", span(`"startTime":18446744073709552`), "trace 1 span 2: bad startTime"},
		{"end past 2554", span(`"startTime":18446744073709550,"duration":18446744073709550`), "trace 1 span 2: start + duration is past the year 2554"},
		{"string time", span(`"startTime":"soon"`), "trace 1 span 2: "},
		{"tags not an array", span(`"tags":{"a":1}`), "trace 1 span 2: tags: a JSON object where an array was expected"},
		{"bad int64", span(`"tags":[{"key":"n","type":"int64","value":1.5}]`), `trace 1 span 2: tag "n": bad int64 value "1.5"`},
		{"bad bool", span(`"tags":[{"key":"b","type":"bool","value":1}]`), `trace 1 span 2: tag "b": bad bool value "1"`},
		{"bad binary", span(`"tags":[{"key":"b","type":"binary","value":"not base64!"}]`), `trace 1 span 2: tag "b": bad binary value`},
		{"bad log field", span(`"logs":[{"timestamp":1,"fields":[{"key":"f","type":"float64","value":"x"}]}]`), `trace 1 span 2: logs[0]: tag "f": bad float64 value`},
		{"bad log time", span(`"logs":[{"timestamp":-5}]`), `trace 1 span 2: logs[0]: bad timestamp`},
		{"bad ref type", span(`"references":[{"refType":"PARENT","traceID":"1","spanID":"1"}]`), `trace 1 span 2: references[0]: bad refType "PARENT" (want CHILD_OF or FOLLOWS_FROM)`},
		{"bad ref span", span(`"references":[{"refType":"CHILD_OF","traceID":"1","spanID":"q"}]`), `trace 1 span 2: references[0]: bad spanID "q"`},
		{"ref without span", span(`"references":[{"refType":"CHILD_OF","traceID":"1"}]`), `trace 1 span 2: references[0]: bad spanID ""`},
		{"unknown process", span(`"processID":"p9"`), `trace 1 span 2: processID "p9" is not among the trace's processes`},
		{"bad process tag", span(`"processID":"p1"`), `trace 1 span 2: process "p1": tag "n": bad int64 value "\"x\""`},
		{"data not an array", `{"data":{"spans":[]}}`, "data: a JSON object where an array was expected"},
		{"query error", `{"data":null,"errors":[{"code":404,"msg":"trace not found"}]}`, "the query answered with an error and no traces: 404 trace not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.True(t, json.Valid([]byte(tt.doc)))
			_, err := translate.Jaeger([]byte(tt.doc))
			require.ErrorContains(t, err, tt.want)
		})
	}
}
