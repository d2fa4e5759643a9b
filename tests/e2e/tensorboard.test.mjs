// tensorboard.test.mjs — the Files page's TensorBoard button in Chromium
// (issue 12, item 9): hidden while the admin has not set a TensorBoard image,
// shown on a home folder once it is (never on a dot-folder); a refusal from
// the server is shown with its reason and the button comes back (before, the
// handler touched the click event's currentTarget after an await, threw, and
// the reason was lost with the button left disabled); and a click that works
// takes the student to the new TensorBoard instance.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { world, cleanup, env } from '../integration/instances_lib.mjs';
import { launch, shot } from './browser.mjs';

describe('TensorBoard button on the Files page', () => {
  let w, browser, page, tb;
  const pageErrors = [];

  before(async () => {
    w = await world({ node2: false });
    const img = await w.admin.post('/api/v1/images', {
      reference: env.GPUCLOUD_WORLD_TENSORBOARD_IMAGE, registry_id: w.registry.id, display_name: 'TensorBoard (stand-in)',
      framework: 'tensorboard', default_cmd: ['sh', '-c', 'exec python3 -m http.server 6006 --bind 0.0.0.0 --directory "$GPUCLOUD_LOGDIR"'],
      app_ports: [{ name: 'tensorboard', port: 6006 }],
    });
    assert.equal(img.status, 201, img.text);
    tb = img.json;
    const u = await w.admin.post('/api/v1/users', { username: 'tess', role: 'student', password: 'tess-pass-1' });
    assert.equal(u.status, 201, u.text);
    const home = join(w.srv.dir, 'data/home/tess');
    for (const d of ['runs/exp1', '.cache/x']) mkdirSync(join(home, d), { recursive: true });
    browser = await launch();
    const context = await browser.newContext({ locale: 'en-US', viewport: { width: 1360, height: 900 } });
    page = await context.newPage();
    page.setDefaultTimeout(20000);
    page.on('pageerror', (e) => pageErrors.push(e.message));
    await page.goto(`${w.srv.base}/#/login`);
    await page.getByLabel('Username', { exact: true }).fill('tess');
    await page.getByLabel('Password', { exact: true }).fill('tess-pass-1');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.locator('[data-nav="files"]').click();
    await page.locator('tr[data-file="runs"]').waitFor();
  });

  after(async () => {
    await browser?.close();
    if (w) { cleanup(w.srv); await w.srv.stop(); }
  });

  it('is not offered while no TensorBoard image is set', async () => {
    assert.equal(await page.locator('[data-action=tensorboard]').count(), 0);
  });

  it('is offered on home folders once the admin sets the image, never on dot-folders', async () => {
    const r = await w.admin.req('PUT', '/api/v1/settings/tensorboard_image', { value: tb.reference });
    assert.equal(r.status, 200, r.text);
    await page.reload();
    await page.locator('tr[data-file="runs"] [data-action=tensorboard]').waitFor();
    await page.locator('[data-action=show-hidden]').check();
    await page.locator('tr[data-file=".cache"]').waitFor();
    assert.equal(await page.locator('tr[data-file=".cache"] [data-action=tensorboard]').count(), 0);
    await page.locator('[data-action=show-hidden]').uncheck();
  });

  it("shows the server's reason when it refuses, and the button works again", async () => {
    const q = await w.admin.req('PUT', '/api/v1/quotas/defaults', { role: 'student', max_tensorboards: 0 });
    assert.equal(q.status, 200, q.text);
    const btn = page.locator('tr[data-file="runs"] [data-action=tensorboard]');
    await btn.click();
    const err = page.locator('.msg-error');
    await err.waitFor();
    assert.match(await err.innerText(), /TensorBoard/i);
    assert.equal(await btn.isEnabled(), true);
    await shot(page, 'files-tensorboard-refused');
    assert.deepEqual(pageErrors, []);
  });

  it('starts a TensorBoard on the folder and opens its instance', async () => {
    const q = await w.admin.req('PUT', '/api/v1/quotas/defaults', { role: 'student', max_tensorboards: 2 });
    assert.equal(q.status, 200, q.text);
    await page.locator('tr[data-file="runs"] [data-action=tensorboard]').click();
    await page.waitForURL(/#\/instance\?id=\d+/);
    assert.deepEqual(pageErrors, []);
  });
});
