// pages/sweeps.js — "Sweeps": my sweeps, newest first (an admin sees
// everyone's), each with its state, runs per state, what ranks its runs and
// the best value so far; "Show more" pages. Polled every 5 s while shown.
import { api } from '../api.js';
import { t, formatNumber, formatDate } from '../i18n.js';
import { h, messageBox, emptyRow } from '../ui.js';
import { poll } from '../parts/poll.js';
import { jobStateBadge, JOB_STATES } from '../parts/job.js';
import { sweepStateBadge, sweepGoal, sweepBest } from '../parts/sweep.js';

const COLS = 5;
const POLL_MS = 5000;

function row(s, admin) {
  return h('tr', { 'data-sweep': s.name, 'data-id': s.id, 'data-state': s.state },
    h('td', null,
      h('a', { href: `#/sweep?id=${s.id}`, class: 'mono', 'data-action': 'open' }, s.name),
      admin ? h('div', { class: 'cell-sub muted' }, s.username) : null),
    h('td', null, sweepStateBadge(s.state)),
    h('td', null, t('sweep.runs', { count: s.runs }),
      h('div', { class: 'cell-sub' }, ...JOB_STATES.filter((k) => s.counts?.[k]).flatMap((k) => [jobStateBadge(k), ' ', formatNumber(s.counts[k]), ' ']))),
    h('td', null, sweepBest(s), h('div', { class: 'cell-sub muted' }, sweepGoal(s))),
    h('td', { class: 'nowrap muted' }, formatDate(s.created_at)));
}

export function render(main, ctx) {
  const msg = messageBox();
  const tbody = h('tbody', null, emptyRow(COLS, t('common.loading')));
  const more = h('button', { type: 'button', class: 'btn btn-small', hidden: true, 'data-action': 'more' }, t('job.more'));
  let pages = 1;

  async function fetchAll() {
    let got = [], cursor, reply;
    for (let i = 0; i < pages; i++) {
      reply = await api.get('/sweeps', { query: { limit: 50, cursor } });
      got = got.concat(reply.items || []);
      cursor = reply.next_cursor;
      if (!cursor) break;
    }
    return { items: got, next: cursor };
  }
  function show(r) {
    const admin = ctx.user.role === 'admin';
    tbody.replaceChildren(...(r.items.length ? r.items.map((s) => row(s, admin))
      : [h('tr', { class: 'empty', 'data-empty': 'sweeps' }, h('td', { colspan: COLS }, t('sweep.none')))]));
    more.hidden = !r.next;
    msg.clear();
  }
  more.addEventListener('click', () => { pages++; list.refresh(); });

  main.append(h('section', { class: 'page' },
    h('p', null, h('a', { href: '#/jobs' }, t('job.back'))),
    h('div', { class: 'page-head page-head-row' },
      h('div', { class: 'page-head-text' },
        h('h1', null, t('sweep.title')),
        h('p', { class: 'muted' }, t('sweep.intro'))),
      h('a', { class: 'btn btn-primary', href: '#/sweeps/new', 'data-action': 'new-sweep' }, t('sweep.new'))),
    msg.el,
    h('div', { class: 'card card-flush' },
      h('div', { class: 'table-wrap' },
        h('table', { class: 'table', 'data-table': 'sweeps' },
          h('thead', null, h('tr', null,
            h('th', { scope: 'col' }, t('sweep.col.name')),
            h('th', { scope: 'col' }, t('sweep.col.state')),
            h('th', { scope: 'col' }, t('sweep.col.runs')),
            h('th', { scope: 'col' }, t('sweep.col.best')),
            h('th', { scope: 'col' }, t('sweep.col.submitted')))),
          tbody))),
    more));
  const list = poll(fetchAll, POLL_MS, { until: main, show, fail: (err) => msg.error(err) });
}
