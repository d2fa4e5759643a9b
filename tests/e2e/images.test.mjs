// images.test.mjs — registries and the image catalog end to end, in a real
// headless Chromium against a real gpucloudd, the world's registry and both
// engines: the admin adds the world registry with its key in Administration
// → Registries (the key is never shown again), tests the credentials (the
// registry accepts), adds a registry with a wrong key (refused, with the
// registry's words); in Administration → Images adds a catalog image, pulls
// it to both nodes and watches each node go to Ready (docker image inspect
// agrees), then pulls an image through the wrong-key registry and sees each
// node fail with the registry's message.  Then: a reference the registry
// lacks is refused (and added unchecked, marked Unverified); the registry is
// browsed (repository → tags, newest first) and a tag added in one click;
// its row says a newer tag exists and adds it in one click; the Jupyter
// preset fills the form; the page in Chinese.
//
// Needs the world (var/world/env); fails without it, never skips.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServer, ADMIN_PASSWORD, Client } from '../lib/server.mjs';
import { launch, shot } from './browser.mjs';

const env = process.env;
const KEY = env.GPUCLOUD_WORLD_REGISTRY_KEY;
const REG = env.GPUCLOUD_WORLD_REGISTRY;
const sock = (n) => env[`GPUCLOUD_WORLD_DOCKER${n}`];

function dk(n, ...args) {
  return execFileSync('docker', ['--config', join(env.GPUCLOUD_WORLD_DIR, 'dockercfg'), '-H', sock(n), ...args],
    { encoding: 'utf8', stdio: ['pipe', 'pipe', 'pipe'] });
}
const present = (n, ref) => { try { dk(n, 'image', 'inspect', ref); return true; } catch { return false; } };

// A one-file image pushed under a unique name, absent from both engines.
let seq = 0;
function pushTestImage() {
  const ref = `${REG}/itest/e2e-images-${process.pid}-${Date.now()}-${seq++}:v1`;
  const dir = mkdtempSync(join(tmpdir(), 'gcimg-'));
  writeFileSync(join(dir, 'hello.txt'), `image ${ref}\n`);
  const tar = execFileSync('tar', ['-C', dir, '-cf', '-', 'hello.txt']);
  rmSync(dir, { recursive: true, force: true });
  execFileSync('docker', ['-H', sock(1), 'import', '--change', 'ENV CUDA_VERSION=12.1.0', '-', ref], { input: tar, stdio: ['pipe', 'pipe', 'pipe'] });
  dk(1, 'push', '-q', ref);
  dk(1, 'rmi', ref);
  return ref;
}

// One tiny image pushed under every tag given, in a repository of its own.
function pushSeries(repo, tags) {
  const dir = mkdtempSync(join(tmpdir(), 'gcser-'));
  writeFileSync(join(dir, 'hello.txt'), `series ${repo}\n`);
  const tar = execFileSync('tar', ['-C', dir, '-cf', '-', 'hello.txt']);
  rmSync(dir, { recursive: true, force: true });
  const first = `${REG}/${repo}:${tags[0]}`;
  execFileSync('docker', ['-H', sock(1), 'import', '-', first], { input: tar, stdio: ['pipe', 'pipe', 'pipe'] });
  for (const t of tags) {
    if (t !== tags[0]) dk(1, 'tag', first, `${REG}/${repo}:${t}`);
    dk(1, 'push', '-q', `${REG}/${repo}:${t}`);
  }
  for (const t of tags) dk(1, 'rmi', `${REG}/${repo}:${t}`);
}

describe('registries and the image catalog in the browser', () => {
  let srv, browser, page, api;
  const pageErrors = [];
  const dialog = () => page.locator('dialog[open]');

  async function submitAndClose(d, action) {
    await d.locator(`[data-action=${action}]`).click();
    const alert = d.locator('[role=alert]');
    await Promise.race([d.waitFor({ state: 'detached', timeout: 15000 }), alert.waitFor({ timeout: 15000 })]);
    if (await d.count()) assert.fail(`the dialog reported: ${(await alert.textContent()).trim()}`);
  }

  before(async () => {
    for (const k of ['GPUCLOUD_WORLD_DOCKER1', 'GPUCLOUD_WORLD_DOCKER2', 'GPUCLOUD_WORLD_REGISTRY_KEY'])
      assert.ok(env[k], `${k} is not set: source var/world/env`);
    srv = await startServer({ args: ['--node-check-interval=1'] });
    api = new Client(srv.base);
    assert.equal((await api.login('admin', ADMIN_PASSWORD)).status, 200);
    for (const n of [1, 2]) {
      const r = await api.post('/api/v1/nodes', { name: `node${n}`, url: sock(n) });
      assert.equal(r.status, 201, r.text);
    }
    browser = await launch();
    const context = await browser.newContext({ locale: 'en-US', viewport: { width: 1360, height: 900 } });
    page = await context.newPage();
    page.setDefaultTimeout(10000);
    page.on('pageerror', (e) => pageErrors.push(e.message));
  });

  after(async () => {
    if (page) { try { await shot(page, 'images-final'); } catch { /* gone */ } }
    await browser?.close();
    await srv?.stop();
  });

  it('adds the registry with its key, which is never shown again, and tests it', async () => {
    await page.goto(`${srv.base}/#/login`);
    await page.getByLabel('Username', { exact: true }).fill('admin');
    await page.getByLabel('Password', { exact: true }).fill(ADMIN_PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.locator('[data-nav="admin-registries"]').click();
    await page.getByRole('heading', { name: 'Registries', level: 1 }).waitFor();
    await page.locator('[data-table=registries] [data-empty=registries]').waitFor();

    await page.locator('[data-action=open-create-registry]').click();
    let d = dialog();
    await d.getByLabel('Name', { exact: true }).fill('World');
    await d.getByLabel('Server', { exact: true }).fill(REG);
    await d.locator('[data-action=save-registry]').click();
    assert.match(await d.locator('[role=alert]').textContent(), /lower-case/);
    await d.getByLabel('Name', { exact: true }).fill('world');
    await d.getByLabel('Username', { exact: true }).fill('$oauthtoken');
    await d.getByLabel('Password or API key', { exact: true }).fill(KEY);
    await submitAndClose(d, 'save-registry');
    const row = page.locator('[data-table=registries] tr[data-registry=world]');
    await row.waitFor();
    assert.equal(await row.locator('[data-has-password]').getAttribute('data-has-password'), 'true');
    assert.ok(!(await page.content()).includes(KEY), 'the key is on the page');

    await row.locator('[data-action=test]').click();
    const out = row.locator('[data-test-result][data-ok]');
    await out.waitFor({ timeout: 15000 });
    assert.equal(await out.getAttribute('data-ok'), 'true');
    assert.match(await out.textContent(), /Login Succeeded/i);

    // editing shows no password and keeps it when left empty
    await row.locator('[data-action=edit]').click();
    d = dialog();
    assert.equal(await d.getByLabel('Password or API key', { exact: true }).inputValue(), '');
    await submitAndClose(d, 'save-registry');

    await page.locator('[data-action=open-create-registry]').click();
    d = dialog();
    await d.getByLabel('Name', { exact: true }).fill('wrong');
    await d.getByLabel('Server', { exact: true }).fill(REG);
    await d.getByLabel('Username', { exact: true }).fill('$oauthtoken');
    await d.getByLabel('Password or API key', { exact: true }).fill('not-the-key-0000');
    await submitAndClose(d, 'save-registry');
    const bad = page.locator('[data-table=registries] tr[data-registry=wrong]');
    await bad.locator('[data-action=test]').click();
    const badOut = bad.locator('[data-test-result][data-ok]');
    await badOut.waitFor({ timeout: 15000 });
    assert.equal(await badOut.getAttribute('data-ok'), 'false');
    assert.match(await badOut.textContent(), /401|unauthorized/i);
  });

  let ref;
  it('adds a catalog image and pulls it to both nodes with progress to Ready', async () => {
    ref = pushTestImage();
    await page.locator('[data-nav="admin-images"]').click();
    await page.getByRole('heading', { name: 'Image catalog', level: 1 }).waitFor();
    await page.locator('[data-table=images] [data-empty=images]').waitFor();
    await page.locator('[data-action=open-create-image]').click();
    const d = dialog();
    await d.getByLabel('Image reference', { exact: true }).fill('Not a ref');
    await d.locator('[data-action=save-image]').click();
    assert.match(await d.locator('[role=alert]').textContent(), /image reference/);
    await d.getByLabel('Image reference', { exact: true }).fill(ref);
    await d.getByLabel('Display name', { exact: true }).fill('E2E image');
    await d.getByLabel('Framework', { exact: true }).fill('busybox');
    await d.getByLabel('App ports', { exact: true }).fill('jupyter:8888');
    await submitAndClose(d, 'save-image');
    const row = page.locator(`[data-table=images] tr[data-image="${ref}"]`);
    await row.waitFor();
    assert.equal(await row.locator('.image-node[data-state=absent]').count(), 2);

    await row.locator('[data-action=pull]').click();
    const p = dialog();
    assert.equal(await p.locator('[data-pull-node]').count(), 2);
    await submitAndClose(p, 'start-pull');
    await page.waitForFunction((r) => {
      const tr = document.querySelector(`[data-table=images] tr[data-image="${r}"]`);
      return tr && tr.querySelectorAll('.image-node[data-state=present]').length === 2;
    }, ref, { timeout: 30000 });
    assert.ok(present(1, ref) && present(2, ref), 'docker image inspect on both nodes');
    assert.match(await row.locator('[data-field=cuda]').textContent(), /CUDA 12\.1/);
  });

  it('a pull through the wrong key shows the registry\'s message on each node', async () => {
    const ref2 = pushTestImage();
    const wrong = (await api.get('/api/v1/registries')).json.items.find((r) => r.name === 'wrong');
    // added unchecked: the registry would refuse the key at once (409)
    const c = await api.post('/api/v1/images', { reference: ref2, registry_id: wrong.id, display_name: 'Wrong key', verify: false });
    assert.equal(c.status, 201, c.text);
    const row = page.locator(`[data-table=images] tr[data-image="${ref2}"]`);
    await row.waitFor({ timeout: 15000 });
    await row.locator('[data-action=pull]').click();
    await submitAndClose(dialog(), 'start-pull');
    await page.waitForFunction((r) => {
      const tr = document.querySelector(`[data-table=images] tr[data-image="${r}"]`);
      return tr && tr.querySelectorAll('.image-node[data-state=failed]').length === 2;
    }, ref2, { timeout: 30000 });
    const err = await row.locator('.image-node[data-state=failed] [data-error]').first().textContent();
    assert.match(err, /unauthorized: authentication required/);
    assert.ok(!present(1, ref2) && !present(2, ref2), 'nothing cached');
    assert.ok(!(await page.content()).includes(KEY));
    assert.deepEqual(pageErrors, []);
  });

  it('checks references, browses the registry, adds a tag and a newer tag in one click each', async () => {
    const repo = `itest/e2e-series-${process.pid}-${Date.now()}`;
    pushSeries(repo, ['24.08-py3', '24.09-py3']);
    await page.goto(`${srv.base}/#/admin/images`);
    await page.getByRole('heading', { name: 'Image catalog', level: 1 }).waitFor();
    // a tag the registry lacks is refused with the registry's answer
    await page.locator('[data-action=open-create-image]').click();
    let d = dialog();
    await d.getByLabel('Image reference', { exact: true }).fill(`${REG}/${repo}:99.0-py3`);
    await d.locator('[data-action=save-image]').click();
    const alert = d.locator('[role=alert]');
    await alert.waitFor();
    assert.match(await alert.textContent(), /not found in registry/);
    // the Jupyter preset fills the framework and the app port
    await d.locator('[data-action=preset-jupyter]').click();
    assert.equal(await d.getByLabel('Framework', { exact: true }).inputValue(), 'jupyter');
    assert.equal(await d.getByLabel('App ports', { exact: true }).inputValue(), 'jupyter:8888');
    await shot(page, 'images-form-jupyter');
    // unchecked, it is added and marked unverified
    await d.locator('#image-verify').uncheck();
    await submitAndClose(d, 'save-image');
    const ghost = page.locator(`[data-table=images] tr[data-image="${REG}/${repo}:99.0-py3"]`);
    await ghost.locator('[data-field=unverified]').waitFor();
    assert.equal((await ghost.locator('[data-field=unverified]').textContent()).trim(), 'Unverified');

    // browse: registry → repository → tags, newest first; add 24.08 in one click
    await page.locator('[data-action=browse-registry]').click();
    d = dialog();
    await d.locator('#browse-registry').selectOption({ label: `world (${REG})` });
    await d.locator(`[data-repository="${repo}"]`).click();
    await d.locator('[data-table=tags] tr[data-tag]').first().waitFor();
    assert.deepEqual(await d.locator('[data-table=tags] tr[data-tag]').evaluateAll((rs) => rs.map((r) => r.dataset.tag)), ['24.09-py3', '24.08-py3']);
    await shot(page, 'images-browse');
    await d.locator('[data-table=tags] tr[data-tag="24.08-py3"] [data-action=add-tag]').click();
    await d.locator('[data-table=tags] tr[data-tag="24.08-py3"] [data-in-catalog]').waitFor();
    await d.locator('.actions').getByRole('button', { name: 'Close' }).click();

    // its row says a newer tag exists; one click adds it
    const row = page.locator(`[data-table=images] tr[data-image="${REG}/${repo}:24.08-py3"]`);
    await row.locator('[data-newer="24.09-py3"]').waitFor({ timeout: 15000 });
    assert.match(await row.locator('[data-newer]').textContent(), /Newer tag available: 24\.09-py3/);
    await shot(page, 'images-newer');
    await row.locator('[data-action=add-newer]').click();
    const added = page.locator(`[data-table=images] tr[data-image="${REG}/${repo}:24.09-py3"]`);
    await added.waitFor({ timeout: 15000 });
    assert.equal(await added.locator('[data-field=unverified]').count(), 0, 'checked against the registry: verified');
    await row.locator('[data-newer]').waitFor({ state: 'detached', timeout: 15000 });

    // the same page in Chinese
    const zh = await browser.newContext({ locale: 'zh-CN', viewport: { width: 1360, height: 900 } });
    try {
      const p = await zh.newPage();
      p.on('pageerror', (e) => pageErrors.push(e.message));
      await p.goto(`${srv.base}/#/login`);
      await p.locator('input[name=username]').fill('admin');
      await p.locator('input[name=password]').fill(ADMIN_PASSWORD);
      await p.locator('[data-action=login]').click();
      await p.locator('[data-nav="admin-images"]').click();
      await p.locator(`[data-table=images] tr[data-image="${REG}/${repo}:99.0-py3"] [data-field=unverified]`).waitFor();
      assert.equal((await p.locator(`[data-table=images] tr[data-image="${REG}/${repo}:99.0-py3"] [data-field=unverified]`).textContent()).trim(), '未验证');
      assert.equal((await p.locator('[data-action=browse-registry]').textContent()).trim(), '浏览仓库');
      await shot(p, 'images-zh');
      await p.locator('[data-action=open-create-image]').click();
      await p.locator('dialog[open] [data-action=preset-jupyter]').waitFor();
      assert.equal((await p.locator('dialog[open] [data-action=preset-jupyter]').textContent()).trim(), 'Jupyter 预设');
      await shot(p, 'images-form-zh');
    } finally {
      await zh.close();
    }
    assert.deepEqual(pageErrors, []);
  });
});
