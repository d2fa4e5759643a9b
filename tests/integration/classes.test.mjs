// classes.test.mjs — the class object and its roster (/api/v1/classes):
// create with the admin's cap, read and list by role, change with student
// limits held inside the class's allocation, the admin's allocation held
// inside the pool, the roster (roles, ranks, TA per flag, suspension), CSV
// import (report, all or nothing, one-time passwords), invite codes and
// joining by one; who sees what (another teacher's class is a 404),
// expired sessions, read-only tokens, CSRF/Origin and bad input.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, Client, ADMIN_PASSWORD } from '../lib/server.mjs';
import { sql, eventually, stopClean, call, assertErrorShape } from '../lib/itest.mjs';

const env = process.env;
const PW = 'user-pass-123';

describe('classes', () => {
  let srv, admin, t1, t2, s1, s2, s3, r1;
  const ids = {};
  let cls, pool, nslices;

  const login = async (u, pw = PW) => {
    const c = new Client(srv.base);
    const r = await c.login(u, pw);
    assert.equal(r.status, 200, r.text);
    return c;
  };
  const csv = (c, path, text) => c.req('POST', path, text, { 'content-type': 'text/csv' });

  before(async () => {
    assert.ok(env.GPUCLOUD_WORLD_DOCKER1 && env.GPUCLOUD_WORLD_NODE1_GPUS, 'run through make test (it starts the world)');
    srv = await startServer({ args: ['--node-check-interval=1'] });
    admin = new Client(srv.base);
    assert.equal((await admin.login('admin', ADMIN_PASSWORD)).status, 200);
    const gpus = env.GPUCLOUD_WORLD_NODE1_GPUS.split(',').map((d) => ({ model: 'NVIDIA A100-SXM4-80GB', memory_mib: 81920, devices: [d] }));
    const node = (await admin.post('/api/v1/nodes', { name: 'node1', url: env.GPUCLOUD_WORLD_DOCKER1, gpus })).json;
    pool = (await admin.post('/api/v1/pools', { name: 'a100' })).json;
    assert.equal((await admin.req('PUT', `/api/v1/pools/${pool.id}/gpus`, { gpu_ids: node.gpus.map((g) => g.id) })).status, 200);
    nslices = node.gpus.length;
    for (const [u, role] of [['ct1', 'teacher'], ['ct2', 'teacher'], ['cs1', 'student'], ['cs2', 'student'], ['cs3', 'student'], ['cr1', 'researcher']]) {
      const r = await admin.post('/api/v1/users', { username: u, role, password: PW });
      assert.equal(r.status, 201, r.text);
      ids[u] = r.json.user.id;
    }
    [t1, t2, s1, s2, s3, r1] = await Promise.all(['ct1', 'ct2', 'cs1', 'cs2', 'cs3', 'cr1'].map((u) => login(u)));
  });

  after(async () => { await stopClean(srv); });

  it('lets teachers and admins create classes, not students or researchers', async () => {
    const r = await t1.post('/api/v1/classes', { name: 'Deep Learning', code: 'DL-2026', term: 'Spring 2026', description: 'CNNs and transformers' });
    assert.equal(r.status, 201, r.text);
    cls = r.json;
    assert.equal(cls.name, 'Deep Learning');
    assert.equal(cls.code, 'DL-2026');
    assert.equal(cls.state, 'active');
    assert.equal(cls.my_role, 'owner');
    assert.deepEqual(cls.teacher, { id: ids.ct1, username: 'ct1', display_name: '' });
    assert.equal(cls.pool, null);
    assert.deepEqual(cls.allocation, { slices: 0, cpu_millis: null, mem_mib: null, gpu_hours_week: null, storage_bytes: null });
    assert.deepEqual(cls.counts, { students: 0, tas: 0, teachers: 1, suspended: 0 });
    assert.deepEqual(cls.invite, { active: false, expires_at: null });
    assert.deepEqual(cls.reach, { teachers_open_apps: true, tas_open_apps: false, tas_stop_work: false, tas_manage_roster: false });
    for (const c of [s1, r1]) {
      const x = await c.post('/api/v1/classes', { name: 'Mine' });
      assert.equal(x.status, 403, x.text);
      assertErrorShape(x.json, 'forbidden');
    }
    const dup = await t2.post('/api/v1/classes', { name: 'Deep Learning' });
    assert.equal(dup.status, 409);
    assert.match(dup.json.error.message, /exists already/);
    const code = await t2.post('/api/v1/classes', { name: 'Other', code: 'DL-2026' });
    assert.equal(code.status, 409);
    assert.match(code.json.error.message, /code 'DL-2026' is taken/);
    // only an admin names another teacher
    const other = await t2.post('/api/v1/classes', { name: 'Stolen', teacher_id: ids.ct1 });
    assert.equal(other.status, 403, other.text);
    const byAdmin = await admin.post('/api/v1/classes', { name: 'Statistics', code: 'STAT1', teacher_id: ids.ct2 });
    assert.equal(byAdmin.status, 201, byAdmin.text);
    assert.equal(byAdmin.json.teacher.username, 'ct2');
    assert.equal(byAdmin.json.my_role, null, 'the admin is not in it');
    const notTeacher = await admin.post('/api/v1/classes', { name: 'Nope', teacher_id: ids.cs1 });
    assert.equal(notTeacher.status, 400);
    assert.match(notTeacher.json.error.message, /not a teacher/);
  });

  it('caps how many classes a teacher may create when an admin says so', async () => {
    assert.equal((await admin.req('PUT', '/api/v1/settings/max_classes_per_teacher', { value: '1' })).status, 200);
    const r = await t2.post('/api/v1/classes', { name: 'Second of ct2' });
    assert.equal(r.status, 409, r.text);
    assert.match(r.json.error.message, /already teach 1 active classes, the most an admin allows \(1\)/);
    assert.equal((await admin.req('PUT', '/api/v1/settings/max_classes_per_teacher', { value: 'lots' })).status, 400);
    assert.equal((await admin.del('/api/v1/settings/max_classes_per_teacher')).status, 200);
    const again = await t2.post('/api/v1/classes', { name: 'Second of ct2' });
    assert.equal(again.status, 201, again.text);
    assert.equal((await admin.del(`/api/v1/classes/${again.json.id}`)).status, 200);
  });

  it('hides a class from everyone not in it (404), lists what each may see', async () => {
    const p = `/api/v1/classes/${cls.id}`;
    for (const [m, path, body] of [['GET', p], ['PATCH', p, { term: 'x' }], ['DELETE', p],
      ['GET', `${p}/members`], ['POST', `${p}/members`, { username: 'cs1' }],
      ['PATCH', `${p}/members/${ids.cs1}`, { state: 'suspended' }], ['DELETE', `${p}/members/${ids.cs1}`],
      ['POST', `${p}/invite`, {}], ['DELETE', `${p}/invite`]]) {
      for (const c of [t2, s1, r1]) {
        const r = await c.req(m, path, body);
        assert.equal(r.status, 404, `${m} ${path}: ${r.text}`);
        assertErrorShape(r.json, 'not_found');
      }
    }
    const imp = await csv(t2, `${p}/members/import`, 'username\ncs1\n');
    assert.equal(imp.status, 404, imp.text);
    assert.equal((await t2.get('/api/v1/classes/999999')).status, 404);
    assert.equal((await t2.get('/api/v1/classes/abc')).status, 404);
    const l2 = (await t2.get('/api/v1/classes')).json.items.map((c) => c.name);
    assert.deepEqual(l2, ['Statistics']);
    assert.deepEqual((await s1.get('/api/v1/classes')).json.items, []);
    const la = (await admin.get('/api/v1/classes')).json.items.map((c) => c.name).sort();
    assert.deepEqual(la, ['Deep Learning', 'Statistics']);
    // the allocation is the admin's
    const al = await t1.req('PUT', `${p}/allocation`, { pool: 'a100', slices: 1 });
    assert.equal(al.status, 403);
  });

  it('keeps student limits inside the class and the class inside the pool', async () => {
    const p = `/api/v1/classes/${cls.id}`;
    let r = await t1.patch(p, { student_limits: { slices: 1 } });
    assert.equal(r.status, 422, r.text);
    assertErrorShape(r.json, 'exceeds_quota');
    assert.match(r.json.error.message, /student_limits\.slices 1 is more than the class holds \(0\)/);
    assert.deepEqual(r.json.error.details, [{ what: 'class_slices', most: 0, asked: 1 }], 'for the interface to word it');
    r = await admin.req('PUT', `${p}/allocation`, { pool: 'a100', slices: nslices + 1 });
    assert.equal(r.status, 422, r.text);
    assert.match(r.json.error.message, new RegExp(`pool 'a100' has ${nslices} slices; the allocation asks ${nslices + 1}`));
    r = await admin.req('PUT', `${p}/allocation`, { pool: 'nope', slices: 1 });
    assert.equal(r.status, 400);
    r = await admin.req('PUT', `${p}/allocation`, { slices: 1 });
    assert.equal(r.status, 400, 'slices need a pool');
    r = await admin.req('PUT', `${p}/allocation`, { pool: 'a100', slices: nslices, cpu_millis: 8000, mem_mib: 32768, gpu_hours_week: 12.5, storage_bytes: 10 * 2 ** 30 });
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.json.pool, { id: pool.id, name: 'a100', sharing: 'exclusive', slices: nslices });
    assert.deepEqual(r.json.allocation, { slices: nslices, cpu_millis: 8000, mem_mib: 32768, gpu_hours_week: 12.5, storage_bytes: 10 * 2 ** 30 });
    assert.equal(sql(srv, `SELECT bytes_hard FROM storage_areas WHERE area = 'class:${cls.id}'`), String(10 * 2 ** 30));
    for (const [k, v, cap] of [['cpu_millis', 8001, 8000], ['mem_mib', 40000, 32768], ['gpu_hours_week', 13, 12.5], ['storage_bytes', 11 * 2 ** 30, 10 * 2 ** 30], ['slices', nslices + 1, nslices]]) {
      r = await t1.patch(p, { student_limits: { [k]: v } });
      assert.equal(r.status, 422, `${k}: ${r.text}`);
      assert.ok(r.json.error.message.includes(`student_limits.${k}`) && r.json.error.message.includes(`(${cap})`), r.json.error.message);
    }
    r = await t1.patch(p, { student_limits: { slices: 1, cpu_millis: 4000, mem_mib: 16384, gpu_hours_week: 2.5, storage_bytes: 2 ** 30, max_session_s: 7200 }, offhours_slices: 1, idle_timeout_s: 1800, max_lifetime_s: 14400, reach: { tas_manage_roster: false, tas_stop_work: true }, data_policy: 'remove', term: 'Spring 2026 (B)' });
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.json.student_limits, { slices: 1, cpu_millis: 4000, mem_mib: 16384, gpu_hours_week: 2.5, storage_bytes: 2 ** 30, max_session_s: 7200 });
    assert.equal(r.json.offhours_slices, 1);
    assert.equal(r.json.reach.tas_stop_work, true);
    assert.equal(r.json.data_policy, 'remove');
    assert.equal(r.json.term, 'Spring 2026 (B)');
    r = await t1.patch(p, { offhours_slices: nslices + 1 });
    assert.equal(r.status, 422);
    // the allocation cannot drop below what each student holds
    r = await admin.req('PUT', `${p}/allocation`, { pool: 'a100', slices: 0, cpu_millis: 8000, mem_mib: 32768, gpu_hours_week: 12.5, storage_bytes: 10 * 2 ** 30 });
    assert.equal(r.status, 409, r.text);
    assert.match(r.json.error.message, /student_limits\.slices/);
    // images: catalog ones only
    r = await t1.patch(p, { allowed_images: [987654] });
    assert.equal(r.status, 400);
    assert.match(r.json.error.message, /image 987654 is not in the image catalog/);
    const img = await admin.post('/api/v1/images', { reference: 'registry.example/class/busybox:1', display_name: 'busybox', verify: false });
    assert.ok([200, 201].includes(img.status), img.text);
    r = await t1.patch(p, { allowed_images: [img.json.id] });
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.json.allowed_images, [img.json.id]);
    // null removes a limit
    r = await t1.patch(p, { student_limits: { max_session_s: null }, allowed_images: [] });
    assert.equal(r.json.student_limits.max_session_s, null);
    assert.deepEqual(r.json.allowed_images, []);
    // only an admin changes the owner
    r = await t1.patch(p, { teacher_id: ids.ct2 });
    assert.equal(r.status, 403);
  });

  it('adds members by rank: nobody grants more than they hold; TAs per the class flag', async () => {
    const p = `/api/v1/classes/${cls.id}`;
    let r = await t1.post(`${p}/members`, { username: 'cs1' });
    assert.equal(r.status, 201, r.text);
    assert.equal(r.json.role, 'student');
    assert.equal(r.json.user.username, 'cs1');
    assert.equal(r.json.via, 'added');
    r = await t1.post(`${p}/members`, { user_id: ids.cs2, role: 'ta' });
    assert.equal(r.status, 201, r.text);
    r = await t1.post(`${p}/members`, { username: 'cs1' });
    assert.equal(r.status, 409, 'already in it');
    r = await t1.post(`${p}/members`, { username: 'nobody' });
    assert.equal(r.status, 404);
    assert.match(r.json.error.message, /no such user nobody/);
    r = await t1.post(`${p}/members`, { username: 'cs3', role: 'teacher' });
    assert.equal(r.status, 400, 'a student account cannot co-teach');
    r = await t1.post(`${p}/members`, { username: 'ct2', role: 'teacher' });
    assert.equal(r.status, 201, r.text);
    // the co-teacher can add TAs and students, not co-teachers
    r = await t2.post(`${p}/members`, { username: 'cr1', role: 'teacher' });
    assert.equal(r.status, 403, r.text);
    r = await t2.post(`${p}/members`, { username: 'cr1', role: 'ta' });
    assert.equal(r.status, 201, r.text);
    r = await t2.req('DELETE', `${p}/members/${ids.cr1}`);
    assert.equal(r.status, 200, r.text);
    // the TA reads the roster but changes it only when the class allows
    const ta = s2;
    r = await ta.get(`${p}/members`);
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.json.items.map((m) => [m.user.username, m.role]), [['ct1', 'owner'], ['ct2', 'teacher'], ['cs2', 'ta'], ['cs1', 'student']]);
    r = await ta.post(`${p}/members`, { username: 'cs3' });
    assert.equal(r.status, 403, r.text);
    assert.match(r.json.error.message, /does not let teaching assistants/);
    assert.equal((await t1.patch(p, { reach: { tas_manage_roster: true } })).status, 200);
    r = await ta.post(`${p}/members`, { username: 'cs3', role: 'ta' });
    assert.equal(r.status, 403, 'a TA makes no TAs');
    r = await ta.post(`${p}/members`, { username: 'cs3' });
    assert.equal(r.status, 201, r.text);
    r = await ta.patch(`${p}/members/${ids.ct2}`, { state: 'suspended' });
    assert.equal(r.status, 403, 'a TA cannot suspend a teacher');
    r = await t2.patch(`${p}/members/${ids.cs2}`, { role: 'teacher' });
    assert.equal(r.status, 403, 'a co-teacher makes no co-teachers');
    // a student sees the class and its teachers, not the roster
    r = await s1.get(p);
    assert.equal(r.status, 200);
    assert.equal(r.json.my_role, 'student');
    assert.equal(r.json.teacher.username, 'ct1');
    assert.deepEqual(r.json.co_teachers.map((t) => t.username), ['ct2']);
    assert.equal('invite' in r.json, false, 'the invite is for staff');
    assert.deepEqual(r.json.counts, { students: 2, tas: 1, teachers: 2, suspended: 0 });
    r = await s1.get(`${p}/members`);
    assert.equal(r.status, 404);
    r = await s1.post(`${p}/members`, { username: 'cr1' });
    assert.equal(r.status, 403);
    r = await s1.patch(p, { term: 'mine now' });
    assert.equal(r.status, 403);
    // suspension: the class disappears for them; resuming brings it back
    r = await ta.patch(`${p}/members/${ids.cs3}`, { state: 'suspended' });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.state, 'suspended');
    assert.equal((await s3.get(p)).status, 404);
    assert.deepEqual((await s3.get('/api/v1/classes')).json.items, []);
    assert.equal((await t1.get(p)).json.counts.suspended, 1);
    assert.equal((await t1.patch(`${p}/members/${ids.cs3}`, { state: 'active' })).status, 200);
    assert.equal((await s3.get(p)).status, 200);
    // the owner is not a roster entry
    r = await t1.patch(`${p}/members/${ids.ct1}`, { state: 'suspended' });
    assert.equal(r.status, 409);
    // audit
    const acts = sql(srv, "SELECT string_agg(DISTINCT action, ',' ORDER BY action) FROM audit_log WHERE action LIKE 'class.member%'");
    assert.equal(acts, 'class.member.add,class.member.remove,class.member.resume,class.member.suspend');
  });

  it('imports a roster CSV: a report per line, all or nothing, one-time passwords once', async () => {
    const p = `/api/v1/classes/${cls.id}/members/import`;
    const good = 'username,display_name,email,role\r\nnew1,New One,new1@example.org,\nnew2,"Two, New",,student\ncs1,,,\ncr1,,,ta\n';
    let r = await csv(t1, `${p}?dry_run=1`, good);
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.dry_run, true);
    assert.deepEqual(r.json.rows.map((x) => [x.line, x.username, x.action]), [[2, 'new1', 'create'], [3, 'new2', 'create'], [4, 'cs1', 'already'], [5, 'cr1', 'link']]);
    assert.deepEqual([r.json.created, r.json.linked, r.json.already], [2, 1, 1]);
    assert.equal(sql(srv, "SELECT count(*) FROM users WHERE username IN ('new1', 'new2')"), '0', 'a check creates nothing');
    // bad rows: every problem with its line, nothing created
    const badCsv = 'username,role\nnew3,student\nBad Name,student\nnew3,student\nnew4,owner\nct1,teacher\n"unterminated,student\n';
    r = await csv(t1, p, badCsv);
    assert.equal(r.status, 400, r.text);
    assertErrorShape(r.json, 'invalid');
    const lines = r.json.error.details.map((e) => e.line);
    assert.deepEqual(lines, [3, 4, 5, 7], JSON.stringify(r.json.error.details));
    assert.equal(sql(srv, "SELECT count(*) FROM users WHERE username = 'new3'"), '0');
    // a field that is not UTF-8, then a username seen before (crashed the
    // duplicate check once: the bad row had no fields)
    r = await csv(t1, p, Buffer.from('username,role\nok1,student\n\xe1lice,student\nalice,student\nalice,student\n', 'latin1'));
    assert.equal(r.status, 400, r.text);
    assert.deepEqual(r.json.error.details.map((e) => e.line), [3, 5]);
    assert.equal((await t1.get('/api/v1/classes')).status, 200, 'the server lives');
    r = await csv(t1, p, 'name,role\nx,student\n');
    assert.equal(r.status, 400);
    assert.match(r.json.error.details[0].message, /unknown or repeated column 'name'/);
    r = await csv(t1, p, '');
    assert.equal(r.status, 400);
    r = await t1.post(p, { username: 'x' });
    assert.equal(r.status, 415);
    r = await csv(t1, `${p}?dry_run=maybe`, good);
    assert.equal(r.status, 400);
    r = await csv(t1, p, 'username\n' + 'x'.repeat(1 << 20) + '\n');
    assert.equal(r.status, 413);
    // a co-teacher row needs a teacher account; the TA cannot import TAs
    r = await csv(s2, p, 'username,role\nnew5,ta\n');
    assert.equal(r.status, 400, r.text);
    assert.match(r.json.error.details[0].message, /cannot make anyone a ta/);
    // the import
    r = await csv(t1, p, good);
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.must_change_password, true);
    assert.deepEqual(r.json.rows.map((x) => [x.username, x.action]), [['new1', 'created'], ['new2', 'created'], ['cs1', 'already'], ['cr1', 'linked']]);
    const n1 = r.json.rows[0];
    assert.equal(typeof n1.password, 'string');
    assert.ok(n1.password.length >= 16);
    assert.equal(r.json.rows[2].password, undefined);
    assert.equal(sql(srv, "SELECT display_name || '|' || role || '|' || must_change_password FROM users WHERE username = 'new2'"), 'Two, New|student|true');
    const fresh = new Client(srv.base);
    const lr = await fresh.login('new1', n1.password);
    assert.equal(lr.status, 200, lr.text);
    assert.equal(lr.json.user.must_change_password, true);
    const m = (await t1.get(`/api/v1/classes/${cls.id}/members`)).json.items;
    assert.equal(m.find((x) => x.user.username === 'new1').via, 'csv');
    assert.equal(m.find((x) => x.user.username === 'cr1').role, 'ta');
    // again: everyone is already there; no passwords
    r = await csv(t1, p, good);
    assert.equal(r.status, 200);
    assert.deepEqual([r.json.created, r.json.linked, r.json.already], [0, 0, 4]);
    assert.ok(r.json.rows.every((x) => !x.password));
    assert.equal(sql(srv, "SELECT count(*) FROM audit_log WHERE action = 'class.import'"), '2');
  });

  it('invites by a code shown once; joining makes a student; expired or disabled codes are refused', async () => {
    const p = `/api/v1/classes/${cls.id}`;
    let r = await t1.post(`${p}/invite`, { expires_in_s: 3600 });
    assert.equal(r.status, 201, r.text);
    const { code, url, expires_at } = r.json;
    assert.match(code, /^[A-Za-z0-9_-]{16,}$/);
    assert.equal(url, `/#/join?code=${code}`);
    assert.ok(Date.parse(expires_at) > Date.now());
    assert.equal(sql(srv, `SELECT invite_hash = encode(sha256('${code}'), 'hex') FROM classes WHERE id = ${cls.id}`), 't', 'only the hash is kept');
    assert.equal((await t1.get(p)).json.invite.active, true);
    const joiner = await login('cs1'); // already a student: no change
    r = await joiner.post('/api/v1/classes/join', { code });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.joined, false);
    const u = await admin.post('/api/v1/users', { username: 'joiner', role: 'student', password: PW });
    assert.equal(u.status, 201);
    const j = await login('joiner');
    r = await j.post('/api/v1/classes/join', { code: 'wrong-code' });
    assert.equal(r.status, 404);
    r = await j.post('/api/v1/classes/join', { code });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.joined, true);
    assert.equal(r.json.class.my_role, 'student');
    assert.equal((await j.get(p)).status, 200);
    // expired
    sql(srv, `UPDATE classes SET invite_expires_at = now() - interval '1 second' WHERE id = ${cls.id}`);
    const late = await login('cs3');
    await t1.req('DELETE', `${p}/members/${ids.cs3}`);
    r = await late.post('/api/v1/classes/join', { code });
    assert.equal(r.status, 409, r.text);
    assert.match(r.json.error.message, /expired/);
    // disabled
    r = await t1.post(`${p}/invite`, {});
    const code2 = r.json.code;
    assert.ok(Date.parse(r.json.expires_at) - Date.now() > 6 * 86400e3, 'a week by default');
    assert.equal((await t1.req('DELETE', `${p}/invite`)).status, 200);
    r = await late.post('/api/v1/classes/join', { code: code2 });
    assert.equal(r.status, 404);
    assert.equal((await t1.get(p)).json.invite.active, false);
    // bad input
    for (const b of [{ expires_in_s: 5 }, { expires_in_s: 10 ** 9 }, { expires_in_s: 'soon' }, { other: 1 }]) {
      r = await t1.post(`${p}/invite`, b);
      assert.equal(r.status, 400, JSON.stringify(b));
    }
    assert.equal((await late.post('/api/v1/classes/join', {})).status, 400);
    // archived classes take nobody
    r = await t1.post(`${p}/invite`, {});
    sql(srv, `UPDATE classes SET state = 'archived' WHERE id = ${cls.id}`);
    const rj = await late.post('/api/v1/classes/join', { code: r.json.code });
    assert.equal(rj.status, 409);
    assert.match(rj.json.error.message, /archived/);
    assert.equal((await t1.patch(p, { term: 'x' })).status, 409, 'archived classes are read-only');
    sql(srv, `UPDATE classes SET state = 'active' WHERE id = ${cls.id}`);
  });

  it('needs a live session, a write token to change anything, and CSRF with the right Origin', async () => {
    const p = `/api/v1/classes/${cls.id}`;
    const c = await login('ct1');
    const cookie = c.cookieHeader();
    assert.equal((await call(srv.base, 'GET', p, { cookie })).status, 200);
    sql(srv, `UPDATE sessions SET created_at = now() - interval '2 hours', expires_at = now() - interval '1 second' WHERE id = (SELECT max(id) FROM sessions WHERE user_id = ${ids.ct1})`);
    const ex = await call(srv.base, 'GET', p, { cookie });
    assert.equal(ex.status, 401);
    assertErrorShape(ex.json, 'unauthorized');
    assert.equal((await call(srv.base, 'GET', '/api/v1/classes')).status, 401, 'anonymous');

    const ro = (await t1.post('/api/v1/tokens', { name: 'classes-reader', scopes: ['read'] })).json.token;
    assert.equal((await call(srv.base, 'GET', p, { bearer: ro })).status, 200);
    assert.equal((await call(srv.base, 'GET', `${p}/members`, { bearer: ro })).status, 200);
    for (const [m, path, b] of [['PATCH', p, { term: 'ro' }], ['POST', '/api/v1/classes', { name: 'RO' }],
      ['POST', `${p}/members`, { username: 'cs3' }], ['POST', `${p}/invite`, {}], ['DELETE', p],
      ['POST', '/api/v1/classes/join', { code: 'x' }]]) {
      const r = await call(srv.base, m, path, { bearer: ro, body: b });
      assert.equal(r.status, 403, `${m} ${path} with a read-only token: ${r.text}`);
    }
    const rw = (await t1.post('/api/v1/tokens', { name: 'classes-writer', scopes: ['read', 'write'] })).json.token;
    assert.equal((await call(srv.base, 'PATCH', p, { bearer: rw, body: { description: 'by token' } })).status, 200);

    const ck = t1.cookieHeader();
    for (const [m, path, b] of [['PATCH', p, { term: 'csrf' }], ['POST', `${p}/members`, { username: 'cs3' }],
      ['DELETE', `${p}/invite`], ['POST', '/api/v1/classes/join', { code: 'x' }]]) {
      const noToken = await call(srv.base, m, path, { cookie: ck, origin: srv.base, body: b });
      assert.equal(noToken.status, 403, `${m} ${path} without CSRF: ${noToken.text}`);
      const foreign = await call(srv.base, m, path, { cookie: ck, csrf: t1.csrf, origin: 'https://evil.example', body: b });
      assert.equal(foreign.status, 403, `${m} ${path} from another origin: ${foreign.text}`);
    }
    assert.notEqual((await t1.get(p)).json.term, 'csrf');
  });

  it('refuses bad input with the error shape', async () => {
    const p = `/api/v1/classes/${cls.id}`;
    const cases = [
      ['POST', '/api/v1/classes', {}],
      ['POST', '/api/v1/classes', { name: '' }],
      ['POST', '/api/v1/classes', { name: 'X', unknown: 1 }],
      ['POST', '/api/v1/classes', { name: 5 }],
      ['POST', '/api/v1/classes', { name: 'X', code: 'bad code!' }],
      ['POST', '/api/v1/classes', { name: 'x'.repeat(101) }],
      ['POST', '/api/v1/classes', { name: 'a\u0001b' }],
      ['PATCH', p, {}],
      ['PATCH', p, { name: null }],
      ['PATCH', p, { student_limits: { gpus: 1 } }],
      ['PATCH', p, { student_limits: { slices: -1 } }],
      ['PATCH', p, { student_limits: { slices: 1.5 } }],
      ['PATCH', p, { student_limits: { cpu_millis: '1000' } }],
      ['PATCH', p, { student_limits: { max_session_s: 0 } }],
      ['PATCH', p, { student_limits: 3 }],
      ['PATCH', p, { reach: { everything: true } }],
      ['PATCH', p, { reach: { tas_open_apps: 'yes' } }],
      ['PATCH', p, { allowed_images: ['busybox'] }],
      ['PATCH', p, { idle_timeout_s: 0 }],
      ['PATCH', p, { data_policy: 'shred' }],
      ['PATCH', p, { code: 'NEW' }],
      ['POST', `${p}/members`, { role: 'student' }],
      ['POST', `${p}/members`, { username: 'cs3', user_id: ids.cs3 }],
      ['POST', `${p}/members`, { username: 'cs3', role: 'owner' }],
      ['PATCH', `${p}/members/${ids.cs1}`, {}],
      ['PATCH', `${p}/members/${ids.cs1}`, { state: 'gone' }],
      ['PUT', `${p}/allocation`, { slices: -1 }],
      ['PUT', `${p}/allocation`, { gpu_hours_week: 'many' }],
      ['PUT', `${p}/allocation`, { pool: 'a100', slices: 1, extra: true }],
    ];
    for (const [m, path, b] of cases) {
      const c = m === 'PUT' ? admin : t1;
      const r = await c.req(m, path, b);
      assert.equal(r.status, 400, `${m} ${path} ${JSON.stringify(b)}: ${r.text}`);
      assertErrorShape(r.json, 'invalid');
    }
    const wrongType = await t1.req('PATCH', p, 'term=x', { 'content-type': 'application/x-www-form-urlencoded' });
    assert.equal(wrongType.status, 415);
    const big = await t1.patch(p, { description: 'x'.repeat(70000) });
    assert.equal(big.status, 413);
    assert.equal((await t1.patch(`${p}/members/abc`, { state: 'active' })).status, 404);
  });

  it('lets an admin hand a class to another teacher; refuses a suspended member joining', async () => {
    const stat = (await admin.get('/api/v1/classes')).json.items.find((c) => c.name === 'Statistics');
    let r = await admin.patch(`/api/v1/classes/${stat.id}`, { teacher_id: ids.cs1 });
    assert.equal(r.status, 400, 'a student cannot own a class');
    r = await admin.patch(`/api/v1/classes/${stat.id}`, { teacher_id: ids.ct1 });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.teacher.username, 'ct1');
    assert.equal((await t1.get(`/api/v1/classes/${stat.id}`)).json.my_role, 'owner');
    assert.equal((await t2.get(`/api/v1/classes/${stat.id}`)).status, 404, 'the former owner is out');
    // a suspended member cannot come back through the invite
    const code = (await t1.post(`/api/v1/classes/${stat.id}/invite`, {})).json.code;
    assert.equal((await t1.post(`/api/v1/classes/${stat.id}/members`, { username: 'cs3' })).status, 201);
    assert.equal((await t1.patch(`/api/v1/classes/${stat.id}/members/${ids.cs3}`, { state: 'suspended' })).status, 200);
    r = await s3.post('/api/v1/classes/join', { code });
    assert.equal(r.status, 403, r.text);
    assert.match(r.json.error.message, /suspended/);
    assert.equal((await s3.get(`/api/v1/classes/${stat.id}`)).status, 404);
  });

  it('deletes: the owner only an empty class, an admin any', async () => {
    const p = `/api/v1/classes/${cls.id}`;
    let r = await t2.del(p);
    assert.equal(r.status, 403, 'a co-teacher does not delete');
    r = await t1.del(p);
    assert.equal(r.status, 409, r.text);
    assert.match(r.json.error.message, /has members or work/);
    const empty = (await t1.post('/api/v1/classes', { name: 'Empty' })).json;
    r = await t1.del(`/api/v1/classes/${empty.id}`);
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.name, 'Empty');
    r = await admin.del(p);
    assert.equal(r.status, 200, r.text);
    assert.equal((await t1.get(p)).status, 404);
    assert.equal(sql(srv, `SELECT count(*) FROM class_members WHERE class_id = ${cls.id}`), '0');
    assert.ok(await eventually(() => sql(srv, "SELECT count(*) FROM audit_log WHERE action = 'class.delete'") === '3'));
  });
});
