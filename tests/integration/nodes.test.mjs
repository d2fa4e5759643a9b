// nodes.test.mjs — registering the test world's Docker engines as GPU nodes:
// unix sockets and mutual TLS (right and wrong client certificates), declared
// GPUs, health going down when an engine stops and up when it returns,
// admin states, and that the TLS key never comes back out.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServer, Client, ADMIN_PASSWORD, ROOT, dropDatabase } from '../lib/server.mjs';
import { sql, eventually, assertErrorShape, stopClean } from '../lib/itest.mjs';

const env = process.env;
const need = ['GPUCLOUD_WORLD_DOCKER1', 'GPUCLOUD_WORLD_DOCKER2', 'GPUCLOUD_WORLD_DOCKER1_TLS',
  'GPUCLOUD_WORLD_TLS_CA', 'GPUCLOUD_WORLD_TLS_CERT', 'GPUCLOUD_WORLD_TLS_KEY', 'GPUCLOUD_WORLD_NODE1_GPUS',
  'GPUCLOUD_WORLD_DIR'];

describe('GPU nodes', () => {
  let srv, admin, tmp;

  before(async () => {
    for (const k of need) assert.ok(env[k], `${k} is not set: run through make test (it starts the world)`);
    tmp = mkdtempSync(join(tmpdir(), 'gcnodes-'));
    srv = await startServer({ args: ['--node-check-interval=1', '--node-down-after=2'] });
    admin = new Client(srv.base);
    assert.equal((await admin.login('admin', ADMIN_PASSWORD)).status, 200);
  });

  after(async () => {
    await stopClean(srv);
    rmSync(tmp, { recursive: true, force: true });
  });

  const node = async (id) => (await admin.get(`/api/v1/nodes/${id}`)).json;

  it('registers both world engines over unix sockets; they come up with versions and capacity', async () => {
    const gpus = env.GPUCLOUD_WORLD_NODE1_GPUS.split(',').map((d) => ({ model: 'NVIDIA A100-SXM4-80GB', memory_mib: 81920, devices: [d] }));
    const a = await admin.post('/api/v1/nodes', { name: 'node1', url: env.GPUCLOUD_WORLD_DOCKER1, labels: { rack: 'a' }, gpus });
    assert.equal(a.status, 201, a.text);
    assert.equal(a.json.name, 'node1');
    assert.equal(a.json.gpus.length, gpus.length);
    for (const [i, g] of a.json.gpus.entries()) {
      assert.equal(g.index, i);
      assert.equal(g.simulated, true, 'declared GPUs are marked simulated');
      assert.match(g.uuid, /^GPU-[0-9a-f-]{36}$/);
      assert.deepEqual(g.devices, [gpus[i].devices[0]]);
    }
    const b = await admin.post('/api/v1/nodes', { name: 'node2', url: env.GPUCLOUD_WORLD_DOCKER2 });
    assert.equal(b.status, 201, b.text);
    for (const id of [a.json.id, b.json.id]) {
      const n = await eventually(async () => { const x = await node(id); return x.state === 'up' && x; }, 10000);
      assert.ok(n, 'node came up');
      assert.equal(n.health, 'up');
      assert.ok(n.ncpu >= 1);
      assert.ok(n.memory_bytes > 0);
      assert.match(n.engine_version, /^\d+\.\d+/);
      assert.match(n.api_version, /^1\.\d+$/);
      assert.ok(n.runtimes.includes('runc'));
      assert.ok(n.last_seen_at);
      assert.equal(n.last_error, '');
    }
    const list = await admin.get('/api/v1/nodes');
    assert.deepEqual(list.json.items.map((n) => n.name), ['node1', 'node2']);
  });

  it('flags a runc older than 1.1.12 (CVE-2024-21626)', async () => {
    const id = (await admin.get('/api/v1/nodes')).json.items[0].id;
    const n = await node(id);
    if (n.runc_version) {
      const [maj, min, pat] = n.runc_version.replace(/^v/, '').split('.').map((x) => parseInt(x, 10));
      const old = maj < 1 || (maj === 1 && (min < 1 || (min === 1 && pat < 12)));
      assert.equal(n.flags.includes('runc_vulnerable'), old, `runc ${n.runc_version}`);
    }
    // the comparison itself, through a stored version the engine never reported
    sql(srv, `UPDATE nodes SET runc_version = '1.1.11' WHERE id = ${id}`);
    assert.ok((await admin.get(`/api/v1/nodes/${id}`)).json.flags.includes('runc_vulnerable'));
    sql(srv, `UPDATE nodes SET runc_version = '1.1.12', toolkit_version = '1.17.7' WHERE id = ${id}`);
    const f = (await admin.get(`/api/v1/nodes/${id}`)).json.flags;
    assert.ok(!f.includes('runc_vulnerable'));
    assert.ok(f.includes('toolkit_vulnerable'));
    // the toolkit's version comes from the admin (the Engine API does not tell it)
    let r = await admin.patch(`/api/v1/nodes/${id}`, { toolkit_version: '1.17.8' });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.toolkit_version, '1.17.8');
    assert.ok(!r.json.flags.includes('toolkit_vulnerable'));
    r = await admin.patch(`/api/v1/nodes/${id}`, { toolkit_version: '1.16.2' });
    assert.ok(r.json.flags.includes('toolkit_vulnerable'));
    assert.equal((await admin.patch(`/api/v1/nodes/${id}`, { toolkit_version: 'latest' })).status, 400);
  });

  it('registers an mTLS engine with the right client certificate and never returns the key', async () => {
    const pem = (f) => readFileSync(f, 'utf8');
    const key = pem(env.GPUCLOUD_WORLD_TLS_KEY);
    const r = await admin.post('/api/v1/nodes', {
      name: 'node1-tls', url: env.GPUCLOUD_WORLD_DOCKER1_TLS,
      tls_ca: pem(env.GPUCLOUD_WORLD_TLS_CA), tls_cert: pem(env.GPUCLOUD_WORLD_TLS_CERT), tls_key: key,
    });
    assert.equal(r.status, 201, r.text);
    assert.equal(r.json.tls, true);
    const n = await eventually(async () => { const x = await node(r.json.id); return x.state === 'up' && x; }, 10000);
    assert.ok(n, 'the TLS node came up through the health check');
    const all = await admin.get('/api/v1/nodes');
    assert.ok(!all.text.includes('PRIVATE KEY'), 'the key is not in API responses');
    const stored = sql(srv, `SELECT tls_key_sealed FROM nodes WHERE id = ${r.json.id}`);
    assert.match(stored, /^v1:[A-Za-z0-9+/]+$/);
    assert.ok(!stored.includes('PRIVATE'), 'the key is stored encrypted');
    assert.ok(!srv.log().includes('PRIVATE KEY'), 'the key is not logged');
  });

  it('refuses an mTLS engine with a client certificate it does not trust, with a clear error, storing nothing', async () => {
    const ca = join(tmp, 'ca.pem'), cakey = join(tmp, 'ca.key'), key = join(tmp, 'k.pem'), csr = join(tmp, 'c.csr'), cert = join(tmp, 'c.pem');
    const o = (args) => execFileSync('openssl', args, { stdio: 'ignore' });
    o(['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '1', '-subj', '/CN=rogue-ca', '-keyout', cakey, '-out', ca]);
    o(['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-subj', '/CN=rogue-client', '-keyout', key, '-out', csr]);
    o(['x509', '-req', '-in', csr, '-CA', ca, '-CAkey', cakey, '-CAcreateserial', '-days', '1', '-out', cert]);
    const before = (await admin.get('/api/v1/nodes')).json.items.length;
    const r = await admin.post('/api/v1/nodes', {
      name: 'rogue', url: env.GPUCLOUD_WORLD_DOCKER1_TLS,
      // the engine's real CA, so only our client certificate is wrong
      tls_ca: readFileSync(env.GPUCLOUD_WORLD_TLS_CA, 'utf8'), tls_cert: readFileSync(cert, 'utf8'), tls_key: readFileSync(key, 'utf8'),
    });
    assert.equal(r.status, 400, r.text);
    assertErrorShape(r.json, 'invalid');
    assert.match(r.json.error.message, /could not reach the engine at 'tcp:\/\/127\.0\.0\.1:\d+'/);
    assert.match(r.json.error.hint, /client certificate/);
    assert.equal((await admin.get('/api/v1/nodes')).json.items.length, before);
    // and a CA that is not the engine's: we refuse the engine
    const r2 = await admin.post('/api/v1/nodes', {
      name: 'rogue2', url: env.GPUCLOUD_WORLD_DOCKER1_TLS,
      tls_ca: readFileSync(ca, 'utf8'), tls_cert: readFileSync(env.GPUCLOUD_WORLD_TLS_CERT, 'utf8'), tls_key: readFileSync(env.GPUCLOUD_WORLD_TLS_KEY, 'utf8'),
    });
    assert.equal(r2.status, 400, r2.text);
    assert.match(r2.json.error.message, /could not reach the engine/);
  });

  it('refuses bad registrations with 400 and the JSON error shape', async () => {
    const bad = [
      [{ name: 'x', url: 'unix:///nonexistent/docker.sock' }, /could not reach the engine/],
      [{ name: 'Bad Name', url: env.GPUCLOUD_WORLD_DOCKER1 }, /node name/],
      [{ name: 'x', url: 'http://127.0.0.1:2375' }, /url must be/],
      [{ name: 'x', url: 'tcp://127.0.0.1:2375' }, /needs tls_ca, tls_cert and tls_key/],
      [{ name: 'x', url: env.GPUCLOUD_WORLD_DOCKER1, tls_ca: 'x' }, /only for tcp/],
      [{ name: 'x', url: env.GPUCLOUD_WORLD_DOCKER1, gpus: [{ model: 'T4', memory_mib: 1, devices: ['relative'] }] }, /absolute path/],
      [{ name: 'x', url: env.GPUCLOUD_WORLD_DOCKER1, gpus: [{ model: 'T4', memory_mib: -1, devices: ['/dev/x'] }] }, /memory_mib/],
      [{ name: 'x', url: env.GPUCLOUD_WORLD_DOCKER1, gpus: [{ model: 'T4', memory_mib: 1, devices: ['/dev/x'], extra: 1 }] }, /unknown field/],
      [{ name: 'x', url: env.GPUCLOUD_WORLD_DOCKER1, labels: { a: 1 } }, /labels/],
      [{ name: 'x', url: env.GPUCLOUD_WORLD_DOCKER1, surprise: true }, /unknown field 'surprise'/],
    ];
    for (const [body, msg] of bad) {
      const r = await admin.post('/api/v1/nodes', body);
      assert.equal(r.status, 400, `${JSON.stringify(body)} → ${r.status} ${r.text}`);
      assertErrorShape(r.json, 'invalid');
      assert.match(r.json.error.message, msg);
    }
    const dup = await admin.post('/api/v1/nodes', { name: 'node1', url: env.GPUCLOUD_WORLD_DOCKER1 });
    assert.equal(dup.status, 409);
  });

  it('marks a node down when its engine stops and up again when it returns', async () => {
    const id = (await admin.get('/api/v1/nodes')).json.items.find((n) => n.name === 'node2').id;
    const pidfile = join(env.GPUCLOUD_WORLD_DIR, 'docker', 'node2.pid');
    const pid = Number(readFileSync(pidfile, 'utf8').trim());
    try {
      process.kill(pid, 'SIGTERM');
      const down = await eventually(async () => { const x = await node(id); return x.state === 'down' && x; }, 20000, 250);
      assert.ok(down, 'node2 went down');
      assert.ok(down.last_error.length > 0, 'the failure is explained');
      assert.ok(down.down_since);
      // node1 is unaffected
      const n1 = (await admin.get('/api/v1/nodes')).json.items.find((n) => n.name === 'node1');
      assert.equal(n1.state, 'up');
    } finally {
      execFileSync('bash', [join(ROOT, 'deploy/world.sh'), 'up'], { stdio: 'ignore' });
    }
    const up = await eventually(async () => { const x = await node(id); return x.state === 'up' && x; }, 20000, 250);
    assert.ok(up, 'node2 came back up');
    assert.equal(up.down_since, null);
    assert.equal(up.last_error, '');
  });

  it('replaces the declared GPUs of a node that has some, keeping or changing their UUIDs', async () => {
    const n1 = (await admin.get('/api/v1/nodes')).json.items.find((n) => n.name === 'node1');
    assert.equal(n1.gpus.length, 4);
    const keep = n1.gpus.map((g) => ({ model: g.model, memory_mib: g.memory_mib, devices: g.devices, uuid: g.uuid }));
    let r = await admin.patch(`/api/v1/nodes/${n1.id}`, { gpus: keep.slice(0, 3) });
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.json.gpus.map((g) => g.uuid), keep.slice(0, 3).map((g) => g.uuid));
    r = await admin.patch(`/api/v1/nodes/${n1.id}`, { gpus: keep.map(({ uuid, ...g }) => g) });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.gpus.length, 4);
    assert.ok(r.json.gpus.every((g) => !keep.some((k) => k.uuid === g.uuid)), 'new UUIDs were generated');
    // a UUID another node already has is a conflict, and nothing changes
    const other = (await admin.get('/api/v1/nodes')).json.items.find((n) => n.name === 'node2');
    const taken = r.json.gpus[0].uuid;
    const c = await admin.patch(`/api/v1/nodes/${other.id}`, { gpus: [{ model: 'X', memory_mib: 1, devices: ['/dev/null'], uuid: taken }] });
    assert.equal(c.status, 409, c.text);
    assert.equal((await node(other.id)).gpus.length, 0);
  });

  it('drains, cordons and reactivates a node, replaces declared GPUs, and removes it', async () => {
    const id = (await admin.get('/api/v1/nodes')).json.items.find((n) => n.name === 'node2').id;
    let r = await admin.patch(`/api/v1/nodes/${id}`, { state: 'draining' });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.state, 'draining');
    r = await admin.patch(`/api/v1/nodes/${id}`, { state: 'cordoned', labels: { zone: 'b' } });
    assert.equal(r.json.state, 'cordoned');
    assert.deepEqual(r.json.labels, { zone: 'b' });
    r = await admin.patch(`/api/v1/nodes/${id}`, { state: 'active', gpus: [{ model: 'NVIDIA T4', memory_mib: 15360, devices: ['/dev/null'] }] });
    assert.equal(r.json.admin_state, 'active');
    assert.equal(r.json.gpus.length, 1);
    assert.equal(r.json.gpus[0].model, 'NVIDIA T4');
    assert.equal((await admin.patch(`/api/v1/nodes/${id}`, { state: 'gone' })).status, 400);
    assert.equal((await admin.del(`/api/v1/nodes/${id}`)).status, 204);
    assert.equal((await admin.get(`/api/v1/nodes/${id}`)).status, 404);
    assert.equal(sql(srv, `SELECT count(*) FROM gpus WHERE node_id = ${id}`), '0');
    const audit = await admin.get('/api/v1/audit?action=node');
    const actions = audit.json.items.map((e) => e.action);
    for (const a of ['node.create', 'node.update', 'node.delete']) assert.ok(actions.includes(a), a);
  });

  it('is for admins only', async () => {
    const mk = await admin.post('/api/v1/users', { username: 'nodestudent', role: 'student', password: 'student-pass-1' });
    assert.equal(mk.status, 201);
    const s = new Client(srv.base);
    assert.equal((await s.login('nodestudent', 'student-pass-1')).status, 200);
    assert.equal((await s.get('/api/v1/nodes')).status, 403);
    assert.equal((await s.post('/api/v1/nodes', { name: 'x', url: env.GPUCLOUD_WORLD_DOCKER1 })).status, 403);
  });
});

describe('the local engine of a single machine', () => {
  it('is registered as node "local" when docker_host is set and no node exists, once', async () => {
    assert.ok(env.GPUCLOUD_WORLD_DOCKER1, 'GPUCLOUD_WORLD_DOCKER1 is not set: run through make test');
    const srv = await startServer({ args: [`--docker-host=${env.GPUCLOUD_WORLD_DOCKER1}`, '--node-check-interval=1'] });
    let second;
    try {
      const admin = new Client(srv.base);
      assert.equal((await admin.login('admin', ADMIN_PASSWORD)).status, 200);
      const up = await eventually(async () => {
        const items = (await admin.get('/api/v1/nodes')).json.items;
        return items.length === 1 && items[0].state === 'up' && items;
      }, 10000);
      assert.ok(up, 'the local node came up');
      assert.equal(up[0].name, 'local');
      assert.equal(up[0].url, env.GPUCLOUD_WORLD_DOCKER1);
      await srv.stop({ keepDb: true });
      // a restart does not add it again, nor after it was renamed away
      sql(srv, "UPDATE nodes SET name = 'renamed'");
      second = await startServer({ db: srv.db, args: [`--docker-host=${env.GPUCLOUD_WORLD_DOCKER1}`] });
      const names = sql(second, 'SELECT string_agg(name, \',\') FROM nodes');
      assert.equal(names, 'renamed');
      // tcp:// needs TLS material: refused at start-up
      const bad = await startServer({ args: ['--docker-host=tcp://127.0.0.1:2375'] }).catch((e) => e);
      assert.ok(bad instanceof Error && /did not start/.test(bad.message), 'tcp docker_host refused');
    } finally {
      await second?.stop({ keepDb: true });
      await srv.stop();
    }
  });
});

describe('GPU discovery through the NVIDIA runtime', () => {
  it('runs nvidia-smi on a node without declared GPUs, stores what it reports, and cleans up', async () => {
    for (const k of ['GPUCLOUD_WORLD_DOCKER2', 'GPUCLOUD_WORLD_DISCOVERY_IMAGE', 'GPUCLOUD_WORLD_DOCKER1', 'GPUCLOUD_WORLD_NODE1_GPUS'])
      assert.ok(env[k], `${k} is not set: run through make test (it starts the world)`);
    // the world's engines have an "nvidia" runtime (plain runc: no GPU here) and an
    // image whose nvidia-smi prints output captured from an 8 x A100 host
    const srv = await startServer({ args: ['--node-check-interval=1', `--discovery-image=${env.GPUCLOUD_WORLD_DISCOVERY_IMAGE}`] });
    try {
      const admin = new Client(srv.base);
      assert.equal((await admin.login('admin', ADMIN_PASSWORD)).status, 200);
      const n2 = (await admin.post('/api/v1/nodes', { name: 'node2', url: env.GPUCLOUD_WORLD_DOCKER2 })).json;
      const declared = env.GPUCLOUD_WORLD_NODE1_GPUS.split(',').map((d) => ({ model: 'NVIDIA T4', memory_mib: 15360, devices: [d] }));
      const n1 = (await admin.post('/api/v1/nodes', { name: 'node1', url: env.GPUCLOUD_WORLD_DOCKER1, gpus: declared })).json;
      const found = await eventually(async () => { const x = (await admin.get(`/api/v1/nodes/${n2.id}`)).json; return x.gpus.length === 8 && x; }, 20000, 250);
      assert.ok(found, 'node2 got the 8 GPUs nvidia-smi reported');
      const fixture = readFileSync(join(ROOT, 'tests/fixtures/nvidia-smi/a100x8-query.csv'), 'utf8').trim().split('\n').map((l) => l.split(', '));
      for (const [i, g] of found.gpus.entries()) {
        assert.equal(g.index, i);
        assert.equal(g.uuid, fixture[i][1]);
        assert.equal(g.model, 'NVIDIA A100-SXM4-80GB');
        assert.equal(g.memory_mib, 81920);
        assert.equal(g.simulated, false, 'discovered GPUs are not simulated');
        assert.deepEqual(g.devices, []);
      }
      // declared GPUs are left alone
      await new Promise((r) => setTimeout(r, 1500));
      const one = (await admin.get(`/api/v1/nodes/${n1.id}`)).json;
      assert.equal(one.gpus.length, declared.length);
      assert.ok(one.gpus.every((g) => g.simulated && g.model === 'NVIDIA T4'));
      // no discovery container is left behind on the engine
      const sock = env.GPUCLOUD_WORLD_DOCKER2.replace('unix://', '');
      const left = await eventually(() => {
        const out = execFileSync('curl', ['-s', '--unix-socket', sock,
          'http://localhost/v1.41/containers/json?all=1&filters=%7B%22label%22%3A%5B%22gpucloud.kind%3Ddiscovery%22%5D%7D'], { encoding: 'utf8' });
        return JSON.parse(out).length === 0;
      }, 10000, 250);
      assert.ok(left, 'the discovery container was removed');
      assert.match(srv.log(), /discovered 8 GPUs on node 'node2'/);
      // plain nvidia-smi's header: "CUDA Version: 12.2" (the stand-in prints a100x8-smi.txt)
      const smi = readFileSync(join(ROOT, 'tests/fixtures/nvidia-smi/a100x8-smi.txt'), 'utf8');
      const want = smi.match(/CUDA Version: (\d+\.\d+)/)[1];
      assert.equal(want, '12.2');
      const cv = await eventually(async () => { const x = (await admin.get(`/api/v1/nodes/${n2.id}`)).json; return x.cuda_version && x; }, 10000, 100);
      assert.ok(cv, 'node2 got a CUDA version');
      assert.equal(cv.cuda_version, want);
      assert.equal(cv.cuda_source, 'discovered');
      assert.equal(sql(srv, `SELECT cuda_max || ',' || cuda_discovered FROM nodes WHERE id = ${n2.id}`), '12020,12020');
      // declared GPUs mean no discovery: no CUDA version either
      assert.equal(one.cuda_version, '');
      assert.equal(one.cuda_source, '');

      // the same engine as node1 over mTLS, without declared GPUs: its nvidia-smi
      // reports two A100s in MIG mode (7 x 1g.10gb, and 3g.40gb + 2g.20gb + 1g.10gb)
      const pem = (f) => readFileSync(f, 'utf8');
      const m = (await admin.post('/api/v1/nodes', { name: 'mig1', url: env.GPUCLOUD_WORLD_DOCKER1_TLS,
        tls_ca: pem(env.GPUCLOUD_WORLD_TLS_CA), tls_cert: pem(env.GPUCLOUD_WORLD_TLS_CERT), tls_key: pem(env.GPUCLOUD_WORLD_TLS_KEY) })).json;
      const mg = await eventually(async () => { const x = (await admin.get(`/api/v1/nodes/${m.id}`)).json; return x.gpus.length === 2 && x.gpus.every((g) => g.mig.length) && x; }, 20000, 250);
      assert.ok(mg, 'MIG instances discovered');
      assert.ok(mg.gpus.every((g) => g.mig_enabled && !g.simulated));
      assert.deepEqual(mg.gpus[0].mig.map((i) => i.profile), Array(7).fill('1g.10gb'));
      assert.deepEqual(mg.gpus[1].mig.map((i) => i.profile), ['3g.40gb', '2g.20gb', '1g.10gb']);
      assert.match(mg.gpus[1].mig[0].uuid, /^MIG-1ce2b8dd-/);
      const mc = await eventually(async () => { const x = (await admin.get(`/api/v1/nodes/${m.id}`)).json; return x.cuda_version && x; }, 10000, 100);
      assert.equal(mc.cuda_version, '12.4', 'the MIG host\'s header says 12.4');
      assert.equal(mc.cuda_source, 'discovered');
      // a mig pool: one slice per MIG instance; GPUs without MIG are refused
      const pool = (await admin.post('/api/v1/pools', { name: 'mig-lab', sharing: 'mig' })).json;
      assert.equal(pool.sharing, 'mig');
      const bad = await admin.req('PUT', `/api/v1/pools/${pool.id}/gpus`, { gpu_ids: [found.gpus[0].id] });
      assert.equal(bad.status, 409, bad.text);
      assert.match(bad.json.error.message, /have no MIG instances/);
      const ok = await admin.req('PUT', `/api/v1/pools/${pool.id}/gpus`, { gpu_ids: mg.gpus.map((g) => g.id) });
      assert.equal(ok.status, 200, ok.text);
      assert.equal(ok.json.slices, 10);
      assert.deepEqual(ok.json.nodes[0].gpus.map((g) => g.slices), [7, 3]);
    } finally {
      await srv.stop();
    }
  });

  it("reads the driver's CUDA version; the admin's overrides it, survives the next discovery, and clearing it falls back", async () => {
    const args = ['--node-check-interval=1', `--discovery-image=${env.GPUCLOUD_WORLD_DISCOVERY_IMAGE}`];
    let srv = await startServer({ args });
    const db = srv.db;
    try {
      let admin = new Client(srv.base);
      assert.equal((await admin.login('admin', ADMIN_PASSWORD)).status, 200);
      const n2 = (await admin.post('/api/v1/nodes', { name: 'node2', url: env.GPUCLOUD_WORLD_DOCKER2 })).json;
      const node = async () => (await admin.get(`/api/v1/nodes/${n2.id}`)).json;
      const got = await eventually(async () => { const x = await node(); return x.cuda_version && x; }, 20000, 100);
      assert.ok(got, 'discovery read a CUDA version');
      assert.deepEqual([got.cuda_version, got.cuda_source], ['12.2', 'discovered']);
      assert.match(srv.log(), /node 'node2' supports CUDA 12\.2 by nvidia-smi; in use: 12\.2 \(discovered\)/);
      // the admin says otherwise
      let r = await admin.patch(`/api/v1/nodes/${n2.id}`, { cuda_version: '12.8' });
      assert.equal(r.status, 200, r.text);
      assert.deepEqual([r.json.cuda_version, r.json.cuda_source], ['12.8', 'admin']);
      // clearing falls back to what discovery read, at once
      r = await admin.patch(`/api/v1/nodes/${n2.id}`, { cuda_version: '' });
      assert.deepEqual([r.json.cuda_version, r.json.cuda_source], ['12.2', 'discovered']);
      // other fields leave it alone
      r = await admin.patch(`/api/v1/nodes/${n2.id}`, { cuda_version: '11.8' });
      assert.deepEqual([r.json.cuda_version, r.json.cuda_source], ['11.8', 'admin']);
      r = await admin.patch(`/api/v1/nodes/${n2.id}`, { labels: { rack: 'a' } });
      assert.deepEqual([r.json.cuda_version, r.json.cuda_source], ['11.8', 'admin']);
      r = await admin.patch(`/api/v1/nodes/${n2.id}`, { cuda_version: '12.4.1x' });
      assert.equal(r.status, 400, r.text);
      assertErrorShape(r.json);

      // a restart discovers again (once per node and process): the admin's value stays
      await srv.stop({ keepDb: true });
      srv = await startServer({ db, args });
      admin = new Client(srv.base);
      assert.equal((await admin.login('admin', ADMIN_PASSWORD)).status, 200);
      assert.ok(await eventually(() => /node 'node2' supports CUDA 12\.2 by nvidia-smi; in use: 11\.8 \(admin\)/.test(srv.log()), 20000, 100),
        'the second discovery ran');
      const after = await node();
      assert.deepEqual([after.cuda_version, after.cuda_source, after.cuda_discovered], ['11.8', 'admin', '12.2']);
      assert.equal(sql(srv, `SELECT cuda_max || ',' || cuda_discovered FROM nodes WHERE id = ${n2.id}`), '11080,12020');
      r = await admin.patch(`/api/v1/nodes/${n2.id}`, { cuda_version: '' });
      assert.deepEqual([r.json.cuda_version, r.json.cuda_source], ['12.2', 'discovered']);
      // with nothing discovered, clearing makes it unknown
      sql(srv, `UPDATE nodes SET cuda_discovered = NULL WHERE id = ${n2.id}`);
      await admin.patch(`/api/v1/nodes/${n2.id}`, { cuda_version: '13.0' });
      r = await admin.patch(`/api/v1/nodes/${n2.id}`, { cuda_version: '' });
      assert.deepEqual([r.json.cuda_version, r.json.cuda_source], ['', '']);
    } finally {
      await srv.stop();
      dropDatabase(db.name);
    }
  });
});
