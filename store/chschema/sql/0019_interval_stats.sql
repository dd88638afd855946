-- Path and edge statistics per minute of span start (chschema/stats.go):
-- the paths, edges and totals reads sum these rows for the whole minutes
-- of their window instead of grouping every hop in it. Materialized views
-- fill them from every block of hops inserted; the store inserts a
-- re-analysed trace's superseded hops again with the opposite sign, so
-- the counts and sums are those of the latest analysis of each span.
-- Rows are counts and sums, merged by SummingMergeTree. path_stats sorts
-- by measure first: the requests per path (the problems list) and the
-- totals read the outcome rows alone. Where the server has
-- insert_deduplication_token, a view's block carries a token derived from
-- its hops insert's, so a retried batch (its hops deduplicated) adds
-- nothing here either, and two batches whose rows are alike both count.
CREATE TABLE IF NOT EXISTS {{.DB}}.path_stats (
    interval_ns UInt64,
    path {{lc "String"}},
    role UInt8,
    root UInt8,
    measure UInt8,
    bucket Int32,
    n Int64,
    total Float64
) ENGINE = SummingMergeTree((n, total))
PARTITION BY toYYYYMMDD(toDateTime(intDiv(interval_ns, 1000000000), 'UTC'))
ORDER BY (measure, interval_ns, path, role, root, bucket)
{{- if .TTLDays}}
TTL toDateTime(intDiv(interval_ns, 1000000000), 'UTC') + INTERVAL {{.TTLDays}} DAY{{end}}
{{- if .DedupToken}}
SETTINGS non_replicated_deduplication_window = 10000{{end}};
CREATE TABLE IF NOT EXISTS {{.DB}}.edge_stats (
    interval_ns UInt64,
    caller_service {{lc "String"}},
    caller_operation {{lc "String"}},
    callee_service {{lc "String"}},
    callee_operation {{lc "String"}},
    measure UInt8,
    bucket Int32,
    n Int64,
    total Float64
) ENGINE = SummingMergeTree((n, total))
PARTITION BY toYYYYMMDD(toDateTime(intDiv(interval_ns, 1000000000), 'UTC'))
ORDER BY (interval_ns, caller_service, caller_operation, callee_service, callee_operation, measure, bucket)
{{- if .TTLDays}}
TTL toDateTime(intDiv(interval_ns, 1000000000), 'UTC') + INTERVAL {{.TTLDays}} DAY{{end}}
{{- if .DedupToken}}
SETTINGS non_replicated_deduplication_window = 10000{{end}};
CREATE MATERIALIZED VIEW IF NOT EXISTS {{.DB}}.path_stats_mv TO {{.DB}}.path_stats{{.Local}} AS
{{pathStats .DB .Local}};
CREATE MATERIALIZED VIEW IF NOT EXISTS {{.DB}}.edge_stats_mv TO {{.DB}}.edge_stats{{.Local}} AS
{{edgeStats .DB .Local}};
-- Hops stored before the views existed are in no statistics: reads take
-- the statistics only for minutes from since_ns on, and read the hops
-- before it. A database that had no hops yet has had statistics of every
-- hop (0). Two stores migrating at once may both insert: reads take the
-- latest since_ns.
CREATE TABLE IF NOT EXISTS {{.DB}}.stats_since (
    since_ns UInt64
) ENGINE = MergeTree
ORDER BY since_ns;
INSERT INTO {{.DB}}.stats_since SELECT if((SELECT count() FROM {{.DB}}.hops) = 0, toUInt64(0), toUInt64(now()) * 1000000000);
