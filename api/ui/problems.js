// The problems pages. The list is the UI's home: the findings grouped into
// the things to fix (docs/problems.md), in the API's order (largest impact
// first unless another sort is asked for), with filters, paging and each
// problem's state, trend and suggested fix. A problem's own page shows its
// worst evidence, its trend, the paths its findings lie on and its example
// traces, which open the waterfall.

import { ApiError, get } from './api.js';
import { h } from './dom.js';
import {
  activeFilters, filterForm, hashFor, limitField, pagedQuery, pager, windowCaption, windowFields,
} from './forms.js';
import {
  KINDS, STATES, capitalized, evidenceValue, impactText, kindLabel, number, pathNode, percent,
  severityBadge, stat, stateBadge, svcOp, time,
} from './format.js';
import { findingsTable } from './findings.js';
import { headRow, openOnClick } from './table.js';
import { sparkline, trendAxis, trendChart } from './trend.js';

const FILTERS = ['state', 'kind', 'service', 'since', 'until', 'sort', 'limit'];

// windowOf keeps the time window of a route, for the links that leave it.
function windowOf(params) {
  return { since: params.get('since') || '', until: params.get('until') || '' };
}

// problemHref is a problem's page, in the window it was listed in.
export function problemHref(id, win) {
  return hashFor(`problems/${encodeURIComponent(id)}`, win || {});
}

// callName is a problem's edge in words: "order → pricing", or the callee
// alone for a problem at an entry span.
export function callName(p) {
  return p.caller_service ? `${p.caller_service} → ${p.callee_service}` : p.callee_service;
}

export async function renderProblems(route, signal) {
  const p = route.params;
  const query = pagedQuery(p, FILTERS);
  const page = await get('problems', query, signal);
  const win = windowOf(p);

  const form = filterForm('problems', 'Filter problems', [
    { name: 'state', label: 'State', value: query.state,
      options: [['', 'Any state'], ...STATES.map((s) => [s, s])] },
    { name: 'kind', label: 'Kind', value: query.kind,
      options: [['', 'Any kind'], ...KINDS.map((k) => [k, kindLabel(k)])] },
    { name: 'service', label: 'Service', value: query.service, placeholder: 'e.g. order', size: 14,
      hint: 'Caller or callee' },
    ...windowFields(p),
    { name: 'sort', label: 'Order', value: query.sort,
      options: [['', 'Impact'], ['last_seen', 'Last seen'], ['occurrences', 'Occurrences']] },
    limitField(query.limit),
  ]);

  const current = activeFilters(p, FILTERS);
  const pages = pager('problems', current, p, page.next, { label: 'Pages of problems', first: '← Largest impact', next: 'More problems →' });

  const filtered = Object.keys(current).some((k) => k !== 'limit' && k !== 'sort');
  const body = page.problems.length === 0
    ? h('p', { class: 'empty' }, filtered
      ? 'No problem matches these filters.'
      : 'No problems in this window: budgetd found nothing to fix. Widen it with Since.')
    : problemsTable(page, win, query.sort);

  return h('section', { class: 'page-problems' },
    h('h1', null, 'Problems'),
    h('p', { class: 'lede' },
      'What to fix first: the findings grouped by kind and call, largest impact first. Open a problem for its evidence, trend, paths and example traces; ',
      h('a', { href: '#/findings' }, 'the findings'), ' lists the evidence one by one.'),
    form,
    truncatedNote(page.truncated),
    body,
    pages);
}

function truncatedNote(truncated) {
  return truncated
    ? h('p', { class: 'truncated', role: 'status' },
      'The window holds more findings than budgetd groups in one answer (problems.max_findings): these problems are of the newest findings. Narrow the window for the rest.')
    : null;
}

function problemsTable(page, win, sort) {
  const axis = trendAxis(page.window, page.problems);
  const rows = page.problems.map((p) => {
    const href = problemHref(p.id, win);
    const tr = h('tr', { dataset: { problemId: p.id } },
      h('td', { class: 'problem' }, severityBadge(p.severity), ' ', h('a', { href, class: 'problem-link kind' }, kindLabel(p.kind))),
      h('td', { class: 'call' }, callCell(p)),
      h('td', null, stateBadge(p.state)),
      h('td', { class: 'num' }, number(p.occurrences, 0)),
      h('td', { class: 'num' }, number(p.affected_requests, 0),
        p.share !== null && p.share !== undefined
          ? h('span', { class: 'sub', title: 'Share of the requests of the paths its findings lie on' }, `${percent(p.share)} of path requests`) : null),
      h('td', { class: 'num impact' }, impactText(p.impact)),
      h('td', { class: 'trend' }, sparkline(p.trend || [], axis)),
      h('td', { class: 'suggestion' }, p.suggestion));
    openOnClick(tr, href);
    return tr;
  });
  const order = { last_seen: 'most recently seen first', occurrences: 'most occurrences first' }[sort] || 'largest impact first';
  return h('div', { class: 'table-wrap' },
    h('table', { class: 'data problems' },
      h('caption', null, `Problems, ${order}, ${windowCaption(page.window)}`),
      headRow([['Problem'], ['Call'], ['State'], ['Occurrences', true], ['Requests', true, 'Affected requests'],
        ['Impact', true], ['Trend'], ['Suggestion']]),
      h('tbody', null, rows)));
}

// callCell is caller service and operation → callee service and operation.
function callCell(p) {
  const callee = svcOp(p.callee_service, p.callee_operation);
  if (!p.caller_service) return [h('span', { class: 'muted' }, 'entry: '), callee];
  return [svcOp(p.caller_service, p.caller_operation), ' ', h('span', { class: 'callee' }, h('span', { class: 'arrow' }, '→ '), callee)];
}

export async function renderProblem(route, signal) {
  const id = route.arg.trim().toLowerCase();
  if (!/^[0-9a-f]{32}$/.test(id)) {
    throw new Error(`"${route.arg}" is not a problem ID: want 32 hex digits.`);
  }
  const win = windowOf(route.params);
  let res;
  try {
    res = await get(`problems/${id}`, win, signal);
  } catch (err) {
    if (err instanceof ApiError && err.status === 404) return notInWindow(id, route.params);
    throw err;
  }
  const p = res.problem;
  const worstHref = p.worst.trace_id
    ? hashFor(`trace/${encodeURIComponent(p.worst.trace_id)}`, { finding: p.worst.finding_id }) : null;

  return h('section', { class: 'page-problem', dataset: { problemId: p.id } },
    h('p', { class: 'crumbs' }, h('a', { href: hashFor('problems', win) }, 'Problems'), ' / problem'),
    h('h1', null, `${capitalized(kindLabel(p.kind))}: ${callName(p)}`),
    h('p', { class: 'badges-line' }, severityBadge(p.severity), ' ', stateBadge(p.state), ' ',
      h('span', { class: 'muted' }, callCell(p))),
    truncatedNote(res.truncated),
    h('section', { class: 'fix', 'aria-labelledby': 'fix-h' },
      h('h2', { id: 'fix-h' }, 'Suggested fix'),
      h('p', { class: 'suggestion' }, p.suggestion)),
    h('dl', { class: 'summary', 'aria-label': 'This problem in numbers' },
      stat('Impact', impactText(p.impact)),
      stat('Occurrences', number(p.occurrences, 0)),
      stat('Affected requests', number(p.affected_requests, 0)),
      stat("Share of its paths' requests", percent(p.share)),
      stat('First seen', h('time', { datetime: p.first_seen }, time(p.first_seen)), 'wide'),
      stat('Last seen', h('time', { datetime: p.last_seen }, time(p.last_seen)), 'wide')),
    p.path ? h('p', null, 'Along the path ', pathNode(p.path), '.') : null,
    h('section', { class: 'evidence', 'aria-labelledby': 'evidence-h' },
      h('h2', { id: 'evidence-h' }, 'Worst evidence'),
      evidenceList(p.worst.evidence || {}),
      worstHref
        ? h('p', null, h('a', { href: worstHref, class: 'worst-link' }, 'Open the worst trace'), ' ',
          h('code', { class: 'trace-id' }, p.worst.trace_id))
        : h('p', { class: 'muted' }, 'An edge finding: it judges the calls of the edge together, not one trace. ',
          h('a', { href: hashFor('edges', win) }, 'See the edges'), '.')),
    h('section', { class: 'trend-wrap', 'aria-labelledby': 'trend-h' },
      h('h2', { id: 'trend-h' }, 'Trend'),
      trendChart(p.trend || [], trendAxis(res.window, [p]))),
    h('section', { class: 'problem-paths', 'aria-labelledby': 'paths-h' },
      h('h2', { id: 'paths-h' }, `Affected paths (${res.paths.length})`),
      res.paths.length
        ? h('ul', { class: 'paths-list' }, res.paths.map((path) => h('li', { dataset: { path } },
          h('a', { href: hashFor('findings', { path, kind: p.kind }), class: 'plain', title: 'Findings of this kind on this path' }, pathNode(path)))))
        : h('p', { class: 'empty' }, 'Its findings record no path.')),
    h('section', { class: 'problem-examples', 'aria-labelledby': 'examples-h' },
      h('h2', { id: 'examples-h' }, `Example traces (${p.examples.length})`),
      p.examples.length
        ? h('ol', { class: 'examples' }, p.examples.map((t) => h('li', null,
          h('a', { href: `#/trace/${encodeURIComponent(t)}`, class: 'trace-link' }, h('code', { class: 'trace-id' }, t)),
          t === p.worst.trace_id ? [' ', h('span', { class: 'badge worst' }, 'worst')] : null)))
        : h('p', { class: 'empty' }, 'No example trace: its findings judge whole edges.'),
      h('h3', null, `Their findings (${res.findings.length})`),
      findingsTable(res.findings, 'The findings of the example traces')));
}

function evidenceList(ev) {
  const keys = Object.keys(ev).sort();
  if (!keys.length) return h('p', { class: 'muted' }, 'No figures recorded.');
  return h('dl', { class: 'attrs evidence-list' }, keys.map((k) => [h('dt', null, k), h('dd', null, evidenceValue(k, ev[k]))]));
}

// notInWindow answers a problem the window does not hold, such as a
// resolved one a notification links to: its findings are older.
function notInWindow(id, params) {
  const page = `problems/${id}`;
  return h('section', { class: 'page-problem' },
    h('p', { class: 'crumbs' }, h('a', { href: '#/problems' }, 'Problems'), ' / problem'),
    h('h1', null, 'Problem not in this window'),
    h('p', null, 'No finding of problem ', h('code', null, id),
      ' was detected in this window. A resolved problem has been quiet for a while: look further back.'),
    h('p', null, h('a', { href: hashFor(page, { since: '24h' }) }, 'Last 24 hours'), ' · ',
      h('a', { href: hashFor(page, { since: '168h' }) }, 'Last 7 days')),
    filterForm(page, 'Time window', windowFields(params)));
}
