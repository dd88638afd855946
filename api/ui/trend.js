// A problem's trend (docs/problems.md): its occurrences per interval of
// their first detection, intervals aligned to the Unix epoch and left out
// when empty. Both drawings put the buckets on the window's time axis, so
// the silence before a regression shows as a gap. The answer does not say
// how wide an interval is, so a bucket is drawn as a bar of fixed width at
// its start, and its title gives the start and the count.

import { h, svg } from './dom.js';
import { number, time } from './format.js';

// trendAxis is the time axis shared by the trends of one answer: its window,
// widened to any bucket that starts before it.
export function trendAxis(window, problems) {
  const starts = problems.flatMap((p) => (p.trend || []).map((b) => Date.parse(b.start)));
  const from = Math.min(Date.parse(window.since), ...starts);
  const to = Math.max(Date.parse(window.until), ...starts);
  return { from, to: to > from ? to : from + 1 };
}

// describe sums a trend up in words, for screen readers and titles.
function describe(trend) {
  const total = trend.reduce((a, b) => a + b.count, 0);
  if (!trend.length) return 'No occurrence in this window';
  const most = Math.max(...trend.map((b) => b.count));
  const span = trend.length === 1
    ? `in the interval from ${time(trend[0].start)}`
    : `in ${trend.length} intervals from ${time(trend[0].start)} to ${time(trend[trend.length - 1].start)}`;
  return `${number(total, 0)} occurrence${total === 1 ? '' : 's'} ${span}, at most ${number(most, 0)} in one`;
}

// Sparkline geometry, in pixels.
const SW = 120;
const SH = 26;

// sparkline is the small trend of a problems table row.
export function sparkline(trend, axis) {
  const most = Math.max(1, ...trend.map((b) => b.count));
  const x = (t) => 1 + ((t - axis.from) / (axis.to - axis.from)) * (SW - 5);
  return svg('svg', { class: 'spark', width: SW, height: SH, viewBox: `0 0 ${SW} ${SH}`, role: 'img', 'aria-label': describe(trend) },
    svg('title', null, describe(trend)),
    svg('line', { x1: 0, x2: SW, y1: SH - 0.5, y2: SH - 0.5, class: 'baseline' }),
    trend.map((b) => {
      const hgt = Math.max(2, (b.count / most) * (SH - 3));
      return svg('rect', { x: x(Date.parse(b.start)), y: SH - 1 - hgt, width: 3, height: hgt, class: 'bucket' });
    }));
}

// Chart geometry, in viewBox units.
const W = 760;
const H = 180;
const M = { top: 14, right: 20, bottom: 34, left: 48 };

// TICK_STEPS are the time steps the chart's axis may use.
const TICK_STEPS = [1, 5, 15, 30, 60, 180, 360, 720, 1440].map((m) => m * 60000);

// trendChart is a problem page's trend: one bar per bucket on a time axis,
// with the counts also listed under it.
export function trendChart(trend, axis) {
  const most = Math.max(1, ...trend.map((b) => b.count));
  const yStep = Math.max(1, Math.ceil(most / 4));
  const yMax = yStep * Math.ceil(most / yStep);
  const x = (t) => M.left + ((t - axis.from) / (axis.to - axis.from)) * (W - M.left - M.right);
  const y = (v) => H - M.bottom - (v / yMax) * (H - M.top - M.bottom);
  const step = TICK_STEPS.find((s) => (axis.to - axis.from) / s <= 8) || TICK_STEPS[TICK_STEPS.length - 1];
  const days = axis.to - axis.from > 86400000;
  const xTicks = [];
  for (let t = Math.ceil(axis.from / step) * step; t <= axis.to; t += step) xTicks.push(t);
  const yTicks = [];
  for (let v = 0; v <= yMax; v += yStep) yTicks.push(v);
  const label = (t) => {
    const iso = new Date(t).toISOString();
    return days ? `${iso.slice(5, 10)} ${iso.slice(11, 16)}` : iso.slice(11, 16);
  };

  const bars = trend.map((b) => {
    const t = Date.parse(b.start);
    const bw = 6;
    return svg('rect', { x: x(t) - bw / 2, y: y(b.count), width: bw, height: H - M.bottom - y(b.count), class: 'bucket' },
      svg('title', null, `${time(b.start)}: ${number(b.count, 0)} first seen`));
  });
  const titleId = 'trend-chart-title';
  return h('figure', { class: 'chart trend' },
    svg('svg', { viewBox: `0 0 ${W} ${H}`, class: 'trend-chart', role: 'img', 'aria-labelledby': titleId, preserveAspectRatio: 'xMinYMin meet' },
      svg('title', { id: titleId }, `Occurrences over time (UTC): ${describe(trend)}`),
      svg('rect', { x: M.left, y: M.top, width: W - M.left - M.right, height: H - M.top - M.bottom, class: 'plot' }),
      yTicks.map((v) => [
        svg('line', { x1: M.left, x2: W - M.right, y1: y(v), y2: y(v), class: 'grid' }),
        svg('text', { x: M.left - 6, y: y(v) + 4, class: 'tick', 'text-anchor': 'end' }, String(v)),
      ]),
      xTicks.map((t) => [
        svg('line', { x1: x(t), x2: x(t), y1: H - M.bottom, y2: H - M.bottom + 5, class: 'tick-line' }),
        svg('text', { x: x(t), y: H - M.bottom + 18, class: 'tick', 'text-anchor': 'middle' }, label(t)),
      ]),
      bars),
    h('figcaption', null, `${describe(trend)}. Times in UTC; each bar is one interval of first detection.`),
    h('details', { class: 'trend-counts' },
      h('summary', null, 'Counts per interval'),
      h('table', { class: 'data compact' },
        h('caption', { class: 'visually-hidden' }, 'Occurrences per interval of first detection'),
        h('thead', null, h('tr', null, h('th', { scope: 'col' }, 'Interval from'), h('th', { scope: 'col', class: 'num' }, 'Occurrences'))),
        h('tbody', null, trend.map((b) => h('tr', null,
          h('td', null, h('time', { datetime: b.start }, time(b.start))),
          h('td', { class: 'num' }, number(b.count, 0))))))));
}
