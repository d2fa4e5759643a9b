// class_sched.test.mjs — work in a class's context on the world's engines:
// POST /instances and /jobs with "class" (a member only, the class's pool and
// images, refused at once past the student's or the class's limits), the
// scheduler holding student ⊂ class ⊂ pool with its own reason at each
// boundary (class_limit, class_full, class_session off-hours and lab-session
// share, reserved_for_class for others while a lab session is open, the
// class's GPU-hour budget), the class on the instance and job objects, and a
// start storm of a whole class that queues with positions and never fails.
//
// The class itself is made in the database (its API is another part's): the
// columns of 0028 are the contract.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { assertErrorShape, stopClean } from '../lib/itest.mjs';
import { world, mkUser, cleanup, sql, eventually } from './instances_lib.mjs';

const reqOf = (srv, kind, id) => JSON.parse(sql(srv,
  `SELECT json_build_object('state', r.state, 'code', r.reason_code, 'reason', r.reason, 'position', r.position)
   FROM alloc_requests r WHERE r.owner_kind = '${kind}' AND r.owner_id = '${id}' ORDER BY r.id DESC LIMIT 1`));

describe('classes in the scheduler', () => {
  let w, teacher, s1, s2, s3, outsider, cls;
  const inst = (c, body) => c.post('/api/v1/instances', {
    image_id: w.image.id, cpu_millis: 100, mem_mib: 32, cmd: ['sleep', '3600'], ...body,
  });
  // waits until the instance's request says code (or is allocated: 'none')
  async function waitCode(c, id, code, ms = 8000) {
    let last;
    const ok = await eventually(async () => {
      last = reqOf(w.srv, 'instance', id);
      return code === 'none' ? last.state === 'allocated' : last.code === code;
    }, ms, 100);
    assert.ok(ok, `instance ${id}: ${code} not reached; last ${JSON.stringify(last)}`);
    return last;
  }
  const setClass = (set) => sql(w.srv, `UPDATE classes SET ${set} WHERE id = ${cls}`);
  async function stopAll() {
    for (const u of [teacher, s1, s2, s3, outsider]) {
      const l = await u.c.get('/api/v1/instances');
      for (const i of l.json.items || []) await u.c.req('DELETE', `/api/v1/instances/${i.id}`);
    }
    assert.ok(await eventually(async () => Number(sql(w.srv,
      "SELECT count(*) FROM alloc_requests WHERE state IN ('queued', 'allocated')")) === 0, 15000), 'all released');
  }

  before(async () => {
    w = await world();
    teacher = await mkUser(w, 'csteacher', 'teacher');
    s1 = await mkUser(w, 'cs1');
    s2 = await mkUser(w, 'cs2');
    s3 = await mkUser(w, 'cs3');
    outsider = await mkUser(w, 'csout');
    const pool = sql(w.srv, "SELECT id FROM pools WHERE name = 'a100'");
    cls = Number(sql(w.srv, `INSERT INTO classes (name, code, teacher_id, pool_id, alloc_slices, student_slices)
      VALUES ('Deep Learning 101', 'DL101', ${teacher.id}, ${pool}, 3, 1) RETURNING id`).split('\n')[0]);
    sql(w.srv, `INSERT INTO class_members (class_id, user_id, role) VALUES
      (${cls}, ${s1.id}, 'student'), (${cls}, ${s2.id}, 'student'), (${cls}, ${s3.id}, 'student')`);
  });
  after(async () => { try { await stopClean(w?.srv); } finally { cleanup(w?.srv); } });

  it('admits class work only for members, in the class\'s pool, with its images, within its limits', async () => {
    const out = await inst(outsider.c, { name: 'x', class: cls });
    assert.equal(out.status, 404, out.text);
    assertErrorShape(out.json, 'not_found');
    assert.equal((await inst(s1.c, { name: 'x', class: 999999 })).status, 404);
    const pool = await inst(s1.c, { name: 'x', class: cls, pool: 'nope' });
    assert.equal(pool.status, 400, pool.text);
    assert.equal(pool.json.error.message, "class 'Deep Learning 101' runs in pool 'a100'");
    const two = await inst(s1.c, { name: 'x', class: cls, slices: 2 });
    assert.equal(two.status, 422, two.text);
    assertErrorShape(two.json, 'exceeds_quota');
    assert.equal(two.json.error.message, "your class limit in 'Deep Learning 101': 1 slice at once; this asks 2");
    assert.deepEqual(two.json.error.details, [{ what: 'slices', most: 1, asked: 2, pool: 'a100' }]);
    // the teacher is held to the allocation, not the student limit
    const four = await inst(teacher.c, { name: 'x', class: cls, slices: 4 });
    assert.equal(four.status, 422, four.text);
    assert.equal(four.json.error.message, "class allocation of 'Deep Learning 101': 3 slices; this asks 4");
    setClass("student_cpu_millis = 500");
    const cpu = await inst(s1.c, { name: 'x', class: cls, cpu_millis: 600 });
    assert.equal(cpu.status, 422, cpu.text);
    assert.match(cpu.json.error.message, /^your class limit in 'Deep Learning 101': 500 millicores of cpu at once; this asks 600$/);
    setClass('student_cpu_millis = NULL');
    setClass(`allowed_images = '{${w.image.id + 1000}}'`);
    const img = await inst(s1.c, { name: 'x', class: cls });
    assert.equal(img.status, 403, img.text);
    assert.match(img.json.error.message, /is not one of the images class 'Deep Learning 101' allows/);
    setClass("allowed_images = '{}'");
    assert.equal(Number(sql(w.srv, 'SELECT count(*) FROM instances')), 0, 'nothing was recorded');
    // an image restricted to the class: its members see and run it, others do not
    sql(w.srv, `UPDATE images SET visibility = 'restricted', vis_roles = '{}', vis_classes = '{${cls}}' WHERE id = ${w.image.id}`);
    try {
      assert.equal((await s1.c.get(`/api/v1/images/${w.image.id}`)).status, 200);
      assert.equal((await outsider.c.get(`/api/v1/images/${w.image.id}`)).status, 404);
      const no = await inst(outsider.c, { name: 'x', pool: 'a100', slices: 1 });
      assert.equal(no.status, 404, no.text);
    } finally {
      sql(w.srv, `UPDATE images SET visibility = 'everyone', vis_classes = '{}' WHERE id = ${w.image.id}`);
    }
  });

  it('holds student ⊂ class ⊂ pool, each with its reason, and carries the class on the instance', async () => {
    const a = await inst(s1.c, { name: 'a', class: cls });
    assert.equal(a.status, 202, a.text);
    assert.deepEqual(a.json.class, { id: cls, name: 'Deep Learning 101', code: 'DL101' });
    assert.equal(a.json.pool, 'a100');
    assert.equal(a.json.slices, 1);
    await waitCode(s1.c, a.json.id, 'none');
    // the student's limit: 1 slice
    const b = await inst(s1.c, { name: 'b', class: cls });
    assert.equal(b.status, 202, b.text);
    let r = await waitCode(s1.c, b.json.id, 'class_limit');
    assert.equal(r.reason, 'your class limit: 1/1 slice');
    const got = await s1.c.get(`/api/v1/instances/${b.json.id}`);
    assert.equal(got.json.request.reason_code, 'class_limit');
    assert.equal(got.json.request.position, 1);
    // the class's allocation: 3 slices
    const c2 = await inst(s2.c, { name: 'c', class: cls });
    const c3 = await inst(s3.c, { name: 'c', class: cls });
    await waitCode(s2.c, c2.json.id, 'none');
    await waitCode(s3.c, c3.json.id, 'none');
    const t = await inst(teacher.c, { name: 't', class: cls });
    assert.equal(t.status, 202, t.text);
    r = await waitCode(teacher.c, t.json.id, 'class_full');
    assert.equal(r.reason, 'class allocation full: 3/3 slices');
    assert.equal(r.position, 2);
    // the pool: its 4th slice goes to anyone, then capacity
    const o1 = await inst(outsider.c, { name: 'o1', pool: 'a100', slices: 1 });
    await waitCode(outsider.c, o1.json.id, 'none');
    const o2 = await inst(outsider.c, { name: 'o2', pool: 'a100', slices: 1 });
    r = await waitCode(outsider.c, o2.json.id, 'capacity');
    // class work does not count against the user's own quota, nor the
    // other way round: the outsider's personal quota of 1 is full, a
    // member's personal work still runs on its own quota
    assert.equal(r.position, 3);
    // listing shows the class
    const list = await s1.c.get('/api/v1/instances');
    assert.ok(list.json.items.every((i) => i.class && i.class.id === cls));
    await stopAll();
  });

  it('limits class work outside lab sessions to the off-hours share, and holds a session\'s slices for the class', async () => {
    setClass('offhours_slices = 1, alloc_slices = 4, student_slices = 2');
    const a = await inst(s1.c, { name: 'off1', class: cls });
    await waitCode(s1.c, a.json.id, 'none');
    const b = await inst(s2.c, { name: 'off2', class: cls });
    let r = await waitCode(s2.c, b.json.id, 'class_session');
    assert.equal(r.reason, 'class off-hours share full: 1/1 slice outside lab sessions');
    // a lab session opens (3 slices until the window ends): the member's
    // waiting work starts beyond the off-hours share
    const sid = sql(w.srv, `INSERT INTO class_sessions (class_id, title, starts_at, ends_at, slices)
      VALUES (${cls}, 'lab', now() - interval '1 minute', date_trunc('minute', now()) + interval '1 hour', 3) RETURNING id`).split('\n')[0];
    const until = sql(w.srv, `SELECT to_char(ends_at AT TIME ZONE 'UTC', 'HH24:MI') FROM class_sessions WHERE id = ${sid}`);
    await waitCode(s2.c, b.json.id, 'none');
    // 2 of 3 reserved in use: 1 held; the pool's 2 free minus the held 1:
    // an outsider gets 1, not 2
    const o2 = await inst(outsider.c, { name: 'big', pool: 'a100', slices: 2 });
    r = await waitCode(outsider.c, o2.json.id, 'reserved_for_class');
    assert.equal(r.reason, `1 free slice is reserved for class 'Deep Learning 101' until ${until} UTC`);
    assert.equal(r.position, 1);
    const o1 = await inst(teacher.c, { name: 'own', pool: 'a100', slices: 1 });
    await waitCode(teacher.c, o1.json.id, 'none');
    // the member takes the last reserved slice; past the reservation, the
    // lab-session share says so
    const c = await inst(s3.c, { name: 'lab3', class: cls });
    await waitCode(s3.c, c.json.id, 'none');
    const d = await inst(s3.c, { name: 'lab4', class: cls });
    r = await waitCode(s3.c, d.json.id, 'class_session');
    assert.equal(r.reason, `class lab-session share full: 3/3 slices until ${until} UTC`);
    sql(w.srv, `UPDATE class_sessions SET cancelled_at = now() WHERE id = ${sid}`);
    await stopAll();
    setClass('offhours_slices = NULL, alloc_slices = 3, student_slices = 1');
  });

  it('waits on a spent class GPU-hour budget, and records class GPU-seconds on release', async () => {
    const a = await inst(s1.c, { name: 'g1', class: cls });
    await waitCode(s1.c, a.json.id, 'none');
    await new Promise((res) => setTimeout(res, 1100));
    await s1.c.req('DELETE', `/api/v1/instances/${a.json.id}`);
    assert.ok(await eventually(async () => Number(sql(w.srv,
      `SELECT COALESCE(sum(gpu_seconds), 0) FROM class_gpu_usage WHERE class_id = ${cls} AND user_id = ${s1.id}`)) >= 1, 10000),
    'class GPU-seconds recorded');
    setClass('student_gpu_hours_week = 0.0001');
    const b = await inst(s1.c, { name: 'g2', class: cls });
    assert.equal(b.status, 202, b.text);
    const r = await waitCode(s1.c, b.json.id, 'class_budget');
    assert.match(r.reason, /^your class GPU-hour budget: 0\.0 of 0\.0001 h used in the last 7 days$/);
    setClass('student_gpu_hours_week = NULL');
    await waitCode(s1.c, b.json.id, 'none');
    await stopAll();
  });

  // the pass writes every reason as JSON text of its own making: a class
  // name a teacher chose (quotes, a backslash, CJK, an emoji) must come
  // back byte for byte, and must not break the pass's write for others
  it('writes a queued request\'s reason with the class\'s name exactly as it is', async () => {
    const name = 'Deep "Learning" \\ 深度学习 🚀 101';
    sql(w.srv, `UPDATE classes SET name = $n$${name}$n$ WHERE id = ${cls}`);
    setClass('alloc_slices = 1');
    const first = await inst(s2.c, { name: 'first', class: cls });
    assert.equal(first.status, 202, first.text);
    await waitCode(s2.c, first.json.id, 'none');
    const a = await inst(s1.c, { name: 'named', class: cls });
    assert.equal(a.status, 202, a.text);
    await waitCode(s1.c, a.json.id, 'class_full');
    sql(w.srv, `UPDATE class_members SET state = 'suspended' WHERE class_id = ${cls} AND user_id = ${s1.id}`);
    let last;
    assert.ok(await eventually(async () => {
      last = reqOf(w.srv, 'instance', a.json.id);
      return last.reason === `you are no longer in class '${name}'`;
    }, 8000, 100), JSON.stringify(last));
    assert.equal(last.state, 'queued');
    // another user's work is placed by the passes that write that reason
    const o = await inst(s3.c, { name: 'other' });
    assert.equal(o.status, 202, o.text);
    await waitCode(s3.c, o.json.id, 'none');
    assert.equal(reqOf(w.srv, 'instance', a.json.id).reason, `you are no longer in class '${name}'`);
    // a name of 100 CJK characters outgrows the reason's 240 bytes: it is
    // cut before the character that does not fit whole (a stray byte of it
    // must not refuse the write), and, equal to what the next pass makes,
    // the reason is not written again pass after pass
    const long = '深'.repeat(100);
    setClass(`name = '${long}'`);
    const cut = `you are no longer in class '${'深'.repeat(70)}`;
    assert.ok(await eventually(async () => {
      last = reqOf(w.srv, 'instance', a.json.id);
      return last.reason === cut;
    }, 8000, 100), JSON.stringify(last));
    const version = () => sql(w.srv, `SELECT xmin FROM alloc_requests WHERE owner_kind = 'instance'
      AND owner_id = '${a.json.id}' ORDER BY id DESC LIMIT 1`);
    const v1 = version();
    await new Promise((res) => setTimeout(res, 1500)); // passes every 200 ms
    assert.equal(version(), v1, 'the cut reason was written again by a later pass');
    const o2 = await inst(teacher.c, { name: 'other2' });
    assert.equal(o2.status, 202, o2.text);
    await waitCode(teacher.c, o2.json.id, 'none');
    sql(w.srv, `UPDATE class_members SET state = 'active' WHERE class_id = ${cls} AND user_id = ${s1.id}`);
    setClass("alloc_slices = 3, name = 'Deep Learning 101'");
    await waitCode(s1.c, a.json.id, 'none');
    await stopAll();
  });

  it('submits a job in the class\'s context', async () => {
    const j = await s1.c.post('/api/v1/jobs', {
      name: 'train', image_id: w.image.id, command: ['sleep', '3600'], class: cls, cpu_millis: 100, mem_mib: 32,
    });
    assert.equal(j.status, 201, j.text);
    assert.deepEqual(j.json.class, { id: cls, name: 'Deep Learning 101', code: 'DL101' });
    assert.equal(j.json.pool, 'a100');
    assert.equal(j.json.slices, 1);
    assert.equal(sql(w.srv, `SELECT class_id FROM alloc_requests WHERE owner_kind = 'job' AND owner_id = '${j.json.id}'`), String(cls));
    const no = await outsider.c.post('/api/v1/jobs', { name: 'train', image_id: w.image.id, command: ['true'], class: cls });
    assert.equal(no.status, 404, no.text);
    await s1.c.post(`/api/v1/jobs/${j.json.id}/cancel`, {});
    // a sweep's runs too
    const sw = await s1.c.post('/api/v1/sweeps', {
      name: 'grid', metric: 'loss', goal: 'min', grid: { a: [1, 2] },
      job: { name: 'run', image_id: w.image.id, command: ['sleep', '3600'], class: cls, cpu_millis: 100, mem_mib: 32 },
    });
    assert.equal(sw.status, 201, sw.text);
    assert.equal(sql(w.srv, `SELECT count(*) FILTER (WHERE class_id = ${cls}) || '/' || count(*) FROM jobs WHERE sweep_id = ${sw.json.id}`), '2/2');
    assert.equal(sql(w.srv, `SELECT count(*) FROM alloc_requests r JOIN jobs j ON r.owner_kind = 'job' AND r.owner_id = j.id::text
      WHERE j.sweep_id = ${sw.json.id} AND r.class_id = ${cls} AND r.pool_id = j.pool_id`), '2');
    const swo = await outsider.c.post('/api/v1/sweeps', {
      name: 'grid', metric: 'loss', goal: 'min', grid: { a: [1] },
      job: { name: 'run', image_id: w.image.id, command: ['true'], class: cls },
    });
    assert.equal(swo.status, 404, swo.text);
    await s1.c.post(`/api/v1/sweeps/${sw.json.id}/cancel`, {});
    await stopAll();
  });

  it('starts a stopped class instance again only while its owner is in the class', async () => {
    const a = await inst(s2.c, { name: 'again', class: cls });
    await waitCode(s2.c, a.json.id, 'none');
    assert.equal((await s2.c.post(`/api/v1/instances/${a.json.id}/stop`, {})).status, 202);
    assert.ok(await eventually(async () => (await s2.c.get(`/api/v1/instances/${a.json.id}`)).json.state === 'stopped', 20000), 'stopped');
    sql(w.srv, `UPDATE class_members SET state = 'suspended' WHERE class_id = ${cls} AND user_id = ${s2.id}`);
    const no = await s2.c.post(`/api/v1/instances/${a.json.id}/start`, {});
    assert.equal(no.status, 409, no.text);
    assert.equal(no.json.error.message, 'no such class (or you are not in it)');
    sql(w.srv, `UPDATE class_members SET state = 'active' WHERE class_id = ${cls} AND user_id = ${s2.id}`);
    const yes = await s2.c.post(`/api/v1/instances/${a.json.id}/start`, {});
    assert.equal(yes.status, 202, yes.text);
    assert.equal(yes.json.class.id, cls);
    await waitCode(s2.c, a.json.id, 'none');
    await stopAll();
  });

  it('queues a start storm of the whole class with positions, and never fails one', async () => {
    const many = [];
    for (let i = 0; i < 8; i++) many.push(await mkUser(w, `storm${i}`));
    sql(w.srv, `INSERT INTO class_members (class_id, user_id) SELECT ${cls}, id FROM users WHERE username LIKE 'storm%'`);
    const rs = await Promise.all(many.map((u, i) => inst(u.c, { name: `s${i}`, class: cls })));
    for (const r of rs) assert.equal(r.status, 202, r.text);
    let last;
    assert.ok(await eventually(async () => {
      last = rs.map((r) => reqOf(w.srv, 'instance', r.json.id));
      return last.filter((x) => x.state === 'allocated').length === 3
        && last.filter((x) => x.state === 'queued' && x.code === 'class_full').length === 5;
    }, 15000, 100), JSON.stringify(last));
    const pos = last.filter((x) => x.state === 'queued').map((x) => x.position).sort((a, b) => a - b);
    assert.deepEqual(pos, [1, 2, 3, 4, 5]);
    assert.ok(await eventually(async () => {
      const l = await Promise.all(rs.map((r, i) => many[i].c.get(`/api/v1/instances/${r.json.id}`)));
      return l.filter((x) => x.json.state === 'running').length === 3 && l.every((x) => x.json.state !== 'failed');
    }, 30000, 200), 'three running, none failed');
  });
});
