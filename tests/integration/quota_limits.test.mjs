// quota_limits.test.mjs — the per-user, per-pool limits beyond slices:
// concurrent CPU and memory, a GPU-hour budget over 7 days, and a maximum
// runtime after which the scheduler releases the allocation.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, Client, ADMIN_PASSWORD } from '../lib/server.mjs';
import { sql, eventually, stopClean } from '../lib/itest.mjs';

const env = process.env;

describe('quota limits', () => {
  let srv, admin, student, sid;

  before(async () => {
    assert.ok(env.GPUCLOUD_WORLD_DOCKER1 && env.GPUCLOUD_WORLD_NODE1_GPUS, 'run through make test (it starts the world)');
    srv = await startServer({ args: ['--node-check-interval=1', '--sched-interval-ms=200'] });
    admin = new Client(srv.base);
    assert.equal((await admin.login('admin', ADMIN_PASSWORD)).status, 200);
    const gpus = env.GPUCLOUD_WORLD_NODE1_GPUS.split(',').map((d) => ({ model: 'NVIDIA A100-SXM4-80GB', memory_mib: 81920, devices: [d] }));
    const node = (await admin.post('/api/v1/nodes', { name: 'node1', url: env.GPUCLOUD_WORLD_DOCKER1, gpus })).json;
    const pool = (await admin.post('/api/v1/pools', { name: 'a100' })).json;
    assert.equal((await admin.req('PUT', `/api/v1/pools/${pool.id}/gpus`, { gpu_ids: node.gpus.map((g) => g.id) })).status, 200);
    assert.ok(await eventually(async () => (await admin.get(`/api/v1/nodes/${node.id}`)).json.state === 'up', 10000));
    sid = (await admin.post('/api/v1/users', { username: 'qstudent', role: 'student', password: 'student-pass-1' })).json.user.id;
    student = new Client(srv.base);
    assert.equal((await student.login('qstudent', 'student-pass-1')).status, 200);
  });

  after(async () => { await stopClean(srv); });

  const state = async (id) => (await student.get(`/api/v1/allocations/${id}`)).json;
  const settle = () => new Promise((r) => setTimeout(r, 800));

  it('holds back a request that would pass the CPU limit, with the numbers', async () => {
    const q = await admin.req('PUT', '/api/v1/quotas', { user_id: sid, pool: 'a100', max_cpu_millis: 150, max_mem_mib: 4096 });
    assert.equal(q.status, 200, q.text);
    assert.equal(q.json.max_cpu_millis, 150);
    assert.equal(q.json.max_slices, null);
    const a = (await student.post('/api/v1/allocations', { lease_s: 3600, pool: 'a100', slices: 1, cpu_millis: 100, mem_mib: 1024 })).json;
    assert.ok(await eventually(async () => (await state(a.id)).state === 'allocated', 10000));
    const b = (await student.post('/api/v1/allocations', { lease_s: 3600, pool: 'a100', slices: 1, cpu_millis: 100, mem_mib: 1024 })).json;
    await settle();
    const bs = await state(b.id);
    assert.equal(bs.state, 'queued');
    assert.equal(bs.reason_code, 'quota');
    assert.match(bs.reason, /100 of 150 millicores of cpu of this pool in use; this needs 100/);
    // memory likewise
    const c = (await student.post('/api/v1/allocations', { lease_s: 3600, pool: 'a100', slices: 1, cpu_millis: 0, mem_mib: 4000 })).json;
    await settle();
    assert.match((await state(c.id)).reason, /1024 of 4096 MiB of memory/);
    const me = (await student.get('/api/v1/me')).json;
    assert.deepEqual(me.quotas.a100, { max_slices: null, max_cpu_millis: 150, max_mem_mib: 4096, gpu_hours_per_week: null, max_runtime_s: null });
    for (const x of [a, b, c]) await student.del(`/api/v1/allocations/${x.id}`);
  });

  it('holds back requests once the GPU-hour budget of the last 7 days is spent', async () => {
    assert.equal((await admin.req('PUT', '/api/v1/quotas', { user_id: sid, pool: 'a100', gpu_hours_per_week: 2 })).status, 200);
    sql(srv, `INSERT INTO gpu_usage (user_id, pool_id, day, gpu_seconds) SELECT ${sid}, id, current_date - 1, 7300 FROM pools WHERE name = 'a100'
              ON CONFLICT (user_id, pool_id, day) DO UPDATE SET gpu_seconds = 7300`);
    const a = (await student.post('/api/v1/allocations', { lease_s: 3600, pool: 'a100', slices: 1 })).json;
    await settle();
    const s = await state(a.id);
    assert.equal(s.state, 'queued');
    assert.equal(s.reason_code, 'quota');
    assert.match(s.reason, /GPU-hour budget: 2\.\d of 2\.0 h of this pool used in the last 7 days/);
    // a larger budget lets it run
    assert.equal((await admin.req('PUT', '/api/v1/quotas', { user_id: sid, pool: 'a100', gpu_hours_per_week: 10 })).status, 200);
    assert.ok(await eventually(async () => (await state(a.id)).state === 'allocated', 10000));
    await student.del(`/api/v1/allocations/${a.id}`);
  });

  it('releases an allocation that reaches the maximum runtime', async () => {
    assert.equal((await admin.req('PUT', '/api/v1/quotas', { user_id: sid, pool: 'a100', max_runtime_s: 1 })).status, 200);
    const a = (await student.post('/api/v1/allocations', { lease_s: 3600, pool: 'a100', slices: 1 })).json;
    assert.ok(await eventually(async () => (await state(a.id)).state === 'allocated', 10000));
    const done = await eventually(async () => { const x = await state(a.id); return x.state === 'released' && x; }, 10000, 200);
    assert.ok(done, 'released by the scheduler');
    assert.match(done.release_reason, /reached the maximum runtime of 1 s/);
    assert.ok(Date.parse(done.released_at) - Date.parse(done.allocated_at) >= 1000);
  });

  it('refuses bad limits', async () => {
    for (const body of [{ user_id: sid, pool: 'a100', max_cpu_millis: -1 }, { user_id: sid, pool: 'a100', max_runtime_s: 0 },
      { user_id: sid, pool: 'a100', max_slices: 'x' }, { user_id: sid, pool: 'a100', surprise: 1 }]) {
      const r = await admin.req('PUT', '/api/v1/quotas', body);
      assert.equal(r.status, 400, `${JSON.stringify(body)} → ${r.text}`);
    }
    assert.equal((await admin.req('PUT', '/api/v1/quotas', { user_id: 999999, pool: 'a100' })).status, 404);
  });
});
