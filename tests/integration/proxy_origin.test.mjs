// proxy_origin.test.mjs — one click must not take over another user's app.
// Two users' routes on a real-looking apps domain (apps.gpucloud.test, where
// every route is same-site with every other, unlike *.localhost), a real
// headless Chromium: the victim signs in to her own app B through the UI
// flow, and her browser also holds a session on the attacker's route A (as
// an attacker could once arrange by making her redeem his ticket).  The
// attacker's page on A then drives B over HTTP POST and a websocket: the
// proxy must refuse both (Origin / Sec-Fetch-Site), while B's own page
// still works.  Also: apps' Set-Cookie headers are filtered.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { createHash, randomBytes } from 'node:crypto';
import { chromium } from 'playwright-core';
import { CHROMIUM } from '../e2e/browser.mjs';
import { startServer, Client, ADMIN_PASSWORD } from '../lib/server.mjs';
import { sql, stopClean, RawConn, eventually } from '../lib/itest.mjs';

const DOMAIN = 'apps.gpucloud.test';
const sha = (s) => createHash('sha256').update(s).digest('hex');

// the victim's app: records every request and upgrade it receives
const victimSeen = [];
const victimApp = http.createServer((req, res) => {
  victimSeen.push(`${req.method} ${req.url}`);
  req.resume();
  req.on('end', () => {
    res.writeHead(200, { 'content-type': 'text/html',
      'set-cookie': ['app_ok=1; Path=/', 'tossed=1; Domain=apps.gpucloud.test; Path=/', 'gc_route=shadow; Path=/', '__Host-gc_state=x; Path=/; Secure'] });
    res.end('<!doctype html><title>victim app</title><p>victim</p>');
  });
});
const upgraded = new Set(); // detached from the server: closed by hand in after()
victimApp.on('upgrade', (req, sock) => {
  victimSeen.push(`UPGRADE ${req.url}`);
  upgraded.add(sock);
  sock.on('close', () => upgraded.delete(sock));
  sock.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
    'Sec-WebSocket-Accept: ' + createHash('sha1').update(req.headers['sec-websocket-key'] + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest('base64') + '\r\n\r\n');
  sock.on('error', () => {});
});

let srv, port, bRouteUrl;
// the attacker's app: a page that drives route B from route A
let bOrigin = '';
const attackerApp = http.createServer((req, res) => {
  res.writeHead(200, { 'content-type': 'text/html' });
  res.end(`<!doctype html><title>attacker</title><script>
    window.results = {};
    (async () => {
      try {
        const r = await fetch('${bOrigin}/api/terminals', { method: 'POST', credentials: 'include', mode: 'no-cors', body: '{}' });
        window.results.post = r.type;
      } catch (e) { window.results.post = 'error'; }
      try {
        const r = await fetch('${bOrigin}/api/contents', { credentials: 'include' });
        window.results.get = r.status;
      } catch (e) { window.results.get = 'error'; }
      window.results.ws = await new Promise((resolve) => {
        const ws = new WebSocket('${bOrigin.replace('http', 'ws')}/api/terminals/websocket/1');
        ws.onopen = () => resolve('open');
        ws.onerror = () => resolve('error');
      });
      window.results.done = true;
    })();
  </script>`);
});

async function mkInstance(userId, name, appPort) {
  const img = sql(srv, `INSERT INTO images (reference, app_ports) VALUES ('test/${name}:1', '[{"name":"web","port":80}]') RETURNING id`);
  const id = sql(srv, `INSERT INTO instances (user_id, name, image_id, state, desired) VALUES (${userId}, '${name}', ${img}, 'running', 'running') RETURNING id`);
  sql(srv, `INSERT INTO instance_ports VALUES (${id}, 'web', 80, '127.0.0.1', ${appPort})`);
  return sql(srv, `SELECT id FROM routes WHERE instance_id = ${id} AND port_name = 'web'`);
}

describe('cross-route takeover through a real browser', () => {
  let browser, context, page, aRoute, bRoute, aOrigin;

  before(async () => {
    for (const a of [victimApp, attackerApp]) await new Promise((r) => a.listen(0, '127.0.0.1', r));
    srv = await startServer({ args: [`--apps-domain=${DOMAIN}`, '--proxy-cache-ms=0'] });
    port = srv.port;
    const admin = new Client(srv.base);
    assert.equal((await admin.login('admin', ADMIN_PASSWORD)).status, 200);
    for (const u of ['alice', 'mallory'])
      assert.equal((await admin.post('/api/v1/users', { username: u, role: 'student', password: `${u}-password-1` })).status, 201);
    const uid = (n) => sql(srv, `SELECT id FROM users WHERE username = '${n}'`);
    aRoute = await mkInstance(uid('mallory'), 'evil', attackerApp.address().port);
    bRoute = await mkInstance(uid('alice'), 'mine', victimApp.address().port);
    aOrigin = `http://${aRoute}.${DOMAIN}:${port}`;
    bOrigin = `http://${bRoute}.${DOMAIN}:${port}`;
    bRouteUrl = `${bOrigin}/`;
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--disable-background-networking',
        '--disable-component-update', '--disable-sync', '--no-first-run',
        `--host-resolver-rules=MAP *.${DOMAIN} 127.0.0.1, MAP ${DOMAIN} 127.0.0.1`],
    });
    context = await browser.newContext({ locale: 'en-US' });
    page = await context.newPage();
    page.setDefaultTimeout(20000);
  });

  after(async () => {
    await browser?.close();
    await stopClean(srv);
    for (const s of upgraded) s.destroy();
    for (const a of [victimApp, attackerApp]) { a.closeAllConnections?.(); await new Promise((r) => a.close(r)); }
  });

  it('the victim signs in to her own app from its address (state-bound ticket through the UI)', async () => {
    await page.goto(bRouteUrl);
    await page.waitForURL(/#\/login\?open=/);
    await page.getByLabel('Username', { exact: true }).fill('alice');
    await page.getByLabel('Password', { exact: true }).fill('alice-password-1');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(new RegExp(`^${bOrigin}/$`));
    assert.match(await page.textContent('body'), /victim/);
    const cookies = await context.cookies(bRouteUrl);
    assert.ok(cookies.some((c) => c.name === 'gc_route' && c.httpOnly), JSON.stringify(cookies));
    assert.ok(!cookies.some((c) => c.name === 'gc_state'), 'the sign-in state is cleared');
    // the app's own host-only cookie passes; a Domain cookie and look-alikes of ours do not
    assert.ok(cookies.some((c) => c.name === 'app_ok'));
    assert.ok(!cookies.some((c) => c.name === 'tossed'), 'a Domain cookie was tossed onto the apps domain');
    assert.equal(cookies.filter((c) => c.name === 'gc_route').length, 1);
    assert.ok(!(await context.cookies(aOrigin + '/')).some((c) => c.name === 'tossed'));
    // B's own page may POST to its app
    victimSeen.length = 0;
    const own = await page.evaluate(async () => (await fetch('/api/own', { method: 'POST', body: '{}' })).status);
    assert.equal(own, 200);
    assert.deepEqual(victimSeen, ['POST /api/own']);
  });

  it('the attacker\'s page on another route cannot POST to her app nor open its websocket', async () => {
    // the victim's browser also holds a session on the attacker's route A
    // (as redeeming the attacker's ticket once gave it)
    const msid = sql(srv, `SELECT s.id FROM sessions s JOIN users u ON u.id = s.user_id WHERE u.username = 'mallory' LIMIT 1`);
    const mallory = new Client(srv.base);
    let sid = msid;
    if (!sid) {
      assert.equal((await mallory.login('mallory', 'mallory-password-1')).status, 200);
      sid = sql(srv, `SELECT s.id FROM sessions s JOIN users u ON u.id = s.user_id WHERE u.username = 'mallory' LIMIT 1`);
    }
    const aCookie = randomBytes(32).toString('base64url');
    sql(srv, `INSERT INTO route_sessions (token_hash, route_id, user_id, session_id, expires_at)
      SELECT '${sha(aCookie)}', '${aRoute}', id, ${sid}, now() + interval '1 hour' FROM users WHERE username = 'mallory'`);
    await context.addCookies([{ name: 'gc_route', value: aCookie, domain: `${aRoute}.${DOMAIN}`, path: '/', httpOnly: true, sameSite: 'Lax' }]);
    victimSeen.length = 0;
    await page.goto(`${aOrigin}/attack`);
    assert.ok(await page.waitForFunction(() => window.results && window.results.done, null, { timeout: 15000 }));
    const results = await page.evaluate(() => window.results);
    assert.equal(results.ws, 'error', `the websocket opened: ${JSON.stringify(results)}`);
    assert.deepEqual(victimSeen, [], `the victim's app received: ${victimSeen.join(', ')}`);
  });

  it('refuses cross-route POSTs and upgrades at the proxy with a JSON 403 (raw requests as a browser sends them)', async () => {
    const cookie = (await context.cookies(bRouteUrl)).find((c) => c.name === 'gc_route');
    const hostB = `${bRoute}.${DOMAIN}:${port}`;
    const send = async (head) => {
      const c = await RawConn.open(port);
      c.write(head);
      const r = await c.response();
      c.destroy();
      return r;
    };
    victimSeen.length = 0;
    const base = `Host: ${hostB}\r\nCookie: gc_route=${cookie.value}\r\n`;
    const post = (extra) => send(`POST /api/terminals HTTP/1.1\r\n${base}${extra}Content-Length: 2\r\n\r\n{}`);
    const ws = (extra) => send(`GET /ws HTTP/1.1\r\n${base}Upgrade: websocket\r\nConnection: Upgrade\r\n` +
      `Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n${extra}\r\n`);
    for (const extra of [`Origin: ${aOrigin}\r\n`, `Origin: ${aOrigin}\r\nSec-Fetch-Site: same-site\r\n`,
      'Origin: null\r\n', `Sec-Fetch-Site: same-site\r\n`, `Sec-Fetch-Site: cross-site\r\n`,
      `Referer: ${aOrigin}/attack\r\n`, `Origin: http://${DOMAIN}:${port}\r\n`]) {
      for (const r of [await post(extra), await ws(extra)]) {
        assert.equal(r.status, 403, `${extra}: ${r.status}`);
        assert.equal(r.json?.error?.code, 'forbidden', r.text);
      }
    }
    // a subresource GET from another route is refused too; a navigation is not
    const sub = await send(`GET /api/contents HTTP/1.1\r\n${base}Sec-Fetch-Site: same-site\r\nSec-Fetch-Mode: cors\r\n\r\n`);
    assert.equal(sub.status, 403);
    assert.deepEqual(victimSeen, []);
    const nav = await send(`GET /tree HTTP/1.1\r\n${base}Sec-Fetch-Site: same-site\r\nSec-Fetch-Mode: navigate\r\n\r\n`);
    assert.equal(nav.status, 200);
    // its own origin, and a non-browser client (no Origin, no Sec-Fetch-*), pass
    assert.equal((await post(`Origin: ${bOrigin}\r\nSec-Fetch-Site: same-origin\r\n`)).status, 200);
    assert.equal((await post('')).status, 200);
    assert.equal((await ws(`Origin: ${bOrigin}\r\n`)).status, 101);
    assert.ok(await eventually(() => victimSeen.includes('UPGRADE /ws'), 2000));
  });
});
