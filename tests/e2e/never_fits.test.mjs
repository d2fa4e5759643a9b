// never_fits.test.mjs — requests that could never run, in a real headless
// Chromium against a real gpucloudd and the world's engines node1 and node2
// (4 declared A100s each, in one pool of 8): a student asks "New instance"
// for 5 GPUs (the slider goes to the pool's 8; no node has more than 4) and
// reads why it is refused and how much to ask instead, in English and in
// Chinese, and nothing is created. (The CPU and memory sliders stop at the
// largest node and the quota: the API tests cover those refusals, the i18n
// test their Chinese.) Then, with every CPU of one node held by an admin's
// allocation, the Cluster page shows that node's free GPUs as not usable
// (apart, with the node marked "CPU all in use") in both languages. No
// uncaught error or CSP violation.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, ADMIN_PASSWORD, Client, psql } from '../lib/server.mjs';
import { launch, shot } from './browser.mjs';

const env = process.env;
const STUDENT = { username: 'e2e-nf-student', password: 'student-pass-1' };
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

describe('requests that could never run, in the browser', () => {
  let srv, browser, page, api, ncpu, hold;
  const pageErrors = [];

  before(async () => {
    for (const k of ['GPUCLOUD_WORLD_DOCKER1', 'GPUCLOUD_WORLD_NODE1_GPUS', 'GPUCLOUD_WORLD_DOCKER2', 'GPUCLOUD_WORLD_NODE2_GPUS', 'GPUCLOUD_WORLD_IMAGE', 'GPUCLOUD_WORLD_REGISTRY'])
      assert.ok(env[k], `${k} is not set: run the tests through make test (it starts the world)`);
    srv = await startServer({ args: ['--node-check-interval=1', '--sched-interval-ms=200'] });
    api = new Client(srv.base);
    assert.equal((await api.login('admin', ADMIN_PASSWORD)).status, 200);
    const gpuIds = [];
    for (const i of [1, 2]) {
      const gpus = env[`GPUCLOUD_WORLD_NODE${i}_GPUS`].split(',').map((d) => ({ model: 'NVIDIA A100-SXM4-80GB', memory_mib: 81920, devices: [d] }));
      const n = await api.post('/api/v1/nodes', { name: `node${i}`, url: env[`GPUCLOUD_WORLD_DOCKER${i}`], gpus });
      assert.equal(n.status, 201, n.text);
      await until(async () => (await api.get(`/api/v1/nodes/${n.json.id}`)).json.state === 'up', `node${i} up`);
      gpuIds.push(...n.json.gpus.map((g) => g.id));
    }
    ncpu = Number(psql(srv.db.url, "SELECT ncpu FROM nodes WHERE name = 'node1'"));
    assert.ok(ncpu >= 1, 'node1 reports its CPUs');
    const reg = await api.post('/api/v1/registries', { name: 'world', server: env.GPUCLOUD_WORLD_REGISTRY, username: env.GPUCLOUD_WORLD_REGISTRY_USER, password: env.GPUCLOUD_WORLD_REGISTRY_KEY });
    assert.equal(reg.status, 201, reg.text);
    const img = await api.post('/api/v1/images', { reference: env.GPUCLOUD_WORLD_IMAGE, registry_id: reg.json.id, display_name: 'BusyBox lab', framework: 'none' });
    assert.equal(img.status, 201, img.text);
    const p = await api.post('/api/v1/pools', { name: 'a100', sharing: 'exclusive' });
    assert.equal(p.status, 201, p.text);
    assert.equal((await api.req('PUT', `/api/v1/pools/${p.json.id}/gpus`, { gpu_ids: gpuIds })).status, 200);
    // students may use a100 without limits
    assert.equal((await api.req('PUT', '/api/v1/quotas/defaults', { role: 'student', pool: 'a100' })).status, 200);
    assert.equal((await api.post('/api/v1/users', { username: STUDENT.username, role: 'student', password: STUDENT.password })).status, 201);
    browser = await launch();
    const context = await browser.newContext({ locale: 'en-US', viewport: { width: 1360, height: 900 } });
    page = await context.newPage();
    page.setDefaultTimeout(15000);
    page.on('pageerror', (e) => pageErrors.push(e.message));
    page.on('console', (m) => { if (/Content Security Policy/i.test(m.text())) pageErrors.push(m.text()); });
  });

  after(async () => {
    await browser?.close();
    await srv?.stop();
  });

  const count = () => Number(psql(srv.db.url, 'SELECT count(*) FROM instances'));

  // Fills "New instance" (pool a100) and submits; returns the message shown.
  async function refused({ slices = 1, cpu = 500 }) {
    await page.goto(`${srv.base}/#/instances/new`);
    const pool = page.locator('[data-field=pool]');
    await until(async () => (await pool.locator('option').count()) === 2, 'the pool in the picker');
    await page.locator('[data-image-radio]').first().check();
    await pool.selectOption('a100');
    await page.locator('[data-field=name]').fill('too-big');
    await page.locator('[data-slider=slices]').fill(String(slices));
    await page.locator('[data-slider=cpu]').fill(String(cpu));
    await page.locator('[data-action=create]').click();
    const msg = page.locator('form[data-form=new-instance] .msg-error');
    await msg.waitFor();
    assert.match(page.url(), /#\/instances\/new$/, 'the form stays');
    return msg;
  }

  it('tells a student in English why an instance no node could hold is refused, and how much to ask', async () => {
    await page.goto(`${srv.base}/#/login`);
    await page.getByLabel('Username', { exact: true }).fill(STUDENT.username);
    await page.getByLabel('Password', { exact: true }).fill(STUDENT.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.locator('[data-nav="instances"]').waitFor();
    const msg = await refused({ slices: 5 });
    assert.equal(await page.locator('[data-slider=slices]').getAttribute('max'), '8', 'the slider goes to the pool’s 8 slices');
    const text = await msg.textContent();
    assert.equal(text.trim(), "no node in pool 'a100' has 5 slices: the largest has 4 — ask for at most 4 slices");
    assert.equal(count(), 0, 'nothing was created');
    await shot(page, 'never-fits');
  });

  it('tells it in Chinese too, with the numbers in the form’s units', async () => {
    await page.locator('[data-lang-switch]').selectOption('zh-CN');
    const msg = await refused({ slices: 5 });
    const text = (await msg.textContent()).trim();
    assert.ok(text.startsWith('池“a100”中没有节点拥有 5 个切片：最大的节点只有 4 个。请最多申请 4 个。'), text);
    // the server's own words follow, marked as English
    assert.equal(await msg.locator('[data-error-detail]').getAttribute('lang'), 'en');
    assert.match(await msg.locator('[data-error-detail]').textContent(), /no node in pool 'a100'/);
    assert.equal(count(), 0);
    await shot(page, 'never-fits-zh');
    await page.locator('[data-lang-switch]').selectOption('en');
  });

  it('shows the Cluster page’s free GPUs as not usable while a node’s CPUs are all in use', async () => {
    const a = await api.post('/api/v1/allocations', { pool: 'a100', slices: 1, cpu_millis: ncpu * 1000, mem_mib: 64 });
    assert.equal(a.status, 202, a.text);
    hold = a.json.id;
    await until(async () => (await api.get(`/api/v1/allocations/${hold}`)).json.state === 'allocated', 'the allocation');
    await page.locator('[data-nav="cluster"]').click();
    const card = page.locator('.pool-card[data-pool="a100"]');
    // the node it landed on has three free GPUs no request can use; the other four still can
    await until(async () => (await card.getAttribute('data-usable')) === '4', 'four usable free slices');
    assert.equal(await card.getAttribute('data-free'), '7');
    assert.equal((await card.locator('[data-field=free]').textContent()).trim(), '4');
    assert.match(await card.locator('[data-field=stuck]').textContent(), /3 more free on nodes whose CPU or memory is all in use/);
    const node = (await api.get(`/api/v1/allocations/${hold}`)).json.grants[0].node;
    assert.equal((await card.locator(`[data-node=${node}] [data-full=cpu]`).textContent()).trim(), 'CPU all in use');
    assert.equal(await card.locator('[data-full]').count(), 1, 'only that node is full');
    assert.equal(await card.locator(`[data-node=${node}] .gpu-square.gpu-stuck`).count(), 3);
    assert.equal(await card.locator('.gpu-square.gpu-stuck').count(), 3);
    assert.equal(await card.locator('[role=meter]').getAttribute('aria-valuenow'), '4');
    assert.match(await page.locator('[data-cluster-summary]').textContent(), /Free slices: 4 of 8/);
    await shot(page, 'cluster-unusable');
    await page.locator('[data-lang-switch]').selectOption('zh-CN');
    await page.getByRole('heading', { name: '集群', level: 1 }).waitFor();
    assert.match(await card.locator('[data-field=stuck]').textContent(), /另有 3 个空闲切片/);
    assert.equal((await card.locator('[data-full=cpu]').textContent()).trim(), 'CPU 已全部占用');
    await shot(page, 'cluster-unusable-zh');
    await page.locator('[data-lang-switch]').selectOption('en');
    // released: usable again, without a reload
    assert.equal((await api.del(`/api/v1/allocations/${hold}`)).status, 200);
    await until(async () => (await card.getAttribute('data-usable')) === '8', 'usable again', 12000);
    assert.equal(await card.locator('[data-field=stuck]').count(), 0);
    assert.equal(await card.locator('[data-full]').count(), 0);
  });

  it('raised no page error or CSP violation', () => {
    assert.deepEqual(pageErrors, []);
  });
});
