-- Detector results in the shape of DESIGN §5. Evidence is a pair of parallel
-- arrays (key, value).
CREATE TABLE IF NOT EXISTS {{.DB}}.findings (
    id String,
    kind {{lc "String"}},
    severity {{lc "String"}},
    trace_id String,
    span_id String,
    service {{lc "String"}},
    operation {{lc "String"}},
    caller_service {{lc "String"}},
    callee_service {{lc "String"}},
    path String{{codec "ZSTD(1)"}},
    detected_ns UInt64,
    evidence_keys Array(String),
    evidence_values Array(Float64),
    message String{{codec "ZSTD(1)"}}
) ENGINE = MergeTree
PARTITION BY toYYYYMMDD(toDateTime(intDiv(detected_ns, 1000000000), 'UTC'))
ORDER BY (detected_ns, id)
{{- if .TTLDays}}
TTL toDateTime(intDiv(detected_ns, 1000000000), 'UTC') + INTERVAL {{.TTLDays}} DAY{{end}}
{{- if .DedupToken}}
SETTINGS non_replicated_deduplication_window = 10000{{end}};
