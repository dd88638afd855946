package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/budgetd/budgetd/analyze"
	"github.com/budgetd/budgetd/fixtures"
	"github.com/budgetd/budgetd/ingest/jaegerapi/jaegertest"
	"github.com/budgetd/budgetd/ingest/translate"
	"github.com/budgetd/budgetd/ingest/translate/translatetest"
	"github.com/budgetd/budgetd/proctest"
)

// Where `make test-setup` (scripts/install-otelcol.sh) puts the real
// Zipkin producer; jaegertest finds Jaeger.
const otelcolZipkinPath = ".cache/otelcol/otelcol-budgetd-zipkin"

// fixturesNow is the detection time of the fixtures' golden files.
var fixturesNow = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// fixtureTraces returns every fixture, decoded, by name.
func fixtureTraces(t *testing.T) (names []string, tds map[string]ptrace.Traces) {
	t.Helper()
	tds = map[string]ptrace.Traces{}
	for _, name := range fixtures.Names() {
		data, err := fixtures.Read(name)
		require.NoError(t, err)
		got, err := DecodeTraces(data)
		require.NoError(t, err)
		require.Len(t, got, 1)
		tds[name] = got[0]
	}
	return fixtures.Names(), tds
}

// analyzeFile reads a trace file of any format and runs the detectors as
// `budgetd analyze` does.
func analyzeFile(t *testing.T, c *Converter, data []byte) analyze.Report {
	t.Helper()
	res, err := ReadSpans(bytes.NewReader(data), c)
	require.NoError(t, err)
	require.Zero(t, res.Rejected, res.RejectReason)
	return analyze.Analyze(res.Spans, fixturesNow, analyze.DefaultConfig())
}

// exportOTLP sends td to an OTLP/gRPC receiver and waits for its answer.
func exportOTLP(t *testing.T, conn *grpc.ClientConn, td ptrace.Traces) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := ptraceotlp.NewGRPCClient(conn).Export(ctx, ptraceotlp.NewExportRequestFromTraces(td))
	require.NoError(t, err)
}

func dialOTLP(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// TestZipkinFromCollector sends every fixture over OTLP to a real
// OpenTelemetry Collector whose Zipkin exporter posts to this test, and
// analyses the Zipkin v2 JSON it posted: the findings must be the OTLP
// original's (names without regard to case: zipkin-go lower-cases them).
// The same body, read, must also equal translatetest.ZipkinJSON's form of
// the fixture, which is what TestAnalyzeJaegerAndZipkinFiles relies on.
// Fixtures with what Zipkin cannot carry (translatetest.ZipkinLosses) are
// left out and logged.
func TestZipkinFromCollector(t *testing.T) {
	bin := proctest.Tool(t, otelcolZipkinPath)
	var (
		mu     sync.Mutex
		bodies [][]byte
	)
	zipkin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if r.URL.Path != "/api/v2/spans" || r.Header.Get("Content-Type") != "application/json" || err != nil {
			http.Error(w, "want a JSON POST to /api/v2/spans", http.StatusBadRequest)
			return
		}
		mu.Lock()
		bodies = append(bodies, body)
		mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	defer zipkin.Close()

	receiver := proctest.FreeAddr(t)
	// No batch processor and no sending queue: the receiver answers once
	// the exporter's POST is answered, so each fixture's body is here when
	// its export returns.
	config := fmt.Sprintf(`receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %s
exporters:
  zipkin:
    endpoint: %s/api/v2/spans
    format: json
    sending_queue:
      enabled: false
    retry_on_failure:
      enabled: false
service:
  telemetry:
    logs:
      level: warn
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [zipkin]
`, receiver, zipkin.URL)
	col := proctest.StartConfigured(t, "the Collector", bin, config, receiver)
	conn := dialOTLP(t, receiver)

	c := newTestConverter(t, DefaultLimits())
	names, tds := fixtureTraces(t)
	compared, findings := 0, 0
	for _, name := range names {
		td := tds[name]
		if losses := translatetest.ZipkinLosses(td); len(losses) > 0 {
			t.Logf("%s left out: %s", name, strings.Join(losses, "; "))
			continue
		}
		mu.Lock()
		bodies = nil
		mu.Unlock()
		exportOTLP(t, conn, td)
		mu.Lock()
		posted := joinZipkin(t, bodies)
		mu.Unlock()
		require.Equal(t, FormatZipkinJSON, DetectFormat(posted), name)

		data, err := fixtures.Read(name)
		require.NoError(t, err)
		want, got := analyzeFile(t, c, data), analyzeFile(t, c, posted)
		translatetest.RequireSameFindings(t, want, got, true)
		findings += len(want.Findings)

		written, err := translatetest.ZipkinJSON(td)
		require.NoError(t, err)
		fromWriter, err := ReadSpans(bytes.NewReader(written), c)
		require.NoError(t, err)
		fromCollector, err := ReadSpans(bytes.NewReader(posted), c)
		require.NoError(t, err)
		require.Equal(t, bySpanID(fromWriter.Spans), bySpanID(fromCollector.Spans), "%s: translatetest.ZipkinJSON differs from the Collector", name)
		compared++
	}
	col.Stop(t)
	t.Logf("%d of %d fixtures compared (%d findings)", compared, len(names), findings)
	require.GreaterOrEqual(t, compared, len(names)*3/4, "fixtures compared")
	require.Positive(t, findings, "findings compared")
}

// joinZipkin concatenates the JSON arrays the exporter posted into one.
func joinZipkin(t *testing.T, bodies [][]byte) []byte {
	t.Helper()
	require.NotEmpty(t, bodies, "the Collector posted nothing")
	var all []json.RawMessage
	for _, b := range bodies {
		var spans []json.RawMessage
		require.NoError(t, json.Unmarshal(b, &spans), "the Collector posted %s", b)
		all = append(all, spans...)
	}
	out, err := json.Marshal(all)
	require.NoError(t, err)
	return out
}

// TestJaegerFromQueryService sends every fixture over OTLP to a real Jaeger
// v2 (in-memory storage), fetches each of its traces from the query
// service's GET /api/traces/{id}, the JSON the Jaeger UI downloads, and
// analyses it: the findings must be exactly the OTLP original's. Fixtures
// with what Jaeger cannot carry (translatetest.JaegerLosses) are left out
// and logged.
func TestJaegerFromQueryService(t *testing.T) {
	jaeger := jaegertest.Start(t)
	receiver, query := jaeger.OTLP, jaeger.Query
	conn := dialOTLP(t, receiver)
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{}}
	defer client.CloseIdleConnections()

	c := newTestConverter(t, DefaultLimits())
	names, tds := fixtureTraces(t)
	compared, findings := 0, 0
	for _, name := range names {
		td := tds[name]
		if losses := translatetest.JaegerLosses(td); len(losses) > 0 {
			t.Logf("%s left out: %s", name, strings.Join(losses, "; "))
			continue
		}
		exportOTLP(t, conn, td)
		var traces []json.RawMessage
		for _, id := range traceIDs(td) {
			traces = append(traces, getJaegerTrace(t, client, query, id)...)
		}
		fetched, err := json.Marshal(map[string]any{"data": traces})
		require.NoError(t, err)
		require.Equal(t, FormatJaegerJSON, DetectFormat(fetched))

		data, err := fixtures.Read(name)
		require.NoError(t, err)
		want := analyzeFile(t, c, data)
		translatetest.RequireSameFindings(t, want, analyzeFile(t, c, fetched), false)
		findings += len(want.Findings)
		compared++
	}
	jaeger.Stop(t)
	t.Logf("%d of %d fixtures compared (%d findings)", compared, len(names), findings)
	require.GreaterOrEqual(t, compared, len(names)*3/4, "fixtures compared")
	require.Positive(t, findings, "findings compared")
}

// getJaegerTrace fetches one trace from Jaeger's query service and returns
// the trace objects of the answer's data array.
func getJaegerTrace(t *testing.T, client *http.Client, query, id string) []json.RawMessage {
	t.Helper()
	resp, err := client.Get("http://" + query + "/api/traces/" + id)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "GET /api/traces/%s: %s", id, body)
	var answer struct {
		Data []json.RawMessage `json:"data"`
	}
	require.NoError(t, json.Unmarshal(body, &answer))
	require.Len(t, answer.Data, 1, "GET /api/traces/%s: %s", id, body)
	return answer.Data
}

// traceIDs returns td's trace ids in hex, in order of first appearance.
func traceIDs(td ptrace.Traces) []string {
	seen := map[pcommon.TraceID]bool{}
	var ids []string
	translate.EachSpan(td, func(_ ptrace.ResourceSpans, _ ptrace.ScopeSpans, sp ptrace.Span) {
		if id := sp.TraceID(); !seen[id] {
			seen[id] = true
			ids = append(ids, id.String())
		}
	})
	return ids
}
