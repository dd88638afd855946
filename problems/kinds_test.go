package problems

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/schema"
)

// suggestion groups one finding per evidence map (each on its own trace)
// and returns the one problem's suggestion.
func suggestion(t *testing.T, kind schema.Kind, path string, evidence ...map[string]float64) string {
	t.Helper()
	return only(t, Group(onTraces(kind, path, evidence...), Options{})).Suggestion
}

func TestSuggestTimeoutInversion(t *testing.T) {
	t.Run("below the least budget left", func(t *testing.T) {
		s := suggestion(t, schema.KindTimeoutInversion, checkout,
			map[string]float64{"remaining_ms": 900, "timeout_ms": 2000},
			map[string]float64{"remaining_ms": 612.7, "timeout_ms": 2000},
			map[string]float64{"remaining_ms": 1400, "timeout_ms": 2000})
		require.Equal(t, "Give gateway's call to order:POST /order a timeout below 612 ms, the least budget it had left (it is set to 2000 ms), "+
			"or better derive the timeout per request from the remaining budget.", s)
	})
	t.Run("calls past the deadline get their own clause", func(t *testing.T) {
		s := suggestion(t, schema.KindTimeoutInversion, checkout,
			map[string]float64{"remaining_ms": 900, "timeout_ms": 2000},
			map[string]float64{"remaining_ms": -100, "timeout_ms": 2000},
			map[string]float64{"remaining_ms": 700, "timeout_ms": 1500})
		require.Contains(t, s, "a timeout below 700 ms")
		require.Contains(t, s, "(it is set to up to 2000 ms)")
		require.Contains(t, s, "; 1 call started with the budget already spent: check it before calling.")
	})
	t.Run("only spent budgets", func(t *testing.T) {
		s := suggestion(t, schema.KindTimeoutInversion, checkout,
			map[string]float64{"remaining_ms": -100, "timeout_ms": 700},
			map[string]float64{"remaining_ms": -20.2, "timeout_ms": 700})
		require.Equal(t, "gateway calls order:POST /order with its budget already spent (up to 100 ms past the deadline): "+
			"check the remaining budget before calling and derive the timeout from it.", s)
	})
}

func TestSuggestUnfundedRetryPolicy(t *testing.T) {
	policy := func(left float64) map[string]float64 {
		return map[string]float64{"remaining_ms": left, "required_ms": 3 * 900 * 2 * 50, "max_attempts": 3, "timeout_ms": 900, "backoff_ms": 50}
	}
	tests := []struct {
		name string
		left []float64
		want string
	}{
		// (1600 − 2 × 50) / 3 = 500: the median of 1000, 1600, 2000 is 1600.
		{"median of an odd count", []float64{2000, 1000, 1600}, "With a median 1600 ms left, give each of gateway's 3 attempts on order:POST /order at most 500 ms, (1600 − (3 − 1) × 50) / 3, instead of 900 ms, or size each attempt from the remaining budget."},
		// The median of 1000 and 1600 is 1300: (1300 − 100) / 3 = 400.
		{"median of an even count", []float64{1000, 1600}, "With a median 1300 ms left, give each of gateway's 3 attempts on order:POST /order at most 400 ms, (1300 − (3 − 1) × 50) / 3, instead of 900 ms, or size each attempt from the remaining budget."},
		// (1670 − 100) / 3 = 523.3: rounded down.
		{"one finding, rounded down", []float64{1670}, "With 1670 ms left, give each of gateway's 3 attempts on order:POST /order at most 523 ms, (1670 − (3 − 1) × 50) / 3, instead of 900 ms, or size each attempt from the remaining budget."},
		{"the backoffs alone do not fit", []float64{90}, "With 90 ms left, 3 attempts with 50 ms backoff do not fit on order:POST /order: allow one attempt of at most 90 ms, or size the attempts from the remaining budget."},
		{"spent", []float64{-30}, "gateway starts its calls to order:POST /order with the budget already spent (30 ms past the deadline): check the remaining budget before calling."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var evs []map[string]float64
			for _, l := range tt.left {
				evs = append(evs, policy(l))
			}
			require.Equal(t, tt.want, suggestion(t, schema.KindUnfundedRetryPolicy, checkout, evs...))
		})
	}
}

func TestSuggestOtherKinds(t *testing.T) {
	tests := []struct {
		kind     schema.Kind
		path     string
		evidence []map[string]float64
		want     string
	}{
		{schema.KindBudgetReset, checkout, []map[string]float64{{"received_ms": 30000, "remaining_ms": 900}},
			"Propagate gateway's deadline to order:POST /order instead of a local default: it started with a 30000 ms budget while gateway had 900 ms left."},
		{schema.KindBudgetReset, checkout, []map[string]float64{{"received_ms": 30000, "remaining_ms": 900}, {"received_ms": 30000, "remaining_ms": 500}},
			"Propagate gateway's deadline to order:POST /order instead of a local default: it started with a median 30000 ms budget while gateway had a median 700 ms left."},
		{schema.KindBudgetReset, checkout, []map[string]float64{{"received_ms": 1700, "remaining_ms": -60}},
			"Propagate gateway's deadline to order:POST /order instead of a local default: it started with a 1700 ms budget while gateway's deadline had passed."},
		{schema.KindLatencyInversion, checkout, []map[string]float64{{"p99_ms": 1200.13, "timeout_ms": 1000, "samples": 20}},
			"Raise gateway's timeout on order:POST /order to at least 1201 ms, the callee's p99 (it waits 1000 ms), or make order:POST /order faster."},
		{schema.KindOrphanedWork, checkout, []map[string]float64{{"orphaned_ms": 2000}, {"orphaned_ms": 1234}},
			"Make order:POST /order stop when gateway gives up (propagate cancellation and the deadline): 3.23 s of work ran after the caller had gone, up to 2000 ms in one request."},
		{schema.KindOrphanedWork, "order:POST /order", []map[string]float64{{"orphaned_ms": 300}},
			"Make order:POST /order stop when the request's deadline passes (propagate cancellation and the deadline): 0.3 s of work ran after the caller had gone, up to 300 ms in one request."},
		{schema.KindExpiredOnArrival, checkout, []map[string]float64{{"remaining_ms": -200, "duration_ms": 360}},
			"Make order:POST /order check the remaining budget before starting and reject requests already past their deadline: 1 request arrived too late and still ran 0.36 s, up to 360 ms in one request."},
		{schema.KindRetryAmplification, "svc0:op0 > svc1:op1 > db:call", []map[string]float64{{"calls": 12, "levels": 3}, {"calls": 4, "levels": 2}},
			"Retry at one level of svc0:op0 > svc1:op1 > db:call only: keep the retries on the leaf edge svc1:op1 → db:call and make the levels above fail fast (db was called up to 12 times for one request)."},
		{schema.KindRetryWithoutBudget, checkout, []map[string]float64{{"remaining_ms": 670, "expected_ms": 900, "attempt": 2}, {"remaining_ms": -5, "attempt": 3}},
			"Check the remaining budget before gateway retries order:POST /order: its retries started with 670 ms left while an attempt needs about 900 ms, so skip the retry when less is left."},
		{schema.KindRetryWithoutBudget, checkout, []map[string]float64{{"remaining_ms": -100, "attempt": 2}, {"remaining_ms": -20, "attempt": 3}},
			"Check the remaining budget before gateway retries order:POST /order: its retries started after the deadline had passed (a median 60 ms late), so skip them and fail fast."},
		{"future_kind", checkout, []map[string]float64{{"x": 1}}, "future_kind on " + checkout},
	}
	for _, tt := range tests {
		t.Run(string(tt.kind), func(t *testing.T) {
			require.Equal(t, tt.want, suggestion(t, tt.kind, tt.path, tt.evidence...))
		})
	}
}
