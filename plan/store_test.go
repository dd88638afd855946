package plan

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/plan/plantest"
	"github.com/budgetd/budgetd/store"
	"github.com/budgetd/budgetd/store/embedded"
)

// TestPlanFromStore builds chains from hops stored in the embedded engine
// and checks every observed figure.
func TestPlanFromStore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := embedded.Open(ctx, embedded.Config{DataDir: t.TempDir(), Database: "plantest"})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	start := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	require.NoError(t, s.WriteHops(ctx, "checkout", plantest.CheckoutHops(start)))
	window := store.WindowOf(start, start.Add(time.Minute))

	toInventory := []Hop{
		{Name: plantest.Web, OwnWork: 50 * msec, Transit: 20 * msec, P50: 650 * msec},
		{Name: plantest.Order, Timeout: 1800 * msec, Attempts: 1, OwnWork: 180 * msec, Transit: 15 * msec, P50: 600 * msec},
		{Name: plantest.Inventory, Timeout: 600 * msec, Attempts: 2, OwnWork: 385 * msec, P50: 400 * msec},
	}
	tests := []struct {
		name    string
		query   StoreQuery
		want    Chain
		wantErr string
	}{
		{
			name:  "budget, allowances, timeouts and retries observed",
			query: StoreQuery{Path: []string{plantest.Web, plantest.Order, plantest.Inventory}, Window: window},
			want: Chain{Budget: 2000 * msec, Hops: toInventory, Notes: []string{
				"client budget: the median budget recorded on web:GET /checkout",
				"observed 20 requests on web:GET /checkout between 2025-03-01T12:00:00Z and 2025-03-01T12:01:00Z; own work and transit are p99s, timeouts, attempts and p50s medians of what the callers recorded",
				"backoff between attempts is not stored, so 0 ms is assumed: with real backoff each attempt gets less than shown",
			}},
		},
		{
			name: "a callee known only from its callers, budget given",
			query: StoreQuery{Path: []string{plantest.Web, plantest.Order, plantest.Inventory, plantest.Postgres},
				Window: window, Budget: 1500 * msec},
			want: Chain{Budget: 1500 * msec, Hops: []Hop{
				toInventory[0], toInventory[1],
				{Name: plantest.Inventory, Timeout: 600 * msec, Attempts: 2, OwnWork: 285 * msec, P50: 400 * msec},
				{Name: plantest.Postgres, OwnWork: 100 * msec, P50: 100 * msec},
			}, Notes: []string{
				"observed 20 requests on web:GET /checkout between 2025-03-01T12:00:00Z and 2025-03-01T12:01:00Z; own work and transit are p99s, timeouts, attempts and p50s medians of what the callers recorded",
				"inventory:reserve: no call to postgres:SELECT was matched with its server span, so its transit is taken as 0",
				"postgres:SELECT records no entry spans: its own work is its callers' p99 call duration",
				"backoff between attempts is not stored, so 0 ms is assumed: with real backoff each attempt gets less than shown",
			}},
		},
		{
			name:    "path that does not start at a root",
			query:   StoreQuery{Path: []string{plantest.Order, plantest.Inventory}, Window: window},
			wantErr: `no request entered "order:POST /order" between 2025-03-01T12:00:00Z and 2025-03-01T12:01:00Z`,
		},
		{
			name:    "hop never reached",
			query:   StoreQuery{Path: []string{plantest.Web, "payments:charge"}, Window: window},
			wantErr: `no call reached "payments:charge"`,
		},
		{
			name:    "window without data",
			query:   StoreQuery{Path: []string{plantest.Web}, Window: store.WindowOf(start.Add(time.Hour), start.Add(2*time.Hour))},
			wantErr: "no request entered",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := FromStore(ctx, s, tt.query)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				require.ErrorIs(t, err, ErrNotObserved)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, c)
		})
	}

	// The observed chain holds: 2000 → 1930 → 1735 → 867 per attempt → 482.
	c, err := FromStore(ctx, s, tests[0].query)
	require.NoError(t, err)
	p := Check(c)
	require.True(t, p.Holds(), "%v", p.Violations)
	require.Equal(t, []budgets{{2000, 2000, 1930}, {1930, 1930, 1735}, {1735, 867, 482}}, rowBudgets(p))
}

func TestPlanFromStoreNoBudget(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := embedded.Open(ctx, embedded.Config{DataDir: t.TempDir(), Database: "plantest_nobudget"})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	start := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	hops := plantest.CheckoutHops(start)
	for i := range hops {
		hops[i].BudgetMs = nil
	}
	require.NoError(t, s.WriteHops(ctx, "nobudget", hops))
	_, err = FromStore(ctx, s, StoreQuery{Path: []string{plantest.Web}, Window: store.Window{SinceNs: uint64(start.UnixNano())}})
	require.ErrorIs(t, err, ErrNotObserved)
	require.ErrorContains(t, err, `no budget recorded on "web:GET /checkout" since 2025-03-01T12:00:00Z; give the client's budget`)
}

func TestPlanParsePath(t *testing.T) {
	got, err := ParsePath(" web:GET /  > order:POST /order ")
	require.NoError(t, err)
	require.Equal(t, []string{"web:GET /", "order:POST /order"}, got)
	_, err = ParsePath("web:GET / >  > db")
	require.ErrorContains(t, err, "empty element 2")
	_, err = ParsePath("")
	require.ErrorContains(t, err, "empty element 1")
}
