package analyze

import (
	"math/rand"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/schema"
)

func TestEdgeStatsFromHopsMatchesAnalyzer(t *testing.T) {
	a := New(testConfig())
	var hops []schema.Hop
	r := rand.New(rand.NewSource(3))
	for n := 1; n <= 60; n++ {
		var tr *schema.Trace
		switch n % 3 {
		case 0:
			tr = schema.NewTrace(retryChain(n, []int{1 + r.Intn(2), 1 + r.Intn(3)}, n%2 == 0))
		case 1:
			tr = edgeTrace(n, 100+r.Float64()*2000, float64(500+100*r.Intn(50)), true)
		default:
			tr = edgeTrace(n, 100+r.Float64()*2000, 1000, false)
		}
		res := a.Trace(tr, testNow)
		hops = append(hops, res.Hops...)
	}
	// Shuffled: the offline path reads hops in no particular order.
	r.Shuffle(len(hops), func(i, j int) { hops[i], hops[j] = hops[j], hops[i] })
	require.Equal(t, EdgeStatsFromHops(hops), a.Edges(testNow))
}

func TestEdgeStats(t *testing.T) {
	a := New(testConfig())
	// Three traces: the first call times out and is retried once.
	for n := 1; n <= 3; n++ {
		a.Trace(schema.NewTrace(build(n,
			sp{id: 1, svc: "order", name: "POST /order", kind: server, start: 0, end: 1000},
			sp{id: 2, parent: 1, svc: "order", name: "GET", kind: client, start: 10, end: 310, attrs: attrs(peerSvc("stock"), tmo(300), timedOut())},
			sp{id: 3, parent: 1, svc: "order", name: "GET", kind: client, start: 320, end: 420, attrs: attrs(peerSvc("stock"), tmo(200))},
		)), testNow)
	}
	edges := a.Edges(testNow)
	require.Len(t, edges, 1)
	e := edges[0]
	require.Equal(t, "order", e.CallerService)
	require.Equal(t, "POST /order", e.CallerOperation)
	require.Equal(t, "stock", e.CalleeService)
	require.Equal(t, "GET", e.CalleeOperation)
	require.EqualValues(t, 6, e.Calls)
	require.EqualValues(t, 3, e.Retries)
	require.Equal(t, 0.5, e.RetryRatio)
	require.Equal(t, 200.0, *e.TimeoutMs, "lower median of 300,300,300,200,200,200")
	require.EqualValues(t, 6, e.TimeoutSamples)
	require.InEpsilon(t, 100, *e.P50Ms, sketchAlpha)
	require.InEpsilon(t, 300, *e.P99Ms, sketchAlpha)
	require.EqualValues(t, 6, e.LatencySamples)
}

func TestAnalyzerEdgeWindow(t *testing.T) {
	cfg := testConfig()
	cfg.EdgeWindow = 10 * time.Minute
	slice := cfg.EdgeWindow / edgeSlices
	tests := []struct {
		name  string
		start time.Duration // of the trace, relative to testNow
		at    time.Duration // of the Edges call, relative to testNow
		calls uint64
		late  uint64
	}{
		{name: "inside the window", start: -5 * time.Minute, calls: 1},
		{name: "slid out of the window", start: -5 * time.Minute, at: 6 * time.Minute},
		{name: "older than the window when recorded", start: -11 * time.Minute, late: 1},
		{name: "from the future counts as now", start: time.Hour, at: 9 * time.Minute, calls: 1},
		{name: "just inside after sliding by less than a slice", start: -9 * time.Minute, at: slice / 2, calls: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := New(cfg)
			startMs := float64(testNow.Add(tt.start).UnixMilli() - baseMs)
			a.Trace(schema.NewTrace(build(1,
				sp{id: 1, svc: "a", name: "x", kind: server, start: startMs, end: startMs + 10},
				sp{id: 2, parent: 1, svc: "a", name: "y", kind: client, start: startMs + 1, end: startMs + 9},
			)), testNow)
			edges := a.Edges(testNow.Add(tt.at))
			var calls uint64
			for _, e := range edges {
				calls += e.Calls
			}
			require.Equal(t, tt.calls, calls)
			require.Equal(t, tt.late, a.Counters().LateSamples)
			if tt.calls == 0 {
				require.Zero(t, a.Counters().Edges, "expired edges are dropped")
			}
		})
	}
}

func TestAnalyzerMaxEdges(t *testing.T) {
	cfg := testConfig()
	cfg.MaxEdges = 2
	a := New(cfg)
	trace := func(n int, callee string, at time.Time) *schema.Trace {
		s := float64(at.UnixMilli() - baseMs)
		return schema.NewTrace(build(n,
			sp{id: 1, svc: "a", name: "x", kind: server, start: s, end: s + 10},
			sp{id: 2, parent: 1, svc: "a", name: "y", kind: client, start: s + 1, end: s + 9, attrs: attrs(peerSvc(callee))},
		))
	}
	a.Trace(trace(1, "b", testNow), testNow)
	a.Trace(trace(2, "c", testNow), testNow)
	a.Trace(trace(3, "d", testNow), testNow)
	a.Trace(trace(4, "b", testNow), testNow)
	require.Equal(t, Counters{Edges: 2, RefusedSamples: 1}, a.Counters())
	require.Len(t, a.Edges(testNow), 2)

	// Once the old edges have left the window, a new edge fits again.
	later := testNow.Add(cfg.EdgeWindow + time.Minute)
	a.Trace(trace(5, "d", later), later)
	require.Equal(t, 1, a.Counters().Edges)
	edges := a.Edges(later)
	require.Len(t, edges, 1)
	require.Equal(t, "d", edges[0].CalleeService)
}

func TestAnalyzerConcurrentUse(t *testing.T) {
	a := New(testConfig())
	done := make(chan struct{})
	for g := 0; g < 4; g++ {
		go func(g int) {
			defer func() { done <- struct{}{} }()
			for n := 0; n < 50; n++ {
				a.Trace(schema.NewTrace(retryChain(g*100+n, []int{2, 2}, false)), testNow)
				a.Edges(testNow)
			}
		}(g)
	}
	for g := 0; g < 4; g++ {
		<-done
	}
	var calls uint64
	for _, e := range a.Edges(testNow) {
		calls += e.Calls
	}
	require.EqualValues(t, 4*50*(2+4), calls)
}

// TestLateStopAtTheDeadline checks when a callee counts as stopped at its
// deadline, and so as no latency sample: within a timer's width of it, or,
// when its own span says a timeout or cancellation ended it, up to 20 ms
// more (a loaded machine's late notice: sim/shapes' grpc_deadline callees
// ended 5–12 ms past a 380 ms deadline under the race detector). A callee
// that answers after its deadline, works on past that margin, or times out
// on a longer timeout of its own, counts.
func TestLateStopAtTheDeadline(t *testing.T) {
	ms := func(v float64) *float64 { return &v }
	entry := func(durMs float64, timedOut bool) *schema.Hop {
		return &schema.Hop{Kind: schema.KindServer, StartNs: 2_000_000, DurationNs: uint64(durMs * 1e6), RemainingMs: ms(380), TimedOut: timedOut}
	}
	call := &schema.Hop{Kind: schema.KindClient, StartNs: 1_000_000, DurationNs: 381_000_000, TimedOut: true}
	for _, tc := range []struct {
		name     string
		callee   *schema.Hop
		stopped  bool
		withCall bool
	}{
		{"at its deadline", entry(381, false), true, true},
		{"timed out 12 ms late", entry(392, true), true, true},
		{"timed out 27 ms late, a timer's width and 20 ms", entry(407, true), true, true},
		{"timed out 40 ms late", entry(420, true), false, false},
		{"answered 12 ms late", entry(392, false), false, false},
		{"timed out on a timeout of its own, twice the deadline", entry(760, true), false, false},
		{"timed out early, on a shorter timeout of its own", entry(200, true), false, false},
	} {
		require.Equal(t, tc.stopped, stoppedAtDeadline(tc.callee), "%s: stoppedAtDeadline", tc.name)
		require.Equal(t, tc.withCall, stoppedWithCall(call, tc.callee), "%s: stoppedWithCall", tc.name)
	}
}
