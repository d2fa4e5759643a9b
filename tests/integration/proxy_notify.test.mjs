// proxy_notify.test.mjs — route invalidation by LISTEN/NOTIFY
// (db/migrations/0012_route_notify.sql): when an instance stops, every
// replica's proxy (two gpucloudd on one database) forgets its cached route
// and closes its websockets at once.  The cache TTL (60 s) and the periodic
// re-check (1 h) are set far beyond the bounds asserted here, so only the
// notification can explain a fast close.  The app is a real HTTP/websocket
// server in this test process; the instance is a row inserted by SQL.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { createHash } from 'node:crypto';
import { startServer, Client, ADMIN_PASSWORD } from '../lib/server.mjs';
import { sql, eventually, stopClean, RawConn } from '../lib/itest.mjs';

const app = http.createServer((req, res) => res.end('ok'));
app.on('upgrade', (req, sock, head) => {
  sock.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
    'Sec-WebSocket-Accept: ' + createHash('sha1').update(req.headers['sec-websocket-key'] + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest('base64') + '\r\n\r\n');
  if (head.length) sock.write(head);
  sock.pipe(sock);
  sock.on('error', () => {});
});

const ARGS = ['--proxy-cache-ms=60000', '--proxy-recheck=3600', '--route-session-ttl=3600'];
let one, two, appPort, inst, route, cookie;

function appReq(srv, path, headers = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: srv.port, path, agent: false,
      headers: { host: `${route}.localhost:${srv.port}`, ...headers } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode));
    });
    req.on('error', reject);
    req.setTimeout(5000, () => req.destroy(new Error('timeout')));
    req.end();
  });
}

async function openWs(srv) {
  const c = await RawConn.open(srv.port);
  c.write(`GET /ws HTTP/1.1\r\nHost: ${route}.localhost:${srv.port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
    `Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nCookie: ${cookie}\r\n\r\n`);
  const res = await c.response();
  assert.equal(res.status, 101, res.head);
  c.buf = Buffer.alloc(0);
  c.write('ping');
  assert.ok(await eventually(() => c.buf.length >= 4, 3000, 10), 'no echo through the tunnel');
  return c;
}

// The listener connects asynchronously after start-up: wait until a change
// made now is seen (a cached 200 turns into 410 long before the TTL).
async function listening(srv) {
  const ok = await eventually(async () => {
    sql(srv, `UPDATE instances SET state = 'running' WHERE id = ${inst}`);
    assert.equal(await appReq(srv, '/', { cookie }), 200); // cached now
    sql(srv, `UPDATE instances SET state = 'stopped' WHERE id = ${inst}`);
    const seen = await eventually(async () => (await appReq(srv, '/', { cookie })) === 410, 1000, 50);
    sql(srv, `UPDATE instances SET state = 'running' WHERE id = ${inst}`);
    return seen;
  }, 10000, 100);
  assert.ok(ok, 'the proxy never saw an instance change before its cache expired');
  assert.ok(await eventually(async () => (await appReq(srv, '/', { cookie })) === 200, 2000, 50));
}

describe('route invalidation by NOTIFY', () => {
  before(async () => {
    await new Promise((r) => app.listen(0, '127.0.0.1', r));
    appPort = app.address().port;
    one = await startServer({ args: ARGS });
    two = await startServer({ db: one.db, args: ARGS });
    const admin = new Client(one.base);
    assert.equal((await admin.login('admin', ADMIN_PASSWORD)).status, 200);
    const img = sql(one, `INSERT INTO images (reference, app_ports) VALUES ('test/notify:1', '[{"name":"web","port":80}]') RETURNING id`);
    inst = sql(one, `INSERT INTO instances (user_id, name, image_id, state, desired) SELECT id, 'n1', ${img}, 'running', 'running' FROM users WHERE username = 'admin' RETURNING id`);
    route = sql(one, `SELECT id FROM routes WHERE instance_id = ${inst} AND port_name = 'web'`);
    sql(one, `INSERT INTO instance_ports VALUES (${inst}, 'web', 80, '127.0.0.1', ${appPort})`);
    // a ticket bound to a sign-in state (the secret goes to the handshake as gc_state)
    const state = 'notify-state-secret';
    const o = await admin.post(`/api/v1/routes/${route}/open`, { state: createHash('sha256').update(state).digest('hex') });
    assert.equal(o.status, 200, o.text);
    const loc = new URL(o.json.url);
    const hs = await new Promise((resolve, reject) => {
      http.get({ host: '127.0.0.1', port: one.port, path: loc.pathname + loc.search, agent: false,
        headers: { host: loc.host, cookie: `gc_state=${state}` } }, (res) => { res.resume(); resolve(res); }).on('error', reject);
    });
    assert.equal(hs.statusCode, 302);
    cookie = hs.headers['set-cookie'][0].split(';')[0];
    await listening(one);
    await listening(two);
  });

  after(async () => {
    await stopClean(two);
    await stopClean(one);
    app.closeAllConnections?.();
    await new Promise((r) => app.close(r));
  });

  it('closes websockets on both replicas within 0.75 s of the instance stopping', async () => {
    const [a, b] = await Promise.all([openWs(one), openWs(two)]);
    // both replicas hold a cached "allowed, running" check now
    assert.equal(await appReq(one, '/', { cookie }), 200);
    assert.equal(await appReq(two, '/', { cookie }), 200);
    sql(one, `UPDATE instances SET state = 'stopped' WHERE id = ${inst}; DELETE FROM instance_ports WHERE instance_id = ${inst}`);
    const [ca, cb] = await Promise.all([a.closedWithin(750), b.closedWithin(750)]);
    assert.ok(ca, 'the websocket on the replica that ran the change stayed open');
    assert.ok(cb, 'the websocket on the other replica stayed open');
    assert.equal(await appReq(one, '/', { cookie }), 410);
    assert.equal(await appReq(two, '/', { cookie }), 410);
  });

  it('serves the route again at once when the instance runs again, and 404 once deleted', async () => {
    sql(one, `UPDATE instances SET state = 'running' WHERE id = ${inst}; INSERT INTO instance_ports VALUES (${inst}, 'web', 80, '127.0.0.1', ${appPort})`);
    assert.ok(await eventually(async () => (await appReq(two, '/', { cookie })) === 200, 750, 25));
    sql(one, `DELETE FROM instances WHERE id = ${inst}`);
    assert.ok(await eventually(async () => (await appReq(two, '/', { cookie })) === 404, 750, 25));
    assert.ok(await eventually(async () => (await appReq(one, '/', { cookie })) === 404, 750, 25));
  });
});
