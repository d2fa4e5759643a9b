// pages/account.js — my profile (read-only), password change, and API
// tokens (list, create with the secret shown once, revoke).
import { api } from '../api.js';
import { t, formatDate } from '../i18n.js';
import { h, field, messageBox, busy, confirmDialog, secretBox, emptyRow, toast, icon, toastError } from '../ui.js';
import { mailPrefsCard } from '../parts/notify.js';

export const MIN_PASSWORD = 8;
const SCOPES = ['read', 'write'];

function profileCard(user) {
  const row = (label, value, key) => [h('dt', null, label), h('dd', { 'data-field': key }, value || '—')];
  return h('section', { class: 'card', 'aria-labelledby': 'profile-title' },
    h('h2', { id: 'profile-title' }, t('account.profile')),
    h('dl', { class: 'props' },
      row(t('user.username'), user.username, 'username'),
      row(t('user.displayName'), user.display_name, 'display_name'),
      row(t('user.email'), user.email, 'email'),
      row(t('user.role'), t(`role.${user.role}`), 'role'),
      row(t('user.created'), formatDate(user.created_at), 'created_at')));
}

function passwordCard() {
  const msg = messageBox();
  const current = h('input', { id: 'pw-current', type: 'password', autocomplete: 'current-password', required: true });
  const next = h('input', { id: 'pw-new', type: 'password', autocomplete: 'new-password', required: true, minlength: MIN_PASSWORD });
  const confirm = h('input', { id: 'pw-confirm', type: 'password', autocomplete: 'new-password', required: true, minlength: MIN_PASSWORD });
  const form = h('form', { class: 'form', 'data-form': 'password', novalidate: true },
    field(t('account.currentPassword'), current),
    field(t('account.newPassword'), next, t('account.passwordRule', { min: MIN_PASSWORD })),
    field(t('account.confirmPassword'), confirm),
    msg.el,
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'btn btn-primary' }, t('account.changePassword'))));

  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    msg.clear();
    if (!current.value) { msg.error(t('account.currentRequired')); current.focus(); return; }
    if (next.value.length < MIN_PASSWORD) { msg.error(t('account.passwordTooShort', { min: MIN_PASSWORD })); next.focus(); return; }
    if (next.value !== confirm.value) { msg.error(t('account.passwordMismatch')); confirm.focus(); return; }
    await busy(form, async () => {
      try {
        await api.post('/me/password', { current_password: current.value, new_password: next.value });
        form.reset();
        msg.success(t('account.passwordChanged'));
      } catch (err) {
        msg.error(err);
      }
    });
  });

  return h('section', { class: 'card', 'aria-labelledby': 'password-title' },
    h('h2', { id: 'password-title' }, t('account.changePassword')), form);
}

function tokensCard() {
  const listMsg = messageBox();
  const tbody = h('tbody', null, emptyRow(6, t('common.loading')));
  const secretSlot = h('div', { class: 'secret-slot' });

  async function load() {
    try {
      const reply = await api.get('/tokens');
      const items = reply?.items || [];
      tbody.replaceChildren(...(items.length ? items.map(tokenRow) : [emptyRow(6, t('tokens.none'))]));
      listMsg.clear();
    } catch (err) {
      tbody.replaceChildren(emptyRow(6, '—'));
      listMsg.error(err);
    }
  }

  function tokenRow(tok) {
    const revoke = h('button', {
      type: 'button', class: 'btn btn-small btn-danger-outline', 'data-action': 'revoke',
      onclick: async () => {
        const ok = await confirmDialog({
          title: t('tokens.revokeTitle'), message: t('tokens.revokeConfirm', { name: tok.name }),
          confirmLabel: t('tokens.revoke'), danger: true,
        });
        if (!ok) return;
        try {
          await api.del(`/tokens/${encodeURIComponent(tok.id)}`);
          toast(t('tokens.revoked', { name: tok.name }));
          load();
        } catch (err) {
          toastError(err);
        }
      },
    }, t('tokens.revoke'));
    return h('tr', { 'data-token': tok.name },
      h('td', null, h('span', { class: 'mono' }, tok.name),
        tok.prefix ? h('span', { class: 'muted mono token-prefix', title: t('tokens.prefix') }, `${tok.prefix}…`) : null),
      h('td', null, (tok.scopes || []).map((s) => h('span', { class: 'badge' }, t(`scope.${s}`)))),
      h('td', null, formatDate(tok.created_at)),
      h('td', null, tok.expires_at ? formatDate(tok.expires_at) : t('tokens.never')),
      h('td', null, tok.last_used_at ? formatDate(tok.last_used_at) : t('tokens.neverUsed')),
      h('td', { class: 'cell-actions' }, revoke));
  }

  const msg = messageBox();
  const name = h('input', { id: 'token-name', type: 'text', required: true, maxlength: 64, autocomplete: 'off', placeholder: t('tokens.namePlaceholder') });
  const scopeBoxes = SCOPES.map((s) => h('input', { type: 'checkbox', id: `token-scope-${s}`, value: s, checked: s === 'read' }));
  const days = h('input', { id: 'token-days', type: 'number', min: 1, max: 3650, step: 1, value: '90', inputmode: 'numeric' });
  const form = h('form', { class: 'form form-inline-wide', 'data-form': 'token', novalidate: true },
    field(t('tokens.name'), name),
    h('fieldset', { class: 'field checks' },
      h('legend', null, t('tokens.scopes')),
      scopeBoxes.map((box) => h('label', { class: 'check', for: box.id }, box, ' ', t(`scope.${box.value}`)))),
    field(t('tokens.expiresInDays'), days, t('tokens.expiryHelp')),
    msg.el,
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'btn btn-primary' }, icon('plus', 16), t('tokens.create'))));

  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    msg.clear();
    const scopes = scopeBoxes.filter((b) => b.checked).map((b) => b.value);
    if (!name.value.trim()) { msg.error(t('tokens.nameRequired')); name.focus(); return; }
    if (!scopes.length) { msg.error(t('tokens.scopeRequired')); scopeBoxes[0].focus(); return; }
    const body = { name: name.value.trim(), scopes };
    if (days.value !== '') {
      const n = Number(days.value);
      if (!Number.isInteger(n) || n < 1) { msg.error(t('tokens.badDays')); days.focus(); return; }
      body.expires_in_days = n;
    }
    await busy(form, async () => {
      try {
        const created = await api.post('/tokens', body);
        form.reset();
        showSecret(created);
        load();
      } catch (err) {
        msg.error(err);
      }
    });
  });

  function showSecret(created) {
    const done = h('button', { type: 'button', class: 'btn', 'data-action': 'dismiss-secret', onclick: () => secretSlot.replaceChildren() }, t('tokens.done'));
    secretSlot.replaceChildren(h('div', { class: 'callout', 'data-new-token': created.name },
      h('h3', null, t('tokens.createdTitle', { name: created.name })),
      secretBox({ label: t('tokens.secret'), value: created.token, warning: t('tokens.shownOnce') }),
      h('p', { class: 'muted' }, t('tokens.usage')),
      h('div', { class: 'actions' }, done)));
    secretSlot.querySelector('input')?.focus();
  }

  load();
  return h('section', { class: 'card card-wide', 'aria-labelledby': 'tokens-title' },
    h('h2', { id: 'tokens-title' }, t('tokens.title')),
    h('p', { class: 'muted' }, t('tokens.intro')),
    secretSlot,
    listMsg.el,
    h('div', { class: 'table-wrap' }, h('table', { class: 'table', 'data-table': 'tokens' },
      h('thead', null, h('tr', null,
        h('th', { scope: 'col' }, t('tokens.name')),
        h('th', { scope: 'col' }, t('tokens.scopes')),
        h('th', { scope: 'col' }, t('tokens.created')),
        h('th', { scope: 'col' }, t('tokens.expires')),
        h('th', { scope: 'col' }, t('tokens.lastUsed')),
        h('th', { scope: 'col' }, h('span', { class: 'visually-hidden' }, t('common.actions'))))),
      tbody)),
    h('div', { class: 'card-section' }, h('h3', null, t('tokens.new')), form));
}

export function render(main, ctx) {
  main.append(h('section', { class: 'page' },
    h('div', { class: 'page-head' }, h('h1', null, t('account.title'))),
    h('div', { class: 'grid' },
      profileCard(ctx.user),
      passwordCard(),
      mailPrefsCard(),
      tokensCard())));
}
