// nodes.test.mjs — Administration → Nodes end to end, in a real headless
// Chromium against a real gpucloudd and the test world's first Docker engine:
// an admin adds a node with declared GPUs, sees it come up without reloading,
// sees its GPUs marked simulated, gets the server's words for an engine that
// cannot be reached, adds the same engine over tcp:// with TLS certificates
// read from files (GPU discovery finds its GPUs and the driver's CUDA
// version; the admin overrides the version and clears it back), edits
// labels, drains / cordons / activates it (and sees changes made elsewhere
// through the API), and removes it.
//
// Needs the world (deploy/world.sh writes var/world/env): GPUCLOUD_WORLD_DOCKER1,
// GPUCLOUD_WORLD_NODE1_GPUS, and the same engine over TLS
// (GPUCLOUD_WORLD_DOCKER1_TLS, GPUCLOUD_WORLD_TLS_CA/CERT/KEY), and the
// nvidia-smi stand-in image (GPUCLOUD_WORLD_DISCOVERY_IMAGE: on node1 it
// reports two A100s in MIG mode and "CUDA Version: 12.4"). Without them the
// test fails: it never skips.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, ADMIN_PASSWORD, Client } from '../lib/server.mjs';
import { launch, shot } from './browser.mjs';

const MODEL = 'NVIDIA A100-SXM4-80GB';
const MEMORY_MIB = 81920;
const BAD_URL = 'unix:///nonexistent.sock';

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
  const docker = process.env.GPUCLOUD_WORLD_DOCKER1;
  const gpus = (process.env.GPUCLOUD_WORLD_NODE1_GPUS || '').split(',').map((s) => s.trim()).filter(Boolean);
  if (!docker) throw new Error('GPUCLOUD_WORLD_DOCKER1 is not set: run the tests through `make test` (it starts the world), or `set -a; . var/world/env; set +a`');
  if (gpus.length < 4) throw new Error(`GPUCLOUD_WORLD_NODE1_GPUS must name 4 device files (got ${JSON.stringify(process.env.GPUCLOUD_WORLD_NODE1_GPUS)})`);
  const tls = {
    url: process.env.GPUCLOUD_WORLD_DOCKER1_TLS, ca: process.env.GPUCLOUD_WORLD_TLS_CA,
    cert: process.env.GPUCLOUD_WORLD_TLS_CERT, key: process.env.GPUCLOUD_WORLD_TLS_KEY,
  };
  for (const [k, v] of Object.entries(tls)) if (!v) throw new Error(`the world's env lacks the TLS engine's ${k} (GPUCLOUD_WORLD_DOCKER1_TLS, GPUCLOUD_WORLD_TLS_CA/CERT/KEY)`);
  const discovery = process.env.GPUCLOUD_WORLD_DISCOVERY_IMAGE;
  if (!discovery) throw new Error('GPUCLOUD_WORLD_DISCOVERY_IMAGE is not set (the nvidia-smi stand-in)');
  return { docker, gpus: gpus.slice(0, 4), tls, discovery };
}

describe('admin nodes page', () => {
  let srv, browser, context, page, world, api;
  const pageErrors = [];

  const dialog = () => page.locator('dialog[open]');
  const row = (name) => page.locator(`tr[data-node="${name}"]`);
  const detail = (name) => page.locator(`tr[data-node-detail="${name}"]`);
  const stateOf = async (name) => row(name).locator('[data-state]').first().getAttribute('data-state');

  // Submits the dialog's form and waits for it to close; an error shown in
  // the dialog instead fails the step with the server's words.
  async function submitAndClose(d, action) {
    await d.locator(`[data-action=${action}]`).click();
    const alert = d.locator('[role=alert]');
    await Promise.race([d.waitFor({ state: 'detached', timeout: 15000 }), alert.waitFor({ timeout: 15000 })]);
    if (await d.count()) assert.fail(`the dialog reported: ${(await alert.textContent()).trim()}`);
  }

  const openAdd = () => page.locator('[data-action=open-add-node]').click();

  async function rowAction(name, action) {
    await row(name).locator('[data-action=row-menu]').click();
    const item = row(name).locator(`[data-action=${action}]`);
    await item.waitFor({ state: 'visible' });
    await item.click();
  }

  before(async () => {
    world = worldEnv();
    srv = await startServer({ args: ['--node-check-interval=1', '--node-down-after=2', `--discovery-image=${world.discovery}`] });
    api = new Client(srv.base);
    assert.equal((await api.login('admin', ADMIN_PASSWORD)).status, 200);
    browser = await launch();
    context = await browser.newContext({ locale: 'en-US', viewport: { width: 1360, height: 900 } });
    page = await context.newPage();
    page.setDefaultTimeout(10000);
    page.on('pageerror', (e) => pageErrors.push(e.message));
    page.on('console', (m) => { if (/Content Security Policy/i.test(m.text())) pageErrors.push(m.text()); });
  });

  after(async () => {
    if (page) { try { await shot(page, 'nodes-final'); } catch { /* the browser may be gone */ } }
    await browser?.close();
    await srv?.stop();
  });

  it('opens Administration → Nodes as the admin, with no node yet', async () => {
    await page.goto(`${srv.base}/#/login`);
    await page.getByLabel('Username', { exact: true }).fill('admin');
    await page.getByLabel('Password', { exact: true }).fill(ADMIN_PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.locator('[data-nav="admin-nodes"]').click();
    await page.getByRole('heading', { name: 'Nodes', level: 1 }).waitFor();
    assert.match(page.url(), /#\/admin\/nodes$/);
    assert.equal(await page.locator('[data-nav="admin-nodes"]').getAttribute('aria-current'), 'page');
    await page.locator('[data-table=nodes] [data-empty=nodes]').waitFor();
  });

  it('checks the form in the browser before asking the server', async () => {
    await page.getByRole('button', { name: 'Add node' }).click();
    const d = dialog();
    await d.getByLabel('Name', { exact: true }).fill('Node One');
    await d.getByLabel('Engine address').fill(world.docker);
    await d.locator('[data-action=add-node]').click();
    assert.match(await d.locator('[role=alert]').textContent(), /lower-case/);

    // A tcp:// engine asks for the three PEMs.
    await d.getByLabel('Name', { exact: true }).fill('node1');
    assert.ok(await d.locator('[data-tls]').isHidden(), 'no TLS fields for a unix socket');
    await d.getByLabel('Engine address').fill('tcp://127.0.0.1:2376');
    await d.locator('[data-tls]').waitFor({ state: 'visible' });
    assert.ok(await d.getByLabel('CA certificate (PEM)').isVisible());
    assert.ok(await d.getByLabel('Read the client key from a file').isVisible());
    await d.locator('[data-action=add-node]').click();
    assert.match(await d.locator('[role=alert]').textContent(), /needs the CA certificate, the client certificate and the client key/);

    // A declared GPU without a device file.
    await d.getByLabel('Engine address').fill(world.docker);
    await d.getByRole('button', { name: 'Add GPU' }).click();
    await d.getByLabel('GPU 0 model').fill(MODEL);
    await d.getByLabel('GPU 0 memory in MiB').fill(String(MEMORY_MIB));
    await d.locator('[data-action=add-node]').click();
    assert.match(await d.locator('[role=alert]').textContent(), /GPU 0: name at least one device file/);
    await d.getByRole('button', { name: 'Remove GPU 0' }).click();
    await d.getByRole('button', { name: 'Cancel' }).click();
    await d.waitFor({ state: 'detached' });
    assert.deepEqual((await api.get('/api/v1/nodes')).json.items, [], 'nothing reached the server');
  });

  it('adds node1 with four declared GPUs and sees it listed', async () => {
    await openAdd();
    const d = dialog();
    await d.getByLabel('Name', { exact: true }).fill('node1');
    await d.getByLabel('Engine address').fill(world.docker);
    await d.getByLabel('Labels').fill('zone=lab-a\nrack=r12');
    for (let i = 0; i < 4; i++) {
      await d.getByRole('button', { name: 'Add GPU' }).click();
      // A new row starts as a copy of the row above, devices apart.
      if (i === 0) {
        await d.getByLabel('GPU 0 model').fill(MODEL);
        await d.getByLabel('GPU 0 memory in MiB').fill(String(MEMORY_MIB));
      } else {
        assert.equal(await d.getByLabel(`GPU ${i} model`).inputValue(), MODEL);
        assert.equal(await d.getByLabel(`GPU ${i} memory in MiB`).inputValue(), String(MEMORY_MIB));
      }
      await d.getByLabel(`GPU ${i} device files`).fill(world.gpus[i]);
    }
    await shot(page, 'nodes-add');
    await submitAndClose(d, 'add-node');

    const r = row('node1');
    await r.waitFor();
    assert.equal((await r.locator('[data-field=url]').textContent()).trim(), world.docker);
    assert.equal(await r.locator('[data-gpu-count]').getAttribute('data-gpu-count'), '4');
    assert.match(await r.locator('[data-field=gpus]').textContent(), /NVIDIA A100-SXM4-80GB/);
    assert.match(await r.locator('[data-field=gpus]').textContent(), /Simulated/);
    assert.match(await r.textContent(), /zone=lab-a/);
    assert.equal(await page.locator('[data-empty=nodes]').count(), 0);
  });

  it('sees node1 come up without a reload, with its capacity and versions', async () => {
    const r = row('node1');
    await until(async () => (await stateOf('node1')) === 'up', 'node1 to be up', 15000);
    assert.equal((await r.locator('[data-state]').first().textContent()).trim(), 'Up');
    assert.match((await r.locator('[data-field=ncpu]').textContent()).trim(), /^\d+$/);
    assert.match((await r.locator('[data-field=memory]').textContent()).trim(), /^[\d.,]+ GiB$/);
    await r.locator('[data-version=engine]').waitFor();
    assert.match(await r.locator('[data-version=engine]').textContent(), /^Docker \d/);
    await shot(page, 'nodes-up');
  });

  it('shows node1’s four GPUs, each marked simulated, in its detail', async () => {
    const r = row('node1');
    const toggle = r.locator('[data-action=details]');
    // A node just added is shown opened; the toggle closes and reopens it.
    if ((await toggle.getAttribute('aria-expanded')) === 'true') {
      await toggle.click();
      await detail('node1').waitFor({ state: 'hidden' });
    }
    await toggle.click();
    assert.equal(await toggle.getAttribute('aria-expanded'), 'true');
    const d = detail('node1');
    await d.waitFor({ state: 'visible' });
    const gpus = d.locator('[data-table=gpus] tbody tr[data-gpu]');
    await until(async () => (await gpus.count()) === 4, 'four GPU rows');
    for (let i = 0; i < 4; i++) {
      const g = d.locator(`tr[data-gpu="${i}"]`);
      assert.equal((await g.locator('[data-simulated]').textContent()).trim(), 'Simulated');
      assert.match(await g.textContent(), /NVIDIA A100-SXM4-80GB/);
      assert.match(await g.textContent(), /80 GiB/);
      assert.match(await g.getAttribute('data-uuid'), /^GPU-/);
      assert.equal((await g.locator('[data-devices]').textContent()).trim(), world.gpus[i]);
    }
    assert.equal(await d.locator('[data-discovered]').count(), 0);
    assert.match(await d.locator('[data-prop=labels]').textContent(), /rack=r12/);
    assert.match(await d.locator('[data-prop=engine_version]').textContent(), /\d/);
    // The detail stays open across refreshes.
    await sleep(5500);
    assert.ok(await d.isVisible(), 'the detail is still open after a refresh');
    await shot(page, 'nodes-detail');
  });

  it('shows the server’s error for an engine it cannot reach, in the dialog', async () => {
    await openAdd();
    const d = dialog();
    await d.getByLabel('Name', { exact: true }).fill('bad-node');
    await d.getByLabel('Engine address').fill(BAD_URL);
    await d.locator('[data-action=add-node]').click();
    const alert = d.locator('[role=alert]');
    await alert.waitFor();
    const text = await alert.textContent();
    assert.match(text, /could not reach the engine at 'unix:\/\/\/nonexistent\.sock'/);
    assert.match(text, / — \S/, 'the hint follows the message');
    await until(async () => !(await d.locator('[data-action=add-node]').isDisabled()), 'the form to be usable again');
    await shot(page, 'nodes-bad-url');
    await d.getByRole('button', { name: 'Cancel' }).click();
    await d.waitFor({ state: 'detached' });
    assert.equal(await row('bad-node').count(), 0);
    assert.deepEqual((await api.get('/api/v1/nodes')).json.items.map((n) => n.name), ['node1']);
  });

  it('adds an engine over tcp:// with TLS client certificates read from files', async () => {
    await openAdd();
    const d = dialog();
    await d.getByLabel('Name', { exact: true }).fill('node1-tls');
    await d.getByLabel('Engine address').fill(world.tls.url);
    await d.locator('[data-tls]').waitFor({ state: 'visible' });
    await d.getByLabel('Read the CA certificate from a file').setInputFiles(world.tls.ca);
    await d.getByLabel('Read the client certificate from a file').setInputFiles(world.tls.cert);
    await d.getByLabel('Read the client key from a file').setInputFiles(world.tls.key);
    await until(async () => (await d.getByLabel('Client key (PEM)').inputValue()).includes('PRIVATE KEY'), 'the key file to be read');
    assert.match(await d.getByLabel('CA certificate (PEM)').inputValue(), /BEGIN CERTIFICATE/);
    await submitAndClose(d, 'add-node');
    await row('node1-tls').waitFor();
    await until(async () => (await stateOf('node1-tls')) === 'up', 'node1-tls to be up', 15000);
    assert.match(await row('node1-tls').locator('[data-field=url]').textContent(), /TLS$/);
    // no declared GPUs: discovery runs nvidia-smi there (the stand-in reports
    // two A100s and "CUDA Version: 12.4"), and the page follows
    await until(async () => (await row('node1-tls').locator('[data-gpu-count]').getAttribute('data-gpu-count')) === '2',
      'the discovered GPUs', 20000);
    const cuda = row('node1-tls').locator('[data-cuda]');
    await until(async () => (await cuda.count()) === 1, 'the discovered CUDA version', 10000);
    assert.equal(await cuda.getAttribute('data-cuda'), '12.4');
    assert.equal(await cuda.getAttribute('data-cuda-source'), 'discovered');
    assert.equal((await cuda.textContent()).trim(), 'CUDA 12.4 discovered');
  });

  it('sets node1-tls’s CUDA version over the discovered one, and clears it back', async () => {
    const id = await row('node1-tls').getAttribute('data-id');
    await rowAction('node1-tls', 'edit');
    let d = dialog();
    await d.waitFor();
    const input = d.getByLabel('CUDA version');
    assert.equal(await input.inputValue(), '', 'empty: discovery’s version is in force');
    assert.equal(await input.getAttribute('placeholder'), '12.4');
    assert.match(await d.textContent(), /GPU discovery read 12\.4/);
    // checked in the browser first
    await input.fill('twelve');
    await d.locator('[data-action=save-node]').click();
    await d.locator('[role=alert]').waitFor();
    assert.match(await d.locator('[role=alert]').textContent(), /CUDA version such as 12\.4/);
    await input.fill('12.8');
    await submitAndClose(d, 'save-node');
    const cuda = row('node1-tls').locator('[data-cuda]');
    await until(async () => (await cuda.getAttribute('data-cuda')) === '12.8', 'the admin’s CUDA version');
    assert.equal(await cuda.getAttribute('data-cuda-source'), 'admin');
    assert.equal((await cuda.textContent()).trim(), 'CUDA 12.8 set by admin');
    let n = (await api.get(`/api/v1/nodes/${id}`)).json;
    assert.deepEqual([n.cuda_version, n.cuda_source, n.cuda_discovered], ['12.8', 'admin', '12.4']);
    // the detail tells both (a node added in the page has its detail open)
    const toggle = row('node1-tls').locator('[data-action=details]');
    if ((await toggle.getAttribute('aria-expanded')) !== 'true') await toggle.click();
    const prop = detail('node1-tls').locator('[data-prop=cuda_version]');
    await prop.waitFor();
    assert.match((await prop.textContent()).trim(), /^CUDA 12\.8 set by admin\s*discovered: CUDA 12\.4$/);
    await shot(page, 'nodes-cuda');

    // cleared: back to what discovery read
    await rowAction('node1-tls', 'edit');
    d = dialog();
    await d.waitFor();
    assert.equal(await d.getByLabel('CUDA version').inputValue(), '12.8');
    await d.getByLabel('CUDA version').fill('');
    await submitAndClose(d, 'save-node');
    await until(async () => (await cuda.getAttribute('data-cuda-source')) === 'discovered', 'the discovered CUDA version again');
    assert.equal(await cuda.getAttribute('data-cuda'), '12.4');
    n = (await api.get(`/api/v1/nodes/${id}`)).json;
    assert.deepEqual([n.cuda_version, n.cuda_source], ['12.4', 'discovered']);

    // Removed elsewhere: the row goes at the next refresh.
    assert.equal((await api.del(`/api/v1/nodes/${id}`)).status, 204);
    await row('node1-tls').waitFor({ state: 'detached', timeout: 12000 });
  });

  it('edits node1’s labels, keeping its declared GPUs', async () => {
    await rowAction('node1', 'edit');
    const d = dialog();
    await d.waitFor();
    assert.equal(await d.getByLabel('Labels').inputValue(), 'rack=r12\nzone=lab-a');
    assert.equal(await d.getByLabel('GPU 3 device files').inputValue(), world.gpus[3]);
    await d.getByLabel('Labels').fill('zone=lab-b');
    await submitAndClose(d, 'save-node');
    await until(async () => /zone=lab-b/.test(await row('node1').textContent()), 'the new label');
    assert.doesNotMatch(await row('node1').textContent(), /rack=r12/);
    assert.equal(await row('node1').locator('[data-gpu-count]').getAttribute('data-gpu-count'), '4');
  });

  it('drains, cordons and activates node1', async () => {
    await rowAction('node1', 'drain');
    await until(async () => (await stateOf('node1')) === 'draining', 'node1 to be draining');
    assert.equal((await row('node1').locator('[data-state]').first().textContent()).trim(), 'Draining');

    await rowAction('node1', 'cordon');
    await until(async () => (await stateOf('node1')) === 'cordoned', 'node1 to be cordoned');
    assert.equal((await row('node1').locator('[data-state]').first().textContent()).trim(), 'Cordoned');
    // The menu offers what the node is not.
    await row('node1').locator('[data-action=row-menu]').click();
    await row('node1').locator('[data-action=cordon]').waitFor({ state: 'visible' });
    assert.ok(await row('node1').locator('[data-action=cordon]').isDisabled());
    assert.ok(!(await row('node1').locator('[data-action=activate]').isDisabled()));
    await page.keyboard.press('Escape');
    await row('node1').locator('[data-action=cordon]').waitFor({ state: 'hidden' });
    assert.equal((await api.get('/api/v1/nodes')).json.items[0].admin_state, 'cordoned');

    await rowAction('node1', 'activate');
    await until(async () => (await stateOf('node1')) === 'up', 'node1 to be up again');
  });

  it('follows a change made elsewhere without a reload', async () => {
    const id = await row('node1').getAttribute('data-id');
    const r = await api.patch(`/api/v1/nodes/${id}`, { state: 'cordoned' });
    assert.equal(r.status, 200, r.text);
    await until(async () => (await stateOf('node1')) === 'cordoned', 'the page to show the cordon', 12000);
  });

  it('shows the page in Chinese', async () => {
    await page.locator('[data-lang-switch]').selectOption('zh-CN');
    await page.getByRole('heading', { name: '节点', level: 1 }).waitFor();
    await row('node1').waitFor();
    assert.equal((await page.locator('[data-nav="admin-nodes"]').textContent()).trim(), '节点');
    assert.equal((await row('node1').locator('[data-state]').first().textContent()).trim(), '已封锁');
    await row('node1').locator('[data-action=details]').click();
    await detail('node1').locator('[data-simulated]').first().waitFor();
    assert.equal((await detail('node1').locator('[data-simulated]').first().textContent()).trim(), '模拟');
    await shot(page, 'nodes-zh');
    await page.locator('[data-lang-switch]').selectOption('en');
    await page.getByRole('heading', { name: 'Nodes', level: 1 }).waitFor();
  });

  it('removes node1 after a confirmation', async () => {
    await row('node1').waitFor();
    await rowAction('node1', 'remove');
    const d = dialog();
    await d.waitFor();
    assert.match(await d.textContent(), /node1/);
    await d.locator('[data-action=confirm]').click();
    await row('node1').waitFor({ state: 'detached' });
    await page.locator('[data-table=nodes] [data-empty=nodes]').waitFor();
    assert.deepEqual((await api.get('/api/v1/nodes')).json.items, []);
  });

  it('keeps the page to admins', async () => {
    const r = await api.post('/api/v1/users', { username: 'e2e-nodes-student', role: 'student', password: 'student-pass-1' });
    assert.equal(r.status, 201, r.text);
    await page.locator('#user-menu-button').click();
    await page.locator('[data-action=logout]').click();
    await page.getByRole('heading', { name: 'Sign in' }).waitFor();
    await page.getByLabel('Username', { exact: true }).fill('e2e-nodes-student');
    await page.getByLabel('Password', { exact: true }).fill('student-pass-1');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.locator('[data-nav="home"]').waitFor({ state: 'visible' });
    assert.equal(await page.locator('[data-nav="admin-nodes"]').count(), 0);
    await page.goto(`${srv.base}/#/admin/nodes`);
    await page.locator('[data-forbidden]').waitFor();
    assert.equal(await page.locator('[data-table=nodes]').count(), 0);
  });

  it('raised no uncaught error and no policy violation in the page', () => {
    assert.deepEqual(pageErrors, []);
  });
});
