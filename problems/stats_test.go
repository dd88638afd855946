package problems

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/schema"
)

func TestFromStats(t *testing.T) {
	t0 := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	orphan := Key{Kind: schema.KindOrphanedWork, CallerService: "gateway", CallerOperation: "op", CalleeService: "order", CalleeOperation: "op"}
	inversion := Key{Kind: schema.KindTimeoutInversion, CallerService: "order", CallerOperation: "op", CalleeService: "db", CalleeOperation: "op"}
	five := 5 * time.Minute
	stats := []Stat{
		{Key: orphan, Interval: t0.Add(-3 * time.Hour), Findings: 4, Requests: 4, Impact: 8},
		{Key: orphan, Interval: t0.Add(-10 * time.Minute), Findings: 6, Requests: 5, Impact: 12.5},
		{Key: inversion, Interval: t0.Add(-2 * time.Hour), Findings: 7, Requests: 3},
	}
	opt := Options{Now: t0, Interval: five, QuietPeriod: time.Hour}
	ps := FromStats(stats, opt)
	require.Len(t, ps, 2)

	o := ps[0]
	require.Equal(t, orphan.ID(), o.ID, "the larger impact first")
	require.Equal(t, 10, o.Occurrences)
	require.Equal(t, 9, o.AffectedRequests)
	require.Equal(t, Impact{Value: 20.5, Unit: UnitOrphanedSeconds}, o.Impact)
	require.Equal(t, t0.Add(-3*time.Hour), o.FirstSeen)
	require.Equal(t, t0.Add(-5*time.Minute), o.LastSeen, "the end of its last interval")
	require.Equal(t, StateRegressed, o.State, "quiet for hours, back 10 minutes ago")
	require.Equal(t, []Bucket{{Start: t0.Add(-3 * time.Hour), Count: 4}, {Start: t0.Add(-10 * time.Minute), Count: 6}}, o.Trend)

	i := ps[1]
	require.Equal(t, Impact{Value: 3, Unit: UnitAffectedRequests}, i.Impact, "a request kind counts requests")
	require.Equal(t, StateResolved, i.State)

	// Intervals whose findings could have been an hour apart, no more, are
	// not a silence longer than the quiet period.
	near := []Stat{
		{Key: orphan, Interval: t0.Add(-70 * time.Minute), Findings: 1, Requests: 1},
		{Key: orphan, Interval: t0.Add(-5 * time.Minute), Findings: 1, Requests: 1},
	}
	require.Equal(t, StateActive, FromStats(near, opt)[0].State)
	// The latest interval still open counts as seen now.
	require.Equal(t, t0, FromStats(near[1:], Options{Now: t0, Interval: 10 * time.Minute, QuietPeriod: time.Hour})[0].LastSeen)
}
