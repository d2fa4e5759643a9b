// jobs_submit_storm.test.mjs — 500 job submissions at once through the API,
// each with its own Idempotency-Key, and half of them sent a second time
// concurrently (a client that retried before the first answer came):
// exactly 500 jobs and 500 queued allocation requests, every retry answered
// with its first try's job.
//
// The server runs without the scheduler lead (the test holds the leader's
// advisory lock), so nothing starts: the test is about the submit path, and
// no engine is needed.  The jobs are cancelled at the end.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { startServer, createDatabase, dropDatabase, Client, ADMIN_PASSWORD, psql } from '../lib/server.mjs';
import { eventually } from '../lib/itest.mjs';

const LEADER_LOCK = 1735553635; // server/db/leader.h LEADER_LOCK_SCHED
const USERS = 5, PER_USER = 100;

describe('a storm of submissions with Idempotency-Keys', () => {
  let srv, db, lockHolder, users = [], imageId;
  const q = (text) => psql(db.url, text);

  before(async () => {
    db = await createDatabase();
    lockHolder = spawn('psql', ['-qAtX', db.url], { stdio: ['pipe', 'ignore', 'ignore'] });
    lockHolder.stdin.write(`SELECT pg_advisory_lock(${LEADER_LOCK});\n`);
    assert.ok(await eventually(() => q(`SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = ${LEADER_LOCK} AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`) === '1', 5000), 'lock held');
    // a lock holder that runs no statements looks frozen: no takeover here
    srv = await startServer({ db, args: ['--scrypt-ln=10', '--leader-takeover-ms=3600000'] });
    const admin = new Client(srv.base);
    assert.equal((await admin.login('admin', ADMIN_PASSWORD)).status, 200);
    imageId = Number(q(`INSERT INTO images (reference, display_name) VALUES ('reg.local/tiny:1', 'Tiny') RETURNING id`).split('\n')[0]);
    for (let i = 0; i < USERS; i++) {
      const username = `storm${i}`;
      const r = await admin.post('/api/v1/users', { username, role: 'researcher', password: `${username}-pass-1` });
      assert.equal(r.status, 201, r.text);
      const c = new Client(srv.base);
      assert.equal((await c.login(username, `${username}-pass-1`)).status, 200);
      users.push({ c, id: r.json.user.id });
    }
  });

  after(async () => {
    await srv?.stop();
    lockHolder?.stdin.end();
    lockHolder?.kill();
    if (db) dropDatabase(db.name);
  });

  it('makes exactly 500 jobs of 750 concurrent submits (250 of them retries)', async () => {
    // one submit, retried by the client on a 409 "in progress" (what a
    // client does with it) and on a dropped connection
    async function submit(u, k) {
      const body = { name: `storm-${k}`, image_id: imageId, command: ['true'], cpu_millis: 100, mem_mib: 32, tags: ['storm'] };
      for (let attempt = 0; attempt < 20; attempt++) {
        const t0 = performance.now();
        let r;
        try {
          r = await u.c.post('/api/v1/jobs', body, { 'idempotency-key': `key-${u.id}-${k}` });
        } catch {
          continue; // the connection dropped: the same key again
        }
        if (r.status === 409 && /in progress/.test(r.text)) continue;
        return { status: r.status, id: r.json?.id, replayed: r.headers.get('idempotent-replayed') === 'true', ms: performance.now() - t0, text: r.text };
      }
      throw new Error(`submit ${k} never settled`);
    }
    const calls = [];
    for (const u of users)
      for (let k = 0; k < PER_USER; k++) {
        calls.push(submit(u, k).then((r) => ({ ...r, u: u.id, k })));
        if (k % 2 === 0) calls.push(submit(u, k).then((r) => ({ ...r, u: u.id, k, retry: true })));
      }
    assert.equal(calls.length, 750);
    const t0 = performance.now();
    const res = await Promise.all(calls);
    const secs = (performance.now() - t0) / 1000;
    for (const r of res) assert.ok(r.status === 201 || (r.status === 200 && r.replayed), `${r.status} ${r.text}`);
    assert.equal(res.filter((r) => r.status === 201).length, 500, 'one 201 per key');
    // both answers of a key name the same job
    const byKey = new Map();
    for (const r of res) {
      const key = `${r.u}-${r.k}`;
      if (byKey.has(key)) assert.equal(r.id, byKey.get(key), `key ${key}`);
      else byKey.set(key, r.id);
    }
    assert.equal(byKey.size, 500);
    assert.equal(new Set(byKey.values()).size, 500);
    assert.equal(q(`SELECT count(*) FROM jobs`), '500');
    assert.equal(q(`SELECT count(DISTINCT (user_id, idempotency_key)) FROM jobs`), '500');
    assert.equal(q(`SELECT count(*) FROM alloc_requests r JOIN jobs j ON j.request_id = r.id WHERE r.state = 'queued'`), '500');
    const ms = res.map((r) => r.ms).sort((a, b) => a - b);
    console.log(`# 750 submits (500 jobs) in ${secs.toFixed(2)} s: ${(500 / secs).toFixed(0)} jobs/s; p50 ${ms[Math.floor(ms.length * 0.5)].toFixed(0)} ms, p99 ${ms[Math.floor(ms.length * 0.99)].toFixed(0)} ms`);
    // the list sees them all, and the owner cancels them
    for (const u of users) {
      const l = await u.c.get('/api/v1/jobs?tags=storm&limit=500');
      assert.equal(l.json.items.length, PER_USER);
      assert.equal(l.json.counts.queued, PER_USER);
    }
    const ids = [...byKey.entries()];
    for (let i = 0; i < ids.length; i += 50) {
      await Promise.all(ids.slice(i, i + 50).map(async ([key, id]) => {
        const u = users.find((x) => key.startsWith(`${x.id}-`));
        const r = await u.c.post(`/api/v1/jobs/${id}/cancel`, {});
        assert.equal(r.status, 202, r.text);
      }));
    }
    assert.equal(q(`SELECT count(*) FROM jobs WHERE desired = 'cancelled'`), '500');
  });
});
