// instances_lib.mjs — shared set-up of the instance tests: a server with
// both world engines as nodes (four declared GPUs each), the world registry
// (marked personal) and the world image in the catalog, a pool over node1's
// GPUs, users, waiting helpers, and removal of every container of the test's
// cluster and its networks from the engines (other servers' are never touched).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { startServer, Client, ADMIN_PASSWORD } from '../lib/server.mjs';
import { sql, eventually, sleep } from '../lib/itest.mjs';

export const env = process.env;
export const ENGINES = () => [env.GPUCLOUD_WORLD_DOCKER1, env.GPUCLOUD_WORLD_DOCKER2];
export const FAST = ['--node-check-interval=1', '--sched-interval-ms=200', '--instance-tick-ms=100',
  '--reconcile-interval-ms=500', '--instance-stop-grace=1', '--preempt-grace=1'];

export function docker(url, ...args) {
  return execFileSync('docker', ['-H', url, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
}

export function inspect(url, name) {
  return JSON.parse(docker(url, 'inspect', name))[0];
}

// Containers of this server's cluster on an engine: [{name, state}].
export function ours(srv, url) {
  const id = clusterId(srv);
  const out = docker(url, 'ps', '-a', '--filter', `label=gpucloud.cluster=${id}`, '--format', '{{.Names}} {{.State}}');
  return out ? out.split('\n').map((l) => { const [name, state] = l.split(' '); return { name, state }; }) : [];
}

export function clusterId(srv) {
  if (!srv._cluster) srv._cluster = sql(srv, 'SELECT cluster_id FROM cluster_identity');
  return srv._cluster;
}

// Removes every container of the server's cluster (after() of each test).
export function cleanup(srv, urls = ENGINES()) {
  if (!srv || !srv._cluster) return;
  for (const url of urls) {
    try {
      const ids = docker(url, 'ps', '-aq', '--filter', `label=gpucloud.cluster=${srv._cluster}`);
      if (ids) docker(url, 'rm', '-f', ...ids.split('\n'));
      // and its per-user networks (the server that would sweep them is gone)
      const nets = docker(url, 'network', 'ls', '-q', '--filter', `label=gpucloud.cluster=${srv._cluster}`);
      if (nets) docker(url, 'network', 'rm', ...nets.split('\n'));
    } catch { /* engine gone */ }
  }
}

const decl = (list) => list.split(',').map((d) => ({ model: 'NVIDIA A100-SXM4-80GB', memory_mib: 81920, devices: [d] }));

// opts.args: extra flags; opts.db: reuse a database (restart); opts.nodes:
// false to register none.  Returns {srv, admin, n1, n2, image, pool}.
export async function world(opts = {}) {
  for (const k of ['GPUCLOUD_WORLD_DOCKER1', 'GPUCLOUD_WORLD_DOCKER2', 'GPUCLOUD_WORLD_IMAGE', 'GPUCLOUD_WORLD_REGISTRY'])
    assert.ok(env[k], `${k} is not set: run through make test (it starts the world)`);
  const srv = await startServer({ args: [...FAST, ...(opts.args || [])], ...(opts.db ? { db: opts.db } : {}) });
  clusterId(srv);
  const admin = new Client(srv.base);
  assert.equal((await admin.login('admin', ADMIN_PASSWORD)).status, 200);
  const w = { srv, admin };
  if (opts.db) return w;
  const a = await admin.post('/api/v1/nodes', { name: 'node1', url: env.GPUCLOUD_WORLD_DOCKER1, gpus: decl(env.GPUCLOUD_WORLD_NODE1_GPUS) });
  assert.equal(a.status, 201, a.text);
  w.n1 = a.json;
  if (opts.node2 !== false) {
    const b = await admin.post('/api/v1/nodes', { name: 'node2', url: env.GPUCLOUD_WORLD_DOCKER2, gpus: decl(env.GPUCLOUD_WORLD_NODE2_GPUS) });
    assert.equal(b.status, 201, b.text);
    w.n2 = b.json;
  }
  for (const n of [w.n1, w.n2].filter(Boolean))
    assert.ok(await eventually(async () => (await admin.get(`/api/v1/nodes/${n.id}`)).json.state === 'up', 15000), `node ${n.name} came up`);
  const reg = await admin.post('/api/v1/registries', {
    name: 'world', server: env.GPUCLOUD_WORLD_REGISTRY, username: env.GPUCLOUD_WORLD_REGISTRY_USER,
    password: env.GPUCLOUD_WORLD_REGISTRY_KEY, personal: true,
  });
  assert.equal(reg.status, 201, reg.text);
  w.registry = reg.json;
  const img = await admin.post('/api/v1/images', {
    reference: env.GPUCLOUD_WORLD_IMAGE, registry_id: reg.json.id, display_name: 'BusyBox',
    framework: 'none', cuda_version: '12.4', description: 'a tiny image',
    default_cmd: ['sh', '-c', 'echo hello from $USER; exec httpd -f -p 8080 -h /tmp'],
    app_ports: [{ name: 'http', port: 8080 }],
  });
  assert.equal(img.status, 201, img.text);
  w.image = img.json;
  const p = await admin.post('/api/v1/pools', { name: 'a100', sharing: 'exclusive' });
  assert.equal(p.status, 201, p.text);
  const gp = await admin.req('PUT', `/api/v1/pools/${p.json.id}/gpus`, { gpu_ids: w.n1.gpus.map((g) => g.id) });
  assert.equal(gp.status, 200, gp.text);
  w.pool = gp.json;
  // default deny (0015): no role may use a pool until an admin opens it;
  // these tests use a100 freely, so every role gets it without limits
  await openPool(w, 'a100');
  return w;
}

// Gives every non-admin role an unlimited default quota in the pool.
export async function openPool(w, pool) {
  for (const role of ['student', 'researcher', 'teacher']) {
    const r = await w.admin.req('PUT', '/api/v1/quotas/defaults', { role, pool });
    assert.equal(r.status, 200, r.text);
  }
}

export async function mkUser(w, username, role = 'student') {
  const password = `${username}-pass-1`;
  const r = await w.admin.post('/api/v1/users', { username, role, password });
  assert.equal(r.status, 201, r.text);
  const c = new Client(w.srv.base);
  assert.equal((await c.login(username, password)).status, 200);
  return { c, id: r.json.user.id, username };
}

// Creates an instance (small resources unless given) and checks the 202.
export async function create(c, w, body = {}) {
  const r = await c.post('/api/v1/instances', { image_id: w.image.id, cpu_millis: 200, mem_mib: 64, ...body });
  assert.equal(r.status, 202, r.text);
  // a GPU-less instance needs no allocation: the driver may have moved it on
  // before the reply was read
  assert.ok(['queued', 'pulling', 'creating', 'running'].includes(r.json.state), r.text);
  return r.json;
}

// Waits until the instance is in state (or one of states); returns it.
export async function waitState(c, id, states, ms = 20000) {
  const want = Array.isArray(states) ? states : [states];
  let last = null;
  const ok = await eventually(async () => {
    const r = await c.get(`/api/v1/instances/${id}`);
    last = r.json;
    if (r.status === 404 && want.includes('deleted')) return true;
    return r.status === 200 && want.includes(r.json.state);
  }, ms, 100);
  assert.ok(ok, `instance ${id} did not reach ${want.join('|')}: ${JSON.stringify(last)}`);
  return last;
}

export function liveAllocations(srv) {
  return Number(sql(srv, 'SELECT count(*) FROM allocations WHERE released_at IS NULL'));
}

export { sleep, eventually, sql };
