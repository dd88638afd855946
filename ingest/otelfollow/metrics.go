package otelfollow

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics count what the follower does; there is no log line per trace.
type metrics struct {
	polls, errors, more             prometheus.Counter
	traces, spans, stored, rejected prometheus.Counter
	lag                             prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: "budgetd_follow_" + name, Help: help})
	}
	m := &metrics{
		polls:  counter("polls_total", "Polls of the followed otel_traces table (follow.otel_traces)."),
		errors: counter("errors_total", "Polls that failed (the source or budgetd's store unreachable, the write path full); the next poll takes the same traces again."),
		more: counter("full_polls_total",
			"Polls that stopped at follow.otel_traces.max_spans_per_poll and left due traces for the next poll."),
		traces: counter("traces_total", "Due traces read from the followed table."),
		spans:  counter("spans_total", "Spans read from the followed table and committed to the write path."),
		stored: counter("already_stored_spans_total",
			"Spans read from the followed table and left out because budgetd stores them already (a trace taken again after a late span)."),
		rejected: counter("rejected_spans_total", "Spans of the followed table the ingest limits refused (ingest.limits), as OTLP would."),
		lag: prometheus.NewGauge(prometheus.GaugeOpts{Name: "budgetd_follow_lag_seconds",
			Help: "How far the follow position is behind now: follow.otel_traces.settle plus any backlog."}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.polls, m.errors, m.more, m.traces, m.spans, m.stored, m.rejected, m.lag} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register follow metrics: %w", err)
		}
	}
	return m, nil
}
