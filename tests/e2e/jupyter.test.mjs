// jupyter.test.mjs — a student opens Jupyter (Debian's python3-notebook in
// the world's Jupyter image, on a real engine) through the proxy on its own
// origin, creates a notebook, runs print(6*7) and sees 42 (the kernel's
// websocket goes through the proxy's tunnel), then opens the web terminal,
// runs a command and sees its output under a prompt that names the user.  The
// image runs its own command: a catalog entry with framework 'jupyter' opens
// signed in with no token argument (the platform sets JUPYTER_TOKEN).  Also: the app origin never gets the
// API's cookie, and signing in from an app's link leads back to the app.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch, shot } from './browser.mjs';
import { world, mkUser, waitState, cleanup, env } from '../integration/instances_lib.mjs';

describe('Jupyter through the proxy, and the web terminal', () => {
  let w, alice, inst, route, browser, context, page, origin;
  const pageErrors = [];
  const consoleLines = [];   // what the page logged: shown when a step times out

  before(async () => {
    assert.ok(env.GPUCLOUD_WORLD_JUPYTER_IMAGE, 'GPUCLOUD_WORLD_JUPYTER_IMAGE is not set: run deploy/world.sh up');
    w = await world({ node2: false, args: ['--proxy-recheck=1', `--tensorboard-image=${env.GPUCLOUD_WORLD_TENSORBOARD_IMAGE}`] });
    origin = `http://localhost:${w.srv.port}`;
    const img = await w.admin.post('/api/v1/images', {
      reference: env.GPUCLOUD_WORLD_JUPYTER_IMAGE, registry_id: w.registry.id, display_name: 'Jupyter',
      // the image's own command (no token argument): the platform gives a
      // Jupyter entry JUPYTER_TOKEN = the token the proxy sends
      framework: 'jupyter', description: 'Jupyter Notebook (Debian)',
      app_ports: [{ name: 'jupyter', port: 8888 }],
    });
    assert.equal(img.status, 201, img.text);
    const tbi = await w.admin.post('/api/v1/images', {
      reference: env.GPUCLOUD_WORLD_TENSORBOARD_IMAGE, registry_id: w.registry.id, display_name: 'TensorBoard (stand-in)',
      default_cmd: ['sh', '-c', 'exec python3 -m http.server 6006 --directory "$GPUCLOUD_LOGDIR"'],
      app_ports: [{ name: 'tensorboard', port: 6006 }],
    });
    assert.equal(tbi.status, 201, tbi.text);
    alice = await mkUser(w, 'alice');
    const c = await alice.c.post('/api/v1/instances', { name: 'nb', image_id: img.json.id, cpu_millis: 1000, mem_mib: 768 });
    assert.equal(c.status, 202, c.text);
    inst = await waitState(alice.c, c.json.id, 'running', 120000);
    const routes = await alice.c.get(`/api/v1/routes?instance_id=${inst.id}`);
    assert.equal(routes.status, 200, routes.text);
    route = routes.json.items.find((r) => r.port_name === 'jupyter');
    assert.ok(route, `no jupyter route: ${routes.text}`);
    browser = await launch();
    context = await browser.newContext({ locale: 'en-US', viewport: { width: 1280, height: 900 } });
    page = await context.newPage();
    page.setDefaultTimeout(20000);
    page.on('pageerror', (e) => pageErrors.push(e.message));
    page.on('console', (m) => consoleLines.push(`${m.type()}: ${m.text()}`));
    page.on('requestfailed', (q) => consoleLines.push(`request failed: ${q.method()} ${q.url()} ${q.failure()?.errorText}`));
  });

  after(async () => {
    if (page) { try { await shot(page, 'jupyter-final'); } catch { /* gone */ } }
    await browser?.close();
    cleanup(w?.srv);
    await w?.srv?.stop();
  });

  it('signs in from the app\'s own link and lands in Jupyter', async () => {
    // not signed in: the app sends the browser to log in, then back through the handshake
    await page.goto(`http://${route.id}.localhost:${w.srv.port}/tree`);
    await page.waitForURL(/#\/login\?open=/);
    await shot(page, 'jupyter-login');
    // Chromium drops every load in flight with ERR_NETWORK_CHANGED when a
    // network interface appears on this machine, and the instance's start
    // has just made bridges and veths here (a fresh-clone CI run showed it:
    // the page's scripts failed to load, so no form came). A person's browser
    // elsewhere never sees our bridges: load the page again, once.
    const form = page.getByLabel('Username', { exact: true });
    await form.waitFor({ timeout: 10000 }).catch(async (e) => {
      if (!consoleLines.some((l) => l.includes('ERR_NETWORK_CHANGED'))) throw e;
      consoleLines.push('(reloaded after ERR_NETWORK_CHANGED)');
      await page.reload();
    }).catch(() => { /* reported below */ });
    // the sign-in form; when it does not come, say what the page shows instead
    await form.waitFor({ timeout: 20000 }).catch(async (e) => {
      const html = await page.evaluate(() => document.getElementById('app')?.innerHTML ?? document.body.innerHTML).catch((x) => String(x));
      throw new Error(`no sign-in form at ${page.url()}: ${e.message}\napp: ${String(html).slice(0, 800)}\n` +
        `page errors: ${JSON.stringify(pageErrors)}\nconsole: ${consoleLines.slice(-20).join('\n')}`);
    });
    await page.getByLabel('Username', { exact: true }).fill('alice');
    await page.getByLabel('Password', { exact: true }).fill('alice-pass-1');
    await page.getByRole('button', { name: 'Sign in' }).click();
    // Jupyter may still be starting: the proxy's page retries by itself
    await page.waitForURL(new RegExp(`^http://${route.id}\\.localhost:${w.srv.port}/tree`), { timeout: 30000 });
    await page.locator('#notebook_list').waitFor({ timeout: 60000 });
    const cookies = await context.cookies(`http://${route.id}.localhost:${w.srv.port}/`);
    assert.ok(!cookies.some((c) => c.name === 'gc_session'), 'the API cookie never reaches the app origin');
    const gc = cookies.find((c) => c.name === 'gc_route');
    assert.equal(gc.httpOnly, true);
    assert.equal(gc.sameSite, 'Lax');
  });

  it('creates a notebook, runs a cell and shows its output (kernel websocket)', async () => {
    const made = await page.evaluate(async () => {
      const r = await fetch('/api/contents', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ type: 'notebook' }) });
      return { status: r.status, body: await r.json() };
    });
    assert.equal(made.status, 201, JSON.stringify(made));
    await page.goto(`http://${route.id}.localhost:${w.srv.port}/notebooks/${made.body.path}`);
    await page.locator('#kernel_indicator_icon.kernel_idle_icon').waitFor({ timeout: 60000 });
    await page.locator('.cell .CodeMirror').first().click();
    await page.keyboard.type('print(6*7)');
    await page.keyboard.press('Shift+Enter');
    const out = page.locator('.output_subarea').first();
    await out.waitFor({ timeout: 30000 });
    assert.equal((await out.textContent()).trim(), '42');
    await shot(page, 'jupyter-cell');
  });

  it('opens the web terminal from the instance page and runs a command', async () => {
    await page.goto(`${origin}/#/instance?id=${inst.id}`);
    const open = page.locator(`[data-route-buttons="${inst.id}"] [data-action=open-jupyter]`).first();
    await open.waitFor();
    assert.equal(await open.getAttribute('href'), route.url);
    assert.equal((await open.textContent()).trim(), 'Open Jupyter');
    // the button opens Jupyter in a new tab, signed in through the handshake
    const [tab] = await Promise.all([context.waitForEvent('page'), open.click()]);
    await tab.waitForURL(new RegExp(`^http://${route.id}\\.localhost:${w.srv.port}/`));
    await tab.locator('#notebook_list').waitFor({ timeout: 30000 });
    await tab.close();
    await page.locator(`[data-route-buttons="${inst.id}"] [data-action=terminal]`).first().click();
    await page.waitForURL(/#\/terminal\?instance=/);
    await page.locator('[data-terminal-status="open"]').waitFor({ timeout: 20000 });
    await page.locator('[data-terminal] .xterm-helper-textarea').focus();
    await page.keyboard.type('echo "hello-$((6*7))-$(id -u)"');
    await page.keyboard.press('Enter');
    const rows = page.locator('[data-terminal] .xterm-rows');
    const uid = String(200000 + Number(alice.id));
    await page.waitForFunction((want) => document.querySelector('[data-terminal] .xterm-rows')?.textContent.includes(want),
      `hello-42-${uid}`, { timeout: 15000 });
    assert.match(await rows.textContent(), new RegExp(`hello-42-${uid}`));
    // bash's prompt names the user (the container's /etc/passwd has the uid),
    // not "I have no name!", and the shell starts in the user's home
    const prompt = await rows.textContent();
    assert.doesNotMatch(prompt, /I have no name!/);
    assert.match(prompt, /alice@[\w.-]+:~\$/);
    await shot(page, 'jupyter-terminal');
    assert.deepEqual(pageErrors, []);
  });

  it('starts a TensorBoard from a folder and opens it (stand-in: http.server over the folder)', async () => {
    assert.equal((await alice.c.post('/api/v1/files/home/runs', { op: 'mkdir' })).status, 201);
    assert.equal((await alice.c.req('PUT', '/api/v1/files/home/runs/events.out.tfevents.7', 'x', { 'content-type': 'application/octet-stream' })).status, 201);
    await page.goto(`${origin}/#/files?area=home`);
    await page.locator('tr[data-file=runs] [data-action=tensorboard]').click();
    await page.waitForURL(/#\/instance\?id=\d+/);
    const open = page.locator('[data-action=open-tensorboard]').first();
    await open.waitFor({ timeout: 90000 });
    assert.equal((await open.textContent()).trim(), 'Open TensorBoard');
    const [tab] = await Promise.all([context.waitForEvent('page'), open.click()]);
    // the app's own origin; its "starting…" page refreshes itself, so wait for the
    // navigation to commit rather than for a load that a refresh can replace
    await tab.waitForURL(/\.localhost:\d+\//, { waitUntil: 'commit', timeout: 60000 });
    await tab.waitForFunction(() => document.body && /events\.out\.tfevents\.7/.test(document.body.textContent), null, { timeout: 30000 })
      .catch(async () => { await tab.reload(); await tab.getByText('events.out.tfevents.7').waitFor({ timeout: 20000 }); });
    await tab.close();
  });
});
