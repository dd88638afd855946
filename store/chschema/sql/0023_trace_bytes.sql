-- A trace read within the API's limits (store.TraceLimits) sized the
-- trace's spans one by one before reading them, so that a trace of huge
-- spans is never read whole: one query of three, 7–20 ms of a 45–75 ms read
-- at 2 M spans on chDB. The lookup now adds up each batch's spans' sizes
-- (chsql.spanBytes, what span_bytes holds), and a trace the lookup shows
-- inside the limits is read at once. Rows written before this migration
-- have 0, and a trace with one of them is sized as before.
ALTER TABLE {{.DB}}.trace_index ADD COLUMN bytes UInt64 DEFAULT 0{{codec "T64, ZSTD(1)"}};
