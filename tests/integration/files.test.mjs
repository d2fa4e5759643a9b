// files.test.mjs — the file API against a real gpucloudd, PostgreSQL and
// filesystem: listing (sorted, paged), stat, mkdir, streaming PUT, download
// with Range and If-None-Match, preview (text, CSV, JSON, image), move,
// copy, delete to trash, restore, purge and empty, folder archives (tar),
// storage in /me and /readyz, and who may read or write which area
// (homes, shared, class areas).
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import { startServer, Client, ADMIN_PASSWORD } from '../lib/server.mjs';
import { sql, assertErrorShape, stopClean, sha256hex } from '../lib/itest.mjs';

const F = '/api/v1/files';

async function user(admin, base, username, role) {
  const r = await admin.post('/api/v1/users', { username, role, password: 'password-' + username });
  assert.equal(r.status, 201, r.text);
  const c = new Client(base);
  assert.equal((await c.login(username, 'password-' + username)).status, 200);
  c.id = r.json.user.id;
  return c;
}

describe('file API', () => {
  let srv, admin, alice, bob, teacher, other, dataRoot;

  before(async () => {
    srv = await startServer({ args: ['--scrypt-ln=10', '--storage-scan-interval=1'] });
    dataRoot = join(srv.dir, 'data');
    admin = new Client(srv.base);
    assert.equal((await admin.login('admin', ADMIN_PASSWORD)).status, 200);
    alice = await user(admin, srv.base, 'alice', 'student');
    bob = await user(admin, srv.base, 'bob', 'student');
    teacher = await user(admin, srv.base, 'tina', 'teacher');
    other = await user(admin, srv.base, 'otto', 'teacher');
  });

  after(async () => { await stopClean(srv); });

  it('uploads with a streaming PUT and lists the home sorted and paged', async () => {
    for (const n of ['b.txt', 'a.txt', 'c.txt']) {
      const r = await alice.req('PUT', `${F}/home/${n}`, `hello ${n}\n`, { 'content-type': 'application/octet-stream' });
      assert.equal(r.status, 201, r.text);
      assert.equal(r.json.name, n);
      assert.equal(r.json.size, `hello ${n}\n`.length);
    }
    const l = await alice.get(`${F}/home/?limit=2`);
    assert.equal(l.status, 200, l.text);
    assert.deepEqual(l.json.items.map((i) => i.name), ['a.txt', 'b.txt']);
    assert.equal(l.json.total, 3);
    assert.equal(l.json.next_cursor, 'b.txt');
    const l2 = await alice.get(`${F}/home?limit=2&cursor=b.txt`);
    assert.deepEqual(l2.json.items.map((i) => i.name), ['c.txt']);
    assert.equal(l2.json.next_cursor, null);
    assert.ok(l.json.items.every((i) => i.type === 'file' && /^\d{4}-\d\d-\d\dT/.test(i.mtime)));
    // on disk: in alice's home, owned by her uid, nothing left in staging
    const st = statSync(join(dataRoot, 'home/alice/a.txt'));
    assert.equal(st.uid, 200000 + alice.id);
    assert.equal(readFileSync(join(dataRoot, 'home/alice/a.txt'), 'utf8'), 'hello a.txt\n');
    assert.deepEqual(execFileSync('ls', ['-A', join(dataRoot, '.uploads')], { encoding: 'utf8' }).trim(), '');
    // no replacing unless asked
    const again = await alice.req('PUT', `${F}/home/a.txt`, 'x');
    assert.equal(again.status, 409);
    assertErrorShape(again.json, 'conflict');
    const ow = await alice.req('PUT', `${F}/home/a.txt?overwrite=1`, 'replaced');
    assert.equal(ow.status, 201, ow.text);
  });

  it('downloads with ETag, If-None-Match, Range and 416', async () => {
    const body = Buffer.from('0123456789abcdefghij');
    assert.equal((await alice.req('PUT', `${F}/home/r.bin`, body)).status, 201);
    const full = await fetch(`${srv.base}${F}/home/r.bin`, { headers: { cookie: alice.cookieHeader() } });
    assert.equal(full.status, 200);
    assert.equal(Buffer.from(await full.arrayBuffer()).toString(), body.toString());
    const etag = full.headers.get('etag');
    assert.ok(etag && etag.startsWith('"'));
    assert.equal(full.headers.get('accept-ranges'), 'bytes');
    assert.match(full.headers.get('content-disposition'), /attachment/);
    assert.equal(full.headers.get('x-content-type-options'), 'nosniff');
    const nm = await fetch(`${srv.base}${F}/home/r.bin`, { headers: { cookie: alice.cookieHeader(), 'if-none-match': etag } });
    assert.equal(nm.status, 304);
    const part = await fetch(`${srv.base}${F}/home/r.bin`, { headers: { cookie: alice.cookieHeader(), range: 'bytes=5-9' } });
    assert.equal(part.status, 206);
    assert.equal(part.headers.get('content-range'), 'bytes 5-9/20');
    assert.equal(await part.text(), '56789');
    const tail = await fetch(`${srv.base}${F}/home/r.bin`, { headers: { cookie: alice.cookieHeader(), range: 'bytes=-3' } });
    assert.equal(await tail.text(), 'hij');
    const bad = await fetch(`${srv.base}${F}/home/r.bin`, { headers: { cookie: alice.cookieHeader(), range: 'bytes=50-60' } });
    assert.equal(bad.status, 416);
    assert.equal(bad.headers.get('content-range'), 'bytes */20');
    // larger than what one pump queues: the rest goes out as the client drains
    const big = Buffer.alloc(20 * 1024 * 1024 + 3);
    for (let i = 0; i < big.length; i += 4096) big[i] = i & 255;
    assert.equal((await alice.req('PUT', `${F}/home/big20.bin`, big)).status, 201);
    const bres = await fetch(`${srv.base}${F}/home/big20.bin`, { headers: { cookie: alice.cookieHeader() }, signal: AbortSignal.timeout(20000) });
    assert.equal(sha256hex(Buffer.from(await bres.arrayBuffer())), sha256hex(big));
    const brange = await fetch(`${srv.base}${F}/home/big20.bin`, { headers: { cookie: alice.cookieHeader(), range: 'bytes=10000000-' } });
    assert.equal(brange.status, 206);
    assert.equal(sha256hex(Buffer.from(await brange.arrayBuffer())), sha256hex(big.subarray(10000000)));
    assert.equal((await alice.del(`${F}/home/big20.bin`)).status, 200);
    const head = await fetch(`${srv.base}${F}/home/r.bin`, { method: 'HEAD', headers: { cookie: alice.cookieHeader() } });
    assert.equal(head.status, 200);
    assert.equal(head.headers.get('content-length'), '20');
  });

  it('previews text, CSV, JSON, images and says binary otherwise', async () => {
    await alice.req('PUT', `${F}/home/t.csv`, 'name,score\n"Lee, A",9\nBo,7\n');
    await alice.req('PUT', `${F}/home/t.json`, '{"lr":0.1,"layers":[1,2]}');
    await alice.req('PUT', `${F}/home/p.png`, Buffer.from([0x89, 0x50, 0x4e, 0x47]));
    await alice.req('PUT', `${F}/home/z.bin`, Buffer.from([0, 1, 2, 255]));
    const csv = await alice.get(`${F}/home/t.csv?preview=1`);
    assert.equal(csv.status, 200, csv.text);
    assert.deepEqual(csv.json.rows, [['name', 'score'], ['Lee, A', '9'], ['Bo', '7']]);
    const j = await alice.get(`${F}/home/t.json?preview=1`);
    assert.deepEqual(j.json.value, { lr: 0.1, layers: [1, 2] });
    const t = await alice.get(`${F}/home/b.txt?preview=1`);
    assert.equal(t.json.kind, 'text');
    assert.equal(t.json.text, 'hello b.txt\n');
    assert.equal((await alice.get(`${F}/home/p.png?preview=1`)).json.kind, 'image');
    assert.equal((await alice.get(`${F}/home/z.bin?preview=1`)).json.kind, 'binary');
    const img = await fetch(`${srv.base}${F}/home/p.png?inline=1`, { headers: { cookie: alice.cookieHeader() } });
    assert.equal(img.headers.get('content-type'), 'image/png');
    assert.match(img.headers.get('content-disposition'), /^inline/);
    assert.match(img.headers.get('content-security-policy'), /sandbox/);
  });

  it('makes folders, moves, copies, stats', async () => {
    let r = await alice.post(`${F}/home/data`, { op: 'mkdir' });
    assert.equal(r.status, 201, r.text);
    assert.equal(r.json.type, 'dir');
    r = await alice.post(`${F}/home/data`, { op: 'mkdir' });
    assert.equal(r.status, 409);
    r = await alice.post(`${F}/home/b.txt`, { op: 'move', to: 'data/b2.txt' });
    assert.equal(r.status, 200, r.text);
    r = await alice.post(`${F}/home/data/b2.txt`, { op: 'copy', to: 'b3.txt' });
    assert.equal(r.status, 201, r.text);
    r = await alice.post(`${F}/home/data`, { op: 'copy', to: 'data-copy' });
    assert.equal(r.status, 201, r.text);
    const s = await alice.get(`${F}/home/data-copy/b2.txt?stat=1`);
    assert.equal(s.status, 200, s.text);
    assert.equal(s.json.size, 'hello b.txt\n'.length);
    assert.equal(readFileSync(join(dataRoot, 'home/alice/b3.txt'), 'utf8'), 'hello b.txt\n');
    r = await alice.post(`${F}/home/data`, { op: 'move', to: 'data/inside' });
    assert.equal(r.status, 400);
    r = await alice.post(`${F}/home/nope`, { op: 'move', to: 'x' });
    assert.equal(r.status, 404);
    assertErrorShape(r.json, 'not_found');
    r = await alice.post(`${F}/home/x`, { op: 'chmod' });
    assert.equal(r.status, 400);
    r = await alice.post(`${F}/home/x`, { op: 'move' });
    assert.equal(r.status, 400);
    r = await alice.post(`${F}/home/x`, { op: 'mkdir', extra: 1 });
    assert.equal(r.status, 400);
  });

  it('deletes to the trash, restores, purges and empties', async () => {
    let r = await alice.del(`${F}/home/c.txt`);
    assert.equal(r.status, 200, r.text);
    const id = r.json.trash_id;
    assert.equal((await alice.get(`${F}/home/c.txt?stat=1`)).status, 404);
    const tl = await alice.get('/api/v1/trash');
    assert.equal(tl.status, 200);
    assert.ok(tl.json.items.some((i) => i.id === id && i.path === 'c.txt'));
    // bob cannot restore alice's item
    assert.equal((await bob.post(`/api/v1/trash/${id}/restore`)).status, 403);
    r = await alice.post(`/api/v1/trash/${id}/restore`);
    assert.equal(r.status, 200, r.text);
    assert.equal((await alice.get(`${F}/home/c.txt?preview=1`)).json.text, 'hello c.txt\n');
    // a restore onto a name taken since is refused, the item stays
    await alice.del(`${F}/home/c.txt`);
    const id2 = (await alice.get('/api/v1/trash')).json.items[0].id;
    await alice.req('PUT', `${F}/home/c.txt`, 'new');
    assert.equal((await alice.post(`/api/v1/trash/${id2}/restore`)).status, 409);
    assert.equal((await alice.del(`/api/v1/trash/${id2}`)).status, 200);
    await alice.del(`${F}/home/data-copy`);
    await alice.del(`${F}/home/t.json`);
    r = await alice.del('/api/v1/trash');
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.purged, 3); // data-copy, t.json and big20.bin
    assert.equal((await alice.get('/api/v1/trash')).json.items.length, 0);
    assert.equal(execFileSync('ls', ['-A', join(dataRoot, `.trash/home:${alice.id}`)], { encoding: 'utf8' }).trim(), '');
    assert.equal((await alice.del(`${F}/home/`)).status, 400);
  });

  it('downloads a folder as a streamed tar', async () => {
    await alice.post(`${F}/home/proj`, { op: 'mkdir' });
    await alice.post(`${F}/home/proj/sub`, { op: 'mkdir' });
    const big = Buffer.alloc(3 * 1024 * 1024 + 7, 7);
    await alice.req('PUT', `${F}/home/proj/sub/big.bin`, big);
    await alice.req('PUT', `${F}/home/proj/${'n'.repeat(120)}.txt`, 'long name');
    const res = await fetch(`${srv.base}${F}/home/proj?download=1`, { headers: { cookie: alice.cookieHeader() } });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'application/x-tar');
    const tarPath = join(srv.dir, 'p.tar');
    const buf = Buffer.from(await res.arrayBuffer());
    (await import('node:fs')).writeFileSync(tarPath, buf);
    const list = execFileSync('tar', ['-tf', tarPath], { encoding: 'utf8' }).split('\n').filter(Boolean).sort();
    assert.deepEqual(list, ['proj/', `proj/${'n'.repeat(120)}.txt`, 'proj/sub/', 'proj/sub/big.bin'].sort());
    const out = execFileSync('tar', ['-xOf', tarPath, 'proj/sub/big.bin'], { maxBuffer: 1 << 24 });
    assert.equal(sha256hex(out), sha256hex(big));
  });

  it('reports storage usage in /me, storage readiness in /readyz and kernel quota support in /storage', async () => {
    const ok = async () => {
      const me = await alice.get('/api/v1/me');
      return me.json.storage && me.json.storage.bytes > 3 * 1024 * 1024 ? me : null;
    };
    let me = null;
    for (let i = 0; i < 50 && !(me = await ok()); i++) await new Promise((r) => setTimeout(r, 100));
    assert.ok(me, 'usage never showed the uploads');
    assert.equal(me.json.storage.bytes_hard, 50 * 2 ** 30);
    assert.equal(me.json.storage.over_hard, false);
    assert.equal(me.json.storage.block_reason, null);
    // /readyz is public: ok or not per check, no paths or details
    const rzText = await (await fetch(`${srv.base}/readyz`)).text();
    const rz = JSON.parse(rzText);
    assert.deepEqual(rz.checks.storage, { status: 'ok' });
    assert.doesNotMatch(rzText, /data_root|\/tmp|quota/);
    const st = await admin.get('/api/v1/storage');
    assert.equal(st.status, 200, st.text);
    assert.equal(st.json.support.project_quotas, false);
    assert.equal(st.json.support.enforcement, 'software');
    assert.match(st.json.support.reason, /quota/);
    assert.ok(st.json.areas.some((a) => a.area === `home:${alice.id}` && a.name === 'alice'));
    assert.equal((await alice.get('/api/v1/storage')).status, 403);
  });

  it('keeps homes private, the shared area read-only, class areas to their teacher', async () => {
    // another student's home
    let r = await bob.get(`${F}/home:alice/`);
    assert.equal(r.status, 403);
    r = await bob.get(`${F}/home:${alice.id}/a.txt`);
    assert.equal(r.status, 403);
    r = await bob.req('PUT', `${F}/home:alice/evil.txt`, 'x');
    assert.equal(r.status, 403);
    assert.ok(!existsSync(join(dataRoot, 'home/alice/evil.txt')));
    // admins may
    r = await admin.get(`${F}/home:alice/a.txt?preview=1`);
    assert.equal(r.status, 200, r.text);
    // shared: admins write, students read and cannot write
    r = await admin.req('PUT', `${F}/shared/readme.txt`, 'course notes');
    assert.equal(r.status, 201, r.text);
    assert.equal((await bob.get(`${F}/shared/readme.txt?preview=1`)).json.text, 'course notes');
    for (const [m, body] of [['PUT', 'x'], ['DELETE', undefined]]) {
      r = await bob.req(m, `${F}/shared/readme.txt`, body);
      assert.equal(r.status, 403, `${m} ${r.text}`);
    }
    r = await bob.post(`${F}/shared/dir`, { op: 'mkdir' });
    assert.equal(r.status, 403);
    // classes: tina teaches c1 (bob is a member), otto teaches c2
    const c1 = sql(srv, `INSERT INTO classes (name, teacher_id) VALUES ('c1', ${teacher.id}) RETURNING id`);
    const c2 = sql(srv, `INSERT INTO classes (name, teacher_id) VALUES ('c2', ${other.id}) RETURNING id`);
    sql(srv, `INSERT INTO class_members VALUES (${c1}, ${bob.id})`);
    r = await teacher.req('PUT', `${F}/class:${c1}/lab1.txt`, 'lab one');
    assert.equal(r.status, 201, r.text);
    assert.equal((await bob.get(`${F}/class:${c1}/lab1.txt?preview=1`)).json.text, 'lab one');
    assert.equal((await bob.req('PUT', `${F}/class:${c1}/x.txt`, 'x')).status, 403);
    assert.equal((await alice.get(`${F}/class:${c1}/`)).status, 403);
    assert.equal((await teacher.req('PUT', `${F}/class:${c2}/x.txt`, 'x')).status, 403);
    assert.equal((await teacher.get(`${F}/class:${c2}/`)).status, 403);
    assert.equal((await teacher.get(`${F}/class:999999/`)).status, 404);
    const st = statSync(join(dataRoot, `classes/${c1}`));
    // group-writable for co-teachers; students' container mounts are read-only (0031)
    assert.equal(st.mode & 0o7777, 0o2770);
    assert.equal(st.uid, 200000 + teacher.id);
    assert.equal((await alice.get(`${F}/nosuch/`)).status, 404);
  });
});
