// pages/admin-registries.js — Administration → Registries: where catalog
// images come from (nvcr.io with the site's NGC API key, a local registry)
// and the credentials gpucloud pulls with. The password is write-only: the
// page never sees it again, only whether one is set. "Test" asks a node's
// engine to log in and shows the registry's answer. One registry may be
// "personal": where save-as-image pushes.
import { api } from '../api.js';
import { t, formatNumber } from '../i18n.js';
import { h, field, messageBox, busy, confirmDialog, openDialog, emptyRow, toast, icon, errorParts, toastError } from '../ui.js';

const COLS = 5;
const NAME_RE = /^[a-z0-9][a-z0-9._-]{0,62}$/;
const SERVER_RE = /^[A-Za-z0-9][A-Za-z0-9.-]*(:[0-9]{1,5})?$/;

export function render(main) {
  const listMsg = messageBox();
  const tbody = h('tbody', null, emptyRow(COLS, t('common.loading')));
  let seq = 0;

  async function load() {
    const mine = ++seq;
    try {
      const reply = await api.get('/registries');
      if (mine !== seq || !main.isConnected) return;
      show(reply?.items || []);
      listMsg.clear();
    } catch (err) {
      if (mine !== seq || !main.isConnected) return;
      tbody.replaceChildren(emptyRow(COLS, '—'));
      listMsg.error(err);
    }
  }

  function show(items) {
    if (!items.length) {
      tbody.replaceChildren(h('tr', { class: 'empty', 'data-empty': 'registries' }, h('td', { colspan: COLS }, t('registries.none'))));
      return;
    }
    tbody.replaceChildren(...items.map(row));
  }

  function row(r) {
    const result = h('div', { class: 'cell-sub', 'data-test-result': '', 'aria-live': 'polite' });
    return h('tr', { 'data-registry': r.name, 'data-id': r.id },
      h('td', null, h('strong', { class: 'mono' }, r.name),
        r.personal ? h('div', { class: 'cell-sub' }, h('span', { class: 'badge badge-label', 'data-personal': '' }, t('registries.personal'))) : null),
      h('td', null, h('span', { class: 'mono', 'data-field': 'server' }, r.server)),
      h('td', null, h('span', { class: 'mono', 'data-field': 'username' }, r.username || '—'),
        h('div', { class: 'cell-sub' }, h('span', { class: `badge ${r.has_password ? 'badge-on' : 'badge-off'}`, 'data-has-password': String(r.has_password) },
          r.has_password ? t('registries.passwordSet') : t('registries.noPassword')))),
      h('td', { 'data-field': 'images' }, formatNumber(r.images || 0)),
      h('td', { class: 'cell-actions' },
        h('button', { type: 'button', class: 'btn btn-small', 'data-action': 'test', onclick: (e) => test(r, e.currentTarget, result) }, t('registries.test')),
        h('button', { type: 'button', class: 'btn btn-small', 'data-action': 'edit', onclick: () => dialog(r) }, t('registries.edit')),
        h('button', { type: 'button', class: 'btn btn-small btn-danger', 'data-action': 'delete', onclick: () => remove(r) }, t('registries.delete')),
        result));
  }

  async function test(r, button, out) {
    button.disabled = true;
    delete out.dataset.ok;
    out.replaceChildren(h('span', { class: 'muted' }, t('registries.testing')));
    const said = (ok, text, detail = '') => {
      out.dataset.ok = String(ok);
      out.title = detail;
      out.replaceChildren(h('span', { class: `badge ${ok ? 'badge-on' : 'badge-off'}` }, ok ? t('registries.testOk') : t('registries.testFailed')), ' ', text);
    };
    try {
      const res = await api.post(`/registries/${encodeURIComponent(r.id)}/test`, {});
      said(res.ok, t('registries.testDetail', { message: res.message, node: res.node }));
    } catch (err) {
      const { text, detail } = errorParts(err);
      said(false, text, detail);
    } finally {
      button.disabled = false;
    }
  }

  // Create (r undefined) or edit.
  function dialog(r) {
    return openDialog({
      title: r ? t('registries.editTitle', { name: r.name }) : t('registries.createTitle'),
      build: (close) => {
        const msg = messageBox();
        const name = h('input', { id: 'registry-name', type: 'text', required: true, autocomplete: 'off', autocapitalize: 'none', spellcheck: 'false', maxlength: 63, placeholder: 'ngc', value: r ? r.name : '', disabled: !!r });
        const server = h('input', { id: 'registry-server', type: 'text', required: true, autocomplete: 'off', autocapitalize: 'none', spellcheck: 'false', maxlength: 255, placeholder: 'nvcr.io', value: r ? r.server : '' });
        const user = h('input', { id: 'registry-username', type: 'text', autocomplete: 'off', autocapitalize: 'none', spellcheck: 'false', maxlength: 255, placeholder: '$oauthtoken', value: r ? r.username : '' });
        const pass = h('input', { id: 'registry-password', type: 'password', autocomplete: 'new-password', maxlength: 4096 });
        const personal = h('input', { id: 'registry-personal', type: 'checkbox', checked: !!(r && r.personal) });
        const form = h('form', { class: 'form', 'data-form': r ? 'edit-registry' : 'create-registry', novalidate: true },
          field(t('registries.name'), name, r ? t('registries.nameFixed') : t('registries.nameHelp')),
          field(t('registries.server'), server, t('registries.serverHelp')),
          field(t('registries.username'), user, t('registries.usernameHelp')),
          field(t('registries.password'), pass, r ? t('registries.passwordKeep') : t('registries.passwordHelp')),
          h('div', { class: 'field checks' }, h('label', { class: 'check', for: personal.id }, personal, ' ', t('registries.personalLabel'))),
          msg.el,
          h('div', { class: 'actions' },
            h('button', { type: 'button', class: 'btn', onclick: () => close() }, t('common.cancel')),
            h('button', { type: 'submit', class: 'btn btn-primary', 'data-action': 'save-registry' }, r ? t('registries.save') : t('registries.create'))));
        form.addEventListener('submit', async (e) => {
          e.preventDefault();
          msg.clear();
          const payload = { server: server.value.trim(), username: user.value, personal: personal.checked };
          if (!r) {
            payload.name = name.value.trim();
            if (!NAME_RE.test(payload.name)) { msg.error(t('registries.nameInvalid')); name.focus(); return; }
          }
          if (!SERVER_RE.test(payload.server)) { msg.error(t('registries.serverInvalid')); server.focus(); return; }
          if (pass.value) payload.password = pass.value;
          await busy(form, async () => {
            try {
              const saved = r ? await api.patch(`/registries/${encodeURIComponent(r.id)}`, payload) : await api.post('/registries', payload);
              pass.value = '';
              toast(t(r ? 'registries.saved' : 'registries.created', { name: saved?.name || payload.name }));
              load();
              close(saved);
            } catch (err) {
              msg.error(err);
            }
          });
        });
        return form;
      },
    });
  }

  async function remove(r) {
    const ok = await confirmDialog({
      title: t('registries.deleteTitle'),
      message: t('registries.deleteConfirm', { name: r.name }),
      confirmLabel: t('registries.delete'), danger: true,
    });
    if (!ok) return;
    try {
      await api.del(`/registries/${encodeURIComponent(r.id)}`);
      toast(t('registries.deleted', { name: r.name }));
      load();
    } catch (err) {
      toastError(err);
    }
  }

  main.append(h('section', { class: 'page' },
    h('div', { class: 'page-head page-head-row' },
      h('div', { class: 'page-head-text' },
        h('h1', null, t('registries.title')),
        h('p', { class: 'muted' }, t('registries.intro'))),
      h('div', { class: 'toolbar' },
        h('a', { class: 'btn', href: '#/admin/images', 'data-action': 'view-images' }, t('registries.viewImages')),
        h('button', { type: 'button', class: 'btn btn-primary', 'data-action': 'open-create-registry', onclick: () => dialog() }, icon('plus', 16), t('registries.create')))),
    h('div', { class: 'card card-flush' },
      listMsg.el,
      h('div', { class: 'table-wrap' }, h('table', { class: 'table', 'data-table': 'registries' },
        h('thead', null, h('tr', null,
          h('th', { scope: 'col' }, t('registries.name')),
          h('th', { scope: 'col' }, t('registries.server')),
          h('th', { scope: 'col' }, t('registries.credentials')),
          h('th', { scope: 'col' }, t('registries.images')),
          h('th', { scope: 'col' }, h('span', { class: 'visually-hidden' }, t('common.actions'))))),
        tbody)))));

  load();
}
