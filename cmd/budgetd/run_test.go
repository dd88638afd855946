package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/memlimit"
	"github.com/budgetd/budgetd/proctest"
	"github.com/budgetd/budgetd/store/chsql"
	"github.com/budgetd/budgetd/store/clickhouse"
	"github.com/budgetd/budgetd/store/clickhouse/clickhousetest"
)

func runCmd(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut proctest.Output
	err = run(context.Background(), args, &out, &errOut)
	return out.String(), errOut.String(), err
}

func TestCommandLine(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantOut  string
		wantErr  string
		wantCode int
	}{
		{name: "no command", args: nil, wantErr: "no command given", wantCode: 2},
		{name: "help", args: []string{"--help"}, wantOut: "Commands:"},
		{name: "version", args: []string{"version"}, wantOut: "budgetd "},
		{name: "unknown command", args: []string{"frobnicate"}, wantErr: `unknown command "frobnicate"`, wantCode: 2},
		{name: "serve help", args: []string{"serve", "--help"}, wantOut: "-store.engine"},
		{name: "serve help names following", args: []string{"serve", "--help"}, wantOut: "-follow.otel-traces.source"},
		{name: "bad follow source", args: []string{"serve", "--follow.otel-traces.source", "/nonexistent/dir"},
			wantErr: "follow.otel_traces.source/table: \"/nonexistent/dir\" is neither a clickhouse:// DSN nor a chDB data directory", wantCode: 1},
		{name: "bad flag", args: []string{"serve", "--nope"}, wantErr: "flag provided but not defined", wantCode: 2},
		{name: "stray argument", args: []string{"serve", "extra"}, wantErr: "unexpected arguments: extra", wantCode: 2},
		{name: "bad engine", args: []string{"serve", "--store.engine", "sqlite"}, wantErr: `store.engine must be "embedded" or "clickhouse"`, wantCode: 1},
		{name: "bad log level", args: []string{"serve", "--log.level", "loud"}, wantErr: "log.level must be", wantCode: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _, err := runCmd(t, tt.args...)
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

func TestConfigFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(text), 0o600))
		return p
	}
	tests := []struct {
		name    string
		file    string
		wantErr string
	}{
		{"unknown key is named", "store:\n  engin: embedded\n", "field engin not found"},
		{"invalid value names its key", "store:\n  clickhouse:\n    max_conns: 0\n  engine: clickhouse\n", "store.clickhouse.max_conns must be > 0"},
		{"bad duration", "store:\n  timeout: soon\n", "parse config"},
		{"missing file", "", "read config"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, "missing.yaml")
			if tt.file != "" {
				path = write(strings.ReplaceAll(tt.name, " ", "_")+".yaml", tt.file)
			}
			_, _, err := runCmd(t, "serve", "--config", path)
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}

// TestServeWithoutLibchdb checks the two promises about libchdb: with the
// embedded engine and no library, serve fails with one line naming the setup
// command; with the clickhouse engine it does not need the library at all.
//
// chDB, once loaded, stays loaded for the life of a process, and other tests
// of this package load it: the test judges in a fresh process of its own
// (this test binary, run again for this test alone).
func TestServeWithoutLibchdb(t *testing.T) {
	const child = "BUDGETD_TEST_SERVE_WITHOUT_LIBCHDB"
	if os.Getenv(child) == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestServeWithoutLibchdb$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), child+"=1")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		require.Contains(t, string(out), "--- PASS: TestServeWithoutLibchdb", "the test ran in the child")
		return
	}
	t.Setenv("CHDB_LIB_PATH", filepath.Join(t.TempDir(), "no-such-libchdb.so"))

	// Bounded: a serve that wrongly starts fails the test instead of
	// running until the test binary's timeout.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errOut proctest.Output
	err := run(ctx, []string{"serve", "--store.embedded.data-dir", t.TempDir()}, &out, &errOut)
	require.Error(t, err)
	require.Contains(t, err.Error(), "make setup")
	require.NotContains(t, err.Error(), "\n", "one line")

	srv := clickhousetest.Start(t)
	sv := startServe(t, func(log string) bool { return strings.Contains(log, "store ready") },
		"--store.engine", "clickhouse", "--store.clickhouse.dsn", srv.DSN("cmdtest"))
	require.NoError(t, sv.stop(), "serve stops cleanly when its context ends")
}

// serving is a `budgetd serve` running in the test's process.
type serving struct {
	cancel context.CancelFunc
	done   chan error
	log    *proctest.Output
}

// startServe runs `budgetd serve` with args on free loopback ports and
// waits until its log satisfies ready; it fails the test when serve exits
// first or is not ready within a minute.
func startServe(t *testing.T, ready func(log string) bool, args ...string) *serving {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	sv := &serving{cancel: cancel, done: make(chan error, 1), log: &proctest.Output{}}
	var out proctest.Output
	go func() {
		sv.done <- run(ctx, append(append([]string{"serve"}, args...), localListeners(t)...), &out, sv.log)
	}()
	deadline := time.After(time.Minute)
	for !ready(sv.log.String()) {
		select {
		case err := <-sv.done:
			t.Fatalf("serve exited early: %v\n%s", err, sv.log.String())
		case <-deadline:
			t.Fatalf("serve did not become ready:\n%s", sv.log.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	return sv
}

// stop ends serve and returns how it exited.
func (sv *serving) stop() error {
	sv.cancel()
	return <-sv.done
}

// TestServeDemo starts serve --demo and reads the demo's findings back
// through the running API, as a new user would with curl. With no memory
// settings serve chooses the collector's percent itself.
func TestServeDemo(t *testing.T) {
	t.Setenv("GOGC", "")
	srv := clickhousetest.Start(t)
	sv := startServe(t, func(log string) bool {
		return strings.Contains(log, `msg="api listening" addr=`) && strings.Contains(log, "demo scenarios loaded")
	}, "--demo", "--store.engine", "clickhouse", "--store.clickhouse.dsn", srv.DSN("demotest"))
	_, rest, _ := strings.Cut(sv.log.String(), `msg="api listening" addr=`)
	addr := strings.Fields(rest)[0]
	resp, err := http.Get("http://" + addr + "/api/v1/summary")
	require.NoError(t, err)
	defer resp.Body.Close()
	var sum struct {
		Requests       int            `json:"requests"`
		FindingsByKind map[string]int `json:"findings_by_kind"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&sum))
	require.Positive(t, sum.Requests)
	for _, k := range []string{"orphaned_work", "retry_amplification", "timeout_inversion", "latency_inversion"} {
		require.Positive(t, sum.FindingsByKind[k], "the demo shows %s", k)
	}
	require.Contains(t, sv.log.String(), fmt.Sprintf(`msg="go gc percent" percent=%d source=default`, memlimit.DefaultGCPercent))
	require.NoError(t, sv.stop())
}

// TestServeSetsGoMemoryLimit starts serve with memory.go_limit_bytes and
// memory.gc_percent and reads them back from the runtime's own metrics in
// /metrics; serve restores the process's settings when it stops.
func TestServeSetsGoMemoryLimit(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "") // the environment would win
	t.Setenv("GOGC", "")
	before, beforeGC := debug.SetMemoryLimit(-1), memlimit.GCPercent()
	cfg := filepath.Join(t.TempDir(), "budgetd.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("memory: {go_limit_bytes: 943718400, gc_percent: 70}\n"), 0o600))
	srv := clickhousetest.Start(t)
	sv := startServe(t, func(log string) bool { return strings.Contains(log, `msg="api listening" addr=`) },
		"--config", cfg, "--store.engine", "clickhouse", "--store.clickhouse.dsn", srv.DSN("memlimit"))
	require.Contains(t, sv.log.String(), `msg="go memory limit" bytes=943718400 source=memory.go_limit_bytes`)
	_, rest, _ := strings.Cut(sv.log.String(), `msg="api listening" addr=`)
	resp, err := http.Get("http://" + strings.Fields(rest)[0] + "/metrics")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Contains(t, sv.log.String(), `msg="go gc percent" percent=70 source=memory.gc_percent`)
	require.Contains(t, string(body), "\ngo_gc_gomemlimit_bytes 9.437184e+08\n")
	require.Contains(t, string(body), "\ngo_gc_gogc_percent 70\n")
	require.NoError(t, sv.stop())
	require.Equal(t, before, debug.SetMemoryLimit(-1), "serve restores the limit it replaced")
	require.Equal(t, beforeGC, memlimit.GCPercent(), "and the percent")
}

// openClickHouse starts a ClickHouse server for the test and opens
// database db on it; the store is closed when the test ends.
func openClickHouse(t *testing.T, db string) (*clickhousetest.Server, *chsql.Store) {
	t.Helper()
	srv := clickhousetest.Start(t)
	cfg := clickhouse.DefaultConfig()
	cfg.DSN = srv.DSN(db)
	st, err := clickhouse.Open(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return srv, st
}

// localListeners are serve flags that keep a test's server on free loopback
// ports with its write-ahead log in a temporary directory.
func localListeners(t *testing.T) []string {
	return []string{"--api.endpoint", "127.0.0.1:0", "--ingest.grpc.endpoint", "127.0.0.1:0",
		"--ingest.http.endpoint", "127.0.0.1:0", "--ingest.durability.wal.dir", t.TempDir()}
}
