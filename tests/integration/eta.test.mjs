// eta.test.mjs — why a job waits and when it may start: a pool of one
// slice, job A running with max_runtime_s 600, job B queued behind it →
// B's request says capacity, position 1 and an estimate of A's start + 600 s
// (C behind B: + 600 more); a pool whose only node is down → no estimate,
// with the reason.  On the world's real engine (busybox).
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createConnection, createServer } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stopClean } from '../lib/itest.mjs';
import { world, mkUser, cleanup, eventually, openPool } from './instances_lib.mjs';

async function submit(c, w, body) {
  const r = await c.post('/api/v1/jobs', { image_id: w.image.id, cpu_millis: 100, mem_mib: 32, ...body });
  assert.equal(r.status, 201, r.text);
  return r.json;
}

async function until(c, id, pred, ms = 20000) {
  let last = null;
  const ok = await eventually(async () => {
    last = (await c.get(`/api/v1/jobs/${id}`)).json;
    return pred(last);
  }, ms, 100);
  assert.ok(ok, JSON.stringify(last));
  return last;
}

describe('why pending and when', () => {
  let w, alice, bob;
  before(async () => {
    w = await world({ node2: false, args: ['--node-down-after=1'] });
    // a100: one slice
    const one = await w.admin.req('PUT', `/api/v1/pools/${w.pool.id}/gpus`, { gpu_ids: [w.n1.gpus[0].id] });
    assert.equal(one.status, 200, one.text);
    alice = await mkUser(w, 'alice');
    bob = await mkUser(w, 'bob');
  });
  after(async () => { try { cleanup(w?.srv); } finally { await stopClean(w?.srv); } });

  it('estimates a queued job\'s start from the maximum runtime of the work ahead of it', async () => {
    const a = await submit(alice.c, w, { name: 'holder', pool: 'a100', slices: 1, max_runtime_s: 600, command: ['sleep', '300'] });
    const ar = await until(alice.c, a.id, (j) => j.state === 'running' && j.started_at);
    const b = await submit(bob.c, w, { name: 'waiter', pool: 'a100', slices: 1, max_runtime_s: 600, command: ['true'] });
    const c = await submit(bob.c, w, { name: 'third', pool: 'a100', slices: 1, max_runtime_s: 100, command: ['true'] });
    const br = await until(bob.c, b.id, (j) => j.request?.eta);
    assert.equal(br.state, 'queued');
    assert.equal(br.request.reason_code, 'capacity');
    assert.equal(br.request.position, 1);
    assert.equal(br.request.eta_reason, null);
    const want = Date.parse(ar.started_at) + 600e3;
    assert.ok(Math.abs(Date.parse(br.request.eta) - want) <= 2000, `eta ${br.request.eta}, want ${new Date(want).toISOString()}`);
    const cr = await until(bob.c, c.id, (j) => j.request?.eta);
    assert.equal(cr.request.position, 2);
    assert.ok(Math.abs(Date.parse(cr.request.eta) - (want + 600e3)) <= 2000, `eta ${cr.request.eta}`);
    // the sweep page and instances read the same fields; the list too
    const l = await bob.c.get('/api/v1/jobs?state=queued');
    assert.ok(l.json.items.every((j) => j.request && 'eta' in j.request && 'eta_reason' in j.request));
    for (const j of [a, b, c]) await alice.c.post(`/api/v1/jobs/${j.id}/cancel`, {});
    await w.admin.post(`/api/v1/jobs/${b.id}/cancel`, {});
    await w.admin.post(`/api/v1/jobs/${c.id}/cancel`, {});
  });

  it('says why there is no estimate when the pool\'s only node is down', async () => {
    // the second engine through a socket of ours, closed once it is added
    const dir = mkdtempSync(join(tmpdir(), 'gc-eta-'));
    const sock = join(dir, 'ghost.sock');
    const target = process.env.GPUCLOUD_WORLD_DOCKER2.replace(/^unix:\/\//, '');
    const conns = new Set();
    const proxy = createServer((c) => {
      const u = createConnection(target);
      conns.add(c).add(u);
      c.pipe(u).pipe(c);
      c.on('error', () => u.destroy());
      u.on('error', () => c.destroy());
    });
    await new Promise((r) => proxy.listen(sock, r));
    const n = await w.admin.post('/api/v1/nodes', {
      name: 'ghost', url: `unix://${sock}`,
      gpus: [{ model: 'NVIDIA A100-SXM4-80GB', memory_mib: 81920, devices: [process.env.GPUCLOUD_WORLD_NODE2_GPUS.split(',')[0]] }],
    });
    assert.equal(n.status, 201, n.text);
    proxy.close();
    for (const c of conns) c.destroy();
    rmSync(dir, { recursive: true, force: true });
    const p = await w.admin.post('/api/v1/pools', { name: 'ghostpool', sharing: 'exclusive' });
    assert.equal(p.status, 201, p.text);
    const g = await w.admin.req('PUT', `/api/v1/pools/${p.json.id}/gpus`, { gpu_ids: n.json.gpus.map((x) => x.id) });
    assert.equal(g.status, 200, g.text);
    await openPool(w, 'ghostpool');
    assert.ok(await eventually(async () => (await w.admin.get(`/api/v1/nodes/${n.json.id}`)).json.state === 'down', 15000), 'ghost is down');
    const j = await submit(alice.c, w, { name: 'stranded', pool: 'ghostpool', slices: 1, max_runtime_s: 60, command: ['true'] });
    const jr = await until(alice.c, j.id, (x) => x.request?.eta_reason);
    assert.equal(jr.state, 'queued');
    assert.equal(jr.request.eta, null);
    assert.equal(jr.request.reason_code, 'no_nodes');
    assert.match(jr.request.eta_reason, /no node/);
    await alice.c.post(`/api/v1/jobs/${j.id}/cancel`, {});
  });
});
