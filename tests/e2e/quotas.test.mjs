// quotas.test.mjs — Administration → Quotas end to end, in a real headless
// Chromium against a real gpucloudd with the world's node1 (4 declared
// A100s in pool "a100"): the admin opens the pool to students with a role
// default, gives one student a quota of their own and then removes a
// second one, changes the students' idle policy and picks the TensorBoard
// image, all in the page (and sets and removes a teachers' default). The student then reads their limits on the home
// page — a table, no raw JSON, nothing wider than the window, at desktop
// and phone widths — and finds the instance form's sliders stopped at those
// limits and at the node's size; then all of it in 简体中文.
//
// Needs the world (var/world/env): GPUCLOUD_WORLD_DOCKER1 and
// GPUCLOUD_WORLD_NODE1_GPUS. Without them the test fails: it never skips.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, ADMIN_PASSWORD, Client } from '../lib/server.mjs';
import { launch, shot } from './browser.mjs';

const env = process.env;
const STUDENT = { username: 'e2e-q-student', password: 'student-pass-1' };
const OTHER = { username: 'e2e-q-other', password: 'student-pass-2' };
const TB = 'registry.example/tensorboard:2.16';

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

describe('Administration → Quotas and the limits students see', () => {
  let srv, browser, page, api, sid, oid, node;
  const pageErrors = [];
  const dialog = () => page.locator('dialog[open]');

  async function signIn(p, username, password) {
    await p.goto(`${srv.base}/#/login`);
    await p.getByLabel('Username', { exact: true }).fill(username);
    await p.getByLabel('Password', { exact: true }).fill(password);
    await p.getByRole('button', { name: /Sign in|登录/ }).click();
    await p.locator('[data-nav="home"]').waitFor({ state: 'visible' });
  }

  // Fills a limits dialog (field name → value as typed) and saves it.
  async function fillLimits(values) {
    const d = dialog();
    await d.locator('[data-form=limits]').waitFor();
    for (const [name, v] of Object.entries(values)) await d.locator(`[data-limit-input=${name}]`).fill(String(v));
    await d.locator('[data-action=save-limits]').click();
    const alert = d.locator('[role=alert]');
    await Promise.race([d.waitFor({ state: 'detached', timeout: 10000 }), alert.waitFor({ timeout: 10000 })]);
    if (await d.count()) assert.fail(`the dialog reported: ${(await alert.textContent()).trim()}`);
  }

  const noSideScroll = (p) => p.evaluate(() => ({ scroll: document.documentElement.scrollWidth, client: document.documentElement.clientWidth }));

  before(async () => {
    assert.ok(env.GPUCLOUD_WORLD_DOCKER1 && env.GPUCLOUD_WORLD_NODE1_GPUS, 'GPUCLOUD_WORLD_DOCKER1 / NODE1_GPUS are not set: run through make test or source var/world/env');
    srv = await startServer({ args: ['--node-check-interval=1'] });
    api = new Client(srv.base);
    assert.equal((await api.login('admin', ADMIN_PASSWORD)).status, 200);
    const gpus = env.GPUCLOUD_WORLD_NODE1_GPUS.split(',').slice(0, 4).map((d) => ({ model: 'NVIDIA A100-SXM4-80GB', memory_mib: 81920, devices: [d] }));
    const n = await api.post('/api/v1/nodes', { name: 'node1', url: env.GPUCLOUD_WORLD_DOCKER1, gpus });
    assert.equal(n.status, 201, n.text);
    const p = await api.post('/api/v1/pools', { name: 'a100' });
    assert.equal((await api.req('PUT', `/api/v1/pools/${p.json.id}/gpus`, { gpu_ids: n.json.gpus.map((g) => g.id) })).status, 200);
    node = await until(async () => { const x = (await api.get(`/api/v1/nodes/${n.json.id}`)).json; return x.state === 'up' && x; }, 'node1 up');
    sid = (await api.post('/api/v1/users', { ...STUDENT, display_name: 'Quota Student', role: 'student' })).json.user.id;
    oid = (await api.post('/api/v1/users', { ...OTHER, role: 'student' })).json.user.id;
    // another student already has a quota of their own, removed in the page
    assert.equal((await api.req('PUT', '/api/v1/quotas', { user_id: oid, pool: 'a100', max_slices: 4 })).status, 200);
    assert.equal((await api.post('/api/v1/images', { reference: TB, display_name: 'TensorBoard', verify: false })).status, 201);
    browser = await launch();
    const context = await browser.newContext({ locale: 'en-US', viewport: { width: 1360, height: 900 } });
    page = await context.newPage();
    page.setDefaultTimeout(10000);
    page.on('pageerror', (e) => pageErrors.push(e.message));
    page.on('console', (m) => { if (/Content Security Policy/i.test(m.text())) pageErrors.push(m.text()); });
  });

  after(async () => {
    if (page) { try { await shot(page, 'quotas-final'); } catch { /* browser gone */ } }
    await browser?.close();
    await srv?.stop();
  });

  it('opens the pool to students with a role default, in the page', async () => {
    await signIn(page, 'admin', ADMIN_PASSWORD);
    await page.locator('[data-nav="admin-quotas"]').click();
    await page.getByRole('heading', { name: 'Quotas', level: 1 }).waitFor();
    assert.match(page.url(), /#\/admin\/quotas$/);
    const row = page.locator('[data-table=defaults] tr[data-default=a100]');
    await row.waitFor();
    assert.equal(await page.locator('[data-field=default-role]').inputValue(), 'student');
    assert.match(await row.textContent(), /Uses the default for all pools/);
    // the global row shows the seeded student default: 4 cores, 16 GiB, 2 TensorBoards
    const global = page.locator('[data-table=defaults] tr[data-default="*"]');
    assert.match(await global.locator('[data-limit=max_cpu_millis]').textContent(), /4 cores/);
    assert.match(await global.locator('[data-limit=max_mem_mib]').textContent(), /16 GiB/);
    assert.match(await global.locator('[data-limit=max_slices]').textContent(), /None/);
    await row.locator('[data-action=set-default]').click();
    // a bad value is refused in the form, naming the field
    await dialog().locator('[data-limit-input=max_slices]').fill('-1');
    await dialog().locator('[data-action=save-limits]').click();
    assert.match(await dialog().locator('[role=alert]').textContent(), /GPU slices at once must be a number, 0 or more/);
    await fillLimits({ max_slices: 1, max_cpu_millis: 2, max_mem_mib: 8, gpu_hours_per_week: 10 });
    await page.locator('[data-table=defaults] tr[data-default=a100][data-set]').waitFor();
    const d = (await api.get('/api/v1/quotas/defaults')).json.items.find((x) => x.role === 'student' && x.pool === 'a100');
    assert.deepEqual(d, { role: 'student', pool: 'a100', max_slices: 1, max_cpu_millis: 2000, max_mem_mib: 8192, gpu_hours_per_week: 10, max_runtime_s: null, max_tensorboards: null });
    assert.match(await page.locator('[data-table=defaults] tr[data-default=a100] [data-limit=max_cpu_millis]').textContent(), /2 cores/);
    // other roles are untouched: teachers have no pool default; one set and removed again
    await page.locator('[data-field=default-role]').selectOption('teacher');
    const trow = page.locator('[data-table=defaults] tr[data-default=a100]');
    await page.locator('[data-table=defaults] tr[data-default=a100]:not([data-set])').waitFor();
    await trow.locator('[data-action=set-default]').click();
    await fillLimits({ max_slices: 4 });
    await page.locator('[data-table=defaults] tr[data-default=a100][data-set]').waitFor();
    assert.equal((await api.get('/api/v1/quotas/defaults')).json.items.find((x) => x.role === 'teacher' && x.pool === 'a100').max_slices, 4);
    await trow.locator('[data-action=remove-default]').click();
    await dialog().locator('[data-action=confirm]').click();
    await page.locator('[data-table=defaults] tr[data-default=a100]:not([data-set])').waitFor();
    assert.equal((await api.get('/api/v1/quotas/defaults')).json.items.find((x) => x.role === 'teacher' && x.pool === 'a100'), undefined);
    await page.locator('[data-field=default-role]').selectOption('student');
    await page.locator('[data-table=defaults] tr[data-default=a100][data-set]').waitFor();
  });

  it('gives one student a quota of their own and removes another’s', async () => {
    const search = page.locator('[data-field=user-search]');
    await search.fill('e2e-q-stu');
    await page.locator(`[data-pick-user="${STUDENT.username}"]`).click();
    await page.locator(`[data-user-heading="${STUDENT.username}"]`).waitFor();
    // the limits in force for them, with where they come from
    const eff = page.locator('[data-card=overrides] [data-table=limits] tr[data-quota="pool:a100"]');
    assert.equal(await eff.getAttribute('data-source'), 'role_pool');
    assert.match(await eff.textContent(), /Student default for this pool/);
    await page.locator('[data-table=overrides] tr[data-override=a100] [data-action=set-override]').click();
    await fillLimits({ max_slices: 2, max_cpu_millis: 3, max_mem_mib: 12, max_runtime_s: 2 });
    await page.locator('[data-table=overrides] tr[data-override=a100][data-set]').waitFor();
    assert.equal(await page.locator('[data-card=overrides] [data-table=limits] tr[data-quota="pool:a100"]').getAttribute('data-source'), 'user');
    const q = (await api.get(`/api/v1/quotas?user_id=${sid}`)).json.items;
    assert.deepEqual(q.map((x) => [x.pool, x.max_slices, x.max_cpu_millis, x.max_mem_mib, x.gpu_hours_per_week, x.max_runtime_s]), [['a100', 2, 3000, 12288, null, 7200]]);
    // their home storage: a hard limit of 5 GiB of their own
    await page.locator('[data-storage-override=bytes_hard]').fill('5');
    await page.locator('[data-action=save-storage-override]').click();
    await until(async () => (await api.get(`/api/v1/quotas/effective?user_id=${sid}`)).json.storage.bytes_hard === 5 * 1073741824, 'the storage override');
    await shot(page, 'quotas-user');

    // the other student: remove their quota, the role default applies again
    await search.fill(OTHER.username);
    await page.locator(`[data-pick-user="${OTHER.username}"]`).click();
    await page.locator(`[data-user-heading="${OTHER.username}"]`).waitFor();
    await page.locator('[data-table=overrides] tr[data-override=a100] [data-action=remove-override]').click();
    await dialog().locator('[data-action=confirm]').click();
    await page.locator('[data-table=overrides] tr[data-override=a100]:not([data-set])').waitFor();
    assert.deepEqual((await api.get(`/api/v1/quotas?user_id=${oid}`)).json.items, []);
    assert.equal((await api.get(`/api/v1/quotas/effective?user_id=${oid}`)).json.pools[0].source, 'role_pool');
  });

  it('sets the students’ idle policy and the TensorBoard image', async () => {
    const row = page.locator('[data-table=idle] tr[data-idle=student]');
    await row.locator('[data-action=edit-idle]').click();
    await dialog().locator('[data-idle-input=idle_seconds]').fill('30');
    await dialog().locator('[data-idle-input=max_lifetime_seconds]').fill('');
    await dialog().locator('[data-action=save-idle]').click();
    await dialog().waitFor({ state: 'detached' });
    await until(async () => /30 min/.test(await row.locator('[data-field=idle_seconds]').textContent()), 'the new idle time');
    assert.match(await row.locator('[data-field=max_lifetime_seconds]').textContent(), /Never/);
    const pol = (await api.get('/api/v1/idle-policies')).json.items.find((p) => p.role === 'student');
    assert.deepEqual(pol, { role: 'student', idle_seconds: 1800, warn_seconds: 900, max_lifetime_seconds: null });

    const status = page.locator('[data-tensorboard-status]');
    await until(async () => (await status.getAttribute('data-source')) === 'none', 'the TensorBoard setting');
    assert.equal((await api.get('/api/v1/me')).json.features.tensorboard, false);
    await page.locator('[data-field=tensorboard-image]').selectOption(TB);
    await page.locator('[data-action=tensorboard-save]').click();
    await until(async () => (await status.getAttribute('data-source')) === 'admin', 'the saved setting');
    const s = (await api.get('/api/v1/settings')).json.tensorboard_image;
    assert.equal(s.value, TB);
    assert.equal(s.in_catalog, true);
    assert.equal((await api.get('/api/v1/me')).json.features.tensorboard, true);
    assert.deepEqual(await noSideScroll(page).then((x) => x.scroll <= x.client), true);
    await shot(page, 'quotas-admin');
  });

  it('shows the student their limits readably, without sideways scrolling', async () => {
    const context = await browser.newContext({ locale: 'en-US', viewport: { width: 1360, height: 900 } });
    const sp = await context.newPage();
    sp.on('pageerror', (e) => pageErrors.push(e.message));
    await signIn(sp, STUDENT.username, STUDENT.password);
    // a pool used once: an allocation held now shows as slices in use
    const sc = new Client(srv.base);
    assert.equal((await sc.login(STUDENT.username, STUDENT.password)).status, 200);
    const al = (await sc.post('/api/v1/allocations', { pool: 'a100', slices: 1, lease_s: 600, cpu_millis: 500, mem_mib: 1024 })).json;
    await until(async () => (await sc.get(`/api/v1/allocations/${al.id}`)).json.state === 'allocated', 'the allocation');
    await sp.reload();
    const row = sp.locator('[data-table=limits] tr[data-quota="pool:a100"]');
    await row.waitFor();
    assert.equal(await row.getAttribute('data-source'), 'user');
    assert.match(await row.locator('[data-field=source]').textContent(), /Own quota/);
    assert.match(await row.locator('[data-limit=slices]').textContent(), /^1 of 2$/);
    assert.match(await row.locator('[data-limit=cpu]').textContent(), /0\.5 cores of 3 cores/);
    assert.match(await row.locator('[data-limit=memory]').textContent(), /1 GiB of 12 GiB/);
    assert.match(await row.locator('[data-limit=runtime]').textContent(), /2 h/);
    const cpuOnly = sp.locator('[data-table=limits] tr[data-quota=cpu-only]');
    // work without GPUs is held to the tightest of their own pool quotas (0015)
    assert.equal(await cpuOnly.getAttribute('data-source'), 'user');
    assert.match(await cpuOnly.locator('[data-limit=cpu]').textContent(), /0 cores of 3 cores/);
    assert.match(await cpuOnly.textContent(), /TensorBoards: 0 of 2/);
    assert.match(await sp.locator('[data-quota=storage]').textContent(), /of 5 GiB/);
    const card = await sp.locator('[data-limits]').textContent();
    assert.doesNotMatch(card, /[{}"]|slices_in_use/, 'no raw JSON on the home page');
    let w = await noSideScroll(sp);
    assert.ok(w.scroll <= w.client, `the page scrolls sideways: ${JSON.stringify(w)}`);
    await shot(sp, 'quotas-home');
    // a phone
    await sp.setViewportSize({ width: 390, height: 844 });
    await sleep(200);
    w = await noSideScroll(sp);
    assert.ok(w.scroll <= w.client, `the page scrolls sideways on a phone: ${JSON.stringify(w)}`);
    await shot(sp, 'quotas-home-phone');
    await sp.setViewportSize({ width: 1360, height: 900 });

    // the instance form: sliders stop at the limits in force and the node's size
    await sp.goto(`${srv.base}/#/instances/new`);
    const pool = sp.locator('[data-field=pool]');
    await until(async () => (await pool.locator('option').count()) === 2, 'the pool in the picker');
    await pool.selectOption('a100');
    assert.equal(await sp.locator('[data-slider=slices]').getAttribute('max'), '2');
    assert.match(await sp.locator('[data-limit=slices]').textContent(), /quota in this pool: 2 slices \(1 in use\)/);
    const nodeCpu = node.ncpu * 1000, nodeMem = Math.floor(node.memory_bytes / 1048576);
    const cap = (v, step) => String(Math.floor(v / step) * step);
    assert.equal(await sp.locator('[data-slider=cpu]').getAttribute('max'), cap(Math.min(3000, nodeCpu), 100));
    assert.equal(await sp.locator('[data-slider=memory]').getAttribute('max'), cap(Math.min(12288, nodeMem), 256));
    await pool.selectOption('');
    assert.equal(await sp.locator('[data-slider=cpu]').getAttribute('max'), cap(Math.min(3000, nodeCpu), 100));
    assert.equal(await sp.locator('[data-slider=memory]').getAttribute('max'), cap(Math.min(12288, nodeMem), 256));
    assert.match(await sp.locator('[data-limit=cpu]').textContent(), /Your quota: 3 cores/);
    await sc.del(`/api/v1/allocations/${al.id}`);

    // 简体中文
    await sp.goto(`${srv.base}/#/home`);
    await sp.locator('[data-lang-switch]').selectOption('zh-CN');
    await until(async () => (await sp.locator('#quota-title').textContent()).trim() === '我的限额', 'the Chinese card title');
    const zhRow = sp.locator('[data-table=limits] tr[data-quota="pool:a100"]');
    await zhRow.waitFor();
    assert.match(await zhRow.locator('[data-field=source]').textContent(), /个人配额/);
    assert.match(await sp.locator('[data-table=limits] thead').textContent(), /内存/);
    assert.match(await sp.locator('[data-table=limits] tr[data-quota=cpu-only]').textContent(), /不使用 GPU.*个人配额/);
    w = await noSideScroll(sp);
    assert.ok(w.scroll <= w.client, `zh-CN scrolls sideways: ${JSON.stringify(w)}`);
    await shot(sp, 'quotas-home-zh');
    await context.close();
  });

  it('shows Administration → Quotas in 简体中文', async () => {
    await page.locator('[data-lang-switch]').selectOption('zh-CN');
    await page.getByRole('heading', { name: '配额', level: 1 }).waitFor();
    await until(async () => /所有池及不使用 GPU 的任务/.test(await page.locator('[data-table=defaults]').textContent()), 'the Chinese defaults table');
    assert.match(await page.locator('[data-table=defaults] tr[data-default=a100] [data-limit=max_cpu_millis]').textContent(), /2 核/);
    assert.match(await page.locator('[data-table=idle] tr[data-idle=student] [data-field=idle_seconds]').textContent(), /30 分钟/);
    assert.match(await page.locator('[data-tensorboard-status]').textContent(), /由管理员在此设置/);
    const w = await noSideScroll(page);
    assert.ok(w.scroll <= w.client, `zh-CN admin page scrolls sideways: ${JSON.stringify(w)}`);
    await shot(page, 'quotas-admin-zh');
    await page.locator('[data-lang-switch]').selectOption('en');
    assert.deepEqual(pageErrors, []);
  });
});
