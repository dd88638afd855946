// The findings page: every detector result, newest first, with filters and
// cursor paging. A finding that belongs to a trace links to its waterfall.

import { get } from './api.js';
import { h } from './dom.js';
import { activeFilters, filterForm, hashFor, limitField, pagedQuery, pager } from './forms.js';
import { KINDS, isInferred, kindLabel, pathNode, severityBadge, time, timingBadge } from './format.js';
import { openOnClick } from './table.js';

const FILTERS = ['kind', 'severity', 'service', 'path', 'since', 'limit'];

export async function renderFindings(route, signal) {
  const p = route.params;
  const query = pagedQuery(p, FILTERS);
  const page = await get('findings', query, signal);

  const form = filterForm('findings', 'Filter findings', [
    { name: 'kind', label: 'Kind', value: query.kind,
      options: [['', 'Any kind'], ...KINDS.map((k) => [k, kindLabel(k)])] },
    { name: 'severity', label: 'Severity', value: query.severity,
      options: [['', 'Any severity'], ['critical', 'critical'], ['warning', 'warning'], ['info', 'info']] },
    { name: 'service', label: 'Service', value: query.service, placeholder: 'e.g. order', size: 14,
      hint: 'Service, caller or callee' },
    { name: 'path', label: 'Path', value: query.path, placeholder: 'svc:op > svc:op', size: 30,
      hint: 'Exact call path' },
    { name: 'since', label: 'Since', value: query.since, placeholder: 'all time', size: 14,
      hint: '1h, 24h or RFC 3339' },
    limitField(query.limit),
  ]);

  const current = activeFilters(p, FILTERS);
  const pages = pager('findings', current, p, page.next, { label: 'Pages of findings', first: '← Newest', next: 'Older findings →' });

  const filtered = Object.keys(current).filter((k) => k !== 'limit').length > 0;
  const body = page.findings.length === 0
    ? h('p', { class: 'empty' }, filtered ? 'No finding matches these filters.' : 'No findings yet: budgetd has not seen a budget problem.')
    : findingsTable(page.findings, 'Findings, newest first');

  return h('section', { class: 'page-findings' },
    h('h1', null, 'Findings'),
    h('p', { class: 'lede' },
      'What the detectors found, newest first. Open a finding to see its trace and where the budget went.'),
    form,
    body,
    pages);
}

// findingsTable lists findings, one a row; a finding of a trace opens its
// waterfall with the finding selected.
export function findingsTable(findings, caption) {
  const rows = findings.map((f) => {
    const href = f.trace_id ? `#/trace/${encodeURIComponent(f.trace_id)}?finding=${encodeURIComponent(f.id)}` : null;
    const message = href
      ? h('a', { href, class: 'finding-link' }, f.message)
      : h('span', null, f.message, ' ', h('a', { href: '#/edges', class: 'aside' }, '(edge aggregate: see edges)'));
    // A finding is about one call edge: caller → callee when both are known.
    const who = f.caller_service && f.callee_service && f.caller_service !== f.callee_service
      ? [f.caller_service, ' → ', f.callee_service]
      : [f.service || f.callee_service || f.caller_service];
    const tr = h('tr', { dataset: { findingId: f.id } },
      h('td', null, severityBadge(f.severity)),
      h('td', null, h('a', { href: hashFor('findings', { kind: f.kind }), class: 'kind' }, kindLabel(f.kind)),
        isInferred(f) ? [' ', timingBadge(f.evidence.confidence)] : null),
      h('td', { class: 'message' }, message),
      h('td', null, who),
      h('td', { class: 'path-cell' }, h('a', { href: hashFor('findings', { path: f.path }), class: 'plain' }, pathNode(f.path))),
      h('td', { class: 'nowrap' }, h('time', { datetime: f.detected_at }, time(f.detected_at))));
    // The whole row opens the trace; the message link stays the keyboard
    // and screen reader way in.
    if (href) openOnClick(tr, href);
    return tr;
  });
  return h('div', { class: 'table-wrap' },
    h('table', { class: 'data findings' },
      h('caption', { class: 'visually-hidden' }, caption),
      h('thead', null, h('tr', null,
        ['Severity', 'Kind', 'Finding', 'Service', 'Path', 'Detected'].map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', null, rows)));
}
