package durable

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/ingest"
	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/store/chsql"
	"github.com/budgetd/budgetd/store/clickhouse"
	"github.com/budgetd/budgetd/store/clickhouse/clickhousetest"
	"github.com/budgetd/budgetd/store/storetest"
	"github.com/budgetd/budgetd/wal"
)

// engines are the real engines the write-path tests run on: chDB in
// process and Debian's ClickHouse server (18.16, which has no
// insert_deduplication_token: its dedup runs through the batches table).
func engines() []struct {
	name string
	open func(t *testing.T) *chsql.Store
} {
	return []struct {
		name string
		open func(t *testing.T) *chsql.Store
	}{
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

func exec(t *testing.T, st *chsql.Store, stmt string) {
	t.Helper()
	require.NoError(t, st.Conn().Exec(context.Background(), stmt, nil), stmt)
}

// TestRecreatedLogStoresEverything deletes the log directory between two
// runs, as a lost disk or an operator's cleanup does. The new log starts
// at the same positions as the old one did; its batches must not carry the
// old batches' dedup tokens, or the store discards them as duplicates.
func TestRecreatedLogStoresEverything(t *testing.T) {
	for _, eng := range engines() {
		t.Run(eng.name, func(t *testing.T) {
			st := eng.open(t)
			dir := filepath.Join(t.TempDir(), "wal")
			for run := range 2 {
				require.NoError(t, os.RemoveAll(dir))
				d, err := Open(testConfig(dir), Settings{Store: st})
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

// TestPoisonSpanDeadLettered makes the engine really refuse one span: a
// materialized column that throws for it, evaluated by the engine at
// insert. The drain splits the batch until the span is alone, stores the
// rest, moves the span to a dead-letter file that `budgetd analyze` reads
// back as the span it was, and goes on with the next batch.
func TestPoisonSpanDeadLettered(t *testing.T) {
	for _, eng := range engines() {
		t.Run(eng.name, func(t *testing.T) {
			st := eng.open(t)
			exec(t, st, "ALTER TABLE "+st.Database()+".spans ADD COLUMN poison UInt8 MATERIALIZED throwIf(name = 'poison')")
			spans := storetest.SpanBatch(21, 101)
			spans[37].Name = "poison"
			cfg := testConfig(t.TempDir())
			cfg.FlushInterval = time.Second // one batch: the poison span among 100 good ones
			d, err := Open(cfg, Settings{Store: st})
			require.NoError(t, err)
			require.NoError(t, d.Commit(context.Background(), spans))
			waitFor(t, "the batch written", func() bool { return d.Counters().Batches == 1 })
			require.EqualValues(t, 100, d.Counters().Spans)
			require.EqualValues(t, 1, d.Counters().DeadLetter)
			require.EqualValues(t, 100, rows(t, st), "the rest of the batch is stored")

			next := storetest.SpanBatch(22, 50)
			require.NoError(t, d.Commit(context.Background(), next))
			waitFor(t, "the next batch", func() bool { return d.Counters().Spans == 150 })
			require.NoError(t, d.Shutdown(context.Background()))
			require.EqualValues(t, 150, rows(t, st), "the drain goes on")

			files, err := filepath.Glob(filepath.Join(cfg.DeadLetterDir, "spans-*.jsonl"))
			require.NoError(t, err)
			require.Len(t, files, 1)
			f, err := os.Open(files[0])
			require.NoError(t, err)
			defer f.Close()
			conv, err := ingest.NewConverter(ingest.DefaultLimits())
			require.NoError(t, err)
			res, err := ingest.ReadSpans(bufio.NewReader(f), conv)
			require.NoError(t, err)
			require.Equal(t, []schema.Span{spans[37]}, res.Spans, "the dead letter holds the span as it was acknowledged")
		})
	}
}

// TestRefusingStoreStalls takes the spans table away (UNKNOWN_TABLE: the
// store's state, not the spans'): nothing may go to the dead letter, the
// drain reports a stall once stall_after passed, and once the table is
// back everything is stored.
func TestRefusingStoreStalls(t *testing.T) {
	for _, eng := range engines() {
		t.Run(eng.name, func(t *testing.T) {
			st := eng.open(t)
			db := st.Database()
			exec(t, st, "RENAME TABLE "+db+".spans TO "+db+".spans_away")
			cfg := testConfig(t.TempDir())
			cfg.StallAfter = 300 * time.Millisecond
			cfg.MaxBackoff = 200 * time.Millisecond
			d, err := Open(cfg, Settings{Store: st})
			require.NoError(t, err)
			require.NoError(t, d.Stalled())
			commitAll(t, d, spanBatches(31, 2, 100))
			waitFor(t, "a stall reported", func() bool { return d.Stalled() != nil })
			require.ErrorContains(t, d.Stalled(), "failing to store one batch")
			require.Zero(t, d.Counters().DeadLetter, "a store that refuses everything empties nothing into the dead letter")

			exec(t, st, "RENAME TABLE "+db+".spans_away TO "+db+".spans")
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
}
