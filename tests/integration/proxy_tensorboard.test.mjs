// proxy_tensorboard.test.mjs — one call starts a TensorBoard on a folder of
// the caller's home: an instance of kind 'tensorboard' without GPUs, run by
// the instances driver on a real engine, served on its own route through the
// proxy.  TensorBoard is not packaged in Debian and PyPI is out of reach, so
// the world's stand-in image is the Jupyter image under another name running
// Python's http.server over $GPUCLOUD_LOGDIR: the test checks the mechanism
// (the log folder served through the route), not TensorBoard itself.
import { createHash } from 'node:crypto';
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { assertErrorShape, stopClean } from '../lib/itest.mjs';
import { world, mkUser, waitState, cleanup, env, sql } from './instances_lib.mjs';

const F = '/api/v1/files';

describe('TensorBoard from a folder', () => {
  let w, alice, bob;

  before(async () => {
    assert.ok(env.GPUCLOUD_WORLD_TENSORBOARD_IMAGE, 'GPUCLOUD_WORLD_TENSORBOARD_IMAGE is not set: run deploy/world.sh up');
    w = await world({ node2: false, args: [`--tensorboard-image=${env.GPUCLOUD_WORLD_TENSORBOARD_IMAGE}`] });
    const img = await w.admin.post('/api/v1/images', {
      reference: env.GPUCLOUD_WORLD_TENSORBOARD_IMAGE, registry_id: w.registry.id, display_name: 'TensorBoard (stand-in)',
      framework: 'tensorboard', default_cmd: ['sh', '-c', 'exec python3 -m http.server 6006 --bind 0.0.0.0 --directory "$GPUCLOUD_LOGDIR"'],
      app_ports: [{ name: 'tensorboard', port: 6006 }],
    });
    assert.equal(img.status, 201, img.text);
    alice = await mkUser(w, 'alice');
    bob = await mkUser(w, 'bob');
  });

  after(async () => { cleanup(w?.srv); await stopClean(w?.srv); });

  it('refuses paths outside the home', async () => {
    for (const path of ['', '/etc', '../bob', 'a/../../x', 'a//b', './a', 'a\\b'])
      assertErrorShape((await alice.c.post('/api/v1/tensorboards', { path })).json, 'invalid');
    assertErrorShape((await alice.c.post('/api/v1/tensorboards', {})).json, 'invalid');
  });

  it('serves the log folder on its own route, to its owner only', async () => {
    assert.equal((await alice.c.post(`${F}/home/runs`, { op: 'mkdir' })).status, 201);
    assert.equal((await alice.c.post(`${F}/home/runs/exp1`, { op: 'mkdir' })).status, 201);
    const put = await alice.c.req('PUT', `${F}/home/runs/exp1/events.out.tfevents.1`, 'scalars', { 'content-type': 'application/octet-stream' });
    assert.equal(put.status, 201, put.text);
    const tb = await alice.c.post('/api/v1/tensorboards', { path: 'runs/exp1/' });
    assert.equal(tb.status, 202, tb.text);
    assert.equal(tb.json.logdir, '/home/alice/runs/exp1');
    assert.equal(sql(w.srv, `SELECT kind || ' ' || (pool_id IS NULL) FROM instances WHERE id = ${tb.json.instance_id}`), 'tensorboard true');
    const inst = await waitState(alice.c, tb.json.instance_id, 'running', 90000);
    assert.equal(inst.gpus.length, 0);
    const routes = (await alice.c.get(`/api/v1/routes?instance_id=${inst.id}`)).json.items;
    assert.equal(routes.length, 1);
    assert.equal(routes[0].port_name, 'tensorboard');
    assert.equal(routes[0].kind, 'tensorboard');
    // through the proxy, with the handshake's cookie
    const state = 'tensorboard-state-secret';
    const o = await alice.c.post(`/api/v1/routes/${routes[0].id}/open`, { state: createHash('sha256').update(state).digest('hex') });
    assert.equal(o.status, 200, o.text);
    const loc = new URL(o.json.url);
    const get = (path, cookie) => new Promise((resolve, reject) => {
      http.get({ host: '127.0.0.1', port: w.srv.port, path, headers: { host: loc.host, ...(cookie ? { cookie } : {}) } }, (res) => {
        let b = '';
        res.on('data', (d) => { b += d; });
        res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: b }));
      }).on('error', reject);
    });
    const hs = await get(loc.pathname + loc.search, `gc_state=${state}`);
    const cookie = hs.headers['set-cookie'].find((c) => c.startsWith('gc_route=')).split(';')[0];
    let page;
    for (let i = 0; i < 50; i++) { // the server inside may take a moment to listen
      page = await get('/', cookie);
      if (page.status === 200) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    assert.equal(page.status, 200, page.body);
    assert.match(page.body, /events\.out\.tfevents\.1/);
    // bob: not his instance, not his route
    assert.equal((await bob.c.post(`/api/v1/routes/${routes[0].id}/open`, { state: createHash('sha256').update('x').digest('hex') })).status, 404);
    assert.equal((await bob.c.get(`/api/v1/instances/${inst.id}`)).status, 404);
  });

  it('holds TensorBoards to the CPU-only quota and the TensorBoard cap, through the scheduler', async () => {
    assert.equal((await bob.c.post(`${F}/home/logs`, { op: 'mkdir' })).status, 201);
    // students: 1000 millicores of CPU-only work, up to 5 TensorBoards
    const set = await w.admin.req('PUT', '/api/v1/quotas/defaults', { role: 'student', max_cpu_millis: 1000, max_mem_mib: 4096, max_tensorboards: 5 });
    assert.equal(set.status, 200, set.text);
    const res = [];
    for (let i = 0; i < 4; i++) res.push(await bob.c.post('/api/v1/tensorboards', { path: 'logs' }));
    assert.deepEqual(res.map((r) => r.status), [202, 202, 409, 409], res.map((r) => r.text).join(' | '));
    for (const r of res.slice(2)) {
      assertErrorShape(r.json, 'conflict');
      assert.match(r.json.error.message, /CPU quota: .* 1000 CPU millis .* 1000 are in use, this one asks 500/);
    }
    // each asked the scheduler for its cpu and memory, without a pool
    for (const r of res.slice(0, 2))
      assert.equal(sql(w.srv, `SELECT r.owner_kind || ' ' || (r.pool_id IS NULL) || ' ' || r.slices || ' ' || r.cpu_millis || ' ' || r.mem_mib
        FROM instances i JOIN alloc_requests r ON r.id = i.request_id WHERE i.id = ${r.json.instance_id}`), 'tensorboard true 0 500 512');
    assert.equal(sql(w.srv, `SELECT count(*) FROM instances WHERE user_id = ${bob.id} AND kind = 'tensorboard'`), '2');
    // the cap: with room in the CPU quota, the third is refused by the cap
    assert.equal((await w.admin.req('PUT', '/api/v1/quotas/defaults', { role: 'student', max_cpu_millis: 4000, max_mem_mib: 4096, max_tensorboards: 2 })).status, 200);
    const capped = await bob.c.post('/api/v1/tensorboards', { path: 'logs' });
    assert.equal(capped.status, 409, capped.text);
    assert.match(capped.json.error.message, /TensorBoard quota: you may run 2 TensorBoards at once/);
    for (const r of res.slice(0, 2)) {
      await waitState(bob.c, r.json.instance_id, 'running', 90000);
      assert.equal((await bob.c.del(`/api/v1/instances/${r.json.instance_id}`)).status, 202);
      await waitState(bob.c, r.json.instance_id, 'deleted', 30000);
    }
  });

  it('says so when no TensorBoard image is set up', async () => {
    sql(w.srv, `UPDATE images SET reference = reference || '-gone' WHERE reference = '${env.GPUCLOUD_WORLD_TENSORBOARD_IMAGE}'`);
    const r = await alice.c.post('/api/v1/tensorboards', { path: 'runs' });
    assert.equal(r.status, 409);
    assertErrorShape(r.json, 'conflict');
  });
});
