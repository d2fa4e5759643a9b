// instances.mjs — the figures of tests/bench/instances.sh (which starts
// gpucloudd and hands over its address): instance start overhead and the lab
// start storm, each side by side with the raw Docker Engine API on the same
// engines and image, in the same run.
//
//  start: ROUNDS times, alternating (raw first in every other round): one
//    GPU instance on node1 through gpucloudd
//    (create → running: instances.created_at to started_at, both written by
//    the database; the bench waits by reading gpucloudd's log, not by
//    polling the API, which would load this 2-core machine while the engine
//    starts the container and the raw side never pays that), then the raw
//    engine's POST /containers/create + /start with curl (curl's own
//    time_total).
//    p50 of each.  Overhead: gpucloudd's own time per launch, i.e. the whole
//    less the engine calls it made (their time is in the driver's log line
//    "→ running (...; engine N ms)"), p50.
//  storm: STORM users each create one instance at once (one slice of a
//    shared pool over both engines' GPUs) → all running, failures counted;
//    total = last started_at - first created_at.  Raw: STORM create+start
//    pairs at once over the Engine API (unix sockets, half per engine).
//  Both raw sides create the very container gpucloudd made (its create body
//  read back from the engine: mounts, devices, limits, published ports), so
//  the difference is gpucloudd's own work, not the hardening's.
import { E, ENGINES, Client, must, engine, psql, p50, sleep, rawCurl, sameSpec as sameSpecOf, rmLabelled, setupWorld, LogWaiter, benchLine } from './benchlib.mjs';

const ROUNDS = Number(E.BENCH_START_ROUNDS || 21);
const STORM = Number(E.BENCH_STORM || 50);
const STORM_ROUNDS = Number(E.BENCH_ROUNDS || 2);
const TAG = `gcbench-${process.pid}`;
const say = (m) => process.stderr.write(`instances: ${m}\n`);
const rawSpec = () => ({ Image: E.GPUCLOUD_WORLD_IMAGE, Cmd: ['sleep', '3600'], Labels: { 'gpucloud.bench': TAG }, HostConfig: { NetworkMode: 'bridge' } });
const sameSpec = (url, name) => sameSpecOf(url, name, TAG);
const rmRaw = () => rmLabelled(`gpucloud.bench=${TAG}`);
const rmOurs = (cluster) => rmLabelled(`gpucloud.cluster=${cluster}`);
const line = (metric, value, baseline, goal) => benchLine('instances', metric, value, baseline, goal);

async function waitAll(c, ids, ms) {
  const end = Date.now() + ms;
  for (;;) {
    const r = await c.req('GET', '/api/v1/instances?all=1&limit=1000');
    const st = new Map((r.json?.items || []).map((i) => [i.id, i.state]));
    const left = ids.filter((id) => st.get(id) !== 'running');
    const failed = ids.filter((id) => ['failed', 'lost', 'stopped'].includes(st.get(id)));
    // wait for every instance to settle: one failure must not count the
    // ones still starting as failures too
    if (left.every((id) => failed.includes(id))) return { left, failed, st };
    if (Date.now() > end) return { left, failed, st };
    await sleep(20);
  }
}

// Waits for the driver's "→ running" line of instance id in gpucloudd's log
// and returns the engine's share of that launch.
let logw = null;
async function waitRunning(id, ms) {
  const re = new RegExp(`instance ${id}: \\w+ → running \\(container \\w+; launch [\\d.]+ ms, engine ([\\d.]+) ms\\)`);
  const bad = new RegExp(`instance ${id}: \\w+ → (failed|lost|stopped)`);
  if (logw === null) logw = new LogWaiter(E.BENCH_LOG);
  const m = await logw.next(re, bad, ms, `instance ${id}`);
  return Number(m[1]);
}

async function main() {
  const cluster = psql('SELECT cluster_id FROM cluster_identity');
  try {
    const { admin, nodes, img, lab } = await setupWorld(E.GPUCLOUD_WORLD_IMAGE, ['sleep', '3600']);
    const users = [];
    for (let i = 0; i < STORM; i++) {
      must(await admin.req('POST', '/api/v1/users', { username: `lab${i}`, role: 'student', password: 'bench-student-1' }), 201, 'user');
      const c = new Client();
      await c.login(`lab${i}`, 'bench-student-1');
      users.push(c);
    }

    // ---- start overhead ----
    say(`start overhead: ${ROUNDS} rounds, alternating`);
    const ours = [], raw = [], engineMs = [];
    const u0 = users[0];
    let spec = null;
    for (let i = 0; i < ROUNDS + 1; i++) {
      // the raw side goes first in every other round: neither profits from
      // the other's warm caches
      let r = null;
      if (spec && i % 2 === 0) r = rawCurl(ENGINES[0], `${TAG}-s${i}`, spec);
      const inst = must(await u0.req('POST', '/api/v1/instances', { name: `s${i}`, image_id: img.id, pool: 'lab', slices: 1, cpu_millis: 50, mem_mib: 32, shm_mib: 16 }), 202, 'create');
      // the driver's log line says when it is running (and the engine's
      // share): no API polling while the engine starts the container, as on
      // the raw side, where nothing else runs either
      const eng = await waitRunning(inst.id, 30000);
      const s = Number(psql(`SELECT extract(epoch FROM started_at - created_at) FROM instances WHERE id = ${inst.id}`));
      const got = (await u0.req('GET', `/api/v1/instances/${inst.id}`)).json;
      if (got.state !== 'running') throw new Error(`instance ${inst.id} is ${got.state}`);
      if (got.node !== 'node1') throw new Error(`instance ${inst.id} ran on ${got.node}`);
      if (!spec) spec = await sameSpec(ENGINES[0], got.container_name);
      if (r === null) r = rawCurl(ENGINES[0], `${TAG}-s${i}`, spec);
      if (i > 0) { ours.push(s * 1000); raw.push(r * 1000); engineMs.push(eng); } // the first warms caches on both sides
      must(await u0.req('DELETE', `/api/v1/instances/${inst.id}`), 202, 'delete');
      for (let k = 0; k < 200; k++) { if ((await u0.req('GET', `/api/v1/instances/${inst.id}`)).status === 404) break; await sleep(25); }
      rmRaw();
    }
    const o = p50(ours), b = p50(raw);
    // gpucloudd's own time in each launch: the whole (created_at →
    // started_at) less the engine's calls it made (create, start, inspect)
    const own = ours.map((x, k) => x - engineMs[k]);
    // and, less precise on a shared machine, the paired differences to raw
    const d = p50(ours.map((x, k) => x - raw[k]));
    say(`ours ms:   ${ours.map((x) => x.toFixed(0)).join(' ')}`);
    say(`engine ms: ${engineMs.map((x) => x.toFixed(0)).join(' ')} (inside ours)`);
    say(`raw ms:    ${raw.map((x) => x.toFixed(0)).join(' ')}`);
    say(`paired differences to raw: p50 ${d.toFixed(1)} ms`);
    line('start_p50_ms', o.toFixed(1), b.toFixed(1), '<1.05 or +25ms');
    line('start_overhead_ms', p50(own).toFixed(1), p50(engineMs).toFixed(1), '<25 (baseline: the engine calls inside)');

    // ---- lab start storm ----
    must(await admin.req('PUT', `/api/v1/pools/${lab.id}/gpus`, { gpu_ids: nodes.flatMap((n) => n.gpus.map((g) => g.id)) }), 200, 'pool gpus');
    // STORM_ROUNDS rounds, alternating with the raw side; the best of each
    // counts (the convention of tests/bench/lib.sh: other work shares the
    // machine)
    let best = Infinity, bestRaw = Infinity, failures = 0, specs = null;
    for (let round = 0; round < STORM_ROUNDS; round++) {
      say(`storm round ${round + 1}: ${STORM} users at once`);
      const t0 = Date.now();
      const created = await Promise.all(users.map((c, i) => c.req('POST', '/api/v1/instances', { name: `lab-${round}-${i}`, image_id: img.id, pool: 'lab', slices: 1, cpu_millis: 20, mem_mib: 16, shm_mib: 16 })));
      const bad = created.filter((r) => r.status !== 202);
      const ids = created.filter((r) => r.status === 202).map((r) => r.json.id);
      const w = await waitAll(admin, ids, 180000);
      const wall = (Date.now() - t0) / 1000;
      const span = Number(psql(`SELECT extract(epoch FROM max(started_at) - min(created_at)) FROM instances WHERE name LIKE 'lab-${round}-%'`));
      failures += bad.length + w.left.length;
      for (const r of bad) say(`refused: ${r.status} ${r.text}`);
      if (w.left.length) {
        const items = (await admin.req('GET', '/api/v1/instances?all=1&limit=1000')).json.items;
        for (const it of items.filter((x) => w.left.includes(x.id))) say(`not running: instance ${it.id} ${it.state} ${it.reason || it.message || ''}`);
      }
      say(`ours: ${ids.length - w.left.length}/${STORM} running, ${bad.length + w.left.length} failures, ${span.toFixed(2)} s (client wall ${wall.toFixed(2)} s)`);
      best = Math.min(best, span);
      if (!specs) {
        specs = [];
        const items = (await admin.req('GET', '/api/v1/instances?all=1&limit=1000')).json.items;
        for (const [k, url] of ENGINES.entries()) {
          const one = items.find((x) => x.node === `node${k + 1}` && x.state === 'running');
          const spec = one ? await sameSpec(url, one.container_name) : rawSpec();
          // gpucloudd removes the user's network with the last instance:
          // the raw side uses the engine's bridge (it failed 24 of 24
          // creates on the vanished network before)
          spec.HostConfig = { ...spec.HostConfig, NetworkMode: 'bridge' };
          specs.push(spec);
        }
      }
      // give everything back before the raw side runs
      await Promise.all(ids.map((id, i) => users[i].req('DELETE', `/api/v1/instances/${id}`)));
      for (let t = 0; t < 600; t++) {
        if (Number(psql("SELECT count(*) FROM instances WHERE state <> 'deleted'")) === 0) break;
        await sleep(100);
      }
      rmOurs(cluster);
      // raw: the same number of create+start pairs at once, half per engine
      const r0 = Date.now();
      const rawRes = await Promise.all(Array.from({ length: STORM }, async (_, i) => {
        const url = ENGINES[i % 2];
        const name = `${TAG}-storm-${round}-${i}`;
        const c = await engine(url, 'POST', `/containers/create?name=${name}`, specs[i % 2]);
        if (c.status !== 201) return false;
        const st = await engine(url, 'POST', `/containers/${name}/start`);
        return st.status === 204;
      }));
      const rawSpan = (Date.now() - r0) / 1000;
      say(`raw: ${rawRes.filter(Boolean).length}/${STORM} running in ${rawSpan.toFixed(2)} s`);
      bestRaw = Math.min(bestRaw, rawSpan);
      rmRaw();
    }
    line('storm_total_s', best.toFixed(2), bestRaw.toFixed(2), '<=1.3');
    line('storm_failures', String(failures), '0', '=0');
  } finally {
    if (logw !== null) logw.close();
    try { rmOurs(cluster); rmRaw(); } catch { /* best effort */ }
  }
}

main().catch((e) => { console.error(`instances: error: ${e.stack || e}`); process.exit(1); });
