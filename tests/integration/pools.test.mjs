// pools.test.mjs — GPU pools over the world's nodes: exclusive and shared
// pools, slices made from membership, a GPU in one pool at most (also as a
// database constraint), capacity counting only schedulable nodes, and the
// read-only cluster view for everyone.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, Client, ADMIN_PASSWORD } from '../lib/server.mjs';
import { sql, eventually, assertErrorShape, stopClean } from '../lib/itest.mjs';

const env = process.env;

describe('GPU pools', () => {
  let srv, admin, n1, n2;

  before(async () => {
    for (const k of ['GPUCLOUD_WORLD_DOCKER1', 'GPUCLOUD_WORLD_DOCKER2', 'GPUCLOUD_WORLD_NODE1_GPUS', 'GPUCLOUD_WORLD_NODE2_GPUS'])
      assert.ok(env[k], `${k} is not set: run through make test (it starts the world)`);
    srv = await startServer({ args: ['--node-check-interval=1', '--node-down-after=2'] });
    admin = new Client(srv.base);
    assert.equal((await admin.login('admin', ADMIN_PASSWORD)).status, 200);
    const decl = (list, model, mib) => list.split(',').map((d) => ({ model, memory_mib: mib, devices: [d] }));
    n1 = (await admin.post('/api/v1/nodes', { name: 'node1', url: env.GPUCLOUD_WORLD_DOCKER1, gpus: decl(env.GPUCLOUD_WORLD_NODE1_GPUS, 'NVIDIA A100-SXM4-80GB', 81920) })).json;
    n2 = (await admin.post('/api/v1/nodes', { name: 'node2', url: env.GPUCLOUD_WORLD_DOCKER2, gpus: decl(env.GPUCLOUD_WORLD_NODE2_GPUS, 'NVIDIA T4', 15360) })).json;
    assert.ok(n1.id && n2.id);
    for (const id of [n1.id, n2.id])
      assert.ok(await eventually(async () => (await admin.get(`/api/v1/nodes/${id}`)).json.state === 'up', 10000));
  });

  after(async () => { await stopClean(srv); });

  it('makes an exclusive pool of whole GPUs', async () => {
    const p = await admin.post('/api/v1/pools', { name: 'a100', description: 'training', sharing: 'exclusive' });
    assert.equal(p.status, 201, p.text);
    assert.equal(p.json.slices, 0);
    const r = await admin.req('PUT', `/api/v1/pools/${p.json.id}/gpus`, { gpu_ids: n1.gpus.map((g) => g.id) });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.gpus, n1.gpus.length);
    assert.equal(r.json.slices, n1.gpus.length);
    assert.equal(r.json.schedulable_slices, n1.gpus.length);
    assert.equal(r.json.free_slices, n1.gpus.length);
    assert.deepEqual(r.json.models, ['NVIDIA A100-SXM4-80GB']);
    assert.equal(r.json.simulated, true);
    assert.equal(r.json.memory_cap, null);
    assert.equal(r.json.nodes.length, 1);
    assert.equal(r.json.nodes[0].node, 'node1');
    assert.ok(r.json.nodes[0].gpus.every((g) => g.slices === 1 && g.simulated));
  });

  it('makes a shared pool of slots with a per-slot memory that is advisory', async () => {
    const bad = await admin.post('/api/v1/pools', { name: 't4-lab', sharing: 'shared' });
    assert.equal(bad.status, 400);
    assert.match(bad.json.error.message, /slots_per_gpu and memory_per_slot_mib/);
    const p = await admin.post('/api/v1/pools', { name: 't4-lab', sharing: 'shared', slots_per_gpu: 7, memory_per_slot_mib: 2048 });
    assert.equal(p.status, 201, p.text);
    const r = await admin.req('PUT', `/api/v1/pools/${p.json.id}/gpus`, { gpu_ids: n2.gpus.map((g) => g.id) });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.slices, 7 * n2.gpus.length);
    assert.equal(r.json.memory_cap, 'advisory');
    assert.ok(r.json.nodes[0].gpus.every((g) => g.slices === 7));
    assert.equal(sql(srv, `SELECT count(DISTINCT (gpu_id, slot)) FROM slices WHERE pool_id = ${p.json.id}`), String(7 * n2.gpus.length));
  });

  it('keeps a GPU in one pool: moving one that belongs elsewhere or is unknown is a 409 and changes nothing', async () => {
    const pools = (await admin.get('/api/v1/pools')).json.items;
    const a100 = pools.find((p) => p.name === 'a100');
    const lab = pools.find((p) => p.name === 't4-lab');
    const before = sql(srv, 'SELECT count(*) FROM slices');
    let r = await admin.req('PUT', `/api/v1/pools/${lab.id}/gpus`, { gpu_ids: [n2.gpus[0].id, n1.gpus[0].id] });
    assert.equal(r.status, 409, r.text);
    assert.match(r.json.error.message, new RegExp(`GPUs ${n1.gpus[0].id} are unknown or in another pool`));
    r = await admin.req('PUT', `/api/v1/pools/${lab.id}/gpus`, { gpu_ids: [999999] });
    assert.equal(r.status, 409);
    assert.equal(sql(srv, 'SELECT count(*) FROM slices'), before);
    assert.equal((await admin.get(`/api/v1/pools/${a100.id}`)).json.slices, n1.gpus.length);
    // the database refuses it too, whatever the API does
    assert.throws(() => sql(srv, `UPDATE gpus SET pool_id = ${lab.id} WHERE id = ${n1.gpus[0].id}`));
    assert.throws(() => sql(srv, `INSERT INTO slices (pool_id, gpu_id, slot) VALUES (${lab.id}, ${n1.gpus[0].id}, 5)`));
    assert.throws(() => sql(srv, `INSERT INTO slices (pool_id, gpu_id, slot) VALUES (${a100.id}, ${n1.gpus[0].id}, 0)`));
  });

  it('remakes slices when membership shrinks, freeing the GPUs left out', async () => {
    const a100 = (await admin.get('/api/v1/pools')).json.items.find((p) => p.name === 'a100');
    const keep = n1.gpus.slice(0, 2).map((g) => g.id);
    const r = await admin.req('PUT', `/api/v1/pools/${a100.id}/gpus`, { gpu_ids: keep });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.slices, 2);
    assert.equal(sql(srv, `SELECT count(*) FROM gpus WHERE node_id = ${n1.id} AND pool_id IS NULL`), String(n1.gpus.length - 2));
  });

  it('counts only schedulable nodes as capacity', async () => {
    const a100 = (await admin.get('/api/v1/pools')).json.items.find((p) => p.name === 'a100');
    assert.equal((await admin.patch(`/api/v1/nodes/${n1.id}`, { state: 'cordoned' })).status, 200);
    let p = (await admin.get(`/api/v1/pools/${a100.id}`)).json;
    assert.equal(p.slices, 2);
    assert.equal(p.schedulable_slices, 0);
    assert.equal(p.nodes[0].state, 'cordoned');
    assert.equal((await admin.patch(`/api/v1/nodes/${n1.id}`, { state: 'active' })).status, 200);
    p = (await admin.get(`/api/v1/pools/${a100.id}`)).json;
    assert.equal(p.schedulable_slices, 2);
  });

  it('shows pools to everyone but lets only admins change them', async () => {
    assert.equal((await admin.post('/api/v1/users', { username: 'poolstudent', role: 'student', password: 'student-pass-1' })).status, 201);
    const s = new Client(srv.base);
    assert.equal((await s.login('poolstudent', 'student-pass-1')).status, 200);
    const view = await s.get('/api/v1/pools');
    assert.equal(view.status, 200);
    assert.deepEqual(view.json.items.map((p) => p.name), ['a100', 't4-lab']);
    assert.equal((await s.post('/api/v1/pools', { name: 'mine' })).status, 403);
    assert.equal((await s.req('PUT', `/api/v1/pools/${view.json.items[0].id}/gpus`, { gpu_ids: [] })).status, 403);
  });

  it('refuses bad settings with 400 and removes pools, releasing their GPUs', async () => {
    for (const [body, msg] of [
      [{ name: 'Bad' }, /pool name/],
      [{ name: 'x', sharing: 'weird' }, /sharing must be/],
      [{ name: 'x', sharing: 'shared', slots_per_gpu: 65, memory_per_slot_mib: 1 }, /slots_per_gpu/],
      [{ name: 'x', extra: 1 }, /unknown field/],
    ]) {
      const r = await admin.post('/api/v1/pools', body);
      assert.equal(r.status, 400, `${JSON.stringify(body)} → ${r.text}`);
      assertErrorShape(r.json, 'invalid');
      assert.match(r.json.error.message, msg);
    }
    const lab = (await admin.get('/api/v1/pools')).json.items.find((p) => p.name === 't4-lab');
    assert.equal((await admin.patch(`/api/v1/pools/${lab.id}`, { sharing: 'exclusive' })).status, 400);
    const u = await admin.patch(`/api/v1/pools/${lab.id}`, { description: 'lab sessions', memory_per_slot_mib: 4096 });
    assert.equal(u.status, 200, u.text);
    assert.equal(u.json.memory_per_slot_mib, 4096);
    assert.equal((await admin.post('/api/v1/pools', { name: 'a100' })).status, 409);
    assert.equal((await admin.del(`/api/v1/pools/${lab.id}`)).status, 204);
    assert.equal((await admin.get(`/api/v1/pools/${lab.id}`)).status, 404);
    assert.equal(sql(srv, `SELECT count(*) FROM gpus WHERE node_id = ${n2.id} AND pool_id IS NOT NULL`), '0');
    assert.equal(sql(srv, `SELECT count(*) FROM slices WHERE pool_id = ${lab.id}`), '0');
  });
});
