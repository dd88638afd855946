-- The hops' budget figures (remaining, budget, timeout, orphaned time) kept
-- the default LZ4: 17.6 of a hop's 48.6 bytes at 400,000 analysed spans of
-- the query benchmark's fill on chDB 26.7. ZSTD takes them to 12.8 (43.6
-- bytes a hop); Gorilla before ZSTD did worse on these values, which are
-- mostly whole milliseconds, not a slowly moving series. Parts written
-- before this migration keep LZ4 until they are merged.
{{- if .Codecs}}
ALTER TABLE {{.DB}}.hops MODIFY COLUMN remaining_ms Nullable(Float64) CODEC(ZSTD(1));
ALTER TABLE {{.DB}}.hops MODIFY COLUMN budget_ms Nullable(Float64) CODEC(ZSTD(1));
ALTER TABLE {{.DB}}.hops MODIFY COLUMN timeout_ms Nullable(Float64) CODEC(ZSTD(1));
ALTER TABLE {{.DB}}.hops MODIFY COLUMN orphaned_ms Float64 CODEC(ZSTD(1));
{{- end}}
