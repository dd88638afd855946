// The service map: the services as nodes and the calls between them as
// arrows, from the edges measured in the window (api/v1/edges, grouped by
// caller and callee service). A call is coloured by its worst active problem
// (api/v1/problems, state active or regressed) and drawn with a line style
// of its own per severity, so the colour is never the only cue. Hovering a
// call gives the caller's timeout against the callee's p99 per operation;
// selecting it (click, or Enter on the focused call) opens the same figures
// in a panel and records the call in the URL.
//
// The layout is deterministic: columns by call depth from the entry
// services (those no other service calls), each service one column right
// of its deepest caller, the calls that close a cycle left out of the
// depth; rows in a column follow the mean row of the callers, then the name.

import { get } from './api.js';
import { h, svg } from './dom.js';
import { figureCells, inversionCell, timeoutOf, timeoutText } from './edges.js';
import { filterForm, hashFor, windowCaption, windowFields } from './forms.js';
import { impactText, kindLabel, ms, number, severityBadge, stateBadge } from './format.js';
import { callName, problemHref } from './problems.js';
import { headRow } from './table.js';

// WORST orders what colours a call, worst first; "none" is no active problem.
const WORST = ['critical', 'warning', 'info'];

// MAX_PROBLEM_PAGES bounds the pages of problems read for the colours.
const MAX_PROBLEM_PAGES = 10;

export async function renderServiceMap(route, signal) {
  const p = route.params;
  const win = { since: p.get('since') || '', until: p.get('until') || '' };
  const [edgesRes, problems] = await Promise.all([
    get('edges', { ...win, limit: 1000 }, signal),
    allProblems(win, signal),
  ]);
  const active = problems.list.filter((x) => x.state === 'active' || x.state === 'regressed');
  const pairs = groupPairs(edgesRes.edges, active);
  const onMap = new Set(pairs.map((x) => x.key));
  const elsewhere = active.filter((x) => !onMap.has(pairKey(x.caller_service, x.callee_service)));

  const selectedKey = p.get('caller') !== null && p.get('callee') !== null ? pairKey(p.get('caller'), p.get('callee')) : '';
  const panel = h('section', { class: 'map-detail', 'aria-live': 'polite', 'aria-labelledby': 'map-detail-h' });
  const select = (pair) => {
    for (const el of document.querySelectorAll('.page-map .is-selected')) el.classList.remove('is-selected');
    for (const el of document.querySelectorAll(`.page-map [data-pair="${CSS.escape(pair.key)}"]`)) el.classList.add('is-selected');
    panel.replaceChildren(...detail(pair, win));
    const q = new URLSearchParams({ ...nonEmpty(win), caller: pair.caller, callee: pair.callee });
    history.replaceState(null, '', `#/service-map?${q}`);
    document.body.dataset.route = location.hash; // replaceState fires no hashchange
  };
  const selected = pairs.find((x) => x.key === selectedKey);
  panel.replaceChildren(...(selected ? detail(selected, win)
    : [h('h2', { id: 'map-detail-h' }, 'Call'), h('p', { class: 'muted' }, 'Select a call for its timeouts and latencies per operation, and its active problems.')]));

  const content = pairs.length === 0
    ? [h('p', { class: 'empty' }, 'No calls between services in this window. Widen it with Since.')]
    : [
      problems.truncated ? h('p', { class: 'truncated', role: 'status' }, 'The window holds more findings than budgetd groups in one answer: the colours are of the problems of the newest findings.') : null,
      mapFigure(pairs, win, selectedKey, select),
      panel,
      pairsTable(pairs, edgesRes.window, win, selectedKey, select),
      elsewhere.length ? elsewhereList(elsewhere, win) : null,
    ];
  return h('section', { class: 'page-map' },
    h('h1', null, 'Service map'),
    h('p', { class: 'lede' },
      'The services and the calls between them in the window. A call is coloured by its worst active or regressed problem; hover it for the caller\u2019s timeout against the callee\u2019s p99, select it for the figures per operation. A service opens its problems.'),
    filterForm('service-map', 'Time window', windowFields(p)),
    content);
}

function nonEmpty(o) {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== ''));
}

// allProblems reads every problem of the window, page by page, up to
// MAX_PROBLEM_PAGES pages.
async function allProblems(win, signal) {
  const list = [];
  let next = '';
  let truncated = false;
  for (let i = 0; i < MAX_PROBLEM_PAGES; i++) {
    const page = await get('problems', { ...win, limit: 1000, next }, signal);
    list.push(...page.problems);
    truncated = truncated || page.truncated;
    next = page.next;
    if (!next) break;
  }
  return { list, truncated: truncated || next !== '' };
}

// pairKey names a caller → callee service pair, for data-pair attributes.
function pairKey(caller, callee) {
  return JSON.stringify([caller, callee]);
}

// groupPairs groups the operation edges by caller and callee service, with
// the active problems of each pair, worst first.
function groupPairs(edges, active) {
  const byKey = new Map();
  for (const e of edges) {
    const key = pairKey(e.caller_service, e.callee_service);
    if (!byKey.has(key)) byKey.set(key, { key, caller: e.caller_service, callee: e.callee_service, edges: [], calls: 0, problems: [] });
    const pair = byKey.get(key);
    pair.edges.push(e);
    pair.calls += e.calls;
  }
  for (const x of active) {
    const pair = byKey.get(pairKey(x.caller_service, x.callee_service));
    if (pair) pair.problems.push(x);
  }
  for (const pair of byKey.values()) {
    pair.problems.sort((a, b) => rank(a.severity) - rank(b.severity));
    pair.worst = pair.problems.length ? WORST[Math.min(...pair.problems.map((x) => rank(x.severity)))] || 'none' : 'none';
    pair.tightest = tightest(pair.edges);
  }
  return [...byKey.values()].sort((a, b) => a.caller.localeCompare(b.caller) || a.callee.localeCompare(b.callee));
}

function rank(severity) {
  const i = WORST.indexOf(severity);
  return i < 0 ? WORST.length : i;
}

// tightest is the operation edge whose callee p99 comes closest to (or goes
// furthest past) its caller's timeout: the one a pair's summary shows.
function tightest(edges) {
  let best = null;
  let ratio = -1;
  for (const e of edges) {
    const t = timeoutOf(e);
    const r = t && t.ms > 0 ? e.callee_p99_ms / t.ms : 0;
    if (r > ratio) { best = e; ratio = r; }
  }
  return best;
}

// versus is "timeout 20 s vs p99 42.02 s" for one operation edge.
function versus(e) {
  return `caller timeout ${timeoutText(timeoutOf(e))} vs callee p99 ${ms(e.callee_p99_ms)}`;
}

function pairTitle(pair) {
  const lines = [`${pair.caller} → ${pair.callee}: ${number(pair.calls, 0)} calls`];
  for (const e of pair.edges) lines.push(`${e.caller_operation} → ${e.callee_operation}: ${versus(e)}${e.inversion ? ' (inversion)' : ''}`);
  lines.push(pair.problems.length
    ? `Worst active problem: ${pair.worst} ${kindLabel(pair.problems[0].kind)} (${pair.problems.length} active)`
    : 'No active problem');
  return lines.join('\n');
}

function pairHref(pair, win) {
  return hashFor('service-map', { ...win, caller: pair.caller, callee: pair.callee });
}

// layout gives each service a column (its call depth) and a row.
function layout(pairs) {
  const names = [...new Set(pairs.flatMap((x) => [x.caller, x.callee]))].sort();
  const out = new Map(names.map((n) => [n, []]));
  const called = new Set();
  for (const x of pairs) {
    if (x.caller === x.callee) continue;
    out.get(x.caller).push(x.callee);
    called.add(x.callee);
  }
  // Depth first from the entries, then from whatever a cycle kept out of
  // reach: a call to a service still on the stack closes a cycle.
  const onStack = new Set();
  const done = new Set();
  const back = new Set();
  const postorder = [];
  const visit = (n) => {
    onStack.add(n);
    for (const m of out.get(n)) {
      if (onStack.has(m)) back.add(pairKey(n, m));
      else if (!done.has(m)) visit(m);
    }
    onStack.delete(n);
    done.add(n);
    postorder.push(n);
  };
  for (const n of names) if (!called.has(n) && !done.has(n)) visit(n);
  for (const n of names) if (!done.has(n)) visit(n);
  const depth = new Map(names.map((n) => [n, 0]));
  for (const n of postorder.reverse()) { // callers before their callees
    for (const m of out.get(n)) {
      if (!back.has(pairKey(n, m))) depth.set(m, Math.max(depth.get(m), depth.get(n) + 1));
    }
  }
  const columns = [];
  for (const n of names) {
    const d = depth.get(n);
    while (columns.length <= d) columns.push([]);
    columns[d].push(n);
  }
  const forward = pairs.filter((x) => x.caller !== x.callee && !back.has(x.key));
  const callers = new Map(names.map((n) => [n, []]));
  for (const x of forward) callers.get(x.callee).push(x.caller);
  const tallest = Math.max(...columns.map((c) => c.length));
  const row = new Map();
  const place = (col) => col.forEach((n, i) => row.set(n, i + (tallest - col.length) / 2));
  columns.forEach((col, d) => {
    const key = (n) => {
      const rs = callers.get(n).filter((c) => row.has(c)).map((c) => row.get(c));
      return rs.length ? rs.reduce((a, b) => a + b, 0) / rs.length : 0;
    };
    if (d > 0) col.sort((a, b) => key(a) - key(b) || a.localeCompare(b));
    place(col);
  });
  // Then swap neighbours in a column while that uncrosses calls; a few
  // rounds settle a map of a few dozen services.
  const crossings = () => countCrossings(forward, (n) => ({ x: depth.get(n), y: row.get(n) }));
  let best = crossings();
  for (let round = 0; round < 4 && best > 0; round++) {
    let improved = false;
    for (const col of columns) {
      for (let i = 0; i + 1 < col.length; i++) {
        [col[i], col[i + 1]] = [col[i + 1], col[i]];
        place(col);
        const c = crossings();
        if (c < best) {
          best = c;
          improved = true;
        } else {
          [col[i], col[i + 1]] = [col[i + 1], col[i]];
          place(col);
        }
      }
    }
    if (!improved) break;
  }
  return { names, depth, row, columns };
}

// countCrossings counts the pairs of calls whose straight lines between
// their services' (column, row) cross; calls that share a service do not.
function countCrossings(calls, at) {
  const segs = calls.map((x) => [x.caller, x.callee, at(x.caller), at(x.callee)]);
  const side = (a, b, c) => Math.sign((b.x - a.x) * (c.y - a.y) - (b.y - a.y) * (c.x - a.x));
  let n = 0;
  for (let i = 0; i < segs.length; i++) {
    for (let j = i + 1; j < segs.length; j++) {
      const [a1, a2, p1, p2] = segs[i];
      const [b1, b2, q1, q2] = segs[j];
      if (a1 === b1 || a1 === b2 || a2 === b1 || a2 === b2) continue;
      if (side(p1, p2, q1) * side(p1, p2, q2) < 0 && side(q1, q2, p1) * side(q1, q2, p2) < 0) n++;
    }
  }
  return n;
}

// Map geometry, in pixels.
const NODE_H = 36;
const ROW_H = 74;
const GAP = 118;
const PAD = 28;
const CHAR_W = 7.4;

function mapFigure(pairs, win, selectedKey, select) {
  const { names, depth, row, columns } = layout(pairs);
  const nodeW = Math.min(200, Math.max(96, Math.max(...names.map((n) => n.length)) * CHAR_W + 28));
  const maxChars = Math.floor((nodeW - 20) / CHAR_W);
  const rows = Math.max(...columns.map((c) => c.length));
  const width = PAD * 2 + columns.length * nodeW + (columns.length - 1) * GAP;
  const height = PAD * 2 + (rows - 1) * ROW_H + NODE_H + 40;
  const pos = (n) => ({ x: PAD + depth.get(n) * (nodeW + GAP), y: PAD + 20 + row.get(n) * ROW_H });

  const markers = svg('defs', null, [...WORST, 'none'].map((w) => svg('marker', {
    id: `arrow-${w}`, viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 9, markerHeight: 9,
    markerUnits: 'userSpaceOnUse', orient: 'auto-start-reverse',
  }, svg('path', { d: 'M 0 0 L 10 5 L 0 10 z', class: `arrowhead worst-${w}` }))));

  const badges = []; // the count badges placed so far, to keep them apart
  const edges = pairs.map((pair) => {
    const c = curve(pos(pair.caller), pos(pair.callee), pair.caller === pair.callee,
      depth.get(pair.callee) > depth.get(pair.caller), nodeW);
    const d = `M ${c[0].x} ${c[0].y} C ${c[1].x} ${c[1].y}, ${c[2].x} ${c[2].y}, ${c[3].x} ${c[3].y}`;
    const mid = [0.5, 0.38, 0.62, 0.28, 0.72].map((t) => bezier(c, t))
      .find((m) => badges.every((o) => Math.hypot(o.x - m.x, o.y - m.y) > 22)) || bezier(c, 0.5);
    const n = pair.problems.length;
    if (n) badges.push(mid);
    const link = svg('a', {
      href: pairHref(pair, win), class: `edge worst-${pair.worst}${pair.key === selectedKey ? ' is-selected' : ''}`,
      dataset: { pair: pair.key, caller: pair.caller, callee: pair.callee, worst: pair.worst },
      'aria-label': `${pair.caller} calls ${pair.callee}: ${n ? `${n} active problem${n === 1 ? '' : 's'}, worst ${pair.worst}` : 'no active problem'}. ${pair.tightest ? versus(pair.tightest) : ''}`,
      onclick: (ev) => { ev.preventDefault(); select(pair); },
    },
    svg('title', null, pairTitle(pair)),
    svg('path', { d, class: 'hit' }),
    svg('path', { d, class: 'line', 'marker-end': `url(#arrow-${pair.worst})`, 'stroke-width': 1.5 + Math.min(3, Math.log10(Math.max(1, pair.calls))) }),
    n ? svg('g', { class: 'count' },
      svg('circle', { cx: mid.x, cy: mid.y, r: 9 }),
      svg('text', { x: mid.x, y: mid.y + 4, 'text-anchor': 'middle' }, String(n))) : null);
    return link;
  });

  const nodes = names.map((name) => {
    const { x, y } = pos(name);
    const shown = name.length > maxChars ? `${name.slice(0, maxChars - 1)}…` : name;
    const ins = pairs.filter((x2) => x2.callee === name && x2.caller !== name).map((x2) => x2.caller);
    const outs = pairs.filter((x2) => x2.caller === name && x2.callee !== name).map((x2) => x2.callee);
    const title = `${name}${ins.length ? `; called by ${ins.join(', ')}` : '; an entry service'}${outs.length ? `; calls ${outs.join(', ')}` : ''}. Open its problems.`;
    return svg('a', { href: hashFor('problems', { ...win, service: name }), class: `node${ins.length ? '' : ' entry'}`, dataset: { service: name }, 'aria-label': title },
      svg('title', null, title),
      svg('rect', { x, y, width: nodeW, height: NODE_H, rx: 6 }),
      svg('text', { x: x + nodeW / 2, y: y + NODE_H / 2 + 5, 'text-anchor': 'middle' }, shown));
  });

  const titleId = 'service-map-title';
  const descId = 'service-map-desc';
  const key = (w, text) => h('span', { class: 'key' },
    svg('svg', { class: 'legend-swatch', width: 34, height: 12, 'aria-hidden': 'true' },
      svg('line', { x1: 1, x2: 33, y1: 6, y2: 6, class: `edge-key worst-${w}` })), text);
  return h('figure', { class: 'chart service-map-figure' },
    h('div', { class: 'map-scroll' },
      svg('svg', {
        class: 'service-map', width, height, viewBox: `0 0 ${width} ${height}`, role: 'group', 'aria-labelledby': `${titleId} ${descId}`,
      },
      svg('title', { id: titleId }, 'Service map'),
      svg('desc', { id: descId }, `${names.length} services and ${pairs.length} calls between them, caller left of callee; the table below lists the same calls.`),
      markers, edges, nodes)),
    h('figcaption', null,
      key('critical', 'critical problem'), key('warning', 'warning'), key('info', 'info'), key('none', 'no active problem'),
      h('span', { class: 'muted' }, 'The circled number counts the active problems of a call.')));
}

// curve is a call's cubic Bézier from caller a to callee b (their nodes'
// top left corners): right side to left side when the callee is in a later
// column; under the nodes for a call back to the left or within a column;
// a loop above the node for a call to itself.
function curve(a, b, self, rightward, nodeW) {
  if (self) {
    const x1 = a.x + nodeW * 0.35;
    const x2 = a.x + nodeW * 0.65;
    return [{ x: x1, y: a.y }, { x: x1 - 24, y: a.y - 44 }, { x: x2 + 24, y: a.y - 44 }, { x: x2, y: a.y }];
  }
  if (rightward) {
    const p0 = { x: a.x + nodeW, y: a.y + NODE_H / 2 };
    const p3 = { x: b.x - 2, y: b.y + NODE_H / 2 };
    const dx = (p3.x - p0.x) / 2;
    return [p0, { x: p0.x + dx, y: p0.y }, { x: p3.x - dx, y: p3.y }, p3];
  }
  const p0 = { x: a.x + nodeW / 2, y: a.y + NODE_H };
  const p3 = { x: b.x + nodeW / 2 + 8, y: b.y + NODE_H + 2 };
  const k = 44 + Math.abs(p3.x - p0.x) * 0.12;
  return [p0, { x: p0.x, y: p0.y + k }, { x: p3.x, y: p3.y + k }, p3];
}

// bezier is the point at t of the cubic Bézier c.
function bezier(c, t) {
  const u = 1 - t;
  const w = [u * u * u, 3 * u * u * t, 3 * u * t * t, t * t * t];
  return { x: w.reduce((a, wi, i) => a + wi * c[i].x, 0), y: w.reduce((a, wi, i) => a + wi * c[i].y, 0) };
}

// detail is the panel of one call: its operations' figures and problems.
function detail(pair, win) {
  return [
    h('h2', { id: 'map-detail-h' }, `${pair.caller} → ${pair.callee}`),
    h('p', null, `${number(pair.calls, 0)} calls in the window, over ${pair.edges.length} operation pair${pair.edges.length === 1 ? '' : 's'}.`),
    h('div', { class: 'table-wrap' },
      h('table', { class: 'data pair-edges' },
        h('caption', { class: 'visually-hidden' }, `Calls from ${pair.caller} to ${pair.callee}, by operation`),
        headRow([['Caller operation'], ['Callee operation'], ['Calls', true], ['Caller timeout', true], ['Callee p50', true],
          ['Callee p99', true], ['Inversion']]),
        h('tbody', null, pair.edges.map((e) => h('tr', { class: e.inversion ? 'inverted' : null },
          h('th', { scope: 'row' }, e.caller_operation),
          h('td', null, e.callee_operation),
          figureCells(e),
          h('td', null, inversionCell(e))))))),
    h('h3', null, `Active problems (${pair.problems.length})`),
    pair.problems.length
      ? h('ul', { class: 'pair-problems' }, pair.problems.map((x) => problemItem(x, win, false)))
      : h('p', { class: 'muted' }, 'No active problem on this call.'),
  ];
}

// problemItem is one problem in a list: badges, kind (its page), and the
// impact with the suggestion, or the call when the list is not of one call.
function problemItem(x, win, withCall) {
  return h('li', { dataset: { problemId: x.id } },
    severityBadge(x.severity), ' ', stateBadge(x.state), ' ',
    h('a', { href: problemHref(x.id, win), class: 'kind' }, kindLabel(x.kind)), ' ',
    withCall ? callName(x) : [h('span', { class: 'muted' }, impactText(x.impact)), ' ', h('span', { class: 'suggestion' }, x.suggestion)]);
}

function pairsTable(pairs, window, win, selectedKey, select) {
  const rows = pairs.map((pair) => {
    const link = h('a', { href: pairHref(pair, win), onclick: (ev) => { ev.preventDefault(); select(pair); } }, 'Show');
    const t = pair.tightest;
    return h('tr', { class: pair.key === selectedKey ? 'is-selected' : null, dataset: { pair: pair.key } },
      h('th', { scope: 'row' }, pair.caller),
      h('td', null, pair.callee),
      h('td', { class: 'num' }, number(pair.calls, 0)),
      h('td', null, t ? [t.caller_operation, ' → ', t.callee_operation, h('span', { class: 'sub' }, versus(t))] : '—'),
      h('td', null, pair.problems.length ? severityBadge(pair.worst) : h('span', { class: 'muted' }, 'none')),
      h('td', { class: 'num' }, number(pair.problems.length, 0)),
      h('td', null, link));
  });
  return h('div', { class: 'table-wrap' },
    h('table', { class: 'data map-pairs' },
      h('caption', null, `Calls between services, ${windowCaption(window)}`),
      headRow([['Caller'], ['Callee'], ['Calls', true], ['Tightest operation'], ['Worst active problem'], ['Active problems', true], ['Details']]),
      h('tbody', null, rows)));
}

// elsewhereList names the active problems the map cannot draw: those at an
// entry span (no caller) and those on calls with no measured edge.
function elsewhereList(list, win) {
  return h('section', { class: 'map-elsewhere', 'aria-labelledby': 'map-elsewhere-h' },
    h('h2', { id: 'map-elsewhere-h' }, `Active problems not on a drawn call (${list.length})`),
    h('ul', { class: 'pair-problems' }, list.map((x) => problemItem(x, win, true))));
}
