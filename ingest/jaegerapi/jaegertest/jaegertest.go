// Package jaegertest runs a real Jaeger v2 for tests: in-memory storage, an
// OTLP/gRPC receiver and the query service on free loopback ports. It
// imports nothing of budgetd but proctest, so package ingest's own tests can
// use it too.
package jaegertest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/budgetd/budgetd/ingest/translate"
	"github.com/budgetd/budgetd/proctest"
)

// Path is where `make test-setup` (scripts/install-jaeger.sh) puts Jaeger.
const Path = ".cache/bin/jaeger"

// Jaeger is a Jaeger v2 process.
type Jaeger struct {
	// OTLP is the host:port of its OTLP/gRPC receiver.
	OTLP string
	// Query is the host:port of its query service's HTTP API (16686 by
	// default), which serves the UI, /api/traces and /api/v3.
	Query string

	proc *proctest.Process
}

// Start runs Jaeger and waits until both its receiver and its query service
// accept connections. It is stopped when the test ends.
//
// The configuration follows bench/jaeger.go's, with memory storage: the
// storage exporter writes before the receiver answers (no batch processor,
// no queue), so a trace is queryable once its export returns. Jaeger's own
// tracing is off, so it lists no "jaeger" service of its own.
func Start(t testing.TB) *Jaeger { return StartWith(t, Options{}) }

// Options change what Start runs.
type Options struct {
	// BasicAuth, "user:password", makes the query service refuse requests
	// without these credentials (Jaeger's basicauth extension); WaitSpans
	// does not send them.
	BasicAuth string
}

// StartWith is Start with options.
func StartWith(t testing.TB, o Options) *Jaeger {
	t.Helper()
	bin := proctest.Tool(t, Path)
	j := &Jaeger{OTLP: proctest.FreeAddr(t), Query: proctest.FreeAddr(t)}
	auth, authExtension, extensions := "", "", "[jaeger_storage, jaeger_query]"
	if o.BasicAuth != "" {
		auth = "\n      auth:\n        authenticator: basicauth/query"
		authExtension = fmt.Sprintf("  basicauth/query:\n    htpasswd:\n      inline: |\n        %s\n", o.BasicAuth)
		extensions = "[basicauth/query, jaeger_storage, jaeger_query]"
	}
	config := fmt.Sprintf(`extensions:
%s  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 10000
  jaeger_query:
    enable_tracing: false
    storage:
      traces: memstore
    http:
      endpoint: %s%s
    grpc:
      endpoint: %s
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %s
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
    queue:
      enabled: false
service:
  extensions: %s
  telemetry:
    logs:
      level: warn
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [jaeger_storage_exporter]
`, authExtension, j.Query, auth, proctest.FreeAddr(t), j.OTLP, extensions)
	j.proc = proctest.StartConfigured(t, "Jaeger", bin, config, j.OTLP, j.Query)
	return j
}

// URL is the query service's base URL.
func (j *Jaeger) URL() string { return "http://" + j.Query }

// Stop stops Jaeger and waits for it; an exit status other than 0 fails the
// test.
func (j *Jaeger) Stop(t testing.TB) { j.proc.Stop(t) }

// WaitSpans waits until Jaeger's api_v3 answers, for every trace id (hex) in
// want, with that many spans, failing the test after 60 s. It asks for raw
// traces: Jaeger 1.76's memory storage hands its stored traces to the query
// service's adjusters, which change them in place, so one adjusted read would
// change what every later read gets.
func (j *Jaeger) WaitSpans(t testing.TB, want map[string]int) {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	deadline := time.Now().Add(60 * time.Second)
	for id, n := range want {
		for {
			got, err := traceSpans(client, j.URL()+"/api/v3/traces/"+id+"?raw_traces=true")
			require.NoError(t, err)
			require.LessOrEqual(t, got, n, "trace %s: Jaeger holds more spans than were sent", id)
			if got == n {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("trace %s: Jaeger had %d of its %d spans after 60s\n%s", id, got, n, j.proc.Output.Tail())
			}
			time.Sleep(20 * time.Millisecond) // the interval of a poll for a condition
		}
	}
}

// traceSpans counts the spans of GET url's answer; 0 when Jaeger has no
// such trace (404).
func traceSpans(client *http.Client, url string) (int, error) {
	resp, err := client.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode == http.StatusNotFound {
		return 0, nil
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	var answer struct {
		Result struct {
			ResourceSpans []struct {
				ScopeSpans []struct {
					Spans []json.RawMessage `json:"spans"`
				} `json:"scopeSpans"`
			} `json:"resourceSpans"`
		} `json:"result"`
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		return 0, fmt.Errorf("GET %s: %w", url, err)
	}
	n := 0
	for _, rs := range answer.Result.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			n += len(ss.Spans)
		}
	}
	return n, nil
}

// Export sends td over OTLP/gRPC to addr (Jaeger's receiver, or a Collector
// in front of it) and waits for the answer.
func Export(t testing.TB, addr string, td ptrace.Traces) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = ptraceotlp.NewGRPCClient(conn).Export(ctx, ptraceotlp.NewExportRequestFromTraces(td))
	require.NoError(t, err)
}

// SpanCounts returns how many spans td holds per trace id (hex), the form
// WaitSpans wants.
func SpanCounts(td ptrace.Traces) map[string]int {
	out := map[string]int{}
	translate.EachSpan(td, func(_ ptrace.ResourceSpans, _ ptrace.ScopeSpans, sp ptrace.Span) {
		out[sp.TraceID().String()]++
	})
	return out
}
