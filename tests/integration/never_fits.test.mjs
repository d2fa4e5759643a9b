// never_fits.test.mjs — requests that could never run are not left waiting
// for good: refused at submit (an instance, a raw allocation) when no node
// that is not cordoned could ever hold them (422 never_fits) or they ask more
// than the caller's limit (422 exceeds_quota), with what they could ask
// instead; a queued request whose only fitting node is removed is marked
// cannot_run_as_asked with the same advice; and the pools API tells free
// slices from free slices some request could use (usable_free_slices).
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { assertErrorShape, stopClean } from '../lib/itest.mjs';
import { world, mkUser, cleanup, sql, eventually, openPool } from './instances_lib.mjs';

describe('requests that could never run', () => {
  let w, st, ncpu, memMib;
  before(async () => {
    w = await world();
    st = await mkUser(w, 'nfstudent');
    ncpu = Number(sql(w.srv, "SELECT ncpu FROM nodes WHERE name = 'node1'"));
    memMib = Number(sql(w.srv, "SELECT memory_bytes / 1048576 FROM nodes WHERE name = 'node1'"));
    assert.ok(ncpu >= 1 && memMib > 0, 'the node reports its CPUs and memory');
  });
  after(async () => { try { await stopClean(w?.srv); } finally { cleanup(w?.srv); } });

  const inst = (c, body) => c.post('/api/v1/instances', { image_id: w.image.id, cpu_millis: 200, mem_mib: 64, cmd: ['sleep', '3600'], ...body });
  const count = (table) => Number(sql(w.srv, `SELECT count(*) FROM ${table} WHERE user_id = ${st.id}`));

  it('refuses an instance no node could ever hold, saying how much the largest node has', async () => {
    const want = ncpu * 1000 + 14000;
    const r = await inst(st.c, { name: 'big-cpu', pool: 'a100', slices: 1, cpu_millis: want });
    assert.equal(r.status, 422, r.text);
    assertErrorShape(r.json, 'never_fits');
    assert.match(r.json.error.message, new RegExp(`^no node in pool 'a100' with 1 slice can ever give ${want} millicores of cpu: the largest has ${ncpu} CPU cores?$`));
    assert.equal(r.json.error.hint, `ask for at most ${ncpu * 1000} millicores of cpu`);
    assert.deepEqual(r.json.error.details, [{ what: 'cpu_millis', most: ncpu * 1000, asked: want, pool: 'a100' }]);
    // slices: the pool's nodes have 4 GPUs each
    const s = await inst(st.c, { name: 'big-gpus', pool: 'a100', slices: 5 });
    assert.equal(s.status, 422, s.text);
    assert.equal(s.json.error.message, "no node in pool 'a100' has 5 slices: the largest has 4");
    // memory, CPU-only: every node of the cluster counts (an admin: no
    // CPU-only quota comes first)
    const m = await inst(w.admin, { name: 'big-mem', mem_mib: memMib * 4 });
    assert.equal(m.status, 422, m.text);
    assertErrorShape(m.json, 'never_fits');
    assert.match(m.json.error.message, /^no node in the cluster can ever give \d+ MiB of memory: the largest has \d+ MiB$/);
    assert.equal(m.json.error.details[0].pool, null);
    // nothing was recorded for any of them
    assert.equal(count('instances'), 0);
    assert.equal(count('alloc_requests'), 0);
    assert.equal(sql(w.srv, "SELECT count(*) FROM instances WHERE name = 'big-mem'"), '0');
  });

  it('refuses an instance over the caller\'s limit by itself (exceeds_quota), and a CPU-only one over the CPU-only quota', async () => {
    assert.equal((await w.admin.req('PUT', '/api/v1/quotas/defaults', { role: 'student', pool: 'a100', max_slices: 1 })).status, 200);
    try {
      const r = await inst(st.c, { name: 'two', pool: 'a100', slices: 2 });
      assert.equal(r.status, 422, r.text);
      assertErrorShape(r.json, 'exceeds_quota');
      assert.equal(r.json.error.message, "quota: the student role may hold 1 slice of pool 'a100' at once; this asks 2");
      assert.deepEqual(r.json.error.details, [{ what: 'slices', most: 1, asked: 2, pool: 'a100' }]);
      // the seeded CPU-only default of students: 4 cores
      const c = await inst(st.c, { name: 'cpu', cpu_millis: 5000 });
      assert.equal(c.status, 422, c.text);
      assertErrorShape(c.json, 'exceeds_quota');
      assert.equal(c.json.error.message, 'quota: the student role may use 4000 millicores of cpu at once for CPU-only work; this asks 5000');
      assert.equal(c.json.error.hint, 'ask for at most 4000 millicores of cpu, or have an admin raise the quota');
      assert.equal(count('instances'), 0);
    } finally {
      await openPool(w, 'a100');
    }
  });

  it('refuses a raw allocation no node could hold, admins included', async () => {
    const r = await w.admin.post('/api/v1/allocations', { pool: 'a100', slices: 1, cpu_millis: ncpu * 1000 + 1, mem_mib: 64 });
    assert.equal(r.status, 422, r.text);
    assertErrorShape(r.json, 'never_fits');
    const g = await st.c.post('/api/v1/allocations', { pool: 'a100', slices: 1, nodes: 2, cpu_millis: 100, mem_mib: 64, lease_s: 60 });
    assert.equal(g.status, 422, g.text);
    assert.equal(g.json.error.message, "needs 2 nodes in pool 'a100' that can each hold it; only 1 can");
    assert.equal(g.json.error.hint, 'ask for at most 1 node');
    assert.equal(count('alloc_requests'), 0);
  });

  it('shows free slices that no request can use (the node\'s cpu is all taken) as not usable', async () => {
    const pool = () => w.admin.get(`/api/v1/pools/${w.pool.id}`).then((x) => x.json);
    const p0 = await pool();
    assert.equal(p0.free_slices, 4);
    assert.equal(p0.usable_free_slices, 4);
    const n0 = p0.nodes.find((n) => n.node === 'node1');
    assert.equal(n0.cpu_millis, ncpu * 1000);
    assert.equal(n0.cpu_free_millis, ncpu * 1000);
    assert.equal(n0.mem_mib, memMib);
    // one slice with every CPU of the node: three slices free, none usable
    const a = await w.admin.post('/api/v1/allocations', { pool: 'a100', slices: 1, cpu_millis: ncpu * 1000, mem_mib: 64 });
    assert.equal(a.status, 202, a.text);
    assert.ok(await eventually(async () => (await w.admin.get(`/api/v1/allocations/${a.json.id}`)).json.state === 'allocated', 5000));
    const p1 = await pool();
    assert.equal(p1.free_slices, 3);
    assert.equal(p1.usable_free_slices, 0);
    const n1 = p1.nodes.find((n) => n.node === 'node1');
    assert.equal(n1.cpu_free_millis, 0);
    assert.equal(n1.mem_free_mib, memMib - 64);
    // the list says the same
    const listed = (await st.c.get('/api/v1/pools')).json.items.find((x) => x.name === 'a100');
    assert.equal(listed.usable_free_slices, 0);
    assert.equal((await w.admin.del(`/api/v1/allocations/${a.json.id}`)).status, 200);
    assert.equal((await pool()).usable_free_slices, 4);
  });

  it('marks a queued request cannot_run_as_asked when the node it needed is removed', async () => {
    // node1's GPUs leave a100 for a pool over both nodes
    assert.equal((await w.admin.req('PUT', `/api/v1/pools/${w.pool.id}/gpus`, { gpu_ids: [] })).status, 200);
    const big = await w.admin.post('/api/v1/pools', { name: 'both' });
    assert.equal(big.status, 201, big.text);
    assert.equal((await w.admin.req('PUT', `/api/v1/pools/${big.json.id}/gpus`, { gpu_ids: [...w.n1.gpus, ...w.n2.gpus].map((g) => g.id) })).status, 200);
    await openPool(w, 'both');
    // one slice held on node1: a gang of 2 nodes x 4 slices waits
    const hold = await w.admin.post('/api/v1/allocations', { pool: 'both', slices: 1, cpu_millis: 100, mem_mib: 64 });
    assert.equal(hold.status, 202, hold.text);
    const q = await st.c.post('/api/v1/allocations', { pool: 'both', slices: 4, nodes: 2, cpu_millis: 100, mem_mib: 64, lease_s: 600 });
    assert.equal(q.status, 202, q.text);
    let got;
    const reason = async (code) => eventually(async () => { got = (await st.c.get(`/api/v1/allocations/${q.json.id}`)).json; return got.reason_code === code; }, 5000);
    assert.ok(await reason('gang'), `waits as a gang: ${JSON.stringify(got)}`);
    // node2 goes away for good: nothing could ever hold it now
    assert.equal((await w.admin.del(`/api/v1/nodes/${w.n2.id}`)).status, 204);
    assert.ok(await reason('cannot_run_as_asked'), `cannot run as asked: ${JSON.stringify(got)}`);
    assert.equal(got.state, 'queued');
    assert.equal(got.reason, 'needs 2 nodes in this pool that can each hold it; only 1 can; ask for at most 1 node');
    for (const id of [hold.json.id, q.json.id]) assert.ok([200].includes((await w.admin.del(`/api/v1/allocations/${id}`)).status));
  });
});
