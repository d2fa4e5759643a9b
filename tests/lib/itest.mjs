// itest.mjs — helpers for the integration tests: raw HTTP/1.1 over
// node:net (exact bytes in, exact framing out), the API error shape,
// Prometheus gauges, SQL against a test server's database, timing.
//
//   const c = await RawConn.open(srv.port);
//   c.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
//   const res = await c.response();          // {status, headers, body, ...}
//   assert.ok(await c.closedWithin(3000));
import net from 'node:net';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { psql } from './server.mjs';

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export function sha256hex(s) {
  return createHash('sha256').update(s).digest('hex');
}

// Runs SQL in the test server's own database; returns psql's unaligned output.
export function sql(srv, text) {
  return psql(srv.db.url, text);
}

// A raw client connection that collects every byte the server sends and
// parses responses on demand, so tests see framing exactly as sent.
export class RawConn {
  constructor(sock) {
    this.sock = sock;
    this.buf = Buffer.alloc(0);
    this.closed = false;
    this.error = null;
    this.closedAt = null;
    this.waiters = [];
    sock.on('data', (d) => { this.buf = Buffer.concat([this.buf, d]); this.wake(); });
    sock.on('error', (e) => { this.error = e; });
    sock.on('close', () => { this.closed = true; this.closedAt = Date.now(); this.wake(); });
  }

  static open(port, host = '127.0.0.1') {
    return new Promise((resolve, reject) => {
      const sock = net.connect({ port, host });
      sock.setNoDelay(true);
      const onErr = (e) => reject(e);
      sock.once('error', onErr);
      sock.once('connect', () => { sock.off('error', onErr); resolve(new RawConn(sock)); });
    });
  }

  wake() {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  // Resolves on the next data or close event, or after ms.
  waitEvent(ms) {
    return new Promise((resolve) => {
      const t = setTimeout(() => { this.waiters = this.waiters.filter((f) => f !== done); resolve(false); }, ms);
      const done = () => { clearTimeout(t); resolve(true); };
      this.waiters.push(done);
    });
  }

  write(data) {
    if (!this.closed && !this.sock.destroyed) this.sock.write(data);
  }

  // Writes data a few bytes at a time, gapMs apart.
  async trickle(data, { step = 1, gapMs = 50 } = {}) {
    const b = Buffer.isBuffer(data) ? data : Buffer.from(data);
    for (let i = 0; i < b.length && !this.closed; i += step) {
      this.write(b.subarray(i, i + step));
      await sleep(gapMs);
    }
  }

  end() { this.sock.end(); }
  destroy() { this.sock.destroy(); }

  // true when the server closed the connection within ms.
  async closedWithin(ms) {
    const deadline = Date.now() + ms;
    while (!this.closed && Date.now() < deadline) await this.waitEvent(deadline - Date.now());
    return this.closed;
  }

  // Parses one response from the buffered bytes, waiting up to timeout ms
  // for them. opts.head: the request was HEAD (no body whatever the headers
  // say). Rejects when the connection closes before a whole response.
  async response({ head = false, timeout = 5000 } = {}) {
    const deadline = Date.now() + timeout;
    for (;;) {
      const r = parseResponse(this.buf, { head, eof: this.closed });
      if (r) {
        this.buf = this.buf.subarray(r.consumed);
        return r;
      }
      if (this.closed) throw new Error(`connection closed before a complete response; got ${JSON.stringify(this.buf.toString('latin1').slice(0, 300))}`);
      if (Date.now() >= deadline) throw new Error(`no complete response within ${timeout} ms; got ${JSON.stringify(this.buf.toString('latin1').slice(0, 300))}`);
      await this.waitEvent(deadline - Date.now());
    }
  }
}

// Parses one HTTP/1.1 response at the start of buf. Returns null when more
// bytes are needed. headers: lower-case name → value (repeats joined with
// ', ', except set-cookie which is an array).
export function parseResponse(buf, { head = false, eof = false } = {}) {
  const end = buf.indexOf('\r\n\r\n');
  if (end < 0) return null;
  const headText = buf.subarray(0, end).toString('latin1');
  const lines = headText.split('\r\n');
  const m = /^HTTP\/(\d\.\d) (\d{3}) ?(.*)$/.exec(lines[0]);
  if (!m) throw new Error(`malformed status line ${JSON.stringify(lines[0])}`);
  const status = Number(m[2]);
  const headers = {};
  const setCookie = [];
  for (const l of lines.slice(1)) {
    const i = l.indexOf(':');
    if (i <= 0) throw new Error(`malformed header line ${JSON.stringify(l)}`);
    const k = l.slice(0, i).trim().toLowerCase(), v = l.slice(i + 1).trim();
    if (k === 'set-cookie') setCookie.push(v);
    headers[k] = k in headers ? `${headers[k]}, ${v}` : v;
  }
  headers['set-cookie'] = setCookie;
  let off = end + 4;
  let body = Buffer.alloc(0);
  const noBody = head || status === 204 || status === 304 || (status >= 100 && status < 200);
  if (!noBody) {
    if (/chunked/i.test(headers['transfer-encoding'] || '')) {
      const parts = [];
      for (;;) {
        const le = buf.indexOf('\r\n', off);
        if (le < 0) return null;
        const size = parseInt(buf.subarray(off, le).toString('latin1'), 16);
        if (Number.isNaN(size)) throw new Error('malformed chunk size');
        if (buf.length < le + 2 + size + 2) return null;
        parts.push(buf.subarray(le + 2, le + 2 + size));
        off = le + 2 + size + 2;
        if (size === 0) break;
      }
      body = Buffer.concat(parts);
    } else if (headers['content-length'] !== undefined) {
      const n = Number(headers['content-length']);
      if (buf.length < off + n) return null;
      body = buf.subarray(off, off + n);
      off += n;
    } else {
      if (!eof) return null; // read until close
      body = buf.subarray(off);
      off = buf.length;
    }
  }
  let json = null;
  try { json = JSON.parse(body.toString('utf8')); } catch { /* not JSON */ }
  return { version: m[1], status, reason: m[3], headers, head: headText, body, text: body.toString('utf8'), json, consumed: off };
}

// One request on a fresh connection; returns the first response and the
// connection (closed or not). data: the exact request bytes.
export async function rawOnce(port, data, opts = {}) {
  const c = await RawConn.open(port);
  c.write(data);
  try {
    const res = await c.response(opts);
    return { res, conn: c };
  } catch (e) {
    c.destroy();
    throw e;
  }
}

// Asserts the API error shape {"error":{"code","message","hint"?}}.
export function assertErrorShape(json, code) {
  assert.ok(json && typeof json === 'object', `expected a JSON error body, got ${JSON.stringify(json)}`);
  assert.ok(json.error && typeof json.error === 'object', `expected {"error":{...}}, got ${JSON.stringify(json)}`);
  assert.equal(typeof json.error.code, 'string');
  assert.ok(json.error.code.length > 0);
  assert.equal(typeof json.error.message, 'string');
  assert.ok(json.error.message.length > 0, 'error message is empty');
  if ('hint' in json.error) assert.equal(typeof json.error.hint, 'string');
  if (code !== undefined) assert.equal(json.error.code, code, `error code: ${JSON.stringify(json.error)}`);
}

// The value of an unlabelled Prometheus sample, read over a fresh
// connection that closes afterwards (so the reading itself counts as one
// open connection).
export async function metric(srv, name) {
  const { res } = await rawOnce(srv.port, 'GET /metrics HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n');
  assert.equal(res.status, 200);
  const m = new RegExp(`^${name} (\\S+)$`, 'm').exec(res.text);
  assert.ok(m, `metric ${name} missing`);
  return Number(m[1]);
}

// Polls fn until it returns truthy or ms pass; returns the last value.
export async function eventually(fn, ms = 5000, every = 100) {
  const deadline = Date.now() + ms;
  let v;
  for (;;) {
    v = await fn();
    if (v || Date.now() >= deadline) return v;
    await sleep(every);
  }
}

// The server process still runs and /healthz answers.
export async function assertAlive(srv) {
  assert.equal(srv.exited, null, `gpucloudd exited: ${JSON.stringify(srv.exited)}\n${srv.log().slice(-2000)}`);
  const { res } = await rawOnce(srv.port, 'GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n');
  assert.equal(res.status, 200);
}

// fetch with a deadline: rejects instead of hanging.
export async function fetchWithin(url, init = {}, ms = 5000) {
  return fetch(url, { ...init, signal: AbortSignal.timeout(ms) });
}

// One API request with exactly the credentials given (nothing implied: no
// Origin, no CSRF token unless passed). Returns {status, headers, text, json}.
export async function call(base, method, path, { cookie, csrf, origin, referer, bearer, body, ctype, headers } = {}) {
  const h = { ...(headers || {}) };
  if (cookie) h.cookie = cookie;
  if (csrf) h['x-csrf-token'] = csrf;
  if (origin) h.origin = origin;
  if (referer) h.referer = referer;
  if (bearer) h.authorization = `Bearer ${bearer}`;
  let payload;
  if (body !== undefined) {
    payload = typeof body === 'string' || body instanceof Uint8Array ? body : JSON.stringify(body);
    h['content-type'] = ctype || 'application/json';
  }
  const res = await fetch(base + path, { method, headers: h, body: payload, redirect: 'manual', signal: AbortSignal.timeout(20000) });
  const text = await res.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch { /* not JSON */ }
  return { status: res.status, headers: res.headers, text, json };
}

// Stops a test server and asserts it went cleanly: exit status 0 on
// SIGTERM, and no sanitizer report in its log (for SANITIZER= builds).
export async function stopClean(srv) {
  if (!srv) return;
  const ex = await srv.stop();
  const log = srv.log();
  const report = /ERROR: (Address|Leak|Thread|Memory)Sanitizer|runtime error:/.exec(log);
  assert.ok(!report, `sanitizer report in ${srv.logPath}:\n${report ? log.slice(Math.max(0, report.index - 200), report.index + 3000) : ''}`);
  assert.deepEqual(ex, { code: 0, sig: null }, `gpucloudd did not exit cleanly; log ${srv.logPath}:\n${log.slice(-1500)}`);
}
