// files_hostile.test.mjs — hostile inputs to the file API, against a real
// gpucloudd, PostgreSQL and ext4:
// - a FIFO in a home (a container makes one with mkfifo, no privilege
//   needed) answered every operation with a hang: open(O_RDONLY) blocked the
//   worker until a writer appeared, i.e. forever; now each answers 4xx at once
//   and the server keeps serving;
// - copying a sparse file wrote its holes as zeros: a 512 MiB file with
//   1 MiB of data (1 MiB of quota) became 512 MiB on disk, past the hard
//   limit the copy had reserved against; now the copy stays sparse;
// - copying a folder of hard links (measured once, copied each) wrote past
//   the reservation; now it stops with 507 and leaves nothing behind;
// - a part sent again while the upload completed kept writing into the
//   file after it was placed in the home (its SHA-256 checked before);
//   now completion waits for no part in flight (409) and a late part is
//   refused.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, writeFileSync, linkSync, mkdirSync, statSync, readdirSync, openSync, writeSync, closeSync, ftruncateSync } from 'node:fs';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { startServer, Client, ADMIN_PASSWORD } from '../lib/server.mjs';
import { assertErrorShape, assertAlive, stopClean, RawConn, sleep } from '../lib/itest.mjs';

const PART = 65536;

const MiB = 1024 * 1024;

async function user(admin, base, username) {
  const r = await admin.post('/api/v1/users', { username, role: 'student', password: 'password-' + username });
  assert.equal(r.status, 201, r.text);
  const c = new Client(base);
  assert.equal((await c.login(username, 'password-' + username)).status, 200);
  c.id = r.json.user.id;
  return c;
}

// One request that must answer within ms (a hung worker fails the test).
async function within(c, method, path, body, ms = 4000) {
  const h = { cookie: c.cookieHeader(), origin: c.base };
  if (method !== 'GET') h['x-csrf-token'] = c.csrf;
  if (body !== undefined) h['content-type'] = 'application/json';
  const res = await fetch(c.base + path, {
    method, headers: h, body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(ms),
  });
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: res.status, text, json };
}

describe('files: hostile inputs', () => {
  let srv, admin, alice, home;

  before(async () => {
    srv = await startServer({ args: ['--scrypt-ln=10', '--storage-scan-interval=1', `--upload-part-size=${PART}`] });
    admin = new Client(srv.base);
    assert.equal((await admin.login('admin', ADMIN_PASSWORD)).status, 200);
    alice = await user(admin, srv.base, 'alice');
    assert.equal((await alice.req('PUT', '/api/v1/files/home/hello.txt', 'hi')).status, 201);
    home = join(srv.dir, 'data/home/alice');
  });

  after(async () => { await stopClean(srv); });

  it('answers every operation on a FIFO at once, with 4xx JSON, and keeps serving', async () => {
    execFileSync('mkfifo', [join(home, 'pipe.csv')]);
    mkdirSync(join(home, 'withpipe'));
    execFileSync('mkfifo', [join(home, 'withpipe/p')]);
    const ops = [
      ['GET', '/api/v1/files/home/pipe.csv'],
      ['GET', '/api/v1/files/home/pipe.csv?preview=1'],
      ['GET', '/api/v1/files/home/pipe.csv?download=1'],
      ['GET', '/api/v1/files/home/pipe.csv?download=1&inline=1'],
      ['POST', '/api/v1/files/home/pipe.csv', { op: 'copy', to: 'pipe2.csv' }],
    ];
    // more at once than there are workers: one hang each would stall them all
    const all = await Promise.all([...ops, ...ops].map(([m, p, b]) => within(alice, m, p, b)));
    for (const [i, r] of all.entries()) {
      const [m, p] = ops[i % ops.length];
      if (m === 'POST') {
        // a FIFO is not copied (as in a folder copy): nothing that reads it
        assert.ok(r.status === 201 || (r.status >= 400 && r.status < 500), `${m} ${p}: ${r.status} ${r.text}`);
      } else {
        assert.equal(r.status, 409, `${m} ${p}: ${r.text}`);
        assertErrorShape(r.json, 'conflict');
      }
    }
    // a folder holding one: stat, list, copy and the archive finish too
    assert.equal((await within(alice, 'GET', '/api/v1/files/home/withpipe')).status, 200);
    assert.equal((await within(alice, 'GET', '/api/v1/files/home/withpipe/p?stat=1')).status, 200);
    assert.equal((await within(alice, 'POST', '/api/v1/files/home/withpipe', { op: 'copy', to: 'withpipe2' })).status, 201);
    const tar = await within(alice, 'GET', '/api/v1/files/home/withpipe?download=1');
    assert.equal(tar.status, 200);
    await assertAlive(srv);
    assert.equal((await within(alice, 'GET', '/api/v1/files/home/hello.txt?download=1')).text, 'hi');
  });

  it('copies a sparse file sparse, inside the quota it reserved against', async () => {
    const used = (await alice.get('/api/v1/me')).json.storage.bytes;
    const q = await admin.req('PUT', '/api/v1/storage/quotas/home:alice', { bytes_hard: used + 64 * MiB });
    assert.equal(q.status, 200, q.text);
    const f = join(home, 'sparse.img');
    const fd = openSync(f, 'w');
    ftruncateSync(fd, 512 * MiB);
    writeSync(fd, Buffer.alloc(MiB, 7), 0, MiB, 200 * MiB);
    closeSync(fd);
    const r = await within(alice, 'POST', '/api/v1/files/home/sparse.img', { op: 'copy', to: 'sparse2.img' }, 20000);
    assert.equal(r.status, 201, r.text);
    const st = statSync(join(home, 'sparse2.img'));
    assert.equal(st.size, 512 * MiB);
    assert.ok(st.blocks * 512 < 4 * MiB, `the copy takes ${st.blocks * 512} bytes on disk: holes written as zeros`);
    execFileSync('rm', ['-f', f, join(home, 'sparse2.img')]);
  });

  it('stops a copy of hard links (measured once, copied each) with 507 and leaves nothing', async () => {
    mkdirSync(join(home, 'links'));
    writeFileSync(join(home, 'links/orig.bin'), Buffer.alloc(8 * MiB, 1));
    for (let i = 0; i < 20; i++) linkSync(join(home, 'links/orig.bin'), join(home, `links/l${i}`));
    const used = (await alice.get('/api/v1/me')).json.storage.bytes;
    const q = await admin.req('PUT', '/api/v1/storage/quotas/home:alice', { bytes_hard: used + 32 * MiB });
    assert.equal(q.status, 200, q.text);
    const r = await within(alice, 'POST', '/api/v1/files/home/links', { op: 'copy', to: 'links2' }, 20000);
    assert.equal(r.status, 507, r.text);
    assertErrorShape(r.json, 'insufficient_storage');
    assert.ok(!existsSync(join(home, 'links2')));
    assert.deepEqual(readdirSync(join(srv.dir, 'data/.uploads')), []);
    execFileSync('rm', ['-rf', join(home, 'links')]);
  });

  it('never lets a part in flight write into a completed upload', async () => {
    await admin.req('PUT', '/api/v1/storage/quotas/home:alice', { bytes_hard: null });
    const data = randomBytes(PART * 2);
    const sha = createHash('sha256').update(data).digest('hex');
    const up = await alice.post('/api/v1/uploads', { area: 'home', path: 'race.bin', size: data.length, sha256: sha });
    assert.equal(up.status, 201, up.text);
    const id = up.json.id;
    for (const n of [0, 1]) {
      const r = await alice.req('PUT', `/api/v1/uploads/${id}/parts/${n}`, data.subarray(n * PART, (n + 1) * PART));
      assert.equal(r.status, 200, r.text);
    }
    // part 1 again, with other bytes, held open half-way
    const c = await RawConn.open(srv.port);
    c.write(`PUT /api/v1/uploads/${id}/parts/1 HTTP/1.1\r\nHost: 127.0.0.1:${srv.port}\r\nCookie: ${alice.cookieHeader()}\r\n` +
      `X-CSRF-Token: ${alice.csrf}\r\nOrigin: ${srv.base}\r\nContent-Length: ${PART}\r\n\r\n`);
    c.write(Buffer.alloc(PART / 2, 0xee));
    await sleep(400); // its staging file is open by now
    const early = await within(alice, 'POST', `/api/v1/uploads/${id}/complete`);
    assert.equal(early.status, 409, early.text);
    assertErrorShape(early.json, 'conflict');
    assert.match(early.json.error.message, /part is still being written/);
    assert.ok(!existsSync(join(home, 'race.bin')));
    c.write(Buffer.alloc(PART / 2, 0xee));
    const late = await c.response();
    assert.equal(late.status, 200); // it was still open: the part counts
    c.destroy();
    // the re-sent bytes differ: the digest check refuses, the file stays out
    const bad = await within(alice, 'POST', `/api/v1/uploads/${id}/complete`);
    assert.equal(bad.status, 409, bad.text);
    assert.match(bad.json.error.message, /SHA-256/);
    const again = await alice.req('PUT', `/api/v1/uploads/${id}/parts/1`, data.subarray(PART));
    assert.equal(again.status, 200, again.text);
    // now completing, while a late part tries to write: the file is exactly the data
    const c2 = await RawConn.open(srv.port);
    const done = within(alice, 'POST', `/api/v1/uploads/${id}/complete`);
    c2.write(`PUT /api/v1/uploads/${id}/parts/0 HTTP/1.1\r\nHost: 127.0.0.1:${srv.port}\r\nCookie: ${alice.cookieHeader()}\r\n` +
      `X-CSRF-Token: ${alice.csrf}\r\nOrigin: ${srv.base}\r\nContent-Length: ${PART}\r\n\r\n`);
    c2.write(Buffer.alloc(PART, 0xdd));
    const [fin, lateRes] = await Promise.all([done, c2.response()]);
    c2.destroy();
    if (fin.status === 409) {
      // the late part won the lock (and counts, or found the upload
      // claimed for a moment): nothing was placed
      assert.ok(lateRes.status === 200 || lateRes.status === 409, `late part: ${lateRes.status}`);
      assert.ok(!existsSync(join(home, 'race.bin')));
    } else {
      assert.equal(fin.status, 201, fin.text);
      assert.ok(lateRes.status >= 400 && lateRes.status < 500, `late part: ${lateRes.status}`);
      await sleep(200);
      assert.equal(createHash('sha256').update(readFileSync(join(home, 'race.bin'))).digest('hex'), sha);
    }
  });
});
