package app

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/fixtures/fixturestest"
	"github.com/budgetd/budgetd/store/embedded"
	"github.com/budgetd/budgetd/store/oteltraces/oteltracestest"
)

// TestFollowOTelTraces runs budgetd with follow.otel_traces on the
// exporter's table in the embedded engine, as `serve` does: traces written
// to the table are analysed with the findings `budgetd analyze` gives for
// them, a restart takes nothing again, and rows written after it are
// picked up. (A ClickHouse 18.16 server cannot hold the exporter's table:
// Map needs 21.1 and DateTime64 20.1; so this runs on chDB only.)
func TestFollowOTelTraces(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t)
	conn, err := embedded.Connect(cfg.Store.Embedded.DataDir)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	layout, db := oteltracestest.Layouts()[0], cfg.Store.Embedded.Database+"_otel"
	require.NoError(t, oteltracestest.Create(ctx, conn, layout, db, "otel_traces"))
	t.Cleanup(func() { _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+db, nil) })
	f := &cfg.Follow.OTelTraces
	f.Source, f.Table = cfg.Store.Embedded.DataDir, db+".otel_traces"
	f.Settle, f.Poll = 500*time.Millisecond, 50*time.Millisecond
	// retry_amplification_positive's root span lasts 1,000 s: the scan for
	// due traces must reach back to where it started.
	f.MaxTraceDuration = time.Hour
	// A few traces a poll: the 20 traces of the first batch take several
	// polls, one straight after the other.
	f.MaxSpansPerPoll = 20
	// Every finding is stored in full, so they can be compared with the
	// golden files.
	cfg.Problems.ExamplesPerInterval = 1_000_000
	// write puts a fixture into the table, moved to end at end.
	write := func(name string, end time.Time) {
		td := fixturestest.Moved(t, name, 0)
		td = fixturestest.Moved(t, name, end.Sub(fixturestest.End(td)))
		require.NoError(t, oteltracestest.Write(ctx, conn, layout, db, "otel_traces", td))
	}
	start := func() *App {
		a, err := Start(ctx, cfg, nil)
		require.NoError(t, err)
		return a
	}
	stop := func(a *App) {
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		require.NoError(t, a.Shutdown(ctx))
	}
	// waitForFindings waits until the API serves want (trace findings).
	waitForFindings := func(a *App, want []string) {
		t.Helper()
		waitFor(t, "the followed traces' findings", func() bool {
			got := traceFindingIDs(t, a.APIAddr())
			return len(got) >= len(want)
		})
		require.Equal(t, want, traceFindingIDs(t, a.APIAddr()))
	}

	write("seed004_gateway_retry", time.Now())
	a := start()
	first := fixturestest.GoldenIDs(t, "seed004_gateway_retry")
	waitForFindings(a, first)
	m := scrape(t, a.APIAddr())
	require.EqualValues(t, 20, m["budgetd_follow_traces_total"])
	require.EqualValues(t, 20, m["budgetd_analysis_traces_total"])
	require.Positive(t, m["budgetd_follow_full_polls_total"])
	stop(a)

	a = start()
	defer stop(a)
	waitFor(t, "three polls after the restart", func() bool { return scrape(t, a.APIAddr())["budgetd_follow_polls_total"] >= 3 })
	m = scrape(t, a.APIAddr())
	require.Zero(t, m["budgetd_follow_traces_total"], "the restart resumes after what was taken")
	require.Zero(t, m["budgetd_analysis_traces_total"])
	require.Equal(t, first, traceFindingIDs(t, a.APIAddr()))

	// Ending a little ahead, the trace is still to come when the rows land.
	write("retry_amplification_positive", time.Now().Add(2*time.Second))
	want := append(fixturestest.GoldenIDs(t, "retry_amplification_positive"), first...)
	sort.Strings(want)
	waitForFindings(a, want)
	require.Less(t, scrape(t, a.APIAddr())["budgetd_follow_lag_seconds"], time.Minute.Seconds())
}

// traceFindingIDs are the ids of the findings the API serves, edge
// findings (latency_inversion) left out, sorted.
func traceFindingIDs(t *testing.T, addr string) []string {
	return fixturestest.TraceFindingIDs(findings(t, addr))
}
