package plan

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPlanSuggest(t *testing.T) {
	tests := []struct {
		name          string
		chain         Chain
		scale         [2]float64 // inclusive range
		fewerAttempts bool
		timeouts      []float64 // ms; nil when no split holds
		attempts      []int
		minBudget     time.Duration
	}{
		{
			name:      "fits as planned: only the timeouts change",
			chain:     chain(func(c *Chain) { c.Hops[2].Timeout = 900 * msec }),
			scale:     [2]float64{1, 1},
			timeouts:  []float64{1000, 900, 800},
			attempts:  []int{1, 1, 1},
			minBudget: 301 * msec, // 300 ms of allowances, and the last hop needs 1 ms left
		},
		{
			name:      "budget too small: allowances scaled",
			chain:     chain(func(c *Chain) { c.Budget = 200 * msec }),
			scale:     [2]float64{0.6, 0.7},
			attempts:  []int{1, 1, 1},
			minBudget: 301 * msec,
		},
		{
			name: "retries divide the budget below the p50: attempts cut",
			chain: chain(func(c *Chain) {
				c.Hops[2].Attempts, c.Hops[2].P50 = 5, 250*msec
			}),
			scale:         [2]float64{1, 1},
			fewerAttempts: true,
			timeouts:      []float64{1000, 900, 266},
			attempts:      []int{1, 1, 3},
			minBudget:     1450 * msec, // 5 attempts of 250 ms after 200 ms of allowances
		},
		{
			name:      "a p50 above the whole budget: no split",
			chain:     chain(func(c *Chain) { c.Hops[2].P50 = 5 * time.Second }),
			minBudget: 5200 * msec,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Suggest(tt.chain)
			require.Equal(t, tt.minBudget, s.MinBudget)
			require.Equal(t, tt.fewerAttempts, s.FewerAttempts)
			if tt.attempts == nil {
				require.Empty(t, s.Hops)
				return
			}
			require.True(t, s.Plan.Holds(), "%v", s.Plan.Violations)
			require.GreaterOrEqual(t, s.Scale, tt.scale[0])
			require.LessOrEqual(t, s.Scale, tt.scale[1])
			var attempts []int
			var timeouts []float64
			for i, h := range s.Hops {
				attempts = append(attempts, h.attempts())
				timeouts = append(timeouts, ms(h.Timeout))
				require.Equal(t, s.Plan.Rows[i].PerAttempt, h.Timeout, "timeout is the attempt's budget")
			}
			require.Equal(t, tt.attempts, attempts)
			if tt.timeouts != nil {
				require.Equal(t, tt.timeouts, timeouts)
			}
			// Allowances any larger would not fit.
			if s.Scale < 1 {
				require.False(t, fits(scaled(tt.chain, s.Scale+0.01)))
			}
		})
	}
}
