package durable_test

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/durable"
	"github.com/budgetd/budgetd/ingest"
	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/store/storetest"
)

// TestPoisonSpanDeadLettered makes the engine really refuse one span: a
// materialized column that throws for it, evaluated by the engine at
// insert. The drain splits the batch until the span is alone, stores the
// rest, moves the span to a dead-letter file that `budgetd analyze` reads
// back as the span it was, and goes on with the next batch.
func TestPoisonSpanDeadLettered(t *testing.T) {
	for _, eng := range durable.TestEngines() {
		t.Run(eng.Name, func(t *testing.T) {
			st := eng.Open(t)
			durable.ExecSQL(t, st, "ALTER TABLE "+st.Database()+".spans ADD COLUMN poison UInt8 MATERIALIZED throwIf(name = 'poison')")
			spans := storetest.SpanBatch(21, 101)
			spans[37].Name = "poison"
			cfg := durable.TestConfig(t.TempDir())
			cfg.WAL.FlushInterval = time.Second // one batch: the poison span among 100 good ones
			d, err := durable.OpenLog(cfg, durable.Settings{Store: st})
			require.NoError(t, err)
			require.NoError(t, d.Commit(context.Background(), spans))
			durable.WaitFor(t, "the batch written", func() bool { return d.Counters().Batches == 1 })
			require.EqualValues(t, 100, d.Counters().Spans)
			require.EqualValues(t, 1, d.Counters().DeadLetter)
			require.EqualValues(t, 100, durable.SpanRows(t, st), "the rest of the batch is stored")

			next := storetest.SpanBatch(22, 50)
			require.NoError(t, d.Commit(context.Background(), next))
			durable.WaitFor(t, "the next batch", func() bool { return d.Counters().Spans == 150 })
			require.NoError(t, d.Shutdown(context.Background()))
			require.EqualValues(t, 150, durable.SpanRows(t, st), "the drain goes on")

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
