-- The interval statistics are added up by the store, not by materialized
-- views: WriteHops inserts each batch's path_stats and edge_stats rows
-- after its hops (chsql.pathStatsOf, edgeStatsOf: the rows the views'
-- selects made). The views' aggregation cost the engine about 5 µs a hop,
-- more than the hops' own insert (docs/performance.md, round 2 step 52).
-- A budgetd still on an older version writing to this database after the
-- migration stores hops without their statistics until it is upgraded.
-- DROP TABLE drops a view on every server version (18.16 has no DROP
-- VIEW).
DROP TABLE IF EXISTS {{.DB}}.path_stats_mv;
DROP TABLE IF EXISTS {{.DB}}.edge_stats_mv;
