package sim

import (
	"context"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

const minimal = `
name: t
policy: independent
client: {service: c, call: {timeout: 1s}}
hops:
  - service: a
    call: {timeout: 500ms}
  - service: b
`

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		wantErr string
	}{
		{name: "minimal", yaml: minimal},
		{name: "empty", yaml: "", wantErr: "empty document"},
		{name: "unknown key", yaml: minimal + "colour: red\n", wantErr: "field colour not found"},
		{name: "bad policy", yaml: strings.Replace(minimal, "independent", "hopeful", 1), wantErr: `policy must be independent, ladder or deadline, not "hopeful"`},
		{name: "leaf calls", yaml: minimal + "    call: {timeout: 1s}\n", wantErr: "hops[1].call: the last hop is the leaf"},
		{name: "missing call", yaml: strings.Replace(minimal, "    call: {timeout: 500ms}\n", "", 1), wantErr: "hops[0].call is required: a calls b"},
		{name: "missing timeout", yaml: strings.Replace(minimal, "{timeout: 500ms}", "{attempts: 2}", 1), wantErr: "hops[0].call.timeout must be > 0 for the independent policy"},
		{name: "duplicate service", yaml: strings.Replace(minimal, "service: b", "service: a", 1), wantErr: `hops[1].service "a" is used twice`},
		{name: "ladder must decrease", yaml: strings.Replace(strings.Replace(minimal, "independent", "ladder", 1), "500ms", "1s", 1), wantErr: "hops[0].call.timeout (1s) must be below client.call.timeout (1s)"},
		{name: "deadline needs edge budget", yaml: strings.Replace(minimal, "policy: independent", "policy: deadline", 1), wantErr: "client.edge_budget must be > 0 for the deadline policy"},
		{name: "margin outside deadline", yaml: strings.Replace(minimal, "{timeout: 500ms}", "{timeout: 500ms, margin: 5ms}", 1), wantErr: "hops[0].call.margin belongs to the deadline policy"},
		{name: "bad distribution", yaml: minimal + "    work: {dist: lognormal, p50: 2s, p99: 1s}\n", wantErr: "hops[1].work: a lognormal distribution needs p50 > 0 and p99 >= p50"},
		{name: "bad bare duration", yaml: minimal + "    work: soon\n", wantErr: `want a duration such as 20ms or a distribution mapping, got "soon"`},
		{name: "bad fraction", yaml: minimal + "    degraded: {fraction: 2, work: 1s}\n", wantErr: "hops[1].degraded.fraction must be between 0 and 1"},
		{name: "bad time scale", yaml: minimal + "time_scale: -1\n", wantErr: "time_scale must be > 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse([]byte(tt.yaml))
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, 1.0, s.TimeScale, "default time scale")
			require.Equal(t, 30, s.Requests)
			require.Equal(t, 10, s.Concurrency)
			require.Equal(t, time.Second, s.Client.EdgeBudget, "the edge budget defaults to what the client's call can take")
			require.Equal(t, "GET /a", s.Hops[0].Operation)
			require.True(t, *s.Hops[1].StopOnCancel)
		})
	}
}

// Every file under scenarios/ is embedded, parses, and is part of the demo.
func TestEmbeddedScenarios(t *testing.T) {
	files, err := filepath.Glob("scenarios/*.yaml")
	require.NoError(t, err)
	var names []string
	for _, f := range files {
		names = append(names, strings.TrimSuffix(filepath.Base(f), ".yaml"))
	}
	demo := append([]string(nil), Demo...)
	sort.Strings(demo)
	require.Equal(t, names, demo)
	for _, name := range Demo {
		s, err := Embedded(name)
		require.NoError(t, err, name)
		fromDisk, err := Load(filepath.Join("scenarios", name+".yaml"))
		require.NoError(t, err)
		require.Equal(t, fromDisk, s)
	}
	_, err = Embedded("nope")
	require.ErrorContains(t, err, "read embedded scenario nope")
}

func TestDistSample(t *testing.T) {
	tests := []struct {
		name     string
		d        Dist
		p50, p99 time.Duration
	}{
		{name: "fixed", d: Dist{Kind: DistFixed, Value: 20 * time.Millisecond}, p50: 20 * time.Millisecond, p99: 20 * time.Millisecond},
		{name: "zero", d: Dist{}, p50: 0, p99: 0},
		{name: "uniform", d: Dist{Kind: DistUniform, Min: 10 * time.Second, Max: 20 * time.Second}, p50: 15 * time.Second, p99: 19900 * time.Millisecond},
		{name: "normal by percentiles", d: Dist{Kind: DistNormal, P50: 14 * time.Second, P99: 15 * time.Second}, p50: 14 * time.Second, p99: 15 * time.Second},
		{name: "normal by moments", d: Dist{Kind: DistNormal, Mean: time.Second, StdDev: 100 * time.Millisecond}, p50: time.Second, p99: 1233 * time.Millisecond},
		{name: "lognormal", d: Dist{Kind: DistLogNormal, P50: 150 * time.Millisecond, P99: 600 * time.Millisecond}, p50: 150 * time.Millisecond, p99: 600 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.NoError(t, tt.d.Validate("work"))
			r := rand.New(rand.NewPCG(1, 2))
			const n = 20000
			xs := make([]float64, n)
			for i := range xs {
				xs[i] = float64(tt.d.Sample(r))
				require.GreaterOrEqual(t, xs[i], 0.0)
			}
			sort.Float64s(xs)
			require.InDelta(t, float64(tt.p50), quantile(xs, 0.5), 0.03*float64(tt.p50)+1)
			require.InDelta(t, float64(tt.p99), quantile(xs, 0.99), 0.05*float64(tt.p99)+1)
		})
	}
}

func TestDistClamps(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	d := Dist{Kind: DistNormal, Mean: time.Millisecond, StdDev: time.Second, Max: 2 * time.Second}
	for range 1000 {
		v := d.Sample(r)
		require.GreaterOrEqual(t, v, time.Duration(0))
		require.LessOrEqual(t, v, 2*time.Second)
	}
}

func TestQuantile(t *testing.T) {
	require.Equal(t, 0.0, quantile(nil, 0.5))
	require.Equal(t, 7.0, quantile([]float64{7}, 0.99))
	require.Equal(t, 2.5, quantile([]float64{1, 2, 3, 4}, 0.5))
	require.InDelta(t, 3.97, quantile([]float64{1, 2, 3, 4}, 0.99), 1e-9)
}

// The ground truth's orphaned work follows DESIGN §5: the give-up instant
// is the earliest of the calling attempt's end, everything above it, the
// root deadline and observed cancellations; overruns under the tolerance
// do not count.
func TestTruthOrphanedWork(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms float64) time.Time { return t0.Add(time.Duration(ms * float64(time.Millisecond))) }
	r := newRecorder(2)
	// Request 0: the client gives up at 100 (its call ends), the deadline is
	// at 100 too. The gateway runs on to 160; under it, order's first call
	// timed out at 40 while order ran to 70, and a second order invocation
	// started at 120, after everyone above had left, and ran to 150. The
	// database under the first order invocation stopped 3 ms after its
	// cancellation: under the tolerance.
	r.request(0, reqRec{traceID: "a", start: at(0), end: at(100), deadline: at(100)})
	c1 := r.startCall(0, 0, 0, retryPolicy{}, 0, at(0))
	r.endCall(c1, at(100))
	r.endCall(c1, at(101)) // the first record counts
	gw := r.startInvocation(0, 0, c1, math.NaN(), at(1))
	r.endInvocation(gw, at(160), time.Time{}, false)
	c2 := r.startCall(0, gw, 1, retryPolicy{}, 0, at(2))
	r.endCall(c2, at(40))
	o1 := r.startInvocation(0, 1, c2, 35, at(3))
	r.endInvocation(o1, at(70), time.Time{}, false)
	c3 := r.startCall(0, o1, 2, retryPolicy{}, 0, at(4))
	r.endCall(c3, at(90))
	db := r.startInvocation(0, 2, c3, math.NaN(), at(5))
	r.endInvocation(db, at(43), at(40.5), false)
	c4 := r.startCall(0, gw, 1, retryPolicy{}, 0, at(119))
	r.endCall(c4, at(155))
	o2 := r.startInvocation(0, 1, c4, math.NaN(), at(120))
	r.endInvocation(o2, at(150), time.Time{}, false)
	// Request 1 succeeds without orphaned work.
	r.request(1, reqRec{traceID: "b", start: at(0), end: at(20), deadline: at(100), status: 200, success: true})
	c5 := r.startCall(1, 0, 0, retryPolicy{}, 0, at(0))
	r.endCall(c5, at(20))
	r.endInvocation(r.startInvocation(1, 0, c5, math.NaN(), at(1)), at(19), time.Time{}, false)

	tr := r.truth(plan{
		scenario: "t", policy: PolicyIndependent, scale: 0.5, tolerance: 5 * time.Millisecond, edge: 100 * time.Millisecond,
		rootPath: "c:op", services: []string{"gateway", "order", "db"}, paths: []string{"p1", "p2", "p3"},
	})
	req := tr.Requests[0]
	require.Equal(t, map[string]Ms{
		"gateway": {Real: 60, Scenario: 120},          // 160 − 100
		"order":   {Real: 30 + 30, Scenario: 60 + 60}, // 70 − 40, and 150 − 120 (started after G)
	}, req.OrphanedByService)
	require.Equal(t, Ms{Real: 120, Scenario: 240}, req.OrphanedWork)
	require.Equal(t, Ms{Real: 60, Scenario: 120}, req.BusyAfterClientLeft, "the gateway stopped last, at 160")
	require.Equal(t, map[string]int{"gateway": 1, "order": 2, "db": 1}, req.Calls)
	require.Equal(t, map[string]int{"gateway": 1, "order": 2, "db": 1}, req.Attempts)
	require.Equal(t, 1, req.LeafCalls)
	require.Equal(t, 1, req.LeafAttempts)
	require.False(t, req.Success)
	require.Empty(t, tr.Requests[1].OrphanedByService)

	s := tr.Summary
	require.Equal(t, 2, s.Requests)
	require.Equal(t, 1, s.Failed)
	require.Equal(t, 0.5, s.SuccessRate)
	require.Equal(t, Ms{Real: 120, Scenario: 240}, s.OrphanedWorkPerFailedRequest)
	require.Equal(t, Ms{Real: 60, Scenario: 120}, s.BusyAfterClientLeftPerFailedRequest)
	require.Equal(t, 1, s.LeafCalls, "one database call in request 0, none in request 1")
	require.Equal(t, 0.5, s.LeafCallsMean)
	require.Equal(t, 1.0, s.LeafCallsMeanWhenCalled)
	require.Equal(t, Ms{Real: 60, Scenario: 120}, s.LatencyP50)
	require.Equal(t, 2, tr.Hops[1].Attempts)
	require.Equal(t, 2, tr.Hops[1].Calls)
	require.Equal(t, &Ms{Real: 35, Scenario: 70}, tr.Hops[1].ReceivedBudgetP50)
	require.Nil(t, tr.Hops[0].ReceivedBudgetP50)
}

func TestConfigValidate(t *testing.T) {
	require.NoError(t, DefaultConfig().Validate())
	c := DefaultConfig()
	c.Endpoint, c.Protocol, c.BatchTimeout, c.OrphanToleranceMs = "", "udp", 0, -1
	err := c.Validate()
	for _, want := range []string{"endpoint (--otlp) must be set", `not "udp"`, "batch timeout", "orphan tolerance"} {
		require.ErrorContains(t, err, want)
	}
}

// Run starts real servers and exporters; when it returns, every goroutine
// it started is gone and every span was delivered.
func TestRunStopsEverything(t *testing.T) {
	defer goleak.VerifyNone(t)
	var requests atomic.Int64
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		requests.Add(1)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()

	sc, err := Embedded("healthy")
	require.NoError(t, err)
	cfg := DefaultConfig()
	cfg.Endpoint, cfg.Protocol, cfg.Requests = collector.URL, ProtocolHTTP, 5
	tr, err := Run(context.Background(), sc, cfg, Settings{})
	require.NoError(t, err)
	require.Equal(t, 5, tr.Summary.Requests)
	require.Equal(t, 5, tr.Summary.Succeeded)
	require.Equal(t, 5, tr.Summary.LeafCalls)
	// Per request: the root and the client's call, then a SERVER and a
	// CLIENT span per hop but the leaf, which has only its SERVER span.
	require.EqualValues(t, 5*(2+2*3+1), tr.Spans.Exported)
	require.Zero(t, tr.Spans.Failed)
	require.Positive(t, requests.Load())
	require.Equal(t, "client:checkout", tr.RootPath)
	require.Equal(t, "client:checkout > gateway:POST /checkout > order:POST /order > pricing:POST /price > db:SELECT prices", tr.LeafPath)
	collector.CloseClientConnections()
}

// A scenario built in code runs with the same defaults as a parsed one,
// and Run does not change it.
func TestRunScenarioFromCode(t *testing.T) {
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	defer collector.Close()
	sc := Scenario{
		// Real time: at a compressed scale the 500 ms timeout would be 5 ms,
		// which a loaded machine misses, and success is what is asserted.
		Name: "code", Policy: PolicyIndependent, TimeScale: 1,
		Client: Client{Service: "c", Call: Call{Timeout: time.Second}},
		Hops: []Hop{
			{Service: "a", Call: &Call{Timeout: 500 * time.Millisecond}},
			{Service: "b", Work: Dist{Kind: DistFixed, Value: 10 * time.Millisecond}},
		},
	}
	cfg := DefaultConfig()
	cfg.Endpoint, cfg.Protocol, cfg.Requests = collector.URL, ProtocolHTTP, 3
	tr, err := Run(context.Background(), sc, cfg, Settings{})
	require.NoError(t, err)
	require.Equal(t, 3, tr.Summary.Succeeded)
	require.Equal(t, "c:request > a:GET /a > b:GET /b", tr.LeafPath)
	require.Nil(t, sc.Hops[0].StopOnCancel, "the caller's scenario is left as it was")
	require.Zero(t, sc.Hops[0].Call.Attempts)
}

// A cancelled run stops sending requests, stops even the work detached
// from its requests, and returns the truth of the requests that finished.
func TestRunCancelled(t *testing.T) {
	defer goleak.VerifyNone(t)
	// The first export proves spans have ended, so requests are under way
	// and their hops are working: that is what the cancellation must stop.
	exported := make(chan struct{})
	var once sync.Once
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		once.Do(func() { close(exported) })
	}))
	defer collector.Close()
	sc, err := Embedded("seed000_independent") // its hops work on for a minute after the client left
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cfg := DefaultConfig()
	cfg.Endpoint, cfg.Protocol = collector.URL, ProtocolHTTP
	cfg.BatchTimeout = 10 * time.Millisecond
	done := make(chan struct{})
	var tr *Truth
	var runErr error
	go func() {
		defer close(done)
		tr, runErr = Run(ctx, sc, cfg, Settings{})
	}()
	select {
	case <-exported:
	case <-time.After(time.Minute):
		t.Fatal("no span was exported within a minute")
	}
	start := time.Now()
	cancel()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("Run did not return after its context was cancelled")
	}
	require.Less(t, time.Since(start), abortGrace, "detached work stops when the run is abandoned")
	require.ErrorIs(t, runErr, context.Canceled)
	require.NotNil(t, tr)
	require.Less(t, tr.Summary.Requests, sc.Requests)
	collector.CloseClientConnections()
}
