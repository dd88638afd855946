// The trace page: one trace as a budget waterfall. Each span sits on a
// shared time axis; beside it are the budget it had left (and where that
// deadline falls), the timeout its call was given, the moment a caller gave
// up, and the work it did after that (orphaned work). Where a span recorded
// no timeout or budget, the ones budgetd worked out from span timing are
// shown instead, marked inferred. The trace's findings are listed above,
// each pointing at its span.

import { ApiError, get } from './api.js';
import { h, svg } from './dom.js';
import { hashFor } from './forms.js';
import { isInferred, kindLabel, ms, number, severityBadge, stat, timingBadge } from './format.js';

const CANCELLED_EVENT = 'budget.cancelled';

// MAX_ROWS bounds the waterfall: past it the page would take seconds to draw
// and nobody reads it row by row; the first rows in tree order are shown.
const MAX_ROWS = 2000;

export async function renderTrace(route, signal) {
  const id = route.arg.trim().toLowerCase();
  if (!/^[0-9a-f]{32}$/.test(id)) {
    throw new Error(`"${route.arg}" is not a trace ID: want 32 hex digits.`);
  }
  let tr;
  try {
    tr = await get(`traces/${id}`, null, signal);
  } catch (err) {
    if (err instanceof ApiError && err.status === 404) {
      throw new Error(`Trace ${id} is not in the store: it has not arrived, is still being assembled, or has passed its retention.`);
    }
    throw err;
  }
  const selectedFinding = route.params.get('finding') || '';
  let selectedSpan = route.params.get('span') || '';
  const chosen = tr.findings.find((f) => f.id === selectedFinding);
  if (chosen && chosen.span_id) selectedSpan = chosen.span_id;

  const rows = treeOrder(tr.spans);
  const scale = timeScale(tr.spans);
  const findingsBySpan = new Map();
  for (const f of tr.findings) {
    if (!findingsBySpan.has(f.span_id)) findingsBySpan.set(f.span_id, []);
    findingsBySpan.get(f.span_id).push(f);
  }

  const page = h('section', { class: 'page-trace' },
    h('p', { class: 'crumbs' }, h('a', { href: '#/findings' }, 'Findings'), ' / trace'),
    h('h1', null, 'Trace ', h('code', { class: 'trace-id' }, tr.trace_id)),
    tr.truncated ? h('p', { class: 'truncated', role: 'status' }, `Partial trace: ${tr.truncation}.`) : null,
    overview(tr),
    findingsList(tr, selectedFinding),
    legend(tr.spans.some((s) => inferredTimeout(s.budget) !== null || inferredRemaining(s.budget) !== null)),
    waterfall(rows, scale, findingsBySpan, selectedSpan));
  return page;
}

// treeOrder lists spans depth first, children by start time, with depth.
// Spans whose parent is not in the trace start their own tree.
function treeOrder(spans) {
  const ids = new Set(spans.map((s) => s.span_id));
  const children = new Map();
  const roots = [];
  for (const s of spans) {
    if (s.parent_span_id && ids.has(s.parent_span_id) && s.parent_span_id !== s.span_id) {
      if (!children.has(s.parent_span_id)) children.set(s.parent_span_id, []);
      children.get(s.parent_span_id).push(s);
    } else {
      roots.push(s);
    }
  }
  const byStart = (a, b) => a.start_offset_ms - b.start_offset_ms || a.span_id.localeCompare(b.span_id);
  const out = [];
  const seen = new Set();
  const walk = (s, depth) => {
    if (seen.has(s.span_id)) return; // a cycle in bad data must not hang the page
    seen.add(s.span_id);
    out.push({ span: s, depth, orphanParent: depth === 0 && s.parent_span_id !== '' && !ids.has(s.parent_span_id) });
    for (const c of (children.get(s.span_id) || []).sort(byStart)) walk(c, depth + 1);
  };
  for (const r of roots.sort(byStart)) walk(r, 0);
  for (const s of spans) if (!seen.has(s.span_id)) walk(s, 0);
  return out;
}

// timeScale maps trace offsets (ms) to percentages of the timeline width.
// The axis covers every span, timeout and deadline drawn.
function timeScale(spans) {
  let end = 1;
  for (const s of spans) {
    end = Math.max(end, s.start_offset_ms + s.duration_ms);
    const b = s.budget;
    if (b && b.timeout_ms !== null) end = Math.max(end, s.start_offset_ms + b.timeout_ms);
    if (b && b.remaining_ms !== null) end = Math.max(end, s.start_offset_ms + b.remaining_ms);
    const it = inferredTimeout(b);
    if (it !== null) end = Math.max(end, s.start_offset_ms + it);
    const ir = inferredRemaining(b);
    if (ir !== null) end = Math.max(end, s.start_offset_ms + ir);
    for (const e of s.events) end = Math.max(end, e.offset_ms);
  }
  const step = niceStep(end / 6);
  const max = Math.ceil(end / step) * step;
  const ticks = [];
  for (let t = 0; t <= max + step / 2; t += step) ticks.push(t);
  const pct = (v) => `${(Math.min(Math.max(v, 0), max) / max) * 100}%`;
  const width = (a, b) => `${Math.max(((Math.min(b, max) - Math.max(a, 0)) / max) * 100, 0.2)}%`;
  return { max, ticks, pct, width };
}

function niceStep(raw) {
  const p = Math.pow(10, Math.floor(Math.log10(raw)));
  for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
  return 10 * p;
}

function overview(tr) {
  const services = [...new Set(tr.spans.map((s) => s.service))];
  const end = Math.max(...tr.spans.map((s) => s.start_offset_ms + s.duration_ms));
  const roots = tr.spans.filter((s) => !s.parent_span_id);
  const edge = roots.map((s) => s.budget && s.budget.remaining_ms).find((v) => v !== null && v !== undefined);
  const edgeInferred = roots.find((s) => inferredRemaining(s.budget) !== null);
  const orphaned = tr.spans.reduce((a, s) => a + (s.budget ? s.budget.orphaned_ms : 0), 0);
  const retries = tr.spans.filter((s) => s.budget && s.budget.attempt > 1).length;
  return h('dl', { class: 'summary', 'aria-label': 'This trace in numbers' },
    stat('Spans', number(tr.spans.length, 0)),
    stat('Services', `${services.length}: ${services.join(', ')}`, 'wide'),
    stat('Duration', ms(end)),
    stat('Edge budget', edge !== undefined ? ms(edge)
      : edgeInferred ? [`≈ ${ms(edgeInferred.budget.inferred_remaining_ms)} `, timingBadge(edgeInferred.budget.inference_confidence)]
        : 'none recorded'),
    stat('Orphaned work', ms(orphaned), orphaned > 0 ? 'orphaned' : ''),
    stat('Retries', number(retries, 0)),
    stat('Findings', number(tr.findings.length, 0)));
}

function findingsList(tr, selected) {
  const spanIds = new Set(tr.spans.map((s) => s.span_id));
  const items = tr.findings.map((f) => {
    const show = f.span_id && spanIds.has(f.span_id)
      ? h('button', { type: 'button', class: 'link', onclick: () => selectSpan(f.span_id, f.id) }, 'Show span')
      : null;
    return h('li', {
      class: f.id === selected ? 'finding is-selected' : 'finding',
      'aria-current': f.id === selected ? 'true' : null,
      dataset: { findingId: f.id, spanId: f.span_id },
    },
    severityBadge(f.severity), ' ',
    h('a', { href: hashFor('findings', { kind: f.kind }), class: 'kind' }, kindLabel(f.kind)), ' ',
    isInferred(f) ? [timingBadge(f.evidence.confidence), ' '] : null,
    h('span', { class: 'message' }, f.message), ' ',
    show);
  });
  return h('section', { class: 'trace-findings', 'aria-labelledby': 'trace-findings-h' },
    h('h2', { id: 'trace-findings-h' }, `Findings in this trace (${tr.findings.length})`),
    items.length ? h('ol', null, items) : h('p', { class: 'empty' }, 'No finding: this trace spent its budget well.'));
}

// selectSpan highlights a span's row and records it in the URL without
// re-rendering (replaceState fires no hashchange).
function selectSpan(spanId, findingId) {
  for (const el of document.querySelectorAll('.page-trace .is-selected')) {
    el.classList.remove('is-selected');
    el.removeAttribute('aria-current');
  }
  const row = document.getElementById(`span-${spanId}`);
  if (row) {
    row.classList.add('is-selected');
    row.scrollIntoView({ block: 'center' });
    row.focus({ preventScroll: true });
  }
  const li = findingId && document.querySelector(`li.finding[data-finding-id="${CSS.escape(findingId)}"]`);
  if (li) {
    li.classList.add('is-selected');
    li.setAttribute('aria-current', 'true');
  }
  const base = location.hash.split('?')[0];
  const q = new URLSearchParams(findingId ? { finding: findingId } : { span: spanId });
  history.replaceState(null, '', `${base}?${q}`);
  document.body.dataset.route = location.hash; // replaceState fires no hashchange
}

// legend explains the marks; the inferred ones only when the trace has any.
function legend(inferred) {
  const key = (cls, text, shape = 'rect') => h('li', null,
    svg('svg', { class: 'legend-swatch', width: 28, height: 14, 'aria-hidden': 'true' },
      shape === 'rect' ? svg('rect', { x: 1, y: 2, width: 26, height: 10, class: cls }) : null,
      shape === 'line' ? svg('line', { x1: 14, x2: 14, y1: 0, y2: 14, class: cls }) : null,
      shape === 'whisker' ? [svg('line', { x1: 1, x2: 26, y1: 7, y2: 7, class: cls }), svg('line', { x1: 26, x2: 26, y1: 2, y2: 12, class: cls })] : null,
      shape === 'thin' ? svg('rect', { x: 1, y: 5, width: 26, height: 4, class: cls }) : null),
    text);
  return h('section', { class: 'legend-wrap', 'aria-labelledby': 'legend-h' },
    h('h2', { id: 'legend-h' }, 'Budget waterfall'),
    h('ul', { class: 'legend' },
      key('bar kind-server', 'server span'),
      key('bar kind-client', 'client span (one call attempt)'),
      key('bar kind-client retry', 'retry (attempt > 1)'),
      key('orphaned', 'orphaned work: after the caller gave up'),
      key('budget', 'budget left at start', 'thin'),
      key('deadline', 'deadline (start + budget left)', 'line'),
      key('timeout', 'timeout of the call', 'whisker'),
      inferred ? key('deadline inferred', 'deadline or timeout inferred from timing', 'line') : null,
      key('gaveup', 'caller gave up (timeout or cancellation)', 'line')));
}

function waterfall(rows, scale, findingsBySpan, selectedSpan) {
  const axis = svg('svg', { class: 'axis', width: '100%', height: 22, role: 'img', 'aria-label': `Time axis, 0 to ${ms(scale.max)}` },
    scale.ticks.map((t, i) => [
      svg('line', { x1: scale.pct(t), x2: scale.pct(t), y1: 15, y2: 22, class: 'tick-line' }),
      svg('text', {
        x: scale.pct(t), y: 11, class: 'tick',
        'text-anchor': i === 0 ? 'start' : (i === scale.ticks.length - 1 ? 'end' : 'middle'),
      }, ms(t)),
    ]));
  const shown = rows.slice(0, MAX_ROWS);
  const body = shown.map((r) => spanRow(r, scale, findingsBySpan.get(r.span.span_id) || [], selectedSpan));
  const note = rows.length > shown.length
    ? h('p', { class: 'callout' }, `Showing the first ${MAX_ROWS} of ${rows.length} spans, in tree order.`)
    : null;
  return h('div', { class: 'table-wrap' },
    note,
    h('table', { class: 'data waterfall' },
      h('caption', { class: 'visually-hidden' }, 'Spans of the trace on a shared time axis, with their budgets'),
      h('colgroup', null,
        h('col', { class: 'c-span' }), h('col', { class: 'c-time' }), h('col', { class: 'c-num' }),
        h('col', { class: 'c-num' }), h('col', { class: 'c-num' })),
      h('thead', null, h('tr', null,
        h('th', { scope: 'col' }, 'Span'),
        h('th', { scope: 'col', class: 'timeline-head' }, h('span', { class: 'visually-hidden' }, 'Timeline'), axis),
        h('th', { scope: 'col', class: 'num' }, 'Budget left'),
        h('th', { scope: 'col', class: 'num' }, 'Timeout'),
        h('th', { scope: 'col', class: 'num' }, 'Orphaned'))),
      h('tbody', null, body)));
}

function spanRow({ span: s, depth, orphanParent }, scale, findings, selectedSpan) {
  const b = s.budget;
  const kind = String(s.kind || 'unspecified').toLowerCase();
  const end = s.start_offset_ms + s.duration_ms;
  const badges = [];
  if (b && b.attempt > 1) {
    badges.push(h('span', { class: 'badge retry' }, `retry ${b.attempt}${b.max_attempts ? `/${b.max_attempts}` : ''}`));
  }
  if (b && b.timed_out) badges.push(h('span', { class: 'badge gaveup' }, 'gave up'));
  if (s.status === 'error') badges.push(h('span', { class: 'badge error' }, 'error'));
  if (b && b.rejected) badges.push(h('span', { class: 'badge' }, 'rejected'));
  if (b && b.inferred) badges.push(inferredBadge());
  if (inferredTimeout(b) !== null || inferredRemaining(b) !== null) badges.push(timingBadge(b.inference_confidence));
  if (findings.length) {
    badges.push(h('span', { class: 'badge finding-count', title: findings.map((f) => kindLabel(f.kind)).join(', ') },
      `${findings.length} finding${findings.length === 1 ? '' : 's'}`));
  }
  if (orphanParent) badges.push(h('span', { class: 'badge muted' }, 'parent not in trace'));

  const name = h('div', { class: 'span-name' },
    h('span', { class: `kind-tag kind-${kind}` }, kind),
    h('strong', { class: 'service' }, s.service), ' ',
    h('span', { class: 'op' }, s.name),
    badges.length ? h('span', { class: 'badges' }, badges) : null,
    details(s));
  name.style.setProperty('--depth', String(Math.min(depth, 12)));

  const row = h('tr', {
    id: `span-${s.span_id}`, tabindex: '-1',
    class: [`span kind-${kind}`, s.span_id === selectedSpan ? 'is-selected' : null, b && b.orphaned_ms > 0 ? 'has-orphaned' : null].filter(Boolean).join(' '),
    dataset: { spanId: s.span_id },
  },
  h('th', { scope: 'row', class: 'span-cell' }, name),
  h('td', { class: 'timeline' }, timeline(s, scale)),
  h('td', { class: 'num' }, budgetCell(b)),
  h('td', { class: 'num' }, timeoutCell(b)),
  h('td', { class: b && b.orphaned_ms > 0 ? 'num orphaned' : 'num' }, b && b.orphaned_ms > 0 ? ms(b.orphaned_ms) : '—'));
  row.dataset.end = String(end);
  return row;
}

function inferredBadge() {
  return h('span', {
    class: 'badge inferred',
    title: 'Inferred from request headers or metadata (x-request-timeout-ms, grpc-timeout, …), not from budget.* attributes',
  }, 'inferred');
}

// inferredTimeout and inferredRemaining are the figures budgetd worked out
// from span timing, or null: only where nothing was recorded.
function inferredTimeout(b) {
  return b && b.timeout_ms === null && typeof b.inferred_timeout_ms === 'number' ? b.inferred_timeout_ms : null;
}

function inferredRemaining(b) {
  return b && b.remaining_ms === null && typeof b.inferred_remaining_ms === 'number' ? b.inferred_remaining_ms : null;
}

function confidenceText(c) {
  return typeof c === 'number' && c > 0 ? `, confidence ${c.toFixed(2)}` : '';
}

function budgetCell(b) {
  const ir = inferredRemaining(b);
  if (ir !== null) {
    return [h('span', { class: ir <= 0 ? 'expired' : null }, `≈ ${ms(ir)}`),
      h('span', { class: 'sub' }, timingBadge(b.inference_confidence))];
  }
  if (!b || b.remaining_ms === null) return h('span', { class: 'muted' }, '—');
  const parts = [h('span', { class: b.remaining_ms <= 0 ? 'expired' : null }, b.inferred ? `≈ ${ms(b.remaining_ms)}` : ms(b.remaining_ms))];
  if (b.budget_ms !== null && Math.abs(b.budget_ms - b.remaining_ms) >= 1) {
    parts.push(h('span', { class: 'sub' }, `received ${ms(b.budget_ms)}`));
  }
  if (b.source) parts.push(h('span', { class: 'sub' }, b.source));
  if (b.inferred) parts.push(h('span', { class: 'sub' }, 'inferred'));
  return parts;
}

function timeoutCell(b) {
  const it = inferredTimeout(b);
  if (it !== null) {
    const parts = [`≈ ${ms(it)}`, h('span', { class: 'sub' }, timingBadge(b.inference_confidence))];
    if (b.attempt > 0) parts.push(h('span', { class: 'sub' }, `attempt ${b.attempt}${b.max_attempts ? ` of ${b.max_attempts}` : ''}`));
    return parts;
  }
  if (!b || b.timeout_ms === null) return h('span', { class: 'muted' }, '—');
  const parts = [b.inferred ? `≈ ${ms(b.timeout_ms)}` : ms(b.timeout_ms)];
  if (b.attempt > 0) parts.push(h('span', { class: 'sub' }, `attempt ${b.attempt}${b.max_attempts ? ` of ${b.max_attempts}` : ''}`));
  return parts;
}

// details lists the span's attributes and events, as text.
function details(s) {
  const attrs = Object.entries(s.attributes || {}).sort(([a], [b]) => a.localeCompare(b));
  if (!attrs.length && !s.events.length && !s.status_message) return null;
  return h('details', { class: 'span-details' },
    h('summary', null, 'Attributes and events'),
    s.status_message ? h('p', null, 'Status: ', s.status_message) : null,
    attrs.length ? h('dl', { class: 'attrs' }, attrs.map(([k, v]) => [h('dt', null, k), h('dd', null, v)])) : null,
    s.events.length ? h('ul', { class: 'events' }, s.events.map((e) => h('li', null,
      h('code', null, e.name), ` at ${ms(e.offset_ms)}`,
      Object.keys(e.attributes || {}).length
        ? [' (', Object.entries(e.attributes).map(([k, v]) => `${k}=${v}`).join(', '), ')'] : null))) : null);
}

// timeline draws one span on the shared axis. Coordinates are percentages
// of the cell's width, so the drawing needs no layout measurement.
function timeline(s, scale) {
  const b = s.budget;
  const start = s.start_offset_ms;
  const end = start + s.duration_ms;
  const kind = String(s.kind || 'unspecified').toLowerCase();
  const parts = [];
  const describe = [`${s.service} ${s.name}: starts at ${ms(start)}, runs ${ms(s.duration_ms)}`];

  for (const t of scale.ticks) parts.push(svg('line', { x1: scale.pct(t), x2: scale.pct(t), y1: 0, y2: 28, class: 'grid' }));

  if (b && b.remaining_ms !== null) {
    const deadline = start + b.remaining_ms;
    if (b.remaining_ms > 0) {
      parts.push(svg('rect', { x: scale.pct(start), width: scale.width(start, deadline), y: 21, height: 4, class: 'budget' },
        svg('title', null, `budget left at start: ${ms(b.remaining_ms)}${b.inferred ? ' (inferred)' : ''}`)));
    }
    parts.push(svg('line', { x1: scale.pct(deadline), x2: scale.pct(deadline), y1: 1, y2: 27, class: b.remaining_ms > 0 ? 'deadline' : 'deadline expired' },
      svg('title', null, `deadline at ${ms(deadline)}${b.remaining_ms <= 0 ? ' — already past when this span started' : ''}`)));
    describe.push(b.remaining_ms > 0 ? `deadline at ${ms(deadline)}` : 'started after its deadline');
  }

  const ir = inferredRemaining(b);
  if (ir !== null) {
    const deadline = start + ir;
    const how = `inferred from timing${confidenceText(b.inference_confidence)}`;
    parts.push(svg('line', { x1: scale.pct(deadline), x2: scale.pct(deadline), y1: 1, y2: 27, class: ir > 0 ? 'deadline inferred' : 'deadline inferred expired' },
      svg('title', null, `deadline at about ${ms(deadline)} (${how})${ir <= 0 ? ' — already past when this span started' : ''}`)));
    describe.push(ir > 0 ? `inferred deadline at about ${ms(deadline)}` : 'started after its inferred deadline');
  }

  const barClass = ['bar', `kind-${kind}`, b && b.attempt > 1 ? 'retry' : null, s.status === 'error' ? 'error' : null].filter(Boolean).join(' ');
  parts.push(svg('rect', { x: scale.pct(start), width: scale.width(start, end), y: 7, height: 12, class: barClass },
    svg('title', null, `${s.service} ${s.name}: ${ms(start)} → ${ms(end)} (${ms(s.duration_ms)})${b && b.attempt > 1 ? `, attempt ${b.attempt}` : ''}`)));

  if (b && b.orphaned_ms > 0) {
    const from = Math.max(start, end - b.orphaned_ms);
    parts.push(svg('rect', { x: scale.pct(from), width: scale.width(from, end), y: 7, height: 12, class: 'orphaned' },
      svg('title', null, `orphaned work: ${ms(b.orphaned_ms)} after the caller gave up at ${ms(from)}`)));
    describe.push(`${ms(b.orphaned_ms)} of orphaned work from ${ms(from)}`);
  }

  if (b && b.timeout_ms !== null) {
    const fires = start + b.timeout_ms;
    parts.push(svg('line', { x1: scale.pct(start), x2: scale.pct(fires), y1: 3, y2: 3, class: 'timeout' }),
      svg('line', { x1: scale.pct(fires), x2: scale.pct(fires), y1: 0, y2: 7, class: 'timeout' },
        svg('title', null, `timeout ${ms(b.timeout_ms)}: fires at ${ms(fires)}`)));
    describe.push(`timeout fires at ${ms(fires)}`);
  }

  const it = inferredTimeout(b);
  if (it !== null) {
    const fires = start + it;
    parts.push(svg('line', { x1: scale.pct(start), x2: scale.pct(fires), y1: 3, y2: 3, class: 'timeout inferred' }),
      svg('line', { x1: scale.pct(fires), x2: scale.pct(fires), y1: 0, y2: 7, class: 'timeout inferred' },
        svg('title', null, `timeout about ${ms(it)} (inferred from timing${confidenceText(b.inference_confidence)}): fires at ${ms(fires)}`)));
    describe.push(`inferred timeout fires at about ${ms(fires)}`);
  }

  if (b && b.timed_out) {
    parts.push(svg('line', { x1: scale.pct(end), x2: scale.pct(end), y1: 0, y2: 28, class: 'gaveup' },
      svg('title', null, `${s.service} gave up at ${ms(end)}`)));
    describe.push(`gave up at ${ms(end)}`);
  }
  for (const e of s.events) {
    if (e.name !== CANCELLED_EVENT) continue;
    const source = (e.attributes || {})['budget.cancel_source'] || 'unknown';
    parts.push(svg('line', { x1: scale.pct(e.offset_ms), x2: scale.pct(e.offset_ms), y1: 0, y2: 28, class: 'gaveup cancelled' },
      svg('title', null, `cancelled at ${ms(e.offset_ms)} (${source})`)));
    describe.push(`cancelled at ${ms(e.offset_ms)} (${source})`);
  }

  return svg('svg', { class: 'lane', width: '100%', height: 28, role: 'img', 'aria-label': describe.join('; ') }, parts);
}
