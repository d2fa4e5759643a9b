// replicas.test.mjs — gpucloudd replicas on one database behind nginx
// (issue 15, part 5).  Two replicas share the database and the data root,
// nginx balances between them (tests/lib/nginx.mjs, as README "Replicas"
// sets it up), and:
//   - a session made on one replica works on the other, through nginx too;
//   - a GPU instance asked of the replica that is not the leader is
//     scheduled at once (the pass period is a minute: only the NOTIFY kick
//     explains it);
//   - an app route opened through nginx answers whichever replica serves it,
//     and a websocket (the terminal) works through nginx;
//   - a job's live log (SSE) followed on the non-leader, and through nginx,
//     shows lines the leader's driver writes while the job runs;
//   - kill -9 of the leader: the other takes over within a few seconds
//     (measured), reads through nginx keep answering, the running instance
//     and job keep their containers (adopted, not restarted) and the job
//     completes, nothing acknowledged is lost, and no GPU slice is ever held
//     by two live allocations (SQL, at several points);
//   - a frozen leader (SIGSTOP): a third replica cuts its lock session off
//     after --leader-takeover-ms and takes over; the frozen one, resumed,
//     stops acting as leader.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createHash, randomBytes } from 'node:crypto';
import { Client, ADMIN_PASSWORD } from '../lib/server.mjs';
import { stopClean, sleep, RawConn } from '../lib/itest.mjs';
import { startNginx } from '../lib/nginx.mjs';
import { world, mkUser, cleanup, sql, eventually, env, docker, inspect } from './instances_lib.mjs';

const LEADS = /now runs the scheduler/;
const TAKEOVER_MS = 2000;

function freePort() {
  return new Promise((resolve) => {
    const s = http.createServer();
    s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => resolve(p)); });
  });
}

// The invariant: no GPU slice in two live allocations, no request granted
// one slice twice, at most one session holding the leader lock; returns
// the count of live GPU allocations (CPU-only ones have no slice).  The
// database refuses a double grant too (allocations_live_slice_idx): this
// is what a scheduler racing another would have run into.
function noDoubleGrant(srv, when) {
  const dup = sql(srv, `SELECT count(*) FROM (SELECT slice_id FROM allocations WHERE released_at IS NULL AND slice_id IS NOT NULL
    GROUP BY slice_id HAVING count(*) > 1) x`);
  assert.equal(dup, '0', `a slice is allocated twice (${when})`);
  const twice = sql(srv, `SELECT count(*) FROM (SELECT request_id, slice_id FROM allocations WHERE released_at IS NULL
    AND slice_id IS NOT NULL GROUP BY request_id, slice_id HAVING count(*) > 1) x`);
  assert.equal(twice, '0', `a request holds one slice twice (${when})`);
  const locks = Number(sql(srv, "SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database WHERE l.locktype = 'advisory' AND l.granted AND d.datname = current_database() AND l.objid::bigint = 1735553635"));
  assert.ok(locks <= 1, `${locks} sessions hold the leader lock (${when})`);
  return Number(sql(srv, 'SELECT count(*) FROM allocations WHERE released_at IS NULL AND slice_id IS NOT NULL'));
}

// GET through a host (Host header: an app's origin) on a port; {status, headers, text}
function hostGet(port, host, path, headers = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path, agent: false, headers: { host, ...headers } }, (res) => {
      const parts = [];
      res.on('data', (d) => parts.push(d));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, text: Buffer.concat(parts).toString() }));
    });
    req.on('error', reject);
    req.setTimeout(10000, () => req.destroy(new Error('timeout')));
    req.end();
  });
}

// A masked websocket client frame; the text of the server's binary frames.
function wsFrame(opcode, text) {
  const data = Buffer.from(text);
  const mask = randomBytes(4);
  return Buffer.concat([Buffer.from([0x80 | opcode, 0x80 | data.length]), mask, Buffer.from(data.map((b, i) => b ^ mask[i & 3]))]);
}
function wsText(c) {
  let text = '';
  for (;;) {
    const b = c.buf;
    if (b.length < 2) break;
    let len = b[1] & 0x7f, off = 2;
    if (len === 126) { if (b.length < 4) break; len = b.readUInt16BE(2); off = 4; }
    else if (len === 127) { if (b.length < 10) break; len = Number(b.readBigUInt64BE(2)); off = 10; }
    if (b.length < off + len) break;
    if ((b[0] & 0x0f) === 2) text += b.subarray(off, off + len).toString();
    c.buf = b.subarray(off + len);
  }
  return text;
}

// Follows an SSE stream; .lines grows as data arrives; .close() ends it.
function follow(url, cookie) {
  const ctl = new AbortController();
  const s = { lines: [], end: null, status: 0, close: () => ctl.abort() };
  s.done = (async () => {
    const res = await fetch(url, { headers: { cookie }, signal: ctl.signal });
    s.status = res.status;
    s.type = res.headers.get('content-type');
    const dec = new TextDecoder();
    let buf = '';
    try {
      for await (const chunk of res.body) {
        buf += dec.decode(chunk, { stream: true });
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          const ev = {};
          for (const line of block.split('\n')) { const k = line.indexOf(': '); if (k > 0) ev[line.slice(0, k)] = line.slice(k + 2); }
          if (ev.event === 'end') s.end = ev.data;
          else if (ev.data !== undefined) s.lines.push({ at: Date.now(), data: ev.data });
        }
      }
    } catch { /* aborted */ }
  })();
  return s;
}

describe('replicas behind nginx', () => {
  let dir, lbPort, lb, r1, r2, r3, st, stLb, args, inst, job, route, appCookie;
  const servers = () => [r1, r2, r3].filter(Boolean);

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gcrepl-'));
    mkdirSync(join(dir, 'state'));
    lbPort = await freePort();
    // one state directory (master.key: registry credentials, node TLS keys)
    // and one data root for all, as README "Replicas" asks
    args = [`--state-dir=${join(dir, 'state')}`, `--data-root=${join(dir, 'data')}`, `--apps-port=${lbPort}`, '--trusted-proxies=127.0.0.1',
      '--sched-interval-ms=60000', '--leader-heartbeat-ms=250', `--leader-takeover-ms=${TAKEOVER_MS}`];
    r1 = await world({ args });
    assert.ok(await eventually(() => LEADS.test(r1.srv.log()), 10000, 50), 'the first replica leads');
    r2 = await world({ db: r1.srv.db, args });
    lb = await startNginx(join(dir, 'nginx'), lbPort, [r1.srv.port, r2.srv.port]);
    st = await mkUser(r1, 'replst');
    await sleep(300);
    assert.doesNotMatch(r2.srv.log(), LEADS);
  });

  after(async () => {
    for (const w of servers()) { try { process.kill(w.srv.proc.pid, 'SIGCONT'); } catch { /* gone */ } }
    await lb?.stop();
    if (r1) cleanup(r1.srv);
    await stopClean(r3?.srv);
    await stopClean(r2?.srv);
    await r1?.srv.stop(); // killed in the failover test: just drop its database
    if (dir) rmSync(dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 });
  });

  it('serves a session made on one replica on the other, directly and through nginx', async () => {
    // made on the first, used on the second
    const on2 = new Client(r2.srv.base);
    on2.cookies = new Map(st.c.cookies);
    on2.csrf = st.c.csrf;
    const me = await on2.get('/api/v1/me');
    assert.equal(me.status, 200, me.text);
    assert.equal(me.json.user.username, 'replst');
    // through nginx: a login, then requests land on both replicas
    stLb = new Client(lb.base);
    assert.equal((await stLb.login('replst', 'replst-pass-1')).status, 200);
    const seen = new Set();
    for (let i = 0; i < 12; i++) {
      const r = await stLb.get('/api/v1/me');
      assert.equal(r.status, 200, r.text);
      seen.add(r.headers.get('x-upstream'));
    }
    assert.deepEqual([...seen].sort(), [`127.0.0.1:${r1.srv.port}`, `127.0.0.1:${r2.srv.port}`].sort());
    // a cookie mutation through nginx passes the Origin/CSRF checks on either
    for (let i = 0; i < 2; i++) {
      const t = await stLb.post('/api/v1/tokens', { name: `lb${i}`, scopes: ['read'] });
      assert.equal(t.status, 201, t.text);
    }
    // a logout through nginx ends the session on both replicas
    const other = new Client(lb.base);
    assert.equal((await other.login('replst', 'replst-pass-1')).status, 200);
    assert.equal((await other.post('/api/v1/auth/logout')).status < 300, true);
    for (const w of [r1, r2]) {
      const c = new Client(w.srv.base);
      c.cookies = new Map(other.cookies.size ? other.cookies : [['gc_session', 'gone']]);
      assert.equal((await c.get('/api/v1/me')).status, 401);
    }
  });

  it('schedules a GPU instance asked of the non-leader at once (the kick reaches the leader)', async () => {
    const on2 = new Client(r2.srv.base);
    on2.cookies = new Map(st.c.cookies);
    on2.csrf = st.c.csrf;
    const t0 = Date.now();
    const r = await on2.post('/api/v1/instances', { name: 'web', image_id: r1.image.id, cpu_millis: 200, mem_mib: 64, pool: 'a100', slices: 1 });
    assert.equal(r.status, 202, r.text);
    inst = r.json;
    assert.ok(await eventually(() => sql(r1.srv, `SELECT count(*) FROM allocations a JOIN instances i ON i.request_id = a.request_id WHERE i.id = ${inst.id} AND a.released_at IS NULL`) === '1', 5000, 50),
      'allocated within 5 s with a one-minute pass period');
    const took = Date.now() - t0;
    assert.ok(took < 5000, `allocation took ${took} ms`);
    assert.doesNotMatch(r2.srv.log(), LEADS);
    assert.ok(await eventually(async () => (await stLb.get(`/api/v1/instances/${inst.id}`)).json.state === 'running', 30000, 100), 'instance running');
    inst = (await stLb.get(`/api/v1/instances/${inst.id}`)).json;
    noDoubleGrant(r1.srv, 'first instance');
  });

  it('opens an app route through nginx, served by either replica', async () => {
    docker(env.GPUCLOUD_WORLD_DOCKER1, 'exec', inst.container_name, 'busybox', 'sh', '-c', 'echo replicated-app > /tmp/index.html');
    const routes = (await stLb.get(`/api/v1/routes?instance_id=${inst.id}`)).json.items;
    assert.equal(routes.length, 1);
    route = routes[0].id;
    const state = randomBytes(32).toString('hex');
    const o = await stLb.post(`/api/v1/routes/${route}/open`, { state: createHash('sha256').update(state).digest('hex') });
    assert.equal(o.status, 200, o.text);
    const loc = new URL(o.json.url);
    assert.equal(Number(loc.port), lbPort, `the route URL goes through the balancer: ${o.json.url}`);
    const hs = await hostGet(lbPort, loc.host, loc.pathname + loc.search, { cookie: `gc_state=${state}` });
    assert.equal(hs.status, 302, hs.text);
    appCookie = hs.headers['set-cookie'].find((c) => c.startsWith('gc_route=')).split(';')[0];
    const seen = new Set();
    let page;
    for (let i = 0; i < 40 && seen.size < 2; i++) {
      page = await hostGet(lbPort, loc.host, '/', { cookie: appCookie });
      if (page.status === 502 || page.status === 503) { await sleep(200); continue; }
      assert.equal(page.status, 200, page.text);
      assert.equal(page.text.trim(), 'replicated-app');
      seen.add(page.headers['x-upstream']);
    }
    assert.equal(seen.size, 2, `both replicas proxied the app: ${[...seen]}`);
    // a websocket through nginx: the instance's terminal (docker exec on the
    // leader's node, from whichever replica nginx picked)
    const ws = await RawConn.open(lbPort);
    ws.write(`GET /api/v1/instances/${inst.id}/terminal HTTP/1.1\r\nHost: 127.0.0.1:${lbPort}\r\n` +
      'Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n' +
      `Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nOrigin: ${lb.base}\r\nCookie: ${stLb.cookieHeader()}\r\n\r\n`);
    const up = await ws.response();
    assert.equal(up.status, 101, up.head);
    ws.buf = Buffer.alloc(0);
    ws.write(wsFrame(1, 'echo "via-$((6*7))"\n'));
    let out = '';
    assert.ok(await eventually(() => { out += wsText(ws); return /via-42/.test(out); }, 8000, 20), `terminal output ${JSON.stringify(out.slice(-200))}`);
    ws.destroy();
  });

  it('follows a job\'s live log on the non-leader and through nginx while the leader\'s driver writes it', async () => {
    const r = await stLb.post('/api/v1/jobs', {
      name: 'ticker', image_id: r1.image.id, cpu_millis: 200, mem_mib: 64,
      command: ['sh', '-c', 'i=0; while [ $i -lt 60 ]; do i=$((i+1)); echo "tick $i"; sleep 0.25; done'],
    });
    assert.equal(r.status, 201, r.text);
    job = r.json;
    const f1 = follow(`${r1.srv.base}/api/v1/jobs/${job.id}/logs?follow=1`, st.c.cookieHeader());
    const f2 = follow(`${r2.srv.base}/api/v1/jobs/${job.id}/logs?follow=1`, st.c.cookieHeader());
    const fLb = follow(`${lb.base}/api/v1/jobs/${job.id}/logs?follow=1`, st.c.cookieHeader());
    assert.ok(await eventually(() => f2.lines.length >= 4 && fLb.lines.length >= 4, 20000, 50),
      `lines on the non-leader ${f2.lines.length}, through nginx ${fLb.lines.length}`);
    assert.equal(f2.status, 200);
    assert.match(f2.type, /^text\/event-stream/);
    // live: lines arrive spread over time, not in one burst at the end
    const n0 = fLb.lines.length;
    await sleep(1200);
    assert.ok(fLb.lines.length >= n0 + 2, `nginx passed lines on as they came (${n0} -> ${fLb.lines.length})`);
    assert.ok(f2.lines.at(-1).data.startsWith('tick '));
    // the non-leader's lines come with the leader's (its NOTIFY wakes the
    // followers), not up to a poll period (250 ms) later
    const lags = f2.lines.map((l) => l.at - (f1.lines.find((x) => x.data === l.data)?.at ?? NaN)).filter((x) => x >= -50).sort((a, b) => a - b);
    assert.ok(lags.length >= 4, `lines seen on both: ${lags.length}`);
    const median = lags[lags.length >> 1];
    console.log(`# SSE lag of the non-leader behind the leader: median ${median} ms over ${lags.length} lines`);
    assert.ok(median < 100, `median lag ${median} ms: ${lags}`);
    f1.close();
    f2.close();
    fLb.close();
    assert.equal(sql(r1.srv, `SELECT state FROM jobs WHERE id = ${job.id}`), 'running');
  });

  it('moves leadership within seconds when the leader is killed, losing nothing and granting no GPU twice', async () => {
    const jobContainer = sql(r1.srv, `SELECT container_name FROM jobs WHERE id = ${job.id}`);
    const jobBefore = inspect(env.GPUCLOUD_WORLD_DOCKER1, jobContainer);
    const instBefore = inspect(env.GPUCLOUD_WORLD_DOCKER1, inst.container_name);
    const live = noDoubleGrant(r1.srv, 'before the kill');
    // reads through nginx all along
    let reads = 0, errors = 0, polling = true;
    const poller = (async () => {
      while (polling) {
        try { const x = await stLb.get('/api/v1/me'); reads++; if (x.status !== 200) errors++; } catch { errors++; }
        await sleep(20);
      }
    })();
    await sleep(200);
    const t0 = Date.now();
    r1.srv.proc.kill('SIGKILL');
    // work asked while no replica leads yet is kept and done.  nginx does not
    // resend a POST whose connection broke (the dead replica may have acted
    // on it): the client retries with an Idempotency-Key, safely
    let during;
    for (let i = 0; i < 5; i++) {
      during = await stLb.post('/api/v1/jobs', { name: 'during', image_id: r1.image.id, cpu_millis: 100, mem_mib: 64, command: ['sh', '-c', 'echo asked-during-failover'] },
        { 'idempotency-key': 'during-failover' });
      if (during.status !== 502) break;
    }
    assert.equal(during.status, 201, during.text);
    assert.ok(await eventually(() => LEADS.test(r2.srv.log()), 10000, 20), 'the second replica took over within 10 s');
    const failover = Date.now() - t0;
    // the job's container runs on, the same one (it is removed once the job ends)
    const jobAfter = inspect(env.GPUCLOUD_WORLD_DOCKER1, jobContainer);
    assert.equal(jobAfter.Id, jobBefore.Id);
    assert.equal(jobAfter.State.StartedAt, jobBefore.State.StartedAt);
    assert.equal(jobAfter.State.Running, true, 'the job was still running at the takeover');
    // a request asked of the new leader right away
    const q = await stLb.post('/api/v1/instances', { name: 'after', image_id: r1.image.id, cpu_millis: 200, mem_mib: 64, pool: 'a100', slices: 1 });
    assert.equal(q.status, 202, q.text);
    assert.ok(await eventually(async () => (await stLb.get(`/api/v1/instances/${q.json.id}`)).json.state === 'running', 30000, 100), 'new instance running');
    polling = false;
    await poller;
    console.log(`# failover ${failover} ms; reads through nginx during it: ${reads}, errors ${errors}`);
    assert.ok(failover < 10000, `failover took ${failover} ms`);
    assert.equal(errors, 0, `${errors} of ${reads} reads failed through nginx`);
    assert.equal(noDoubleGrant(r2.srv, 'after the takeover'), live + 1);
    // the instance kept its container: same one, never restarted
    const instAfter = inspect(env.GPUCLOUD_WORLD_DOCKER1, inst.container_name);
    assert.equal(instAfter.Id, instBefore.Id);
    assert.equal(instAfter.State.StartedAt, instBefore.State.StartedAt);
    assert.equal(instAfter.State.Running, true);
    assert.equal((await stLb.get(`/api/v1/instances/${inst.id}`)).json.state, 'running');
    // the job ran on in its container and the new leader saw it through
    assert.ok(await eventually(async () => (await stLb.get(`/api/v1/jobs/${job.id}`)).json.state === 'succeeded', 30000, 200),
      `job ended: ${JSON.stringify((await stLb.get(`/api/v1/jobs/${job.id}`)).json)}`);
    assert.ok(await eventually(async () => (await stLb.get(`/api/v1/jobs/${during.json.id}`)).json.state === 'succeeded', 30000, 200), 'the job asked during the failover ran');
    assert.match((await stLb.get(`/api/v1/jobs/${during.json.id}/logs`)).text, /asked-during-failover/);
    assert.equal(sql(r2.srv, "SELECT count(*) FROM jobs WHERE name = 'during'"), '1');
    const log = (await stLb.get(`/api/v1/jobs/${job.id}/logs`)).text;
    assert.match(log, /tick 60\n?$/);
    assert.equal(log.match(/^tick 1$/mg).length, 1, 'the job ran once, not twice');
    noDoubleGrant(r2.srv, 'after the job');
  });

  it('cuts a frozen leader off after the takeover time; resumed, it acts as leader no more', async () => {
    r3 = await world({ db: r2.srv.db, args });
    await lb.setUpstreams([r2.srv.port, r3.srv.port]);
    await sleep(500);
    assert.doesNotMatch(r3.srv.log(), LEADS);
    const live = noDoubleGrant(r3.srv, 'before the freeze');
    const t0 = Date.now();
    process.kill(r2.srv.proc.pid, 'SIGSTOP');
    assert.ok(await eventually(() => LEADS.test(r3.srv.log()), TAKEOVER_MS + 8000, 20), 'the third replica took over');
    const took = Date.now() - t0;
    console.log(`# frozen leader replaced in ${took} ms (takeover ${TAKEOVER_MS} ms)`);
    assert.ok(took >= TAKEOVER_MS - 300, `taken over before the takeover time: ${took} ms`);
    assert.match(r3.srv.log(), /cut off the leader's lock session/);
    // the new leader schedules: a request through a live replica
    const on3 = new Client(r3.srv.base);
    on3.cookies = new Map(st.c.cookies);
    on3.csrf = st.c.csrf;
    const q = await on3.post('/api/v1/instances', { name: 'frozen', image_id: r1.image.id, cpu_millis: 200, mem_mib: 64, pool: 'a100', slices: 1 });
    assert.equal(q.status, 202, q.text);
    assert.ok(await eventually(() => sql(r3.srv, `SELECT count(*) FROM allocations a JOIN instances i ON i.request_id = a.request_id WHERE i.id = ${q.json.id} AND a.released_at IS NULL`) === '1', 5000, 50));
    // resumed: the old leader finds its session gone and stops leading
    const mark = r2.srv.log().length;
    process.kill(r2.srv.proc.pid, 'SIGCONT');
    assert.ok(await eventually(() => /lost the scheduler lock/.test(r2.srv.log()), 8000, 50), 'the resumed replica knows it lost the lock');
    await sleep(500);
    // and did no leader's work on the way: no scheduler pass, no workload moved
    const since = r2.srv.log().slice(mark);
    assert.doesNotMatch(since, /module=sched msg="pass|module=(instances|jobs) msg="(instance|job) \d+: /, since);
    assert.equal(noDoubleGrant(r3.srv, 'after the resume'), live + 1);
    // it serves requests again, as a follower
    const on2 = new Client(r2.srv.base);
    on2.cookies = new Map(st.c.cookies);
    assert.equal((await on2.get('/api/v1/me')).status, 200);
    assert.ok(await eventually(async () => (await on3.get(`/api/v1/instances/${q.json.id}`)).json.state === 'running', 30000, 100));
    for (const id of [inst.id, q.json.id]) assert.equal((await on3.del(`/api/v1/instances/${id}`)).status < 300, true);
  });
});
