-- How many times a trace went down a path, on the first hop of each path in
-- the trace (0 elsewhere): calls per trace per path become a plain
-- aggregate over the window instead of a grouping of every hop by path and
-- trace, which dominated the paths query at millions of spans. Hops written
-- before this migration have 0, and count for no path's calls per trace.
ALTER TABLE {{.DB}}.hops ADD COLUMN path_calls UInt32 DEFAULT 0;
