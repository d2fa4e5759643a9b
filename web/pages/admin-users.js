// pages/admin-users.js — Administration → Users: search (server-side q),
// "Load more" pagination, active or deleted accounts, create, edit (name,
// email, role, forced password change), enable/disable, password reset,
// delete (the history stays), CSV import with a check first (dry run) and
// every problem listed by line. Generated passwords come back from the
// server once and are shown once, with a CSV and a printable sheet made
// here in the browser.
import { api } from '../api.js';
import { t, formatDate, formatDay } from '../i18n.js';
import { h, field, messageBox, busy, confirmDialog, openDialog, secretBox, emptyRow, toast, icon, dropdown, menuItem, toastError } from '../ui.js';
import { ROLE_NAMES } from '../roles.js';
import { downloadCsv, downloadSheet } from '../parts/passwords.js';

const PAGE_SIZE = 50;
const COLS = 7;
const CSV_EXAMPLE = 'username,display_name,email,role,password\nalice,Alice Liu,alice@example.edu,student,\nbob,Bob Chen,bob@example.edu,researcher,';

export function render(main, ctx) {
  let query = '';
  let view = 'active';   // or 'deleted'
  let cursor = null;
  let seq = 0;   // the newest list request; older replies are dropped

  const listMsg = messageBox();
  const tbody = h('tbody', null, emptyRow(COLS, t('common.loading')));
  const more = h('button', { type: 'button', class: 'btn', 'data-action': 'load-more', hidden: true, onclick: () => load(false) }, t('users.loadMore'));
  const count = h('p', { class: 'muted table-count', 'aria-live': 'polite' });

  async function load(reset) {
    const mine = ++seq;
    if (reset) cursor = null;
    more.disabled = true;
    try {
      const reply = await api.get('/users', { query: { limit: PAGE_SIZE, cursor, q: query, deleted: view === 'deleted' ? 'true' : null } });
      if (mine !== seq) return;
      const items = reply?.items || [];
      if (reset) tbody.replaceChildren();
      tbody.append(...items.map(userRow));
      if (!tbody.children.length) tbody.append(emptyRow(COLS, query ? t('users.noMatch', { q: query }) : view === 'deleted' ? t('users.noneDeleted') : t('users.none')));
      cursor = reply?.next_cursor || null;
      more.hidden = !cursor;
      count.textContent = t('users.shown', { n: tbody.querySelectorAll('tr[data-user]').length });
      listMsg.clear();
    } catch (err) {
      if (mine !== seq) return;
      if (reset) tbody.replaceChildren(emptyRow(COLS, '—'));
      listMsg.error(err);
    } finally {
      if (mine === seq) more.disabled = false;
    }
  }

  function statusBadge(u) {
    const main = u.deleted_at
      ? h('span', { class: 'badge badge-off', 'data-status': 'deleted', title: formatDate(u.deleted_at) }, t('users.deleted'))
      : u.disabled
        ? h('span', { class: 'badge badge-off', 'data-status': 'disabled' }, t('users.disabled'))
        : h('span', { class: 'badge badge-on', 'data-status': 'active' }, t('users.active'));
    return u.must_change_password && !u.deleted_at
      ? [main, ' ', h('span', { class: 'badge badge-warn', 'data-must-change': '' }, t('users.mustChange'))]
      : main;
  }

  function userRow(u) {
    const tr = h('tr', { 'data-user': u.username, 'data-id': u.id });
    fillRow(tr, u);
    return tr;
  }

  function fillRow(tr, u) {
    const isSelf = ctx.user && u.id === ctx.user.id;
    const actions = u.deleted_at ? h('span', { class: 'muted' }, '—') : dropdown({
      className: 'btn-icon btn-more',
      label: t('users.actionsFor', { name: u.username }),
      attrs: { 'data-action': 'row-menu' },
      content: '⋯',
      items: [
        menuItem({ label: t('users.edit'), action: 'edit', onclick: () => editDialog(tr, u) }),
        menuItem({
          label: u.disabled ? t('users.enable') : t('users.disable'),
          action: u.disabled ? 'enable' : 'disable',
          danger: !u.disabled,
          disabled: isSelf,
          title: isSelf ? t('users.notSelf') : null,
          onclick: () => setDisabled(tr, u, !u.disabled),
        }),
        menuItem({ label: t('users.resetPassword'), action: 'reset-password', onclick: () => resetPassword(tr, u) }),
        menuItem({
          label: t('users.delete'), action: 'delete', danger: true, disabled: isSelf,
          title: isSelf ? t('users.notSelfDelete') : null,
          onclick: () => deleteUser(tr, u),
        }),
      ],
    });
    tr.replaceChildren(
      h('td', { class: 'mono nowrap' }, u.username),
      h('td', null, u.display_name || '—'),
      h('td', null, u.email || '—'),
      h('td', null, h('span', { class: `badge badge-role role-${u.role}` }, t(`role.${u.role}`))),
      h('td', null, statusBadge(u)),
      h('td', { class: 'nowrap' }, h('time', { datetime: u.created_at, title: formatDate(u.created_at) }, formatDay(u.created_at))),
      h('td', { class: 'cell-actions' }, actions));
  }

  async function setDisabled(tr, u, disabled) {
    if (disabled) {
      const ok = await confirmDialog({
        title: t('users.disableTitle'), message: t('users.disableConfirm', { name: u.username }),
        confirmLabel: t('users.disable'), danger: true,
      });
      if (!ok) return;
    }
    try {
      const updated = await api.patch(`/users/${encodeURIComponent(u.id)}`, { disabled });
      fillRow(tr, updated && updated.id !== undefined ? updated : { ...u, disabled });
      toast(disabled ? t('users.disabledDone', { name: u.username }) : t('users.enabledDone', { name: u.username }));
    } catch (err) {
      toastError(err);
    }
  }

  async function deleteUser(tr, u) {
    const ok = await confirmDialog({
      title: t('users.deleteTitle'), message: t('users.deleteConfirm', { name: u.username }),
      confirmLabel: t('users.delete'), danger: true,
    });
    if (!ok) return;
    try {
      await api.del(`/users/${encodeURIComponent(u.id)}`);
      tr.remove();
      if (!tbody.children.length) tbody.append(emptyRow(COLS, t('users.none')));
      count.textContent = t('users.shown', { n: tbody.querySelectorAll('tr[data-user]').length });
      toast(t('users.deletedDone', { name: u.username }));
    } catch (err) {
      toastError(err);
    }
  }

  function editDialog(tr, u) {
    const isSelf = ctx.user && u.id === ctx.user.id;
    return openDialog({
      title: t('users.editTitle', { name: u.username }),
      build: (close) => {
        const msg = messageBox();
        const displayName = h('input', { id: 'edit-display-name', type: 'text', autocomplete: 'off', value: u.display_name || '' });
        const email = h('input', { id: 'edit-email', type: 'email', autocomplete: 'off', value: u.email || '' });
        const role = h('select', { id: 'edit-role', disabled: isSelf }, ROLE_NAMES.map((r) => h('option', { value: r, selected: r === u.role }, t(`role.${r}`))));
        const mustChange = h('input', { id: 'edit-must-change', type: 'checkbox', checked: !!u.must_change_password });
        const form = h('form', { class: 'form', 'data-form': 'edit-user', novalidate: true },
          h('p', { class: 'muted' }, h('span', { class: 'mono' }, u.username)),
          field(t('user.displayName'), displayName),
          field(t('user.email'), email),
          field(t('user.role'), role, isSelf ? t('users.notSelfRole') : t('users.roleHelp')),
          h('div', { class: 'field' }, h('label', { class: 'check', for: mustChange.id }, mustChange, ' ', t('users.mustChangeLabel'))),
          msg.el,
          h('div', { class: 'actions' },
            h('button', { type: 'button', class: 'btn', onclick: () => close() }, t('common.cancel')),
            h('button', { type: 'submit', class: 'btn btn-primary', 'data-action': 'save-user' }, t('users.save'))));
        form.addEventListener('submit', async (e) => {
          e.preventDefault();
          msg.clear();
          const payload = {};
          if (displayName.value.trim() !== (u.display_name || '')) payload.display_name = displayName.value.trim();
          if (email.value.trim() !== (u.email || '')) payload.email = email.value.trim();
          if (!isSelf && role.value !== u.role) payload.role = role.value;
          if (mustChange.checked !== !!u.must_change_password) payload.must_change_password = mustChange.checked;
          if (!Object.keys(payload).length) { close(); return; }
          await busy(form, async () => {
            try {
              const updated = await api.patch(`/users/${encodeURIComponent(u.id)}`, payload);
              fillRow(tr, updated);
              toast(t('users.savedDone', { name: u.username }));
              close(updated);
            } catch (err) {
              msg.error(err);
            }
          });
        });
        return form;
      },
    });
  }

  async function resetPassword(tr, u) {
    const ok = await confirmDialog({
      title: t('users.resetTitle'), message: t('users.resetConfirm', { name: u.username }),
      confirmLabel: t('users.resetPassword'),
    });
    if (!ok) return;
    let reply;
    try {
      reply = await api.post(`/users/${encodeURIComponent(u.id)}/password`, {});
    } catch (err) {
      toastError(err);
      return;
    }
    fillRow(tr, { ...u, must_change_password: true });
    await openDialog({
      title: t('users.resetDoneTitle', { name: u.username }),
      build: (close) => [
        reply?.password
          ? secretBox({ label: t('users.newPassword', { name: u.username }), value: reply.password, warning: t('users.passwordOnce') })
          : h('p', null, t('users.resetNoPassword')),
        h('div', { class: 'actions' }, h('button', { type: 'button', class: 'btn btn-primary', 'data-action': 'done', onclick: () => close() }, t('common.done'))),
      ],
    });
  }

  function createDialog() {
    return openDialog({
      title: t('users.createTitle'),
      build: (close) => {
        const msg = messageBox();
        const username = h('input', { id: 'new-username', type: 'text', required: true, autocomplete: 'off', autocapitalize: 'none', spellcheck: 'false' });
        const displayName = h('input', { id: 'new-display-name', type: 'text', autocomplete: 'off' });
        const email = h('input', { id: 'new-email', type: 'email', autocomplete: 'off' });
        const role = h('select', { id: 'new-role' }, ROLE_NAMES.map((r) => h('option', { value: r, selected: r === 'student' }, t(`role.${r}`))));
        const password = h('input', { id: 'new-password', type: 'password', autocomplete: 'new-password', minlength: 8 });
        const mustChange = h('input', { id: 'new-must-change', type: 'checkbox' });
        const body = h('div');
        const form = h('form', { class: 'form', 'data-form': 'create-user', novalidate: true },
          field(t('user.username'), username),
          field(t('user.displayName'), displayName),
          field(t('user.email'), email),
          field(t('user.role'), role),
          field(t('users.initialPassword'), password, t('users.passwordHelp')),
          h('div', { class: 'field' }, h('label', { class: 'check', for: mustChange.id }, mustChange, ' ', t('users.mustChangeLabel'))),
          msg.el,
          h('div', { class: 'actions' },
            h('button', { type: 'button', class: 'btn', onclick: () => close() }, t('common.cancel')),
            h('button', { type: 'submit', class: 'btn btn-primary', 'data-action': 'create-user' }, t('users.create'))));
        form.addEventListener('submit', async (e) => {
          e.preventDefault();
          msg.clear();
          if (!username.value.trim()) { msg.error(t('users.usernameRequired')); username.focus(); return; }
          if (password.value && password.value.length < 8) { msg.error(t('account.passwordTooShort', { min: 8 })); password.focus(); return; }
          const payload = { username: username.value.trim(), role: role.value };
          if (displayName.value.trim()) payload.display_name = displayName.value.trim();
          if (email.value.trim()) payload.email = email.value.trim();
          if (password.value) payload.password = password.value;
          if (mustChange.checked) payload.must_change_password = true;
          await busy(form, async () => {
            try {
              const reply = await api.post('/users', payload);
              const user = reply?.user;
              toast(t('users.created', { name: user?.username || payload.username }));
              load(true);
              if (reply?.password) {
                body.replaceChildren(
                  h('p', null, t('users.createdWithPassword', { name: user?.username || payload.username })),
                  secretBox({ label: t('users.generatedPassword'), value: reply.password, warning: t('users.passwordOnce') }),
                  h('div', { class: 'actions' }, h('button', { type: 'button', class: 'btn btn-primary', 'data-action': 'done', onclick: () => close(user) }, t('common.done'))));
                body.querySelector('[data-action=copy]')?.focus();
              } else {
                close(user);
              }
            } catch (err) {
              msg.error(err);
            }
          });
        });
        body.append(form);
        return body;
      },
    });
  }

  function importDialog() {
    return openDialog({
      title: t('users.importTitle'),
      wide: true,
      build: (close) => {
        const msg = messageBox();
        const file = h('input', { id: 'import-file', type: 'file', accept: '.csv,text/csv,text/plain' });
        const text = h('textarea', { id: 'import-text', rows: 8, spellcheck: 'false', class: 'mono', placeholder: CSV_EXAMPLE });
        file.addEventListener('change', async () => {
          const f = file.files?.[0];
          if (!f) return;
          try { text.value = await f.text(); } catch (err) { msg.error(err); }
        });
        const body = h('div');
        const form = h('form', { class: 'form', 'data-form': 'import', novalidate: true },
          h('p', { class: 'muted' }, t('users.importIntro')),
          h('pre', { class: 'code-sample' }, 'username,display_name,email,role[,password]'),
          field(t('users.importFile'), file),
          field(t('users.importText'), text),
          msg.el,
          h('div', { class: 'actions' },
            h('button', { type: 'button', class: 'btn', onclick: () => close() }, t('common.cancel')),
            h('button', { type: 'button', class: 'btn', 'data-action': 'check-import', onclick: () => run(true) }, t('users.importCheck')),
            h('button', { type: 'submit', class: 'btn btn-primary', 'data-action': 'import' }, icon('upload', 16), t('users.importRun'))));
        // dry: only check the file (nothing is created)
        async function run(dry) {
          msg.clear();
          body.querySelector('[data-import-errors]')?.remove();
          const csv = text.value.replace(/\s+$/, '');
          if (!csv.trim()) { msg.error(t('users.importEmpty')); text.focus(); return; }
          await busy(form, async () => {
            try {
              const reply = await api.post('/users/import', csv + '\n', { contentType: 'text/csv', query: dry ? { dry_run: 'true' } : null });
              if (dry) {
                msg.success(t('users.importChecked', { count: reply?.users?.length || 0 }));
                return;
              }
              const created = reply?.created || [];
              load(true);
              body.replaceChildren(importResult(created, close));
              body.querySelector('button')?.focus();
            } catch (err) {
              msg.error(err);
              if (err.details?.length) {
                form.insertBefore(h('div', { class: 'import-errors', 'data-import-errors': '' },
                  h('h3', null, dry ? t('users.importErrorsChecked', { count: err.details.length }) : t('users.importErrors', { count: err.details.length })),
                  h('ul', null, err.details.map((d) => h('li', { 'data-line': d.line },
                    d.line != null ? h('strong', null, t('users.importLine', { line: d.line })) : null, ' ', h('span', { lang: 'en' }, d.message))))),
                msg.el.nextSibling);
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

  function importResult(created, close) {
    const withPasswords = created.some((c) => c.password);
    return h('div', { 'data-import-result': '' },
      h('p', { role: 'status' }, t('users.importDone', { count: created.length })),
      h('p', null, t('users.importMustChange')),
      withPasswords ? h('p', { class: 'warning' }, t('users.importPasswordsOnce')) : null,
      h('div', { class: 'table-wrap' }, h('table', { class: 'table' },
        h('thead', null, h('tr', null,
          h('th', { scope: 'col' }, t('user.username')),
          h('th', { scope: 'col' }, t('users.generatedPassword')))),
        h('tbody', null, created.map((c) => h('tr', { 'data-created': c.username },
          h('td', { class: 'mono' }, c.username),
          h('td', { class: 'mono', 'data-password': '' }, c.password || t('users.passwordGiven'))))))),
      h('div', { class: 'actions' },
        withPasswords ? h('button', { type: 'button', class: 'btn', 'data-action': 'download-csv', onclick: () => downloadCsv(created) }, t('users.downloadCsv')) : null,
        withPasswords ? h('button', { type: 'button', class: 'btn', 'data-action': 'download-sheet', onclick: () => downloadSheet(created) }, t('users.downloadSheet')) : null,
        h('button', { type: 'button', class: 'btn btn-primary', 'data-action': 'done', onclick: () => close() }, t('common.done'))));
  }

  let debounce = null;
  const search = h('input', {
    id: 'user-search', type: 'search', autocomplete: 'off', placeholder: t('users.searchPlaceholder'),
    oninput: () => {
      clearTimeout(debounce);
      debounce = setTimeout(() => { query = search.value.trim(); load(true); }, 300);
    },
    onkeydown: (e) => {
      if (e.key === 'Enter') { e.preventDefault(); clearTimeout(debounce); query = search.value.trim(); load(true); }
    },
  });

  const viewSelect = h('select', {
    id: 'user-view', 'data-user-view': '',
    onchange: () => { view = viewSelect.value; load(true); },
  }, h('option', { value: 'active' }, t('users.viewActive')), h('option', { value: 'deleted' }, t('users.viewDeleted')));

  main.append(h('section', { class: 'page' },
    h('div', { class: 'page-head page-head-row' },
      h('h1', null, t('users.title')),
      h('div', { class: 'toolbar' },
        h('button', { type: 'button', class: 'btn', 'data-action': 'open-import', onclick: importDialog }, icon('upload', 16), t('users.import')),
        h('button', { type: 'button', class: 'btn btn-primary', 'data-action': 'open-create', onclick: createDialog }, icon('plus', 16), t('users.create')))),
    h('div', { class: 'card card-flush' },
      h('div', { class: 'card-toolbar' },
        h('div', { class: 'toolbar' },
          h('label', { for: viewSelect.id, class: 'visually-hidden' }, t('users.view')),
          viewSelect),
        h('div', { class: 'search' },
          h('label', { for: search.id, class: 'visually-hidden' }, t('users.search')),
          h('span', { class: 'search-icon', 'aria-hidden': 'true' }, icon('search', 16)),
          search),
        count),
      listMsg.el,
      h('div', { class: 'table-wrap' }, h('table', { class: 'table', 'data-table': 'users' },
        h('thead', null, h('tr', null,
          h('th', { scope: 'col' }, t('user.username')),
          h('th', { scope: 'col' }, t('user.displayName')),
          h('th', { scope: 'col' }, t('user.email')),
          h('th', { scope: 'col' }, t('user.role')),
          h('th', { scope: 'col' }, t('user.status')),
          h('th', { scope: 'col' }, t('user.created')),
          h('th', { scope: 'col' }, h('span', { class: 'visually-hidden' }, t('common.actions'))))),
        tbody)),
      h('div', { class: 'card-foot' }, more))));

  load(true);
}
