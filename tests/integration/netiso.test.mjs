// netiso.test.mjs — tenants' containers cannot reach each other (SPEC §14,
// issue 10 item 4).  On each world engine two users each run an instance
// with an app port (busybox httpd); from inside alice's container, through
// the engine's exec, bob's container address and bob's published port (via
// alice's bridge gateway and via bob's) must not answer, while alice's
// second container on the same node does (per-user networks) and the proxy
// still reaches bob's app.  Then the reconciler removes a user's network
// once it is empty, and never a network labelled with another cluster id.
import { createHash, randomBytes } from 'node:crypto';
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { readFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { stopClean } from '../lib/itest.mjs';
import { world, openPool, mkUser, create, waitState, cleanup, inspect, docker, clusterId, env, eventually } from './instances_lib.mjs';

const engine = (node) => (node === 'node1' ? env.GPUCLOUD_WORLD_DOCKER1 : env.GPUCLOUD_WORLD_DOCKER2);

// One HTTP request from inside a container with busybox nc (busybox wget
// crashes in the static build of the world image); true when an HTTP answer
// came back.
function reaches(url, container, ip, port) {
  let out = '';
  try {
    out = docker(url, 'exec', container, 'busybox', 'sh', '-c',
      `printf 'GET / HTTP/1.0\\r\\n\\r\\n' | busybox timeout 3 busybox nc ${ip} ${port} 2>&1 | busybox head -1`);
  } catch (e) { out = String(e.stdout || '') + String(e.stderr || ''); }
  return /^HTTP\/1\./.test(out);
}

function netOf(ci) {
  const nets = Object.entries(ci.NetworkSettings.Networks);
  assert.equal(nets.length, 1, JSON.stringify(ci.NetworkSettings.Networks));
  return { name: nets[0][0], ip: nets[0][1].IPAddress, gw: nets[0][1].Gateway };
}

function hostPort(ci) {
  return Number(ci.NetworkSettings.Ports['8080/tcp'][0].HostPort);
}

function proxyGet(srv, c, routeId) {
  return (async () => {
    const state = randomBytes(32).toString('hex');
    const o = await c.post(`/api/v1/routes/${routeId}/open`, { state: createHash('sha256').update(state).digest('hex') });
    assert.equal(o.status, 200, o.text);
    const loc = new URL(o.json.url);
    const get = (path, cookie) => new Promise((resolve, reject) => {
      http.get({ host: '127.0.0.1', port: srv.port, path, headers: { host: loc.host, ...(cookie ? { cookie } : {}) } }, (res) => {
        let b = '';
        res.on('data', (d) => { b += d; });
        res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: b }));
      }).on('error', reject);
    });
    const hs = await get(loc.pathname + loc.search, `gc_state=${state}`);
    const cookie = hs.headers['set-cookie'].find((c) => c.startsWith('gc_route=')).split(';')[0];
    let page;
    for (let i = 0; i < 50; i++) {
      page = await get('/', cookie);
      if (page.status !== 502 && page.status !== 503) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    return page;
  })();
}

describe('network isolation between tenants', () => {
  let w, alice, bob;
  const pools = {};
  before(async () => {
    w = await world();
    alice = await mkUser(w, 'alice');
    bob = await mkUser(w, 'bob');
    pools.node1 = 'a100';
    const p = await w.admin.post('/api/v1/pools', { name: 'n2', sharing: 'exclusive' });
    assert.equal(p.status, 201, p.text);
    const gp = await w.admin.req('PUT', `/api/v1/pools/${p.json.id}/gpus`, { gpu_ids: w.n2.gpus.map((g) => g.id) });
    assert.equal(gp.status, 200, gp.text);
    await openPool(w, 'n2');
    pools.node2 = 'n2';
  });
  after(async () => { try { await stopClean(w?.srv); } finally { cleanup(w?.srv); } });

  const launched = {};
  for (const node of ['node1', 'node2']) {
    it(`on ${node}: another user's container and published port are unreachable`, async () => {
      const url = engine(node);
      const mk = async (u, name) => {
        const i = await create(u.c, w, { name, pool: pools[node], slices: 1 });
        const run = await waitState(u.c, i.id, 'running', 60000);
        assert.equal(run.node, node);
        return run;
      };
      const a1 = await mk(alice, `a1-${node}`), a2 = await mk(alice, `a2-${node}`), b = await mk(bob, `b-${node}`);
      launched[node] = { a1, a2, b };
      const ca1 = inspect(url, a1.container_name), ca2 = inspect(url, a2.container_name), cb = inspect(url, b.container_name);
      const na1 = netOf(ca1), na2 = netOf(ca2), nb = netOf(cb);
      const bPort = hostPort(cb);
      assert.equal(cb.HostConfig.PortBindings['8080/tcp'][0].HostIp, '127.0.0.1');
      // positive control: alice's own second container answers (and the
      // probe itself works), so the refusals below are the network's doing
      assert.ok(await eventually(() => reaches(url, a1.container_name, na2.ip, 8080), 10000, 300),
        `alice's containers reach each other on ${node}`);
      assert.ok(await eventually(() => reaches(url, b.container_name, nb.ip, 8080), 10000, 300), 'bob\'s app listens');
      // the attacks: bob's container address, bob's published port via
      // either bridge gateway, and loopback inside alice's container
      assert.equal(reaches(url, a1.container_name, nb.ip, 8080), false, `alice reached bob's container ${nb.ip}:8080 on ${node}`);
      assert.equal(reaches(url, a1.container_name, na1.gw, bPort), false, `alice reached bob's port via her gateway ${na1.gw}:${bPort}`);
      assert.equal(reaches(url, a1.container_name, nb.gw, bPort), false, `alice reached bob's port via his gateway ${nb.gw}:${bPort}`);
      assert.equal(reaches(url, a1.container_name, '127.0.0.1', bPort), false, 'alice reached bob\'s port on loopback');
      assert.equal(reaches(url, b.container_name, na1.ip, 8080), false, `bob reached alice's container ${na1.ip}:8080`);
      // one network per user and node
      const cl = clusterId(w.srv);
      assert.equal(na1.name, `gpucloud-${cl}-u${alice.id}`);
      assert.equal(na2.name, na1.name);
      assert.equal(nb.name, `gpucloud-${cl}-u${bob.id}`);
      // the control plane still reaches bob's app, through the proxy
      const routes = (await bob.c.get(`/api/v1/routes?instance_id=${b.id}`)).json.items;
      assert.equal(routes.length, 1);
      docker(url, 'exec', b.container_name, 'busybox', 'sh', '-c', `echo bob-app-${node} > /tmp/index.html`);
      const page = await proxyGet(w.srv, bob.c, routes[0].id);
      assert.equal(page.status, 200, `bob's app through the proxy: ${page.status} ${page.body}`);
      assert.equal(page.body.trim(), `bob-app-${node}`);
    });
  }

  it('removes a user\'s network once it is empty, never another cluster\'s', async () => {
    const url = engine('node1');
    const cl = clusterId(w.srv);
    const net = `gpucloud-${cl}-u${alice.id}`;
    // a network of another gpucloud cluster, shaped like ours: never ours to remove
    const decoy = `gpucloud-netiso-other-${process.pid}`;
    docker(url, 'network', 'create', '--label', 'gpucloud.cluster=netiso-other', '--label', 'gpucloud.kind=network', decoy);
    try {
      const { a1, a2 } = launched.node1;
      for (const i of [a1, a2]) assert.equal((await alice.c.req('DELETE', `/api/v1/instances/${i.id}`)).status < 300, true);
      for (const i of [a1, a2]) await waitState(alice.c, i.id, 'deleted', 30000);
      const exists = (n) => docker(url, 'network', 'ls', '-q', '--filter', `name=^${n}$`) !== '';
      assert.ok(await eventually(() => !exists(net), 15000, 300), `network ${net} was removed`);
      assert.ok(exists(`gpucloud-${cl}-u${bob.id}`), 'bob\'s network (still in use) stays');
      assert.ok(exists(decoy), 'another cluster\'s network stays');
    } finally {
      docker(url, 'network', 'rm', decoy);
    }
  });
});

// A tcp:// node publishes app ports on node_app_bind (here the world's
// node2 engine over mTLS, bound to its bridge address: a non-loopback
// address of the node): the proxy reaches them there.  A container reaches
// a port on a node address through Docker's userland proxy (measured: it
// does, past the isolation chains), so the node setup installs the rule the
// README gives; with it, another tenant reaches the port neither via that
// address nor via its gateway.  The rule names only this world's bridge
// address and is removed afterwards.
describe('network isolation on a tcp:// node with node_app_bind', () => {
  let w, alice, bob;
  const BIND = '10.231.2.1';
  before(async () => {
    w = await world({ node2: false, args: [`--node-app-bind=${BIND}`] });
    alice = await mkUser(w, 'alice');
    bob = await mkUser(w, 'bob');
    const pem = (f) => readFileSync(f, 'utf8');
    const r = await w.admin.post('/api/v1/nodes', {
      name: 'node2-tls', url: env.GPUCLOUD_WORLD_DOCKER2_TLS,
      tls_ca: pem(env.GPUCLOUD_WORLD_TLS_CA), tls_cert: pem(env.GPUCLOUD_WORLD_TLS_CERT), tls_key: pem(env.GPUCLOUD_WORLD_TLS_KEY),
      gpus: env.GPUCLOUD_WORLD_NODE2_GPUS.split(',').map((d) => ({ model: 'NVIDIA A100-SXM4-80GB', memory_mib: 81920, devices: [d] })),
    });
    assert.equal(r.status, 201, r.text);
    assert.ok(await eventually(async () => (await w.admin.get(`/api/v1/nodes/${r.json.id}`)).json.state === 'up', 15000));
    const p = await w.admin.post('/api/v1/pools', { name: 'tls', sharing: 'exclusive' });
    assert.equal(p.status, 201, p.text);
    const gp = await w.admin.req('PUT', `/api/v1/pools/${p.json.id}/gpus`, { gpu_ids: r.json.gpus.map((g) => g.id) });
    assert.equal(gp.status, 200, gp.text);
    await openPool(w, 'tls');
  });
  after(async () => { try { await stopClean(w?.srv); } finally { cleanup(w?.srv); } });

  it('binds app ports to node_app_bind; the proxy reaches them, another tenant does not', async () => {
    const url = env.GPUCLOUD_WORLD_DOCKER2;
    const mk = async (u, name) => waitState(u.c, (await create(u.c, w, { name, pool: 'tls', slices: 1 })).id, 'running', 60000);
    const a = await mk(alice, 'a-tls'), b = await mk(bob, 'b-tls');
    assert.equal(a.node, 'node2-tls');
    const ca = inspect(url, a.container_name), cb = inspect(url, b.container_name);
    assert.equal(cb.HostConfig.PortBindings['8080/tcp'][0].HostIp, BIND);
    const bPort = hostPort(cb), na = netOf(ca), nb = netOf(cb);
    assert.ok(await eventually(() => reaches(url, b.container_name, nb.ip, 8080), 10000, 300), 'bob\'s app listens');
    const rule = ['INPUT', '-i', 'br-+', '-d', BIND, '-p', 'tcp', '--dport', '32768:60999', '-m', 'conntrack',
      '--ctstate', 'NEW', '-m', 'comment', '--comment', `gpucloud-netiso-${process.pid}`, '-j', 'DROP'];
    execFileSync('iptables', ['-w', '-I', ...rule]);
    try {
      assert.equal(reaches(url, a.container_name, BIND, bPort), false, `alice reached bob's port on the node address ${BIND}:${bPort}`);
      assert.equal(reaches(url, a.container_name, na.gw, bPort), false, `alice reached bob's port via her gateway ${na.gw}:${bPort}`);
      assert.equal(reaches(url, a.container_name, nb.ip, 8080), false, 'alice reached bob\'s container');
      await proxied(b);
    } finally {
      execFileSync('iptables', ['-w', '-D', ...rule]);
    }
  });
  async function proxied(b) {
    const url = env.GPUCLOUD_WORLD_DOCKER2;
    docker(url, 'exec', b.container_name, 'busybox', 'sh', '-c', 'echo bob-app-tls > /tmp/index.html');
    const routes = (await bob.c.get(`/api/v1/routes?instance_id=${b.id}`)).json.items;
    const page = await proxyGet(w.srv, bob.c, routes[0].id);
    assert.equal(page.status, 200, `bob's app through the proxy: ${page.status} ${page.body}`);
    assert.equal(page.body.trim(), 'bob-app-tls');
  }
});
