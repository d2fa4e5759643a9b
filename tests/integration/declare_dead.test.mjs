// declare_dead.test.mjs — a node that is down for good: declaring it dead
// releases its allocations (accounted), cordons it, and is refused while
// the node still answers.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, Client, ADMIN_PASSWORD } from '../lib/server.mjs';
import { sql, eventually, stopClean } from '../lib/itest.mjs';

const env = process.env;

describe('declaring a node dead', () => {
  let srv, admin, node, pool;

  before(async () => {
    assert.ok(env.GPUCLOUD_WORLD_DOCKER1 && env.GPUCLOUD_WORLD_NODE1_GPUS, 'run through make test (it starts the world)');
    // one health check at start, then none: the test sets the health itself
    srv = await startServer({ args: ['--node-check-interval=3600', '--node-down-after=0', '--sched-interval-ms=200'] });
    admin = new Client(srv.base);
    assert.equal((await admin.login('admin', ADMIN_PASSWORD)).status, 200);
    const gpus = env.GPUCLOUD_WORLD_NODE1_GPUS.split(',').map((d) => ({ model: 'NVIDIA A100-SXM4-80GB', memory_mib: 81920, devices: [d] }));
    node = (await admin.post('/api/v1/nodes', { name: 'node1', url: env.GPUCLOUD_WORLD_DOCKER1, gpus })).json;
    pool = (await admin.post('/api/v1/pools', { name: 'a100' })).json;
    assert.equal((await admin.req('PUT', `/api/v1/pools/${pool.id}/gpus`, { gpu_ids: node.gpus.map((g) => g.id) })).status, 200);
    assert.ok(await eventually(async () => (await admin.get(`/api/v1/nodes/${node.id}`)).json.state === 'up', 10000));
  });

  after(async () => { await stopClean(srv); });

  it('is refused while the node answers, then releases its allocations and cordons it', async () => {
    const a = (await admin.post('/api/v1/allocations', { pool: 'a100', slices: 2 })).json;
    const got = await eventually(async () => { const x = (await admin.get(`/api/v1/allocations/${a.id}`)).json; return x.state === 'allocated' && x; }, 10000);
    assert.ok(got, 'allocated');
    const refused = await admin.post(`/api/v1/nodes/${node.id}/declare-dead`);
    assert.equal(refused.status, 409, refused.text);
    assert.match(refused.json.error.message, /answers its health checks/);
    assert.equal((await admin.get(`/api/v1/allocations/${a.id}`)).json.state, 'allocated');

    sql(srv, `UPDATE nodes SET health = 'down', down_since = now() WHERE id = ${node.id}`);
    // while down and not declared dead, the allocation stays (fenced)
    assert.equal((await admin.get(`/api/v1/allocations/${a.id}`)).json.state, 'allocated');
    const r = await admin.post(`/api/v1/nodes/${node.id}/declare-dead`);
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.admin_state, 'cordoned');
    const after = (await admin.get(`/api/v1/allocations/${a.id}`)).json;
    assert.equal(after.state, 'released');
    assert.match(after.release_reason, /node node1 declared dead/);
    assert.equal(sql(srv, `SELECT count(*) FROM allocations WHERE released_at IS NULL`), '0');
    assert.equal(sql(srv, `SELECT count(*) FROM gpu_usage`), '1');
    const audit = (await admin.get('/api/v1/audit?action=node.dead')).json.items;
    assert.equal(audit.length, 1);
    assert.equal(audit[0].details.released, 1);

    // back up but cordoned: nothing is placed there until activated
    sql(srv, `UPDATE nodes SET health = 'up', down_since = NULL WHERE id = ${node.id}`);
    const b = (await admin.post('/api/v1/allocations', { pool: 'a100', slices: 1 })).json;
    await new Promise((res) => setTimeout(res, 800));
    assert.equal((await admin.get(`/api/v1/allocations/${b.id}`)).json.state, 'queued');
    assert.equal((await admin.patch(`/api/v1/nodes/${node.id}`, { state: 'active' })).status, 200);
    assert.ok(await eventually(async () => (await admin.get(`/api/v1/allocations/${b.id}`)).json.state === 'allocated', 10000));
    assert.equal((await admin.post('/api/v1/nodes/999999/declare-dead')).status, 404);
  });
});
