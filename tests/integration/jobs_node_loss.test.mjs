// jobs_node_loss.test.mjs — jobs on a node whose engine dies (our own
// throw-away dockerd, tests/integration/engine9.sh, killed with -9 as on a
// node that crashed: its containers run on, nobody answers):
//  - a job without retries ends `lost` with reason code node_lost once the
//    engine stayed unreachable, and its GPU is not handed out again;
//  - a job with one retry is requeued and placed on a node that is up
//    (node1 of the world), where its second attempt runs to success: the
//    job directory is the same (the first attempt's file is there), the
//    log says so, the job records the retry.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { ROOT } from '../lib/server.mjs';
import { stopClean } from '../lib/itest.mjs';
import { world, mkUser, cleanup, sql, eventually, env, openPool } from './instances_lib.mjs';

async function waitJob(c, id, states, ms) {
  const want = Array.isArray(states) ? states : [states];
  let last = null;
  const ok = await eventually(async () => {
    const r = await c.get(`/api/v1/jobs/${id}`);
    last = r.json;
    return r.status === 200 && want.includes(r.json.state);
  }, ms, 200);
  assert.ok(ok, `job ${id} did not reach ${want.join('|')}: ${JSON.stringify(last)}`);
  return last;
}

describe('jobs when their node dies', () => {
  const dir = join(ROOT, `var/test-engine9-${process.pid}`);
  const script = join(ROOT, 'tests/integration/engine9.sh');
  let w, url, gina, node;
  before(async () => {
    url = execFileSync(script, ['start', dir], { encoding: 'utf8' }).trim();
    w = await world({ node2: false, args: ['--node-down-after=2'] });
    gina = await mkUser(w, 'gina');
    // two declared GPUs on the throw-away engine, each a device file
    const devs = [0, 1].map((i) => `${dir}/gpu${i}`);
    devs.forEach((d, i) => execFileSync('mknod', ['-m', '666', d, 'c', '195', String(10 + i)]));
    const n = await w.admin.post('/api/v1/nodes', { name: 'node9', url, gpus: devs.map((d) => ({ model: 'NVIDIA A100-SXM4-80GB', memory_mib: 81920, devices: [d] })) });
    assert.equal(n.status, 201, n.text);
    node = n.json;
    assert.ok(await eventually(async () => (await w.admin.get(`/api/v1/nodes/${node.id}`)).json.state === 'up', 15000));
    const p = await w.admin.post('/api/v1/pools', { name: 'train', sharing: 'exclusive' });
    assert.equal(p.status, 201, p.text);
    w.train = p.json;
    assert.equal((await w.admin.req('PUT', `/api/v1/pools/${p.json.id}/gpus`, { gpu_ids: node.gpus.map((g) => g.id) })).status, 200);
    await openPool(w, 'train');
  });
  after(async () => {
    try {
      await stopClean(w?.srv);
    } finally {
      if (w?.srv) cleanup(w.srv, [env.GPUCLOUD_WORLD_DOCKER1]);
      // our engine goes whatever happened (down brings a crashed one back
      // first, so that its containers go too)
      try { execFileSync(script, ['down', dir], { stdio: 'ignore' }); } catch { /* best effort */ }
    }
  });

  it('loses a job whose engine crashed; requeues one with a retry onto a node that is up, where it succeeds', async () => {
    const body = { image_id: w.image.id, pool: 'train', slices: 1, cpu_millis: 100, mem_mib: 32 };
    const a = await gina.c.post('/api/v1/jobs', { ...body, name: 'no-retry', command: ['sleep', '3600'] });
    assert.equal(a.status, 201, a.text);
    // the second attempt finds the first one's file in the job directory
    const b = await gina.c.post('/api/v1/jobs', {
      ...body, name: 'retry', retry_limit: 1,
      command: ['sh', '-c', 'if [ -e attempt1 ]; then echo second attempt; exit 0; fi; touch attempt1; echo first attempt; sleep 3600'],
    });
    assert.equal(b.status, 201, b.text);
    const ra = await waitJob(gina.c, a.json.id, 'running', 60000); // the first start pulls the image
    const rb = await waitJob(gina.c, b.json.id, 'running', 60000);
    assert.equal(ra.node, 'node9');
    assert.equal(rb.node, 'node9');
    assert.ok(await eventually(async () => (await gina.c.get(`/api/v1/jobs/${b.json.id}/logs?tail=5`)).text.includes('first attempt'), 10000));
    // one of node1's GPUs moves into the pool: room for the retry elsewhere
    const n1gpu = w.n1.gpus[0].id;
    assert.equal((await w.admin.req('PUT', `/api/v1/pools/${w.pool.id}/gpus`, { gpu_ids: w.n1.gpus.slice(1).map((g) => g.id) })).status, 200);
    assert.equal((await w.admin.req('PUT', `/api/v1/pools/${w.train.id}/gpus`, { gpu_ids: [...node.gpus.map((g) => g.id), n1gpu] })).status, 200);

    execFileSync(script, ['crash', dir]);
    assert.ok(await eventually(async () => (await w.admin.get(`/api/v1/nodes/${node.id}`)).json.state === 'down', 20000), 'node9 is down');

    // the driver asks the engine again for a while, then gives up on it
    const la = await waitJob(gina.c, a.json.id, 'lost', 90000);
    assert.equal(la.reason_code, 'node_lost');
    assert.match(la.reason, /unreachable/);
    assert.equal(la.retries, 0);

    const sb = await waitJob(gina.c, b.json.id, 'succeeded', 90000);
    assert.equal(sb.node, 'node1');
    assert.equal(sb.retries, 1);
    assert.equal(sb.exit_code, 0);
    const log = (await gina.c.get(`/api/v1/jobs/${b.json.id}/logs`)).text;
    assert.match(log, /second attempt/);
    // GPUs: nothing of the lost or finished jobs is live on node1; node9's
    // stay out of reach while it is down (no new work lands there)
    assert.equal(sql(w.srv, `SELECT count(*) FROM allocations a JOIN slices s ON s.id = a.slice_id JOIN gpus g ON g.id = s.gpu_id WHERE a.released_at IS NULL AND g.node_id = ${w.n1.id}`), '0');
    const c = await gina.c.post('/api/v1/jobs', { ...body, name: 'after', command: ['true'] });
    assert.equal(c.status, 201, c.text);
    const sc = await waitJob(gina.c, c.json.id, 'succeeded', 30000);
    assert.equal(sc.node, 'node1');
  });
});
