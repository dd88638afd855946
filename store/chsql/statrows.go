package chsql

import (
	"math"

	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/store/chschema"
)

// The interval statistics of a batch of hops, added up in Go as
// chschema.PathStatsSelect and EdgeStatsSelect add them up in the engine:
// the same rows, measure for measure and bucket for bucket.
//
// WriteHops inserts them after the hops, and a re-analysed trace's earlier
// hops are taken out by the same code, negated (undoSuperseded), so a value
// leaves the bucket it went into. The SQL selects are left for the partial
// minutes at a window's ends; storetest's testStatsRowsMatchSQL holds the
// two together on every engine.
//
// Until migration 0025 two materialized views computed these rows from
// every block of hops inserted. The store's own write of a round's hops is
// cheaper this way (docs/performance.md, round 2 steps 52 and 53), yet under
// the harness's load the process spends 11–20 % more CPU a stored span
// than it did with the views (step 53). Where, is still to settle.

// pathStat is one path_stats row.
type pathStat struct {
	intervalNs uint64
	path       string
	role, root uint8
	measure    uint8
	bucket     int32
	n          int64
	total      float64
}

// edgeStat is one edge_stats row.
type edgeStat struct {
	intervalNs                     uint64
	callerService, callerOperation string
	calleeService, calleeOperation string
	measure                        uint8
	bucket                         int32
	n                              int64
	total                          float64
}

// pathStatKey and edgeStatKey are the rows' grouping keys. A path is
// named by its number in the batch (pathNumbers): hashing its text, about
// 110 bytes, for every measure of every hop was most of the adding up.
type pathStatKey struct {
	intervalNs uint64
	path       int32
	role, root uint8
	measure    uint8
	bucket     int32
}

type edgeStatKey struct {
	intervalNs                                                     uint64
	callerService, callerOperation, calleeService, calleeOperation string
	measure                                                        uint8
	bucket                                                         int32
}

// sums is a row's count and sum.
type sums struct {
	n     int64
	total float64
}

// addTo counts value v in row k of rows.
func addTo[K comparable](rows map[K]sums, k K, v float64) {
	s := rows[k]
	s.n++
	s.total += v
	rows[k] = s
}

// pathStatsOf is PathStatsSelect over hops.
func pathStatsOf(hops []schema.Hop) []pathStat {
	rows := make(map[pathStatKey]sums)
	numbers := make(map[string]int32)
	var paths []string
	last, lastNumber := "", int32(-1)
	add := func(k pathStatKey, v float64) { addTo(rows, k, v) }
	for i := range hops {
		h := &hops[i]
		entry, call := isEntryHop(h), isCallHop(h)
		if lastNumber < 0 || h.Path != last {
			n, ok := numbers[h.Path]
			if !ok {
				n = int32(len(paths))
				numbers[h.Path] = n
				paths = append(paths, h.Path)
			}
			last, lastNumber = h.Path, n
		}
		k := pathStatKey{intervalNs: statsInterval(h.StartNs), path: lastNumber, role: chschema.RoleOther, root: b2u(h.ParentSpanID.IsZero())}
		switch {
		case entry:
			k.role = chschema.RoleEntry
		case call:
			k.role = chschema.RoleCall
		}
		k.measure, k.bucket = chschema.PathOutcome, int32(b2u(h.IsError))+2*int32(b2u(withinBudget(h)))
		add(k, h.OrphanedMs)
		if entry || call {
			d := float64(h.DurationNs) / 1e6
			k.measure, k.bucket = chschema.PathDuration, statsBucket(d)
			add(k, d)
		}
		if h.BudgetMs != nil && entry {
			k.measure, k.bucket = chschema.PathBudget, statsBucket(*h.BudgetMs)
			add(k, *h.BudgetMs)
		}
		if h.PathCalls > 0 {
			k.measure, k.bucket = chschema.PathCalls, int32(h.PathCalls)
			add(k, float64(h.PathCalls))
		}
	}
	out := make([]pathStat, 0, len(rows))
	for k, s := range rows {
		out = append(out, pathStat{intervalNs: k.intervalNs, path: paths[k.path], role: k.role, root: k.root,
			measure: k.measure, bucket: k.bucket, n: s.n, total: s.total})
	}
	return out
}

// edgeStatsOf is EdgeStatsSelect over hops: their calls.
func edgeStatsOf(hops []schema.Hop) []edgeStat {
	rows := make(map[edgeStatKey]sums)
	add := func(k edgeStatKey, v float64) { addTo(rows, k, v) }
	for i := range hops {
		h := &hops[i]
		if !isCallHop(h) {
			continue
		}
		k := edgeStatKey{intervalNs: statsInterval(h.StartNs), callerService: h.CallerService, callerOperation: h.CallerOperation,
			calleeService: h.CalleeService, calleeOperation: h.CalleeOperation}
		k.measure, k.bucket = chschema.EdgeAttempts, int32(b2u(h.Attempt > 1))
		add(k, 0)
		if h.TimeoutMs != nil {
			k.measure, k.bucket = chschema.EdgeTimeout, statsBucket(*h.TimeoutMs)
			add(k, *h.TimeoutMs)
		}
		latency := h.DurationNs
		if h.CalleeDurationNs > 0 {
			latency = h.CalleeDurationNs
		}
		d := float64(latency) / 1e6
		k.measure, k.bucket = chschema.EdgeDuration, statsBucket(d)
		add(k, d)
		if h.InferredTimeoutMs != nil {
			k.measure, k.bucket = chschema.EdgeInferred, statsBucket(*h.InferredTimeoutMs)
			add(k, *h.InferredTimeoutMs)
			k.measure, k.bucket = chschema.EdgeConfidence, statsBucket(h.InferenceConfidence)
			add(k, h.InferenceConfidence)
		}
	}
	out := make([]edgeStat, 0, len(rows))
	for k, s := range rows {
		out = append(out, edgeStat{intervalNs: k.intervalNs, callerService: k.callerService, callerOperation: k.callerOperation,
			calleeService: k.calleeService, calleeOperation: k.calleeOperation, measure: k.measure, bucket: k.bucket, n: s.n, total: s.total})
	}
	return out
}

// statsInterval is the start of the statistics interval of a span start.
func statsInterval(startNs uint64) uint64 {
	return startNs / chschema.StatsIntervalNs * chschema.StatsIntervalNs
}

// isEntryHop and isCallHop are chschema's entryHop and callHop.
func isEntryHop(h *schema.Hop) bool {
	return h.Kind.IsEntry() || h.ParentSpanID.IsZero() && !isCallHop(h)
}

func isCallHop(h *schema.Hop) bool { return h.Kind.IsCall() }

// withinBudget is chschema's withinBudget: answered without error inside
// the budget the hop had, or with none known.
func withinBudget(h *schema.Hop) bool {
	d := float64(h.DurationNs)
	return !h.IsError &&
		(h.BudgetMs == nil || d <= *h.BudgetMs*1e6) &&
		(h.RemainingMs == nil || !isCallHop(h) || d <= *h.RemainingMs*1e6)
}

// statsBucketsPerLog is 1/ln(StatsBucketGrowth), as chschema's bucketOf
// writes it into the SQL (17 significant digits, so the engine reads the
// same float64).
var statsBucketsPerLog = 1 / math.Log(chschema.StatsBucketGrowth)

// statsBucket is chschema's bucketOf: the value's logarithm to the base
// StatsBucketGrowth, rounded half to even as the engine rounds a Float64;
// values of 0 and below share the lowest bucket.
func statsBucket(v float64) int32 {
	if !(v > 0) {
		return math.MinInt32
	}
	return int32(math.RoundToEven(math.Log(v) * statsBucketsPerLog))
}
