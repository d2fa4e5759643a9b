// shell.test.mjs — the web shell end to end, in a real headless Chromium
// against a real gpucloudd: login (bad and good), role-dependent navigation,
// Administration → Users (create, search, disable/enable, reset, CSV import),
// language switch, password change, API tokens, logout.
//
// Runs as one story: each step builds on the one before.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, ADMIN_PASSWORD, psql } from '../lib/server.mjs';
import { launch, shot } from './browser.mjs';
import { DICTIONARIES } from '../../web/i18n.js';

const STUDENT = { username: 'e2e-student', display: 'Mei Student', email: 'mei@example.edu', password: 'student-pass-1' };
const STUDENT_NEW_PASSWORD = 'student-pass-2';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Polls fn() until it returns a truthy value (returned) or the time is up.
async function until(fn, what, ms = 10000) {
  const end = Date.now() + ms;
  let last;
  for (;;) {
    try { last = await fn(); if (last) return last; } catch (e) { last = e; }
    if (Date.now() > end) throw new Error(`timed out waiting for ${what} (last: ${last instanceof Error ? last.message : JSON.stringify(last)})`);
    await sleep(100);
  }
}

describe('web shell', () => {
  let srv, browser, context, page;
  const pageErrors = [];

  const dialog = () => page.locator('dialog[open]');
  const url = (hash) => `${srv.base}/#${hash}`;

  async function login(username, password) {
    await page.goto(url('/login'));
    await page.getByLabel('Username', { exact: true }).fill(username);
    await page.getByLabel('Password', { exact: true }).fill(password);
    await page.getByRole('button', { name: 'Sign in' }).click();
  }

  async function logout() {
    await page.locator('#user-menu-button').click();
    await page.locator('[data-action=logout]').click();
    await page.getByRole('heading', { name: 'Sign in' }).waitFor();
    assert.match(page.url(), /#\/login$/);
  }

  before(async () => {
    srv = await startServer();
    browser = await launch();
    context = await browser.newContext({ locale: 'en-US', viewport: { width: 1280, height: 860 } });
    page = await context.newPage();
    page.setDefaultTimeout(10000);
    page.on('pageerror', (e) => pageErrors.push(e.message));
    // The server's Content-Security-Policy must never have to refuse our own page.
    page.on('console', (m) => { if (/Content Security Policy/i.test(m.text())) pageErrors.push(m.text()); });
  });

  after(async () => {
    if (page) { try { await shot(page, 'final'); } catch { /* the browser may be gone */ } }
    await browser?.close();
    await srv?.stop();
  });

  it('sends a visitor without a session to the login page', async () => {
    await page.goto(srv.base + '/');
    await page.getByRole('heading', { name: 'Sign in' }).waitFor();
    assert.match(page.url(), /#\/login$/);
    assert.equal(await page.locator('html').getAttribute('lang'), 'en');
    await shot(page, 'login');
  });

  it('shows the error from the API for a wrong password', async () => {
    await login('admin', 'not-the-password');
    const alert = page.locator('.login-form [role=alert]');
    await alert.waitFor();
    assert.ok((await alert.textContent()).trim().length > 0, 'the error message is not empty');
    assert.match(page.url(), /#\/login$/);
    assert.equal(await page.getByLabel('Password', { exact: true }).inputValue(), '', 'the password field is cleared');
  });

  it('logs the admin in and shows the administration navigation', async () => {
    await login('admin', ADMIN_PASSWORD);
    await page.locator('[data-nav="admin-users"]').waitFor({ state: 'visible' });
    assert.match(page.url(), /#\/home$/);
    assert.equal(await page.locator('[data-nav="home"]').getAttribute('aria-current'), 'page');
    assert.ok(await page.locator('[data-nav="account"]').isVisible());
    assert.match(await page.locator('h1').textContent(), /^Welcome, /);
    assert.equal(await page.locator('.page-head [data-role]').getAttribute('data-role'), 'admin');
    assert.equal((await page.locator('.nav-heading').textContent()).trim(), 'Administration');
  });

  it('lists users on Administration → Users', async () => {
    await page.locator('[data-nav="admin-users"]').click();
    await page.getByRole('heading', { name: 'Users', level: 1 }).waitFor();
    assert.match(page.url(), /#\/admin\/users$/);
    await page.locator('tr[data-user="admin"]').waitFor();
    assert.match(await page.locator('tr[data-user="admin"]').textContent(), /Administrator/);
    // The admin cannot disable their own account from here.
    await page.locator('tr[data-user="admin"] [data-action=row-menu]').click();
    await page.locator('tr[data-user="admin"] [data-action=disable]').waitFor({ state: 'visible' });
    assert.ok(await page.locator('tr[data-user="admin"] [data-action=disable]').isDisabled());
    await page.keyboard.press('Escape');
    await page.locator('tr[data-user="admin"] [data-action=disable]').waitFor({ state: 'hidden' });
  });

  it('creates a student with a chosen password through the dialog', async () => {
    await page.getByRole('button', { name: 'Create user' }).click();
    const d = dialog();
    await d.waitFor();
    await d.getByLabel('Username').fill(STUDENT.username);
    await d.getByLabel('Display name').fill(STUDENT.display);
    await d.getByLabel('Email').fill(STUDENT.email);
    await d.getByLabel('Role').selectOption('student');
    await d.getByLabel('Password (optional)').fill(STUDENT.password);
    await d.locator('[data-action=create-user]').click();
    await d.waitFor({ state: 'detached' });
    const row = page.locator(`tr[data-user="${STUDENT.username}"]`);
    await row.waitFor();
    const text = await row.textContent();
    assert.match(text, /Mei Student/);
    assert.match(text, /mei@example\.edu/);
    assert.match(text, /Student/);
    assert.equal(await row.locator('[data-status]').getAttribute('data-status'), 'active');
  });

  it('searches users on the server', async () => {
    const search = page.getByLabel('Search users');
    await search.fill('e2e-stud');
    await until(async () => (await page.locator('tr[data-user="admin"]').count()) === 0, 'admin to drop out of the results');
    assert.equal(await page.locator(`tr[data-user="${STUDENT.username}"]`).count(), 1);
    await search.fill('no-such-user-anywhere');
    await page.locator('tbody tr.empty').waitFor();
    await search.fill('');
    await page.locator('tr[data-user="admin"]').waitFor();
  });

  it('shows a generated password once when none is given', async () => {
    await page.getByRole('button', { name: 'Create user' }).click();
    const d = dialog();
    await d.getByLabel('Username').fill('e2e-generated');
    await d.getByLabel('Role').selectOption('researcher');
    await d.locator('[data-action=create-user]').click();
    const secret = d.locator('[data-secret]');
    await secret.waitFor();
    assert.ok((await secret.inputValue()).length >= 8, 'a generated password is shown');
    await d.locator('[data-action=done]').click();
    await d.waitFor({ state: 'detached' });
    await page.locator('tr[data-user="e2e-generated"]').waitFor();
    assert.equal(await page.locator('[data-secret]').count(), 0, 'the password is gone once the dialog closes');
  });

  it('disables and enables an account', async () => {
    const row = page.locator('tr[data-user="e2e-generated"]');
    await row.locator('[data-action=row-menu]').click();
    await row.locator('[data-action=disable]').click();
    await dialog().locator('[data-action=confirm]').click();
    await row.locator('[data-status="disabled"]').waitFor();
    await row.locator('[data-action=row-menu]').click();
    await row.locator('[data-action=enable]').click();
    await row.locator('[data-status="active"]').waitFor();
  });

  it('resets a password and shows the new one once', async () => {
    const row = page.locator('tr[data-user="e2e-generated"]');
    await row.locator('[data-action=row-menu]').click();
    await row.locator('[data-action=reset-password]').click();
    await dialog().locator('[data-action=confirm]').click();
    const secret = dialog().locator('[data-secret]');
    await secret.waitFor();
    assert.ok((await secret.inputValue()).length >= 8);
    await dialog().locator('[data-action=done]').click();
    await dialog().waitFor({ state: 'detached' });
  });

  it('imports users from CSV, reporting bad lines and then creating all', async () => {
    await page.getByRole('button', { name: 'Import CSV' }).click();
    const d = dialog();
    const text = d.getByLabel('Or paste the CSV here');
    await text.fill('username,display_name,email,role\ne2e-csv1,CSV One,csv1@example.edu,student\ne2e-csv2,CSV Two,csv2@example.edu,wizard\n');
    await d.locator('[data-action=import]').click();
    await d.locator('[data-import-errors] li').first().waitFor();
    assert.match(await d.locator('[data-import-errors]').textContent(), /Line \d+/);
    assert.equal(await page.locator('tr[data-user="e2e-csv1"]').count(), 0, 'all or nothing: no user from a bad file');

    await text.fill('username,display_name,email,role,password\ne2e-csv1,CSV One,csv1@example.edu,student,\ne2e-csv2,CSV Two,csv2@example.edu,teacher,given-password-1\n');
    await d.locator('[data-action=import]').click();
    await d.locator('[data-import-result]').waitFor();
    assert.equal(await d.locator('tr[data-created]').count(), 2);
    assert.ok((await d.locator('tr[data-created="e2e-csv1"] [data-password]').textContent()).trim().length >= 8, 'the generated password is listed');
    await shot(page, 'import');
    await d.locator('[data-action=done]').click();
    await page.locator('tr[data-user="e2e-csv1"]').waitFor();
    await page.locator('tr[data-user="e2e-csv2"]').waitFor();
    await shot(page, 'admin-users');
  });

  it('pages through a long user list with "Load more"', async () => {
    // Sixty accounts straight into the database: through the API each would
    // cost a password hash. They only need to be listed, never to sign in.
    psql(srv.db.url, "INSERT INTO users (username, role, password_hash) SELECT 'e2e-bulk-' || lpad(g::text, 2, '0'),"
      + " 'student', '$scrypt$not-a-login' FROM generate_series(1, 60) AS g");
    await page.reload();
    const rows = page.locator('tr[data-user]');
    const more = page.getByRole('button', { name: 'Load more' });
    await more.waitFor();
    assert.equal(await rows.count(), 50, 'the first page holds 50');
    await more.click();
    await until(async () => (await rows.count()) > 50, 'the second page');
    await more.waitFor({ state: 'hidden' });
    const names = await rows.evaluateAll((trs) => trs.map((tr) => tr.dataset.user));
    assert.equal(new Set(names).size, names.length, 'no user is listed twice');
    assert.ok(names.includes('e2e-bulk-60') && names.includes('admin'));
    assert.match(await page.locator('.table-count').textContent(), new RegExp(`^${names.length} shown$`));
  });

  it('logs out from the user menu', async () => {
    await logout();
    await page.goto(url('/home'));
    await page.getByRole('heading', { name: 'Sign in' }).waitFor();
  });

  it('logs the student in without the administration entry', async () => {
    await login(STUDENT.username, STUDENT.password);
    await page.locator('[data-nav="home"]').waitFor({ state: 'visible' });
    assert.ok(await page.locator('[data-nav="account"]').isVisible());
    assert.equal(await page.locator('[data-nav="admin-users"]').count(), 0);
    assert.equal(await page.locator('.nav-heading').count(), 0, 'no empty Administration section');
    assert.equal((await page.locator('h1').textContent()).trim(), `Welcome, ${STUDENT.display}`);
    assert.equal(await page.locator('.page-head [data-role]').getAttribute('data-role'), 'student');
    // Quotas come from /me: either a table or the explicit empty state.
    await until(async () => (await page.locator('[data-quota], [data-empty="quotas"]').count()) > 0, 'the quota card');

    await page.goto(url('/admin/users'));
    await page.locator('[data-forbidden]').waitFor();
    assert.equal(await page.locator('[data-table="users"]').count(), 0);
  });

  it('switches the language to 简体中文 and keeps it across a reload', async () => {
    await page.goto(url('/home'));
    await page.locator('[data-lang-switch]').selectOption({ label: '简体中文' });
    await until(async () => (await page.locator('[data-nav="home"]').textContent()).trim() === '首页', 'the translated Home entry');
    assert.equal((await page.locator('[data-nav="account"]').textContent()).trim(), '账户');
    assert.equal(await page.locator('html').getAttribute('lang'), 'zh-CN');
    await page.reload();
    await until(async () => (await page.locator('[data-nav="home"]').textContent()).trim() === '首页', 'Chinese after a reload');
    await shot(page, 'home-zh');
    await page.locator('[data-lang-switch]').selectOption('en');
    await until(async () => (await page.locator('[data-nav="home"]').textContent()).trim() === 'Home', 'English again');
  });

  it('changes the password on Account, checking it in the browser first', async () => {
    await page.locator('[data-nav="account"]').click();
    await page.getByRole('heading', { name: 'Account', level: 1 }).waitFor();
    assert.equal((await page.locator('[data-field="username"]').textContent()).trim(), STUDENT.username);

    const form = page.locator('[data-form=password]');
    const submit = form.getByRole('button', { name: 'Change password' });
    await form.getByLabel('Current password').fill(STUDENT.password);
    await form.getByLabel('New password', { exact: true }).fill(STUDENT_NEW_PASSWORD);
    await form.getByLabel('Confirm new password').fill('something-else');
    await submit.click();
    assert.match(await form.locator('[role=alert]').textContent(), /do not match/);

    await form.getByLabel('New password', { exact: true }).fill('short');
    await form.getByLabel('Confirm new password').fill('short');
    await submit.click();
    assert.match(await form.locator('[role=alert]').textContent(), /at least 8/);

    await form.getByLabel('Current password').fill('wrong-current-password');
    await form.getByLabel('New password', { exact: true }).fill(STUDENT_NEW_PASSWORD);
    await form.getByLabel('Confirm new password').fill(STUDENT_NEW_PASSWORD);
    await submit.click();
    await until(async () => (await form.locator('[role=alert]').textContent()).trim().length > 0 && !(await submit.isDisabled()), 'the API error');

    await form.getByLabel('Current password').fill(STUDENT.password);
    await form.getByLabel('New password', { exact: true }).fill(STUDENT_NEW_PASSWORD);
    await form.getByLabel('Confirm new password').fill(STUDENT_NEW_PASSWORD);
    await submit.click();
    await form.locator('[role=status]').waitFor();
    assert.match(await form.locator('[role=status]').textContent(), /has been changed/);
  });

  it('creates an API token, shows its secret once, and revokes it', async () => {
    const form = page.locator('[data-form=token]');
    await form.getByLabel('Name').fill('e2e-laptop');
    await form.getByLabel('Write').check();
    await form.getByLabel('Expires after (days)').fill('30');
    await form.getByRole('button', { name: 'Create token' }).click();

    const secret = page.locator('[data-new-token] [data-secret]');
    await secret.waitFor();
    const token = await secret.inputValue();
    assert.match(token, /^gct_/);
    const row = page.locator('tr[data-token="e2e-laptop"]');
    await row.waitFor();
    assert.match(await row.textContent(), /Read.*Write/);
    await shot(page, 'account');

    // The secret is real: it authenticates a script.
    const me = await fetch(`${srv.base}/api/v1/me`, { headers: { authorization: `Bearer ${token}` } });
    assert.equal(me.status, 200);
    assert.equal((await me.json()).user.username, STUDENT.username);

    await page.getByRole('button', { name: 'I have stored it' }).click();
    assert.equal(await page.locator('[data-secret]').count(), 0);
    await page.reload();
    await row.waitFor();
    assert.equal(await page.locator('[data-secret]').count(), 0, 'the secret is never shown again');
    assert.equal(await page.content().then((html) => html.includes(token)), false);

    await row.getByRole('button', { name: 'Revoke' }).click();
    await dialog().locator('[data-action=confirm]').click();
    await row.waitFor({ state: 'detached' });
    const after = await fetch(`${srv.base}/api/v1/me`, { headers: { authorization: `Bearer ${token}` } });
    assert.equal(after.status, 401, 'a revoked token no longer works');
  });

  it('logs out, and the new password works', async () => {
    await logout();
    await login(STUDENT.username, STUDENT_NEW_PASSWORD);
    await page.locator('[data-nav="home"]').waitFor({ state: 'visible' });
    await logout();
  });

  it('picks Chinese for a browser whose language is Chinese', async () => {
    const zh = await browser.newContext({ locale: 'zh-CN', viewport: { width: 390, height: 760 } });
    try {
      const p = await zh.newPage();
      await p.goto(srv.base + '/');
      await p.getByRole('heading', { name: '登录' }).waitFor();
      assert.equal(await p.locator('html').getAttribute('lang'), 'zh-CN');
      assert.ok(await p.getByLabel('用户名').isVisible());
      await shot(p, 'login-zh-mobile');
    } finally {
      await zh.close();
    }
  });

  it('shows a server error in Chinese, keeping the server’s words as detail', async () => {
    const zh = await browser.newContext({ locale: 'zh-CN', viewport: { width: 1280, height: 860 } });
    try {
      const p = await zh.newPage();
      p.on('pageerror', (e) => pageErrors.push(e.message));
      await p.goto(srv.base + '/#/login');
      await p.getByRole('heading', { name: '登录' }).waitFor();
      await p.locator('input[name=username]').fill('admin');
      await p.locator('input[name=password]').fill('not-the-password');
      await p.locator('[data-action=login]').click();
      const alert = p.locator('.login-form [role=alert]');
      await alert.waitFor();
      const text = (await alert.textContent()).trim();
      assert.ok(text.startsWith(DICTIONARIES['zh-CN']['error.code.unauthorized']), `the 401 in Chinese (got: ${text})`);
      assert.match(text, /^\p{Script=Han}/u, 'the sentence is Chinese');
      const detail = (await alert.locator('[data-error-detail]').textContent()).trim();
      assert.equal(detail, 'invalid username or password — check the username and password', 'the server’s own words stay as detail');
      await shot(p, 'login-error-zh');
    } finally {
      await zh.close();
    }
  });

  // Last, so the throttle it trips cannot slow the steps above.
  it('tells how long to wait when sign-in is throttled', async () => {
    await page.goto(url('/login'));
    const alert = page.locator('.login-form [role=alert]');
    const submit = page.getByRole('button', { name: 'Sign in' });
    let text = '', held = false;
    for (let i = 0; i < 30 && !/Too many/.test(text); i++) {
      await page.getByLabel('Username', { exact: true }).fill(STUDENT.username);
      await page.getByLabel('Password', { exact: true }).fill(`wrong-password-${i}`);
      await until(async () => !(await submit.isDisabled()), 'the Sign in button');
      await submit.click();
      await alert.waitFor();
      await until(async () => !(await page.locator('form[aria-busy]').count()), 'the reply');
      // Read both at once: a short throttle may already be over a moment later.
      [text, held] = await page.evaluate(() => [
        document.querySelector('.login-form [role=alert]')?.textContent || '',
        document.querySelector('[data-action=login]').disabled,
      ]);
    }
    assert.match(text, /Too many sign-in attempts\. Please wait \d+\s+s before/);
    assert.ok(held, 'Sign in waits for the throttle to pass');
  });

  it('raised no uncaught error and no policy violation in the page', () => {
    assert.deepEqual(pageErrors, []);
  });
});
