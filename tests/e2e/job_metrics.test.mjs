// job_metrics.test.mjs — a job's metrics in a real headless Chromium
// against a real gpucloudd and the world's engine: a running job's page
// draws a chart per reported scalar and the chart grows while the job runs
// (its SVG points counted before and after), hovering shows the values; a
// job that reports nothing shows how to report; the CPU and memory charts;
// the section in Chinese and in the dark colour scheme. No uncaught error
// or CSP violation.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { startServer, ADMIN_PASSWORD, Client, psql } from '../lib/server.mjs';
import { launch, shot } from './browser.mjs';

const env = process.env;
const STUDENT = { username: 'e2e-metrics-student', password: 'student-pass-1' };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function until(fn, what, ms = 20000) {
  const end = Date.now() + ms;
  let last;
  for (;;) {
    try { last = await fn(); if (last) return last; } catch (e) { last = e; }
    if (Date.now() > end) throw new Error(`timed out waiting for ${what} (last: ${last instanceof Error ? last.message : JSON.stringify(last)})`);
    await sleep(100);
  }
}

describe('job metrics in the browser', () => {
  let srv, browser, context, page, student, cluster, image;
  const pageErrors = [];

  before(async () => {
    for (const k of ['GPUCLOUD_WORLD_DOCKER1', 'GPUCLOUD_WORLD_IMAGE', 'GPUCLOUD_WORLD_REGISTRY'])
      assert.ok(env[k], `${k} is not set: run the tests through make test (it starts the world)`);
    srv = await startServer({ args: ['--node-check-interval=1', '--sched-interval-ms=200', '--instance-tick-ms=100', '--instance-stop-grace=1', '--job-metrics-interval-ms=300', '--job-usage-interval-ms=1000'] });
    cluster = psql(srv.db.url, 'SELECT cluster_id FROM cluster_identity');
    const api = new Client(srv.base);
    assert.equal((await api.login('admin', ADMIN_PASSWORD)).status, 200);
    const n = await api.post('/api/v1/nodes', { name: 'node1', url: env.GPUCLOUD_WORLD_DOCKER1, gpus: [] });
    assert.equal(n.status, 201, n.text);
    await until(async () => (await api.get(`/api/v1/nodes/${n.json.id}`)).json.state === 'up', 'node1 up');
    const reg = await api.post('/api/v1/registries', { name: 'world', server: env.GPUCLOUD_WORLD_REGISTRY, username: env.GPUCLOUD_WORLD_REGISTRY_USER, password: env.GPUCLOUD_WORLD_REGISTRY_KEY, personal: true });
    assert.equal(reg.status, 201, reg.text);
    const img = await api.post('/api/v1/images', { reference: env.GPUCLOUD_WORLD_IMAGE, registry_id: reg.json.id, display_name: 'BusyBox trainer', framework: 'none' });
    assert.equal(img.status, 201, img.text);
    image = img.json;
    const u = await api.post('/api/v1/users', { username: STUDENT.username, role: 'student', password: STUDENT.password });
    assert.equal(u.status, 201, u.text);
    student = new Client(srv.base);
    assert.equal((await student.login(STUDENT.username, STUDENT.password)).status, 200);
    browser = await launch();
    context = await browser.newContext({ locale: 'en-US', viewport: { width: 1360, height: 900 } });
    page = await context.newPage();
    page.setDefaultTimeout(20000);
    page.on('pageerror', (e) => pageErrors.push(e.message));
    page.on('console', (m) => { if (/Content Security Policy/i.test(m.text())) pageErrors.push(m.text()); });
    await page.goto(`${srv.base}/#/login`);
    await page.getByLabel('Username', { exact: true }).fill(STUDENT.username);
    await page.getByLabel('Password', { exact: true }).fill(STUDENT.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.locator('[data-nav="jobs"]').waitFor();
  });

  after(async () => {
    await browser?.close();
    await srv?.stop();
    try {
      const ids = execFileSync('docker', ['-H', env.GPUCLOUD_WORLD_DOCKER1, 'ps', '-aq', '--filter', `label=gpucloud.cluster=${cluster}`], { encoding: 'utf8' }).trim();
      if (ids) execFileSync('docker', ['-H', env.GPUCLOUD_WORLD_DOCKER1, 'rm', '-f', ...ids.split('\n')]);
    } catch { /* engine gone */ }
  });

  async function submit(name, command) {
    const r = await student.post('/api/v1/jobs', { name, image_id: image.id, cpu_millis: 200, mem_mib: 64, command: ['sh', '-c', command] });
    assert.equal(r.status, 201, r.text);
    return r.json;
  }

  const points = (name) => page.locator(`[data-metric-charts] polyline[data-series="${name}"]`).getAttribute('data-points').then(Number);

  it('draws a chart per scalar that grows while the job runs', async () => {
    const j = await submit('curves', 'i=0; while [ $i -lt 60 ]; do i=$((i+1)); echo "GPUCLOUD_METRIC {\\"step\\":$i,\\"loss\\":$((100 - i)).5,\\"acc\\":0.$i}"; sleep 0.25; done');
    await page.goto(`${srv.base}/#/job?id=${j.id}`);
    await page.locator('[data-job-page] h1').filter({ hasText: 'curves' }).waitFor();
    await page.locator('[data-metric-charts] polyline[data-series="loss"]').waitFor();
    await page.locator('[data-metric-charts] polyline[data-series="acc"]').waitFor();
    const first = await points('loss');
    assert.ok(first >= 1 && first < 60, `a part so far: ${first}`);
    await until(async () => (await points('loss')) >= first + 5, 'the chart to grow');
    const second = await points('loss');
    assert.ok(second > first, `${second} > ${first}`);
    // the polyline has as many vertices as it says
    const n = await page.locator('[data-metric-charts] polyline[data-series="loss"]').evaluate((el) => el.points.numberOfItems);
    assert.ok(n >= second);
    assert.equal(await page.locator('[data-metrics-empty]').isHidden(), true);
    await until(async () => (await points('loss')) === 60, 'every point after the end', 40000);
    // hovering a chart shows the values there
    await page.locator('[data-chart="loss"] svg').scrollIntoViewIfNeeded();
    const box = await page.locator('[data-chart="loss"] svg').boundingBox();
    await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
    await page.mouse.move(box.x + box.width * 0.99, box.y + box.height / 2, { steps: 4 });
    const tip = page.locator('[data-chart="loss"] .chart-tip');
    await tip.waitFor();
    assert.match(await tip.textContent(), /step 60.*loss: 40\.5/);
    await until(async () => (await page.locator('[data-usage-charts] polyline').count()) >= 1, 'a usage chart');
    assert.match(await page.locator('[data-gpu-usage]').textContent(), /not measurable/);
    await page.locator('[data-metrics]').scrollIntoViewIfNeeded();
    await shot(page, 'job-metrics');
  });

  it('tells how to report metrics when a job has none', async () => {
    const j = await submit('quiet', 'echo hello');
    await page.goto(`${srv.base}/#/job?id=${j.id}`);
    await page.locator('[data-job-page] h1').filter({ hasText: 'quiet' }).waitFor();
    await page.locator('[data-metrics-empty]').waitFor();
    assert.match(await page.locator('[data-metrics-empty]').textContent(), /No metrics yet.*GPUCLOUD_METRIC \{"step": 1, "loss": 0\.5\}.*metrics\.jsonl/);
    assert.equal(await page.locator('[data-metric-charts] figure').count(), 0);
    await page.locator('[data-metrics]').scrollIntoViewIfNeeded();
    await shot(page, 'job-metrics-empty');
  });

  it('reads in Chinese and in the dark scheme', async () => {
    const id = Number(psql(srv.db.url, "SELECT id FROM jobs WHERE name = 'curves'"));
    await page.goto(`${srv.base}/#/job?id=${id}`);
    await page.locator('[data-metric-charts] polyline[data-series="loss"]').waitFor();
    await page.locator('[data-lang-switch]').selectOption('zh-CN');
    await page.getByRole('heading', { name: '指标', level: 2 }).waitFor();
    await page.getByRole('heading', { name: '资源使用', level: 3 }).waitFor();
    await page.locator('[data-metric-charts] polyline[data-series="loss"]').waitFor();
    await shot(page, 'job-metrics-zh');
    await page.emulateMedia({ colorScheme: 'dark' });
    const stroke = await page.locator('[data-metric-charts] polyline[data-series="loss"]').evaluate((el) => getComputedStyle(el).stroke);
    assert.equal(stroke, 'rgb(111, 139, 255)', 'the dark palette');
    await shot(page, 'job-metrics-dark');
    await page.emulateMedia({ colorScheme: 'light' });
    await page.locator('[data-lang-switch]').selectOption('en');
  });

  it('raised no page error or CSP violation', () => {
    assert.deepEqual(pageErrors, []);
  });
});
