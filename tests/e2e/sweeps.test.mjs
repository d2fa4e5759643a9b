// sweeps.test.mjs — sweeps end to end in a real headless Chromium against a
// real gpucloud and the world's engine: a student opens "New sweep" from the
// jobs page, builds a 3×2 grid (the run count shows 6 before submitting),
// sees the 6 runs on the sweep's page, each succeed, and the best one marked
// once their metrics are in; the list and the pages in Chinese. No uncaught
// error or CSP violation.
//
// Each run prints a GPUCLOUD_METRIC line; the metrics collector fills its
// last_metrics from it.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { startServer, ADMIN_PASSWORD, Client, psql } from '../lib/server.mjs';
import { launch, shot } from './browser.mjs';

const env = process.env;
const STUDENT = { username: 'e2e-sweep-student', password: 'student-pass-1' };
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

describe('sweeps in the browser', () => {
  let srv, browser, page, api, cluster;
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
    const img = await api.post('/api/v1/images', { reference: env.GPUCLOUD_WORLD_IMAGE, registry_id: reg.json.id, display_name: 'BusyBox trainer', framework: 'none' });
    assert.equal(img.status, 201, img.text);
    const u = await api.post('/api/v1/users', { username: STUDENT.username, role: 'student', password: STUDENT.password });
    assert.equal(u.status, 201, u.text);
    // a pool of one GPU, for a job that waits for another
    const p = await api.post('/api/v1/pools', { name: 'solo', sharing: 'exclusive' });
    assert.equal(p.status, 201, p.text);
    assert.equal((await api.req('PUT', `/api/v1/pools/${p.json.id}/gpus`, { gpu_ids: [n.json.gpus[0].id] })).status, 200);
    assert.equal((await api.req('PUT', '/api/v1/quotas', { user_id: u.json.user.id, pool: 'solo', max_slices: 2 })).status, 200);
    browser = await launch();
    const context = await browser.newContext({ locale: 'en-US', viewport: { width: 1360, height: 900 } });
    page = await context.newPage();
    page.setDefaultTimeout(15000);
    page.on('pageerror', (e) => pageErrors.push(e.message));
    page.on('console', (m) => { if (/Content Security Policy/i.test(m.text())) pageErrors.push(m.text()); });
  });

  after(async () => {
    if (page) { try { await shot(page, 'sweeps-final'); } catch { /* browser gone */ } }
    await browser?.close();
    await srv?.stop();
    try {
      const ids = execFileSync('docker', ['-H', env.GPUCLOUD_WORLD_DOCKER1, 'ps', '-aq', '--filter', `label=gpucloud.cluster=${cluster}`], { encoding: 'utf8' }).trim();
      if (ids) execFileSync('docker', ['-H', env.GPUCLOUD_WORLD_DOCKER1, 'rm', '-f', ...ids.split('\n')]);
    } catch { /* engine gone */ }
  });

  const runs = () => page.locator('[data-table=runs] tbody tr');

  it('builds a 3×2 grid sweep, showing the run count before submitting', async () => {
    await page.goto(`${srv.base}/#/login`);
    await page.getByLabel('Username', { exact: true }).fill(STUDENT.username);
    await page.getByLabel('Password', { exact: true }).fill(STUDENT.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.locator('[data-nav="jobs"]').click();
    await page.locator('[data-action=new-sweep]').click();
    await page.getByRole('heading', { name: 'New sweep', level: 1 }).waitFor();
    await until(async () => (await page.locator('[data-field=image] option').count()) === 1, 'the image in the picker');
    await page.locator('[data-field=name]').fill('grid');
    // each run reports its lr as its loss: the lowest lr is best (the first such run on a tie)
    await page.locator('[data-field=command]').fill('echo "hp=$GPUCLOUD_HPARAMS_JSON"; L=$(echo "$GPUCLOUD_HPARAMS_JSON" | sed "s/.*\\"lr\\": *\\([0-9.e-]*\\).*/\\1/"); echo "GPUCLOUD_METRIC {\\"loss\\": $L}"');
    await page.locator('[data-field=cpu]').fill('100');
    await page.locator('[data-field=memory]').fill('32');
    await page.locator('[data-field=param-values]').first().fill('0.1, 0.01, 0.001');
    assert.match(await page.locator('[data-run-count]').textContent(), /makes 3 runs/);
    await page.locator('[data-action=add-param]').click();
    await page.locator('[data-field=param-name]').nth(1).fill('batch');
    await page.locator('[data-field=param-values]').nth(1).fill('32, 64');
    assert.match(await page.locator('[data-run-count]').textContent(), /makes 6 runs/);
    // the list mode counts its lines
    await page.locator('[data-field=mode-list]').check();
    await page.locator('[data-field=list]').fill('{"lr": 1}\n{"lr": 2}');
    assert.match(await page.locator('[data-run-count]').textContent(), /makes 2 runs/);
    await page.locator('[data-field=list]').fill('{"lr": 1}\nnot json');
    assert.match(await page.locator('[data-run-count]').textContent(), /Line 2 is not a JSON object/);
    await page.locator('[data-field=mode-grid]').check();
    assert.match(await page.locator('[data-run-count]').textContent(), /makes 6 runs/);
    await shot(page, 'sweep-new');
    await page.locator('[data-action=submit-sweep]').click();
    await page.waitForURL(/#\/sweep\?id=\d+$/);
    await page.locator('[data-sweep-page] h1').filter({ hasText: 'grid' }).waitFor();
    await until(async () => (await runs().count()) === 6, '6 runs');
    const hps = await page.locator('[data-table=runs] tbody td[data-hp=lr]').allTextContents();
    assert.deepEqual(hps, ['0.1', '0.1', '0.01', '0.01', '0.001', '0.001']);
    assert.deepEqual(await page.locator('[data-table=runs] tbody td[data-hp=batch]').allTextContents(), ['32', '64', '32', '64', '32', '64']);
  });

  it('shows every run succeed and marks the best once the metrics are in', async () => {
    await until(async () => (await page.locator('[data-table=runs] tbody tr[data-state=succeeded]').count()) === 6, 'all 6 succeeded', 60000);
    // each run's loss is its lr (the collector reads the line it printed):
    // the best is lr 0.001, batch 32 (the earlier run of the tie)
    await page.locator('tr[data-best=true]').waitFor({ timeout: 20000 });
    await until(async () => (await page.locator('[data-table=runs] tbody td[data-metric=loss]').allTextContents()).every((x) => x !== '—'), 'every run\'s loss', 20000);
    assert.equal(await page.locator('tr[data-best=true]').count(), 1);
    const best = page.locator('tr[data-best=true]');
    assert.equal((await best.locator('td[data-hp=lr]').textContent()).trim(), '0.001');
    assert.equal((await best.locator('td[data-hp=batch]').textContent()).trim(), '32');
    assert.match(await best.locator('[data-field=best-badge]').textContent(), /Best/);
    assert.match(await page.locator('[data-summary]').textContent(), /loss = 0\.001/);
    assert.equal(await page.locator('[data-action=cancel-all]').count(), 0, 'nothing live to cancel');
    await shot(page, 'sweep-detail');
  });

  it('lists the sweep, and shows the pages in Chinese', async () => {
    await page.locator('a', { hasText: '← All sweeps' }).click();
    await page.locator('[data-table=sweeps] tr[data-sweep=grid]').waitFor();
    assert.match(await page.locator('[data-table=sweeps] tr[data-sweep=grid]').textContent(), /6 runs.*loss = 0\.001/s);
    await shot(page, 'sweeps-list');
    await page.locator('[data-lang-switch]').selectOption('zh-CN');
    await page.getByRole('heading', { name: '超参数搜索', level: 1 }).waitFor();
    await shot(page, 'sweeps-list-zh');
    await page.locator('[data-table=sweeps] tr[data-sweep=grid] [data-action=open]').click();
    await page.locator('tr[data-best=true] [data-field=best-badge]').filter({ hasText: '最佳' }).waitFor();
    await shot(page, 'sweep-detail-zh');
    await page.goto(`${srv.base}/#/sweeps/new`);
    await page.getByRole('heading', { name: '新建超参数搜索', level: 1 }).waitFor();
    assert.match(await page.locator('[data-run-count]').textContent(), /2 次/);
    await shot(page, 'sweep-new-zh');
    await page.locator('[data-lang-switch]').selectOption('en');
  });

  it('cancels every live run from the sweep\'s page', async () => {
    const r = await new Client(srv.base);
    assert.equal((await r.login(STUDENT.username, STUDENT.password)).status, 200);
    const img = (await r.get('/api/v1/images')).json.items[0];
    const s = await r.post('/api/v1/sweeps', { name: 'sleepers', metric: 'loss', goal: 'min', job: { image_id: img.id, command: ['sleep', '300'], cpu_millis: 100, mem_mib: 32 }, grid: { x: [1, 2] } });
    assert.equal(s.status, 201, s.text);
    await page.goto(`${srv.base}/#/sweep?id=${s.json.id}`);
    await until(async () => (await page.locator('[data-table=runs] tbody tr[data-state=running]').count()) === 2, 'both running', 30000);
    await page.locator('[data-action=cancel-all]').click();
    await page.locator('[data-action=confirm]').click();
    await until(async () => (await page.locator('[data-table=runs] tbody tr[data-state=cancelled]').count()) === 2, 'both cancelled', 30000);
    await page.locator('h1 [data-state=cancelled]').waitFor();
    assert.match(await page.locator('[data-field=cancelled-by]').textContent(), new RegExp(STUDENT.username));
  });

  it('shows when a queued job may start, on the list and its page, in both languages', async () => {
    const c = new Client(srv.base);
    assert.equal((await c.login(STUDENT.username, STUDENT.password)).status, 200);
    const img = (await c.get('/api/v1/images')).json.items[0];
    const body = (name) => ({ name, image_id: img.id, pool: 'solo', slices: 1, max_runtime_s: 600, command: ['sleep', '300'], cpu_millis: 100, mem_mib: 32 });
    const a = await c.post('/api/v1/jobs', body('holder'));
    assert.equal(a.status, 201, a.text);
    await until(async () => (await c.get(`/api/v1/jobs/${a.json.id}`)).json.started_at, 'holder started', 30000);
    const b = await c.post('/api/v1/jobs', body('waiter'));
    assert.equal(b.status, 201, b.text);
    await until(async () => (await c.get(`/api/v1/jobs/${b.json.id}`)).json.request?.eta, 'an estimate');
    await page.goto(`${srv.base}/#/jobs`);
    const eta = page.locator('[data-table=jobs] tr[data-job=waiter] [data-field=eta]');
    await eta.waitFor();
    assert.match(await eta.textContent(), /^May start by /);
    await shot(page, 'jobs-eta');
    await page.locator('[data-table=jobs] tr[data-job=waiter] [data-action=open]').click();
    await page.locator('[data-job-page] [data-field=eta]').waitFor();
    assert.match(await page.locator('[data-job-page] [data-field=eta]').textContent(), /^May start by /);
    await page.locator('[data-lang-switch]').selectOption('zh-CN');
    await until(async () => /^最晚可能于/.test(await page.locator('[data-job-page] [data-field=eta]').textContent()), 'the estimate in Chinese');
    await shot(page, 'job-eta-zh');
    await page.locator('[data-lang-switch]').selectOption('en');
    for (const j of [a, b]) await c.post(`/api/v1/jobs/${j.json.id}/cancel`, {});
  });

  it('raised no page error or CSP violation', () => {
    assert.deepEqual(pageErrors, []);
  });
});
