// pages/jobs.js — "Jobs": my jobs (an admin may show everyone's), newest
// first, with a state filter, a search over name, tags, command and reason,
// the count of each state, why each failed or waits, and cursor pages
// ("Show more"). Polled every 3 s while shown.
import { api } from '../api.js';
import { t, formatNumber, formatDate } from '../i18n.js';
import { h, messageBox, emptyRow, icon } from '../ui.js';
import { poll } from '../parts/poll.js';
import { JOB_STATES, jobStateBadge, jobReason, jobResources, cancelButton } from '../parts/job.js';

const COLS = 6;
const POLL_MS = 3000;

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
    h('td', null, jobResources(job), h('div', { class: 'cell-sub muted' }, job.node || '')),
    h('td', { class: 'nowrap muted' }, formatDate(job.created_at), h('div', { class: 'cell-sub' }, duration(job))),
    h('td', { class: 'cell-actions' }, cancelButton(job, after, onError)));
}

export function render(main, ctx) {
  const msg = messageBox();
  const tbody = h('tbody', null, emptyRow(COLS, t('common.loading')));
  const count = h('p', { class: 'muted table-count', 'data-job-count': '' });
  const counts = h('p', { class: 'toolbar', 'data-counts': '' });
  const more = h('button', { type: 'button', class: 'btn btn-small', hidden: true, 'data-action': 'more' }, t('job.more'));
  const stateSel = h('select', { 'data-filter': 'state', 'aria-label': t('job.filter.state') },
    h('option', { value: '' }, t('job.filter.all')),
    ...JOB_STATES.map((s) => h('option', { value: s }, t(`job.state.${s}`))));
  const search = h('input', { type: 'search', 'data-filter': 'q', placeholder: t('job.filter.searchHint'), 'aria-label': t('job.filter.search'), maxlength: 199 });
  let all = false;
  let pages = 1;     // how many pages are shown ("Show more")
  let items = [];

  const query = (cursor) => ({
    state: stateSel.value || undefined, q: search.value.trim() || undefined, limit: 50, cursor,
  });
  async function fetchAll() {
    // the first `pages` pages, so a poll keeps what "Show more" added
    let got = [], cursor, reply;
    for (let i = 0; i < pages; i++) {
      reply = await api.get('/jobs', { query: { ...query(cursor), ...(ctx.user.role === 'admin' && !all ? { user: ctx.user.username } : {}) } });
      got = got.concat(reply.items || []);
      cursor = reply.next_cursor;
      if (!cursor) break;
    }
    return { items: got, counts: reply.counts, next: cursor };
  }
  const refresh = () => list.refresh();
  function show(r) {
    items = r.items;
    tbody.replaceChildren(...(items.length ? items.map((j) => row(j, all, refresh, (e) => msg.error(e))) : [h('tr', { class: 'empty', 'data-empty': 'jobs' }, h('td', { colspan: COLS }, t('job.none')))]));
    count.textContent = t('job.count', { count: items.length });
    counts.replaceChildren(...JOB_STATES.filter((s) => r.counts && r.counts[s]).map((s) =>
      h('button', { type: 'button', class: 'btn btn-small', 'data-count': s, onclick: () => { stateSel.value = s; pages = 1; refresh(); } },
        jobStateBadge(s), ' ', formatNumber(r.counts[s]))));
    more.hidden = !r.next;
    msg.clear();
  }
  let timer = null;
  search.addEventListener('input', () => { clearTimeout(timer); timer = setTimeout(() => { pages = 1; refresh(); }, 250); });
  stateSel.addEventListener('change', () => { pages = 1; refresh(); });
  more.addEventListener('click', () => { pages++; refresh(); });

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
    counts,
    h('div', { class: 'card card-flush' },
      h('div', { class: 'card-toolbar' },
        h('div', { class: 'search' },
          h('span', { class: 'search-icon', 'aria-hidden': 'true' }, icon('search', 16)), search),
        h('div', { class: 'search' }, stateSel),
        ctx.user.role === 'admin'
          ? h('label', { class: 'check' }, h('input', { type: 'checkbox', 'data-action': 'show-all', onchange: (e) => { all = e.target.checked; refresh(); } }), ' ', t('job.filter.everyone'))
          : null),
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
