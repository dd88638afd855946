package durable

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/store/chsql"
	"github.com/budgetd/budgetd/store/clickhouse"
	"github.com/budgetd/budgetd/store/clickhouse/clickhousetest"
	"github.com/budgetd/budgetd/store/embedded/embeddedtest"
	"github.com/budgetd/budgetd/store/storetest"
	"github.com/budgetd/budgetd/wal"
)

func TestMain(m *testing.M) {
	// chDB's engine runs its own threads; goleak checks Go goroutines only.
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { embeddedtest.Cleanup() }))
}

// recordingSink remembers the spans it was handed.
type recordingSink struct {
	mu    sync.Mutex
	spans map[schema.SpanID]int
}

func (r *recordingSink) Spans(spans []schema.Span) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.spans == nil {
		r.spans = map[schema.SpanID]int{}
	}
	for _, s := range spans {
		r.spans[s.SpanID]++
	}
}

func (r *recordingSink) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.spans)
}

func testConfig(dir string) Config {
	cfg := DefaultConfig()
	cfg.WAL.Dir = dir
	cfg.WAL.SegmentBytes = 1 << 20
	cfg.WAL.MaxBytes = 64 << 20
	cfg.WAL.FlushInterval = 20 * time.Millisecond
	cfg.WAL.BatchSpans = 2000
	cfg.WriteTimeout = 2 * time.Second
	cfg.DeadLetterDir = filepath.Join(dir, "dead-letter")
	return cfg
}

func embeddedStore(t *testing.T) *chsql.Store { return embeddedtest.Open(t, "durable") }

// waitFor polls cond until it holds or a minute passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func rows(t *testing.T, s *chsql.Store) uint64 {
	n, err := s.CountRows(context.Background(), "spans")
	require.NoError(t, err)
	return n
}

func commitAll(t *testing.T, d *Durable, batches [][]schema.Span) {
	t.Helper()
	var wg sync.WaitGroup
	for _, b := range batches {
		wg.Add(1)
		go func() {
			defer wg.Done()
			require.NoError(t, d.Commit(context.Background(), b))
		}()
	}
	wg.Wait()
}

func spanBatches(seed uint64, n, size int) [][]schema.Span {
	all := storetest.SpanBatch(seed, n*size)
	out := make([][]schema.Span, n)
	for i := range out {
		out[i] = all[i*size : (i+1)*size]
	}
	return out
}

func TestCommitDrainsToStoreAndSink(t *testing.T) {
	st := embeddedStore(t)
	sink := &recordingSink{}
	d, err := OpenLog(testConfig(t.TempDir()), Settings{Store: st, Sink: sink})
	require.NoError(t, err)
	commitAll(t, d, spanBatches(1, 40, 100))
	waitFor(t, "4000 spans stored", func() bool { return rows(t, st) >= 4000 })
	require.NoError(t, d.Shutdown(context.Background()))
	require.EqualValues(t, 4000, rows(t, st), "each span stored once")
	require.Equal(t, 4000, sink.count(), "the analysis saw every stored span")
	require.Less(t, d.Counters().Batches, uint64(40), "requests share store writes")
	require.ErrorIs(t, d.Commit(context.Background(), spanBatches(2, 1, 1)[0]), ErrClosed)
}

// TestOutageReplayExactlyOnce acknowledges spans while the store is down,
// stops budgetd before they could be stored, and starts it again with the
// store back: every acknowledged span is stored exactly once.
func TestOutageReplayExactlyOnce(t *testing.T) {
	srv := clickhousetest.Start(t)
	cfg := clickhouse.DefaultConfig()
	cfg.DSN = srv.DSN("durable")
	st, err := clickhouse.Open(context.Background(), cfg)
	require.NoError(t, err)
	defer st.Close()
	dir := t.TempDir()

	require.NoError(t, srv.Stop())
	d, err := OpenLog(testConfig(dir), Settings{Store: st})
	require.NoError(t, err)
	commitAll(t, d, spanBatches(3, 10, 50)) // acknowledged: in the log
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	err = d.Shutdown(ctx)
	cancel()
	require.Error(t, err, "the store is down: draining cannot finish")
	require.Positive(t, d.Counters().WriteErrors)

	require.NoError(t, srv.Start())
	sink := &recordingSink{}
	d2, err := OpenLog(testConfig(dir), Settings{Store: st, Sink: sink})
	require.NoError(t, err)
	waitFor(t, "replayed spans stored", func() bool { return sink.count() >= 500 })
	require.NoError(t, d2.Shutdown(context.Background()))
	require.EqualValues(t, 500, rows(t, st), "every acknowledged span, once")
}

// TestPendingBatchRebuiltWithSameToken simulates a crash after a batch
// reached the store but before the checkpoint recorded it: the restarted
// drainer rebuilds the batch from the log under the same dedup token, and
// the store keeps one copy.
func TestPendingBatchRebuiltWithSameToken(t *testing.T) {
	st := embeddedStore(t)
	dir := t.TempDir()
	d, err := OpenLog(testConfig(dir), Settings{Store: st})
	require.NoError(t, err)
	start := d.WAL().First()
	commitAll(t, d, spanBatches(4, 1, 300))
	waitFor(t, "stored", func() bool { return rows(t, st) >= 300 })
	end := d.WAL().Committed()
	require.NoError(t, d.Shutdown(context.Background()))

	require.NoError(t, saveCheckpoint(dir, checkpoint{Log: d.id, Acked: start, Pending: &end}))
	d2, err := OpenLog(testConfig(dir), Settings{Store: st})
	require.NoError(t, err)
	waitFor(t, "the pending batch replayed", func() bool { return d2.Counters().Replayed == 1 && d2.Counters().Batches == 1 })
	require.NoError(t, d2.Shutdown(context.Background()))
	require.EqualValues(t, 300, rows(t, st), "the replayed batch was deduplicated")
}

// fullLog returns a Durable whose log is full: its store is a ClickHouse
// server that was stopped, so nothing drains. The Durable is shut down when
// the test ends unless the test shuts it down itself (through ingest).
func fullLog(t *testing.T, shutdownAtEnd bool) *Durable {
	t.Helper()
	srv := clickhousetest.Start(t)
	cfg := clickhouse.DefaultConfig()
	cfg.DSN = srv.DSN("durablefull")
	st, err := clickhouse.Open(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	require.NoError(t, srv.Stop())

	c := testConfig(t.TempDir())
	c.WAL.MaxBytes = 1 << 20
	d, err := OpenLog(c, Settings{Store: st})
	require.NoError(t, err)
	if shutdownAtEnd {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			_ = d.Shutdown(ctx) // cannot drain: the store is gone
		})
	}
	require.True(t, d.Admits(1000), "an empty log admits a small request")
	var full error
	for _, b := range spanBatches(5, 200, 50) {
		if err := d.Commit(context.Background(), b); err != nil {
			full = err
			break
		}
	}
	require.ErrorIs(t, full, ErrOverloaded, "a full log answers 503, it does not drop")
	require.ErrorIs(t, full, wal.ErrFull)
	return d
}

func TestFullLogRefuses(t *testing.T) {
	d := fullLog(t, true)
	require.False(t, d.Admits(64<<10), "a full log admits no request as large as a refused record")
}
