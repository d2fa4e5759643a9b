// degraded.test.mjs — a node whose engine answers its health checks but
// fails to start containers (gpucloud issue 12: "local" kept showing Up while
// every start failed, and the scheduler kept placing work there).
//
// The failing node is the world's node2 registered with declared GPUs whose
// device files do not exist: its engine answers /info, creates the container,
// and refuses every start with HTTP 500 ("error gathering device information
// while adding custom device ..."), an error of its own.  After
// node_degrade_after (3) such failures in a row it is degraded: state
// "degraded" with the engine's words, the scheduler places nothing there
// (reason "degraded") and work goes to node1; health checks do not clear it,
// a successful start or an admin does.  A 4xx (the user's command) does not
// count.  Nothing shared is stopped: both engines stay up.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Client, ADMIN_PASSWORD } from '../lib/server.mjs';
import { call, assertErrorShape, stopClean, sha256hex } from '../lib/itest.mjs';
import { env, world, mkUser, create, waitState, cleanup, sql, eventually, sleep } from './instances_lib.mjs';

describe('a node whose engine fails container starts', () => {
  let w, alice, bad, n1, pool;
  const node = async (id) => (await w.admin.get(`/api/v1/nodes/${id}`)).json;

  before(async () => {
    w = await world({ node2: false, args: ['--node-degrade-after=3'] });
    alice = await mkUser(w, 'alice');
    n1 = w.n1;
    // device files that are not there: the engine fails every start
    const missing = `${env.GPUCLOUD_WORLD_DIR}/gpus/missing-${process.pid}`;
    const b = await w.admin.post('/api/v1/nodes', {
      name: 'node2', url: env.GPUCLOUD_WORLD_DOCKER2,
      gpus: [0, 1].map((i) => ({ model: 'NVIDIA A100-SXM4-80GB', memory_mib: 81920, devices: [`${missing}/nvidia${i}`] })),
    });
    assert.equal(b.status, 201, b.text);
    bad = b.json;
    assert.ok(await eventually(async () => (await node(bad.id)).state === 'up', 15000), 'node2 came up');
    // the pool spans both nodes; node1 is cordoned, so work goes to node2 first
    pool = w.pool;
    const gp = await w.admin.req('PUT', `/api/v1/pools/${pool.id}/gpus`, { gpu_ids: [...n1.gpus, ...bad.gpus].map((g) => g.id) });
    assert.equal(gp.status, 200, gp.text);
    assert.equal((await w.admin.patch(`/api/v1/nodes/${n1.id}`, { state: 'cordoned' })).status, 200);
  });

  after(async () => {
    try {
      await stopClean(w?.srv);
    } finally {
      cleanup(w?.srv);
    }
  });

  // A GPU instance placed on node2: its start fails there.
  async function failOnBad(name) {
    const inst = await create(alice.c, w, { name, pool: 'a100', slices: 1, cmd: ['sleep', '3600'] });
    const x = await waitState(alice.c, inst.id, 'failed', 30000);
    assert.equal(x.node, 'node2', JSON.stringify(x));
    assert.match(x.reason, /error gathering device information/, x.reason);
    return x;
  }

  it('counts the engine\'s own start failures, not the user\'s, and a start resets the count', async () => {
    await failOnBad('f1');
    let n = await node(bad.id);
    assert.equal(n.start_failures, 1);
    assert.equal(n.degraded, false);
    assert.equal(n.state, 'up');
    assert.match(n.start_error, /error gathering device information/);

    // a command that does not exist: the engine says 400, the user's fault
    const cmd = await create(alice.c, w, { name: 'nocmd', cmd: ['/no-such-command'] });
    const nc = await waitState(alice.c, cmd.id, 'failed', 30000);
    assert.equal(nc.node, 'node2');
    assert.match(nc.reason, /no-such-command/);
    assert.equal((await node(bad.id)).start_failures, 1, 'a 4xx does not count');

    // a CPU-only instance (no devices) starts there: the count goes back to 0
    const ok = await create(alice.c, w, { name: 'cpu-ok', cmd: ['sleep', '3600'] });
    const run = await waitState(alice.c, ok.id, 'running', 30000);
    assert.equal(run.node, 'node2');
    assert.ok(await eventually(async () => (await node(bad.id)).start_failures === 0, 5000), 'a start resets the count');
    assert.equal((await alice.c.del(`/api/v1/instances/${ok.id}`)).status, 202);
    await waitState(alice.c, ok.id, 'deleted');
  });

  it('marks the node degraded after 3 failures in a row, with the engine\'s message; health checks keep it so', async () => {
    for (const name of ['g1', 'g2', 'g3']) await failOnBad(name);
    const n = await node(bad.id);
    assert.equal(n.degraded, true, JSON.stringify(n));
    assert.equal(n.state, 'degraded');
    assert.equal(n.health, 'up', 'it answers its health checks');
    assert.equal(n.admin_state, 'active');
    assert.equal(n.start_failures, 3);
    assert.match(n.start_error, /error gathering device information while adding custom device/);
    assert.ok(n.degraded_since);
    // in the list too
    const listed = (await w.admin.get('/api/v1/nodes')).json.items.find((x) => x.id === bad.id);
    assert.equal(listed.state, 'degraded');
    // several health checks later (every second here) it is still degraded
    await sleep(3000);
    const later = await node(bad.id);
    assert.equal(later.degraded, true);
    assert.ok(Date.parse(later.last_seen_at) > Date.parse(n.last_seen_at), 'checks ran meanwhile');
    assert.match(w.srv.log(), /node 'node2' is degraded: its engine failed 3 container starts in a row/);
  });

  it('places nothing on a degraded node: the request waits with reason "degraded", then goes to another node', async () => {
    const inst = await create(alice.c, w, { name: 'waits', pool: 'a100', slices: 1, cmd: ['sleep', '3600'] });
    let got;
    assert.ok(await eventually(async () => { got = (await alice.c.get(`/api/v1/instances/${inst.id}`)).json; return got.request?.reason_code === 'degraded'; }, 8000),
      JSON.stringify(got));
    assert.equal(got.state, 'queued');
    assert.match(got.request.reason, /degraded/);
    // a CPU-only one waits too (node1 is cordoned, node2 degraded)
    const cpu = await create(alice.c, w, { name: 'cpu-waits', cmd: ['sleep', '3600'] });
    assert.ok(await eventually(async () => { got = (await alice.c.get(`/api/v1/instances/${cpu.id}`)).json; return got.request?.reason_code === 'degraded'; }, 8000),
      JSON.stringify(got));
    assert.match(got.request.reason, /degraded \(engines failing to start containers\): 1/);
    assert.equal((await node(bad.id)).start_failures, 3, 'nothing more was tried there');

    // node1 active again: both go there, and node2 stays degraded
    assert.equal((await w.admin.patch(`/api/v1/nodes/${n1.id}`, { state: 'active' })).status, 200);
    for (const id of [inst.id, cpu.id]) {
      const r = await waitState(alice.c, id, 'running', 30000);
      assert.equal(r.node, 'node1');
    }
    assert.equal((await node(bad.id)).degraded, true);
    for (const id of [inst.id, cpu.id]) assert.equal((await alice.c.del(`/api/v1/instances/${id}`)).status, 202);
    for (const id of [inst.id, cpu.id]) await waitState(alice.c, id, 'deleted');
  });

  it('is cleared by an admin only', async () => {
    const path = `/api/v1/nodes/${bad.id}/clear-degraded`;
    // a student, a teacher, nobody, an expired session, a read-only token
    const r1 = await alice.c.post(path);
    assert.equal(r1.status, 403, r1.text);
    assertErrorShape(r1.json, 'forbidden');
    const teach = await mkUser(w, 'tina', 'teacher');
    assert.equal((await teach.c.post(path)).status, 403);
    const anon = await call(w.srv.base, 'POST', path, { origin: w.srv.base });
    assert.equal(anon.status, 401);
    assertErrorShape(anon.json, 'unauthorized');
    const tok = await w.admin.post('/api/v1/tokens', { name: 'ro', scopes: ['read'] });
    assert.equal(tok.status, 201, tok.text);
    const ro = await call(w.srv.base, 'POST', path, { bearer: tok.json.token });
    assert.equal(ro.status, 403, ro.text);
    // the admin's cookie without the CSRF token, or from another origin
    const cookie = w.admin.cookieHeader();
    assert.equal((await call(w.srv.base, 'POST', path, { cookie, origin: w.srv.base })).status, 403);
    assert.equal((await call(w.srv.base, 'POST', path, { cookie, csrf: w.admin.csrf, origin: 'http://evil.example' })).status, 403);
    const exp = new Client(w.srv.base);
    assert.equal((await exp.login('admin', ADMIN_PASSWORD)).status, 200);
    sql(w.srv, `UPDATE sessions SET created_at = now() - interval '2 hours', expires_at = now() - interval '1 second' WHERE token_hash = '${sha256hex(exp.cookies.get('gc_session'))}'`);
    assert.equal((await exp.post(path)).status, 401);
    assert.equal((await node(bad.id)).degraded, true, 'none of these cleared it');

    // bad ids
    assert.equal((await w.admin.post('/api/v1/nodes/999999/clear-degraded')).status, 404);
    const bid = await w.admin.post('/api/v1/nodes/abc/clear-degraded');
    assert.ok([400, 404].includes(bid.status), bid.text);
    assertErrorShape(bid.json);

    const ok = await w.admin.post(path);
    assert.equal(ok.status, 200, ok.text);
    assert.equal(ok.json.degraded, false);
    assert.equal(ok.json.start_failures, 0);
    assert.equal(ok.json.state, 'up');
    assert.equal(sql(w.srv, "SELECT count(*) FROM audit_log WHERE action = 'node.clear_degraded'"), '1');
    // idempotent
    assert.equal((await w.admin.post(path)).status, 200);

    // setting the node active (uncordon) clears it as well
    sql(w.srv, `UPDATE nodes SET start_failures = 3, degraded_since = now() WHERE id = ${bad.id}`);
    assert.equal((await node(bad.id)).state, 'degraded');
    const act = await w.admin.patch(`/api/v1/nodes/${bad.id}`, { state: 'active' });
    assert.equal(act.status, 200, act.text);
    const n = await node(bad.id);
    assert.equal(n.degraded, false);
    assert.equal(n.start_failures, 0);
    // ... but cordoning does not
    sql(w.srv, `UPDATE nodes SET start_failures = 3, degraded_since = now() WHERE id = ${bad.id}`);
    assert.equal((await w.admin.patch(`/api/v1/nodes/${bad.id}`, { state: 'cordoned' })).status, 200);
    const c = await node(bad.id);
    assert.equal(c.degraded, true);
    assert.equal(c.state, 'degraded');
    assert.equal(c.admin_state, 'cordoned');
  });
});
