-- A view with the column names and types of the OpenTelemetry Collector's
-- ClickHouse exporter table, so Grafana's ClickHouse data source trace view
-- works on budgetd's spans unchanged. Needs Map and DateTime64 (current
-- servers only).
{{- if .OtelView}}
CREATE VIEW IF NOT EXISTS {{.DB}}.otel_traces AS
SELECT
    fromUnixTimestamp64Nano(toInt64(start_ns), 'UTC') AS Timestamp,
    trace_id AS TraceId,
    span_id AS SpanId,
    parent_span_id AS ParentSpanId,
    trace_state AS TraceState,
    name AS SpanName,
    multiIf(kind = 1, 'Internal', kind = 2, 'Server', kind = 3, 'Client', kind = 4, 'Producer', kind = 5, 'Consumer', 'Unspecified') AS SpanKind,
    service AS ServiceName,
    mapFromArrays(resource_attr_keys, resource_attr_values) AS ResourceAttributes,
    scope_name AS ScopeName,
    scope_version AS ScopeVersion,
    mapFromArrays(attr_keys, attr_values) AS SpanAttributes,
    end_ns - start_ns AS Duration,
    multiIf(status_code = 1, 'Ok', status_code = 2, 'Error', 'Unset') AS StatusCode,
    status_message AS StatusMessage,
    arrayMap(t -> fromUnixTimestamp64Nano(toInt64(t), 'UTC'), event_times) AS `Events.Timestamp`,
    event_names AS `Events.Name`,
    arrayMap((k, v) -> mapFromArrays(k, v), event_attr_keys, event_attr_values) AS `Events.Attributes`,
    link_trace_ids AS `Links.TraceId`,
    link_span_ids AS `Links.SpanId`,
    link_trace_states AS `Links.TraceState`,
    arrayMap((k, v) -> mapFromArrays(k, v), link_attr_keys, link_attr_values) AS `Links.Attributes`
FROM {{.DB}}.spans
{{- end}};
