// The paths page: per call path, traffic, latency, the budget callers had,
// the work done after they gave up, retry fan-out and findings.

import { get } from './api.js';
import { h } from './dom.js';
import { filterForm, hashFor, windowCaption, windowFields } from './forms.js';
import { KINDS, kindLabel, ms, number, pathNode, percent, stat } from './format.js';
import { sortableTable } from './table.js';

export async function renderPaths(route, signal) {
  const p = route.params;
  const win = { since: p.get('since') || '', until: p.get('until') || '' };
  const [paths, summary] = await Promise.all([
    get('paths', { ...win, limit: 1000 }, signal),
    get('summary', win, signal),
  ]);

  const form = filterForm('paths', 'Time window', windowFields(p));
  const columns = [
    { label: 'Path', numeric: false, key: (r) => r.path,
      cell: (r) => h('a', { href: hashFor('findings', { path: r.path }), class: 'plain', title: 'Findings on this path' }, pathNode(r.path)) },
    { label: 'Requests', key: (r) => r.requests, cell: (r) => number(r.requests, 0) },
    { label: 'Error rate', key: (r) => r.error_rate, cell: (r) => percent(r.error_rate) },
    { label: 'p50', title: 'Median duration', key: (r) => r.p50_duration_ms, cell: (r) => ms(r.p50_duration_ms) },
    { label: 'p99', title: '99th percentile duration', key: (r) => r.p99_duration_ms, cell: (r) => ms(r.p99_duration_ms) },
    { label: 'p50 budget', title: 'Median budget left when the hop started', key: (r) => r.p50_budget_ms,
      cell: (r) => ms(r.p50_budget_ms) },
    { label: 'Orphaned', title: 'Seconds of work done after the caller gave up (orphaned work)',
      key: (r) => r.orphaned_work_seconds, cell: (r) => `${number(r.orphaned_work_seconds, 2)} s`,
      cellClass: (r) => (r.orphaned_work_seconds > 0 ? 'orphaned' : null) },
    { label: 'Max calls', title: 'Most calls of this path in one trace (retry fan-out)', key: (r) => r.max_calls_per_trace, cell: (r) => number(r.max_calls_per_trace, 0),
      cellClass: (r) => (r.max_calls_per_trace >= 3 ? 'amplified' : null) },
    { label: 'Mean calls', title: 'Mean calls of this path per trace', key: (r) => r.mean_calls_per_trace, cell: (r) => number(r.mean_calls_per_trace, 2) },
    { label: 'Goodput', title: 'Share of requests that finished within their budget', key: (r) => r.goodput,
      cell: (r) => percent(r.goodput) },
    { label: 'Findings', numeric: false, key: (r) => totalFindings(r), cell: (r) => findingsCell(r) },
  ];

  const body = paths.paths.length === 0
    ? h('p', { class: 'empty' }, 'No analysed requests in this window. Widen it with Since.')
    : sortableTable(`Call paths, ${windowCaption(paths.window)}`, columns, paths.paths, 6, true, 'paths');

  return h('section', { class: 'page-paths' },
    h('h1', null, 'Paths'),
    h('p', { class: 'lede' }, 'Every call path budgetd analysed in the window. Sort by a column; open a path to see its findings.'),
    form,
    summaryList(summary),
    body);
}

function totalFindings(r) {
  return Object.values(r.findings_by_kind || {}).reduce((a, b) => a + b, 0);
}

function findingsCell(r) {
  const items = KINDS.filter((k) => (r.findings_by_kind || {})[k] > 0).map((k) => h('li', null,
    h('a', { href: hashFor('findings', { path: r.path, kind: k }) }, `${kindLabel(k)} ${number(r.findings_by_kind[k], 0)}`)));
  return items.length ? h('ul', { class: 'kinds' }, items) : h('span', { class: 'muted' }, 'none');
}

function summaryList(s) {
  return h('dl', { class: 'summary', 'aria-label': 'Totals in the window' },
    stat('Requests', number(s.requests, 0)),
    stat('Within budget', number(s.within_budget, 0)),
    stat('Goodput', percent(s.goodput)),
    stat('Throughput', `${number(s.throughput_rps, 2)} req/s`),
    stat('Findings', number(Object.values(s.findings_by_kind || {}).reduce((a, b) => a + b, 0), 0)));
}
