package pipeline

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/budgetd/budgetd/analyze"
	"github.com/budgetd/budgetd/schema"
)

// metrics are the pipeline's self-metrics. Labels come from closed sets
// (finding kinds, severities, write targets), never from span data.
type metrics struct {
	services    *labelSet
	byService   *prometheus.CounterVec
	orphaned    *prometheus.CounterVec
	amplified   prometheus.Histogram
	traces      prometheus.Counter
	skews       prometheus.Counter
	leftOut     prometheus.Counter // hops not stored (analyze.Thin)
	findings    *prometheus.CounterVec
	writeErrors *prometheus.CounterVec
	refused     *prometheus.CounterVec
	readErrors  prometheus.Counter
	// findingsCountedOnly counts the trace findings past
	// problems.examples_per_interval: counted in their problem's stats,
	// not stored in full.
	findingsCountedOnly prometheus.Counter
	inferred            *prometheus.CounterVec
	holding             *prometheus.GaugeVec
	// replicas and badStates describe the edge states shared with other
	// replicas (analyze.EdgeFindingsWith).
	replicas  prometheus.Gauge
	badStates prometheus.Counter
	// held are the label values holding has series for and their values,
	// as the last edge evaluation set them. Guarded by Pipeline.edgeMu.
	held map[[3]string]float64
}

func newMetrics(reg prometheus.Registerer, p *Pipeline) (*metrics, error) {
	m := &metrics{
		services: newLabelSet(maxServiceLabels),
		byService: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "budgetd_findings_total",
			Help: "Distinct findings by kind, service and callee service: each counted once, when first produced, " +
				"not again when its trace is analysed again or its edge's verdict still holds at the next evaluation. " +
				"Services beyond the first 200 seen are reported as _other to bound label cardinality.",
		}, []string{"kind", "service", "callee"}),
		orphaned: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "budgetd_orphaned_work_seconds_total", Help: "Work done after the caller gave up, by service (_other beyond 200 services), " +
				"summed over distinct orphaned_work findings.",
		}, []string{"service"}),
		amplified: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "budgetd_retry_amplification_calls", Help: "Calls of one leaf edge in one trace, per distinct retry_amplification finding.",
			Buckets: []float64{2, 3, 4, 6, 8, 12, 16, 24, 32, 64},
		}),
		traces: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "budgetd_analysis_traces_total", Help: "Traces analysed (a re-opened trace counts again).",
		}),
		skews: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "budgetd_analysis_clock_skews_total", Help: "Client/server span pairs whose clocks disagreed beyond the skew tolerance.",
		}),
		leftOut: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "budgetd_analysis_hops_left_out_total",
			Help: "Analysed spans given no hop row: work inside a service whose parent's hop says all of it (the trace view rebuilds it from the parent's).",
		}),
		findings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "budgetd_analysis_findings_total", Help: "Distinct findings produced, by kind and the severity they first had.",
		}, []string{"kind", "severity"}),
		writeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "budgetd_analysis_write_errors_total", Help: "Analysis results that could not be stored after every attempt.",
		}, []string{"what"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "budgetd_analysis_refused_rows_total", Help: "Analysis results (hops, findings) the store refused for their content, dropped (the rest of their write is stored).",
		}, []string{"what"}),
		readErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "budgetd_analysis_read_errors_total", Help: "Store reads the analysis could not make: the stored spans of a re-opened trace, or the other replicas' edge states.",
		}),
		findingsCountedOnly: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "budgetd_analysis_findings_counted_only_total",
			Help: "Trace findings past problems.examples_per_interval for their problem and interval: counted in the problem's stats, not stored in full.",
		}),
		inferred: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "budgetd_analysis_inferred_findings_total",
			Help: "Distinct findings resting on an inferred timeout or deadline (evidence.inferred = 1), by kind.",
		}, []string{"kind"}),
		holding: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "budgetd_edge_findings_holding",
			Help: "Edge findings (latency_inversion) whose verdict held at the last evaluation (analyze.edge_findings_every), " +
				"by kind, caller service and callee service: one per operation-level edge, absent once no verdict holds. " +
				"Services beyond the first 200 seen are reported as _other, as in budgetd_findings_total.",
		}, []string{"kind", "service", "callee"}),
		replicas: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "budgetd_edge_replicas",
			Help: "Other budgetd replicas whose edge statistics the last edge evaluation merged with this one's (0 on a single node).",
		}),
		badStates: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "budgetd_edge_states_undecodable_total",
			Help: "Edge states of other replicas that could not be decoded (another version's, or damaged), left out of edge evaluations.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	// One series per reason a span was left out of assembly.
	var dropped []prometheus.Collector
	for _, d := range []struct {
		reason string
		count  func(analyze.AssemblerCounters) uint64
	}{
		{"max_traces", func(c analyze.AssemblerCounters) uint64 { return c.DroppedTraceOverflow }},
		{"max_spans_per_trace", func(c analyze.AssemblerCounters) uint64 { return c.DroppedSpanOverflow }},
		{"max_spans", func(c analyze.AssemblerCounters) uint64 { return c.DroppedSpansFull }},
		{"max_bytes", func(c analyze.AssemblerCounters) uint64 { return c.DroppedBytesFull }},
		{"max_bytes_per_trace", func(c analyze.AssemblerCounters) uint64 { return c.DroppedBytesOverflow }},
	} {
		dropped = append(dropped, prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "budgetd_analysis_dropped_spans_total", Help: "Spans not analysed because assembly was full.",
			ConstLabels: prometheus.Labels{"reason": d.reason},
		}, func() float64 { return float64(d.count(p.counters())) }))
	}
	reopened := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "budgetd_analysis_reopened_traces_total", Help: "Traces analysed again because late spans arrived.",
	}, func() float64 { return float64(p.counters().Reopened) })
	pendingTraces := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "budgetd_analysis_pending_traces", Help: "Traces waiting in assembly.",
	}, func() float64 { t, _ := p.pending(); return float64(t) })
	pendingSpans := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "budgetd_analysis_pending_spans", Help: "Spans waiting in assembly.",
	}, func() float64 { _, s := p.pending(); return float64(s) })
	analysing := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "budgetd_analysis_analysing_spans", Help: "Spans taken from assembly whose analysis is not yet written (the rounds in progress).",
	}, func() float64 { return float64(p.analysing.Load()) })
	pendingBytes := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "budgetd_analysis_pending_bytes", Help: "Bytes of the spans waiting in assembly (analyze.assembly.max_bytes bounds them).",
	}, func() float64 { return float64(p.heldBytes()) })
	edgeStats := func(f func(analyze.Counters) float64) func() float64 {
		return func() float64 { return f(p.analyzer.Counters()) }
	}
	collectors := []prometheus.Collector{m.byService, m.orphaned, m.amplified, m.traces, m.skews, m.leftOut, m.findings, m.writeErrors, m.refused, m.readErrors, m.findingsCountedOnly, m.inferred, m.holding,
		m.replicas, m.badStates, reopened, pendingTraces, pendingSpans, analysing, pendingBytes}
	collectors = append(collectors, dropped...)
	for _, t := range []struct {
		table         string
		edges         func(analyze.Counters) float64
		refused, late func(analyze.Counters) float64
	}{
		{"calls", func(c analyze.Counters) float64 { return float64(c.Edges) },
			func(c analyze.Counters) float64 { return float64(c.RefusedSamples) }, func(c analyze.Counters) float64 { return float64(c.LateSamples) }},
		{"waits", func(c analyze.Counters) float64 { return float64(c.WaitEdges) },
			func(c analyze.Counters) float64 { return float64(c.RefusedWaits) }, func(c analyze.Counters) float64 { return float64(c.LateWaits) }},
	} {
		collectors = append(collectors,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "budgetd_analysis_edges", Help: "Edges tracked in the edge window (analyze.max_edges), per table: call statistics, or waits for inference.",
				ConstLabels: prometheus.Labels{"table": t.table},
			}, edgeStats(t.edges)),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "budgetd_analysis_edge_samples_dropped_total", Help: "Edge samples not recorded: max_edges edges were tracked, or the sample was older than the window.",
				ConstLabels: prometheus.Labels{"table": t.table, "reason": "max_edges"},
			}, edgeStats(t.refused)),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "budgetd_analysis_edge_samples_dropped_total", Help: "Edge samples not recorded: max_edges edges were tracked, or the sample was older than the window.",
				ConstLabels: prometheus.Labels{"table": t.table, "reason": "late"},
			}, edgeStats(t.late)))
	}
	for _, c := range collectors {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// observeFindings counts findings that are new: the finding-counting
// metrics count distinct findings (by id), as the API's counts do, not
// analyses or writes. The callers pass only findings not counted before
// (distinct.go): a trace analysed again (late spans re-opened it) adds only
// the findings its earlier analysis did not have, and an edge's
// latency_inversion counts when its verdict starts to hold, not at each
// evaluation that still finds it. A finding is counted with the figures
// (severity, orphaned_ms, calls) it first had. What the pipeline remembers
// is bounded, so a finding is counted again when it comes back after its
// memory went: an edge verdict that stopped holding at one evaluation and
// holds again at a later one, a trace re-opened after the findings of
// analyze.assembly.remember_closed later traces (or 2^20 finding ids) took
// its place (countedFindings), and anything after a restart or on another
// replica.
func (m *metrics) observeFindings(fs []schema.Finding) {
	for _, f := range fs {
		m.findings.WithLabelValues(string(f.Kind), string(f.Severity)).Inc()
		if f.Evidence["inferred"] == 1 {
			m.inferred.WithLabelValues(string(f.Kind)).Inc()
		}
		service, callee := m.services.label(f.Service), m.services.label(f.CalleeService)
		m.byService.WithLabelValues(string(f.Kind), service, callee).Inc()
		switch f.Kind {
		case schema.KindOrphanedWork:
			m.orphaned.WithLabelValues(service).Add(f.Evidence["orphaned_ms"] / 1000)
		case schema.KindRetryAmplification:
			m.amplified.Observe(f.Evidence["calls"])
		}
	}
}

// holdEdgeFindings sets budgetd_edge_findings_holding to the edge findings
// of an evaluation: the number of distinct findings (by id) per kind, caller
// and callee service, with the service labels of budgetd_findings_total.
// Where budgetd_findings_total counts a verdict once, when it starts to
// hold, this gauge says that it still holds, so that an alert can fire for
// as long as it does. The series of a verdict that lapsed are deleted, after
// the current ones are set: a scrape during an evaluation sees each series
// that holds before and after it, never a gap (Reset and then Set would
// leave one). The findings are bounded by the edges the analyzer tracks
// (analyze.max_edges). Called with Pipeline.edgeMu held.
func (m *metrics) holdEdgeFindings(fs []schema.Finding) {
	cur := make(map[[3]string]float64)
	seen := make(map[string]struct{}, len(fs))
	for _, f := range fs {
		if _, dup := seen[f.ID]; dup {
			continue
		}
		seen[f.ID] = struct{}{}
		cur[[3]string{string(f.Kind), m.services.label(f.Service), m.services.label(f.CalleeService)}]++
	}
	for l, n := range cur {
		m.holding.WithLabelValues(l[0], l[1], l[2]).Set(n)
	}
	for l := range m.held {
		if _, ok := cur[l]; !ok {
			m.holding.DeleteLabelValues(l[0], l[1], l[2])
		}
	}
	m.held = cur
}

// maxServiceLabels bounds the service label values of the per-service
// metrics: a misbehaving resource attribute (a pod name as service.name)
// must not explode the metric series.
const maxServiceLabels = 200

// labelSet admits the first n distinct values of a label and maps the rest
// to "_other".
type labelSet struct {
	mu   sync.Mutex
	n    int
	seen map[string]struct{}
}

func newLabelSet(n int) *labelSet { return &labelSet{n: n, seen: make(map[string]struct{})} }

func (l *labelSet) label(v string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.seen[v]; ok {
		return v
	}
	if len(l.seen) >= l.n {
		return "_other"
	}
	l.seen[v] = struct{}{}
	return v
}
