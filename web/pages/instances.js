// pages/instances.js — "My instances": every instance of mine with its live
// state (polled every 2 s while shown), why a queued one waits and where it
// is in the queue, an idle warning when one stands, and the actions that fit
// the state (start, stop, delete, open its apps). Admins may show everyone's.
import { api } from '../api.js';
import { t, formatNumber, formatDate } from '../i18n.js';
import { h, messageBox, emptyRow } from '../ui.js';
import { routeButtons } from '../parts/route-buttons.js';
import { instanceStateBadge, waitInfo, actionButtons } from '../parts/instance.js';
import { poll } from '../parts/poll.js';
import { keyedRows } from '../parts/keyed-rows.js';

const COLS = 6;
const POLL_MS = 2000;

// One instance's row. A row is drawn again only when its instance changed
// (its route buttons fetch the instance's routes once per drawing).
function row(inst, all, after, onError) {
  const why = waitInfo(inst);
  const gpus = inst.slices ? t('inst.gpuCell', { n: formatNumber(inst.slices), pool: inst.pool || '—' }) : t('inst.noGpu');
  return h('tr', { 'data-instance': inst.name, 'data-id': inst.id, 'data-state': inst.state },
    h('td', null,
      h('a', { href: `#/instance?id=${inst.id}`, class: 'mono', 'data-action': 'open' }, inst.name),
      all ? h('div', { class: 'cell-sub muted' }, inst.username) : null),
    h('td', null, inst.image_name || inst.image || '—', h('div', { class: 'cell-sub muted mono' }, inst.image || '')),
    h('td', { 'data-field': 'state' }, instanceStateBadge(inst.state),
      why.text ? h('div', { class: 'cell-sub', 'data-field': 'why', title: why.detail || null }, why.text) : null,
      why.eta ? h('div', { class: 'cell-sub muted', 'data-field': 'eta' }, why.eta) : null,
      inst.idle_warning_at ? h('div', { class: 'cell-sub warning', 'data-field': 'idle-warning' }, inst.idle_message || t('inst.idleWarned')) : null),
    h('td', null, gpus, h('div', { class: 'cell-sub muted' }, inst.node || '')),
    h('td', { class: 'nowrap muted' }, formatDate(inst.created_at)),
    h('td', { class: 'cell-actions' }, routeButtons(inst), actionButtons(inst, after, onError)));
}

export function render(main, ctx) {
  const msg = messageBox();
  const tbody = h('tbody', null, emptyRow(COLS, t('common.loading')));
  const count = h('p', { class: 'muted table-count', 'data-instance-count': '' });
  let all = false;   // an admin's "show everyone's"
  const refresh = () => list.refresh();
  const draw = (inst) => ({ el: row(inst, all, refresh, (e) => msg.error(e)), key: JSON.stringify(inst) });
  const rows = keyedRows(tbody, {
    make: draw,
    update: (r, inst) => { if (r.key !== JSON.stringify(inst)) Object.assign(r, draw(inst)); },
    empty: () => h('tr', { class: 'empty', 'data-empty': 'instances' }, h('td', { colspan: COLS }, t('inst.none'))),
  });

  main.append(h('section', { class: 'page' },
    h('div', { class: 'page-head page-head-row' },
      h('div', { class: 'page-head-text' },
        h('h1', null, t('inst.title')),
        h('p', { class: 'muted' }, t('inst.intro'))),
      h('a', { class: 'btn btn-primary', href: '#/instances/new', 'data-action': 'new-instance' }, t('inst.new'))),
    msg.el,
    ctx.user.role === 'admin'
      ? h('label', { class: 'check' }, h('input', { type: 'checkbox', 'data-action': 'show-all', onchange: (e) => { all = e.target.checked; rows.clear(); refresh(); } }), ' ', t('inst.showAll'))
      : null,
    h('div', { class: 'card card-flush' },
      h('div', { class: 'table-wrap' },
        h('table', { class: 'table', 'data-table': 'instances' },
          h('thead', null, h('tr', null,
            h('th', { scope: 'col' }, t('inst.col.name')),
            h('th', { scope: 'col' }, t('inst.col.image')),
            h('th', { scope: 'col' }, t('inst.col.state')),
            h('th', { scope: 'col' }, t('inst.col.gpus')),
            h('th', { scope: 'col' }, t('inst.col.created')),
            h('th', { scope: 'col' }, h('span', { class: 'visually-hidden' }, t('inst.col.actions'))))),
          tbody))),
    count));

  const list = poll(() => api.get('/instances', { query: { all: all ? 1 : undefined } }), POLL_MS, {
    until: main,
    show: (reply) => {
      const items = reply.items || [];
      rows.sync(items);
      count.textContent = t('inst.count', { count: items.length, running: formatNumber(items.filter((i) => i.state === 'running').length) });
      msg.clear();
    },
    fail: (err) => msg.error(err),
  });
}
