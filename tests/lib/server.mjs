// server.mjs — starts a real gpucloudd for a test, on an ephemeral loopback
// port, against a fresh database in the test world's PostgreSQL.
//
//   const srv = await startServer();          // srv.base = 'http://127.0.0.1:PORT'
//   ...
//   await srv.stop();                         // SIGTERM, waits, drops the database
//
// Needs the world's env (deploy/world.sh writes var/world/env): GPUCLOUD_TEST_DB_URL.
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, existsSync, mkdirSync, openSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const BIN = process.env.GPUCLOUD_BIN || join(ROOT, 'build/gpucloudd');
export const ADMIN_PASSWORD = 'admin-test-password-1';

function dbUrlFor(name) {
  const base = process.env.GPUCLOUD_TEST_DB_URL;
  if (!base) throw new Error('GPUCLOUD_TEST_DB_URL is not set: run the tests through `make test` (it starts the world)');
  const u = new URL(base);
  u.pathname = '/' + name;
  return u.toString();
}

export function psql(url, sql) {
  return execFileSync('psql', ['-qAtX', '-v', 'ON_ERROR_STOP=1', url, '-c', sql], { encoding: 'utf8' }).trim();
}

export async function createDatabase() {
  const name = 'gct_' + randomBytes(6).toString('hex');
  psql(dbUrlFor('postgres'), `CREATE DATABASE ${name}`);
  return { name, url: dbUrlFor(name) };
}

export function dropDatabase(name) {
  try { psql(dbUrlFor('postgres'), `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`); } catch { /* world may be gone */ }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// opts.args: extra flags; opts.env: extra environment; opts.db: reuse a database {name,url}
export async function startServer(opts = {}) {
  const db = opts.db || await createDatabase();
  const dir = mkdtempSync(join(tmpdir(), 'gctest-'));
  const portFile = join(dir, 'port');
  const logDir = join(ROOT, 'var/test-logs');
  mkdirSync(logDir, { recursive: true });
  const logPath = join(logDir, `${db.name}-${Date.now()}.log`);
  const out = openSync(logPath, 'a');
  const args = [
    '--listen=127.0.0.1', '--port=0', `--port-file=${portFile}`,
    `--db-url=${db.url}`, `--web-root=${join(ROOT, 'web')}`,
    `--migrations-dir=${join(ROOT, 'db/migrations')}`, `--state-dir=${dir}`,
    // 127.0.0.1 may scrape /metrics (itest.mjs's metric()); tests override it
    '--log-level=info', '--metrics-allow=127.0.0.1', ...(opts.args || []),
  ];
  const proc = spawn(BIN, args, {
    env: { ...process.env, GPUCLOUD_ADMIN_PASSWORD: ADMIN_PASSWORD, ...(opts.env || {}) },
    stdio: ['ignore', out, out],
  });
  let exited = null;
  proc.on('exit', (code, sig) => { exited = { code, sig }; });
  for (let i = 0; i < 300 && !existsSync(portFile); i++) {
    if (exited) break;
    await sleep(50);
  }
  if (!existsSync(portFile)) {
    proc.kill('SIGKILL');
    throw new Error(`gpucloudd did not start (exit ${JSON.stringify(exited)}); log:\n${readFileSync(logPath, 'utf8').slice(-3000)}`);
  }
  let port = '';
  for (let i = 0; i < 100 && !port; i++) { port = readFileSync(portFile, 'utf8').trim(); if (!port) await sleep(20); }
  const srv = {
    proc, db, dir, logPath, port: Number(port),
    base: `http://127.0.0.1:${port}`,
    get exited() { return exited; },
    log: () => readFileSync(logPath, 'utf8'),
    async stop({ keepDb = false, signal = 'SIGTERM' } = {}) {
      if (!exited) {
        proc.kill(signal);
        for (let i = 0; i < 200 && !exited; i++) await sleep(50);
        if (!exited) proc.kill('SIGKILL');
        for (let i = 0; i < 40 && !exited; i++) await sleep(50);
      }
      if (!keepDb && !opts.db) dropDatabase(db.name);
      // a container of the test may still write into a bind-mounted folder
      rmSync(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 200 });
      return exited;
    },
  };
  return srv;
}

// A tiny cookie-aware client for the JSON API.
export class Client {
  constructor(base) { this.base = base; this.cookies = new Map(); this.csrf = null; this.token = null; }
  cookieHeader() { return [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; '); }
  async req(method, path, body, headers = {}) {
    const h = { ...headers };
    if (this.cookies.size) h.cookie = this.cookieHeader();
    if (this.csrf && method !== 'GET' && method !== 'HEAD' && !('x-csrf-token' in h)) h['x-csrf-token'] = this.csrf;
    if (this.token) h.authorization = `Bearer ${this.token}`;
    if (method !== 'GET' && !('origin' in h)) h.origin = this.base;
    let payload;
    if (body !== undefined) {
      if (typeof body === 'string' || body instanceof Uint8Array) payload = body;
      else { payload = JSON.stringify(body); h['content-type'] = h['content-type'] || 'application/json'; }
    }
    const res = await fetch(this.base + path, { method, headers: h, body: payload, redirect: 'manual' });
    for (const c of res.headers.getSetCookie()) {
      const [kv] = c.split(';');
      const i = kv.indexOf('=');
      const k = kv.slice(0, i), v = kv.slice(i + 1);
      if (v === '' || /max-age=0/i.test(c)) this.cookies.delete(k); else this.cookies.set(k, v);
    }
    const text = await res.text();
    let json = null;
    try { json = text ? JSON.parse(text) : null; } catch { /* not JSON */ }
    return { status: res.status, headers: res.headers, text, json };
  }
  get(p, h) { return this.req('GET', p, undefined, h); }
  post(p, b, h) { return this.req('POST', p, b, h); }
  patch(p, b, h) { return this.req('PATCH', p, b, h); }
  del(p, h) { return this.req('DELETE', p, undefined, h); }
  async login(username, password) {
    const r = await this.post('/api/v1/auth/login', { username, password });
    if (r.status === 200) this.csrf = r.json.csrf_token;
    return r;
  }
}
