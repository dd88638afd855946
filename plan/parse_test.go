package plan

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPlanParse(t *testing.T) {
	c, err := Parse([]byte(`
budget: 1.9s
hops:
  - name: edge
    own_work: 40          # plain numbers are milliseconds
    transit: 12.5
    slack: "10ms"
  - name: db
    timeout: 800ms
    retry: {attempts: 3, backoff: 1m}
    p50: 0.25s
`))
	require.NoError(t, err)
	require.Equal(t, Chain{Budget: 1900 * time.Millisecond, Hops: []Hop{
		{Name: "edge", OwnWork: 40 * time.Millisecond, Transit: 12500 * time.Microsecond, Slack: 10 * time.Millisecond},
		{Name: "db", Timeout: 800 * time.Millisecond, Attempts: 3, Backoff: time.Minute, P50: 250 * time.Millisecond},
	}}, c)
}

func TestPlanParseErrors(t *testing.T) {
	const hop = "budget: 2s\nhops:\n  - name: edge\n"
	tests := []struct {
		name string
		yaml string
		want string
	}{
		{"empty file", "", "the file is empty"},
		{"not yaml", "budget: [2s\n", "yaml:"},
		{"top level is a list", "- 1\n", "line 1: the chain must be a mapping"},
		{"unknown top-level key", "budget: 2s\nhop: []\n", `line 2: unknown key "hop" (known: budget, hops)`},
		{"budget missing", "hops:\n  - name: edge\n", "budget is missing"},
		{"budget zero", "budget: 0\nhops:\n  - name: edge\n", "line 1: budget must be > 0"},
		{"budget without unit", "budget: \"2\"\nhops:\n  - name: edge\n", `line 1: budget: "2" is not a duration`},
		{"budget negative", "budget: -2s\nhops:\n  - name: edge\n", "line 1: budget: -2s is negative"},
		{"budget too large", "budget: 48h\nhops:\n  - name: edge\n", "budget: 48h is more than 24h0m0s"},
		{"hops missing", "budget: 2s\n", "hops is missing"},
		{"hops not a list", "budget: 2s\nhops: {}\n", "line 2: hops must be a list"},
		{"hops empty", "budget: 2s\nhops: []\n", "hops must list at least one hop"},
		{"hop without name", "budget: 2s\nhops:\n  - own_work: 1ms\n", "line 3: hops[0] has no name"},
		{"duplicate hop name", hop + "  - name: edge\n", "hops[1] (edge).name repeats hops[0]"},
		{"unknown hop key names the hop", hop + "    timout: 1s\n", `line 4: hops[0] (edge): unknown key "timout"`},
		{"unknown retry key", hop + "    retry: {tries: 2}\n", `hops[0] (edge).retry: unknown key "tries" (known: attempts, backoff)`},
		{"repeated key", hop + "    slack: 1ms\n    slack: 2ms\n", `line 5: hops[0] (edge) has "slack" twice`},
		{"bad own work", hop + "    own_work: fast\n", `line 4: hops[0] (edge).own_work: "fast" is not a duration`},
		{"negative transit", hop + "    transit: -5\n", "hops[0] (edge).transit: -5 is negative"},
		{"null value", hop + "    slack:\n", "hops[0] (edge).slack: want a duration"},
		{"zero timeout", hop + "    timeout: 0s\n", "line 4: hops[0] (edge).timeout must be > 0 (leave the key out"},
		{"zero p50", hop + "    p50: 0\n", "hops[0] (edge).p50 must be > 0"},
		{"zero attempts", hop + "    retry: {attempts: 0}\n", "hops[0] (edge).retry.attempts must be 1..100"},
		{"fractional attempts", hop + "    retry: {attempts: 1.5}\n", `hops[0] (edge).retry.attempts: want a whole number, not "1.5"`},
		{"retry not a mapping", hop + "    retry: 2\n", "line 4: hops[0] (edge).retry must be a mapping"},
		{"hop not a mapping", "budget: 2s\nhops:\n  - edge\n", "line 3: hops[0] must be a mapping"},
		{"too many hops", "budget: 2s\nhops:\n" + manyHops(MaxHops+1), "hops must list at most 64 hops, not 65"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml))
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func manyHops(n int) string {
	var s string
	for i := range n {
		s += "  - name: h" + string(rune('a'+i/26)) + string(rune('a'+i%26)) + "\n"
	}
	return s
}

func TestPlanLoadErrors(t *testing.T) {
	dir := t.TempDir()
	_, err := Load(filepath.Join(dir, "missing.yaml"))
	require.ErrorContains(t, err, "read chain: open ")
	require.ErrorIs(t, err, os.ErrNotExist)

	big := filepath.Join(dir, "big.yaml")
	require.NoError(t, os.WriteFile(big, make([]byte, MaxFileBytes+1), 0o600))
	_, err = Load(big)
	require.ErrorContains(t, err, "larger than the 1048576 bytes")

	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("budget: 2s\nhops:\n  - name: a\n    retry: {attempts: -1}\n"), 0o600))
	_, err = Load(bad)
	require.ErrorContains(t, err, "read chain "+bad+": line 4: hops[0] (a).retry.attempts must be 1..100")
}

// TestPlanExamplesLoad keeps every example in docs/examples loadable.
func TestPlanExamplesLoad(t *testing.T) {
	files, err := filepath.Glob(examplePath("*.yaml"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), 3)
	for _, f := range files {
		_, err := Load(f)
		require.NoError(t, err, f)
	}
}
