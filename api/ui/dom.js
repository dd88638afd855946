// DOM construction without an HTML parser. Every string handed to h() or
// svg() becomes a text node or an attribute value, never markup, so span
// names, attributes and messages are shown exactly as they were recorded.

const SVG_NS = 'http://www.w3.org/2000/svg';

// h builds an HTML element: h('a', {href: '#/paths', class: 'x'}, 'text', child).
// Props: class, text (textContent), dataset (object), on<event> (listener),
// anything else is an attribute (false, null and undefined leave it out).
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  setProps(el, props);
  append(el, children);
  return el;
}

// svg builds an SVG element the same way.
export function svg(tag, props, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  setProps(el, props);
  append(el, children);
  return el;
}

function setProps(el, props) {
  if (!props) return;
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'text') {
      el.textContent = String(value);
    } else if (key === 'dataset') {
      for (const [k, v] of Object.entries(value)) el.dataset[k] = String(v);
    } else if (key.startsWith('on') && typeof value === 'function') {
      el.addEventListener(key.slice(2), value);
    } else if (key === 'class' && el instanceof HTMLElement) {
      el.className = value;
    } else {
      el.setAttribute(key, value === true ? '' : String(value));
    }
  }
}

// append adds children: nodes as they are, strings and numbers as text,
// arrays flattened, null/undefined/false skipped.
export function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
  return el;
}

// uid returns an id unique in this document, for label/aria references.
let counter = 0;
export function uid(prefix) {
  counter += 1;
  return `${prefix}-${counter}`;
}
