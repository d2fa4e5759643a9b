// pages/admin-audit.js — the audit log: who or what did what to which
// target, when and from where, newest first (GET /audit). Filters (a time
// range, actor, action, target) live in the URL; "Show more" follows the
// cursor; "Download CSV" exports what the filters select. Admins read every
// entry (#/admin/audit); a class's owner and co-teachers read the entries of
// that class (#/class/audit?id=N, a tab of the class pages) — the server
// decides what each may see. The system's own actions (idle stops,
// preemptions, reconciler removals) show "system" as the actor.
import { api } from '../api.js';
import { t, formatDate } from '../i18n.js';
import { h, messageBox, emptyRow } from '../ui.js';
import { classHead } from '../parts/classnav.js';

const COLS = 6;
const KEYS = ['from', 'to', 'actor', 'action', 'target'];

function fromUrl() {
  const q = new URLSearchParams(location.hash.split('?').slice(1).join('?'));
  const f = {};
  for (const k of [...KEYS, 'id']) if (q.get(k)) f[k] = q.get(k);
  return f;
}

// datetime-local (the browser's time zone) <-> ISO 8601 UTC for the API
const toIso = (v) => { const d = new Date(v); return v && !Number.isNaN(d.getTime()) ? d.toISOString() : ''; };
function toLocal(iso) {
  const d = new Date(iso);
  if (!iso || Number.isNaN(d.getTime())) return '';
  const p = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

function detailsText(d) {
  if (!d || typeof d !== 'object' || !Object.keys(d).length) return '';
  return JSON.stringify(d);
}

function row(e) {
  const system = e.actor === 'system' && e.actor_id === null;
  const details = detailsText(e.details);
  return h('tr', { 'data-audit': String(e.id), 'data-action': e.action },
    h('td', { class: 'nowrap' }, h('time', { datetime: e.at }, formatDate(e.at))),
    h('td', { 'data-field': 'actor' }, system
      ? h('span', { class: 'badge badge-label', 'data-system': '' }, t('audit.system'))
      : e.actor ? h('span', { class: 'mono' }, e.actor) : h('span', { class: 'muted' }, t('audit.anonymous'))),
    h('td', { 'data-field': 'action' }, h('span', { class: 'mono' }, e.action)),
    h('td', { 'data-field': 'target' }, h('span', { class: 'mono' }, e.target || '—')),
    h('td', { 'data-field': 'ip' }, h('span', { class: 'mono' }, e.ip || '—')),
    h('td', { 'data-field': 'details', class: 'audit-details' },
      details ? h('code', { class: 'mono', title: details }, details.length > 160 ? `${details.slice(0, 160)}…` : details) : ''));
}

export function render(main, ctx) {
  const f = fromUrl();
  const classPage = location.hash.startsWith('#/class/audit');
  const classId = classPage && /^[1-9][0-9]{0,17}$/.test(f.id || '') ? f.id : '';
  const base = classPage ? '#/class/audit' : '#/admin/audit';
  const msg = messageBox();
  const tbody = h('tbody', null, emptyRow(COLS, t('common.loading')));
  const more = h('button', { type: 'button', class: 'btn btn-small', hidden: true, 'data-action': 'more' }, t('audit.more'));
  const input = (name, type, attrs = {}) => h('input', { type, 'data-filter': name, 'aria-label': t(`audit.filter.${name}`), ...attrs });
  // to the second (step 1): a link may name any time
  const from = input('from', 'datetime-local', { step: 1, value: toLocal(f.from) });
  const to = input('to', 'datetime-local', { step: 1, value: toLocal(f.to) });
  const actor = input('actor', 'text', { placeholder: t('audit.filter.actorHint'), maxlength: 79, value: f.actor || '', autocapitalize: 'none', spellcheck: 'false' });
  const action = input('action', 'text', { placeholder: t('audit.filter.actionHint'), maxlength: 79, value: f.action || '', autocapitalize: 'none', spellcheck: 'false' });
  const target = input('target', 'text', { placeholder: t('audit.filter.targetHint'), maxlength: 319, value: f.target || '', autocapitalize: 'none', spellcheck: 'false' });
  const csv = h('a', { class: 'btn', 'data-action': 'csv', download: 'audit.csv' }, t('audit.csv'));
  let cursor = null, seq = 0;

  function current() {
    return {
      from: toIso(from.value) || undefined, to: toIso(to.value) || undefined,
      actor: actor.value.trim() || undefined, action: action.value.trim() || undefined,
      target: target.value.trim() || undefined,
    };
  }
  function query(c, extra = {}) {
    const q = new URLSearchParams();
    for (const k of KEYS) if (c[k]) q.set(k, c[k]);
    if (classId) q.set('class_id', classId);
    for (const [k, v] of Object.entries(extra)) q.set(k, v);
    return q;
  }
  function syncUrl(c) {
    const q = new URLSearchParams();
    if (classId) q.set('id', classId);
    for (const k of KEYS) if (c[k]) q.set(k, c[k]);
    const s = q.toString();
    history.replaceState(null, '', `${base}${s ? `?${s}` : ''}`);
    csv.href = `/api/v1/audit?${query(c, { format: 'csv' })}`;
  }

  async function load(append) {
    const mine = ++seq;
    const c = current();
    if (!append) { cursor = null; syncUrl(c); }
    more.disabled = true;
    try {
      const q = query(c, { limit: '50' });
      if (append && cursor) q.set('cursor', cursor);
      const reply = await api.get(`/audit?${q}`);
      if (mine !== seq || !main.isConnected) return;
      const items = reply?.items || [];
      msg.clear();
      if (!append) {
        tbody.replaceChildren(...(items.length ? items.map(row)
          : [h('tr', { class: 'empty', 'data-empty': 'audit' }, h('td', { colspan: COLS }, t('audit.none')))]));
      } else {
        tbody.append(...items.map(row));
      }
      cursor = reply?.next_cursor || null;
      more.hidden = !cursor;
    } catch (err) {
      if (mine !== seq || !main.isConnected) return;
      if (!append) tbody.replaceChildren(emptyRow(COLS, '—'));
      msg.error(err);
    } finally {
      more.disabled = false;
    }
  }
  more.addEventListener('click', () => load(true));

  const form = h('form', { class: 'filter-bar audit-filters', 'data-form': 'audit-filters', novalidate: true },
    h('label', { class: 'filter-label' }, t('audit.filter.from'), ' ', from),
    h('label', { class: 'filter-label' }, t('audit.filter.to'), ' ', to),
    actor, action, target,
    h('button', { type: 'submit', class: 'btn btn-small btn-primary', 'data-action': 'apply' }, t('audit.apply')),
    h('button', {
      type: 'button', class: 'btn btn-small', 'data-action': 'clear',
      onclick: () => { for (const el of [from, to, actor, action, target]) el.value = ''; load(false); },
    }, t('audit.clear')));
  form.addEventListener('submit', (e) => { e.preventDefault(); load(false); });

  const table = h('div', { class: 'card card-flush' },
    msg.el,
    h('div', { class: 'table-wrap' }, h('table', { class: 'table', 'data-table': 'audit' },
      h('thead', null, h('tr', null,
        h('th', { scope: 'col' }, t('audit.col.when')),
        h('th', { scope: 'col' }, t('audit.col.who')),
        h('th', { scope: 'col' }, t('audit.col.action')),
        h('th', { scope: 'col' }, t('audit.col.target')),
        h('th', { scope: 'col' }, t('audit.col.ip')),
        h('th', { scope: 'col' }, t('audit.col.details')))),
      tbody)),
    h('div', { class: 'actions' }, more));
  const head = h('div', { class: 'page-head page-head-row' },
    h('div', { class: 'page-head-text' },
      classPage ? h('h2', null, t('nav.audit')) : h('h1', null, t('nav.audit')),
      h('p', { class: 'muted' }, t(classPage ? 'audit.introClass' : 'audit.intro'))),
    h('div', { class: 'toolbar' }, csv));
  const page = h('section', { class: 'page', 'data-page': 'audit' }, head, form, table);
  main.append(page);
  if (classPage && classId) {
    api.get(`/classes/${classId}`).then((cls) => {
      if (main.isConnected && cls) page.prepend(classHead(cls, ctx.user, 'audit'));
    }).catch(() => {});
  }
  load(false);
}
