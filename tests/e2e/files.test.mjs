// files.test.mjs — the file manager end to end, in a real headless Chromium
// against a real gpucloudd: a student drops a text file on the page (a drop
// event carrying a DataTransfer built in the page), sees its progress and
// the usage bar, previews it, downloads it and gets the same bytes, drops a
// 9 MiB file that goes up as resumable parts while the network drops one
// part (sent again), deletes a file and restores it from the trash; an
// admin sees that quotas are enforced in software (no kernel quotas here).
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, mkdirSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { startServer, ADMIN_PASSWORD, Client } from '../lib/server.mjs';
import { launch, shot } from './browser.mjs';

const TEXT = 'epoch,loss\n1,0.93\n2,0.71\n— 你好 —\n';

describe('file manager', () => {
  let srv, browser, page, dataRoot;
  const pageErrors = [];

  before(async () => {
    srv = await startServer({ args: ['--scrypt-ln=10', '--storage-scan-interval=1'] });
    dataRoot = join(srv.dir, 'data');
    const api = new Client(srv.base);
    assert.equal((await api.login('admin', ADMIN_PASSWORD)).status, 200);
    assert.equal((await api.post('/api/v1/users', { username: 'stu', role: 'student', password: 'student-pass-1' })).status, 201);
    browser = await launch();
    const context = await browser.newContext({ locale: 'en-US', viewport: { width: 1360, height: 900 }, acceptDownloads: true });
    page = await context.newPage();
    page.setDefaultTimeout(15000);
    page.on('pageerror', (e) => pageErrors.push(e.message));
    page.on('console', (m) => { if (/Content Security Policy/i.test(m.text())) pageErrors.push(m.text()); });
    await page.goto(`${srv.base}/#/login`);
    await page.getByLabel('Username', { exact: true }).fill('stu');
    await page.getByLabel('Password', { exact: true }).fill('student-pass-1');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.locator('[data-nav="files"]').click();
    await page.getByRole('heading', { name: 'Files', level: 1 }).waitFor();
  });

  after(async () => {
    if (page) { try { await shot(page, 'files-final'); } catch { /* gone */ } }
    await browser?.close();
    await srv?.stop();
  });

  // Drops files built in the page on the drop zone.
  async function drop(files) {
    await page.evaluate((files) => {
      const dt = new DataTransfer();
      for (const f of files) {
        const bytes = f.fill !== undefined ? new Uint8Array(f.size).map((_, i) => (i * 31 + f.fill) & 255) : new TextEncoder().encode(f.text);
        dt.items.add(new File([bytes], f.name, { type: 'application/octet-stream' }));
      }
      const zone = document.querySelector('[data-dropzone]');
      zone.dispatchEvent(new DragEvent('dragover', { dataTransfer: dt, bubbles: true, cancelable: true }));
      zone.dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
    }, files);
  }

  it('uploads a dropped file with progress and shows the usage bar', async () => {
    await page.locator('[data-table=files] td', { hasText: 'This folder is empty' }).waitFor();
    await drop([{ name: 'train.csv', text: TEXT }]);
    await page.locator('[data-upload="train.csv"][data-done="ok"]').waitFor();
    await page.locator('tr[data-file="train.csv"]').waitFor();
    assert.equal(readFileSync(join(dataRoot, 'home/stu/train.csv'), 'utf8'), TEXT);
    await page.locator('[data-usage-text]', { hasText: 'of 50 GiB used' }).waitFor();
    assert.equal(await page.locator('[data-usage] [role=meter]').count(), 1);
  });

  it('previews the file as a table', async () => {
    await page.locator('[data-preview="train.csv"]').click();
    const d = page.locator('dialog[open]');
    await d.locator('[data-preview-csv]').waitFor();
    assert.deepEqual(await d.locator('tr').allInnerTexts(), ['epoch\tloss', '1\t0.93', '2\t0.71', '— 你好 —']);
    await d.getByRole('button', { name: 'Close' }).click();
  });

  it('downloads the same bytes', async () => {
    const [dl] = await Promise.all([page.waitForEvent('download'), page.locator('[data-download="train.csv"]').click()]);
    const path = await dl.path();
    assert.equal(readFileSync(path, 'utf8'), TEXT);
    assert.equal(dl.suggestedFilename(), 'train.csv');
  });

  it('sends a large file in parts and resends the part the network dropped', async () => {
    let dropped = 0;
    await page.route('**/api/v1/uploads/*/parts/1', async (route) => {
      if (dropped++ === 0) await route.abort('connectionreset');
      else await route.continue();
    });
    await drop([{ name: 'weights.bin', size: 9 * 1024 * 1024 + 5, fill: 7 }]);
    await page.locator('[data-upload="weights.bin"][data-done="ok"]').waitFor({ timeout: 30000 });
    await page.unroute('**/api/v1/uploads/*/parts/1');
    assert.ok(dropped >= 2, 'the dropped part was sent again');
    const want = new Uint8Array(9 * 1024 * 1024 + 5).map((_, i) => (i * 31 + 7) & 255);
    const got = readFileSync(join(dataRoot, 'home/stu/weights.bin'));
    assert.equal(createHash('sha256').update(got).digest('hex'), createHash('sha256').update(want).digest('hex'));
    await page.locator('tr[data-file="weights.bin"]').waitFor();
  });

  it('deletes a file to the trash and restores it', async () => {
    await page.locator('[data-delete="train.csv"]').click();
    await page.locator('dialog[open] [data-action=confirm]').click();
    await page.locator('tr[data-file="train.csv"]').waitFor({ state: 'detached' });
    await page.locator('[data-action=trash]').click();
    await page.locator('tr[data-trash="train.csv"]').waitFor();
    await page.locator('[data-restore="train.csv"]').click();
    await page.locator('tr[data-trash="train.csv"]').waitFor({ state: 'detached' });
    await page.locator('[data-action=trash]').click();
    await page.locator('tr[data-file="train.csv"]').waitFor();
    assert.equal(readFileSync(join(dataRoot, 'home/stu/train.csv'), 'utf8'), TEXT);
    assert.deepEqual(pageErrors, []);
  });
  it('hides dot-folders by default, with a toggle that is remembered, and never shows "null"', async () => {
    mkdirSync(join(dataRoot, 'home/stu/.local/share'), { recursive: true });
    mkdirSync(join(dataRoot, 'home/stu/.cache'), { recursive: true });
    mkdirSync(join(dataRoot, 'home/stu/runs'), { recursive: true });
    await page.reload();
    await page.locator('tr[data-file="runs"]').waitFor();
    assert.equal(await page.locator('tr[data-file=".local"]').count(), 0);
    assert.equal(await page.locator('tr[data-file=".cache"]').count(), 0);
    await page.locator('[data-hidden-count]', { hasText: '2 hidden' }).waitFor();
    assert.doesNotMatch(await page.locator('#app').innerText(), /\bnull\b/);
    await page.locator('[data-action=show-hidden]').check();
    await page.locator('tr[data-file=".local"]').waitFor();
    await page.reload();
    await page.locator('tr[data-file=".cache"]').waitFor(); // the choice is remembered
    await shot(page, 'files-home-hidden-shown');
    await page.locator('[data-action=show-hidden]').uncheck();
    await page.locator('tr[data-file=".local"]').waitFor({ state: 'detached' });
    // no TensorBoard button where the admin has not set TensorBoard up
    assert.equal(await page.locator('[data-action=tensorboard]').count(), 0);
  });

  it("marks a failed upload as failed: a red bar and the server's reason", async () => {
    const name = `${'n'.repeat(300)}.txt`; // longer than a file name may be
    await drop([{ name, text: 'x' }]);
    const li = page.locator(`[data-upload="${name}"][data-done="error"]`);
    await li.waitFor();
    assert.equal(await li.locator('progress.progress-failed').count(), 1);
    const color = await li.locator('.upload-error').evaluate((e) => getComputedStyle(e).color);
    assert.equal(color, 'rgb(209, 58, 58)'); // --danger
    assert.notEqual((await li.locator('.upload-error').innerText()).trim(), '');
  });

  it("shows the shared area read-only to a student, without write buttons or the home's usage bar", async () => {
    await page.locator('[data-area]').selectOption('shared');
    await page.locator('[data-read-only]:visible').waitFor();
    await page.locator('[data-breadcrumbs]', { hasText: 'Shared' }).waitFor();
    for (const a of ['upload', 'upload-folder', 'mkdir', 'trash']) {
      assert.equal(await page.locator(`[data-action=${a}]`).isVisible(), false, a);
    }
    assert.equal(await page.locator('[data-usage] [role=meter]').count(), 0);
    await shot(page, 'files-shared-readonly');
    assert.deepEqual(pageErrors, []);
  });

  it('tells an admin that quotas are enforced in software on this kernel', async () => {
    const ctx2 = await browser.newContext({ locale: 'en-US' });
    const p2 = await ctx2.newPage();
    await p2.goto(`${srv.base}/#/login`);
    await p2.getByLabel('Username', { exact: true }).fill('admin');
    await p2.getByLabel('Password', { exact: true }).fill(ADMIN_PASSWORD);
    await p2.getByRole('button', { name: 'Sign in' }).click();
    await p2.locator('[data-nav="files"]').click();
    const note = p2.locator('[data-quota-support]', { hasText: 'Kernel project quotas are not available' });
    await note.waitFor();
    assert.match(await note.textContent(), /enforces quotas on every write/);
    await ctx2.close();
  });
});
