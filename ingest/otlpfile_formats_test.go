package ingest

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/fixtures"
	"github.com/budgetd/budgetd/ingest/translate/translatetest"
	"github.com/budgetd/budgetd/schema"
)

func TestDetectJaegerAndZipkin(t *testing.T) {
	tests := []struct {
		name string
		data string
		want Format
	}{
		{"jaeger response", `{"data":[{"traceID":"1","spans":[]}],"total":0}`, FormatJaegerJSON},
		{"jaeger pretty, after a BOM", "\xEF\xBB\xBF\n{\n  \"data\": [\n  ]\n}\n", FormatJaegerJSON},
		{"jaeger trace object", `{"traceID":"1","spans":[],"processes":{}}`, FormatJaegerJSON},
		{"jaeger cut short", `{"data":[{"traceID":"1","spans":[{"spanID":`, FormatJaegerJSON},
		{"jaeger, data after an unknown key", `{"total":1,"data":[]}`, FormatJaegerJSON},
		{"otlp before a data key", `{"resourceSpans":[],"data":[]}`, FormatJSON},
		{"data nested, not top level", `{"resourceSpans":[{"data":[]}]}`, FormatJSON},
		{"data inside a string", `{"x":"\"data\":[","resourceSpans":[]}`, FormatJSON},
		{"empty object", `{}`, FormatJSON},
		{"zipkin", `[{"traceId":"1","id":"2"}]`, FormatZipkinJSON},
		{"zipkin after white space and a BOM", "\xEF\xBB\xBF \n[]", FormatZipkinJSON},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, DetectFormat([]byte(tt.data)))
		})
	}
}

// TestReadJaegerMatchesOTLP reads every fixture's Jaeger form (as Jaeger's
// query service writes it) and expects exactly the spans of the OTLP file:
// Jaeger keeps the types of attribute values, and translate restores the
// header arrays, so nothing budgetd stores may differ.
func TestReadJaegerMatchesOTLP(t *testing.T) {
	c := newTestConverter(t, DefaultLimits())
	compared := 0
	for _, name := range fixtures.Names() {
		data, err := fixtures.Read(name)
		require.NoError(t, err)
		tds, err := DecodeTraces(data)
		require.NoError(t, err)
		if losses := translatetest.JaegerLosses(tds[0]); len(losses) > 0 {
			t.Logf("%s left out: %s", name, strings.Join(losses, "; "))
			continue
		}
		jaeger, err := translatetest.JaegerJSON(tds[0])
		require.NoError(t, err)
		want, err := ReadSpans(bytes.NewReader(data), c)
		require.NoError(t, err)
		got, err := ReadSpans(bytes.NewReader(jaeger), c)
		require.NoError(t, err, name)
		require.Zero(t, got.Rejected)
		require.Equal(t, bySpanID(want.Spans), bySpanID(got.Spans), name)
		compared++
	}
	require.Equal(t, len(fixtures.Names()), compared, "every fixture compared")
}

// bySpanID sorts spans by trace and span id: the Jaeger form groups spans
// by trace, OTLP by resource.
func bySpanID(spans []schema.Span) []schema.Span {
	out := append([]schema.Span(nil), spans...)
	sort.Slice(out, func(i, j int) bool {
		if out[i].TraceID != out[j].TraceID {
			return bytes.Compare(out[i].TraceID[:], out[j].TraceID[:]) < 0
		}
		return bytes.Compare(out[i].SpanID[:], out[j].SpanID[:]) < 0
	})
	return out
}

func TestReadZipkinCountsRejected(t *testing.T) {
	c := newTestConverter(t, DefaultLimits())
	data := `[{"traceId":"1","id":"1","timestamp":1,"duration":1},{"traceId":"0","id":"2"},{"traceId":"1","id":"0000000000000000"}]`
	res, err := ReadSpans(strings.NewReader(data), c)
	require.NoError(t, err)
	require.Len(t, res.Spans, 1)
	require.Equal(t, 2, res.Rejected)
	require.Equal(t, "trace_id is missing or all zero (1 span); span_id is missing or all zero (1 span)", res.RejectReason)

	bad := filepath.Join(t.TempDir(), "trace.json")
	require.NoError(t, os.WriteFile(bad, []byte(`[{"traceId":"1","id":"2","timestamp":-3}]`), 0o600))
	_, err = ReadSpansFile(bad, c)
	require.EqualError(t, err, "read spans from "+bad+": read zipkin json: span 1: bad timestamp: -3 is not a whole number of microseconds from 0 to 18446744073709551")
}
