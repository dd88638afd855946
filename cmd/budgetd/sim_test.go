package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// runSim runs `budgetd sim` with args.
func runSim(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	return runCmd(t, append([]string{"sim"}, args...)...)
}

func TestSimCommandLine(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantOut  string
		wantErr  string
		wantCode int
	}{
		{name: "help", args: []string{"--help"}, wantOut: "Embedded scenarios: healthy, seed002_chain"},
		{name: "nothing to run", args: nil, wantErr: "give one scenario file or --demo", wantCode: 2},
		{name: "both", args: []string{"--demo", "healthy"}, wantErr: "not both", wantCode: 2},
		{name: "two scenarios", args: []string{"a.yaml", "b.yaml"}, wantErr: "give one scenario file", wantCode: 2},
		{name: "bad protocol", args: []string{"healthy", "--otlp-protocol", "udp"}, wantErr: `not "udp"`, wantCode: 2},
		{name: "missing file", args: []string{"nope.yaml"}, wantErr: "read scenario: open nope.yaml", wantCode: 1},
		{name: "unknown flag", args: []string{"healthy", "--nope"}, wantErr: "flag provided but not defined", wantCode: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _, err := runSim(t, tt.args...)
			if tt.wantErr == "" {
				require.NoError(t, err)
				require.Contains(t, out, tt.wantOut)
				return
			}
			require.ErrorContains(t, err, tt.wantErr)
			require.Equal(t, tt.wantCode, exitCode(err))
		})
	}
}

// budgetd sim runs a scenario file against an OTLP/HTTP endpoint, prints
// the ground truth and writes it as JSON.
func TestSimRunsScenario(t *testing.T) {
	var posts atomic.Int64
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/v1/traces" {
			posts.Add(1)
		}
	}))
	defer collector.Close()

	dir := t.TempDir()
	scenario := filepath.Join(dir, "chain.yaml")
	require.NoError(t, os.WriteFile(scenario, []byte(`
name: tiny
description: two hops, one slow database answer in ten
policy: independent
time_scale: 0.01
client: {service: app, operation: buy, call: {timeout: 10s}}
hops:
  - service: api
    call: {timeout: 5s, attempts: 2, backoff: 100ms}
  - service: db
    work: 50ms
    degraded: {fraction: 0.1, work: 8s}
`), 0o644))
	truth := filepath.Join(dir, "truth.json")
	// Flags after the scenario work as well as before it.
	out, _, err := runSim(t, scenario, "--otlp", collector.URL, "--otlp-protocol", "http", "--requests", "8", "--truth", truth)
	require.NoError(t, err)
	require.Contains(t, out, "tiny: two hops")
	require.Contains(t, out, "p99 end-to-end")
	require.Positive(t, posts.Load())

	var got struct {
		Scenarios []struct {
			Scenario string
			Summary  struct{ Requests int }
			Requests []struct {
				TraceID string `json:"trace_id"`
				Latency struct {
					Real     float64 `json:"real_ms"`
					Scenario float64 `json:"scenario_ms"`
				}
			}
		}
	}
	data, err := os.ReadFile(truth)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &got))
	require.Len(t, got.Scenarios, 1)
	s := got.Scenarios[0]
	require.Equal(t, "tiny", s.Scenario)
	require.Equal(t, 8, s.Summary.Requests)
	require.Len(t, s.Requests, 8)
	for _, r := range s.Requests {
		require.Len(t, r.TraceID, 32)
		require.InDelta(t, r.Latency.Real/0.01, r.Latency.Scenario, 1e-6)
	}
}
