package main

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/fixtures"
	"github.com/budgetd/budgetd/ingest"
	"github.com/budgetd/budgetd/store/embedded"
	"github.com/budgetd/budgetd/store/engine"
	"github.com/budgetd/budgetd/store/oteltraces/oteltracestest"
)

// wholeTime is a window every fixture's spans start in.
var wholeTime = []string{"--since", "2000-01-01T00:00:00Z", "--until", "2100-01-01T00:00:00Z"}

// TestAnalyzeFromOTelTraces writes every fixture into the Collector
// ClickHouse exporter's otel_traces table, in each layout, as the exporter
// writes rows, on the embedded engine, and expects `analyze
// --from-otel-traces` to print what `analyze` prints over the fixture files.
func TestAnalyzeFromOTelTraces(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	conn, err := engine.Connect(engine.Config{Engine: engine.Embedded, Embedded: embedded.Config{DataDir: dir}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })

	var files []string
	for _, name := range fixtures.Names() {
		files = append(files, fixture(name+".json"))
	}
	fromFiles := analyzeJSON(t, append([]string{"--now", "2025-03-01T12:00:00Z"}, files...)...)

	for i, l := range oteltracestest.Layouts() {
		t.Run(l.Name, func(t *testing.T) {
			db := "otel" + string(rune('a'+i))
			require.NoError(t, oteltracestest.Create(ctx, conn, l, db, "otel_traces"))
			t.Cleanup(func() { _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+db, nil) })
			for _, name := range fixtures.Names() {
				data, err := fixtures.Read(name)
				require.NoError(t, err)
				tds, err := ingest.DecodeTraces(data)
				require.NoError(t, err)
				for _, td := range tds {
					require.NoError(t, oteltracestest.Write(ctx, conn, l, db, "otel_traces", td), name)
				}
			}
			out := analyzeJSON(t, append([]string{"--from-otel-traces", dir, "--table", db + ".otel_traces", "--now", "2025-03-01T12:00:00Z"}, wholeTime...)...)
			require.JSONEq(t, fromFiles, out)
		})
	}
}

// TestAnalyzeFromOTelTracesRefuses checks the errors: a missing table, a
// table without a required column, bad flags; and the --max-spans cut,
// which keeps whole traces only and says so.
func TestAnalyzeFromOTelTracesRefuses(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	conn, err := engine.Connect(engine.Config{Engine: engine.Embedded, Embedded: embedded.Config{DataDir: dir}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	l := oteltracestest.Layouts()[0]
	require.NoError(t, oteltracestest.Create(ctx, conn, l, "refuse", "otel_traces"))
	t.Cleanup(func() { _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS refuse", nil) })
	require.NoError(t, conn.Exec(ctx, "CREATE TABLE refuse.no_kind (Timestamp DateTime64(9), TraceId String, SpanId String, ParentSpanId String, SpanName String, ServiceName String, Duration UInt64, StatusCode String) ENGINE = MergeTree ORDER BY Timestamp", nil))
	data, err := fixtures.Read("seed004_gateway_retry") // 20 traces
	require.NoError(t, err)
	tds, err := ingest.DecodeTraces(data)
	require.NoError(t, err)
	spans := 0
	for _, td := range tds {
		require.NoError(t, oteltracestest.Write(ctx, conn, l, "refuse", "otel_traces", td))
		spans += td.SpanCount()
	}

	tests := []struct {
		name     string
		args     []string
		wantErr  string
		wantCode int
	}{
		{"missing table", []string{"--from-otel-traces", dir, "--table", "refuse.nope"}, "read otel traces from refuse.nope: no such table", 1},
		{"missing column", []string{"--from-otel-traces", dir, "--table", "refuse.no_kind"}, "required column SpanKind is missing", 1},
		{"not a source", []string{"--from-otel-traces", dir + "/nope"}, "neither a clickhouse:// DSN nor a chDB data directory", 2},
		{"two databases", []string{"--from-otel-traces", "clickhouse://127.0.0.1:1/a", "--table", "b.otel_traces"}, "--from-otel-traces/--table: the table names database b, the DSN a", 2},
		{"bad table", []string{"--from-otel-traces", dir, "--table", "refuse.x;DROP"}, `table "x;DROP" is not a plain identifier`, 2},
		{"table without source", []string{"--table", "t", "x.json"}, "--table applies only with --from-otel-traces", 2},
		{"two sources", []string{"--from-otel-traces", dir, "--from-store"}, "give --from-store or --from-otel-traces, not both", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := runCmd(t, append(append([]string{"analyze"}, tt.args...), wholeTime...)...)
			require.ErrorContains(t, err, tt.wantErr)
			require.Equal(t, tt.wantCode, exitCode(err))
		})
	}

	t.Run("max spans", func(t *testing.T) {
		all := analyzeJSON(t, append([]string{"--from-otel-traces", dir, "--table", "refuse.otel_traces", "--now", "2025-03-01T12:00:00Z"}, wholeTime...)...)
		out, stderr, err := runCmd(t, append([]string{"analyze", "--output", "json", "--from-otel-traces", dir, "--table", "refuse.otel_traces", "--max-spans", strconv.Itoa(spans - 1), "--now", "2025-03-01T12:00:00Z"}, wholeTime...)...)
		require.NoError(t, err)
		require.Contains(t, stderr, "result truncated at --max-spans "+strconv.Itoa(spans-1))
		require.NotEqual(t, readReport(t, []byte(all)), readReport(t, []byte(out)))
		// Whole traces only: every path the cut report counts has as many
		// requests as in the whole one, or is missing.
		whole := map[string]int{}
		for _, p := range readReport(t, []byte(all)).Paths {
			whole[p.Path] = p.Requests
		}
		cut := readReport(t, []byte(out))
		require.NotEmpty(t, cut.Paths)
		for _, p := range cut.Paths {
			require.LessOrEqual(t, p.Requests, whole[p.Path], p.Path)
		}
		require.False(t, strings.Contains(stderr, "skipped"), stderr)
	})
}
