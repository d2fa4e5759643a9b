// Authentication and accounts: login failures, session cookies, logout,
// expiry, rotation, CSRF and Origin, roles, API tokens, secrets stored only
// as hashes, password change and reset, self-demotion, disabled accounts,
// user lists, CSV import and the audit log.
//
// Each login costs about 0.5 s of scrypt, so sessions are reused and
// expiry is produced with SQL instead of waiting.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, Client, ADMIN_PASSWORD } from '../lib/server.mjs';
import { call, sql, sha256hex, assertErrorShape, assertAlive, eventually, stopClean } from '../lib/itest.mjs';

const PW = {
  stu: 'student-pass-1',
  tea: 'teacher-pass-1',
  pwu: 'pwchange-pass-1',
  rst: 'reset-pass-0001',
  dis: 'disabled-pass-1',
};

const cookieOf = (client) => client.cookieHeader();
const sessionValue = (client) => client.cookies.get('gc_session');

describe('authentication and accounts', () => {
  let srv, admin, loginRes;
  const ids = {};

  before(async () => {
    srv = await startServer();
    admin = new Client(srv.base);
    loginRes = await admin.login('admin', ADMIN_PASSWORD);
    assert.equal(loginRes.status, 200, loginRes.text);
    const roles = { stu: 'student', tea: 'teacher', pwu: 'researcher', rst: 'student', dis: 'student' };
    const made = await Promise.all(Object.keys(PW).map((u) => admin.post('/api/v1/users',
      { username: u, role: roles[u], password: PW[u], display_name: `User ${u}`, email: `${u}@example.org` })));
    for (const r of made) {
      assert.equal(r.status, 201, r.text);
      assert.equal(r.json.password, undefined, 'a password chosen by the admin is not echoed');
      ids[r.json.user.username] = r.json.user.id;
    }
  });
  after(async () => { await stopClean(srv); });

  async function loginAs(user, password = PW[user]) {
    const c = new Client(srv.base);
    const r = await c.login(user, password);
    assert.equal(r.status, 200, `login ${user}: ${r.text}`);
    return c;
  }

  it('answers a wrong password and an unknown user alike with 401', async () => {
    const wrong = await new Client(srv.base).login('admin', 'not-the-password');
    const unknown = await new Client(srv.base).login('nobody-here', 'not-the-password');
    assert.equal(wrong.status, 401);
    assert.equal(unknown.status, 401);
    assertErrorShape(wrong.json, 'unauthorized');
    assertErrorShape(unknown.json, 'unauthorized');
    assert.deepEqual(unknown.json, wrong.json, 'the answer must not tell whether the account exists');
    assert.equal(wrong.headers.getSetCookie().length, 0, 'no cookie on a failed login');
    // the username is matched case-insensitively, the password is not
    const upper = await new Client(srv.base).login('admin', ADMIN_PASSWORD.toUpperCase());
    assert.equal(upper.status, 401);
  });

  it('sets the session cookie HttpOnly, SameSite=Lax, Path=/ and not Secure over plain HTTP', async () => {
    const cookies = loginRes.headers.getSetCookie();
    assert.equal(cookies.length, 1, cookies.join(' | '));
    const [kv, ...attrs] = cookies[0].split(';').map((s) => s.trim());
    const [name, value] = [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)];
    assert.equal(name, 'gc_session');
    assert.match(value, /^[A-Za-z0-9_-]{43,}$/, 'at least 256 random bits, URL-safe');
    const lower = attrs.map((a) => a.toLowerCase());
    assert.ok(lower.includes('httponly'), cookies[0]);
    assert.ok(lower.includes('samesite=lax'), cookies[0]);
    assert.ok(lower.includes('path=/'), cookies[0]);
    assert.ok(!lower.includes('secure'), 'Secure on plain HTTP would make browsers drop the cookie');
    assert.ok(!lower.some((a) => a.startsWith('domain=')), 'a host-only cookie');
    const maxAge = lower.find((a) => a.startsWith('max-age='));
    if (maxAge) assert.ok(Number(maxAge.slice(8)) > 0);
    assert.match(loginRes.json.csrf_token, /^[A-Za-z0-9_-]{32,}$/);
    assert.equal(loginRes.json.user.username, 'admin');
    assert.equal(loginRes.json.user.role, 'admin');
    assert.ok(!('password_hash' in loginRes.json.user));
    assert.equal(loginRes.headers.get('cache-control'), 'no-store');
  });

  it('stores only a hash of the session cookie', async () => {
    const value = sessionValue(admin);
    const rows = sql(srv, 'SELECT row_to_json(s)::text FROM sessions s');
    assert.ok(rows.length > 0);
    assert.ok(!rows.includes(value), 'the cookie value is stored in plain text');
    assert.equal(sql(srv, `SELECT count(*) FROM sessions WHERE token_hash = '${sha256hex(value)}'`), '1');
  });

  it('requires authentication for everything but the public routes', async () => {
    for (const [m, p] of [['GET', '/api/v1/me'], ['GET', '/api/v1/users'], ['GET', '/api/v1/tokens'],
      ['POST', '/api/v1/auth/logout'], ['GET', '/api/v1/audit'], ['GET', '/api/v1/users/1']]) {
      const r = await call(srv.base, m, p, { origin: srv.base });
      assert.equal(r.status, 401, `${m} ${p}`);
      assertErrorShape(r.json, 'unauthorized');
    }
    const forged = await call(srv.base, 'GET', '/api/v1/me', { cookie: 'gc_session=' + 'A'.repeat(43) });
    assert.equal(forged.status, 401);
  });

  it('checks the CSRF token and the Origin on cookie-authenticated mutations', async () => {
    const cookie = cookieOf(admin), csrf = admin.csrf, body = { name: 'csrf-probe', scopes: ['read'] };
    const cases = [
      ['no CSRF token', { cookie, origin: srv.base, body }],
      ['wrong CSRF token', { cookie, csrf: csrf.slice(0, -2) + (csrf.endsWith('AA') ? 'BB' : 'AA'), origin: srv.base, body }],
      ['CSRF token of the wrong length', { cookie, csrf: csrf + 'x', origin: srv.base, body }],
      ['foreign Origin', { cookie, csrf, origin: 'http://evil.example', body }],
      ['Origin null', { cookie, csrf, origin: 'null', body }],
      ['Origin of another port', { cookie, csrf, origin: `http://127.0.0.1:${srv.port + 1}`, body }],
      ['no Origin nor Referer', { cookie, csrf, body }],
      ['Referer on a look-alike host', { cookie, csrf, referer: `${srv.base}.evil.example/`, body }],
      ['https Origin on an http site', { cookie, csrf, origin: srv.base.replace('http:', 'https:'), body }],
    ];
    for (const [what, opts] of cases) {
      const r = await call(srv.base, 'POST', '/api/v1/tokens', opts);
      assert.equal(r.status, 403, `${what}: ${r.status} ${r.text}`);
      assertErrorShape(r.json, 'forbidden');
    }
    // logout is a mutation too
    const lo = await call(srv.base, 'POST', '/api/v1/auth/logout', { cookie, origin: srv.base });
    assert.equal(lo.status, 403);
    assert.equal(sql(srv, "SELECT count(*) FROM api_tokens WHERE name = 'csrf-probe'"), '0');
    // the right token from our own page, shown by Referer alone, passes
    const ok = await call(srv.base, 'POST', '/api/v1/tokens', { cookie, csrf, referer: `${srv.base}/account`, body });
    assert.equal(ok.status, 201, ok.text);
    // the session still works after all the refusals
    assert.equal((await admin.get('/api/v1/me')).status, 200);
  });

  it('refuses admin routes to a student and a teacher with 403', async () => {
    const stu = await loginAs('stu');
    const tea = await loginAs('tea');
    for (const c of [stu, tea]) {
      for (const [m, p, b] of [['GET', '/api/v1/users'], ['POST', '/api/v1/users', { username: 'mallory', role: 'admin' }],
        ['GET', `/api/v1/users/${ids.stu}`], ['PATCH', `/api/v1/users/${ids.stu}`, { role: 'admin' }],
        ['POST', `/api/v1/users/${ids.stu}/password`, {}], ...(c === stu ? [['GET', '/api/v1/audit']] : [])]) {
        const r = await c.req(m, p, b);
        assert.equal(r.status, 403, `${m} ${p}: ${r.status}`);
        assertErrorShape(r.json, 'forbidden');
      }
      const imp = await c.req('POST', '/api/v1/users/import', 'username,role\nmallory,admin\n', { 'content-type': 'text/csv' });
      assert.equal(imp.status, 403);
    }
    // a teacher reads the audit log of the classes they teach: none here
    const ta = await tea.get('/api/v1/audit');
    assert.equal(ta.status, 200);
    assert.deepEqual(ta.json.items, []);
    assert.equal(sql(srv, "SELECT role FROM users WHERE username = 'stu'"), 'student');
    assert.equal(sql(srv, "SELECT count(*) FROM users WHERE username = 'mallory'"), '0');
    const me = await stu.get('/api/v1/me');
    assert.equal(me.status, 200);
    assert.equal(me.json.user.role, 'student');
    assert.equal(me.json.csrf_token, stu.csrf);
  });

  it('rotates the session on login and revokes it on logout', async () => {
    const c = await loginAs('stu');
    const first = cookieOf(c);
    const again = await c.login('stu', PW.stu); // presents the first cookie
    assert.equal(again.status, 200);
    const second = cookieOf(c);
    assert.notEqual(first, second, 'login must issue a new session id');
    assert.notEqual(again.json.csrf_token, undefined);
    const old = await eventually(async () => (await call(srv.base, 'GET', '/api/v1/me', { cookie: first })).status === 401, 2000);
    assert.ok(old, 'the session presented at login still works');
    assert.equal((await c.get('/api/v1/me')).status, 200);

    const out = await c.post('/api/v1/auth/logout');
    assert.equal(out.status, 204);
    const cleared = out.headers.getSetCookie();
    assert.ok(cleared.some((s) => /^gc_session=;/.test(s) && /max-age=0/i.test(s)), `logout clears the cookie: ${cleared}`);
    const after = await call(srv.base, 'GET', '/api/v1/me', { cookie: second });
    assert.equal(after.status, 401);
    assertErrorShape(after.json, 'unauthorized');
    assert.equal(sql(srv, `SELECT revoked_at IS NOT NULL FROM sessions WHERE token_hash = '${sha256hex(second.split('=')[1])}'`), 't');
  });

  it('ends a session past its absolute expiry or idle too long', async () => {
    const c = await loginAs('tea');
    const h = sha256hex(sessionValue(c));
    const me = () => call(srv.base, 'GET', '/api/v1/me', { cookie: cookieOf(c) });
    assert.equal((await me()).status, 200);

    sql(srv, `UPDATE sessions SET created_at = now() - interval '2 hours', expires_at = now() - interval '1 second' WHERE token_hash = '${h}'`);
    const expired = await me();
    assert.equal(expired.status, 401);
    assertErrorShape(expired.json, 'unauthorized');
    sql(srv, `UPDATE sessions SET expires_at = now() + interval '1 hour' WHERE token_hash = '${h}'`);
    assert.equal((await me()).status, 200, 'the expiry, nothing else, ended the session');

    // idle: default session_idle_timeout is 8 hours
    sql(srv, `UPDATE sessions SET last_seen_at = now() - interval '8 hours 1 minute' WHERE token_hash = '${h}'`);
    assert.equal((await me()).status, 401, 'an idle session must end');
    sql(srv, `UPDATE sessions SET last_seen_at = now() - interval '7 hours' WHERE token_hash = '${h}'`);
    assert.equal((await me()).status, 200);
    // use refreshes last_seen_at (lazily, at most once a minute)
    const fresh = await eventually(() => sql(srv,
      `SELECT last_seen_at > now() - interval '1 minute' FROM sessions WHERE token_hash = '${h}'`) === 't', 3000);
    assert.ok(fresh, 'using a session does not refresh last_seen_at');
  });

  describe('API tokens', () => {
    let ro, rw;

    it('creates a token shown once with the gct_ prefix', async () => {
      const r = await admin.post('/api/v1/tokens', { name: 'reader', scopes: ['read'], expires_in_days: 7 });
      assert.equal(r.status, 201, r.text);
      ro = r.json;
      assert.match(ro.token, /^gct_[A-Za-z0-9_-]{43}$/);
      assert.deepEqual(ro.scopes, ['read']);
      assert.ok(ro.token.startsWith(ro.prefix) && ro.prefix.length < ro.token.length - 20, 'prefix gives away little');
      const days = (Date.parse(ro.expires_at) - Date.now()) / 86400e3;
      assert.ok(days > 6.9 && days < 7.1, `expires in ${days} days`);
      const w = await admin.post('/api/v1/tokens', { name: 'writer', scopes: ['read', 'write'] });
      assert.equal(w.status, 201);
      rw = w.json;
      const list = await admin.get('/api/v1/tokens');
      assert.equal(list.status, 200);
      const names = list.json.items.map((t) => t.name);
      assert.ok(names.includes('reader') && names.includes('writer'));
      assert.ok(!list.text.includes(ro.token) && !list.text.includes(rw.token), 'a token is shown once only');
      assert.ok(list.json.items.every((t) => !('token' in t) && !('token_hash' in t)));
      const dup = await admin.post('/api/v1/tokens', { name: 'reader', scopes: ['read'] });
      assert.equal(dup.status, 409);
      assertErrorShape(dup.json, 'conflict');
    });

    it('stores only a SHA-256 of the token', async () => {
      const rows = sql(srv, 'SELECT row_to_json(t)::text FROM api_tokens t');
      for (const t of [ro.token, rw.token]) {
        assert.ok(!rows.includes(t), 'a token is stored in plain text');
        assert.ok(!rows.includes(t.slice(12)), 'the secret part of a token is stored');
        assert.equal(sql(srv, `SELECT count(*) FROM api_tokens WHERE token_hash = '${sha256hex(t)}'`), '1');
      }
    });

    it('accepts a read token as Bearer for reads and refuses it for writes', async () => {
      const me = await call(srv.base, 'GET', '/api/v1/me', { bearer: ro.token });
      assert.equal(me.status, 200);
      assert.equal(me.json.user.username, 'admin');
      assert.equal(me.json.auth, 'token');
      assert.equal(me.json.csrf_token, undefined, 'token requests get no CSRF token');
      assert.equal((await call(srv.base, 'GET', '/api/v1/users', { bearer: ro.token })).status, 200);
      const w = await call(srv.base, 'PATCH', `/api/v1/users/${ids.stu}`, { bearer: ro.token, body: { display_name: 'x' } });
      assert.equal(w.status, 403);
      assertErrorShape(w.json, 'forbidden');
      assert.equal(sql(srv, `SELECT display_name FROM users WHERE id = ${ids.stu}`), 'User stu');
      const used = await eventually(() => sql(srv, `SELECT last_used_at IS NOT NULL FROM api_tokens WHERE id = ${ro.id}`) === 't', 3000);
      assert.ok(used, 'last_used_at is not recorded');
    });

    it('lets a write token mutate without CSRF, but never mint tokens or change passwords', async () => {
      const w = await call(srv.base, 'PATCH', `/api/v1/users/${ids.stu}`, { bearer: rw.token, body: { display_name: 'Student Stu' } });
      assert.equal(w.status, 200, w.text);
      assert.equal(w.json.display_name, 'Student Stu');
      for (const bearer of [rw.token, ro.token]) {
        const t = await call(srv.base, 'POST', '/api/v1/tokens', { bearer, body: { name: 'child', scopes: ['read'] } });
        assert.equal(t.status, 403, t.text);
        assertErrorShape(t.json, 'forbidden');
      }
      assert.equal(sql(srv, "SELECT count(*) FROM api_tokens WHERE name = 'child'"), '0');
      const pw = await call(srv.base, 'POST', '/api/v1/me/password', { bearer: rw.token,
        body: { current_password: ADMIN_PASSWORD, new_password: 'something-new-1' } });
      assert.equal(pw.status, 403);
      const lo = await call(srv.base, 'POST', '/api/v1/auth/logout', { bearer: rw.token });
      assert.ok(lo.status >= 400 && lo.status < 500, `logout with a token: ${lo.status}`);
      assert.equal((await call(srv.base, 'GET', '/api/v1/me', { bearer: rw.token })).status, 200);
    });

    it('never accepts a token in the URL or under another scheme', async () => {
      for (const q of [`access_token=${ro.token}`, `token=${ro.token}`, `bearer=${ro.token}`]) {
        const r = await call(srv.base, 'GET', `/api/v1/me?${q}`);
        assert.equal(r.status, 401, q);
      }
      const basic = await call(srv.base, 'GET', '/api/v1/me', { headers: { authorization: `Basic ${Buffer.from(`admin:${ro.token}`).toString('base64')}` } });
      assert.equal(basic.status, 401);
      const token = await call(srv.base, 'GET', '/api/v1/me', { headers: { authorization: `Token ${ro.token}` } });
      assert.equal(token.status, 401);
      const wrong = await call(srv.base, 'GET', '/api/v1/me', { bearer: ro.token.slice(0, -1) + (ro.token.endsWith('A') ? 'B' : 'A') });
      assert.equal(wrong.status, 401);
    });

    it('refuses a revoked token and an expired one with 401', async () => {
      const del = await admin.del(`/api/v1/tokens/${ro.id}`);
      assert.equal(del.status, 204);
      const r = await call(srv.base, 'GET', '/api/v1/me', { bearer: ro.token });
      assert.equal(r.status, 401);
      assertErrorShape(r.json, 'unauthorized');
      assert.equal((await admin.del(`/api/v1/tokens/${ro.id}`)).status, 404, 'revoking twice');
      assert.ok(!(await admin.get('/api/v1/tokens')).json.items.some((t) => t.id === ro.id));

      sql(srv, `UPDATE api_tokens SET created_at = now() - interval '2 days', expires_at = now() - interval '1 second' WHERE id = ${rw.id}`);
      const ex = await call(srv.base, 'GET', '/api/v1/me', { bearer: rw.token });
      assert.equal(ex.status, 401);
      assertErrorShape(ex.json, 'unauthorized');
    });

    it("keeps users' tokens apart", async () => {
      const t = await admin.post('/api/v1/tokens', { name: 'admin-only', scopes: ['read'] });
      assert.equal(t.status, 201);
      const stu = await loginAs('stu');
      const mine = await stu.get('/api/v1/tokens');
      assert.equal(mine.status, 200);
      assert.deepEqual(mine.json.items, []);
      const steal = await stu.del(`/api/v1/tokens/${t.json.id}`);
      assert.equal(steal.status, 404);
      assert.equal((await call(srv.base, 'GET', '/api/v1/me', { bearer: t.json.token })).status, 200);
    });
  });

  it('changes a password: wrong current 403, policy 400, success ends the other sessions', async () => {
    const a = await loginAs('pwu');
    const b = await loginAs('pwu');
    const tok = await a.post('/api/v1/tokens', { name: 'pwu-script', scopes: ['read'] });
    assert.equal(tok.status, 201, tok.text);
    assert.equal((await call(srv.base, 'GET', '/api/v1/me', { bearer: tok.json.token })).status, 200);
    const wrong = await a.post('/api/v1/me/password', { current_password: 'not-it-at-all', new_password: 'brand-new-pass-1' });
    assert.equal(wrong.status, 403);
    assertErrorShape(wrong.json, 'forbidden');
    for (const np of ['short', 'pwu', '']) {
      const weak = await a.post('/api/v1/me/password', { current_password: PW.pwu, new_password: np });
      assert.equal(weak.status, 400, `new password '${np}'`);
      assertErrorShape(weak.json, 'invalid');
    }
    const csrfless = await call(srv.base, 'POST', '/api/v1/me/password',
      { cookie: cookieOf(a), origin: srv.base, body: { current_password: PW.pwu, new_password: 'brand-new-pass-1' } });
    assert.equal(csrfless.status, 403);
    const ok = await a.post('/api/v1/me/password', { current_password: PW.pwu, new_password: 'brand-new-pass-1' });
    assert.equal(ok.status, 204, ok.text);
    assert.equal((await a.get('/api/v1/me')).status, 200, 'the session that changed it goes on');
    assert.equal((await b.get('/api/v1/me')).status, 401, 'other sessions end');
    assert.equal((await call(srv.base, 'GET', '/api/v1/me', { bearer: tok.json.token })).status, 401,
      'an API token made before the change still works');
    assert.equal(sql(srv, `SELECT count(*) FROM api_tokens WHERE user_id = ${ids.pwu} AND revoked_at IS NULL`), '0');
    assert.equal((await new Client(srv.base).login('pwu', PW.pwu)).status, 401, 'the old password still works');
    await loginAs('pwu', 'brand-new-pass-1');
  });

  it('resets a password as admin: generated once, works, ends the sessions', async () => {
    const s = await loginAs('rst');
    const s2 = await loginAs('rst');
    const tok = await s.post('/api/v1/tokens', { name: 'rst-script', scopes: ['read', 'write'] });
    assert.equal(tok.status, 201, tok.text);
    const weak = await admin.post(`/api/v1/users/${ids.rst}/password`, { password: 'short' });
    assert.equal(weak.status, 400);
    assertErrorShape(weak.json, 'invalid');
    assert.equal((await s.get('/api/v1/me')).status, 200, 'a refused reset changes nothing');
    const r = await admin.post(`/api/v1/users/${ids.rst}/password`, {});
    assert.equal(r.status, 200, r.text);
    assert.equal(typeof r.json.password, 'string');
    assert.ok(r.json.password.length >= 16, 'a generated password is long');
    assert.equal((await s.get('/api/v1/me')).status, 401, "the user's sessions end");
    assert.equal((await s2.get('/api/v1/me')).status, 401, "the user's sessions end");
    assert.equal((await call(srv.base, 'GET', '/api/v1/me', { bearer: tok.json.token })).status, 401,
      "the user's API token survives an admin reset");
    assert.equal((await new Client(srv.base).login('rst', PW.rst)).status, 401);
    await loginAs('rst', r.json.password);
    const nf = await admin.post('/api/v1/users/999999/password', {});
    assert.equal(nf.status, 404);
    assertErrorShape(nf.json, 'not_found');
    const rows = sql(srv, 'SELECT row_to_json(a)::text FROM audit_log a');
    assert.ok(!rows.includes(r.json.password), 'the generated password reached the audit log');
  });

  it('refuses an admin demoting or disabling themselves with 409', async () => {
    const me = ids.admin = loginRes.json.user.id;
    for (const body of [{ role: 'teacher' }, { role: 'student' }, { disabled: true }, { role: 'admin', disabled: true }]) {
      const r = await admin.patch(`/api/v1/users/${me}`, body);
      assert.equal(r.status, 409, JSON.stringify(body));
      assertErrorShape(r.json, 'conflict');
    }
    assert.equal(sql(srv, `SELECT role || ' ' || disabled FROM users WHERE id = ${me}`), 'admin false');
    const fine = await admin.patch(`/api/v1/users/${me}`, { display_name: 'Chief' });
    assert.equal(fine.status, 200);
    assert.equal((await admin.get('/api/v1/me')).status, 200);
  });

  it('locks out a disabled user: no login (401, as a wrong password), sessions and tokens stop working', async () => {
    const d = await loginAs('dis');
    const tok = await d.post('/api/v1/tokens', { name: 'dis-token', scopes: ['read'] });
    assert.equal(tok.status, 201);
    const off = await admin.patch(`/api/v1/users/${ids.dis}`, { disabled: true });
    assert.equal(off.status, 200);
    assert.equal(off.json.disabled, true);
    assert.equal((await d.get('/api/v1/me')).status, 401, 'the session of a disabled user still works');
    assert.equal((await call(srv.base, 'GET', '/api/v1/me', { bearer: tok.json.token })).status, 401, 'the token of a disabled user still works');
    // the right password and a wrong one get the same answer: no oracle
    const again = await new Client(srv.base).login('dis', PW.dis);
    const wrong = await new Client(srv.base).login('dis', 'not-the-password');
    assert.equal(again.status, 401, again.text);
    assertErrorShape(again.json, 'unauthorized');
    assert.deepEqual(again.json, wrong.json, 'a disabled account tells the right password apart');
    assert.equal(again.headers.getSetCookie().length, 0);
    assert.ok(await eventually(() => sql(srv, "SELECT count(*) FROM audit_log WHERE action = 'login.disabled' AND target = 'dis'") === '1', 3000),
      'the attempt on a disabled account is audited');
    const on = await admin.patch(`/api/v1/users/${ids.dis}`, { disabled: false });
    assert.equal(on.status, 200);
    assert.equal((await d.get('/api/v1/me')).status, 401, 'sessions ended by disabling stay ended');
    await loginAs('dis');
  });

  describe('user list and CSV import', () => {
    const csv = (text) => admin.req('POST', '/api/v1/users/import', Buffer.from(text), { 'content-type': 'text/csv' });
    const count = (like) => sql(srv, `SELECT count(*) FROM users WHERE username LIKE '${like}'`);

    it('imports nothing from a file with bad lines and lists their numbers', async () => {
      const r = await csv('username,role\nimp-ok1,student\nBad Name,student\nimp-ok2,wizard\nimp-ok3,student\n');
      assert.equal(r.status, 400, r.text);
      assertErrorShape(r.json, 'invalid');
      const lines = r.json.error.details.map((d) => d.line).sort();
      assert.deepEqual(lines, [3, 4]);
      assert.ok(r.json.error.details.every((d) => typeof d.message === 'string' && d.message.length));
      assert.equal(count('imp-%'), '0', 'an import with errors created users');
    });

    it('refuses a username that exists or repeats, creating nothing', async () => {
      const r = await csv('username,role\nimp-new1,student\nstu,student\n');
      assert.equal(r.status, 400);
      assertErrorShape(r.json, 'invalid');
      assert.deepEqual(r.json.error.details.map((d) => d.line), [3]);
      assert.match(r.json.error.details[0].message, /stu/);
      const rep = await csv('username,role\nimp-twice,student\nimp-twice,teacher\n');
      assert.equal(rep.status, 400);
      assert.deepEqual(rep.json.error.details.map((d) => d.line), [3]);
      assert.equal(count('imp-%'), '0');
      for (const bad of ['', 'username\nimp-x\n', 'username,role,shoe_size\nimp-x,student,9\n', 'username,role\n']) {
        const e = await csv(bad);
        assert.equal(e.status, 400, JSON.stringify(bad));
        assertErrorShape(e.json, 'invalid');
      }
      assert.equal(count('imp-%'), '0');
    });

    it('imports a good file (BOM, CRLF, quotes) with generated passwords that work', async () => {
      const text = '\ufeffUsername,Display_Name,Email,Role,Password\r\n' +
        'imp-ann,"Doe, Ann",ann@example.org,student,\r\n' +
        'imp-bob,"Bob ""B"" Roe",,researcher,imp-bob-pass-1\r\n';
      const r = await csv(text);
      assert.equal(r.status, 200, r.text);
      const created = Object.fromEntries(r.json.created.map((u) => [u.username, u]));
      assert.deepEqual(Object.keys(created).sort(), ['imp-ann', 'imp-bob']);
      assert.equal(typeof created['imp-ann'].password, 'string', 'a generated password is returned');
      assert.equal(created['imp-bob'].password, undefined, 'a given password is not echoed');
      const ann = await admin.get(`/api/v1/users/${created['imp-ann'].id}`);
      assert.equal(ann.json.display_name, 'Doe, Ann');
      assert.equal(ann.json.email, 'ann@example.org');
      assert.equal(ann.json.role, 'student');
      const bob = await admin.get(`/api/v1/users/${created['imp-bob'].id}`);
      assert.equal(bob.json.display_name, 'Bob "B" Roe');
      assert.equal(bob.json.role, 'researcher');
      const c = await loginAs('imp-ann', created['imp-ann'].password);
      assert.equal((await c.get('/api/v1/me')).json.user.username, 'imp-ann');
      const again = await csv(text);
      assert.equal(again.status, 400, 'importing the same file twice');
    });

    it('pages through users with limit and cursor, and filters with q and role', async () => {
      const all = await admin.get('/api/v1/users?limit=500');
      assert.equal(all.status, 200);
      const allIds = all.json.items.map((u) => u.id);
      assert.ok(allIds.length >= 8);
      assert.equal(all.json.next_cursor, null);
      const seen = [];
      let cursor = '';
      for (let pages = 0; pages < 50; pages++) {
        const r = await admin.get(`/api/v1/users?limit=3${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
        assert.equal(r.status, 200);
        assert.ok(r.json.items.length <= 3);
        seen.push(...r.json.items.map((u) => u.id));
        if (r.json.next_cursor === null) break;
        assert.equal(r.json.items.length, 3, 'a page short of the limit carries a cursor');
        cursor = r.json.next_cursor;
      }
      assert.deepEqual(seen, allIds, 'pages skip or repeat users');
      assert.ok(all.json.items.every((u) => !('password_hash' in u) && !('failed_logins' in u)));

      const q = await admin.get('/api/v1/users?q=imp-');
      assert.deepEqual(q.json.items.map((u) => u.username).sort(), ['imp-ann', 'imp-bob']);
      const byName = await admin.get(`/api/v1/users?q=${encodeURIComponent('DOE, A')}`);
      assert.deepEqual(byName.json.items.map((u) => u.username), ['imp-ann'], 'q matches display names, case-insensitively');
      const teachers = await admin.get('/api/v1/users?role=teacher');
      assert.deepEqual(teachers.json.items.map((u) => u.username), ['tea']);
      const paged = await admin.get('/api/v1/users?q=imp-&limit=1');
      assert.equal(paged.json.items.length, 1);
      assert.notEqual(paged.json.next_cursor, null);
      const rest = await admin.get(`/api/v1/users?q=imp-&limit=1&cursor=${paged.json.next_cursor}`);
      assert.equal(rest.json.items.length, 1);
      assert.notEqual(rest.json.items[0].id, paged.json.items[0].id);
    });

    it('treats q as text, not as a LIKE pattern', async () => {
      for (const pat of ['%', '_', '\\']) {
        const r = await admin.get(`/api/v1/users?q=${encodeURIComponent(pat)}`);
        assert.equal(r.status, 200);
        assert.deepEqual(r.json.items.map((u) => u.username), [], `q=${pat} matched users without that character`);
      }
    });
  });

  it('records logins, failures and account changes in the audit log, without secrets', async () => {
    const want = ['login.success', 'login.failure', 'login.disabled', 'user.create', 'user.update', 'user.import',
      'token.create', 'token.revoke', 'password.change', 'password.reset', 'logout'];
    let items = [];
    const complete = await eventually(async () => {
      const r = await admin.get('/api/v1/audit?limit=500');
      assert.equal(r.status, 200);
      items = r.json.items;
      return want.every((a) => items.some((i) => i.action === a));
    }, 3000);
    const actions = new Set(items.map((i) => i.action));
    assert.ok(complete, `missing audit actions: ${want.filter((a) => !actions.has(a))}`);
    const fail = items.find((i) => i.action === 'login.failure' && i.target === 'nobody-here');
    assert.ok(fail, 'a failure for an unknown user is recorded with the name tried');
    assert.equal(fail.actor_id, null);
    assert.equal(fail.ip, '127.0.0.1');
    const created = items.filter((i) => i.action === 'user.create').map((i) => i.target);
    for (const u of Object.keys(PW)) assert.ok(created.includes(u), `user.create for ${u}`);
    const ok = items.find((i) => i.action === 'login.success' && i.target === 'admin');
    assert.equal(ok.actor, 'admin');
    assert.match(ok.request_id, /^[0-9a-f]{16}$/);
    for (let i = 1; i < items.length; i++) assert.ok(items[i].id < items[i - 1].id, 'newest first');
    const text = JSON.stringify(items);
    for (const secret of [...Object.values(PW), ADMIN_PASSWORD, 'not-the-password', 'brand-new-pass-1', 'imp-bob-pass-1']) {
      assert.ok(!text.includes(secret), `a password reached the audit log: ${secret}`);
    }
    const only = await admin.get('/api/v1/audit?action=login');
    assert.ok(only.json.items.length > 0);
    assert.ok(only.json.items.every((i) => i.action.startsWith('login.')));
    const page = await admin.get('/api/v1/audit?limit=2');
    assert.equal(page.json.items.length, 2);
    const next = await admin.get(`/api/v1/audit?limit=2&cursor=${page.json.next_cursor}`);
    assert.ok(next.json.items[0].id < page.json.items[1].id);
    await assertAlive(srv);
  });
});

describe('login throttling', () => {
  let srv;
  before(async () => {
    srv = await startServer({ args: ['--login-free-failures=2', '--login-max-delay=3'] });
  });
  after(async () => { await stopClean(srv); });

  const login = (password) => new Client(srv.base).login('admin', password);

  it('locks an account after repeated failures (429 + Retry-After), even for the right password', async () => {
    let t0 = Date.now();
    assert.equal((await login('wrong-1')).status, 401);
    assert.equal((await login('wrong-2')).status, 401);
    const hashed = (Date.now() - t0) / 2; // what checking a password costs here
    t0 = Date.now();
    const locked = await login('wrong-3');
    assert.equal(locked.status, 429, locked.text);
    assertErrorShape(locked.json, 'throttled');
    const ra = Number(locked.headers.get('retry-after'));
    assert.ok(Number.isInteger(ra) && ra >= 1 && ra <= 3, `Retry-After ${locked.headers.get('retry-after')}`);
    assert.ok(Date.now() - t0 < hashed / 2, `a throttled attempt took ${Date.now() - t0} ms, a hash ${hashed} ms`);
    const right = await login(ADMIN_PASSWORD);
    assert.equal(right.status, 429, 'the right password is accepted while locked');
    assert.equal(right.headers.getSetCookie().length, 0);
    await new Promise((r) => setTimeout(r, ra * 1000 + 300));
    const after = await login(ADMIN_PASSWORD);
    assert.equal(after.status, 200, after.text);
    // success resets the count
    assert.equal((await login('wrong-4')).status, 401);
  });

  it('doubles the wait with each failure, up to login_max_delay', async () => {
    // the account has one failure; each further failure locks it for
    // 1, 2, 4→3, 8→3 seconds. Instead of sleeping, the lock is lifted in SQL
    // (the failure count stays).
    const waits = [];
    for (let i = 0; i < 4; i++) {
      assert.equal((await login(`again-wrong-${i}`)).status, 401);
      const r = await login(`again-wrong-${i}b`);
      assert.equal(r.status, 429, `failure ${i + 2} did not lock the account`);
      waits.push(Number(r.headers.get('retry-after')));
      sql(srv, "UPDATE login_addresses SET locked_until = now() WHERE user_id = (SELECT id FROM users WHERE username = 'admin')");
    }
    assert.deepEqual(waits, [1, 2, 3, 3]);
    await assertAlive(srv);
  });
});

describe('per-address login throttling', () => {
  let srv;
  before(async () => {
    // one free failure per account, so ten per address
    srv = await startServer({ args: ['--login-free-failures=1', '--login-max-delay=3'] });
  });
  after(async () => { await stopClean(srv); });

  it('throttles an address that fails on many accounts, the right password included', async () => {
    // ten free failures; attempts under way count, so an eleventh at the
    // same time is refused before it is hashed
    let t0 = Date.now();
    const tries = await Promise.all(Array.from({ length: 11 }, (_, i) =>
      new Client(srv.base).login(`ghost${i}`, 'whatever-password')));
    const hashed = (Date.now() - t0) / 10;
    const codes = tries.map((r) => r.status).sort().join(',');
    assert.equal(codes, '401,401,401,401,401,401,401,401,401,401,429', codes);
    t0 = Date.now();
    const r = await new Client(srv.base).login('admin', ADMIN_PASSWORD);
    assert.equal(r.status, 429, `after 11 failures from one address: ${r.status}`);
    assertErrorShape(r.json, 'throttled');
    assert.ok(Date.now() - t0 < hashed, `a throttled attempt took ${Date.now() - t0} ms, a hash ${hashed} ms`);
    const ra = Number(r.headers.get('retry-after'));
    assert.ok(ra >= 1 && ra <= 3, `Retry-After ${ra}`);
    await new Promise((res) => setTimeout(res, ra * 1000 + 300));
    assert.equal((await new Client(srv.base).login('admin', ADMIN_PASSWORD)).status, 200);
  });
});
