package pipeline

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/budgetd/budgetd/schema"
)

// metrics are the pipeline's self-metrics. Labels come from closed sets
// (finding kinds, severities, write targets), never from span data.
type metrics struct {
	traces      prometheus.Counter
	skews       prometheus.Counter
	findings    *prometheus.CounterVec
	writeErrors *prometheus.CounterVec
	readErrors  prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, p *Pipeline) (*metrics, error) {
	m := &metrics{
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
	reopened := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "budgetd_analysis_reopened_traces_total", Help: "Traces analysed again because late spans arrived.",
	}, func() float64 { return float64(p.counters().Reopened) })
	pendingTraces := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "budgetd_analysis_pending_traces", Help: "Traces waiting in assembly.",
	}, func() float64 { t, _ := p.pending(); return float64(t) })
	pendingSpans := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "budgetd_analysis_pending_spans", Help: "Spans waiting in assembly.",
	}, func() float64 { _, s := p.pending(); return float64(s) })
	for _, c := range []prometheus.Collector{m.traces, m.skews, m.findings, m.writeErrors, m.readErrors, dropped, droppedSpans, reopened, pendingTraces, pendingSpans} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) observeFindings(fs []schema.Finding) {
	for _, f := range fs {
		m.findings.WithLabelValues(string(f.Kind), string(f.Severity)).Inc()
	}
}
