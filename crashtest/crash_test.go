package crashtest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/budgetd/budgetd/store/chsql"
	"github.com/budgetd/budgetd/store/clickhouse/clickhousetest"
	"github.com/budgetd/budgetd/store/engine"
)

// The crash test's load: workers × crashSpansPerRq spans every interval,
// about 4,000 spans a second, and crashKills SIGKILLs crashKillEvery apart.
const (
	crashWorkers    = 4
	crashSpansPerRq = 20
	crashInterval   = 20 * time.Millisecond
	crashKills      = 3
	crashKillEvery  = 3 * time.Second
)

// TestCrashRecovery is DESIGN §6's promise under SIGKILL: a Collector sends
// a steady load to `budgetd serve`, budgetd is killed three times mid-load
// and restarted on the same directories, and at the end every span the
// Collector acknowledged to the sender is stored. The Collector retries
// what budgetd did not acknowledge, so nothing acknowledged may be lost;
// a span can be stored twice when budgetd made it durable but died before
// its answer reached the Collector, which then sent it again, or (on
// servers without insert_deduplication_token) when a kill interrupted a
// store write. The test counts those and bounds them by what the kills
// can have interrupted (see requireNoDuplicates).
func TestCrashRecovery(t *testing.T) {
	bin := buildBudgetd(t)
	for _, eng := range []string{engine.Embedded, engine.ClickHouse} {
		t.Run(eng, func(t *testing.T) {
			opts := budgetdOptions{}
			var srv *clickhousetest.Server
			if eng == engine.ClickHouse {
				srv = clickhousetest.Start(t)
				opts.dsn = srv.DSN("crashtest")
			}
			b := newBudgetd(t, bin, opts)
			b.start(t)
			receiver := freeAddr(t)
			col := startCollector(t, receiver, b.grpc)
			s := newSender(t, receiver, crashSpansPerRq)

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			begin := time.Now()
			wait := s.run(ctx, crashWorkers, crashInterval)
			var recoveries []time.Duration
			var peak int64
			for range crashKills {
				before := s.ackedCount()
				time.Sleep(crashKillEvery)
				require.Greater(t, s.ackedCount(), before, "the Collector acknowledged nothing in %s", crashKillEvery)
				b.proc.kill()
				peak = max(peak, peakRSS(b.proc))
				recoveries = append(recoveries, b.start(t))
			}
			time.Sleep(crashKillEvery)
			cancel()
			wait()
			loadTime := time.Since(begin)

			// SIGTERM: the Collector sends what its queue still holds,
			// then budgetd drains its log into the store.
			col.stop(t, time.Minute)
			b.proc.stop(t, time.Minute)
			peak = max(peak, peakRSS(b.proc))

			st := openStore(t, b)
			v := compare(s.acked, storedSpans(t, st))
			v.sent = s.sent
			t.Logf("%s: load %s, %d kills; spans sent %d, acknowledged %d, stored %d (rows %d), lost %d, duplicates %d; "+
				"restart to ready %v; budgetd peak RSS %.1f MiB; sender errors %v",
				eng, loadTime.Round(time.Millisecond), crashKills, v.sent, v.acked, v.stored, v.storedRows, v.lost, v.duplicates,
				recoveries, float64(peak)/(1<<20), s.refused)
			require.Zero(t, v.lost, "acknowledged spans missing from the store")
			require.Greater(t, v.acked, crashKills*crashSpansPerRq*10, "too little load to tell")
			requireNoDuplicates(t, v.duplicates)
		})
	}
}

// TestStoreOutage stops the ClickHouse server under load: budgetd keeps
// acknowledging into its write-ahead log until ingest.durability.wal.max_bytes, then
// answers UNAVAILABLE; once the server is back the log drains and every
// acknowledged span is stored once.
func TestStoreOutage(t *testing.T) {
	bin := buildBudgetd(t)
	srv := clickhousetest.Start(t)
	b := newBudgetd(t, bin, budgetdOptions{dsn: srv.DSN("outage"), walMaxBytes: 4 << 20})
	b.start(t)
	s := newSender(t, b.grpc, crashSpansPerRq)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wait := s.run(ctx, crashWorkers, crashInterval)
	waitUntil(t, "spans acknowledged before the outage", 30*time.Second, b.proc, func() bool { return s.ackedCount() > 1000 })

	require.NoError(t, srv.Stop())
	outage := time.Now()
	ackedAtStop := s.ackedCount()
	waitUntil(t, "UNAVAILABLE once the log is full", 60*time.Second, b.proc, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.refused[codes.Unavailable] > 0
	})
	fullAfter := time.Since(outage)
	ackedDuringOutage := s.ackedCount() - ackedAtStop
	require.Positive(t, ackedDuringOutage, "nothing was acknowledged into the log while the store was down")

	time.Sleep(time.Second)
	require.NoError(t, srv.Start())
	restored := time.Now()
	// The senders keep going; once the log has drained below its cap
	// requests are acknowledged again.
	ackedAtRestore := s.ackedCount()
	waitUntil(t, "acknowledgements after the store came back", 60*time.Second, b.proc, func() bool {
		return s.ackedCount() > ackedAtRestore+1000
	})
	recovery := time.Since(restored)
	cancel()
	wait()
	b.proc.stop(t, time.Minute)

	st := openStore(t, b)
	v := compare(s.acked, storedSpans(t, st))
	v.sent = s.sent
	t.Logf("store outage: spans sent %d, acknowledged %d (%d while the store was down), stored %d (rows %d), lost %d, duplicates %d; "+
		"log full after %v; acknowledging again %v after the store returned; budgetd peak RSS %.1f MiB; refusals %v",
		v.sent, v.acked, ackedDuringOutage, v.stored, v.storedRows, v.lost, v.duplicates,
		fullAfter.Round(time.Millisecond), recovery.Round(time.Millisecond), float64(peakRSS(b.proc))/(1<<20), s.refused)
	require.Zero(t, v.lost, "acknowledged spans missing from the store")
	requireNoDuplicates(t, v.duplicates)
}

// requireNoDuplicates checks that no span is stored twice. Two causes are
// closed: a request the Collector sends again after a kill (budgetd
// fsynced it, the answer was lost) is recognised and not stored again
// (ingest.durability.dedup, rebuilt from the log and its seen files at
// start); and on the test's ClickHouse server (18.16, before
// insert_deduplication_token) a batch that landed before its token was
// recorded is not stored again, because WriteSpans leaves out what is
// stored on such servers.
func requireNoDuplicates(t testing.TB, duplicates int) {
	t.Helper()
	require.Zero(t, duplicates, "spans stored twice")
}

// openStore opens the store budgetd used, after it exited: the embedded
// engine allows one process on a data directory.
func openStore(t testing.TB, b *budgetd) *chsql.Store {
	t.Helper()
	cfg := engine.DefaultConfig()
	if b.dsn != "" {
		cfg.Engine = engine.ClickHouse
		cfg.ClickHouse.DSN = b.dsn
	} else {
		cfg.Embedded.DataDir = b.dataDir
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := engine.Open(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st
}
