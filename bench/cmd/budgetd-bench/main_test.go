package main

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/bench"
	"github.com/budgetd/budgetd/proctest"
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

// TestDrainCountsInTheRateAndTheCPU checks that budgetd's sustained rate
// and CPU per span are taken over the load and the drain after it: 80k
// acknowledged spans/s for 10 s, all stored once 6 s of drain are over, is
// 50k stored/s, and the 24 CPU s of those 16 s are 30 CPU s per million.
func TestDrainCountsInTheRateAndTheCPU(t *testing.T) {
	r := loaded("embedded", "budgetd embedded", 80_000, 80_000, 24*time.Second)
	r.drain = 6 * time.Second
	require.InDelta(t, 50_000, r.sustained(), 1e-9)
	require.InDelta(t, 30, r.cpuPerMillion(), 1e-9)
	require.InDelta(t, 80_000, r.res.SpansPerSecond(), 1e-9, "the acknowledged rate is the load's alone")
}

// TestMeasureWindowHoldsTheSpansItStored runs budgetd briefly: the
// measured window starts once the warmup's spans are stored and ends once
// the load's are, so the spans stored in it are exactly those the load got
// acknowledged, and its CPU is theirs: read once their analysis is written
// too, so nothing is left in assembly or in an analysis round.
func TestMeasureWindowHoldsTheSpansItStored(t *testing.T) {
	dir := t.TempDir()
	bin := proctest.BuildBudgetd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	target, err := bench.StartBudgetd(ctx, bin, dir, "budgetd embedded")
	require.NoError(t, err)
	defer func() { require.NoError(t, target.Stop()) }()

	r, err := measure(ctx, target, bench.Requests(4, 200), 200, 2, time.Second, time.Second, 0, "")
	require.NoError(t, err)
	require.Positive(t, r.res.Spans)
	require.EqualValues(t, r.res.Spans, r.stored, "stored in the window = acknowledged by the load")
	require.Positive(t, r.cpu)
	require.LessOrEqual(t, r.sustained(), r.res.SpansPerSecond())
	for _, gauge := range []string{"budgetd_analysis_pending_spans", "budgetd_analysis_analysing_spans"} {
		held, err := bench.Metric(ctx, target.API, gauge)
		require.NoError(t, err)
		require.Zero(t, held, gauge)
	}
	analysed, err := bench.Metric(ctx, target.API, "budgetd_analysis_traces_total")
	require.NoError(t, err)
	require.Positive(t, analysed)
}

// TestQueryEnginesRefusesAnUnknownEngine: a misspelt -query-engines fails
// before any store is filled.
func TestQueryEnginesRefusesAnUnknownEngine(t *testing.T) {
	err := runQueries(context.Background(), io.Discard, 10, 0, 21, []string{"embeded"})
	require.ErrorContains(t, err, `unknown engine "embeded"`)
}

// TestQueryRunsRefusesNone: -query-runs 0 would time nothing and print
// no latency; it fails before any store is filled.
func TestQueryRunsRefusesNone(t *testing.T) {
	err := run(context.Background(), []string{"-query-spans", "10", "-query-runs", "0", "-query-engines", "embedded"}, io.Discard)
	require.ErrorContains(t, err, "-query-runs: want at least 1, got 0")
}

// TestBaselineIsComparedByMediansAndPairByPair checks the lines -rounds
// and -baseline add under the table: each row's medians over the rounds,
// and budgetd against its baseline by the medians and, for the CPU, pair
// by pair in the order the rounds ran.
func TestBaselineIsComparedByMediansAndPairByPair(t *testing.T) {
	measured := func(baseline bool, stored float64, cpuPerM float64) row {
		r := loaded("embedded", "budgetd embedded", 100_000, stored, time.Duration(cpuPerM*stored*10/1e6*float64(time.Second)))
		if baseline {
			r.name, r.baseline = r.name+" (baseline)", true
		}
		return r
	}
	collector := loaded("collector", "otelcol → nop", 220_000, -1, time.Second)
	floor := func(cpuPerM float64) row {
		return row{target: "floor", name: "floor", stored: -1, floorPerM: cpuPerM}
	}
	rows := []row{
		collector, floor(9), measured(false, 50_000, 40), measured(true, 40_000, 50),
		collector, floor(11), measured(true, 36_000, 55), measured(false, 40_000, 50),
		collector, floor(10), measured(false, 45_000, 44), measured(true, 38_000, 48),
	}
	require.Equal(t, []string{
		"budgetd embedded against its baseline: sustained +18 % (medians 45000 / 38000), CPU per stored span -12 % (44.00 / 50.00); CPU pair by pair -20 %, -9 %, -8 %",
	}, againstBaseline(rows))
	require.Equal(t, []string{
		"otelcol → nop, median of 3: 220000 spans/s sustained, 0.45 CPU s / 1M",
		"floor, median of 3: 10.00 CPU s / 1M", // a cost: no rate of its own (it printed NaN)
		"budgetd embedded, median of 3: 45000 spans/s sustained, 44.00 CPU s / 1M",
		"budgetd embedded (baseline), median of 3: 38000 spans/s sustained, 50.00 CPU s / 1M",
	}, medians(rows))
	require.Empty(t, againstBaseline(rows[:3]), "no baseline run")
	require.Empty(t, againstBaseline(rows[:7]), "unpaired: a baseline run more than runs")
}

// TestRoundsAndBaselineRefuseWhatCannotRun: no round, or a baseline with
// no budgetd target to run it as, fails before any target starts.
func TestRoundsAndBaselineRefuseWhatCannotRun(t *testing.T) {
	err := run(context.Background(), []string{"-rounds", "0"}, io.Discard)
	require.ErrorContains(t, err, "-rounds: want at least 1, got 0")
	err = run(context.Background(), []string{"-baseline", "bin/budgetd", "-targets", "collector,floor"}, io.Discard)
	require.ErrorContains(t, err, `-baseline: no budgetd target in -targets "collector,floor"`)
}
