package watch

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/problems"
	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/store/chsql"
	"github.com/budgetd/budgetd/store/embedded/embeddedtest"
)

func TestMain(m *testing.M) { embeddedtest.Main(m) }

func openStore(t *testing.T) *chsql.Store { return embeddedtest.Open(t, "watchtest") }

var t0 = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

// write stores findings as the analysis does: in full, and counted in
// their problems' stats.
func write(t *testing.T, st *chsql.Store, token string, fs []schema.Finding) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, st.WriteFindings(ctx, token, fs))
	require.NoError(t, st.WriteProblemStats(ctx, token, problems.StatsOf(fs, problems.DefaultConfig().TrendInterval)))
}

// finding is one finding of kind on the edge caller → callee, in trace n.
func finding(kind schema.Kind, caller, callee string, n int, at time.Time, ev map[string]float64) schema.Finding {
	trace := fmt.Sprintf("%032x", n)
	return schema.Finding{
		ID: fmt.Sprintf("%s-%s-%s-%d", kind, caller, callee, n), Kind: kind, Severity: schema.SeverityCritical,
		TraceID: trace, SpanID: fmt.Sprintf("%016x", n), Service: callee, Operation: "op",
		CallerService: caller, CalleeService: callee, Path: caller + ":op > " + callee + ":op",
		DetectedAt: at, Evidence: ev, Message: "m",
	}
}

// receiver is a real HTTP server that records the notifications it gets
// and fails the first failFirst requests.
type receiver struct {
	mu        sync.Mutex
	failFirst int
	requests  int
	bodies    [][]byte
	got       chan struct{}
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.requests++
	fail := r.requests <= r.failFirst
	if !fail {
		r.bodies = append(r.bodies, body)
	}
	r.mu.Unlock()
	if fail {
		http.Error(w, "not now", http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusAccepted)
	r.got <- struct{}{}
}

func (r *receiver) events(t *testing.T, n int) []string {
	t.Helper()
	for range n {
		select {
		case <-r.got:
		case <-time.After(30 * time.Second):
			t.Fatalf("the receiver got %d of %d notifications", len(r.bodies), n)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, b := range r.bodies {
		var note struct {
			Event   Event            `json:"event"`
			Problem problems.Problem `json:"problem"`
		}
		require.NoError(t, json.Unmarshal(b, &note))
		out = append(out, string(note.Event)+" "+string(note.Problem.Kind)+" "+note.Problem.CallerService+"→"+note.Problem.CalleeService)
		// Built from the stats, the problem is sent with its evidence.
		require.NotEmpty(t, note.Problem.Suggestion, "a notification carries the suggested fix")
		require.Equal(t, schema.SeverityCritical, note.Problem.Severity)
		require.NotEmpty(t, note.Problem.Examples)
	}
	r.bodies = nil
	return out
}

func TestWatchNotifiesChanges(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	recv := &receiver{failFirst: 1, got: make(chan struct{}, 16)}
	srv := httptest.NewServer(recv)
	t.Cleanup(srv.Close)

	cfg := problems.DefaultConfig()
	cfg.Watch.Webhook.URL, cfg.Watch.Webhook.Format = srv.URL, problems.FormatJSON
	now := t0
	reg := prometheus.NewRegistry()
	w, err := New(cfg, Settings{Store: st, Registerer: reg, Now: func() time.Time { return now }})
	require.NoError(t, err)
	w.notify.firstWait = time.Millisecond
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go w.notify.run(runCtx)

	orphan := func(n int, at time.Time) schema.Finding {
		return finding(schema.KindOrphanedWork, "gateway", "order", n, at, map[string]float64{"orphaned_ms": 2000})
	}
	write(t, st, "f1", []schema.Finding{orphan(1, t0.Add(-10*time.Minute))})

	// The first evaluation is the baseline: nothing is notified.
	require.NoError(t, w.Evaluate(ctx))
	require.Equal(t, 2.0, testutil.ToFloat64(w.m.impact.WithLabelValues("orphaned_work", "gateway", "order")), "2 orphaned seconds")
	require.Equal(t, 1.0, testutil.ToFloat64(w.m.byState.WithLabelValues("active")))

	// A problem appears: new, sent after one refused try.
	inv := finding(schema.KindTimeoutInversion, "order", "db", 2, t0.Add(time.Minute), map[string]float64{"timeout_ms": 900, "remaining_ms": 400})
	write(t, st, "f2", []schema.Finding{inv})
	now = t0.Add(2 * time.Minute)
	require.NoError(t, w.Evaluate(ctx))
	require.Equal(t, []string{"new timeout_inversion order→db"}, recv.events(t, 1))
	require.Equal(t, 2, recv.requests, "the refused try was retried")

	// Both go quiet for longer than the quiet period: resolved.
	now = t0.Add(2 * time.Hour)
	require.NoError(t, w.Evaluate(ctx))
	require.ElementsMatch(t, []string{"resolved orphaned_work gateway→order", "resolved timeout_inversion order→db"}, recv.events(t, 2))
	require.Equal(t, 2.0, testutil.ToFloat64(w.m.byState.WithLabelValues("resolved")))
	require.Equal(t, 0, testutil.CollectAndCount(w.m.impact), "resolved problems have no series")

	// The orphaned work comes back: regressed.
	write(t, st, "f3", []schema.Finding{orphan(3, now.Add(-time.Minute))})
	require.NoError(t, w.Evaluate(ctx))
	require.Equal(t, []string{"regressed orphaned_work gateway→order"}, recv.events(t, 1))
	require.Equal(t, 1.0, testutil.ToFloat64(w.m.regressed.WithLabelValues("orphaned_work", "gateway", "order")))

	// Evaluated again, nothing changed: nothing sent.
	require.NoError(t, w.Evaluate(ctx))
	require.Equal(t, 4.0, testutil.ToFloat64(w.m.sent.WithLabelValues("sent")))
	require.Equal(t, 1.0, testutil.ToFloat64(w.m.transitions.WithLabelValues("new")))
	require.Equal(t, 2.0, testutil.ToFloat64(w.m.transitions.WithLabelValues("resolved")))
	require.Equal(t, 1.0, testutil.ToFloat64(w.m.transitions.WithLabelValues("regressed")))
}

func TestWatchSeriesAreBounded(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	var fs []schema.Finding
	for i, callee := range []string{"a", "b", "c", "d"} {
		// Impact 4, 3, 2, 1 orphaned seconds.
		fs = append(fs, finding(schema.KindOrphanedWork, "gateway", callee, i, t0.Add(-time.Minute), map[string]float64{"orphaned_ms": float64(4-i) * 1000}))
	}
	write(t, st, "f", fs)
	cfg := problems.DefaultConfig()
	cfg.Watch.Top = 2
	w, err := New(cfg, Settings{Store: st, Now: func() time.Time { return t0 }})
	require.NoError(t, err)
	require.NoError(t, w.Evaluate(ctx))
	require.Equal(t, 3, testutil.CollectAndCount(w.m.impact), "the top 2 and other")
	require.Equal(t, 4.0, testutil.ToFloat64(w.m.impact.WithLabelValues("orphaned_work", "gateway", "a")))
	require.Equal(t, 3.0, testutil.ToFloat64(w.m.impact.WithLabelValues("orphaned_work", "gateway", "b")))
	require.Equal(t, 3.0, testutil.ToFloat64(w.m.impact.WithLabelValues(other, other, other)), "c and d summed")
	require.Equal(t, float64(t0.Add(-time.Minute).Truncate(cfg.TrendInterval).Unix()),
		testutil.ToFloat64(w.m.firstSeen.WithLabelValues("orphaned_work", "gateway", "a")), "the start of its first interval")
}

func TestWebhookQueueIsBounded(t *testing.T) {
	cfg := problems.DefaultConfig().Watch.Webhook
	cfg.URL, cfg.QueueSize = "http://127.0.0.1:1/", 2
	m := newMetrics(nil)
	h := newWebhook(cfg, nil, m)
	for i := range 5 {
		h.enqueue(notification{event: EventNew, problem: problems.Problem{ID: fmt.Sprint(i)}})
	}
	require.Len(t, h.queue, 2)
	require.Equal(t, "3", h.queue[0].problem.ID, "the oldest were dropped")
	require.Equal(t, 3.0, testutil.ToFloat64(m.sent.WithLabelValues("dropped")))
}

func TestAlertmanagerBody(t *testing.T) {
	cfg := problems.DefaultConfig().Watch.Webhook
	cfg.URL, cfg.LinkBase = "http://am/api/v2/alerts", "https://budgetd.internal"
	h := newWebhook(cfg, nil, newMetrics(nil))
	p := problems.Problem{ID: "abc", Kind: schema.KindOrphanedWork, Severity: schema.SeverityCritical,
		CallerService: "gateway", CalleeService: "order", FirstSeen: t0, Suggestion: "stop"}
	body, err := h.body(notification{event: EventResolved, problem: p, at: t0.Add(time.Hour)})
	require.NoError(t, err)
	var alerts []alertmanagerAlert
	require.NoError(t, json.Unmarshal(body, &alerts))
	require.Len(t, alerts, 1)
	a := alerts[0]
	require.Equal(t, "BudgetdProblem", a.Labels["alertname"])
	require.Equal(t, "abc", a.Labels["problem_id"])
	require.Equal(t, "https://budgetd.internal/#/problems/abc", a.GeneratorURL)
	require.Equal(t, t0, a.StartsAt)
	require.NotNil(t, a.EndsAt, "a resolved problem's alert ends")
	require.Equal(t, t0.Add(time.Hour), *a.EndsAt)
}
