package plan

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const msec = time.Millisecond

func examplePath(name string) string { return filepath.Join("..", "docs", "examples", name) }

// budgets is the per-hop arithmetic in milliseconds: entry, per attempt and
// passed down.
type budgets struct{ entry, perAttempt, passedDown float64 }

func rowBudgets(p Plan) []budgets {
	out := make([]budgets, len(p.Rows))
	for i, r := range p.Rows {
		out[i] = budgets{ms(r.Entry), ms(r.PerAttempt), ms(r.PassedDown)}
	}
	return out
}

// TestPlanSeedTables reproduces the two worked budget tables the chain model
// was built from, figure for figure.
func TestPlanSeedTables(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		rows    []budgets
		budgets []float64
	}{
		{
			name: "100 ms per hop, inventory called twice",
			file: "checkout-ladder.yaml",
			rows: []budgets{
				{2000, 2000, 1900},
				{1900, 1900, 1800},
				{1800, 1800, 1700},
				{1700, 800, 700}, // (1700 − 100) / 2
			},
			budgets: []float64{2000, 1900, 1800, 1700, 800, 700},
		},
		{
			name: "40 ms transit, database called twice",
			file: "checkout-db-retries.yaml",
			rows: []budgets{
				{2000, 2000, 1920},
				{1920, 1920, 1830},
				{1830, 1830, 1730},
				{1730, 1730, 1660},
				{1660, 780, 780}, // (1660 − 100 × 1) / 2
			},
			budgets: []float64{2000, 1920, 1830, 1730, 1660, 780},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(examplePath(tt.file))
			require.NoError(t, err)
			p := Check(c)
			require.Empty(t, p.Violations)
			require.True(t, p.Holds())
			require.Equal(t, tt.rows, rowBudgets(p))
			var got []float64
			for _, b := range p.Budgets() {
				got = append(got, ms(b))
			}
			require.Equal(t, tt.budgets, got)
			for i := 1; i < len(got); i++ {
				require.Less(t, got[i], got[i-1], "budgets strictly decrease")
			}
		})
	}
}

// chain is a small valid chain the violation cases modify: 1000 ms, three
// hops of 100 ms each.
func chain(mod func(c *Chain)) Chain {
	c := Chain{Budget: 1000 * msec, Hops: []Hop{
		{Name: "edge", OwnWork: 60 * msec, Transit: 40 * msec},
		{Name: "api", OwnWork: 60 * msec, Transit: 30 * msec, Slack: 10 * msec},
		{Name: "db", OwnWork: 100 * msec},
	}}
	if mod != nil {
		mod(&c)
	}
	return c
}

func TestPlanViolations(t *testing.T) {
	type want struct {
		kind     Kind
		hop      string
		evidence map[string]float64
		message  string
	}
	tests := []struct {
		name  string
		chain Chain
		want  []want
	}{
		{name: "valid chain holds", chain: chain(nil)},
		{
			name:  "timeout equal to the budget received holds",
			chain: chain(func(c *Chain) { c.Hops[1].Timeout = 900 * msec }),
		},
		{
			name:  "timeout above the budget received",
			chain: chain(func(c *Chain) { c.Hops[2].Timeout = 801 * msec }),
			want: []want{{KindTimeoutInversion, "db", map[string]float64{"timeout_ms": 801, "budget_ms": 800},
				"db is called with a 801 ms timeout per attempt but receives only 800 ms"}},
		},
		{
			name: "timeout not below the one above it",
			chain: chain(func(c *Chain) {
				c.Hops[1].Timeout = 700 * msec
				c.Hops[2].Timeout = 700 * msec
			}),
			want: []want{{KindNotDecreasing, "db", map[string]float64{"timeout_ms": 700, "upstream_ms": 700},
				"db is called with a 700 ms timeout, not below the 700 ms timeout on api"}},
		},
		{
			name:  "timeout not below the client's budget",
			chain: chain(func(c *Chain) { c.Hops[1].Timeout = 1000 * msec }),
			want: []want{
				{KindNotDecreasing, "api", map[string]float64{"timeout_ms": 1000, "upstream_ms": 1000},
					"api is called with a 1000 ms timeout, not below the client's budget of 1000 ms"},
				{KindTimeoutInversion, "api", map[string]float64{"timeout_ms": 1000, "budget_ms": 900},
					"api is called with a 1000 ms timeout per attempt but receives only 900 ms"},
			},
		},
		{
			name: "hop that passes down everything it received",
			chain: chain(func(c *Chain) {
				c.Hops[1].OwnWork, c.Hops[1].Transit, c.Hops[1].Slack = 0, 0, 0
			}),
			want: []want{{KindNotDecreasing, "api", map[string]float64{"budget_ms": 900, "passed_down_ms": 900},
				"api passes down all 900 ms it has: plan its own work, transit or slack"}},
		},
		{
			name: "attempts and backoff exceed the budget",
			chain: chain(func(c *Chain) {
				c.Hops[2].Timeout, c.Hops[2].Attempts, c.Hops[2].Backoff = 400*msec, 2, 50*msec
			}),
			want: []want{{KindUnfundedRetryPolicy, "db", map[string]float64{
				"budget_ms": 800, "required_ms": 850, "attempts": 2, "timeout_ms": 400, "backoff_ms": 50,
			}, "2 attempts of 400 ms with 50 ms backoff on db need 850 ms but it receives 800 ms"}},
		},
		{
			name: "attempts and backoff that exactly fit hold",
			chain: chain(func(c *Chain) {
				c.Hops[2].Timeout, c.Hops[2].Attempts, c.Hops[2].Backoff, c.Hops[2].OwnWork = 375*msec, 2, 50*msec, 10*msec
			}),
		},
		{
			name: "backoffs alone use up the budget",
			chain: chain(func(c *Chain) {
				c.Hops[2].Attempts, c.Hops[2].Backoff = 3, 400*msec
			}),
			want: []want{{KindUnfundedRetryPolicy, "db", map[string]float64{
				"budget_ms": 800, "required_ms": 800, "attempts": 3, "backoff_ms": 400,
			}, "the 2 backoffs of 400 ms on db use up the 800 ms it receives, leaving nothing for its 3 attempts"}},
		},
		{
			name: "budget runs out in the middle, reported once",
			chain: chain(func(c *Chain) {
				c.Hops[1].OwnWork = 900 * msec
				c.Hops[2].Timeout, c.Hops[2].Attempts = 500*msec, 2 // no budget left to exceed
			}),
			want: []want{{KindNonPositiveBudget, "api", map[string]float64{
				"budget_ms": 900, "passed_down_ms": -40, "own_work_ms": 900, "transit_ms": 30, "slack_ms": 10,
			}, "api has -40 ms left after 900 ms own work and 40 ms transit and slack out of 900 ms"}},
		},
		{
			name:  "budget runs out exactly at the leaf",
			chain: chain(func(c *Chain) { c.Hops[2].OwnWork = 800 * msec }),
			want: []want{{KindNonPositiveBudget, "db", map[string]float64{
				"budget_ms": 800, "passed_down_ms": 0, "own_work_ms": 800, "transit_ms": 0, "slack_ms": 0,
			}, "db has 0 ms left after 800 ms own work and 0 ms transit and slack out of 800 ms"}},
		},
		{
			name:  "budget used up by the first hop",
			chain: chain(func(c *Chain) { c.Hops[0].OwnWork = 960 * msec }),
			want: []want{{KindNonPositiveBudget, "edge", map[string]float64{
				"budget_ms": 1000, "passed_down_ms": 0, "own_work_ms": 960, "transit_ms": 40, "slack_ms": 0,
			}, "edge has 0 ms left after 960 ms own work and 40 ms transit and slack out of 1000 ms"}},
		},
		{
			name:  "attempt budget below the observed p50",
			chain: chain(func(c *Chain) { c.Hops[2].Attempts, c.Hops[2].P50 = 2, 450*msec }),
			want: []want{{KindBelowP50, "db", map[string]float64{"per_attempt_ms": 400, "p50_ms": 450},
				"each attempt on db gets a 400 ms budget, below its observed p50 of 450 ms, so most attempts time out"}},
		},
		{
			name:  "timeout below the observed p50",
			chain: chain(func(c *Chain) { c.Hops[2].Timeout, c.Hops[2].P50 = 200*msec, 250*msec }),
			want: []want{{KindBelowP50, "db", map[string]float64{"per_attempt_ms": 200, "p50_ms": 250},
				"each attempt on db gets a 200 ms timeout, below its observed p50 of 250 ms, so most attempts time out"}},
		},
		{
			name:  "p50 equal to the attempt budget holds",
			chain: chain(func(c *Chain) { c.Hops[2].P50 = 800 * msec }),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.NoError(t, tt.chain.Validate())
			p := Check(tt.chain)
			var got []want
			for _, v := range p.Violations {
				require.Equal(t, v.Hop, tt.chain.Hops[v.Index].Name)
				got = append(got, want{v.Kind, v.Hop, v.Evidence, v.Message})
			}
			require.Equal(t, tt.want, got)
			require.Equal(t, len(tt.want) == 0, p.Holds())
		})
	}
}

// TestPlanIndependentTimeouts checks the violating example: every kind a
// chain of independently chosen timeouts produces, at the right hops.
func TestPlanIndependentTimeouts(t *testing.T) {
	c, err := Load(examplePath("independent-timeouts.yaml"))
	require.NoError(t, err)
	p := Check(c)
	type at struct {
		hop  string
		kind Kind
	}
	var got []at
	for _, v := range p.Violations {
		got = append(got, at{v.Hop, v.Kind})
	}
	require.Equal(t, []at{
		{"gateway", KindNotDecreasing},
		{"gateway", KindTimeoutInversion},
		{"order", KindNotDecreasing},
		{"order", KindTimeoutInversion},
		{"order", KindUnfundedRetryPolicy},
		{"pricing", KindTimeoutInversion},
		{"pricing", KindUnfundedRetryPolicy},
		{"database", KindTimeoutInversion},
		{"database", KindUnfundedRetryPolicy},
		{"database", KindBelowP50},
	}, got)
	require.Equal(t, []budgets{
		{30000, 30000, 29900},
		{29900, 29900, 29870},
		{29870, 14935, 14905},
		{14905, 7452, 7437},
		{7437, 2479, 2479},
	}, rowBudgets(p))
}
