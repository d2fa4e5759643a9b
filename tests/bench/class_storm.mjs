// class_storm.mjs — the figures of tests/bench/class_storm.sh: a class of
// STUDENTS (60) whose members all press Start within one second.
//
//  ours: a class over a shared pool of both engines' GPUs (8 slots each: 64
//    slices), an allocation of STUDENTS slices, one slice per student; every
//    student POSTs /instances with "class" at once.  all_running = the last
//    started_at - the first created_at (both written by the database); the
//    slowest student's wait = max(started_at - created_at); failures =
//    refused requests and instances that never ran.
//  raw: STUDENTS create+start pairs at once over the Engine API (half per
//    engine), of the very container gpucloudd made (its create body read
//    back from the engine), so the difference is gpucloudd's own work:
//    admission, the scheduler's class checks, the per-user network.
//  The better of ROUNDS rounds of each (other work shares the machine).
import { E, ENGINES, Client, must, engine, psql, sleep, sameSpec as sameSpecOf, rmLabelled, setupWorld, benchLine } from './benchlib.mjs';

const STUDENTS = Number(E.BENCH_STUDENTS || 60);
const ROUNDS = Number(E.BENCH_ROUNDS || 1);
const TAG = `gcbench-${process.pid}`;
const say = (m) => process.stderr.write(`class_storm: ${m}\n`);
const rmRaw = () => rmLabelled(`gpucloud.bench=${TAG}`);
const rmOurs = (cluster) => rmLabelled(`gpucloud.cluster=${cluster}`);

async function main() {
  const cluster = psql('SELECT cluster_id FROM cluster_identity');
  try {
    const { admin, nodes, img, lab } = await setupWorld(E.GPUCLOUD_WORLD_IMAGE, ['sleep', '3600']);
    must(await admin.req('PUT', `/api/v1/pools/${lab.id}/gpus`, { gpu_ids: nodes.flatMap((n) => n.gpus.map((g) => g.id)) }), 200, 'pool gpus');
    must(await admin.req('POST', '/api/v1/users', { username: 'prof', role: 'teacher', password: 'bench-teacher-1' }), 201, 'teacher');
    const cls = Number(psql(`INSERT INTO classes (name, code, teacher_id, pool_id, alloc_slices, student_slices)
      SELECT 'Storm', 'STORM', id, ${lab.id}, ${STUDENTS}, 1 FROM users WHERE username = 'prof' RETURNING id`).split('\n')[0]);
    const users = [];
    for (let i = 0; i < STUDENTS; i += 10) {
      users.push(...await Promise.all(Array.from({ length: Math.min(10, STUDENTS - i) }, async (_, k) => {
        must(await admin.req('POST', '/api/v1/users', { username: `s${i + k}`, role: 'student', password: 'bench-student-1' }), 201, 'user');
        const c = new Client();
        await c.login(`s${i + k}`, 'bench-student-1');
        return c;
      })));
    }
    psql(`INSERT INTO class_members (class_id, user_id) SELECT ${cls}, id FROM users WHERE role = 'student'`);

    let best = Infinity, bestRaw = Infinity, slowest = 0, failures = 0, specs = null;
    for (let round = 0; round < ROUNDS; round++) {
      say(`round ${round + 1}: ${STUDENTS} students press Start`);
      // within one second: each student after a random delay below 1 s
      const created = await Promise.all(users.map(async (c, i) => {
        await sleep(Math.floor(Math.random() * 1000));
        return c.req('POST', '/api/v1/instances', { name: `lab-${round}-${i}`, image_id: img.id, class: cls, cpu_millis: 20, mem_mib: 16, shm_mib: 16 });
      }));
      const bad = created.filter((r) => r.status !== 202);
      for (const r of bad) say(`refused: ${r.status} ${r.text}`);
      const ids = created.filter((r) => r.status === 202).map((r) => r.json.id);
      let left = ids;
      for (let t = 0; t < 3600 && left.length; t++) {
        const st = psql(`SELECT id, state FROM instances WHERE id IN (${ids.join(',') || 0})`).split('\n').map((l) => l.split('|'));
        const bad2 = st.filter(([, s]) => ['failed', 'lost', 'stopped'].includes(s));
        left = st.filter(([, s]) => s !== 'running').map(([id]) => Number(id));
        if (left.length && bad2.length === left.length) break;
        await sleep(50);
      }
      const [span, worst] = psql(`SELECT extract(epoch FROM max(started_at) - min(created_at)) * 1000,
        extract(epoch FROM max(started_at - created_at)) * 1000 FROM instances WHERE name LIKE 'lab-${round}-%'`).split('|').map(Number);
      failures += bad.length + left.length;
      for (const id of left) say(`not running: instance ${id} ${psql(`SELECT state || ' ' || reason FROM instances WHERE id = ${id}`)}`);
      say(`ours: ${ids.length - left.length}/${STUDENTS} running in ${span.toFixed(0)} ms, slowest wait ${worst.toFixed(0)} ms`);
      best = Math.min(best, span);
      slowest = Math.max(slowest, worst);
      if (!specs) {
        specs = [];
        for (const [k, url] of ENGINES.entries()) {
          const name = psql(`SELECT i.container_name FROM instances i JOIN nodes n ON n.id = i.node_id
            WHERE n.name = 'node${k + 1}' AND i.state = 'running' LIMIT 1`);
          const spec = await sameSpecOf(url, name, TAG);
          spec.HostConfig = { ...spec.HostConfig, NetworkMode: 'bridge' };
          specs.push(spec);
        }
      }
      await Promise.all(ids.map((id, i) => users[i].req('DELETE', `/api/v1/instances/${id}`)));
      for (let t = 0; t < 600; t++) {
        if (Number(psql("SELECT count(*) FROM instances WHERE state <> 'deleted'")) === 0) break;
        await sleep(100);
      }
      rmOurs(cluster);
      const r0 = Date.now();
      const rawRes = await Promise.all(Array.from({ length: STUDENTS }, async (_, i) => {
        const url = ENGINES[i % 2];
        const name = `${TAG}-storm-${round}-${i}`;
        const c = await engine(url, 'POST', `/containers/create?name=${name}`, specs[i % 2]);
        if (c.status !== 201) return false;
        return (await engine(url, 'POST', `/containers/${name}/start`)).status === 204;
      }));
      const rawSpan = Date.now() - r0;
      say(`raw: ${rawRes.filter(Boolean).length}/${STUDENTS} running in ${rawSpan} ms`);
      bestRaw = Math.min(bestRaw, rawSpan);
      rmRaw();
    }
    benchLine('class_storm', 'all_running_ms', best.toFixed(0), bestRaw.toFixed(0), '1.15');
    console.log(`BENCH class_storm slowest_wait_ms=${slowest.toFixed(0)} failures=${failures} goal=0`);
  } finally {
    try { rmOurs(cluster); rmRaw(); } catch { /* best effort */ }
  }
}

main().catch((e) => { console.error(`class_storm: error: ${e.stack || e}`); process.exit(1); });
