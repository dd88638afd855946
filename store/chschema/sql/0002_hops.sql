-- One row per analysed span: its call path and the budget it had. Path and
-- edge figures are GROUP BYs over this table.
--
-- Granules of 1,024 rows rather than 8,192 (stores created since; the
-- setting cannot be changed on an existing table): the trace view reads a
-- trace's hops, a few rows in each path's range, and a row costs every
-- column from its granule's start. With the trace-id bloom filter of 0022,
-- on chDB 26.7 at 1 M spans: 31.0 → 18.0 ms p50 (docs/performance.md).
CREATE TABLE IF NOT EXISTS {{.DB}}.hops (
    trace_id String,
    span_id String,
    parent_span_id String,
    service {{lc "String"}},
    operation {{lc "String"}},
    kind Int8,
    path String{{codec "ZSTD(1)"}},
    root_path String{{codec "ZSTD(1)"}},
    caller_service {{lc "String"}},
    caller_operation {{lc "String"}},
    callee_service {{lc "String"}},
    callee_operation {{lc "String"}},
    start_ns UInt64{{codec "Delta, ZSTD(1)"}},
    duration_ns UInt64,
    is_error UInt8,
    timed_out UInt8,
    remaining_ms Nullable(Float64),
    budget_ms Nullable(Float64),
    budget_source {{lc "String"}},
    timeout_ms Nullable(Float64),
    attempt UInt32,
    max_attempts UInt32,
    orphaned_ms Float64,
    rejected UInt8,
    inferred UInt8
) ENGINE = MergeTree
PARTITION BY toYYYYMMDD(toDateTime(intDiv(start_ns, 1000000000), 'UTC'))
ORDER BY (path, start_ns)
{{- if .TTLDays}}
TTL toDateTime(intDiv(start_ns, 1000000000), 'UTC') + INTERVAL {{.TTLDays}} DAY{{end}}
SETTINGS index_granularity = 1024{{if .DedupToken}}, non_replicated_deduplication_window = 10000{{end}};
