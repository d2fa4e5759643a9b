// audit.test.mjs — the audit log in the browser (issue 15): an admin reads
// every entry (the system's own actions marked "system"), filters by actor,
// action, target and time (the filters stay in the URL), pages on and
// downloads the CSV the filters select; a teacher reaches their class's log
// from the class's tabs and sees only that class's entries; students are
// refused; Simplified Chinese. Screenshots: e2e-audit*.png.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, Client, ADMIN_PASSWORD, psql } from '../lib/server.mjs';
import { launch, shot, newPage, signIn } from './browser.mjs';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function until(fn, what, ms = 15000) {
  const end = Date.now() + ms;
  let last;
  for (;;) {
    try { last = await fn(); if (last) return last; } catch (e) { last = e; }
    if (Date.now() > end) throw new Error(`timed out waiting for ${what} (last: ${last instanceof Error ? last.message : JSON.stringify(last)})`);
    await sleep(100);
  }
}

describe('the audit log in the browser', () => {
  let srv, browser, page, cls, cls2, mark;
  const errors = [];
  const rows = (p) => p.locator('[data-table=audit] tbody tr[data-audit]');
  const column = async (p, field) => p.locator(`[data-table=audit] tbody tr[data-audit] [data-field=${field}]`).allTextContents();

  before(async () => {
    srv = await startServer({ args: ['--scrypt-ln=10'] });
    const admin = new Client(srv.base);
    assert.equal((await admin.login('admin', ADMIN_PASSWORD)).status, 200);
    const users = {};
    for (const [u, role] of [['teach', 'teacher'], ['tom', 'teacher'], ['amy', 'student']]) {
      const r = await admin.post('/api/v1/users', { username: u, role, password: `${u}-pass-12` });
      assert.equal(r.status, 201, r.text);
      users[u] = new Client(srv.base);
      assert.equal((await users[u].login(u, `${u}-pass-12`)).status, 200);
    }
    cls = (await users.teach.post('/api/v1/classes', { name: 'Deep Learning' })).json.id;
    cls2 = (await users.tom.post('/api/v1/classes', { name: 'Other Class' })).json.id;
    assert.ok(cls && cls2);
    assert.equal((await users.teach.post(`/api/v1/classes/${cls}/members`, { username: 'amy' })).status, 201);
    assert.equal((await users.tom.post(`/api/v1/classes/${cls2}/members`, { username: 'amy' })).status, 201);
    const oct = { 'content-type': 'application/octet-stream' };
    assert.equal((await users.teach.req('PUT', `/api/v1/files/class:${cls}/lab1.ipynb`, '{}', oct)).status, 201);
    assert.equal((await users.teach.del(`/api/v1/files/class:${cls}/lab1.ipynb`)).status, 200);
    assert.equal((await new Client(srv.base).login('mallory', 'guess-guess-1')).status, 401);
    // an action of the system's own (what the idle reclaimer writes)
    psql(srv.db.url, "SELECT gc_audit_system('instance.idle_stop', 'instance:7', '{\"reason\": \"stopped after being idle for 3600 s\"}')");
    // before the filler, to the second: the screenshots show what came first
    await sleep(1100);
    mark = new Date(Math.floor(Date.now() / 1000) * 1000).toISOString();
    for (let i = 0; i < 60; i++) assert.equal((await admin.req('PUT', '/api/v1/settings/tensorboard_image', { value: '' })).status, 200);
    browser = await launch();
    page = await newPage(browser, errors);
    await signIn(page, srv.base, 'admin', ADMIN_PASSWORD);
  });

  after(async () => {
    await browser?.close();
    await srv?.stop();
    assert.deepEqual(errors, []);
  });

  it('shows every entry to an admin, the system\'s marked', async () => {
    await page.locator('[data-nav="admin-audit"]').click();
    await page.getByRole('heading', { name: 'Audit log', level: 1 }).waitFor();
    await until(async () => (await rows(page).count()) === 50, 'a page of 50');
    assert.equal(await page.locator('[data-action=more]').isVisible(), true);
    await page.locator('[data-action=more]').click();
    await until(async () => (await rows(page).count()) > 50, 'the next page');
    const sys = page.locator('tr[data-action="instance.idle_stop"]');
    assert.equal(await sys.locator('[data-system]').textContent(), 'system');
    assert.match(await sys.locator('[data-field=details]').textContent(), /idle for 3600 s/);
    const fail = page.locator('tr[data-action="login.failure"]').first();
    assert.equal(await fail.locator('[data-field=target]').textContent(), 'mallory');
    assert.equal(await fail.locator('[data-field=ip]').textContent(), '127.0.0.1');
    assert.equal(await fail.locator('[data-field=actor]').textContent(), 'not signed in');
    await page.goto(`${srv.base}/#/admin/audit?to=${encodeURIComponent(mark)}`);
    await until(async () => (await page.locator('[data-system]').count()) === 1, 'the entries before the filler');
    await shot(page, 'audit');
    await page.goto(`${srv.base}/#/admin/audit`);
    await until(async () => (await rows(page).count()) === 50, 'a page of 50 again');
  });

  it('filters by actor, action, target and time, and downloads the CSV', async () => {
    await page.locator('[data-filter=actor]').fill('teach');
    await page.locator('[data-filter=action]').fill('class.');
    await page.locator('[data-action=apply]').click();
    await until(async () => {
      const a = await column(page, 'action');
      return a.length >= 2 && a.every((x) => x.startsWith('class.'));
    }, 'class actions of teach');
    assert.deepEqual([...new Set(await column(page, 'actor'))], ['teach']);
    assert.match(page.url(), /#\/admin\/audit\?actor=teach&action=class\./);
    const href = await page.locator('[data-action=csv]').getAttribute('href');
    assert.match(href, /^\/api\/v1\/audit\?actor=teach&action=class\.&format=csv$/);
    const csv = await page.request.get(srv.base + href);
    assert.equal(csv.status(), 200);
    assert.match(csv.headers()['content-type'], /^text\/csv/);
    const lines = (await csv.text()).trim().split('\r\n');
    assert.equal(lines[0], 'id,at,actor,action,target,ip,class_id,request_id,details');
    assert.ok(lines.length >= 3 && lines.slice(1).every((l) => /,teach,class\./.test(l)));
    // target prefix
    await page.locator('[data-action=clear]').click();
    await page.locator('[data-filter=target]').fill(`files:class:${cls}/*`);
    await page.locator('[data-action=apply]').click();
    await until(async () => JSON.stringify(await column(page, 'target')) === JSON.stringify([`files:class:${cls}/lab1.ipynb`]), 'the deleted file');
    // a time range that ends in the past
    await page.locator('[data-filter=target]').fill('');
    await page.locator('[data-filter=to]').fill('2001-01-01T00:00');
    await page.locator('[data-action=apply]').click();
    await page.locator('[data-empty=audit]').waitFor();
    assert.match(page.url(), /to=2001-01-0/);
    await page.locator('[data-filter=to]').fill('');
    await page.locator('[data-filter=from]').fill('2001-01-01T00:00');
    await page.locator('[data-action=apply]').click();
    await until(async () => (await rows(page).count()) === 50, 'entries since 2001');
  });

  it('lets a teacher read their class\'s entries from the class tabs only', async () => {
    const tp = await newPage(browser, errors);
    await signIn(tp, srv.base, 'teach', 'teach-pass-12');
    assert.equal(await tp.locator('[data-nav="admin-audit"]').count(), 0, 'no admin link');
    await tp.goto(`${srv.base}/#/class?id=${cls}`);
    await tp.locator('[data-tab=audit]').click();
    await tp.getByRole('heading', { name: 'Deep Learning', level: 1 }).waitFor();
    await until(async () => (await rows(tp).count()) >= 3, 'the class entries');
    assert.match(tp.url(), new RegExp(`#/class/audit\\?id=${cls}`));
    const actions = await column(tp, 'action');
    for (const a of ['class.create', 'class.member.add', 'file.delete']) assert.ok(actions.includes(a), a);
    const targets = await column(tp, 'target');
    assert.ok(targets.every((x) => !x.includes(`class:${cls2}`) && x !== 'mallory'), targets.join(' '));
    assert.match(await tp.locator('[data-action=csv]').getAttribute('href'), new RegExp(`class_id=${cls}`));
    await shot(tp, 'audit-class');
    // the admin page is not theirs
    await tp.goto(`${srv.base}/#/admin/audit`);
    await tp.locator('[data-forbidden]').waitFor();
    await tp.context().close();
    // nor a student's
    const sp = await newPage(browser, errors);
    await signIn(sp, srv.base, 'amy', 'amy-pass-12');
    await sp.goto(`${srv.base}/#/class?id=${cls}`);
    await sp.getByRole('heading', { name: 'Deep Learning', level: 1 }).waitFor();
    assert.equal(await sp.locator('[data-tab=audit]').count(), 0);
    await sp.goto(`${srv.base}/#/class/audit?id=${cls}`);
    await sp.locator('[data-forbidden]').waitFor();
    await sp.context().close();
  });

  it('shows in Chinese', async () => {
    const zh = await newPage(browser, errors, 'zh-CN');
    // the sign-in form in Chinese, by its fields' names
    await zh.goto(`${srv.base}/#/login`);
    await zh.locator('input[name=username]').fill('admin');
    await zh.locator('input[name=password]').fill(ADMIN_PASSWORD);
    await zh.locator('button[type=submit]').click();
    await zh.locator('[data-nav="home"]').waitFor();
    await zh.goto(`${srv.base}/#/admin/audit?action=instance.`);
    await zh.getByRole('heading', { name: '审计日志', level: 1 }).waitFor();
    await zh.getByRole('columnheader', { name: '操作者' }).waitFor();
    await until(async () => (await zh.locator('[data-system]').count()) === 1, 'the system row');
    assert.equal(await zh.locator('[data-system]').textContent(), '系统');
    assert.equal(await zh.locator('[data-action=csv]').textContent(), '下载 CSV');
    await zh.goto(`${srv.base}/#/admin/audit?to=${encodeURIComponent(mark)}`);
    await until(async () => (await zh.locator('[data-system]').count()) === 1, 'the entries before the filler');
    await shot(zh, 'audit-zh');
    await zh.context().close();
  });
});
