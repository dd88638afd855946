package chsql

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/store"
	"github.com/budgetd/budgetd/store/chschema"
)

// The paths, edges and totals reads sum the interval statistics
// (chschema/stats.go) for the whole minutes of their window, and
// aggregate the hops of its partial minutes at either end the same way,
// in the same query: a window of a second reads hops only, a window of
// whole minutes (the API's windows relative to now) none.

// statsSince remembers when the interval statistics began: minutes before
// it read hops (0019_interval_stats.sql). Once read it does not change.
type statsSince struct {
	mu    sync.Mutex
	ns    uint64
	known bool
}

// statsStart returns the time from which path_stats and edge_stats hold
// every hop. While the record cannot be read (a replica of it not yet
// fetched) the reads read hops, as before the statistics.
func (s *Store) statsStart(ctx context.Context) (uint64, bool, error) {
	s.since.mu.Lock()
	defer s.since.mu.Unlock()
	if s.since.known {
		return s.since.ns, true, nil
	}
	var n, since uint64
	err := s.queryOne(ctx, "SELECT count(), max(since_ns) FROM "+s.db+".stats_since", nil, &n, &since)
	if err != nil {
		return 0, false, wrapCtx(ctx, fmt.Errorf("read when the interval statistics began: %w", err))
	}
	if n == 0 {
		return 0, false, nil
	}
	s.since.ns, s.since.known = since, true
	return since, true, nil
}

// statsSplit divides window w into the whole statistics intervals
// [from, to) at or after start, read from the statistics, and the rest,
// read from the hops. from == to when no whole interval is in it.
func statsSplit(w store.Window, start uint64, known bool) (from, to uint64) {
	const iv = chschema.StatsIntervalNs
	if !known {
		return w.SinceNs, w.SinceNs
	}
	lo := max(w.SinceNs, start)
	from = lo / iv * iv
	if from < lo {
		if from > math.MaxUint64-iv {
			return w.SinceNs, w.SinceNs
		}
		from += iv
	}
	until := w.Until()
	to = until / iv * iv
	if until%iv == iv-1 && to <= math.MaxUint64-iv {
		to += iv // the last interval ends exactly at until
	}
	if from >= to {
		return w.SinceNs, w.SinceNs
	}
	return from, to
}

// statsQuery is the query that sums the statistics rows of window w: the
// table's for whole intervals, and selectOf's aggregate of the hops (with
// cols, the latest analysis of each span: see latestHops) for the rest.
// keys are the columns it groups by besides measure and bucket; where,
// when set, filters the statistics rows (on keys, measure and bucket).
func (s *Store) statsQuery(ctx context.Context, w store.Window, table string, keys, cols string,
	selectOf func(from string) string, where string) (string, Params, error) {
	start, known, err := s.statsStart(ctx)
	if err != nil {
		return "", nil, err
	}
	from, to := statsSplit(w, start, known)
	rowCols := keys + ", measure, bucket, n, total"
	var parts []string
	if from < to {
		part := "SELECT " + rowCols + " FROM " + s.db + "." + table + " WHERE interval_ns >= {from:UInt64} AND interval_ns < {to:UInt64}"
		if where != "" {
			part += " AND " + where
		}
		parts = append(parts, part)
	}
	// A window of whole intervals reads no hops: even a read of none
	// costs the index analysis of every part of the hops.
	if from == to || w.SinceNs < from || to <= w.Until() {
		dedup, err := s.anyReanalysed(ctx, w.SinceNs)
		if err != nil {
			return "", nil, err
		}
		hops := s.latestHops(cols, "start_ns >= {since:UInt64} AND start_ns <= {until:UInt64} AND (start_ns < {from:UInt64} OR start_ns >= {to:UInt64})", dedup)
		part := "SELECT " + rowCols + " FROM (" + selectOf(hops) + ")"
		if where != "" {
			part += " WHERE " + where
		}
		parts = append(parts, part)
	}
	q := "SELECT " + keys + ", measure, toInt64(bucket), sum(n) AS sn, sum(total) FROM (" + strings.Join(parts, " UNION ALL ") +
		") GROUP BY " + keys + ", measure, bucket HAVING sn > 0"
	return q, Params{P("since", w.SinceNs), P("until", w.Until()), P("from", from), P("to", to)}, nil
}

// bucketCount is one bucket of a measured value: n values summing to total.
type bucketCount struct {
	bucket int64
	n      int64
	total  float64
}

// histogram is a measure's buckets over a window, in no order.
type histogram []bucketCount

func (h histogram) count() int64 {
	var n int64
	for _, b := range h {
		n += b.n
	}
	return n
}

// quantile returns the q-quantile of the values, each bucket's values
// taken as their mean, interpolated between neighbouring ranks as
// ClickHouse's quantile is; NaN when there are none.
func (h histogram) quantile(q float64) float64 {
	n := h.count()
	if n == 0 {
		return math.NaN()
	}
	slices.SortFunc(h, func(a, b bucketCount) int { return cmp.Compare(a.bucket, b.bucket) })
	rank := q * float64(n-1)
	lo := int64(rank)
	at := func(k int64) float64 {
		for _, b := range h {
			if k < b.n {
				return b.total / float64(b.n)
			}
			k -= b.n
		}
		last := h[len(h)-1]
		return last.total / float64(last.n)
	}
	v := at(lo)
	if frac := rank - float64(lo); frac > 0 && lo+1 < n {
		v += frac * (at(lo+1) - v)
	}
	return v
}

// median is quantile(0.5), nil when there are no values.
func (h histogram) median() *float64 {
	if h.count() == 0 {
		return nil
	}
	v := h.quantile(0.5)
	return &v
}

// highest is the largest bucket holding a value (for a measure whose
// bucket is the value), 0 when none does.
func (h histogram) highest() int64 {
	var top int64
	for _, b := range h {
		if b.n > 0 && b.bucket > top {
			top = b.bucket
		}
	}
	return top
}

func (h histogram) mean() float64 {
	n, total := h.count(), 0.0
	if n == 0 {
		return 0
	}
	for _, b := range h {
		total += b.total
	}
	return total / float64(n)
}

// roleFigures are a path's hops of one role over a window.
type roleFigures struct {
	hops, errors, within int64
	durations            histogram
}

// pathFigures are one path's statistics over a window.
type pathFigures struct {
	roles    [3]roleFigures // by chschema.Role*
	orphaned float64
	budgets  histogram // of entry hops
	calls    histogram // calls per trace
}

// pathRequests counts the requests of p (requests).
func pathRequests(p *pathFigures) int64 { return p.requests().hops }

// requests are the path's entry hops, or the calls to it when it has
// none: the callee of a path that ends at an uninstrumented service (a
// database, a third party) records no span. Counting both would count
// every instrumented call twice.
func (p *pathFigures) requests() *roleFigures {
	if p.roles[chschema.RoleEntry].hops > 0 {
		return &p.roles[chschema.RoleEntry]
	}
	return &p.roles[chschema.RoleCall]
}

// pathFiguresOf reads the path statistics of window w, by path; only the
// measures listed are read, all of them when none is.
func (s *Store) pathFiguresOf(ctx context.Context, w store.Window, measures ...int) (map[string]*pathFigures, error) {
	where := ""
	if len(measures) > 0 {
		where = "measure IN (" + joinNumbers(measures) + ")"
	}
	q, params, err := s.statsQuery(ctx, w, "path_stats", "path, role", chschema.PathStatsColumns, chschema.PathStatsSelect, where)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*pathFigures)
	err = s.eachRow(ctx, q, params, func(r Rows) error {
		var path string
		var role, measure uint8
		var b bucketCount
		if err := r.Scan(&path, &role, &measure, &b.bucket, &b.n, &b.total); err != nil {
			return err
		}
		if role > chschema.RoleCall {
			return fmt.Errorf("path statistics: role %d", role)
		}
		p := out[path]
		if p == nil {
			p = &pathFigures{}
			out[path] = p
		}
		rf := &p.roles[role]
		switch measure {
		case chschema.PathOutcome:
			rf.hops += b.n
			if b.bucket&1 != 0 {
				rf.errors += b.n
			}
			if b.bucket&2 != 0 {
				rf.within += b.n
			}
			p.orphaned += b.total
		case chschema.PathDuration:
			rf.durations = append(rf.durations, b)
		case chschema.PathBudget:
			if role == chschema.RoleEntry {
				p.budgets = append(p.budgets, b)
			}
		case chschema.PathCalls:
			p.calls = append(p.calls, b)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read path statistics: %w", err)
	}
	return out, nil
}

// busiest returns the keys of figures with requests, the most requested
// first (ties in key order), at most limit of them.
func busiest[K comparable, V any](figures map[K]V, requests func(V) int64, compareKeys func(a, b K) int, limit int) []K {
	var keys []K
	for k, v := range figures {
		if requests(v) > 0 {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b K) int {
		return cmp.Or(cmp.Compare(requests(figures[b]), requests(figures[a])), compareKeys(a, b))
	})
	return keys[:min(len(keys), limit)]
}

// Paths implements store.Store.
func (s *Store) Paths(ctx context.Context, w store.Window, limit int) ([]store.PathStats, error) {
	figures, err := s.pathFiguresOf(ctx, w)
	if err != nil {
		return nil, err
	}
	keys := busiest(figures, pathRequests, strings.Compare, clampLimit(limit, 10_000))
	out := make([]store.PathStats, 0, len(keys))
	index := make(map[string]int, len(keys))
	for _, path := range keys {
		f := figures[path]
		req := f.requests()
		index[path] = len(out)
		out = append(out, store.PathStats{
			Path: path, Requests: uint64(req.hops), Errors: uint64(req.errors), WithinBudget: uint64(req.within),
			P50DurationMs: req.durations.quantile(0.5), P99DurationMs: req.durations.quantile(0.99),
			P50BudgetMs: f.budgets.median(), OrphanedMs: f.orphaned,
			MaxCallsPerTrace: uint64(f.calls.highest()), MeanCallsPerTrace: f.calls.mean(),
			FindingsByKind: make(map[schema.Kind]uint64),
		})
	}
	if len(out) == 0 {
		return out, nil
	}
	dedup, err := s.anyReanalysed(ctx, w.SinceNs)
	if err != nil {
		return nil, err
	}
	q := "SELECT path, kind, " + distinctFindings + " FROM " + s.currentFindings(findingWindow, dedup) + " GROUP BY path, kind"
	err = s.eachRow(ctx, q, Params{P("since", w.SinceNs), P("until", w.Until())}, func(r Rows) error {
		var path, kind string
		var n uint64
		if err := r.Scan(&path, &kind, &n); err != nil {
			return err
		}
		if i, ok := index[path]; ok {
			out[i].FindingsByKind[schema.Kind(kind)] += n
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read findings per path: %w", err)
	}
	return out, nil
}

// PathRequests implements store.Store.
func (s *Store) PathRequests(ctx context.Context, w store.Window, limit int) (map[string]uint64, error) {
	figures, err := s.pathFiguresOf(ctx, w, chschema.PathOutcome)
	if err != nil {
		return nil, err
	}
	out := make(map[string]uint64)
	for _, path := range busiest(figures, pathRequests, strings.Compare, clampLimit(limit, 10_000)) {
		out[path] = uint64(pathRequests(figures[path]))
	}
	return out, nil
}

// edgeKey names an edge.
type edgeKey struct{ callerService, callerOperation, calleeService, calleeOperation string }

func compareEdgeKeys(a, b edgeKey) int {
	return cmp.Or(cmp.Compare(a.callerService, b.callerService), cmp.Compare(a.callerOperation, b.callerOperation),
		cmp.Compare(a.calleeService, b.calleeService), cmp.Compare(a.calleeOperation, b.calleeOperation))
}

// edgeFigures are one edge's statistics over a window.
type edgeFigures struct {
	calls, retries                                     int64
	timeouts, durations, inferred, inferenceConfidence histogram
}

// Edges implements store.Store.
func (s *Store) Edges(ctx context.Context, w store.Window, limit int) ([]store.EdgeStats, error) {
	q, params, err := s.statsQuery(ctx, w, "edge_stats", "caller_service, caller_operation, callee_service, callee_operation",
		chschema.EdgeStatsColumns, chschema.EdgeStatsSelect, "")
	if err != nil {
		return nil, err
	}
	figures := make(map[edgeKey]*edgeFigures)
	err = s.eachRow(ctx, q, params, func(r Rows) error {
		var k edgeKey
		var measure uint8
		var b bucketCount
		if err := r.Scan(&k.callerService, &k.callerOperation, &k.calleeService, &k.calleeOperation, &measure, &b.bucket, &b.n, &b.total); err != nil {
			return err
		}
		e := figures[k]
		if e == nil {
			e = &edgeFigures{}
			figures[k] = e
		}
		switch measure {
		case chschema.EdgeAttempts:
			e.calls += b.n
			if b.bucket == 1 {
				e.retries += b.n
			}
		case chschema.EdgeTimeout:
			e.timeouts = append(e.timeouts, b)
		case chschema.EdgeDuration:
			e.durations = append(e.durations, b)
		case chschema.EdgeInferred:
			e.inferred = append(e.inferred, b)
		case chschema.EdgeConfidence:
			e.inferenceConfidence = append(e.inferenceConfidence, b)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read edge statistics: %w", err)
	}
	keys := busiest(figures, func(e *edgeFigures) int64 { return e.calls }, compareEdgeKeys, clampLimit(limit, 10_000))
	out := make([]store.EdgeStats, 0, len(keys))
	for _, k := range keys {
		e := figures[k]
		es := store.EdgeStats{CallerService: k.callerService, CallerOperation: k.callerOperation,
			CalleeService: k.calleeService, CalleeOperation: k.calleeOperation,
			Calls: uint64(e.calls), Retries: uint64(e.retries), MedianTimeoutMs: e.timeouts.median(),
			P50DurationMs: e.durations.quantile(0.5), P99DurationMs: e.durations.quantile(0.99),
			InferredTimeoutMs: e.inferred.median()}
		if es.InferredTimeoutMs != nil {
			es.InferredTimeoutConfidence = e.inferenceConfidence.quantile(0.5)
		}
		out = append(out, es)
	}
	return out, nil
}

// Totals implements store.Store.
func (s *Store) Totals(ctx context.Context, w store.Window) (store.Totals, error) {
	t := store.Totals{FindingsByKind: make(map[schema.Kind]uint64)}
	q, params, err := s.statsQuery(ctx, w, "path_stats", "root", chschema.PathStatsColumns, chschema.PathStatsSelect,
		"root = 1 AND measure = "+strconv.Itoa(chschema.PathOutcome))
	if err != nil {
		return t, err
	}
	err = s.eachRow(ctx, q, params, func(r Rows) error {
		var root, measure uint8
		var b bucketCount
		if err := r.Scan(&root, &measure, &b.bucket, &b.n, &b.total); err != nil {
			return err
		}
		t.Requests += uint64(b.n)
		if b.bucket&2 != 0 {
			t.WithinBudget += uint64(b.n)
		}
		return nil
	})
	if err != nil {
		return t, fmt.Errorf("read totals: %w", err)
	}
	dedup, err := s.anyReanalysed(ctx, w.SinceNs)
	if err != nil {
		return t, err
	}
	err = s.eachRow(ctx, "SELECT kind, "+distinctFindings+" FROM "+s.currentFindings(findingWindow, dedup)+" GROUP BY kind",
		Params{P("since", w.SinceNs), P("until", w.Until())}, func(r Rows) error {
			var kind string
			var n uint64
			if err := r.Scan(&kind, &n); err != nil {
				return err
			}
			t.FindingsByKind[schema.Kind(kind)] = n
			return nil
		})
	if err != nil {
		return t, fmt.Errorf("read finding totals: %w", err)
	}
	return t, nil
}

// eachRow runs query and calls fn for every row.
func (s *Store) eachRow(ctx context.Context, query string, params Params, fn func(Rows) error) error {
	rows, err := s.conn.Query(ctx, query, params)
	if err != nil {
		return wrapCtx(ctx, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return wrapCtx(ctx, err)
		}
	}
	return wrapCtx(ctx, rows.Err())
}

// joinNumbers lists xs for SQL: "1, 2, 3".
func joinNumbers[T ~int | ~uint64](xs []T) string {
	var b strings.Builder
	for i, x := range xs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.FormatUint(uint64(x), 10))
	}
	return b.String()
}
