// instances.test.mjs — instances end to end in a real headless Chromium
// against a real gpucloudd and the world's engines: the admin (through the
// API) registers node1 with 4 declared A100s, the world registry and image,
// and a pool; a student opens "My instances" (empty), "New instance" (the
// image card, the pool with its free slices, sliders bounded by the quota,
// the waiting note when asking more than the quota), creates an instance,
// sees it go to running on its page, reads its log (followed live), sees the
// usage chart fill, stops it from "My instances" and sees it stopped with its
// GPU given back, then saves it as a personal image from its page and finds
// it offered on "New instance". No uncaught error or CSP violation.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { startServer, ADMIN_PASSWORD, Client, psql } from '../lib/server.mjs';
import { launch, shot } from './browser.mjs';

const env = process.env;
const STUDENT = { username: 'e2e-inst-student', password: 'student-pass-1' };
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

describe('instances in the browser', () => {
  let srv, browser, page, api, cluster, studentId;
  const pageErrors = [];

  before(async () => {
    for (const k of ['GPUCLOUD_WORLD_DOCKER1', 'GPUCLOUD_WORLD_NODE1_GPUS', 'GPUCLOUD_WORLD_IMAGE', 'GPUCLOUD_WORLD_REGISTRY'])
      assert.ok(env[k], `${k} is not set: run the tests through make test (it starts the world)`);
    srv = await startServer({ args: ['--node-check-interval=1', '--sched-interval-ms=200', '--instance-tick-ms=100', '--instance-stop-grace=1'] });
    cluster = psql(srv.db.url, 'SELECT cluster_id FROM cluster_identity');
    api = new Client(srv.base);
    assert.equal((await api.login('admin', ADMIN_PASSWORD)).status, 200);
    const gpus = env.GPUCLOUD_WORLD_NODE1_GPUS.split(',').map((d) => ({ model: 'NVIDIA A100-SXM4-80GB', memory_mib: 81920, devices: [d] }));
    const n = await api.post('/api/v1/nodes', { name: 'node1', url: env.GPUCLOUD_WORLD_DOCKER1, gpus });
    assert.equal(n.status, 201, n.text);
    await until(async () => (await api.get(`/api/v1/nodes/${n.json.id}`)).json.state === 'up', 'node1 up');
    const reg = await api.post('/api/v1/registries', { name: 'world', server: env.GPUCLOUD_WORLD_REGISTRY, username: env.GPUCLOUD_WORLD_REGISTRY_USER, password: env.GPUCLOUD_WORLD_REGISTRY_KEY, personal: true });
    assert.equal(reg.status, 201, reg.text);
    const img = await api.post('/api/v1/images', {
      reference: env.GPUCLOUD_WORLD_IMAGE, registry_id: reg.json.id, display_name: 'BusyBox lab', framework: 'none',
      default_cmd: ['sh', '-c', 'echo "lab started for $USER"; i=0; while :; do i=$((i+1)); echo "tick $i"; sleep 1; done'],
    });
    assert.equal(img.status, 201, img.text);
    const p = await api.post('/api/v1/pools', { name: 'a100', sharing: 'exclusive' });
    assert.equal(p.status, 201, p.text);
    assert.equal((await api.req('PUT', `/api/v1/pools/${p.json.id}/gpus`, { gpu_ids: n.json.gpus.map((g) => g.id) })).status, 200);
    const u = await api.post('/api/v1/users', { username: STUDENT.username, role: 'student', password: STUDENT.password });
    assert.equal(u.status, 201, u.text);
    studentId = u.json.user.id;
    assert.equal((await api.req('PUT', '/api/v1/quotas', { user_id: studentId, pool: 'a100', max_slices: 2 })).status, 200);
    browser = await launch();
    const context = await browser.newContext({ locale: 'en-US', viewport: { width: 1360, height: 900 } });
    page = await context.newPage();
    page.setDefaultTimeout(15000);
    page.on('pageerror', (e) => pageErrors.push(e.message));
    page.on('console', (m) => { if (/Content Security Policy/i.test(m.text())) pageErrors.push(m.text()); });
  });

  after(async () => {
    if (page) { try { await shot(page, 'instances-final'); } catch { /* browser gone */ } }
    await browser?.close();
    await srv?.stop(); // first: no create may land after the clean-up
    try {
      const ids = execFileSync('docker', ['-H', env.GPUCLOUD_WORLD_DOCKER1, 'ps', '-aq', '--filter', `label=gpucloud.cluster=${cluster}`], { encoding: 'utf8' }).trim();
      if (ids) execFileSync('docker', ['-H', env.GPUCLOUD_WORLD_DOCKER1, 'rm', '-f', ...ids.split('\n')]);
    } catch { /* engine gone */ }
  });

  it('shows an empty "My instances" to a new student', async () => {
    await page.goto(`${srv.base}/#/login`);
    await page.getByLabel('Username', { exact: true }).fill(STUDENT.username);
    await page.getByLabel('Password', { exact: true }).fill(STUDENT.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.locator('[data-nav="instances"]').click();
    await page.getByRole('heading', { name: 'My instances', level: 1 }).waitFor();
    await page.locator('[data-table=instances] [data-empty=instances]').waitFor();
  });

  it('creates an instance from the "New instance" page', async () => {
    await page.locator('[data-action=new-instance]').click();
    await page.getByRole('heading', { name: 'New instance', level: 1 }).waitFor();
    const card = page.locator(`[data-image="${env.GPUCLOUD_WORLD_IMAGE}"]`);
    await card.waitFor();
    assert.match(await card.textContent(), /BusyBox lab/);
    await card.click();
    // the pool with its free slices, the slider bounded by the quota
    const pool = page.locator('[data-field=pool]');
    await until(async () => (await pool.locator('option').count()) === 2, 'the pool in the picker');
    assert.match(await pool.locator('option[value=a100]').textContent(), /a100 — 4 of 4 slices free/);
    await pool.selectOption('a100');
    assert.equal(await page.locator('[data-slider=slices]').getAttribute('max'), '2');
    assert.match(await page.locator('[data-limit=slices]').textContent(), /quota in this pool: 2 slices/);
    assert.equal(await page.locator('[data-field=wait-note]').isHidden(), true);
    await page.locator('[data-field=name]').fill('lab1');
    await page.locator('[data-slider=memory]').fill('256');
    await page.locator('[data-slider=cpu]').fill('500');
    await page.locator('[data-action=create]').click();
    await page.waitForURL(/#\/instance\?id=\d+$/);
    await page.locator('[data-instance-page] h1').filter({ hasText: 'lab1' }).waitFor();
  });

  it('sees it run, reads its log and its usage', async () => {
    await page.locator('h1 [data-state=running]').waitFor({ timeout: 30000 });
    assert.match(await page.locator('[data-fact=node]').textContent(), /node1/);
    assert.match(await page.locator('[data-fact=gpus]').textContent(), /A100/);
    await until(async () => /lab started for e2e-inst-student/.test(await page.locator('[data-log]').textContent()), 'the first log line');
    // followed live: later lines arrive without a reload
    const n1 = Number(/tick (\d+)\s*$/.exec(await page.locator('[data-log]').textContent())?.[1] || 0);
    await until(async () => Number(/tick (\d+)\s*$/.exec(await page.locator('[data-log]').textContent())?.[1] || 0) > n1 + 1, 'new log lines');
    assert.match(await page.locator('[data-log-state]').textContent(), /Following the log live/);
    await until(async () => Number(await page.locator('[data-chart=memory] polyline').getAttribute('data-samples')) >= 2, 'usage samples');
    assert.match(await page.locator('[data-now=memory]').textContent(), /\/ 256/);
    assert.match(await page.locator('[data-field=gpu-note]').textContent(), /not measured/);
    await shot(page, 'instance-detail');
  });

  it('stops it from "My instances"; the GPU is given back', async () => {
    await page.locator('a', { hasText: '← My instances' }).click();
    const row = page.locator('[data-table=instances] tr[data-instance=lab1]');
    await row.waitFor();
    assert.equal(await row.getAttribute('data-state'), 'running');
    await row.locator('[data-action=stop]').click();
    await page.locator('[data-table=instances] tr[data-instance=lab1][data-state=stopped]').waitFor({ timeout: 20000 });
    assert.match(await page.locator('[data-table=instances] tr[data-instance=lab1] [data-field=why]').textContent(), /stopped by e2e-inst-student/);
    assert.ok(await page.locator('[data-table=instances] tr[data-instance=lab1] [data-action=start]').isVisible());
    const pools = await api.get('/api/v1/pools');
    assert.equal(pools.json.items.find((p) => p.name === 'a100').free_slices, 4);
    // asking for more than the quota leaves shows the waiting note
    await page.locator('[data-action=new-instance]').click();
    await page.locator('[data-field=pool] option[value=a100]').waitFor({ state: 'attached' });
    await page.locator('[data-field=pool]').selectOption('a100');
    await page.locator('[data-slider=slices]').fill('2');
    assert.equal(await page.locator('[data-field=wait-note]').isHidden(), true);
  });

  it('saves the stopped instance as a personal image from its page', async () => {
    await page.goto(`${srv.base}/#/instances`);
    await page.locator('[data-table=instances] tr[data-instance=lab1] [data-action=open]').click();
    await page.locator('h1 [data-state=stopped]').waitFor();
    // the log of a stopped instance is still there
    await until(async () => /lab started for e2e-inst-student/.test(await page.locator('[data-log]').textContent()), 'the log of the stopped instance');
    await page.locator('[data-action=save]').click();
    const d = page.locator('dialog[open]');
    await d.locator('[data-field=image-name]').fill('lab-env');
    await d.locator('[data-field=image-tag]').fill('week1');
    await d.locator('[data-action=save-image]').click();
    await d.waitFor({ state: 'detached', timeout: 30000 });
    await page.locator('.toast', { hasText: `Saved as ${env.GPUCLOUD_WORLD_REGISTRY}/gpucloud-users/${STUDENT.username}/lab-env:week1` }).waitFor();
    // it is offered on the "New instance" page, marked as mine
    await page.goto(`${srv.base}/#/instances/new`);
    await page.locator(`[data-image="${env.GPUCLOUD_WORLD_REGISTRY}/gpucloud-users/${STUDENT.username}/lab-env:week1"]`, { hasText: 'Mine' }).waitFor();
  });

  it('raised no uncaught error and no policy violation in the page', () => {
    assert.deepEqual(pageErrors, []);
  });
});
