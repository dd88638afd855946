// The edges page: for each caller → callee edge, the callee's p99 latency
// against the caller's median timeout. A point on or above the diagonal is a
// callee slower than its caller waits; the edges marked as inversions are
// the latency_inversion detector's verdict (the caller routinely gives up on
// calls the callee goes on working on), which leaves out callees that stop
// at the deadline they were given. Where the calls recorded no timeout, the
// one budgetd inferred from span timing stands in, marked.

import { get } from './api.js';
import { h, svg } from './dom.js';
import { filterForm, windowCaption, windowFields } from './forms.js';
import { ms, number, percent, timingBadge } from './format.js';
import { headRow } from './table.js';

export async function renderEdges(route, signal) {
  const p = route.params;
  const res = await get('edges', { since: p.get('since') || '', until: p.get('until') || '', limit: 1000 }, signal);
  const edges = res.edges.map((e, i) => ({ ...e, n: i + 1 }));
  const inverted = edges.filter((e) => e.inversion).length;

  const content = edges.length === 0
    ? [h('p', { class: 'empty' }, 'No edges in this window. Widen it with Since.')]
    : [
      h('p', { class: 'callout' }, `${inverted} of ${edges.length} edges are inverted: their callee goes on working after the caller has stopped waiting, on most slow calls.`),
      chart(edges),
      edgeTable(edges, res.window),
    ];
  return h('section', { class: 'page-edges' },
    h('h1', null, 'Edges'),
    h('p', { class: 'lede' }, 'Callee p99 latency against the timeout its caller gives it. Points on or above the diagonal are slower than their caller waits; ▲ marks the latency inversions budgetd reports (a callee that stops at the deadline it was given is none).'),
    filterForm('edges', 'Time window', windowFields(p)),
    content);
}

// timeoutOf is the caller's timeout on an edge: the recorded median, else
// the one inferred from the edge's timed-out calls (inferred: true), else null.
export function timeoutOf(e) {
  if (e.caller_median_timeout_ms !== null && e.caller_median_timeout_ms !== undefined) {
    return { ms: e.caller_median_timeout_ms, inferred: false };
  }
  if (typeof e.inferred_timeout_ms === 'number') {
    return { ms: e.inferred_timeout_ms, inferred: true, confidence: e.inferred_timeout_confidence };
  }
  return null;
}

function edgeName(e) {
  return `${e.caller_service} ${e.caller_operation} → ${e.callee_service} ${e.callee_operation}`;
}

// Chart geometry, in viewBox units.
const W = 760;
const H = 440;
const M = { top: 20, right: 24, bottom: 52, left: 76 };

function chart(edges) {
  const plotted = edges.filter((e) => timeoutOf(e) && timeoutOf(e).ms > 0 && e.callee_p99_ms > 0);
  const skipped = edges.length - plotted.length;
  const anyInferred = plotted.some((e) => timeoutOf(e).inferred);
  const values = plotted.flatMap((e) => [timeoutOf(e).ms, e.callee_p99_ms]);
  const lo = Math.pow(10, Math.floor(Math.log10(Math.min(...values, 100))));
  const hi = Math.pow(10, Math.ceil(Math.log10(Math.max(...values, 1000))));
  const x = (v) => M.left + (Math.log10(v / lo) / Math.log10(hi / lo)) * (W - M.left - M.right);
  const y = (v) => H - M.bottom - (Math.log10(v / lo) / Math.log10(hi / lo)) * (H - M.top - M.bottom);

  const ticks = [];
  for (let d = lo; d <= hi; d *= 10) for (const m of [1, 2, 5]) if (d * m <= hi) ticks.push(d * m);
  const grid = ticks.map((t) => [
    svg('line', { x1: x(t), x2: x(t), y1: M.top, y2: H - M.bottom, class: 'grid' }),
    svg('line', { x1: M.left, x2: W - M.right, y1: y(t), y2: y(t), class: 'grid' }),
    svg('text', { x: x(t), y: H - M.bottom + 16, class: 'tick', 'text-anchor': 'middle' }, tickLabel(t)),
    svg('text', { x: M.left - 6, y: y(t) + 4, class: 'tick', 'text-anchor': 'end' }, tickLabel(t)),
  ]);

  // Above the diagonal the callee's p99 is at or past the caller's timeout.
  const danger = svg('polygon', {
    class: 'inversion-zone',
    points: `${x(lo)},${y(lo)} ${x(hi)},${y(hi)} ${x(lo)},${y(hi)}`,
  });
  const diagonal = svg('line', { x1: x(lo), y1: y(lo), x2: x(hi), y2: y(hi), class: 'diagonal' });

  // Edges with the same coordinates share one mark and one label.
  const groups = new Map();
  for (const e of plotted) {
    const t = timeoutOf(e);
    const key = `${Math.round(x(t.ms))},${Math.round(y(e.callee_p99_ms))},${t.inferred}`;
    if (!groups.has(key)) groups.set(key, []);
    groups.get(key).push(e);
  }
  // Boxes taken so far: every mark, then each label as it is placed.
  const placed = [...groups.values()].map((g) => {
    const cx = x(timeoutOf(g[0]).ms);
    const cy = y(g[0].callee_p99_ms);
    return { l: cx - 8, r: cx + 8, t: cy - 8, b: cy + 7 };
  });
  const marks = [...groups.values()].map((g) => {
    const e = g[0];
    const t = timeoutOf(e);
    const cx = x(t.ms);
    const cy = y(e.callee_p99_ms);
    const inv = g.some((v) => v.inversion);
    const inf = t.inferred ? ' inferred' : '';
    const label = g.map((v) => v.n).join(', ');
    const pos = placeLabel(placed, cx, cy, label.length * 7.5, 13);
    const title = g.map((v) => `#${v.n} ${edgeName(v)}: p99 ${ms(v.callee_p99_ms)}, timeout ${timeoutText(timeoutOf(v))}${v.inversion ? ' (inversion)' : ''}`).join('\n');
    const shape = inv
      ? svg('path', { d: `M ${cx} ${cy - 8} L ${cx + 7.5} ${cy + 5.5} L ${cx - 7.5} ${cy + 5.5} Z`, class: `point inverted${inf}` })
      : svg('circle', { cx, cy, r: 6, class: `point ok${inf}` });
    return svg('g', { class: 'mark', dataset: { edges: label } },
      svg('title', null, title),
      shape,
      svg('text', { x: pos.x, y: pos.y, class: 'point-label', 'text-anchor': pos.anchor }, label));
  });

  const titleId = 'edges-chart-title';
  const descId = 'edges-chart-desc';
  return h('figure', { class: 'chart' },
    svg('svg', {
      viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-labelledby': `${titleId} ${descId}`, class: 'scatter',
      preserveAspectRatio: 'xMinYMin meet',
    },
    svg('title', { id: titleId }, 'Callee p99 latency against caller median timeout, per edge'),
    svg('desc', { id: descId }, `${plotted.length} edges on logarithmic axes; the table below lists the same values.`),
    svg('rect', { x: M.left, y: M.top, width: W - M.left - M.right, height: H - M.top - M.bottom, class: 'plot' }),
    danger, grid, diagonal,
    svg('text', { x: x(hi) - 8, y: y(hi) + 16, class: 'diagonal-label', 'text-anchor': 'end' }, 'p99 = timeout'),
    svg('text', { x: M.left + 8, y: M.top + 16, class: 'zone-label' }, 'inverted: callers give up before the callee answers'),
    marks,
    svg('text', { x: (M.left + W - M.right) / 2, y: H - 12, class: 'axis-label', 'text-anchor': 'middle' }, "Caller's median timeout (log scale)"),
    svg('text', { x: 16, y: (M.top + H - M.bottom) / 2, class: 'axis-label', 'text-anchor': 'middle',
      transform: `rotate(-90 16 ${(M.top + H - M.bottom) / 2})` }, 'Callee p99 latency (log scale)')),
    h('figcaption', null,
      h('span', { class: 'key' }, h('span', { class: 'swatch tri', 'aria-hidden': 'true' }), 'inversion'),
      h('span', { class: 'key' }, h('span', { class: 'swatch dot', 'aria-hidden': 'true' }), 'within timeout'),
      anyInferred ? h('span', { class: 'key' }, h('span', { class: 'swatch ring', 'aria-hidden': 'true' }), 'hollow: timeout inferred from timing') : null,
      skipped ? h('span', { class: 'muted' }, `${skipped} edge${skipped === 1 ? '' : 's'} without a known timeout ${skipped === 1 ? 'is' : 'are'} only in the table.`) : null));
}

// placeLabel picks the first spot around a mark (right, then left, above or
// below, further out) whose box overlaps no label placed before, records it
// and returns the text position. Marks are few, so a greedy scan is enough.
function placeLabel(placed, cx, cy, w, hgt) {
  const spots = [];
  for (const d of [0, 14, 28, 42]) {
    spots.push([10, -6 - d, 'start'], [10, 14 + d, 'start'], [-10, -6 - d, 'end'], [-10, 14 + d, 'end']);
  }
  for (const [dx, dy, anchor] of spots) {
    const left = anchor === 'start' ? cx + dx : cx + dx - w;
    const box = { l: left, r: left + w, t: cy + dy - hgt + 2, b: cy + dy + 2 };
    if (!placed.some((o) => box.l < o.r && o.l < box.r && box.t < o.b && o.t < box.b)) {
      placed.push(box);
      return { x: cx + dx, y: cy + dy, anchor };
    }
  }
  return { x: cx + 10, y: cy - 6, anchor: 'start' };
}

// timeoutText describes a timeoutOf value for a chart mark's title.
export function timeoutText(t) {
  if (!t) return '—';
  if (!t.inferred) return ms(t.ms);
  return `≈ ${ms(t.ms)} (inferred from timing${typeof t.confidence === 'number' ? `, confidence ${t.confidence.toFixed(2)}` : ''})`;
}

// timeoutCell is the table's timeout: the recorded median, else the
// inferred one with its badge.
export function timeoutCell(e) {
  const t = timeoutOf(e);
  if (!t || !t.inferred) return ms(t ? t.ms : null);
  return [`≈ ${ms(t.ms)}`, h('span', { class: 'sub' }, timingBadge(t.confidence))];
}

// figureCells are an edge's calls, caller timeout, callee p50 and p99.
export function figureCells(e) {
  return [
    h('td', { class: 'num' }, number(e.calls, 0)),
    h('td', { class: 'num' }, timeoutCell(e)),
    h('td', { class: 'num' }, ms(e.callee_p50_ms)),
    h('td', { class: 'num' }, ms(e.callee_p99_ms)),
  ];
}

// inversionCell says whether the detector judged the edge inverted.
export function inversionCell(e) {
  return e.inversion ? h('span', { class: 'badge inv' }, '▲ inversion') : h('span', { class: 'muted' }, 'no');
}

function tickLabel(v) {
  return v < 1000 ? `${v} ms` : `${v / 1000} s`;
}

function edgeTable(edges, window) {
  const rows = edges.map((e) => h('tr', { class: e.inversion ? 'inverted' : null },
    h('td', { class: 'num' }, String(e.n)),
    h('th', { scope: 'row' }, e.caller_service, h('span', { class: 'op' }, e.caller_operation)),
    h('td', null, e.callee_service, h('span', { class: 'op' }, e.callee_operation)),
    figureCells(e),
    h('td', { class: 'num' }, percent(e.retry_ratio)),
    h('td', null, inversionCell(e))));
  return h('div', { class: 'table-wrap' },
    h('table', { class: 'data edges' },
      h('caption', null, `Edges, ${windowCaption(window)}`),
      headRow([['#', true], ['Caller'], ['Callee'], ['Calls', true], ['Caller median timeout', true], ['Callee p50', true],
        ['Callee p99', true], ['Retries', true], ['Inversion']]),
      h('tbody', null, rows)));
}
