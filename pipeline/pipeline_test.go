package pipeline

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/budgetd/budgetd/analyze"
	"github.com/budgetd/budgetd/ingest"
	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/store"
	"github.com/budgetd/budgetd/store/chsql"
	"github.com/budgetd/budgetd/store/embedded"
)

// dataDir is shared by the package's tests: chDB runs one engine per
// process, and each test process gets its own directory.
var dataDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "budgetd-pipeline-chdb-")
	if err != nil {
		panic(err)
	}
	dataDir = dir
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { os.RemoveAll(dir) }))
}

func openStore(t *testing.T, db string) *chsql.Store {
	t.Helper()
	ctx := context.Background()
	s, err := embedded.Open(ctx, embedded.Config{DataDir: dataDir, Database: db})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = s.Conn().Exec(ctx, "DROP DATABASE IF EXISTS "+db, nil)
		_ = s.Close()
	})
	return s
}

func fixtureSpans(t *testing.T, name string) []schema.Span {
	t.Helper()
	c, err := ingest.NewConverter(ingest.DefaultLimits())
	require.NoError(t, err)
	spans, err := ingest.ReadSpansFile(filepath.Join("..", "fixtures", name+".json"), c)
	require.NoError(t, err)
	return spans
}

func goldenIDs(t *testing.T, name string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "fixtures", name+".golden.json"))
	require.NoError(t, err)
	var report analyze.Report
	require.NoError(t, json.Unmarshal(data, &report))
	var ids []string
	for _, f := range report.Findings {
		if f.Kind != schema.KindLatencyInversion {
			ids = append(ids, f.ID)
		}
	}
	sort.Strings(ids)
	return ids
}

func storedIDs(t *testing.T, s store.Store) []string {
	t.Helper()
	page, err := s.Findings(context.Background(), store.FindingQuery{Limit: store.MaxPageSize})
	require.NoError(t, err)
	var ids []string
	for _, f := range page.Findings {
		ids = append(ids, f.ID)
	}
	sort.Strings(ids)
	return ids
}

// TestStreamingMatchesOffline feeds a fixture through the streaming path and
// expects the per-trace findings the offline golden file has.
func TestStreamingMatchesOffline(t *testing.T) {
	s := openStore(t, "pipeline_stream")
	reg := prometheus.NewRegistry()
	clock := time.Unix(1_800_000_000, 0)
	p, err := New(DefaultConfig(), Settings{Store: s, Analyzer: analyze.New(analyze.DefaultConfig()), Registerer: reg,
		Now: func() time.Time { return clock }})
	require.NoError(t, err)

	spans := fixtureSpans(t, "seed000_independent_timeouts")
	require.NoError(t, s.WriteSpans(context.Background(), "in", spans))
	p.Spans(spans[:len(spans)/2])
	p.Spans(spans[len(spans)/2:])

	require.NoError(t, p.process(context.Background(), false))
	require.Empty(t, storedIDs(t, s), "nothing is due before the idle period")

	clock = clock.Add(DefaultConfig().Assembly.Idle)
	require.NoError(t, p.process(context.Background(), false))
	require.Equal(t, goldenIDs(t, "seed000_independent_timeouts"), storedIDs(t, s))
	require.EqualValues(t, len(spans), mustCount(t, s, "hops"), "one hop per span")
	require.Positive(t, testutil.ToFloat64(p.metrics.findings.WithLabelValues(string(schema.KindOrphanedWork), "critical")))
	require.InDelta(t, 30.03, testutil.ToFloat64(p.metrics.orphaned.WithLabelValues("gateway")), 0.001, "the gateway's 30030 ms after the client left")
	require.Equal(t, 1, testutil.CollectAndCount(p.metrics.amplified), "one amplification histogram")
}

func mustCount(t *testing.T, s *chsql.Store, table string) uint64 {
	t.Helper()
	n, err := s.CountRows(context.Background(), table)
	require.NoError(t, err)
	return n
}

// TestLateSpansReopen analyses a trace, then receives the rest of it late:
// the second analysis sees the whole trace, merged from the store.
func TestLateSpansReopen(t *testing.T) {
	s := openStore(t, "pipeline_reopen")
	p, err := New(DefaultConfig(), Settings{Store: s, Analyzer: analyze.New(analyze.DefaultConfig())})
	require.NoError(t, err)

	spans := fixtureSpans(t, "orphaned_work_positive")
	// The orphaned server span is the one that arrives late.
	var early, late []schema.Span
	for _, sp := range spans {
		if sp.Kind == schema.KindServer && sp.ParentSpanID != (schema.SpanID{}) {
			late = append(late, sp)
		} else {
			early = append(early, sp)
		}
	}
	require.NotEmpty(t, late)
	ctx := context.Background()
	require.NoError(t, s.WriteSpans(ctx, "early", early))
	p.Spans(early)
	require.NoError(t, p.Flush(ctx))
	require.Empty(t, storedIDs(t, s), "without the late span there is no orphaned work")

	require.NoError(t, s.WriteSpans(ctx, "late", late))
	p.Spans(late)
	require.NoError(t, p.Flush(ctx))
	require.Equal(t, goldenIDs(t, "orphaned_work_positive"), storedIDs(t, s))
	require.EqualValues(t, 1, p.counters().Reopened)

	// Both analyses wrote hops for the early spans; the pipeline recorded
	// the re-analysis, so the store counts the request once.
	tot, err := s.Totals(ctx, store.Window{})
	require.NoError(t, err)
	require.EqualValues(t, 1, tot.Requests)
}

// TestShutdownFlushes starts the worker and shuts it down with traces held:
// they are analysed and stored before Shutdown returns.
func TestShutdownFlushes(t *testing.T) {
	s := openStore(t, "pipeline_shutdown")
	p, err := New(DefaultConfig(), Settings{Store: s, Analyzer: analyze.New(analyze.DefaultConfig())})
	require.NoError(t, err)
	p.Start()
	spans := fixtureSpans(t, "timeout_inversion_positive")
	p.Spans(spans)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, p.Shutdown(ctx))
	require.Equal(t, goldenIDs(t, "timeout_inversion_positive"), storedIDs(t, s))
}

func TestConfigValidate(t *testing.T) {
	c := DefaultConfig()
	require.NoError(t, c.Validate())
	c.Tick, c.WriteAttempts = 0, 0
	err := c.Validate()
	require.ErrorContains(t, err, "analyze.tick must be > 0")
	require.ErrorContains(t, err, "analyze.write_attempts must be >= 1")
}

func TestLabelSetBoundsCardinality(t *testing.T) {
	l := newLabelSet(2)
	require.Equal(t, "a", l.label("a"))
	require.Equal(t, "b", l.label("b"))
	require.Equal(t, "_other", l.label("c"))
	require.Equal(t, "a", l.label("a"), "admitted values stay")
}
