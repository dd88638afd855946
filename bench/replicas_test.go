package bench

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/proctest"
	"github.com/budgetd/budgetd/store/clickhouse/clickhousetest"
)

// TestReplicasSpreadTheLoad drives the replicas-2 target briefly: the
// Collector in front acknowledges the load, each replica stores a share
// of it, and together they store every span acknowledged — so the rate
// the harness sums over the replicas is the deployment's stored rate.
func TestReplicasSpreadTheLoad(t *testing.T) {
	root := proctest.RepoRoot(t)
	dir := t.TempDir()
	bin := proctest.BuildBudgetd(t)
	srv := clickhousetest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	target, err := StartReplicas(ctx, bin, proctest.Tool(t, ".cache/otelcol/otelcol-budgetd-lb"),
		filepath.Join(root, "deploy/collector/loadbalancing.yaml"), dir, srv.DSN("bench"), 2)
	require.NoError(t, err, "%s\n%s", logOf(dir, "otelcol-lb"), logOf(filepath.Join(dir, "replica-0"), "budgetd-replica-0"))
	defer func() { require.NoError(t, target.Stop()) }()
	require.Len(t, target.APIs(), 2)
	require.Len(t, target.PIDs(), 3, "two replicas and the Collector")

	res, err := Drive(ctx, target.Endpoint, Requests(4, 50), 50, 2, 0, time.Second, 0)
	require.NoError(t, err)
	require.Positive(t, res.Spans)
	require.Zero(t, res.Refused)
	shares := make([]float64, 2)
	for {
		total := 0.0
		for i, api := range target.APIs() {
			shares[i], err = Metric(ctx, api, "budgetd_wal_stored_spans_total")
			require.NoError(t, err)
			total += shares[i]
		}
		if total >= float64(res.Spans) {
			require.EqualValues(t, res.Spans, total, "the replicas store what the Collector acknowledged, once")
			break
		}
		require.NoError(t, ctx.Err(), "stored %v of %d acknowledged spans", shares, res.Spans)
		time.Sleep(50 * time.Millisecond)
	}
	for i, n := range shares {
		require.Positive(t, n, "replica %d stored nothing: the Collector did not spread the traces", i)
	}
}
