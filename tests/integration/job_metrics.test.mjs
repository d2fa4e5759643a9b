// job_metrics.test.mjs — the scalars jobs report, on the world's real
// engines: GPUCLOUD_METRIC lines (stdout and stderr) and metrics.jsonl in
// the job directory stored exactly, bad lines ignored, a step-less point
// numbered by its line, last_metrics on the job; CPU and memory samples
// (GPU null); a 20,000-line series thinned to the bound with its first,
// last, lowest and highest points kept; hostile files (a symlink, a FIFO,
// a huge line) neither read nor harmful; tenant checks (other user, admin,
// read-only token, no or an expired session) and bad input; and
// a kill -9 of gpucloudd mid-job stores every point once.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { assertErrorShape, stopClean, call, sha256hex } from '../lib/itest.mjs';
import { startServer, dropDatabase, Client, ADMIN_PASSWORD } from '../lib/server.mjs';
import { world, mkUser, cleanup, sql, eventually, FAST } from './instances_lib.mjs';

const FINAL = ['succeeded', 'failed', 'cancelled', 'lost'];
const ARGS = ['--job-metrics-interval-ms=300', '--job-usage-interval-ms=700'];

async function submit(c, w, body) {
  const r = await c.post('/api/v1/jobs', { image_id: w.image.id, cpu_millis: 200, mem_mib: 64, ...body });
  assert.equal(r.status, 201, r.text);
  return r.json;
}

async function waitJob(c, id, states, ms = 60000) {
  let last = null;
  const ok = await eventually(async () => {
    const r = await c.get(`/api/v1/jobs/${id}`);
    last = r.json;
    return r.status === 200 && states.includes(r.json.state);
  }, ms, 150);
  assert.ok(ok, `job ${id} did not reach ${states.join('|')}: ${JSON.stringify(last)}`);
  return last;
}

// The job's metrics once the collector has read its last lines.
async function settled(c, id, query = '') {
  let m;
  let prev = '';
  assert.ok(await eventually(async () => {
    m = (await c.get(`/api/v1/jobs/${id}/metrics${query}`)).json;
    const now = JSON.stringify(m.series);
    const same = now === prev;
    prev = now;
    return same && FINAL.includes(m.state);
  }, 20000, 700), 'metrics settle');
  return m;
}

describe('job metrics', () => {
  let w, alice, bob;
  before(async () => {
    w = await world({ node2: false, args: ARGS });
    alice = await mkUser(w, 'alice');
    bob = await mkUser(w, 'bob');
  });
  after(async () => { try { cleanup(w?.srv); } finally { await stopClean(w?.srv); } });

  let jobId;
  it('stores log and metrics.jsonl points exactly, ignores bad lines, sets last_metrics', async () => {
    const script = [
      'for i in $(seq 1 50); do echo "GPUCLOUD_METRIC {\\"step\\":$i,\\"loss\\":$i.25,\\"acc\\":-$i}"; done',
      'echo "GPUCLOUD_METRIC {\\"step\\":51,\\"loss\\":0.5e-3}" >&2',
      'echo "noise GPUCLOUD_METRIC {\\"step\\":52,\\"loss\\":2}"',
      // bad lines: counted nowhere
      'echo "GPUCLOUD_METRIC {\\"step\\":100,\\"loss\\":NaN}"',
      'echo "GPUCLOUD_METRIC {\\"step\\":101,\\"loss\\":1e999}"',
      'echo "GPUCLOUD_METRIC {\\"step\\":102,\\"loss\\":{\\"a\\":1}}"',
      'echo "GPUCLOUD_METRIC {\\"step\\":103,\\"loss\\":\\"0.1\\"}"',
      'echo "GPUCLOUD_METRIC {\\"step\\":104,\\"bad name\\":1}"',
      'echo "GPUCLOUD_METRIC {\\"step\\":105,\\"loss\\":1,\\"loss\\":2}"',
      'echo "GPUCLOUD_METRIC{\\"step\\":106,\\"loss\\":1}"',
      'echo \'{"step":1,"val_loss":0.75}\' >> metrics.jsonl',
      'echo \'{"step":2,"val_loss":0.5,"val/acc":0.125}\' >> metrics.jsonl',
      'echo \'{"step":3,"val_loss":Infinity}\' >> metrics.jsonl',
      'echo \'not json\' >> metrics.jsonl',
      'echo \'{"tput":7}\' >> metrics.jsonl',
      'sleep 3',
    ].join('; ');
    const j = await submit(alice.c, w, { name: 'metrics', command: ['sh', '-c', script] });
    jobId = j.id;
    assert.deepEqual(j.last_metrics, {});
    const end = await waitJob(alice.c, j.id, FINAL);
    assert.equal(end.state, 'succeeded', JSON.stringify(end));
    const m = await settled(alice.c, j.id);
    assert.deepEqual(m.names, ['acc', 'loss', 'tput', 'val/acc', 'val_loss']);
    const loss = m.series.loss.map(([s, v]) => [s, v]);
    const want = Array.from({ length: 50 }, (_, i) => [i + 1, i + 1 + 0.25]);
    want.push([51, 0.5e-3], [52, 2]);
    assert.deepEqual(loss, want, 'loss exactly, bad lines left out');
    assert.deepEqual(m.series.acc.map(([s, v]) => [s, v]), Array.from({ length: 50 }, (_, i) => [i + 1, -(i + 1)]));
    assert.deepEqual(m.series.val_loss.map(([s, v]) => [s, v]), [[1, 0.75], [2, 0.5]]);
    assert.deepEqual(m.series['val/acc'].map(([s, v]) => [s, v]), [[2, 0.125]]);
    assert.deepEqual(m.series.tput.map(([s, v]) => [s, v]), [[5, 7]], 'a step-less point takes its line number');
    for (const pts of Object.values(m.series))
      for (const p of pts) assert.match(p[2], /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    assert.deepEqual(m.last_metrics, { loss: 2, acc: -50, val_loss: 0.5, 'val/acc': 0.125, tput: 7 });
    const job = (await alice.c.get(`/api/v1/jobs/${j.id}`)).json;
    assert.deepEqual(job.last_metrics, m.last_metrics, 'the job carries last_metrics');
    const listed = (await alice.c.get('/api/v1/jobs')).json.items.find((x) => x.id === j.id);
    assert.deepEqual(listed.last_metrics, m.last_metrics);
    assert.equal(Number(sql(w.srv, `SELECT count(*) FROM job_metrics WHERE job_id = ${j.id}`)), 52 + 50 + 2 + 1 + 1);
    // usage: samples while it ran, CPU and memory numbers or null, GPU null
    assert.equal(m.usage.gpu, 'not measurable');
    assert.ok(m.usage.samples.length >= 1, JSON.stringify(m.usage));
    for (const [at, cpu, mem, gpu] of m.usage.samples) {
      assert.match(at, /Z$/);
      assert.ok(cpu === null || (typeof cpu === 'number' && cpu >= 0));
      assert.ok(mem === null || (Number.isInteger(mem) && mem > 0));
      assert.equal(gpu, null);
    }
    assert.ok(m.usage.samples.some(([, , mem]) => mem > 0), 'memory was measured');
  });

  it('filters by name, polls after a step, thins to max_points', async () => {
    const a = (await alice.c.get(`/api/v1/jobs/${jobId}/metrics?names=loss,val/acc`)).json;
    assert.deepEqual(Object.keys(a.series).sort(), ['loss', 'val/acc']);
    const b = (await alice.c.get(`/api/v1/jobs/${jobId}/metrics?names=loss&after_step=48`)).json;
    assert.deepEqual(b.series.loss.map((p) => p[0]), [49, 50, 51, 52]);
    const c = (await alice.c.get(`/api/v1/jobs/${jobId}/metrics?names=loss&after_step=52`)).json;
    assert.deepEqual(c.series, {});
    const d = (await alice.c.get(`/api/v1/jobs/${jobId}/metrics?names=loss&max_points=10`)).json;
    const steps = d.series.loss.map((p) => p[0]);
    assert.ok(steps.length <= 10 && steps.length >= 5, JSON.stringify(steps));
    assert.equal(steps[0], 1);
    assert.equal(steps.at(-1), 52, 'the last point stays');
  });

  it('tenant rules: others get 404, admins see all, read-only tokens read their own; bad input is 400', async () => {
    const other = await bob.c.get(`/api/v1/jobs/${jobId}/metrics`);
    assert.equal(other.status, 404, other.text);
    assertErrorShape(other.json, 'not_found');
    assert.equal((await w.admin.get(`/api/v1/jobs/${jobId}/metrics`)).status, 200);
    assert.equal((await alice.c.get('/api/v1/jobs/999999/metrics')).status, 404);
    const t = await alice.c.post('/api/v1/tokens', { name: 'ro', scopes: ['read'] });
    assert.equal(t.status, 201, t.text);
    const ro = await call(w.srv.base, 'GET', `/api/v1/jobs/${jobId}/metrics`, { bearer: t.json.token });
    assert.equal(ro.status, 200, ro.text);
    assert.ok(ro.json.series.loss.length > 0);
    const tb = await bob.c.post('/api/v1/tokens', { name: 'ro', scopes: ['read'] });
    assert.equal((await call(w.srv.base, 'GET', `/api/v1/jobs/${jobId}/metrics`, { bearer: tb.json.token })).status, 404);
    assert.equal((await call(w.srv.base, 'GET', `/api/v1/jobs/${jobId}/metrics`)).status, 401);
    const h = sha256hex(alice.c.cookies.get('gc_session'));
    sql(w.srv, `UPDATE sessions SET expires_at = now() - interval '1 second' WHERE token_hash = '${h}'`);
    try {
      const r = await alice.c.get(`/api/v1/jobs/${jobId}/metrics`);
      assert.equal(r.status, 401, r.text);
      assertErrorShape(r.json, 'unauthorized');
    } finally {
      sql(w.srv, `UPDATE sessions SET expires_at = now() + interval '1 hour' WHERE token_hash = '${h}'`);
    }
    for (const q of ['names=a%20b', 'names=', 'names=loss,', 'names=,loss', `names=${'x'.repeat(65)}`, `names=${Array.from({ length: 33 }, (_, i) => `m${i}`).join(',')}`,
      'after_step=x', 'after_step=-2', 'after_step=1.5', 'max_points=1', 'max_points=10001', 'max_points=']) {
      const r = await alice.c.get(`/api/v1/jobs/${jobId}/metrics?${q}`);
      assert.equal(r.status, 400, `${q}: ${r.text}`);
      assertErrorShape(r.json, 'invalid');
    }
    assert.equal((await alice.c.get('/api/v1/jobs/abc/metrics')).status, (await alice.c.get('/api/v1/jobs/abc')).status);
  });

  it('thins a 20,000-point series to the bound, keeping first, last, lowest and highest', async () => {
    const N = 20000;
    const val = (i) => (i * 7919) % 10007;
    const j = await submit(alice.c, w, {
      name: 'long',
      command: ['sh', '-c', `awk 'BEGIN { for (i = 1; i <= ${N}; i++) printf "GPUCLOUD_METRIC {\\"step\\":%d,\\"loss\\":%d}\\n", i, (i * 7919) % 10007 }'; sleep 1`],
    });
    const end = await waitJob(alice.c, j.id, FINAL, 90000);
    assert.equal(end.state, 'succeeded', JSON.stringify(end));
    const m = await settled(alice.c, j.id, '?max_points=10000');
    const pts = m.series.loss;
    assert.ok(pts.length <= 2000, `at most the bound: ${pts.length}`);
    assert.ok(pts.length >= 1000, `the newest half kept: ${pts.length}`);
    const steps = pts.map((p) => p[0]);
    assert.equal(steps[0], 1, 'first kept');
    assert.equal(steps.at(-1), N, 'last kept');
    for (const [s, v] of pts) assert.equal(v, val(s), `the value of step ${s}`);
    const all = Array.from({ length: N }, (_, i) => val(i + 1));
    const lo = Math.min(...all), hi = Math.max(...all);
    assert.ok(pts.some((p) => p[1] === lo), 'lowest kept');
    assert.ok(pts.some((p) => p[1] === hi), 'highest kept');
    // the newest thousand are all there
    for (let s = N - 999; s <= N; s++) assert.ok(steps.includes(s), `recent step ${s}`);
    assert.equal(m.last_metrics.loss, val(N));
  });

  it('does not follow a symlinked metrics.jsonl, does not block on a FIFO, skips a huge line', async () => {
    const j = await submit(alice.c, w, {
      name: 'hostile',
      command: ['sh', '-c', [
        'echo \'{"step":1,"leak":1}\' > other.json',
        'ln -s other.json metrics.jsonl',
        'mkdir -p sub && mkfifo sub/x',
        'echo "GPUCLOUD_METRIC {\\"step\\":1,\\"ok\\":1}"',
        'sleep 1.5',
        'rm metrics.jsonl && mkfifo metrics.jsonl',
        'echo "GPUCLOUD_METRIC {\\"step\\":2,\\"ok\\":2}"',
        'sleep 1.5',
        'rm metrics.jsonl',
        'head -c 300000 /dev/zero | tr "\\0" x >> metrics.jsonl; echo >> metrics.jsonl',
        'echo \'{"step":7,"after_huge":1}\' >> metrics.jsonl',
        'echo "GPUCLOUD_METRIC {\\"step\\":3,\\"ok\\":3}"',
        'sleep 1',
      ].join('; ')],
    });
    const end = await waitJob(alice.c, j.id, FINAL);
    assert.equal(end.state, 'succeeded', JSON.stringify(end));
    const m = await settled(alice.c, j.id);
    assert.deepEqual(m.names, ['after_huge', 'ok']);
    assert.deepEqual(m.series.ok.map((p) => p[1]), [1, 2, 3]);
    assert.deepEqual(m.series.after_huge.map(([s, v]) => [s, v]), [[7, 1]]);
    assert.equal((await w.admin.get('/healthz')).status, 200, 'gpucloudd is fine');
  });
});

describe('job metrics across a gpucloudd crash', () => {
  let w, srv2, db, dir;
  before(async () => {
    w = await world({ node2: false, args: ARGS });
    db = w.srv.db;
    dir = w.srv.dir;
  });
  after(async () => {
    try {
      if (srv2) await stopClean(srv2);
      if (w?.srv) await w.srv.stop({ keepDb: true });
    } finally {
      cleanup(w?.srv);
      if (db) dropDatabase(db.name);
    }
  });

  it('stores every point once after kill -9 and a restart', async () => {
    const alice = await mkUser(w, 'alice');
    const N = 60;
    const j = await submit(alice.c, w, {
      name: 'crash', pool: 'a100', slices: 1,
      command: ['sh', '-c', `i=0; while [ $i -lt ${N} ]; do i=$((i+1)); echo "GPUCLOUD_METRIC {\\"step\\":$i,\\"loss\\":$i.5}"; echo "GPUCLOUD_METRIC {\\"tick\\":$i}"; echo "{\\"step\\":$i,\\"v\\":$i}" >> metrics.jsonl; sleep 0.1; done`],
    });
    assert.ok(await eventually(async () => ((await alice.c.get(`/api/v1/jobs/${j.id}/metrics`)).json.series?.loss?.length ?? 0) >= 10, 20000), 'points come in');
    w.srv.proc.kill('SIGKILL');
    await eventually(() => w.srv.exited !== null, 5000);
    await new Promise((res) => setTimeout(res, 1500));
    srv2 = await startServer({ db, args: [...FAST, ...ARGS, `--state-dir=${dir}`] });
    const c = new Client(srv2.base);
    assert.equal((await c.login('alice', 'alice-pass-1')).status, 200);
    const end = await waitJob(c, j.id, FINAL);
    assert.equal(end.state, 'succeeded', JSON.stringify(end));
    const m = await settled(c, j.id);
    assert.deepEqual(m.series.loss.map(([s, v]) => [s, v]), Array.from({ length: N }, (_, i) => [i + 1, i + 1.5]), 'every loss point once');
    assert.deepEqual(m.series.v.map(([s, v]) => [s, v]), Array.from({ length: N }, (_, i) => [i + 1, i + 1]), 'every file point once');
    // a step-less point is numbered by its log line: the same after the restart
    assert.deepEqual(m.series.tick.map(([s, v]) => [s, v]), Array.from({ length: N }, (_, i) => [2 * i + 2, i + 1]), 'every tick once, at its line');
    const admin = new Client(srv2.base);
    assert.equal((await admin.login('admin', ADMIN_PASSWORD)).status, 200);
  });
});
