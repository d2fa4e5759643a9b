// The HTTP/1.1 connection layer over raw sockets: keep-alive, pipelining,
// chunked and slow bodies, phase timeouts, limits (431/414/413), malformed
// requests, HTTP/1.0, Connection: close, HEAD, Expect: 100-continue,
// 1,000 concurrent connections while /healthz keeps answering, idle
// timeouts, and bounded memory for a client that pipelines without reading.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import net from 'node:net';
import { startServer, Client, ADMIN_PASSWORD } from '../lib/server.mjs';
import {
  RawConn, rawOnce, parseResponse, assertErrorShape, assertAlive, metric, sleep, eventually, stopClean,
} from '../lib/itest.mjs';

const H = 'Host: test\r\n';
const get = (path, extra = '') => `GET ${path} HTTP/1.1\r\n${H}${extra}\r\n`;
const head = (path, extra = '') => `HEAD ${path} HTTP/1.1\r\n${H}${extra}\r\n`;
const post = (path, body, extra = '') =>
  `POST ${path} HTTP/1.1\r\n${H}Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n${extra}\r\n${body}`;
const LOGIN = '/api/v1/auth/login';
const GOOD_LOGIN = JSON.stringify({ username: 'admin', password: ADMIN_PASSWORD });

function chunked(parts) {
  return parts.map((p) => `${Buffer.byteLength(p).toString(16)}\r\n${p}\r\n`).join('') + '0\r\n\r\n';
}

describe('HTTP connection layer', () => {
  let srv;

  before(async () => {
    srv = await startServer({ args: ['--header-timeout=2', '--body-timeout=2'] });
  });
  // a clean exit on SIGTERM means nothing was left in a bad state
  after(async () => { await stopClean(srv); });

  it('keeps one connection alive for 100 sequential requests', async () => {
    const before = await metric(srv, 'gpucloud_http_connections_total');
    const c = await RawConn.open(srv.port);
    const ids = new Set();
    for (let i = 0; i < 100; i++) {
      c.write(get(i % 2 ? '/healthz' : '/readyz'));
      const res = await c.response();
      assert.equal(res.status, 200);
      assert.equal(res.headers.connection, undefined, 'an HTTP/1.1 keep-alive response needs no Connection header');
      ids.add(res.headers['x-request-id']);
      assert.equal(c.closed, false);
    }
    assert.equal(ids.size, 100, 'every response has its own X-Request-Id');
    c.destroy();
    const after = await metric(srv, 'gpucloud_http_connections_total');
    // our connection and the second metrics reading: nothing else was opened
    assert.equal(after - before, 2);
  });

  it('answers a later asynchronous request on a reused connection (static file, pause, then login)', async () => {
    // a reply that comes from a worker/database completion, not from the
    // read callback, must still reach a connection that served before
    const c = await RawConn.open(srv.port);
    c.write(get('/favicon.svg'));
    const first = await c.response();
    assert.equal(first.status, 200);
    await sleep(300);
    const body = JSON.stringify({ username: 'admin', password: 'not-the-password' });
    c.write(`POST /api/v1/auth/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`);
    await sleep(50);
    c.write(body);
    const second = await c.response();
    assert.equal(second.status, 401);
    assert.equal(c.closed, false);
    c.destroy();
  });

  it('answers pipelined requests in order with correct framing', async () => {
    const c = await RawConn.open(srv.port);
    const badBody = '{"username":1,"password":"x"}';
    c.write(
      get('/healthz') +
      get('/readyz') +
      head('/healthz') +
      post(LOGIN, badBody) +
      `POST ${LOGIN} HTTP/1.1\r\n${H}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n` +
        chunked(['{"user', 'name":', '2}']) +
      get('/metrics') +
      get('/api/v1/openapi.yaml') +
      get('/healthz', 'Connection: close\r\n') +
      get('/readyz'), // after Connection: close: must not be answered
    );
    const r1 = await c.response();
    assert.equal(r1.status, 200);
    assert.deepEqual(r1.json, { status: 'ok' });
    const r2 = await c.response();
    assert.equal(r2.status, 200);
    assert.equal(r2.json.status, 'ready');
    const r3 = await c.response({ head: true });
    assert.equal(r3.status, 200);
    assert.equal(r3.headers['content-length'], String(Buffer.byteLength('{"status":"ok"}')));
    const r4 = await c.response();
    assert.equal(r4.status, 400);
    assertErrorShape(r4.json, 'invalid');
    assert.match(r4.json.error.message, /username/);
    const r5 = await c.response();
    assert.equal(r5.status, 400);
    assertErrorShape(r5.json, 'invalid');
    const r6 = await c.response();
    assert.equal(r6.status, 200);
    assert.match(r6.text, /^# HELP /);
    const r7 = await c.response();
    assert.ok(r7.status === 200 || r7.status === 404, `openapi.yaml: ${r7.status}`);
    const r8 = await c.response();
    assert.equal(r8.status, 200);
    assert.equal(r8.headers.connection, 'close');
    assert.ok(await c.closedWithin(2000), 'the connection closes after Connection: close');
    assert.equal(c.buf.length, 0, `bytes after the last response: ${c.buf.toString('latin1').slice(0, 200)}`);
    const ids = [r1, r2, r3, r4, r5, r6, r7, r8].map((r) => r.headers['x-request-id']);
    assert.equal(new Set(ids).size, ids.length);
  });

  it('answers 60 requests pipelined in one write, in order', async () => {
    const c = await RawConn.open(srv.port);
    const paths = [];
    for (let i = 0; i < 60; i++) paths.push(['/healthz', '/readyz', '/metrics'][i % 3]);
    c.write(paths.map((p) => get(p)).join(''));
    for (const p of paths) {
      const res = await c.response();
      assert.equal(res.status, 200);
      if (p === '/healthz') assert.deepEqual(res.json, { status: 'ok' });
      else if (p === '/readyz') assert.equal(res.json.status, 'ready');
      else assert.match(res.text, /gpucloud_http_connections_open/);
    }
    assert.equal(c.closed, false);
    c.destroy();
  });

  it('accepts a chunked request body (login)', async () => {
    const parts = [GOOD_LOGIN.slice(0, 5), GOOD_LOGIN.slice(5, 6), GOOD_LOGIN.slice(6, 30), GOOD_LOGIN.slice(30)];
    // one chunk carries an extension, which must be ignored
    const body = `${parts[0].length.toString(16)};ext=1\r\n${parts[0]}\r\n` + chunked(parts.slice(1));
    const { res, conn } = await rawOnce(srv.port,
      `POST ${LOGIN} HTTP/1.1\r\n${H}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n${body}`,
      { timeout: 10000 });
    conn.destroy();
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.user.username, 'admin');
    assert.equal(typeof res.json.csrf_token, 'string');
    assert.ok(res.headers['set-cookie'].some((c) => c.startsWith('gc_session=')));
  });

  it('accepts a body trickled over about 3 seconds', async () => {
    const c = await RawConn.open(srv.port);
    const t0 = Date.now();
    c.write(`POST ${LOGIN} HTTP/1.1\r\n${H}Content-Type: application/json\r\nContent-Length: ${GOOD_LOGIN.length}\r\n\r\n`);
    // each gap is well under the 2 s body timeout; the whole body takes longer
    await c.trickle(GOOD_LOGIN, { step: 1, gapMs: Math.ceil(3000 / GOOD_LOGIN.length) });
    const res = await c.response({ timeout: 10000 });
    assert.ok(Date.now() - t0 >= 2900);
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.user.username, 'admin');
    c.destroy();
  });

  it('times out a client that sends headers and then stalls the body (408, closed)', async () => {
    const c = await RawConn.open(srv.port);
    const t0 = Date.now();
    c.write(`POST ${LOGIN} HTTP/1.1\r\n${H}Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"user`);
    const res = await c.response({ timeout: 6000 });
    const dt = Date.now() - t0;
    assert.equal(res.status, 408);
    assertErrorShape(res.json, 'request_timeout');
    assert.equal(res.headers.connection, 'close');
    assert.ok(await c.closedWithin(1000));
    assert.ok(dt >= 1500 && dt <= 4500, `timed out after ${dt} ms (body_timeout=2)`);
  });

  it('closes a partial header section within the header timeout', async () => {
    const c = await RawConn.open(srv.port);
    const t0 = Date.now();
    c.write(`GET /healthz HTTP/1.1\r\n${H}X-Partial: yes\r\n`);
    assert.ok(await c.closedWithin(5000), 'stalled header section must be closed');
    const dt = c.closedAt - t0;
    assert.ok(dt >= 1500 && dt <= 4500, `closed after ${dt} ms (header_timeout=2)`);
    if (c.buf.length) {
      const res = parseResponse(c.buf, { eof: true });
      assert.equal(res.status, 408);
    }
  });

  it('closes a header section trickled byte by byte at the header deadline (slowloris)', async () => {
    const c = await RawConn.open(srv.port);
    const t0 = Date.now();
    // a byte every 250 ms never leaves the socket silent for 2 s, but the
    // header deadline is absolute
    const trickle = c.trickle(`GET /healthz HTTP/1.1\r\n${H}X-Slow: ${'a'.repeat(200)}`, { step: 1, gapMs: 250 });
    assert.ok(await c.closedWithin(6000), 'the server must close a header section that never ends');
    const dt = c.closedAt - t0;
    assert.ok(dt <= 4500, `closed after ${dt} ms (header_timeout=2)`);
    await trickle;
  });

  it('frees timed-out connections (gpucloud_http_connections_open goes back down)', async () => {
    const base = await metric(srv, 'gpucloud_http_connections_open');
    const conns = [];
    for (let i = 0; i < 5; i++) {
      const a = await RawConn.open(srv.port);
      a.write('GET /healthz HTTP/1.1\r\nHost: t\r\n'); // headers never end
      const b = await RawConn.open(srv.port);
      b.write(`POST ${LOGIN} HTTP/1.1\r\n${H}Content-Type: application/json\r\nContent-Length: 50\r\n\r\n{`);
      conns.push(a, b);
    }
    await sleep(200);
    const during = await metric(srv, 'gpucloud_http_connections_open');
    assert.ok(during >= base + 10, `open during the stall: ${during}, before: ${base}`);
    for (const c of conns) assert.ok(await c.closedWithin(5000), 'stalled connection not closed by the server');
    const afterwards = await eventually(async () => {
      const v = await metric(srv, 'gpucloud_http_connections_open');
      return v <= base ? v : false;
    }, 3000);
    assert.ok(afterwards !== false, 'connections_open did not return to its earlier value');
  });

  it('refuses a header field over the size limit with 431', async () => {
    const { res, conn } = await rawOnce(srv.port, get('/healthz', `X-Big: ${'a'.repeat(20000)}\r\n`));
    assert.equal(res.status, 431);
    assertErrorShape(res.json, 'headers_too_large');
    assert.ok(await conn.closedWithin(2000));
  });

  it('refuses many small headers that add up past the size limit with 431', async () => {
    let extra = '';
    for (let i = 0; i < 60; i++) extra += `X-H${i}: ${'b'.repeat(300)}\r\n`;
    const { res, conn } = await rawOnce(srv.port, get('/healthz', extra));
    assert.equal(res.status, 431);
    assertErrorShape(res.json, 'headers_too_large');
    assert.ok(await conn.closedWithin(2000));
  });

  it('refuses more than 100 header fields with 431 and accepts 90', async () => {
    let many = '', fine = '';
    for (let i = 0; i < 101; i++) many += `X-N${i}: v\r\n`;
    for (let i = 0; i < 89; i++) fine += `X-N${i}: v\r\n`; // + Host = 90
    const { res, conn } = await rawOnce(srv.port, get('/healthz', many));
    assert.equal(res.status, 431);
    assertErrorShape(res.json, 'headers_too_large');
    assert.ok(await conn.closedWithin(2000));
    const ok = await rawOnce(srv.port, get('/healthz', fine));
    assert.equal(ok.res.status, 200);
    ok.conn.destroy();
  });

  it('refuses a request target over 8 KiB with 414 and accepts one just under', async () => {
    const { res, conn } = await rawOnce(srv.port, get('/healthz?' + 'q'.repeat(9000)));
    assert.equal(res.status, 414);
    assertErrorShape(res.json, 'uri_too_long');
    assert.ok(await conn.closedWithin(2000));
    const ok = await rawOnce(srv.port, get('/healthz?' + 'q'.repeat(8000)));
    assert.equal(ok.res.status, 200);
    ok.conn.destroy();
  });

  it('refuses an announced body over the route limit with 413 before reading it', async () => {
    const c = await RawConn.open(srv.port);
    c.write(`POST ${LOGIN} HTTP/1.1\r\n${H}Content-Type: application/json\r\nContent-Length: 9000\r\n\r\n`);
    const res = await c.response();
    assert.equal(res.status, 413);
    assertErrorShape(res.json, 'body_too_large');
    assert.equal(res.headers.connection, 'close');
    assert.ok(await c.closedWithin(2000));
    // the limit is per route: /users takes 16 KiB, checked before auth
    const big = await rawOnce(srv.port,
      `POST /api/v1/users HTTP/1.1\r\n${H}Content-Type: application/json\r\nContent-Length: 16385\r\n\r\n`);
    assert.equal(big.res.status, 413);
    big.conn.destroy();
  });

  it('accepts a body of exactly the limit (8192 bytes on login) as far as size goes', async () => {
    const body = JSON.stringify({ username: 'nobody', password: 'x'.repeat(1000) }).padEnd(8192, ' ');
    assert.equal(Buffer.byteLength(body), 8192);
    const { res, conn } = await rawOnce(srv.port, post(LOGIN, body), { timeout: 10000 });
    conn.destroy();
    assert.notEqual(res.status, 413);
    assert.equal(res.status, 401, res.text); // a well-formed login for an unknown user
  });

  it('refuses a chunked body that grows over the limit with 413', async () => {
    const c = await RawConn.open(srv.port);
    c.write(`POST ${LOGIN} HTTP/1.1\r\n${H}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`);
    const piece = '{' + ' '.repeat(998) + '\n';
    for (let i = 0; i < 10 && !c.closed; i++) {
      c.write(`${piece.length.toString(16)}\r\n${piece}\r\n`);
      await sleep(10);
    }
    const res = await c.response();
    assert.equal(res.status, 413);
    assertErrorShape(res.json, 'body_too_large');
    assert.ok(await c.closedWithin(2000));
  });

  it('sends 100 Continue for Expect: 100-continue, and 413 without it when too large', async () => {
    const c = await RawConn.open(srv.port);
    const body = '{"username":7}';
    c.write(`POST ${LOGIN} HTTP/1.1\r\n${H}Content-Type: application/json\r\nContent-Length: ${body.length}\r\nExpect: 100-continue\r\n\r\n`);
    const interim = await c.response();
    assert.equal(interim.status, 100);
    c.write(body);
    const res = await c.response();
    assert.equal(res.status, 400);
    assertErrorShape(res.json, 'invalid');
    c.destroy();
    const big = await RawConn.open(srv.port);
    big.write(`POST ${LOGIN} HTTP/1.1\r\n${H}Content-Type: application/json\r\nContent-Length: 100000\r\nExpect: 100-continue\r\n\r\n`);
    const r2 = await big.response();
    assert.equal(r2.status, 413, 'a too-large body is refused before 100 Continue');
    big.destroy();
  });

  const malformed = {
    'garbage request line': 'GARBAGE\r\n\r\n',
    'unknown method': `FROB /healthz HTTP/1.1\r\n${H}\r\n`,
    'lower-case method': `get /healthz HTTP/1.1\r\n${H}\r\n`,
    'target without a leading slash': `GET healthz HTTP/1.1\r\n${H}\r\n`,
    'absolute-form target': `GET http://evil.example/healthz HTTP/1.1\r\n${H}\r\n`,
    'NUL in the target': `GET /heal\0thz HTTP/1.1\r\n${H}\r\n`,
    'control character in a header value': `GET /healthz HTTP/1.1\r\n${H}X-A: a\x01b\r\n\r\n`,
    'CR without LF in the header section': `GET /healthz HTTP/1.1\r\n${H}X-A: a\rX-B: b\r\n\r\n`,
    'Content-Length and Transfer-Encoding together': `POST ${LOGIN} HTTP/1.1\r\n${H}Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`,
    'two different Content-Lengths': `POST ${LOGIN} HTTP/1.1\r\n${H}Content-Length: 5\r\nContent-Length: 6\r\n\r\nabcdef`,
    'non-numeric Content-Length': `POST ${LOGIN} HTTP/1.1\r\n${H}Content-Length: 12abc\r\n\r\n`,
    'negative Content-Length': `POST ${LOGIN} HTTP/1.1\r\n${H}Content-Length: -1\r\n\r\n`,
    'bad chunk size': `POST ${LOGIN} HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\nzz\r\n`,
    'unsupported Expect': `POST ${LOGIN} HTTP/1.1\r\n${H}Expect: something\r\nContent-Length: 2\r\n\r\n{}`,
  };
  for (const [name, bytes] of Object.entries(malformed)) {
    it(`refuses a malformed request with 400 and closes: ${name}`, async () => {
      const { res, conn } = await rawOnce(srv.port, Buffer.from(bytes, 'latin1'));
      assert.equal(res.status, 400, res.text);
      assertErrorShape(res.json, 'invalid');
      assert.ok(await conn.closedWithin(2000), 'connection must close after a framing error');
    });
  }

  it('refuses a request line without an HTTP version (HTTP/0.9) with 400', async () => {
    const { res, conn } = await rawOnce(srv.port, 'GET /healthz\r\n\r\n');
    assert.equal(res.status, 400, `HTTP/0.9-style request answered ${res.status}`);
    assertErrorShape(res.json);
    assert.ok(await conn.closedWithin(2000));
  });

  it('refuses HTTP versions other than 1.x (400 or 505)', async () => {
    for (const v of ['HTTP/9.9', 'HTTP/2.0', 'HTTP/0.9']) {
      const { res, conn } = await rawOnce(srv.port, `GET /healthz ${v}\r\n${H}\r\n`);
      conn.destroy();
      assert.ok(res.status === 400 || res.status === 505, `${v} answered ${res.status}`);
    }
  });

  it('refuses whitespace between a header name and its colon (request smuggling) with 400', async () => {
    // RFC 9112 5.1: a server MUST reject this with 400; a proxy in front may
    // frame the message differently from us.
    const body = '{"username":1}';
    for (const h of [`Content-Length : ${body.length}`, 'Transfer-Encoding : chunked', 'Bad Name: x']) {
      const { res, conn } = await rawOnce(srv.port,
        `POST ${LOGIN} HTTP/1.1\r\n${H}Content-Type: application/json\r\n${h}\r\n\r\n${body}`);
      conn.destroy();
      assert.equal(res.status, 400, `'${h}' answered ${res.status}: ${res.text}`);
      assert.doesNotMatch(res.text, /username/, `'${h}' was honoured as a header`);
    }
  });

  it('requires exactly one Host header on HTTP/1.1 (400 otherwise)', async () => {
    // RFC 9112 3.2: MUST respond 400 to an HTTP/1.1 request without Host or with several
    for (const req of ['GET /healthz HTTP/1.1\r\n\r\n', 'GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n']) {
      const { res, conn } = await rawOnce(srv.port, req);
      conn.destroy();
      assert.equal(res.status, 400, `${JSON.stringify(req)} answered ${res.status}`);
    }
    const ok = await rawOnce(srv.port, 'GET /healthz HTTP/1.0\r\n\r\n'); // HTTP/1.0 needs none
    assert.equal(ok.res.status, 200);
  });

  it('handles bare-LF line endings as http-parser does, without harm', async () => {
    const c = await RawConn.open(srv.port);
    c.write('GET /healthz HTTP/1.1\nHost: t\n\n');
    const res = await c.response();
    assert.ok(res.status === 200 || res.status === 400, `bare LF: ${res.status}`);
    if (res.status === 200) {
      assert.deepEqual(res.json, { status: 'ok' });
      c.write(get('/readyz')); // the connection is still in a sane state
      assert.equal((await c.response()).status, 200);
    }
    c.destroy();
    await assertAlive(srv);
  });

  it('closes after an HTTP/1.0 response unless keep-alive was asked for', async () => {
    const { res, conn } = await rawOnce(srv.port, 'GET /healthz HTTP/1.0\r\n\r\n');
    assert.equal(res.status, 200);
    assert.equal(res.version, '1.1');
    assert.equal(res.headers.connection, 'close');
    assert.ok(await conn.closedWithin(2000));

    const c = await RawConn.open(srv.port);
    c.write('GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n');
    const r1 = await c.response();
    assert.equal(r1.status, 200);
    assert.match(r1.headers.connection || '', /keep-alive/i);
    assert.equal(await c.closedWithin(300), false);
    c.write('GET /readyz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n');
    assert.equal((await c.response()).status, 200);
    c.destroy();
  });

  it('honours Connection: close on HTTP/1.1', async () => {
    const c = await RawConn.open(srv.port);
    c.write(get('/healthz', 'Connection: close\r\n'));
    const res = await c.response();
    assert.equal(res.status, 200);
    assert.equal(res.headers.connection, 'close');
    assert.ok(await c.closedWithin(2000));
  });

  it('answers HEAD with the GET headers and Content-Length but no body', async () => {
    for (const path of ['/healthz', '/', '/metrics', '/api/v1/nope']) {
      const g = await rawOnce(srv.port, get(path, 'Connection: close\r\n'));
      g.conn.destroy();
      const c = await RawConn.open(srv.port);
      // HEAD then GET on one connection: any body after HEAD would break framing
      c.write(head(path) + get('/healthz', 'Connection: close\r\n'));
      const h = await c.response({ head: true });
      assert.equal(h.status, g.res.status, path);
      if (g.res.headers['content-length'] !== undefined && path !== '/metrics') {
        assert.equal(h.headers['content-length'], g.res.headers['content-length'], path);
      }
      assert.ok(h.headers['content-length'] !== undefined, `HEAD ${path} has no Content-Length`);
      assert.equal(h.headers['content-type'], g.res.headers['content-type'], path);
      if (h.headers.connection !== 'close') {
        const next = await c.response();
        assert.equal(next.status, 200, `the response after HEAD ${path} is garbled`);
        assert.deepEqual(next.json, { status: 'ok' });
      }
      assert.ok(await c.closedWithin(2000));
      assert.equal(c.buf.length, 0, `stray bytes after HEAD ${path}`);
    }
  });

  it('answers an unknown /api path with a 404 JSON error', async () => {
    for (const path of ['/api/v1/nope', '/api/v2/users', '/api/', '/api/v1/users/1/nope']) {
      const { res, conn } = await rawOnce(srv.port, get(path));
      conn.destroy();
      assert.equal(res.status, 404, path);
      assert.match(res.headers['content-type'], /^application\/json/);
      assertErrorShape(res.json, 'not_found');
    }
  });

  it('answers a wrong method with 405, a JSON error and an Allow header', async () => {
    for (const [method, path, allow] of [['DELETE', '/api/v1/me', 'GET'], ['PUT', '/api/v1/auth/login', 'POST'],
      ['POST', '/healthz', 'GET'], ['PUT', '/api/v1/users/1', 'GET, PATCH, DELETE']]) {
      const { res, conn } = await rawOnce(srv.port, `${method} ${path} HTTP/1.1\r\n${H}Content-Length: 0\r\n\r\n`);
      conn.destroy();
      assert.equal(res.status, 405, `${method} ${path}`);
      assertErrorShape(res.json, 'method_not_allowed');
      // RFC 9110 15.5.6: a 405 MUST carry Allow
      assert.ok(res.headers.allow, `405 for ${method} ${path} has no Allow header`);
      for (const m of allow.split(', ')) assert.match(res.headers.allow, new RegExp(`\\b${m}\\b`));
    }
  });

  it('serves 1,000 concurrent keep-alive connections while /healthz keeps answering', async () => {
    const N = 1000;
    const probes = [];
    let probing = true;
    const prober = (async () => {
      while (probing) {
        const t0 = Date.now();
        try {
          const { res, conn } = await rawOnce(srv.port, get('/healthz', 'Connection: close\r\n'), { timeout: 3000 });
          conn.destroy();
          probes.push({ ok: res.status === 200, ms: Date.now() - t0 });
        } catch (e) {
          probes.push({ ok: false, ms: Date.now() - t0, err: e.message });
        }
        await sleep(50);
      }
    })();
    const conns = [];
    try {
      for (let i = 0; i < N; i += 100) {
        conns.push(...await Promise.all(Array.from({ length: Math.min(100, N - i) }, () => RawConn.open(srv.port))));
      }
      for (const c of conns) c.write(get('/healthz'));
      const first = await Promise.all(conns.map((c) => c.response({ timeout: 20000 })));
      assert.ok(first.every((r) => r.status === 200));
      const open = await metric(srv, 'gpucloud_http_connections_open');
      assert.ok(open >= N, `connections_open ${open} < ${N}`);
      // every connection is still usable: a second request on each
      for (const c of conns) c.write(get('/readyz'));
      const second = await Promise.all(conns.map((c) => c.response({ timeout: 20000 })));
      assert.ok(second.every((r) => r.status === 200 && r.json.status === 'ready'));
      assert.ok(conns.every((c) => !c.closed));
    } finally {
      probing = false;
      await prober;
      for (const c of conns) c.destroy();
    }
    assert.ok(probes.length >= 3, `only ${probes.length} probes ran`);
    const bad = probes.filter((p) => !p.ok);
    assert.deepEqual(bad, [], '/healthz failed while 1,000 connections were open');
    await assertAlive(srv);
    const back = await eventually(async () => (await metric(srv, 'gpucloud_http_connections_open')) < 50, 5000);
    assert.ok(back, 'closed client connections were not freed');
  });

  it('is still alive after all of the above', async () => {
    await assertAlive(srv);
  });
});

describe('idle connections', () => {
  let srv;
  before(async () => {
    srv = await startServer({ args: ['--keepalive-timeout=2', '--header-timeout=2'] });
  });
  after(async () => { await stopClean(srv); });

  it('closes an idle keep-alive connection after keepalive_timeout', async () => {
    const c = await RawConn.open(srv.port);
    c.write(get('/healthz'));
    assert.equal((await c.response()).status, 200);
    const t0 = Date.now();
    assert.ok(await c.closedWithin(5000), 'idle keep-alive connection was not closed');
    const dt = c.closedAt - t0;
    assert.ok(dt >= 1500 && dt <= 4500, `closed after ${dt} ms (keepalive_timeout=2)`);
    assert.equal(c.buf.length, 0, 'an idle close sends nothing');
  });

  it('closes a connection that never sends a byte', async () => {
    const c = await RawConn.open(srv.port);
    const t0 = Date.now();
    assert.ok(await c.closedWithin(5000), 'silent connection was not closed');
    assert.ok(c.closedAt - t0 <= 4500);
  });
});

describe('pipelining backpressure', () => {
  let srv, dir;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gcpipe-'));
    writeFileSync(join(dir, 'blob.png'), Buffer.alloc(16384, 1));
    srv = await startServer({ args: ['--write-timeout=2', `--web-root=${dir}`] });
  });
  after(async () => {
    await stopClean(srv);
    rmSync(dir, { recursive: true, force: true });
  });

  const rssKiB = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${srv.proc.pid}/status`, 'utf8'))[1]);

  it('does not buffer unbounded responses for a client that pipelines and never reads', async () => {
    // 140 KB of requests asks for 64 MB of responses; the server must stop
    // parsing while its output is backed up instead of queueing them all
    const base = await metric(srv, 'gpucloud_http_connections_open');
    const r0 = rssKiB();
    const c = await RawConn.open(srv.port);
    c.sock.pause();
    c.sock.write('GET /blob.png HTTP/1.1\r\nHost: t\r\n\r\n'.repeat(4000));
    let peak = 0;
    for (let i = 0; i < 6; i++) {
      await sleep(250);
      peak = Math.max(peak, rssKiB() - r0);
    }
    // write_timeout=2: the stalled reader is dropped
    const freed = await eventually(async () => (await metric(srv, 'gpucloud_http_connections_open')) <= base, 6000);
    c.destroy();
    assert.ok(peak < 24 * 1024, `server memory grew by ${Math.round(peak / 1024)} MiB for one client that does not read`);
    assert.ok(freed, 'a client that stopped reading was not dropped after write_timeout');
    await assertAlive(srv);
  });
});

// issue 10: framing a front proxy could read differently, half-closed
// uploads, header checks, 507 before "100 Continue", method labels.
describe('HTTP protocol hardening', () => {
  let srv, token, dataRoot;

  before(async () => {
    srv = await startServer({ args: ['--header-timeout=3', '--body-timeout=3'] });
    dataRoot = join(srv.dir, 'data');
    const admin = new Client(srv.base);
    assert.equal((await admin.login('admin', ADMIN_PASSWORD)).status, 200);
    const r = await admin.post('/api/v1/tokens', { name: 'raw', scopes: ['read', 'write'], expires_in_days: 1 });
    assert.equal(r.status, 201, r.text);
    token = r.json.token;
    const q = await admin.req('PUT', '/api/v1/storage/quotas/home:admin', { bytes_hard: 64 << 20 });
    assert.equal(q.status, 200, q.text);
  });
  after(async () => { await stopClean(srv); });

  // every byte until the server closes, with a deadline
  function exchange(parts, { halfClose = false, ms = 5000 } = {}) {
    return new Promise((resolve, reject) => {
      const s = net.connect(srv.port, '127.0.0.1');
      const got = [];
      const t = setTimeout(() => { s.destroy(); resolve({ buf: Buffer.concat(got), timedOut: true }); }, ms);
      s.on('data', (d) => got.push(d));
      s.on('error', (e) => { clearTimeout(t); reject(e); });
      s.on('close', () => { clearTimeout(t); resolve({ buf: Buffer.concat(got), timedOut: false }); });
      s.on('connect', async () => {
        for (const p of parts) { s.write(p); await sleep(30); }
        if (halfClose) s.end();
      });
    });
  }
  const statuses = (buf) => [...buf.toString('latin1').matchAll(/^HTTP\/1\.1 (\d{3})/gm)].map((m) => Number(m[1]));

  it('rejects a bare CR anywhere in the framing with 400 (RFC 9112 §2.2)', async () => {
    const cases = [
      ['end of headers', Buffer.from(`GET /healthz HTTP/1.1\r\n${H}\r\x8a`, 'latin1')],
      ['before a pipelined GET', `GET /healthz HTTP/1.1\r\n${H}\rGET /healthz HTTP/1.1\r\n${H}\r\n`],
      ['in a header line', `GET /healthz HTTP/1.1\r\n${H}X-A: 1\rX-B: 2\r\n\r\n`],
      ['chunk-size line', `POST ${LOGIN} HTTP/1.1\r\n${H}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n2\rZ{}\r\n0\r\n\r\n`],
      ['last chunk', `POST ${LOGIN} HTTP/1.1\r\n${H}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\rZ`],
      ['chunk data not ended by CRLF', `POST ${LOGIN} HTTP/1.1\r\n${H}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}XY0\r\n\r\n`],
    ];
    for (const [name, bytes] of cases) {
      const { buf } = await exchange([bytes]);
      const st = statuses(buf);
      assert.deepEqual(st, [400], `${name}: ${buf.toString('latin1').slice(0, 200)}`);
    }
    // CRs split across writes still pass when they are followed by LF
    const ok = await exchange([`GET /healthz HTTP/1.1\r`, `\n${H}\r`, `\n`], { halfClose: true });
    assert.deepEqual(statuses(ok.buf), [200]);
    const ch = await exchange([`POST ${LOGIN} HTTP/1.1\r\n${H}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n2\r`,
      `\n{}\r`, `\n0\r`, `\n\r`, `\n`], { halfClose: true });
    assert.equal(statuses(ch.buf)[0], 400, 'the login itself fails on {}, but not as framing');
    assert.match(ch.buf.toString(), /username|password|field/i);
    // chunk data may hold bare CRs
    const d = await exchange([`POST ${LOGIN} HTTP/1.1\r\n${H}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{\r}\r\n0\r\n\r\n`], { halfClose: true });
    assert.ok(!/CR not followed/.test(d.buf.toString()), d.buf.toString());
    await assertAlive(srv);
  });

  it('refuses malformed Host values, duplicate Authorization and transfer codings other than chunked', async () => {
    for (const h of ['a@b', 'a b', 'a/b', 'a:xx', 'a:99999', '[::1']) {
      const { res } = await rawOnce(srv.port, `GET /healthz HTTP/1.1\r\nHost: ${h}\r\n\r\n`);
      assert.equal(res.status, 400, `Host: ${h}`);
    }
    for (const h of ['localhost:8080', '127.0.0.1', '[::1]:80', 'x.example']) {
      const { res } = await rawOnce(srv.port, `GET /healthz HTTP/1.1\r\nHost: ${h}\r\n\r\n`);
      assert.equal(res.status, 200, `Host: ${h}`);
    }
    const two = await rawOnce(srv.port, `GET /api/v1/me HTTP/1.1\r\n${H}Authorization: Bearer ${token}\r\nAuthorization: Bearer x\r\n\r\n`);
    assert.equal(two.res.status, 400);
    assert.match(two.res.json.error.message, /Authorization/);
    const gz = await rawOnce(srv.port, `POST ${LOGIN} HTTP/1.1\r\n${H}Content-Type: application/json\r\nTransfer-Encoding: gzip, chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n`);
    assert.equal(gz.res.status, 501);
    assertErrorShape(gz.res.json, 'not_implemented');
    // a coding not understood is 501 (RFC 9112 §6.1), and the connection closes
    const g1 = await rawOnce(srv.port, `POST ${LOGIN} HTTP/1.1\r\n${H}Transfer-Encoding: gzip\r\n\r\n`);
    assert.equal(g1.res.status, 501);
    assert.ok(await g1.conn.closedWithin(2000));
  });

  it('closes an HTTP/1.0 connection that used Transfer-Encoding', async () => {
    const { buf, timedOut } = await exchange([`POST ${LOGIN} HTTP/1.0\r\nConnection: keep-alive\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n`], { ms: 3000 });
    assert.equal(statuses(buf).length, 1);
    assert.equal(timedOut, false, 'the server closed the connection after the response');
  });

  it('counts requests that fail before the method is known as method "-"', async () => {
    await rawOnce(srv.port, '\x01\x02 garbage\r\n\r\n').catch(() => {});
    const m = await fetch(`${srv.base}/metrics`, { headers: { authorization: `Bearer ${token}` } }).then((r) => r.text());
    assert.match(m, /gpucloud_http_requests_total\{[^}]*method="-"[^}]*status="400"\}/);
    assert.doesNotMatch(m, /route="unmatched",method="DELETE"/);
  });

  const putHead = (path, len, extra = '') =>
    `PUT /api/v1/files/home/${path} HTTP/1.1\r\n${H}Authorization: Bearer ${token}\r\nContent-Type: application/octet-stream\r\nContent-Length: ${len}\r\n${extra}\r\n`;

  it('answers a streamed PUT whose client half-closes after the body (50 in a row)', async () => {
    const one = async (name) => {
      const body = Buffer.from(`contents of ${name}\n`.repeat(50));
      const { buf } = await exchange([putHead(`hc-${name}`, body.length), body], { halfClose: true, ms: 10000 });
      assert.deepEqual(statuses(buf), [201], `${name}: ${buf.toString().slice(0, 300)}`);
      assert.deepEqual(readFileSync(join(dataRoot, `home/admin/hc-${name}`)), body);
    };
    for (let i = 0; i < 50; i++) await one(`seq${i}.txt`);
  });

  it('refuses a PUT over the quota with 507 before "100 Continue"', async () => {
    const { buf, timedOut } = await exchange([putHead('huge.bin', 1 << 30, 'Expect: 100-continue\r\n')], { ms: 5000 });
    const text = buf.toString('latin1');
    assert.equal(timedOut, false, text);
    assert.doesNotMatch(text, /100 Continue/);
    assert.deepEqual(statuses(buf), [507], text);
  });

  it('refuses a trailing slash on a file path', async () => {
    const { buf } = await exchange([putHead('adir/', 2), 'hi'], { halfClose: true });
    assert.deepEqual(statuses(buf), [400], buf.toString());
    assert.match(buf.toString(), /names a folder/);
    const ok = await exchange([putHead('plain.txt', 2), 'hi'], { halfClose: true });
    assert.deepEqual(statuses(ok.buf), [201]);
    for (const m of ['GET', 'DELETE']) {
      const { res } = await rawOnce(srv.port, `${m} /api/v1/files/home/plain.txt/ HTTP/1.1\r\n${H}Authorization: Bearer ${token}\r\n\r\n`);
      assert.equal(res.status, 400, `${m} plain.txt/: ${res.text}`);
    }
    assert.ok(readFileSync(join(dataRoot, 'home/admin/plain.txt')).equals(Buffer.from('hi')));
  });
});
