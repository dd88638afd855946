-- Zero-instrumentation inference: for hops that recorded no timeout or no
-- budget, what budgetd estimated from timing (the call's timeout from its
-- edge's timed-out calls, the time left before a caller above stopped
-- waiting) and how sure it is. Edge figures report the inferred timeout next
-- to the recorded one.
ALTER TABLE {{.DB}}.hops ADD COLUMN inferred_timeout_ms Nullable(Float64);
ALTER TABLE {{.DB}}.hops ADD COLUMN inferred_remaining_ms Nullable(Float64);
ALTER TABLE {{.DB}}.hops ADD COLUMN inference_confidence Float64 DEFAULT 0;
