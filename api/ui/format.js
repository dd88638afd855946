// Formatting shared by the pages. Numbers use a fixed locale so the UI reads
// the same on every machine (and in the screenshots under docs/img/).

import { h } from './dom.js';

// KINDS are the detector kinds of DESIGN §5, in documentation order. A Go
// test checks this list against schema.Kinds.
export const KINDS = [
  'timeout_inversion', 'budget_reset', 'unfunded_retry_policy', 'latency_inversion',
  'orphaned_work', 'expired_on_arrival', 'retry_amplification', 'retry_without_budget',
];

export const SEVERITIES = ['critical', 'warning', 'info'];

// kindLabel turns a kind into words: timeout_inversion → timeout inversion.
export function kindLabel(kind) {
  return String(kind).replaceAll('_', ' ');
}

const num1 = new Intl.NumberFormat('en', { maximumFractionDigits: 1 });
const num2 = new Intl.NumberFormat('en', { maximumFractionDigits: 2 });
const pct = new Intl.NumberFormat('en', { style: 'percent', maximumFractionDigits: 1 });

export function number(v, digits = 1) {
  if (v === null || v === undefined || Number.isNaN(v)) return '—';
  return (digits === 2 ? num2 : num1).format(v);
}

export function percent(v) {
  if (v === null || v === undefined || Number.isNaN(v)) return '—';
  return pct.format(v);
}

// ms formats a duration in milliseconds: 850 ms, 12.3 s, 2 min 5 s.
export function ms(v) {
  if (v === null || v === undefined || Number.isNaN(v)) return '—';
  const a = Math.abs(v);
  if (a < 1000) return `${num1.format(v)} ms`;
  if (a < 120000) return `${num2.format(v / 1000)} s`;
  const sign = v < 0 ? '−' : '';
  const min = Math.floor(a / 60000);
  const sec = Math.round((a % 60000) / 1000);
  return `${sign}${min} min ${sec} s`;
}

// time formats an RFC 3339 timestamp as UTC, to the second.
export function time(rfc3339) {
  const d = new Date(rfc3339);
  if (Number.isNaN(d.getTime())) return String(rfc3339);
  return d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z').replace(/Z$/, ' UTC');
}

// pathNode shows a call path (svc:op > svc:op > …) as wrapped segments.
export function pathNode(path) {
  const segs = String(path).split(' > ');
  const out = h('span', { class: 'path' });
  segs.forEach((seg, i) => {
    if (i > 0) out.append(h('span', { class: 'path-sep', 'aria-hidden': 'true' }, ' › '));
    out.append(h('span', { class: 'path-seg' }, seg));
  });
  out.setAttribute('title', String(path));
  return out;
}

export function severityBadge(sev) {
  return h('span', { class: `badge sev-${SEVERITIES.includes(sev) ? sev : 'unknown'}` }, String(sev));
}

// isInferred tells whether a finding rests on a timeout or deadline budgetd
// worked out from span timing (evidence.inferred = 1).
export function isInferred(f) {
  return Boolean(f && f.evidence && f.evidence.inferred === 1);
}

// timingBadge marks a finding or figure that rests on zero-instrumentation
// inference: a timeout or deadline estimated from span timing because the
// spans recorded none. confidence is 0..1; without one the badge says only
// "inferred". (Budgets read from request headers have their own badge.)
export function timingBadge(confidence) {
  const known = typeof confidence === 'number' && Number.isFinite(confidence) && confidence > 0;
  return h('span', {
    class: 'badge inferred timing',
    title: `Worked out from span timing: a timeout or deadline the spans did not record${known ? ` (confidence ${confidence.toFixed(2)})` : ''}`,
  }, known ? `inferred · ${Math.round(confidence * 100)} %` : 'inferred');
}
