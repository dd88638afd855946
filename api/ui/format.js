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

export const STATES = ['active', 'regressed', 'resolved'];

// stateBadge shows where a problem is in its lifecycle (docs/problems.md):
// active, regressed (back after a quiet period) or resolved.
export function stateBadge(state) {
  return h('span', { class: `badge state-${STATES.includes(state) ? state : 'unknown'}` }, String(state));
}

// impactText writes a problem's impact with its unit the way `budgetd
// analyze` does ("138 s orphaned", "11 wasted calls", "1 request"):
// seconds to three significant figures or so, counts whole.
export function impactText(impact) {
  const v = impact ? impact.value : null;
  if (v === null || v === undefined || Number.isNaN(v)) return '—';
  switch (impact.unit) {
    case 'orphaned_seconds': {
      const a = Math.abs(v);
      const digits = a >= 100 ? 0 : (a >= 10 ? 1 : 2);
      const p = 10 ** digits; // rounded as the Go side rounds, then written
      return `${new Intl.NumberFormat('en', { maximumFractionDigits: digits }).format(Math.round(v * p) / p)} s orphaned`;
    }
    case 'wasted_calls': return v === 1 ? '1 wasted call' : `${number(v, 2)} wasted calls`;
    case 'affected_requests': return v === 1 ? '1 request' : `${number(v, 2)} requests`;
    default: return `${number(v, 2)} ${kindLabel(impact.unit)}`;
  }
}

// capitalized starts a label with a capital, for headings.
export function capitalized(s) {
  const t = String(s);
  return t.charAt(0).toUpperCase() + t.slice(1);
}

// evidenceValue writes one figure of a finding's evidence: *_ms as a
// duration, inferred as yes or no, the rest as numbers.
export function evidenceValue(key, v) {
  if (key.endsWith('_ms')) return ms(v);
  if (key === 'inferred') return v === 1 ? 'yes' : 'no';
  if (key === 'confidence') return typeof v === 'number' ? v.toFixed(2) : '—';
  return number(v, 2);
}

// svcOp shows a service with one of its operations: "order POST /order".
export function svcOp(service, operation) {
  return h('span', { class: 'svc-op' }, h('span', { class: 'svc' }, service),
    operation ? [' ', h('span', { class: 'op' }, operation)] : null);
}

// stat is one figure of a dl.summary.
export function stat(label, value, cls) {
  return h('div', { class: `stat ${cls || ''}` }, h('dt', null, label), h('dd', null, value));
}
