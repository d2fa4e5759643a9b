// class_dashboard.test.mjs — the class dashboard in the browser (issue 14,
// part D): a teacher sees per-student rows, totals, the class's work with
// Open / Extend / Stop, idle instances and the next lab sessions; posts a
// notice a student then reads on Home; downloads the CSV; ends the term;
// English and Chinese, with screenshots.
//
// The class, its roster and its work are rows written with SQL while the
// test holds the scheduler lead, so no driver moves them (the instances run
// on no node).
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { startServer, createDatabase, dropDatabase, Client, ADMIN_PASSWORD, psql } from '../lib/server.mjs';
import { launch, shot, newPage, signIn } from './browser.mjs';

const LEADER_LOCK = 1735553635; // server/db/leader.h LEADER_LOCK_SCHED
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

describe('the class dashboard in the browser', () => {
  let srv, db, lockHolder, browser, page, cls, ids = {}, inst;
  const errors = [];
  const q = (text) => psql(db.url, text);

  before(async () => {
    db = await createDatabase();
    lockHolder = spawn('psql', ['-qAtX', db.url], { stdio: ['pipe', 'ignore', 'ignore'] });
    lockHolder.stdin.write(`SELECT pg_advisory_lock(${LEADER_LOCK});\n`);
    await until(() => q(`SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = ${LEADER_LOCK} AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`) === '1', 'the lock');
    // a lock holder that runs no statements looks frozen: no takeover here
    srv = await startServer({ db, args: ['--scrypt-ln=10', '--leader-takeover-ms=3600000'] });
    const admin = new Client(srv.base);
    assert.equal((await admin.login('admin', ADMIN_PASSWORD)).status, 200);
    for (const [u, role, name] of [['teach', 'teacher', 'Tina Teacher'], ['amy', 'student', 'Amy Lin'], ['ben', 'student', 'Ben Wu']]) {
      const r = await admin.post('/api/v1/users', { username: u, role, password: `${u}-pass-12`, display_name: name });
      assert.equal(r.status, 201, r.text);
      ids[u] = r.json.user.id;
    }
    q(`INSERT INTO pools (name, roles) VALUES ('a100', '{student}')`);
    cls = q(`INSERT INTO classes (name, teacher_id, code, term, pool_id, alloc_slices, student_slices, student_gpu_hours_week)
      VALUES ('Deep Learning', ${ids.teach}, 'DL101', 'Spring 2027', (SELECT id FROM pools WHERE name = 'a100'), 8, 2, 10) RETURNING id`);
    q(`INSERT INTO class_members (class_id, user_id, role) VALUES (${cls}, ${ids.amy}, 'student'), (${cls}, ${ids.ben}, 'student')`);
    inst = q(`INSERT INTO instances (user_id, name, pool_id, slices, state, started_at, last_activity_at, class_id)
      VALUES (${ids.amy}, 'lab2-notebook', (SELECT id FROM pools WHERE name = 'a100'), 1, 'running', now() - interval '40 minutes',
        now() - interval '25 minutes', ${cls}) RETURNING id`);
    q(`INSERT INTO routes (instance_id, port_name) VALUES (${inst}, 'jupyter')`);
    q(`INSERT INTO class_sessions (class_id, title, starts_at, ends_at, repeat_until, slices)
      VALUES (${cls}, 'Lab: CNNs', now() + interval '2 days', now() + interval '2 days 2 hours', current_date + 60, 6)`);
    browser = await launch();
    page = await newPage(browser, errors);
    await signIn(page, srv.base, 'teach', 'teach-pass-12');
  });

  after(async () => {
    await browser?.close();
    await srv?.stop();
    lockHolder?.stdin.end();
    lockHolder?.kill();
    if (db) dropDatabase(db.name);
    assert.deepEqual(errors, []);
  });

  it('shows students, totals, work, idle instances and sessions', async () => {
    await page.goto(`${srv.base}/#/class/dashboard?id=${cls}`);
    await page.getByRole('heading', { name: 'Deep Learning', level: 1 }).waitFor();
    await until(async () => (await page.locator('[data-table=students] tbody tr[data-student]').count()) === 2, 'two students');
    const amy = page.locator('[data-student=amy]');
    assert.match(await amy.textContent(), /lab2-notebook/);
    assert.match(await amy.textContent(), /1 of 2/);
    assert.match(await amy.locator('[data-field=gpu-use]').textContent(), /not measured/);
    assert.match(await page.locator('[data-total=slices]').textContent(), /1 of 8/);
    assert.match(await page.locator('[data-idle]').textContent(), /lab2-notebook/);
    assert.match(await page.locator('[data-sessions]').textContent(), /Lab: CNNs/);
    const open = page.locator(`[data-instance="${inst}"] [data-action=open-jupyter]`);
    assert.match(await open.getAttribute('href'), /^http:\/\/[a-z0-9]+\.localhost:\d+\/$/);
    await shot(page, 'class-dashboard');
  });

  it('posts a notice that a student reads on Home', async () => {
    await page.locator('[data-field=notice-body]').fill('Lab 2 is due Friday. Save your notebook!');
    await page.locator('[data-action=post-notice]').click();
    await page.locator('[data-notices]').getByText('Lab 2 is due Friday').waitFor();
    const sp = await newPage(browser, errors);
    await signIn(sp, srv.base, 'ben', 'ben-pass-12');
    await sp.locator('[data-home-notices]').getByText('Lab 2 is due Friday').waitFor();
    assert.match(await sp.locator('[data-home-notices]').textContent(), /DL101/);
    await shot(sp, 'class-home-notice');
    await sp.context().close();
  });

  it('extends and stops a student\'s instance', async () => {
    await page.locator(`[data-instance="${inst}"] [data-action=extend]`).click();
    await page.locator('[data-field=seconds]').selectOption('3600');
    await page.locator('dialog [data-action=confirm]').click();
    await until(() => q(`SELECT extended_until > now() + interval '55 minutes' FROM instances WHERE id = ${inst}`) === 't', 'the extension');
    await page.locator(`[data-instance="${inst}"] [data-field=extended]`).waitFor();
    await page.locator(`[data-instance="${inst}"] [data-action=stop]`).click();
    await page.locator('dialog [data-action=confirm]').click();
    await until(() => q(`SELECT desired FROM instances WHERE id = ${inst}`) === 'stopped', 'the stop');
    assert.match(q(`SELECT string_agg(action, ',' ORDER BY id) FROM audit_log WHERE action LIKE 'class.%'`), /class.extend_instance.*class.stop_instance/);
  });

  it('downloads the CSV', async () => {
    const [dl] = await Promise.all([page.waitForEvent('download'), page.locator('[data-action=csv]').click()]);
    const text = readFileSync(await dl.path(), 'utf8');
    assert.match(text, /^"username","display_name","member_state",/);
    assert.match(text, /\n"amy","Amy Lin","active",/);
  });

  it('shows in Chinese', async () => {
    const zh = await newPage(browser, errors, 'zh-CN');
    await signIn(zh, srv.base, 'teach', 'teach-pass-12').catch(async () => {
      // the sign-in form in Chinese
      await zh.locator('input[name=username]').fill('teach');
      await zh.locator('input[name=password]').fill('teach-pass-12');
      await zh.locator('button[type=submit]').click();
      await zh.locator('[data-nav="home"]').waitFor();
    });
    await zh.goto(`${srv.base}/#/class/dashboard?id=${cls}`);
    await zh.getByRole('heading', { name: '班级合计' }).waitFor();
    assert.match(await zh.locator('[data-student=amy] [data-field=gpu-use]').textContent(), /未测量/);
    await shot(zh, 'class-dashboard-zh');
    await zh.context().close();
  });

  it('ends the term after a confirmation', async () => {
    await page.locator('[data-action=archive]').click();
    await page.locator('dialog [data-policy=keep]').check();
    await shot(page, 'class-archive-dialog');
    await page.locator('dialog [data-action=confirm]').click();
    await page.locator('[data-archived]').waitFor();
    assert.equal(q(`SELECT state FROM classes WHERE id = ${cls}`), 'archived');
    assert.equal(await page.locator('[data-action=archive]').count(), 0);
    assert.equal(await page.locator('[data-action=post-notice]').count(), 0);
  });
});
