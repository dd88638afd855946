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

	"github.com/budgetd/budgetd/proctest"
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
func TestServeWithoutLibchdb(t *testing.T) {
	t.Setenv("CHDB_LIB_PATH", filepath.Join(t.TempDir(), "no-such-libchdb.so"))

	_, _, err := runCmd(t, "serve", "--store.embedded.data-dir", t.TempDir())
	require.Error(t, err)
	require.Contains(t, err.Error(), "make setup")
	require.NotContains(t, err.Error(), "\n", "one line")

	srv := clickhousetest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut proctest.Output
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"serve", "--store.engine", "clickhouse", "--store.clickhouse.dsn", srv.DSN("cmdtest")}, localListeners(t)...), &out, &errOut)
	}()
	deadline := time.After(time.Minute)
	for !strings.Contains(errOut.String(), "store ready") {
		select {
		case err := <-done:
			t.Fatalf("serve exited early: %v\n%s", err, errOut.String())
		case <-deadline:
			t.Fatalf("serve did not become ready:\n%s", errOut.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	cancel()
	require.NoError(t, <-done, "serve stops cleanly when its context ends")
}

// TestServeDemo starts serve --demo and reads the demo's findings back
// through the running API, as a new user would with curl.
func TestServeDemo(t *testing.T) {
	srv := clickhousetest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut proctest.Output
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"serve", "--demo", "--store.engine", "clickhouse", "--store.clickhouse.dsn", srv.DSN("demotest")},
			localListeners(t)...), &out, &errOut)
	}()
	addr := ""
	deadline := time.After(time.Minute)
	for addr == "" {
		logged := errOut.String()
		if _, rest, ok := strings.Cut(logged, `msg="api listening" addr=`); ok && strings.Contains(logged, "demo scenarios loaded") {
			addr = strings.Fields(rest)[0]
			break
		}
		select {
		case err := <-done:
			t.Fatalf("serve exited early: %v\n%s", err, errOut.String())
		case <-deadline:
			t.Fatalf("serve did not start:\n%s", errOut.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
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
	cancel()
	require.NoError(t, <-done)
}

// localListeners are serve flags that keep a test's server on free loopback
// ports with its write-ahead log in a temporary directory.
func localListeners(t *testing.T) []string {
	return []string{"--api.endpoint", "127.0.0.1:0", "--ingest.grpc.endpoint", "127.0.0.1:0",
		"--ingest.http.endpoint", "127.0.0.1:0", "--ingest.wal.dir", t.TempDir()}
}
