// job_templates.test.mjs — job templates end to end in a real headless
// Chromium against a real gpucloudd and the world's engine: an admin finds
// the shipped templates under Administration → Job templates, creates one
// with typed hyperparameters (a bad schema is refused and its row marked),
// edits it and disables/enables it; a student picks it on the submit form,
// gets typed fields and a live command preview, is stopped by an
// out-of-range value (and, after the admin tightens the bound meanwhile, by
// the server's refusal shown under the field), submits an edited value and
// sees the job succeed with the expanded command. Both pages in Chinese.
// No uncaught error or CSP violation.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { startServer, ADMIN_PASSWORD, Client, psql } from '../lib/server.mjs';
import { launch, shot } from './browser.mjs';

const env = process.env;
const STUDENT = { username: 'e2e-tmpl-student', password: 'student-pass-1' };
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

describe('job templates in the browser', () => {
  let srv, browser, admin, student, api, cluster, templateId;
  const pageErrors = [];

  async function newPage(locale = 'en-US') {
    const context = await browser.newContext({ locale, viewport: { width: 1360, height: 900 } });
    const page = await context.newPage();
    page.setDefaultTimeout(15000);
    page.on('pageerror', (e) => pageErrors.push(e.message));
    page.on('console', (m) => { if (/Content Security Policy/i.test(m.text())) pageErrors.push(m.text()); });
    return page;
  }

  async function signIn(page, username, password) {
    await page.goto(`${srv.base}/#/login`);
    // Chromium drops the loads in flight with ERR_NETWORK_CHANGED when a
    // network interface appears on this machine (other tests' containers
    // make bridges): load the page again, once
    const form = page.getByLabel('Username', { exact: true });
    await form.waitFor({ timeout: 10000 }).catch(() => page.reload());
    await page.getByLabel('Username', { exact: true }).fill(username);
    await page.getByLabel('Password', { exact: true }).fill(password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.locator('[data-nav="home"]').waitFor();
  }

  before(async () => {
    for (const k of ['GPUCLOUD_WORLD_DOCKER1', 'GPUCLOUD_WORLD_NODE1_GPUS', 'GPUCLOUD_WORLD_IMAGE', 'GPUCLOUD_WORLD_REGISTRY'])
      assert.ok(env[k], `${k} is not set: run the tests through make test (it starts the world)`);
    srv = await startServer({ args: ['--node-check-interval=1', '--sched-interval-ms=200', '--instance-tick-ms=100', '--instance-stop-grace=1'] });
    cluster = psql(srv.db.url, 'SELECT cluster_id FROM cluster_identity');
    api = new Client(srv.base);
    assert.equal((await api.login('admin', ADMIN_PASSWORD)).status, 200);
    const gpus = env.GPUCLOUD_WORLD_NODE1_GPUS.split(',').map((d) => ({ model: 'NVIDIA A100-SXM4-80GB', memory_mib: 81920, devices: [d] }));
    const n = await api.post('/api/v1/nodes', { name: 'node1', url: env.GPUCLOUD_WORLD_DOCKER1, gpus });
    assert.equal(n.status, 201, n.text);
    await until(async () => (await api.get(`/api/v1/nodes/${n.json.id}`)).json.state === 'up', 'node1 up');
    const reg = await api.post('/api/v1/registries', { name: 'world', server: env.GPUCLOUD_WORLD_REGISTRY, username: env.GPUCLOUD_WORLD_REGISTRY_USER, password: env.GPUCLOUD_WORLD_REGISTRY_KEY, personal: true });
    assert.equal(reg.status, 201, reg.text);
    const img = await api.post('/api/v1/images', { reference: env.GPUCLOUD_WORLD_IMAGE, registry_id: reg.json.id, display_name: 'BusyBox trainer', framework: 'none' });
    assert.equal(img.status, 201, img.text);
    const u = await api.post('/api/v1/users', { username: STUDENT.username, role: 'student', password: STUDENT.password });
    assert.equal(u.status, 201, u.text);
    browser = await launch();
    admin = await newPage();
    student = await newPage();
  });

  after(async () => {
    if (student) { try { await shot(student, 'job-templates-final'); } catch { /* browser gone */ } }
    await browser?.close();
    await srv?.stop();
    try {
      const ids = execFileSync('docker', ['-H', env.GPUCLOUD_WORLD_DOCKER1, 'ps', '-aq', '--filter', `label=gpucloud.cluster=${cluster}`], { encoding: 'utf8' }).trim();
      if (ids) execFileSync('docker', ['-H', env.GPUCLOUD_WORLD_DOCKER1, 'rm', '-f', ...ids.split('\n')]);
    } catch { /* engine gone */ }
  });

  const row = (name) => admin.locator(`[data-table=job-templates] tr[data-template="${name}"]`);
  async function menu(name, action) {
    await row(name).locator('[data-action=row-menu]').click();
    const item = row(name).locator(`.menu [data-action=${action}]`);
    await item.waitFor({ state: 'visible' });
    await item.click();
  }

  it('shows the shipped templates to an admin', async () => {
    await signIn(admin, 'admin', ADMIN_PASSWORD);
    await admin.locator('[data-nav="admin-job-templates"]').click();
    await admin.getByRole('heading', { name: 'Job templates', level: 1 }).waitFor();
    await row('pytorch').waitFor();
    assert.match(await row('pytorch').textContent(), /PyTorch \(single node\)/);
    assert.match(await row('pytorch').locator('[data-field=command]').textContent(), /python3 \{script\} \{hyperparameters\}/);
    assert.match(await row('pytorch-ddp').locator('[data-field=kind]').textContent(), /2 containers/);
    assert.match(await row('script').textContent(), /Shell script/);
    await shot(admin, 'admin-job-templates');
  });

  it('creates a template with typed hyperparameters, refusing a bad schema first', async () => {
    await admin.locator('[data-action=open-create-template]').click();
    const dlg = admin.locator('dialog [data-form=create-template]');
    await dlg.waitFor();
    await dlg.locator('[data-field=name]').fill('echo-lr');
    await dlg.locator('[data-field=title]').fill('Echo LR');
    await dlg.locator('[data-field=kind]').selectOption('script');
    await dlg.locator('[data-field=command]').fill(['sh', '-c', 'echo "args: $*"; echo "lr=$GPUCLOUD_HP_LR"', 'x', '{hyperparameters}'].join('\n'));
    await dlg.locator('[data-action=add-hp]').click();
    const r0 = dlg.locator('[data-hp-row]').nth(0);
    await r0.locator('[data-hp-col=name]').fill('lr');
    await r0.locator('[data-hp-col=type]').selectOption('float');
    await r0.locator('[data-hp-col=default]').fill('0.01');
    await r0.locator('[data-hp-col=min]').fill('5');
    await r0.locator('[data-hp-col=max]').fill('1');
    await r0.locator('[data-hp-col=help]').fill('learning rate');
    await dlg.locator('[data-action=add-hp]').click();
    const r1 = dlg.locator('[data-hp-row]').nth(1);
    await r1.locator('[data-hp-col=name]').fill('steps');
    await r1.locator('[data-hp-col=type]').selectOption('int');
    await r1.locator('[data-hp-col=default]').fill('2');
    await r1.locator('[data-hp-col=min]').fill('1');
    await r1.locator('[data-hp-col=max]').fill('10');
    await dlg.locator('[data-action=add-hp]').click();
    const r2 = dlg.locator('[data-hp-row]').nth(2);
    await r2.locator('[data-hp-col=name]').fill('opt');
    await r2.locator('[data-hp-col=type]').selectOption('choice');
    await r2.locator('[data-hp-col=choices]').fill('adam, sgd');
    await r2.locator('[data-hp-col=default]').fill('adam');
    await dlg.locator('[data-field=cpu]').fill('200');
    await dlg.locator('[data-field=memory]').fill('64');
    await dlg.locator('[data-action=save-template]').click();
    // min above max: the server names the row
    await dlg.getByText("the max of 'lr' is below its min").waitFor();
    await until(async () => /row-error/.test(await r0.getAttribute('class') || ''), 'the marked row');
    await shot(admin, 'admin-job-template-editor');
    await r0.locator('[data-hp-col=min]').fill('0.0001');
    await dlg.locator('[data-action=save-template]').click();
    await row('echo-lr').waitFor();
    assert.match(await row('echo-lr').textContent(), /Echo LR/);
    assert.match(await row('echo-lr').locator('[data-field=command]').textContent(), /lr, steps, opt/);
    const got = (await api.get('/api/v1/job-templates')).json.items.find((x) => x.name === 'echo-lr');
    templateId = got.id;
    assert.deepEqual(got.command, ['sh', '-c', 'echo "args: $*"; echo "lr=$GPUCLOUD_HP_LR"', 'x', '{hyperparameters}']);
    assert.deepEqual(got.hyperparameters, [
      { name: 'lr', type: 'float', default: 0.01, min: 0.0001, max: 1, help: 'learning rate' },
      { name: 'steps', type: 'int', default: 2, min: 1, max: 10 },
      { name: 'opt', type: 'choice', default: 'adam', choices: ['adam', 'sgd'] },
    ]);
    assert.equal(got.cpu_millis, 200);
  });

  it('edits, disables and enables it', async () => {
    await row('echo-lr').locator('[data-action=edit]').click();
    const dlg = admin.locator('dialog [data-form=edit-template]');
    await dlg.waitFor();
    assert.equal(await dlg.locator('[data-hp-row]').count(), 3);
    await dlg.locator('[data-field=title]').fill('Echo learning rate');
    await dlg.locator('[data-action=save-template]').click();
    await until(async () => /Echo learning rate/.test(await row('echo-lr').textContent()), 'the new title');
    await menu('echo-lr', 'disable');
    await until(async () => (await row('echo-lr').locator('[data-enabled]').getAttribute('data-enabled')) === 'false', 'disabled');
    await menu('echo-lr', 'enable');
    await until(async () => (await row('echo-lr').locator('[data-enabled]').getAttribute('data-enabled')) === 'true', 'enabled');
    const got = (await api.get(`/api/v1/job-templates/${templateId}`)).json;
    assert.equal(got.title, 'Echo learning rate');
    assert.equal(got.hyperparameters.length, 3, 'the schema survived the edits');
  });

  it('lets a student submit from it with an edited hyperparameter and see it succeed', async () => {
    await signIn(student, STUDENT.username, STUDENT.password);
    await student.goto(`${srv.base}/#/jobs/new`);
    await student.getByRole('heading', { name: 'Submit a job', level: 1 }).waitFor();
    await until(async () => (await student.locator('[data-field=template] option[data-template=echo-lr]').count()) === 1, 'the template in the picker');
    await student.locator('[data-field=template]').selectOption({ label: 'Echo learning rate' });
    await student.locator('[data-hp=lr]').waitFor();
    assert.equal(await student.locator('[data-field=command]').isVisible(), false, 'the template brings the command');
    assert.equal(await student.locator('[data-hp=lr]').inputValue(), '0.01');
    assert.equal(await student.locator('[data-field=cpu]').inputValue(), '200');
    assert.match(await student.locator('[data-command-preview]').textContent(), /x --lr 0\.01 --steps 2 --opt adam$/);
    await student.locator('[data-field=name]').fill('echo-1');
    // out of range: stopped here, under the field
    await student.locator('[data-hp=lr]').fill('5');
    await student.locator('[data-action=submit-job]').click();
    await student.locator('[data-hp-error=lr]').getByText('Must be at most 1.').waitFor();
    // the admin tightens the bound meanwhile: the server's refusal shows there
    const cur = (await api.get(`/api/v1/job-templates/${templateId}`)).json;
    const hps = cur.hyperparameters.map((s) => (s.name === 'lr' ? { ...s, max: 0.5 } : s));
    const put = await api.req('PUT', `/api/v1/job-templates/${templateId}`, { name: cur.name, title: cur.title, kind: cur.kind, command: cur.command, hyperparameters: hps, cpu_millis: 200, mem_mib: 64 });
    assert.equal(put.status, 200, put.text);
    await student.locator('[data-hp=lr]').fill('0.8');
    await student.locator('[data-hp=opt]').selectOption({ label: 'sgd' });
    await student.locator('[data-action=submit-job]').click();
    await student.locator('[data-hp-error=lr]').getByText("hyperparameter 'lr' must be at most 0.5").waitFor();
    await shot(student, 'job-new-template-error');
    await student.locator('[data-hp=lr]').fill('0.05');
    await student.locator('[data-hp=steps]').fill('3');
    assert.match(await student.locator('[data-command-preview]').textContent(), /x --lr 0\.05 --steps 3 --opt sgd$/);
    await shot(student, 'job-new-template');
    await student.locator('[data-action=submit-job]').click();
    await student.waitForURL(/#\/job\?id=\d+$/);
    await student.locator('h1 [data-state=succeeded]').waitFor({ timeout: 30000 });
    await until(async () => /args: --lr 0\.05 --steps 3 --opt sgd/.test(await student.locator('[data-log]').textContent()), 'the log');
    assert.match(await student.locator('[data-log]').textContent(), /lr=0\.05/);
    assert.equal((await student.locator('[data-fact=template]').textContent()).trim(), 'Echo learning rate');
    const jobs = (await api.get('/api/v1/jobs?user=' + STUDENT.username)).json.items;
    assert.equal(jobs.length, 1);
    assert.equal(jobs[0].template, 'echo-lr');
    assert.deepEqual(jobs[0].hyperparameters, { lr: 0.05, steps: 3, opt: 'sgd' });
  });

  it('shows both pages in Chinese', async () => {
    await student.locator('[data-lang-switch]').selectOption('zh-CN');
    await student.goto(`${srv.base}/#/jobs/new?template=${templateId}`);
    await student.getByRole('heading', { name: '提交作业', level: 1 }).waitFor();
    await student.locator('[data-hp=lr]').waitFor();
    await student.locator('[data-hp=lr]').fill('-1');
    await student.locator('[data-action=submit-job]').click();
    await student.locator('[data-hp-error=lr]').getByText('不能小于 0.0001。').waitFor();
    await shot(student, 'job-new-template-zh');
    await student.locator('[data-lang-switch]').selectOption('en');
    await admin.locator('[data-lang-switch]').selectOption('zh-CN');
    await admin.getByRole('heading', { name: '作业模板', level: 1 }).waitFor();
    assert.equal((await admin.locator('[data-nav="admin-job-templates"]').textContent()).trim(), '作业模板');
    await row('echo-lr').locator('[data-action=edit]').click();
    await admin.locator('dialog [data-form=edit-template]').waitFor();
    await shot(admin, 'admin-job-templates-zh');
    await admin.keyboard.press('Escape');
    await admin.locator('[data-lang-switch]').selectOption('en');
  });

  it('raised no page error or CSP violation', () => {
    assert.deepEqual(pageErrors, []);
  });
});
