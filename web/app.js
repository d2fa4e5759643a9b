// app.js — the shell: session state, the hash router and the layout (top bar,
// side navigation), both derived from the page table in pages.js.
//
// Pages are modules exporting render(main, ctx), loaded the first time they
// are opened; ctx carries the session (user, quotas, usage) and helpers. A
// page only draws into `main`.
import { api, setCsrfToken, onUnauthorized, onPasswordChangeRequired } from './api.js';
import { t, initLanguage, setLanguage, getLanguage, onLanguageChange, LANGUAGES } from './i18n.js';
import { h, uid, errorText, icon, dropdown, menuItem } from './ui.js';
import * as loginPage from './pages/login.js';   // eager: the first thing most visits show
import * as firstPasswordPage from './pages/first-password.js';
import { pageAt, navFor, loadPage } from './pages.js';
import { bell } from './parts/notify.js';

export { navFor };

const session = { user: null, auth: null, quotas: {}, usage: {} };
let loginNotice = '';   // shown once on the login page (e.g. session expired)
let afterLogin = '/home';
// The password just typed at sign-in, while the account must change it
// (must_change_password): the forced change then asks only for the new one.
let pendingPassword = '';

const root = document.getElementById('app');

function currentPath() {
  const raw = location.hash.replace(/^#/, '') || '/';
  return raw.split('?')[0] || '/';
}

// An app (route) sent the browser here to sign in first:
// #/login?open=<route>&state=<sha256 of its sign-in cookie>&path=<path>.
// Signed in, the page asks for a ticket bound to that state (a POST with the
// CSRF token) and follows it back to the app's handshake.
function routeOpen() {
  const q = new URLSearchParams(location.hash.split('?').slice(1).join('?'));
  const route = q.get('open') || '', state = q.get('state') || '', path = q.get('path') || '/';
  if (!/^[a-z0-9]{16,63}$/.test(route) || !/^[0-9a-f]{64}$/.test(state)) return null;
  if (!/^\/(?![\/\\])/.test(path)) return null;
  return { route, state, path };
}

async function openRoute(o) {
  try {
    const res = await api.post(`/routes/${o.route}/open`, { path: o.path, state: o.state });
    location.replace(res.url);
  } catch {
    go('/home');
  }
}

function go(path) {
  if (currentPath() === path) render();
  else location.hash = '#' + path;
}

async function loadMe() {
  const me = await api.get('/me', { authRedirect: false });
  session.user = me.user;
  session.auth = me.auth;
  session.quotas = me.quotas || {};
  session.usage = me.usage || {};
  if (me.csrf_token) setCsrfToken(me.csrf_token);
  return me;
}

function clearSession() {
  session.user = null;
  session.auth = null;
  session.quotas = {};
  session.usage = {};
  setCsrfToken(null);
}

onUnauthorized(() => {
  if (!session.user) return;
  clearSession();
  loginNotice = t('login.expired');
  afterLogin = currentPath();
  go('/login');
});

// An admin asked for a new password while this session was in the app.
onPasswordChangeRequired(() => {
  if (!session.user || session.user.must_change_password) return;
  session.user = { ...session.user, must_change_password: true };
  afterLogin = currentPath();
  render();
});

async function logout() {
  try { await api.post('/auth/logout', undefined, { authRedirect: false }); } catch { /* gone already */ }
  pendingPassword = '';
  clearSession();
  afterLogin = '/home';
  go('/login');
}

// Signed in: on to the page that was asked for, or an app's sign-in.
function enterApp() {
  const wanted = pageAt(afterLogin.split('?')[0]);
  const next = wanted && wanted.roles.includes(session.user.role) ? afterLogin : '/home';
  afterLogin = '/home';
  if (routeOpen()) { openRoute(routeOpen()); return; }
  go(next);
}

const ctx = {
  get user() { return session.user; },
  get quotas() { return session.quotas; },
  get usage() { return session.usage; },
  refreshMe: loadMe,
  go,
  logout,
  // Called by the login page with the reply of POST /auth/login (and the
  // password typed, for a forced change that follows).
  async loggedIn(reply, { password = '' } = {}) {
    session.user = reply.user;
    setCsrfToken(reply.csrf_token);
    try { await loadMe(); } catch { /* the login reply is enough to go on */ }
    if (session.user.must_change_password) {
      pendingPassword = password;
      render();
      return;
    }
    enterApp();
  },
  // Called by the forced password change once it is done.
  async passwordChanged() {
    pendingPassword = '';
    try { await loadMe(); } catch { session.user = { ...session.user, must_change_password: false }; }
    enterApp();
  },
};

function languageSwitch() {
  const id = uid('lang');
  const select = h('select', { id, class: 'lang-select', 'data-lang-switch': '', onchange: (e) => setLanguage(e.target.value) },
    LANGUAGES.map((l) => h('option', { value: l.code, selected: l.code === getLanguage(), lang: l.code }, l.name)));
  return h('div', { class: 'lang' },
    h('label', { for: id, class: 'visually-hidden' }, t('header.language')),
    h('span', { class: 'lang-icon', 'aria-hidden': 'true' }, icon('globe')),
    select);
}

function brand() {
  return h('a', { class: 'brand', href: '#/home' },
    h('img', { src: 'favicon.svg', alt: '', width: 28, height: 28 }),
    h('span', null, t('app.name')));
}

function userMenu(user) {
  const name = user.display_name || user.username;
  return dropdown({
    className: 'user-button',
    label: t('header.userMenu', { name }),
    attrs: { id: 'user-menu-button' },
    content: [
      h('span', { class: 'avatar', 'aria-hidden': 'true' }, name.slice(0, 1).toUpperCase()),
      h('span', { class: 'user-name', 'aria-hidden': 'true' }, name),
      h('span', { class: 'caret', 'aria-hidden': 'true' }, '▾'),
    ],
    items: [
      h('div', { class: 'menu-head', role: 'presentation' },
        h('strong', null, name),
        h('span', { class: 'muted' }, `${user.username} · ${t(`role.${user.role}`)}`)),
      menuItem({ label: t('nav.account'), action: 'account', href: '#/account' }),
      menuItem({ label: t('header.logout'), action: 'logout', onclick: logout }),
    ],
  });
}

function sideNav(role, path) {
  const inner = h('div', { class: 'sidenav-inner' });
  const nav = h('nav', { class: 'sidenav', id: 'sidenav', 'aria-label': t('nav.label') }, inner);
  for (const s of navFor(role)) {
    const list = h('ul', null, s.items.map((i) => h('li', null,
      h('a', {
        href: '#' + i.route, 'data-nav': i.nav, class: 'nav-link',
        'aria-current': path === i.route || path.startsWith(i.route + '/') ? 'page' : null,
      }, h('span', { class: 'nav-icon', 'aria-hidden': 'true' }, icon(i.icon)), h('span', null, t(i.label))))));
    inner.append(s.section
      ? h('div', { class: 'nav-section' }, h('h2', { class: 'nav-heading' }, t(s.section)), list)
      : h('div', { class: 'nav-section' }, list));
  }
  return nav;
}

function layout(path) {
  const user = session.user;
  // On a small screen the navigation slides over the page; a tap on the
  // page or a choice in it closes it.
  const closeNav = () => {
    document.body.classList.remove('nav-open');
    navToggle.setAttribute('aria-expanded', 'false');
  };
  const main = h('main', { id: 'main', class: 'main', tabindex: '-1', onclick: closeNav });
  const navToggle = h('button', {
    type: 'button', class: 'btn-icon nav-toggle', 'aria-controls': 'sidenav', 'aria-expanded': 'false',
    'aria-label': t('header.menu'),
    onclick: () => {
      const open = !document.body.classList.contains('nav-open');
      document.body.classList.toggle('nav-open', open);
      navToggle.setAttribute('aria-expanded', String(open));
    },
  }, icon('menu'));
  const shell = h('div', { class: 'shell' },
    h('a', { class: 'skip-link', href: '#main', onclick: (e) => { e.preventDefault(); main.focus(); } }, t('app.skip')),
    h('header', { class: 'topbar' }, navToggle, brand(), h('div', { class: 'topbar-spacer' }), languageSwitch(), bell(), userMenu(user)),
    h('div', { class: 'body' }, sideNav(user.role, path), main));
  return { shell, main };
}

function renderFirstPassword() {
  document.title = `${t('firstPassword.title')} · ${t('app.name')}`;
  root.replaceChildren(h('div', { class: 'login-shell' },
    h('div', { class: 'login-lang' }, languageSwitch()),
    firstPasswordPage.render(ctx, { currentPassword: pendingPassword })));
  root.querySelector('.login-form input:not([hidden])')?.focus();
}

function renderLogin(notice) {
  document.title = `${t('login.title')} · ${t('app.name')}`;
  root.replaceChildren(h('div', { class: 'login-shell' },
    h('div', { class: 'login-lang' }, languageSwitch()),
    loginPage.render(ctx, { notice })));
  root.querySelector('input[name=username]')?.focus();
}

let renderSeq = 0;
let sessionChecked = false;
let hadPage = false;          // has an app page been shown yet?   // has GET /me been tried since the page loaded?

// opts.focusMain: move focus to the page (after a navigation, reading starts
// at the new page, not at the link that led there).
async function render(opts = {}) {
  const seq = ++renderSeq;
  const path = currentPath();
  document.body.classList.remove('nav-open');

  if (!session.user && (path !== '/login' || !sessionChecked)) {
    sessionChecked = true;
    try { await loadMe(); } catch (e) {
      if (seq !== renderSeq) return;
      if (path === '/login') { renderLogin(e.status === 401 ? '' : errorText(e)); return; }
      if (e.status !== 401) loginNotice = errorText(e);
      // with its query (#/join?code=..., #/instance?id=...): the page needs it
      afterLogin = pageAt(path) ? location.hash.replace(/^#/, '') : '/home';
      go('/login');
      return;
    }
    if (seq !== renderSeq) return;
  }

  // nothing else until the account has a password of its own
  if (session.user?.must_change_password) { renderFirstPassword(); return; }

  if (path === '/login') {
    if (session.user && routeOpen()) { openRoute(routeOpen()); return; }
    if (session.user) { go('/home'); return; }
    renderLogin(loginNotice);
    loginNotice = '';
    return;
  }

  const page = pageAt(path);
  if (!page) { go(session.user ? '/home' : '/login'); return; }

  // The page's module first, so the page before stays until it can be drawn.
  let mod = null, failed = null;
  if (page.roles.includes(session.user.role)) {
    try { mod = await loadPage(page); } catch (e) { failed = e; }
    if (seq !== renderSeq) return;
  }

  const { shell, main } = layout(path);
  root.replaceChildren(shell);
  if (!page.roles.includes(session.user.role)) {
    document.title = `${t('error.forbiddenTitle')} · ${t('app.name')}`;
    main.append(h('section', { class: 'page' },
      h('h1', null, t('error.forbiddenTitle')),
      h('p', { class: 'msg msg-error', role: 'alert', 'data-forbidden': '' }, t('error.forbidden'))));
    return;
  }
  document.title = `${t(page.title)} · ${t('app.name')}`;
  if (failed) {
    main.append(h('section', { class: 'page' },
      h('h1', null, t(page.title)),
      h('p', { class: 'msg msg-error', role: 'alert', 'data-page-error': '' }, t('error.pageLoad'))));
    return;
  }
  mod.render(main, ctx);
  if (opts.focusMain) main.focus({ preventScroll: true });
}

initLanguage();
onLanguageChange(() => {
  render();
  document.querySelector('[data-lang-switch]')?.focus();
});
window.addEventListener('hashchange', () => render({ focusMain: true }));
render();
