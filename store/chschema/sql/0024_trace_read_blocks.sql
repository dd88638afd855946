-- A trace read (its spans, and its hops for the trace view) decompresses,
-- for each column and each granule that holds one of the trace's rows, the
-- whole compressed block around that granule. By default a block is cut
-- only once it holds 64 KiB (up to 1 MiB), so a granule of a narrow column
-- (512 rows of a UInt64 are 4 KiB) shares its block with dozens of others,
-- all decompressed to read it. Blocks of 8 to 64 KiB cut what one trace
-- read decompresses. Measured on chDB 26.7 with the query benchmark's 10 M
-- spans copied into one merged wide part per setting, random trace reads
-- alternated: the spans read 14.6 → 9.5 ms p50 for 66.5 → 68.6 bytes per
-- span, the hops read 13.0 → 7.0 ms for 51.7 → 53.3 (docs/performance.md).
-- Parts written before this migration keep their blocks until they are
-- merged. Servers that do not list both settings in
-- system.merge_tree_settings keep the defaults (Features.CompressBlocks).
{{- if .CompressBlocks}}
ALTER TABLE {{.DB}}.spans MODIFY SETTING min_compress_block_size = 8192, max_compress_block_size = 65536;
ALTER TABLE {{.DB}}.hops MODIFY SETTING min_compress_block_size = 8192, max_compress_block_size = 65536;
{{- end}}
