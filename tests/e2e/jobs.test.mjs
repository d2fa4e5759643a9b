// jobs.test.mjs — training jobs end to end in a real headless Chromium
// against a real gpucloudd and the world's engines: a student opens "Jobs"
// (empty), submits a job from the form (image from the catalog, command, a
// GPU from the pool, hyperparameters as JSON), sees it succeed on its page
// with its log and exit code, submits a failing one, finds it with the
// "failed" filter with its reason, cancels a running one, and reads the
// pages in Chinese. No uncaught error or CSP violation.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { startServer, ADMIN_PASSWORD, Client, psql } from '../lib/server.mjs';
import { launch, shot } from './browser.mjs';

const env = process.env;
const STUDENT = { username: 'e2e-job-student', password: 'student-pass-1' };
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

describe('jobs in the browser', () => {
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
    const p = await api.post('/api/v1/pools', { name: 'a100', sharing: 'exclusive' });
    assert.equal(p.status, 201, p.text);
    assert.equal((await api.req('PUT', `/api/v1/pools/${p.json.id}/gpus`, { gpu_ids: n.json.gpus.map((g) => g.id) })).status, 200);
    const u = await api.post('/api/v1/users', { username: STUDENT.username, role: 'student', password: STUDENT.password });
    assert.equal(u.status, 201, u.text);
    assert.equal((await api.req('PUT', '/api/v1/quotas', { user_id: u.json.user.id, pool: 'a100', max_slices: 2 })).status, 200);
    browser = await launch();
    const context = await browser.newContext({ locale: 'en-US', viewport: { width: 1360, height: 900 } });
    page = await context.newPage();
    page.setDefaultTimeout(15000);
    page.on('pageerror', (e) => pageErrors.push(e.message));
    page.on('console', (m) => { if (/Content Security Policy/i.test(m.text())) pageErrors.push(m.text()); });
  });

  after(async () => {
    if (page) { try { await shot(page, 'jobs-final'); } catch { /* browser gone */ } }
    await browser?.close();
    await srv?.stop();
    try {
      const ids = execFileSync('docker', ['-H', env.GPUCLOUD_WORLD_DOCKER1, 'ps', '-aq', '--filter', `label=gpucloud.cluster=${cluster}`], { encoding: 'utf8' }).trim();
      if (ids) execFileSync('docker', ['-H', env.GPUCLOUD_WORLD_DOCKER1, 'rm', '-f', ...ids.split('\n')]);
    } catch { /* engine gone */ }
  });

  const row = (name) => page.locator(`[data-table=jobs] tr[data-job="${name}"]`);

  async function submit({ name, command, pool, hyper, tags }) {
    await page.locator('[data-action=new-job]').click();
    await page.getByRole('heading', { name: 'Submit a job', level: 1 }).waitFor();
    await until(async () => (await page.locator('[data-field=image] option').count()) === 1, 'the image in the picker');
    assert.match(await page.locator('[data-field=image] option').first().textContent(), /BusyBox trainer/);
    await page.locator('[data-field=name]').fill(name);
    await page.locator('[data-field=command]').fill(command);
    if (pool) {
      await page.locator(`[data-field=pool] option[value=${pool}]`).waitFor({ state: 'attached' });
      await page.locator('[data-field=pool]').selectOption(pool);
    }
    await page.locator('[data-field=cpu]').fill('200');
    await page.locator('[data-field=memory]').fill('64');
    if (hyper) await page.locator('[data-field=hyperparameters]').fill(hyper);
    if (tags) await page.locator('[data-field=tags]').fill(tags);
    await page.locator('[data-action=submit-job]').click();
    await page.waitForURL(/#\/job\?id=\d+$/);
    await page.locator('[data-job-page] h1').filter({ hasText: name }).waitFor();
  }

  it('shows an empty "Jobs" page to a new student', async () => {
    await page.goto(`${srv.base}/#/login`);
    await page.getByLabel('Username', { exact: true }).fill(STUDENT.username);
    await page.getByLabel('Password', { exact: true }).fill(STUDENT.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.locator('[data-nav="jobs"]').click();
    await page.getByRole('heading', { name: 'Jobs', level: 1 }).waitFor();
    await page.locator('[data-table=jobs] [data-empty=jobs]').waitFor();
  });

  it('submits a job from the form, sees it succeed and reads its log', async () => {
    // a bad hyperparameters text is caught before sending
    await page.locator('[data-action=new-job]').click();
    // the picker fills in after the catalog answers: before that the form
    // says "pick an image" (a loaded CI machine clicked too early)
    await until(async () => (await page.locator('[data-field=image] option').count()) === 1, 'the image in the picker');
    await page.locator('[data-field=command]').fill('true');
    await page.locator('[data-field=hyperparameters]').fill('[1, 2]');
    await page.locator('[data-action=submit-job]').click();
    await page.getByText('Hyperparameters must be a JSON object').waitFor();
    await page.locator('a', { hasText: '← All jobs' }).click();
    await submit({ name: 'train-1', pool: 'a100', tags: 'demo, lr-sweep', hyper: '{"lr": 0.05, "epochs": 2}', command: 'for e in 1 2; do echo "epoch $e loss 0.$((9-e))"; done; echo "hp $GPUCLOUD_HPARAMS_JSON"' });
    await page.locator('h1 [data-state=succeeded]').waitFor({ timeout: 30000 });
    assert.equal((await page.locator('[data-fact=exitCode]').textContent()).trim(), '0');
    assert.match(await page.locator('[data-fact=node]').textContent(), /node1/);
    assert.match(await page.locator('[data-fact=hyperparameters]').textContent(), /"lr":0.05/);
    assert.match(await page.locator('[data-fact=directory]').textContent(), /~\/jobs\/\d+-train-1/);
    await until(async () => /epoch 2 loss 0\.7/.test(await page.locator('[data-log]').textContent()), 'the log');
    assert.match(await page.locator('[data-log]').textContent(), /hp \{"lr": 0\.05, "epochs": 2\}/);
    assert.equal(await page.locator('[data-action=cancel]').count(), 0, 'no cancel once ended');
    await shot(page, 'job-detail');
    // the GPU went back
    const pools = await api.get('/api/v1/pools');
    assert.equal(pools.json.items.find((p) => p.name === 'a100').free_slices, 4);
  });

  it('finds a failed job with the filter, with its reason', async () => {
    await page.locator('a', { hasText: '← All jobs' }).click();
    await submit({ name: 'train-bad', command: 'echo "Traceback (most recent call last):"; echo "  File x"; echo "RuntimeError: CUDA out of memory. Tried 2 GiB"; exit 2' });
    await page.locator('h1 [data-state=failed]').waitFor({ timeout: 30000 });
    assert.match(await page.locator('[data-field=reason]').textContent(), /exited with code 2: RuntimeError: CUDA out of memory/);
    await page.locator('a', { hasText: '← All jobs' }).click();
    await row('train-1').waitFor();
    assert.match(await row('train-1').textContent(), /demo, lr-sweep/);
    await page.locator('[data-filter=state]').selectOption('failed');
    await until(async () => (await page.locator('[data-table=jobs] tbody tr').count()) === 1 && await row('train-bad').count() === 1, 'only the failed job');
    assert.match(await row('train-bad').locator('[data-field=reason]').textContent(), /CUDA out of memory/);
    assert.match(await page.locator('[data-count=failed]').textContent(), /1/);
    await page.locator('[data-filter=state]').selectOption('');
    await page.locator('[data-filter=q]').fill('train-1');
    await until(async () => (await page.locator('[data-table=jobs] tbody tr').count()) === 1 && await row('train-1').count() === 1, 'the search');
    await page.locator('[data-filter=q]').fill('');
    await shot(page, 'jobs-list');
  });

  it('cancels a running job', async () => {
    await submit({ name: 'sleeper', command: 'echo up; exec sleep 300' });
    await page.locator('h1 [data-state=running]').waitFor({ timeout: 30000 });
    await until(async () => /up/.test(await page.locator('[data-log]').textContent()), 'the log while it runs');
    assert.match(await page.locator('[data-log-state]').textContent(), /Following the log live/);
    await page.locator('[data-action=cancel]').click();
    await page.locator('[data-action=confirm]').click();
    await page.locator('h1 [data-state=cancelled]').waitFor({ timeout: 20000 });
    assert.match(await page.locator('[data-field=reason]').textContent(), new RegExp(`cancelled by ${STUDENT.username}`));
  });

  it('shows the pages in Chinese', async () => {
    await page.locator('[data-lang-switch]').selectOption('zh-CN');
    await page.locator('a', { hasText: '← 全部作业' }).click();
    await page.getByRole('heading', { name: '作业', level: 1 }).waitFor();
    assert.equal((await page.locator('[data-nav="jobs"]').textContent()).trim(), '作业');
    await row('train-bad').waitFor();
    assert.equal((await row('train-1').locator('[data-state]').first().textContent()).trim(), '成功');
    assert.equal((await row('train-bad').locator('[data-state]').first().textContent()).trim(), '失败');
    // the reason code's sentence, the server's words kept as detail
    assert.match(await row('train-bad').locator('[data-field=reason]').textContent(), /程序出错退出/);
    assert.match(await row('train-bad').locator('[data-field=reason-detail]').textContent(), /CUDA out of memory/);
    assert.equal((await page.locator('[data-action=new-job]').textContent()).trim(), '提交作业');
    await shot(page, 'jobs-zh');
    await row('train-1').locator('[data-action=open]').click();
    await page.locator('h1 [data-state=succeeded]').waitFor();
    assert.equal((await page.locator('h1 [data-state=succeeded]').textContent()).trim(), '成功');
    await shot(page, 'job-detail-zh');
    await page.goto(`${srv.base}/#/jobs/new`);
    await page.getByRole('heading', { name: '提交作业', level: 1 }).waitFor();
    await shot(page, 'job-new-zh');
    await page.locator('[data-lang-switch]').selectOption('en');
    await page.getByRole('heading', { name: 'Submit a job', level: 1 }).waitFor();
    await shot(page, 'job-new');
  });

  it('raised no page error or CSP violation', () => {
    assert.deepEqual(pageErrors, []);
  });
});
