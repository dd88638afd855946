package storetest

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/store"
	"github.com/budgetd/budgetd/store/chschema"
)

// testIntervalStats holds the paths, edges and totals reads, which sum
// interval statistics for whole minutes and aggregate hops for the rest,
// to the same figures computed here from the hops themselves (the latest
// analysis of each span in the window): over windows of whole minutes,
// of partial ones, within one minute and of all time; after a trace is
// analysed again (and its batch retried); with two batches whose
// statistics are alike; and over hops stored before the statistics began.
func testIntervalStats(t *testing.T, h Harness) {
	s, db := open(t, h)
	ctx := ctxT(t)
	const minute = chschema.StatsIntervalNs
	base := uint64(1_700_000_000_000_000_000) / minute * minute
	t1, t2 := base+3_600e9, base+3_700e9
	var written []schema.Hop
	write := func(token string, hops []schema.Hop) {
		t.Helper()
		require.NoError(t, s.WriteHops(ctx, token, hops))
		written = append(written, hops...)
	}
	// 60 traces over five minutes, one every 5 s: an entry, a call to an
	// instrumented service (and its entry), a call to a database; some
	// retried, some failed, some over budget.
	trace := func(r int, start, analyzed uint64) []schema.Hop {
		root := schema.Hop{TraceID: tid(r), SpanID: sid(r * 10), Service: "gw", Operation: "GET /", Kind: schema.KindServer,
			Path: "gw:GET /", StartNs: start, DurationNs: uint64(50+r*7) * 1e6, BudgetMs: schema.Ms(400),
			IsError: r%11 == 0, OrphanedMs: float64(r % 3), PathCalls: 1, AnalyzedNs: analyzed}
		call := schema.Hop{TraceID: tid(r), SpanID: sid(r*10 + 1), ParentSpanID: root.SpanID, Service: "gw", Operation: "GET api",
			Kind: schema.KindClient, Path: "gw:GET / > api:get", CallerService: "gw", CallerOperation: "GET /",
			CalleeService: "api", CalleeOperation: "get", StartNs: start + 1e6, DurationNs: uint64(20+r) * 1e6,
			TimeoutMs: schema.Ms(250), RemainingMs: schema.Ms(float64(390 - r*3)), Attempt: 1, PathCalls: 1, AnalyzedNs: analyzed}
		entry := schema.Hop{TraceID: tid(r), SpanID: sid(r*10 + 2), ParentSpanID: call.SpanID, Service: "api", Operation: "get",
			Kind: schema.KindServer, Path: "gw:GET / > api:get", StartNs: start + 2e6, DurationNs: uint64(18+r) * 1e6,
			BudgetMs: schema.Ms(float64(388 - r*3)), PathCalls: 1, AnalyzedNs: analyzed}
		hops := []schema.Hop{root, call, entry}
		attempts := 1 + r%4/3 // every fourth trace retries its database call
		for a := 1; a <= attempts; a++ {
			db := schema.Hop{TraceID: tid(r), SpanID: sid(r*10 + 2 + a), ParentSpanID: entry.SpanID, Service: "api", Operation: "SELECT",
				Kind: schema.KindClient, Path: "gw:GET / > api:get > db:query", CallerService: "api", CallerOperation: "get",
				CalleeService: "db", CalleeOperation: "query", StartNs: start + 3e6 + uint64(a)*1e6, DurationNs: uint64(5+r%9) * 1e6,
				Attempt: uint32(a), IsError: a < attempts, AnalyzedNs: analyzed}
			if a == 1 {
				db.PathCalls = uint32(attempts)
			}
			if r%5 == 0 {
				db.InferredTimeoutMs, db.InferenceConfidence = schema.Ms(100), 0.5
			}
			hops = append(hops, db)
		}
		return hops
	}
	var batch []schema.Hop
	for r := range 60 {
		batch = append(batch, trace(r, base+uint64(r)*5e9, t1)...)
	}
	write("stats-1", batch)

	windows := map[string]store.Window{
		"whole minutes":                      {SinceNs: base + minute, UntilNs: base + 4*minute - 1},
		"partial minutes":                    {SinceNs: base + 37e9, UntilNs: base + 3*minute + 22e9},
		"within a minute":                    {SinceNs: base + 2*minute + 10e9, UntilNs: base + 2*minute + 40e9},
		"all time":                           {},
		"across the start of the statistics": {SinceNs: base + 2*minute + 10e9, UntilNs: base + 7*minute + 5e9},
	}
	check := func(stage string) {
		t.Helper()
		for name, w := range windows {
			compareStats(t, s, w, latestHops(written), stage+", "+name)
		}
	}
	check("first analysis")

	// Trace 7 is analysed again with a span that had not arrived: its
	// database call is now the callee of a cache, its root slower.
	again := trace(7, base+7*5e9, t2)
	again[0].DurationNs = 990e6
	again[3].Path, again[3].CallerService, again[3].CallerOperation = "gw:GET / > api:get > cache:get > db:query", "cache", "get"
	again = append(again, schema.Hop{TraceID: tid(7), SpanID: sid(79), ParentSpanID: again[2].SpanID, Service: "api", Operation: "GET cache",
		Kind: schema.KindClient, Path: "gw:GET / > api:get > cache:get", CallerService: "api", CallerOperation: "get",
		CalleeService: "cache", CalleeOperation: "get", StartNs: again[2].StartNs + 1, DurationNs: 2e6, AnalyzedNs: t2})
	require.NoError(t, s.WriteReanalysed(ctx, "stats-2", []schema.TraceID{tid(7)}, t2))
	write("stats-2", again)
	check("after a re-analysis")
	// The pipeline retries a batch whose answer it lost under its token.
	require.NoError(t, s.WriteHops(ctx, "stats-2", again))
	check("after the re-analysis's batch is retried")

	// Two batches whose statistics rows are alike (same paths, minutes,
	// buckets) are both counted.
	write("stats-twin-a", trace(1000, base+4*minute+30e9, t1))
	write("stats-twin-b", trace(1001, base+4*minute+30e9, t1))
	check("after two alike batches")

	// A re-analysed trace of more spans than one undo statement names.
	big := func(analyzed uint64, durationMs uint64) []schema.Hop {
		hops := make([]schema.Hop, 2100)
		for i := range hops {
			hops[i] = schema.Hop{TraceID: tid(3000), SpanID: sid(30000 + i), Service: "batch", Operation: "item", Kind: schema.KindConsumer,
				Path: "batch:item", StartNs: base + 3*minute + uint64(i)*1e6, DurationNs: durationMs * 1e6, AnalyzedNs: analyzed}
			if i > 0 {
				hops[i].ParentSpanID = sid(30000 + i - 1)
			}
		}
		return hops
	}
	write("stats-big-1", big(t1, 10))
	require.NoError(t, s.WriteReanalysed(ctx, "stats-big-2", []schema.TraceID{tid(3000)}, t2))
	write("stats-big-2", big(t2, 20))
	check("after a re-analysis of 2,100 spans")

	// Hops stored before the statistics began (a database migrated to
	// 0019 with hops in it) are read from the hops: empty the statistics,
	// as if the hops so far had been stored before the views, and say the
	// statistics begin after them, in the sixth minute.
	for _, table := range []string{"path_stats", "edge_stats"} {
		require.NoError(t, s.Conn().Exec(ctx, truncate(s, db, table), nil))
	}
	require.NoError(t, s.Conn().Exec(ctx, "INSERT INTO "+db+".stats_since SELECT toUInt64("+strconv.FormatUint(base+5*minute+1, 10)+")", nil))
	reopened, err := h.Open(ctx, db)
	require.NoError(t, err)
	t.Cleanup(func() { _ = reopened.Close() })
	s = reopened
	var later []schema.Hop
	for r := range 12 {
		later = append(later, trace(2000+r, base+5*minute+uint64(r)*10e9, t1)...)
	}
	write("stats-later", later)
	check("with hops from before the statistics")
}

// truncate is the statement that empties table of db: its local tables
// on every host of a cluster.
func truncate(s interface{ Cluster() string }, db, table string) string {
	if s.Cluster() != "" {
		return "TRUNCATE TABLE " + db + "." + table + chschema.LocalSuffix + " ON CLUSTER " + s.Cluster()
	}
	return "TRUNCATE TABLE " + db + "." + table
}

// latestHops keeps the latest analysis of each span, as the reads do.
func latestHops(hops []schema.Hop) []schema.Hop {
	type key struct {
		trace schema.TraceID
		span  schema.SpanID
	}
	latest := make(map[key]int)
	var order []key
	for i, h := range hops {
		k := key{h.TraceID, h.SpanID}
		j, ok := latest[k]
		if !ok {
			order = append(order, k)
		}
		if !ok || h.AnalyzedNs >= hops[j].AnalyzedNs {
			latest[k] = i
		}
	}
	out := make([]schema.Hop, 0, len(order))
	for _, k := range order {
		out = append(out, hops[latest[k]])
	}
	return out
}

func isCall(h schema.Hop) bool { return h.Kind == schema.KindClient || h.Kind == schema.KindProducer }

func isEntry(h schema.Hop) bool {
	return h.Kind == schema.KindServer || h.Kind == schema.KindConsumer || (h.ParentSpanID.IsZero() && !isCall(h))
}

func withinBudget(h schema.Hop) bool {
	return !h.IsError && (h.BudgetMs == nil || float64(h.DurationNs) <= *h.BudgetMs*1e6) &&
		(h.RemainingMs == nil || !isCall(h) || float64(h.DurationNs) <= *h.RemainingMs*1e6)
}

// quantile is ClickHouse's quantile of exact values: interpolated between
// neighbouring ranks.
func quantile(values []float64, q float64) float64 {
	if len(values) == 0 {
		return math.NaN()
	}
	v := slices.Sorted(slices.Values(values))
	r := q * float64(len(v)-1)
	lo := int(r)
	if lo+1 < len(v) {
		return v[lo] + (r-float64(lo))*(v[lo+1]-v[lo])
	}
	return v[lo]
}

// compareStats checks the reads over window w against the figures of
// hops (each span's latest analysis).
func compareStats(t *testing.T, s store.Store, w store.Window, hops []schema.Hop, what string) {
	t.Helper()
	ctx := ctxT(t)
	type pathRef struct {
		entries, calls             []schema.Hop
		orphaned                   float64
		maxCalls, sumCalls, nCalls uint64
	}
	paths := map[string]*pathRef{}
	type edgeRef struct{ calls []schema.Hop }
	edges := map[[4]string]*edgeRef{}
	var roots, rootsWithin uint64
	for _, h := range hops {
		if h.StartNs < w.SinceNs || h.StartNs > w.Until() {
			continue
		}
		p := paths[h.Path]
		if p == nil {
			p = &pathRef{}
			paths[h.Path] = p
		}
		p.orphaned += h.OrphanedMs
		if h.PathCalls > 0 {
			p.maxCalls, p.sumCalls, p.nCalls = max(p.maxCalls, uint64(h.PathCalls)), p.sumCalls+uint64(h.PathCalls), p.nCalls+1
		}
		switch {
		case isEntry(h):
			p.entries = append(p.entries, h)
		case isCall(h):
			p.calls = append(p.calls, h)
			k := [4]string{h.CallerService, h.CallerOperation, h.CalleeService, h.CalleeOperation}
			if edges[k] == nil {
				edges[k] = &edgeRef{}
			}
			edges[k].calls = append(edges[k].calls, h)
		}
		if h.ParentSpanID.IsZero() {
			roots++
			if withinBudget(h) {
				rootsWithin++
			}
		}
	}

	got, err := s.Paths(ctx, w, 0)
	require.NoError(t, err, what)
	requests, err := s.PathRequests(ctx, w, 0)
	require.NoError(t, err, what)
	wantRequests := map[string]uint64{}
	for path, p := range paths {
		req := p.entries
		if len(req) == 0 {
			req = p.calls
		}
		if len(req) > 0 {
			wantRequests[path] = uint64(len(req))
		}
	}
	require.Equal(t, wantRequests, requests, "%s: PathRequests", what)
	require.Len(t, got, len(wantRequests), "%s: paths", what)
	for i, g := range got {
		if i > 0 {
			require.True(t, got[i-1].Requests > g.Requests || got[i-1].Requests == g.Requests && got[i-1].Path < g.Path, "%s: busiest first", what)
		}
		p := paths[g.Path]
		require.NotNil(t, p, "%s: path %s", what, g.Path)
		req := p.entries
		if len(req) == 0 {
			req = p.calls
		}
		var errs, within uint64
		var durations, budgets []float64
		for _, h := range req {
			durations = append(durations, float64(h.DurationNs)/1e6)
			if h.IsError {
				errs++
			}
			if withinBudget(h) {
				within++
			}
		}
		for _, h := range p.entries {
			if h.BudgetMs != nil {
				budgets = append(budgets, *h.BudgetMs)
			}
		}
		at := what + ", path " + g.Path
		require.EqualValues(t, len(req), g.Requests, at)
		require.Equal(t, errs, g.Errors, at)
		require.Equal(t, within, g.WithinBudget, at)
		require.InDelta(t, p.orphaned, g.OrphanedMs, 1e-6, at)
		require.Equal(t, p.maxCalls, g.MaxCallsPerTrace, at)
		if p.nCalls > 0 {
			require.InDelta(t, float64(p.sumCalls)/float64(p.nCalls), g.MeanCallsPerTrace, 1e-9, at)
		} else {
			require.Zero(t, g.MeanCallsPerTrace, at)
		}
		// A bucket stands for its values' mean: within 2.5 % of the value.
		require.InEpsilon(t, quantile(durations, 0.5), g.P50DurationMs, 0.025, at)
		require.InEpsilon(t, quantile(durations, 0.99), g.P99DurationMs, 0.025, at)
		requireMedian(t, budgets, g.P50BudgetMs, 0.025, at+", budget")
	}

	gotEdges, err := s.Edges(ctx, w, 0)
	require.NoError(t, err, what)
	require.Len(t, gotEdges, len(edges), what)
	for _, g := range gotEdges {
		e := edges[[4]string{g.CallerService, g.CallerOperation, g.CalleeService, g.CalleeOperation}]
		at := what + ", edge " + g.CallerService + " > " + g.CalleeService
		require.NotNil(t, e, at)
		var retries uint64
		var durations, timeouts, inferred []float64
		for _, h := range e.calls {
			if h.Attempt > 1 {
				retries++
			}
			d := h.DurationNs
			if h.CalleeDurationNs > 0 {
				d = h.CalleeDurationNs
			}
			durations = append(durations, float64(d)/1e6)
			if h.TimeoutMs != nil {
				timeouts = append(timeouts, *h.TimeoutMs)
			}
			if h.InferredTimeoutMs != nil {
				inferred = append(inferred, *h.InferredTimeoutMs)
			}
		}
		require.EqualValues(t, len(e.calls), g.Calls, at)
		require.Equal(t, retries, g.Retries, at)
		require.InEpsilon(t, quantile(durations, 0.5), g.P50DurationMs, 0.025, at)
		require.InEpsilon(t, quantile(durations, 0.99), g.P99DurationMs, 0.025, at)
		// Equal values are exact.
		requireMedian(t, timeouts, g.MedianTimeoutMs, 1e-12, at+", timeout")
		requireMedian(t, inferred, g.InferredTimeoutMs, 1e-12, at+", inferred timeout")
	}
	require.True(t, slices.IsSortedFunc(gotEdges, func(a, b store.EdgeStats) int { return cmp.Compare(b.Calls, a.Calls) }), what)

	tot, err := s.Totals(ctx, w)
	require.NoError(t, err, what)
	require.Equal(t, roots, tot.Requests, "%s: totals", what)
	require.Equal(t, rootsWithin, tot.WithinBudget, "%s: totals", what)
}

// requireMedian checks a median read (nil when there were no values)
// against the median of values, within a relative tolerance.
func requireMedian(t *testing.T, values []float64, got *float64, tolerance float64, at string) {
	t.Helper()
	if len(values) == 0 {
		require.Nil(t, got, at)
		return
	}
	require.NotNil(t, got, at)
	require.InEpsilon(t, quantile(values, 0.5), *got, tolerance, at)
}

// statRow is a statistics row read back: its keys as text, its count and
// sum.
type statRow struct {
	key   string
	n     int64
	total float64
}

// testStatsRowsMatchSQL holds the statistics rows WriteHops inserts, added
// up in Go, to what chschema.PathStatsSelect and EdgeStatsSelect make of
// the same stored hops in the engine (what the materialized views of
// migration 0019 inserted until 0025, and what the partial minutes of a
// window and a re-analysis's undo still read): the same rows, key for key
// and bucket for bucket, the same counts, and sums equal but for the
// order they were added in. The hops are the benchmarks' analysed fill
// and hand-made edge cases: no budget, a zero duration, a root call, a
// retry, an inferred timeout, sub-millisecond values (negative buckets).
// Then part of them is analysed again: what the store takes out of the
// statistics for the earlier analysis (undoSuperseded) must be exactly
// what it added.
func testStatsRowsMatchSQL(t *testing.T, h Harness) {
	s, db := open(t, h)
	ctx := ctxT(t)
	hops := append(HopBatch(11, 2000), HopBatch(12, 2000)...)
	start := hops[0].StartNs
	edge := []schema.Hop{
		{TraceID: tid(900), SpanID: sid(9000), Service: "cli", Operation: "GET", Kind: schema.KindClient, Path: "cli:GET",
			CallerService: "cli", CallerOperation: "GET", CalleeService: "api", CalleeOperation: "get", StartNs: start,
			DurationNs: 0, Attempt: 2, TimeoutMs: schema.Ms(0.25), InferredTimeoutMs: schema.Ms(300), InferenceConfidence: 0.8, PathCalls: 3},
		{TraceID: tid(901), SpanID: sid(9010), Service: "api", Operation: "job", Kind: schema.KindInternal, Path: "api:job",
			StartNs: start + 61e9, DurationNs: 400_000, OrphanedMs: 0.4},
		{TraceID: tid(902), SpanID: sid(9020), ParentSpanID: sid(9019), Service: "q", Operation: "consume", Kind: schema.KindConsumer,
			Path: "p:send > q:consume", StartNs: start + 1, DurationNs: 7e9, BudgetMs: schema.Ms(5000), IsError: true},
		{TraceID: tid(902), SpanID: sid(9021), ParentSpanID: sid(9020), Service: "q", Operation: "send", Kind: schema.KindProducer,
			Path: "p:send > q:consume > r:put", CallerService: "q", CallerOperation: "consume", CalleeService: "r", CalleeOperation: "put",
			StartNs: start + 2, DurationNs: 3e6, CalleeDurationNs: 2_500_000, RemainingMs: schema.Ms(2), Attempt: 1},
	}
	hops = append(hops, edge...)
	require.NoError(t, s.WriteHops(ctx, "stats-rows", hops))
	read := func(q string) []statRow {
		t.Helper()
		rows, err := s.Conn().Query(ctx, q, nil)
		require.NoError(t, err)
		defer rows.Close()
		var out []statRow
		for rows.Next() {
			var r statRow
			require.NoError(t, rows.Scan(&r.key, &r.n, &r.total))
			out = append(out, r)
		}
		require.NoError(t, rows.Err())
		return out
	}
	same := func(what string, stored, want []statRow) {
		t.Helper()
		require.NotEmpty(t, want, what)
		got := make(map[string]statRow, len(stored))
		for _, r := range stored {
			got[r.key] = r
		}
		for _, w := range want {
			g, ok := got[w.key]
			require.True(t, ok, "%s: no stored row %s", what, w.key)
			require.Equal(t, w.n, g.n, "%s %s", what, w.key)
			require.InDelta(t, w.total, g.total, 1e-9*math.Max(1, math.Abs(w.total)), "%s %s", what, w.key)
		}
		require.Equal(t, len(want), len(stored), "%s: stored rows the engine's select does not make", what)
	}
	pathKey := "concat(toString(interval_ns), '|', path, '|', toString(role), '|', toString(root), '|', toString(measure), '|', toString(bucket))"
	edgeKey := "concat(toString(interval_ns), '|', caller_service, '|', caller_operation, '|', callee_service, '|', callee_operation, '|', toString(measure), '|', toString(bucket))"
	// Rows whose counts add up to zero are what an undo took out: the
	// engine drops them when it merges.
	check := func(stage, hops string) {
		t.Helper()
		same("path_stats "+stage,
			read("SELECT "+pathKey+" AS k, toInt64(sum(n)) AS n, sum(total) FROM "+db+".path_stats GROUP BY k HAVING n != 0"),
			read("SELECT "+pathKey+" AS k, toInt64(n), total FROM ("+chschema.PathStatsSelect(hops)+")"))
		same("edge_stats "+stage,
			read("SELECT "+edgeKey+" AS k, toInt64(sum(n)) AS n, sum(total) FROM "+db+".edge_stats GROUP BY k HAVING n != 0"),
			read("SELECT "+edgeKey+" AS k, toInt64(n), total FROM ("+chschema.EdgeStatsSelect(hops)+")"))
	}
	check("as written", db+".hops")

	// Every trace of the edge cases and of the first 500 hops analysed
	// again, slower, with other budgets and timeouts: the undo must take
	// out, bucket for bucket, every row the first analysis added, which
	// the rows of the latest analysis of each span then equal.
	var traces []schema.TraceID
	seen := make(map[schema.TraceID]bool)
	var again []schema.Hop
	for _, hp := range append(hops[:500:500], edge...) {
		if !seen[hp.TraceID] {
			seen[hp.TraceID] = true
			traces = append(traces, hp.TraceID)
		}
	}
	later := uint64(0)
	for _, hp := range hops {
		later = max(later, hp.AnalyzedNs)
	}
	later += 1e9
	for _, hp := range hops {
		if !seen[hp.TraceID] {
			continue
		}
		hp.AnalyzedNs = later
		hp.DurationNs = hp.DurationNs*3/2 + 1000
		if hp.BudgetMs != nil {
			hp.BudgetMs = schema.Ms(*hp.BudgetMs * 0.9)
		}
		if hp.TimeoutMs == nil {
			hp.TimeoutMs = schema.Ms(750)
		}
		hp.Attempt++
		again = append(again, hp)
	}
	require.NoError(t, s.WriteReanalysed(ctx, "stats-rows-again", traces, later))
	require.NoError(t, s.WriteHops(ctx, "stats-rows-again", again))
	check("after a re-analysis", "(SELECT * FROM "+db+".hops ORDER BY analyzed_ns DESC LIMIT 1 BY trace_id, span_id)")
}
