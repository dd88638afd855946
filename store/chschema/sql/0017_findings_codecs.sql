-- The findings table kept the default LZ4 on its random hex ids, its
-- evidence and its detection times. ZSTD, as on the hops (0016): measured on
-- chDB 26.7 with the findings of 500 k analysed benchmark spans (about 108 k
-- findings), 21.2 → 12.5 bytes per stored span, the ids halved and the
-- evidence keys a third. Parts written before this migration keep LZ4 until
-- they are merged.
{{- if .Codecs}}
ALTER TABLE {{.DB}}.findings MODIFY COLUMN id String CODEC(ZSTD(1));
ALTER TABLE {{.DB}}.findings MODIFY COLUMN trace_id String CODEC(ZSTD(1));
ALTER TABLE {{.DB}}.findings MODIFY COLUMN span_id String CODEC(ZSTD(1));
ALTER TABLE {{.DB}}.findings MODIFY COLUMN detected_ns UInt64 CODEC(ZSTD(1));
ALTER TABLE {{.DB}}.findings MODIFY COLUMN evidence_keys Array(String) CODEC(ZSTD(1));
ALTER TABLE {{.DB}}.findings MODIFY COLUMN evidence_values Array(Float64) CODEC(ZSTD(1));
{{- end}}
