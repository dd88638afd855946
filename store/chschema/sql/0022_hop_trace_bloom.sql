-- The trace view reads a trace's hops, but the hops are sorted by path and
-- start, so a read by trace id scanned every path's rows of the trace's
-- time window. A bloom filter on trace_id, as the spans have, skips the
-- granules without the trace: on chDB 26.7 at 1 M spans of the query
-- benchmark's fill, 23.1 → 18.0 ms p50 with granules of 1,024 rows, 31.0 →
-- 26.4 with 8,192 (docs/performance.md). Parts written before this
-- migration have no filter until they are merged.
{{- if .SkipIndexes}}
ALTER TABLE {{.DB}}.hops ADD INDEX idx_trace_id trace_id TYPE bloom_filter(0.001) GRANULARITY 1;
{{- end}}
