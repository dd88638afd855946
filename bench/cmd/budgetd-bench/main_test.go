package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/bench"
)

// loaded is a row of a target that ran for 10 s at these rates (spans/s;
// stored -1 for none).
func loaded(target, name string, acked, stored float64, cpu time.Duration) row {
	if stored > 0 {
		stored *= 10
	}
	return row{target: target, name: name, cpu: cpu, stored: stored,
		res: bench.Result{Spans: int64(acked * 10), Elapsed: 10 * time.Second}}
}

// TestRatiosCompareBudgetdWithThePeersInTheRun checks the lines under the
// table: budgetd's stored rate against Jaeger's stored and the Collector's
// acknowledged rate, its CPU per stored span against the floor's sum of
// the Collector's and the INSERT … SELECT's, and nothing for a peer that
// is not in the run.
func TestRatiosCompareBudgetdWithThePeersInTheRun(t *testing.T) {
	collector := loaded("collector", "otelcol → nop", 220_000, -1, 6600*time.Millisecond) // 3 CPU s per 1M
	jaeger := loaded("jaeger", "Jaeger v2 (badger)", 10_000, 10_000, 0)
	// 32.8 CPU s per million stored, acknowledging more than it stores.
	embedded := loaded("embedded", "budgetd embedded", 80_000, 57_000, 18696*time.Millisecond)
	floor := floorRow(collector, bench.InsertFloor{Rows: 1_000_000, CPU: 5 * time.Second, Elapsed: time.Second})
	require.InDelta(t, 8, floor.cpuPerMillion(), 1e-9, "3 receiving + 5 storing")

	require.Equal(t, []string{"budgetd embedded: 5.7× Jaeger's stored/s, 0.26× the Collector's; CPU per stored span 4.1× the floor"},
		ratios([]row{collector, jaeger, floor, embedded}))
	require.Equal(t, []string{"budgetd embedded: 0.26× the Collector's"}, ratios([]row{collector, embedded}))
	require.Empty(t, ratios([]row{jaeger, floor}), "no budgetd row")
}
