// class_56.test.mjs — the headline of issue 14: a class splits 8 declared
// GPUs (both world engines, 4 each) into 56 slices (a shared pool of 7
// slots per GPU), and 56 students start instances at once: all 56 run, each
// container is given only its own slice's GPU device file (the 7 sharing a
// GPU get that GPU's file and no other), and the 57th student waits with the
// class's reason and a position.  Cheap containers: the world's busybox
// image with a sleep, 10 millicores and 16 MiB each.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { stopClean, sha256hex } from '../lib/itest.mjs';
import { Client } from '../lib/server.mjs';
import { world, cleanup, sql, eventually, inspect, docker, env } from './instances_lib.mjs';

const N = 56;

describe('a class of 56 on 8 GPUs', () => {
  let w, cls, students;
  before(async () => {
    w = await world();
    const p = await w.admin.post('/api/v1/pools', { name: 'lab', sharing: 'shared', slots_per_gpu: 7, memory_per_slot_mib: 11264 });
    assert.equal(p.status, 201, p.text);
    // node1's GPUs leave the a100 pool for the lab
    assert.equal((await w.admin.req('PUT', `/api/v1/pools/${w.pool.id}/gpus`, { gpu_ids: [] })).status, 200);
    const all = await w.admin.req('PUT', `/api/v1/pools/${p.json.id}/gpus`, {
      gpu_ids: [...w.n1.gpus.map((g) => g.id), ...w.n2.gpus.map((g) => g.id)],
    });
    assert.equal(all.status, 200, all.text);
    assert.equal(Number(sql(w.srv, `SELECT count(*) FROM slices WHERE pool_id = ${p.json.id}`)), N);
    const teacher = await w.admin.post('/api/v1/users', { username: 'prof', role: 'teacher', password: 'prof-pass-1' });
    assert.equal(teacher.status, 201, teacher.text);
    cls = Number(sql(w.srv, `INSERT INTO classes (name, code, teacher_id, pool_id, alloc_slices, student_slices)
      VALUES ('GPU Programming', 'GPU56', ${teacher.json.user.id}, ${p.json.id}, ${N}, 1) RETURNING id`).split('\n')[0]);
    // 57 students: made in one statement (the password hash of one made
    // through the API; hashing 57 passwords and logging in 57 times would
    // dominate the run), each with an API token, as a script would
    const one = await w.admin.post('/api/v1/users', { username: 'st00', role: 'student', password: 'st00-pass-1' });
    assert.equal(one.status, 201, one.text);
    sql(w.srv, `INSERT INTO users (username, role, password_hash)
      SELECT 'st' || lpad(g::text, 2, '0'), 'student', (SELECT password_hash FROM users WHERE username = 'st00')
      FROM generate_series(1, ${N}) g`);
    students = [];
    const rows = sql(w.srv, "SELECT id, username FROM users WHERE username LIKE 'st__' ORDER BY username").split('\n');
    const values = [];
    for (const r of rows) {
      const [id, username] = r.split('|');
      const token = `gct_${randomBytes(24).toString('hex')}`;
      values.push(`(${id}, 'lab', '${sha256hex(token)}', '${token.slice(0, 12)}', '{read,write}', now() + interval '1 day')`);
      const c = new Client(w.srv.base);
      c.token = token;
      students.push({ c, id: Number(id), username });
    }
    sql(w.srv, `INSERT INTO api_tokens (user_id, name, token_hash, prefix, scopes, expires_at) VALUES ${values.join(', ')}`);
    assert.equal(students.length, N + 1);
    sql(w.srv, `INSERT INTO class_members (class_id, user_id) SELECT ${cls}, id FROM users WHERE username LIKE 'st__'`);
  });
  after(async () => { try { await stopClean(w?.srv); } finally { cleanup(w?.srv); } });

  it('runs 56 students at once, each on its own slice\'s device, and queues the 57th with the class reason', async () => {
    const t0 = Date.now();
    const made = await Promise.all(students.slice(0, N).map((s) => s.c.post('/api/v1/instances', {
      name: 'lab', image_id: w.image.id, class: cls, cpu_millis: 10, mem_mib: 16, cmd: ['sleep', '3600'],
    })));
    for (const r of made) assert.equal(r.status, 202, r.text);
    let states;
    const ok = await eventually(async () => {
      states = sql(w.srv, `SELECT state, count(*) FROM instances WHERE class_id = ${cls} GROUP BY state ORDER BY state`);
      return states === `running|${N}`;
    }, 100000, 250);
    assert.ok(ok, `all ${N} running; states: ${states}`);
    const tAll = Date.now() - t0;
    assert.equal(Number(sql(w.srv, "SELECT count(*) FROM instances WHERE state = 'failed'")), 0);

    // the 57th: the class is full
    const last = await students[N].c.post('/api/v1/instances', {
      name: 'lab', image_id: w.image.id, class: cls, cpu_millis: 10, mem_mib: 16, cmd: ['sleep', '3600'],
    });
    assert.equal(last.status, 202, last.text);
    let got;
    assert.ok(await eventually(async () => {
      got = (await students[N].c.get(`/api/v1/instances/${last.json.id}`)).json;
      return got.request && got.request.reason_code === 'class_full';
    }, 10000, 100), JSON.stringify(got));
    assert.equal(got.state, 'queued');
    assert.equal(got.request.reason, `class allocation full: ${N}/${N} slices`);
    assert.equal(got.request.position, 1);
    assert.deepEqual(got.class, { id: cls, name: 'GPU Programming', code: 'GPU56' });

    // each container has exactly its slice's GPU file, 7 per GPU
    const files = { node1: env.GPUCLOUD_WORLD_NODE1_GPUS.split(','), node2: env.GPUCLOUD_WORLD_NODE2_GPUS.split(',') };
    const urls = { node1: env.GPUCLOUD_WORLD_DOCKER1, node2: env.GPUCLOUD_WORLD_DOCKER2 };
    const perGpu = new Map();
    const items = await Promise.all(made.map((r, i) => students[i].c.get(`/api/v1/instances/${r.json.id}`)));
    for (const { json: inst } of items) {
      assert.equal(inst.gpus.length, 1, JSON.stringify(inst));
      const want = files[inst.node][inst.gpus[0].index];
      const c = inspect(urls[inst.node], inst.container_name);
      const devs = c.HostConfig.Devices || [];
      assert.deepEqual(devs.map((d) => [d.PathOnHost, d.PathInContainer]), [[want, '/dev/nvidia0']], inst.container_name);
      perGpu.set(want, (perGpu.get(want) || 0) + 1);
    }
    assert.equal(perGpu.size, 8);
    assert.ok([...perGpu.values()].every((n) => n === 7), JSON.stringify([...perGpu]));
    // and inside one container, only that one device file is there
    const one = items[0].json;
    const ls = docker(urls[one.node], 'exec', one.container_name, 'sh', '-c', 'ls /dev | grep nvidia');
    assert.equal(ls, 'nvidia0');
    console.log(`# class_56: ${N} running ${tAll} ms after the storm`);

    // one leaves: the 57th starts
    assert.ok([202, 204].includes((await students[0].c.req('DELETE', `/api/v1/instances/${made[0].json.id}`)).status));
    assert.ok(await eventually(async () => (await students[N].c.get(`/api/v1/instances/${last.json.id}`)).json.state === 'running', 30000, 200),
      'the 57th runs once a slice is free');
  });
});
