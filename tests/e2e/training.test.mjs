// training.test.mjs — the researcher's path with real PyTorch, in a real
// headless Chromium against a real gpucloudd and the world's engine: the
// example train.py (deploy/examples/jobs) uploaded to the home, a job
// submitted from the shipped "PyTorch (single node)" template on the world's
// PyTorch image (Debian's python3-torch) with edited hyperparameters, its
// loss chart growing while it runs, the job succeeding, and its checkpoint
// downloaded from the job's Outputs (a real torch.save file).  No uncaught
// error or CSP violation.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { startServer, ADMIN_PASSWORD, Client, psql, ROOT } from '../lib/server.mjs';
import { launch, shot, newPage, signIn } from './browser.mjs';

const env = process.env;
const STUDENT = { username: 'e2e-trainer', password: 'trainer-pass-1' };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function until(fn, what, ms = 15000) {
  const end = Date.now() + ms;
  let last;
  for (;;) {
    try { last = await fn(); if (last) return last; } catch (e) { last = e; }
    if (Date.now() > end) throw new Error(`timed out waiting for ${what} (last: ${last instanceof Error ? last.message : JSON.stringify(last)})`);
    await sleep(150);
  }
}

describe('training a real PyTorch job from the browser', () => {
  let srv, browser, page, cluster, template, jobId;
  const pageErrors = [];

  before(async () => {
    for (const k of ['GPUCLOUD_WORLD_DOCKER1', 'GPUCLOUD_WORLD_NODE1_GPUS', 'GPUCLOUD_WORLD_PYTORCH_IMAGE', 'GPUCLOUD_WORLD_REGISTRY'])
      assert.ok(env[k], `${k} is not set: run the tests through make test (it starts the world)`);
    srv = await startServer({ args: ['--node-check-interval=1', '--sched-interval-ms=200', '--instance-tick-ms=100', '--job-metrics-interval-ms=500'] });
    cluster = psql(srv.db.url, 'SELECT cluster_id FROM cluster_identity');
    const api = new Client(srv.base);
    assert.equal((await api.login('admin', ADMIN_PASSWORD)).status, 200);
    const gpus = env.GPUCLOUD_WORLD_NODE1_GPUS.split(',').map((d) => ({ model: 'NVIDIA A100-SXM4-80GB', memory_mib: 81920, devices: [d] }));
    const n = await api.post('/api/v1/nodes', { name: 'node1', url: env.GPUCLOUD_WORLD_DOCKER1, gpus });
    assert.equal(n.status, 201, n.text);
    await until(async () => (await api.get(`/api/v1/nodes/${n.json.id}`)).json.state === 'up', 'node1 up');
    const reg = await api.post('/api/v1/registries', { name: 'world', server: env.GPUCLOUD_WORLD_REGISTRY, username: env.GPUCLOUD_WORLD_REGISTRY_USER, password: env.GPUCLOUD_WORLD_REGISTRY_KEY, personal: true });
    assert.equal(reg.status, 201, reg.text);
    const img = await api.post('/api/v1/images', { reference: env.GPUCLOUD_WORLD_PYTORCH_IMAGE, registry_id: reg.json.id, display_name: 'PyTorch 1.13 (CPU)', framework: 'pytorch' });
    assert.equal(img.status, 201, img.text);
    const u = await api.post('/api/v1/users', { username: STUDENT.username, role: 'researcher', password: STUDENT.password });
    assert.equal(u.status, 201, u.text);
    // the example script into the researcher's home, as the Files page does
    const me = new Client(srv.base);
    assert.equal((await me.login(STUDENT.username, STUDENT.password)).status, 200);
    const up = await me.req('PUT', '/api/v1/files/home/train.py', readFileSync(join(ROOT, 'deploy/examples/jobs/train.py'), 'utf8'), { 'content-type': 'application/octet-stream' });
    assert.ok([200, 201].includes(up.status), up.text);
    template = (await me.get('/api/v1/job-templates')).json.items.find((x) => x.name === 'pytorch');
    assert.ok(template, 'the shipped PyTorch template');
    browser = await launch();
    page = await newPage(browser, pageErrors);
  });

  after(async () => {
    if (page) { try { await shot(page, 'training-final'); } catch { /* browser gone */ } }
    await browser?.close();
    await srv?.stop();
    try {
      const ids = execFileSync('docker', ['-H', env.GPUCLOUD_WORLD_DOCKER1, 'ps', '-aq', '--filter', `label=gpucloud.cluster=${cluster}`], { encoding: 'utf8' }).trim();
      if (ids) execFileSync('docker', ['-H', env.GPUCLOUD_WORLD_DOCKER1, 'rm', '-f', ...ids.split('\n')]);
    } catch { /* engine gone */ }
  });

  it('submits train.py from the PyTorch template with edited hyperparameters', async () => {
    await signIn(page, srv.base, STUDENT.username, STUDENT.password);
    await page.goto(`${srv.base}/#/jobs/new?template=${template.id}`);
    await page.locator('[data-hp=lr]').waitFor();
    await until(async () => (await page.locator('[data-field=image] option', { hasText: 'PyTorch 1.13 (CPU)' }).count()) === 1, 'the image in the picker');
    const opt = await page.locator('[data-field=image] option', { hasText: 'PyTorch 1.13 (CPU)' }).getAttribute('value');
    await page.locator('[data-field=image]').selectOption(opt);
    await page.locator('[data-field=name]').fill('sine-1');
    await page.locator('[data-hp=lr]').fill('0.05');
    await page.locator('[data-hp=epochs]').fill('2');
    await page.locator('[data-hp=batch-size]').fill('64');
    await page.locator('[data-hp=hidden]').fill('16');
    // slow enough to watch: 16 steps, 0.6 s apart
    await page.locator('[data-hp=step-delay]').fill('0.6');
    assert.match(await page.locator('[data-command-preview]').textContent(),
      /python3 \/home\/e2e-trainer\/train\.py --lr 0\.05 --epochs 2 --batch-size 64 --hidden 16 --optimizer adam --seed 0 --step-delay 0\.6$/);
    await shot(page, 'training-submit');
    await page.locator('[data-action=submit-job]').click();
    await page.waitForURL(/#\/job\?id=\d+$/);
    jobId = Number(new URL(page.url()).hash.split('id=')[1]);
    assert.ok(jobId > 0);
  });

  it('shows the loss chart grow while the job runs, then the job succeed', async () => {
    // the first start pulls the PyTorch image (a few hundred MB) from the registry
    await page.locator('h1 [data-state=running]').waitFor({ timeout: 240000 });
    const loss = page.locator('polyline[data-series=loss]');
    const points = async () => Number(await loss.getAttribute('data-points'));
    await loss.waitFor({ timeout: 30000 });
    const first = await points();
    assert.ok(first >= 1 && first < 16, `${first} points while it runs`);
    await until(async () => (await points()) > first, 'the chart to grow', 20000);
    assert.equal(await page.locator('h1 [data-state=running]').count(), 1, 'it grew while the job was running');
    await shot(page, 'training-running');
    await page.locator('h1 [data-state=succeeded]').waitFor({ timeout: 60000 });
    await until(async () => (await points()) === 16, 'all 16 steps charted', 15000);
    assert.match(await page.locator('[data-log]').textContent(), /saved \/home\/e2e-trainer\/jobs\/\d+-sine-1\/checkpoint\.pt after 16 steps/);
    assert.equal((await page.locator('[data-fact=template]').textContent()).trim(), template.title);
  });

  it('downloads the checkpoint from the job\'s outputs', async () => {
    const link = page.locator('[data-download="checkpoint.pt"]');
    await link.waitFor({ timeout: 15000 });
    const [dl] = await Promise.all([page.waitForEvent('download'), link.click()]);
    const path = join(srv.dir, 'checkpoint-download.pt');
    await dl.saveAs(path);
    assert.ok(statSync(path).size > 1000, 'a real checkpoint');
    // torch.save writes a zip archive
    assert.equal(readFileSync(path).subarray(0, 4).toString('latin1'), 'PK\x03\x04');
    await shot(page, 'training-done');
  });

  it('raised no page error or CSP violation', () => {
    assert.deepEqual(pageErrors, []);
  });
});
