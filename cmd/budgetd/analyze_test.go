package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/analyze"
	"github.com/budgetd/budgetd/ingest"
)

func fixture(name string) string { return filepath.Join("..", "..", "fixtures", name) }

func readReport(t *testing.T, data []byte) analyze.Report {
	t.Helper()
	var r analyze.Report
	require.NoError(t, json.Unmarshal(data, &r))
	return r
}

// TestAnalyzeFilesMatchGolden runs the CLI over fixtures and expects exactly
// the golden reports the analyze package's tests keep.
func TestAnalyzeFilesMatchGolden(t *testing.T) {
	for _, name := range []string{"seed000_independent_timeouts", "seed002_unfunded_retry", "seed004_gateway_retry", "timeout_inversion_negative"} {
		t.Run(name, func(t *testing.T) {
			out, _, err := runCmd(t, "analyze", "--output", "json", "--now", "2025-03-01T12:00:00Z", fixture(name+".json"))
			require.NoError(t, err)
			golden, err := os.ReadFile(fixture(name + ".golden.json"))
			require.NoError(t, err)
			require.Equal(t, readReport(t, golden), readReport(t, []byte(out)))
		})
	}
}

func TestAnalyzeTableAndErrors(t *testing.T) {
	out, _, err := runCmd(t, "analyze", fixture("seed000_independent_timeouts.json"))
	require.NoError(t, err)
	require.Contains(t, out, "FINDINGS (37)") // 11 from timing, 26 from the timeouts the hops recorded (inferred deadlines) and the trace's own timed-out attempts
	require.Contains(t, out, "db was called 12 times")
	require.Regexp(t, `(?m)^critical\s+retry_amplification\s+-\s+ab0+3e9\s+db was called 12 times`, out, "recorded: no confidence")
	require.Regexp(t, `(?m)^warning\s+timeout_inversion\s+1\.00\s+ab0+3e9\s+gateway gave order a 30000 ms timeout`, out, "inferred deadline from a recorded timeout: confidence 1")

	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.json")
	require.NoError(t, os.WriteFile(garbage, []byte(`{"resourceSpans": [oops`), 0o600))
	tests := []struct {
		name     string
		args     []string
		wantErr  string
		wantCode int
	}{
		{"missing file", []string{"analyze", filepath.Join(dir, "nope.json")}, "no such file", 1},
		{"unreadable file", []string{"analyze", garbage}, "read " + garbage, 1},
		{"no input", []string{"analyze"}, "no trace files given", 2},
		{"both inputs", []string{"analyze", "--from-store", garbage}, "not both", 2},
		{"bad output", []string{"analyze", "--output", "xml", garbage}, "--output must be table or json", 2},
		{"bad since", []string{"analyze", "--from-store", "--since", "yesterday"}, "neither a duration nor an RFC 3339 time", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := runCmd(t, tt.args...)
			require.ErrorContains(t, err, tt.wantErr)
			require.Equal(t, tt.wantCode, exitCode(err))
		})
	}
}

// TestAnalyzeFromStore stores a fixture's spans in a ClickHouse server and
// analyses them back with --from-store: the same findings as from the file.
func TestAnalyzeFromStore(t *testing.T) {
	srv, st := openClickHouse(t, "analyzetest")
	ctx := context.Background()
	conv, err := ingest.NewConverter(ingest.DefaultLimits())
	require.NoError(t, err)
	spans, err := ingest.ReadSpansFile(fixture("seed000_independent_timeouts.json"), conv)
	require.NoError(t, err)
	require.NoError(t, st.WriteSpans(ctx, "fixture", spans))

	first := time.Unix(0, int64(spans[0].StartNs)).UTC()
	args := []string{"analyze", "--from-store", "--store.engine", "clickhouse", "--store.clickhouse.dsn", srv.DSN("analyzetest"),
		"--since", first.Add(-time.Hour).Format(time.RFC3339), "--until", first.Add(time.Hour).Format(time.RFC3339),
		"--output", "json", "--now", "2025-03-01T12:00:00Z"}
	out, _, err := runCmd(t, args...)
	require.NoError(t, err)
	golden, err := os.ReadFile(fixture("seed000_independent_timeouts.golden.json"))
	require.NoError(t, err)
	require.Equal(t, readReport(t, golden), readReport(t, []byte(out)))
}
