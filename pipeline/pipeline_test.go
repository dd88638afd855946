package pipeline

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/budgetd/budgetd/analyze"
	"github.com/budgetd/budgetd/fixtures/fixturestest"
	"github.com/budgetd/budgetd/ingest"
	"github.com/budgetd/budgetd/problems"
	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/store"
	"github.com/budgetd/budgetd/store/chsql"
	"github.com/budgetd/budgetd/store/embedded/embeddedtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { embeddedtest.Cleanup() }))
}

func openStore(t *testing.T, db string) *chsql.Store { return embeddedtest.Open(t, db) }

func fixtureSpans(t *testing.T, name string) []schema.Span {
	t.Helper()
	c, err := ingest.NewConverter(ingest.DefaultLimits())
	require.NoError(t, err)
	spans, err := ingest.ReadSpansFile(filepath.Join("..", "fixtures", name+".json"), c)
	require.NoError(t, err)
	return spans
}

func goldenIDs(t *testing.T, name string) []string { return fixturestest.GoldenIDs(t, name) }

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
	// So do the paths, whose statistics the second analysis's hops
	// replaced the first's in.
	requests, err := s.PathRequests(ctx, store.Window{}, 0)
	require.NoError(t, err)
	require.NotEmpty(t, requests)
	for path, n := range requests {
		require.EqualValues(t, 1, n, path)
	}
}

// TestHopsOfWorkInsideAServiceAreNotStored: a span whose hop its parent's
// says all of gets no row (analyze.Thin), until its trace is re-analysed:
// then every span's hop is written again, so that no hop of the earlier
// analysis is the latest of its span.
func TestHopsOfWorkInsideAServiceAreNotStored(t *testing.T) {
	s := openStore(t, "pipeline_thin")
	p, err := New(DefaultConfig(), Settings{Store: s, Analyzer: analyze.New(analyze.DefaultConfig())})
	require.NoError(t, err)
	ctx := context.Background()
	at := uint64(time.Now().Add(-time.Minute).UnixNano())
	tid := schema.TraceID{0x7, 0x1}
	span := func(id, parent byte, name string, kind schema.SpanKind, start, end uint64, attrs ...schema.Attr) schema.Span {
		sp := schema.Span{TraceID: tid, SpanID: schema.SpanID{0x5, id}, Service: "shop", Name: name, Kind: kind,
			StartNs: at + start*1e6, EndNs: at + end*1e6, Attrs: attrs}
		if parent != 0 {
			sp.ParentSpanID = schema.SpanID{0x5, parent}
		}
		return sp
	}
	early := []schema.Span{
		span(1, 0, "POST /orders", schema.KindServer, 0, 100, schema.Double(schema.AttrRemainingMs, 500)),
		span(2, 1, "handle POST /orders", schema.KindInternal, 1, 99),
		span(3, 2, "price order", schema.KindInternal, 2, 10),
		span(4, 2, "INSERT orders", schema.KindClient, 11, 20, schema.Str("db.system.name", "postgresql")),
	}
	late := []schema.Span{span(5, 2, "render", schema.KindInternal, 21, 30)}

	require.NoError(t, s.WriteSpans(ctx, "early", early))
	p.Spans(early)
	require.NoError(t, p.Flush(ctx))
	require.EqualValues(t, 2, mustCount(t, s, "hops"), "the entry and the call; not the handler or its work")
	require.EqualValues(t, 2, testutil.ToFloat64(p.metrics.leftOut))

	require.NoError(t, s.WriteSpans(ctx, "late", late))
	p.Spans(late)
	require.NoError(t, p.Flush(ctx))
	require.EqualValues(t, 1, p.counters().Reopened)
	require.EqualValues(t, 2, testutil.ToFloat64(p.metrics.leftOut), "a re-analysis leaves nothing out")
	all := append(slices.Clone(early), late...)
	hops, err := s.TraceHops(ctx, tid, store.SpanWindow(all))
	require.NoError(t, err)
	require.Len(t, hops, len(all), "the re-analysis wrote every span's hop")
	want := analyze.New(analyze.DefaultConfig()).Trace(schema.NewTrace(all), time.Now()).Hops
	for _, w := range want {
		i := slices.IndexFunc(hops, func(h schema.Hop) bool { return h.SpanID == w.SpanID })
		require.GreaterOrEqual(t, i, 0)
		require.Equal(t, w.Path, hops[i].Path)
		require.Equal(t, w.RemainingMs, hops[i].RemainingMs, "span %s", w.Operation)
	}
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

// counterSum sums the samples of the counter family name whose kind label
// is kind, over every other label.
func counterSum(t *testing.T, reg *prometheus.Registry, name string, kind schema.Kind) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	var sum float64
	for _, mf := range families {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" && l.GetValue() == string(kind) {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}

// TestUnchangedEdgeVerdictNotRewritten evaluates the edges 26 times while
// one edge's latency_inversion holds on unchanged evidence: it is written
// and counted once. New evidence writes a new row of the same finding,
// which the metrics and the store's counts still count once.
func TestUnchangedEdgeVerdictNotRewritten(t *testing.T) {
	s := openStore(t, "pipeline_edge_verdicts")
	reg := prometheus.NewRegistry()
	spans := fixtureSpans(t, "latency_inversion_positive")
	// The fixture's calls start at 1740830000 s; the edge window (15 min)
	// must hold them.
	clock := time.Unix(0, int64(spans[0].StartNs)).Add(time.Minute)
	p, err := New(DefaultConfig(), Settings{Store: s, Analyzer: analyze.New(analyze.DefaultConfig()), Registerer: reg,
		Now: func() time.Time { return clock }})
	require.NoError(t, err)
	ctx := context.Background()
	p.Spans(spans)
	require.NoError(t, p.process(ctx, true))

	for range 26 {
		require.NoError(t, p.writeEdgeFindings(ctx))
		clock = clock.Add(10 * time.Second)
	}
	page, err := s.Findings(ctx, store.FindingQuery{Kind: schema.KindLatencyInversion})
	require.NoError(t, err)
	require.Len(t, page.Findings, 1, "the fixture's edge is inverted")
	first := page.Findings[0]
	require.EqualValues(t, 1, mustCount(t, s, "findings"), "an unchanged verdict is not written again")
	require.EqualValues(t, 1, counterSum(t, reg, "budgetd_findings_total", schema.KindLatencyInversion))
	require.EqualValues(t, 1, counterSum(t, reg, "budgetd_analysis_findings_total", schema.KindLatencyInversion))

	// One more call of the edge, as slow as the slowest: the evidence
	// changes, so the finding is written again, under the same id.
	more := fixtureSpans(t, "latency_inversion_positive")
	var trace []schema.Span
	for _, sp := range more {
		if sp.TraceID == more[len(more)-1].TraceID {
			sp.TraceID[1] = 0xee // a new trace with the same calls
			trace = append(trace, sp)
		}
	}
	p.Spans(trace)
	require.NoError(t, p.process(ctx, true))
	require.NoError(t, p.writeEdgeFindings(ctx))
	require.NoError(t, p.writeEdgeFindings(ctx))
	require.EqualValues(t, 2, mustCount(t, s, "findings"), "new evidence is one new row")
	page, err = s.Findings(ctx, store.FindingQuery{Kind: schema.KindLatencyInversion})
	require.NoError(t, err)
	require.Len(t, page.Findings, 1)
	require.Equal(t, first.ID, page.Findings[0].ID)
	require.Equal(t, first.Evidence["samples"]+1, page.Findings[0].Evidence["samples"])
	require.EqualValues(t, 1, counterSum(t, reg, "budgetd_findings_total", schema.KindLatencyInversion), "the same finding")
	tot, err := s.Totals(ctx, store.Window{})
	require.NoError(t, err)
	require.EqualValues(t, 1, tot.FindingsByKind[schema.KindLatencyInversion])
}

// TestReanalysisCountsOnlyNewFindings re-opens an analysed trace with a late
// copy of one of its spans: the re-analysis yields the same finding, which
// the metrics do not count again.
func TestReanalysisCountsOnlyNewFindings(t *testing.T) {
	s := openStore(t, "pipeline_reanalysis_metrics")
	reg := prometheus.NewRegistry()
	p, err := New(DefaultConfig(), Settings{Store: s, Analyzer: analyze.New(analyze.DefaultConfig()), Registerer: reg})
	require.NoError(t, err)
	ctx := context.Background()
	spans := fixtureSpans(t, "timeout_inversion_positive")
	require.NoError(t, s.WriteSpans(ctx, "first", spans))
	p.Spans(spans)
	require.NoError(t, p.Flush(ctx))
	want := goldenIDs(t, "timeout_inversion_positive")
	require.Equal(t, want, storedIDs(t, s))
	require.EqualValues(t, len(want), counterSum(t, reg, "budgetd_findings_total", schema.KindTimeoutInversion))

	// A sender's retry delivers a span again after the trace was judged.
	p.Spans(spans[:1])
	require.NoError(t, p.Flush(ctx))
	require.EqualValues(t, 1, p.counters().Reopened)
	require.Equal(t, want, storedIDs(t, s))
	require.EqualValues(t, len(want), counterSum(t, reg, "budgetd_findings_total", schema.KindTimeoutInversion), "the same findings")
	require.EqualValues(t, len(want), counterSum(t, reg, "budgetd_analysis_findings_total", schema.KindTimeoutInversion))
}

func TestEdgeVerdicts(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	const restate = 15 * time.Minute
	inversion := func(id string, samples float64) schema.Finding {
		return schema.Finding{ID: id, Kind: schema.KindLatencyInversion, Severity: schema.SeverityWarning, Path: "a:op > b:op",
			DetectedAt: t0, Evidence: map[string]float64{"timeout_ms": 300, "p99_ms": 400, "samples": samples}}
	}
	ids := func(fs []schema.Finding) []string {
		out := []string{}
		for _, f := range fs {
			out = append(out, f.ID)
		}
		return out
	}
	tests := []struct {
		name          string
		prev          []schema.Finding // stored at t0
		cur           []schema.Finding
		at            time.Duration // after t0
		started, want []string
	}{
		{"a new verdict starts and is written", nil, []schema.Finding{inversion("e1", 20)}, time.Minute, []string{"e1"}, []string{"e1"}},
		{"an unchanged verdict is neither", []schema.Finding{inversion("e1", 20)}, []schema.Finding{inversion("e1", 20)}, time.Minute, []string{}, []string{}},
		{"only the detection time differs", []schema.Finding{inversion("e1", 20)},
			[]schema.Finding{func() schema.Finding { f := inversion("e1", 20); f.DetectedAt = t0.Add(time.Hour); return f }()}, time.Minute, []string{}, []string{}},
		{"new evidence is written, not started", []schema.Finding{inversion("e1", 20)}, []schema.Finding{inversion("e1", 21)}, time.Minute, []string{}, []string{"e1"}},
		{"a new severity is written", []schema.Finding{inversion("e1", 20)},
			[]schema.Finding{func() schema.Finding { f := inversion("e1", 20); f.Severity = schema.SeverityCritical; return f }()}, time.Minute, []string{}, []string{"e1"}},
		{"unchanged for an edge window: restated", []schema.Finding{inversion("e1", 20)}, []schema.Finding{inversion("e1", 20)}, restate, []string{}, []string{"e1"}},
		{"a lapsed verdict is forgotten", []schema.Finding{inversion("e1", 20)}, []schema.Finding{inversion("e2", 20)}, time.Minute, []string{"e2"}, []string{"e2"}},
		{"one finding per id", nil, []schema.Finding{inversion("e1", 20), inversion("e1", 20)}, time.Minute, []string{"e1"}, []string{"e1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prev, _, _ := edgeVerdicts(nil).next(tt.prev, t0, restate)
			prev.stored(tt.prev, t0)
			next, started, write := prev.next(tt.cur, t0.Add(tt.at), restate)
			require.Equal(t, tt.started, ids(started))
			require.Equal(t, tt.want, ids(write))
			var remembered []string
			for id := range next {
				remembered = append(remembered, id)
			}
			require.ElementsMatch(t, slices.Compact(ids(tt.cur)), remembered, "only the current verdicts are remembered")
		})
	}

	// A write that failed leaves the verdict unstored: the next evaluation
	// writes it again but does not count it again.
	v, started, write := edgeVerdicts(nil).next([]schema.Finding{inversion("e1", 20)}, t0, restate)
	require.Len(t, started, 1)
	require.Len(t, write, 1)
	_, started, write = v.next([]schema.Finding{inversion("e1", 20)}, t0.Add(time.Minute), restate)
	require.Empty(t, started)
	require.Len(t, write, 1)
}

func TestCountedFindingsBounded(t *testing.T) {
	f := func(id string) schema.Finding { return schema.Finding{ID: id} }
	c := newCountedFindings(2, 3)
	tr := func(n byte) schema.TraceID { return schema.TraceID{n} }
	require.Len(t, c.fresh(tr(1), []schema.Finding{f("a"), f("b")}), 2)
	require.Len(t, c.fresh(tr(1), []schema.Finding{f("a"), f("b"), f("c")}), 1, "only c is new")
	require.Empty(t, c.fresh(tr(1), []schema.Finding{f("b")}))
	// Trace 2's ids push the held ids past 3: trace 1 is forgotten.
	require.Len(t, c.fresh(tr(2), []schema.Finding{f("a")}), 1)
	require.Len(t, c.ids, 1)
	require.Equal(t, 1, c.held)
	require.Len(t, c.fresh(tr(1), []schema.Finding{f("a")}), 1, "forgotten: counted again")
	require.Len(t, c.fresh(tr(3), []schema.Finding{f("x")}), 1)
	require.LessOrEqual(t, len(c.ids), 2, "at most maxTraces traces")
	require.Len(t, c.order, len(c.ids))
	require.Len(t, newCountedFindings(0, 3).fresh(tr(1), []schema.Finding{f("a")}), 1, "nothing remembered")
}

// gaugeSeries returns the samples of the gauge family name, by their kind,
// service and callee labels joined with "/".
func gaugeSeries(t *testing.T, reg *prometheus.Registry, name string) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range families {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			out[l["kind"]+"/"+l["service"]+"/"+l["callee"]] = m.GetGauge().GetValue()
		}
	}
	return out
}

// TestEdgeFindingsHoldingGauge evaluates the edges every minute for 45
// minutes while the fixture's latency_inversion holds: the holding gauge is
// 1 for that edge at every evaluation, while budgetd_findings_total counted
// the verdict once, when it started. Once the edge's calls leave the edge
// window the verdict lapses and the gauge's series is gone.
func TestEdgeFindingsHoldingGauge(t *testing.T) {
	s := openStore(t, "pipeline_edge_holding")
	reg := prometheus.NewRegistry()
	spans := fixtureSpans(t, "latency_inversion_positive")
	clock := time.Unix(0, int64(spans[0].StartNs)).Add(time.Minute)
	cfg := analyze.DefaultConfig()
	// A window that holds the fixture's calls for the whole test.
	cfg.EdgeWindow = time.Hour
	p, err := New(DefaultConfig(), Settings{Store: s, Analyzer: analyze.New(cfg), Registerer: reg,
		Now: func() time.Time { return clock }})
	require.NoError(t, err)
	ctx := context.Background()
	require.Empty(t, gaugeSeries(t, reg, "budgetd_edge_findings_holding"), "no series before an evaluation")
	p.Spans(spans)
	require.NoError(t, p.process(ctx, true))

	inverted := p.analyzer.EdgeFindings(clock)
	require.Len(t, inverted, 1, "the fixture's edge is inverted")
	f := inverted[0]
	require.NotEmpty(t, f.Service)
	require.NotEmpty(t, f.CalleeService)
	want := map[string]float64{string(schema.KindLatencyInversion) + "/" + f.Service + "/" + f.CalleeService: 1}
	for i := range 46 {
		require.NoError(t, p.writeEdgeFindings(ctx))
		require.Equal(t, want, gaugeSeries(t, reg, "budgetd_edge_findings_holding"), "evaluation %d: the verdict holds", i)
		require.EqualValues(t, 1, counterSum(t, reg, "budgetd_findings_total", schema.KindLatencyInversion), "counted once, when it started")
		clock = clock.Add(time.Minute)
	}

	// The edge's calls are older than the window: the verdict lapses.
	clock = clock.Add(cfg.EdgeWindow)
	require.Empty(t, p.analyzer.EdgeFindings(clock))
	require.NoError(t, p.writeEdgeFindings(ctx))
	require.Empty(t, gaugeSeries(t, reg, "budgetd_edge_findings_holding"), "a lapsed verdict has no series")
	require.EqualValues(t, 1, counterSum(t, reg, "budgetd_findings_total", schema.KindLatencyInversion))
}

// TestHoldEdgeFindings sets the holding gauge from a few evaluations: it
// counts distinct findings per kind, service and callee, maps services past
// the label bound to _other as budgetd_findings_total does, and keeps only
// the series of the last evaluation.
func TestHoldEdgeFindings(t *testing.T) {
	m, err := newMetrics(nil, nil)
	require.NoError(t, err)
	m.services = newLabelSet(2)
	inversion := func(id, caller, callee string) schema.Finding {
		return schema.Finding{ID: id, Kind: schema.KindLatencyInversion, Service: caller, CallerService: caller, CalleeService: callee}
	}
	series := func() map[string]float64 {
		reg := prometheus.NewRegistry()
		require.NoError(t, reg.Register(m.holding))
		return gaugeSeries(t, reg, "budgetd_edge_findings_holding")
	}
	m.holdEdgeFindings([]schema.Finding{
		inversion("a-b:1", "a", "b"), inversion("a-b:2", "a", "b"), inversion("a-b:2", "a", "b"), // two operations, one twice
		inversion("c-d", "c", "d"), // c and d are past the bound
	})
	require.Equal(t, map[string]float64{"latency_inversion/a/b": 2, "latency_inversion/_other/_other": 1}, series())
	m.holdEdgeFindings([]schema.Finding{inversion("a-b:1", "a", "b")})
	require.Equal(t, map[string]float64{"latency_inversion/a/b": 1}, series(), "lapsed verdicts leave")
	m.holdEdgeFindings(nil)
	require.Empty(t, series())
}

// TestFindingsBoundedPerProblem analyses 30 traces with the same problem in
// one interval: the findings table keeps problems.examples_per_interval of
// them in full, the problem's stats count all 30, and a re-analysed trace
// adds nothing to the stats.
func TestFindingsBoundedPerProblem(t *testing.T) {
	s := openStore(t, "pipeline_examples")
	ctx := context.Background()
	cfg := problems.DefaultConfig()
	cfg.ExamplesPerInterval = 5
	reg := prometheus.NewRegistry()
	clock := time.Unix(1_800_000_000, 0)
	p, err := New(DefaultConfig(), Settings{Store: s, Analyzer: analyze.New(analyze.DefaultConfig()), Registerer: reg,
		Problems: &cfg, Now: func() time.Time { return clock }})
	require.NoError(t, err)

	base := fixtureSpans(t, "orphaned_work_positive")
	var all []schema.Span
	for n := range 30 {
		for _, sp := range base {
			sp.TraceID[0], sp.TraceID[1] = byte(n), 0xee
			all = append(all, sp)
		}
	}
	require.NoError(t, s.WriteSpans(ctx, "in", all))
	p.Spans(all)
	require.NoError(t, p.Flush(ctx))

	perTrace := len(goldenIDs(t, "orphaned_work_positive"))
	require.Positive(t, perTrace)
	stored, _, err := s.WindowFindings(ctx, store.FindingQuery{}, 10_000)
	require.NoError(t, err)
	win := store.Window{}
	stats, err := s.ProblemStats(ctx, win)
	require.NoError(t, err)
	var counted uint64
	for _, st := range stats {
		counted += st.Findings
	}
	require.EqualValues(t, 30*perTrace, counted, "the stats count every finding")
	require.Less(t, len(stored), 30*perTrace, "not every finding is stored in full")
	byProblem := map[string]int{}
	for _, f := range stored {
		byProblem[problems.Fingerprint(f).ID()]++
	}
	for id, n := range byProblem {
		require.LessOrEqual(t, n, 5, "problem %s keeps at most 5 findings in full", id)
	}
	require.EqualValues(t, 30*perTrace-len(stored), testutil.ToFloat64(p.metrics.findingsCountedOnly))

	// Grouped with the stats, the problems count every finding.
	occurrences := 0
	for _, pr := range problems.Group(stored, cfg.Options(clock, nil, stats)) {
		occurrences += pr.Occurrences
	}
	require.Equal(t, 30*perTrace, occurrences)

	// A retried span re-opens one trace whose findings were not kept: they
	// are stored now (reads show a re-analysed trace's latest findings
	// only), and not counted again.
	var dropped schema.TraceID
	kept := map[string]bool{}
	for _, f := range stored {
		kept[f.TraceID] = true
	}
	for i := range all {
		if !kept[all[i].TraceID.String()] {
			dropped = all[i].TraceID
			break
		}
	}
	require.False(t, dropped.IsZero(), "some trace has no finding stored in full")
	var again []schema.Span
	for _, sp := range all {
		if sp.TraceID == dropped {
			again = append(again, sp)
			break
		}
	}
	p.Spans(again)
	require.NoError(t, p.Flush(ctx))
	require.EqualValues(t, 1, p.counters().Reopened)
	mine, _, err := s.WindowFindings(ctx, store.FindingQuery{TraceID: dropped.String()}, 100)
	require.NoError(t, err)
	require.Len(t, mine, perTrace, "the re-analysed trace's findings are stored in full")
	stats, err = s.ProblemStats(ctx, win)
	require.NoError(t, err)
	counted = 0
	for _, st := range stats {
		counted += st.Findings
	}
	require.EqualValues(t, 30*perTrace, counted, "a re-analysed trace counts once")
}

// TestFlushWaitsForTheWorker hands a trace to a running pipeline, waits
// until the worker has taken it for analysis, and flushes: when Flush
// returns, the worker's findings must be stored. (Before Flush waited for
// the worker, it found nothing due and returned while the worker was still
// writing, and a caller reading the store right after saw nothing.)
func TestFlushWaitsForTheWorker(t *testing.T) {
	s := openStore(t, "pipeline_flush_waits")
	cfg := DefaultConfig()
	cfg.Tick, cfg.Assembly.Idle = time.Millisecond, time.Millisecond
	p, err := New(cfg, Settings{Store: s, Analyzer: analyze.New(analyze.DefaultConfig())})
	require.NoError(t, err)
	p.Start()
	defer func() { require.NoError(t, p.Shutdown(context.Background())) }()

	spans := fixtureSpans(t, "timeout_inversion_positive")
	p.Spans(spans)
	require.Eventually(t, func() bool { traces, _ := p.pending(); return traces == 0 }, time.Minute, time.Millisecond,
		"the worker takes the idle trace")
	require.NoError(t, p.Flush(context.Background()))
	require.Equal(t, goldenIDs(t, "timeout_inversion_positive"), storedIDs(t, s))
}

// TestReplicasShareEdgeStatistics runs two pipelines on one store, as two
// replicas behind trace-id load balancing do, each given every other trace
// of an inverted edge: neither has min_edge_samples alone, yet each finds
// the inversion over the statistics both shared, with the evidence one
// node that saw every call reports. A third pipeline on the same store
// that saw nothing of the edge finds it too: its verdicts are the cluster's.
func TestReplicasShareEdgeStatistics(t *testing.T) {
	s := openStore(t, "pipeline_replicas")
	spans := fixtureSpans(t, "latency_inversion_positive")
	// Recent times, as replicas sharing statistics see them: the states
	// carry the evaluation time, and the store ages out old ones.
	now := time.Now()
	shift := uint64(now.Add(-time.Minute).UnixNano()) - spans[0].StartNs
	for i := range spans {
		spans[i].StartNs += shift
		spans[i].EndNs += shift
	}
	byTrace := map[schema.TraceID][]schema.Span{}
	var order []schema.TraceID
	for _, sp := range spans {
		if byTrace[sp.TraceID] == nil {
			order = append(order, sp.TraceID)
		}
		byTrace[sp.TraceID] = append(byTrace[sp.TraceID], sp)
	}
	clock := func() time.Time { return now }
	single := analyze.New(analyze.DefaultConfig())
	var replicas []*Pipeline
	for range 3 {
		p, err := New(DefaultConfig(), Settings{Store: s, Analyzer: analyze.New(analyze.DefaultConfig()), Now: clock})
		require.NoError(t, err)
		replicas = append(replicas, p)
	}
	ctx := context.Background()
	for i, id := range order {
		replicas[i%2].Spans(byTrace[id])
		single.Trace(schema.NewTrace(byTrace[id]), now)
	}
	want := single.EdgeFindings(now)
	require.Len(t, want, 1, "one node that saw every call finds the inversion")
	for _, p := range replicas[:2] {
		require.NoError(t, p.process(ctx, true))
		require.Empty(t, p.analyzer.EdgeFindings(now), "half the calls are too few samples")
	}
	// The first evaluation of each shares its statistics; the second reads
	// the other's.
	for range 2 {
		for _, p := range replicas {
			require.NoError(t, p.writeEdgeFindings(ctx))
		}
	}
	for i, p := range replicas {
		require.Len(t, p.edges, 1, "replica %d judges the edge on the statistics of all", i)
		require.Contains(t, p.edges, want[0].ID, "replica %d", i)
		// Replicas 0 and 1 merge each other's states; 2, which saw no call
		// and so shares none, merges both.
		require.Equal(t, []float64{1, 1, 2}[i], testutil.ToFloat64(p.metrics.replicas), "replica %d: other replicas merged", i)
	}
	page, err := s.Findings(ctx, store.FindingQuery{Kind: schema.KindLatencyInversion})
	require.NoError(t, err)
	require.Len(t, page.Findings, 1, "one finding per edge, whichever replica wrote it")
	require.Equal(t, want[0].Evidence, page.Findings[0].Evidence, "the evidence of one node that saw every call")
}

// hopWrites is the real store, with the sizes of its hop writes recorded
// and, with analysing set, the analysis backlog each write saw.
type hopWrites struct {
	*chsql.Store
	mu        sync.Mutex
	sizes     []int
	analysing func() float64
	backlogs  []float64
	failFirst bool           // the first write fails, as a store that cannot be reached does
	failed    schema.TraceID // the trace of that write's hops
}

func (h *hopWrites) WriteHops(ctx context.Context, token string, hops []schema.Hop) error {
	h.mu.Lock()
	h.sizes = append(h.sizes, len(hops))
	if h.analysing != nil {
		h.backlogs = append(h.backlogs, h.analysing())
	}
	fail := h.failFirst && len(h.sizes) == 1
	if fail {
		h.failed = hops[0].TraceID
	}
	h.mu.Unlock()
	if fail {
		return fmt.Errorf("connection refused: %w", store.ErrUnavailable)
	}
	return h.Store.WriteHops(ctx, token, hops)
}

// TestAnalysisInRounds: traces due at once are analysed in rounds of at
// most roundSpans spans (a trace larger than that alone), every trace is
// analysed once, and the findings are those of the offline analysis. The
// analysing gauge shows the spans taken and not yet written: all of them
// before the first round's write, none once the last is stored.
func TestAnalysisInRounds(t *testing.T) {
	s := &hopWrites{Store: openStore(t, "pipeline_rounds")}
	clock := time.Unix(1_800_000_000, 0)
	reg := prometheus.NewRegistry()
	p, err := New(DefaultConfig(), Settings{Store: s, Analyzer: analyze.New(analyze.DefaultConfig()), Registerer: reg,
		Now: func() time.Time { return clock }})
	require.NoError(t, err)
	fixtures := []string{"seed000_independent_timeouts", "timeout_inversion_positive", "orphaned_work_positive", "retry_amplification_positive"}
	var spans []schema.Span
	var want []string
	for _, name := range fixtures {
		spans = append(spans, fixtureSpans(t, name)...)
		want = append(want, goldenIDs(t, name)...)
	}
	sort.Strings(want)
	perTrace := map[schema.TraceID]int{}
	for _, sp := range spans {
		perTrace[sp.TraceID]++
	}
	require.Len(t, perTrace, len(fixtures), "one trace per fixture")
	p.roundSpans = slices.Max(slices.Collect(maps.Values(perTrace)))
	analysing := func() float64 { return gaugeSeries(t, reg, "budgetd_analysis_analysing_spans")["//"] }
	s.analysing = analysing
	require.NoError(t, s.WriteSpans(context.Background(), "in", spans))
	p.Spans(spans)
	clock = clock.Add(DefaultConfig().Assembly.Idle)
	require.NoError(t, p.process(context.Background(), false))

	require.Greater(t, len(s.sizes), 1, "more than one round")
	total := 0
	for _, n := range s.sizes {
		require.LessOrEqual(t, n, p.roundSpans, "one hop per span: a round's hops are its spans")
		total += n
	}
	require.Equal(t, len(spans), total, "every span analysed once")
	written := 0
	for i, n := range s.sizes {
		require.EqualValues(t, len(spans)-written, s.backlogs[i], "round %d: the spans of this round and the rounds after it", i)
		written += n
	}
	require.Zero(t, analysing(), "all written")
	require.EqualValues(t, len(perTrace), testutil.ToFloat64(p.metrics.traces))
	require.Equal(t, want, storedIDs(t, s))
}

// TestFailedRoundLosesOnlyItself: when a round's write fails, process
// reports it and still judges and writes the rounds after it, whose traces
// have left assembly; only the failed round's findings are missing.
func TestFailedRoundLosesOnlyItself(t *testing.T) {
	s := &hopWrites{Store: openStore(t, "pipeline_failed_round"), failFirst: true}
	clock := time.Unix(1_800_000_000, 0)
	reg := prometheus.NewRegistry()
	cfg := DefaultConfig()
	cfg.WriteAttempts = 1
	p, err := New(cfg, Settings{Store: s, Analyzer: analyze.New(analyze.DefaultConfig()), Registerer: reg,
		Now: func() time.Time { return clock }})
	require.NoError(t, err)
	fixtures := []string{"seed000_independent_timeouts", "timeout_inversion_positive", "orphaned_work_positive", "retry_amplification_positive"}
	var spans []schema.Span
	golden := map[schema.TraceID][]string{}
	for _, name := range fixtures {
		f := fixtureSpans(t, name)
		spans = append(spans, f...)
		golden[f[0].TraceID] = goldenIDs(t, name)
	}
	require.Len(t, golden, len(fixtures), "one trace per fixture")
	p.roundSpans = 1 // a round a trace
	require.NoError(t, s.WriteSpans(context.Background(), "in", spans))
	p.Spans(spans)
	clock = clock.Add(cfg.Assembly.Idle)
	require.ErrorContains(t, p.process(context.Background(), false), "connection refused")

	require.Len(t, s.sizes, len(fixtures), "every round tried once")
	var want []string
	for id, ids := range golden {
		if id != s.failed {
			want = append(want, ids...)
		}
	}
	sort.Strings(want)
	require.NotEmpty(t, want)
	require.Equal(t, want, storedIDs(t, s), "the findings of every round but the failed one")
	require.Zero(t, gaugeSeries(t, reg, "budgetd_analysis_analysing_spans")["//"])
}
