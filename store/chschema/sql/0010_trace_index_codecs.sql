-- The trace-id lookup holds a row per trace and service of every batch:
-- about half a row per span, and its random hex ids and unsorted times were
-- stored with the default LZ4, a quarter of the bytes per stored span.
-- ZSTD brings the ids to their entropy and the times to a few bytes. Parts
-- written before this migration keep LZ4 until they are merged.
{{- if .Codecs}}
ALTER TABLE {{.DB}}.trace_index MODIFY COLUMN trace_id String CODEC(ZSTD(1));
ALTER TABLE {{.DB}}.trace_index MODIFY COLUMN start_ns UInt64 CODEC(ZSTD(1));
ALTER TABLE {{.DB}}.trace_index MODIFY COLUMN end_ns UInt64 CODEC(ZSTD(1));
{{- end}}
