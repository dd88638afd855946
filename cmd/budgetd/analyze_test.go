package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/analyze"
	"github.com/budgetd/budgetd/ingest"
	"github.com/budgetd/budgetd/problems"
)

var update = flag.Bool("update", false, "rewrite cmd/budgetd/testdata/*.problems.golden.json from the current output")

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

// TestAnalyzeProblemsMatchGolden checks the problems the CLI prints next to
// the findings: the JSON keys in their order, one problem for every finding
// id, and the problems themselves against testdata/.
func TestAnalyzeProblemsMatchGolden(t *testing.T) {
	for _, name := range []string{"seed000_independent_timeouts", "seed002_unfunded_retry", "seed004_gateway_retry"} {
		t.Run(name, func(t *testing.T) {
			out, _, err := runCmd(t, "analyze", "--output", "json", "--now", "2025-03-01T12:00:00Z", fixture(name+".json"))
			require.NoError(t, err)
			require.Equal(t, []string{"findings", "paths", "problems"}, topLevelKeys(t, []byte(out)), "the report's keys first, as before problems")

			var got struct {
				Findings []struct {
					ID string `json:"id"`
				} `json:"findings"`
				Problems []problems.Problem `json:"problems"`
			}
			require.NoError(t, json.Unmarshal([]byte(out), &got))
			ids := map[string]bool{}
			for _, f := range got.Findings {
				ids[f.ID] = true
			}
			occurrences := 0
			for _, p := range got.Problems {
				occurrences += p.Occurrences
				require.Equal(t, problems.StateActive, p.State, "offline, everything was detected now")
				require.NotEmpty(t, p.Suggestion)
			}
			require.Equal(t, len(ids), occurrences, "every finding id in exactly one problem")

			var buf bytes.Buffer
			require.NoError(t, writeJSON(&buf, got.Problems))
			golden := filepath.Join("testdata", name+".problems.golden.json")
			if *update {
				require.NoError(t, os.WriteFile(golden, buf.Bytes(), 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err, "run `go test ./cmd/budgetd -run TestAnalyzeProblemsMatchGolden -update` to create it")
			require.Equal(t, string(want), buf.String(), "problems changed; if intended, run `go test ./cmd/budgetd -run TestAnalyzeProblemsMatchGolden -update`")
		})
	}
}

// topLevelKeys returns the keys of the JSON object data, in order.
func topLevelKeys(t *testing.T, data []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	require.NoError(t, err)
	require.Equal(t, json.Delim('{'), tok)
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		require.NoError(t, err)
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		require.NoError(t, dec.Decode(&skip))
	}
	return keys
}

func TestAnalyzeTableStartsWithProblems(t *testing.T) {
	out, _, err := runCmd(t, "analyze", "--now", "2025-03-01T12:00:00Z", fixture("seed000_independent_timeouts.json"))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(out, "PROBLEMS (12)\n"), out)
	problemsAt, findingsAt, pathsAt := strings.Index(out, "PROBLEMS"), strings.Index(out, "\nFINDINGS (37)"), strings.Index(out, "\nPATHS (")
	require.Less(t, problemsAt, findingsAt)
	require.Less(t, findingsAt, pathsAt)
	section := out[:findingsAt]
	require.Regexp(t, `(?m)^SEVERITY\s+KIND\s+CALLER → CALLEE\s+OCCURRENCES\s+REQUESTS\s+IMPACT\s+SUGGESTION$`, section)
	// Ranked by impact: the orphaned seconds of pricing first.
	first := strings.Split(section, "\n")[2]
	require.Regexp(t, `^critical\s+orphaned_work\s+order:POST /order → pricing:POST /price\s+4\s+1\s+138 s orphaned\s+Make pricing:POST /price stop when order gives up`, first)
	require.Regexp(t, `(?m)^critical\s+retry_amplification\s+pricing:POST /price → db:SELECT prices\s+1\s+1\s+11 wasted calls\s+Retry at one level of mobile:checkout > .* only: keep the retries on the leaf edge pricing:POST /price → db:SELECT prices`, section)
	require.Regexp(t, `(?m)^critical\s+timeout_inversion\s+gateway:POST /checkout → order:POST /order\s+2\s+1\s+1 request\s+Give gateway's call to order:POST /order a timeout below 29980 ms`, section)
	require.Equal(t, 12, len(regexp.MustCompile(`(?m)^(critical|warning|info)\s`).FindAllString(section, -1)))

	out, _, err = runCmd(t, "analyze", fixture("timeout_inversion_negative.json"))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(out, "PROBLEMS (0)\n\nFINDINGS (0)\n"), out)
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
