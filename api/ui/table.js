// A sortable data table: column headers are buttons, aria-sort tells
// assistive technology which column orders the rows.

import { h } from './dom.js';

// sortableTable renders rows with columns [{label, key(row) → sortable value,
// cell(row) → node|string, numeric?, abbr?}], sorted by sortIndex.
export function sortableTable(caption, columns, rows, sortIndex, descending = true, className = '') {
  const table = h('table', { class: `data ${className}` });
  let by = sortIndex;
  let desc = descending;

  function draw() {
    const col = columns[by];
    const sorted = [...rows].sort((a, b) => {
      const x = col.key(a);
      const y = col.key(b);
      if (x === y) return 0;
      if (x === null || x === undefined) return 1;
      if (y === null || y === undefined) return -1;
      const c = x < y ? -1 : 1;
      return desc ? -c : c;
    });
    const head = h('tr', null, columns.map((c, i) => {
      const btn = h('button', { type: 'button', class: 'sort' }, c.label,
        h('span', { class: 'sort-mark', 'aria-hidden': 'true' }, i === by ? (desc ? ' ▼' : ' ▲') : ''));
      btn.addEventListener('click', () => {
        if (i === by) desc = !desc;
        else { by = i; desc = c.numeric !== false; }
        draw();
        table.querySelectorAll('thead button')[i].focus();
      });
      return h('th', {
        scope: 'col', class: c.numeric === false ? null : 'num', title: c.title,
        'aria-sort': i === by ? (desc ? 'descending' : 'ascending') : null,
      }, btn);
    }));
    const body = sorted.map((r) => h('tr', null, columns.map((c, i) => {
      const content = c.cell(r);
      const cls = [c.numeric === false ? null : 'num', c.cellClass ? c.cellClass(r) : null].filter(Boolean).join(' ');
      return i === 0 ? h('th', { scope: 'row', class: cls || null }, content) : h('td', { class: cls || null }, content);
    })));
    table.replaceChildren(
      h('caption', null, caption),
      h('thead', null, head),
      h('tbody', null, body));
  }
  draw();
  return h('div', { class: 'table-wrap' }, table);
}

// openOnClick makes a whole table row open href, for the pointer; the link
// inside the row stays the keyboard and screen reader way in. A click on a
// control, or one that ends a text selection, is left alone.
export function openOnClick(tr, href) {
  tr.classList.add('clickable');
  tr.addEventListener('click', (ev) => {
    if (ev.target.closest('a, button, input, select, summary')) return;
    if (window.getSelection && String(window.getSelection())) return; // selecting text
    location.hash = href;
  });
}

// headRow is a table's column headers: [label, numeric?, title?] each.
export function headRow(columns) {
  return h('thead', null, h('tr', null,
    columns.map(([c, num, title]) => h('th', { scope: 'col', class: num ? 'num' : null, title }, c))));
}
