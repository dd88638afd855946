package chschema

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Interval statistics (0019_interval_stats.sql): the paths, edges and
// totals reads once grouped every hop of their window — ten million rows
// an hour at budgetd's rate. The path_stats and edge_stats tables hold
// what those reads need per minute of span start instead, so a read sums
// a few hundred thousand rows whatever the traffic. The store adds them up
// from every batch of hops it writes (chsql.pathStatsOf, edgeStatsOf,
// which make the rows PathStatsSelect and EdgeStatsSelect make; until
// migration 0025 two materialized views ran these selects on every block
// of hops inserted).
//
// A row is a count and a sum of values (n, total) under a measure and a
// bucket: for a measure of counts (the outcome of a hop, the retry flag of
// a call, the calls per trace) the bucket is the counted value itself;
// for a measure of durations, budgets and timeouts it is the value's
// logarithm to the base StatsBucketGrowth, rounded. Counts and sums can be
// subtracted, which a ClickHouse quantile state cannot: a re-analysed
// trace's earlier analysis is taken out by inserting its rows again with
// the opposite sign (SummingMergeTree adds them up, and drops rows that sum
// to zero). A quantile is read from the buckets, each bucket standing for
// the mean of its values (total / n): exact where the values in a bucket
// are equal (configured timeouts and budgets), within 2.5 % of the value
// otherwise — the quantile ClickHouse computed before was itself
// approximate past 8,192 values. Buckets 2 % wide kept 2.1 times the rows
// of these 5 % wide ones on the query benchmark's hops, and the paths read
// took 1.7 times as long.

// StatsIntervalNs is the interval the statistics are kept per
// (store.StatsInterval): a minute of span start. The partial minutes at the
// ends of a read's window are read from the hops.
const StatsIntervalNs = uint64(60e9)

// StatsBucketGrowth is the ratio between the values of consecutive
// buckets of a measured value.
const StatsBucketGrowth = 1.05

// Measures of path_stats.
const (
	// PathOutcome counts hops by outcome: bucket bit 1 set for a hop
	// that ended in error, bit 2 for a hop answered within its budget
	// (withinBudget). Its total is the hops' orphaned milliseconds.
	PathOutcome  = 0
	PathDuration = 1 // an entry's or a call's duration, in ms
	PathBudget   = 2 // an entry's recorded budget in ms, where it has one
	PathCalls    = 3 // calls per trace (Hop.PathCalls) where written: bucket = value
)

// Measures of edge_stats.
const (
	EdgeAttempts   = 0 // calls; bucket 1 for a retry (attempt > 1), else 0
	EdgeTimeout    = 1 // the caller's recorded timeout, in ms
	EdgeDuration   = 2 // the callee's own latency, or the call's when the callee recorded no span, in ms
	EdgeInferred   = 3 // the timeout budgetd inferred, in ms
	EdgeConfidence = 4 // the confidence of an inferred timeout
)

// Roles of a hop in path_stats.
const (
	RoleOther = 0 // neither: an internal span within a service
	RoleEntry = 1 // entryHop
	RoleCall  = 2 // callHop
)

// entryHop selects the hops where a request enters a service: SERVER and
// CONSUMER spans, and roots that are not calls. callHop selects outgoing
// calls, a root CLIENT span (a trace that starts at a client) included: it
// shares its path with its callee's SERVER span, and counting it as an entry
// too counted such requests twice.
const (
	entryHop = "(kind IN (2, 5) OR (parent_span_id = '' AND kind NOT IN (3, 4)))"
	callHop  = "(kind IN (3, 4))"
)

// withinBudget is true for a hop answered without error inside the budget it
// had (for an entry, its recorded budget; for a call, the time the request
// had left), or with no budget known.
const withinBudget = "is_error = 0 AND (budget_ms IS NULL OR duration_ns <= budget_ms * 1000000)" +
	" AND (remaining_ms IS NULL OR kind NOT IN (3, 4) OR duration_ns <= remaining_ms * 1000000)"

// noMeasure marks a measure a hop has no value for (a budget not
// recorded); its rows are filtered out after the ARRAY JOIN.
const noMeasure = "toUInt8(255)"

// bucketOf is the bucket of a value (a Float64 expression): its logarithm
// to the base StatsBucketGrowth, rounded; values of 0 and below share the
// lowest bucket. The logarithm is taken of at least 1e-300 as ClickHouse
// computes both branches of if().
func bucketOf(v string) string {
	perLog := strconv.FormatFloat(1/math.Log(StatsBucketGrowth), 'g', 17, 64)
	return "if(" + v + " > 0, toInt32(round(log(greatest(" + v + ", 1e-300)) * " + perLog + ")), toInt32(-2147483648))"
}

// A measure is what one hop adds to one statistics row: its measure id
// (noMeasure where the hop has no such value), bucket and value.
type measure struct{ id, bucket, value string }

// measureOf is measure m with bucket and value, present where present is
// true (always when it is empty).
func measureOf(m int, present, bucket, value string) measure {
	id := "toUInt8(" + strconv.Itoa(m) + ")"
	if present != "" {
		id = "if(" + present + ", " + id + ", " + noMeasure + ")"
	}
	return measure{id: id, bucket: "toInt32(" + bucket + ")", value: "toFloat64(" + value + ")"}
}

// statsSelect is the aggregate of the rows of from (a table or a
// subquery) matching where, each joined with its measures (parallel
// arrays: cheaper than an array of tuples filtered with a lambda), grouped
// by keys and the measure and bucket.
func statsSelect(from, where string, keys []string, measures []measure) string {
	var sel, group, ids, buckets, values []string
	for _, k := range keys {
		sel, group = append(sel, k), append(group, alias(k))
	}
	for _, m := range measures {
		ids, buckets, values = append(ids, m.id), append(buckets, m.bucket), append(values, m.value)
	}
	filter := "measure != 255"
	if where != "" {
		filter = where + " AND " + filter
	}
	return "SELECT " + strings.Join(sel, ", ") + ", measure, bucket, toInt64(count()) AS n, sum(value) AS total FROM " + from +
		" ARRAY JOIN [" + strings.Join(ids, ", ") + "] AS measure, [" + strings.Join(buckets, ", ") + "] AS bucket, [" + strings.Join(values, ", ") + "] AS value" +
		" WHERE " + filter + " GROUP BY " + strings.Join(group, ", ") + ", measure, bucket"
}

// alias is the name of key "expr AS name", or the key itself.
func alias(k string) string {
	if i := strings.LastIndex(k, " AS "); i >= 0 {
		return k[i+len(" AS "):]
	}
	return k
}

// intervalOf is the start of the statistics interval of a span start.
var intervalOf = fmt.Sprintf("intDiv(start_ns, %d) * %d AS interval_ns", StatsIntervalNs, StatsIntervalNs)

// PathStatsColumns are the hop columns PathStatsSelect reads.
const PathStatsColumns = "start_ns, path, kind, parent_span_id, is_error, budget_ms, remaining_ms, duration_ns, orphaned_ms, path_calls"

// PathStatsSelect aggregates the hops of from (a table, or a subquery with
// PathStatsColumns) into path_stats rows: per interval, path, role (Role*)
// and whether the hop is a trace's root.
func PathStatsSelect(from string) string {
	keys := []string{
		intervalOf, "path",
		fmt.Sprintf("multiIf(%s, toUInt8(%d), %s, toUInt8(%d), toUInt8(%d)) AS role", entryHop, RoleEntry, callHop, RoleCall, RoleOther),
		"toUInt8(parent_span_id = '') AS root",
	}
	// The reads take durations of entries and calls only, and budgets of
	// entries only (Paths): a measure no read takes is not kept.
	durationMs := "duration_ns / 1000000"
	measures := []measure{
		measureOf(PathOutcome, "", "toInt32(is_error) + 2 * toInt32(ifNull("+withinBudget+", 0))", "orphaned_ms"),
		measureOf(PathDuration, "("+entryHop+" OR "+callHop+")", bucketOf(durationMs), durationMs),
		measureOf(PathBudget, "isNotNull(budget_ms) AND "+entryHop, bucketOf("ifNull(budget_ms, 0)"), "ifNull(budget_ms, 0)"),
		measureOf(PathCalls, "path_calls > 0", "path_calls", "path_calls"),
	}
	return statsSelect(from, "", keys, measures)
}

// EdgeStatsColumns are the hop columns EdgeStatsSelect reads.
const EdgeStatsColumns = "start_ns, kind, caller_service, caller_operation, callee_service, callee_operation, attempt, timeout_ms," +
	" callee_duration_ns, duration_ns, inferred_timeout_ms, inference_confidence"

// EdgeStatsSelect aggregates the calls among the hops of from (a table, or
// a subquery with EdgeStatsColumns) into edge_stats rows: per interval and
// edge.
func EdgeStatsSelect(from string) string {
	keys := []string{intervalOf, "caller_service", "caller_operation", "callee_service", "callee_operation"}
	durationMs := "if(callee_duration_ns > 0, callee_duration_ns, duration_ns) / 1000000"
	measures := []measure{
		measureOf(EdgeAttempts, "", "attempt > 1", "0"),
		measureOf(EdgeTimeout, "isNotNull(timeout_ms)", bucketOf("ifNull(timeout_ms, 0)"), "ifNull(timeout_ms, 0)"),
		measureOf(EdgeDuration, "", bucketOf(durationMs), durationMs),
		measureOf(EdgeInferred, "isNotNull(inferred_timeout_ms)", bucketOf("ifNull(inferred_timeout_ms, 0)"), "ifNull(inferred_timeout_ms, 0)"),
		measureOf(EdgeConfidence, "isNotNull(inferred_timeout_ms)", bucketOf("inference_confidence"), "inference_confidence"),
	}
	return statsSelect(from, callHop, keys, measures)
}
