package translate_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/budgetd/budgetd/ingest/translate"
)

// zipkinSpans is an RPC as Brave-style tracers report it: the client and
// the server share span id 0a (the server says "shared"), and the server's
// database call names 0a as its parent.
const zipkinSpans = `[
 {"traceId":"4bf92f3577b34da6","id":"00000000000000f0","name":"get /checkout","kind":"SERVER","timestamp":1740830000000000,"duration":3000000,
  "localEndpoint":{"serviceName":"gateway","ipv4":"10.0.0.1","port":8080}},
 {"traceId":"4bf92f3577b34da6","parentId":"00000000000000f0","id":"000000000000000a","name":"post /order","kind":"CLIENT",
  "timestamp":1740830000001000,"duration":1000000,"localEndpoint":{"serviceName":"gateway"},
  "remoteEndpoint":{"serviceName":"order","ipv6":"2001:db8::1","port":443},
  "annotations":[{"timestamp":1740830001001000,"value":"exception|{\"exception.type\":\"java.net.SocketTimeoutException\",\"n\":2,\"x\":1.5,\"b\":true,\"a\":[1]}|0"},
   {"timestamp":1740830001001000,"value":"wr"},{"timestamp":1740830001001000,"value":"a|b|c"}],
  "tags":{"budget.timeout_ms":"1000","http.request.header.grpc-timeout":"[\"1S\"]","otel.status_code":"ERROR","error":"context deadline exceeded",
   "host.name":"gw-1","otel.library.name":"brave","otel.library.version":"6.0",
   "otlp.link.0":"0102030405060708090a0b0c0d0e0f10|1112131415161718|k=v|{\"opentracing.ref_type\":\"follows_from\"}|1"}},
 {"traceId":"4bf92f3577b34da6","parentId":"00000000000000f0","id":"000000000000000a","name":"post /order","kind":"SERVER","shared":true,
  "timestamp":1740830000002000,"duration":1500000,"localEndpoint":{"serviceName":"order"}},
 {"traceId":"4bf92f3577b34da6","parentId":"000000000000000a","id":"000000000000000b","name":"select","kind":"CLIENT",
  "timestamp":1740830000003000,"duration":1400000,"localEndpoint":{"serviceName":"order"},"remoteEndpoint":{"serviceName":"db"}},
 {"traceId":"4bf92f3577b34da6","parentId":"000000000000000a","id":"000000000000000c","name":"cache","tags":{"span.kind":"internal"},
  "timestamp":1740830000003000,"duration":1,"localEndpoint":{"serviceName":"order"}}
]`

func TestZipkinSpans(t *testing.T) {
	td, err := translate.Zipkin([]byte(zipkinSpans))
	require.NoError(t, err)
	require.Equal(t, 5, td.SpanCount())

	rss := td.ResourceSpans()
	require.Equal(t, 3, rss.Len(), "gateway, gateway with host.name, order")
	require.Equal(t, map[string]any{"service.name": "gateway"}, rss.At(0).Resource().Attributes().AsRaw())
	require.Equal(t, map[string]any{"service.name": "gateway", "host.name": "gw-1"}, rss.At(1).Resource().Attributes().AsRaw())
	sc := rss.At(1).ScopeSpans().At(0).Scope()
	require.Equal(t, "brave", sc.Name())
	require.Equal(t, "6.0", sc.Version())

	var spans []ptrace.Span
	for i := 0; i < rss.Len(); i++ {
		for j := 0; j < rss.At(i).ScopeSpans().Len(); j++ {
			ss := rss.At(i).ScopeSpans().At(j).Spans()
			for k := 0; k < ss.Len(); k++ {
				spans = append(spans, ss.At(k))
			}
		}
	}
	root, client, server, db, cache := spans[0], spans[1], spans[2], spans[3], spans[4]

	require.Equal(t, "00000000000000004bf92f3577b34da6", root.TraceID().String(), "a 64-bit trace id")
	require.Equal(t, ptrace.SpanKindServer, root.Kind())
	require.Equal(t, map[string]any{"net.host.ip": "10.0.0.1", "net.host.port": int64(8080)}, root.Attributes().AsRaw())
	require.Equal(t, pcommon.Timestamp(1740830003000000000), root.EndTimestamp())

	require.Equal(t, ptrace.SpanKindClient, client.Kind())
	require.Equal(t, "000000000000000a", client.SpanID().String())
	require.Equal(t, "00000000000000f0", client.ParentSpanID().String())
	require.Equal(t, ptrace.StatusCodeError, client.Status().Code())
	require.Equal(t, "context deadline exceeded", client.Status().Message(), "the SDKs' error tag holds the description")
	require.Equal(t, map[string]any{
		"budget.timeout_ms": "1000", "error": "context deadline exceeded", "http.request.header.grpc-timeout": []any{"1S"},
		"peer.service": "order", "net.peer.ip": "2001:db8::1", "net.peer.port": int64(443),
	}, client.Attributes().AsRaw())
	require.Equal(t, 3, client.Events().Len())
	require.Equal(t, "exception", client.Events().At(0).Name())
	require.Equal(t, map[string]any{"exception.type": "java.net.SocketTimeoutException", "n": int64(2), "x": 1.5, "b": true},
		client.Events().At(0).Attributes().AsRaw(), "the exporter's event attributes, arrays dropped as the Collector does")
	require.Equal(t, pcommon.Timestamp(1740830001001000000), client.Events().At(0).Timestamp())
	require.Equal(t, "wr", client.Events().At(1).Name())
	require.Equal(t, "a|b|c", client.Events().At(2).Name(), "free text with pipes stays the name")
	require.Zero(t, client.Events().At(2).Attributes().Len())
	require.Equal(t, 1, client.Links().Len())
	link := client.Links().At(0)
	require.Equal(t, "0102030405060708090a0b0c0d0e0f10", link.TraceID().String())
	require.Equal(t, "1112131415161718", link.SpanID().String())
	require.Equal(t, "k=v", link.TraceState().AsRaw())
	require.Equal(t, map[string]any{"opentracing.ref_type": "follows_from"}, link.Attributes().AsRaw())
	require.Equal(t, uint32(1), link.DroppedAttributesCount())

	require.Equal(t, ptrace.SpanKindServer, server.Kind())
	require.Equal(t, "00000000000000f1", server.SpanID().String(), "the shared server span gets the next id after the trace's largest")
	require.Equal(t, "000000000000000a", server.ParentSpanID().String(), "and the client as its parent")
	require.Equal(t, "00000000000000f1", db.ParentSpanID().String(), "the server's children follow it")
	require.Equal(t, "00000000000000f1", cache.ParentSpanID().String())
	require.Equal(t, ptrace.SpanKindInternal, cache.Kind())
	require.Zero(t, cache.Attributes().Len(), "span.kind consumed")
	require.Equal(t, map[string]any{"peer.service": "db"}, db.Attributes().AsRaw())
}

func TestZipkinSharedSpans(t *testing.T) {
	tests := []struct {
		name  string
		spans string
		ids   []string // span id, parent id, for each span
	}{
		{"a shared server without its client keeps its id",
			`[{"traceId":"1","id":"a","parentId":"f","kind":"SERVER","shared":true}]`,
			[]string{"000000000000000a", "000000000000000f"}},
		{"a server reusing its client's id without the flag (Zipkin v1 data)",
			`[{"traceId":"1","id":"a","kind":"CLIENT"},{"traceId":"1","id":"a","kind":"SERVER"}]`,
			[]string{"000000000000000a", "", "000000000000000b", "000000000000000a"}},
		{"the same id in two traces is not shared",
			`[{"traceId":"1","id":"a","kind":"CLIENT"},{"traceId":"2","id":"a","kind":"SERVER"}]`,
			[]string{"000000000000000a", "", "000000000000000a", ""}},
		{"a new id skips ids in use",
			`[{"traceId":"1","id":"ffffffffffffffff","kind":"CLIENT"},{"traceId":"1","id":"ffffffffffffffff","kind":"SERVER"},{"traceId":"1","id":"1","parentId":"ffffffffffffffff"}]`,
			[]string{"ffffffffffffffff", "", "0000000000000002", "ffffffffffffffff", "0000000000000001", "0000000000000002"}},
		{"a span naming itself as parent is a root",
			`[{"traceId":"1","id":"a","parentId":"a"}]`,
			[]string{"000000000000000a", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			td, err := translate.Zipkin([]byte(tt.spans))
			require.NoError(t, err)
			var ids []string
			rss := td.ResourceSpans()
			for i := 0; i < rss.Len(); i++ {
				spans := rss.At(i).ScopeSpans().At(0).Spans()
				for k := 0; k < spans.Len(); k++ {
					sp := spans.At(k)
					parent := ""
					if !sp.ParentSpanID().IsEmpty() {
						parent = sp.ParentSpanID().String()
					}
					ids = append(ids, sp.SpanID().String(), parent)
				}
			}
			require.Equal(t, tt.ids, ids)
		})
	}
}

func TestZipkinStatus(t *testing.T) {
	tests := []struct {
		name    string
		tags    string
		code    ptrace.StatusCode
		message string
		left    map[string]any
	}{
		{"none", `{}`, ptrace.StatusCodeUnset, "", map[string]any{}},
		{"collector exporter", `{"otel.status_code":"Error","otel.status_description":"timed out","error":"true"}`, ptrace.StatusCodeError, "timed out", map[string]any{}},
		{"older collector", `{"otel.status_code":"STATUS_CODE_OK"}`, ptrace.StatusCodeOk, "", map[string]any{}},
		{"sdk exporter", `{"otel.status_code":"ERROR","error":"deadline exceeded"}`, ptrace.StatusCodeError, "deadline exceeded", map[string]any{"error": "deadline exceeded"}},
		{"sdk ok", `{"otel.status_code":"OK"}`, ptrace.StatusCodeOk, "", map[string]any{}},
		{"brave error tag", `{"error":"500"}`, ptrace.StatusCodeError, "500", map[string]any{"error": "500"}},
		{"empty error tag", `{"error":""}`, ptrace.StatusCodeError, "", map[string]any{"error": ""}},
		{"unknown code", `{"otel.status_code":"maybe"}`, ptrace.StatusCodeUnset, "", map[string]any{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			td, err := translate.Zipkin([]byte(`[{"traceId":"1","id":"2","timestamp":1,"tags":` + tt.tags + `}]`))
			require.NoError(t, err)
			sp := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
			require.Equal(t, tt.code, sp.Status().Code())
			require.Equal(t, tt.message, sp.Status().Message())
			require.Equal(t, tt.left, sp.Attributes().AsRaw())
		})
	}
}

func TestZipkinForms(t *testing.T) {
	t.Run("no timestamp", func(t *testing.T) {
		td, err := translate.Zipkin([]byte(`[{"traceId":"1","id":"2","duration":5}]`))
		require.NoError(t, err)
		rs := td.ResourceSpans().At(0)
		require.Zero(t, rs.Resource().Attributes().Len(), "no service: no resource attributes, as the Collector")
		sp := rs.ScopeSpans().At(0).Spans().At(0)
		require.Equal(t, pcommon.Timestamp(0), sp.StartTimestamp())
		require.Equal(t, pcommon.Timestamp(5000), sp.EndTimestamp())
		require.Equal(t, map[string]any{"otel.zipkin.absentField.startTime": true}, sp.Attributes().AsRaw())
	})
	t.Run("service name source", func(t *testing.T) {
		td, err := translate.Zipkin([]byte(`[{"traceId":"1","id":"2","localEndpoint":{"serviceName":"fn"},"tags":{"otlp.service.name.source":"faas.name"}}]`))
		require.NoError(t, err)
		require.Equal(t, map[string]any{"faas.name": "fn"}, td.ResourceSpans().At(0).Resource().Attributes().AsRaw())
	})
	t.Run("empty", func(t *testing.T) {
		td, err := translate.Zipkin([]byte(`[]`))
		require.NoError(t, err)
		require.Zero(t, td.SpanCount())
	})
	t.Run("zero ids are left for the converter to reject", func(t *testing.T) {
		td, err := translate.Zipkin([]byte(`[{"traceId":"0000000000000000","id":""}]`))
		require.NoError(t, err)
		require.True(t, td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).SpanID().IsEmpty())
	})
}

func TestZipkinErrors(t *testing.T) {
	span := func(fields string) string {
		return `[{"traceId":"1","id":"1"},{"traceId":"1","id":"2",` + fields + `}]`
	}
	tests := []struct {
		name, doc, want string
	}{
		{"bad id", span(`"id":"xyz"`), `span 2: bad id "xyz"`},
		{"trace id too long", span(`"traceId":"4bf92f3577b34da6a3ce929d0e0e47361"`), `span 2: bad traceId "4bf92f3577b34da6a3ce929d0e0e47361"`},
		{"bad parent", span(`"parentId":"-1"`), `span 2: bad parentId "-1"`},
		{"negative timestamp", span(`"timestamp":-1`), "span 2: bad timestamp: -1 is not a whole number of microseconds"},
		{"bad duration", span(`"duration":"long"`), "span 2: "},
		{"tag not a string", span(`"tags":{"n":1}`), "span 2: tags: a JSON number where a string was expected"},
		{"bad ipv4", span(`"localEndpoint":{"ipv4":"300.1.1.1"}`), `span 2: localEndpoint: bad ipv4 "300.1.1.1"`},
		{"bad port", span(`"remoteEndpoint":{"port":70000}`), "span 2: remoteEndpoint.port: a JSON number 70000 where an integer from 0 to 65535 was expected"},
		{"bad annotation time", span(`"annotations":[{"timestamp":1.5,"value":"x"}]`), "span 2: annotations[0]: bad timestamp"},
		{"bad link", span(`"tags":{"otlp.link.0":"zz|1112131415161718||{}|0"}`), `span 2: tag otlp.link.0: bad trace id "zz"`},
		{"bad link attributes", span(`"tags":{"otlp.link.0":"||||0"}`), "span 2: tag otlp.link.0: attributes are not a JSON object"},
		{"an object, not an array", `{"traceId":"1"}`, "a JSON object where an array was expected"},
		{"a span that is not an object", `[1]`, "span 1: a JSON number where an object was expected"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.True(t, json.Valid([]byte(tt.doc)))
			_, err := translate.Zipkin([]byte(tt.doc))
			require.ErrorContains(t, err, tt.want)
		})
	}
}
