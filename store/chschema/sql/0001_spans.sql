-- Raw spans, ordered for per-service scans. Ids are lower-case hex. Attribute
-- lists are parallel key/type/value arrays (see schema.Attr) so the core runs
-- on ClickHouse 18.16 as well as on current versions.
--
-- Granules of 512 rows rather than 8,192: a trace's spans are a few rows
-- in each of its services' ranges, and reading one row decompresses every
-- column from its granule's start (a span's attributes alone are about
-- 2 MB in 8,192 rows). On chDB 26.7, all columns of a trace's spans: with
-- 1 M spans of the query benchmark's fill, 36.7 ms in granules of 8,192,
-- 20.9 in granules of 1,024; with 2 M spans and 14,000 more written a
-- second, 36.9 / 101.7 ms (p50 / p99) in granules of 1,024, 19.9 / 54.5 in
-- granules of 512, for 5 bytes a span more on disk (docs/performance.md,
-- round 2 steps 24 and 33). index_granularity cannot be changed on an
-- existing table: stores created before a change keep what they had.
CREATE TABLE IF NOT EXISTS {{.DB}}.spans (
    trace_id String{{codec "ZSTD(1)"}},
    span_id String{{codec "ZSTD(1)"}},
    parent_span_id String{{codec "ZSTD(1)"}},
    trace_state String{{codec "ZSTD(1)"}},
    service {{lc "String"}},
    name {{lc "String"}},
    kind Int8,
    start_ns UInt64{{codec "Delta, ZSTD(1)"}},
    end_ns UInt64{{codec "Delta, ZSTD(1)"}},
    status_code Int8,
    status_message String{{codec "ZSTD(1)"}},
    scope_name {{lc "String"}},
    scope_version {{lc "String"}},
    resource_attr_keys Array({{lc "String"}}),
    resource_attr_types Array(UInt8),
    resource_attr_values Array(String){{codec "ZSTD(1)"}},
    attr_keys Array({{lc "String"}}),
    attr_types Array(UInt8),
    attr_values Array(String){{codec "ZSTD(1)"}},
    event_times Array(UInt64){{codec "ZSTD(1)"}},
    event_names Array(String){{codec "ZSTD(1)"}},
    event_attr_keys Array(Array(String)){{codec "ZSTD(1)"}},
    event_attr_types Array(Array(UInt8)),
    event_attr_values Array(Array(String)){{codec "ZSTD(1)"}},
    link_trace_ids Array(String){{codec "ZSTD(1)"}},
    link_span_ids Array(String){{codec "ZSTD(1)"}},
    link_trace_states Array(String){{codec "ZSTD(1)"}},
    link_attr_keys Array(Array(String)){{codec "ZSTD(1)"}},
    link_attr_types Array(Array(UInt8)),
    link_attr_values Array(Array(String)){{codec "ZSTD(1)"}}{{if .SkipIndexes}},
    INDEX idx_trace_id trace_id TYPE bloom_filter(0.001) GRANULARITY 1{{end}}
) ENGINE = MergeTree
PARTITION BY toYYYYMMDD(toDateTime(intDiv(start_ns, 1000000000), 'UTC'))
ORDER BY (service, start_ns)
{{- if .TTLDays}}
TTL toDateTime(intDiv(start_ns, 1000000000), 'UTC') + INTERVAL {{.TTLDays}} DAY{{end}}
SETTINGS index_granularity = 512{{if .DedupToken}}, non_replicated_deduplication_window = 10000{{end}};

-- Trace-id lookup: where a trace's spans are (which services, which time
-- range), so trace-by-id reads only the parts that can hold it.
CREATE TABLE IF NOT EXISTS {{.DB}}.trace_index (
    trace_id String,
    service {{lc "String"}},
    start_ns UInt64,
    end_ns UInt64,
    spans UInt32
) ENGINE = MergeTree
PARTITION BY toYYYYMMDD(toDateTime(intDiv(start_ns, 1000000000), 'UTC'))
ORDER BY (trace_id, service)
{{- if .TTLDays}}
TTL toDateTime(intDiv(start_ns, 1000000000), 'UTC') + INTERVAL {{.TTLDays}} DAY{{end}}
{{- if .DedupToken}}
SETTINGS non_replicated_deduplication_window = 10000{{end}};
