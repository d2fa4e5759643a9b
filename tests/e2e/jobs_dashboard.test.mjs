// jobs_dashboard.test.mjs — the jobs page as a dashboard in the browser:
// state chips with counts, the filter bar (text, image, pool, tags, time
// ranges, sort) kept in the URL across a reload, and a job's "Outputs" card
// (its folder, read-only, with downloads); English and Chinese.
//
// A history of jobs is written with SQL while the test holds the scheduler
// lead, so no driver moves them; one job gets a folder with outputs.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startServer, createDatabase, dropDatabase, Client, ADMIN_PASSWORD, psql } from '../lib/server.mjs';
import { launch, shot } from './browser.mjs';

const LEADER_LOCK = 1735553635; // server/db/leader.h LEADER_LOCK_SCHED
const STUDENT = { username: 'dash-student', password: 'student-pass-1' };
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

describe('the jobs dashboard in the browser', () => {
  let srv, db, lockHolder, browser, page, uid, outJob;
  const pageErrors = [];
  const q = (text) => psql(db.url, text);
  const rows = () => page.locator('[data-table=jobs] tbody tr[data-id]');

  before(async () => {
    db = await createDatabase();
    lockHolder = spawn('psql', ['-qAtX', db.url], { stdio: ['pipe', 'ignore', 'ignore'] });
    lockHolder.stdin.write(`SELECT pg_advisory_lock(${LEADER_LOCK});\n`);
    await until(() => q(`SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = ${LEADER_LOCK} AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`) === '1', 'the lock');
    // a lock holder that runs no statements looks frozen: no takeover here
    srv = await startServer({ db, args: ['--scrypt-ln=10', '--leader-takeover-ms=3600000'] });
    const admin = new Client(srv.base);
    assert.equal((await admin.login('admin', ADMIN_PASSWORD)).status, 200);
    const u = await admin.post('/api/v1/users', { username: STUDENT.username, role: 'student', password: STUDENT.password });
    assert.equal(u.status, 201, u.text);
    uid = u.json.user.id;
    q(`INSERT INTO images (reference, display_name) VALUES ('reg.local/pytorch:1.13', 'PyTorch 1.13'), ('reg.local/busybox:1', 'BusyBox')`);
    q(`INSERT INTO pools (name, roles) VALUES ('a100', '{student}'), ('t4', '{student}')`);
    q(`INSERT INTO jobs (user_id, name, tags, image_id, command, pool_id, slices, state, reason, reason_code, exit_code, directory, created_at, started_at, finished_at)
       SELECT ${uid}, (ARRAY['resnet50-lr', 'bert-base', 'vit-small', 'gpt2-tiny'])[1 + i % 4] || '-' || i,
         CASE WHEN i % 3 = 0 THEN ARRAY['sweep-7', 'resnet'] WHEN i % 3 = 1 THEN ARRAY['baseline'] ELSE ARRAY[]::text[] END,
         (SELECT id FROM images ORDER BY id LIMIT 1 OFFSET i % 2),
         ARRAY['python3', 'train.py', '--lr=0.0' || i],
         CASE WHEN i % 4 = 3 THEN NULL ELSE (SELECT id FROM pools ORDER BY id LIMIT 1 OFFSET i % 2) END,
         CASE WHEN i % 4 = 3 THEN 0 ELSE 1 END,
         (ARRAY['succeeded','failed','running','queued','succeeded','cancelled','failed','lost'])[1 + i % 8],
         CASE WHEN i % 8 IN (1, 6) THEN 'exited with code 1: RuntimeError: CUDA out of memory' WHEN i % 8 = 7 THEN 'the node could not be reached' ELSE '' END,
         CASE WHEN i % 8 IN (1, 6) THEN 'exit_code' WHEN i % 8 = 7 THEN 'node_lost' ELSE '' END,
         CASE WHEN i % 8 IN (1, 6) THEN 1 WHEN i % 8 IN (0, 4) THEN 0 END,
         'home/${STUDENT.username}/jobs/' || i || '-x',
         now() - i * interval '5 hours',
         CASE WHEN i % 8 <> 3 THEN now() - i * interval '5 hours' + interval '2 minutes' END,
         CASE WHEN i % 8 NOT IN (2, 3) THEN now() - i * interval '5 hours' + (i % 9 + 3) * interval '7 minutes' END
       FROM generate_series(1, 60) i`);
    // one job with a folder of outputs
    outJob = Number(q(`SELECT id FROM jobs WHERE state = 'succeeded' ORDER BY id LIMIT 1`));
    const name = q(`SELECT name FROM jobs WHERE id = ${outJob}`);
    q(`UPDATE jobs SET directory = 'home/${STUDENT.username}/jobs/${outJob}-${name}' WHERE id = ${outJob}`);
    const dir = join(srv.dir, 'data', 'home', STUDENT.username, 'jobs', `${outJob}-${name}`);
    mkdirSync(join(dir, 'checkpoints'), { recursive: true });
    writeFileSync(join(dir, 'output.log'), 'epoch 1 loss 0.9\nepoch 2 loss 0.7\n');
    writeFileSync(join(dir, 'hyperparameters.json'), '{"lr": 0.01}\n');
    writeFileSync(join(dir, 'checkpoints', 'model-epoch2.pt'), Buffer.alloc(123456, 7));
    writeFileSync(join(dir, 'metrics.csv'), 'epoch,loss\n1,0.9\n2,0.7\n');
    browser = await launch();
    const context = await browser.newContext({ locale: 'en-US', viewport: { width: 1360, height: 900 }, acceptDownloads: true });
    page = await context.newPage();
    page.setDefaultTimeout(15000);
    page.on('pageerror', (e) => pageErrors.push(e.message));
    page.on('console', (m) => { if (/Content Security Policy/i.test(m.text())) pageErrors.push(m.text()); });
    await page.goto(`${srv.base}/#/login`);
    await page.getByLabel('Username', { exact: true }).fill(STUDENT.username);
    await page.getByLabel('Password', { exact: true }).fill(STUDENT.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.locator('[data-nav="jobs"]').click();
    await page.getByRole('heading', { name: 'Jobs', level: 1 }).waitFor();
  });

  after(async () => {
    await browser?.close();
    await srv?.stop();
    lockHolder?.stdin.end();
    lockHolder?.kill();
    if (db) dropDatabase(db.name);
    assert.deepEqual(pageErrors, []);
  });

  it('shows state chips with counts and filters by them, into the URL', async () => {
    await until(async () => (await rows().count()) === 50, 'the first page');
    assert.match(await page.locator('[data-count=""]').textContent(), /60/);
    assert.match(await page.locator('[data-count=failed]').textContent(), /15/);
    await page.locator('[data-count=failed]').click();
    await until(async () => (await rows().count()) === 15, 'the failed jobs');
    assert.ok(await page.evaluate(() => location.hash.includes('state=failed')));
    assert.equal(await page.locator('[data-count=failed]').getAttribute('aria-pressed'), 'true');
    // Ctrl-click adds a state
    await page.locator('[data-count=lost]').click({ modifiers: ['Control'] });
    await until(async () => (await rows().count()) === 22, 'failed and lost');
    assert.ok(await page.evaluate(() => decodeURIComponent(location.hash).includes('state=failed,lost')));
    await page.locator('[data-count=""]').click();
    await until(async () => (await rows().count()) === 50, 'all again');
  });

  it('filters by text, image, pool, tag, time and sorts; the URL keeps it across a reload', async () => {
    await page.locator('[data-filter=q]').fill('CUDA out of');
    await until(async () => (await rows().count()) === 15, 'the text search');
    await page.locator('[data-filter=image]').selectOption({ label: 'PyTorch 1.13' });
    await page.locator('[data-filter=tags]').fill('resnet');
    await page.locator('[data-filter=ended]').selectOption('7d');
    await page.locator('[data-filter=sort]').selectOption('runtime:desc');
    const want = q(`SELECT name FROM jobs WHERE reason LIKE '%CUDA out of%' AND image_id = (SELECT id FROM images WHERE reference = 'reg.local/pytorch:1.13')
      AND 'resnet' = ANY(tags) AND finished_at >= now() - interval '7 days' ORDER BY finished_at - started_at DESC NULLS LAST, id DESC`).split('\n').filter(Boolean);
    assert.ok(want.length >= 1, 'the seed has some');
    await until(async () => JSON.stringify(await rows().evaluateAll((els) => els.map((e) => e.dataset.job))) === JSON.stringify(want), 'the filtered, sorted rows');
    await shot(page, 'jobs-dashboard-filtered');
    const hash = await page.evaluate(() => location.hash);
    for (const part of ['q=CUDA', 'tags=resnet', 'ended=7d', 'sort=runtime']) assert.ok(decodeURIComponent(hash.replace(/\+/g, ' ')).includes(part), `${part} in ${hash}`);
    await page.reload();
    await page.getByRole('heading', { name: 'Jobs', level: 1 }).waitFor();
    await until(async () => JSON.stringify(await rows().evaluateAll((els) => els.map((e) => e.dataset.job))) === JSON.stringify(want), 'the same view after a reload');
    assert.equal(await page.locator('[data-filter=q]').inputValue(), 'CUDA out of');
    assert.equal(await page.locator('[data-filter=sort]').inputValue(), 'runtime:desc');
    await page.locator('[data-action=clear-filters]').click();
    await until(async () => (await rows().count()) === 50, 'cleared');
    assert.equal(await page.evaluate(() => location.hash), '#/jobs');
    await page.locator('[data-filter=pool]').selectOption('t4');
    await page.locator('[data-filter=since]').selectOption('24h');
    const t4 = Number(q(`SELECT count(*) FROM jobs WHERE pool_id = (SELECT id FROM pools WHERE name = 't4') AND created_at >= now() - interval '24 hours'`));
    await until(async () => (await rows().count()) === t4, 'the pool and the last day');
    await page.locator('[data-action=clear-filters]').click();
    await until(async () => (await rows().count()) === 50, 'cleared');
    await shot(page, 'jobs-dashboard');
  });

  it('shows a job\'s outputs with downloads and the archive', async () => {
    await page.goto(`${srv.base}/#/job?id=${outJob}`);
    const card = page.locator(`[data-job-outputs="${outJob}"]`);
    await card.locator('[data-output="metrics.csv"]').waitFor();
    const names = await card.locator('tbody tr[data-output]').evaluateAll((els) => els.map((e) => e.dataset.output));
    assert.deepEqual(names.sort(), ['checkpoints', 'hyperparameters.json', 'metrics.csv', 'output.log']);
    const [dl] = await Promise.all([page.waitForEvent('download'), card.locator('[data-download="metrics.csv"]').click()]);
    assert.equal(dl.suggestedFilename(), 'metrics.csv');
    assert.match(await card.locator('[data-action=download-outputs]').getAttribute('href'), new RegExp(`/api/v1/files/job%3A${outJob}/\\?download=1$`));
    await card.locator('[data-open=checkpoints]').click();
    await card.locator('[data-output="model-epoch2.pt"]').waitFor();
    await shot(page, 'job-outputs');
    await card.locator('[data-action=outputs-up]').click();
    await card.locator('[data-output="metrics.csv"]').waitFor();
  });

  it('shows the dashboard in Chinese', async () => {
    await page.goto(`${srv.base}/#/jobs?state=failed&sort=finished:desc`);
    await page.locator('[data-lang-switch]').selectOption('zh-CN');
    await page.getByRole('heading', { name: '作业', level: 1 }).waitFor();
    await until(async () => (await rows().count()) === 15, 'the failed jobs');
    assert.equal((await page.locator('[data-filter=sort] option:checked').textContent()).trim(), '最近结束在前');
    assert.match(await page.locator('[data-action=clear-filters]').textContent(), /清除筛选/);
    await shot(page, 'jobs-dashboard-zh');
    await page.goto(`${srv.base}/#/job?id=${outJob}`);
    await page.locator(`[data-job-outputs="${outJob}"] h2`, { hasText: '输出' }).waitFor();
    await shot(page, 'job-outputs-zh');
  });
});
