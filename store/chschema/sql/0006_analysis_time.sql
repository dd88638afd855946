-- When each hop was analysed. A trace analysed again (late spans re-opened
-- it) writes a second set of hops and findings; reads keep only the latest
-- analysis of each span, and the findings of a trace's latest analysis.
ALTER TABLE {{.DB}}.hops ADD COLUMN analyzed_ns UInt64 DEFAULT 0;
