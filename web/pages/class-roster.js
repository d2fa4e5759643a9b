// pages/class-roster.js — a class's roster (#/class/roster?id=N): the owner,
// co-teachers, assistants and students with their state; add one by
// username, change a role, suspend, resume, remove (each only below the
// caller's own rank, as the server holds it); import a CSV — check first
// (a report per line), then import: new student accounts get one-time
// passwords, shown once here with a CSV and a printable sheet; and the
// invite link (a code shown once, with an expiry; disable it).
import { api } from '../api.js';
import { t, formatDate } from '../i18n.js';
import { h, field, messageBox, busy, openDialog, emptyRow, toast, icon, confirmDialog, secretBox } from '../ui.js';
import { classHead } from '../parts/classnav.js';
import { downloadCsv, downloadSheet } from '../parts/passwords.js';
import { classRoleBadge } from './classes.js';

const COLS = 6;
const RANK = { admin: 5, owner: 4, teacher: 3, ta: 2, student: 1 };
const CSV_EXAMPLE = 'username,display_name,email,role\nalice,Alice Liu,alice@example.edu,student\nbob,Bob Chen,,ta';
const EXPIRIES = [86400, 7 * 86400, 30 * 86400, 120 * 86400];

export function render(main, ctx) {
  const id = Number(new URLSearchParams(location.hash.split('?')[1] || '').get('id'));
  const msg = messageBox();
  const root = h('section', { class: 'page', 'data-page': 'class-roster' }, msg.el);
  const tbody = h('tbody', null, emptyRow(COLS, t('common.loading')));
  const inviteBody = h('div', { 'data-invite': '' });
  let cls = null;
  main.append(root);

  const myRank = () => (ctx.user?.role === 'admin' ? 5 : RANK[cls?.my_role] || 0);
  const canManage = () => cls.state === 'active' && (myRank() >= 3 || (cls.my_role === 'ta' && cls.reach.tas_manage_roster));
  const grantable = () => ['student', 'ta', 'teacher'].filter((r) => RANK[r] < myRank());

  async function load() {
    try {
      cls = await api.get(`/classes/${id}`);
      const reply = await api.get(`/classes/${id}/members`);
      draw(reply?.items || []);
    } catch (err) {
      msg.error(err);
    }
  }

  async function act(path, method, body, done) {
    try {
      if (method === 'PATCH') await api.patch(path, body); else await api.del(path);
      toast(done);
      load();
    } catch (err) { msg.error(err); }
  }

  function memberRow(m) {
    const mine = canManage() && m.role !== 'owner' && RANK[m.role] < myRank();
    const base = `/classes/${id}/members/${m.user.id}`;
    const who = m.user.display_name || m.user.username;
    const roleSel = mine && myRank() >= 3 ? h('select', {
      class: 'select-small', 'data-action': 'set-role', 'aria-label': t('roster.role'),
      onchange: (e) => act(base, 'PATCH', { role: e.target.value }, t('roster.roleChanged', { name: who })),
    }, grantable().map((r) => h('option', { value: r, selected: m.role === r }, t(`class.role.${r}`)))) : classRoleBadge(m.role);
    return h('tr', { 'data-member': m.user.username, 'data-state': m.state },
      h('td', { class: 'mono' }, m.user.username),
      h('td', null, m.user.display_name || '—'),
      h('td', null, roleSel),
      h('td', null, m.state === 'active'
        ? h('span', { class: 'badge badge-on' }, t('roster.state.active'))
        : h('span', { class: 'badge badge-warn' }, t('roster.state.suspended'))),
      h('td', { class: 'muted' }, t(`roster.via.${m.via}`), ' · ', formatDate(m.added_at)),
      h('td', { class: 'row-actions' }, mine ? [
        m.state === 'active'
          ? h('button', { type: 'button', class: 'btn btn-small', 'data-action': 'suspend', onclick: () => act(base, 'PATCH', { state: 'suspended' }, t('roster.suspended', { name: who })) }, t('roster.suspend'))
          : h('button', { type: 'button', class: 'btn btn-small', 'data-action': 'resume', onclick: () => act(base, 'PATCH', { state: 'active' }, t('roster.resumed', { name: who })) }, t('roster.resume')),
        ' ',
        h('button', {
          type: 'button', class: 'btn btn-small btn-danger', 'data-action': 'remove',
          onclick: async () => {
            if (await confirmDialog({ title: t('roster.remove'), message: t('roster.removeConfirm', { name: who, cls: cls.name }), confirmLabel: t('roster.remove'), danger: true })) {
              act(base, 'DELETE', null, t('roster.removed', { name: who }));
            }
          },
        }, t('roster.remove')),
      ] : null));
  }

  function addDialog() {
    openDialog({
      title: t('roster.add'),
      build: (close) => {
        const m = messageBox();
        const user = h('input', { type: 'text', name: 'username', autocomplete: 'off', required: true });
        const role = h('select', { name: 'role' }, grantable().map((r) => h('option', { value: r }, t(`class.role.${r}`))));
        const form = h('form', { class: 'form', 'data-form': 'add-member', novalidate: true },
          field(t('user.username'), user), field(t('roster.role'), role), m.el,
          h('div', { class: 'actions' },
            h('button', { type: 'button', class: 'btn', onclick: () => close() }, t('common.cancel')),
            h('button', { type: 'submit', class: 'btn btn-primary', 'data-action': 'add-member' }, t('roster.add'))));
        form.addEventListener('submit', (e) => {
          e.preventDefault();
          if (!user.value.trim()) { user.focus(); return; }
          busy(form, async () => {
            try {
              await api.post(`/classes/${id}/members`, { username: user.value.trim(), role: role.value });
              toast(t('roster.added', { name: user.value.trim() }));
              close();
              load();
            } catch (err) { m.error(err); }
          });
        });
        return [form];
      },
    });
  }

  function reportTable(rows, withPasswords) {
    return h('div', { class: 'table-wrap' }, h('table', { class: 'table', 'data-table': 'import-report' },
      h('thead', null, h('tr', null,
        h('th', { scope: 'col', class: 'num' }, t('roster.line')),
        h('th', { scope: 'col' }, t('user.username')),
        h('th', { scope: 'col' }, t('roster.role')),
        h('th', { scope: 'col' }, t('roster.result')),
        withPasswords ? h('th', { scope: 'col' }, t('roster.password')) : null)),
      h('tbody', null, rows.map((r) => h('tr', { 'data-row': r.username, 'data-result': r.action },
        h('td', { class: 'num' }, String(r.line)),
        h('td', { class: 'mono' }, r.username),
        h('td', null, t(`class.role.${r.role || 'student'}`)),
        h('td', null, t(`roster.action.${r.action}`)),
        withPasswords ? h('td', { class: 'mono', 'data-password': '' }, r.password || '—') : null)))));
  }

  function importDialog() {
    openDialog({
      title: t('roster.import'),
      wide: 'x',
      build: (close) => {
        const m = messageBox();
        const text = h('textarea', { id: 'roster-csv', rows: 10, class: 'mono', spellcheck: 'false', placeholder: CSV_EXAMPLE });
        const file = h('input', { type: 'file', accept: '.csv,text/csv,text/plain' });
        file.addEventListener('change', async () => { if (file.files[0]) text.value = await file.files[0].text(); });
        const report = h('div', { 'data-import-report': '' });
        const body = h('div');
        const form = h('form', { class: 'form', 'data-form': 'roster-import', novalidate: true },
          h('p', { class: 'muted' }, t('roster.importIntro')),
          h('pre', { class: 'code-sample' }, 'username[,display_name,email,role]'),
          field(t('roster.importFile'), file),
          field(t('roster.importText'), text),
          m.el, report,
          h('div', { class: 'actions' },
            h('button', { type: 'button', class: 'btn', onclick: () => close() }, t('common.cancel')),
            h('button', { type: 'button', class: 'btn', 'data-action': 'check-import', onclick: () => run(true) }, t('roster.importCheck')),
            h('button', { type: 'submit', class: 'btn btn-primary', 'data-action': 'import' }, icon('upload', 16), t('roster.importRun'))));
        async function run(dry) {
          m.clear();
          report.replaceChildren();
          const csv = text.value.replace(/\s+$/, '');
          if (!csv.trim()) { m.error(t('roster.importEmpty')); text.focus(); return; }
          await busy(form, async () => {
            try {
              const reply = await api.post(`/classes/${id}/members/import`, csv + '\n', { contentType: 'text/csv', query: dry ? { dry_run: '1' } : null });
              if (dry) {
                m.success(t('roster.checked', { created: reply.created, linked: reply.linked, already: reply.already }));
                report.replaceChildren(reportTable(reply.rows, false));
                return;
              }
              load();
              body.replaceChildren(importResult(reply, close));
              body.querySelector('button')?.focus();
            } catch (err) {
              m.error(err);
              if (err.details?.length) {
                report.replaceChildren(h('div', { class: 'import-errors', 'data-import-errors': '' },
                  h('h3', null, t('roster.importErrors', { count: err.details.length })),
                  h('ul', null, err.details.map((d) => h('li', { 'data-line': d.line },
                    h('strong', null, t('roster.lineN', { line: d.line })), ' ', h('span', { lang: 'en' }, d.message))))));
              }
            }
          });
        }
        form.addEventListener('submit', (e) => { e.preventDefault(); run(false); });
        body.append(form);
        return body;
      },
    });
  }

  function importResult(reply, close) {
    const created = reply.rows.filter((r) => r.password);
    const title = t('roster.sheetTitle', { name: cls.name });
    return h('div', { 'data-import-result': '' },
      h('p', { role: 'status' }, t('roster.imported', { created: reply.created, linked: reply.linked, already: reply.already })),
      created.length ? [h('p', null, t('roster.mustChange')), h('p', { class: 'warning' }, t('roster.passwordsOnce'))] : null,
      h('div', { class: 'password-sheet', 'data-sheet': '' }, reportTable(reply.rows, created.length > 0)),
      h('div', { class: 'actions' },
        created.length ? h('button', { type: 'button', class: 'btn', 'data-action': 'download-csv', onclick: () => downloadCsv(created, `${cls.code || 'class'}-accounts.csv`) }, t('users.downloadCsv')) : null,
        created.length ? h('button', { type: 'button', class: 'btn', 'data-action': 'download-sheet', onclick: () => downloadSheet(created, `${cls.code || 'class'}-accounts.html`, title) }, t('users.downloadSheet')) : null,
        h('button', { type: 'button', class: 'btn btn-primary', 'data-action': 'done', onclick: () => close() }, t('common.done'))));
  }

  function drawInvite() {
    const inv = cls.invite || {};
    const expiry = h('select', { name: 'expires', 'data-field': 'invite-expiry', 'aria-label': t('roster.inviteExpiry') },
      EXPIRIES.map((s) => h('option', { value: s, selected: s === 7 * 86400 }, t('roster.days', { count: s / 86400 }))));
    const out = h('div', { 'data-invite-code': '' });
    const make = async () => {
      try {
        const r = await api.post(`/classes/${id}/invite`, { expires_in_s: Number(expiry.value) });
        const url = location.origin + location.pathname + r.url.replace(/^\//, '');
        cls.invite = { active: true, expires_at: r.expires_at };
        drawInvite();
        inviteBody.querySelector('[data-invite-code]').replaceChildren(
          secretBox({ label: t('roster.inviteLink'), value: url, warning: t('roster.inviteOnce', { when: formatDate(r.expires_at) }) }));
      } catch (err) { msg.error(err); }
    };
    const off = async () => {
      try {
        await api.del(`/classes/${id}/invite`);
        cls.invite = { active: false, expires_at: null };
        toast(t('roster.inviteDisabled'));
        drawInvite();
      } catch (err) { msg.error(err); }
    };
    inviteBody.replaceChildren(
      h('p', { 'data-field': 'invite-state' }, inv.active ? t('roster.inviteActive', { when: formatDate(inv.expires_at) }) : t('roster.inviteNone')),
      canManage() ? h('div', { class: 'toolbar' },
        expiry,
        h('button', { type: 'button', class: 'btn btn-primary', 'data-action': 'make-invite', onclick: make }, inv.active ? t('roster.inviteReplace') : t('roster.inviteMake')),
        inv.active ? h('button', { type: 'button', class: 'btn btn-danger', 'data-action': 'disable-invite', onclick: off }, t('roster.inviteDisable')) : null) : null,
      out);
  }

  function draw(items) {
    tbody.replaceChildren(...items.map(memberRow));
    if (!items.length) tbody.append(emptyRow(COLS, t('roster.none')));
    if (root.querySelector('[data-table=roster]')) { msg.clear(); drawInvite(); return; }
    drawInvite();
    root.replaceChildren(
      classHead(cls, ctx.user, 'roster'),
      msg.el,
      h('div', { class: 'page-head page-head-row' },
        h('p', { class: 'muted' }, t('roster.intro')),
        canManage() ? h('div', { class: 'toolbar' },
          h('button', { type: 'button', class: 'btn', 'data-action': 'open-import', onclick: importDialog }, icon('upload', 16), t('roster.import')),
          h('button', { type: 'button', class: 'btn btn-primary', 'data-action': 'open-add', onclick: addDialog }, icon('plus', 16), t('roster.add'))) : null),
      h('div', { class: 'card card-flush' },
        h('div', { class: 'table-wrap' }, h('table', { class: 'table', 'data-table': 'roster' },
          h('thead', null, h('tr', null,
            h('th', { scope: 'col' }, t('user.username')),
            h('th', { scope: 'col' }, t('roster.name')),
            h('th', { scope: 'col' }, t('roster.role')),
            h('th', { scope: 'col' }, t('roster.state')),
            h('th', { scope: 'col' }, t('roster.addedAt')),
            h('th', { scope: 'col' }, h('span', { class: 'visually-hidden' }, t('common.actions'))))),
          tbody))),
      h('div', { class: 'card', 'data-card': 'invite' }, h('h2', null, t('roster.invite')), inviteBody));
  }

  if (!id) { msg.error(t('class.noId')); return; }
  load();
}
