-- Copied verbatim from github.com/open-telemetry/opentelemetry-collector-contrib, commit
-- 06be845f9092760211363b68092b96b4bdedf842, exporter/clickhouseexporter/exporter_traces.go
-- (Apache License 2.0, Copyright The OpenTelemetry Authors): the layout before ScopeName
-- and ScopeVersion became columns, with a signed Duration and SPAN_KIND_*/STATUS_CODE_* values.
-- createTraceIDTsTableSQL. Placeholders: see oteltracestest.go.
create table IF NOT EXISTS %s_trace_id_ts (
     TraceId String CODEC(ZSTD(1)),
     Start DateTime64(9) CODEC(Delta, ZSTD(1)),
     End DateTime64(9) CODEC(Delta, ZSTD(1)),
     INDEX idx_trace_id TraceId TYPE bloom_filter(0.01) GRANULARITY 1
) ENGINE MergeTree()
%s
ORDER BY (TraceId, toUnixTimestamp(Start))
SETTINGS index_granularity=8192;
