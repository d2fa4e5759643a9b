// wake_bridge.test.mjs — a wake-up published on a replica that is not the
// scheduler leader reaches the leader (PostgreSQL NOTIFY on gc_wake), so a
// request posted there is scheduled at once rather than at the leader's
// next periodic pass.  Both replicas run with a one-minute pass period:
// before the bridge, the request waited for that minute.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, Client, ADMIN_PASSWORD } from '../lib/server.mjs';
import { sql, eventually, stopClean } from '../lib/itest.mjs';

const env = process.env;
const ARGS = ['--node-check-interval=1', '--sched-interval-ms=60000'];
const LEADS = /now runs the scheduler/;

describe('wake-ups reach the leader from another replica', () => {
  let first, second, admin, st1, st2;

  before(async () => {
    assert.ok(env.GPUCLOUD_WORLD_DOCKER1 && env.GPUCLOUD_WORLD_NODE1_GPUS,
      'the world is not running: run through make test');
    first = await startServer({ args: ARGS });
    admin = new Client(first.base);
    assert.equal((await admin.login('admin', ADMIN_PASSWORD)).status, 200);
    const gpus = env.GPUCLOUD_WORLD_NODE1_GPUS.split(',')
      .map((d) => ({ model: 'NVIDIA A100-SXM4-80GB', memory_mib: 81920, devices: [d] }));
    const n = await admin.post('/api/v1/nodes', { name: 'node1', url: env.GPUCLOUD_WORLD_DOCKER1, gpus });
    assert.equal(n.status, 201, n.text);
    assert.ok(await eventually(async () => (await admin.get(`/api/v1/nodes/${n.json.id}`)).json.state === 'up', 10000),
      'node came up');
    const p = await admin.post('/api/v1/pools', { name: 'a100', sharing: 'exclusive' });
    assert.equal(p.status, 201, p.text);
    assert.equal((await admin.req('PUT', `/api/v1/pools/${p.json.id}/gpus`, { gpu_ids: n.json.gpus.map((g) => g.id) })).status, 200);
    assert.equal((await admin.req('PUT', '/api/v1/quotas/defaults', { role: 'student', pool: 'a100' })).status, 200);
    assert.equal((await admin.post('/api/v1/users', { username: 'wakest', role: 'student', password: 'wakest-pass-1' })).status, 201);
    st1 = new Client(first.base);
    assert.equal((await st1.login('wakest', 'wakest-pass-1')).status, 200);
    assert.ok(await eventually(() => LEADS.test(first.log()), 10000, 100), 'the first replica leads');
    second = await startServer({ args: ARGS, db: first.db });
    st2 = new Client(second.base);
    assert.equal((await st2.login('wakest', 'wakest-pass-1')).status, 200);
  });
  after(async () => {
    await stopClean(second);
    await stopClean(first);
  });

  it('schedules a request posted to the non-leader within seconds, not at the next pass', async () => {
    // a request through the leader: its own wake-up, its own pass
    const a = await st1.post('/api/v1/allocations', { pool: 'a100', slices: 1, cpu_millis: 100, mem_mib: 64, lease_s: 3600 });
    assert.equal(a.status, 202, a.text);
    assert.ok(await eventually(async () => (await st1.get(`/api/v1/allocations/${a.json.id}`)).json.state === 'allocated', 5000, 100),
      'allocated through the leader');
    // the second replica has not taken over, and a minute is far away
    assert.doesNotMatch(second.log(), LEADS);
    const t0 = Date.now();
    const b = await st2.post('/api/v1/allocations', { pool: 'a100', slices: 1, cpu_millis: 100, mem_mib: 64, lease_s: 3600 });
    assert.equal(b.status, 202, b.text);
    assert.ok(await eventually(async () => (await st2.get(`/api/v1/allocations/${b.json.id}`)).json.state === 'allocated', 15000, 100),
      'allocated through the non-leader');
    assert.ok(Date.now() - t0 < 15000, `took ${Date.now() - t0} ms`);
    assert.doesNotMatch(second.log(), LEADS);
    assert.equal(sql(first, 'SELECT count(*) FROM allocations WHERE released_at IS NULL'), '2');
    for (const id of [a.json.id, b.json.id])
      assert.equal((await st1.del(`/api/v1/allocations/${id}`)).status, 200);
  });
});
