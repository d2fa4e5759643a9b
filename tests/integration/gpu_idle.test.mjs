// gpu_idle.test.mjs — GPU utilisation sampling and idle reclamation (SPEC §6).
// The world's engines have no GPU: an "nvidia" runtime (plain runc) and the
// nvidia-smi stand-in, which prints captured output, utilisation included
// (tests/fixtures/nvidia-smi/a100x8-util.csv on node2: even GPUs busy, odd
// ones idle).  Node2's engine registered a second time without declared GPUs
// is discovered and sampled: gpu_samples gets rows for its measured GPUs,
// never for declared ones.  A container cannot start on a measured GPU here
// (the engine has no NVIDIA device driver), so instances start on node2's
// declared GPUs and the test then turns those into measured GPUs with the
// stand-in's UUIDs — what a real GPU node's rows look like: the sampler and
// idle reclamation then run unchanged.  An idle-CPU instance whose GPU is
// busy is not stopped; one whose GPU shows 0 % is, and so is one on a
// declared GPU (no GPU signal at all).  With gpu_dcgm_url set, the samples
// come from a DCGM exporter's /metrics (a local server serving
// tests/fixtures/nvidia-smi/dcgm-exporter.txt) and no container runs.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createServer } from 'node:http';
import { startServer, Client, ADMIN_PASSWORD } from '../lib/server.mjs';
import { stopClean } from '../lib/itest.mjs';
import { world, env, docker, mkUser, create, waitState, cleanup, sql, eventually, openPool, sleep } from './instances_lib.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../..');
const fixture = readFileSync(join(ROOT, 'tests/fixtures/nvidia-smi/a100x8-util.csv'), 'utf8')
  .trim().split('\n').map((l) => l.split(', ')).map(([u, p]) => [u, Number(p)]);
const util = new Map(fixture);
const pem = (f) => readFileSync(f, 'utf8');

describe('GPU sampling feeds idle reclamation', () => {
  let w, gina;
  before(async () => {
    for (const k of ['GPUCLOUD_WORLD_DISCOVERY_IMAGE', 'GPUCLOUD_WORLD_DOCKER2_TLS', 'GPUCLOUD_WORLD_TLS_CA'])
      assert.ok(env[k], `${k} is not set: run through make test (it starts the world)`);
    w = await world({ args: ['--reclaim-interval=1', '--idle-cpu-percent=15', '--gpu-sample-interval-s=1',
      '--idle-gpu-percent=50', `--discovery-image=${env.GPUCLOUD_WORLD_DISCOVERY_IMAGE}`] });
    gina = await mkUser(w, 'gina');
  });
  after(async () => { try { await stopClean(w?.srv); } finally { cleanup(w?.srv); } });

  it('samples measured GPUs into gpu_samples, never declared ones, and cleans up', async () => {
    // a sampler container a previous gpucloudd left behind (stopped mid-sampling)
    const leftover = `gpucloud-sampler-leftover-${w.srv.proc.pid}`;
    docker(env.GPUCLOUD_WORLD_DOCKER2, 'create', '--name', leftover, '--label', 'gpucloud.kind=sampler',
      '--label', 'gpucloud.node=measured2', env.GPUCLOUD_WORLD_DISCOVERY_IMAGE, 'true');
    const m = await w.admin.post('/api/v1/nodes', { name: 'measured2', url: env.GPUCLOUD_WORLD_DOCKER2_TLS,
      tls_ca: pem(env.GPUCLOUD_WORLD_TLS_CA), tls_cert: pem(env.GPUCLOUD_WORLD_TLS_CERT), tls_key: pem(env.GPUCLOUD_WORLD_TLS_KEY) });
    assert.equal(m.status, 201, m.text);
    const found = await eventually(async () => (await w.admin.get(`/api/v1/nodes/${m.json.id}`)).json.gpus.length === 8, 20000, 250);
    assert.ok(found, 'the 8 GPUs nvidia-smi reported were discovered');
    const ok = await eventually(() => Number(sql(w.srv, 'SELECT count(DISTINCT gpu_uuid) FROM gpu_samples')) === 8, 15000, 250);
    assert.ok(ok, 'all 8 measured GPUs were sampled');
    const rows = sql(w.srv, "SELECT gpu_uuid || ' ' || util_pct || ' ' || node_id FROM gpu_samples ORDER BY at DESC LIMIT 8").split('\n');
    for (const r of rows) {
      const [u, pct, node] = r.split(' ');
      assert.equal(Number(pct), util.get(u), `${u} as the stand-in printed`);
      assert.equal(Number(node), m.json.id);
    }
    assert.equal(sql(w.srv, `SELECT count(*) FROM gpu_samples WHERE node_id IN (${w.n1.id}, ${w.n2.id})`), '0', 'declared GPUs have no samples');
    // each sampling removes its container: at most the one in flight is there
    await sleep(2000);
    const mine = docker(env.GPUCLOUD_WORLD_DOCKER2, 'ps', '-a', '--filter', 'label=gpucloud.kind=sampler', '--format', '{{.Names}}')
      .split('\n').filter((n) => n.endsWith(`-${w.srv.proc.pid}`));
    assert.ok(mine.length <= 1, `sampler containers left: ${mine.join(' ')}`);
    assert.equal(docker(env.GPUCLOUD_WORLD_DOCKER2, 'ps', '-a', '-q', '--filter', `name=${leftover}`), '', 'the leftover was removed');
    // removing the node keeps the history (accounting reads it)
    assert.equal((await w.admin.del(`/api/v1/nodes/${m.json.id}`)).status, 204);
    assert.ok(Number(sql(w.srv, 'SELECT count(*) FROM gpu_samples')) >= 8);
  });

  it('a busy GPU keeps an idle-CPU instance; a 0 % GPU and a declared GPU do not', async () => {
    const p = await w.admin.post('/api/v1/pools', { name: 'node2', sharing: 'exclusive' });
    assert.equal(p.status, 201, p.text);
    const gp = await w.admin.req('PUT', `/api/v1/pools/${p.json.id}/gpus`, { gpu_ids: w.n2.gpus.map((g) => g.id) });
    assert.equal(gp.status, 200, gp.text);
    await openPool(w, 'node2');
    const a = await create(gina.c, w, { name: 'ga', pool: 'node2', slices: 1, cmd: ['sleep', '3600'] });
    const b = await create(gina.c, w, { name: 'gb', pool: 'node2', slices: 1, cmd: ['sleep', '3600'] });
    const [ga, gb] = [await waitState(gina.c, a.id, 'running'), await waitState(gina.c, b.id, 'running')];
    // GPU 0 of the stand-in is busy, GPU 1 idle: ga's GPU becomes the first, gb's the second
    assert.ok(fixture[0][1] >= 50 && fixture[1][1] < 50);
    sql(w.srv, `UPDATE gpus SET simulated = false, devices = '{}', uuid = CASE uuid
      WHEN '${ga.gpus[0].uuid}' THEN '${fixture[0][0]}' ELSE '${fixture[1][0]}' END
      WHERE uuid IN ('${ga.gpus[0].uuid}', '${gb.gpus[0].uuid}')`);
    const d = await create(gina.c, w, { name: 'gd', pool: 'a100', slices: 1, cmd: ['sleep', '3600'] });
    await waitState(gina.c, d.id, 'running');
    const sampled = await eventually(() => Number(sql(w.srv, `SELECT count(DISTINCT gpu_uuid) FROM gpu_samples WHERE node_id = ${w.n2.id}`)) === 2, 15000, 200);
    assert.ok(sampled, 'node2\'s two measured GPUs are sampled');
    // each instance shows its GPUs' latest utilisation; a declared GPU's is not measurable
    const utilOf = async (id) => (await gina.c.get(`/api/v1/instances/${id}`)).json.gpus[0].util_pct;
    assert.equal(await utilOf(ga.id), fixture[0][1]);
    assert.equal(await utilOf(gb.id), fixture[1][1]);
    assert.equal(await utilOf(d.id), null);
    // the policy once the samples are there: 3 s idle, stopped 3 s after the warning
    const s = await w.admin.req('PUT', '/api/v1/idle-policies/student', { idle_seconds: 3, warn_seconds: 3 });
    assert.equal(s.status, 200, s.text);
    const st = await waitState(gina.c, gb.id, 'stopped', 25000);
    assert.match(st.reason, /idle/);
    const sd = await waitState(gina.c, d.id, 'stopped', 25000);
    assert.match(sd.reason, /idle/, 'a declared GPU gives no signal: CPU idle is idle');
    const g = (await gina.c.get(`/api/v1/instances/${ga.id}`)).json;
    assert.equal(g.state, 'running', 'the instance on the busy GPU runs on');
    assert.equal(g.idle_warning_at, null, 'and was never warned');
    sql(w.srv, "UPDATE idle_policies SET idle_seconds = NULL WHERE role = 'student'");
  });
});

describe('GPU sampling from a DCGM exporter (gpu_dcgm_url)', () => {
  let srv, admin, exporter, hits = 0;
  before(async () => {
    // a DCGM exporter's /metrics for GPUs 0 and 1 of node2's stand-in (97 % and 0 %)
    const text = readFileSync(join(ROOT, 'tests/fixtures/nvidia-smi/dcgm-exporter.txt'), 'utf8');
    exporter = createServer((req, res) => {
      hits++;
      if (req.url !== '/metrics') { res.writeHead(404).end(); return; }
      res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' }).end(text);
    });
    await new Promise((r) => exporter.listen(0, '127.0.0.1', r));
    srv = await startServer({ args: ['--node-check-interval=1', '--gpu-sample-interval-s=1',
      `--discovery-image=${env.GPUCLOUD_WORLD_DISCOVERY_IMAGE}`, `--gpu-dcgm-url=http://{host}:${exporter.address().port}/metrics`] });
    admin = new Client(srv.base);
    assert.equal((await admin.login('admin', ADMIN_PASSWORD)).status, 200);
  });
  after(async () => { await stopClean(srv); exporter?.close(); });

  it('reads utilisation from the exporter at the node\'s host instead of running nvidia-smi', async () => {
    // tcp://127.0.0.1:port: the exporter is asked at http://127.0.0.1:<its port>/metrics
    const m = await admin.post('/api/v1/nodes', { name: 'dcgm2', url: env.GPUCLOUD_WORLD_DOCKER2_TLS,
      tls_ca: pem(env.GPUCLOUD_WORLD_TLS_CA), tls_cert: pem(env.GPUCLOUD_WORLD_TLS_CERT), tls_key: pem(env.GPUCLOUD_WORLD_TLS_KEY) });
    assert.equal(m.status, 201, m.text);
    const ok = await eventually(() => Number(sql(srv, 'SELECT count(DISTINCT gpu_uuid) FROM gpu_samples')) === 2, 20000, 250);
    assert.ok(ok, 'the two GPUs the exporter lists were sampled');
    assert.ok(hits > 0);
    const rows = sql(srv, "SELECT DISTINCT gpu_uuid || ' ' || util_pct || ' ' || mem_used_mib FROM gpu_samples ORDER BY 1").split('\n');
    assert.deepEqual(rows, [`${fixture[1][0]} 0 0`, `${fixture[0][0]} 97 61234`].sort());
    // no sampler container: the exporter replaced nvidia-smi
    const mine = docker(env.GPUCLOUD_WORLD_DOCKER2, 'ps', '-a', '--filter', 'label=gpucloud.kind=sampler', '--format', '{{.Names}}')
      .split('\n').filter((n) => n.endsWith(`-${srv.proc.pid}`));
    assert.deepEqual(mine, []);
  });
});
