-- Problems (docs/problems.md): per problem and interval, how many trace
-- findings it had, in how many requests, and their impact. The findings
-- table keeps full detail for at most problems.examples_per_interval
-- findings per problem and interval (the examples); these sums count every
-- one. Parts merge into one row per problem and interval; reads sum all the
-- same, since merges come when they come. A finding of a re-analysed trace
-- is counted once: the analysis counts only the finding ids it adds.
CREATE TABLE IF NOT EXISTS {{.DB}}.problem_stats (
    problem_id String,
    kind {{lc "String"}},
    caller_service {{lc "String"}},
    caller_operation {{lc "String"}},
    callee_service {{lc "String"}},
    callee_operation {{lc "String"}},
    path String{{codec "ZSTD(1)"}},
    interval_ns UInt64,
    findings UInt64,
    requests UInt64,
    impact Float64
) ENGINE = SummingMergeTree((findings, requests, impact))
PARTITION BY toYYYYMMDD(toDateTime(intDiv(interval_ns, 1000000000), 'UTC'))
ORDER BY (problem_id, interval_ns)
{{- if .TTLDays}}
TTL toDateTime(intDiv(interval_ns, 1000000000), 'UTC') + INTERVAL {{.TTLDays}} DAY{{end}}
{{- if .DedupToken}}
SETTINGS non_replicated_deduplication_window = 10000{{end}};
