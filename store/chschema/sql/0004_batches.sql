-- Dedup tokens of written batches, for servers without
-- insert_deduplication_token (ClickHouse before 22.2): a batch whose token is
-- here is not written again.
CREATE TABLE IF NOT EXISTS {{.DB}}.batches (
    token String,
    tbl String,
    rows UInt64,
    written_ns UInt64
) ENGINE = MergeTree
PARTITION BY toYYYYMMDD(toDateTime(intDiv(written_ns, 1000000000), 'UTC'))
ORDER BY (token, tbl)
{{- if .TTLDays}}
TTL toDateTime(intDiv(written_ns, 1000000000), 'UTC') + INTERVAL {{.TTLDays}} DAY{{end}};
