// proxy.test.mjs — the reverse proxy for apps on their own origins
// (<route>.localhost): the handshake, route isolation between students (HTTP
// and websocket, guessed ids, path and Host tricks, replayed cookies), the
// headers an app receives, streaming with backpressure to a slow client,
// websocket tunnels, and what happens when an instance stops or a session
// ends.  The app is a real HTTP/websocket server in this test process; the
// instances pointing at it are rows inserted by SQL (the driver leaves
// running instances without a node alone), so the proxy is tested on its
// own; tests/e2e/jupyter.test.mjs goes through real containers.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { startServer, Client, ADMIN_PASSWORD } from '../lib/server.mjs';
import { sql, sleep, eventually, assertErrorShape, stopClean, RawConn, assertAlive, call } from '../lib/itest.mjs';

// ---- the app: echoes what it received; /big streams 100 MB; websockets echo raw bytes
const seen = { upgrades: [] };
let upstreamConns = 0;
const app = http.createServer((req, res) => {
  if (req.url.startsWith('/big')) {
    const total = 100 * 1024 * 1024, chunk = Buffer.alloc(256 * 1024, 'x');
    let sent = 0;
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': total });
    const pump = () => {
      while (sent < total) {
        sent += chunk.length;
        if (!res.write(chunk)) { res.once('drain', pump); return; }
      }
      res.end();
    };
    pump();
    return;
  }
  if (req.url === '/dribble') {
    // the head one byte per write, so the proxy's parser gets every name
    // and value in pieces; an Early Hints first, whose header must not
    // reach the answer; then the socket is done
    const sock = req.socket;
    sock.setNoDelay(true);
    const head = Buffer.from('HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n' +
      'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-Split-Name-Long: alpha beta\r\n' +
      'X-Empty:\r\nX-Two: 1\r\nX-Two: 2\r\nSet-Cookie: gc_route=forged\r\nContent-Length: 5\r\n\r\nhello');
    let i = 0;
    const drip = () => {
      if (i >= head.length) { sock.end(); return; }
      sock.write(head.subarray(i, i + 1));
      i++;
      setTimeout(drip, i < 60 ? 1 : 0);
    };
    req.resume();
    req.on('end', drip);
    return;
  }
  const h = createHash('sha256');
  let n = 0;
  req.on('data', (d) => { h.update(d); n += d.length; });
  req.on('end', () => {
    const body = JSON.stringify({ method: req.method, url: req.url, headers: req.headers, rawHeaders: req.rawHeaders, bodyLength: n, bodySha: h.digest('hex') });
    res.writeHead(200, { 'content-type': 'application/json', 'keep-alive': 'timeout=5', 'x-app': 'echo' });
    res.end(body);
  });
});
app.keepAliveTimeout = 60000;
app.on('connection', () => { upstreamConns++; });
app.on('upgrade', (req, sock, head) => {
  seen.upgrades.push(req.headers);
  sock.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
    'Sec-WebSocket-Accept: ' + createHash('sha1').update(req.headers['sec-websocket-key'] + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest('base64') + '\r\n\r\n');
  if (head.length) sock.write(head);
  sock.pipe(sock); // echo: the tunnel is raw bytes, so this is enough
  sock.on('error', () => {});
});

let srv, admin, alice, bob, appPort;
let aRoute, bRoute, aInst, bInst, aliceCookie, bobCookie;

function host(route) { return `${route}.localhost:${srv.port}`; }

// One request to an app origin over a fresh connection (node cannot resolve
// *.localhost itself; the Host header is what counts).
function appReq(route, path, { method = 'GET', headers = {}, body, hostHeader } = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: srv.port, method, path, agent: false,
      headers: { host: hostHeader || host(route), ...headers } }, (res) => {
      const parts = [];
      res.on('data', (d) => parts.push(d));
      res.on('end', () => {
        const b = Buffer.concat(parts);
        let json = null;
        try { json = JSON.parse(b.toString()); } catch { /* not JSON */ }
        resolve({ status: res.statusCode, headers: res.headers, body: b, text: b.toString(), json });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.setTimeout(15000, () => req.destroy(new Error('timeout')));
    if (body) req.write(body);
    req.end();
  });
}

// The route cookie for route, through POST /open (bound to a sign-in
// state, as the route's origin sets for browsers) and the handshake.
async function openRoute(client, route, path = '/') {
  const state = randomBytes(32).toString('hex');
  const o = await client.post(`/api/v1/routes/${route}/open`, { path, state: createHash('sha256').update(state).digest('hex') });
  assert.equal(o.status, 200, o.text);
  const loc = new URL(o.json.url);
  assert.equal(loc.host, host(route));
  assert.equal(loc.pathname, '/__gpucloud/handshake');
  const hs = await appReq(route, loc.pathname + loc.search, { headers: { cookie: `gc_state=${state}` } });
  assert.equal(hs.status, 302, hs.text);
  assert.equal(hs.headers.location, path);
  const sc = hs.headers['set-cookie'][0];
  assert.match(sc, /^gc_route=[A-Za-z0-9_-]{40,}; Path=\/; HttpOnly; SameSite=Lax; Max-Age=\d+$/);
  assert.doesNotMatch(sc, /Domain/i, 'the route cookie is host-only');
  return { cookie: sc.split(';')[0], ticketUrl: loc.pathname + loc.search, state };
}

function wsRequest(route, cookie, { hostHeader } = {}) {
  return `GET /ws HTTP/1.1\r\nHost: ${hostHeader || host(route)}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
    `Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nOrigin: http://${host(route)}\r\n` +
    (cookie ? `Cookie: ${cookie}\r\n` : '') + '\r\n';
}

// A websocket through the proxy; returns the open raw connection after 101.
async function openWs(route, cookie) {
  const c = await RawConn.open(srv.port);
  c.write(wsRequest(route, cookie));
  const res = await c.response();
  assert.equal(res.status, 101, res.head);
  return c;
}

async function echoOver(c, msg) {
  const before = c.buf.length;
  c.write(msg);
  const ok = await eventually(() => c.buf.length >= before + msg.length, 3000, 10);
  assert.ok(ok, 'echo did not come back through the tunnel');
  const got = c.buf.subarray(before, before + msg.length).toString();
  c.buf = c.buf.subarray(before + msg.length);
  return got;
}

function rssKiB(pid) {
  return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]);
}

async function mkInstance(userId, name, state = 'running') {
  const img = sql(srv, `INSERT INTO images (reference, app_ports) VALUES ('test/echo-${name}:1', '[{"name":"web","port":80}]') RETURNING id`);
  const id = sql(srv, `INSERT INTO instances (user_id, name, image_id, state, desired) VALUES (${userId}, '${name}', ${img}, '${state}', 'running') RETURNING id`);
  const route = sql(srv, `SELECT id FROM routes WHERE instance_id = ${id} AND port_name = 'web'`);
  return { id, route };
}

describe('app proxy', () => {
  before(async () => {
    await new Promise((r) => app.listen(0, '127.0.0.1', r));
    appPort = app.address().port;
    srv = await startServer({ args: ['--proxy-cache-ms=200', '--proxy-recheck=1', '--route-session-ttl=3600'] });
    admin = new Client(srv.base);
    assert.equal((await admin.login('admin', ADMIN_PASSWORD)).status, 200);
    for (const u of ['alice', 'bob'])
      assert.equal((await admin.post('/api/v1/users', { username: u, role: 'student', password: `${u}-password-1` })).status, 201);
    alice = new Client(srv.base);
    bob = new Client(srv.base);
    assert.equal((await alice.login('alice', 'alice-password-1')).status, 200);
    assert.equal((await bob.login('bob', 'bob-password-1')).status, 200);
    const uid = (n) => sql(srv, `SELECT id FROM users WHERE username = '${n}'`);
    ({ id: aInst, route: aRoute } = await mkInstance(uid('alice'), 'a1'));
    ({ id: bInst, route: bRoute } = await mkInstance(uid('bob'), 'b1'));
    for (const i of [aInst, bInst])
      sql(srv, `INSERT INTO instance_ports VALUES (${i}, 'web', 80, '127.0.0.1', ${appPort})`);
    aliceCookie = (await openRoute(alice, aRoute, '/lab?x=1')).cookie;
    bobCookie = (await openRoute(bob, bRoute)).cookie;
  });

  after(async () => {
    await stopClean(srv);
    app.closeAllConnections?.();
    await new Promise((r) => app.close(r));
  });

  it('lists a user\'s routes with their URLs, and only theirs', async () => {
    const r = await alice.get('/api/v1/routes');
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.items.length, 1);
    const it0 = r.json.items[0];
    assert.equal(it0.id, aRoute);
    assert.equal(it0.port_name, 'web');
    assert.equal(it0.url, `http://${aRoute}.localhost:${srv.port}/`);
    assert.match(aRoute, /^[0-9a-f]{32}$/);
    const b = await bob.get('/api/v1/routes');
    assert.deepEqual(b.json.items.map((x) => x.id), [bRoute]);
  });

  it('sends browsers without a route cookie to log in, and API clients a 401', async () => {
    const html = await appReq(aRoute, '/tree?a=b', { headers: { accept: 'text/html' } });
    assert.equal(html.status, 302);
    const loc = new URL(html.headers.location);
    assert.equal(loc.origin, `http://localhost:${srv.port}`);
    const q = new URLSearchParams(loc.hash.replace(/^#\/login\?/, ''));
    assert.equal(q.get('open'), aRoute);
    assert.equal(q.get('path'), '/tree?a=b');
    // the sign-in state: a fresh random cookie on the app's origin, its hash in the link
    const st = html.headers['set-cookie'].find((c) => c.startsWith('gc_state='));
    assert.match(st, /^gc_state=[A-Za-z0-9_-]{40,}; Path=\/; HttpOnly; SameSite=Lax; Max-Age=600$/);
    assert.equal(q.get('state'), createHash('sha256').update(st.split(';')[0].slice(9)).digest('hex'));
    const api = await appReq(aRoute, '/api/contents');
    assert.equal(api.status, 401);
    assertErrorShape(api.json, 'unauthorized');
    // the API's own session cookie is no key to an app
    const withApi = await appReq(aRoute, '/x', { headers: { cookie: alice.cookieHeader() } });
    assert.equal(withApi.status, 401);
  });

  it('spends a ticket once, on its own route only, in the browser it was made for', async () => {
    const state = randomBytes(32).toString('hex');
    const shash = createHash('sha256').update(state).digest('hex');
    const withState = { headers: { cookie: `gc_state=${state}` } };
    const o = await alice.post(`/api/v1/routes/${aRoute}/open`, { path: '/p', state: shash });
    assert.equal(o.status, 200, o.text);
    const u = new URL(o.json.url);
    assert.equal(o.json.expires_in, 60);
    const other = await appReq(bRoute, u.pathname + u.search, withState);   // on bob's origin
    assert.equal(other.status, 403);
    const good = await appReq(aRoute, u.pathname + u.search, withState);
    assert.equal(good.status, 302);
    assert.ok(good.headers['set-cookie'].some((c) => /^gc_state=; .*Max-Age=0/.test(c)), 'the state is cleared');
    const again = await appReq(aRoute, u.pathname + u.search, withState);
    assert.equal(again.status, 403);
    for (const bad of ['//evil.example/', '/\\evil', 'http://evil/', '/a b'])
      assert.equal((await alice.post(`/api/v1/routes/${aRoute}/open`, { path: bad, state: shash })).status, 400, bad);
  });

  it('binds a ticket to its browser: another browser, or a victim, cannot redeem it', async () => {
    const mine = randomBytes(32).toString('hex');
    const mint = async () => {
      const o = await alice.post(`/api/v1/routes/${aRoute}/open`, { state: createHash('sha256').update(mine).digest('hex') });
      assert.equal(o.status, 200, o.text);
      const u = new URL(o.json.url);
      return u.pathname + u.search;
    };
    // a leaked ticket URL in a browser without the state cookie, or with another one
    for (const cookie of [undefined, `gc_state=${randomBytes(32).toString('hex')}`, `gc_state=${mine}; gc_state=${mine}`]) {
      const url = await mint();
      const r = await appReq(aRoute, url, { headers: cookie ? { cookie } : {} });
      assert.equal(r.status, 403, `redeemed with ${cookie}`);
      assertErrorShape(r.json, 'forbidden');
      // and the ticket is spent: not even its own browser can use it now
      assert.equal((await appReq(aRoute, url, { headers: { cookie: `gc_state=${mine}` } })).status, 403);
    }
    // no state, a malformed one: no ticket at all
    assert.equal((await alice.post(`/api/v1/routes/${aRoute}/open`, {})).status, 400);
    assert.equal((await alice.post(`/api/v1/routes/${aRoute}/open`, { state: 'x'.repeat(64) })).status, 400);
  });

  it('mints tickets only by POST with the CSRF token (cookie sessions)', async () => {
    const state = createHash('sha256').update('s').digest('hex');
    // the old GET redirect is gone: a cross-site link cannot mint one
    const g = await alice.get(`/api/v1/routes/${aRoute}/open?path=/x`);
    assert.equal(g.status, 405, g.text);
    assertErrorShape(g.json);
    assert.equal(g.headers.get('location'), null);
    // POST without the CSRF token, or from another origin
    const noCsrf = await call(srv.base, 'POST', `/api/v1/routes/${aRoute}/open`, { cookie: alice.cookieHeader(), origin: srv.base, body: { state } });
    assert.equal(noCsrf.status, 403, noCsrf.text);
    const evil = await call(srv.base, 'POST', `/api/v1/routes/${aRoute}/open`, { cookie: alice.cookieHeader(), csrf: alice.csrf, origin: `http://${aRoute}.localhost:${srv.port}`, body: { state } });
    assert.equal(evil.status, 403, evil.text);
  });

  it('needs a write token to open an app session; a read-only token gets 403', async () => {
    const mk = async (scopes) => {
      const t = await alice.post('/api/v1/tokens', { name: `t-${scopes.join('-')}-${Date.now()}`, scopes });
      assert.equal(t.status, 201, t.text);
      return t.json.token;
    };
    const state = createHash('sha256').update('s').digest('hex');
    const ro = await mk(['read']);
    const r1 = await call(srv.base, 'POST', `/api/v1/routes/${aRoute}/open`, { bearer: ro, body: { state } });
    assert.equal(r1.status, 403, r1.text);
    assert.equal((await call(srv.base, 'GET', `/api/v1/routes/${aRoute}/open`, { bearer: ro })).status, 405);
    const rw = await mk(['read', 'write']);
    const r2 = await call(srv.base, 'POST', `/api/v1/routes/${aRoute}/open`, { bearer: rw, body: { state } });
    assert.equal(r2.status, 200, r2.text);
  });

  it('forwards exactly the headers an app should see', async () => {
    const r = await appReq(aRoute, '/echo?q=1', { method: 'POST', body: 'hello', headers: {
      cookie: `${alice.cookieHeader()}; ${aliceCookie}; app_pref=dark`,
      authorization: 'Bearer gct_stolen', 'proxy-authorization': 'Basic eDp5',
      'x-forwarded-for': '6.6.6.6', 'x-forwarded-host': 'evil', 'x-forwarded-proto': 'https', forwarded: 'for=6.6.6.6',
      te: 'trailers', connection: 'keep-alive, x-hop', 'x-hop': 'secret', 'keep-alive': 'timeout=1',
      'x-custom': 'kept', 'content-type': 'text/plain',
      'X-Real-IP': '6.6.6.6', 'PROXY-Foo': 'x', 'X-FORWARDED-Port': '1',
    } });
    assert.equal(r.status, 200, r.text);
    const h = r.json.headers;
    const token = sql(srv, `SELECT app_token FROM instances WHERE id = ${aInst}`);
    assert.equal(h.authorization, `token ${token}`);
    assert.equal(h.cookie, 'app_pref=dark', 'gpucloud\'s cookies are stripped');
    assert.equal(h['x-forwarded-for'], '127.0.0.1');
    assert.equal(h['x-forwarded-proto'], 'http');
    assert.equal(h['x-forwarded-host'], host(aRoute));
    assert.equal(h.host, host(aRoute));
    assert.equal(h['x-custom'], 'kept');
    for (const gone of ['proxy-authorization', 'forwarded', 'te', 'x-hop', 'keep-alive', 'x-real-ip', 'proxy-foo', 'x-forwarded-port'])
      assert.ok(!(gone in h), `${gone} reached the app`);
    assert.equal(r.json.method, 'POST');
    assert.equal(r.json.url, '/echo?q=1');
    assert.equal(r.json.bodyLength, 5);
    // and back: the app's hop-by-hop headers stay with the proxy
    assert.equal(r.headers['x-app'], 'echo');
    assert.ok(!('keep-alive' in r.headers));
  });

  it('keeps one user out of another\'s app by every trick', async () => {
    // bob's cookie on alice's origin (HTTP and websocket)
    assert.equal((await appReq(aRoute, '/', { headers: { cookie: bobCookie } })).status, 401);
    const c = await RawConn.open(srv.port);
    c.write(wsRequest(aRoute, bobCookie));
    const ws = await c.response();
    assert.equal(ws.status, 401);
    c.destroy();
    // bob cannot open alice's route, nor a guessed one
    const st = { state: createHash('sha256').update('s').digest('hex') };
    assert.equal((await bob.post(`/api/v1/routes/${aRoute}/open`, st)).status, 404);
    assert.equal((await bob.post(`/api/v1/routes/${'0'.repeat(32)}/open`, st)).status, 404);
    assert.equal((await appReq('0'.repeat(32), '/', { headers: { cookie: bobCookie } })).status, 404);
    // path tricks reach the same (bob's own) app, never alice's, never the API
    for (const p of ['/..%2f..%2fapi/v1/me', '/%2e%2e/%2e%2e/', '/..%252f', `/../${aRoute}/`]) {
      const r = await appReq(bRoute, p, { headers: { cookie: bobCookie } });
      assert.equal(r.status, 200, p);
      assert.equal(r.json.url, p, 'forwarded as sent, to bob\'s own app');
    }
    assert.equal((await bob.post(`/api/v1/routes/..%2f${aRoute}/open`, st)).status >= 400, true);
    // Host tricks
    const upper = await appReq(aRoute, '/', { hostHeader: `${aRoute.toUpperCase()}.LOCALHOST:${srv.port}`, headers: { cookie: bobCookie } });
    assert.equal(upper.status, 401);
    const suffix = await appReq(aRoute, '/api/v1/me', { hostHeader: `${aRoute}.localhost.evil.example`, headers: { cookie: aliceCookie } });
    assert.notEqual(suffix.status, 200, 'a look-alike host is not a route');
    const nested = await appReq(aRoute, '/', { hostHeader: `${bRoute}.${aRoute}.localhost:${srv.port}`, headers: { cookie: aliceCookie } });
    assert.equal(nested.status, 404);
    // absolute-form target naming alice's origin on bob's Host
    const c2 = await RawConn.open(srv.port);
    c2.write(`GET http://${host(aRoute)}/ HTTP/1.1\r\nHost: ${host(bRoute)}\r\nCookie: ${bobCookie}\r\n\r\n`);
    assert.equal((await c2.response()).status, 400);
    c2.destroy();
    // two Host headers
    const c3 = await RawConn.open(srv.port);
    c3.write(`GET / HTTP/1.1\r\nHost: ${host(bRoute)}\r\nHost: ${host(aRoute)}\r\nCookie: ${bobCookie}\r\n\r\n`);
    assert.equal((await c3.response()).status, 400);
    c3.destroy();
    // the API is not served on app origins, even with the API cookie
    const apiOnApp = await appReq(aRoute, '/api/v1/me', { headers: { cookie: alice.cookieHeader() } });
    assert.equal(apiOnApp.status, 401);
  });

  it('passes on an app\'s head that arrives a byte at a time', async () => {
    const r = await appReq(aRoute, '/dribble', { headers: { cookie: aliceCookie } });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.text, 'hello');
    assert.equal(r.headers['content-type'], 'text/plain');
    assert.equal(r.headers['x-split-name-long'], 'alpha beta');
    assert.equal(r.headers['x-two'], '1, 2');
    assert.ok(!('link' in r.headers), 'the 103\'s header stayed with it');
    assert.ok(!(r.headers['set-cookie'] || []).some((c) => c.startsWith('gc_route=forged')), 'an app set gpucloud\'s cookie');
    assert.ok(r.headers['x-empty'] === undefined || r.headers['x-empty'] === '');
  });

  it('tunnels websockets after the app\'s 101', async () => {
    const c = await openWs(aRoute, aliceCookie);
    assert.equal(await echoOver(c, 'ping-1'), 'ping-1');
    assert.equal(await echoOver(c, 'x'.repeat(100000)), 'x'.repeat(100000));
    // a burst far over the tunnel's buffer limit: reading pauses and resumes
    const burst = randomBytes(3 * 1024 * 1024).toString('base64');
    assert.equal(await echoOver(c, burst), burst);
    const up = seen.upgrades.at(-1);
    assert.equal(up.upgrade, 'websocket');
    assert.match(up.connection, /upgrade/i);
    assert.ok(!/gc_route/.test(up.cookie || ''), 'no route cookie upstream');
    // traffic through the tunnel alone keeps the instance active (written
    // at most every 5 s per route)
    sql(srv, `UPDATE instances SET last_activity_at = now() - interval '1 hour' WHERE id = ${aInst}`);
    const fresh = () => sql(srv, `SELECT last_activity_at > now() - interval '1 minute' FROM instances WHERE id = ${aInst}`) === 't';
    for (let i = 0; i < 20 && !fresh(); i++) {
      assert.equal(await echoOver(c, `tick-${i}`), `tick-${i}`);
      await sleep(500);
    }
    assert.ok(fresh(), 'websocket traffic did not mark the instance active');
    c.destroy();
  });

  it('reuses upstream connections', async () => {
    const before = upstreamConns;
    for (let i = 0; i < 10; i++)
      assert.equal((await appReq(aRoute, `/k${i}`, { headers: { cookie: aliceCookie } })).status, 200);
    assert.ok(upstreamConns - before <= 2, `opened ${upstreamConns - before} upstream connections for 10 requests`);
  });

  it('streams request bodies both ways (length and chunked)', async () => {
    const big = Buffer.alloc(5 * 1024 * 1024, 'b');
    const sha = createHash('sha256').update(big).digest('hex');
    const r = await appReq(aRoute, '/up', { method: 'PUT', body: big, headers: { cookie: aliceCookie, 'content-length': big.length } });
    assert.equal(r.json.bodyLength, big.length);
    assert.equal(r.json.bodySha, sha);
    const r2 = await appReq(aRoute, '/up', { method: 'POST', body: big, headers: { cookie: aliceCookie, 'transfer-encoding': 'chunked' } });
    assert.equal(r2.json.bodyLength, big.length);
    assert.equal(r2.json.bodySha, sha);
  });

  it('answers HEAD with the app\'s length and no body, and keeps the connection', async () => {
    const c = await RawConn.open(srv.port);
    const req = (m, p) => `${m} ${p} HTTP/1.1\r\nHost: ${host(aRoute)}\r\nCookie: ${aliceCookie}\r\n\r\n`;
    c.write(req('GET', '/same'));
    const g = await c.response();
    assert.equal(g.status, 200);
    c.write(req('HEAD', '/same'));
    const h = await c.response({ head: true });
    assert.equal(h.status, 200);
    assert.equal(h.headers['x-app'], 'echo');
    assert.equal(h.headers['content-length'], g.headers['content-length'], 'HEAD keeps the length of GET');
    // the next response on the same connection starts right after HEAD's
    // head: a body sent for HEAD would be parsed as a broken response here
    c.write(req('GET', '/after-head'));
    const a = await c.response();
    assert.equal(a.status, 200);
    assert.equal(JSON.parse(a.body.toString()).url, '/after-head');
    assert.equal(c.buf.length, 0, 'nothing after the last response');
    c.destroy();
  });

  it('handles Expect: 100-continue uploads, and refuses them before the body when unauthenticated', async () => {
    const body = Buffer.alloc(300000, 'e');
    const c = await RawConn.open(srv.port);
    c.write(`PUT /expect HTTP/1.1\r\nHost: ${host(aRoute)}\r\nCookie: ${aliceCookie}\r\n` +
      `Content-Length: ${body.length}\r\nExpect: 100-continue\r\n\r\n`);
    const cont = await c.response();
    assert.equal(cont.status, 100, 'the client is told to send its body');
    c.write(body);
    const r = await c.response();
    assert.equal(r.status, 200);
    const seenUp = JSON.parse(r.body.toString());
    assert.equal(seenUp.bodyLength, body.length);
    assert.equal(seenUp.bodySha, createHash('sha256').update(body).digest('hex'));
    assert.equal(seenUp.headers.expect, undefined, 'Expect is answered here, not forwarded');
    c.destroy();
    // no route cookie: 401 at once, no 100, the body is never asked for
    const d = await RawConn.open(srv.port);
    d.write(`PUT /expect HTTP/1.1\r\nHost: ${host(aRoute)}\r\nContent-Length: ${body.length}\r\n` +
      'Expect: 100-continue\r\n\r\n');
    const no = await d.response();
    assert.equal(no.status, 401);
    d.destroy();
  });

  it('streams 100 MB to a slow client with bounded memory', async () => {
    const pid = srv.proc.pid;
    const base = rssKiB(pid);
    const sock = net.connect({ host: '127.0.0.1', port: srv.port });
    await new Promise((r) => sock.once('connect', r));
    let got = 0;
    sock.on('data', (d) => { got += d.length; });
    sock.pause(); // a client that does not read
    sock.write(`GET /big HTTP/1.1\r\nHost: ${host(aRoute)}\r\nCookie: ${aliceCookie}\r\nConnection: close\r\n\r\n`);
    let peak = 0;
    for (let i = 0; i < 15; i++) { await sleep(100); peak = Math.max(peak, rssKiB(pid)); }
    assert.ok(got < 50 * 1024 * 1024, `the client was not slow (${got})`);
    assert.ok(peak - base < 24 * 1024, `RSS grew by ${peak - base} KiB while the client stalled`);
    sock.resume();
    await new Promise((r) => sock.once('close', r));
    assert.ok(got > 100 * 1024 * 1024, `only ${got} bytes arrived`);
    // (no RSS check after the transfer: sanitizer builds keep freed memory
    // in quarantine; what backpressure bounds is the stalled phase above)
  });

  it('shows a starting page while the app is not up', async () => {
    const { id, route } = await mkInstance(sql(srv, "SELECT id FROM users WHERE username = 'alice'"), 'a2', 'creating');
    const { cookie } = await openRoute(alice, route);
    const page = await appReq(route, '/', { headers: { cookie, accept: 'text/html' } });
    assert.equal(page.status, 503);
    assert.equal(page.headers['retry-after'], '2');
    assert.match(page.text, /is starting…/);
    assert.match(page.text, /http-equiv="refresh"/);
    // running, published, but nothing listens yet: 502 with a retrying page
    const dead = net.createServer();
    await new Promise((r) => dead.listen(0, '127.0.0.1', r));
    const deadPort = dead.address().port;
    await new Promise((r) => dead.close(r));
    sql(srv, `UPDATE instances SET state = 'running' WHERE id = ${id}; INSERT INTO instance_ports VALUES (${id}, 'web', 80, '127.0.0.1', ${deadPort})`);
    await sleep(300);
    const bad = await appReq(route, '/', { headers: { cookie, accept: 'text/html' } });
    assert.equal(bad.status, 502);
    assert.equal(bad.headers['retry-after'], '2');
    const badApi = await appReq(route, '/api', { headers: { cookie } });
    assert.equal(badApi.status, 502);
    assertErrorShape(badApi.json, 'bad_gateway');
  });

  it('closes websockets when the session ends, and refuses the cookie', async () => {
    const { cookie } = await openRoute(alice, aRoute);
    const c = await openWs(aRoute, cookie);
    assert.equal(await echoOver(c, 'before'), 'before');
    const h = createHash('sha256').update(cookie.split('=')[1]).digest('hex');
    sql(srv, `UPDATE route_sessions SET expires_at = now() WHERE token_hash = '${h}'`);
    assert.ok(await c.closedWithin(4000), 'the websocket stayed open after the session expired');
    assert.equal((await appReq(aRoute, '/', { headers: { cookie } })).status, 401);
    // logging out of the API ends the app sessions it opened
    const carol = new Client(srv.base);
    assert.equal((await carol.login('alice', 'alice-password-1')).status, 200);
    const k = (await openRoute(carol, aRoute)).cookie;
    assert.equal((await appReq(aRoute, '/', { headers: { cookie: k } })).status, 200);
    assert.equal((await carol.post('/api/v1/auth/logout')).status, 204);
    assert.ok(await eventually(async () => (await appReq(aRoute, '/', { headers: { cookie: k } })).status === 401, 3000));
  });

  it('answers 410 at once when the instance stops, and closes its websockets', async () => {
    const c = await openWs(bRoute, bobCookie);
    assert.equal(await echoOver(c, 'hi'), 'hi');
    sql(srv, `UPDATE instances SET state = 'stopped' WHERE id = ${bInst}; DELETE FROM instance_ports WHERE instance_id = ${bInst}`);
    assert.ok(await eventually(async () => (await appReq(bRoute, '/', { headers: { cookie: bobCookie } })).status === 410, 1500, 50));
    const page = await appReq(bRoute, '/', { headers: { cookie: bobCookie, accept: 'text/html' } });
    assert.equal(page.status, 410);
    assert.match(page.text, /not running/);
    assert.ok(await c.closedWithin(750), 'the websocket stayed open after the instance stopped (NOTIFY gc_routes)');
    sql(srv, `DELETE FROM instances WHERE id = ${bInst}`);
    assert.ok(await eventually(async () => (await appReq(bRoute, '/', { headers: { cookie: bobCookie } })).status === 404, 1500, 50));
  });

  it('counts traffic in /metrics without naming routes or instances', async () => {
    const m = await (await fetch(`${srv.base}/metrics`)).text();  // 127.0.0.1 is a scrape address in tests
    assert.match(m, /gpucloud_proxy_bytes_total [1-9]/);
    assert.doesNotMatch(m, new RegExp(aRoute));
    assert.doesNotMatch(m, /instance="/);
    assert.doesNotMatch(m, /gpucloud_proxy_route_/);
    assert.match(m, /gpucloud_proxy_upstream_connections_total\{kind="reused"\} [1-9]/);
    const act = sql(srv, `SELECT last_activity_at > now() - interval '1 minute' FROM instances WHERE id = ${aInst}`);
    assert.equal(act, 't');
    await assertAlive(srv);
  });
});
