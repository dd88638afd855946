package watch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/budgetd/budgetd/problems"
)

// notification is one problem's change of state, to be sent.
type notification struct {
	event   Event
	problem problems.Problem
	at      time.Time
}

// webhook sends notifications to problems.watch.webhook.url, one POST each,
// from a bounded queue (the oldest is dropped when it is full), trying each
// up to max_attempts times with a doubling wait.
type webhook struct {
	cfg    problems.WebhookConfig
	client *http.Client
	log    *slog.Logger
	m      *metrics

	mu    sync.Mutex
	queue []notification
	wake  chan struct{}
	// firstWait is the wait after a failed try, doubled after each.
	firstWait time.Duration
}

func newWebhook(cfg problems.WebhookConfig, log *slog.Logger, m *metrics) *webhook {
	return &webhook{
		cfg: cfg, client: &http.Client{Timeout: cfg.Timeout}, log: log, m: m,
		wake: make(chan struct{}, 1), firstWait: time.Second,
	}
}

// enqueue adds n, dropping the oldest notification when the queue is full.
func (h *webhook) enqueue(n notification) {
	h.mu.Lock()
	if len(h.queue) >= h.cfg.QueueSize {
		h.queue = h.queue[1:]
		h.m.sent.WithLabelValues("dropped").Inc()
	}
	h.queue = append(h.queue, n)
	h.mu.Unlock()
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// run sends queued notifications until ctx ends.
func (h *webhook) run(ctx context.Context) {
	for {
		h.mu.Lock()
		var n notification
		ok := len(h.queue) > 0
		if ok {
			n, h.queue = h.queue[0], h.queue[1:]
		}
		h.mu.Unlock()
		if !ok {
			select {
			case <-ctx.Done():
				return
			case <-h.wake:
			}
			continue
		}
		if err := h.deliver(ctx, n); err != nil {
			if ctx.Err() != nil {
				return
			}
			h.m.sent.WithLabelValues("failed").Inc()
			h.log.Warn("problem notification given up", "problem", n.problem.ID, "event", n.event,
				"attempts", h.cfg.MaxAttempts, "err", err)
			continue
		}
		h.m.sent.WithLabelValues("sent").Inc()
	}
}

// deliver POSTs n, trying up to max_attempts times.
func (h *webhook) deliver(ctx context.Context, n notification) error {
	body, err := h.body(n)
	if err != nil {
		return err
	}
	wait := h.firstWait
	for attempt := 1; ; attempt++ {
		err = h.post(ctx, body)
		if err == nil || attempt >= h.cfg.MaxAttempts {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, time.Minute)
	}
}

func (h *webhook) post(ctx context.Context, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("webhook answered %s", resp.Status)
	}
	return nil
}

// body encodes n in the configured format.
func (h *webhook) body(n notification) ([]byte, error) {
	link := ""
	if h.cfg.LinkBase != "" {
		link = h.cfg.LinkBase + "/#/problems/" + n.problem.ID
	}
	if h.cfg.Format == problems.FormatJSON {
		return json.Marshal(struct {
			Event   Event            `json:"event"`
			At      time.Time        `json:"at"`
			Link    string           `json:"link,omitempty"`
			Problem problems.Problem `json:"problem"`
		}{n.event, n.at.UTC(), link, n.problem})
	}
	return json.Marshal([]alertmanagerAlert{alertOf(n, link)})
}

// alertmanagerAlert is one alert of the Alertmanager v2 API (POST
// /api/v2/alerts). A resolved problem's alert ends now; the others are
// open-ended, so Alertmanager keeps them for its resolve_timeout.
type alertmanagerAlert struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       *time.Time        `json:"endsAt,omitempty"`
	GeneratorURL string            `json:"generatorURL,omitempty"`
}

func alertOf(n notification, link string) alertmanagerAlert {
	p := &n.problem
	a := alertmanagerAlert{
		Labels: map[string]string{
			"alertname": "BudgetdProblem", "problem_id": p.ID, "kind": string(p.Kind),
			"caller": p.CallerService, "callee": p.CalleeService, "severity": string(p.Severity),
		},
		Annotations: map[string]string{
			"summary":    fmt.Sprintf("%s problem %s on %s → %s", p.Kind, n.event, p.CallerService, p.CalleeService),
			"suggestion": p.Suggestion,
			"impact":     p.Impact.String(),
			"state":      string(p.State),
		},
		StartsAt: p.FirstSeen.UTC(), GeneratorURL: link,
	}
	if n.event == EventResolved {
		end := n.at.UTC()
		a.EndsAt = &end
	}
	return a
}
