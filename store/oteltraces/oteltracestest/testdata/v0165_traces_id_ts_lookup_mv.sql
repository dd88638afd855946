-- Copied verbatim from github.com/open-telemetry/opentelemetry-collector-contrib/exporter/clickhouseexporter@v0.165.0
-- internal/sqltemplates/traces_id_ts_lookup_mv.sql (Apache License 2.0, Copyright The OpenTelemetry Authors).
-- Placeholders: see oteltracestest.go.
CREATE MATERIALIZED VIEW IF NOT EXISTS "%s"."%s_trace_id_ts_mv" %s
TO "%s"."%s_trace_id_ts"
AS SELECT
              TraceId,
              min(Timestamp) as Start,
              max(Timestamp) as End
   FROM "%s"."%s"
   WHERE TraceId != ''
   GROUP BY TraceId

