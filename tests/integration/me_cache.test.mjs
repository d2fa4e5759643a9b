// me_cache.test.mjs — GET /me keeps the caller's quotas, usage, storage and
// features per credential and rereads them only when their version moved
// (0041): every write to what they read must show in the very next /me, on
// every replica, whoever wrote it.
//
// Two replicas share one database.  Each change below is made once, either
// by SQL (any writer: another replica, a trigger, an admin's psql) or
// through the other replica's API, and the next /me on the first replica,
// by session and by API token, must show it.  No waiting: a kept copy has
// no expiry, so a write that did not move the version would stay invisible
// for good.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, dropDatabase, Client, ADMIN_PASSWORD } from '../lib/server.mjs';
import { sql, stopClean, eventually } from '../lib/itest.mjs';

describe('/me keeps its data only while nothing it reads changed', () => {
  let a, b, db, viaA, viaB, bearer;

  before(async () => {
    a = await startServer({ args: ['--sched-interval-ms=600000'] });
    db = a.db;
    b = await startServer({ db, args: ['--sched-interval-ms=600000'] });
    viaA = new Client(a.base);
    assert.equal((await viaA.login('admin', ADMIN_PASSWORD)).status, 200);
    viaB = new Client(b.base);
    assert.equal((await viaB.login('admin', ADMIN_PASSWORD)).status, 200);
    const t = await viaA.post('/api/v1/tokens', { name: 'me-cache', scopes: ['read'] });
    assert.equal(t.status, 201, t.text);
    bearer = t.json.token;
    // Each replica scans the homes a second after its start.  A scan
    // between two /me of one moment changes scanned_at, and one after a
    // test sets a home's bytes undoes them: wait until the first scans are
    // over (the same answer twice, 1.5 s apart; the next is 300 s away).
    const scans = () => sql(a, `SELECT count(*) FILTER (WHERE scanned_at IS NULL) || '/' || count(*)
      || '/' || COALESCE(max(scanned_at)::text, '') FROM storage_areas`);
    let seen = '';
    assert.ok(await eventually(async () => {
      const now = scans();
      const done = now === seen && now.startsWith('0/') && !now.startsWith('0/0/');
      seen = now;
      return done;
    }, 20000, 1500), `the first storage scans: ${seen}`);
  });

  after(async () => {
    await stopClean(b);
    await stopClean(a);
    if (db) dropDatabase(db.name);
  });

  // Both credentials of the admin on replica A; each /me twice, so the
  // second of each is served from what the first kept.
  async function me() {
    const bodies = [];
    for (let i = 0; i < 2; i++) {
      const s = await viaA.get('/api/v1/me');
      assert.equal(s.status, 200, s.text);
      const t = await fetch(a.base + '/api/v1/me', { headers: { authorization: `Bearer ${bearer}` } });
      assert.equal(t.status, 200);
      bodies.push(s.json, await t.json());
    }
    for (const x of bodies.slice(1)) {
      assert.deepEqual({ q: x.quotas, u: x.usage, s: x.storage, f: x.features },
        { q: bodies[0].quotas, u: bodies[0].usage, s: bodies[0].storage, f: bodies[0].features },
        'every /me of one moment agrees, session or token');
    }
    return bodies[0];
  }
  const pgLiteral = (v) => `'${v.replace(/'/g, "''")}'`;
  const uid = () => sql(a, "SELECT id FROM users WHERE username = 'admin'");

  it('shows each change to its sources in the next request', async () => {
    let m = await me();
    assert.deepEqual(m.quotas, {});
    assert.deepEqual(m.usage, {});
    assert.equal(m.features.tensorboard, false);

    // a pool (site-wide) and a quota set through the other replica's API
    sql(a, "INSERT INTO pools (name) VALUES ('mc')");
    const q = await viaB.req('PUT', '/api/v1/quotas', { user_id: Number(uid()), pool: 'mc', max_slices: 3 });
    assert.equal(q.status, 200, q.text);
    m = await me();
    assert.equal(m.quotas.mc?.max_slices, 3, JSON.stringify(m));
    assert.equal(m.usage.mc?.slices_in_use, 0);

    sql(a, `UPDATE quotas SET max_slices = 5 WHERE user_id = ${uid()}`);
    assert.equal((await me()).quotas.mc?.max_slices, 5);

    // GPU-seconds of the last 7 days
    sql(a, `INSERT INTO gpu_usage (user_id, pool_id, day, gpu_seconds)
            SELECT ${uid()}, id, current_date, 7200 FROM pools WHERE name = 'mc'`);
    assert.equal((await me()).usage.mc?.gpu_seconds_7d, 7200);

    // a pool renamed: a site-wide write
    sql(a, "UPDATE pools SET name = 'mc2' WHERE name = 'mc'");
    m = await me();
    assert.deepEqual(Object.keys(m.quotas), ['mc2']);

    // a request granted a slice, then the slice released, then the request
    sql(a, `
      INSERT INTO nodes (name, url, health, admin_state, ncpu, memory_bytes)
      VALUES ('mc', 'unix:///nonexistent/mc.sock', 'up', 'active', 8, 8589934592);
      INSERT INTO gpus (node_id, idx, uuid, model, memory_mib, simulated, devices, pool_id)
      SELECT n.id, 0, 'GPU-mc-0', 'NVIDIA A100-SXM4-80GB', 81920, true, ARRAY['/dev/null'], p.id
      FROM nodes n, pools p WHERE n.name = 'mc' AND p.name = 'mc2';
      INSERT INTO slices (pool_id, gpu_id, slot) SELECT pool_id, id, 0 FROM gpus WHERE uuid = 'GPU-mc-0';
      INSERT INTO alloc_requests (user_id, pool_id, slices, nodes, cpu_millis, mem_mib)
      SELECT ${uid()}, id, 1, 1, 100, 64 FROM pools WHERE name = 'mc2'`);
    assert.equal((await me()).usage.mc2?.slices_in_use, 0, 'a queued request holds nothing');
    sql(a, `
      BEGIN;
      UPDATE alloc_requests SET state = 'allocated', allocated_at = now() WHERE user_id = ${uid()};
      INSERT INTO allocations (request_id, slice_id, node_id)
      SELECT r.id, s.id, g.node_id FROM alloc_requests r, slices s JOIN gpus g ON g.id = s.gpu_id
      WHERE r.user_id = ${uid()} AND g.uuid = 'GPU-mc-0';
      COMMIT`);
    assert.equal((await me()).usage.mc2?.slices_in_use, 1);
    sql(a, 'UPDATE allocations SET released_at = now()');
    assert.equal((await me()).usage.mc2?.slices_in_use, 0, 'an allocation released alone');
    sql(a, `UPDATE allocations SET released_at = NULL;
            UPDATE alloc_requests SET state = 'released', released_at = now() WHERE user_id = ${uid()}`);
    assert.equal((await me()).usage.mc2?.slices_in_use, 0, 'the request released alone');

    // the home's storage row, then the site's defaults
    sql(a, `UPDATE storage_areas SET bytes = 12345, files = 7 WHERE area = 'home:${uid()}'`);
    m = await me();
    assert.equal(m.storage.bytes, 12345, JSON.stringify(m.storage));
    assert.equal(m.storage.files, 7);
    sql(a, 'UPDATE storage_defaults SET user_bytes_hard = 10000');
    m = await me();
    assert.equal(m.storage.bytes_hard, 10000);
    assert.equal(m.storage.over_hard, true);
    assert.match(m.storage.block_reason, /hard limit/);

    // TensorBoard set up: the setting names a catalog image
    sql(a, "INSERT INTO images (reference) VALUES ('127.0.0.1:1/mc/tensorboard:1')");
    assert.equal((await me()).features.tensorboard, false, 'not the configured image');
    sql(a, "UPDATE site_settings SET value = '127.0.0.1:1/mc/tensorboard:1' WHERE name = 'tensorboard_image'");
    assert.equal((await me()).features.tensorboard, true);
    sql(a, "DELETE FROM images WHERE reference = '127.0.0.1:1/mc/tensorboard:1'");
    assert.equal((await me()).features.tensorboard, false);

    // a TRUNCATE moves everyone's version
    sql(a, 'TRUNCATE gpu_usage');
    assert.equal((await me()).usage.mc2?.gpu_seconds_7d, 0);
  });

  it('serves a kept copy only to its own user, even when two users share a slot', async () => {
    // Copies are kept per user in 1,024 slots: ids 1,024 apart share one.
    const made = await viaA.post('/api/v1/users', { username: 'mc-own', role: 'student', password: 'mc-own-pass-1' });
    assert.equal(made.status, 201, made.text);
    const own = made.json.user.id;
    sql(a, `INSERT INTO users (id, username, role, password_hash)
            SELECT ${own + 1024}, 'mc-twin', 'student', password_hash FROM users WHERE id = ${own}`);
    sql(a, `INSERT INTO quotas (user_id, pool_id, max_slices)
            SELECT ${own}, id, 2 FROM pools WHERE name = 'mc2'`);
    const ownC = new Client(a.base), twinC = new Client(a.base);
    assert.equal((await ownC.login('mc-own', 'mc-own-pass-1')).status, 200);
    assert.equal((await twinC.login('mc-twin', 'mc-own-pass-1')).status, 200);
    for (let i = 0; i < 3; i++) {
      for (const [c, id, quotas] of [[ownC, own, { mc2: 2 }], [twinC, own + 1024, {}], [ownC, own, { mc2: 2 }]]) {
        const m = await c.get('/api/v1/me');
        assert.equal(m.status, 200, m.text);
        assert.equal(m.json.user.id, id);
        assert.deepEqual(Object.fromEntries(Object.entries(m.json.quotas).map(([k, q]) => [k, q.max_slices])),
          quotas, `user ${id} sees its own quotas only`);
        assert.equal(m.json.storage.bytes_hard, 10000);
      }
    }
  });

  // /me writes the caller's members itself (not through jansson): the
  // object must read back exactly, and be the one login answers with.
  it('writes the caller\'s own members exactly, per credential', async () => {
    const name = 'Zhāng "三" \\ back\tslash\nline </script> 😀';
    sql(a, `UPDATE users SET display_name = ${pgLiteral(name)}, email = 'q"e@example.org' WHERE username = 'admin'`);
    const c = new Client(a.base);
    const login = await c.login('admin', ADMIN_PASSWORD);
    assert.equal(login.status, 200, login.text);
    const s = await c.get('/api/v1/me');
    assert.equal(s.status, 200, s.text);
    assert.equal(s.json.user.display_name, name);
    assert.equal(s.json.user.email, 'q"e@example.org');
    assert.deepEqual(s.json.user, login.json.user, 'login and /me give one user object');
    assert.equal(s.json.auth, 'session');
    assert.equal(s.json.csrf_token, c.csrf);
    assert.ok(!('scopes' in s.json));
    const rw = await c.post('/api/v1/tokens', { name: 'me-cache-rw', scopes: ['read', 'write'] });
    assert.equal(rw.status, 201, rw.text);
    for (const [tok, scopes] of [[bearer, ['read']], [rw.json.token, ['read', 'write']]]) {
      const t = await fetch(a.base + '/api/v1/me', { headers: { authorization: `Bearer ${tok}` } });
      assert.equal(t.status, 200);
      const j = await t.json();
      assert.equal(j.auth, 'token');
      assert.deepEqual(j.scopes, scopes);
      assert.ok(!('csrf_token' in j));
      assert.deepEqual(j.user, login.json.user);
    }
  });

  it('moves only the writer\'s users, once per statement', async () => {
    sql(a, `INSERT INTO users (username, role, password_hash)
            SELECT 'mc' || i, 'student', '$scrypt$none' FROM generate_series(1, 3) i`);
    const v = () => sql(a, `SELECT string_agg(u.username || '=' || COALESCE(m.v, 0), ',' ORDER BY u.username)
                            FROM users u LEFT JOIN me_versions m ON m.user_id = u.id WHERE u.username LIKE 'mc_'`);
    const site = () => Number(sql(a, 'SELECT v FROM me_versions WHERE user_id = 0'));
    const before = v(), s0 = site();
    // one statement, three quotas of two users: each user moves once
    sql(a, `INSERT INTO quotas (user_id, pool_id, max_slices)
            SELECT u.id, p.id, 1 FROM users u, pools p
            WHERE u.username IN ('mc1', 'mc2') AND p.name = 'mc2'`);
    assert.notEqual(v(), before);
    assert.match(v(), /^mc1=1,mc2=1,mc3=0$/);
    assert.equal(site(), s0, 'per-user writes leave the site version alone');
    // an UPDATE that matches nothing moves nothing
    sql(a, "UPDATE pools SET description = 'x' WHERE name = 'no such pool'");
    assert.equal(site(), s0);
    // a queued request's reason is not something /me shows
    sql(a, `INSERT INTO alloc_requests (user_id, pool_id, slices, nodes, cpu_millis, mem_mib)
            SELECT u.id, p.id, 1, 1, 100, 64 FROM users u, pools p WHERE u.username = 'mc3' AND p.name = 'mc2'`);
    sql(a, "UPDATE alloc_requests SET reason = 'position 1 of 1' WHERE state = 'queued'");
    assert.match(v(), /,mc3=0$/);
  });
});
