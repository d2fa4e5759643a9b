// uploads.test.mjs — resumable uploads against a real gpucloudd: parts at
// offsets in any order, a part cut off mid-way and sent again, status of
// what arrived, completion as one atomic rename with the SHA-256 checked,
// refusals (wrong part size, missing parts, bad ids, other users), abort
// and expiry (staging removed, reservation given back).
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes, createHash } from 'node:crypto';
import { startServer, Client, ADMIN_PASSWORD } from '../lib/server.mjs';
import { sql, assertErrorShape, stopClean, eventually, sleep } from '../lib/itest.mjs';

const PART = 65536;

async function user(admin, base, username, role = 'student') {
  const r = await admin.post('/api/v1/users', { username, role, password: 'password-' + username });
  assert.equal(r.status, 201, r.text);
  const c = new Client(base);
  assert.equal((await c.login(username, 'password-' + username)).status, 200);
  c.id = r.json.user.id;
  return c;
}

describe('resumable uploads', () => {
  let srv, alice, bob, dataRoot;

  before(async () => {
    srv = await startServer({ args: ['--scrypt-ln=10', `--upload-part-size=${PART}`, '--upload-expiry=10', '--storage-scan-interval=1'] });
    dataRoot = join(srv.dir, 'data');
    const admin = new Client(srv.base);
    assert.equal((await admin.login('admin', ADMIN_PASSWORD)).status, 200);
    alice = await user(admin, srv.base, 'alice');
    bob = await user(admin, srv.base, 'bob');
  });

  after(async () => { await stopClean(srv); });

  it('takes parts in any order, survives a part cut mid-way, completes atomically with the SHA-256', async () => {
    const data = randomBytes(PART * 4 + 1234);
    const sha = createHash('sha256').update(data).digest('hex');
    const c = await alice.post('/api/v1/uploads', { area: 'home', path: 'big/data.bin', size: data.length, sha256: sha });
    assert.equal(c.status, 404, 'the folder must exist first');
    await alice.post('/api/v1/files/home/big', { op: 'mkdir' });
    const up = await alice.post('/api/v1/uploads', { area: 'home', path: 'big/data.bin', size: data.length, sha256: sha });
    assert.equal(up.status, 201, up.text);
    assert.equal(up.json.parts, 5);
    assert.equal(up.json.part_size, PART);
    assert.deepEqual(up.json.received, []);
    const id = up.json.id;
    const part = (n) => data.subarray(n * PART, Math.min(data.length, (n + 1) * PART));
    for (const n of [3, 0, 4]) {
      const r = await alice.req('PUT', `/api/v1/uploads/${id}/parts/${n}`, part(n));
      assert.equal(r.status, 200, r.text);
    }
    // part 1: the connection dies half-way through
    await new Promise((resolve, reject) => {
      const s = net.connect(srv.port, '127.0.0.1', () => {
        s.write(`PUT /api/v1/uploads/${id}/parts/1 HTTP/1.1\r\nHost: 127.0.0.1:${srv.port}\r\nCookie: ${alice.cookieHeader()}\r\n` +
          `X-CSRF-Token: ${alice.csrf}\r\nOrigin: ${srv.base}\r\nContent-Length: ${PART}\r\n\r\n`);
        s.write(part(1).subarray(0, PART / 2), () => setTimeout(() => { s.destroy(); resolve(); }, 200));
      });
      s.on('error', reject);
    });
    let st = await alice.get(`/api/v1/uploads/${id}`);
    assert.deepEqual(st.json.received, [0, 3, 4]);
    assert.equal(st.json.missing, 2);
    // nothing visible in the home yet
    assert.deepEqual((await alice.get('/api/v1/files/home/big')).json.items, []);
    const early = await alice.post(`/api/v1/uploads/${id}/complete`);
    assert.equal(early.status, 409);
    assert.match(early.json.error.message, /3 of 5 parts/);
    // a part of the wrong size is refused
    const wrong = await alice.req('PUT', `/api/v1/uploads/${id}/parts/1`, part(1).subarray(1));
    assert.equal(wrong.status, 400);
    assertErrorShape(wrong.json, 'invalid');
    for (const n of [1, 2, 1]) assert.equal((await alice.req('PUT', `/api/v1/uploads/${id}/parts/${n}`, part(n))).status, 200);
    st = await alice.get(`/api/v1/uploads/${id}`);
    assert.equal(st.json.missing, 0);
    // another user sees nothing of it
    assert.equal((await bob.get(`/api/v1/uploads/${id}`)).status, 404);
    assert.equal((await bob.req('PUT', `/api/v1/uploads/${id}/parts/0`, part(0))).status, 404);
    assert.equal((await bob.post(`/api/v1/uploads/${id}/complete`)).status, 404);
    const done = await alice.post(`/api/v1/uploads/${id}/complete`);
    assert.equal(done.status, 201, done.text);
    assert.equal(done.json.sha256, sha);
    assert.equal(done.json.size, data.length);
    const got = readFileSync(join(dataRoot, 'home/alice/big/data.bin'));
    assert.equal(createHash('sha256').update(got).digest('hex'), sha);
    const dl = await fetch(`${srv.base}/api/v1/files/home/big/data.bin`, { headers: { cookie: alice.cookieHeader() } });
    assert.equal(createHash('sha256').update(Buffer.from(await dl.arrayBuffer())).digest('hex'), sha);
    assert.equal((await alice.post(`/api/v1/uploads/${id}/complete`)).status, 409);
    assert.deepEqual(readdirSync(join(dataRoot, '.uploads')), []);
    assert.equal(sql(srv, `SELECT reserved FROM storage_areas WHERE area = 'home:${alice.id}'`), '0');
  });

  it('refuses a digest that does not match and bad part numbers', async () => {
    const data = randomBytes(1000);
    const up = await alice.post('/api/v1/uploads', { area: 'home', path: 'd.bin', size: 1000, sha256: '0'.repeat(64) });
    assert.equal(up.status, 201, up.text);
    assert.equal((await alice.req('PUT', `/api/v1/uploads/${up.json.id}/parts/1`, data)).status, 400);
    assert.equal((await alice.req('PUT', `/api/v1/uploads/${up.json.id}/parts/x`, data)).status, 404);
    assert.equal((await alice.req('PUT', `/api/v1/uploads/0/parts/0`, data)).status, 404);
    assert.equal((await alice.req('PUT', `/api/v1/uploads/${up.json.id}/parts/0`, data)).status, 200);
    const c = await alice.post(`/api/v1/uploads/${up.json.id}/complete`);
    assert.equal(c.status, 409);
    assert.match(c.json.error.message, /SHA-256/);
    assert.ok(!existsSync(join(dataRoot, 'home/alice/d.bin')));
    assert.equal((await alice.del(`/api/v1/uploads/${up.json.id}`)).status, 200);
    for (const bad of [{ area: 'home', path: '../x', size: 1 }, { area: 'home', path: 'x', size: -1 },
      { area: 'home', path: 'x', size: 1, sha256: 'zz' }, { area: 'home', path: 'x' }, { area: 'home', path: 'x', size: 1, what: 1 }]) {
      const r = await alice.post('/api/v1/uploads', bad);
      assert.equal(r.status, 400, JSON.stringify(bad));
      assertErrorShape(r.json);
    }
  });

  it('aborts and expires: staging removed, reservation released', async () => {
    const a = await alice.post('/api/v1/uploads', { area: 'home', path: 'ab.bin', size: 5000 });
    assert.equal(a.status, 201);
    assert.equal((await alice.del(`/api/v1/uploads/${a.json.id}`)).status, 200);
    assert.equal((await alice.get(`/api/v1/uploads/${a.json.id}`)).json.state, 'aborted');
    const e = await alice.post('/api/v1/uploads', { area: 'home', path: 'ex.bin', size: 7000 });
    assert.equal(e.status, 201);
    await alice.req('PUT', `/api/v1/uploads/${e.json.id}/parts/0`, randomBytes(7000));
    assert.ok(Number(sql(srv, `SELECT reserved FROM storage_areas WHERE area = 'home:${alice.id}'`)) >= 7000);
    sql(srv, `UPDATE uploads SET expires_at = now() - interval '1 second' WHERE id = ${e.json.id}`);
    assert.ok(await eventually(async () => (await alice.get(`/api/v1/uploads/${e.json.id}`)).json.state === 'expired', 5000));
    assert.ok(await eventually(async () => readdirSync(join(dataRoot, '.uploads')).length === 0, 5000));
    assert.equal(sql(srv, `SELECT reserved FROM storage_areas WHERE area = 'home:${alice.id}'`), '0');
    assert.equal((await alice.req('PUT', `/api/v1/uploads/${e.json.id}/parts/0`, randomBytes(7000))).status, 409);
    await sleep(10);
  });
});
