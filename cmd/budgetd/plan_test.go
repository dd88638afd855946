package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/plan/plantest"
)

func example(name string) string { return filepath.Join("..", "..", "docs", "examples", name) }

// TestPlanCommand runs `budgetd plan` over the example chains and over bad
// input: 0 when the plan holds, 1 when it does not, 2 when the input cannot
// be read. The printed plan is the plan package's golden output.
func TestPlanCommand(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(text), 0o600))
		return p
	}
	badYAML := write("bad.yaml", "budget: [2s\n")
	unknownKey := write("unknown.yaml", "budget: 2s\nhops:\n  - name: edge\n    timout: 1s\n")
	invalid := write("invalid.yaml", "budget: 2s\nhops:\n  - name: edge\n  - name: db\n    retry: {attempts: 0}\n")
	golden := func(name string) string {
		b, err := os.ReadFile(filepath.Join("..", "..", "plan", "testdata", name))
		require.NoError(t, err)
		return string(b)
	}

	tests := []struct {
		name     string
		args     []string
		wantOut  string // the whole of stdout, when set
		wantErr  string
		wantCode int
	}{
		{name: "holds", args: []string{example("checkout-ladder.yaml")}, wantOut: golden("checkout-ladder.txt")},
		{name: "holds, flags after the file", args: []string{example("checkout-db-retries.yaml"), "--output", "json"},
			wantOut: golden("checkout-db-retries.json")},
		{name: "violated", args: []string{"--output", "markdown", example("independent-timeouts.yaml")},
			wantOut: golden("independent-timeouts.md"), wantErr: "the plan does not hold: 10 violations", wantCode: 1},
		{name: "help", args: []string{"--help"}},
		{name: "missing file", args: []string{filepath.Join(dir, "missing.yaml")}, wantErr: "no such file", wantCode: 2},
		{name: "bad yaml", args: []string{badYAML}, wantErr: "yaml: line 1", wantCode: 2},
		{name: "unknown key", args: []string{unknownKey}, wantErr: `line 4: hops[0] (edge): unknown key "timout"`, wantCode: 2},
		{name: "invalid value", args: []string{invalid}, wantErr: "line 5: hops[1] (db).retry.attempts must be 1..100", wantCode: 2},
		{name: "no file", args: nil, wantErr: "no chain file given", wantCode: 2},
		{name: "two files", args: []string{badYAML, invalid}, wantErr: "give one chain file, not 2", wantCode: 2},
		{name: "bad output", args: []string{"--output", "xml", example("checkout-ladder.yaml")}, wantErr: "--output format must be table, json or markdown", wantCode: 2},
		{name: "bad flag", args: []string{"--nope"}, wantErr: "flag provided but not defined", wantCode: 2},
		{name: "store flag without --from-store", args: []string{"--since", "1h", example("checkout-ladder.yaml")},
			wantErr: "--since only apply with --from-store", wantCode: 2},
		{name: "file and --from-store", args: []string{"--from-store", example("checkout-ladder.yaml")}, wantErr: "not both", wantCode: 2},
		{name: "--from-store without --path", args: []string{"--from-store"}, wantErr: "--from-store needs --path", wantCode: 2},
		{name: "empty path element", args: []string{"--from-store", "--path", "web:GET / > "}, wantErr: "--path: path", wantCode: 2},
		{name: "bad window", args: []string{"--from-store", "--path", "web:GET /", "--since", "yesterday"},
			wantErr: "neither a duration nor an RFC 3339 time", wantCode: 2},
		{name: "bad budget", args: []string{"--from-store", "--path", "web:GET /", "--budget", "-2s"},
			wantErr: "--budget: -2s must be > 0", wantCode: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _, err := runCmd(t, append([]string{"plan"}, tt.args...)...)
			if tt.wantOut != "" {
				require.Equal(t, tt.wantOut, out)
			}
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.wantErr)
			require.Equal(t, tt.wantCode, exitCode(err))
		})
	}
}

// TestPlanFromStoreCommand builds chains from hops stored in a ClickHouse
// server (Debian's 18.16, so the SQL is checked on the oldest engine budgetd
// supports; the plan package tests it on chDB).
func TestPlanFromStoreCommand(t *testing.T) {
	srv, st := openClickHouse(t, "plantest")
	ctx := context.Background()
	start := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	require.NoError(t, st.WriteHops(ctx, "checkout", plantest.CheckoutHops(start)))

	storeArgs := func(extra ...string) []string {
		return append([]string{"plan", "--from-store", "--store.engine", "clickhouse", "--store.clickhouse.dsn", srv.DSN("plantest"),
			"--since", start.Format(time.RFC3339), "--until", start.Add(time.Minute).Format(time.RFC3339), "--output", "json"}, extra...)
	}
	path := plantest.Path(plantest.Web, plantest.Order, plantest.Inventory)

	out, _, err := runCmd(t, storeArgs("--path", path)...)
	require.NoError(t, err)
	var got struct {
		Holds      bool      `json:"holds"`
		BudgetsMs  []float64 `json:"budgets_ms"`
		Suggestion struct {
			Holds bool `json:"holds"`
			Hops  []struct {
				TimeoutMs float64 `json:"timeout_ms"`
			} `json:"hops"`
		} `json:"suggestion"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	require.True(t, got.Holds)
	require.Equal(t, []float64{2000, 1930, 1735, 867, 482}, got.BudgetsMs)
	require.True(t, got.Suggestion.Holds)
	require.Len(t, got.Suggestion.Hops, 3)
	require.Equal(t, 867.0, got.Suggestion.Hops[2].TimeoutMs, "suggested timeout per attempt on inventory")

	// With a tighter budget than the one recorded, order's 1800 ms timeout
	// no longer fits.
	_, _, err = runCmd(t, storeArgs("--path", path, "--budget", "1000")...)
	require.ErrorContains(t, err, "the plan does not hold")
	require.Equal(t, 1, exitCode(err))

	_, _, err = runCmd(t, storeArgs("--path", plantest.Path(plantest.Order, plantest.Inventory))...)
	require.ErrorContains(t, err, `no request entered "order:POST /order"`)
	require.Equal(t, 2, exitCode(err))
}
