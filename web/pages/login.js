// pages/login.js — the sign-in form. Shows the API's error for bad
// credentials, and for throttling the wait the server asks for (Retry-After).
import { api } from '../api.js';
import { t } from '../i18n.js';
import { h, field, messageBox, busy } from '../ui.js';

export function render(ctx, { notice } = {}) {
  const msg = messageBox();
  if (notice) msg.error(notice);
  const username = h('input', { name: 'username', type: 'text', autocomplete: 'username', required: true, autocapitalize: 'none', spellcheck: 'false' });
  const password = h('input', { name: 'password', type: 'password', autocomplete: 'current-password', required: true });

  const form = h('form', { class: 'login-form', novalidate: true },
    msg.el,
    field(t('login.username'), username),
    field(t('login.password'), password),
    h('button', { type: 'submit', class: 'btn btn-primary btn-block', 'data-action': 'login' }, t('login.submit')));

  const submit = form.querySelector('[data-action=login]');
  let countdown = null;

  // Throttled: say how long to wait, count it down, and hold the button
  // until the server will listen again.
  function throttle(seconds) {
    clearInterval(countdown);
    let left = seconds;
    const show = () => msg.error(t('login.throttled', { seconds: left }));
    show();
    submit.disabled = true;
    countdown = setInterval(() => {
      left -= 1;
      if (!form.isConnected) { clearInterval(countdown); return; }
      if (left > 0) { show(); return; }
      clearInterval(countdown);
      submit.disabled = false;
      msg.clear();
    }, 1000);
  }

  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    if (submit.disabled) return;
    msg.clear();
    if (!username.value.trim() || !password.value) {
      msg.error(t('login.missing'));
      (username.value.trim() ? password : username).focus();
      return;
    }
    let retryAfter = null;
    await busy(form, async () => {
      try {
        const reply = await api.post('/auth/login', { username: username.value.trim(), password: password.value }, { authRedirect: false });
        await ctx.loggedIn(reply, { password: password.value });
      } catch (err) {
        if (err.status === 429 || err.code === 'throttled') {
          if (err.retryAfter > 0) retryAfter = err.retryAfter;
          else msg.error(t('login.throttledNoTime'));
        } else {
          msg.error(err);
        }
        password.value = '';
      }
    });
    if (retryAfter) throttle(retryAfter);   // after busy() has given the button back
    if (!msg.el.hidden) password.focus();
  });

  return h('div', { class: 'login-card' },
    h('div', { class: 'login-brand' },
      h('img', { src: 'favicon.svg', alt: '', width: 48, height: 48 }),
      h('h1', null, t('app.name'))),
    h('p', { class: 'login-tagline muted' }, t('login.tagline')),
    h('h2', { class: 'login-title' }, t('login.title')),
    form);
}
