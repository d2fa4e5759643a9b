// benchlib.mjs — what the Node.js halves of the benchmarks share: an API
// client with a session, one Engine API call over a unix socket, the raw
// create+start a baseline makes, the create body of a container gpucloudd
// made (so a raw side starts the very same container), clean-up of both
// sides' containers, and the world set-up (both engines as nodes with their
// declared GPUs, the registry, a catalog image, a shared pool).
import { execFileSync } from 'node:child_process';
import { closeSync, openSync, readSync } from 'node:fs';
import http from 'node:http';

export const E = process.env;
export const BASE = E.BENCH_BASE;
export const ENGINES = [E.GPUCLOUD_WORLD_DOCKER1, E.GPUCLOUD_WORLD_DOCKER2];
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export const sock = (url) => url.replace(/^unix:\/\//, '');
export const psql = (sql) =>
  execFileSync('psql', ['-qAtX', '-v', 'ON_ERROR_STOP=1', E.BENCH_DB_URL, '-c', sql], { encoding: 'utf8' }).trim();
export const p50 = (a) => { const s = [...a].sort((x, y) => x - y); return s[Math.floor((s.length - 1) / 2)]; };
export const pct = (a, q) => { const s = [...a].sort((x, y) => x - y); return s[Math.min(s.length - 1, Math.floor(q * s.length))]; };

// The BENCH line of benchmark `bench` (ratio ours/baseline; goal gives the
// direction).
export function benchLine(bench, metric, value, baseline, goal) {
  const ratio = Number(baseline) ? (Number(value) / Number(baseline)).toFixed(2) : 'n/a';
  console.log(`BENCH ${bench} ${metric}=${value} baseline=${baseline} ratio=${ratio} goal=${goal}`);
}

export class Client {
  constructor() { this.cookie = ''; this.csrf = ''; }
  async req(method, path, body, headers = {}) {
    const h = { origin: BASE, ...headers };
    if (this.cookie) h.cookie = this.cookie;
    if (this.csrf && method !== 'GET') h['x-csrf-token'] = this.csrf;
    if (body !== undefined) h['content-type'] = 'application/json';
    const r = await fetch(BASE + path, { method, headers: h, body: body === undefined ? undefined : JSON.stringify(body) });
    for (const c of r.headers.getSetCookie()) if (c.startsWith('gc_session=')) this.cookie = c.split(';')[0];
    const text = await r.text();
    let json = null;
    try { json = JSON.parse(text); } catch { /* */ }
    return { status: r.status, json, text };
  }
  async login(u, p) {
    const r = await this.req('POST', '/api/v1/auth/login', { username: u, password: p });
    if (r.status !== 200) throw new Error(`login ${u}: ${r.status} ${r.text}`);
    this.csrf = r.json.csrf_token;
  }
}

export function must(r, status, what) {
  if (r.status !== status) throw new Error(`${what}: ${r.status} ${r.text}`);
  return r.json;
}

// One Engine API call over a unix socket; resolves to {status, body}.
export function engine(url, method, path, body) {
  return new Promise((resolve, reject) => {
    const data = body ? JSON.stringify(body) : undefined;
    const req = http.request({ socketPath: sock(url), method, path: `/v1.41${path}`, headers: data ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) } : {} }, (res) => {
      let b = '';
      res.on('data', (d) => { b += d; });
      res.on('end', () => resolve({ status: res.statusCode, body: b }));
    });
    req.on('error', reject);
    if (data) req.write(data);
    req.end();
  });
}

// create + start with one curl, back to back on one connection as gpucloudd
// sends them (two curl processes would leave the engine an unmeasured pause
// between the calls that no client has); the sum of curl's own time_total of
// the two transfers (seconds).
export function rawCurl(url, name, spec) {
  const one = (path, body) => ['-sS', '-o', '/dev/null', '-w', '%{time_total}\n', '--unix-socket', sock(url), '-X', 'POST',
    ...(body ? ['-H', 'Content-Type: application/json', '-H', 'Expect:', '--data', JSON.stringify(body)] : []), `http://docker/v1.41${path}`];
  const out = execFileSync('curl', [...one(`/containers/create?name=${name}`, spec), '--next', ...one(`/containers/${name}/start`)], { encoding: 'utf8' });
  const t = out.trim().split('\n').map(Number);
  if (t.length !== 2 || t.some((x) => !(x > 0))) throw new Error(`raw create+start: ${out}`);
  return t[0] + t[1];
}

// The create body of a container as gpucloudd made it (same image, command,
// user, environment, mounts, devices, limits, published ports), read back
// from the engine, labelled `gpucloud.bench=tag` instead of ours.
export async function sameSpec(url, name, tag) {
  const ci = JSON.parse((await engine(url, 'GET', `/containers/${name}/json`)).body);
  const c = ci.Config;
  return { Image: c.Image, Cmd: c.Cmd, Env: c.Env, User: c.User, WorkingDir: c.WorkingDir, ExposedPorts: c.ExposedPorts, Labels: { 'gpucloud.bench': tag }, HostConfig: ci.HostConfig };
}

// Removes every container on both engines with the label (k=v).
export function rmLabelled(label) {
  for (const url of ENGINES) {
    const ids = execFileSync('docker', ['-H', url, 'ps', '-aq', '--filter', `label=${label}`], { encoding: 'utf8' }).trim();
    if (ids) execFileSync('docker', ['-H', url, 'rm', '-f', ...ids.split('\n')], { stdio: 'ignore' });
  }
}

// Registers both engines as nodes (their declared GPUs), waits until they
// are up, adds the world's registry, `image` (a reference of it) to the
// catalog, and a shared pool `lab` over node1's GPUs (8 slots each) that
// students may use whole.  Returns {admin, nodes, img, lab}.
export async function setupWorld(image, defaultCmd) {
  const admin = new Client();
  await admin.login('admin', E.BENCH_ADMIN_PASSWORD);
  const decl = (list) => list.split(',').map((d) => ({ model: 'NVIDIA A100-SXM4-80GB', memory_mib: 81920, devices: [d] }));
  const nodes = [];
  for (const [i, url] of ENGINES.entries())
    nodes.push(must(await admin.req('POST', '/api/v1/nodes', { name: `node${i + 1}`, url, gpus: decl(E[`GPUCLOUD_WORLD_NODE${i + 1}_GPUS`]) }), 201, 'node'));
  for (;;) {
    const st = await Promise.all(nodes.map((n) => admin.req('GET', `/api/v1/nodes/${n.id}`)));
    if (st.every((r) => r.json.state === 'up')) break;
    await sleep(100);
  }
  const reg = must(await admin.req('POST', '/api/v1/registries', { name: 'world', server: E.GPUCLOUD_WORLD_REGISTRY, username: E.GPUCLOUD_WORLD_REGISTRY_USER, password: E.GPUCLOUD_WORLD_REGISTRY_KEY }), 201, 'registry');
  const img = must(await admin.req('POST', '/api/v1/images', { reference: image, registry_id: reg.id, display_name: 'bench', default_cmd: defaultCmd }), 201, 'image');
  const lab = must(await admin.req('POST', '/api/v1/pools', { name: 'lab', sharing: 'shared', slots_per_gpu: 8, memory_per_slot_mib: 1024 }), 201, 'pool');
  must(await admin.req('PUT', `/api/v1/pools/${lab.id}/gpus`, { gpu_ids: nodes[0].gpus.map((g) => g.id) }), 200, 'pool gpus');
  // quotas deny by default: students may use the whole pool
  must(await admin.req('PUT', '/api/v1/quotas/defaults', { role: 'student', pool: 'lab' }), 200, 'quota default');
  return { admin, nodes, img, lab };
}

// Follows gpucloudd's log file: next(re, bad, ms) waits for a line matching
// re (returns the match) and throws on one matching bad.  Reads only what
// the log gained since the last look: waiting costs gpucloudd and
// PostgreSQL nothing (polling the API every few ms would put both to work on
// this 2-core machine while the engine starts the container, which a raw
// side never pays).
export class LogWaiter {
  constructor(path) { this.fd = openSync(path, 'r'); this.off = 0; this.text = ''; this.buf = Buffer.alloc(1 << 16); }
  async next(re, bad, ms, what) {
    const end = Date.now() + ms;
    for (;;) {
      let n;
      while ((n = readSync(this.fd, this.buf, 0, this.buf.length, this.off)) > 0) { this.off += n; this.text += this.buf.toString('utf8', 0, n); }
      const m = re.exec(this.text);
      if (m) { this.text = this.text.slice(m.index + m[0].length); return m; }
      if (bad && bad.test(this.text)) throw new Error(`${what}: ${this.text.slice(-500)}`);
      if (Date.now() > end) throw new Error(`${what}: not within ${ms} ms`);
      await sleep(5);
    }
  }
  close() { closeSync(this.fd); }
}
