package plan

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestPlanGolden prints every example chain in every format, with the
// suggested split for a chain that does not hold (as the command does).
func TestPlanGolden(t *testing.T) {
	for _, example := range []string{"checkout-ladder", "checkout-db-retries", "independent-timeouts"} {
		c, err := Load(examplePath(example + ".yaml"))
		require.NoError(t, err)
		p := Check(c)
		if !p.Holds() {
			s := Suggest(c)
			p.Suggestion = &s
		}
		for _, f := range []Format{FormatTable, FormatJSON, FormatMarkdown} {
			t.Run(example+"/"+string(f), func(t *testing.T) {
				var buf bytes.Buffer
				require.NoError(t, Write(&buf, p, f))
				ext := map[Format]string{FormatTable: "txt", FormatJSON: "json", FormatMarkdown: "md"}[f]
				golden := filepath.Join("testdata", example+"."+ext)
				if *update {
					require.NoError(t, os.WriteFile(golden, buf.Bytes(), 0o644))
				}
				want, err := os.ReadFile(golden)
				require.NoError(t, err, "run `go test ./plan -run TestPlanGolden -update` to create it")
				require.Equal(t, string(want), buf.String(), "output changed; if intended, run `go test ./plan -run TestPlanGolden -update`")
				if f == FormatJSON {
					var v map[string]any
					require.NoError(t, json.Unmarshal(buf.Bytes(), &v))
				}
			})
		}
	}
}

func TestPlanParseFormat(t *testing.T) {
	for _, s := range []string{"table", "json", "markdown"} {
		f, err := ParseFormat(s)
		require.NoError(t, err)
		require.Equal(t, Format(s), f)
	}
	_, err := ParseFormat("yaml")
	require.ErrorContains(t, err, `output format must be table, json or markdown, not "yaml"`)
	require.Error(t, Write(&bytes.Buffer{}, Plan{}, Format("yaml")))
}

func TestPlanMarkdownEscapesPipes(t *testing.T) {
	p := Check(Chain{Budget: 100 * msec, Hops: []Hop{{Name: "a|b", OwnWork: msec}}})
	var buf bytes.Buffer
	require.NoError(t, Write(&buf, p, FormatMarkdown))
	require.Contains(t, buf.String(), `| a\|b | 100 ms |`)
	require.False(t, strings.Contains(buf.String(), "| a|b |"))
}
