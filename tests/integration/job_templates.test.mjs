// job_templates.test.mjs — job templates on the world's real engines: the
// shipped templates; admin create/replace/delete; who may read and write
// (student, teacher, read-only token, CSRF); bad schemas and patterns
// refused naming the field; a submit from a template gets exactly the
// expanded command, its completed hyperparameters and GPUCLOUD_HP_*; bad
// hyperparameters refused naming the field; and a real PyTorch run of
// deploy/examples/jobs/train.py from the shipped template (metric lines in
// the log, checkpoint.pt in the job directory).
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { assertErrorShape, stopClean, call } from '../lib/itest.mjs';
import { world, mkUser, cleanup, sql, eventually, env } from './instances_lib.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const TRAIN_PY = readFileSync(join(ROOT, 'deploy', 'examples', 'jobs', 'train.py'));
const FINAL = ['succeeded', 'failed', 'cancelled', 'lost'];
const T = '/api/v1/job-templates';

async function waitJob(c, id, ms = 60000) {
  let last = null;
  const ok = await eventually(async () => {
    const r = await c.get(`/api/v1/jobs/${id}`);
    last = r.json;
    return r.status === 200 && FINAL.includes(r.json.state);
  }, ms, 200);
  assert.ok(ok, `job ${id} did not end: ${JSON.stringify(last)}`);
  return last;
}

// A template an admin might write: a shell command showing what it got.
const echoTemplate = (over = {}) => ({
  name: 'echo-hp', title: 'Echo hyperparameters', description: 'prints what it gets', kind: 'script',
  command: ['sh', '-c', 'echo "args: $*"; echo "lr=$GPUCLOUD_HP_LR bs=$GPUCLOUD_HP_BATCH_SIZE"; cat hyperparameters.json; echo', '{greeting}', '{hyperparameters}', 'x={hp.lr}'],
  inputs: [{ name: 'greeting', help: 'the first word', default: 'hello', required: true }],
  hyperparameters: [
    { name: 'lr', type: 'float', default: 0.01, min: 0.0001, max: 1, help: 'learning rate' },
    { name: 'batch-size', type: 'int', default: 32, min: 1, max: 1024 },
    { name: 'opt', type: 'choice', default: 'adam', choices: ['adam', 'sgd'] },
    { name: 'note', type: 'string', default: 'a b' },
    { name: 'amp', type: 'bool', default: false },
  ],
  cpu_millis: 200, mem_mib: 64, max_runtime_s: 600,
  ...over,
});

describe('job templates', () => {
  let w, alice, teacher, torchImage;
  before(async () => {
    w = await world({ node2: false });
    alice = await mkUser(w, 'alice');
    teacher = await mkUser(w, 'tess', 'teacher');
    assert.ok(env.GPUCLOUD_WORLD_PYTORCH_IMAGE, 'GPUCLOUD_WORLD_PYTORCH_IMAGE is not set: the world is older than this test');
    const img = await w.admin.post('/api/v1/images', {
      reference: env.GPUCLOUD_WORLD_PYTORCH_IMAGE, registry_id: w.registry.id, display_name: 'PyTorch 1.13 (CPU)',
      framework: 'pytorch', description: 'Debian python3-torch',
    });
    assert.equal(img.status, 201, img.text);
    torchImage = img.json;
  });
  after(async () => { try { cleanup(w?.srv); } finally { await stopClean(w?.srv); } });

  it('ships three templates that everyone signed in reads', async () => {
    const l = await alice.c.get(T);
    assert.equal(l.status, 200, l.text);
    const names = l.json.items.map((x) => x.name).sort();
    assert.deepEqual(names, ['pytorch', 'pytorch-ddp', 'script']);
    const pt = l.json.items.find((x) => x.name === 'pytorch');
    assert.deepEqual(pt.command, ['python3', '{script}', '{hyperparameters}']);
    assert.equal(pt.kind, 'pytorch');
    assert.equal(pt.members, 1);
    assert.equal(pt.image_id, null, 'the user picks the image');
    assert.deepEqual(pt.hyperparameters.map((h) => h.name), ['lr', 'epochs', 'batch-size', 'hidden', 'optimizer', 'seed', 'verbose', 'step-delay']);
    assert.equal(pt.hyperparameters[0].default, 0.01);
    assert.equal(l.json.items.find((x) => x.name === 'pytorch-ddp').members, 2);
    const one = await teacher.c.get(`${T}/${pt.id}`);
    assert.equal(one.status, 200, one.text);
    assert.equal(one.json.title, 'PyTorch (single node)');
    assert.equal((await alice.c.get(`${T}/999999`)).status, 404);
    assert.equal((await alice.c.get(`${T}/abc`)).status, 404);
  });

  it('lets admins create, replace, disable and delete; others only read', async () => {
    const c = await w.admin.post(T, echoTemplate({ name: 'crud', enabled: false }));
    assert.equal(c.status, 201, c.text);
    assert.equal(c.json.enabled, false);
    assert.equal(c.json.hyperparameters[0].min, 0.0001, 'numbers as written');
    const id = c.json.id;
    // a disabled template is an admin's only
    assert.equal((await alice.c.get(`${T}/${id}`)).status, 404);
    assert.ok(!(await alice.c.get(T)).json.items.some((x) => x.id === id));
    assert.ok((await w.admin.get(T)).json.items.some((x) => x.id === id));
    const sub = await alice.c.post('/api/v1/jobs', { name: 'x', template_id: id, image_id: w.image.id });
    assert.equal(sub.status, 404, sub.text);
    assert.equal(sub.json.error.details[0].field, 'template_id');
    // the same name again
    const dup = await w.admin.post(T, echoTemplate({ name: 'crud' }));
    assert.equal(dup.status, 409, dup.text);
    assertErrorShape(dup.json, 'conflict');
    // replace: what the body leaves out is the default again
    const put = await w.admin.req('PUT', `${T}/${id}`, { name: 'crud', title: 'CRUD 2', command: ['true'], enabled: true });
    assert.equal(put.status, 200, put.text);
    assert.equal(put.json.title, 'CRUD 2');
    assert.deepEqual(put.json.hyperparameters, []);
    assert.equal(put.json.enabled, true);
    assert.equal((await alice.c.get(`${T}/${id}`)).status, 200);
    // not an admin: 403 for every change
    for (const u of [alice.c, teacher.c]) {
      assert.equal((await u.post(T, echoTemplate({ name: 'mine' }))).status, 403);
      assert.equal((await u.req('PUT', `${T}/${id}`, { name: 'crud', title: 't', command: ['true'] })).status, 403);
      assert.equal((await u.del(`${T}/${id}`)).status, 403);
    }
    // a read-only admin token reads but does not write
    const tok = await w.admin.post('/api/v1/tokens', { name: 'ro', scopes: ['read'] });
    assert.equal(tok.status, 201, tok.text);
    assert.equal((await call(w.srv.base, 'GET', T, { bearer: tok.json.token })).status, 200);
    const ro = await call(w.srv.base, 'POST', T, { bearer: tok.json.token, body: echoTemplate({ name: 'ro' }) });
    assert.equal(ro.status, 403, ro.text);
    assert.match(ro.json.error.message, /'write' scope/);
    // an expired session reads nothing
    sql(w.srv, `UPDATE sessions SET created_at = now() - interval '1 hour', expires_at = now() - interval '1 second' WHERE user_id = ${teacher.id}`);
    const exp = await teacher.c.get(T);
    assert.equal(exp.status, 401, exp.text);
    sql(w.srv, `UPDATE sessions SET expires_at = now() + interval '1 hour' WHERE user_id = ${teacher.id}`);
    assert.equal((await teacher.c.get(T)).status, 200);
    // a cookie without the CSRF token
    const cookie = w.admin.cookieHeader();
    const nocsrf = await call(w.srv.base, 'DELETE', `${T}/${id}`, { cookie, origin: w.srv.base });
    assert.equal(nocsrf.status, 403, nocsrf.text);
    // delete; a job made from it keeps its command
    const j = await alice.c.post('/api/v1/jobs', { name: 'from-crud', template_id: id, image_id: w.image.id, cpu_millis: 200, mem_mib: 64 });
    assert.equal(j.status, 201, j.text);
    assert.equal(j.json.template, 'crud');
    const d = await w.admin.del(`${T}/${id}`);
    assert.equal(d.status, 204, d.text);
    assert.equal((await w.admin.get(`${T}/${id}`)).status, 404);
    assert.equal((await w.admin.del(`${T}/${id}`)).status, 404);
    const after = await alice.c.get(`/api/v1/jobs/${j.json.id}`);
    assert.equal(after.json.template_id, null);
    assert.deepEqual(after.json.command, ['true']);
    assert.equal(sql(w.srv, `SELECT count(*) FROM audit_log WHERE action LIKE 'job_template.%'`), '3');
  });

  it('refuses bad templates naming the field', async () => {
    const cases = [
      ['bad type', { hyperparameters: [{ name: 'lr', type: 'double' }] }, 'hyperparameters[0].type', /int, float, string, bool or choice/],
      ['default out of range', { hyperparameters: [{ name: 'lr', type: 'float', default: 5, max: 1 }] }, 'hyperparameters[0].default', /at most 1/],
      ['min above max', { hyperparameters: [{ name: 'n', type: 'int', min: 5, max: 1 }] }, 'hyperparameters[0].max', /below its min/],
      ['choice without choices', { hyperparameters: [{ name: 'o', type: 'choice' }] }, 'hyperparameters[0].choices', /choices/],
      ['twice', { hyperparameters: [{ name: 'a', type: 'int' }, { name: 'a', type: 'int' }] }, 'hyperparameters[1].name', /twice/],
      ['unknown key', { hyperparameters: [{ name: 'a', type: 'int', step: 2 }] }, 'hyperparameters[0]', /unknown field 'step'/],
      ['unknown placeholder', { command: ['python3', '{data}'] }, 'command[1]', /\{data\}/],
      ['unknown hp placeholder', { command: ['python3', '--x={hp.nope}'] }, 'command[1]', /no hyperparameter is named 'nope'/],
      ['hyperparameters inside', { command: ['python3', 'x{hyperparameters}'] }, 'command[1]', /whole element/],
      ['unbalanced', { command: ['python3', '{greeting'] }, 'command[1]', /without its '\}'/],
      ['bad input name', { inputs: [{ name: 'Greeting' }], command: ['true'] }, 'inputs[0].name', /lower-case/],
      ['bad name', { name: 'Bad Name' }, 'name', /lower-case/],
      ['bad kind', { kind: 'tensorflow' }, 'kind', /pytorch, pytorch-ddp or script/],
      ['members', { members: 17 }, 'members', /1 to 16/],
      ['cpu', { cpu_millis: 1 }, 'cpu_millis', /10 to 1024000/],
    ];
    for (const [what, over, field, re] of cases) {
      const r = await w.admin.post(T, echoTemplate({ name: 'bad', ...over }));
      assert.equal(r.status, 400, `${what}: ${r.text}`);
      assertErrorShape(r.json, 'invalid');
      assert.equal(r.json.error.details?.[0]?.field, field, `${what}: ${r.text}`);
      assert.match(r.json.error.message, re, what);
    }
    const img = await w.admin.post(T, echoTemplate({ name: 'bad', image_id: 999999 }));
    assert.equal(img.status, 400, img.text);
    assert.equal(img.json.error.details[0].field, 'image_id');
    assert.equal((await w.admin.post(T, { name: 'x', title: 'x' })).status, 400, 'no command');
    assert.equal((await w.admin.post(T, echoTemplate({ name: 'x', surprise: 1 }))).status, 400, 'unknown field');
    assert.equal(sql(w.srv, `SELECT count(*) FROM job_templates WHERE name IN ('bad', 'x')`), '0');
  });

  it('expands the command exactly, fills defaults and gives the hyperparameters as variables', async () => {
    const t = await w.admin.post(T, echoTemplate());
    assert.equal(t.status, 201, t.text);
    const r = await alice.c.post('/api/v1/jobs', {
      name: 'echo', template_id: t.json.id, image_id: w.image.id,
      hyperparameters: { lr: 0.1, amp: true, opt: 'sgd' }, inputs: { greeting: 'hi' },
    });
    assert.equal(r.status, 201, r.text);
    const j = r.json;
    assert.deepEqual(j.command, ['sh', '-c', 'echo "args: $*"; echo "lr=$GPUCLOUD_HP_LR bs=$GPUCLOUD_HP_BATCH_SIZE"; cat hyperparameters.json; echo',
      'hi', '--lr', '0.1', '--batch-size', '32', '--opt', 'sgd', '--note', 'a b', '--amp', 'x=0.1']);
    assert.deepEqual(j.hyperparameters, { lr: 0.1, 'batch-size': 32, opt: 'sgd', note: 'a b', amp: true });
    assert.equal(j.template_id, t.json.id);
    assert.equal(j.template, 'echo-hp');
    assert.equal(j.template_title, 'Echo hyperparameters');
    // the template's resources where the submit says none
    assert.equal(j.cpu_millis, 200);
    assert.equal(j.mem_mib, 64);
    assert.equal(j.max_runtime_s, 600);
    const done = await waitJob(alice.c, j.id);
    assert.equal(done.state, 'succeeded', JSON.stringify(done));
    const log = (await alice.c.get(`/api/v1/jobs/${j.id}/logs`)).text;
    assert.match(log, /^args: --lr 0\.1 --batch-size 32 --opt sgd --note a b --amp x=0\.1$/m);
    assert.match(log, /^lr=0\.1 bs=32$/m);
    assert.match(log, /"lr": ?0\.1[,}]/, 'hyperparameters.json as written');
    // false booleans are left out; "~/" is the home
    const t2 = await w.admin.post(T, echoTemplate({ name: 'home', command: ['echo', '{greeting}', '{hyperparameters}'] }));
    assert.equal(t2.status, 201, t2.text);
    const r2 = await alice.c.post('/api/v1/jobs', { name: 'home', template_id: t2.json.id, image_id: w.image.id, inputs: { greeting: '~/data' }, hyperparameters: { amp: false, 'batch-size': 7 } });
    assert.equal(r2.status, 201, r2.text);
    assert.deepEqual(r2.json.command, ['echo', '/home/alice/data', '--lr', '0.01', '--batch-size', '7', '--opt', 'adam', '--note', 'a b']);
    // the distributed template's members reach the job (which needs a pool for them)
    const ddp = (await alice.c.get(T)).json.items.find((x) => x.name === 'pytorch-ddp');
    const nopool = await alice.c.post('/api/v1/jobs', { name: 'ddp', template_id: ddp.id, image_id: w.image.id, cpu_millis: 200, mem_mib: 64 });
    assert.equal(nopool.status, 400, nopool.text);
    assert.match(nopool.json.error.message, /more than 1 needs a pool/);
    // with a pool: it asks for 2 nodes (this world has one, so it never fits)
    const d = await alice.c.post('/api/v1/jobs', { name: 'ddp', template_id: ddp.id, image_id: w.image.id, pool: 'a100', cpu_millis: 200, mem_mib: 64 });
    assert.equal(d.status, 422, d.text);
    assert.deepEqual(d.json.error.details[0], { what: 'nodes', most: 1, asked: 2, pool: 'a100' });
  });

  it('refuses bad hyperparameters, inputs and overrides naming the field', async () => {
    const t = (await alice.c.get(T)).json.items.find((x) => x.name === 'echo-hp');
    const base = { name: 'bad', template_id: t.id, image_id: w.image.id };
    const cases = [
      ['above max', { hyperparameters: { lr: 5 } }, 'hyperparameters.lr', 'max', /hyperparameter 'lr' must be at most 1/],
      ['below min', { hyperparameters: { lr: 0 } }, 'hyperparameters.lr', 'min', /at least 0\.0001/],
      ['wrong type', { hyperparameters: { 'batch-size': 'many' } }, 'hyperparameters.batch-size', 'type', /must be an integer/],
      ['not an integer', { hyperparameters: { 'batch-size': 2.5 } }, 'hyperparameters.batch-size', 'type', /must be an integer/],
      ['not a choice', { hyperparameters: { opt: 'rmsprop' } }, 'hyperparameters.opt', 'choice', /one of: adam, sgd/],
      ['unknown', { hyperparameters: { momentum: 0.9 } }, 'hyperparameters.momentum', 'unknown', /unknown hyperparameter 'momentum'/],
      ['bool', { hyperparameters: { amp: 'yes' } }, 'hyperparameters.amp', 'type', /true or false/],
      ['unknown input', { inputs: { data: 'x' } }, 'inputs.data', 'unknown', /unknown input 'data'/],
      ['a command too', { command: ['rm', '-rf', '/'] }, 'command', 'template', /runs the template's command/],
      ['no image', { image_id: undefined }, 'image_id', 'required', /give image_id/],
    ];
    for (const [what, over, field, reason, re] of cases) {
      const r = await alice.c.post('/api/v1/jobs', { ...base, ...over });
      assert.equal(r.status, 400, `${what}: ${r.text}`);
      assertErrorShape(r.json, 'invalid');
      assert.equal(r.json.error.details?.[0]?.field, field, `${what}: ${r.text}`);
      assert.equal(r.json.error.details?.[0]?.reason, reason, what);
      assert.match(r.json.error.message, re, what);
    }
    // inputs belong to a template
    const noT = await alice.c.post('/api/v1/jobs', { name: 'x', image_id: w.image.id, command: ['true'], inputs: { script: 'a' } });
    assert.equal(noT.status, 400, noT.text);
    assert.match(noT.json.error.message, /give its template_id/);
    const lim = await alice.c.post('/api/v1/jobs', { ...base, hyperparameters: { lr: 5 } });
    assert.equal(lim.json.error.details[0].limit, 1);
    // a template that allows no overrides keeps its own
    const fixed = await w.admin.post(T, echoTemplate({ name: 'fixed', image_id: w.image.id, allow_overrides: false }));
    assert.equal(fixed.status, 201, fixed.text);
    const o = await alice.c.post('/api/v1/jobs', { name: 'o', template_id: fixed.json.id, cpu_millis: 500 });
    assert.equal(o.status, 400, o.text);
    assert.equal(o.json.error.details[0].field, 'cpu_millis');
    const ok = await alice.c.post('/api/v1/jobs', { name: 'o', template_id: fixed.json.id });
    assert.equal(ok.status, 201, ok.text);
    assert.equal(ok.json.image_id, w.image.id);
    assert.equal(sql(w.srv, `SELECT count(*) FROM jobs WHERE name = 'bad'`), '0');
  });

  it('trains train.py from the PyTorch template with edited hyperparameters: metrics in the log, a checkpoint', async () => {
    const up = await alice.c.req('PUT', '/api/v1/files/home/train.py', TRAIN_PY, { 'content-type': 'application/octet-stream' });
    assert.ok([200, 201].includes(up.status), up.text);
    const pt = (await alice.c.get(T)).json.items.find((x) => x.name === 'pytorch');
    const r = await alice.c.post('/api/v1/jobs', {
      name: 'torch-sine', template_id: pt.id, image_id: torchImage.id, cpu_millis: 1000, mem_mib: 1024,
      hyperparameters: { lr: 0.05, epochs: 2, 'batch-size': 128, hidden: 16, optimizer: 'sgd', verbose: true },
    });
    assert.equal(r.status, 201, r.text);
    assert.deepEqual(r.json.command, ['python3', '/home/alice/train.py', '--lr', '0.05', '--epochs', '2', '--batch-size', '128',
      '--hidden', '16', '--optimizer', 'sgd', '--seed', '0', '--verbose', '--step-delay', '0']);
    // the first pull of the PyTorch image may take a while
    const done = await waitJob(alice.c, r.json.id, 240000);
    const log = (await alice.c.get(`/api/v1/jobs/${r.json.id}/logs?tail=1000`)).text;
    assert.equal(done.state, 'succeeded', `${JSON.stringify(done)}\n${log}`);
    assert.equal(done.exit_code, 0);
    // 512 samples in batches of 128, 2 epochs: 8 steps, one metric line each
    const metrics = log.split('\n').filter((l) => l.startsWith('GPUCLOUD_METRIC ')).map((l) => JSON.parse(l.slice(16)));
    assert.equal(metrics.length, 8, log);
    assert.deepEqual(metrics.map((m) => m.step), [1, 2, 3, 4, 5, 6, 7, 8]);
    for (const m of metrics) assert.ok(Number.isFinite(m.loss) && m.loss >= 0, JSON.stringify(m));
    assert.match(log, /'lr': 0\.05/);
    // the platform's metric collector read them: the loss series, step by step
    const got = await eventually(async () => {
      const m = await alice.c.get(`/api/v1/jobs/${r.json.id}/metrics?names=loss`);
      return m.status === 200 && m.json.series?.loss?.length === 8 ? m.json : null;
    }, 20000, 250);
    assert.ok(got, 'the loss series has 8 points');
    assert.deepEqual(got.series.loss.map((p) => p[0]), [1, 2, 3, 4, 5, 6, 7, 8]);
    assert.equal(got.series.loss[7][1], metrics[7].loss);
    assert.equal(got.last_metrics.loss, metrics[7].loss);
    assert.match(log, /saved \/home\/alice\/jobs\/\d+-torch-sine\/checkpoint\.pt after 8 steps/);
    // the checkpoint, in the job directory, the user's
    const ck = join(w.srv.dir, 'data', 'home', 'alice', done.directory, 'checkpoint.pt');
    assert.ok(existsSync(ck), `no ${ck}`);
    assert.ok(statSync(ck).size > 1000, 'a real checkpoint');
    assert.notEqual(statSync(ck).uid, 0);
    const st = await alice.c.get(`/api/v1/files/home/${done.directory}`);
    assert.equal(st.status, 200, st.text);
    assert.ok(JSON.stringify(st.json).includes('checkpoint.pt'), st.text);
  });
});
