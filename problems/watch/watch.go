// Package watch evaluates problems periodically for metrics, alerts and
// notifications (issue 17, alerting per problem).
//
// Every problems.watch.every the Watcher builds the problems of the last
// problems.watch.lookback from their stats (one row per problem and
// interval: problems.FromStats) and the edge findings (the same problems as
// GET /api/v1/problems, without the evidence a notification does not
// need), exports the problems as Prometheus series of
// bounded cardinality — the problems.watch.top active or regressed ones by
// impact get series of their own, labelled kind, caller and callee service
// only; the rest are summed into one series labelled "other" — and compares
// each problem's state with the previous evaluation's: a problem not seen
// before is new, one that came back after a quiet period regressed, one that
// went quiet resolved. Those transitions are counted and, when
// problems.watch.webhook.url is set, sent to it.
//
// The states live in the findings table, so every replica computes the same
// ones; the previous evaluation's states live in memory. The first
// evaluation after a start sets that baseline and notifies nothing: a
// problem that began or ended while budgetd was down shows in the series,
// not as a notification.
package watch

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/budgetd/budgetd/problems"
	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/store"
)

// Event is a change of a problem's state between two evaluations.
type Event string

// The events.
const (
	EventNew       Event = "new"
	EventRegressed Event = "regressed"
	EventResolved  Event = "resolved"
)

// other labels the series that sums the problems beyond the top.
const other = "other"

// Settings are the Watcher's dependencies.
type Settings struct {
	Logger     *slog.Logger
	Store      store.Store
	Registerer prometheus.Registerer // nil: metrics not registered
	Now        func() time.Time      // nil: time.Now
}

// Watcher evaluates the problems and tells about their changes.
type Watcher struct {
	cfg    problems.Config
	store  store.Store
	log    *slog.Logger
	now    func() time.Time
	m      *metrics
	notify *webhook // nil without a webhook URL
	// prev is the state of every problem at the last evaluation; nil
	// before the first.
	prev map[string]problems.State
}

// New builds a Watcher; Run starts it.
func New(cfg problems.Config, set Settings) (*Watcher, error) {
	if set.Store == nil {
		return nil, errors.New("problems watch: no store")
	}
	w := &Watcher{cfg: cfg, store: set.Store, log: set.Logger, now: set.Now, m: newMetrics(set.Registerer)}
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	if w.now == nil {
		w.now = time.Now
	}
	if cfg.Watch.Webhook.URL != "" {
		w.notify = newWebhook(cfg.Watch.Webhook, w.log, w.m)
	}
	return w, nil
}

// Run evaluates at once and then every problems.watch.every until ctx
// ends; then it stops the webhook's sender.
func (w *Watcher) Run(ctx context.Context) {
	if w.notify != nil {
		done := make(chan struct{})
		go func() { defer close(done); w.notify.run(ctx) }()
		defer func() { <-done }()
	}
	t := time.NewTicker(w.cfg.Watch.Every)
	defer t.Stop()
	for {
		if err := w.Evaluate(ctx); err != nil && ctx.Err() == nil {
			w.log.Warn("problems evaluation failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Evaluate groups the findings of the lookback once, updates the series
// and notifies the changes since the last evaluation.
func (w *Watcher) Evaluate(ctx context.Context) error {
	now := w.now()
	win := store.WindowOf(now.Add(-w.cfg.Watch.Lookback), now)
	ctx, cancel := context.WithTimeout(ctx, w.cfg.Watch.Every)
	defer cancel()
	ps, truncated, err := w.problems(ctx, now, win)
	if err != nil {
		w.m.evaluations.WithLabelValues("error").Inc()
		return err
	}
	w.m.evaluations.WithLabelValues("ok").Inc()
	w.m.truncated.Set(boolGauge(truncated))
	w.m.set(ps, w.cfg.Watch.Top)

	cur := make(map[string]problems.State, len(ps))
	for i := range ps {
		p := &ps[i]
		cur[p.ID] = p.State
		if w.prev == nil {
			continue
		}
		if e, ok := transition(w.prev, p); ok {
			w.m.transitions.WithLabelValues(string(e)).Inc()
			w.log.Info("problem "+string(e), "problem", p.ID, "kind", p.Kind, "caller", p.CallerService, "callee", p.CalleeService)
			if w.notify != nil {
				w.notify.enqueue(notification{event: e, problem: w.detail(ctx, now, win, p), at: now})
			}
		}
	}
	w.prev = cur
	return nil
}

// problems returns the problems of win, judged at now. Trace findings are
// read as their stats (one row per problem and interval, however many
// findings: problems.FromStats), edge findings (one per edge) as they are;
// truncated says there were more edge findings than problems.max_findings.
func (w *Watcher) problems(ctx context.Context, now time.Time, win store.Window) ([]problems.Problem, bool, error) {
	stats, err := w.store.ProblemStats(ctx, store.FromIntervalStart(win, w.cfg.TrendInterval))
	if err != nil {
		return nil, false, err
	}
	edges, truncated, err := w.store.WindowFindings(ctx, store.FindingQuery{Kind: schema.KindLatencyInversion, Window: win}, w.cfg.MaxFindings)
	if err != nil {
		return nil, false, err
	}
	opt := w.cfg.Options(now, nil, nil)
	ps := append(problems.FromStats(stats, opt), problems.Group(edges, opt)...)
	problems.SortByImpact(ps)
	return ps, truncated, nil
}

// detail returns p with the evidence its stats lack (severity, worst,
// examples, suggestion), grouped from its findings in win; p itself when
// they cannot be read. Notifications are rare, so each may read its
// problem's findings.
func (w *Watcher) detail(ctx context.Context, now time.Time, win store.Window, p *problems.Problem) problems.Problem {
	if p.Kind == schema.KindLatencyInversion {
		return *p // grouped from its findings already
	}
	fs, _, err := w.store.WindowFindings(ctx, store.FindingQuery{Kind: p.Kind, Service: p.CalleeService, Window: win}, w.cfg.MaxFindings)
	if err != nil {
		w.log.Warn("problem notification without its evidence", "problem", p.ID, "err", err)
		return *p
	}
	mine := fs[:0]
	for _, f := range fs {
		if problems.Fingerprint(f).ID() == p.ID {
			mine = append(mine, f)
		}
	}
	for _, full := range problems.Group(mine, w.cfg.Options(now, nil, nil)) {
		if full.ID == p.ID {
			// The counts and state are the stats', which see every finding.
			full.Occurrences, full.AffectedRequests, full.Impact = p.Occurrences, p.AffectedRequests, p.Impact
			full.FirstSeen, full.LastSeen, full.Trend, full.State = p.FirstSeen, p.LastSeen, p.Trend, p.State
			return full
		}
	}
	return *p
}

// transition is the event between p's previous state (absent: never seen)
// and its state now, if any.
func transition(prev map[string]problems.State, p *problems.Problem) (Event, bool) {
	was, seen := prev[p.ID]
	switch {
	case !seen && p.State != problems.StateResolved:
		return EventNew, true
	case seen && was != problems.StateRegressed && p.State == problems.StateRegressed:
		return EventRegressed, true
	case seen && was != problems.StateResolved && p.State == problems.StateResolved:
		return EventResolved, true
	}
	return "", false
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
