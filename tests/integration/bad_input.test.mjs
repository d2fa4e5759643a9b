// Bad input gets a 4xx with {"error":{"code","message","hint"?}} — never a
// 500, never a crash: malformed JSON, wrong types, unknown fields, bad
// UTF-8, non-objects, duplicate keys, NULs, wrong Content-Type, deep nesting,
// bad path encodings and bad query parameters.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, Client, ADMIN_PASSWORD } from '../lib/server.mjs';
import { rawOnce, assertErrorShape, assertAlive, stopClean } from '../lib/itest.mjs';

describe('bad input', () => {
  let srv, admin;

  before(async () => {
    srv = await startServer();
    admin = new Client(srv.base);
    const r = await admin.login('admin', ADMIN_PASSWORD);
    assert.equal(r.status, 200, r.text);
  });
  after(async () => { await stopClean(srv); });

  // Sends raw body bytes with the admin's session and CSRF token.
  async function send(method, path, body, ctype = 'application/json') {
    const h = {};
    if (ctype) h['content-type'] = ctype;
    return admin.req(method, path, typeof body === 'string' ? Buffer.from(body) : body, h);
  }

  function expect400(r, what, re) {
    assert.equal(r.status, 400, `${what}: ${r.status} ${r.text}`);
    assertErrorShape(r.json, 'invalid');
    if (re) assert.match(r.json.error.message, re, what);
  }

  it('refuses malformed JSON', async () => {
    for (const body of ['{', '{"username":', '{"username":"a",}', "{'username':'a'}", 'nul', '{"a":1}x',
      '{"username":"a" "role":"student"}', '\u00ff', '{"username":"\\x41"}']) {
      expect400(await send('POST', '/api/v1/users', body), JSON.stringify(body));
    }
    expect400(await send('POST', '/api/v1/auth/login', '{"username":"admin","password":'), 'login');
    await assertAlive(srv);
  });

  it('refuses wrong types, naming the field', async () => {
    const cases = [
      [{ username: 5, role: 'student' }, /username/],
      [{ username: 'abc', role: ['student'] }, /role/],
      [{ username: 'abc', role: 'student', display_name: { x: 1 } }, /display_name/],
      [{ username: null, role: 'student' }, /username/],
      [{ username: 'abc', role: 'student', email: true }, /email/],
      [{ username: 'abc', role: 'student', password: 123456789 }, /password/],
    ];
    for (const [body, re] of cases) expect400(await admin.post('/api/v1/users', body), JSON.stringify(body), re);
    expect400(await admin.patch('/api/v1/users/1', { disabled: 'yes' }), 'disabled as string', /disabled/);
    expect400(await admin.post('/api/v1/tokens', { name: 'x', scopes: 'read' }), 'scopes as string', /scopes/);
    expect400(await admin.post('/api/v1/tokens', { name: 'x', scopes: ['read'], expires_in_days: '5' }), 'days as string', /expires_in_days/);
    expect400(await admin.post('/api/v1/tokens', { name: 'x', scopes: ['read'], expires_in_days: 1.5 }), 'days as float', /expires_in_days/);
    expect400(await admin.post('/api/v1/tokens', { name: 'x', scopes: [1] }), 'scopes of numbers', /scopes/);
    await assertAlive(srv);
  });

  it('refuses unknown fields, naming them', async () => {
    expect400(await admin.post('/api/v1/users', { username: 'abc', role: 'student', is_admin: true }), 'users', /is_admin/);
    expect400(await admin.post('/api/v1/auth/login', { username: 'admin', password: 'x', remember: true }), 'login', /remember/);
    expect400(await admin.patch('/api/v1/users/1', { username: 'renamed' }), 'patch', /username/);
    expect400(await admin.post('/api/v1/tokens', { name: 'x', scopes: ['read'], owner: 1 }), 'tokens', /owner/);
    await assertAlive(srv);
  });

  it('refuses missing required fields and out-of-range values', async () => {
    expect400(await admin.post('/api/v1/users', { role: 'student' }), 'no username', /username/);
    expect400(await admin.post('/api/v1/auth/login', { username: 'admin' }), 'no password', /password/);
    expect400(await send('POST', '/api/v1/auth/login', '', 'application/json'), 'empty login body');
    expect400(await admin.post('/api/v1/users', { username: 'abc', role: 'root' }), 'bad role', /role/);
    expect400(await admin.post('/api/v1/users', { username: 'Bad Name', role: 'student' }), 'bad username', /username/);
    expect400(await admin.post('/api/v1/users', { username: 'a'.repeat(65), role: 'student' }), 'long username', /username/);
    expect400(await admin.post('/api/v1/users', { username: 'abc', role: 'student', email: 'no-at-sign' }), 'bad email', /email/);
    expect400(await admin.post('/api/v1/users', { username: 'abc', role: 'student', display_name: 'a\u0007b' }), 'control char', /display name/);
    expect400(await admin.post('/api/v1/users', { username: 'abc', role: 'student', password: 'short' }), 'weak password', /password/);
    expect400(await admin.post('/api/v1/tokens', { name: 'x', scopes: ['root'] }), 'bad scope', /scope/);
    expect400(await admin.post('/api/v1/tokens', { name: 'x', scopes: [] }), 'no scope', /scope/);
    expect400(await admin.post('/api/v1/tokens', { name: 'x', scopes: ['read'], expires_in_days: 0 }), 'zero days');
    expect400(await admin.post('/api/v1/tokens', { name: 'x', scopes: ['read'], expires_in_days: 100000 }), 'too many days');
    expect400(await admin.post('/api/v1/tokens', { name: '', scopes: ['read'] }), 'empty name');
    await assertAlive(srv);
  });

  it('refuses bad UTF-8 in JSON', async () => {
    const bodies = [
      Buffer.concat([Buffer.from('{"username":"ab'), Buffer.from([0xff, 0xfe]), Buffer.from('c","role":"student"}')]),
      Buffer.concat([Buffer.from('{"username":"ab'), Buffer.from([0xc0, 0xaf]), Buffer.from('","role":"student"}')]), // overlong '/'
      Buffer.concat([Buffer.from('{"username":"ab'), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from('","role":"student"}')]), // UTF-16 surrogate
      Buffer.concat([Buffer.from('{"username":"ab'), Buffer.from([0xe2, 0x82]), Buffer.from('","role":"student"}')]), // truncated
      Buffer.concat([Buffer.from('{"'), Buffer.from([0x80]), Buffer.from('":"x"}')]), // in a key
      Buffer.from('{"username":"ab\\ud800","role":"student"}'), // lone surrogate escape
    ];
    for (const b of bodies) expect400(await send('POST', '/api/v1/users', b), b.toString('hex'));
    expect400(await send('POST', '/api/v1/auth/login',
      Buffer.concat([Buffer.from('{"username":"adm'), Buffer.from([0xff]), Buffer.from('in","password":"x"}')])), 'login');
    await assertAlive(srv);
  });

  it('refuses JSON that is not an object', async () => {
    for (const body of ['[]', '[{"username":"abc","role":"student"}]', '"string"', '42', 'null', 'true']) {
      expect400(await send('POST', '/api/v1/users', body), body);
      expect400(await send('POST', '/api/v1/auth/login', body), `login ${body}`);
    }
    await assertAlive(srv);
  });

  it('refuses duplicate keys', async () => {
    expect400(await send('POST', '/api/v1/auth/login', '{"username":"nobody","username":"admin","password":"x"}'), 'login');
    expect400(await send('POST', '/api/v1/users', '{"username":"abc","role":"student","role":"admin"}'), 'users');
    await assertAlive(srv);
  });

  it('refuses NUL characters in strings', async () => {
    expect400(await send('POST', '/api/v1/auth/login', '{"username":"admin\\u0000x","password":"x"}'), 'login username');
    expect400(await send('POST', '/api/v1/users', '{"username":"abc","role":"student","display_name":"a\\u0000b"}'), 'display_name');
    expect400(await send('POST', '/api/v1/tokens', '{"name":"a\\u0000b","scopes":["read"]}'), 'token name');
    await assertAlive(srv);
  });

  it('refuses deeply nested JSON without crashing', async () => {
    expect400(await send('POST', '/api/v1/auth/login', '['.repeat(4000) + ']'.repeat(4000)), 'nested arrays');
    expect400(await send('POST', '/api/v1/users', '{"username":' + '['.repeat(6000) + ']'.repeat(6000) + '}'), 'nested objects');
    await assertAlive(srv);
  });

  it('answers a wrong Content-Type with 415', async () => {
    const body = JSON.stringify({ username: 'admin', password: 'x' });
    for (const ct of ['text/plain', 'application/x-www-form-urlencoded', 'application/jsonx', 'multipart/form-data; boundary=x', null]) {
      const r = await send('POST', '/api/v1/auth/login', body, ct);
      assert.equal(r.status, 415, `${ct}: ${r.status} ${r.text}`);
      assertErrorShape(r.json, 'unsupported_media_type');
      assert.ok(r.json.error.hint, 'a 415 tells which type to send');
    }
    const csv = await send('POST', '/api/v1/users/import', 'username,role\nxyz,student\n', 'application/json');
    assert.equal(csv.status, 415);
    assertErrorShape(csv.json, 'unsupported_media_type');
    // parameters after the type are fine (a well-formed, wrong login)
    const ok = await send('POST', '/api/v1/users', '{"username":1}', 'application/json; charset=utf-8');
    expect400(ok, 'json with charset', /username/);
    await assertAlive(srv);
  });

  it('answers bad path encodings in /users/{id} with 400 or 404, never 500', async () => {
    const paths = ['%zz', '%00', '%', '%2', '%2F', '1%2F2', '-1', '0', 'abc', '1.5', '0x10', '1%20',
      '99999999999999999999999', '9223372036854775807', '..', '%2e%2e', '1;2'];
    for (const p of paths) {
      const r = await admin.get(`/api/v1/users/${p}`);
      assert.ok(r.status === 400 || r.status === 404, `/users/${p} answered ${r.status} ${r.text}`);
      assertErrorShape(r.json);
    }
    // %31 is "1": the admin, found through a decoded segment
    assert.equal((await admin.get('/api/v1/users/%31')).json.username, 'admin');
    for (const p of ['%zz', '%00', '%2F']) {
      const r = await admin.patch(`/api/v1/users/${p}`, { display_name: 'x' });
      assert.ok(r.status === 400 || r.status === 404, `PATCH /users/${p}: ${r.status}`);
      assertErrorShape(r.json);
    }
    // raw bytes no client library would send
    for (const p of ['\x7f', 'a b', '\x01']) {
      const { res, conn } = await rawOnce(srv.port, Buffer.from(
        `GET /api/v1/users/${p} HTTP/1.1\r\nHost: t\r\nCookie: ${admin.cookieHeader()}\r\nConnection: close\r\n\r\n`, 'latin1'));
      conn.destroy();
      assert.ok(res.status >= 400 && res.status < 500, `raw ${JSON.stringify(p)}: ${res.status}`);
      assertErrorShape(res.json);
    }
    await assertAlive(srv);
  });

  it('keeps the error shape when the message quotes bytes that are not UTF-8', async () => {
    // the error message quotes the path; %ff decodes to a lone 0xff byte
    for (const path of ['/api/v1/users/%ff', '/api/v1/users/%c3%28', '/api/v1/%ff', '/%ff.html']) {
      const r = await admin.get(path);
      assert.ok(r.status === 400 || r.status === 404, `${path}: ${r.status}`);
      assertErrorShape(r.json);
    }
    const { res, conn } = await rawOnce(srv.port, Buffer.from(
      `GET /api/v1/users/\xff\xfe HTTP/1.1\r\nHost: t\r\nCookie: ${admin.cookieHeader()}\r\nConnection: close\r\n\r\n`, 'latin1'));
    conn.destroy();
    assert.equal(res.status, 404);
    assertErrorShape(res.json, 'not_found');
    await assertAlive(srv);
  });

  it('accepts only canonical decimal ids', async () => {
    // '%201' and '+1' are not the id 1; one resource, one URL
    for (const p of ['%201', '+1', '%091', '01']) {
      const r = await admin.get(`/api/v1/users/${p}`);
      assert.equal(r.status, 404, `/users/${p} answered ${r.status}`);
      assertErrorShape(r.json, 'not_found');
    }
  });

  it('refuses bad pagination parameters with 400', async () => {
    for (const q of ['limit=abc', 'limit=0', 'limit=-1', 'limit=501', 'limit=1e3', 'limit=99999999999999999999',
      'cursor=abc', 'cursor=-5', 'cursor=1.5', 'role=root']) {
      const r = await admin.get(`/api/v1/users?${q}`);
      assert.equal(r.status, 400, `?${q}: ${r.status}`);
      assertErrorShape(r.json, 'invalid');
    }
    for (const q of ['limit=abc', 'cursor=x']) {
      const r = await admin.get(`/api/v1/audit?${q}`);
      assert.equal(r.status, 400, `audit ?${q}: ${r.status}`);
      assertErrorShape(r.json, 'invalid');
    }
    await assertAlive(srv);
  });

  it('refuses malformed escapes in query parameters instead of ignoring them', async () => {
    // ?q=%00 silently dropped would list every user instead of filtering
    for (const q of ['limit=%zz', 'cursor=%zz', 'q=%00']) {
      const r = await admin.get(`/api/v1/users?${q}`);
      assert.equal(r.status, 400, `?${q}: ${r.status} ${r.text.slice(0, 100)}`);
      assertErrorShape(r.json, 'invalid');
    }
    await assertAlive(srv);
  });

  it('survives junk in headers the server reads (Cookie, Authorization, Origin)', async () => {
    const junk = [
      ['cookie', 'gc_session=' + 'x'.repeat(5000)],
      ['cookie', 'gc_session=; gc_session=;;;=;'],
      ['cookie', '\u00ff\u00fe=1'],
      ['authorization', 'Bearer'],
      ['authorization', 'Bearer gct_' + 'a'.repeat(500)],
      ['authorization', 'Basic YWRtaW46eA=='],
      ['authorization', 'Bearer gct_\u00ff'],
    ];
    for (const [k, v] of junk) {
      const { res, conn } = await rawOnce(srv.port, Buffer.from(
        `GET /api/v1/me HTTP/1.1\r\nHost: t\r\n${k}: ${v}\r\nConnection: close\r\n\r\n`, 'latin1'));
      conn.destroy();
      assert.equal(res.status, 401, `${k}: ${v.slice(0, 40)} → ${res.status}`);
      assertErrorShape(res.json, 'unauthorized');
    }
    await assertAlive(srv);
  });

  it('never answered 500 to any of it', async () => {
    const { res } = await rawOnce(srv.port, 'GET /metrics HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n');
    const fives = res.text.split('\n').filter((l) => /^gpucloud_http_requests_total\{.*status="5\d\d"\}/.test(l));
    assert.deepEqual(fives, [], 'some bad input was answered with a 5xx');
    await assertAlive(srv);
  });
});
