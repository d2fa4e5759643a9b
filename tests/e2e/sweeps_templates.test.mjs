// sweeps_templates.test.mjs — a sweep from a job template in a real headless
// Chromium against a real gpucloud: the submit form shows the members field
// only with a pool (with its "per member" notes) and links a template to the
// sweep builder; there the template's hyperparameters are grid rows
// prefilled with their defaults, showing type and range; a value out of the
// schema is refused under its row before sending, a value the server
// refuses (the template changed meanwhile) is shown under its row too; a
// 3×2 grid then makes 6 runs with the template's completed
// hyperparameters. Both languages; no uncaught error or CSP violation.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, ADMIN_PASSWORD, Client } from '../lib/server.mjs';
import { launch, shot } from './browser.mjs';

const env = process.env;
const STUDENT = { username: 'e2e-tsweep-student', password: 'student-pass-1' };
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

const TEMPLATE = {
  name: 'sweep-echo', title: 'Sweep echo', kind: 'script', description: 'prints its hyperparameters',
  command: ['sh', '-c', 'echo "args: $*"', 'run', '{hyperparameters}'],
  hyperparameters: [
    { name: 'lr', type: 'float', default: 0.5, min: 0, max: 1 },
    { name: 'bs', type: 'choice', default: 32, choices: [16, 32, 64] },
    { name: 'epochs', type: 'int', default: 1, min: 1, max: 10 },
  ],
  cpu_millis: 100, mem_mib: 32, max_runtime_s: 600, allow_overrides: true,
};

describe('a sweep from a template in the browser', () => {
  let srv, browser, page, api, tpl;
  const pageErrors = [];

  before(async () => {
    for (const k of ['GPUCLOUD_WORLD_IMAGE', 'GPUCLOUD_WORLD_REGISTRY'])
      assert.ok(env[k], `${k} is not set: run the tests through make test (it starts the world)`);
    srv = await startServer({ args: ['--sched-interval-ms=200'] });
    api = new Client(srv.base);
    assert.equal((await api.login('admin', ADMIN_PASSWORD)).status, 200);
    const reg = await api.post('/api/v1/registries', { name: 'world', server: env.GPUCLOUD_WORLD_REGISTRY, username: env.GPUCLOUD_WORLD_REGISTRY_USER, password: env.GPUCLOUD_WORLD_REGISTRY_KEY, personal: true });
    assert.equal(reg.status, 201, reg.text);
    const img = await api.post('/api/v1/images', { reference: env.GPUCLOUD_WORLD_IMAGE, registry_id: reg.json.id, display_name: 'BusyBox trainer', framework: 'none' });
    assert.equal(img.status, 201, img.text);
    const u = await api.post('/api/v1/users', { username: STUDENT.username, role: 'student', password: STUDENT.password });
    assert.equal(u.status, 201, u.text);
    const p = await api.post('/api/v1/pools', { name: 'duo', sharing: 'exclusive' });
    assert.equal(p.status, 201, p.text);
    const t = await api.post('/api/v1/job-templates', TEMPLATE);
    assert.equal(t.status, 201, t.text);
    tpl = t.json;
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

  const row = (name) => page.locator('[data-param]').filter({ has: page.locator(`[data-param-schema="${name}"]`) });

  it('shows members only with a pool, and links a template to the sweep builder', async () => {
    await page.goto(`${srv.base}/#/login`);
    await page.getByLabel('Username', { exact: true }).fill(STUDENT.username);
    await page.getByLabel('Password', { exact: true }).fill(STUDENT.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.locator('[data-nav="jobs"]').waitFor();
    await page.goto(`${srv.base}/#/jobs/new`);
    await until(async () => (await page.locator('[data-field=template] option[data-template=sweep-echo]').count()) === 1, 'the template in the picker');
    assert.ok(await page.locator('[data-field=members]').isHidden());
    await page.locator('[data-field=pool]').selectOption('duo');
    assert.ok(await page.locator('[data-field=members]').isVisible());
    assert.equal(await page.locator('[data-per-member]:visible').count(), 3);
    assert.equal(await page.locator('[data-field=members]').getAttribute('max'), '16');
    await shot(page, 'job-new-members');
    await page.locator('[data-field=pool]').selectOption('');
    assert.ok(await page.locator('[data-field=members]').isHidden());
    await page.locator('[data-field=template]').selectOption(String(tpl.id));
    const link = page.locator('[data-action=sweep-template]');
    assert.equal(await link.textContent(), 'Sweep over these hyperparameters');
    await link.click();
    await page.waitForURL(new RegExp(`#/sweeps/new\\?template=${tpl.id}$`));
  });

  it('prefills the template\'s hyperparameters as rows, refuses values out of the schema under their row', async () => {
    await page.getByRole('heading', { name: 'New sweep', level: 1 }).waitFor();
    await until(async () => (await page.locator('[data-param]').count()) === 3, 'three template rows');
    assert.ok(await page.locator('[data-field=command]').isHidden(), 'the template supplies the command');
    assert.deepEqual(await page.locator('[data-field=param-name]').evaluateAll((els) => els.map((e) => e.value)), ['lr', 'bs', 'epochs']);
    assert.deepEqual(await page.locator('[data-field=param-values]').evaluateAll((els) => els.map((e) => e.value)), ['0.5', '32', '1']);
    assert.equal(await row('lr').locator('[data-param-schema]').textContent(), 'number, at least 0, at most 1');
    assert.equal(await row('bs').locator('[data-param-schema]').textContent(), 'choice, one of 16, 32, 64');
    await page.locator('[data-field=name]').fill('tgrid');
    await row('lr').locator('[data-field=param-values]').fill('0.1, 0.2, 1.5');
    await row('bs').locator('[data-field=param-values]').fill('16, 48');
    await page.locator('[data-action=submit-sweep]').click();
    await row('lr').locator('[data-param-error]:visible').waitFor();
    assert.equal(await row('lr').locator('[data-param-error]').textContent(), '1.5: Must be at most 1.');
    assert.equal(await row('bs').locator('[data-param-error]').textContent(), '48: Pick one of the choices.');
    assert.equal(await row('epochs').locator('[data-param-error]').isHidden(), true);
    await shot(page, 'sweep-new-template-errors');
    // the template changes meanwhile: the server refuses, named under the row
    const put = await api.req('PUT', `/api/v1/job-templates/${tpl.id}`, { ...TEMPLATE, hyperparameters: [{ ...TEMPLATE.hyperparameters[0], default: 0.1, max: 0.15 }, ...TEMPLATE.hyperparameters.slice(1)] });
    assert.equal(put.status, 200, put.text);
    await row('lr').locator('[data-field=param-values]').fill('0.1, 0.2, 0.01');
    await row('bs').locator('[data-field=param-values]').fill('16, 64');
    assert.match(await page.locator('[data-run-count]').textContent(), /makes 6 runs/);
    await page.locator('[data-action=submit-sweep]').click();
    await until(async () => /at most 0\.15/.test(await row('lr').locator('[data-param-error]').textContent()), 'the server\'s refusal under lr');
    assert.equal(await row('bs').locator('[data-param-error]').isHidden(), true);
    assert.equal(await page.locator('[data-sweep-page]').count(), 0);
  });

  it('makes a 3×2 grid of runs with the template\'s completed hyperparameters', async () => {
    await row('lr').locator('[data-field=param-values]').fill('0.1, 0.05, 0.01');
    await page.locator('[data-action=submit-sweep]').click();
    await page.waitForURL(/#\/sweep\?id=\d+$/);
    const id = Number(page.url().split('=').pop());
    await until(async () => (await page.locator('[data-table=runs] tbody tr').count()) === 6, '6 runs');
    assert.deepEqual(await page.locator('[data-table=runs] tbody td[data-hp=lr]').allTextContents(), ['0.1', '0.1', '0.05', '0.05', '0.01', '0.01']);
    assert.deepEqual(await page.locator('[data-table=runs] tbody td[data-hp=epochs]').allTextContents(), ['1', '1', '1', '1', '1', '1']);
    const s = (await api.get(`/api/v1/sweeps/${id}`)).json;
    assert.deepEqual(s.jobs[1].hyperparameters, { lr: 0.1, bs: 64, epochs: 1 });
    const j = (await api.get(`/api/v1/jobs/${s.jobs[1].id}`)).json;
    assert.equal(j.template_id, tpl.id);
    assert.deepEqual(j.command, ['sh', '-c', 'echo "args: $*"', 'run', '--lr', '0.1', '--bs', '64', '--epochs', '1']);
    await shot(page, 'sweep-detail-template');
    await api.post(`/api/v1/sweeps/${id}/cancel`, {});
  });

  it('shows the template sweep builder and the submit form in Chinese', async () => {
    await page.goto(`${srv.base}/#/sweeps/new?template=${tpl.id}`);
    await page.locator('[data-lang-switch]').selectOption('zh-CN');
    await page.getByRole('heading', { name: '新建超参数搜索', level: 1 }).waitFor();
    await until(async () => (await page.locator('[data-param]').count()) === 3, 'three template rows');
    assert.match(await row('bs').locator('[data-param-schema]').textContent(), /可选值：16, 32, 64/);
    await shot(page, 'sweep-new-template-zh');
    await page.goto(`${srv.base}/#/jobs/new?template=${tpl.id}`);
    await page.locator('[data-action=sweep-template]').filter({ hasText: '对这些超参数进行扫描' }).waitFor();
    await page.locator('[data-field=pool]').selectOption('duo');
    await page.locator('[data-field=members]').waitFor();
    await shot(page, 'job-new-members-zh');
    await page.locator('[data-lang-switch]').selectOption('en');
  });

  it('raised no page error or CSP violation', () => {
    assert.deepEqual(pageErrors, []);
  });
});
