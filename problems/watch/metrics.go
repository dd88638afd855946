package watch

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/budgetd/budgetd/problems"
)

// metrics are the Watcher's series. Their cardinality is bounded by
// problems.watch.top: the per-problem series carry kind, caller and callee
// service only, for the top problems, plus one "other" series.
type metrics struct {
	impact      *prometheus.GaugeVec
	firstSeen   *prometheus.GaugeVec
	regressed   *prometheus.GaugeVec
	byState     *prometheus.GaugeVec
	transitions *prometheus.CounterVec
	evaluations *prometheus.CounterVec
	truncated   prometheus.Gauge
	sent        *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	labels := []string{"kind", "caller", "callee"}
	m := &metrics{
		impact: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "budgetd_problem_impact",
			Help: "Impact of each active or regressed problem among the top problems.watch.top, in its kind's unit (docs/problems.md); kind, caller and callee \"other\" sums the rest.",
		}, labels),
		firstSeen: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "budgetd_problem_first_seen_timestamp_seconds",
			Help: "When each problem of budgetd_problem_impact was first seen in the lookback (Unix seconds): the start of its first problems.trend_interval.",
		}, labels),
		regressed: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "budgetd_problem_regressed",
			Help: "1 for each problem of budgetd_problem_impact that came back after a quiet period.",
		}, labels),
		byState: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "budgetd_problems",
			Help: "Problems in the lookback, by state.",
		}, []string{"state"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "budgetd_problem_transitions_total",
			Help: "Problems that became new, regressed or resolved between two evaluations.",
		}, []string{"event"}),
		evaluations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "budgetd_problem_evaluations_total",
			Help: "Evaluations of the problems, by result (ok, error).",
		}, []string{"result"}),
		truncated: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "budgetd_problem_evaluation_truncated",
			Help: "1 when the last evaluation's lookback held more findings than problems.max_findings.",
		}),
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "budgetd_problem_notifications_total",
			Help: "Webhook notifications, by result: sent, failed (given up after problems.watch.webhook.max_attempts), dropped (the queue was full).",
		}, []string{"result"}),
	}
	for _, s := range []problems.State{problems.StateActive, problems.StateRegressed, problems.StateResolved} {
		m.byState.WithLabelValues(string(s))
	}
	for _, e := range []Event{EventNew, EventRegressed, EventResolved} {
		m.transitions.WithLabelValues(string(e))
	}
	for _, r := range []string{"sent", "failed", "dropped"} {
		m.sent.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(m.impact, m.firstSeen, m.regressed, m.byState, m.transitions, m.evaluations, m.truncated, m.sent)
	}
	return m
}

// set replaces the per-problem series with ps (in Group's order, by
// impact): the first top active or regressed ones get their own labels
// (problems sharing kind and services are summed), the rest one "other"
// series.
func (m *metrics) set(ps []problems.Problem, top int) {
	m.impact.Reset()
	m.firstSeen.Reset()
	m.regressed.Reset()
	counts := map[problems.State]int{}
	kept := map[[3]string]bool{}
	first := map[[3]string]time.Time{}
	for i := range ps {
		p := &ps[i]
		counts[p.State]++
		if p.State == problems.StateResolved {
			continue
		}
		k := [3]string{string(p.Kind), p.CallerService, p.CalleeService}
		if !kept[k] && len(kept) >= top {
			m.impact.WithLabelValues(other, other, other).Add(p.Impact.Value)
			continue
		}
		kept[k] = true
		m.impact.WithLabelValues(k[:]...).Add(p.Impact.Value)
		if f, ok := first[k]; !ok || p.FirstSeen.Before(f) {
			first[k] = p.FirstSeen
		}
		if p.State == problems.StateRegressed {
			m.regressed.WithLabelValues(k[:]...).Set(1)
		}
	}
	for k, f := range first {
		m.firstSeen.WithLabelValues(k[:]...).Set(float64(f.Unix()))
	}
	for _, s := range []problems.State{problems.StateActive, problems.StateRegressed, problems.StateResolved} {
		m.byState.WithLabelValues(string(s)).Set(float64(counts[s]))
	}
}
