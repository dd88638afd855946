package ingest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/budgetd/budgetd/durable"
	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/store"
	"github.com/budgetd/budgetd/store/chsql"
	"github.com/budgetd/budgetd/store/clickhouse"
	"github.com/budgetd/budgetd/store/clickhouse/clickhousetest"
	"github.com/budgetd/budgetd/store/embedded"
)

// chdb is the process's chDB engine: chDB runs one engine per process, so
// every embedded store in these tests shares it, each test in its own
// database. It starts with the first test that needs it (a fuzz worker
// never does) and stays up for the whole run, because starting and
// stopping it with each test's store would dominate the run time.
var chdb struct {
	once sync.Once
	dir  string
	conn *embedded.Conn
	err  error
}

// chdbDir starts the process's chDB engine if needed and returns its data
// directory.
func chdbDir(t testing.TB) string {
	t.Helper()
	chdb.once.Do(func() {
		if chdb.dir, chdb.err = os.MkdirTemp("", "budgetd-ingest-chdb-"); chdb.err != nil {
			return
		}
		chdb.conn, chdb.err = embedded.Connect(chdb.dir)
	})
	require.NoError(t, chdb.err, "start chdb")
	return chdb.dir
}

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	code := m.Run()
	if chdb.conn != nil {
		_ = chdb.conn.Close()
	}
	if chdb.dir != "" {
		_ = os.RemoveAll(chdb.dir)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			return 1
		}
	}
	return code
}

// testEngine is one store engine the server tests run on.
type testEngine struct {
	name string
	// start starts the engine for a test: nothing for the embedded one
	// (the process's chDB is already up), a ClickHouse server otherwise.
	start func(t *testing.T) engineInstance
}

// engineInstance is a started engine.
type engineInstance struct {
	// open opens a fresh database, closed when the test ends.
	open func(t *testing.T) *chsql.Store
}

// engines returns both store engines. Every server test runs on each: the
// acknowledgement is only as good as the engine's write.
func engines() []testEngine {
	return []testEngine{
		{name: "embedded", start: func(*testing.T) engineInstance {
			return engineInstance{open: func(t *testing.T) *chsql.Store { return openEmbedded(t) }}
		}},
		{name: "clickhouse", start: func(t *testing.T) engineInstance {
			srv := clickhousetest.Start(t)
			return engineInstance{open: func(t *testing.T) *chsql.Store { return openClickHouseOn(t, srv) }}
		}},
	}
}

var dbSeq atomic.Int64

var nonIdent = regexp.MustCompile(`[^A-Za-z0-9_]+`)

// dbName returns a database name unique in the process, readable in logs.
func dbName(t testing.TB) string {
	name := strings.ToLower(nonIdent.ReplaceAllString(t.Name(), "_"))
	name = fmt.Sprintf("t%d_%s", dbSeq.Add(1), name)
	if len(name) > 60 {
		name = name[:60]
	}
	return name
}

func openEmbedded(t testing.TB) *chsql.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := embedded.Open(ctx, embedded.Config{DataDir: chdbDir(t), Database: dbName(t)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// openClickHouse starts a ClickHouse server for the test and opens a store
// on it.
func openClickHouse(t *testing.T) (*chsql.Store, *clickhousetest.Server) {
	t.Helper()
	srv := clickhousetest.Start(t)
	return openClickHouseOn(t, srv), srv
}

// openClickHouseOn opens a fresh database on a running server.
func openClickHouseOn(t *testing.T, srv *clickhousetest.Server) *chsql.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := clickhouse.DefaultConfig()
	cfg.DSN = srv.DSN(dbName(t))
	cfg.DialTimeout = time.Second
	st, err := clickhouse.Open(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// testServer is a running Server on loopback ports.
type testServer struct {
	*Server
	grpcAddr string
	httpAddr string
	reg      *prometheus.Registry
}

// testConfig is DefaultConfig on free loopback ports with a short flush
// interval, so tests are not paced by batching, and without the span time
// window: hand-built test spans start a few microseconds after the epoch.
// TestSpanTimeWindow runs with the default window.
func testConfig() Config {
	cfg := DefaultConfig()
	cfg.GRPC.Endpoint = "127.0.0.1:0"
	cfg.HTTP.Endpoint = "127.0.0.1:0"
	cfg.SpanTimes = SpanTimeWindow{}
	return cfg
}

// testBatch is the write path of the ingest tests: the batch mode, so a
// request's answer says whether the store has its spans, with a short
// flush interval and the dead letter in a temporary directory.
func testBatch(t testing.TB) durable.Config {
	cfg := durable.DefaultConfig()
	cfg.Mode = durable.ModeBatch
	cfg.Batch.FlushInterval = 2 * time.Millisecond
	cfg.DeadLetterDir = t.TempDir()
	return cfg
}

// startServer starts a Server writing through testBatch to w, shut down
// (and checked to shut down cleanly) when the test ends.
func startServer(t testing.TB, w durable.SpanStore, cfg Config) *testServer {
	t.Helper()
	return startServerBatch(t, w, cfg, testBatch(t))
}

// startServerBatch is startServer with the write path's configuration.
func startServerBatch(t testing.TB, w durable.SpanStore, cfg Config, dcfg durable.Config) *testServer {
	t.Helper()
	reg := prometheus.NewRegistry()
	log := testLogger(t)
	b, err := durable.NewBatcher(dcfg, durable.Settings{Logger: log, Store: w, Registerer: reg})
	require.NoError(t, err)
	return startServerWith(t, cfg, Settings{Logger: log, Durability: b, Registerer: reg}, reg)
}

func startServerWith(t testing.TB, cfg Config, set Settings, reg *prometheus.Registry) *testServer {
	t.Helper()
	s, err := New(cfg, set)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, s.Start(ctx))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, s.Shutdown(ctx))
	})
	ts := &testServer{Server: s, reg: reg}
	if g, _ := s.Addrs(); g != nil {
		ts.grpcAddr = g.String()
	}
	if _, h := s.Addrs(); h != nil {
		ts.httpAddr = h.String()
	}
	return ts
}

// testLogger logs warnings and errors to the test's output.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// storedSpans returns every stored span (duplicates included) and the raw
// row count, for exactly-once checks.
func storedSpans(t testing.TB, st *chsql.Store) ([]schema.Span, uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	spans, err := st.Spans(ctx, store.Window{}, 10_000_000)
	require.NoError(t, err)
	n, err := st.CountRows(ctx, "spans")
	require.NoError(t, err)
	return spans, n
}

// countRows returns the raw number of stored span rows.
func countRows(t testing.TB, st *chsql.Store) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := st.CountRows(ctx, "spans")
	require.NoError(t, err)
	return n
}

// distinctSpans returns the number of distinct (trace, span) ids stored,
// and the raw row count: equal when every span was stored exactly once.
func distinctSpans(t testing.TB, st *chsql.Store) (distinct, rows uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := st.Conn().Query(ctx, "SELECT toUInt64(uniqExact(trace_id, span_id)), toUInt64(count()) FROM "+st.Database()+".spans", nil)
	require.NoError(t, err)
	defer r.Close()
	require.True(t, r.Next(), "no row: %v", r.Err())
	require.NoError(t, r.Scan(&distinct, &rows))
	return distinct, rows
}

// metricValue returns the value of the counter or gauge series name with
// exactly labels, failing the test when there is no such series.
func metricValue(t testing.TB, ts *testServer, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := ts.reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, lp := range m.GetLabel() {
				if labels[lp.GetName()] != lp.GetValue() {
					continue series
				}
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("no metric %s%v", name, labels)
	return 0
}
