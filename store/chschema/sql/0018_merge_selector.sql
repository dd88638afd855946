-- Merges were the largest single cost of ingest: a quarter of the process's
-- CPU while loaded, more while the drain catches up. The merge selector
-- merges parts once about merge_selector_base of them add up (5 by
-- default), so every row is rewritten about log_base(final / inserted
-- size) times; and its heuristic to lower the merge width while a
-- partition has few parts makes the merges narrower still. A wider base
-- (10) and no narrowing heuristic rewrite each row fewer times, for a few
-- more parts at a time (still far below parts_to_delay_insert). Measured
-- with the harness on chDB 26.7, three runs each, alternated:
-- 21,219 → 27,776 stored spans/s and 86.9 → 64.6 CPU seconds per million
-- (medians; docs/performance.md). Servers that do not list both settings
-- in system.merge_tree_settings keep the defaults (Features.MergeSelector).
{{- if .MergeSelector}}
ALTER TABLE {{.DB}}.spans MODIFY SETTING merge_selector_base = 10, merge_selector_enable_heuristic_to_lower_max_parts_to_merge_at_once = 0;
ALTER TABLE {{.DB}}.trace_index MODIFY SETTING merge_selector_base = 10, merge_selector_enable_heuristic_to_lower_max_parts_to_merge_at_once = 0;
ALTER TABLE {{.DB}}.hops MODIFY SETTING merge_selector_base = 10, merge_selector_enable_heuristic_to_lower_max_parts_to_merge_at_once = 0;
ALTER TABLE {{.DB}}.findings MODIFY SETTING merge_selector_base = 10, merge_selector_enable_heuristic_to_lower_max_parts_to_merge_at_once = 0;
{{- end}}
