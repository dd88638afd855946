package analyze

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/ingest"
)

var (
	update         = flag.Bool("update", false, "rewrite fixtures/*.golden.json from the current detector output")
	updateFixtures = flag.Bool("update-fixtures", false, "rewrite the OTLP/JSON inputs fixtures/*.json and fixtures/README.md from fixtures_test.go")
)

// fixturesDir holds the OTLP/JSON inputs and their golden outputs.
const fixturesDir = "../fixtures"

// updateCommand is what to run to accept new detector output.
const updateCommand = "go test ./analyze -update"

// TestGolden reads every fixture through the OTLP/JSON path of package ingest,
// runs Analyze over it (with the default configuration, stamped with
// testNow) and compares the JSON `budgetd analyze --output json` would print
// with fixtures/<name>.golden.json.
func TestGolden(t *testing.T) {
	conv, err := ingest.NewConverter(ingest.DefaultLimits())
	require.NoError(t, err)
	all := fixtures()
	if *updateFixtures {
		writeFixtures(t, all)
	}
	for _, fx := range all {
		t.Run(fx.name, func(t *testing.T) {
			spans, err := ingest.ReadSpansFile(filepath.Join(fixturesDir, fx.name+".json"), conv)
			require.NoError(t, err, "read fixture; regenerate inputs with: go test ./analyze -run TestGolden -update-fixtures")
			require.Len(t, spans, len(fx.spans()), "every span of the fixture converts")

			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetIndent("", "  ")
			enc.SetEscapeHTML(false) // paths read "a > b", not "a \u003e b"
			require.NoError(t, enc.Encode(Analyze(spans, testNow, DefaultConfig())))
			got := buf.Bytes()

			golden := filepath.Join(fixturesDir, fx.name+".golden.json")
			if *update {
				require.NoError(t, os.WriteFile(golden, got, 0o644))
				return
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err, "no golden file; create it with: %s", updateCommand)
			if !bytes.Equal(want, got) {
				require.Failf(t, "output differs from "+golden,
					"if the change is intended, run: %s\n\n%s", updateCommand, lineDiff(string(want), string(got)))
			}
		})
	}
}

// TestFixturesAreAllCovered fails on an input file under fixtures/ that no
// golden test reads, so a fixture cannot silently stop being checked.
func TestFixturesAreAllCovered(t *testing.T) {
	known := map[string]bool{}
	for _, fx := range fixtures() {
		known[fx.name+".json"] = true
		known[fx.name+".golden.json"] = true
	}
	entries, err := os.ReadDir(fixturesDir)
	require.NoError(t, err)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".json") {
			require.True(t, known[e.Name()], "fixtures/%s is not in fixtures_test.go", e.Name())
		}
	}
}

// writeFixtures writes every fixture's OTLP/JSON input and the README that
// lists them.
func writeFixtures(t *testing.T, all []fixture) {
	t.Helper()
	var readme strings.Builder
	readme.WriteString("# Detector fixtures\n\n" +
		"Each `<name>.json` is one OTLP/JSON `ExportTraceServiceRequest` (ids in hex), and\n" +
		"`<name>.golden.json` is what `budgetd analyze --output json` makes of it with the\n" +
		"default configuration, detection time 2025-03-01T12:00:00Z.\n\n" +
		"The inputs are generated from the span specs in `analyze/fixtures_test.go`\n" +
		"(`go test ./analyze -run TestGolden -update-fixtures`); the goldens are rewritten by\n" +
		"`" + updateCommand + "` after a deliberate change of detector output.\n\n" +
		"| fixture | shows |\n|---|---|\n")
	for _, fx := range all {
		b, err := otlpJSON(fx.spans())
		require.NoError(t, err, fx.name)
		require.NoError(t, os.WriteFile(filepath.Join(fixturesDir, fx.name+".json"), b, 0o644))
		readme.WriteString("| `" + fx.name + "` | " + fx.about + " |\n")
	}
	require.NoError(t, os.WriteFile(filepath.Join(fixturesDir, "README.md"), []byte(readme.String()), 0o644))
}

// lineDiff shows the first differing lines of two texts with some context.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	i := 0
	for i < len(w) && i < len(g) && w[i] == g[i] {
		i++
	}
	from := max(i-3, 0)
	var b strings.Builder
	b.WriteString("first difference at line " + strconv.Itoa(i+1) + ":\n")
	for k := from; k < i; k++ {
		b.WriteString("  " + w[k] + "\n")
	}
	for k := i; k < min(i+8, len(w)); k++ {
		b.WriteString("- " + w[k] + "\n")
	}
	for k := i; k < min(i+8, len(g)); k++ {
		b.WriteString("+ " + g[k] + "\n")
	}
	return b.String()
}
