package pipeline

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

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
	findings    *prometheus.CounterVec
	writeErrors *prometheus.CounterVec
	readErrors  prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, p *Pipeline) (*metrics, error) {
	m := &metrics{
		services: newLabelSet(maxServiceLabels),
		byService: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "budgetd_findings_total",
			Help: "Findings by kind, service and callee service. Services beyond the first " +
				"200 seen are reported as _other to bound label cardinality.",
		}, []string{"kind", "service", "callee"}),
		orphaned: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "budgetd_orphaned_work_seconds_total", Help: "Work done after the caller gave up, by service (_other beyond 200 services).",
		}, []string{"service"}),
		amplified: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "budgetd_retry_amplification_calls", Help: "Calls of one leaf edge in one trace, per retry_amplification finding.",
			Buckets: []float64{2, 3, 4, 6, 8, 12, 16, 24, 32, 64},
		}),
		traces: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "budgetd_analysis_traces_total", Help: "Traces analysed (a re-opened trace counts again).",
		}),
		skews: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "budgetd_analysis_clock_skews_total", Help: "Client/server span pairs whose clocks disagreed beyond the skew tolerance.",
		}),
		findings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "budgetd_analysis_findings_total", Help: "Findings produced, by kind and severity.",
		}, []string{"kind", "severity"}),
		writeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "budgetd_analysis_write_errors_total", Help: "Analysis results that could not be stored after every attempt.",
		}, []string{"what"}),
		readErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "budgetd_analysis_read_errors_total", Help: "Re-opened traces whose stored spans could not be read.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	dropped := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "budgetd_analysis_dropped_spans_total", Help: "Spans not analysed because assembly was full.",
		ConstLabels: prometheus.Labels{"reason": "max_traces"},
	}, func() float64 { return float64(p.counters().DroppedTraceOverflow) })
	droppedSpans := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "budgetd_analysis_dropped_spans_total", Help: "Spans not analysed because assembly was full.",
		ConstLabels: prometheus.Labels{"reason": "max_spans_per_trace"},
	}, func() float64 { return float64(p.counters().DroppedSpanOverflow) })
	droppedFull := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "budgetd_analysis_dropped_spans_total", Help: "Spans not analysed because assembly was full.",
		ConstLabels: prometheus.Labels{"reason": "max_spans"},
	}, func() float64 { return float64(p.counters().DroppedSpansFull) })
	reopened := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "budgetd_analysis_reopened_traces_total", Help: "Traces analysed again because late spans arrived.",
	}, func() float64 { return float64(p.counters().Reopened) })
	pendingTraces := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "budgetd_analysis_pending_traces", Help: "Traces waiting in assembly.",
	}, func() float64 { t, _ := p.pending(); return float64(t) })
	pendingSpans := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "budgetd_analysis_pending_spans", Help: "Spans waiting in assembly.",
	}, func() float64 { _, s := p.pending(); return float64(s) })
	for _, c := range []prometheus.Collector{m.byService, m.orphaned, m.amplified, m.traces, m.skews, m.findings, m.writeErrors, m.readErrors, dropped, droppedSpans, droppedFull, reopened, pendingTraces, pendingSpans} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) observeFindings(fs []schema.Finding) {
	for _, f := range fs {
		m.findings.WithLabelValues(string(f.Kind), string(f.Severity)).Inc()
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
