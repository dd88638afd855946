-- Copied verbatim from github.com/open-telemetry/opentelemetry-collector-contrib, commit
-- 06be845f9092760211363b68092b96b4bdedf842, exporter/clickhouseexporter/exporter_traces.go
-- (Apache License 2.0, Copyright The OpenTelemetry Authors): the layout before ScopeName
-- and ScopeVersion became columns, with a signed Duration and SPAN_KIND_*/STATUS_CODE_* values.
-- createTraceIDTsMaterializedViewSQL. Placeholders: see oteltracestest.go.
CREATE MATERIALIZED VIEW IF NOT EXISTS %s_trace_id_ts_mv
TO %s.%s_trace_id_ts
AS SELECT
TraceId,
min(Timestamp) as Start,
max(Timestamp) as End
FROM
%s.%s
WHERE TraceId!=''
GROUP BY TraceId;
