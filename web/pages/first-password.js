// pages/first-password.js — the forced "choose a new password" screen. An
// account whose password an admin reset, or that a CSV import made, must
// choose its own before anything else (the API answers everything but /me,
// logout and the change with 403 password_change_required). Shown instead
// of the app, like the sign-in form; the password just typed at sign-in is
// carried over, so only the new one is asked for (after a reload: all).
import { api } from '../api.js';
import { t } from '../i18n.js';
import { h, field, messageBox, busy } from '../ui.js';

const MIN = 8;

// ctx.passwordChanged() continues into the app; ctx.logout() signs out.
export function render(ctx, { currentPassword = '' } = {}) {
  const msg = messageBox();
  const current = h('input', { name: 'current-password', type: 'password', autocomplete: 'current-password', required: true });
  const next = h('input', { name: 'new-password', type: 'password', autocomplete: 'new-password', required: true, minlength: MIN });
  const again = h('input', { name: 'confirm-password', type: 'password', autocomplete: 'new-password', required: true, minlength: MIN });
  const user = ctx.user;

  const form = h('form', { class: 'login-form', 'data-form': 'first-password', novalidate: true },
    msg.el,
    // the username helps password managers file the new password
    h('input', { type: 'text', name: 'username', autocomplete: 'username', value: user?.username || '', hidden: true, readonly: true }),
    currentPassword ? null : field(t('account.currentPassword'), current),
    field(t('account.newPassword'), next, t('account.passwordRule', { min: MIN })),
    field(t('account.confirmPassword'), again),
    h('button', { type: 'submit', class: 'btn btn-primary btn-block', 'data-action': 'set-password' }, t('firstPassword.submit')),
    h('button', { type: 'button', class: 'btn btn-block', 'data-action': 'logout', onclick: () => ctx.logout() }, t('firstPassword.logout')));

  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    msg.clear();
    const cur = currentPassword || current.value;
    if (!cur) { msg.error(t('account.currentRequired')); current.focus(); return; }
    if (next.value.length < MIN) { msg.error(t('account.passwordTooShort', { min: MIN })); next.focus(); return; }
    if (next.value !== again.value) { msg.error(t('account.passwordMismatch')); again.focus(); return; }
    if (next.value === cur) { msg.error(t('firstPassword.same')); next.focus(); return; }
    await busy(form, async () => {
      try {
        await api.post('/me/password', { current_password: cur, new_password: next.value });
        await ctx.passwordChanged();
      } catch (err) {
        msg.error(err);
        if (err.status === 403 && !currentPassword) current.value = '';
      }
    });
  });

  return h('div', { class: 'login-card', 'data-page': 'first-password' },
    h('div', { class: 'login-brand' },
      h('img', { src: 'favicon.svg', alt: '', width: 48, height: 48 }),
      h('h1', null, t('app.name'))),
    h('h2', { class: 'login-title' }, t('firstPassword.title')),
    h('p', { class: 'muted' }, t('firstPassword.intro')),
    user ? h('p', null, h('strong', { class: 'mono' }, user.username)) : null,
    form);
}
