// The UI's entry point: a hash router (#/problems, #/problems/<id>,
// #/service-map, #/findings, #/paths, #/edges, #/trace/<id>) that renders one
// page at a time into <main>. The problems list is the home page.
//
// body[data-state] is "loading", "ready" or "error", body[data-page] names
// the page shown and body[data-route] the hash it was rendered for; the
// browser test waits on them.

import { h } from './dom.js';
import { renderFindings } from './findings.js';
import { renderPaths } from './paths.js';
import { renderEdges } from './edges.js';
import { renderProblem, renderProblems } from './problems.js';
import { renderServiceMap } from './servicemap.js';
import { renderTrace } from './trace.js';

// pages by route name. A page with detail renders #/<name>/<arg> as that
// page; nav names the navigation entry a page belongs to.
const pages = {
  problems: { render: renderProblems, title: 'Problems', detail: 'problem' },
  problem: { render: renderProblem, title: 'Problem', nav: 'problems' },
  'service-map': { render: renderServiceMap, title: 'Service map' },
  findings: { render: renderFindings, title: 'Findings' },
  paths: { render: renderPaths, title: 'Paths' },
  edges: { render: renderEdges, title: 'Edges' },
  trace: { render: renderTrace, title: 'Trace' },
};

// parseRoute reads the hash: #/<page>[/<arg>][?<params>]. A page with a
// detail page names it when there is an arg: #/problems/<id> is "problem".
export function parseRoute(hash) {
  const raw = hash.replace(/^#\/?/, '');
  const q = raw.indexOf('?');
  const pathPart = q < 0 ? raw : raw.slice(0, q);
  const params = new URLSearchParams(q < 0 ? '' : raw.slice(q + 1));
  const [first, ...rest] = pathPart.split('/');
  let arg = '';
  try {
    arg = decodeURIComponent(rest.join('/'));
  } catch {
    arg = rest.join('/');
  }
  let page = first || 'problems';
  if (arg && Object.hasOwn(pages, page) && pages[page].detail) page = pages[page].detail;
  return { page, arg, params };
}

let current = null; // the AbortController of the page being rendered
let rendered = 0;

async function render() {
  const hash = location.hash;
  const route = parseRoute(hash);
  const page = Object.hasOwn(pages, route.page) ? pages[route.page] : null;
  const main = document.getElementById('main');
  const status = document.getElementById('status');
  if (current) current.abort(); // stop the previous page's queries
  const ctl = new AbortController();
  current = ctl;
  const first = rendered === 0;
  rendered += 1;

  document.body.dataset.state = 'loading';
  document.body.dataset.page = route.page;
  main.setAttribute('aria-busy', 'true');
  const navPage = page && page.nav ? page.nav : route.page;
  for (const a of document.querySelectorAll('nav a[data-page]')) {
    if (a.dataset.page === navPage) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }

  let view;
  let state = 'ready';
  if (!page) {
    view = notFound(route.page);
    state = 'error';
  } else {
    try {
      view = await page.render(route, ctl.signal);
    } catch (err) {
      if (ctl.signal.aborted) return; // a newer navigation took over
      view = errorView(err);
      state = 'error';
    }
  }
  if (ctl !== current) return;
  main.replaceChildren(view);
  main.setAttribute('aria-busy', 'false');
  const heading = main.querySelector('h1');
  document.title = `${heading ? heading.textContent : (page ? page.title : 'Not found')} · budgetd`;
  status.textContent = `${document.title} loaded`;
  // Move focus to the new page for keyboard and screen reader users, but
  // not on the first load, where focus belongs to the browser.
  if (!first && heading) {
    heading.setAttribute('tabindex', '-1');
    heading.focus({ preventScroll: false });
  }
  if (route.params.get('finding') || route.params.get('span')) {
    const target = main.querySelector('.is-selected');
    if (target) target.scrollIntoView({ block: 'center' });
  }
  document.body.dataset.route = hash;
  document.body.dataset.state = state;
}

function notFound(name) {
  return h('section', null,
    h('h1', null, 'Page not found'),
    h('p', null, 'There is no page called ', h('code', null, name), '. ',
      h('a', { href: '#/problems' }, 'Go to the problems'), '.'));
}

export function errorView(err) {
  return h('section', null,
    h('h1', null, 'Could not load this page'),
    h('p', { class: 'error', role: 'alert' }, err && err.message ? err.message : String(err)));
}

function setup() {
  document.getElementById('trace-jump').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const input = document.getElementById('trace-jump-id');
    const id = input.value.trim().toLowerCase();
    if (/^[0-9a-f]{32}$/.test(id)) location.hash = `#/trace/${id}`;
  });
  document.getElementById('skip-link').addEventListener('click', (ev) => {
    ev.preventDefault(); // the hash belongs to the router
    document.getElementById('main').focus();
  });
  window.addEventListener('hashchange', render);
  render();
}

setup();
