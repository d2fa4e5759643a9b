// tls.test.mjs — gpucloudd speaking TLS (bufferevent_openssl): handshake,
// the API over HTTPS, and the session cookie hardened for TLS
// (__Host- prefix, Secure).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import https from 'node:https';
import net from 'node:net';
import { startServer, ADMIN_PASSWORD } from '../lib/server.mjs';

let srv, dir, ca;

function request(method, path, { body, headers = {} } = {}) {
  return new Promise((resolve, reject) => {
    const req = https.request({
      host: '127.0.0.1', port: srv.port, method, path, ca, servername: 'localhost',
      headers: { ...headers, ...(body ? { 'content-type': 'application/json' } : {}) },
    }, (res) => {
      let data = '';
      res.on('data', (c) => { data += c; });
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, text: data }));
    });
    req.on('error', reject);
    if (body) req.write(JSON.stringify(body));
    req.end();
  });
}

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'gctls-'));
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256',
    '-nodes', '-days', '2', '-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1',
    '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem')], { stdio: 'ignore' });
  ca = readFileSync(join(dir, 'cert.pem'));
  srv = await startServer({ args: [`--tls-cert=${join(dir, 'cert.pem')}`, `--tls-key=${join(dir, 'key.pem')}`] });
});

after(async () => { await srv?.stop(); });

test('health over TLS with a verified certificate', async () => {
  const r = await request('GET', '/healthz');
  assert.equal(r.status, 200);
  assert.deepEqual(JSON.parse(r.text), { status: 'ok' });
});

test('login over TLS sets a __Host- Secure HttpOnly cookie that authenticates', async () => {
  const r = await request('POST', '/api/v1/auth/login', { body: { username: 'admin', password: ADMIN_PASSWORD } });
  assert.equal(r.status, 200);
  const cookie = r.headers['set-cookie'][0];
  assert.match(cookie, /^__Host-gc_session=[A-Za-z0-9_-]{43};/);
  assert.match(cookie, /; Secure/);
  assert.match(cookie, /; HttpOnly/);
  assert.match(cookie, /; Path=\//);
  const me = await request('GET', '/api/v1/me', { headers: { cookie: cookie.split(';')[0] } });
  assert.equal(me.status, 200);
  assert.equal(JSON.parse(me.text).user.username, 'admin');
  // the plain-HTTP cookie name is not accepted under TLS
  const plain = await request('GET', '/api/v1/me', { headers: { cookie: cookie.split(';')[0].replace('__Host-', '') } });
  assert.equal(plain.status, 401);
});

test('plain HTTP to the TLS port gets no HTTP answer and the server stays up', async () => {
  const reply = await new Promise((resolve) => {
    const s = net.connect(srv.port, '127.0.0.1', () => s.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n'));
    let got = '';
    s.on('data', (d) => { got += d.toString('latin1'); });
    s.on('close', () => resolve(got));
    s.on('error', () => resolve(got));
    setTimeout(() => s.destroy(), 3000);
  });
  assert.doesNotMatch(reply, /^HTTP\/1\.1 200/);
  const r = await request('GET', '/healthz');
  assert.equal(r.status, 200);
});

// TLS 1.2 offers only AEAD suites with forward secrecy: the CBC suites
// (LUCKY13) and static key exchange are refused, ECDHE-GCM/ChaCha20 work.
function handshake(args) {
  try {
    execFileSync('openssl', ['s_client', '-connect', `127.0.0.1:${srv.port}`, '-servername', 'localhost', ...args],
      { input: '', stdio: ['pipe', 'pipe', 'pipe'], timeout: 10000 });
    return true;
  } catch { return false; }
}

test('TLS 1.2 refuses CBC and non-forward-secret suites, accepts ECDHE with GCM or ChaCha20', () => {
  for (const c of ['ECDHE-ECDSA-AES128-SHA', 'ECDHE-ECDSA-AES256-SHA384', 'ECDHE-ECDSA-AES128-SHA256', 'AES128-SHA', 'AES128-GCM-SHA256'])
    assert.equal(handshake(['-tls1_2', '-cipher', c]), false, `${c} must be refused`);
  for (const c of ['ECDHE-ECDSA-AES128-GCM-SHA256', 'ECDHE-ECDSA-AES256-GCM-SHA384', 'ECDHE-ECDSA-CHACHA20-POLY1305'])
    assert.equal(handshake(['-tls1_2', '-cipher', c]), true, `${c} must be accepted`);
  assert.equal(handshake(['-tls1_3']), true, 'TLS 1.3 with its defaults');
});

test('responses under TLS carry Strict-Transport-Security', async () => {
  for (const p of ['/healthz', '/api/v1/me', '/no-such-page']) {
    const r = await request('GET', p);
    assert.match(r.headers['strict-transport-security'] || '', /^max-age=\d{7,}/, p);
  }
});
