package jaegerapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/budgetd/budgetd/ingest"
	"github.com/budgetd/budgetd/ingest/ingesttest"
	"github.com/budgetd/budgetd/ingest/jaegerapi/jaegertest"
	"github.com/budgetd/budgetd/ingest/translate"
	"github.com/budgetd/budgetd/proctest"
	"github.com/budgetd/budgetd/schema"
)

func newConverter(t *testing.T) *ingest.Converter {
	t.Helper()
	c, err := ingest.NewConverter(ingest.DefaultLimits())
	require.NoError(t, err)
	return c
}

// lastHours is a Config reading the last three hours from url, which
// covers ingesttest's traces (they start in the hour before the current).
func lastHours(url string) Config {
	cfg := DefaultConfig()
	now := time.Now().UTC()
	cfg.URL, cfg.Since, cfg.Until = url, now.Add(-3*time.Hour), now
	return cfg
}

// around returns a Config reading from url the minute before the first
// span of td starts to the minute after the last starts: a window where
// the traces are most of what there is, so splitting it pages through
// them rather than zooming in on them.
func around(url string, td ptrace.Traces) Config {
	cfg := DefaultConfig()
	cfg.URL = url
	translate.EachSpan(td, func(_ ptrace.ResourceSpans, _ ptrace.ScopeSpans, sp ptrace.Span) {
		start := sp.StartTimestamp().AsTime()
		if cfg.Since.IsZero() || start.Before(cfg.Since) {
			cfg.Since = start
		}
		if start.After(cfg.Until) {
			cfg.Until = start
		}
	})
	cfg.Since, cfg.Until = cfg.Since.Add(-time.Minute), cfg.Until.Add(time.Minute)
	return cfg
}

// spansPerTrace counts spans by trace id and fails on a span read twice.
func spansPerTrace(t *testing.T, spans []schema.Span) map[string]int {
	t.Helper()
	seen := map[[2]string]bool{}
	out := map[string]int{}
	for _, sp := range spans {
		key := [2]string{sp.TraceID.String(), sp.SpanID.String()}
		require.False(t, seen[key], "span %s of trace %s read twice", key[1], key[0])
		seen[key] = true
		out[key[0]]++
	}
	return out
}

// TestReadSplitsFullWindows sends 60 traces crossing up to nine services to
// a real Jaeger and reads them back with pages of 7 traces: Read must split
// windows (a page of 7 is full) and still read every trace exactly once,
// whole, though it is found once per service it crosses and may straddle
// two windows. With a span limit it must stop, keep whole traces and say
// it was truncated. It also reads Jaeger's own answers to an empty window
// (404 "No traces found") and to a num_traces over its memory store's
// max_traces (500).
func TestReadSplitsFullWindows(t *testing.T) {
	jaeger := jaegertest.Start(t)
	td := ingesttest.Traces(7, 60)
	want := jaegertest.SpanCounts(td)
	require.Len(t, want, 60)
	jaegertest.Export(t, jaeger.OTLP, td)
	jaeger.WaitSpans(t, want)
	total := 0
	for _, n := range want {
		total += n
	}

	t.Run("every trace once", func(t *testing.T) {
		cfg := around(jaeger.URL()+"/", td)
		// Every trace starts at frontend; about half call checkout too.
		cfg.Services, cfg.NumTraces = []string{"frontend", "checkout"}, 7
		res, err := Read(context.Background(), cfg, newConverter(t))
		require.NoError(t, err)
		t.Logf("%d requests, %d windows split", res.Requests, res.Splits)
		require.Equal(t, want, spansPerTrace(t, res.Spans))
		require.Equal(t, 60, res.Traces)
		require.Positive(t, res.Splits, "a window of 60 traces in pages of 7 is split")
		require.Greater(t, res.Requests, len(res.Services), "the split windows were asked again")
		require.Zero(t, res.Crowded)
		require.False(t, res.Truncated)
		require.Zero(t, res.Rejected)
	})
	t.Run("one page is enough", func(t *testing.T) {
		cfg := lastHours(jaeger.URL())
		cfg.Services = []string{"frontend"} // every trace's root
		res, err := Read(context.Background(), cfg, newConverter(t))
		require.NoError(t, err)
		require.Equal(t, want, spansPerTrace(t, res.Spans))
		require.Equal(t, 1, res.Requests, "no listing, no split")
		require.Zero(t, res.Splits)
	})
	t.Run("truncated at max spans", func(t *testing.T) {
		cfg := around(jaeger.URL(), td)
		cfg.Services, cfg.NumTraces, cfg.MaxSpans = []string{"frontend", "checkout"}, 7, total/2
		res, err := Read(context.Background(), cfg, newConverter(t))
		require.NoError(t, err)
		require.True(t, res.Truncated)
		require.LessOrEqual(t, len(res.Spans), total/2)
		got := spansPerTrace(t, res.Spans)
		require.Equal(t, res.Traces, len(got))
		require.Greater(t, len(res.Spans), total/4, "it read up to the limit, give or take a trace")
		for id, n := range got {
			require.Equal(t, want[id], n, "trace %s is read whole", id)
		}
	})
	t.Run("no traces in the window", func(t *testing.T) {
		cfg := lastHours(jaeger.URL())
		cfg.Since, cfg.Until = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2020, 1, 2, 0, 0, 0, 0, time.UTC)
		res, err := Read(context.Background(), cfg, newConverter(t))
		require.NoError(t, err, "Jaeger's 404 \"No traces found\" is an empty answer")
		require.Empty(t, res.Spans)
		require.Len(t, res.Services, 9)
	})
	t.Run("Jaeger's own error", func(t *testing.T) {
		cfg := lastHours(jaeger.URL())
		cfg.NumTraces = 20_000 // over the memory store's max_traces
		_, err := Read(context.Background(), cfg, newConverter(t))
		require.ErrorContains(t, err, `GET /api/v3/traces (service "`)
		require.ErrorContains(t, err, "500 Internal Server Error: search depth must be greater than 0 and less than max traces")
	})
	jaeger.Stop(t)
}

// TestReadErrors covers the failures a running Jaeger does not produce on
// demand with an httptest server: a 500 with api_v3's JSON error body, a
// server that is not Jaeger, one that never answers, a proxy asking for a
// bearer token (the Jaeger build the tests use has no bearer-token
// authenticator); and an address nobody listens on.
func TestReadErrors(t *testing.T) {
	arrived := make(chan struct{}, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/broken/"):
			http.Error(w, `{"error":{"httpCode":500,"message":"storage is down"}}`, http.StatusInternalServerError)
		case strings.HasPrefix(r.URL.Path, "/hang/"):
			arrived <- struct{}{}
			<-r.Context().Done()
		case strings.HasPrefix(r.URL.Path, "/auth/"):
			switch {
			case r.Header.Get("Authorization") != "Bearer s3cret":
				http.Error(w, "token required", http.StatusUnauthorized)
			case r.URL.Path == "/auth/api/v3/services":
				_, _ = w.Write([]byte(`{"services":["a"]}`))
			default:
				http.Error(w, `{"error":{"httpCode":404,"message":"No traces found"}}`, http.StatusNotFound)
			}
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	nobody := "http://user:hunter2@" + proctest.FreeAddr(t)

	tests := []struct {
		name    string
		url     string
		setup   func(*Config)
		wantErr string
	}{
		{name: "500 with a JSON error body", url: srv.URL + "/broken", wantErr: "GET /broken/api/v3/services: 500 Internal Server Error: storage is down"},
		{name: "500 while finding traces", url: srv.URL + "/broken/", setup: func(c *Config) { c.Services = []string{"a b"} },
			wantErr: `GET /broken/api/v3/traces (service "a b"): 500 Internal Server Error: storage is down`},
		{name: "not Jaeger", url: srv.URL, wantErr: "GET /api/v3/services: 404 Not Found: 404 page not found (is " + srv.URL + " Jaeger's query service"},
		{name: "no answer", url: srv.URL + "/hang", setup: func(c *Config) { c.RequestTimeout = 200 * time.Millisecond },
			wantErr: "GET /hang/api/v3/services: no answer within 200ms"},
		{name: "token missing", url: srv.URL + "/auth", wantErr: "401 Unauthorized: token required (no credentials were sent)"},
		{name: "token refused", url: srv.URL + "/auth", setup: func(c *Config) { c.Token = "wrong" }, wantErr: "(the bearer token was refused)"},
		{name: "unreachable", url: nobody, wantErr: "GET /api/v3/services: dial tcp"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := lastHours(tt.url)
			if tt.setup != nil {
				tt.setup(&cfg)
			}
			_, err := Read(context.Background(), cfg, newConverter(t))
			require.ErrorContains(t, err, tt.wantErr)
			require.NotContains(t, err.Error(), "hunter2", "no password in messages")
		})
	}

	t.Run("token sent", func(t *testing.T) {
		cfg := lastHours(srv.URL + "/auth")
		cfg.Token = "s3cret"
		res, err := Read(context.Background(), cfg, newConverter(t))
		require.NoError(t, err)
		require.Equal(t, []string{"a"}, res.Services)
		require.Equal(t, 2, res.Requests, "the listing and one search, both with the token")
	})
	t.Run("caller leaves", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		conv := newConverter(t)
		done := make(chan error, 1)
		go func() {
			_, err := Read(ctx, lastHours(srv.URL+"/hang"), conv)
			done <- err
		}()
		<-arrived
		cancel()
		select {
		case err := <-done:
			require.ErrorIs(t, err, context.Canceled)
		case <-time.After(10 * time.Second):
			t.Fatal("Read did not return within 10s of its context ending")
		}
	})
}

// TestReadBasicAuth runs a real Jaeger whose query service wants basic
// auth: the user and password in the URL are sent (Go's HTTP client does
// it), and a refusal says what was sent without showing the password.
func TestReadBasicAuth(t *testing.T) {
	jaeger := jaegertest.StartWith(t, jaegertest.Options{BasicAuth: "reader:hunter2"})
	tests := []struct {
		name, userinfo, wantErr string
	}{
		{"none", "", "GET /api/v3/services: 401 Unauthorized: no basic auth provided (no credentials were sent)"},
		{"wrong", "reader:hunter3@", "401 Unauthorized: invalid credentials (the URL's user and password were refused)"},
		{"right", "reader:hunter2@", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Read(context.Background(), lastHours("http://"+tt.userinfo+jaeger.Query), newConverter(t))
			if tt.wantErr == "" {
				require.NoError(t, err)
				require.Empty(t, res.Services, "Jaeger holds nothing yet")
				return
			}
			require.ErrorContains(t, err, tt.wantErr)
			require.NotContains(t, err.Error(), "hunter")
		})
	}
	jaeger.Stop(t)
}

func TestConfigValidate(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name    string
		change  func(*Config)
		wantErr string
	}{
		{"not http", func(c *Config) { c.URL = "ftp://jaeger:16686" }, "want an http:// or https:// URL"},
		{"no scheme", func(c *Config) { c.URL = "jaeger:16686" }, "want an http:// or https:// URL"},
		{"no host", func(c *Config) { c.URL = "http:///api" }, "no host"},
		{"a query", func(c *Config) { c.URL = "http://jaeger:16686/?service=a" }, "without a query"},
		{"not a URL, password kept out", func(c *Config) { c.URL = "http://u:hunter2@jaeger:16686/%zz" }, "--from-jaeger: not a URL"},
		{"window backwards", func(c *Config) { c.Since, c.Until = now, now.Add(-time.Hour) }, "--until is before --since"},
		{"no window", func(c *Config) { c.Since = time.Time{} }, "the window (--since, --until) must be set"},
		{"empty service", func(c *Config) { c.Services = []string{""} }, "--service must not be empty"},
		{"max spans", func(c *Config) { c.MaxSpans = 0 }, "--max-spans must be > 0"},
		{"num traces", func(c *Config) { c.NumTraces = 0 }, "NumTraces must be > 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := lastHours("http://127.0.0.1:16686")
			tt.change(&cfg)
			err := cfg.Validate()
			require.ErrorContains(t, err, tt.wantErr)
			require.NotContains(t, err.Error(), "hunter2")
		})
	}
	require.NoError(t, lastHours("https://127.0.0.1:8443/jaeger/").Validate())
}
