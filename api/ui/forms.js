// Filter forms. A form never fetches: it writes its fields into the hash,
// and the router renders the page for the new hash, so every view has a URL
// that can be shared and the back button works.

import { h, uid } from './dom.js';
import { time } from './format.js';

// hashFor builds #/<page>?<non-empty params>.
export function hashFor(page, params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== '') q.set(k, v);
  }
  const qs = q.toString();
  return `#/${page}${qs ? `?${qs}` : ''}`;
}

// field is a labelled input or select. spec: {name, label, value, options?,
// placeholder?, hint?, size?}.
export function field(spec) {
  const id = uid(`f-${spec.name}`);
  const hintId = spec.hint ? `${id}-hint` : null;
  let control;
  if (spec.options) {
    // A value the options lack (a URL written by hand) is offered too, so
    // the form shows what the page shows.
    const options = spec.value && !spec.options.some(([value]) => value === spec.value)
      ? [...spec.options, [spec.value, spec.value]] : spec.options;
    control = h('select', { id, name: spec.name, 'aria-describedby': hintId },
      options.map(([value, text]) => h('option', { value, selected: value === spec.value }, text)));
  } else {
    control = h('input', {
      id, name: spec.name, type: 'text', value: spec.value || '', placeholder: spec.placeholder,
      size: spec.size || 16, autocomplete: 'off', spellcheck: 'false', 'aria-describedby': hintId,
    });
  }
  return h('div', { class: 'field' },
    h('label', { for: id }, spec.label),
    control,
    spec.hint ? h('span', { class: 'hint', id: hintId }, spec.hint) : null);
}

// filterForm lays out fields with an Apply button; on submit it navigates
// to page with the fields' values (plus fixed, e.g. a limit).
export function filterForm(page, label, fields, fixed = {}) {
  const form = h('form', { class: 'filters', 'aria-label': label },
    fields.map(field),
    h('div', { class: 'field actions' },
      h('button', { type: 'submit' }, 'Apply'),
      h('a', { href: `#/${page}`, class: 'reset' }, 'Reset')));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const params = { ...fixed };
    for (const [k, v] of new FormData(form).entries()) params[k] = String(v).trim();
    const next = hashFor(page, params);
    if (next === location.hash) window.dispatchEvent(new HashChangeEvent('hashchange'));
    else location.hash = next;
  });
  return form;
}

// windowFields are the since/until fields of the aggregate pages.
export function windowFields(params) {
  return [
    { name: 'since', label: 'Since', value: params.get('since'), placeholder: '1h', size: 22,
      hint: 'Duration before now (1h, 24h) or RFC 3339 time' },
    { name: 'until', label: 'Until', value: params.get('until'), placeholder: 'now', size: 22,
      hint: 'Same forms; empty is now' },
  ];
}

// windowCaption describes the window an aggregate answer covers.
// windowCaption names a window to the second: a window relative to now
// ends with the last nanosecond of its minute (12:00:59 for 12:00:59.999…).
export function windowCaption(w) {
  if (!w) return '';
  return `${time(w.since)} to ${time(w.until)}`;
}

// A paged list (findings, problems) reads its filters and cursor from the
// hash and links its pages with the filters kept.

// pagedQuery is the API query of a paged list: its filters, the cursor
// (next) and the page size, 50 unless the hash says otherwise.
export function pagedQuery(params, filters) {
  const query = {};
  for (const k of [...filters, 'next']) query[k] = params.get(k) || '';
  if (!query.limit) query.limit = '50';
  return query;
}

// activeFilters are the filters the hash sets.
export function activeFilters(params, filters) {
  const current = {};
  for (const k of filters) if (params.get(k)) current[k] = params.get(k);
  return current;
}

// limitField is the page size field of a paged list.
export function limitField(value) {
  return { name: 'limit', label: 'Per page', value, options: [['25', '25'], ['50', '50'], ['100', '100'], ['250', '250']] };
}

// pager links the first page (when the hash has a cursor) and the next one
// (when the answer has one). text: {label, first, next}.
export function pager(page, current, params, next, text) {
  return h('nav', { class: 'pager', 'aria-label': text.label },
    params.get('next') ? h('a', { href: hashFor(page, current) }, text.first) : null,
    next ? h('a', { href: hashFor(page, { ...current, next }), rel: 'next' }, text.next) : null);
}
