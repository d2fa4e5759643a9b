// storage_quota.test.mjs — usage accounting and quota enforcement against
// a real gpucloudd, PostgreSQL and ext4: a sparse 10 GiB file counts only
// its real blocks, 1,000 hard links count once, uploads that would cross
// the hard limit stop with 507 leaving no partial file, two uploads racing
// for the last free bytes cannot both pass, soft-limit warnings, the
// block reason that refuses new instances, and admin defaults/overrides.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, writeFileSync, linkSync, mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import { startServer, Client, ADMIN_PASSWORD } from '../lib/server.mjs';
import { sql, assertErrorShape, stopClean, eventually, RawConn } from '../lib/itest.mjs';

const MiB = 1024 * 1024;

async function user(admin, base, username, role = 'student') {
  const r = await admin.post('/api/v1/users', { username, role, password: 'password-' + username });
  assert.equal(r.status, 201, r.text);
  const c = new Client(base);
  assert.equal((await c.login(username, 'password-' + username)).status, 200);
  c.id = r.json.user.id;
  return c;
}

describe('storage quotas', () => {
  let srv, admin, alice, bob, dataRoot;

  // Waits for a scan newer than now and returns /me's storage.
  async function rescanned(c) {
    const before = sql(srv, `SELECT now()`);
    sql(srv, `UPDATE storage_areas SET scanned_at = now() - interval '1 hour' WHERE area = 'home:${c.id}'`);
    let s;
    assert.ok(await eventually(async () => {
      const ok = sql(srv, `SELECT scanned_at > '${before}' FROM storage_areas WHERE area = 'home:${c.id}'`) === 't';
      if (ok) s = (await c.get('/api/v1/me')).json.storage;
      return ok;
    }, 8000), 'no rescan');
    return s;
  }

  before(async () => {
    srv = await startServer({ args: ['--scrypt-ln=10', '--storage-scan-interval=1'] });
    dataRoot = join(srv.dir, 'data');
    admin = new Client(srv.base);
    assert.equal((await admin.login('admin', ADMIN_PASSWORD)).status, 200);
    alice = await user(admin, srv.base, 'alice');
    bob = await user(admin, srv.base, 'bob');
    // the homes exist once used
    assert.equal((await alice.req('PUT', '/api/v1/files/home/hello.txt', 'hi')).status, 201);
    assert.equal((await bob.req('PUT', '/api/v1/files/home/hello.txt', 'hi')).status, 201);
  });

  after(async () => { await stopClean(srv); });

  it('counts the real blocks of a sparse 10 GiB file and 1,000 hard links once', async () => {
    const home = join(dataRoot, 'home/alice');
    execFileSync('truncate', ['-s', '10G', join(home, 'sparse.img')]);
    execFileSync('dd', ['if=/dev/urandom', `of=${join(home, 'sparse.img')}`, 'bs=1M', 'count=1', 'conv=notrunc', 'status=none']);
    mkdirSync(join(home, 'links'));
    writeFileSync(join(home, 'links/orig.bin'), Buffer.alloc(2 * MiB, 1));
    for (let i = 0; i < 1000; i++) linkSync(join(home, 'links/orig.bin'), join(home, `links/l${i}`));
    const s = await rescanned(alice);
    // 1 MiB + 2 MiB of data, a few directories; nowhere near 10 GiB or 2 GiB
    assert.ok(s.bytes >= 3 * MiB, `bytes ${s.bytes}`);
    assert.ok(s.bytes < 4 * MiB, `bytes ${s.bytes}: sparse or hard-linked data counted too much`);
    assert.ok(s.files >= 4 && s.files < 10, `files ${s.files}`);
    execFileSync('rm', ['-rf', join(home, 'links'), join(home, 'sparse.img')]);
  });

  it('stops an upload that would cross the hard limit with 507 and no partial file', async () => {
    const base = (await rescanned(alice)).bytes;
    const q = await admin.req('PUT', '/api/v1/storage/quotas/home:alice', { bytes_hard: base + 3 * MiB, bytes_soft: base + MiB });
    assert.equal(q.status, 200, q.text);
    const r = await alice.req('PUT', '/api/v1/files/home/too-big.bin', Buffer.alloc(4 * MiB, 2));
    assert.equal(r.status, 507, r.text);
    assertErrorShape(r.json, 'insufficient_storage');
    assert.match(r.json.error.message, /quota/);
    assert.ok(!existsSync(join(dataRoot, 'home/alice/too-big.bin')));
    assert.deepEqual(readdirSync(join(dataRoot, '.uploads')), []);
    const c = await alice.post('/api/v1/uploads', { area: 'home', path: 'too-big.bin', size: 4 * MiB });
    assert.equal(c.status, 507);
    // under the limit it works, and the soft limit warns
    assert.equal((await alice.req('PUT', '/api/v1/files/home/ok.bin', Buffer.alloc(2 * MiB, 3))).status, 201);
    const me = (await alice.get('/api/v1/me')).json.storage;
    assert.equal(me.over_soft, true);
    assert.equal(me.over_hard, false);
    assert.equal(me.bytes_hard, base + 3 * MiB);
    // a copy that would cross it is refused too
    const cp = await alice.post('/api/v1/files/home/ok.bin', { op: 'copy', to: 'ok2.bin' });
    assert.equal(cp.status, 507);
    assert.ok(!existsSync(join(dataRoot, 'home/alice/ok2.bin')));
  });

  it('lets only one of two uploads racing for the last free bytes through', async () => {
    const base = (await rescanned(bob)).bytes;
    assert.equal((await admin.req('PUT', `/api/v1/storage/quotas/home:${bob.id}`, { bytes_hard: base + 3 * MiB })).status, 200);
    const body = Buffer.alloc(2 * MiB, 4);
    const [a, b] = await Promise.all([
      bob.req('PUT', '/api/v1/files/home/r1.bin', body),
      bob.req('PUT', '/api/v1/files/home/r2.bin', body),
    ]);
    assert.deepEqual([a.status, b.status].sort(), [201, 507], `${a.text} ${b.text}`);
    const present = ['r1.bin', 'r2.bin'].filter((n) => existsSync(join(dataRoot, 'home/bob', n)));
    assert.equal(present.length, 1);
    // resumable uploads reserve at creation: again only one
    const [c, d] = await Promise.all([
      bob.post('/api/v1/uploads', { area: 'home', path: 'u1.bin', size: MiB }),
      bob.post('/api/v1/uploads', { area: 'home', path: 'u2.bin', size: MiB }),
    ]);
    assert.deepEqual([c.status, d.status].sort(), [201, 507], `${c.text} ${d.text}`);
    const s = await rescanned(bob);
    assert.ok(s.bytes <= base + 3 * MiB, `over the limit: ${s.bytes} > ${base + 3 * MiB}`);
  });

  it('refuses new instances over the hard limit with a reason, and admins set defaults', async () => {
    assert.equal(sql(srv, `SELECT gc_storage_block_reason(${alice.id}) IS NULL`), 't');
    assert.equal((await admin.req('PUT', '/api/v1/storage/quotas/home:alice', { bytes_hard: 1000, bytes_soft: null })).status, 200);
    const reason = sql(srv, `SELECT gc_storage_block_reason(${alice.id})`);
    assert.match(reason, /storage over its hard limit/);
    const me = (await alice.get('/api/v1/me')).json.storage;
    assert.equal(me.over_hard, true);
    assert.match(me.block_reason, /hard limit/);
    // defaults
    const d = await admin.req('PUT', '/api/v1/storage/defaults', { user_bytes_hard: 123 * MiB, user_files_hard: null });
    assert.equal(d.status, 200, d.text);
    assert.equal(d.json.defaults.user_bytes_hard, 123 * MiB);
    assert.equal(d.json.defaults.user_files_hard, null);
    assert.equal((await admin.req('PUT', '/api/v1/storage/defaults', { user_bytes_hard: -1 })).status, 400);
    assert.equal((await admin.req('PUT', '/api/v1/storage/defaults', { nonsense: 1 })).status, 400);
    assert.equal((await admin.req('PUT', '/api/v1/storage/defaults', '[1]', { 'content-type': 'application/json' })).status, 400);
    assert.equal((await admin.req('PUT', '/api/v1/storage/quotas/home:nobody', { bytes_hard: 1 })).status, 404);
    assert.equal((await alice.req('PUT', '/api/v1/storage/defaults', { user_bytes_hard: 1 })).status, 403);
    // back under: the override cleared, the new default applies
    assert.equal((await admin.req('PUT', '/api/v1/storage/quotas/home:alice', { bytes_hard: null })).status, 200);
    assert.equal((await alice.get('/api/v1/me')).json.storage.bytes_hard, 123 * MiB);
    assert.equal(sql(srv, `SELECT gc_storage_block_reason(${alice.id}) IS NULL`), 't');
  });
  it('stops an upload while it writes once the area went over its hard limit', async () => {
    const carol = await user(admin, srv.base, 'carol');
    assert.equal((await carol.req('PUT', '/api/v1/files/home/hello.txt', 'hi')).status, 201);
    assert.equal((await admin.req('PUT', '/api/v1/storage/quotas/home:carol', { bytes_hard: 1024 * MiB })).status, 200);
    const staged = readdirSync(join(dataRoot, '.uploads')).sort();
    const size = 150 * MiB;
    const c = await RawConn.open(srv.port);
    c.write(`PUT /api/v1/files/home/stream.bin HTTP/1.1\r\nHost: 127.0.0.1:${srv.port}\r\nCookie: ${carol.cookieHeader()}\r\n` +
      `X-CSRF-Token: ${carol.csrf}\r\nOrigin: ${srv.base}\r\nContent-Length: ${size}\r\n\r\n`);
    const chunk = Buffer.alloc(MiB, 9);
    const send = () => new Promise((r) => c.sock.write(chunk, r));
    for (let i = 0; i < 8; i++) await send();
    // what a container could do meanwhile: the area is now over its limit
    sql(srv, `UPDATE storage_areas SET bytes_hard = 1 WHERE area = 'home:${carol.id}'`);
    for (let i = 8; i < 150 && !c.closed && !c.buf.length; i++) await send();
    const res = await c.response({ timeout: 20000 });
    c.destroy();
    assert.equal(res.status, 507, res.text);
    assertErrorShape(res.json, 'insufficient_storage');
    assert.match(res.json.error.message, /while writing/);
    assert.ok(!existsSync(join(dataRoot, 'home/carol/stream.bin')));
    assert.ok(await eventually(async () => readdirSync(join(dataRoot, '.uploads')).sort().join() === staged.join(), 5000), 'staging file left behind');
  });
});
