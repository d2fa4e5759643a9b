// jobs.mjs — the figures of tests/bench/jobs.sh (which starts gpucloudd and
// hands over its address and pid).
//
//  start: ROUNDS times, alternating (raw first in every other round): one
//    job of one slice on node1 (busybox `sleep 60`) through gpucloudd,
//    submit → running (jobs.created_at to started_at, both written by the
//    database; the bench waits by reading gpucloudd's log), then the raw
//    engine's create + start of the very container gpucloudd made (read
//    back from the engine), with curl.  p50 of each.
//  follow: a job prints the clock (the host's, in microseconds) every
//    50 ms; an SSE client of
//    /jobs/{id}/logs?follow=1 notes when each line arrives: latency =
//    arrival - written.  Baseline: the engine's own logs?follow=1 stream of
//    the same container, read at the same time.  Then with FOLLOWERS (200)
//    SSE clients of that one log (the p50 over all of them).
//  chatty: a job writing CHATTY_MB of 100-byte lines as fast as it can;
//    its own runtime (it prints the clock before and after) with FOLLOWERS
//    followers vs none; and the time until gpucloudd has the whole log and
//    the end on record (started_at → finished_at).
//  rss: gpucloudd's VmHWM before and after a job that writes 50 MB of log.
import { readFileSync } from 'node:fs';
import http from 'node:http';
import { E, ENGINES, Client, must, psql, p50, sleep, rawCurl, sameSpec, rmLabelled, setupWorld, LogWaiter, benchLine, sock } from './benchlib.mjs';

const ROUNDS = Number(E.BENCH_JOB_ROUNDS || 15);
const FOLLOWERS = Number(E.BENCH_FOLLOWERS || 200);
const CHATTY_MB = Number(E.BENCH_CHATTY_MB || 20);
const TAG = `gcbench-${process.pid}`;
const say = (m) => process.stderr.write(`jobs: ${m}\n`);
const line = (metric, value, baseline, goal) => benchLine('jobs', metric, value, baseline, goal);
const now = () => Date.now() / 1000;
const hwm = () => Number(/VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${E.BENCH_GC_PID}/status`, 'utf8'))[1]) / 1024;

// Waits for a job's end through the API (polling once a second: the job
// runs on its own, nothing here is timed by it).
async function waitEnd(c, id, ms) {
  const end = Date.now() + ms;
  for (;;) {
    const j = (await c.req('GET', `/api/v1/jobs/${id}`)).json;
    if (['succeeded', 'failed', 'cancelled', 'lost'].includes(j.state)) return j;
    if (Date.now() > end) throw new Error(`job ${id} did not end within ${ms} ms (${j.state})`);
    await sleep(1000);
  }
}

// An SSE client of a job's log: calls onLine(text, arrival time in s) per data
// line; resolves when the stream ends.  Keeps its own agent so that many
// followers hold many connections.
function follow(c, id, onLine) {
  let req;
  const done = new Promise((resolve, reject) => {
    req = http.get(`${E.BENCH_BASE}/api/v1/jobs/${id}/logs?follow=1&tail=1`, { headers: { cookie: c.cookie }, agent: false }, (res) => {
      if (res.statusCode !== 200) { reject(new Error(`follow: ${res.statusCode}`)); return; }
      let buf = '';
      res.setEncoding('utf8');
      res.on('data', (d) => {
        const t = now();
        buf += d;
        let k;
        while ((k = buf.indexOf('\n\n')) >= 0) {
          const ev = buf.slice(0, k);
          buf = buf.slice(k + 2);
          for (const l of ev.split('\n')) if (l.startsWith('data: ')) onLine(l.slice(6), t);
        }
      });
      res.on('end', resolve);
      res.on('error', reject);
    });
    req.on('error', reject);
  });
  return { done, close: () => req.destroy() };
}

// The engine's own follow stream of a container's stdout (multiplexed
// frames: 8-byte headers), the baseline.
function engineFollow(url, name, onLine) {
  let req;
  const done = new Promise((resolve) => {
    req = http.get({ socketPath: sock(url), path: `/v1.41/containers/${name}/logs?follow=1&stdout=1&stderr=1&tail=0` }, (res) => {
      let buf = Buffer.alloc(0), text = '';
      res.on('data', (d) => {
        const t = now();
        buf = Buffer.concat([buf, d]);
        while (buf.length >= 8) {
          const n = buf.readUInt32BE(4);
          if (buf.length < 8 + n) break;
          text += buf.toString('utf8', 8, 8 + n);
          buf = buf.subarray(8 + n);
        }
        let k;
        while ((k = text.indexOf('\n')) >= 0) { onLine(text.slice(0, k), t); text = text.slice(k + 1); }
      });
      res.on('end', resolve);
      res.on('error', resolve);
    });
    req.on('error', resolve);
  });
  return { done, close: () => req.destroy() };
}

async function main() {
  const cluster = psql('SELECT cluster_id FROM cluster_identity');
  let logw = null;
  try {
    const { admin, img } = await setupWorld(E.GPUCLOUD_WORLD_IMAGE, ['sleep', '3600']);
    must(await admin.req('POST', '/api/v1/users', { username: 'r1', role: 'student', password: 'bench-student-1' }), 201, 'user');
    const u = new Client();
    await u.login('r1', 'bench-student-1');
    logw = new LogWaiter(E.BENCH_LOG);
    const submit = async (name, command, extra = {}) => must(await u.req('POST', '/api/v1/jobs', { name, image_id: img.id, command, pool: 'lab', slices: 1, cpu_millis: 200, mem_mib: 64, ...extra }), 201, 'submit');
    const running = (id) => logw.next(new RegExp(`job ${id}: container (\\w+) started`), new RegExp(`job ${id}: .*→ (failed|lost)`), 60000, `job ${id}`);

    // ---- start overhead ----
    say(`start overhead: ${ROUNDS} rounds, alternating`);
    const ours = [], raw = [];
    let spec = null;
    for (let i = 0; i < ROUNDS + 1; i++) {
      let r = null;
      if (spec && i % 2 === 0) r = rawCurl(ENGINES[0], `${TAG}-s${i}`, spec);
      const j = await submit(`s${i}`, ['sleep', '60']);
      await running(j.id);
      const s = Number(psql(`SELECT extract(epoch FROM started_at - created_at) FROM jobs WHERE id = ${j.id}`));
      const got = (await u.req('GET', `/api/v1/jobs/${j.id}`)).json;
      if (got.node !== 'node1') throw new Error(`job ${j.id} ran on ${got.node}`);
      if (!spec) spec = await sameSpec(ENGINES[0], got.container_name, TAG);
      if (r === null) r = rawCurl(ENGINES[0], `${TAG}-s${i}`, spec);
      if (i > 0) { ours.push(s * 1000); raw.push(r * 1000); } // the first warms caches on both sides
      must(await u.req('POST', `/api/v1/jobs/${j.id}/cancel`, {}), 202, 'cancel');
      await waitEnd(u, j.id, 60000);
      rmLabelled(`gpucloud.bench=${TAG}`);
    }
    say(`ours ms: ${ours.map((x) => x.toFixed(0)).join(' ')}`);
    say(`raw ms:  ${raw.map((x) => x.toFixed(0)).join(' ')}`);
    line('start_p50_ms', p50(ours).toFixed(1), p50(raw).toFixed(1), '<1.05');

    // ---- follow latency: 1 follower, then FOLLOWERS ----
    // the container's wall clock in microseconds (busybox's date has no %N;
    // adjtimex reads the time without any privilege)
    const clock = ['sh', '-c', 'i=0; while [ $i -lt 400 ]; do adjtimex | awk \'/tv_sec/ {s = $2} /tv_usec/ {u = $2} END {printf "T %d.%06d\\n", s, u}\'; i=$((i+1)); usleep 50000; done'];
    const lat = async (n) => {
      const j = await submit(`follow${n}`, clock, { slices: undefined, pool: undefined });
      await running(j.id);
      const got = (await u.req('GET', `/api/v1/jobs/${j.id}`)).json;
      const ourLat = [], engLat = [];
      // lines written once every follower is connected (the first ones
      // sent are the tail written before)
      const from = now() + 1;
      const note = (to) => (l, t) => { const m = /^T ([\d.]+)/.exec(l); if (m && Number(m[1]) >= from) to.push((t - Number(m[1])) * 1000); };
      const fs = Array.from({ length: n }, () => follow(u, j.id, note(ourLat)));
      const ef = engineFollow(ENGINES[0], got.container_name, note(engLat));
      await waitEnd(u, j.id, 120000);
      await Promise.race([Promise.all(fs.map((f) => f.done)), sleep(5000)]);
      fs.forEach((f) => f.close());
      ef.close();
      say(`${n} follower(s): ${ourLat.length} lines seen (ours), ${engLat.length} (engine)`);
      return { ours: p50(ourLat), eng: p50(engLat) };
    };
    const one = await lat(1);
    line('follow_p50_ms', one.ours.toFixed(1), one.eng.toFixed(1), '<100 ms');
    const many = await lat(FOLLOWERS);
    line(`follow${FOLLOWERS}_p50_ms`, many.ours.toFixed(1), many.eng.toFixed(1), '<100 ms');

    // ---- a chatty job with and without followers ----
    // The job's own runtime (it prints the host's clock before and after
    // its writes), and when gpucloudd has recorded its end (all of the log
    // stored: the database's started_at → finished_at).
    const lines = Math.round((CHATTY_MB * 1e6) / 100);
    const chatty = ['sh', '-c', `read s x < /proc/uptime; yes 0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789 | head -n ${lines}; read e x < /proc/uptime; echo "ELAPSED $s $e"`];
    const runtime = async (n) => {
      const j = await submit(`chatty${n}`, chatty, { slices: undefined, pool: undefined });
      await running(j.id);
      const fs = Array.from({ length: n }, () => follow(u, j.id, () => {}));
      const end = await waitEnd(u, j.id, 300000);
      if (end.state !== 'succeeded') throw new Error(`chatty job ${j.id}: ${end.state} ${end.reason}`);
      await Promise.race([Promise.all(fs.map((f) => f.done)), sleep(30000)]);
      fs.forEach((f) => f.close());
      const last = (await u.req('GET', `/api/v1/jobs/${j.id}/logs?tail=1`)).text;
      const m = /ELAPSED ([\d.]+) ([\d.]+)/.exec(last);
      if (!m) throw new Error(`chatty job ${j.id}: no ELAPSED line in ${last.slice(-200)}`);
      return { own: Number(m[2]) - Number(m[1]), stored: Number(psql(`SELECT extract(epoch FROM finished_at - started_at) FROM jobs WHERE id = ${j.id}`)) };
    };
    const alone = await runtime(0);
    const crowd = await runtime(FOLLOWERS);
    say(`chatty: own ${alone.own.toFixed(2)} s alone, ${crowd.own.toFixed(2)} s with ${FOLLOWERS} followers; ended on record after ${alone.stored.toFixed(2)} / ${crowd.stored.toFixed(2)} s`);
    line('chatty_runtime_s', crowd.own.toFixed(2), alone.own.toFixed(2), '<=1.1');
    line('chatty_recorded_s', crowd.stored.toFixed(2), alone.stored.toFixed(2), '<=1.1 (end on record)');

    // ---- memory while a job writes 50 MB of log ----
    const before = hwm();
    const big = ['sh', '-c', 'yes 0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789 | head -c 52428800'];
    const j = await submit('big', big, { slices: undefined, pool: undefined });
    const e = await waitEnd(u, j.id, 300000);
    if (e.state !== 'succeeded') throw new Error(`50 MB job: ${e.state} ${e.reason}`);
    line('log50mb_hwm_mib', hwm().toFixed(1), before.toFixed(1), '<64 MiB');
  } finally {
    if (logw) logw.close();
    try { rmLabelled(`gpucloud.cluster=${cluster}`); rmLabelled(`gpucloud.bench=${TAG}`); } catch { /* best effort */ }
  }
}

main().catch((e) => { console.error(`jobs: error: ${e.stack || e}`); process.exit(1); });
