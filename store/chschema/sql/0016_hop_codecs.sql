-- The hops table kept the default LZ4 on its random hex ids and its
-- unsorted times: a third of its bytes. ZSTD brings the ids near their
-- entropy, as it did for the trace-id lookup (0010): measured on chDB 26.7
-- with 1 M analysed hops, 72.4 → 49.1 bytes per hop, with the insert and
-- merge CPU within the run-to-run spread (docs/performance.md). Parts
-- written before this migration keep LZ4 until they are merged.
{{- if .Codecs}}
ALTER TABLE {{.DB}}.hops MODIFY COLUMN trace_id String CODEC(ZSTD(1));
ALTER TABLE {{.DB}}.hops MODIFY COLUMN span_id String CODEC(ZSTD(1));
ALTER TABLE {{.DB}}.hops MODIFY COLUMN parent_span_id String CODEC(ZSTD(1));
ALTER TABLE {{.DB}}.hops MODIFY COLUMN duration_ns UInt64 CODEC(ZSTD(1));
ALTER TABLE {{.DB}}.hops MODIFY COLUMN callee_duration_ns UInt64 DEFAULT 0 CODEC(ZSTD(1));
ALTER TABLE {{.DB}}.hops MODIFY COLUMN analyzed_ns UInt64 DEFAULT 0 CODEC(ZSTD(1));
{{- end}}
