// class_assignments.test.mjs — a class's assignments in a real headless
// Chromium against a real gpucloudd: the teacher creates one from a folder
// of the class area (picked from a list that leaves out the private
// collected/ and feedback/), releases it (each student's row says so),
// collects it; a student sees their own status and the link to their copy
// in Files, and no teacher buttons; the teaching assistant sees the
// students without the buttons; the page in Chinese. No uncaught error or
// CSP violation. Screenshots in var/test-logs/e2e-class-assignments-*.png.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync, chownSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { startServer, ADMIN_PASSWORD, Client, psql } from '../lib/server.mjs';
import { launch, shot, newPage, signIn } from './browser.mjs';

const UID_BASE = 200000;

describe('class assignments in the browser', () => {
  let srv, browser, admin, cid, area;
  const users = {};
  const errors = [];

  before(async () => {
    srv = await startServer();
    admin = new Client(srv.base);
    assert.equal((await admin.login('admin', ADMIN_PASSWORD)).status, 200);
    for (const [name, role] of [['e2e-teacher', 'teacher'], ['e2e-ta', 'student'], ['e2e-alice', 'student'], ['e2e-bob', 'student']]) {
      const r = await admin.post('/api/v1/users', { username: name, role, password: `${name}-pass-1`, display_name: name.replace('e2e-', '').replace(/^./, (c) => c.toUpperCase()) });
      assert.equal(r.status, 201, r.text);
      users[name] = r.json.user.id;
    }
    const q = (s) => psql(srv.db.url, s);
    cid = q(`INSERT INTO classes (name, teacher_id, code, term) VALUES ('Deep Learning', ${users['e2e-teacher']}, 'DL101', 'Fall 2026') RETURNING id`).trim();
    q(`INSERT INTO class_members (class_id, user_id, role) VALUES (${cid}, ${users['e2e-alice']}, 'student'), (${cid}, ${users['e2e-bob']}, 'student'), (${cid}, ${users['e2e-ta']}, 'ta')`);
    area = join(srv.dir, 'data', 'classes', cid);
    const gid = UID_BASE + 100000000 + Number(cid), tuid = UID_BASE + users['e2e-teacher'];
    for (const d of ['', 'hw1', 'lab2', 'collected']) { mkdirSync(join(area, d), { recursive: true }); chownSync(join(area, d), tuid, gid); }
    writeFileSync(join(area, 'hw1', 'task.md'), '# Homework 1\n');
    chownSync(join(area, 'hw1', 'task.md'), tuid, gid);
    browser = await launch();
  });

  after(async () => {
    await browser?.close();
    await srv?.stop();
  });

  it('the teacher creates, releases and collects an assignment', async () => {
    const page = await newPage(browser, errors);
    await signIn(page, srv.base, 'e2e-teacher', 'e2e-teacher-pass-1');
    await page.goto(`${srv.base}/#/class/assignments?id=${cid}`);
    await page.locator('[data-empty="assignments"]').waitFor();
    assert.equal(await page.locator('.class-tabs [data-tab="assignments"]').getAttribute('aria-current'), 'page');
    await page.locator('[data-action="open-create-assignment"]').click();
    const form = page.locator('[data-form="assignment"]');
    await form.locator('[data-field="source"] option[value="hw1"]').waitFor({ state: 'attached' });
    const folders = await form.locator('[data-field="source"] option').allTextContents();
    assert.deepEqual(folders.sort(), ['hw1', 'lab2'], 'the private folders are not offered');
    await form.locator('[data-field="name"]').fill('bad name!');
    await form.locator('[data-field="source"]').selectOption('hw1');
    await form.locator('[data-action="save-assignment"]').click();
    await form.locator('.msg-error').waitFor();
    await form.locator('[data-field="name"]').fill('hw1');
    await form.locator('[data-field="description"]').fill('Train a small CNN on MNIST.');
    await form.locator('[data-field="deadline"]').fill('2030-06-01T18:00');
    await form.locator('[data-action="save-assignment"]').click();
    const row = page.locator('[data-assignment="hw1"]');
    await row.locator('[data-state="draft"]').waitFor();
    await row.locator('[data-action="release"]').click();
    await page.getByRole('dialog').getByRole('button', { name: 'Release' }).click();
    await row.locator('[data-state="released"]').waitFor();
    assert.match(await row.locator('[data-field="counts"]').textContent(), /Released 2/);
    const students = page.locator('[data-students-of="hw1"]');
    await students.locator('[data-student="e2e-alice"] [data-status="released"]').waitFor();
    await students.locator('[data-student="e2e-bob"] [data-status="released"]').waitFor();
    assert.ok(existsSync(join(srv.dir, 'data', 'home', 'e2e-alice', 'classes', 'DL101', 'hw1', 'task.md')));
    await shot(page, 'class-assignments-released');
    await row.locator('[data-action="collect"]').click();
    await page.getByRole('dialog').getByRole('button', { name: 'Collect now' }).click();
    await row.locator('[data-state="collected"]').waitFor();
    await students.locator('[data-student="e2e-alice"] [data-status="collected"]').waitFor();
    await shot(page, 'class-assignments-collected');
    // feedback for alice only
    const fb = join(area, 'feedback', 'hw1', 'e2e-alice');
    mkdirSync(fb, { recursive: true });
    writeFileSync(join(fb, 'grade.txt'), 'A-\n');
    await row.locator('[data-action="return"]').click();
    await page.getByRole('dialog').getByRole('button', { name: 'Return feedback' }).click();
    await students.locator('[data-student="e2e-alice"] [data-status="returned"]').waitFor();
    assert.equal(await students.locator('[data-student="e2e-bob"] [data-status="collected"]').count(), 1);
    // the rest is in the row's menu
    await row.locator('[data-action="row-menu"]').click();
    await page.locator('[role="menu"] [data-action="edit"]').waitFor();
    await page.keyboard.press('Escape');
    await page.context().close();
  });

  it('a student sees their own status and their folder; the TA reads without buttons; in Chinese', async () => {
    const page = await newPage(browser, errors);
    await signIn(page, srv.base, 'e2e-alice', 'e2e-alice-pass-1');
    await page.goto(`${srv.base}/#/class/assignments?id=${cid}`);
    const row = page.locator('[data-table="my-assignments"] [data-assignment="hw1"]');
    await row.locator('[data-status="returned"]').waitFor();
    const link = row.locator('a[href^="#/files"]').first();
    assert.equal(await row.locator('a[href*="feedback"]').count(), 1, 'a link to the feedback');
    assert.equal(await link.textContent(), '~/classes/DL101/hw1/');
    assert.equal(await page.locator('[data-action="open-create-assignment"]').count(), 0);
    assert.equal(await page.locator('[data-action="release"]').count(), 0);
    await shot(page, 'class-assignments-student');
    await link.click();
    await page.getByText('task.md').waitFor();
    await page.context().close();

    const ta = await newPage(browser, errors);
    await signIn(ta, srv.base, 'e2e-ta', 'e2e-ta-pass-1');
    await ta.goto(`${srv.base}/#/class/assignments?id=${cid}`);
    await ta.locator('[data-table="assignments"] [data-assignment="hw1"]').waitFor();
    assert.equal(await ta.locator('[data-action="release"]').count(), 0);
    await ta.locator('[data-action="toggle-students"]').click();
    await ta.locator('[data-student="e2e-bob"]').waitFor();
    await ta.context().close();

    const zh = await newPage(browser, errors, 'zh-CN');
    await signIn(zh, srv.base, 'e2e-teacher', 'e2e-teacher-pass-1').catch(async () => {
      // the Chinese sign-in form has Chinese labels
      await zh.locator('input[autocomplete="username"]').fill('e2e-teacher');
      await zh.locator('input[type="password"]').fill('e2e-teacher-pass-1');
      await zh.locator('button[type="submit"]').click();
      await zh.locator('[data-nav="home"]').waitFor();
    });
    await zh.goto(`${srv.base}/#/class/assignments?id=${cid}`);
    await zh.locator('[data-assignment="hw1"] [data-state="collected"]').waitFor();
    assert.equal(await zh.locator('[data-assignment="hw1"] [data-state="collected"]').textContent(), '已收取');
    await zh.locator('[data-action="toggle-students"]').click();
    await zh.locator('[data-student="e2e-alice"]').waitFor();
    await shot(zh, 'class-assignments-zh');
    await zh.context().close();
    assert.deepEqual(errors, []);
  });

  it('someone outside the class gets a not-found message', async () => {
    const page = await newPage(browser, errors);
    const r = await admin.post('/api/v1/users', { username: 'e2e-out', role: 'teacher', password: 'e2e-out-pass-1' });
    assert.equal(r.status, 201);
    await signIn(page, srv.base, 'e2e-out', 'e2e-out-pass-1');
    await page.goto(`${srv.base}/#/class/assignments?id=${cid}`);
    await page.locator('.msg-error').waitFor();
    assert.equal(await page.locator('[data-assignment]').count(), 0);
    await page.context().close();
    assert.deepEqual(errors, []);
  });
});
