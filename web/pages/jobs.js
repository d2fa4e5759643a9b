// pages/jobs.js — "Jobs": my jobs (an admin may show everyone's) as a
// dashboard: state chips with the count of each state (under the other
// filters), a search over name, tags, command and reason, image, pool, tag,
// submitted and ended time ranges, and the sort; why each failed or waits;
// cursor pages ("Show more").  The filters live in the URL
// (#/jobs?state=failed&ended=7d&sort=finished), so a view can be shared and
// survives a reload.  Polled every 3 s while shown.
import { api } from '../api.js';
import { t, formatNumber, formatDate } from '../i18n.js';
import { h, messageBox, emptyRow, icon } from '../ui.js';
import { poll } from '../parts/poll.js';
import { JOB_STATES, jobStateBadge, jobReason, jobResources, cancelButton } from '../parts/job.js';

const COLS = 6;
const POLL_MS = 3000;
const RANGES = ['', '24h', '7d', '30d'];
const SORTS = ['created:desc', 'created:asc', 'started:desc', 'finished:desc', 'name:asc', 'runtime:desc', 'runtime:asc'];
// the URL's names for the filters (the API's, but for the two time ranges)
const KEYS = ['state', 'q', 'image', 'pool', 'tags', 'since', 'ended', 'sort', 'all'];

function duration(job) {
  if (!job.started_at) return '—';
  const s = Math.max(0, Math.round(((job.finished_at ? Date.parse(job.finished_at) : Date.now()) - Date.parse(job.started_at)) / 1000));
  return s < 120 ? `${s} s` : s < 7200 ? `${Math.round(s / 60)} min` : `${(s / 3600).toFixed(1)} h`;
}

function row(job, all, after, onError) {
  const why = jobReason(job);
  return h('tr', { 'data-job': job.name, 'data-id': job.id, 'data-state': job.state },
    h('td', null,
      h('a', { href: `#/job?id=${job.id}`, class: 'mono', 'data-action': 'open' }, job.name),
      all ? h('div', { class: 'cell-sub muted' }, job.username) : null,
      job.tags.length ? h('div', { class: 'cell-sub muted' }, job.tags.join(', ')) : null),
    h('td', { 'data-field': 'state' }, jobStateBadge(job.state)),
    h('td', { 'data-field': 'reason' }, why.text,
      why.detail ? h('div', { class: 'cell-sub muted', lang: 'en', 'data-field': 'reason-detail' }, why.detail) : null,
      why.eta ? h('div', { class: 'cell-sub muted', 'data-field': 'eta' }, why.eta) : null),
    h('td', null, jobResources(job), h('div', { class: 'cell-sub muted' }, [job.image_name || job.image, job.node].filter(Boolean).join(' · '))),
    h('td', { class: 'nowrap muted' }, formatDate(job.created_at), h('div', { class: 'cell-sub' }, duration(job))),
    h('td', { class: 'cell-actions' }, cancelButton(job, after, onError)));
}

// The filters from the page's URL (#/jobs?state=failed&...).
function fromUrl() {
  const q = new URLSearchParams(location.hash.split('?').slice(1).join('?'));
  const f = {};
  for (const k of KEYS) if (q.get(k)) f[k] = q.get(k);
  return f;
}

function toUrl(f) {
  const q = new URLSearchParams();
  for (const k of KEYS) if (f[k]) q.set(k, f[k]);
  const s = q.toString();
  // replaceState: no hashchange, so the page is not drawn again
  history.replaceState(null, '', `#/jobs${s ? `?${s}` : ''}`);
}

function select(name, label, options, value) {
  const el = h('select', { 'data-filter': name, 'aria-label': label },
    ...options.map(([v, text]) => h('option', { value: v }, text)));
  el.value = value || '';
  return el;
}

export function render(main, ctx) {
  const f = fromUrl();
  const admin = ctx.user.role === 'admin';
  const msg = messageBox();
  const tbody = h('tbody', null, emptyRow(COLS, t('common.loading')));
  const count = h('p', { class: 'muted table-count', 'data-job-count': '' });
  const chips = h('div', { class: 'toolbar', role: 'group', 'aria-label': t('job.filter.state'), 'data-counts': '' });
  const more = h('button', { type: 'button', class: 'btn btn-small', hidden: true, 'data-action': 'more' }, t('job.more'));
  const stateSel = select('state', t('job.filter.state'), [['', t('job.filter.all')], ...JOB_STATES.map((s) => [s, t(`job.state.${s}`)])], JOB_STATES.includes(f.state) ? f.state : '');
  const search = h('input', { type: 'search', 'data-filter': 'q', placeholder: t('job.filter.searchHint'), 'aria-label': t('job.filter.search'), maxlength: 199, value: f.q || '' });
  const imageSel = select('image', t('job.filter.image'), [['', t('job.filter.anyImage')]], '');
  const poolSel = select('pool', t('job.filter.pool'), [['', t('job.filter.anyPool')]], '');
  const tagIn = h('input', { type: 'text', 'data-filter': 'tags', placeholder: t('job.filter.tagsHint'), 'aria-label': t('job.filter.tags'), maxlength: 200, value: f.tags || '' });
  const rangeOpts = (k) => RANGES.map((r) => [r, r ? t(`job.filter.range.${r}`) : t(`job.filter.${k}Any`)]);
  const sinceSel = select('since', t('job.filter.submitted'), rangeOpts('submitted'), RANGES.includes(f.since) ? f.since : '');
  const endedSel = select('ended', t('job.filter.ended'), rangeOpts('ended'), RANGES.includes(f.ended) ? f.ended : '');
  const sortSel = select('sort', t('job.filter.sort'), SORTS.map((s) => [s, t(`job.sort.${s.replace(':', '.')}`)]), SORTS.includes(f.sort) ? f.sort : 'created:desc');
  // several states at once come from the URL only; the select shows one
  let states = f.state ? f.state.split(',').filter((s) => JOB_STATES.includes(s)) : [];
  let all = admin && f.all === '1';
  let pages = 1;     // how many pages are shown ("Show more")

  // keep the image and pool the URL named until the options arrive
  const wantImage = f.image || '', wantPool = f.pool || '';
  let imagesIn = false, poolsIn = false;
  api.get('/images').then((r) => {
    for (const im of r.items || []) imageSel.append(h('option', { value: String(im.id) }, im.display_name || im.reference));
    if (wantImage && ![...imageSel.options].some((o) => o.value === wantImage)) imageSel.append(h('option', { value: wantImage }, wantImage));
    imageSel.value = wantImage;
    imagesIn = true;
  }).catch(() => {});
  api.get('/pools').then((r) => {
    for (const p of r.items || []) poolSel.append(h('option', { value: p.name }, p.name));
    if (wantPool && ![...poolSel.options].some((o) => o.value === wantPool)) poolSel.append(h('option', { value: wantPool }, wantPool));
    poolSel.value = wantPool;
    poolsIn = true;
  }).catch(() => {});

  function current() {
    return {
      state: states.join(',') || undefined, q: search.value.trim() || undefined,
      image: (imagesIn ? imageSel.value : wantImage) || undefined,
      pool: (poolsIn ? poolSel.value : wantPool) || undefined,
      tags: tagIn.value.split(/[\s,]+/).filter(Boolean).join(',') || undefined,
      since: sinceSel.value || undefined, ended: endedSel.value || undefined,
      sort: sortSel.value !== 'created:desc' ? sortSel.value : undefined, all: all ? '1' : undefined,
    };
  }
  const query = (c, cursor) => {
    const [sort, order] = (c.sort || 'created:desc').split(':');
    return {
      state: c.state, q: c.q, image: c.image, pool: c.pool, tags: c.tags, since: c.since,
      ended_since: c.ended, sort: sort !== 'created' ? sort : undefined, order: order !== 'desc' ? order : undefined,
      limit: 50, cursor, ...(admin && !all ? { user: ctx.user.username } : {}),
    };
  };
  async function fetchAll() {
    // the first `pages` pages, so a poll keeps what "Show more" added
    const c = current();
    let got = [], cursor, reply;
    for (let i = 0; i < pages; i++) {
      reply = await api.get('/jobs', { query: query(c, cursor) });
      got = got.concat(reply.items || []);
      cursor = reply.next_cursor;
      if (!cursor) break;
    }
    return { items: got, counts: reply.counts, next: cursor };
  }
  const refresh = () => list.refresh();
  function changed() {
    pages = 1;
    toUrl(current());
    refresh();
  }
  function setStates(s) {
    states = s;
    stateSel.value = states.length === 1 ? states[0] : '';
    changed();
  }
  function show(r) {
    const items = r.items;
    tbody.replaceChildren(...(items.length ? items.map((j) => row(j, all, refresh, (e) => msg.error(e))) : [h('tr', { class: 'empty', 'data-empty': 'jobs' }, h('td', { colspan: COLS }, t('job.none')))]));
    count.textContent = t('job.count', { count: items.length });
    const total = JOB_STATES.reduce((n, s) => n + ((r.counts && r.counts[s]) || 0), 0);
    chips.replaceChildren(
      h('button', { type: 'button', class: 'btn btn-small', 'aria-pressed': String(!states.length), 'data-count': '', onclick: () => setStates([]) },
        t('job.filter.all'), ' ', formatNumber(total)),
      ...JOB_STATES.filter((s) => (r.counts && r.counts[s]) || states.includes(s)).map((s) =>
        h('button', {
          type: 'button', class: 'btn btn-small', 'data-count': s, 'aria-pressed': String(states.includes(s)),
          title: t('job.filter.chipHint'),
          // a click shows that state alone; with Ctrl/⌘ (or Shift) it is added or taken away
          onclick: (e) => setStates(e.ctrlKey || e.metaKey || e.shiftKey
            ? (states.includes(s) ? states.filter((x) => x !== s) : [...states, s]) : [s]),
        }, jobStateBadge(s), ' ', formatNumber((r.counts && r.counts[s]) || 0))));
    more.hidden = !r.next;
    msg.clear();
  }
  let timer = null;
  const later = () => { clearTimeout(timer); timer = setTimeout(changed, 300); };
  search.addEventListener('input', later);
  tagIn.addEventListener('input', later);
  stateSel.addEventListener('change', () => setStates(stateSel.value ? [stateSel.value] : []));
  for (const el of [imageSel, poolSel, sinceSel, endedSel, sortSel]) el.addEventListener('change', changed);
  more.addEventListener('click', () => { pages++; refresh(); });
  const clear = h('button', {
    type: 'button', class: 'btn btn-small', 'data-action': 'clear-filters',
    onclick: () => {
      search.value = ''; tagIn.value = ''; imageSel.value = ''; poolSel.value = '';
      imagesIn = poolsIn = true;
      sinceSel.value = ''; endedSel.value = ''; sortSel.value = 'created:desc';
      setStates([]);
    },
  }, t('job.filter.clear'));

  main.append(h('section', { class: 'page' },
    h('div', { class: 'page-head page-head-row' },
      h('div', { class: 'page-head-text' },
        h('h1', null, t('job.title')),
        h('p', { class: 'muted' }, t('job.intro'))),
      h('div', { class: 'toolbar' },
        h('a', { class: 'btn', href: '#/sweeps', 'data-action': 'sweeps' }, t('sweep.link')),
        h('a', { class: 'btn', href: '#/sweeps/new', 'data-action': 'new-sweep' }, t('sweep.new')),
        h('a', { class: 'btn btn-primary', href: '#/jobs/new', 'data-action': 'new-job' }, t('job.new')))),
    msg.el,
    chips,
    h('div', { class: 'card card-flush' },
      h('div', { class: 'card-toolbar', 'data-filters': '' },
        h('div', { class: 'search' },
          h('span', { class: 'search-icon', 'aria-hidden': 'true' }, icon('search', 16)), search),
        h('div', { class: 'filter-bar' }, stateSel, imageSel, poolSel, tagIn, sinceSel, endedSel, sortSel, clear,
          admin
            ? h('label', { class: 'check' }, h('input', { type: 'checkbox', 'data-action': 'show-all', checked: all, onchange: (e) => { all = e.target.checked; changed(); } }), ' ', t('job.filter.everyone'))
            : null)),
      h('div', { class: 'table-wrap' },
        h('table', { class: 'table', 'data-table': 'jobs' },
          h('thead', null, h('tr', null,
            h('th', { scope: 'col' }, t('job.col.name')),
            h('th', { scope: 'col' }, t('job.col.state')),
            h('th', { scope: 'col' }, t('job.col.reason')),
            h('th', { scope: 'col' }, t('job.col.resources')),
            h('th', { scope: 'col' }, t('job.col.submitted')),
            h('th', { scope: 'col' }, h('span', { class: 'visually-hidden' }, t('inst.col.actions'))))),
          tbody))),
    count, more));

  const list = poll(fetchAll, POLL_MS, { until: main, show, fail: (err) => msg.error(err) });
}
