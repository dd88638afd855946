package durable

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/durable/record"
	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/store"
	"github.com/budgetd/budgetd/store/chsql"
	"github.com/budgetd/budgetd/store/clickhouse"
	"github.com/budgetd/budgetd/store/clickhouse/clickhousetest"
	"github.com/budgetd/budgetd/store/storetest"
	"github.com/budgetd/budgetd/wal"
)

// Engine is one real engine the write-path tests run on: Open gives a
// store on a fresh database, closed when the test ends.
type Engine struct {
	Name string
	Open func(t *testing.T) *chsql.Store
}

// engines are the real engines the write-path tests run on: chDB in
// process and Debian's ClickHouse server (18.16, which has no
// insert_deduplication_token: its dedup runs through the batches table).
func engines() []Engine {
	return []Engine{
		{"embedded", embeddedStore},
		{"clickhouse", func(t *testing.T) *chsql.Store {
			srv := clickhousetest.Start(t)
			cfg := clickhouse.DefaultConfig()
			cfg.DSN = srv.DSN(fmt.Sprintf("durable_%d", time.Now().UnixNano()))
			st, err := clickhouse.Open(context.Background(), cfg)
			require.NoError(t, err)
			t.Cleanup(func() { st.Close() })
			return st
		}},
	}
}

func execSQL(t *testing.T, st *chsql.Store, stmt string) {
	t.Helper()
	require.NoError(t, st.Conn().Exec(context.Background(), stmt, nil), stmt)
}

// TestRecreatedLogStoresEverything deletes the log directory between two
// runs, as a lost disk or an operator's cleanup does. The new log starts
// at the same positions as the old one did; its batches must not carry the
// old batches' dedup tokens, or the store discards them as duplicates.
func TestRecreatedLogStoresEverything(t *testing.T) {
	for _, eng := range engines() {
		t.Run(eng.Name, func(t *testing.T) {
			st := eng.Open(t)
			dir := filepath.Join(t.TempDir(), "wal")
			for run := range 2 {
				require.NoError(t, os.RemoveAll(dir))
				d, err := OpenLog(testConfig(dir), Settings{Store: st})
				require.NoError(t, err)
				require.Equal(t, wal.Position{Segment: 1}, d.WAL().First(), "a new log starts at the beginning")
				// Other spans of the same size in one request: the batch
				// covers the same positions in both logs.
				spans := storetest.SpanBatch(11, 400)
				for i := range spans {
					spans[i].TraceID[1] += byte(run)
					spans[i].SpanID[1] += byte(run)
				}
				require.NoError(t, d.Commit(context.Background(), spans))
				want := uint64(400 * (run + 1))
				waitFor(t, "stored", func() bool { return d.Counters().Spans == 400 })
				require.NoError(t, d.Shutdown(context.Background()))
				require.Equal(t, want, rows(t, st), "run %d: every acknowledged span stored", run+1)
			}
		})
	}
}

// TestRefusingStoreStalls takes the spans table away (UNKNOWN_TABLE: the
// store's state, not the spans'): nothing may go to the dead letter, the
// drain reports a stall once stall_after passed, and once the table is
// back everything is stored.
func TestRefusingStoreStalls(t *testing.T) {
	for _, eng := range engines() {
		t.Run(eng.Name, func(t *testing.T) {
			st := eng.Open(t)
			db := st.Database()
			execSQL(t, st, "RENAME TABLE "+db+".spans TO "+db+".spans_away")
			cfg := testConfig(t.TempDir())
			cfg.WAL.StallAfter = 300 * time.Millisecond
			cfg.MaxBackoff = 200 * time.Millisecond
			d, err := OpenLog(cfg, Settings{Store: st})
			require.NoError(t, err)
			require.NoError(t, d.Stalled())
			commitAll(t, d, spanBatches(31, 2, 100))
			waitFor(t, "a stall reported", func() bool { return d.Stalled() != nil })
			require.ErrorContains(t, d.Stalled(), "failing to store one batch")
			require.Zero(t, d.Counters().DeadLetter, "a store that refuses everything empties nothing into the dead letter")

			execSQL(t, st, "RENAME TABLE "+db+".spans_away TO "+db+".spans")
			waitFor(t, "stored", func() bool { return d.Counters().Spans == 200 })
			require.NoError(t, d.Stalled())
			require.NoError(t, d.Shutdown(context.Background()))
			require.EqualValues(t, 200, rows(t, st))
		})
	}
}

func TestClassify(t *testing.T) {
	for _, tt := range []struct {
		err  string
		want string
	}{
		{"write spans: Code: 252. DB::Exception: Too many partitions for single INSERT block (more than 100)", classRefused},
		{"write spans: code: 252, message: Too many parts (300). Merges are processing significantly slower than inserts", classStore},
		{"code: 60, message: Table budgetd.spans doesn't exist", classStore},
		{"Code: 395. DB::Exception: Value passed to 'throwIf' function is non-zero", classRefused},
		{"Code: 241. DB::Exception: Memory limit (total) exceeded", classRefused},
		{"encode column attr_values: unexpected type", classRefused},
	} {
		require.Equal(t, tt.want, classify(fmt.Errorf("%s", tt.err)), tt.err)
	}
	require.Equal(t, classTimeout, classify(fmt.Errorf("write: %w", context.DeadlineExceeded)))
	require.Equal(t, classStore, classify(fmt.Errorf("write hops: %w: Code: 62. DB::Exception: Syntax error",
		store.ErrPartlyWritten)), "a batch written in part is retried whole, never split")
}

// TestReplayLeavesOutWhatLanded replays a batch whose spans are in the
// store but whose token is not: a process killed between the insert and
// recording its token (servers without insert_deduplication_token record
// tokens in the batches table after the batch, and that the batch was
// attempted before it). The replay stores nothing twice, and the analysis
// still gets the whole batch.
func TestReplayLeavesOutWhatLanded(t *testing.T) {
	for _, eng := range engines() {
		t.Run(eng.Name, func(t *testing.T) {
			st := eng.Open(t)
			dir := t.TempDir()
			d, err := OpenLog(testConfig(dir), Settings{Store: st})
			require.NoError(t, err)
			start := d.WAL().First()
			require.NoError(t, d.Commit(context.Background(), storetest.SpanBatch(51, 300)))
			waitFor(t, "stored", func() bool { return d.Counters().Spans == 300 })
			end := d.WAL().Committed()
			require.NoError(t, d.Shutdown(context.Background()))

			// Every record but the attempts': what the kill leaves.
			db := st.Database()
			execSQL(t, st, "CREATE TABLE "+db+".attempts AS "+db+".batches")
			execSQL(t, st, "INSERT INTO "+db+".attempts SELECT * FROM "+db+".batches WHERE tbl = 'spans attempt'")
			execSQL(t, st, "TRUNCATE TABLE "+db+".batches")
			execSQL(t, st, "INSERT INTO "+db+".batches SELECT * FROM "+db+".attempts")
			require.NoError(t, saveCheckpoint(dir, checkpoint{Log: d.id, Acked: start, Pending: &end}))
			sink := &recordingSink{}
			d2, err := OpenLog(testConfig(dir), Settings{Store: st, Sink: sink})
			require.NoError(t, err)
			waitFor(t, "the pending batch replayed", func() bool { return d2.Counters().Batches == 1 })
			require.NoError(t, d2.Shutdown(context.Background()))
			require.EqualValues(t, 300, rows(t, st), "what landed is not written again")
			require.Equal(t, 300, sink.count(), "the analysis gets the replayed batch whole")
		})
	}
}

// TestDrainBatchBoundedInBytes checks that a drain batch stops at
// wal.batch_bytes of records: with a bound below one record, every record
// is a batch of its own.
func TestDrainBatchBoundedInBytes(t *testing.T) {
	st := embeddedStore(t)
	cfg := testConfig(t.TempDir())
	cfg.WAL.BatchBytes = 1
	cfg.WAL.FlushInterval = time.Second // without the byte bound, one batch
	d, err := OpenLog(cfg, Settings{Store: st})
	require.NoError(t, err)
	for _, b := range spanBatches(71, 5, 20) {
		require.NoError(t, d.Commit(context.Background(), b))
	}
	waitFor(t, "stored", func() bool { return d.Counters().Spans == 100 })
	require.NoError(t, d.Shutdown(context.Background()))
	require.EqualValues(t, 5, d.Counters().Batches)
}

// TestDrainBatchBoundedDecoded checks that wal.batch_bytes bounds a batch
// decoded, not its records: spans of 200 empty attributes take about ten
// times their records decoded, so a bound of three records' bytes still
// puts each record in a batch of its own.
func TestDrainBatchBoundedDecoded(t *testing.T) {
	batches := spanBatches(72, 5, 20)
	for _, b := range batches {
		for i := range b {
			for a := range 200 {
				b[i].Attrs = append(b[i].Attrs, schema.Attr{Key: "k" + strconv.Itoa(a), Type: schema.AttrEmpty})
			}
		}
	}
	recordBytes := len(record.AppendSpans(nil, batches[0]))
	st := embeddedStore(t)
	cfg := testConfig(t.TempDir())
	cfg.WAL.BatchBytes = 3 * recordBytes
	cfg.WAL.FlushInterval = time.Second // without the byte bound, one batch
	d, err := OpenLog(cfg, Settings{Store: st})
	require.NoError(t, err)
	for _, b := range batches {
		require.NoError(t, d.Commit(context.Background(), b))
	}
	waitFor(t, "stored", func() bool { return d.Counters().Spans == 100 })
	require.NoError(t, d.Shutdown(context.Background()))
	require.EqualValues(t, 5, d.Counters().Batches)
}
