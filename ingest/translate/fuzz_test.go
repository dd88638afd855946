package translate_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/budgetd/budgetd/fixtures"
	"github.com/budgetd/budgetd/ingest/translate"
	"github.com/budgetd/budgetd/ingest/translate/translatetest"
)

// seedFixtures are small fixtures whose Jaeger and Zipkin forms seed the
// fuzzers: one with an event carrying attributes, one with header arrays.
var seedFixtures = []string{"orphaned_work_cancelled", "timeout_inversion_header_budget"}

func addFixtureSeeds(f *testing.F, write func(ptrace.Traces) ([]byte, error)) {
	for _, name := range seedFixtures {
		data, err := fixtures.Read(name)
		require.NoError(f, err)
		var u ptrace.JSONUnmarshaler
		td, err := u.UnmarshalTraces(data)
		require.NoError(f, err)
		out, err := write(td)
		require.NoError(f, err)
		f.Add(out)
	}
}

// checkTranslated is the invariant of both fuzzers: input that translates
// yields one OTLP span per input span, none ending before it starts.
func checkTranslated(t *testing.T, td ptrace.Traces, inputSpans int) {
	require.Equal(t, inputSpans, td.SpanCount())
	translate.EachSpan(td, func(_ ptrace.ResourceSpans, _ ptrace.ScopeSpans, sp ptrace.Span) {
		require.GreaterOrEqual(t, sp.EndTimestamp(), sp.StartTimestamp())
	})
}

// FuzzJaeger feeds arbitrary JSON to the Jaeger translator. Invariant: it
// never panics, and a document it accepts becomes exactly as many spans as
// the document holds, each ending no earlier than it starts.
func FuzzJaeger(f *testing.F) {
	addFixtureSeeds(f, translatetest.JaegerJSON)
	f.Add([]byte(jaegerDownload))
	f.Add([]byte(`{"traceID":"1","spans":[{"spanID":"2","parentSpanID":"1","startTime":1,"duration":2}]}`))
	f.Add([]byte(`{"data":null,"errors":[{"code":404,"msg":"trace not found"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			return // package ingest reports syntax errors before translating
		}
		td, err := translate.Jaeger(data)
		if err != nil {
			return
		}
		var doc struct {
			Data []struct {
				Spans []json.RawMessage `json:"spans"`
			} `json:"data"`
			Spans []json.RawMessage `json:"spans"`
		}
		require.NoError(t, json.Unmarshal(data, &doc), "accepted, so it decodes")
		n := len(doc.Spans)
		for _, tr := range doc.Data {
			n += len(tr.Spans)
		}
		checkTranslated(t, td, n)
	})
}

// FuzzZipkin feeds arbitrary JSON to the Zipkin translator. Invariant: it
// never panics, and an array it accepts becomes exactly as many spans as
// it has elements, each ending no earlier than it starts.
func FuzzZipkin(f *testing.F) {
	addFixtureSeeds(f, translatetest.ZipkinJSON)
	f.Add([]byte(zipkinSpans))
	f.Add([]byte(`[{"traceId":"1","id":"a","kind":"CLIENT"},{"traceId":"1","id":"a","kind":"SERVER","shared":true}]`))
	f.Add([]byte(`[{"traceId":"1","id":"2","annotations":[{"timestamp":1,"value":"e|{\"k\":1}|0"}],"tags":{"otlp.link.0":"||||0"}}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			return
		}
		td, err := translate.Zipkin(data)
		if err != nil {
			return
		}
		var spans []json.RawMessage
		require.NoError(t, json.Unmarshal(data, &spans), "accepted, so it decodes")
		checkTranslated(t, td, len(spans))
	})
}
