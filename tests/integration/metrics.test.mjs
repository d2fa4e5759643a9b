// metrics.test.mjs — /metrics of a real server with real traffic: an
// instance running on a declared GPU, a node whose GPUs were discovered and
// are sampled through the world's nvidia-smi stand-in, API requests (some
// refused).  The body passes `promtool check metrics`, names the platform
// series (queue, allocations and slices per pool, nodes, GPUs, instance and
// job states, pulls, proxy, database pool, workers) with bounded labels (route
// patterns, never raw paths or ids), and every series the Grafana dashboard
// (deploy/grafana-dashboard.json) queries is in it.  Access: the scrape
// address of metrics_allow reads it without a token, an admin's token from
// anywhere, another user's token is refused (403), anonymous from elsewhere
// too (401).  /readyz: the database and at least one node reachable.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import { execFileSync, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { startServer, Client, ADMIN_PASSWORD, ROOT } from '../lib/server.mjs';
import { stopClean, call, sql } from '../lib/itest.mjs';
import { world, env, mkUser, create, waitState, cleanup, eventually } from './instances_lib.mjs';

// GET /metrics from a chosen local address (the loopback takes any 127.x)
function scrapeFrom(port, localAddress, headers = {}) {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path: '/metrics', localAddress, headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { text += d; });
      res.on('end', () => resolve({ status: res.statusCode, text, type: res.headers['content-type'] }));
    });
    req.on('error', reject);
    req.end();
  });
}

const pem = (f) => readFileSync(f, 'utf8');

describe('/metrics', () => {
  let w, gina, body;
  before(async () => {
    w = await world({ node2: false, args: ['--metrics-allow=127.0.0.2', '--metrics-refresh-ms=200', '--gpu-sample-interval-s=1',
      `--discovery-image=${env.GPUCLOUD_WORLD_DISCOVERY_IMAGE}`] });
    gina = await mkUser(w, 'gina');
  });
  after(async () => { try { await stopClean(w?.srv); } finally { cleanup(w?.srv); } });

  it('renders the platform with traffic, passes promtool, and keeps labels bounded', async () => {
    const m = await w.admin.post('/api/v1/nodes', { name: 'measured2', url: env.GPUCLOUD_WORLD_DOCKER2_TLS,
      tls_ca: pem(env.GPUCLOUD_WORLD_TLS_CA), tls_cert: pem(env.GPUCLOUD_WORLD_TLS_CERT), tls_key: pem(env.GPUCLOUD_WORLD_TLS_KEY) });
    assert.equal(m.status, 201, m.text);
    // a pool of its 8 measured GPUs: the stand-in's mean utilisation is 352 / 8 = 44 %
    const found = await eventually(async () => { const x = (await w.admin.get(`/api/v1/nodes/${m.json.id}`)).json; return x.gpus.length === 8 && x; }, 20000, 250);
    assert.ok(found, 'measured2\'s GPUs were discovered');
    const mp = await w.admin.post('/api/v1/pools', { name: 'measured', sharing: 'exclusive' });
    assert.equal(mp.status, 201, mp.text);
    assert.equal((await w.admin.req('PUT', `/api/v1/pools/${mp.json.id}/gpus`, { gpu_ids: found.gpus.map((g) => g.id) })).status, 200);
    const i = await create(gina.c, w, { name: 'm1', pool: 'a100', slices: 1, cmd: ['sleep', '3600'] });
    await waitState(gina.c, i.id, 'running');
    // traffic: reads, a 404 on an id, unmatched paths
    for (let k = 0; k < 5; k++) assert.equal((await gina.c.get(`/api/v1/instances/${i.id}`)).status, 200);
    assert.equal((await gina.c.get('/api/v1/instances/999999')).status, 404);
    await call(w.srv.base, 'GET', '/api/v1/no/such/path/123456');
    await call(w.srv.base, 'GET', '/wp-admin/secret-scan-path');
    const ok = await eventually(async () => {
      const r = await scrapeFrom(w.srv.port, '127.0.0.2');
      body = r.text;
      return r.status === 200 && /^gpucloud_gpu_utilization_ratio\{node="measured2",gpu="7",/m.test(r.text)
        && /^gpucloud_instances\{state="running"\} 1$/m.test(r.text)
        && /^gpucloud_sched_wait_seconds_count\{pool="a100"\} 1$/m.test(r.text) && r;
    }, 20000, 250);
    assert.ok(ok, `the gauges did not show the world:\n${body}`);
    assert.match(ok.type, /^text\/plain; version=0\.0\.4/);
    const want = [
      /^gpucloud_http_requests_total\{route="\/api\/v1\/instances\/\{id\}",method="GET",status="200"\} \d+$/m,
      /^gpucloud_http_requests_total\{route="unmatched",method="GET",status="404"\} [1-9]/m,
      /^gpucloud_http_request_duration_seconds_bucket\{route="\/api\/v1\/instances\/\{id\}",le="\+Inf"\} /m,
      /^gpucloud_sched_queue_depth\{pool="a100"\} 0$/m,
      /^gpucloud_sched_allocated_requests\{pool="a100"\} 1$/m,
      /^gpucloud_sched_wait_seconds_count\{pool="a100"\} 1$/m,
      /^gpucloud_sched_wait_seconds_bucket\{pool="a100",le="\+Inf"\} 1$/m,
      /^gpucloud_pool_slices\{pool="a100"\} 4$/m,
      /^gpucloud_pool_slices_allocated\{pool="a100"\} 1$/m,
      /^gpucloud_pool_gpus_allocated_idle\{pool="a100"\} 0$/m,
      /^gpucloud_pool_gpu_utilization_ratio\{pool="measured"\} 0\.440$/m,
      /^gpucloud_node_up\{node="node1"\} 1$/m,
      /^gpucloud_node_up\{node="measured2"\} 1$/m,
      /^gpucloud_nodes\{health="up",state="active"\} 2$/m,
      /^gpucloud_node_gpus\{node="node1",kind="declared"\} 4$/m,
      /^gpucloud_node_gpus\{node="measured2",kind="measured"\} 8$/m,
      /^gpucloud_gpu_utilization_ratio\{node="measured2",gpu="0",uuid="GPU-41ab9259-0637-ac82-026c-a65266b28984"\} 0\.97$/m,
      /^gpucloud_gpu_memory_used_bytes\{node="measured2",gpu="0",uuid="GPU-41ab9259-0637-ac82-026c-a65266b28984"\} 64208502784$/m,
      /^gpucloud_jobs\{state="queued"\} 0$/m,
      /^gpucloud_image_pulls\{state="present"\} [1-9]/m,
      /^gpucloud_image_pull_progress_ratio /m,
      /^gpucloud_proxy_bytes_total \d+$/m,
      /^gpucloud_db_pool_connections\{state="up"\} [1-9]/m,
      /^gpucloud_worker_jobs \d+$/m,
    ];
    for (const re of want) assert.match(body, re);
    // bounded labels: no raw path, no id, no user or instance
    assert.doesNotMatch(body, /999999|123456|secret-scan|\/instances\/\d|instance="|user="|username="|gina/);
    // no declared GPU gets a utilisation
    assert.doesNotMatch(body, /gpucloud_gpu_utilization_ratio\{node="node1"/);
    const r = spawnSync('/usr/bin/promtool', ['check', 'metrics'], { input: body, encoding: 'utf8' });
    assert.equal(r.status, 0, `promtool: ${r.stdout}${r.stderr}`);
  });

  it('uses in the Grafana dashboard only series the server exports', () => {
    const dash = JSON.parse(readFileSync(join(ROOT, 'deploy/grafana-dashboard.json'), 'utf8'));
    const exprs = [];
    const walk = (o) => { if (Array.isArray(o)) o.forEach(walk); else if (o && typeof o === 'object') { if (typeof o.expr === 'string') exprs.push(o.expr); Object.values(o).forEach(walk); } };
    walk(dash);
    assert.ok(exprs.length >= 10, `only ${exprs.length} queries`);
    const names = new Set(exprs.flatMap((e) => e.match(/\bgpucloud_[a-z0-9_]+/g) || []));
    const have = new Set(body.split('\n').filter((l) => l && !l.startsWith('#')).map((l) => l.split(/[{ ]/)[0]));
    for (const n of names) assert.ok(have.has(n), `the dashboard queries ${n}, which /metrics does not export`);
    // and the scrape config is valid Prometheus configuration
    const c = spawnSync('/usr/bin/promtool', ['check', 'config', '--syntax-only', join(ROOT, 'deploy/prometheus.yml')], { encoding: 'utf8' });
    assert.equal(c.status, 0, `promtool check config: ${c.stdout}${c.stderr}`);
  });

  it('is served to the scrape address and to admin tokens only', async () => {
    const anon = await scrapeFrom(w.srv.port, '127.0.0.1');
    assert.equal(anon.status, 401, 'anonymous from another address');
    assert.equal(JSON.parse(anon.text).error.code !== undefined, true);
    // a forwarded-for header does not make a request the scraper's
    const spoof = await scrapeFrom(w.srv.port, '127.0.0.1', { 'x-forwarded-for': '127.0.0.2' });
    assert.equal(spoof.status, 401);
    const st = await gina.c.post('/api/v1/tokens', { name: 's', scopes: ['read'] });
    assert.equal(st.status, 201, st.text);
    assert.equal((await scrapeFrom(w.srv.port, '127.0.0.1', { authorization: `Bearer ${st.json.token}` })).status, 403);
    const at = await w.admin.post('/api/v1/tokens', { name: 'prom', scopes: ['read'] });
    const ok = await scrapeFrom(w.srv.port, '127.0.0.1', { authorization: `Bearer ${at.json.token}` });
    assert.equal(ok.status, 200);
    assert.match(ok.text, /^gpucloud_node_up\{node="node1"\} 1$/m);
    assert.equal((await scrapeFrom(w.srv.port, '127.0.0.2')).status, 200);
  });
});

describe('/readyz', () => {
  let srv, admin;
  before(async () => {
    srv = await startServer({ args: ['--node-check-interval=1', '--node-down-after=0'] });
    admin = new Client(srv.base);
    assert.equal((await admin.login('admin', ADMIN_PASSWORD)).status, 200);
  });
  after(async () => { await stopClean(srv); });

  it('needs the database and at least one reachable node, and says nothing more', async () => {
    let r = await call(srv.base, 'GET', '/readyz');
    assert.equal(r.status, 200, 'no node yet: ready, so the admin can add the first');
    assert.deepEqual(r.json, { status: 'ready', checks: { database: { status: 'ok' }, storage: { status: 'ok' }, nodes: { status: 'none' } } });
    // a node whose engine stops answering (its socket gone): none reachable
    const n1 = await admin.post('/api/v1/nodes', { name: 'node1', url: env.GPUCLOUD_WORLD_DOCKER1 });
    assert.equal(n1.status, 201, n1.text);
    assert.ok(await eventually(async () => (await call(srv.base, 'GET', '/readyz')).status === 200 &&
      (await call(srv.base, 'GET', '/readyz')).json.checks.nodes.status === 'ok', 10000, 200), 'one node up: ready');
    sql(srv, `UPDATE nodes SET url = 'unix:///nonexistent/docker.sock' WHERE id = ${n1.json.id}`);
    const down = await eventually(async () => (await call(srv.base, 'GET', '/readyz')).status === 503, 10000, 200);
    assert.ok(down, 'no node reachable: not ready');
    r = await call(srv.base, 'GET', '/readyz');
    assert.deepEqual(r.json, { status: 'not_ready', checks: { database: { status: 'ok' }, storage: { status: 'ok' }, nodes: { status: 'unavailable' } } });
    assert.doesNotMatch(r.text, /node1|nonexistent/);
    sql(srv, `UPDATE nodes SET url = '${env.GPUCLOUD_WORLD_DOCKER1}' WHERE id = ${n1.json.id}`);
    const up = await eventually(async () => (await call(srv.base, 'GET', '/readyz')).status === 200, 10000, 200);
    assert.ok(up, 'the node answers again: ready');
    r = await call(srv.base, 'GET', '/readyz');
    assert.equal(r.json.checks.nodes.status, 'ok');
  });
});
