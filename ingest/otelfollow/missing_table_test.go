package otelfollow

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/fixtures/fixturestest"
	"github.com/budgetd/budgetd/ingest"
	"github.com/budgetd/budgetd/store/oteltraces/oteltracestest"
)

// TestFollowWaitsForTheTable starts following before the exporter created
// its table: the polls fail and are counted, the position stays, and once
// the table exists its traces are taken from the start.
func TestFollowWaitsForTheTable(t *testing.T) {
	e := newEnv(t)
	e.cfg.Table = e.db + ".later"
	td := fixturestest.Moved(t, "seed000_independent_timeouts", 0)
	e.setClock(fixturestest.End(td).Add(e.cfg.Settle))
	e.start()
	defer e.stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := e.f.Poll(ctx)
	require.ErrorContains(t, err, "no such table")

	// The loop counts what Poll returns; run it for a poll or two.
	e.f.Start()
	require.Eventually(t, func() bool { return testutil.ToFloat64(e.f.m.errors) >= 1 }, time.Minute, 10*time.Millisecond)
	require.NoError(t, e.f.Shutdown(ctx))
	e.f, err = New(e.cfg, Settings{Durability: e.dur, Store: e.st, Limits: ingest.DefaultLimits(), Now: e.clock})
	require.NoError(t, err)

	require.NoError(t, oteltracestest.Create(ctx, e.src, oteltracestest.Layouts()[0], e.db, "later"))
	require.NoError(t, oteltracestest.Write(ctx, e.src, oteltracestest.Layouts()[0], e.db, "later", td))
	res := e.poll()
	require.Equal(t, td.SpanCount(), res.Spans)
	require.Equal(t, fixturestest.GoldenIDs(t, "seed000_independent_timeouts"), e.findingIDs())
}
