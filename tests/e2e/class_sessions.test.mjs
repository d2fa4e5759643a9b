// class_sessions.test.mjs — a class's lab sessions page end to end in a real
// headless Chromium: the teacher opens a weekly lab session in the page
// (its next occurrences listed), is refused past the class's allocation
// with the server's reason, changes the session and cancels another; a
// student of the class reads the sessions (an open one marked "Open now")
// without any of the teacher's buttons, in English and in 简体中文; someone
// outside the class is told there is no such class; and on the new-instance
// form the Class choice (when the classes list is served) puts the work in
// the class's pool.
//
// The class is made in the database (its API is another part's); needs the
// world's node1 (4 declared GPUs in pool a100).
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, ADMIN_PASSWORD, Client, psql } from '../lib/server.mjs';
import { launch, shot, newPage, signIn } from './browser.mjs';

const env = process.env;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function until(fn, what, ms = 10000) {
  const end = Date.now() + ms;
  let last;
  for (;;) {
    try { last = await fn(); if (last) return last; } catch (e) { last = e; }
    if (Date.now() > end) throw new Error(`timed out waiting for ${what} (last: ${last instanceof Error ? last.message : JSON.stringify(last)})`);
    await sleep(100);
  }
}

describe('lab sessions page', () => {
  let srv, browser, api, cls;
  const errors = [];
  const sql = (q) => psql(srv.db.url, q);
  const users = {
    teacher: { username: 'e2e-cs-teacher', password: 'teacher-pass-1', role: 'teacher' },
    student: { username: 'e2e-cs-student', password: 'student-pass-1', role: 'student' },
    outsider: { username: 'e2e-cs-out', password: 'outsider-pass-1', role: 'student' },
  };

  before(async () => {
    assert.ok(env.GPUCLOUD_WORLD_DOCKER1 && env.GPUCLOUD_WORLD_NODE1_GPUS, 'source var/world/env');
    srv = await startServer({ args: ['--node-check-interval=1'] });
    api = new Client(srv.base);
    assert.equal((await api.login('admin', ADMIN_PASSWORD)).status, 200);
    const gpus = env.GPUCLOUD_WORLD_NODE1_GPUS.split(',').slice(0, 4).map((d) => ({ model: 'NVIDIA A100-SXM4-80GB', memory_mib: 81920, devices: [d] }));
    const n = await api.post('/api/v1/nodes', { name: 'node1', url: env.GPUCLOUD_WORLD_DOCKER1, gpus });
    assert.equal(n.status, 201, n.text);
    const p = await api.post('/api/v1/pools', { name: 'a100' });
    assert.equal((await api.req('PUT', `/api/v1/pools/${p.json.id}/gpus`, { gpu_ids: n.json.gpus.map((g) => g.id) })).status, 200);
    for (const u of Object.values(users)) {
      const r = await api.post('/api/v1/users', u);
      assert.equal(r.status, 201, r.text);
      u.id = r.json.user.id;
    }
    cls = Number(sql(`INSERT INTO classes (name, code, term, teacher_id, pool_id, alloc_slices, student_slices)
      VALUES ('Machine Learning', 'ML200', 'Autumn 2026', ${users.teacher.id}, ${p.json.id}, 4, 1) RETURNING id`).split('\n')[0]);
    sql(`INSERT INTO class_members (class_id, user_id) VALUES (${cls}, ${users.student.id})`);
    browser = await launch();
  });

  after(async () => {
    await browser?.close();
    await srv?.stop();
  });

  it('lets the teacher open, refuse, change and cancel lab sessions in the page', async () => {
    const page = await newPage(browser, errors);
    await signIn(page, srv.base, users.teacher.username, users.teacher.password);
    await page.goto(`${srv.base}/#/class/sessions?id=${cls}`);
    await page.getByRole('heading', { name: 'Machine Learning', level: 1 }).waitFor();
    await page.locator('[data-empty=sessions]').waitFor();
    assert.equal(await page.locator('.class-tabs [data-tab=sessions][aria-current=page]').count(), 1);

    // past the allocation: the server's reason in the dialog
    await page.locator('[data-action=open-create-session]').click();
    const d = page.locator('dialog[open]');
    await d.locator('[data-field=title]').fill('Lab 1');
    await d.locator('[data-field=minutes]').fill('90');
    await d.locator('[data-field=slices]').fill('9');
    await d.locator('[data-action=save-session]').click();
    assert.match(await d.locator('[role=alert]').textContent(), /allocation is 4 slices/);
    // weekly, 3 slices
    await d.locator('[data-field=slices]').fill('3');
    await d.locator('[data-field=weekly]').check();
    const until8 = new Date(Date.now() + 60 * 24 * 3600e3).toISOString().slice(0, 10);
    await d.locator('[data-field=repeat_until]').fill(until8);
    await d.locator('[data-action=save-session]').click();
    await d.waitFor({ state: 'detached' });
    const row = page.locator('tr[data-session]').first();
    await row.waitFor();
    assert.match(await row.textContent(), /Lab 1/);
    assert.equal((await row.locator('[data-field=slices]').textContent()).trim(), '3');
    assert.match(await row.locator('[data-field=repeat]').textContent(), /Weekly until/);
    assert.equal(await row.locator('[data-field=next] li').count(), 5);
    const s = (await api.get(`/api/v1/classes/${cls}/reservations`)).json.items[0];
    assert.equal(s.title, 'Lab 1');
    assert.equal((new Date(s.ends_at) - new Date(s.starts_at)) / 60e3, 90);
    assert.equal(s.repeat_until, until8);

    // change it
    await row.locator('[data-action=edit]').click();
    await d.locator('[data-field=title]').fill('Lab 1: CNNs');
    await d.locator('[data-field=slices]').fill('2');
    await d.locator('[data-action=save-session]').click();
    await d.waitFor({ state: 'detached' });
    await until(async () => /Lab 1: CNNs/.test(await row.textContent()), 'the new title');
    assert.equal((await row.locator('[data-field=slices]').textContent()).trim(), '2');

    // an open one (made through the API), then cancelled in the page
    const now = Date.now();
    const open = await api.post(`/api/v1/classes/${cls}/reservations`, {
      title: 'Open lab', starts_at: new Date(now - 60e3).toISOString(), ends_at: new Date(now + 3600e3).toISOString(), slices: 1,
    });
    assert.equal(open.status, 201, open.text);
    await page.reload();
    const openRow = page.locator(`tr[data-session="${open.json.id}"]`);
    await openRow.locator('[data-active]').waitFor();
    await shot(page, 'class-sessions-teacher');
    const extra = await api.post(`/api/v1/classes/${cls}/reservations`, {
      title: 'Spare', starts_at: new Date(now + 5 * 24 * 3600e3).toISOString(), ends_at: new Date(now + 5 * 24 * 3600e3 + 3600e3).toISOString(), slices: 0,
    });
    await page.reload();
    const spare = page.locator(`tr[data-session="${extra.json.id}"]`);
    await spare.locator('[data-action=cancel]').click();
    await page.locator('dialog[open]').getByRole('button', { name: 'Cancel session' }).click();
    await spare.waitFor({ state: 'detached' });
    assert.equal((await api.get(`/api/v1/classes/${cls}/reservations/${extra.json.id}`)).status, 404);
    assert.deepEqual(errors, []);
    await page.context().close();
  });

  it('shows a student the sessions without the teacher\'s buttons, in English and 简体中文', async () => {
    for (const locale of ['en-US', 'zh-CN']) {
      const page = await newPage(browser, errors, locale);
      await signIn(page, srv.base, users.student.username, users.student.password).catch(async () => {
        // 简体中文: the sign-in button is translated
        await page.getByLabel(/Username|用户名/).fill(users.student.username);
        await page.getByLabel(/Password|密码/, { exact: false }).first().fill(users.student.password);
        await page.getByRole('button', { name: /Sign in|登录/ }).click();
        await page.locator('[data-nav="home"]').waitFor();
      });
      await page.goto(`${srv.base}/#/class/sessions?id=${cls}`);
      await page.locator('tr[data-session]').first().waitFor();
      assert.equal(await page.locator('tr[data-session]').count(), 2);
      assert.equal(await page.locator('[data-action=open-create-session]').count(), 0);
      assert.equal(await page.locator('[data-action=edit], [data-action=cancel]').count(), 0);
      const head = await page.locator('h2').first().textContent();
      assert.equal(head.trim(), locale === 'zh-CN' ? '实验课时段' : 'Lab sessions');
      assert.match(await page.locator('[data-active]').textContent(), locale === 'zh-CN' ? /进行中/ : /Open now/);
      const wide = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
      assert.ok(wide <= 1, `no sideways scroll (${wide})`);
      await shot(page, `class-sessions-student-${locale}`);
      await page.context().close();
    }
    assert.deepEqual(errors, []);
  });

  it('tells someone outside the class there is no such class', async () => {
    const page = await newPage(browser, errors);
    await signIn(page, srv.base, users.outsider.username, users.outsider.password);
    await page.goto(`${srv.base}/#/class/sessions?id=${cls}`);
    await page.locator('[role=alert]').waitFor();
    assert.match(await page.locator('[role=alert]').textContent(), /no such class/i);
    assert.equal(await page.locator('tr[data-session]').count(), 0);
    await page.context().close();
  });

  it('offers the student\'s classes on the new-instance form, and the class sets the pool', async () => {
    const page = await newPage(browser, errors);
    await signIn(page, srv.base, users.student.username, users.student.password);
    await page.goto(`${srv.base}/#/instances/new`);
    await page.locator('[data-form=new-instance]').waitFor();
    await page.locator('[data-image-radio]').first().waitFor({ state: 'attached' }).catch(() => {});
    const student = new Client(srv.base);
    await student.login(users.student.username, users.student.password);
    const classes = await student.get('/api/v1/classes');
    const picker = page.locator('[data-field=class]');
    if (classes.status !== 200) {
      // the classes list is another part's: until it is served the choice
      // stays out of the way
      await sleep(500);
      assert.equal(await picker.isVisible(), false);
      return;
    }
    await picker.waitFor();
    await picker.selectOption(String(cls));
    assert.equal(await page.locator('[data-field=pool]').inputValue(), 'a100');
    assert.equal(await page.locator('[data-field=pool]').isDisabled(), true);
    await shot(page, 'class-sessions-instance-form');
    await page.context().close();
  });
});
