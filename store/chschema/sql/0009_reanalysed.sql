-- Traces analysed more than once: a trace re-opened by late spans is
-- analysed again, whole, and writes its hops and findings a second time.
-- Reads deduplicate hops per span, and keep only the latest findings, for
-- these traces alone; every other trace's rows are read as they are, so the
-- aggregates over a window need no per-span deduplication of the whole
-- window. The analysis writes the row before the trace's new hops.
CREATE TABLE IF NOT EXISTS {{.DB}}.reanalysed (
    trace_id String,
    analyzed_ns UInt64
) ENGINE = MergeTree
PARTITION BY toYYYYMMDD(toDateTime(intDiv(analyzed_ns, 1000000000), 'UTC'))
ORDER BY (trace_id, analyzed_ns)
{{- if .TTLDays}}
TTL toDateTime(intDiv(analyzed_ns, 1000000000), 'UTC') + INTERVAL {{.TTLDays}} DAY{{end}}
{{- if .DedupToken}}
SETTINGS non_replicated_deduplication_window = 10000{{end}};
