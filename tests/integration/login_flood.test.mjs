// login_flood.test.mjs — login floods against the real server: concurrent
// guesses at one account are refused before they are hashed (429) and do
// not stall other users' file work; a flood from one address does not lock
// the owner out from another; the per-account hourly budgets and their
// reserves for known and new addresses; X-Forwarded-For believed only from
// trusted_proxies.
//
// Different client addresses are real source addresses on the loopback
// (127.0.0.2, 127.0.0.3 …) or, behind a trusted proxy, X-Forwarded-For.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { startServer, Client, ADMIN_PASSWORD } from '../lib/server.mjs';
import { sql, eventually, stopClean } from '../lib/itest.mjs';

const agent = new http.Agent({ keepAlive: false, maxSockets: 2000 });

// One login over its own connection, from localAddress, with extra headers.
function rawLogin(base, username, password, { localAddress, headers = {} } = {}) {
  const u = new URL(base);
  const body = JSON.stringify({ username, password });
  return new Promise((resolve, reject) => {
    const req = http.request({
      host: u.hostname, port: u.port, path: '/api/v1/auth/login', method: 'POST', agent, localAddress,
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...headers },
    }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { text += d; });
      res.on('end', () => {
        let json = null;
        try { json = JSON.parse(text); } catch { /* not JSON */ }
        resolve({ status: res.statusCode, headers: res.headers, json, text });
      });
    });
    req.setTimeout(120000, () => req.destroy(new Error('login timed out')));
    req.on('error', reject);
    req.end(body);
  });
}

const failures = (srv, user) =>
  Number(sql(srv, `SELECT count(*) FROM audit_log WHERE action = 'login.failure' AND target = '${user}'`));

async function makeUser(admin, username, password, role = 'student') {
  const r = await admin.post('/api/v1/users', { username, role, password });
  assert.equal(r.status, 201, r.text);
  return r.json.user.id;
}

describe('a login flood at one account', () => {
  let srv, admin, bystander;

  before(async () => {
    // the real scrypt cost: a flood that reached the hash would take minutes
    srv = await startServer();
    admin = new Client(srv.base);
    assert.equal((await admin.login('admin', ADMIN_PASSWORD)).status, 200);
    await makeUser(admin, 'victim', 'victim-pass-01');
    await makeUser(admin, 'bystander', 'bystander-pass-01');
    bystander = new Client(srv.base);
    assert.equal((await bystander.login('bystander', 'bystander-pass-01')).status, 200);
    for (const n of ['a.txt', 'b.txt', 'c.txt']) {
      const put = await bystander.req('PUT', `/api/v1/files/home/${n}`, `hello ${n}\n`, { 'content-type': 'application/octet-stream' });
      assert.equal(put.status, 201, put.text);
    }
  });
  after(async () => { await stopClean(srv); });

  const listing = async () => {
    const t0 = Date.now();
    const r = await fetch(`${srv.base}/api/v1/files/home/`, { headers: { cookie: bystander.cookieHeader() }, signal: AbortSignal.timeout(15000) })
      .then(async (res) => ({ status: res.status, json: await res.json() }))
      .catch((e) => ({ status: 0, error: String(e) }));
    return { ...r, ms: Date.now() - t0 };
  };

  it('verifies a handful of 400 concurrent wrong guesses, refuses the rest with 429, and file listings go on', async (t) => {
    const base = await listing();
    assert.equal(base.status, 200, JSON.stringify(base));
    const flood = Promise.all(Array.from({ length: 400 }, (_, i) =>
      rawLogin(srv.base, 'victim', `wrong-guess-${i}`, { localAddress: '127.0.0.2' }).catch((e) => ({ status: 0, text: String(e) }))));
    await new Promise((r) => setTimeout(r, 300));
    const during = [];
    for (let i = 0; i < 3; i++) during.push(await listing());
    const res = await flood;
    for (const l of during) {
      assert.equal(l.status, 200, `a listing during the flood: ${JSON.stringify(l)}`);
      assert.ok(l.ms < 2000, `a listing took ${l.ms} ms during the flood (${base.ms} ms before)`);
    }
    const by = {};
    for (const r of res) by[r.status] = (by[r.status] || 0) + 1;
    t.diagnostic(`answers ${JSON.stringify(by)}; listing ${base.ms} ms before, ${during.map((l) => l.ms).join('/')} ms during`);
    assert.deepEqual(Object.keys(by).sort(), Object.keys(by).filter((s) => s === '401' || s === '429').sort(),
      `answers: ${JSON.stringify(by)}`);
    assert.ok((by[401] || 0) <= 6, `verified ${by[401]} of 400 guesses: ${JSON.stringify(by)}`);
    assert.ok((by[429] || 0) >= 394, JSON.stringify(by));
    const throttled = res.find((r) => r.status === 429);
    assert.equal(throttled.json.error.code, 'throttled');
    assert.ok(Number(throttled.headers['retry-after']) >= 1);
    // what was hashed is what the audit log shows as failures
    await eventually(() => failures(srv, 'victim') === (by[401] || 0), 3000);
    assert.equal(failures(srv, 'victim'), by[401] || 0);
  });

  it('lets the owner in from another address right after', async () => {
    const r = await rawLogin(srv.base, 'victim', 'victim-pass-01', { localAddress: '127.0.0.3' });
    assert.equal(r.status, 200, r.text);
  });
});

describe('a lock-out attempt from one address', () => {
  let srv;

  before(async () => {
    srv = await startServer({ args: ['--scrypt-ln=10'] });
    const admin = new Client(srv.base);
    assert.equal((await admin.login('admin', ADMIN_PASSWORD)).status, 200);
    await makeUser(admin, 'owner', 'owner-pass-0001');
  });
  after(async () => { await stopClean(srv); });

  it('does not stop the owner logging in from elsewhere, during the flood or after', async (t) => {
    let stop = false, sent = 0;
    const attacker = (async () => {
      while (!stop) {
        await Promise.all(Array.from({ length: 25 }, () =>
          rawLogin(srv.base, 'owner', `guess-${sent++}`, { localAddress: '127.0.0.2' }).catch(() => null)));
      }
    })();
    await new Promise((r) => setTimeout(r, 1500));
    const during = [];
    for (let i = 0; i < 3; i++) {
      during.push(await rawLogin(srv.base, 'owner', 'owner-pass-0001', { localAddress: '127.0.0.3' }));
      await new Promise((r) => setTimeout(r, 300));
    }
    stop = true;
    await attacker;
    t.diagnostic(`${sent} guesses; the owner got ${during.map((r) => r.status).join(',')}`);
    assert.ok(sent >= 200, `only ${sent} guesses sent`);
    assert.deepEqual(during.map((r) => r.status), [200, 200, 200], during.map((r) => r.text).join(' | '));
    const after = await rawLogin(srv.base, 'owner', 'owner-pass-0001', { localAddress: '127.0.0.4' });
    assert.equal(after.status, 200, after.text);
    // the attacker's own address is the one backed off
    const again = await rawLogin(srv.base, 'owner', 'owner-pass-0001', { localAddress: '127.0.0.2' });
    assert.equal(again.status, 429, again.text);
  });
});

describe('per-account budgets and trusted proxies', () => {
  let srv, plain, proxiedId;
  const xff = (a) => ({ headers: { 'x-forwarded-for': a } });

  before(async () => {
    srv = await startServer({ args: ['--scrypt-ln=10', '--login-free-failures=1', '--login-account-failures=3',
      '--login-reserve-failures=2', '--trusted-proxies=10.9.0.0/16, 127.0.0.1'] });
    plain = await startServer({ args: ['--scrypt-ln=10', '--login-free-failures=1'] });
    const admin = new Client(srv.base);
    assert.equal((await admin.login('admin', ADMIN_PASSWORD)).status, 200);
    await makeUser(admin, 'budget', 'budget-pass-0001');
    proxiedId = await makeUser(admin, 'proxied', 'proxied-pass-001');
  });
  after(async () => { await stopClean(srv); await stopClean(plain); });

  it('keeps a reserve for known and for new addresses once the hour is spent, within the ceiling', async () => {
    // the owner logs in from home once: a known address
    assert.equal((await rawLogin(srv.base, 'budget', 'budget-pass-0001', xff('198.51.100.10'))).status, 200);
    // six addresses guess once each: three from the account's budget, two
    // from the reserve for new addresses, then nothing more is hashed
    const codes = [];
    for (let i = 1; i <= 6; i++) codes.push((await rawLogin(srv.base, 'budget', 'wrong-pass', xff(`203.0.113.${i}`))).status);
    assert.deepEqual(codes, [401, 401, 401, 401, 401, 429]);
    const spent = await rawLogin(srv.base, 'budget', 'budget-pass-0001', xff('203.0.113.60'));
    assert.equal(spent.status, 429, 'the reserve for new addresses is spent');
    assert.ok(Number(spent.headers['retry-after']) > 60, `Retry-After ${spent.headers['retry-after']}`);
    // the known address still gets in, and its own mistakes come from its reserve
    assert.equal((await rawLogin(srv.base, 'budget', 'budget-pass-0001', xff('198.51.100.10'))).status, 200);
    assert.equal((await rawLogin(srv.base, 'budget', 'wrong-pass', xff('198.51.100.10'))).status, 401);
    await eventually(() => failures(srv, 'budget') === 6, 3000);
    assert.equal(failures(srv, 'budget'), 6, 'verified failures: 3 + 2 + 1, at most 3 + 2 x 2');
  });

  it('takes the right-most address no trusted proxy added, for throttling and the audit log', async () => {
    const cases = [
      ['6.6.6.6, 203.0.113.77', '203.0.113.77'],            // what the client wrote itself is ignored
      ['203.0.113.78, 10.9.3.4', '203.0.113.78'],           // through a second trusted proxy
      ['10.9.0.1, 10.9.0.2', '10.9.0.1'],                   // all trusted: the left-most
      ['203.0.113.79, not-an-address', '127.0.0.1'],        // garbage: the last hop believed
    ];
    for (const [header, want] of cases) {
      const r = await rawLogin(srv.base, `nobody-${want}`, 'whatever-pass', xff(header));
      assert.equal(r.status, 401, r.text);
      assert.ok(await eventually(() => sql(srv, `SELECT ip FROM audit_log WHERE target = 'nobody-${want}' ORDER BY id DESC LIMIT 1`) === want, 3000),
        `X-Forwarded-For '${header}': audit ip ${sql(srv, `SELECT ip FROM audit_log WHERE target = 'nobody-${want}' ORDER BY id DESC LIMIT 1`)}, want ${want}`);
    }
    // sessions record it too
    const c = await rawLogin(srv.base, 'proxied', 'proxied-pass-001', xff('6.6.6.6, 198.51.100.11'));
    assert.equal(c.status, 200, c.text);
    assert.equal(sql(srv, `SELECT ip FROM sessions WHERE user_id = ${proxiedId} ORDER BY id DESC LIMIT 1`), '198.51.100.11');
  });

  it('gives each address behind the proxy its own bucket', async () => {
    // ten free failures per address (login_free_failures=1)
    for (let i = 0; i < 10; i++)
      assert.equal((await rawLogin(srv.base, `ghost${i}`, 'whatever-pass', xff('203.0.113.100'))).status, 401);
    assert.equal((await rawLogin(srv.base, 'ghost-x', 'whatever-pass', xff('203.0.113.100'))).status, 429);
    assert.equal((await rawLogin(srv.base, 'ghost-y', 'whatever-pass', xff('203.0.113.101'))).status, 401,
      'another address behind the same proxy is throttled');
  });

  it('believes no X-Forwarded-For without trusted_proxies', async () => {
    for (let i = 0; i < 10; i++)
      assert.equal((await rawLogin(plain.base, `ghost${i}`, 'whatever-pass', xff(`203.0.113.${i}`))).status, 401);
    assert.equal((await rawLogin(plain.base, 'ghost-z', 'whatever-pass', xff('203.0.113.200'))).status, 429,
      'a client escapes its bucket with X-Forwarded-For');
    assert.ok(await eventually(() => sql(plain, "SELECT ip FROM audit_log WHERE target = 'ghost0'") === '127.0.0.1', 3000));
  });
});
