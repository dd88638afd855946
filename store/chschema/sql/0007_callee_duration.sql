-- How long the callee's own span took, for calls whose callee recorded one.
-- A call that timed out ends at the caller's timeout; the callee's latency
-- is what edge p50/p99 must compare against the caller's timeout.
ALTER TABLE {{.DB}}.hops ADD COLUMN callee_duration_ns UInt64 DEFAULT 0;
