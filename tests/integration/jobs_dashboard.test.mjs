// jobs_dashboard.test.mjs — GET /api/v1/jobs as the dashboard uses it:
// every filter (user, state, image by id or reference, pool, tags, text,
// created since/until, ended since/until, relative times), every sort
// (created, started, finished, name, runtime; asc and desc) with cursor
// pages, and counts per state under the other filters.  A history of jobs
// is written with SQL straight into the test database; each answer is
// checked page by page against an independent SQL query over the same rows.
//
// The server runs without the scheduler lead (the test holds the leader's
// advisory lock), so no driver touches the rows written here.
//
// "My failed jobs this week" is one request: ?state=failed&ended_since=7d.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { startServer, createDatabase, dropDatabase, Client, ADMIN_PASSWORD, psql } from '../lib/server.mjs';
import { assertErrorShape, eventually, sha256hex } from '../lib/itest.mjs';

const STATES = ['queued', 'starting', 'running', 'stopping', 'succeeded', 'failed', 'cancelled', 'lost'];
const LEADER_LOCK = 1735553635; // server/db/leader.h LEADER_LOCK_SCHED

// the same order as the API's, written the plain way (NULLs last both ways)
const ORDER = {
  created: (d) => `id ${d}`,
  started: (d) => `started_at ${d} NULLS LAST, id ${d}`,
  finished: (d) => `finished_at ${d} NULLS LAST, id ${d}`,
  name: (d) => `name COLLATE "C" ${d}, id ${d}`,
  runtime: (d) => `(finished_at - started_at) ${d} NULLS LAST, id ${d}`,
};

describe('the jobs dashboard: filters, sorts, cursor pages, counts', () => {
  let srv, db, lockHolder, admin, alice, bob, ids = {};
  const q = (text) => psql(db.url, text);

  before(async () => {
    db = await createDatabase();
    // hold the scheduler lead so this server never drives the jobs below
    lockHolder = spawn('psql', ['-qAtX', db.url], { stdio: ['pipe', 'ignore', 'ignore'] });
    lockHolder.stdin.write(`SELECT pg_advisory_lock(${LEADER_LOCK});\n`);
    assert.ok(await eventually(() => q(`SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = ${LEADER_LOCK} AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`) === '1', 5000), 'lock held');
    // a lock holder that runs no statements looks frozen: no takeover here
    srv = await startServer({ db, args: ['--scrypt-ln=10', '--leader-takeover-ms=3600000'] });
    admin = new Client(srv.base);
    assert.equal((await admin.login('admin', ADMIN_PASSWORD)).status, 200);
    const mk = async (username) => {
      const r = await admin.post('/api/v1/users', { username, role: 'student', password: `${username}-pass-1` });
      assert.equal(r.status, 201, r.text);
      const c = new Client(srv.base);
      assert.equal((await c.login(username, `${username}-pass-1`)).status, 200);
      return { c, id: r.json.user.id, username };
    };
    alice = await mk('alice');
    bob = await mk('bob');
    ids.admin = Number(q(`SELECT id FROM users WHERE username = 'admin'`));
    q(`INSERT INTO images (reference, display_name) VALUES ('reg.local/torch:1', 'Torch'), ('reg.local/tf:2', 'TF'), ('reg.local/bare:3', 'Bare')`);
    q(`INSERT INTO pools (name) VALUES ('a100'), ('t4')`);
    ids.images = q(`SELECT id FROM images ORDER BY id`).split('\n').map(Number);
    ids.pools = q(`SELECT id FROM pools ORDER BY id`).split('\n').map(Number);
    // 480 jobs over three users, ten days: every state, shared names and
    // end times (ties the id breaks), tags from {a,b,c,d}, some without
    // image or pool, reasons on the failed ones
    q(`INSERT INTO jobs (user_id, name, tags, image_id, command, pool_id, state, reason, directory,
         created_at, started_at, finished_at)
       SELECT (ARRAY[${alice.id}, ${bob.id}, ${ids.admin}])[1 + i % 3],
         'train-' || (i % 23),
         CASE i % 6 WHEN 0 THEN ARRAY[]::text[] WHEN 1 THEN ARRAY['a'] WHEN 2 THEN ARRAY['a','b']
           WHEN 3 THEN ARRAY['b','c'] WHEN 4 THEN ARRAY['a','b','c','d'] ELSE ARRAY['d'] END,
         CASE WHEN i % 10 = 9 THEN NULL ELSE (ARRAY[${ids.images.join(',')}])[1 + i % 3] END,
         ARRAY['python', 'train.py', '--seed=' || i] || CASE WHEN i % 7 = 0 THEN ARRAY['--resnet50'] ELSE ARRAY[]::text[] END,
         CASE WHEN i % 5 = 4 THEN NULL ELSE (ARRAY[${ids.pools.join(',')}])[1 + i % 2] END,
         (ARRAY['queued','starting','running','stopping','succeeded','failed','cancelled','lost'])[1 + (i * 7) % 8],
         CASE WHEN (i * 7) % 8 = 5 THEN 'exited with code 1: CUDA out of memory' ELSE '' END,
         'home/x/jobs/' || i,
         t.base - i * interval '29 minutes',
         CASE WHEN (i * 7) % 8 >= 1 THEN t.base - i * interval '29 minutes' + (i % 13) * interval '1 minute' END,
         CASE WHEN (i * 7) % 8 >= 4 THEN date_trunc('hour', t.base - i * interval '29 minutes') + interval '3 hours' END
       FROM generate_series(1, 480) i, (SELECT date_trunc('minute', now()) + interval '30 seconds' AS base) t`);
  });

  after(async () => {
    await srv?.stop();
    lockHolder?.stdin.end();
    lockHolder?.kill();
    if (db) dropDatabase(db.name);
  });

  // The WHERE of the independent query for filters f, as the caller who
  // (null: an admin) sees it.
  function where(f, who) {
    const c = ['true'];
    if (who) c.push(`user_id = ${who}`);
    if (f.user) c.push(`user_id = (SELECT id FROM users WHERE username = '${f.user}')`);
    if (f.state) c.push(`state IN (${f.state.split(',').map((s) => `'${s}'`).join(',')})`);
    if (f.image) c.push(/^\d+$/.test(f.image) ? `image_id = ${f.image}` : `image_id = (SELECT id FROM images WHERE reference = '${f.image}')`);
    if (f.pool) c.push(`pool_id = (SELECT id FROM pools WHERE name = '${f.pool}')`);
    if (f.tags) for (const t of f.tags.split(',')) c.push(`'${t}' = ANY(tags)`);
    if (f.q) c.push(`strpos(lower(name || ' ' || array_to_string(tags, ' ') || ' ' || array_to_string(command, ' ') || ' ' || reason), lower('${f.q}')) > 0`);
    if (f.since) c.push(`created_at >= '${f.since}'`);
    if (f.until) c.push(`created_at < '${f.until}'`);
    if (f.ended_since) c.push(`finished_at >= '${f.ended_since}'`);
    if (f.ended_until) c.push(`finished_at < '${f.ended_until}'`);
    return c.join(' AND ');
  }

  function expected(f, who, sort = 'created', order = 'desc') {
    const ids = q(`SELECT id FROM jobs WHERE ${where(f, who)} ORDER BY ${ORDER[sort](order)}`);
    return ids ? ids.split('\n').map(Number) : [];
  }

  function expectedCounts(f, who) {
    const { state, ...rest } = f;
    const out = Object.fromEntries(STATES.map((s) => [s, 0]));
    const rows = q(`SELECT state, count(*) FROM jobs WHERE ${where(rest, who)} GROUP BY state`);
    for (const line of rows ? rows.split('\n') : []) { const [s, n] = line.split('|'); out[s] = Number(n); }
    return out;
  }

  // All pages of the list for f; checks each page's counts.
  async function pages(c, f, { sort, order, limit = 40 } = {}) {
    const params = new URLSearchParams({ ...f, limit: String(limit) });
    if (sort) params.set('sort', sort);
    if (order) params.set('order', order);
    const got = [];
    let cursor = null, n = 0, counts = null;
    do {
      const p = new URLSearchParams(params);
      if (cursor) p.set('cursor', cursor);
      const r = await c.get(`/api/v1/jobs?${p}`);
      assert.equal(r.status, 200, `${p}: ${r.text}`);
      assert.ok(r.json.items.length <= limit);
      if (counts) assert.deepEqual(r.json.counts, counts, 'the counts do not change with the page');
      counts = r.json.counts;
      got.push(...r.json.items.map((x) => x.id));
      cursor = r.json.next_cursor;
      if (cursor) assert.equal(r.json.items.length, limit, 'a full page before a cursor');
      assert.ok(++n < 100, 'pages end');
    } while (cursor);
    return { ids: got, counts };
  }

  const SINCE = () => q(`SELECT to_char(now() - interval '4 days', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')`);
  const UNTIL = () => q(`SELECT to_char(now() - interval '2 days', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')`);
  let FILTERS;
  before(() => {
    const since = SINCE(), until = UNTIL();
    FILTERS = {
      user: { user: 'bob' },
      state: { state: 'failed' },
      states: { state: 'running,lost,queued' },
      image_id: { image: String(ids.images[1]) },
      image_ref: { image: 'reg.local/tf:2' },
      pool: { pool: 't4' },
      tag: { tags: 'a' },
      tags: { tags: 'a,b' },
      q: { q: 'CUDA out of' },
      q_short: { q: 'n5' },
      q_command: { q: 'resnet50' },
      since: { since },
      until: { until },
      ended_since: { ended_since: since },
      ended_until: { ended_until: until },
    };
  });

  it('every filter alone, in every sort and order, page by page, with its counts', async () => {
    // each sort both ways over the filters (alternating), counts once each
    let fi = 0;
    for (const [name, f] of Object.entries(FILTERS)) {
      const counts = expectedCounts(f, null);
      for (const [si, sort] of Object.keys(ORDER).entries()) {
        const order = (fi + si) % 2 ? 'asc' : 'desc';
        const got = await pages(admin, f, { sort, order, limit: 45 });
        assert.deepEqual(got.ids, expected(f, null, sort, order), `${name} ${sort} ${order}`);
        assert.deepEqual(got.counts, counts, `${name} counts`);
      }
      fi++;
    }
  });

  it('every pair of filters, and all at once', async () => {
    const names = Object.keys(FILTERS).filter((n) => !['states', 'image_ref', 'q_short', 'until'].includes(n));
    let nonEmpty = 0;
    for (let i = 0; i < names.length; i++) {
      for (let k = i + 1; k < names.length; k++) {
        const f = { ...FILTERS[names[i]], ...FILTERS[names[k]] };
        const sort = Object.keys(ORDER)[(i + k) % 5];
        const got = await pages(admin, f, { sort, limit: 50 });
        const want = expected(f, null, sort);
        assert.deepEqual(got.ids, want, `${names[i]} + ${names[k]} by ${sort}`);
        assert.deepEqual(got.counts, expectedCounts(f, null), `${names[i]} + ${names[k]} counts`);
        if (want.length) nonEmpty++;
      }
    }
    assert.ok(nonEmpty > 40, `most pairs find something (${nonEmpty})`);
    const all = { user: 'alice', state: 'succeeded,failed,cancelled,lost', image: 'reg.local/torch:1', pool: 'a100', tags: 'a', q: 'train', since: SINCE(), ended_until: UNTIL() };
    for (const sort of Object.keys(ORDER)) {
      const got = await pages(alice.c, all, { sort, order: 'asc', limit: 2 });
      assert.deepEqual(got.ids, expected(all, alice.id, sort, 'asc'), `all by ${sort}`);
    }
  });

  it('"my failed jobs this week" is one request: state=failed&ended_since=7d', async () => {
    const before = expected({ state: 'failed', ended_since: q(`SELECT now() - interval '7 days'`) }, alice.id, 'finished');
    const r = await alice.c.get('/api/v1/jobs?state=failed&ended_since=7d&sort=finished');
    const after = expected({ state: 'failed', ended_since: q(`SELECT now() - interval '7 days'`) }, alice.id, 'finished');
    assert.equal(r.status, 200, r.text);
    const got = r.json.items.map((x) => x.id);
    assert.ok(got.length > 5, 'some');
    assert.ok(JSON.stringify(got) === JSON.stringify(before) || JSON.stringify(got) === JSON.stringify(after), `${got} vs ${before}`);
    assert.ok(r.json.items.every((x) => x.state === 'failed' && x.username === 'alice'));
    // hours and minutes too
    for (const rel of ['36h', '90m']) assert.equal((await alice.c.get(`/api/v1/jobs?since=${rel}`)).status, 200);
  });

  it('keeps tenants apart: a student sees their own, user= someone else 403, admins all, read-only tokens read', async () => {
    const own = await pages(alice.c, {}, { limit: 100 });
    assert.deepEqual(own.ids, expected({}, alice.id));
    assert.deepEqual(own.counts, expectedCounts({}, alice.id));
    assert.deepEqual((await pages(alice.c, { user: 'alice' }, { limit: 100 })).ids, own.ids);
    // a student's filters never reach past their own rows
    for (const f of [{ tags: 'a' }, { q: 'train' }, { image: String(ids.images[0]) }, { pool: 'a100' }])
      assert.deepEqual((await pages(alice.c, f, { sort: 'name' })).ids, expected(f, alice.id, 'name'));
    const r = await alice.c.get('/api/v1/jobs?user=bob');
    assert.equal(r.status, 403, r.text);
    assertErrorShape(r.json, 'forbidden');
    assert.deepEqual((await pages(admin, {}, { limit: 500 })).ids, expected({}, null));
    assert.deepEqual((await pages(admin, { user: 'bob' }, { sort: 'runtime' })).ids, expected({ user: 'bob' }, null, 'runtime'));
    const t = await alice.c.post('/api/v1/tokens', { name: 'ro', scopes: ['read'] });
    assert.equal(t.status, 201, t.text);
    const ro = await fetch(`${srv.base}/api/v1/jobs?state=failed&sort=finished`, { headers: { authorization: `Bearer ${t.json.token}` } });
    assert.equal(ro.status, 200);
    assert.deepEqual((await ro.json()).items.map((x) => x.id), expected({ state: 'failed' }, alice.id, 'finished').slice(0, 50));
    assert.equal((await fetch(`${srv.base}/api/v1/jobs`)).status, 401);
    const h = sha256hex(bob.c.cookies.get('gc_session'));
    q(`UPDATE sessions SET expires_at = now() - interval '1 second' WHERE token_hash = '${h}'`);
    assert.equal((await bob.c.get('/api/v1/jobs')).status, 401);
  });

  it('refuses bad input with a JSON error', async () => {
    const first = (await admin.get('/api/v1/jobs?sort=finished&limit=3')).json.next_cursor;
    assert.ok(first);
    for (const p of ['sort=bogus', 'order=up', 'cursor=zz', 'cursor=fd.1.x', `sort=name&cursor=${first}`, `sort=finished&order=asc&cursor=${first}`,
      'cursor=nd.5.UPPER', 'tags=a%20b', 'tags=' + 'x'.repeat(70), 'state=done', 'ended_since=yesterday', 'until=0d', 'since=100000d', 'limit=0', 'limit=x']) {
      const r = await admin.get(`/api/v1/jobs?${p}`);
      assert.equal(r.status, 400, `${p}: ${r.text}`);
      assertErrorShape(r.json, 'invalid');
    }
    // a plain id cursor is still the created (id) order's
    const r = await admin.get(`/api/v1/jobs?limit=3&cursor=${ids.images.length ? 400 : 1}`);
    assert.equal(r.status, 200);
    assert.deepEqual(r.json.items.map((x) => x.id), [399, 398, 397]);
  });
});
