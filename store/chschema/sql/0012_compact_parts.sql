-- Inserts write compact parts (one file for all columns) rather than wide
-- ones (two files per column and array size stream) until a merged part
-- reaches 256 MiB. A drainer batch of 20,000 spans is past the default
-- 10 MB threshold, so every insert wrote a hundred-odd files, and every merge
-- of them read and rewrote as many: measured on chDB 26.7, 20,000-span
-- inserts of realistic spans went from 50k to 61k spans/s and from 25.9 to
-- 21.5 CPU seconds per million spans (docs/performance.md).
{{- if .CompactParts}}
ALTER TABLE {{.DB}}.spans MODIFY SETTING min_bytes_for_wide_part = 268435456;
ALTER TABLE {{.DB}}.trace_index MODIFY SETTING min_bytes_for_wide_part = 268435456;
ALTER TABLE {{.DB}}.hops MODIFY SETTING min_bytes_for_wide_part = 268435456;
ALTER TABLE {{.DB}}.findings MODIFY SETTING min_bytes_for_wide_part = 268435456;
{{- end}}
