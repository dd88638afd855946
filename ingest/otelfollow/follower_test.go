package otelfollow

import (
	"context"
	"errors"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/goleak"

	"github.com/budgetd/budgetd/analyze"
	"github.com/budgetd/budgetd/durable"
	"github.com/budgetd/budgetd/fixtures/fixturestest"
	"github.com/budgetd/budgetd/ingest"
	"github.com/budgetd/budgetd/pipeline"
	"github.com/budgetd/budgetd/problems"
	"github.com/budgetd/budgetd/store"
	"github.com/budgetd/budgetd/store/chsql"
	"github.com/budgetd/budgetd/store/clickhouse"
	"github.com/budgetd/budgetd/store/clickhouse/clickhousetest"
	"github.com/budgetd/budgetd/store/embedded"
	"github.com/budgetd/budgetd/store/embedded/embeddedtest"
	"github.com/budgetd/budgetd/store/oteltraces/oteltracestest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { embeddedtest.Cleanup() }))
}

// env is budgetd's store and write-ahead log directory, and the exporter's
// table beside them on the same chDB engine, for one test. start runs the
// write path, the analysis and a follower on them, as serve wires them;
// stop ends them, and a second start is a restart on the same data.
type env struct {
	t      *testing.T
	st     *chsql.Store
	src    chsql.Conn // where the exporter's table is: chDB
	walDir string
	mode   string // the write path's mode: durable.ModeWAL unless set
	db     string // the exporter's database
	cfg    Config

	// saves, when set, stands between the follower and the store's
	// SaveFollowPosition.
	saves *failingSaves

	mu  sync.Mutex
	now time.Time

	// Set by start.
	reg *prometheus.Registry
	dur durable.Durability
	wal *durable.Durable // dur in mode wal, else nil
	pl  *pipeline.Pipeline
	f   *Follower
}

func newEnv(t *testing.T) *env {
	st := embeddedtest.Open(t, "follow")
	return newEnvOn(t, st, st.Conn())
}

// newEnvOn is an env whose budgetd store is st, and whose exporter table
// is on src, a connection to the chDB engine of embeddedtest.DataDir.
func newEnvOn(t *testing.T, st *chsql.Store, src chsql.Conn) *env {
	e := &env{t: t, st: st, src: src, walDir: t.TempDir(), mode: durable.ModeWAL, db: "otel_" + st.Database()}
	ctx := context.Background()
	require.NoError(t, oteltracestest.Create(ctx, src, oteltracestest.Layouts()[0], e.db, "otel_traces"))
	t.Cleanup(func() { _ = src.Exec(context.Background(), "DROP DATABASE IF EXISTS "+e.db, nil) })
	e.cfg = DefaultConfig()
	e.cfg.Source, e.cfg.Table = embeddedtest.DataDir(t), e.db+".otel_traces"
	e.cfg.Settle, e.cfg.Since = 5*time.Second, 24*time.Hour
	return e
}

func (e *env) clock() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.now
}

func (e *env) setClock(now time.Time) {
	e.mu.Lock()
	e.now = now
	e.mu.Unlock()
}

// write inserts td into the exporter's table as the exporter does.
func (e *env) write(td ptrace.Traces) {
	e.t.Helper()
	require.NoError(e.t, oteltracestest.Write(context.Background(), e.src, oteltracestest.Layouts()[0], e.db, "otel_traces", td))
}

func (e *env) start() {
	t := e.t
	t.Helper()
	e.reg = prometheus.NewRegistry()
	var err error
	// Every finding is stored in full, so the stored ones can be compared
	// with the golden files.
	pcfg := problems.DefaultConfig()
	pcfg.ExamplesPerInterval = 1_000_000
	e.pl, err = pipeline.New(pipeline.DefaultConfig(), pipeline.Settings{Store: e.st, Analyzer: analyze.New(analyze.DefaultConfig()),
		Registerer: e.reg, Problems: &pcfg})
	require.NoError(t, err)
	dcfg := durable.DefaultConfig()
	dcfg.Mode = e.mode
	dcfg.WAL.Dir, dcfg.DeadLetterDir = e.walDir, t.TempDir()
	dcfg.WAL.FlushInterval = 10 * time.Millisecond
	e.dur, err = durable.Open(dcfg, durable.Settings{Store: e.st, Sink: e.pl, Registerer: e.reg})
	require.NoError(t, err)
	e.wal, _ = e.dur.(*durable.Durable)
	var st Store = e.st
	if e.saves != nil {
		st = e.saves
	}
	e.f, err = New(e.cfg, Settings{Durability: e.dur, Store: st, Limits: ingest.DefaultLimits(), Registerer: e.reg, Now: e.clock})
	require.NoError(t, err)
}

func (e *env) stop() {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(e.t, e.f.Shutdown(ctx))
	require.NoError(e.t, e.dur.Shutdown(ctx))
	require.NoError(e.t, e.pl.Shutdown(ctx))
}

// poll takes one step at the clock's time and waits until the write path
// has stored what it committed and the analysis has written its results.
func (e *env) poll() PollResult {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stored := func() uint64 { return 0 } // mode batch: a commit returns once stored and analysed
	if e.wal != nil {
		stored = func() uint64 { return e.wal.Counters().Spans }
	}
	before := stored()
	res, err := e.f.Poll(ctx)
	require.NoError(e.t, err)
	if e.wal != nil {
		require.Eventually(e.t, func() bool { return stored() >= before+uint64(res.Spans) }, time.Minute, 10*time.Millisecond,
			"the write path stores the committed spans")
	}
	require.NoError(e.t, e.pl.Flush(ctx))
	return res
}

// findingIDs are the stored trace findings' ids, sorted.
func (e *env) findingIDs() []string {
	e.t.Helper()
	page, err := e.st.Findings(context.Background(), store.FindingQuery{Limit: store.MaxPageSize})
	require.NoError(e.t, err)
	return fixturestest.TraceFindingIDs(page.Findings)
}

func (e *env) spanRows() uint64 {
	e.t.Helper()
	n, err := e.st.CountRows(context.Background(), "spans")
	require.NoError(e.t, err)
	return n
}

// metric returns the value of an unlabelled counter or gauge of the
// current start.
func (e *env) metric(name string) float64 {
	e.t.Helper()
	mfs, err := e.reg.Gather()
	require.NoError(e.t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	e.t.Fatalf("no metric %s", name)
	return 0
}

func union(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	sort.Strings(out)
	return out
}

// TestFollow follows the exporter's table through batches written over
// time, a restart and a late span, and checks that budgetd stores and
// analyses each trace once, with the findings `budgetd analyze` gives for
// the same fixtures.
func TestFollow(t *testing.T) {
	for _, mode := range []string{durable.ModeWAL, durable.ModeBatch} {
		t.Run(mode, func(t *testing.T) {
			e := newEnv(t)
			e.mode = mode
			follow(t, e)
		})
	}
}

// TestFollowIntoClickHouseServer is TestFollow with budgetd's store on a
// ClickHouse 18.16 server (its positions, spans and findings there) and
// the exporter's table in chDB: 18.16 cannot hold the exporter's table
// (Map needs 21.1, DateTime64 20.1), but budgetd's own tables must work on
// it.
func TestFollowIntoClickHouseServer(t *testing.T) {
	srv := clickhousetest.Start(t)
	cfg := clickhouse.DefaultConfig()
	cfg.DSN = srv.DSN("follow")
	st, err := clickhouse.Open(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	src, err := embedded.Connect(embeddedtest.DataDir(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = src.Close() })
	follow(t, newEnvOn(t, st, src))
}

func follow(t *testing.T, e *env) {
	base := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	// Each batch is a fixture moved to end at a time of its own, an hour
	// after the previous one.
	batch := func(name string, hour int) (ptrace.Traces, time.Time) {
		first := fixturestest.Moved(t, name, 0)
		td := fixturestest.Moved(t, name, base.Add(time.Duration(hour)*time.Hour).Sub(fixturestest.End(first)))
		return td, fixturestest.End(td)
	}
	a, aEnd := batch("seed000_independent_timeouts", 0)
	b, bEnd := batch("retry_amplification_positive", 1)
	c, cEnd := batch("expired_on_arrival_positive", 2)

	e.start()
	e.write(a)
	// Before the settle window has passed, nothing is due.
	e.setClock(aEnd.Add(e.cfg.Settle - time.Millisecond))
	require.Equal(t, PollResult{}, e.poll())
	require.Empty(t, e.findingIDs())

	e.setClock(aEnd.Add(e.cfg.Settle))
	res := e.poll()
	require.Equal(t, a.SpanCount(), res.Spans)
	require.Positive(t, res.Traces)
	require.Equal(t, fixturestest.GoldenIDs(t, "seed000_independent_timeouts"), e.findingIDs(),
		"the followed spans are analysed as `budgetd analyze` analyses the fixture")
	analysed := e.metric("budgetd_analysis_traces_total")
	require.EqualValues(t, res.Traces, analysed)

	t.Run("rows written later are picked up", func(t *testing.T) {
		e.write(b)
		e.setClock(bEnd.Add(e.cfg.Settle))
		res := e.poll()
		require.Equal(t, b.SpanCount(), res.Spans)
		require.Equal(t, union(fixturestest.GoldenIDs(t, "seed000_independent_timeouts"), fixturestest.GoldenIDs(t, "retry_amplification_positive")),
			e.findingIDs())
		require.Equal(t, analysed+float64(res.Traces), e.metric("budgetd_analysis_traces_total"))
		require.InDelta(t, e.cfg.Settle.Seconds(), e.metric("budgetd_follow_lag_seconds"), 1e-9)
	})

	t.Run("a restart resumes from the stored position", func(t *testing.T) {
		stored, findings := e.spanRows(), e.findingIDs()
		e.stop()
		e.start()
		res := e.poll()
		require.Equal(t, PollResult{}, res, "nothing is taken again")
		require.Zero(t, e.metric("budgetd_analysis_traces_total"))
		require.Equal(t, stored, e.spanRows())
		require.Equal(t, findings, e.findingIDs())

		e.write(c)
		e.setClock(cEnd.Add(e.cfg.Settle))
		res = e.poll()
		require.Equal(t, c.SpanCount(), res.Spans)
		require.Equal(t, float64(res.Traces), e.metric("budgetd_analysis_traces_total"))
		require.Equal(t, stored+uint64(c.SpanCount()), e.spanRows())
		require.Equal(t, union(findings, fixturestest.GoldenIDs(t, "expired_on_arrival_positive")), e.findingIDs())
	})

	t.Run("a late span re-opens its trace", func(t *testing.T) {
		// The orphaned server span arrives after the rest of its trace
		// was analysed, and ends after it.
		const name = "orphaned_work_positive"
		td, end := batch(name, 3)
		early, late := splitLate(td)
		require.Positive(t, late.SpanCount())
		before, findings := e.spanRows(), e.findingIDs()
		e.write(early)
		e.setClock(fixturestest.End(early).Add(e.cfg.Settle))
		res := e.poll()
		require.Equal(t, early.SpanCount(), res.Spans)
		require.Equal(t, findings, e.findingIDs(), "without the late span there is no orphaned work")
		traces := e.metric("budgetd_analysis_traces_total")

		e.write(late)
		e.setClock(end.Add(e.cfg.Settle))
		res = e.poll()
		require.Equal(t, PollResult{Traces: 1, Spans: late.SpanCount(), Stored: early.SpanCount()}, res,
			"the trace is read whole again; only the late span is committed")
		require.Equal(t, union(findings, fixturestest.GoldenIDs(t, name)), e.findingIDs())
		require.Equal(t, traces+1, e.metric("budgetd_analysis_traces_total"))
		require.EqualValues(t, 1, e.metric("budgetd_analysis_reopened_traces_total"))
		require.Equal(t, before+uint64(td.SpanCount()), e.spanRows(), "no span is stored twice")
	})
	e.stop()
}

// splitLate moves the server spans that have a parent (the orphaned work
// of orphaned_work_positive) out of td, into late.
func splitLate(td ptrace.Traces) (early, late ptrace.Traces) {
	early, late = ptrace.NewTraces(), ptrace.NewTraces()
	td.CopyTo(early)
	td.CopyTo(late)
	for _, out := range []struct {
		td   ptrace.Traces
		keep bool
	}{{early, false}, {late, true}} {
		for _, rs := range out.td.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				ss.Spans().RemoveIf(func(sp ptrace.Span) bool {
					isLate := sp.Kind() == ptrace.SpanKindServer && !sp.ParentSpanID().IsEmpty()
					return isLate != out.keep
				})
			}
		}
	}
	return early, late
}

// TestFollowBoundsPolls lets each poll read at most a few traces' spans:
// the window is taken over several polls, whole traces at a time, each
// trace once.
func TestFollowBoundsPolls(t *testing.T) {
	e := newEnv(t)
	const name = "seed004_gateway_retry" // 20 traces
	td := fixturestest.Moved(t, name, 0)
	perTrace := td.SpanCount() / 20
	e.cfg.MaxSpansPerPoll = 3*perTrace + 1
	e.write(td)
	e.setClock(fixturestest.End(td).Add(e.cfg.Settle))
	e.start()
	defer e.stop()
	traces, spans, polls := 0, 0, 0
	for {
		res := e.poll()
		polls++
		require.LessOrEqual(t, res.Spans, e.cfg.MaxSpansPerPoll)
		traces, spans = traces+res.Traces, spans+res.Spans
		if !res.More {
			break
		}
		require.Less(t, polls, 20, "every poll takes at least one trace")
	}
	require.Equal(t, 20, traces)
	require.Equal(t, td.SpanCount(), spans)
	require.GreaterOrEqual(t, polls, 7)
	require.EqualValues(t, td.SpanCount(), e.spanRows())
	require.Equal(t, fixturestest.GoldenIDs(t, name), e.findingIDs())
	require.EqualValues(t, 20, e.metric("budgetd_analysis_traces_total"))
	require.Equal(t, float64(polls-1), e.metric("budgetd_follow_full_polls_total"))
}

// failingSaves fails SaveFollowPosition while fail is set: the process
// dying between committing a poll's spans and storing its position, which
// a real engine cannot be made to do on cue.
type failingSaves struct {
	*chsql.Store
	fail atomic.Bool
}

func (s *failingSaves) SaveFollowPosition(ctx context.Context, source string, positionNs uint64) error {
	if s.fail.Load() {
		return errors.New("the process died here")
	}
	return s.Store.SaveFollowPosition(ctx, source, positionNs)
}

// TestFollowCommittedButNotSaved: spans committed by a poll whose position
// was not stored are taken again at the next start, and neither stored nor
// analysed twice.
func TestFollowCommittedButNotSaved(t *testing.T) {
	e := newEnv(t)
	e.saves = &failingSaves{Store: e.st}
	e.saves.fail.Store(true)
	const name = "seed000_independent_timeouts"
	td := fixturestest.Moved(t, name, 0)
	e.write(td)
	e.setClock(fixturestest.End(td).Add(e.cfg.Settle))
	e.start()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := e.f.Poll(ctx)
	require.ErrorContains(t, err, "save position: the process died here")
	require.Eventually(t, func() bool { return e.wal.Counters().Spans == uint64(td.SpanCount()) }, time.Minute, 10*time.Millisecond)
	require.NoError(t, e.pl.Flush(ctx))
	require.Equal(t, fixturestest.GoldenIDs(t, name), e.findingIDs())
	analysed := e.metric("budgetd_analysis_traces_total")
	require.Positive(t, analysed)
	e.stop()

	e.saves.fail.Store(false)
	e.start()
	defer e.stop()
	res := e.poll()
	require.Equal(t, PollResult{Traces: int(analysed), Stored: td.SpanCount()}, res, "taken again, committed not again")
	require.Zero(t, e.metric("budgetd_analysis_traces_total"))
	require.EqualValues(t, td.SpanCount(), e.spanRows())
	require.Equal(t, fixturestest.GoldenIDs(t, name), e.findingIDs())
}
