// sweeps.test.mjs — hyperparameter sweeps on the world's real engines: a
// 3×2 grid makes exactly 6 jobs with the right sets (each run prints its
// hyperparameters); a list; a retried submit with the same Idempotency-Key
// makes no second sweep; cancel stops every live run; the best run by the
// sweep's metric (goal min and max); tenant checks (other user, admin,
// read-only token, CSRF, expired session); bad input.
//
// The best run is ranked from jobs.last_metrics, which the metrics collector
// fills from the GPUCLOUD_METRIC line each run prints.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { assertErrorShape, stopClean, call, sha256hex } from '../lib/itest.mjs';
import { world, mkUser, cleanup, sql, eventually } from './instances_lib.mjs';

const FINAL = ['succeeded', 'failed', 'cancelled', 'lost'];
const PRINT = 'echo "hp=$GPUCLOUD_HPARAMS_JSON"';

function jobBody(w, extra = {}) {
  return { image_id: w.image.id, command: ['sh', '-c', PRINT], cpu_millis: 100, mem_mib: 32, ...extra };
}

async function submit(c, body, headers = {}) {
  const r = await c.post('/api/v1/sweeps', body, headers);
  assert.equal(r.status, 201, r.text);
  return r.json;
}

async function waitSweep(c, id, pred, ms = 60000) {
  let last = null;
  const ok = await eventually(async () => {
    const r = await c.get(`/api/v1/sweeps/${id}`);
    last = r.json;
    return r.status === 200 && pred(r.json);
  }, ms, 200);
  assert.ok(ok, `sweep ${id}: ${JSON.stringify(last)}`);
  return last;
}

const allEnded = (s) => s.jobs.length > 0 && s.jobs.every((j) => FINAL.includes(j.state));

describe('sweeps', () => {
  let w, alice, bob;
  before(async () => {
    w = await world({ node2: false });
    alice = await mkUser(w, 'alice');
    bob = await mkUser(w, 'bob');
  });
  after(async () => { try { cleanup(w?.srv); } finally { await stopClean(w?.srv); } });

  it('makes one job per set of a 3×2 grid, in a stable order, each seeing its own hyperparameters', async () => {
    const s = await submit(alice.c, {
      name: 'grid', metric: 'loss', goal: 'min', tags: ['demo'],
      job: jobBody(w, { hyperparameters: { epochs: 1 }, tags: ['resnet'] }),
      grid: { lr: [0.1, 0.01, 0.001], batch: [32, 64] },
    });
    assert.equal(s.runs, 6);
    assert.equal(s.jobs.length, 6);
    assert.equal(s.metric, 'loss');
    assert.equal(s.goal, 'min');
    assert.deepEqual(s.tags, ['demo']);
    assert.equal(s.username, 'alice');
    const want = [];
    for (const lr of [0.1, 0.01, 0.001]) for (const batch of [32, 64]) want.push({ epochs: 1, lr, batch });
    assert.deepEqual(s.jobs.map((j) => j.hyperparameters), want);
    assert.deepEqual(s.jobs.map((j) => j.name), [1, 2, 3, 4, 5, 6].map((i) => `grid-${i}`));
    assert.equal(sql(w.srv, `SELECT count(*) FROM jobs WHERE sweep_id = ${s.id}`), '6');
    assert.equal(sql(w.srv, `SELECT count(*) FROM alloc_requests r JOIN jobs j ON j.request_id = r.id WHERE j.sweep_id = ${s.id}`), '6');
    // runs are ordinary jobs: GET /jobs/{id} knows their sweep
    const one = await alice.c.get(`/api/v1/jobs/${s.jobs[0].id}`);
    assert.equal(one.status, 200);
    assert.equal(one.json.sweep_id, s.id);
    assert.deepEqual(one.json.tags, ['resnet']);
    const done = await waitSweep(alice.c, s.id, allEnded);
    assert.ok(done.jobs.every((j) => j.state === 'succeeded'), JSON.stringify(done.jobs));
    assert.equal(done.counts.succeeded, 6);
    assert.equal(done.state, 'finished');
    for (const j of done.jobs) {
      const full = (await alice.c.get(`/api/v1/jobs/${j.id}`)).json;
      const log = readFileSync(join(w.srv.dir, 'data', 'home', 'alice', full.directory, 'output.log'), 'utf8');
      assert.deepEqual(JSON.parse(/hp=(.*)/.exec(log)[1]), j.hyperparameters, log);
    }
    // numbers as written
    const log1 = readFileSync(join(w.srv.dir, 'data', 'home', 'alice', (await alice.c.get(`/api/v1/jobs/${done.jobs[2].id}`)).json.directory, 'output.log'), 'utf8');
    assert.match(log1, /"lr": ?0\.01[,}]/);
  });

  it('takes a list of sets, merged over the job\'s own hyperparameters', async () => {
    const s = await submit(alice.c, {
      name: 'listed', metric: 'acc', goal: 'max',
      job: jobBody(w, { hyperparameters: { opt: 'sgd', lr: 1 } }),
      list: [{ lr: 0.5 }, { opt: 'adam' }, {}],
    });
    assert.deepEqual(s.jobs.map((j) => j.hyperparameters), [{ opt: 'sgd', lr: 0.5 }, { opt: 'adam', lr: 1 }, { opt: 'sgd', lr: 1 }]);
  });

  it('makes no second sweep for a retried submit with the same Idempotency-Key', async () => {
    const body = { name: 'idem', metric: 'loss', goal: 'min', job: jobBody(w), grid: { a: [1, 2] } };
    const before = sql(w.srv, 'SELECT count(*) FROM jobs');
    const a = await submit(alice.c, body, { 'Idempotency-Key': 'sweep-key-1' });
    const b = await alice.c.post('/api/v1/sweeps', body, { 'Idempotency-Key': 'sweep-key-1' });
    assert.equal(b.status, 200, b.text);
    assert.equal(b.headers.get('idempotent-replayed'), 'true');
    assert.equal(b.json.id, a.id);
    assert.equal(Number(sql(w.srv, 'SELECT count(*) FROM jobs')), Number(before) + 2);
    assert.equal(sql(w.srv, "SELECT count(*) FROM sweeps WHERE idempotency_key = 'sweep-key-1'"), '1');
    const other = await alice.c.post('/api/v1/sweeps', { ...body, grid: { a: [3] } }, { 'Idempotency-Key': 'sweep-key-1' });
    assert.equal(other.status, 409, other.text);
    // bob's key is his own
    const bb = await bob.c.post('/api/v1/sweeps', body, { 'Idempotency-Key': 'sweep-key-1' });
    assert.equal(bb.status, 201, bb.text);
  });

  it('cancels every live run, recording who; ended runs stay as they are', async () => {
    const s = await submit(alice.c, {
      name: 'stopme', metric: 'loss', goal: 'min',
      job: jobBody(w, { command: ['sh', '-c', 'exec sleep 300'] }), grid: { x: [1, 2, 3] },
    });
    await waitSweep(alice.c, s.id, (x) => x.jobs.some((j) => j.state === 'running'), 30000);
    const c = await alice.c.post(`/api/v1/sweeps/${s.id}/cancel`, {});
    assert.equal(c.status, 202, c.text);
    assert.equal(c.json.cancelled_by, 'alice');
    assert.ok(c.json.jobs.every((j) => j.desired === 'cancelled'));
    const done = await waitSweep(alice.c, s.id, allEnded, 60000);
    assert.ok(done.jobs.every((j) => j.state === 'cancelled'), JSON.stringify(done.jobs));
    assert.equal(done.state, 'cancelled');
    assert.equal(sql(w.srv, `SELECT count(*) FROM jobs WHERE sweep_id = ${s.id} AND cancelled_by = 'alice'`), '3');
    assert.equal(sql(w.srv, `SELECT count(*) FROM allocations a JOIN jobs j ON j.request_id = a.request_id WHERE j.sweep_id = ${s.id} AND a.released_at IS NULL`), '0');
    assert.equal(sql(w.srv, `SELECT count(*) FROM audit_log WHERE action = 'sweep.cancel' AND target = '${s.id}'`), '1');
    // again: nothing live, answered as it is
    const again = await alice.c.post(`/api/v1/sweeps/${s.id}/cancel`, {});
    assert.equal(again.status, 202);
    assert.equal(sql(w.srv, `SELECT count(*) FROM audit_log WHERE action = 'sweep.cancel' AND target = '${s.id}'`), '1');
  });

  for (const [goal, best] of [['min', 0.25], ['max', 0.75]]) {
    it(`marks the best succeeded run by the metric (goal ${goal})`, async () => {
      // loss per run: 0.5, 0.25, 0.75 and a failed run with 0.1 (not counted)
      const s = await submit(alice.c, {
        name: `best-${goal}`, metric: 'loss', goal,
        job: jobBody(w, { command: ['sh', '-c', 'L=$(echo "$GPUCLOUD_HPARAMS_JSON" | sed "s/.*\\"loss\\": *\\([0-9.]*\\).*/\\1/"); echo "GPUCLOUD_METRIC {\\"loss\\": $L}"; ! echo "$GPUCLOUD_HPARAMS_JSON" | grep -q fail'] }),
        list: [{ loss: 0.5 }, { loss: 0.25 }, { loss: 0.75 }, { loss: 0.1, fail: 1 }],
      });
      assert.equal(s.best_job_id, null);
      const done = await waitSweep(alice.c, s.id, allEnded);
      assert.deepEqual(done.jobs.map((j) => j.state), ['succeeded', 'succeeded', 'succeeded', 'failed']);
      // the metrics collector fills each run's last_metrics from its GPUCLOUD_METRIC line
      const got = await waitSweep(alice.c, s.id, (x) => x.jobs.every((j) => typeof j.last_metrics.loss === 'number'), 20000);
      const b = got.jobs.find((j) => j.best);
      assert.ok(b, JSON.stringify(got.jobs));
      assert.equal(got.jobs.filter((j) => j.best).length, 1);
      assert.equal(b.hyperparameters.loss, best);
      assert.equal(got.best_job_id, b.id);
      assert.equal(got.best_value, best);
      assert.equal(b.last_metrics.loss, best);
    });
  }

  it('hides others\' sweeps; admins see all; lists with cursor pages', async () => {
    const s = await submit(alice.c, { name: 'mine', metric: 'loss', goal: 'min', job: jobBody(w), grid: { a: [1] } });
    assert.equal((await bob.c.get(`/api/v1/sweeps/${s.id}`)).status, 404);
    const bc = await bob.c.post(`/api/v1/sweeps/${s.id}/cancel`, {});
    assert.equal(bc.status, 404);
    assertErrorShape(bc.json, 'not_found');
    const bl = await bob.c.get('/api/v1/sweeps?limit=200');
    assert.ok(bl.json.items.every((x) => x.username === 'bob'), bl.text);
    assert.equal((await w.admin.get(`/api/v1/sweeps/${s.id}`)).status, 200);
    const al = await w.admin.get('/api/v1/sweeps?limit=200');
    assert.ok(al.json.items.some((x) => x.username === 'alice') && al.json.items.some((x) => x.username === 'bob'));
    // pages of 2, newest first, no repeats
    const seen = [];
    let cursor = null;
    do {
      const r = await alice.c.get(`/api/v1/sweeps?limit=2${cursor ? `&cursor=${cursor}` : ''}`);
      assert.equal(r.status, 200, r.text);
      assert.ok(r.json.items.length <= 2);
      seen.push(...r.json.items.map((x) => x.id));
      cursor = r.json.next_cursor;
    } while (cursor);
    assert.deepEqual(seen, [...seen].sort((a, b) => b - a));
    assert.equal(new Set(seen).size, seen.length);
    assert.equal(String(seen.length), sql(w.srv, `SELECT count(*) FROM sweeps WHERE user_id = ${alice.id}`));
    assert.ok('counts' in al.json.items[0] && !('jobs' in al.json.items[0]));
    // an admin may cancel anyone's sweep; it says who did
    const bs = await submit(bob.c, { name: 'bobs', metric: 'loss', goal: 'min', job: jobBody(w, { command: ['sleep', '300'] }), grid: { a: [1] } });
    const ac = await w.admin.post(`/api/v1/sweeps/${bs.id}/cancel`, {});
    assert.equal(ac.status, 202, ac.text);
    assert.equal(ac.json.cancelled_by, 'admin');
    const ended = await waitSweep(bob.c, bs.id, allEnded, 30000);
    assert.equal(ended.jobs[0].state, 'cancelled');
  });

  it('refuses read-only tokens, cookie submits without CSRF or Origin, expired sessions', async () => {
    const t = await alice.c.post('/api/v1/tokens', { name: 'ro-sweeps', scopes: ['read'] });
    assert.equal(t.status, 201, t.text);
    const body = { name: 'nope', metric: 'loss', goal: 'min', job: jobBody(w), grid: { a: [1] } };
    const ro = await call(w.srv.base, 'POST', '/api/v1/sweeps', { bearer: t.json.token, body });
    assert.equal(ro.status, 403, ro.text);
    assertErrorShape(ro.json, 'forbidden');
    assert.equal((await call(w.srv.base, 'POST', '/api/v1/sweeps/1/cancel', { bearer: t.json.token, body: {} })).status, 403);
    assert.equal((await call(w.srv.base, 'GET', '/api/v1/sweeps', { bearer: t.json.token })).status, 200);
    const cookie = alice.c.cookieHeader();
    for (const [what, opts] of [
      ['no CSRF token', { cookie, origin: w.srv.base, body }],
      ['foreign Origin', { cookie, csrf: alice.c.csrf, origin: 'http://evil.example', body }],
    ]) {
      const r = await call(w.srv.base, 'POST', '/api/v1/sweeps', opts);
      assert.equal(r.status, 403, `${what}: ${r.text}`);
      const c = await call(w.srv.base, 'POST', '/api/v1/sweeps/1/cancel', opts);
      assert.equal(c.status, 403, `${what}: ${c.text}`);
    }
    const before = sql(w.srv, 'SELECT count(*) FROM sweeps');
    const h = sha256hex(alice.c.cookies.get('gc_session'));
    sql(w.srv, `UPDATE sessions SET expires_at = now() - interval '1 second' WHERE token_hash = '${h}'`);
    try {
      const r = await alice.c.post('/api/v1/sweeps', body);
      assert.equal(r.status, 401, r.text);
      assertErrorShape(r.json, 'unauthorized');
      assert.equal((await alice.c.get('/api/v1/sweeps')).status, 401);
    } finally {
      sql(w.srv, `UPDATE sessions SET expires_at = now() + interval '1 hour' WHERE token_hash = '${h}'`);
    }
    assert.equal(sql(w.srv, 'SELECT count(*) FROM sweeps'), before, 'nothing was submitted');
  });

  it('refuses bad input with a JSON error, making nothing', async () => {
    const base = { name: 'bad', metric: 'loss', goal: 'min', job: jobBody(w) };
    const big = Array.from({ length: 17 }, (_, i) => i);
    const before = sql(w.srv, 'SELECT count(*) FROM jobs');
    const cases = [
      ['no grid or list', base, 400, 'invalid'],
      ['both grid and list', { ...base, grid: { a: [1] }, list: [{ a: 1 }] }, 400, 'invalid'],
      ['empty grid', { ...base, grid: {} }, 400, 'invalid'],
      ['empty values', { ...base, grid: { a: [] } }, 400, 'invalid'],
      ['values not an array', { ...base, grid: { a: 1 } }, 400, 'invalid'],
      ['nested values', { ...base, grid: { a: [{ b: 1 }] } }, 400, 'invalid'],
      ['empty list', { ...base, list: [] }, 400, 'invalid'],
      ['list of numbers', { ...base, list: [1, 2] }, 400, 'invalid'],
      ['nested list value', { ...base, list: [{ a: [1] }] }, 400, 'invalid'],
      ['bad hyperparameter name', { ...base, grid: { 'a b': [1] } }, 400, 'invalid'],
      ['more than 256 runs', { ...base, grid: { a: big, b: big } }, 422, 'too_many'],
      ['a list of 257', { ...base, list: Array.from({ length: 257 }, (_, i) => ({ i })) }, 422, 'too_many'],
      ['unknown goal', { ...base, goal: 'best', grid: { a: [1] } }, 400, 'invalid'],
      ['no metric', { name: 'bad', goal: 'min', job: jobBody(w), grid: { a: [1] } }, 400, 'invalid'],
      ['bad metric', { ...base, metric: '1 loss', grid: { a: [1] } }, 400, 'invalid'],
      ['bad name', { ...base, name: 'Bad Name', grid: { a: [1] } }, 400, 'invalid'],
      ['unknown field', { ...base, colour: 'red', grid: { a: [1] } }, 400, 'invalid'],
      ['job without a command', { ...base, job: { image_id: w.image.id }, grid: { a: [1] } }, 400, 'invalid'],
      ['job with an unknown field', { ...base, job: { ...jobBody(w), colour: 1 }, grid: { a: [1] } }, 400, 'invalid'],
      ['job with bad cpu', { ...base, job: jobBody(w, { cpu_millis: -1 }), grid: { a: [1] } }, 400, 'invalid'],
      ['exam priority for a student', { ...base, job: jobBody(w, { priority: 'exam' }), grid: { a: [1] } }, 403, 'forbidden'],
      ['unknown image', { ...base, job: jobBody(w, { image_id: 999999 }), grid: { a: [1] } }, 404, 'not_found'],
      ['unknown pool', { ...base, job: jobBody(w, { pool: 'nope', slices: 1 }), grid: { a: [1] } }, 404, 'not_found'],
      ['more slices than any node has', { ...base, job: jobBody(w, { pool: 'a100', slices: 5 }), grid: { a: [1] } }, 422, 'never_fits'],
    ];
    for (const [what, body, status, code] of cases) {
      const r = await alice.c.post('/api/v1/sweeps', body);
      assert.equal(r.status, status, `${what}: ${r.status} ${r.text}`);
      assertErrorShape(r.json, code);
    }
    assert.equal(sql(w.srv, 'SELECT count(*) FROM jobs'), before, 'no job was made');
    for (const p of ['/api/v1/sweeps/abc', '/api/v1/sweeps/0', '/api/v1/sweeps/999999']) assert.equal((await alice.c.get(p)).status, 404, p);
    assert.equal((await alice.c.get('/api/v1/sweeps?limit=0')).status, 400);
    assert.equal((await alice.c.post('/api/v1/sweeps/1/cancel', { force: true })).status, 400);
  });
});
