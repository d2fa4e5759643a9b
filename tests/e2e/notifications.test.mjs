// notifications.test.mjs — the bell, the Notifications page and the e-mail
// preferences on the Account page, in a real headless Chromium against a
// real gpucloudd: notifications made by the database (gc_notify, what the
// triggers call) show in the reader's language with the unread count in the
// top bar; marking read, the unread filter, mark all read and delete follow
// in the bell; the mail settings are saved; then the same in 简体中文.
// Screenshots: var/test-logs/e2e-notifications-*.png.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, ADMIN_PASSWORD, Client } from '../lib/server.mjs';
import { sql } from '../lib/itest.mjs';
import { launch, shot, newPage } from './browser.mjs';

const USER = { username: 'e2e-n-user', password: 'notify-pass-1' };

async function signIn(p, base, submit) {
  await p.goto(`${base}/#/login`);
  await p.locator('input[name=username]').waitFor({ timeout: 10000 }).catch(() => p.reload());
  await p.locator('input[name=username]').fill(USER.username);
  await p.locator('input[type=password]').first().fill(USER.password);
  await p.getByRole('button', { name: submit }).click();
  await p.locator('[data-nav="home"]').waitFor();
}

describe('notifications in the web interface', () => {
  let srv, browser, uid;
  const errors = [];
  const notify = (kind, params, link) =>
    sql(srv, `SELECT gc_notify(${uid}, '${kind}', '${JSON.stringify(params).replace(/'/g, "''")}'::jsonb, '${link}')`);
  const bellCount = (p) => p.locator('[data-bell] .bell-count');

  before(async () => {
    srv = await startServer({ args: ['--scrypt-ln=10'] });
    const admin = new Client(srv.base);
    assert.equal((await admin.login('admin', ADMIN_PASSWORD)).status, 200);
    const u = await admin.post('/api/v1/users', { ...USER, role: 'student' });
    assert.equal(u.status, 201, u.text);
    uid = u.json.user.id;
    notify('job.failed', { job_id: 7, name: 'train-resnet', state: 'failed', exit_code: 3, reason: 'exited with code 3' }, '/job?id=7');
    notify('instance.idle_warning', { instance_id: 4, name: 'notebook', idle_seconds: 1800, stop_at: '2026-12-02T18:30:00Z' }, '/instance?id=4');
    notify('quota.storage', { area: `home:${uid}`, bytes: 9.5 * 2 ** 30, limit_bytes: 10 * 2 ** 30, percent: 95 }, '/files');
    notify('class.notice', { class_id: 1, class: 'Deep Learning', notice_id: 1, author: 'tina', body: 'Lab 3 moved to room 204.\nBring your laptop.' }, '/class?id=1');
    browser = await launch();
  });
  after(async () => { await browser?.close(); await srv?.stop(); });

  it('English: bell, page, marking, deleting, mail settings', async () => {
    const p = await newPage(browser, errors, 'en-US');
    await signIn(p, srv.base, 'Sign in');
    await bellCount(p).waitFor();
    assert.equal(await bellCount(p).textContent(), '4');
    assert.equal(await p.locator('[data-bell]').getAttribute('aria-label'), 'Notifications, 4 unread');
    await p.locator('[data-bell]').click();
    await p.locator('.notif[data-kind]').first().waitFor();
    const titles = await p.locator('.notif-title').allTextContents();
    assert.deepEqual(titles.map((s) => s.replace('Unread', '').trim()), [
      'Notice in Deep Learning', 'Your home storage is 95% full', 'Instance notebook will be stopped', 'Job train-resnet failed']);
    const failed = p.locator('.notif[data-kind="job.failed"]');
    assert.match(await failed.locator('[data-field=body]').textContent(), /Your job train-resnet \(#7\) ended: Failed\. Exit code: 3\./);
    assert.match(await p.locator('.notif[data-kind="quota.storage"] [data-field=body]').textContent(), /uses 9\.5 GiB of its 10 GiB limit/);
    assert.equal(await failed.locator('a[data-action=open]').getAttribute('href'), '#/job?id=7');
    await shot(p, 'notifications-en');
    // mark one read: the bell follows
    await failed.locator('[data-action=read]').click();
    await p.locator('.notif[data-kind="job.failed"][data-read=true]').waitFor();
    await p.waitForFunction(() => document.querySelector('[data-bell] .bell-count')?.textContent === '3');
    await p.locator('[data-filter=unread]').click();
    await p.waitForFunction(() => document.querySelectorAll('.notif[data-kind]').length === 3);
    await p.locator('[data-action=read-all]').click();
    await p.locator('[data-empty]').waitFor();
    assert.equal(await p.locator('[data-empty]').textContent(), 'No unread notifications.');
    await p.waitForFunction(() => document.querySelector('[data-bell] .bell-count')?.hidden === true);
    await p.locator('[data-filter=all]').click();
    await p.waitForFunction(() => document.querySelectorAll('.notif[data-kind]').length === 4);
    await p.locator('.notif[data-kind="quota.storage"] [data-action=delete]').click();
    await p.waitForFunction(() => document.querySelectorAll('.notif[data-kind]').length === 3);
    // the mail settings on the Account page
    await p.goto(`${srv.base}/#/account`);
    const card = p.locator('[data-card=notif-prefs]');
    await card.waitFor();
    await card.locator('[data-no-mail-server]').waitFor(); // no SMTP server in this test
    await card.locator('[data-field=notif-email]').fill('user@example.org');
    await card.locator('[data-kind="job.succeeded"]').uncheck();
    await card.locator('[data-field=notif-lang]').selectOption('zh-CN');
    await card.getByRole('button', { name: 'Save e-mail settings' }).click();
    await card.getByText('E-mail settings saved.').waitFor();
    assert.equal(await p.locator('.props [data-field=email]').textContent(), 'user@example.org', 'the profile follows');
    await shot(p, 'notifications-account-en');
    const c = new Client(srv.base);
    assert.equal((await c.login(USER.username, USER.password)).status, 200);
    const prefs = (await c.get('/api/v1/notifications/preferences')).json;
    assert.equal(prefs.email, 'user@example.org');
    assert.equal(prefs.language, 'zh-CN');
    assert.equal(prefs.email_kinds['job.succeeded'], false);
    assert.equal(prefs.email_kinds['job.failed'], true);
    await p.context().close();
  });

  it('简体中文: the same words in Chinese', async () => {
    notify('instance.stopped', { instance_id: 4, name: 'notebook', why: 'idle', reason: 'stopped after being idle' }, '/instance?id=4');
    const p = await newPage(browser, errors, 'zh-CN');
    await signIn(p, srv.base, '登录');
    await bellCount(p).waitFor();
    assert.equal(await bellCount(p).textContent(), '1');
    assert.equal(await p.locator('[data-bell]').getAttribute('aria-label'), '通知，1 条未读');
    await p.goto(`${srv.base}/#/notifications`);
    await p.locator('.notif[data-kind="instance.stopped"]').waitFor();
    assert.match(await p.locator('.notif[data-kind="instance.stopped"] .notif-title').textContent(), /实例 notebook 已被停止/);
    assert.match(await p.locator('.notif[data-kind="instance.stopped"] [data-field=body]').textContent(), /空闲时间过长/);
    assert.match(await p.locator('.notif[data-kind="class.notice"] .notif-title').textContent(), /课程 Deep Learning 的通知/);
    assert.match(await p.locator('.notif[data-kind="job.failed"] [data-field=body]').textContent(), /已结束：失败。退出码：3。/);
    assert.equal(await p.locator('h1').textContent(), '通知');
    await shot(p, 'notifications-zh');
    await p.goto(`${srv.base}/#/account`);
    const card = p.locator('[data-card=notif-prefs]');
    await card.getByText('邮件通知').waitFor();
    await p.waitForFunction(() => document.querySelector('[data-field=notif-email]')?.value !== '');
    assert.equal(await card.locator('[data-field=notif-email]').inputValue(), 'user@example.org');
    await card.getByText('作业失败').waitFor();
    await shot(p, 'notifications-account-zh');
    await p.context().close();
    assert.deepEqual(errors, []);
  });
});
