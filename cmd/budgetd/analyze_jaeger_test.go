package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/budgetd/budgetd/analyze"
	"github.com/budgetd/budgetd/fixtures"
	"github.com/budgetd/budgetd/fixtures/fixturestest"
	"github.com/budgetd/budgetd/ingest"
	"github.com/budgetd/budgetd/ingest/jaegerapi/jaegertest"
	"github.com/budgetd/budgetd/ingest/translate/translatetest"
	"github.com/budgetd/budgetd/proctest"
	"github.com/budgetd/budgetd/sim"
)

// otelcolPath is where `make test-setup` (scripts/install-otelcol.sh) puts
// the Collector the ingest tests export through.
const otelcolPath = ".cache/otelcol/otelcol-budgetd"

// fixturesStart is when the fixtures' earliest span starts, and fixturesNow
// their detection time (the golden files').
var (
	fixturesStart = time.Date(2025, 3, 1, 11, 53, 20, 0, time.UTC)
	fixturesNow   = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
)

// TestAnalyzeFromJaeger puts a real Jaeger v2 behind a real OpenTelemetry
// Collector, as users run it, sends every fixture and one simulator
// scenario through the Collector, and expects `budgetd analyze
// --from-jaeger URL --since 1h --output json` to print exactly what
// `budgetd analyze --output json` prints over the same spans as a file: the
// Collector's second exporter writes what it passed to Jaeger as OTLP/JSON
// lines, the file exporter's format.
//
// The fixtures' spans start in 2025. A user reads what Jaeger received
// lately with --since, so the test moves every fixture to half an hour ago,
// shifting every time in it by one delta, and first checks that the move
// changes no finding.
func TestAnalyzeFromJaeger(t *testing.T) {
	bin := proctest.Tool(t, otelcolPath)
	jaeger := jaegertest.Start(t)
	capture := startCapture(t)
	receiver := proctest.FreeAddr(t)
	// No batch processor and no queues: the Collector answers an export
	// once both exporters have been answered, so what the sender was told
	// is accepted is in Jaeger and in the capture.
	config := fmt.Sprintf(`receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %s
exporters:
  otlp_grpc:
    endpoint: %s
    tls:
      insecure: true
    sending_queue:
      enabled: false
    retry_on_failure:
      enabled: false
  otlp_http/capture:
    traces_endpoint: %s/v1/traces
    encoding: json
    compression: none
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
      exporters: [otlp_grpc, otlp_http/capture]
`, receiver, jaeger.OTLP, capture.url)
	col := proctest.StartConfigured(t, "the Collector", bin, config, receiver)

	now := time.Now().UTC().Truncate(time.Second)
	delta := now.Add(-30 * time.Minute).Sub(fixturesStart)
	dir := t.TempDir()
	original, moved := writeFixtureFiles(t, dir, delta)
	retimed := analyzeJSON(t, "--now", fixturesNow.Add(delta).Format(time.RFC3339), moved)
	requireSameFindingsApartFromTime(t, analyzeJSON(t, "--now", fixturesNow.Format(time.RFC3339), original), retimed)

	for _, name := range fixtures.Names() {
		jaegertest.Export(t, receiver, readFixture(t, name, delta))
	}
	scenario, err := sim.Embedded("seed000_independent")
	require.NoError(t, err)
	simCfg := sim.DefaultConfig()
	simCfg.Endpoint, simCfg.Requests, simCfg.ServicePrefix = receiver, 10, "sim/"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	truth, err := sim.Run(ctx, scenario, simCfg, sim.Settings{})
	require.NoError(t, err)
	require.Zero(t, truth.Spans.Failed)

	// Every sim span the SDK was told is accepted passed the Collector's
	// exporters, the capture included, before sim.Run returned.
	sent := capture.spanCounts(t)
	simSpans := 0
	for _, r := range truth.Requests {
		require.Positive(t, sent[r.TraceID], "trace %s of the simulator reached the capture", r.TraceID)
		simSpans += sent[r.TraceID]
	}
	require.EqualValues(t, truth.Spans.Exported, simSpans, "sim spans captured")
	jaeger.WaitSpans(t, sent)

	captured := filepath.Join(dir, "captured.jsonl")
	require.NoError(t, os.WriteFile(captured, capture.lines(), 0o600))
	// The analysis runs now, after the last span started: --since 1h
	// counts back from it.
	nowArg := time.Now().UTC().Add(time.Second).Truncate(time.Second).Format(time.RFC3339)
	fromFile, fileErr, err := runCmd(t, "analyze", "--output", "json", "--now", nowArg, captured)
	require.NoError(t, err)
	require.Empty(t, fileErr)
	fromJaeger, jaegerErr, err := runCmd(t, "analyze", "--from-jaeger", jaeger.URL(), "--since", "1h",
		"--output", "json", "--now", nowArg)
	require.NoError(t, err)
	require.Empty(t, jaegerErr, "nothing skipped, cut or left out")
	require.JSONEq(t, fromFile, fromJaeger)

	// The comparison compared something: findings of both sources of spans.
	report := readReport(t, []byte(fromJaeger))
	var fixtureFindings, simFindings int
	for _, f := range report.Findings {
		if strings.HasPrefix(f.Service, "sim/") || strings.HasPrefix(f.CallerService, "sim/") {
			simFindings++
		} else {
			fixtureFindings++
		}
	}
	t.Logf("%d spans in %d traces; %d findings on fixtures, %d on the simulator's run", sumCounts(sent), len(sent), fixtureFindings, simFindings)
	require.Positive(t, simFindings)
	require.Equal(t, len(readReport(t, []byte(retimed)).Findings), fixtureFindings,
		"the fixtures' findings are those of the fixtures alone: the simulator's services are prefixed")

	// The table reads the same as well; the URL may end in a slash.
	tableFile, _, err := runCmd(t, "analyze", "--now", nowArg, captured)
	require.NoError(t, err)
	tableJaeger, _, err := runCmd(t, "analyze", "--from-jaeger", jaeger.URL()+"/", "--since", "1h", "--now", nowArg)
	require.NoError(t, err)
	require.Equal(t, tableFile, tableJaeger)

	// A window with no traces: Jaeger answers 404 "No traces found", which
	// is an empty result, said on stderr.
	out, stderr, err := runCmd(t, "analyze", "--from-jaeger", jaeger.URL(), "--since", "2020-01-01T00:00:00Z",
		"--until", "2020-01-02T00:00:00Z", "--service", "sim/gateway", "--output", "json")
	require.NoError(t, err)
	require.Empty(t, readReport(t, []byte(out)).Findings)
	require.Contains(t, stderr, "no traces of sim/gateway start between 2020-01-01T00:00:00Z and 2020-01-02T00:00:00Z")

	// A URL that is not the query service's API: Jaeger answers with its
	// UI's page.
	_, _, err = runCmd(t, "analyze", "--from-jaeger", jaeger.URL()+"/no-such-base-path")
	require.ErrorContains(t, err, "GET /no-such-base-path/api/v3/services: the answer is not api_v3 JSON")
	require.Equal(t, 1, exitCode(err))
	col.Stop(t)
	jaeger.Stop(t)
}

// capture is an OTLP/HTTP receiver for the Collector's JSON exporter: it
// keeps each request's body, one line each.
type capture struct {
	url    string
	mu     sync.Mutex
	bodies [][]byte
}

func startCapture(t *testing.T) *capture {
	t.Helper()
	c := &capture{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/json" || err != nil {
			http.Error(w, "want an OTLP/JSON POST to /v1/traces", http.StatusBadRequest)
			return
		}
		var line bytes.Buffer
		if err := json.Compact(&line, body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		c.bodies = append(c.bodies, line.Bytes())
		c.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte("{}"))
	}))
	t.Cleanup(srv.Close)
	c.url = srv.URL
	return c
}

// lines returns the bodies as an OTLP/JSON lines file.
func (c *capture) lines() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append(bytes.Join(c.bodies, []byte("\n")), '\n')
}

// spanCounts decodes what was captured and counts spans per trace id.
func (c *capture) spanCounts(t *testing.T) map[string]int {
	t.Helper()
	tds, err := ingest.DecodeTraces(c.lines())
	require.NoError(t, err)
	out := map[string]int{}
	for _, td := range tds {
		for id, n := range jaegertest.SpanCounts(td) {
			out[id] += n
		}
	}
	return out
}

// readFixture returns a fixture with every time in it moved by delta.
func readFixture(t *testing.T, name string, delta time.Duration) ptrace.Traces {
	return fixturestest.Moved(t, name, delta)
}

// writeFixtureFiles writes every fixture as it is and moved by delta, each
// as one OTLP/JSON lines file, and returns their paths.
func writeFixtureFiles(t *testing.T, dir string, delta time.Duration) (original, moved string) {
	t.Helper()
	var orig, shifted bytes.Buffer
	var m ptrace.JSONMarshaler
	for _, name := range fixtures.Names() {
		for _, f := range []struct {
			buf   *bytes.Buffer
			delta time.Duration
		}{{&orig, 0}, {&shifted, delta}} {
			line, err := m.MarshalTraces(readFixture(t, name, f.delta))
			require.NoError(t, err)
			f.buf.Write(line)
			f.buf.WriteByte('\n')
		}
	}
	original, moved = filepath.Join(dir, "fixtures.jsonl"), filepath.Join(dir, "fixtures-moved.jsonl")
	require.NoError(t, os.WriteFile(original, orig.Bytes(), 0o600))
	require.NoError(t, os.WriteFile(moved, shifted.Bytes(), 0o600))
	return original, moved
}

// analyzeJSON runs `budgetd analyze --output json` with args; nothing may
// be skipped.
func analyzeJSON(t *testing.T, args ...string) string {
	t.Helper()
	out, stderr, err := runCmd(t, append([]string{"analyze", "--output", "json"}, args...)...)
	require.NoError(t, err)
	require.Empty(t, stderr)
	return out
}

// requireSameFindingsApartFromTime compares two reports of the same spans
// at different times: only the detection time may differ.
func requireSameFindingsApartFromTime(t *testing.T, want, got string) {
	t.Helper()
	w, g := readReport(t, []byte(want)), readReport(t, []byte(got))
	require.NotEmpty(t, w.Findings)
	for _, r := range []*analyze.Report{&w, &g} {
		for i := range r.Findings {
			r.Findings[i].DetectedAt = time.Time{}
		}
	}
	translatetest.RequireSameFindings(t, w, g, false)
}

func sumCounts(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// TestAnalyzeFromJaegerErrors checks the command line of --from-jaeger:
// usage errors exit 2; a Jaeger that cannot be reached or answers an error
// exits 1 naming the URL (password hidden), the path and Jaeger's message.
// The failing Jaeger is an httptest server: a real one cannot be made to
// fail on demand, nor to ask for a bearer token (its build has no such
// authenticator).
func TestAnalyzeFromJaegerErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/broken/"):
			http.Error(w, `{"error":{"httpCode":500,"message":"storage is down"}}`, http.StatusInternalServerError)
		case r.Header.Get("Authorization") != "Bearer t0ken":
			http.Error(w, "token required", http.StatusUnauthorized)
		default:
			_, _ = w.Write([]byte(`{}`)) // api_v3's answer when it knows no service
		}
	}))
	defer srv.Close()
	nobody := proctest.FreeAddr(t)

	tests := []struct {
		name     string
		args     []string
		wantErr  string
		wantCode int
	}{
		{"with files", []string{"--from-jaeger", srv.URL, fixture("seed000_deadline.json")}, "give files or --from-jaeger, not both", 2},
		{"with --from-store", []string{"--from-jaeger", srv.URL, "--from-store"}, "give --from-store or --from-jaeger, not both", 2},
		{"--service alone", []string{"--service", "web", fixture("seed000_deadline.json")}, "--service applies only with --from-jaeger", 2},
		{"empty --service", []string{"--from-jaeger", srv.URL, "--service", ""}, "empty service name", 2},
		{"not http", []string{"--from-jaeger", "ftp://127.0.0.1:16686"}, "want an http:// or https:// URL", 2},
		{"bad since", []string{"--from-jaeger", srv.URL, "--since", "yesterday"}, "neither a duration nor an RFC 3339 time", 2},
		{"window backwards", []string{"--from-jaeger", srv.URL, "--since", "2025-03-02T00:00:00Z", "--until", "2025-03-01T00:00:00Z"}, "--until is before --since", 2},
		{"no spans allowed", []string{"--from-jaeger", srv.URL, "--max-spans", "0"}, "--max-spans must be > 0", 2},
		{"unreachable", []string{"--from-jaeger", "http://reader:hunter2@" + nobody + "/"},
			"read jaeger http://reader:xxxxx@" + nobody + "/: GET /api/v3/services: dial tcp " + nobody, 1},
		{"Jaeger's error", []string{"--from-jaeger", srv.URL + "/broken", "--service", "web"},
			"read jaeger " + srv.URL + `/broken: GET /broken/api/v3/traces (service "web"): 500 Internal Server Error: storage is down`, 1},
		{"no token", []string{"--from-jaeger", srv.URL}, "401 Unauthorized: token required (no credentials were sent)", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := runCmd(t, append([]string{"analyze"}, tt.args...)...)
			require.ErrorContains(t, err, tt.wantErr)
			require.NotContains(t, err.Error(), "hunter2")
			require.Equal(t, tt.wantCode, exitCode(err))
		})
	}

	t.Run("token from the environment", func(t *testing.T) {
		t.Setenv(jaegerTokenEnv, "t0ken")
		out, stderr, err := runCmd(t, "analyze", "--from-jaeger", srv.URL)
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(out, "PROBLEMS (0)\n\nFINDINGS (0)\n"), out)
		require.Contains(t, stderr, "no traces of any service (it lists none)")
	})
	t.Run("help", func(t *testing.T) {
		out, _, err := runCmd(t, "analyze", "--help")
		require.NoError(t, err)
		require.Contains(t, out, "budgetd analyze --from-jaeger URL")
		require.Contains(t, out, jaegerTokenEnv)
		require.Contains(t, out, "-service")
	})
}
