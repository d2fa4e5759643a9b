// sched.test.mjs — the scheduler over the world's engines: requests queue
// and get slices (exact grants), release records GPU-seconds, 200 requests
// racing for 12 slices never double-book one, quotas hold requests back with
// a reason, gangs land on distinct nodes or wait, exam work preempts
// scavenger work after the grace, draining nodes take nothing new, and a
// second replica takes over scheduling when the first dies.
//
// Each describe starts its own server (and database) and registers both
// world engines with declared GPUs, so no state crosses scenarios.
import { describe, it, before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, Client, ADMIN_PASSWORD } from '../lib/server.mjs';
import { sql, eventually, sleep, assertErrorShape, stopClean } from '../lib/itest.mjs';

const env = process.env;
const ARGS = ['--node-check-interval=1', '--sched-interval-ms=200', '--preempt-grace=1'];
const STATES = ['queued', 'allocated', 'released', 'cancelled'];

// Starts a server (or a replica on an existing database: opts.db) and logs
// the admin in; a fresh database gets both world engines as nodes with four
// declared A100s each, waited on until they are up.
async function world(opts = {}) {
  for (const k of ['GPUCLOUD_WORLD_DOCKER1', 'GPUCLOUD_WORLD_DOCKER2', 'GPUCLOUD_WORLD_NODE1_GPUS', 'GPUCLOUD_WORLD_NODE2_GPUS'])
    assert.ok(env[k], `${k} is not set: run through make test (it starts the world)`);
  const srv = await startServer({ args: ARGS, ...(opts.db ? { db: opts.db } : {}) });
  const admin = new Client(srv.base);
  assert.equal((await admin.login('admin', ADMIN_PASSWORD)).status, 200);
  const w = { srv, admin, n1: null, n2: null };
  if (opts.db) return w;
  const decl = (list) => list.split(',').map((d) => ({ model: 'NVIDIA A100-SXM4-80GB', memory_mib: 81920, devices: [d] }));
  const a = await admin.post('/api/v1/nodes', { name: 'node1', url: env.GPUCLOUD_WORLD_DOCKER1, gpus: decl(env.GPUCLOUD_WORLD_NODE1_GPUS) });
  assert.equal(a.status, 201, a.text);
  const b = await admin.post('/api/v1/nodes', { name: 'node2', url: env.GPUCLOUD_WORLD_DOCKER2, gpus: decl(env.GPUCLOUD_WORLD_NODE2_GPUS) });
  assert.equal(b.status, 201, b.text);
  w.n1 = a.json;
  w.n2 = b.json;
  assert.equal(w.n1.gpus.length, 4);
  assert.equal(w.n2.gpus.length, 4);
  for (const id of [w.n1.id, w.n2.id])
    assert.ok(await eventually(async () => (await admin.get(`/api/v1/nodes/${id}`)).json.state === 'up', 10000), `node ${id} came up`);
  return w;
}

// A pool over the given GPU ids; returns the pool as PUT .../gpus answers it.
async function mkPool(w, body, gpuIds) {
  const p = await w.admin.post('/api/v1/pools', body);
  assert.equal(p.status, 201, p.text);
  const r = await w.admin.req('PUT', `/api/v1/pools/${p.json.id}/gpus`, { gpu_ids: gpuIds });
  assert.equal(r.status, 200, r.text);
  // default deny (0015): these scenarios use the pool without limits
  for (const role of ['student', 'researcher', 'teacher'])
    assert.equal((await w.admin.req('PUT', '/api/v1/quotas/defaults', { role, pool: body.name })).status, 200);
  return r.json;
}

// A user of the role, logged in: {c, id, username}.
async function mkUser(w, username, role = 'student') {
  const password = `${username}-pass-1`;
  const r = await w.admin.post('/api/v1/users', { username, role, password });
  assert.equal(r.status, 201, r.text);
  const c = new Client(w.srv.base);
  assert.equal((await c.login(username, password)).status, 200);
  return { c, id: r.json.user.id, username };
}

// Asks for an allocation. cpu and memory are given explicitly (small), so
// the world's engines (maybe 2 CPUs) never limit placement by accident.
// Non-admins hold raw allocations only with a lease (an hour here).
async function ask(c, body) {
  return c.post('/api/v1/allocations', { cpu_millis: 100, mem_mib: 64, lease_s: 3600, ...body });
}

async function askOk(c, body) {
  const r = await ask(c, body);
  assert.equal(r.status, 202, `${JSON.stringify(body)} → ${r.status} ${r.text}`);
  assertAllocShape(r.json);
  assert.equal(r.json.state, 'queued');
  return r.json;
}

const getAlloc = async (c, id) => {
  const r = await c.get(`/api/v1/allocations/${id}`);
  assert.equal(r.status, 200, r.text);
  return r.json;
};

// Polls an allocation until pred holds; fails with its last state otherwise.
async function until(c, id, pred, ms = 5000, what = 'condition') {
  let last;
  const ok = await eventually(async () => { last = await getAlloc(c, id); return pred(last); }, ms, 100);
  assert.ok(ok, `allocation ${id}: ${what} not reached within ${ms} ms; last: ${JSON.stringify(last)}`);
  return last;
}
const allocated = (c, id, ms = 5000) => until(c, id, (a) => a.state === 'allocated', ms, 'allocated');

function assertAllocShape(a) {
  assert.ok(a && typeof a === 'object', `allocation JSON, got ${JSON.stringify(a)}`);
  for (const k of ['id', 'user_id', 'pool_id', 'slices', 'nodes', 'cpu_millis', 'mem_mib'])
    assert.equal(typeof a[k], 'number', `${k} in ${JSON.stringify(a)}`);
  for (const k of ['username', 'pool', 'priority', 'state', 'reason_code', 'reason', 'created_at'])
    assert.equal(typeof a[k], 'string', `${k} in ${JSON.stringify(a)}`);
  assert.ok(STATES.includes(a.state), a.state);
  assert.ok(['exam', 'normal', 'scavenger'].includes(a.priority), a.priority);
  assert.ok(Array.isArray(a.grants), 'grants is an array');
  for (const k of ['allocated_at', 'released_at', 'release_reason', 'preempt_requested_at'])
    assert.ok(k in a && (a[k] === null || typeof a[k] === 'string'), `${k} in ${JSON.stringify(a)}`);
  assert.ok('position' in a && (a.position === null || Number.isInteger(a.position)), `position in ${JSON.stringify(a)}`);
  if (a.state === 'queued') {
    assert.ok(a.reason.length > 0, `a queued allocation says why: ${JSON.stringify(a)}`);
    assert.deepEqual(a.grants, []);
    assert.equal(a.allocated_at, null);
  }
  if (a.state === 'allocated') {
    assert.equal(a.grants.length, a.slices * a.nodes, `grants of ${JSON.stringify(a)}`);
    assert.ok(a.allocated_at);
    assert.equal(a.released_at, null);
    assert.equal(a.position, null);
    for (const g of a.grants) {
      for (const k of ['slice_id', 'node_id', 'gpu_index', 'slot']) assert.equal(typeof g[k], 'number', `grant ${k}: ${JSON.stringify(g)}`);
      for (const k of ['node', 'gpu_uuid']) assert.equal(typeof g[k], 'string', `grant ${k}: ${JSON.stringify(g)}`);
    }
  }
}

const ms = (iso) => new Date(iso).getTime();

// Releases or cancels every live allocation, so one failed test does not
// leave the next one without room.
async function releaseAll(w) {
  const items = (await w.admin.get('/api/v1/allocations?all=1&limit=1000')).json?.items || [];
  for (const a of items)
    if (a.state === 'queued' || a.state === 'allocated') await w.admin.del(`/api/v1/allocations/${a.id}`);
}

describe('scheduler: one request, its grants, release and accounting', () => {
  let w, pool, s1, s2;

  before(async () => {
    w = await world();
    pool = await mkPool(w, { name: 'a100', sharing: 'exclusive' }, w.n1.gpus.map((g) => g.id));
    s1 = await mkUser(w, 'schedstudent1');
    s2 = await mkUser(w, 'schedstudent2');
  });
  afterEach(async () => { await releaseAll(w); });
  after(async () => { await stopClean(w?.srv); });

  it('queues a request, grants 2 whole GPUs of node1, releases them and records GPU-seconds', async () => {
    const q = await askOk(s1.c, { pool: 'a100', slices: 2 });
    assert.equal(q.pool, 'a100');
    assert.equal(q.pool_id, pool.id);
    assert.equal(q.user_id, s1.id);
    assert.equal(q.username, 'schedstudent1');
    assert.equal(q.slices, 2);
    assert.equal(q.nodes, 1);
    assert.equal(q.cpu_millis, 100);
    assert.equal(q.mem_mib, 64);
    assert.equal(q.priority, 'normal', 'normal is the default priority');
    assert.equal(q.reason_code, 'new');
    assert.deepEqual(q.grants, []);
    assert.equal(q.released_at, null);
    assert.equal(q.preempt_requested_at, null);

    const a = await allocated(s1.c, q.id);
    assertAllocShape(a);
    assert.equal(a.reason_code, 'none');
    assert.equal(a.position, null);
    assert.equal(a.grants.length, 2);
    assert.equal(new Set(a.grants.map((g) => g.slice_id)).size, 2, 'distinct slices');
    assert.equal(new Set(a.grants.map((g) => g.gpu_uuid)).size, 2, 'exclusive: two different GPUs');
    const byUuid = new Map(w.n1.gpus.map((g) => [g.uuid, g]));
    for (const g of a.grants) {
      assert.equal(g.node, 'node1');
      assert.equal(g.node_id, w.n1.id);
      assert.ok(byUuid.has(g.gpu_uuid), `grant GPU ${g.gpu_uuid} is one of node1's`);
      assert.equal(g.gpu_index, byUuid.get(g.gpu_uuid).index);
      assert.equal(g.slot, 0);
    }
    assert.ok(ms(a.allocated_at) >= ms(a.created_at));
    // the database agrees
    assert.equal(sql(w.srv, `SELECT count(*) FROM allocations WHERE request_id = ${q.id} AND released_at IS NULL`), '2');
    assert.equal(sql(w.srv, `SELECT state FROM alloc_requests WHERE id = ${q.id}`), 'allocated');
    assert.equal(sql(w.srv, `SELECT string_agg(slice_id::text, ',' ORDER BY slice_id) FROM allocations WHERE request_id = ${q.id}`),
      a.grants.map((g) => g.slice_id).sort((x, y) => x - y).join(','));
    // the pool counts them as used
    assert.equal((await w.admin.get(`/api/v1/pools/${pool.id}`)).json.free_slices, 2);
    // /me shows the slices in use
    const me = (await s1.c.get('/api/v1/me')).json;
    assert.equal(me.usage?.a100?.slices_in_use, 2, JSON.stringify(me.usage));

    await sleep(1200); // hold them a while so GPU-seconds are measurable
    const d = await s1.c.del(`/api/v1/allocations/${q.id}`);
    assert.equal(d.status, 200, d.text);
    assertAllocShape(d.json);
    assert.equal(d.json.state, 'released');
    assert.ok(d.json.released_at);
    assert.equal(typeof d.json.release_reason, 'string');
    assert.ok(d.json.release_reason.length > 0);
    assert.equal((await getAlloc(s1.c, q.id)).state, 'released');
    assert.equal(sql(w.srv, `SELECT count(*) FROM allocations WHERE request_id = ${q.id} AND released_at IS NULL`), '0');
    assert.equal(sql(w.srv, `SELECT count(*) FROM allocations WHERE request_id = ${q.id} AND released_at IS NOT NULL`), '2');
    assert.equal(sql(w.srv, `SELECT state FROM alloc_requests WHERE id = ${q.id}`), 'released');
    assert.equal((await w.admin.get(`/api/v1/pools/${pool.id}`)).json.free_slices, 4);

    // 2 whole GPUs held from allocated_at to released_at (the API's
    // timestamps are whole seconds: the database's are exact)
    assert.ok(ms(d.json.released_at) >= ms(a.allocated_at) + 1000);
    const sliceSecs = Number(sql(w.srv, `SELECT sum(extract(epoch FROM released_at - allocated_at)) FROM allocations WHERE request_id = ${q.id}`));
    assert.ok(sliceSecs >= 2 * 1.2, `held ${sliceSecs} slice-seconds`);
    assert.equal(sql(w.srv, `SELECT count(*) FROM gpu_usage WHERE user_id = ${s1.id} AND pool_id = ${pool.id}`), '1');
    const gs = Number(sql(w.srv, `SELECT gpu_seconds FROM gpu_usage WHERE user_id = ${s1.id} AND pool_id = ${pool.id} AND day = current_date`));
    assert.ok(gs > 0, `gpu_usage row with gpu_seconds > 0 (got ${gs})`);
    assert.ok(Math.abs(gs - sliceSecs) < 0.01, `gpu_seconds ${gs} = slice-seconds ${sliceSecs} (1 slot per GPU)`);
    assert.equal(sql(w.srv, `SELECT count(*) FROM gpu_usage WHERE user_id = ${s2.id}`), '0');
    const me2 = (await s1.c.get('/api/v1/me')).json;
    assert.equal(me2.usage?.a100?.slices_in_use, 0, JSON.stringify(me2.usage));
    assert.ok(Math.abs(me2.usage.a100.gpu_seconds_7d - gs) < 0.01, JSON.stringify(me2.usage));
  });

  it('shows a user their own allocations only; admins see all with ?all=1', async () => {
    const mine = await askOk(s2.c, { pool: 'a100', slices: 1 });
    await allocated(s2.c, mine.id);
    const l1 = await s1.c.get('/api/v1/allocations');
    assert.equal(l1.status, 200);
    assert.ok(l1.json.items.every((a) => a.user_id === s1.id), 'only s1\'s');
    assert.ok(l1.json.items.length >= 1);
    const l2 = await s2.c.get('/api/v1/allocations');
    assert.deepEqual(l2.json.items.map((a) => a.id), [mine.id]);
    assert.ok([403, 404].includes((await s1.c.get(`/api/v1/allocations/${mine.id}`)).status), 'not the owner: no read');
    const dd = await s1.c.del(`/api/v1/allocations/${mine.id}`);
    assert.ok([403, 404].includes(dd.status), `not the owner: no release (${dd.status})`);
    assert.equal((await getAlloc(s2.c, mine.id)).state, 'allocated');
    const all = await w.admin.get('/api/v1/allocations?all=1&limit=1000');
    assert.equal(all.status, 200);
    const users = new Set(all.json.items.map((a) => a.user_id));
    assert.ok(users.has(s1.id) && users.has(s2.id), 'admin sees everyone\'s');
    assert.equal((await w.admin.get(`/api/v1/allocations/${mine.id}`)).status, 200);
    const rel = await w.admin.del(`/api/v1/allocations/${mine.id}`);
    assert.equal(rel.status, 200, rel.text);
    assert.equal(rel.json.state, 'released');
    assert.equal((await w.admin.get('/api/v1/allocations/99999999')).status, 404);
  });

  it('cancels a queued request', async () => {
    const big = await askOk(s1.c, { pool: 'a100', slices: 4 });
    await allocated(s1.c, big.id);
    const q = await askOk(s2.c, { pool: 'a100', slices: 1 });
    const waiting = await until(s2.c, q.id, (a) => a.reason_code === 'capacity', 5000, 'reason capacity');
    assert.equal(waiting.state, 'queued');
    assert.equal(waiting.position, 1);
    const d = await s2.c.del(`/api/v1/allocations/${q.id}`);
    assert.equal(d.status, 200, d.text);
    assert.equal(d.json.state, 'cancelled');
    assert.deepEqual(d.json.grants, []);
    assert.equal(sql(w.srv, `SELECT state FROM alloc_requests WHERE id = ${q.id}`), 'cancelled');
    assert.equal(sql(w.srv, `SELECT count(*) FROM allocations WHERE request_id = ${q.id}`), '0');
    // it stays cancelled when room appears
    assert.equal((await s1.c.del(`/api/v1/allocations/${big.id}`)).json.state, 'released');
    await sleep(800);
    assert.equal((await getAlloc(s2.c, q.id)).state, 'cancelled');
  });

  it('refuses bad requests with 400, unknown pools with 404, exam priority for students with 403', async () => {
    for (const body of [
      { slices: 1 },
      { pool: 'a100' },
      { pool: 'a100', slices: 0 },
      { pool: 'a100', slices: -1 },
      { pool: 'a100', slices: '2' },
      { pool: 'a100', slices: 1.5 },
      { pool: 'a100', slices: 1, nodes: 0 },
      { pool: 'a100', slices: 1, priority: 'urgent' },
      { pool: 'a100', slices: 1, cpu_millis: -1 },
      { pool: 'a100', slices: 1, mem_mib: -1 },
      { pool: 'a100', slices: 1, surprise: true },
      { pool: 5, slices: 1 },
    ]) {
      const r = await s1.c.post('/api/v1/allocations', body);
      assert.equal(r.status, 400, `${JSON.stringify(body)} → ${r.status} ${r.text}`);
      assertErrorShape(r.json, 'invalid');
    }
    const nf = await ask(s1.c, { pool: 'no-such-pool', slices: 1 });
    assert.equal(nf.status, 404, nf.text);
    assertErrorShape(nf.json);
    const ex = await ask(s1.c, { pool: 'a100', slices: 1, priority: 'exam' });
    assert.equal(ex.status, 403, ex.text);
    assertErrorShape(ex.json);
    // nothing of those was queued
    assert.equal(sql(w.srv, `SELECT count(*) FROM alloc_requests WHERE state = 'queued'`), '0');
    // without a session: 401
    assert.equal((await new Client(w.srv.base).post('/api/v1/allocations', { pool: 'a100', slices: 1 })).status, 401);
  });

  it('refuses a request no node could ever hold (never_fits), saying what it could ask instead', async () => {
    const before = sql(w.srv, 'SELECT count(*) FROM alloc_requests');
    const q = await ask(s1.c, { pool: 'a100', slices: 5 });
    assert.equal(q.status, 422, q.text);
    assertErrorShape(q.json, 'never_fits');
    assert.equal(q.json.error.message, "no node in pool 'a100' has 5 slices: the largest has 4");
    assert.equal(q.json.error.hint, 'ask for at most 4 slices');
    assert.deepEqual(q.json.error.details, [{ what: 'slices', most: 4, asked: 5, pool: 'a100' }]);
    const ncpu = Number(sql(w.srv, "SELECT max(ncpu) FROM nodes"));
    const cpu = await ask(s1.c, { pool: 'a100', slices: 1, cpu_millis: ncpu * 1000 + 1000 });
    assert.equal(cpu.status, 422, cpu.text);
    assertErrorShape(cpu.json, 'never_fits');
    assert.match(cpu.json.error.message, new RegExp(`no node in pool 'a100' with 1 slice can ever give ${ncpu * 1000 + 1000} millicores of cpu: the largest has ${ncpu} CPU cores?$`));
    assert.equal(cpu.json.error.hint, `ask for at most ${ncpu * 1000} millicores of cpu`);
    const mem = await ask(s1.c, { pool: 'a100', slices: 1, mem_mib: 1 << 30 });
    assert.equal(mem.status, 422, mem.text);
    assert.equal(mem.json.error.details[0].what, 'mem_mib');
    // exactly the largest node is fine (it queues)
    const fits = await askOk(s1.c, { pool: 'a100', slices: 4, cpu_millis: ncpu * 1000 });
    assert.equal((await s1.c.del(`/api/v1/allocations/${fits.id}`)).status, 200);
    assert.equal(sql(w.srv, 'SELECT count(*) FROM alloc_requests'), String(Number(before) + 1), 'only the one that fits was queued');
  });
});

describe('scheduler: GPUs in use stay put', () => {
  let w, pool, st;

  before(async () => {
    w = await world();
    pool = await mkPool(w, { name: 'a100', sharing: 'exclusive' }, w.n1.gpus.map((g) => g.id));
    st = await mkUser(w, 'holdstudent');
  });
  after(async () => { await stopClean(w?.srv); });

  it('refuses with 409 to take an allocated GPU out of its pool, or remove its pool or node; allows it once released', async () => {
    const a = await askOk(st.c, { pool: 'a100', slices: 4 });
    await allocated(st.c, a.id);
    for (const [what, r] of [
      ['shrink the pool', await w.admin.req('PUT', `/api/v1/pools/${pool.id}/gpus`, { gpu_ids: [w.n1.gpus[0].id] })],
      ['redeclare the node\'s GPUs', await w.admin.patch(`/api/v1/nodes/${w.n1.id}`, { gpus: w.n1.gpus.slice(0, 1).map((g) => ({ model: g.model, memory_mib: g.memory_mib, devices: g.devices })) })],
      ['remove the pool', await w.admin.del(`/api/v1/pools/${pool.id}`)],
      ['remove the node', await w.admin.del(`/api/v1/nodes/${w.n1.id}`)],
    ]) {
      assert.equal(r.status, 409, `${what}: ${r.status} ${r.text}`);
      assertErrorShape(r.json, 'conflict');
      assert.match(r.json.error.message, /allocat/i, `${what}: the message says why`);
    }
    const still = await getAlloc(st.c, a.id);
    assert.equal(still.state, 'allocated');
    assert.equal(still.grants.length, 4);
    assert.equal((await w.admin.get(`/api/v1/pools/${pool.id}`)).json.slices, 4);
    assert.equal(sql(w.srv, 'SELECT count(*) FROM allocations WHERE released_at IS NULL AND slice_id IS NOT NULL'), '4');
    assert.equal((await st.c.del(`/api/v1/allocations/${a.id}`)).json.state, 'released');
    const r = await w.admin.req('PUT', `/api/v1/pools/${pool.id}/gpus`, { gpu_ids: [w.n1.gpus[0].id] });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.slices, 1);
    // the released allocation is still there to read
    const old = await getAlloc(st.c, a.id);
    assert.equal(old.state, 'released');
  });

  // the leader keeps the pool's slices between passes and reads them again
  // only when they change (0043): it must place on slices a pool gains, and
  // on the ones it moved to, at once
  it('places on the slices a pool gains or moves to after passes have run', async () => {
    // the pool is node1's first GPU (the test before left it so)
    const a = await askOk(st.c, { pool: 'a100', slices: 1 });
    const ga = await allocated(st.c, a.id);
    assert.equal(ga.grants[0].gpu_uuid, w.n1.gpus[0].uuid);
    const b = await askOk(st.c, { pool: 'a100', slices: 1 });
    await until(st.c, b.id, (x) => x.state === 'queued' && x.reason_code !== 'new', 5000, 'a pass said why it waits');
    await sleep(600); // passes with the pool as it is
    let r = await w.admin.req('PUT', `/api/v1/pools/${pool.id}/gpus`, { gpu_ids: [w.n1.gpus[0].id, w.n1.gpus[1].id] });
    assert.equal(r.status, 200, r.text);
    const gb = await allocated(st.c, b.id);
    assert.equal(gb.grants[0].gpu_uuid, w.n1.gpus[1].uuid);
    for (const x of [a, b]) assert.equal((await st.c.del(`/api/v1/allocations/${x.id}`)).json.state, 'released');
    await sleep(600);
    // moved: node2's first GPU only; node1's slices are gone
    r = await w.admin.req('PUT', `/api/v1/pools/${pool.id}/gpus`, { gpu_ids: [w.n2.gpus[0].id] });
    assert.equal(r.status, 200, r.text);
    const c = await askOk(st.c, { pool: 'a100', slices: 1 });
    const gc = await allocated(st.c, c.id);
    assert.equal(gc.grants[0].node, 'node2');
    assert.equal(gc.grants[0].gpu_uuid, w.n2.gpus[0].uuid);
    assert.equal((await st.c.del(`/api/v1/allocations/${c.id}`)).json.state, 'released');
    // without the version's row nothing says the shape stands: it is read
    // every pass
    sql(w.srv, 'DELETE FROM sched_topology');
    await sleep(600);
    r = await w.admin.req('PUT', `/api/v1/pools/${pool.id}/gpus`, { gpu_ids: [w.n2.gpus[1].id] });
    assert.equal(r.status, 200, r.text);
    const d = await askOk(st.c, { pool: 'a100', slices: 1 });
    assert.equal((await allocated(st.c, d.id)).grants[0].gpu_uuid, w.n2.gpus[1].uuid);
    assert.equal((await st.c.del(`/api/v1/allocations/${d.id}`)).json.state, 'released');
    sql(w.srv, 'INSERT INTO sched_topology DEFAULT VALUES');
  });
});

describe('scheduler: 200 concurrent requests for 12 slices', () => {
  let w, pool, users;

  before(async () => {
    w = await world();
    // shared, 3 slots per GPU over node1's 4 GPUs = exactly 12 slices
    pool = await mkPool(w, { name: 'lab', sharing: 'shared', slots_per_gpu: 3, memory_per_slot_mib: 8192 }, w.n1.gpus.map((g) => g.id));
    assert.equal(pool.slices, 12);
    users = [];
    for (let i = 0; i < 4; i++) users.push(await mkUser(w, `racer${i}`));
  });
  after(async () => { await stopClean(w?.srv); });

  it('allocates exactly 12, queues 188 with reasons and positions, and never grants a slice twice', async () => {
    const posts = [];
    for (let i = 0; i < 200; i++) posts.push(ask(users[i % 4].c, { pool: 'lab', slices: 1 }));
    const res = await Promise.all(posts);
    for (const r of res) assert.equal(r.status, 202, r.text);
    const ids = res.map((r) => r.json.id);
    assert.equal(new Set(ids).size, 200, 'distinct ids');

    let items;
    const settled = await eventually(async () => {
      items = (await w.admin.get('/api/v1/allocations?all=1&limit=1000')).json.items.filter((a) => a.pool === 'lab');
      return items.length === 200 &&
        items.filter((a) => a.state === 'allocated').length === 12 &&
        items.filter((a) => a.state === 'queued' && a.reason_code === 'capacity' && Number.isInteger(a.position)).length === 188;
    }, 15000, 250);
    const count = (s) => items.filter((a) => a.state === s).length;
    assert.ok(settled, `12 allocated / 188 queued; got ${count('allocated')} allocated, ${count('queued')} queued, codes ${JSON.stringify([...new Set(items.map((a) => a.reason_code))])}`);
    for (const a of items) assertAllocShape(a);
    const alloc = items.filter((a) => a.state === 'allocated');
    const queued = items.filter((a) => a.state === 'queued');
    for (const a of alloc) {
      assert.equal(a.grants.length, 1, `one grant for ${a.id}`);
      assert.equal(a.grants[0].node, 'node1');
      assert.ok(a.grants[0].slot >= 0 && a.grants[0].slot < 3);
    }
    assert.equal(new Set(alloc.map((a) => a.grants[0].slice_id)).size, 12, 'distinct slices');
    assert.equal(new Set(alloc.map((a) => `${a.grants[0].gpu_uuid}/${a.grants[0].slot}`)).size, 12, 'distinct GPU slots');
    for (const a of queued) assert.ok(a.reason.length > 0);
    assert.deepEqual(queued.map((a) => a.position).sort((x, y) => x - y), Array.from({ length: 188 }, (_, i) => i + 1),
      'positions are 1..188');

    // the database agrees, and its unique index stands behind it
    assert.equal(sql(w.srv, 'SELECT count(*) FROM allocations WHERE released_at IS NULL'), '12');
    assert.equal(sql(w.srv, 'SELECT count(DISTINCT slice_id) FROM allocations WHERE released_at IS NULL'), '12');
    assert.equal(sql(w.srv, 'SELECT count(*) FROM allocations'), '12', 'no grant was made and undone');
    assert.equal(sql(w.srv, 'SELECT count(*) FROM (SELECT request_id FROM allocations GROUP BY request_id HAVING count(*) > 1) x'), '0',
      'no request got two grants');
    assert.equal(sql(w.srv, "SELECT count(*) FROM alloc_requests WHERE state = 'allocated'"), '12');
    assert.equal(sql(w.srv, "SELECT count(*) FROM alloc_requests WHERE state = 'queued'"), '188');
    assert.throws(() => sql(w.srv,
      'INSERT INTO allocations (request_id, slice_id, node_id, allocated_at) ' +
      'SELECT q.id, a.slice_id, a.node_id, now() FROM allocations a, alloc_requests q ' +
      `WHERE a.released_at IS NULL AND q.state = 'queued' LIMIT 1`), /duplicate key|unique/,
    'a second live allocation of a slice is refused by the database');

    // each user sees their own 50
    for (const u of users) {
      const mine = (await u.c.get('/api/v1/allocations')).json.items;
      assert.equal(mine.length, 50);
      assert.ok(mine.every((a) => a.user_id === u.id));
    }

    // releasing one lets exactly one queued request in
    const victim = alloc[0];
    const owner = users.find((u) => u.id === victim.user_id);
    assert.equal((await owner.c.del(`/api/v1/allocations/${victim.id}`)).json.state, 'released');
    const moved = await eventually(async () => {
      items = (await w.admin.get('/api/v1/allocations?all=1&limit=1000')).json.items.filter((a) => a.pool === 'lab');
      return count('allocated') === 12 && count('queued') === 187 && count('released') === 1;
    }, 5000, 200);
    assert.ok(moved, `after one release: ${count('allocated')} allocated, ${count('queued')} queued`);
    // a shared slot counts 1/3 of a GPU
    const slotSecs = Number(sql(w.srv, `SELECT sum(extract(epoch FROM released_at - allocated_at)) FROM allocations WHERE request_id = ${victim.id}`));
    const used = Number(sql(w.srv, `SELECT sum(gpu_seconds) FROM gpu_usage WHERE user_id = ${victim.user_id} AND pool_id = ${pool.id}`));
    assert.ok(slotSecs > 0);
    assert.ok(Math.abs(used - slotSecs / 3) < 0.01, `gpu_seconds ${used} = ${slotSecs} slot-seconds / 3`);
    const newcomer = items.find((a) => a.state === 'allocated' && !alloc.some((x) => x.id === a.id));
    assert.equal(newcomer.grants[0].slice_id, victim.grants[0].slice_id, 'the freed slice went to the next request');
    assert.deepEqual(items.filter((a) => a.state === 'queued').map((a) => a.position).sort((x, y) => x - y),
      Array.from({ length: 187 }, (_, i) => i + 1));
    assert.equal(sql(w.srv, 'SELECT count(*) FROM allocations WHERE released_at IS NULL'), '12');
    assert.equal(sql(w.srv, 'SELECT count(DISTINCT slice_id) FROM allocations WHERE released_at IS NULL'), '12');
  });
});

describe('scheduler: quotas', () => {
  let w, pool, st;

  before(async () => {
    w = await world();
    pool = await mkPool(w, { name: 'a100', sharing: 'exclusive' }, w.n1.gpus.map((g) => g.id));
    st = await mkUser(w, 'quotastudent');
  });
  after(async () => { await stopClean(w?.srv); });

  it('sets and lists quotas as admin only, refusing bad ones', async () => {
    const r = await w.admin.req('PUT', '/api/v1/quotas', { user_id: st.id, pool: 'a100', max_slices: 1 });
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.json, { user_id: st.id, username: st.username ?? r.json.username, pool: 'a100', max_slices: 1, max_cpu_millis: null, max_mem_mib: null, gpu_hours_per_week: null, max_runtime_s: null });
    const l = await w.admin.get(`/api/v1/quotas?user_id=${st.id}`);
    assert.equal(l.status, 200, l.text);
    assert.deepEqual(l.json.items.map((q) => [q.user_id, q.pool, q.max_slices]), [[st.id, 'a100', 1]]);
    assert.equal((await st.c.req('PUT', '/api/v1/quotas', { user_id: st.id, pool: 'a100', max_slices: 4 })).status, 403);
    assert.equal((await st.c.get(`/api/v1/quotas?user_id=${st.id}`)).status, 403);
    for (const body of [
      { user_id: st.id, pool: 'a100', max_slices: -1 },
      { user_id: st.id, pool: 'a100', max_slices: '1' },
      { user_id: st.id, pool: 'a100', max_slices: 1, extra: 1 },
    ]) {
      const b = await w.admin.req('PUT', '/api/v1/quotas', body);
      assert.equal(b.status, 400, `${JSON.stringify(body)} → ${b.status} ${b.text}`);
      assertErrorShape(b.json, 'invalid');
    }
    const np = await w.admin.req('PUT', '/api/v1/quotas', { user_id: st.id, pool: 'nope', max_slices: 1 });
    assert.ok([400, 404].includes(np.status), `unknown pool → ${np.status}`);
    const nu = await w.admin.req('PUT', '/api/v1/quotas', { user_id: 99999999, pool: 'a100', max_slices: 1 });
    assert.ok([400, 404].includes(nu.status), `unknown user → ${nu.status}`);
    // unchanged by the refusals
    assert.equal((await w.admin.get(`/api/v1/quotas?user_id=${st.id}`)).json.items[0].max_slices, 1);
  });

  it('holds a second request back with reason quota until the first is released', async () => {
    const me0 = (await st.c.get('/api/v1/me')).json;
    assert.deepEqual(me0.quotas, { a100: { max_slices: 1, max_cpu_millis: null, max_mem_mib: null, gpu_hours_per_week: null, max_runtime_s: null } });
    const a = await askOk(st.c, { pool: 'a100', slices: 1 });
    await allocated(st.c, a.id);
    const b = await askOk(st.c, { pool: 'a100', slices: 1 });
    const held = await until(st.c, b.id, (x) => x.reason_code === 'quota', 5000, 'reason quota');
    assert.equal(held.state, 'queued');
    assert.match(held.reason, /quota/i);
    assert.match(held.reason, /1 of 1/);
    await sleep(600); // several passes: the cluster has room, the quota still holds
    assert.equal((await getAlloc(st.c, b.id)).state, 'queued');
    assert.equal(sql(w.srv, `SELECT count(*) FROM allocations a JOIN alloc_requests q ON q.id = a.request_id WHERE q.user_id = ${st.id} AND a.released_at IS NULL`), '1');
    const me = (await st.c.get('/api/v1/me')).json;
    assert.deepEqual(me.quotas, { a100: { max_slices: 1, max_cpu_millis: null, max_mem_mib: null, gpu_hours_per_week: null, max_runtime_s: null } });
    assert.equal(me.usage.a100.slices_in_use, 1);
    assert.equal(typeof me.usage.a100.gpu_seconds_7d, 'number');
    // a request bigger than the quota by itself is refused at once, with the limit
    const c = await ask(st.c, { pool: 'a100', slices: 2 });
    assert.equal(c.status, 422, c.text);
    assertErrorShape(c.json, 'exceeds_quota');
    assert.equal(c.json.error.message, "quota: you may hold 1 slice of pool 'a100' at once; this asks 2");
    assert.equal(c.json.error.hint, 'ask for at most 1 slice, or have an admin raise the quota');
    assert.deepEqual(c.json.error.details, [{ what: 'slices', most: 1, asked: 2, pool: 'a100' }]);

    assert.equal((await st.c.del(`/api/v1/allocations/${a.id}`)).json.state, 'released');
    await allocated(st.c, b.id);
    // raising the quota lets more in; 0 stops new ones
    assert.equal((await w.admin.req('PUT', '/api/v1/quotas', { user_id: st.id, pool: 'a100', max_slices: 3 })).status, 200);
    const d = await askOk(st.c, { pool: 'a100', slices: 2 });
    await allocated(st.c, d.id);
    assert.equal((await st.c.get('/api/v1/me')).json.usage.a100.slices_in_use, 3);
    // a request queued before the quota is lowered under it can never run as asked
    const f = await askOk(st.c, { pool: 'a100', slices: 1 });
    await until(st.c, f.id, (x) => x.reason_code === 'quota', 5000, 'reason quota (3 of 3)');
    assert.equal((await w.admin.req('PUT', '/api/v1/quotas', { user_id: st.id, pool: 'a100', max_slices: 0 })).status, 200);
    const f2 = await until(st.c, f.id, (x) => x.reason_code === 'cannot_run_as_asked', 5000, 'reason cannot_run_as_asked (quota 0)');
    assert.equal(f2.state, 'queued');
    assert.equal(f2.reason, "quota: you may hold 0 slices of pool 'a100' at once; this asks 1; an admin raises the quota");
    assert.equal((await st.c.del(`/api/v1/allocations/${f.id}`)).json.state, 'cancelled');
    const e = await ask(st.c, { pool: 'a100', slices: 1 });
    assert.equal(e.status, 422, e.text);
    assertErrorShape(e.json, 'exceeds_quota');
    assert.equal(e.json.error.hint, 'an admin raises the quota');
    // a lowered quota does not take running allocations away
    assert.equal((await getAlloc(st.c, d.id)).state, 'allocated');
    assert.equal((await getAlloc(st.c, b.id)).state, 'allocated');
  });
});

describe('scheduler: gangs', () => {
  let w, st;

  before(async () => {
    w = await world();
    await mkPool(w, { name: 'big', sharing: 'exclusive' }, [...w.n1.gpus, ...w.n2.gpus].map((g) => g.id));
    st = await mkUser(w, 'gangstudent');
  });
  after(async () => { await stopClean(w?.srv); });

  const perNode = (a) => {
    const m = {};
    for (const g of a.grants) m[g.node] = (m[g.node] || 0) + 1;
    return m;
  };

  it('places 2 nodes × 2 slices on two distinct nodes, all or nothing', async () => {
    const g1 = await askOk(st.c, { pool: 'big', slices: 2, nodes: 2 });
    assert.equal(g1.nodes, 2);
    const a = await allocated(st.c, g1.id);
    assert.equal(a.grants.length, 4);
    assert.deepEqual(perNode(a), { node1: 2, node2: 2 });
    const uu = new Map([...w.n1.gpus.map((g) => [g.uuid, w.n1.id]), ...w.n2.gpus.map((g) => [g.uuid, w.n2.id])]);
    for (const g of a.grants) assert.equal(uu.get(g.gpu_uuid), g.node_id, `GPU ${g.gpu_uuid} is on node ${g.node_id}`);
    assert.equal(new Set(a.grants.map((g) => g.slice_id)).size, 4);
    assert.equal(sql(w.srv, `SELECT count(DISTINCT node_id) FROM allocations WHERE request_id = ${g1.id} AND released_at IS NULL`), '2');

    // 3 nodes from a pool of 2 can never be met: refused at once
    const g3 = await ask(st.c, { pool: 'big', slices: 1, nodes: 3 });
    assert.equal(g3.status, 422, g3.text);
    assertErrorShape(g3.json, 'never_fits');
    assert.equal(g3.json.error.message, "needs 3 nodes in pool 'big' that can each hold it; only 2 can");
    assert.equal(g3.json.error.hint, 'ask for at most 2 nodes');

    // a second 2×2 takes the rest
    const g2 = await askOk(st.c, { pool: 'big', slices: 2, nodes: 2 });
    const b = await allocated(st.c, g2.id);
    assert.deepEqual(perNode(b), { node1: 2, node2: 2 });
    assert.equal(sql(w.srv, 'SELECT count(*) FROM allocations WHERE released_at IS NULL'), '8');

    // a third waits as a gang, holding nothing
    const g4 = await askOk(st.c, { pool: 'big', slices: 1, nodes: 2 });
    const q = await until(st.c, g4.id, (x) => x.reason_code === 'gang', 5000, 'reason gang');
    assert.equal(q.state, 'queued');
    assert.equal(sql(w.srv, `SELECT count(*) FROM allocations WHERE request_id = ${g4.id}`), '0', 'all or nothing');
    // and goes once both nodes have room
    assert.equal((await st.c.del(`/api/v1/allocations/${g1.id}`)).json.state, 'released');
    const c = await allocated(st.c, g4.id);
    assert.deepEqual(perNode(c), { node1: 1, node2: 1 });
  });
});

describe('scheduler: exam priority preempts scavenger work', () => {
  let w, pool, sa, teacher, sb;

  before(async () => {
    w = await world();
    pool = await mkPool(w, { name: 'a100', sharing: 'exclusive' }, w.n1.gpus.map((g) => g.id));
    sa = await mkUser(w, 'scavstudent');
    sb = await mkUser(w, 'normstudent');
    teacher = await mkUser(w, 'examteacher', 'teacher');
  });
  after(async () => { await stopClean(w?.srv); });

  it('asks the scavenger allocation to stop, releases it after the grace, and places the exam one', async () => {
    const scav = await askOk(sa.c, { pool: 'a100', slices: 4, priority: 'scavenger' });
    assert.equal(scav.priority, 'scavenger');
    const s = await allocated(sa.c, scav.id);
    assert.equal(s.preempt_requested_at, null);

    const exam = await askOk(teacher.c, { pool: 'a100', slices: 2, priority: 'exam' });
    assert.equal(exam.priority, 'exam');
    const marked = await until(sa.c, scav.id, (x) => x.preempt_requested_at !== null, 5000, 'preempt requested');
    const tMarked = Date.now();
    assert.equal(marked.state, 'allocated', 'it keeps running through the grace');
    const waiting = await getAlloc(teacher.c, exam.id);
    if (waiting.state === 'queued') assert.equal(waiting.reason_code, 'preempting', JSON.stringify(waiting));

    const gone = await until(sa.c, scav.id, (x) => x.state === 'released', 6000, 'released after the grace');
    assert.match(gone.release_reason, /preempt/i);
    assert.ok(ms(gone.released_at) - ms(gone.preempt_requested_at) >= 900,
      `grace kept: requested ${gone.preempt_requested_at}, released ${gone.released_at}`);
    assert.ok(Date.now() - tMarked < 6000);

    const e = await allocated(teacher.c, exam.id);
    assert.equal(e.grants.length, 2);
    assert.ok(e.grants.every((g) => g.node === 'node1'));
    assert.ok(ms(e.allocated_at) >= ms(gone.released_at), 'placed after the victim let go');
    assert.equal(sql(w.srv, `SELECT count(*) FROM allocations WHERE request_id = ${scav.id} AND released_at IS NULL`), '0');
    assert.equal(sql(w.srv, 'SELECT count(*) FROM allocations WHERE released_at IS NULL'), '2');
    // the scavenger's time was accounted for
    assert.ok(Number(sql(w.srv, `SELECT coalesce(sum(gpu_seconds), 0) FROM gpu_usage WHERE user_id = ${sa.id}`)) > 0);
  });

  it('does not preempt normal work, and a normal request waits behind it', async () => {
    const busy = (await w.admin.get(`/api/v1/pools/${pool.id}`)).json.free_slices;
    assert.equal(busy, 2);
    const n = await askOk(sb.c, { pool: 'a100', slices: 2 });
    await allocated(sb.c, n.id);
    const ex = await askOk(teacher.c, { pool: 'a100', slices: 1, priority: 'exam' });
    const q = await until(teacher.c, ex.id, (x) => x.reason_code === 'capacity', 5000, 'reason capacity');
    assert.equal(q.state, 'queued');
    await sleep(1500);
    const still = await getAlloc(sb.c, n.id);
    assert.equal(still.state, 'allocated');
    assert.equal(still.preempt_requested_at, null, 'normal work is not preempted');
  });
});

describe('scheduler: draining nodes', () => {
  let w, st;

  before(async () => {
    w = await world();
    await mkPool(w, { name: 'a100', sharing: 'exclusive' }, w.n1.gpus.map((g) => g.id));
    st = await mkUser(w, 'drainstudent');
  });
  after(async () => { await stopClean(w?.srv); });

  it('keeps existing allocations on a draining node and gives it nothing new', async () => {
    const a = await askOk(st.c, { pool: 'a100', slices: 1 });
    await allocated(st.c, a.id);
    const p = await w.admin.patch(`/api/v1/nodes/${w.n1.id}`, { state: 'draining' });
    assert.equal(p.status, 200, p.text);
    const b = await askOk(st.c, { pool: 'a100', slices: 1 });
    const q = await until(st.c, b.id, (x) => ['no_nodes', 'capacity'].includes(x.reason_code), 5000, 'reason no_nodes/capacity');
    assert.equal(q.reason_code, 'no_nodes');
    await sleep(1200);
    assert.equal((await getAlloc(st.c, b.id)).state, 'queued');
    const still = await getAlloc(st.c, a.id);
    assert.equal(still.state, 'allocated');
    assert.equal(still.grants.length, 1);
    assert.equal(sql(w.srv, 'SELECT count(*) FROM allocations WHERE released_at IS NULL'), '1');
    // back to active: the queued one goes
    assert.equal((await w.admin.patch(`/api/v1/nodes/${w.n1.id}`, { state: 'active' })).status, 200);
    const c = await allocated(st.c, b.id);
    assert.notEqual(c.grants[0].slice_id, still.grants[0].slice_id);
  });
});

const LEADS = /now runs the scheduler/;

describe('scheduler: two replicas, one scheduler, failover', () => {
  let first, second, st1, st2;

  before(async () => {
    first = await world();
    await mkPool(first, { name: 'a100', sharing: 'exclusive' }, first.n1.gpus.map((g) => g.id));
    st1 = await mkUser(first, 'replstudent');
    // the first replica schedules alone before the second exists
    const warm = await askOk(st1.c, { pool: 'a100', slices: 1 });
    await allocated(st1.c, warm.id);
    assert.equal((await st1.c.del(`/api/v1/allocations/${warm.id}`)).json.state, 'released');
    second = await world({ db: first.srv.db });
    st2 = new Client(second.srv.base);
    assert.equal((await st2.login('replstudent', 'replstudent-pass-1')).status, 200);
  });
  after(async () => {
    await stopClean(second?.srv);
    await first?.srv.stop(); // killed: just drop its database
  });

  it('schedules requests posted to either replica exactly once', async () => {
    const posts = [];
    for (let i = 0; i < 20; i++) posts.push(ask(i % 2 ? st2 : st1.c, { pool: 'a100', slices: 1 }));
    const res = await Promise.all(posts);
    for (const r of res) assert.equal(r.status, 202, r.text);
    let items;
    const ok = await eventually(async () => {
      items = (await st2.get('/api/v1/allocations')).json.items.filter((a) => res.some((r) => r.json.id === a.id));
      return items.filter((a) => a.state === 'allocated').length === 4 && items.filter((a) => a.state === 'queued').length === 16;
    }, 8000, 200);
    assert.ok(ok, `4 allocated / 16 queued: ${JSON.stringify(items.map((a) => [a.id, a.state, a.reason_code]))}`);
    // both replicas tell the same story
    const viaFirst = (await st1.c.get('/api/v1/allocations')).json.items;
    for (const a of items) assert.equal(viaFirst.find((x) => x.id === a.id)?.state, a.state);
    assert.equal(sql(first.srv, 'SELECT count(*) FROM allocations WHERE released_at IS NULL'), '4');
    assert.equal(sql(first.srv, 'SELECT count(DISTINCT slice_id) FROM allocations WHERE released_at IS NULL'), '4');
    assert.equal(sql(first.srv, 'SELECT count(*) FROM (SELECT request_id FROM allocations GROUP BY request_id HAVING count(*) > 1) x'), '0');
    // at most one advisory lock is held in this database at any moment
    let seen = 0;
    for (let i = 0; i < 40; i++) {
      const n = Number(sql(first.srv,
        "SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database WHERE l.locktype = 'advisory' AND l.granted AND d.datname = current_database()"));
      assert.ok(n <= 1, `${n} advisory locks held`);
      seen = Math.max(seen, n);
      await sleep(50);
    }
    assert.equal(seen, 1, 'the scheduler holds an advisory lock');
    // and it is the first replica's: the second has not taken over
    assert.match(first.srv.log(), LEADS);
    assert.doesNotMatch(second.srv.log(), LEADS);
    // clean up for the next test
    for (const a of items) assert.equal((await st2.del(`/api/v1/allocations/${a.id}`)).status, 200);
    assert.equal(sql(first.srv, 'SELECT count(*) FROM allocations WHERE released_at IS NULL'), '0');
  });

  it('keeps scheduling through the second replica after the first is killed', async () => {
    first.srv.proc.kill('SIGKILL');
    assert.ok(await eventually(() => first.srv.exited !== null, 3000, 50), 'first replica died');
    const t0 = Date.now();
    assert.ok(await eventually(() => LEADS.test(second.srv.log()), 10000, 100), 'the second replica took over within 10 s');
    const r = await askOk(st2, { pool: 'a100', slices: 2 });
    const a = await allocated(st2, r.id, 10000);
    assert.equal(a.grants.length, 2);
    assert.ok(Date.now() - t0 < 10000);
    assert.equal(sql(second.srv, 'SELECT count(*) FROM allocations WHERE released_at IS NULL'), '2');
    // and it keeps going: release and re-ask
    assert.equal((await st2.del(`/api/v1/allocations/${r.id}`)).json.state, 'released');
    const r2 = await askOk(st2, { pool: 'a100', slices: 4 });
    await allocated(st2, r2.id, 5000);
  });
});

describe('scheduler: default deny, pool access by role, leases', () => {
  let w, pool, st, rs;

  before(async () => {
    w = await world();
    // made directly: no role is given the pool
    const p = await w.admin.post('/api/v1/pools', { name: 'a100', sharing: 'exclusive' });
    assert.equal(p.status, 201, p.text);
    const g = await w.admin.req('PUT', `/api/v1/pools/${p.json.id}/gpus`, { gpu_ids: w.n1.gpus.map((x) => x.id) });
    assert.equal(g.status, 200, g.text);
    pool = g.json;
    st = await mkUser(w, 'denystudent');
    rs = await mkUser(w, 'denyresearcher', 'researcher');
  });
  afterEach(async () => { await releaseAll(w); });
  after(async () => { await stopClean(w?.srv); });

  it('refuses a student without a quota at once, and lets them in once an admin sets the role default', async () => {
    const defs = await w.admin.get('/api/v1/quotas/defaults');
    assert.equal(defs.status, 200, defs.text);
    const global = (role) => defs.json.items.find((d) => d.role === role && d.pool === null);
    assert.equal(global('student').max_slices, 0, 'students get no GPUs by default');
    assert.equal(global('admin').max_slices, null, 'admins are not limited');
    // the seeded role default gives no GPUs: refused with the reason, nothing queued
    const r0 = await ask(st.c, { pool: 'a100', slices: 1 });
    assert.equal(r0.status, 422, r0.text);
    assertErrorShape(r0.json, 'exceeds_quota');
    assert.match(r0.json.error.message, /student role may hold 0 slices of pool 'a100'/);
    // no default at all for the role: no quota
    const del = await w.admin.del('/api/v1/quotas/defaults?role=student');
    assert.equal(del.status, 204, del.text);
    const r1 = await ask(st.c, { pool: 'a100', slices: 1 });
    assert.equal(r1.status, 403, r1.text);
    assert.match(r1.json.error.message, /no quota/);
    assert.equal(sql(w.srv, `SELECT count(*) FROM alloc_requests WHERE user_id = ${st.id}`), '0');
    // admins only
    assert.equal((await st.c.get('/api/v1/quotas/defaults')).status, 403);
    assert.equal((await st.c.req('PUT', '/api/v1/quotas/defaults', { role: 'student', pool: 'a100' })).status, 403);
    for (const body of [{ role: 'king' }, { role: 'student', max_slices: -1 }, { role: 'student', surprise: 1 }]) {
      const b = await w.admin.req('PUT', '/api/v1/quotas/defaults', body);
      assert.equal(b.status, 400, `${JSON.stringify(body)} → ${b.text}`);
    }
    assert.equal((await w.admin.req('PUT', '/api/v1/quotas/defaults', { role: 'student', pool: 'nope' })).status, 404);
    // the admin sets the role's default in the pool: it works, within it
    const set = await w.admin.req('PUT', '/api/v1/quotas/defaults', { role: 'student', pool: 'a100', max_slices: 2 });
    assert.equal(set.status, 200, set.text);
    assert.deepEqual(set.json, { role: 'student', pool: 'a100', max_slices: 2, max_cpu_millis: null, max_mem_mib: null, gpu_hours_per_week: null, max_runtime_s: null, max_tensorboards: null });
    assert.equal(sql(w.srv, "SELECT count(*) FROM audit_log WHERE action = 'quota_default.set' AND target = 'student/a100'"), '1');
    const a = await askOk(st.c, { pool: 'a100', slices: 1 });
    await allocated(st.c, a.id);
    const big = await ask(st.c, { pool: 'a100', slices: 3 });
    assert.equal(big.status, 422, big.text);
    assertErrorShape(big.json, 'exceeds_quota');
    assert.match(big.json.error.message, /may hold 2 slices/);
    const b = await askOk(st.c, { pool: 'a100', slices: 2 });
    const held = await until(st.c, b.id, (x) => x.reason_code === 'quota', 5000, 'reason quota');
    assert.match(held.reason, /1 of 2 slices/);
  });

  it('refuses raw allocations without a lease to non-admins, and releases leased ones when the lease ends', async () => {
    const nl = await st.c.post('/api/v1/allocations', { pool: 'a100', slices: 1, cpu_millis: 100, mem_mib: 64 });
    assert.equal(nl.status, 403, nl.text);
    assertErrorShape(nl.json, 'forbidden');
    assert.match(nl.json.error.message, /lease/);
    const long = await ask(st.c, { pool: 'a100', slices: 1, lease_s: 10000000 });
    assert.equal(long.status, 400, long.text);
    // an admin may hold one without a lease, or with one
    const free = await w.admin.post('/api/v1/allocations', { pool: 'a100', slices: 1, cpu_millis: 100, mem_mib: 64 });
    assert.equal(free.status, 202, free.text);
    assert.equal(free.json.lease_s, null);
    const adm = await w.admin.post('/api/v1/allocations', { pool: 'a100', slices: 1, cpu_millis: 100, mem_mib: 64, lease_s: 1 });
    assert.equal(adm.status, 202, adm.text);
    assert.equal(adm.json.lease_s, 1);
    const s = await askOk(st.c, { pool: 'a100', slices: 1, lease_s: 2 });
    const got = await allocated(w.admin, adm.json.id);
    assert.ok(got.lease_ends_at);
    await allocated(st.c, s.id);
    const gone = await until(w.admin, adm.json.id, (x) => x.state === 'released', 6000, 'released when the lease ends');
    assert.match(gone.release_reason, /lease of 1 s ended/);
    assert.ok(ms(gone.released_at) - ms(gone.allocated_at) >= 1000);
    const sg = await until(st.c, s.id, (x) => x.state === 'released', 8000, 'the student\'s lease ends too');
    assert.match(sg.release_reason, /lease of 2 s ended/);
    assert.equal((await getAlloc(w.admin, free.json.id)).state, 'allocated', 'no lease: held until released');
  });

  it('keeps a pool restricted to researchers from students', async () => {
    assert.deepEqual(pool.roles, ['admin', 'teacher', 'researcher', 'student'], 'all roles by default');
    for (const role of ['student', 'researcher'])
      assert.equal((await w.admin.req('PUT', '/api/v1/quotas/defaults', { role, pool: 'a100' })).status, 200);
    assert.equal((await w.admin.patch(`/api/v1/pools/${pool.id}`, { roles: ['researcher', 'kings'] })).status, 400);
    const p = await w.admin.patch(`/api/v1/pools/${pool.id}`, { roles: ['researcher'] });
    assert.equal(p.status, 200, p.text);
    assert.deepEqual(p.json.roles, ['researcher']);
    const sr = await ask(st.c, { pool: 'a100', slices: 1 });
    assert.equal(sr.status, 403, sr.text);
    assert.match(sr.json.error.message, /pool 'a100' is not open to the student role/);
    const rr = await askOk(rs.c, { pool: 'a100', slices: 1 });
    await allocated(rs.c, rr.id);
    const ar = await w.admin.post('/api/v1/allocations', { pool: 'a100', slices: 1, cpu_millis: 100, mem_mib: 64 });
    assert.equal(ar.status, 202, 'admins may use every pool');
    assert.equal((await w.admin.patch(`/api/v1/pools/${pool.id}`, { roles: ['admin', 'teacher', 'researcher', 'student'] })).status, 200);
  });
});
