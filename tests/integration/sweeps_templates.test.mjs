// sweeps_templates.test.mjs — a sweep whose job names a template: the
// template is loaded once and every run's body is expanded from it (the
// run's set over job.hyperparameters), so a 3×2 grid makes 6 jobs whose
// commands and completed hyperparameters are exactly what POST /jobs makes
// for the same values, all run on the world's busybox image and the best is
// marked; a value out of the schema (range, type, choice) is refused naming
// the grid value or list set, and no run is made; a disabled template is an
// admin's only (404 for others, as POST /jobs).
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { assertErrorShape, stopClean } from '../lib/itest.mjs';
import { world, mkUser, cleanup, sql, eventually } from './instances_lib.mjs';

const FINAL = ['succeeded', 'failed', 'cancelled', 'lost'];
const T = '/api/v1/job-templates';

// prints its metric (the loss is the learning rate) and its arguments
const tmplBody = (over = {}) => ({
  name: 'sweep-echo', title: 'Sweep echo', kind: 'script',
  // (braces are the template's placeholders: printf writes them as \173 \175)
  command: ['sh', '-c', 'printf "GPUCLOUD_METRIC \\173\\"step\\": 1, \\"loss\\": %s\\175\\n" "$GPUCLOUD_HP_LR"; echo "args: $*"', 'run', '{hyperparameters}', 'lr={hp.lr}'],
  hyperparameters: [
    { name: 'lr', type: 'float', default: 0.5, min: 0, max: 1 },
    { name: 'bs', type: 'choice', default: 32, choices: [16, 32, 64] },
    { name: 'epochs', type: 'int', default: 1, min: 1, max: 10 },
  ],
  cpu_millis: 100, mem_mib: 32, max_runtime_s: 600,
  ...over,
});

describe('sweeps from a job template', () => {
  let w, alice, tmpl, off;
  before(async () => {
    w = await world({ node2: false });
    alice = await mkUser(w, 'alice');
    const t = await w.admin.post(T, tmplBody());
    assert.equal(t.status, 201, t.text);
    tmpl = t.json;
    const d = await w.admin.post(T, tmplBody({ name: 'sweep-off', enabled: false }));
    assert.equal(d.status, 201, d.text);
    off = d.json;
  });
  after(async () => { try { cleanup(w?.srv); } finally { await stopClean(w?.srv); } });

  const sweep = (name, extra = {}) => ({
    name, metric: 'loss', goal: 'min',
    job: { template_id: tmpl.id, image_id: w.image.id, hyperparameters: { epochs: 2 } },
    ...extra,
  });

  it('expands each run of a 3×2 grid exactly as POST /jobs would, runs them all and marks the best', async () => {
    const r = await alice.c.post('/api/v1/sweeps', sweep('tgrid', { grid: { lr: [0.3, 0.1, 0.2], bs: [16, 64] } }));
    assert.equal(r.status, 201, r.text);
    const s = r.json;
    assert.equal(s.runs, 6);
    const want = [];
    for (const lr of [0.3, 0.1, 0.2]) for (const bs of [16, 64]) want.push({ lr, bs, epochs: 2 });
    assert.deepEqual(s.jobs.map((j) => j.hyperparameters), want, 'completed, schema order');
    // each run's command: what a POST /jobs with the same values gets
    for (const [i, j] of s.jobs.entries()) {
      const full = (await alice.c.get(`/api/v1/jobs/${j.id}`)).json;
      assert.equal(full.template_id, tmpl.id);
      assert.equal(full.sweep_id, s.id);
      const one = await alice.c.post('/api/v1/jobs', {
        name: `single-${i}`, template_id: tmpl.id, image_id: w.image.id, hyperparameters: want[i],
      });
      assert.equal(one.status, 201, one.text);
      assert.deepEqual(full.command, one.json.command);
      assert.deepEqual(full.hyperparameters, one.json.hyperparameters);
      assert.equal(full.command.at(-1), `lr=${want[i].lr}`);
      assert.equal(full.cpu_millis, 100, 'the template fills what the job leaves out');
      await alice.c.post(`/api/v1/jobs/${one.json.id}/cancel`, {});
    }
    let last = null;
    const ok = await eventually(async () => {
      last = (await alice.c.get(`/api/v1/sweeps/${s.id}`)).json;
      return last.jobs.every((j) => FINAL.includes(j.state));
    }, 90000, 300);
    assert.ok(ok, JSON.stringify(last));
    assert.ok(last.jobs.every((j) => j.state === 'succeeded'), JSON.stringify(last.jobs));
    const best = last.jobs.filter((j) => j.best);
    assert.equal(best.length, 1);
    assert.equal(best[0].hyperparameters.lr, 0.1);
    assert.equal(last.best_value, 0.1);
    assert.equal(last.best_job_id, best[0].id);
  });

  it('refuses a value out of the schema naming the grid value or list set, and makes no run', async () => {
    const before = sql(w.srv, 'SELECT count(*) FROM jobs');
    const cases = [
      [{ grid: { lr: [0.1, 0.2, 1.5] } }, 'grid.lr[2]'],
      [{ grid: { bs: [16, 'x'] } }, 'grid.bs[1]'],
      [{ grid: { bs: [16, 48] } }, 'grid.bs[1]'],
      [{ list: [{ lr: 0.1 }, { epochs: 2.5 }] }, 'list[1].epochs'],
      [{ list: [{ lr: 0.1 }, { nope: 1 }] }, 'list[1].nope'],
    ];
    for (const [extra, field] of cases) {
      const r = await alice.c.post('/api/v1/sweeps', sweep('tbad', extra));
      assert.ok(r.status === 400 || r.status === 422, r.text);
      assertErrorShape(r.json);
      assert.equal(r.json.error.details[0].field, field, r.text);
      assert.match(r.json.error.message, new RegExp(field.replace(/[[\].]/g, '\\$&')));
    }
    // out of range in the job's own hyperparameters: every run is at fault
    const j = await alice.c.post('/api/v1/sweeps', sweep('tbad', {
      job: { template_id: tmpl.id, image_id: w.image.id, hyperparameters: { epochs: 99 } }, grid: { lr: [0.1] },
    }));
    assert.ok(j.status === 400 || j.status === 422, j.text);
    assert.equal(j.json.error.details[0].field, 'runs[0].hyperparameters.epochs');
    assert.equal(sql(w.srv, 'SELECT count(*) FROM jobs'), before, 'no run made');
    assert.equal(sql(w.srv, "SELECT count(*) FROM sweeps WHERE name = 'tbad'"), '0');
  });

  it('lets only admins sweep over a disabled template; an unknown one is 404', async () => {
    const body = sweep('toff', { grid: { lr: [0.1] } });
    body.job.template_id = off.id;
    const r = await alice.c.post('/api/v1/sweeps', body);
    assert.equal(r.status, 404, r.text);
    assertErrorShape(r.json, 'not_found');
    assert.equal(r.json.error.details[0].field, 'job.template_id');
    body.job.template_id = 999999;
    assert.equal((await alice.c.post('/api/v1/sweeps', body)).status, 404);
    body.job.template_id = off.id;
    const a = await w.admin.post('/api/v1/sweeps', body);
    assert.equal(a.status, 201, a.text);
    assert.equal(sql(w.srv, `SELECT count(*) FROM jobs WHERE sweep_id = ${a.json.id} AND template_id = ${off.id}`), '1');
    await w.admin.post(`/api/v1/sweeps/${a.json.id}/cancel`, {});
  });
});
