// pools.test.mjs — GPU pools end to end, in a real headless Chromium against a
// real gpucloudd and the test world's two Docker engines: the admin registers
// node1 (4 declared A100s) and node2 (4 declared T4s) through the API, then in
// Administration → Pools checks the form, creates the exclusive pool "a100"
// and gives it node1's GPUs through the GPUs dialog, creates the shared pool
// "t4-lab" (7 slots × 2048 MiB) with node2's GPUs, sees the server refuse a
// node1 GPU for t4-lab, edits and deletes pools. A student then opens the
// Cluster page: both pools with their free slices once the nodes are up, the
// advisory memory note, the simulated marks, and a map of 4 GPUs per node
// that follows a cordon made elsewhere without a reload.
//
// Needs the world (deploy/world.sh writes var/world/env): GPUCLOUD_WORLD_DOCKER1/2
// and GPUCLOUD_WORLD_NODE1_GPUS / NODE2_GPUS. Without them the test fails: it
// never skips.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, ADMIN_PASSWORD, Client } from '../lib/server.mjs';
import { launch, shot } from './browser.mjs';

const A100 = { model: 'NVIDIA A100-SXM4-80GB', memory_mib: 81920 };
const T4 = { model: 'NVIDIA T4', memory_mib: 15360 };
const STUDENT = { username: 'e2e-pools-student', password: 'student-pass-1' };

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Polls fn() until it returns a truthy value (returned) or the time is up.
async function until(fn, what, ms = 10000) {
  const end = Date.now() + ms;
  let last;
  for (;;) {
    try { last = await fn(); if (last) return last; } catch (e) { last = e; }
    if (Date.now() > end) throw new Error(`timed out waiting for ${what} (last: ${last instanceof Error ? last.message : JSON.stringify(last)})`);
    await sleep(100);
  }
}

function worldEnv() {
  const nodes = [1, 2].map((i) => {
    const url = process.env[`GPUCLOUD_WORLD_DOCKER${i}`];
    const gpus = (process.env[`GPUCLOUD_WORLD_NODE${i}_GPUS`] || '').split(',').map((s) => s.trim()).filter(Boolean);
    if (!url) throw new Error(`GPUCLOUD_WORLD_DOCKER${i} is not set: run the tests through \`make test\` (it starts the world), or \`set -a; . var/world/env; set +a\``);
    if (gpus.length < 4) throw new Error(`GPUCLOUD_WORLD_NODE${i}_GPUS must name 4 device files (got ${JSON.stringify(process.env[`GPUCLOUD_WORLD_NODE${i}_GPUS`])})`);
    return { url, gpus: gpus.slice(0, 4) };
  });
  return { node1: nodes[0], node2: nodes[1] };
}

describe('GPU pools and the cluster page', () => {
  let srv, browser, context, page, world, api;
  const nodeIds = {};          // name → node id
  const gpuIds = {};           // name → [GPU id by index]
  const pageErrors = [];

  const dialog = () => page.locator('dialog[open]');
  const row = (name) => page.locator(`[data-table=pools] tr[data-pool="${name}"]`);
  const card = (name) => page.locator(`.pool-card[data-pool="${name}"]`);
  const poolByName = async (name) => (await api.get('/api/v1/pools')).json.items.find((p) => p.name === name);
  const memberIds = (pool) => pool.nodes.flatMap((n) => n.gpus.map((g) => g.id)).sort((a, b) => a - b);

  // Submits the dialog's form and waits for it to close; an error shown in
  // the dialog instead fails the step with the server's words.
  async function submitAndClose(d, action) {
    await d.locator(`[data-action=${action}]`).click();
    const alert = d.locator('[role=alert]');
    await Promise.race([d.waitFor({ state: 'detached', timeout: 15000 }), alert.waitFor({ timeout: 15000 })]);
    if (await d.count()) assert.fail(`the dialog reported: ${(await alert.textContent()).trim()}`);
  }

  async function rowAction(name, action) {
    await row(name).locator('[data-action=row-menu]').click();
    const item = row(name).locator(`.menu [data-action=${action}]`);
    await item.waitFor({ state: 'visible' });
    await item.click();
  }

  async function openGpus(name) {
    await row(name).locator('td.cell-actions > [data-action=gpus]').click();
    const d = dialog();
    await d.locator('[data-table=pool-gpus]').waitFor();
    return d;
  }

  async function registerNode(name, env, gpu) {
    const r = await api.post('/api/v1/nodes', {
      name, url: env.url, gpus: env.gpus.map((dev) => ({ ...gpu, devices: [dev] })),
    });
    assert.equal(r.status, 201, r.text);
    nodeIds[name] = r.json.id;
    gpuIds[name] = [...r.json.gpus].sort((a, b) => a.index - b.index).map((g) => g.id);
    assert.equal(gpuIds[name].length, 4);
  }

  async function signIn(username, password) {
    await page.getByLabel('Username', { exact: true }).fill(username);
    await page.getByLabel('Password', { exact: true }).fill(password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.locator('[data-nav="home"]').waitFor({ state: 'visible' });
  }

  before(async () => {
    world = worldEnv();
    srv = await startServer({ args: ['--node-check-interval=1'] });
    api = new Client(srv.base);
    assert.equal((await api.login('admin', ADMIN_PASSWORD)).status, 200);
    await registerNode('node1', world.node1, A100);
    await registerNode('node2', world.node2, T4);
    browser = await launch();
    context = await browser.newContext({ locale: 'en-US', viewport: { width: 1360, height: 900 } });
    page = await context.newPage();
    page.setDefaultTimeout(10000);
    page.on('pageerror', (e) => pageErrors.push(e.message));
    page.on('console', (m) => { if (/Content Security Policy/i.test(m.text())) pageErrors.push(m.text()); });
  });

  after(async () => {
    if (page) { try { await shot(page, 'pools-final'); } catch { /* the browser may be gone */ } }
    await browser?.close();
    await srv?.stop();
  });

  it('opens Administration → Pools as the admin, with no pool yet', async () => {
    await page.goto(`${srv.base}/#/login`);
    await signIn('admin', ADMIN_PASSWORD);
    assert.ok(await page.locator('[data-nav="cluster"]').isVisible(), 'Cluster is in the admin’s navigation too');
    await page.locator('[data-nav="admin-pools"]').click();
    await page.getByRole('heading', { name: 'GPU pools', level: 1 }).waitFor();
    assert.match(page.url(), /#\/admin\/pools$/);
    assert.equal(await page.locator('[data-nav="admin-pools"]').getAttribute('aria-current'), 'page');
    await page.locator('[data-table=pools] [data-empty=pools]').waitFor();
  });

  it('checks the create form in the browser before asking the server', async () => {
    await page.getByRole('button', { name: 'Create pool' }).click();
    const d = dialog();
    await d.getByLabel('Name', { exact: true }).fill('A100 Train');
    await d.locator('[data-action=create-pool]').click();
    assert.match(await d.locator('[role=alert]').textContent(), /lower-case/);

    // MIG can be chosen and says what a slice is.
    const mig = d.getByLabel('MIG', { exact: true });
    assert.ok(!(await mig.isDisabled()));
    assert.match(await d.locator('[data-sharing-choice=mig]').evaluate((el) => document.getElementById(el.getAttribute('aria-describedby')).textContent), /One slice per MIG instance/);

    // Slots appear for a shared pool only, and are checked.
    assert.ok(await d.locator('[data-shared-fields]').isHidden());
    await d.getByLabel('Shared', { exact: true }).check();
    await d.locator('[data-shared-fields]').waitFor({ state: 'visible' });
    await d.getByLabel('Name', { exact: true }).fill('t4-lab');
    await d.getByLabel('Slots per GPU').fill('65');
    await d.getByLabel('Memory per slot (MiB)').fill('2048');
    await d.locator('[data-action=create-pool]').click();
    assert.match(await d.locator('[role=alert]').textContent(), /whole number from 1 to 64/);
    await d.getByLabel('Slots per GPU').fill('7');
    await d.getByLabel('Memory per slot (MiB)').fill('');
    await d.locator('[data-action=create-pool]').click();
    assert.match(await d.locator('[role=alert]').textContent(), /memory per slot must be a whole number/);
    await d.getByRole('button', { name: 'Cancel' }).click();
    await d.waitFor({ state: 'detached' });
    assert.deepEqual((await api.get('/api/v1/pools')).json.items, [], 'nothing reached the server');
  });

  it('creates the exclusive pool a100 and gives it node1’s four GPUs through the dialog', async () => {
    await page.getByRole('button', { name: 'Create pool' }).click();
    const d = dialog();
    await d.getByLabel('Name', { exact: true }).fill('a100');
    await d.getByLabel('Description').fill('Training on A100s');
    assert.ok(await d.getByLabel('Exclusive', { exact: true }).isChecked(), 'exclusive is the default');
    await submitAndClose(d, 'create-pool');
    await row('a100').waitFor();
    assert.equal(await row('a100').locator('[data-sharing]').getAttribute('data-sharing'), 'exclusive');
    assert.match(await row('a100').textContent(), /Whole GPUs/);
    assert.equal(await row('a100').locator('[data-gpu-count]').getAttribute('data-gpu-count'), '0');

    const g = await openGpus('a100');
    // Every GPU of every node, none in a pool yet, all simulated.
    assert.equal(await g.locator('tr[data-gpu-id]').count(), 8);
    assert.equal(await g.locator('tr[data-node=node1] [data-simulated]').count(), 4);
    assert.equal(await g.locator('tr[data-node=node2] [data-simulated]').count(), 4);
    assert.match(await g.locator('tr[data-node=node2][data-gpu="0"]').textContent(), /NVIDIA T4.*15 GiB/);
    assert.match(await g.locator('tr[data-node=node1][data-gpu="3"]').textContent(), /NVIDIA A100-SXM4-80GB.*80 GiB/);
    assert.equal(await g.locator('[data-pool-of]:not([data-pool-of=""])').count(), 0);
    await g.getByLabel('All free GPUs of node1').check();
    for (let i = 0; i < 4; i++) assert.ok(await g.getByLabel(`node1 GPU ${i}`, { exact: true }).isChecked());
    assert.ok(!(await g.getByLabel('node2 GPU 0', { exact: true }).isChecked()));
    assert.equal((await g.locator('[data-selected-count]').textContent()).trim(), 'Selected: 4 GPUs · 4 slices');
    await shot(page, 'pools-gpus-dialog');
    await submitAndClose(g, 'save-gpus');
    await until(async () => (await row('a100').locator('[data-gpu-count]').getAttribute('data-gpu-count')) === '4', 'a100 to have 4 GPUs');
    assert.match(await row('a100').locator('[data-field=gpus]').textContent(), /NVIDIA A100-SXM4-80GB/);
    assert.match(await row('a100').locator('[data-field=gpus]').textContent(), /Simulated GPUs/);
    assert.equal((await row('a100').locator('[data-field=nodes]').textContent()).trim(), 'node1');
    assert.deepEqual(memberIds(await poolByName('a100')), [...gpuIds.node1].sort((a, b) => a - b));
  });

  it('creates the shared pool t4-lab, 7 slots × 2048 MiB, with node2’s GPUs', async () => {
    await page.getByRole('button', { name: 'Create pool' }).click();
    const d = dialog();
    await d.getByLabel('Name', { exact: true }).fill('t4-lab');
    await d.getByLabel('Description').fill('Class lab on T4s');
    await d.getByLabel('Shared', { exact: true }).check();
    await d.getByLabel('Slots per GPU').fill('7');
    await d.getByLabel('Memory per slot (MiB)').fill('2048');
    assert.equal((await d.locator('[data-shared-preview]').textContent()).trim(), 'Each GPU gives 7 slots × 2 GiB per GPU.');
    await shot(page, 'pools-create');
    await submitAndClose(d, 'create-pool');
    await row('t4-lab').waitFor();
    const sharing = await row('t4-lab').locator('[data-field=sharing]').textContent();
    assert.match(sharing, /Shared/);
    assert.match(sharing, /7 slots × 2 GiB per GPU/);
    assert.equal((await row('t4-lab').locator('[data-memory-cap]').textContent()).trim(), 'Memory limit advisory');
    const created = await poolByName('t4-lab');
    assert.equal(created.slots_per_gpu, 7);
    assert.equal(created.memory_per_slot_mib, 2048);

    const g = await openGpus('t4-lab');
    // node1's GPUs say which pool they are in.
    for (let i = 0; i < 4; i++) {
      assert.equal(await g.locator(`tr[data-node=node1][data-gpu="${i}"] [data-pool-of]`).getAttribute('data-pool-of'), 'a100');
    }
    // The node's checkbox takes only GPUs that are free.
    assert.ok(await g.getByLabel('All free GPUs of node1').isDisabled());
    for (let i = 0; i < 4; i++) await g.getByLabel(`node2 GPU ${i}`, { exact: true }).check();
    assert.ok(await g.getByLabel('All free GPUs of node2').isChecked());
    assert.equal((await g.locator('[data-selected-count]').textContent()).trim(), 'Selected: 4 GPUs · 28 slices');
    await submitAndClose(g, 'save-gpus');
    await until(async () => (await row('t4-lab').locator('[data-gpu-count]').getAttribute('data-gpu-count')) === '4', 't4-lab to have 4 GPUs');
    assert.equal(await row('t4-lab').locator('[data-field=slices]').getAttribute('data-slices'), '28');
    assert.deepEqual(memberIds(await poolByName('t4-lab')), [...gpuIds.node2].sort((a, b) => a - b));
  });

  it('shows the server’s refusal when a GPU of another pool is added', async () => {
    const g = await openGpus('t4-lab');
    for (let i = 0; i < 4; i++) {
      assert.ok(await g.getByLabel(`node2 GPU ${i}`, { exact: true }).isChecked(), 'the pool’s GPUs are ticked');
      assert.equal((await g.locator(`tr[data-node=node2][data-gpu="${i}"] [data-pool-of]`).textContent()).trim(), 'This pool');
    }
    await g.getByLabel('node1 GPU 0', { exact: true }).check();
    await g.locator('[data-action=save-gpus]').click();
    const alert = g.locator('[role=alert]');
    await alert.waitFor();
    const text = await alert.textContent();
    assert.match(text, new RegExp(`GPUs ${gpuIds.node1[0]} are unknown or in another pool`));
    assert.match(text, / — take them out of their pool first/);
    // The offending row is marked, and the dialog stays open to fix it.
    await g.locator(`tr[data-node=node1][data-gpu="0"][data-conflict]`).waitFor();
    assert.equal(await g.locator('tr[data-conflict]').count(), 1);
    assert.equal((await g.locator('[data-conflicts]').textContent()).trim(), 'Ticked GPUs of another pool: node1 GPU 0 (in “a100”).');
    await until(async () => !(await g.locator('[data-action=save-gpus]').isDisabled()), 'the form to be usable again');
    await shot(page, 'pools-conflict');
    await g.getByRole('button', { name: 'Cancel' }).click();
    await g.waitFor({ state: 'detached' });
    assert.deepEqual(memberIds(await poolByName('t4-lab')), [...gpuIds.node2].sort((a, b) => a - b), 'nothing changed');
    assert.deepEqual(memberIds(await poolByName('a100')), [...gpuIds.node1].sort((a, b) => a - b));
  });

  it('edits t4-lab’s description and memory per slot', async () => {
    await rowAction('t4-lab', 'edit');
    const d = dialog();
    await d.waitFor();
    assert.equal(await d.getByLabel('Description').inputValue(), 'Class lab on T4s');
    assert.equal(await d.getByLabel('Memory per slot (MiB)').inputValue(), '2048');
    assert.equal(await d.getByLabel('Slots per GPU').count(), 0, 'slots cannot change');
    await d.getByLabel('Description').fill('Teaching lab: small notebooks on T4s');
    await d.getByLabel('Memory per slot (MiB)').fill('0');
    await d.locator('[data-action=save-pool]').click();
    assert.match(await d.locator('[role=alert]').textContent(), /memory per slot must be a whole number/);
    await d.getByLabel('Memory per slot (MiB)').fill('2048');
    await submitAndClose(d, 'save-pool');
    await until(async () => /Teaching lab/.test(await row('t4-lab').locator('[data-field=description]').textContent()), 'the new description');
    const p = await poolByName('t4-lab');
    assert.equal(p.description, 'Teaching lab: small notebooks on T4s');
    assert.equal(p.memory_per_slot_mib, 2048);
    assert.equal(p.gpus, 4, 'its GPUs are kept');
    await shot(page, 'pools-list');
  });

  it('deletes a pool after a confirmation, freeing its GPUs', async () => {
    const r = await api.post('/api/v1/pools', { name: 'scratch' });
    assert.equal(r.status, 201, r.text);
    await row('scratch').waitFor({ timeout: 12000 });
    await rowAction('scratch', 'delete');
    const d = dialog();
    await d.waitFor();
    assert.match(await d.textContent(), /scratch/);
    await d.locator('[data-action=confirm]').click();
    await row('scratch').waitFor({ state: 'detached' });
    assert.deepEqual((await api.get('/api/v1/pools')).json.items.map((p) => p.name), ['a100', 't4-lab']);
  });

  it('shows a student both pools on the Cluster page, with free slices once the nodes are up', async () => {
    const r = await api.post('/api/v1/users', { username: STUDENT.username, role: 'student', password: STUDENT.password });
    assert.equal(r.status, 201, r.text);
    await page.locator('#user-menu-button').click();
    await page.locator('[data-action=logout]').click();
    await page.getByRole('heading', { name: 'Sign in' }).waitFor();
    await signIn(STUDENT.username, STUDENT.password);
    assert.equal(await page.locator('[data-nav="admin-pools"]').count(), 0);
    assert.equal(await page.locator('.nav-heading').count(), 0, 'Cluster is in the main section');
    await page.locator('[data-nav="cluster"]').click();
    await page.getByRole('heading', { name: 'Cluster', level: 1 }).waitFor();
    assert.equal(await page.locator('[data-nav="cluster"]').getAttribute('aria-current'), 'page');

    const a100 = card('a100'), t4 = card('t4-lab');
    await until(async () => (await a100.getAttribute('data-free')) === '4' && (await t4.getAttribute('data-free')) === '28',
      'both pools to show their free slices (the nodes to come up)', 20000);
    assert.equal((await a100.locator('[data-field=free]').textContent()).trim(), '4');
    assert.equal((await t4.locator('[data-field=free]').textContent()).trim(), '28');
    assert.match(await a100.locator('.pool-capacity').textContent(), /free GPUs\s*of 4 available/);
    assert.match(await t4.locator('.pool-capacity').textContent(), /free slots\s*of 28 available/);
    assert.equal((await t4.locator('[data-field=slices]').textContent()).trim(), '28 slices on 4 GPUs');
    assert.equal(await t4.locator('[role=meter]').getAttribute('aria-valuenow'), '28');
    assert.equal(await t4.locator('[role=meter]').getAttribute('aria-valuemax'), '28');

    // Sharing, the advisory note, models and the simulated marks.
    assert.match(await a100.locator('[data-field=sharing]').textContent(), /Whole GPUs/);
    assert.equal(await a100.locator('[data-memory-cap]').count(), 0);
    assert.match(await t4.locator('[data-field=sharing]').textContent(), /7 slots × 2 GiB per GPU/);
    assert.equal((await t4.locator('[data-memory-cap=advisory]').textContent()).trim(), 'Memory limit advisory');
    assert.equal((await a100.locator('[data-field=models]').textContent()).trim(), A100.model);
    assert.equal((await t4.locator('[data-field=models]').textContent()).trim(), T4.model);
    assert.equal((await a100.locator('[data-simulated]').textContent()).trim(), 'Simulated GPUs');
    assert.equal((await t4.locator('[data-simulated]').textContent()).trim(), 'Simulated GPUs');
    assert.match(await t4.locator('[data-field=description]').textContent(), /Teaching lab/);

    // The GPU map: one node per pool here, four squares each.
    for (const [c, node, model, slices] of [[a100, 'node1', A100.model, 1], [t4, 'node2', T4.model, 7]]) {
      const n = c.locator(`.gpu-map-node[data-node=${node}]`);
      assert.equal(await c.locator('.gpu-map-node').count(), 1);
      assert.equal((await n.locator('[data-state]').textContent()).trim(), 'Up');
      const squares = n.locator('.gpu-square');
      assert.equal(await squares.count(), 4);
      for (let i = 0; i < 4; i++) {
        const sq = n.locator(`.gpu-square[data-gpu="${i}"]`);
        const label = await sq.getAttribute('aria-label');
        assert.match(label, new RegExp(`^GPU ${i} · ${model} · GPU-\\S+ · ${slices} of ${slices} slices free`));
        assert.equal(await sq.getAttribute('title'), label);
        assert.equal(await sq.getAttribute('data-used'), '0');
      }
    }
    assert.match(await page.locator('[data-cluster-summary]').textContent(), /Free slices: 32 of 32/);
    await shot(page, 'cluster');
  });

  it('follows a node cordoned elsewhere without a reload', async () => {
    const t4 = card('t4-lab');
    let r = await api.patch(`/api/v1/nodes/${nodeIds.node2}`, { state: 'cordoned' });
    assert.equal(r.status, 200, r.text);
    await until(async () => (await t4.getAttribute('data-free')) === '0', 't4-lab to have no free slice', 12000);
    assert.equal(await t4.getAttribute('data-slices'), '28');
    assert.match(await t4.locator('[data-field=slices]').textContent(), /28 on nodes that take no work now/);
    assert.equal(await t4.locator('.gpu-square.gpu-off').count(), 4);
    assert.equal((await t4.locator('.gpu-map-node [data-state]').textContent()).trim(), 'Cordoned');
    assert.equal(await card('a100').getAttribute('data-free'), '4', 'the other pool is unaffected');
    await shot(page, 'cluster-cordoned');
    r = await api.patch(`/api/v1/nodes/${nodeIds.node2}`, { state: 'active' });
    assert.equal(r.status, 200, r.text);
    await until(async () => (await t4.getAttribute('data-free')) === '28', 't4-lab to be free again', 12000);
    assert.equal(await t4.locator('.gpu-square.gpu-off').count(), 0);
  });

  it('shows the Cluster page in Chinese', async () => {
    await page.locator('[data-lang-switch]').selectOption('zh-CN');
    await page.getByRole('heading', { name: '集群', level: 1 }).waitFor();
    assert.equal((await page.locator('[data-nav="cluster"]').textContent()).trim(), '集群');
    await card('t4-lab').waitFor();
    assert.equal((await card('t4-lab').locator('[data-memory-cap]').textContent()).trim(), '显存限制仅为建议');
    assert.match(await card('t4-lab').locator('[data-field=sharing]').textContent(), /每块 GPU 7 个槽位 × 2 GiB/);
    assert.equal((await card('a100').locator('[data-simulated]').textContent()).trim(), '模拟 GPU');
    await shot(page, 'cluster-zh');
    await page.locator('[data-lang-switch]').selectOption('en');
    await page.getByRole('heading', { name: 'Cluster', level: 1 }).waitFor();
  });

  it('keeps Administration → Pools to admins', async () => {
    await page.goto(`${srv.base}/#/admin/pools`);
    await page.locator('[data-forbidden]').waitFor();
    assert.equal(await page.locator('[data-table=pools]').count(), 0);
    const s = new Client(srv.base);
    assert.equal((await s.login(STUDENT.username, STUDENT.password)).status, 200);
    assert.equal((await s.post('/api/v1/pools', { name: 'mine' })).status, 403);
    assert.equal((await s.get('/api/v1/pools')).status, 200, 'but may read them');
  });

  it('raised no uncaught error and no policy violation in the page', () => {
    assert.deepEqual(pageErrors, []);
  });
});
