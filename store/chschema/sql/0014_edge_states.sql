-- Edge statistics shared between replicas (DESIGN §7): every
-- analyze.edge_findings_every each budgetd process writes its window
-- aggregate of every edge (an opaque state the analysis encodes) and
-- judges latency_inversion over its own merged with the other replicas'
-- latest. One row per replica and edge survives merges (the newest); a
-- replica that stopped writing is ignored once its rows are stale, and on
-- servers with TTL its rows go after a day. The table is not partitioned,
-- so merges replace old rows whatever their day.
CREATE TABLE IF NOT EXISTS {{.DB}}.edge_states (
    replica String,
    evaluated_ns UInt64,
    caller_service String,
    caller_operation String,
    callee_service String,
    callee_operation String,
    state String
) ENGINE = ReplacingMergeTree(evaluated_ns)
ORDER BY (replica, caller_service, caller_operation, callee_service, callee_operation)
{{- if .TTL}}
TTL toDateTime(intDiv(evaluated_ns, 1000000000), 'UTC') + INTERVAL 1 DAY{{end}}
{{- if .DedupToken}}
SETTINGS non_replicated_deduplication_window = 10000{{end}};
