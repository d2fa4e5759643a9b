// reconcile.test.mjs — records and engines agree after faults.
//  - kill -9 of gpucloudd between "container created" and "recorded"
//    (the test setting instance_test_pause_ms holds the driver there, so the
//    kill lands at that exact point); a restart on the same database finishes
//    the launch with the existing container: exactly one container, running,
//    one live allocation.
//  - orphans (our cluster's label, no live record) are removed; containers
//    of another cluster on the same engine are left alone; a running
//    record whose container vanished becomes lost, its allocation released.
//  - an engine (our own throw-away dockerd, not the world's) stopped while
//    an instance runs on it: the node goes down, the instance keeps its
//    record (nothing can be known); when the engine is back its container
//    has exited (the engine stopped it), so the instance becomes failed with
//    the exit code, its GPUs are released once, and a start runs it again
//    on that engine with exactly one container.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { startServer, dropDatabase, Client, ADMIN_PASSWORD, ROOT } from '../lib/server.mjs';
import { stopClean, eventually, sleep } from '../lib/itest.mjs';
import {
  world, openPool, mkUser, create, waitState, liveAllocations, cleanup, inspect, ours, docker, clusterId, sql, env, FAST,
} from './instances_lib.mjs';

describe('reconciliation after a crash', () => {
  let w, srv2, erin, db;
  before(async () => {
    w = await world({ node2: false, args: ['--instance-test-pause-ms=60000'] });
    erin = await mkUser(w, 'erin');
    db = w.srv.db;
  });
  after(async () => {
    try {
      if (srv2) await stopClean(srv2);
      if (w?.srv) await w.srv.stop({ keepDb: true });
    } finally {
      cleanup(w?.srv);
      if (db) dropDatabase(db.name);
    }
  });

  it('kill -9 between created and recorded: a restart finishes with the same container', async () => {
    const inst = await create(erin.c, w, { name: 'crashy', pool: 'a100', slices: 1, cmd: ['sleep', '3600'] });
    // the driver created the container and holds (test setting)
    assert.ok(await eventually(() => /container gc-[0-9a-f]{8}-inst-\d+ created; pausing/.test(w.srv.log()), 15000), 'the driver paused after create');
    const name = `gc-${clusterId(w.srv).slice(0, 8)}-inst-${inst.id}`;
    assert.deepEqual(ours(w.srv, env.GPUCLOUD_WORLD_DOCKER1).map((c) => c.name), [name]);
    assert.equal(sql(w.srv, `SELECT state || ' ' || COALESCE(container_id, '-') FROM instances WHERE id = ${inst.id}`), 'creating -');
    w.srv.proc.kill('SIGKILL');
    await eventually(() => w.srv.exited !== null, 5000);
    // restart on the same database, without the pause
    // (same state directory: the master key that sealed the registry key)
    srv2 = await startServer({ db, args: [...FAST, `--state-dir=${w.srv.dir}`] });
    const admin = new Client(srv2.base);
    assert.equal((await admin.login('admin', ADMIN_PASSWORD)).status, 200);
    const run = await waitState(admin, inst.id, 'running', 20000);
    const cs = ours(w.srv, env.GPUCLOUD_WORLD_DOCKER1);
    assert.deepEqual(cs, [{ name, state: 'running' }], 'exactly one container');
    assert.equal(run.container_id, inspect(env.GPUCLOUD_WORLD_DOCKER1, name).Id);
    assert.equal(liveAllocations(w.srv), 1);
    assert.equal(sql(w.srv, `SELECT count(*) FROM alloc_requests WHERE owner_kind = 'instance' AND owner_id = '${inst.id}' AND state = 'allocated'`), '1');
    assert.ok(srv2.log().includes(`instance ${inst.id}: reusing container`));
  });

  it('removes orphans of our cluster only, and marks vanished containers lost', async () => {
    const url = env.GPUCLOUD_WORLD_DOCKER1;
    const cl = clusterId(w.srv);
    const orphan = `gc-${cl.slice(0, 8)}-inst-987654`;
    const foreign = `gc-test-foreign-${process.pid}`;
    docker(url, 'create', '--name', orphan, '--label', `gpucloud.cluster=${cl}`, '--label', 'gpucloud.kind=instance', '--label', 'gpucloud.id=987654', env.GPUCLOUD_WORLD_IMAGE, 'sleep', '60');
    docker(url, 'create', '--name', foreign, '--label', 'gpucloud.cluster=someoneelse', '--label', 'gpucloud.kind=instance', '--label', 'gpucloud.id=1', env.GPUCLOUD_WORLD_IMAGE, 'sleep', '60');
    try {
      assert.ok(await eventually(() => !ours(w.srv, url).some((c) => c.name === orphan), 10000), 'the orphan was removed');
      assert.equal(inspect(url, foreign).Name, `/${foreign}`, 'the other cluster\'s container is untouched');
    } finally {
      docker(url, 'rm', '-f', foreign);
    }
    // a running instance whose container is removed behind our back
    const admin = new Client(srv2.base);
    assert.equal((await admin.login('admin', ADMIN_PASSWORD)).status, 200);
    const id = Number(sql(w.srv, "SELECT id FROM instances WHERE name = 'crashy'"));
    const name = `gc-${cl.slice(0, 8)}-inst-${id}`;
    const before = Number(sql(w.srv, 'SELECT COALESCE(sum(gpu_seconds), 0) > 0 FROM gpu_usage') === 't');
    docker(url, 'rm', '-f', name);
    const lost = await waitState(admin, id, 'lost', 10000);
    assert.match(lost.reason, /vanished/);
    assert.equal(liveAllocations(w.srv), 0);
    // released exactly once: one released request, usage recorded
    assert.equal(sql(w.srv, `SELECT state FROM alloc_requests WHERE id = ${lost.request.id}`), 'released');
    assert.equal(sql(w.srv, `SELECT count(*) FROM allocations WHERE request_id = ${lost.request.id} AND released_at IS NOT NULL`), '1');
    void before;
    // a lost instance starts again (a new container)
    assert.equal((await admin.post(`/api/v1/instances/${id}/start`)).status, 202);
    await waitState(admin, id, 'running', 15000);
    assert.equal(ours(w.srv, url).filter((c) => c.name === name).length, 1);
    assert.equal((await admin.del(`/api/v1/instances/${id}`)).status, 202);
    await waitState(admin, id, 'deleted');
    assert.equal(liveAllocations(w.srv), 0);
  });
});

describe('reconciliation across an engine restart', () => {
  const dir = join(ROOT, `var/test-engine9-${process.pid}`);
  const script = join(ROOT, 'tests/integration/engine9.sh');
  let w, url, frank, node, cl;
  before(async () => {
    url = execFileSync(script, ['start', dir], { encoding: 'utf8' }).trim();
    w = await world({ node2: false, args: ['--node-down-after=2'] });
    cl = clusterId(w.srv);
    frank = await mkUser(w, 'frank');
    const decl = [`${dir}/gpu0`].map((d) => ({ model: 'NVIDIA T4', memory_mib: 16384, devices: [d] }));
    // a device file for the declared GPU of this engine
    execFileSync('mknod', ['-m', '666', `${dir}/gpu0`, 'c', '195', '9']);
    const n = await w.admin.post('/api/v1/nodes', { name: 'node9', url, gpus: decl });
    assert.equal(n.status, 201, n.text);
    node = n.json;
    assert.ok(await eventually(async () => (await w.admin.get(`/api/v1/nodes/${node.id}`)).json.state === 'up', 15000));
    const p = await w.admin.post('/api/v1/pools', { name: 't4', sharing: 'exclusive' });
    assert.equal(p.status, 201, p.text);
    assert.equal((await w.admin.req('PUT', `/api/v1/pools/${p.json.id}/gpus`, { gpu_ids: node.gpus.map((g) => g.id) })).status, 200);
    await openPool(w, 't4');
  });
  after(async () => {
    try {
      await stopClean(w?.srv);
    } finally {
      if (w?.srv) cleanup(w.srv, [env.GPUCLOUD_WORLD_DOCKER1, url].filter(Boolean));
      // our engine goes whatever happened (it must not outlive the test)
      try { execFileSync(script, ['down', dir], { stdio: 'ignore' }); } catch { /* best effort */ }
    }
  });

  it('converges after the engine was down', async () => {
    const inst = await create(frank.c, w, { name: 'on9', pool: 't4', slices: 1, cmd: ['sleep', '3600'] });
    const run = await waitState(frank.c, inst.id, 'running', 30000); // pulls the image through the registry
    assert.equal(run.node, 'node9');
    assert.equal(liveAllocations(w.srv), 1);
    execFileSync(script, ['stop', dir]);
    // the node goes down.  The engine stopped its containers on the way
    // out: when the reconciler listed it in time the instance is settled
    // already, else it stays running (nothing can be known while the
    // engine is away) — never lost, never released twice
    assert.ok(await eventually(async () => (await w.admin.get(`/api/v1/nodes/${node.id}`)).json.state === 'down', 15000), 'node9 is down');
    await sleep(1500);
    const during = (await frank.c.get(`/api/v1/instances/${inst.id}`)).json;
    assert.ok(['running', 'failed', 'stopped'].includes(during.state), during.state);
    assert.equal(liveAllocations(w.srv), during.state === 'running' ? 1 : 0);
    // engine back: its container has exited (the engine stopped it)
    execFileSync(script, ['start', dir]);
    const failed = await waitState(frank.c, inst.id, ['failed', 'stopped'], 30000);
    assert.ok(failed.exit_code !== null, JSON.stringify(failed));
    assert.match(failed.reason, /exited|killed/);
    assert.equal(liveAllocations(w.srv), 0);
    assert.equal(sql(w.srv, `SELECT state FROM alloc_requests WHERE id = ${run.request.id}`), 'released');
    // the container is kept (its disk); a start runs it again with one container
    assert.ok(await eventually(async () => (await w.admin.get(`/api/v1/nodes/${node.id}`)).json.state === 'up', 15000));
    assert.equal((await frank.c.post(`/api/v1/instances/${inst.id}/start`)).status, 202);
    await waitState(frank.c, inst.id, 'running', 20000);
    const mine = docker(url, 'ps', '-a', '--filter', `label=gpucloud.cluster=${cl}`, '--format', '{{.Names}}').split('\n');
    assert.deepEqual(mine, [run.container_name]);
    assert.equal(liveAllocations(w.srv), 1);
    assert.equal((await frank.c.del(`/api/v1/instances/${inst.id}`)).status, 202);
    await waitState(frank.c, inst.id, 'deleted');
    assert.equal(liveAllocations(w.srv), 0);
  });
});
