-- How far `serve` has followed an external traces table
-- (follow.otel_traces, docs/formats.md): every trace whose latest span end
-- is at or before position_ns has been handed to the write path. One row
-- per poll that moved the position; the position only grows, so reads take
-- max(position_ns) per source whether or not the parts merged yet, and the
-- merges keep one row per source.
CREATE TABLE IF NOT EXISTS {{.DB}}.follow_positions (
    source String,
    position_ns UInt64,
    saved_ns UInt64
) ENGINE = ReplacingMergeTree(position_ns)
ORDER BY source;
