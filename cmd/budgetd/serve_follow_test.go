package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/fixtures/fixturestest"
	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/store/clickhouse/clickhousetest"
	"github.com/budgetd/budgetd/store/embedded"
	"github.com/budgetd/budgetd/store/oteltraces/oteltracestest"
)

// TestServeFollowsOTelTraces runs `budgetd serve` as a user would, with
// the exporter's table named by the --follow.otel-traces flags and the
// timings from the configuration file, its own store on the ClickHouse
// server, and reads the followed trace's findings from the API.
func TestServeFollowsOTelTraces(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	conn, err := embedded.Connect(dir)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	l := oteltracestest.Layouts()[0]
	require.NoError(t, oteltracestest.Create(ctx, conn, l, "otel", "otel_traces"))
	const name = "seed000_independent_timeouts"
	td := fixturestest.Moved(t, name, 0)
	td = fixturestest.Moved(t, name, time.Since(fixturestest.End(td))) // ends now
	require.NoError(t, oteltracestest.Write(ctx, conn, l, "otel", "otel_traces", td))

	cfg := filepath.Join(t.TempDir(), "budgetd.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("follow: {otel_traces: {settle: 200ms, poll: 50ms}}\n"), 0o600))
	srv := clickhousetest.Start(t)
	sv := startServe(t, func(log string) bool { return strings.Contains(log, `msg="api listening" addr=`) },
		"--config", cfg, "--store.engine", "clickhouse", "--store.clickhouse.dsn", srv.DSN("follow"),
		"--follow.otel-traces.source", dir, "--follow.otel-traces.table", "otel.otel_traces")
	require.Contains(t, sv.log.String(), `msg="following otel traces"`)
	_, rest, _ := strings.Cut(sv.log.String(), `msg="api listening" addr=`)
	addr := strings.Fields(rest)[0]
	want := fixturestest.GoldenIDs(t, name)
	var got []string
	require.Eventually(t, func() bool {
		got = apiTraceFindingIDs(addr)
		return len(got) >= len(want)
	}, time.Minute, 20*time.Millisecond)
	require.Equal(t, want, got)
	require.NoError(t, sv.stop())
}

// apiTraceFindingIDs reads the API's trace findings' ids (nil on any
// error, so it can be polled).
func apiTraceFindingIDs(addr string) []string {
	resp, err := http.Get("http://" + addr + "/api/v1/findings?limit=1000")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var page struct{ Findings []schema.Finding }
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		return nil
	}
	return fixturestest.TraceFindingIDs(page.Findings)
}
