// users.test.mjs — Administration → Users end to end in a real headless
// Chromium against a real gpucloudd: an admin edits an account (name, role),
// deletes one and finds it among the deleted accounts, checks a CSV with
// problems and sees every one by line number (nothing created), imports a
// good one and downloads the one-time passwords as CSV and as a printable
// sheet; an imported user signs in and must choose a new password before
// anything else; the same in Simplified Chinese.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { startServer, ADMIN_PASSWORD, Client } from '../lib/server.mjs';
import { launch, shot } from './browser.mjs';
import { DICTIONARIES } from '../../web/i18n.js';

const zh = DICTIONARIES['zh-CN'];

describe('admin users page', () => {
  let srv, browser, context, page, api;
  const pageErrors = [];
  const ids = {};
  let imported = null;

  const dialog = () => page.locator('dialog[open]');
  const row = (name) => page.locator(`tr[data-user="${name}"]`);

  async function rowAction(name, action) {
    await row(name).locator('[data-action=row-menu]').click();
    const item = row(name).locator(`[data-action=${action}]`);
    await item.waitFor({ state: 'visible' });
    await item.click();
  }

  async function signIn(p, username, password, button = 'Sign in') {
    await p.goto(`${srv.base}/#/login`);
    await p.locator('input[name=username]').fill(username);
    await p.locator('input[name=password]').fill(password);
    await p.getByRole('button', { name: button }).click();
  }

  before(async () => {
    srv = await startServer();
    api = new Client(srv.base);
    assert.equal((await api.login('admin', ADMIN_PASSWORD)).status, 200);
    for (const [u, role] of [['ed1', 'student'], ['del1', 'student'], ['zh1', 'student'], ['live1', 'student']]) {
      const r = await api.post('/api/v1/users', { username: u, role, password: `${u}-password-1`, display_name: `User ${u}` });
      assert.equal(r.status, 201, r.text);
      ids[u] = r.json.user.id;
    }
    browser = await launch();
    context = await browser.newContext({ locale: 'en-US', viewport: { width: 1360, height: 900 }, acceptDownloads: true });
    page = await context.newPage();
    page.setDefaultTimeout(10000);
    page.on('pageerror', (e) => pageErrors.push(e.message));
    page.on('console', (m) => { if (/Content Security Policy/i.test(m.text())) pageErrors.push(m.text()); });
  });

  after(async () => {
    if (page) { try { await shot(page, 'users-final'); } catch { /* the browser may be gone */ } }
    await browser?.close();
    await srv?.stop();
  });

  it('edits an account: name and role', async () => {
    await signIn(page, 'admin', ADMIN_PASSWORD);
    await page.locator('[data-nav="admin-users"]').click();
    await page.getByRole('heading', { name: 'Users', level: 1 }).waitFor();
    await row('ed1').waitFor();
    await rowAction('ed1', 'edit');
    const d = dialog();
    await d.getByLabel('Display name').fill('Edna Edited');
    await d.getByLabel('Role').selectOption('teacher');
    await shot(page, 'users-edit');
    await d.locator('[data-action=save-user]').click();
    await d.waitFor({ state: 'detached' });
    await row('ed1').getByText('Edna Edited').waitFor();
    assert.match(await row('ed1').textContent(), /Teacher/);
    const u = await api.get(`/api/v1/users/${ids.ed1}`);
    assert.equal(u.json.display_name, 'Edna Edited');
    assert.equal(u.json.role, 'teacher');
  });

  it('creates an account that must choose its own password at the first sign-in', async () => {
    await page.locator('[data-action=open-create]').click();
    const d = dialog();
    await d.getByLabel('Username').fill('made1');
    await d.getByLabel('Password (optional)').fill('made1-password-1');
    await d.getByLabel('Must choose a new password at the next sign-in').check();
    await d.locator('[data-action=create-user]').click();
    await d.waitFor({ state: 'detached' });
    await row('made1').locator('[data-must-change]').waitFor();
    const u = (await api.get('/api/v1/users?q=made1')).json.items[0];
    assert.equal(u.must_change_password, true);
  });

  it('deletes an account after a confirmation; it is listed among the deleted', async () => {
    await rowAction('del1', 'delete');
    const d = dialog();
    assert.match(await d.textContent(), /history/);
    await d.locator('[data-action=confirm]').click();
    await row('del1').waitFor({ state: 'detached' });
    const u = await api.get(`/api/v1/users/${ids.del1}`);
    assert.notEqual(u.json.deleted_at, null);
    await page.locator('[data-user-view]').selectOption('deleted');
    await row('del1').locator('[data-status=deleted]').waitFor();
    assert.equal(await row('ed1').count(), 0, 'a live account among the deleted');
    assert.equal(await row('del1').locator('[data-action=row-menu]').count(), 0, 'actions on a deleted account');
    await shot(page, 'users-deleted');
    await page.locator('[data-user-view]').selectOption('active');
    await row('ed1').waitFor();
  });

  it('checks a CSV and shows every problem with its line number, creating nothing', async () => {
    await page.locator('[data-action=open-import]').click();
    const d = dialog();
    const bad = 'username,display_name,role\nnew-a,Ann,student\nBad Name,Bob,student\nnew-c,Cy,wizard\nnew-a,Ann again,student\ndel1,Gone,student\n';
    await d.locator('#import-text').fill(bad);
    await d.locator('[data-action=check-import]').click();
    await d.locator('[data-import-errors]').waitFor();
    const lines = await d.locator('[data-import-errors] li').evaluateAll((lis) => lis.map((li) => Number(li.dataset.line)));
    assert.deepEqual(lines, [3, 4, 5, 6]);
    assert.match(await d.locator('[data-import-errors] li[data-line="3"]').textContent(), /^Line 3:/);
    assert.match(await d.locator('[data-import-errors] li[data-line="6"]').textContent(), /deleted account/);
    assert.match(await d.locator('[data-import-errors] h3').textContent(), /4 problems/);
    await shot(page, 'users-import-errors');
    // the same through Import: still nothing created
    await d.locator('[data-action=import]').click();
    await d.locator('[data-import-errors]').waitFor();
    assert.match(await d.locator('[data-import-errors] h3').textContent(), /nothing was imported/);
    assert.equal((await api.get('/api/v1/users?q=new-')).json.items.length, 0);
  });

  it('imports a good CSV after a check, and offers the one-time passwords as CSV and as a sheet', async () => {
    const d = dialog();
    await d.locator('#import-text').fill('username,display_name,role\nnew-a,Ann Able,student\nnew-b,"Bo, B",researcher\n');
    await d.locator('[data-action=check-import]').click();
    await d.locator('[role=status]').getByText('2 users would be created').waitFor();
    assert.equal(await d.locator('[data-import-errors]').count(), 0);
    assert.equal((await api.get('/api/v1/users?q=new-')).json.items.length, 0, 'a check created users');
    await d.locator('[data-action=import]').click();
    await d.locator('[data-import-result]').waitFor();
    const pw = await d.locator('tr[data-created="new-a"] [data-password]').textContent();
    assert.ok(pw.length >= 16, `a generated password: ${pw}`);
    assert.match(await d.textContent(), /must choose a new password/);

    const [csvDl] = await Promise.all([page.waitForEvent('download'), d.locator('[data-action=download-csv]').click()]);
    const csv = readFileSync(await csvDl.path(), 'utf8');
    assert.match(csv, /^username,display_name,password\n/);
    assert.ok(csv.includes(`new-a,Ann Able,${pw}`), csv);
    assert.ok(csv.includes('"Bo, B"'), 'a comma in a name is quoted');

    const [sheetDl] = await Promise.all([page.waitForEvent('download'), d.locator('[data-action=download-sheet]').click()]);
    assert.match(sheetDl.suggestedFilename(), /\.html$/);
    const sheetPath = await sheetDl.path();
    const html = readFileSync(sheetPath, 'utf8');
    assert.ok(html.includes(pw) && html.includes('Ann Able'), 'the sheet names the account and its password');
    // the sheet is a page of its own: it renders a slip per account
    const sheet = await context.newPage();
    await sheet.setContent(html);
    assert.equal(await sheet.locator('.slip').count(), 2);
    await shot(sheet, 'users-sheet');
    await sheet.close();
    imported = { username: 'new-a', password: pw };
    await d.locator('[data-action=done]').click();
    await row('new-a').locator('[data-must-change]').waitFor();
    await shot(page, 'users-list');
  });

  it('makes an imported user choose a new password at the first sign-in', async () => {
    const ctx2 = await browser.newContext({ locale: 'en-US', viewport: { width: 1100, height: 800 } });
    try {
      const p = await ctx2.newPage();
      p.setDefaultTimeout(10000);
      p.on('pageerror', (e) => pageErrors.push(e.message));
      await signIn(p, imported.username, imported.password);
      await p.getByRole('heading', { name: 'Choose a new password' }).waitFor();
      assert.equal(await p.locator('nav.sidenav').count(), 0, 'the app is shown before the change');
      // going elsewhere by address keeps the screen
      await p.goto(`${srv.base}/#/instances`);
      await p.getByRole('heading', { name: 'Choose a new password' }).waitFor();
      await shot(p, 'users-first-password');
      // after a reload the screen is still there, and now asks for the current password too
      await p.reload();
      await p.getByRole('heading', { name: 'Choose a new password' }).waitFor();
      await p.getByLabel('Current password').fill(imported.password);
      await p.getByLabel('New password', { exact: true }).fill(imported.password);
      await p.getByLabel('Confirm new password').fill(imported.password);
      await p.locator('[data-action=set-password]').click();
      assert.match(await p.locator('[role=alert]').textContent(), /different/);
      await p.getByLabel('New password', { exact: true }).fill('ann-own-password-1');
      await p.getByLabel('Confirm new password').fill('ann-own-password-1');
      await p.locator('[data-action=set-password]').click();
      await p.locator('nav.sidenav').waitFor();
      assert.match(p.url(), /#\/home$/);
      const c = new Client(srv.base);
      assert.equal((await c.login('new-a', 'ann-own-password-1')).status, 200);
      assert.equal((await c.get('/api/v1/me')).json.user.must_change_password, false);
    } finally {
      await ctx2.close();
    }
  });

  it('right after sign-in asks only for the new password (the one typed is carried over)', async () => {
    const r = await api.post(`/api/v1/users/${ids.ed1}/password`, {});
    assert.equal(r.status, 200);
    const ctx2 = await browser.newContext({ locale: 'en-US' });
    try {
      const p = await ctx2.newPage();
      p.setDefaultTimeout(10000);
      await signIn(p, 'ed1', r.json.password);
      await p.getByRole('heading', { name: 'Choose a new password' }).waitFor();
      assert.equal(await p.getByLabel('Current password').count(), 0);
      await p.getByLabel('New password', { exact: true }).fill('edna-own-password');
      await p.getByLabel('Confirm new password').fill('edna-own-password');
      await p.locator('[data-action=set-password]').click();
      await p.locator('nav.sidenav').waitFor();
      assert.equal((await api.get(`/api/v1/users/${ids.ed1}`)).json.must_change_password, false);
    } finally {
      await ctx2.close();
    }
  });

  it('switches a signed-in user to the forced change when an admin asks for it meanwhile', async () => {
    const ctx2 = await browser.newContext({ locale: 'en-US' });
    try {
      const p = await ctx2.newPage();
      p.setDefaultTimeout(10000);
      p.on('pageerror', (e) => pageErrors.push(e.message));
      await signIn(p, 'live1', 'live1-password-1');
      await p.locator('nav.sidenav').waitFor();
      const r = await api.patch(`/api/v1/users/${ids.live1}`, { must_change_password: true });
      assert.equal(r.status, 200, r.text);
      await p.locator('[data-nav="instances"]').click();
      await p.getByRole('heading', { name: 'Choose a new password' }).waitFor();
      await p.getByLabel('Current password').fill('live1-password-1');
      await p.getByLabel('New password', { exact: true }).fill('live1-own-password');
      await p.getByLabel('Confirm new password').fill('live1-own-password');
      await p.locator('[data-action=set-password]').click();
      await p.locator('nav.sidenav').waitFor();
      assert.match(p.url(), /#\/instances$/, 'back where the user was going');
    } finally {
      await ctx2.close();
    }
  });

  it('speaks Simplified Chinese: users page, import report and the forced change', async () => {
    const zctx = await browser.newContext({ locale: 'zh-CN', viewport: { width: 1360, height: 900 } });
    try {
      const p = await zctx.newPage();
      p.setDefaultTimeout(10000);
      p.on('pageerror', (e) => pageErrors.push(e.message));
      await signIn(p, 'admin', ADMIN_PASSWORD, zh['login.submit']);
      await p.locator('[data-nav="admin-users"]').click();
      await p.getByRole('heading', { name: zh['users.title'], level: 1 }).waitFor();
      assert.equal(await p.locator('html').getAttribute('lang'), 'zh-CN');
      await p.locator('[data-user-view] option[value=deleted]').getByText(zh['users.viewDeleted']).count();
      await shot(p, 'users-zh');
      await p.locator('tr[data-user="zh1"] [data-action=row-menu]').click();
      await p.locator('tr[data-user="zh1"] [data-action=delete]').getByText(zh['users.delete']).waitFor();
      await p.keyboard.press('Escape');
      await p.locator('[data-action=open-import]').click();
      const d = p.locator('dialog[open]');
      await d.locator('#import-text').fill('username,role\nzh-a,student\nBad,student\n');
      await d.locator('[data-action=check-import]').click();
      await d.locator('[data-import-errors]').waitFor();
      assert.match(await d.locator('[data-import-errors] li[data-line="3"]').textContent(), /^第 3 行：/);
      assert.match(await d.locator('[data-import-errors] h3').textContent(), /发现 1 个问题/);
      await shot(p, 'users-import-errors-zh');
      await d.getByRole('button', { name: zh['common.cancel'] }).click();

      const r = await api.post(`/api/v1/users/${ids.zh1}/password`, {});
      const q = await zctx.newPage();
      await q.context().clearCookies();
      await signIn(q, 'zh1', r.json.password, zh['login.submit']);
      await q.getByRole('heading', { name: zh['firstPassword.title'] }).waitFor();
      assert.match(await q.textContent('body'), new RegExp(zh['firstPassword.intro'].slice(0, 8)));
      await shot(q, 'users-first-password-zh');
    } finally {
      await zctx.close();
    }
    assert.deepEqual(pageErrors, []);
  });
});
