// jobs_distributed.test.mjs — distributed jobs (members > 1) on the world's
// two engines as two nodes: a real two-member PyTorch DDP job (gloo) across
// the engines (both ranks join, the all-reduce result in each rank's log,
// the checkpoint, GPUs back); one member killed → the job fails with that
// rank's reason and the other member is stopped and removed; the gang (no
// partial placement); the torchrun-style variables exactly; another tenant
// cannot reach a job's MASTER_PORT (neither from a bridged container nor
// from a member of their own distributed job).
//
// The members' network is a per-job macvlan network (work/ddp.h) on the
// nodes' parent interface, label ddp.parent: here a bridge with no address
// (gcddp0) on this machine, standing in for the nodes' data LAN; made here
// when the world did not make it.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { stopClean } from '../lib/itest.mjs';
import { startServer, dropDatabase, Client, ADMIN_PASSWORD } from '../lib/server.mjs';
import { world, mkUser, create, waitState, cleanup, ours, sql, eventually, env, docker, inspect, FAST } from './instances_lib.mjs';

const FINAL = ['succeeded', 'failed', 'cancelled', 'lost'];
const PARENT = 'gcddp0';
const engine = (node) => (node === 'node1' ? env.GPUCLOUD_WORLD_DOCKER1 : env.GPUCLOUD_WORLD_DOCKER2);

function ensureParent() {
  try { execFileSync('ip', ['link', 'show', PARENT], { stdio: 'ignore' }); return; } catch { /* make it */ }
  execFileSync('ip', ['link', 'add', PARENT, 'type', 'bridge']);
  execFileSync('ip', ['link', 'set', PARENT, 'up']);
}

async function waitJob(c, id, states, ms = 60000) {
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

const liveAllocs = (srv, id) => Number(sql(srv, `SELECT count(*) FROM allocations a JOIN jobs j ON j.request_id = a.request_id WHERE j.id = ${id} AND a.released_at IS NULL`));

// busybox nc exits 0 on a timeout too: what came back tells
function probe(url, container, ip, port) {
  try {
    return docker(url, 'exec', container, 'sh', '-c', `nc -w 3 ${ip} ${port} </dev/null 2>&1; true`);
  } catch (e) { return String(e.stdout || '') + String(e.stderr || ''); }
}

// Both nodes' GPUs in the pool, both nodes on the job LAN.
async function ddpWorld() {
  ensureParent();
  const w = await world();
  const gp = await w.admin.req('PUT', `/api/v1/pools/${w.pool.id}/gpus`, { gpu_ids: [...w.n1.gpus, ...w.n2.gpus].map((g) => g.id) });
  assert.equal(gp.status, 200, gp.text);
  for (const n of [w.n1, w.n2]) {
    const r = await w.admin.req('PATCH', `/api/v1/nodes/${n.id}`, { labels: { 'ddp.parent': PARENT, 'nccl.socket_ifname': 'eth0', ib: 'false', 'nccl.debug': 'WARN' } });
    assert.equal(r.status, 200, r.text);
  }
  return w;
}

describe('distributed jobs', () => {
  let w, alice, bob, torch;
  before(async () => {
    w = await ddpWorld();
    alice = await mkUser(w, 'alice');
    bob = await mkUser(w, 'bob');
    if (env.GPUCLOUD_WORLD_PYTORCH_IMAGE) {
      const img = await w.admin.post('/api/v1/images', {
        reference: env.GPUCLOUD_WORLD_PYTORCH_IMAGE, registry_id: w.registry.id, display_name: 'PyTorch 1.13 (CPU)',
        framework: 'pytorch', cuda_version: '12.4', description: 'Debian python3-torch',
      });
      assert.equal(img.status, 201, img.text);
      torch = img.json;
    }
  });
  after(async () => { try { cleanup(w?.srv); } finally { await stopClean(w?.srv); } });

  const submit = async (u, body) => {
    const r = await u.c.post('/api/v1/jobs', { image_id: w.image.id, pool: 'a100', slices: 1, members: 2, cpu_millis: 200, mem_mib: 64, ...body });
    assert.equal(r.status, 201, r.text);
    return r.json;
  };

  it('refuses bad members', async () => {
    for (const [body, re] of [[{ members: 0 }, /members must be 1 to 16/], [{ members: 17 }, /members must be 1 to 16/],
      [{ members: 2, pool: undefined, slices: undefined }, /more than 1 needs a pool/], [{ members: 'two' }, /members/]]) {
      const r = await alice.c.post('/api/v1/jobs', { name: 'bad', image_id: w.image.id, command: ['true'], pool: 'a100', slices: 1, ...body });
      assert.equal(r.status, 400, r.text);
      assert.match(r.json.error.message, re);
    }
    // rank of a job that has no such member
    const j = await submit(alice, { name: 'r', command: ['true'], members: 1 });
    assert.equal(j.members, 1);
    assert.equal(j.ranks, null);
    assert.equal((await alice.c.get(`/api/v1/jobs/${j.id}/logs?rank=1`)).status, 404);
    assert.equal((await alice.c.get(`/api/v1/jobs/${j.id}/logs?rank=x`)).status, 400);
    await waitJob(alice.c, j.id, FINAL);
    // a sweep's runs are not distributed
    const sw = await alice.c.post('/api/v1/sweeps', {
      name: 'sw', metric: 'loss', goal: 'min', grid: { lr: [0.1, 0.2] },
      job: { image_id: w.image.id, command: ['true'], pool: 'a100', slices: 1, members: 2 },
    });
    assert.equal(sw.status, 400, sw.text);
    assert.match(sw.json.error.message, /members must be 1/);
  });

  it('gives every member the torchrun-style variables and the NCCL settings of its node', async () => {
    const j = await submit(alice, {
      name: 'envs', env: { MASTER_PORT: '1', RANK: '9', FOO: 'bar' },
      command: ['sh', '-c', 'env | sort; ip -4 addr show eth0 | grep inet'],
    });
    assert.equal(j.members, 2);
    assert.deepEqual(j.ranks.map((m) => [m.rank, m.state]), [[0, 'queued'], [1, 'queued']]);
    const done = await waitJob(alice.c, j.id, FINAL);
    assert.equal(done.state, 'succeeded', JSON.stringify(done));
    assert.equal(done.exit_code, 0);
    assert.deepEqual(done.ranks.map((m) => [m.rank, m.state, m.exit_code]), [[0, 'succeeded', 0], [1, 'succeeded', 0]]);
    assert.deepEqual(done.ranks.map((m) => m.node).sort(), ['node1', 'node2'], 'one member per node');
    const addr0 = done.ranks[0].address;
    assert.match(addr0, /^10\.208\.\d+\.\d+$/);
    for (const m of done.ranks) {
      const log = (await alice.c.get(`/api/v1/jobs/${j.id}/logs?rank=${m.rank}&tail=1000`)).text;
      const vars = Object.fromEntries(log.split('\n').filter((l) => /^[A-Z_]+=/.test(l)).map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]));
      assert.deepEqual({
        MASTER_ADDR: vars.MASTER_ADDR, MASTER_PORT: vars.MASTER_PORT, WORLD_SIZE: vars.WORLD_SIZE, RANK: vars.RANK,
        NODE_RANK: vars.NODE_RANK, LOCAL_RANK: vars.LOCAL_RANK, NPROC_PER_NODE: vars.NPROC_PER_NODE,
        LOCAL_WORLD_SIZE: vars.LOCAL_WORLD_SIZE, NCCL_SOCKET_IFNAME: vars.NCCL_SOCKET_IFNAME,
        GLOO_SOCKET_IFNAME: vars.GLOO_SOCKET_IFNAME, NCCL_IB_DISABLE: vars.NCCL_IB_DISABLE, NCCL_DEBUG: vars.NCCL_DEBUG,
        FOO: vars.FOO, GPUCLOUD_JOB_RANK: vars.GPUCLOUD_JOB_RANK,
      }, {
        MASTER_ADDR: addr0, MASTER_PORT: '29500', WORLD_SIZE: '2', RANK: String(m.rank), NODE_RANK: String(m.rank),
        LOCAL_RANK: '0', NPROC_PER_NODE: '1', LOCAL_WORLD_SIZE: '1', NCCL_SOCKET_IFNAME: 'eth0',
        GLOO_SOCKET_IFNAME: 'eth0', NCCL_IB_DISABLE: '1', NCCL_DEBUG: 'WARN', FOO: 'bar', GPUCLOUD_JOB_RANK: String(m.rank),
      }, `rank ${m.rank}: ${log}`);
      assert.match(log, new RegExp(`inet ${m.address.replace(/\./g, '\\.')}/27`), 'its own address on the job network');
      assert.equal(vars.CUDA_VISIBLE_DEVICES, '0', 'its one slice');
    }
    assert.equal(liveAllocs(w.srv, j.id), 0, 'GPUs released');
    for (const url of [env.GPUCLOUD_WORLD_DOCKER1, env.GPUCLOUD_WORLD_DOCKER2])
      assert.equal(ours(w.srv, url).filter((c) => c.name.includes(`-job-${j.id}`)).length, 0, 'containers removed');
  });

  it('runs a real two-member PyTorch DDP job across the two engines', { skip: !env.GPUCLOUD_WORLD_PYTORCH_IMAGE && 'no PyTorch image in the world' }, async () => {
    const script = readFileSync(new URL('../../deploy/examples/jobs/ddp.py', import.meta.url), 'utf8');
    assert.equal((await alice.c.req('PUT', '/api/v1/files/home/ddp.py', script)).status, 201);
    const j = await submit(alice, {
      name: 'ddp', image_id: torch.id, command: ['python3', '/home/alice/ddp.py'], cpu_millis: 1000, mem_mib: 2048, shm_mib: 256,
      hyperparameters: { steps: 5 },
    });
    const done = await waitJob(alice.c, j.id, FINAL, 420000);
    const logs = [];
    for (const r of [0, 1]) logs.push((await alice.c.get(`/api/v1/jobs/${j.id}/logs?rank=${r}&tail=1000`)).text);
    assert.equal(done.state, 'succeeded', `${JSON.stringify(done)}\n--- rank 0\n${logs[0]}\n--- rank 1\n${logs[1]}`);
    assert.deepEqual(done.ranks.map((m) => m.node).sort(), ['node1', 'node2']);
    for (const r of [0, 1]) {
      assert.match(logs[r], new RegExp(`^rank ${r}: all_reduce sum = 3$`, 'm'), `rank ${r} joined: ${logs[r]}`);
      assert.match(logs[r], new RegExp(`^rank ${r}: done$`, 'm'));
    }
    // rank 0's log is output.log (GET .../logs without rank)
    assert.equal((await alice.c.get(`/api/v1/jobs/${j.id}/logs?tail=1000`)).text, logs[0]);
    const metrics = logs[0].split('\n').filter((l) => l.startsWith('GPUCLOUD_METRIC ')).map((l) => JSON.parse(l.slice(16)));
    assert.deepEqual(metrics.map((m) => m.step), [1, 2, 3, 4, 5]);
    assert.ok(metrics.every((m) => typeof m.loss === 'number'));
    assert.doesNotMatch(logs[1], /GPUCLOUD_METRIC/, 'metrics from rank 0 only');
    // the metrics collector reads rank 0's output.log
    let lm;
    assert.ok(await eventually(async () => { lm = (await alice.c.get(`/api/v1/jobs/${j.id}`)).json.last_metrics; return typeof lm?.loss === 'number'; }, 20000), JSON.stringify(lm));
    assert.equal(lm.loss, metrics[4].loss, 'the last step\'s loss');
    const dir = join(w.srv.dir, 'data', 'home', 'alice', done.directory);
    assert.ok(existsSync(join(dir, 'checkpoint.pt')), 'rank 0 wrote the checkpoint');
    assert.ok(existsSync(join(dir, 'output.rank1.log')), "rank 1's log");
    assert.equal(liveAllocs(w.srv, j.id), 0, 'GPUs released');
    for (const url of [env.GPUCLOUD_WORLD_DOCKER1, env.GPUCLOUD_WORLD_DOCKER2])
      assert.equal(ours(w.srv, url).filter((c) => c.name.includes(`-job-${j.id}`)).length, 0, 'containers removed');
  });

  it('fails the job with the first failing member\'s exit code, both logs kept', async () => {
    const j = await submit(alice, { name: 'fastfail', command: ['sh', '-c', 'echo hello $RANK; [ $RANK = 1 ] && exit 3; exec sleep 300'] });
    const done = await waitJob(alice.c, j.id, FINAL, 30000);
    assert.equal(done.state, 'failed', JSON.stringify(done));
    assert.equal(done.reason, 'rank 1: exited with code 3');
    assert.equal(done.exit_code, 3);
    for (const r of [0, 1]) {
      const l = await alice.c.get(`/api/v1/jobs/${j.id}/logs?rank=${r}`);
      assert.equal(l.status, 200, l.text);
      assert.match(l.text, new RegExp(`^hello ${r}$`, 'm'), `rank ${r}'s log`);
    }
  });

  it("fails the job with a killed member's reason and stops the other member", async () => {
    const j = await submit(alice, { name: 'killme', command: ['sh', '-c', 'echo up $RANK; exec sleep 300'] });
    const run = await waitJob(alice.c, j.id, 'running');
    assert.deepEqual(run.ranks.map((m) => m.state), ['running', 'running']);
    const victim = run.ranks[1], other = run.ranks[0];
    await eventually(async () => (await alice.c.get(`/api/v1/jobs/${j.id}/logs?rank=1`)).text.includes('up 1'), 10000);
    // hardened as every container (SPEC §14): only the network differs
    for (const m of run.ranks) {
      const ci = inspect(engine(m.node), m.container_name);
      assert.match(ci.HostConfig.NetworkMode, /^gc-[0-9a-f]{8}-ddp$/);
      assert.deepEqual(Object.keys(ci.NetworkSettings.Networks), [ci.HostConfig.NetworkMode]);
      assert.equal(ci.NetworkSettings.Networks[ci.HostConfig.NetworkMode].IPAddress, m.address);
      assert.equal(ci.HostConfig.Privileged, false);
      assert.deepEqual(ci.HostConfig.CapDrop, ['ALL']);
      assert.ok(ci.HostConfig.SecurityOpt.includes('no-new-privileges'));
      assert.equal(ci.HostConfig.IpcMode, 'private');
      assert.notEqual(ci.HostConfig.PidMode, 'host');
      assert.match(ci.Config.User, /^[1-9]\d*:[1-9]\d*$/);
      assert.equal(ci.Config.Labels['gpucloud.kind'], 'job');
      assert.equal(ci.Config.Labels['gpucloud.id'], String(j.id));
    }
    docker(engine(victim.node), 'kill', victim.container_name);
    const done = await waitJob(alice.c, j.id, FINAL, 30000);
    assert.equal(done.state, 'failed', JSON.stringify(done));
    assert.match(done.reason, /^rank 1: exited with code 137/);
    assert.equal(done.reason_code, 'exit_code');
    assert.equal(done.exit_code, 137);
    const m = Object.fromEntries(done.ranks.map((x) => [x.rank, x]));
    assert.equal(m[1].state, 'failed');
    assert.equal(m[1].exit_code, 137);
    assert.equal(m[0].state, 'stopped');
    assert.match(m[0].reason, /^rank 1: exited with code 137/);
    assert.equal(ours(w.srv, engine(other.node)).filter((c) => c.name === other.container_name).length, 0, 'the other member is removed');
    assert.equal(ours(w.srv, engine(victim.node)).filter((c) => c.name === victim.container_name).length, 0);
    assert.equal(liveAllocs(w.srv, j.id), 0, 'GPUs released');
  });

  it('places all members at once or none (gang)', async () => {
    // 2 of node1's... whichever node the blocker lands on keeps 2 free
    const blocker = await submit(bob, { name: 'blocker', members: 1, slices: 2, command: ['sh', '-c', 'exec sleep 300'] });
    const b = await waitJob(bob.c, blocker.id, 'running');
    const j = await submit(alice, { name: 'gang', slices: 3, command: ['sh', '-c', 'echo ran'] });
    let last;
    assert.ok(await eventually(async () => {
      last = (await alice.c.get(`/api/v1/jobs/${j.id}`)).json;
      return last.request?.reason_code === 'gang';
    }, 10000), JSON.stringify(last));
    assert.equal(last.state, 'queued');
    assert.match(last.request.reason, /node/);
    assert.equal(liveAllocs(w.srv, j.id), 0, 'no partial placement');
    assert.deepEqual(last.ranks.map((m) => m.state), ['queued', 'queued']);
    assert.equal(ours(w.srv, engine(b.node === 'node1' ? 'node2' : 'node1')).filter((c) => c.name.includes(`-job-${j.id}`)).length, 0);
    // a queued gang cancelled: its members never started
    const q = await submit(alice, { name: 'gang-cancel', slices: 4, command: ['true'] });
    assert.equal((await alice.c.post(`/api/v1/jobs/${q.id}/cancel`)).status, 202);
    let qc;
    assert.ok(await eventually(async () => {
      qc = (await alice.c.get(`/api/v1/jobs/${q.id}`)).json;
      return qc.state === 'cancelled' && qc.ranks.every((m) => m.state === 'stopped');
    }, 10000), JSON.stringify(qc));
    assert.equal(qc.ranks[1].reason, 'cancelled by alice');
    // the blocker ends: both placed
    assert.equal((await bob.c.post(`/api/v1/jobs/${blocker.id}/cancel`)).status, 202);
    const done = await waitJob(alice.c, j.id, FINAL, 60000);
    assert.equal(done.state, 'succeeded', JSON.stringify(done));
  });

  it("keeps other tenants out of a job's MASTER_PORT", async () => {
    const listen = ['sh', '-c', 'while true; do echo secret-$RANK | nc -l -p $MASTER_PORT; done'];
    const j = await submit(alice, { name: 'listener', command: listen });
    const run = await waitJob(alice.c, j.id, 'running');
    const r0 = run.ranks[0], r1 = run.ranks[1];
    // positive control: rank 1 reaches rank 0's port
    let out = '';
    assert.ok(await eventually(() => /secret-0/.test(out = probe(engine(r1.node), r1.container_name, r0.address, 29500)), 10000, 300), out);
    // bob: an instance (his bridge network) on each node
    for (const node of ['node1', 'node2']) {
      const i = await create(bob.c, w, { name: `b-${node}`, pool: 'a100', slices: 1 });
      const ir = await waitState(bob.c, i.id, 'running', 60000);
      const got = probe(engine(ir.node), ir.container_name, r0.address, 29500);
      assert.doesNotMatch(got, /secret/, `bob's instance on ${ir.node} reached alice's MASTER_PORT`);
    }
    // bob: a member of his own distributed job (the same LAN, another /27)
    const bj = await submit(bob, { name: 'neighbour', command: ['sh', '-c', 'exec sleep 300'] });
    const br = await waitJob(bob.c, bj.id, 'running');
    assert.notEqual(br.ranks[0].address, r0.address);
    for (const m of br.ranks) {
      const got = probe(engine(m.node), m.container_name, r0.address, 29500);
      assert.doesNotMatch(got, /secret/, `bob's member on ${m.node} reached alice's MASTER_PORT`);
    }
    // and alice's port is unreachable for bob's member at alice's rank 1 address too
    assert.doesNotMatch(probe(engine(br.ranks[0].node), br.ranks[0].container_name, r1.address, 29500), /secret/);
    for (const [u, id] of [[alice, j.id], [bob, bj.id]]) assert.equal((await u.c.post(`/api/v1/jobs/${id}/cancel`)).status, 202);
    const c = await waitJob(alice.c, j.id, FINAL, 30000);
    assert.equal(c.state, 'cancelled', JSON.stringify(c));
    assert.deepEqual(c.ranks.map((m) => m.state), ['stopped', 'stopped']);
    assert.equal(liveAllocs(w.srv, j.id), 0);
    // someone else's job: not found, also by rank
    assert.equal((await bob.c.get(`/api/v1/jobs/${j.id}/logs?rank=1`)).status, 404);
  });
});

describe('distributed jobs across a gpucloudd crash', () => {
  let w, srv2, db, dir;
  before(async () => {
    w = await ddpWorld();
    db = w.srv.db;
    dir = w.srv.dir;
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

  it('follows every member again: both logs complete, the job ends succeeded', async () => {
    const alice = await mkUser(w, 'alice');
    const N = 60;
    const r = await alice.c.post('/api/v1/jobs', {
      name: 'chatty', image_id: w.image.id, cpu_millis: 200, mem_mib: 64, pool: 'a100', slices: 1, members: 2,
      command: ['sh', '-c', `i=0; while [ $i -lt ${N} ]; do i=$((i+1)); echo "r$RANK line $i"; sleep 0.1; done`],
    });
    assert.equal(r.status, 201, r.text);
    const id = r.json.id;
    const logs = [0, 1].map((k) => join(dir, 'data', 'home', 'alice', r.json.directory, k ? `output.rank${k}.log` : 'output.log'));
    const has = (f, re) => { try { return re.test(readFileSync(f, 'utf8')); } catch { return false; } };
    assert.ok(await eventually(() => has(logs[0], /line 10\n/) && has(logs[1], /line 10\n/), 30000), 'both members run and log');
    w.srv.proc.kill('SIGKILL');
    await eventually(() => w.srv.exited !== null, 5000);
    await new Promise((res) => setTimeout(res, 1500));
    srv2 = await startServer({ db, args: [...FAST, `--state-dir=${dir}`] });
    const admin = new Client(srv2.base);
    assert.equal((await admin.login('admin', ADMIN_PASSWORD)).status, 200);
    let job;
    assert.ok(await eventually(async () => { job = (await admin.get(`/api/v1/jobs/${id}`)).json; return FINAL.includes(job.state); }, 40000), `job ended: ${JSON.stringify(job)}`);
    assert.equal(job.state, 'succeeded', JSON.stringify(job));
    assert.deepEqual(job.ranks.map((m) => m.state), ['succeeded', 'succeeded']);
    for (const k of [0, 1]) {
      const lines = readFileSync(logs[k], 'utf8').split('\n').filter(Boolean);
      assert.deepEqual(lines, Array.from({ length: N }, (_, i) => `r${k} line ${i + 1}`), `rank ${k}: every line once, in order`);
    }
    assert.equal(liveAllocs(w.srv, id), 0);
    for (const url of [env.GPUCLOUD_WORLD_DOCKER1, env.GPUCLOUD_WORLD_DOCKER2])
      assert.equal(ours(w.srv, url).length, 0, 'containers removed');
  });
});
