// jobs.test.mjs — training jobs on the world's real engines: submit →
// succeeded with the log in the job directory; a failing command → failed
// with its exit code and the traceback's last line; cancel of a running
// job (container removed, allocation released, directory kept); the
// runtime limit; Idempotency-Key; the list's filters and counts; tenant
// checks (other user, admin, read-only token, CSRF, expired session); bad
// input.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { assertErrorShape, stopClean, call, sha256hex } from '../lib/itest.mjs';
import { world, mkUser, cleanup, ours, sql, eventually, env, docker, inspect, clusterId } from './instances_lib.mjs';

const FINAL = ['succeeded', 'failed', 'cancelled', 'lost'];

async function submit(c, w, body = {}, headers = {}) {
  const r = await c.post('/api/v1/jobs', {
    name: 'j', image_id: w.image.id, command: ['sh', '-c', 'echo hi'], cpu_millis: 200, mem_mib: 64, ...body,
  }, headers);
  assert.equal(r.status, 201, r.text);
  return r.json;
}

async function waitJob(c, id, states, ms = 30000) {
  const want = Array.isArray(states) ? states : [states];
  let last = null;
  const ok = await eventually(async () => {
    const r = await c.get(`/api/v1/jobs/${id}`);
    last = r.json;
    return r.status === 200 && want.includes(r.json.state);
  }, ms, 100);
  assert.ok(ok, `job ${id} did not reach ${want.join('|')}: ${JSON.stringify(last)}`);
  return last;
}

const liveAllocs = (srv, jobId) => Number(sql(srv, `SELECT count(*) FROM allocations a JOIN jobs j ON j.request_id = a.request_id WHERE j.id = ${jobId} AND a.released_at IS NULL`));

describe('jobs', () => {
  let w, alice, bob;
  before(async () => {
    w = await world({ node2: false });
    alice = await mkUser(w, 'alice');
    bob = await mkUser(w, 'bob');
  });
  // the containers go first: a job still writing its log into the job
  // folder kept the test's data folder from being removed
  after(async () => { try { cleanup(w?.srv); } finally { await stopClean(w?.srv); } });

  const jobDir = (user, j) => join(w.srv.dir, 'data', 'home', user, j.directory);

  it('runs a job to success: hyperparameters, the log in its directory, GPUs back', async () => {
    const j = await submit(alice.c, w, {
      name: 'train-ok', pool: 'a100', slices: 1, tags: ['demo'],
      hyperparameters: { lr: 0.1, epochs: 2, opt: 'sgd' },
      command: ['sh', '-c', 'echo "hello from $USER in $(pwd)"; echo "hp=$GPUCLOUD_HPARAMS_JSON"; cat hyperparameters.json; echo; echo to-stderr >&2; echo done'],
    });
    assert.equal(j.state, 'queued');
    assert.equal(j.username, 'alice');
    assert.deepEqual(j.tags, ['demo']);
    assert.match(j.directory, new RegExp(`^jobs/${j.id}-train-ok$`));
    const done = await waitJob(alice.c, j.id, FINAL);
    assert.equal(done.state, 'succeeded', JSON.stringify(done));
    assert.equal(done.exit_code, 0);
    assert.equal(done.node, 'node1');
    assert.ok(done.started_at && done.finished_at, 'timestamps');
    assert.ok(Date.parse(done.finished_at) >= Date.parse(done.started_at));
    assert.equal(done.gpus.length, 0, 'no GPUs after the end');
    assert.equal(liveAllocs(w.srv, j.id), 0, 'the allocation was released');
    assert.equal(sql(w.srv, `SELECT r.state FROM alloc_requests r JOIN jobs j ON j.request_id = r.id WHERE j.id = ${j.id}`), 'released');
    assert.equal(ours(w.srv, env.GPUCLOUD_WORLD_DOCKER1).filter((c) => c.name === done.container_name).length, 0, 'container removed');
    // the log, complete after removal, in the job directory
    const dir = jobDir('alice', done);
    const log = readFileSync(join(dir, 'output.log'), 'utf8');
    assert.match(log, new RegExp(`hello from alice in /home/alice/jobs/${j.id}-train-ok`));
    assert.deepEqual(JSON.parse(/hp=(.*)/.exec(log)[1]), { lr: 0.1, epochs: 2, opt: "sgd" });
    assert.match(log, /"lr": ?0\.1[,}]/, "numbers as written");
    // both streams; their order against each other is the engine's
    assert.match(log, /^to-stderr$/m);
    assert.match(log, /^done$/m);
    assert.deepEqual(JSON.parse(readFileSync(join(dir, 'hyperparameters.json'), 'utf8')), { lr: 0.1, epochs: 2, opt: 'sgd' });
    assert.equal(statSync(dir).uid, statSync(join(dir, 'output.log')).uid, 'the log belongs to the user');
    assert.notEqual(statSync(dir).uid, 0);
    // the API's tail
    const t = await alice.c.get(`/api/v1/jobs/${j.id}/logs?tail=2`);
    assert.equal(t.status, 200, t.text);
    assert.match(t.headers.get('content-type'), /^text\/plain/);
    assert.equal(t.text.trim().split('\n').length, 2);
    assert.equal(t.text, log.split('\n').slice(-3).join('\n'));
    const all = await alice.c.get(`/api/v1/jobs/${j.id}/logs`);
    assert.equal(all.text, log);
  });

  it('fails a job with its exit code and the last line of its traceback', async () => {
    const j = await submit(alice.c, w, {
      name: 'train-bad',
      command: ['sh', '-c', 'echo step 1; echo "Traceback (most recent call last):" >&2; echo "  File \\"train.py\\", line 3, in <module>" >&2; echo "ValueError: learning rate must be positive" >&2; exit 3'],
    });
    const done = await waitJob(alice.c, j.id, FINAL);
    assert.equal(done.state, 'failed', JSON.stringify(done));
    assert.equal(done.exit_code, 3);
    assert.equal(done.reason, 'exited with code 3: ValueError: learning rate must be positive');
    assert.equal(done.reason_code, 'exit_code');
    assert.equal(liveAllocs(w.srv, j.id), 0);
    assert.equal(ours(w.srv, env.GPUCLOUD_WORLD_DOCKER1).filter((c) => c.name === done.container_name).length, 0);
    // the failed filter finds it, with its reason, in one request
    const l = await alice.c.get('/api/v1/jobs?state=failed');
    assert.equal(l.status, 200, l.text);
    assert.deepEqual(l.json.items.map((x) => x.id), [j.id]);
    assert.match(l.json.items[0].reason, /ValueError/);
  });

  it('fails a job killed at its memory limit as OOM-killed', async () => {
    const j = await submit(alice.c, w, { name: 'hungry', mem_mib: 32, command: ['sh', '-c', 'echo allocating; dd if=/dev/zero of=/dev/null bs=256M count=1; echo survived'] });
    const done = await waitJob(alice.c, j.id, FINAL);
    assert.equal(done.state, 'failed', JSON.stringify(done));
    assert.equal(done.reason_code, 'oom_killed', JSON.stringify(done));
    assert.match(done.reason, /^killed for going over its memory limit of 32 MiB \(OOM\)/);
    assert.equal(liveAllocs(w.srv, j.id), 0);
  });

  it('cancels a running job: SIGTERM, grace, kill; GPUs back at once, container gone, directory kept', async () => {
    const j = await submit(alice.c, w, { name: 'sleeper', pool: 'a100', slices: 2, command: ['sh', '-c', 'echo started; exec sleep 300'] });
    const run = await waitJob(alice.c, j.id, 'running');
    assert.equal(run.gpus.length, 2);
    assert.equal(liveAllocs(w.srv, j.id), 2);
    await eventually(async () => (await alice.c.get(`/api/v1/jobs/${j.id}/logs`)).text.includes('started'), 10000);
    // someone else cannot
    assert.equal((await bob.c.post(`/api/v1/jobs/${j.id}/cancel`)).status, 404);
    const t0 = Date.now();
    const c = await alice.c.post(`/api/v1/jobs/${j.id}/cancel`);
    assert.equal(c.status, 202, c.text);
    assert.equal(c.json.desired, 'cancelled');
    const done = await waitJob(alice.c, j.id, FINAL, 20000);
    assert.equal(done.state, 'cancelled', JSON.stringify(done));
    assert.equal(done.reason, 'cancelled by alice');
    assert.equal(done.reason_code, 'cancelled');
    assert.ok(Date.now() - t0 < 10000, `cancelled in ${Date.now() - t0} ms (grace 1 s)`);
    assert.equal(liveAllocs(w.srv, j.id), 0, 'GPUs released');
    assert.equal(ours(w.srv, env.GPUCLOUD_WORLD_DOCKER1).filter((x) => x.name === run.container_name).length, 0, 'container removed');
    assert.ok(existsSync(join(jobDir('alice', done), 'output.log')), 'the directory stays');
    // cancelling again: it has ended
    const again = await alice.c.post(`/api/v1/jobs/${j.id}/cancel`);
    assert.equal(again.status, 409, again.text);
    assertErrorShape(again.json, 'conflict');
  });

  it('cancels a queued job without starting it', async () => {
    // the pool has 4 GPUs; ask for more than are free so it stays queued
    const hog = await submit(alice.c, w, { name: 'hog', pool: 'a100', slices: 4, command: ['sleep', '300'] });
    await waitJob(alice.c, hog.id, 'running');
    const q = await submit(bob.c, w, { name: 'waiter', pool: 'a100', slices: 1 });
    await new Promise((r) => setTimeout(r, 500));
    assert.equal((await bob.c.get(`/api/v1/jobs/${q.id}`)).json.state, 'queued');
    assert.equal((await bob.c.post(`/api/v1/jobs/${q.id}/cancel`)).status, 202);
    const d = await waitJob(bob.c, q.id, FINAL);
    assert.equal(d.state, 'cancelled');
    assert.equal(d.reason, 'cancelled by bob');
    assert.equal(d.started_at, null);
    // an admin cancels alice's
    assert.equal((await w.admin.post(`/api/v1/jobs/${hog.id}/cancel`)).status, 202);
    const h = await waitJob(alice.c, hog.id, FINAL);
    assert.equal(h.reason, 'cancelled by admin');
  });

  it('preempts a scavenger job for normal work: it fails with that reason and its GPUs go to the other job', async () => {
    const scav = await submit(alice.c, w, { name: 'scav', pool: 'a100', slices: 4, priority: 'scavenger', command: ['sleep', '300'] });
    await waitJob(alice.c, scav.id, 'running');
    const normal = await submit(bob.c, w, { name: 'urgent', pool: 'a100', slices: 2, command: ['sh', '-c', 'echo got it'] });
    const d = await waitJob(alice.c, scav.id, FINAL, 30000);
    assert.equal(d.state, 'failed', JSON.stringify(d));
    assert.equal(d.reason_code, 'preempted');
    assert.equal(d.reason, 'preempted by higher-priority work');
    const n = await waitJob(bob.c, normal.id, FINAL, 30000);
    assert.equal(n.state, 'succeeded', JSON.stringify(n));
  });

  it('requeues a preempted job with retries left; its second attempt runs to success', async () => {
    const scav = await submit(alice.c, w, {
      name: 'retrier', pool: 'a100', slices: 4, priority: 'scavenger', retry_limit: 1,
      command: ['sh', '-c', 'if [ -f attempted ]; then echo second attempt; exit 0; fi; touch attempted; echo first attempt; exec sleep 300'],
    });
    await waitJob(alice.c, scav.id, 'running');
    await eventually(async () => (await alice.c.get(`/api/v1/jobs/${scav.id}/logs`)).text.includes('first attempt'), 10000);
    const normal = await submit(bob.c, w, { name: 'urgent2', pool: 'a100', slices: 2, command: ['sh', '-c', 'sleep 1'] });
    // preempted, then queued again (not failed for good)
    assert.ok(await eventually(async () => {
      const j = (await alice.c.get(`/api/v1/jobs/${scav.id}`)).json;
      return j.retries === 1 && j.reason_code === 'requeued';
    }, 30000), 'requeued');
    assert.equal((await bob.c.get(`/api/v1/jobs/${normal.id}`)).status, 200);
    const d = await waitJob(alice.c, scav.id, FINAL, 40000);
    assert.equal(d.state, 'succeeded', JSON.stringify(d));
    assert.equal(d.retries, 1);
    const dir = jobDir('alice', d);
    assert.match(readFileSync(join(dir, 'output.log'), 'utf8'), /^second attempt\n$/);
    assert.match(readFileSync(join(dir, 'output.attempt-1.log'), 'utf8'), /first attempt/);
    assert.equal(sql(w.srv, `SELECT count(*) FROM alloc_requests WHERE owner_kind = 'job' AND owner_id = '${scav.id}'`), '2');
    assert.equal(liveAllocs(w.srv, scav.id), 0);
    // without retries left it stays failed (the scavenger test above: retry_limit 0)
    assert.equal(sql(w.srv, "SELECT state || ' ' || retries FROM jobs WHERE name = 'scav'"), 'failed 0');
  });

  it('stops a job at its maximum runtime', async () => {
    const j = await submit(alice.c, w, { name: 'too-long', max_runtime_s: 2, command: ['sleep', '60'] });
    const d = await waitJob(alice.c, j.id, FINAL, 30000);
    assert.equal(d.state, 'failed', JSON.stringify(d));
    assert.equal(d.reason, 'exceeded its maximum runtime of 2 s');
    assert.equal(d.reason_code, 'runtime_exceeded');
  });

  it('follows a log as Server-Sent Events, resumable with Last-Event-ID, ending with the job', async () => {
    // Reads an SSE stream to its end: [{id, data, event}]
    const sse = async (path, headers = {}) => {
      const res = await fetch(w.srv.base + path, { headers: { cookie: alice.c.cookieHeader(), ...headers }, signal: AbortSignal.timeout(30000) });
      assert.equal(res.status, 200);
      assert.match(res.headers.get('content-type'), /^text\/event-stream/);
      const text = await res.text();
      return text.split('\n\n').filter(Boolean).map((block) => {
        const ev = {};
        for (const line of block.split('\n')) {
          const i = line.indexOf(': ');
          ev[line.slice(0, i)] = line.slice(i + 2);
        }
        return ev;
      });
    };
    const j = await submit(alice.c, w, { name: 'talker', command: ['sh', '-c', 'for i in 1 2 3 4 5; do echo "msg $i"; sleep 0.3; done; printf "no newline"'] });
    // subscribed while it is queued or starting: everything, then the end
    const evs = await sse(`/api/v1/jobs/${j.id}/logs?follow=1`);
    const lines = evs.filter((e) => e.data !== undefined && !e.event).map((e) => e.data);
    assert.deepEqual(lines, ['msg 1', 'msg 2', 'msg 3', 'msg 4', 'msg 5', 'no newline']);
    assert.deepEqual(evs.at(-1), { event: 'end', data: 'succeeded' });
    // ids are byte offsets: resuming after "msg 2" gives the rest only
    const after2 = evs.find((e) => e.data === 'msg 2').id;
    assert.equal(Number(after2), 'msg 1\nmsg 2\n'.length);
    const rest = await sse(`/api/v1/jobs/${j.id}/logs?follow=1`, { 'last-event-id': after2 });
    assert.deepEqual(rest.filter((e) => !e.event).map((e) => e.data), ['msg 3', 'msg 4', 'msg 5', 'no newline']);
    // an ended job's follow: the last tail lines, then the end at once
    const t = await sse(`/api/v1/jobs/${j.id}/logs?follow=1&tail=2`);
    assert.deepEqual(t.map((e) => e.data), ['msg 5', 'no newline', 'succeeded']);
    // others cannot; bad values are refused
    assert.equal((await bob.c.get(`/api/v1/jobs/${j.id}/logs?follow=1`)).status, 404);
    assert.equal((await alice.c.get(`/api/v1/jobs/${j.id}/logs?follow=yes`)).status, 400);
    assert.equal((await alice.c.get(`/api/v1/jobs/${j.id}/logs?follow=1`, { 'last-event-id': 'x' })).status, 400);
  });

  it('removes a container of an ended job that was left behind, never a live one or another cluster\'s', async () => {
    const url = env.GPUCLOUD_WORLD_DOCKER1;
    const cl = clusterId(w.srv);
    const ended = Number(sql(w.srv, "SELECT min(id) FROM jobs WHERE state = 'succeeded'"));
    const left = `gc-${cl.slice(0, 8)}-job-${ended}`;
    const foreign = `gc-test-foreign-job-${process.pid}`;
    docker(url, 'create', '--name', left, '--label', `gpucloud.cluster=${cl}`, '--label', 'gpucloud.kind=job', '--label', `gpucloud.id=${ended}`, env.GPUCLOUD_WORLD_IMAGE, 'sleep', '60');
    docker(url, 'create', '--name', foreign, '--label', 'gpucloud.cluster=someoneelse', '--label', 'gpucloud.kind=job', '--label', `gpucloud.id=${ended}`, env.GPUCLOUD_WORLD_IMAGE, 'sleep', '60');
    try {
      const live = await submit(alice.c, w, { name: 'alive', command: ['sleep', '300'] });
      const run = await waitJob(alice.c, live.id, 'running');
      assert.ok(await eventually(() => !ours(w.srv, url).some((c) => c.name === left), 10000), 'the left-behind container was removed');
      assert.equal(inspect(url, foreign).Name, `/${foreign}`, 'another cluster\'s is untouched');
      assert.ok(ours(w.srv, url).some((c) => c.name === run.container_name && c.state === 'running'), 'the live job\'s container stays');
      assert.equal((await alice.c.get(`/api/v1/jobs/${live.id}`)).json.state, 'running');
      assert.equal((await alice.c.post(`/api/v1/jobs/${live.id}/cancel`)).status, 202);
      await waitJob(alice.c, live.id, FINAL);
    } finally {
      docker(url, 'rm', '-f', foreign);
    }
  });

  it('makes one job of a retried submit with the same Idempotency-Key', async () => {
    const body = { name: 'idem', command: ['true'] };
    const a = await alice.c.post('/api/v1/jobs', { image_id: w.image.id, cpu_millis: 200, mem_mib: 64, ...body }, { 'idempotency-key': 'k-123' });
    assert.equal(a.status, 201, a.text);
    assert.equal(a.headers.get('location'), `/api/v1/jobs/${a.json.id}`);
    const b = await alice.c.post('/api/v1/jobs', { image_id: w.image.id, cpu_millis: 200, mem_mib: 64, ...body }, { 'idempotency-key': 'k-123' });
    assert.equal(b.status, 200, b.text);
    assert.equal(b.headers.get('idempotent-replayed'), 'true');
    assert.equal(b.json.id, a.json.id);
    // concurrent retries: still one
    const rs = await Promise.all([1, 2, 3, 4].map(() => alice.c.post('/api/v1/jobs', { image_id: w.image.id, cpu_millis: 200, mem_mib: 64, name: 'idem2', command: ['true'] }, { 'idempotency-key': 'k-conc' })));
    const ids = new Set(rs.map((r) => { assert.ok([200, 201].includes(r.status), r.text); return r.json.id; }));
    assert.equal(ids.size, 1);
    assert.equal(sql(w.srv, "SELECT count(*) FROM jobs WHERE idempotency_key = 'k-conc'"), '1');
    assert.equal(sql(w.srv, `SELECT count(*) FROM alloc_requests WHERE owner_kind = 'job' AND owner_id = '${[...ids][0]}'`), '1');
    // the same key for a different job is refused; another user's key space is their own
    const diff = await alice.c.post('/api/v1/jobs', { image_id: w.image.id, name: 'other', command: ['true'] }, { 'idempotency-key': 'k-123' });
    assert.equal(diff.status, 409, diff.text);
    assertErrorShape(diff.json, 'conflict');
    const bobs = await bob.c.post('/api/v1/jobs', { image_id: w.image.id, cpu_millis: 200, mem_mib: 64, ...body }, { 'idempotency-key': 'k-123' });
    assert.equal(bobs.status, 201, bobs.text);
    assert.notEqual(bobs.json.id, a.json.id);
    const bad = await alice.c.post('/api/v1/jobs', { image_id: w.image.id, ...body }, { 'idempotency-key': 'spaces are not ok' });
    assert.equal(bad.status, 400);
  });

  it('lists with filters, counts per state and cursor pages; tenants apart', async () => {
    const mine = await alice.c.get('/api/v1/jobs?limit=2');
    assert.equal(mine.status, 200, mine.text);
    assert.equal(mine.json.items.length, 2);
    assert.ok(mine.json.next_cursor);
    assert.ok(mine.json.items.every((x) => x.username === 'alice'));
    const total = Number(sql(w.srv, "SELECT count(*) FROM jobs j JOIN users u ON u.id = j.user_id WHERE u.username = 'alice'"));
    assert.equal(Object.values(mine.json.counts).reduce((a, b) => a + b, 0), total);
    assert.equal(mine.json.counts.succeeded, Number(sql(w.srv, "SELECT count(*) FROM jobs j JOIN users u ON u.id = j.user_id WHERE u.username = 'alice' AND state = 'succeeded'")));
    // walk every page
    const seen = [];
    let cur = null;
    for (;;) {
      const p = await alice.c.get(`/api/v1/jobs?limit=2${cur ? `&cursor=${cur}` : ''}`);
      seen.push(...p.json.items.map((x) => x.id));
      if (!p.json.next_cursor) break;
      cur = p.json.next_cursor;
    }
    assert.equal(seen.length, total);
    assert.deepEqual(seen, [...seen].sort((a, b) => b - a));
    // text search over name, tags, command and reason
    assert.deepEqual((await alice.c.get('/api/v1/jobs?q=ValueError')).json.items.map((x) => x.name), ['train-bad']);
    assert.deepEqual((await alice.c.get('/api/v1/jobs?q=demo')).json.items.map((x) => x.name), ['train-ok']);
    assert.equal((await alice.c.get('/api/v1/jobs?q=%25')).json.items.length, 0, '% is literal');
    // time range
    assert.equal((await alice.c.get('/api/v1/jobs?since=2999-01-01')).json.items.length, 0);
    assert.equal((await alice.c.get('/api/v1/jobs?until=2000-01-01T00:00:00Z')).json.items.length, 0);
    assert.equal((await alice.c.get('/api/v1/jobs?since=2000-01-01')).json.items.length, Math.min(total, 50));
    // several states
    const two = await alice.c.get('/api/v1/jobs?state=failed,cancelled');
    assert.ok(two.json.items.every((x) => ['failed', 'cancelled'].includes(x.state)));
    // bob sees his own only; alice's job is not found for him
    const bl = await bob.c.get('/api/v1/jobs');
    assert.ok(bl.json.items.every((x) => x.username === 'bob'));
    const aj = mine.json.items[0].id;
    for (const p of [`/api/v1/jobs/${aj}`, `/api/v1/jobs/${aj}/logs`]) {
      const r = await bob.c.get(p);
      assert.equal(r.status, 404, p);
      assertErrorShape(r.json, 'not_found');
    }
    const other = await bob.c.get('/api/v1/jobs?user=alice');
    assert.equal(other.status, 403);
    assertErrorShape(other.json, 'forbidden');
    // an admin sees everyone, and filters by user
    const adm = await w.admin.get('/api/v1/jobs?user=bob&limit=500');
    assert.ok(adm.json.items.length > 0 && adm.json.items.every((x) => x.username === 'bob'));
    assert.equal((await w.admin.get(`/api/v1/jobs/${aj}`)).status, 200);
    assert.equal((await w.admin.get(`/api/v1/jobs/${aj}/logs`)).status, 200);
  });

  it('refuses read-only tokens, cookie submits without CSRF or Origin, expired sessions', async () => {
    const t = await alice.c.post('/api/v1/tokens', { name: 'ro', scopes: ['read'] });
    assert.equal(t.status, 201, t.text);
    const body = { name: 'x', image_id: w.image.id, command: ['true'] };
    const ro = await call(w.srv.base, 'POST', '/api/v1/jobs', { bearer: t.json.token, body });
    assert.equal(ro.status, 403, ro.text);
    assertErrorShape(ro.json, 'forbidden');
    assert.equal((await call(w.srv.base, 'GET', '/api/v1/jobs', { bearer: t.json.token })).status, 200);
    const cookie = alice.c.cookieHeader();
    for (const [what, opts] of [
      ['no CSRF token', { cookie, origin: w.srv.base, body }],
      ['foreign Origin', { cookie, csrf: alice.c.csrf, origin: 'http://evil.example', body }],
    ]) {
      const r = await call(w.srv.base, 'POST', '/api/v1/jobs', opts);
      assert.equal(r.status, 403, `${what}: ${r.text}`);
      const c = await call(w.srv.base, 'POST', '/api/v1/jobs/1/cancel', opts);
      assert.equal(c.status, 403, `${what}: ${c.text}`);
    }
    const before = sql(w.srv, 'SELECT count(*) FROM jobs');
    const h = sha256hex(alice.c.cookies.get('gc_session'));
    sql(w.srv, `UPDATE sessions SET expires_at = now() - interval '1 second' WHERE token_hash = '${h}'`);
    try {
      const r = await alice.c.post('/api/v1/jobs', body);
      assert.equal(r.status, 401, r.text);
      assertErrorShape(r.json, 'unauthorized');
      assert.equal((await alice.c.get('/api/v1/jobs')).status, 401);
    } finally {
      sql(w.srv, `UPDATE sessions SET expires_at = now() + interval '1 hour' WHERE token_hash = '${h}'`);
    }
    assert.equal(sql(w.srv, 'SELECT count(*) FROM jobs'), before, 'nothing was submitted');
    assert.equal((await call(w.srv.base, 'GET', '/api/v1/jobs')).status, 401);
  });

  it('refuses bad input with a JSON error', async () => {
    const base = { name: 'ok', image_id: w.image.id, command: ['true'] };
    const cases = [
      ['unknown field', { ...base, colour: 'red' }, 400],
      ['name of wrong type', { ...base, name: 7 }, 400],
      ['bad name', { ...base, name: 'Bad Name' }, 400],
      ['no command', { name: 'ok', image_id: w.image.id }, 400],
      ['empty command', { ...base, command: [] }, 400],
      ['command of numbers', { ...base, command: [1, 2] }, 400],
      ['negative cpu', { ...base, cpu_millis: -5 }, 400],
      ['negative memory', { ...base, mem_mib: -1 }, 400],
      ['zero runtime', { ...base, max_runtime_s: 0 }, 400],
      ['slices without a pool', { ...base, slices: 1 }, 400],
      ['negative slices', { ...base, pool: 'a100', slices: -1 }, 400],
      ['hyperparameters not an object', { ...base, hyperparameters: [1] }, 400],
      ['nested hyperparameter', { ...base, hyperparameters: { a: { b: 1 } } }, 400],
      ['bad env name', { ...base, env: { 'A-B': 'x' } }, 400],
      ['bad tag', { ...base, tags: ['Has Space'] }, 400],
      ['bad priority', { ...base, priority: 'urgent' }, 400],
      ['exam priority for a student', { ...base, priority: 'exam' }, 403],
      ['unknown image', { ...base, image_id: 999999 }, 404],
      ['unknown pool', { ...base, pool: 'nope', slices: 1 }, 404],
      ['more slices than any node has', { ...base, pool: 'a100', slices: 5 }, 422],
    ];
    for (const [what, body, status] of cases) {
      const r = await alice.c.post('/api/v1/jobs', body);
      assert.equal(r.status, status, `${what}: ${r.status} ${r.text}`);
      assert.ok(r.json?.error?.code && r.json.error.message, `${what}: ${r.text}`);
    }
    const nj = await alice.c.post('/api/v1/jobs', 'not json', { 'content-type': 'application/json' });
    assert.equal(nj.status, 400);
    for (const q of ['state=bogus', 'since=yesterday', 'limit=0', 'cursor=abc']) {
      const r = await alice.c.get(`/api/v1/jobs?${q}`);
      assert.equal(r.status, 400, `${q}: ${r.text}`);
      assertErrorShape(r.json, 'invalid');
    }
    for (const p of ['/api/v1/jobs/abc', '/api/v1/jobs/0', '/api/v1/jobs/999999']) assert.equal((await alice.c.get(p)).status, 404, p);
    assert.equal((await alice.c.get('/api/v1/jobs/1/logs?tail=-3')).status, 400);
    const cb = await alice.c.post('/api/v1/jobs/1/cancel', { force: true });
    assert.equal(cb.status, 400);
  });
});
