// class_ops.test.mjs — teacher reach over a class's work (issue 14, part D):
// the class's work list, a teacher's stop and extend of a student's
// instance, notices (and GET /notices for all my classes), the dashboard and
// its CSV, per-class idle and lifetime policies, end of term — each with the
// tenant checks (own vs another teacher's class 404, a student on a
// classmate's work, a TA as far as the reach flags go, expired sessions,
// read-only tokens, CSRF/Origin, bad input); and the proxy's reach: a
// teacher opens a student's app through the real proxy to a real container,
// every such open in the audit log, nobody else gains anything.
//
// Classes and their rosters are rows made by SQL here (part A's API is
// another branch); class work is the student's own instance with class_id set.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readFileSync, readdirSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stopClean, assertErrorShape, call } from '../lib/itest.mjs';
import { Client } from '../lib/server.mjs';
import { world, mkUser, create, waitState, cleanup, sql, eventually, sleep } from './instances_lib.mjs';

const APP_CMD = ['sh', '-c', 'echo "hello from $USER" > /tmp/index.html; exec httpd -f -p 8080 -h /tmp'];

describe('class operations (teacher reach, notices, dashboard, policies, end of term)', () => {
  let w, tina, otto, tara, sam, sue, rex, cls, other, inst;
  const path = (p) => `/api/v1/classes/${cls}${p}`;

  before(async () => {
    w = await world({ node2: false, args: ['--reclaim-interval=1', '--idle-cpu-percent=50'] });
    tina = await mkUser(w, 'tina', 'teacher'); // owner of the class
    otto = await mkUser(w, 'otto', 'teacher'); // owner of another class
    tara = await mkUser(w, 'tara', 'student'); // TA of the class
    sam = await mkUser(w, 'sam');              // student
    sue = await mkUser(w, 'sue');              // student (classmate)
    rex = await mkUser(w, 'rex');              // no class
    cls = sql(w.srv, `INSERT INTO classes (name, teacher_id, code, pool_id, alloc_slices, student_slices,
      student_gpu_hours_week) VALUES ('Deep Learning', ${tina.id}, 'DL1', ${w.pool.id}, 4, 1, 2) RETURNING id`);
    other = sql(w.srv, `INSERT INTO classes (name, teacher_id, code) VALUES ('Other', ${otto.id}, 'OT1') RETURNING id`);
    sql(w.srv, `INSERT INTO class_members (class_id, user_id, role) VALUES (${cls}, ${tara.id}, 'ta'),
      (${cls}, ${sam.id}, 'student'), (${cls}, ${sue.id}, 'student'), (${other}, ${rex.id}, 'student')`);
    // sam's instance in the class's context: the world image serves /tmp on its app port
    inst = await create(sam.c, w, { name: 'lab1', pool: 'a100', slices: 1, cmd: APP_CMD });
    sql(w.srv, `UPDATE instances SET class_id = ${cls} WHERE id = ${inst.id};
      UPDATE alloc_requests SET class_id = ${cls} WHERE owner_kind = 'instance' AND owner_id = '${inst.id}'`);
    await waitState(sam.c, inst.id, 'running', 60000);
  });
  after(async () => { try { await stopClean(w?.srv); } finally { cleanup(w?.srv); } });

  it('lists the class\'s work to its staff only', async () => {
    const r = await tina.c.get(path('/work'));
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.instances.length, 1);
    const i = r.json.instances[0];
    assert.equal(i.id, inst.id);
    assert.equal(i.user.username, 'sam');
    assert.equal(i.state, 'running');
    assert.equal(i.routes.length, 1);
    assert.match(i.routes[0].url, /^http:\/\/[a-z0-9]+\.localhost:\d+\/$/);
    assert.deepEqual(r.json.jobs, []);
    // a finished class job of sam's, and one outside the class
    sql(w.srv, `INSERT INTO jobs (user_id, name, command, state, directory, class_id, finished_at) VALUES
      (${sam.id}, 'train1', ARRAY['true'], 'succeeded', 'home/sam/jobs/1-train1', ${cls}, now()),
      (${sam.id}, 'private', ARRAY['true'], 'succeeded', 'home/sam/jobs/2-private', NULL, now())`);
    const j = (await tina.c.get(path('/work'))).json.jobs;
    assert.deepEqual(j.map((x) => [x.name, x.state, x.user.username]), [['train1', 'succeeded', 'sam']]);
    assert.equal((await tara.c.get(path('/work'))).status, 200, 'a TA reads the work');
    assert.equal((await w.admin.get(path('/work'))).status, 200, 'an admin too');
    const s = await sam.c.get(path('/work'));
    assert.equal(s.status, 403, 'a student does not see the class\'s work');
    assertErrorShape(s.json, 'forbidden');
    for (const c of [otto.c, rex.c]) {
      const o = await c.get(path('/work'));
      assert.equal(o.status, 404, 'another teacher or a stranger learns nothing');
      assertErrorShape(o.json, 'not_found');
    }
    assert.equal((await tina.c.get('/api/v1/classes/999999/work')).status, 404);
    assert.equal((await tina.c.get('/api/v1/classes/abc/work')).status, 404);
  });

  it('opens a student\'s app through the real proxy for the teacher, audit-logged; nobody else', async () => {
    const route = (await tina.c.get(path('/work'))).json.instances[0].routes[0].id;
    // the owner's own opening works as always
    const mine = await openApp(w, sam.c, route);
    assert.equal(mine.status, 200);
    assert.match(mine.text, /hello from sam/);
    // the teacher's, through the proxy to the container
    const t = await openApp(w, tina.c, route);
    assert.equal(t.status, 200, t.text);
    assert.match(t.text, /hello from sam/);
    const audit = await w.admin.get('/api/v1/audit?limit=200');
    const e = audit.json.items.find((x) => x.action === 'class.open_app');
    assert.ok(e, 'the open is in the audit log');
    assert.equal(e.actor, 'tina');
    assert.equal(e.target, String(inst.id));
    assert.equal(e.details.student, 'sam');
    // another teacher, a classmate, a TA while the flag is off: refused at the ticket
    for (const c of [otto.c, sue.c, tara.c, rex.c]) {
      const o = await mintTicket(c, route);
      assert.equal(o.status, 404, o.text);
    }
    // the TA once the class allows it
    sql(w.srv, `UPDATE classes SET tas_open_apps = true WHERE id = ${cls}`);
    const ta = await openApp(w, tara.c, route);
    assert.equal(ta.status, 200, ta.text);
    // teachers when the class forbids it: the ticket is refused and a
    // route session minted before stops working at the proxy
    sql(w.srv, `UPDATE classes SET teachers_open_apps = false, tas_open_apps = false WHERE id = ${cls}`);
    assert.equal((await mintTicket(tina.c, route)).status, 404);
    const stale = await eventually(async () => (await appGet(w, route, t.cookie)).status !== 200, 10000);
    assert.ok(stale, 'the proxy re-checks the class\'s reach');
    sql(w.srv, `UPDATE classes SET teachers_open_apps = true WHERE id = ${cls}`);
    // work outside the class's context stays the owner's alone
    sql(w.srv, `UPDATE instances SET class_id = NULL WHERE id = ${inst.id}`);
    assert.equal((await mintTicket(tina.c, route)).status, 404);
    sql(w.srv, `UPDATE instances SET class_id = ${cls} WHERE id = ${inst.id}`);
  });

  it('posts, lists and deletes notices; GET /notices gathers my classes\'', async () => {
    const bad = [[{}, 400], [{ body: '' }, 400], [{ body: '   ' }, 400], [{ body: 'x'.repeat(4001) }, 400],
      [{ body: 'hi', expires_in_s: 5 }, 400], [{ body: 'hi', extra: 1 }, 400], [{ body: 7 }, 400]];
    for (const [b, st] of bad) {
      const r = await tina.c.post(path('/notices'), b);
      assert.equal(r.status, st, JSON.stringify(b) + ' ' + r.text);
      assertErrorShape(r.json, 'invalid');
    }
    const p = await tina.c.post(path('/notices'), { body: 'Lab 3 starts at 10:00 sharp.' });
    assert.equal(p.status, 201, p.text);
    assert.equal(p.json.body, 'Lab 3 starts at 10:00 sharp.');
    assert.equal(p.json.author.username, 'tina');
    assert.equal(p.json.expires_at, null);
    const gone = await tina.c.post(path('/notices'), { body: 'old news', expires_in_s: 60 });
    assert.equal(gone.status, 201);
    sql(w.srv, `UPDATE class_notices SET expires_at = now() - interval '1 minute' WHERE id = ${gone.json.id}`);
    // who may post: teachers; not TAs, students, strangers
    assert.equal((await tara.c.post(path('/notices'), { body: 'x' })).status, 403);
    assert.equal((await sam.c.post(path('/notices'), { body: 'x' })).status, 403);
    assert.equal((await otto.c.post(path('/notices'), { body: 'x' })).status, 404);
    // members read live ones; strangers 404
    const l = await sam.c.get(path('/notices'));
    assert.equal(l.status, 200);
    assert.deepEqual(l.json.items.map((n) => n.id), [p.json.id]);
    assert.equal((await tina.c.get(path('/notices?all=1'))).json.items.length, 2, 'staff see expired ones on asking');
    assert.equal((await sam.c.get(path('/notices?all=1'))).json.items.length, 1);
    assert.equal((await rex.c.get(path('/notices'))).status, 404);
    const mine = await sue.c.get('/api/v1/notices');
    assert.equal(mine.status, 200);
    assert.equal(mine.json.items.length, 1);
    assert.deepEqual(mine.json.items[0].class, { id: Number(cls), name: 'Deep Learning', code: 'DL1' });
    assert.deepEqual((await rex.c.get('/api/v1/notices')).json.items, []);
    // delete: another teacher 404, a student 403, the teacher 204
    assert.equal((await otto.c.del(path(`/notices/${p.json.id}`))).status, 404);
    assert.equal((await sam.c.del(path(`/notices/${p.json.id}`))).status, 403);
    assert.equal((await tina.c.del(`/api/v1/classes/${other}/notices/${p.json.id}`)).status, 404);
    assert.equal((await tina.c.del(path(`/notices/${p.json.id}`))).status, 204);
    assert.equal((await tina.c.del(path(`/notices/${p.json.id}`))).status, 404);
    assert.deepEqual((await sue.c.get('/api/v1/notices')).json.items, []);
  });

  it('guards mutations: CSRF and Origin, read-only tokens, expired sessions', async () => {
    const cookie = [...tina.c.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
    const body = { body: 'csrf probe' };
    const noCsrf = await call(w.srv.base, 'POST', path('/notices'), { cookie, origin: w.srv.base, body });
    assert.equal(noCsrf.status, 403);
    const badOrigin = await call(w.srv.base, 'POST', path('/notices'), { cookie, csrf: tina.c.csrf, origin: 'http://evil.example', body });
    assert.equal(badOrigin.status, 403);
    const tok = await tina.c.post('/api/v1/tokens', { name: 'ro', scopes: ['read'] });
    assert.equal(tok.status, 201, tok.text);
    const ro = new Client(w.srv.base);
    ro.token = tok.json.token;
    for (const p of ['/work', '/dashboard', '/dashboard?format=csv', '/notices'])
      assert.equal((await ro.get(path(p))).status, 200, `a read token reads ${p}`);
    assert.equal((await ro.get('/api/v1/notices')).status, 200);
    const mutations = [['POST', '/notices', body], ['POST', `/instances/${inst.id}/stop`, {}],
      ['POST', `/instances/${inst.id}/extend`, { seconds: 600 }], ['DELETE', '/notices/1'], ['POST', '/archive', {}]];
    for (const [m, p, b] of mutations) {
      const r = await ro.req(m, path(p), b);
      assert.equal(r.status, 403, `a read token does not ${m} ${p}`);
      const nc = await call(w.srv.base, m, path(p), { cookie, origin: w.srv.base, body: b });
      assert.equal(nc.status, 403, `no CSRF token: ${m} ${p}`);
    }
    // ids that are not ids
    for (const p of ['/api/v1/classes/0/work', '/api/v1/classes/01/dashboard', `/api/v1/classes/${cls}/instances/abc/stop`,
      `/api/v1/classes/${cls}/notices/-1`])
      assert.equal((await tina.c.req(p.endsWith('stop') ? 'POST' : p.includes('notices') ? 'DELETE' : 'GET', p)).status, 404, p);
    const tmp = await mkUser(w, 'tmpteach', 'teacher');
    sql(w.srv, `UPDATE classes SET teacher_id = ${tmp.id} WHERE id = ${other}`);
    assert.equal((await tmp.c.get(`/api/v1/classes/${other}/work`)).status, 200, 'the owner, before');
    sql(w.srv, `UPDATE sessions SET created_at = now() - interval '2 days', last_seen_at = now() - interval '2 days',
      expires_at = now() - interval '1 second' WHERE user_id = ${tmp.id}`);
    for (const [m, p] of [['GET', '/work'], ['GET', '/dashboard'], ['GET', '/notices'], ['POST', '/notices'], ['POST', '/archive']])
      assert.equal((await tmp.c.req(m, `/api/v1/classes/${other}${p}`, m === 'POST' ? { body: 'x' } : undefined)).status, 401, `${m} ${p}`);
    assert.equal((await tmp.c.get('/api/v1/notices')).status, 401);
    sql(w.srv, `UPDATE classes SET teacher_id = ${otto.id} WHERE id = ${other}`);
  });

  it('extends a student\'s session as far as the class lets each role', async () => {
    for (const b of [{}, { seconds: 10 }, { seconds: 86400 * 8 }, { seconds: '60' }, { seconds: 60, x: 1 }]) {
      const r = await tina.c.post(path(`/instances/${inst.id}/extend`), b);
      assert.equal(r.status, 400, JSON.stringify(b));
    }
    assert.equal((await sue.c.post(path(`/instances/${inst.id}/extend`), { seconds: 600 })).status, 403, 'a classmate cannot');
    assert.equal((await sam.c.post(path(`/instances/${inst.id}/extend`), { seconds: 600 })).status, 403, 'nor the student through the class');
    assert.equal((await tara.c.post(path(`/instances/${inst.id}/extend`), { seconds: 600 })).status, 403, 'a TA without tas_stop_work');
    assert.equal((await otto.c.post(path(`/instances/${inst.id}/extend`), { seconds: 600 })).status, 404);
    assert.equal((await otto.c.post(`/api/v1/classes/${other}/instances/${inst.id}/extend`, { seconds: 600 })).status, 404,
      'another class\'s path does not reach it');
    const r = await tina.c.post(path(`/instances/${inst.id}/extend`), { seconds: 600 });
    assert.equal(r.status, 200, r.text);
    const until = Date.parse(r.json.extended_until);
    // from the later of now and the end of the lifetime the policy gives it
    const started = Date.parse((await sam.c.get(`/api/v1/instances/${inst.id}`)).json.started_at);
    const life = Number(sql(w.srv, `SELECT COALESCE(max_lifetime_seconds, 0) FROM gc_instance_policy(${inst.id})`));
    const base = Math.max(Date.now(), life ? started + life * 1000 : 0);
    assert.ok(until > base + 590e3 && until < base + 610e3, r.text);
    const again = await tina.c.post(path(`/instances/${inst.id}/extend`), { seconds: 600 });
    assert.ok(Date.parse(again.json.extended_until) >= until + 599e3, 'extensions add up');
    const e = (await w.admin.get('/api/v1/audit?limit=200')).json.items.find((x) => x.action === 'class.extend_instance');
    assert.equal(e.details.student, 'sam');
    assert.equal(e.details.seconds, 600);
  });

  it('shows the dashboard and its CSV to staff', async () => {
    const d = await tina.c.get(path('/dashboard'));
    assert.equal(d.status, 200, d.text);
    const s = d.json.students.find((x) => x.user.username === 'sam');
    assert.equal(s.instances.length, 1);
    assert.equal(s.slices.used, 1);
    assert.equal(s.slices.limit, 1);
    assert.equal(s.pressure, 'at_limit', 'one slice of one');
    assert.equal(s.gpu_hours_week.limit, 2);
    assert.ok(s.gpu_hours_week.allocated > 0 && s.gpu_hours_week.allocated < 1, JSON.stringify(s.gpu_hours_week));
    assert.deepEqual(s.gpu_utilization, { measured: false, value: null }, 'never a made-up number');
    assert.equal(d.json.students.length, 2);
    assert.equal(d.json.totals.students, 2);
    assert.equal(d.json.totals.slices.used, 1);
    assert.equal(d.json.totals.slices.allocation, 4);
    // sessions: one weekly that opened an hour ago, one cancelled
    sql(w.srv, `INSERT INTO class_sessions (class_id, title, starts_at, ends_at, repeat_until, slices) VALUES
      (${cls}, 'Weekly lab', now() - interval '1 hour', now() + interval '1 hour', current_date + 30, 2),
      (${cls}, 'Gone', now() + interval '1 day', now() + interval '1 day 1 hour', NULL, 1)`);
    sql(w.srv, `UPDATE class_sessions SET cancelled_at = now() WHERE title = 'Gone'`);
    const d2 = (await tina.c.get(path('/dashboard'))).json;
    assert.ok(d2.upcoming_sessions.length >= 4 && d2.upcoming_sessions.length <= 5, JSON.stringify(d2.upcoming_sessions));
    assert.equal(d2.upcoming_sessions[0].active_now, true);
    assert.equal(d2.upcoming_sessions[1].active_now, false);
    assert.ok(d2.upcoming_sessions.every((x) => x.title === 'Weekly lab'));
    const csv = await tina.c.get(path('/dashboard?format=csv'));
    assert.equal(csv.status, 200);
    assert.match(csv.headers.get('content-type'), /^text\/csv/);
    const lines = csv.text.trim().split('\n');
    assert.match(lines[0], /^"username","display_name","member_state",/);
    assert.equal(lines.length, 3);
    assert.ok(lines.some((l) => l.startsWith('"sam",')));
    assert.match(lines.find((l) => l.startsWith('"sam",')), /"not measured"/);
    assert.equal((await tina.c.get(path('/dashboard?format=xml'))).status, 400);
    assert.equal((await tara.c.get(path('/dashboard'))).status, 200);
    assert.equal((await sam.c.get(path('/dashboard'))).status, 403);
    assert.equal((await otto.c.get(path('/dashboard?format=csv'))).status, 404);
  });

  it('idle and lifetime policies per class; an extension holds them off', async () => {
    // the role's policy would never stop it; the class's does
    sql(w.srv, `UPDATE instances SET extended_until = NULL WHERE id = ${inst.id}`);
    sql(w.srv, `UPDATE idle_policies SET idle_seconds = NULL, max_lifetime_seconds = NULL, warn_seconds = 2 WHERE role = 'student'`);
    sql(w.srv, `UPDATE classes SET idle_timeout_s = 2 WHERE id = ${cls}`);
    const warned = await eventually(async () => (await sam.c.get(`/api/v1/instances/${inst.id}`)).json.idle_warning_at !== null, 20000);
    assert.ok(warned, 'warned under the class\'s idle timeout');
    // the teacher extends: the warning goes, no stop while it lasts
    assert.equal((await tina.c.post(path(`/instances/${inst.id}/extend`), { seconds: 60 })).status, 200);
    await sleep(6000);
    const g = (await sam.c.get(`/api/v1/instances/${inst.id}`)).json;
    assert.equal(g.state, 'running');
    assert.equal(g.idle_warning_at, null);
    // its lifetime: the class's, pushed by the extension until it ends
    sql(w.srv, `UPDATE classes SET idle_timeout_s = NULL, max_lifetime_s = 1 WHERE id = ${cls}`);
    await sleep(3000);
    assert.equal((await sam.c.get(`/api/v1/instances/${inst.id}`)).json.state, 'running', 'extended');
    sql(w.srv, `UPDATE instances SET extended_until = now() WHERE id = ${inst.id}`);
    const st = await waitState(sam.c, inst.id, 'stopped', 30000);
    assert.match(st.reason, /maximum lifetime of 1 s/);
    sql(w.srv, `UPDATE classes SET max_lifetime_s = NULL WHERE id = ${cls}`);
  });

  it('stops a student\'s instance: teachers, TAs when allowed; audit-logged', async () => {
    assert.equal((await sam.c.post(`/api/v1/instances/${inst.id}/start`)).status, 202);
    await waitState(sam.c, inst.id, 'running', 60000);
    assert.equal((await sue.c.post(path(`/instances/${inst.id}/stop`))).status, 403, 'a classmate cannot');
    assert.equal((await tara.c.post(path(`/instances/${inst.id}/stop`))).status, 403, 'TA, flag off');
    assert.equal((await otto.c.post(path(`/instances/${inst.id}/stop`))).status, 404);
    assert.equal((await tina.c.post(path('/instances/999999/stop'))).status, 404);
    assert.equal((await tina.c.post(path(`/instances/${inst.id}/stop`), { now: true })).status, 400);
    sql(w.srv, `UPDATE classes SET tas_stop_work = true WHERE id = ${cls}`);
    // a suspended student's work can still be stopped by the class's staff
    sql(w.srv, `UPDATE class_members SET state = 'suspended' WHERE class_id = ${cls} AND user_id = ${sam.id}`);
    const r = await tara.c.post(path(`/instances/${inst.id}/stop`));
    assert.equal(r.status, 202, r.text);
    sql(w.srv, `UPDATE class_members SET state = 'active' WHERE class_id = ${cls} AND user_id = ${sam.id}`);
    const st = await waitState(sam.c, inst.id, 'stopped', 30000);
    assert.match(st.reason, /stopped by tara/);
    const e = (await w.admin.get('/api/v1/audit?limit=200')).json.items.find((x) => x.action === 'class.stop_instance');
    assert.equal(e.actor, 'tara');
    assert.equal(e.details.student, 'sam');
  });

  it('ends the term: stops work, cancels sessions, drops the invite, writes the CSVs, trashes the area; idempotent', async () => {
    assert.equal((await sam.c.post(`/api/v1/instances/${inst.id}/start`)).status, 202);
    await waitState(sam.c, inst.id, 'running', 60000);
    sql(w.srv, `UPDATE classes SET invite_hash = repeat('a', 64), invite_expires_at = now() + interval '1 day' WHERE id = ${cls}`);
    // something in the class area
    const area = join(w.srv.dir, 'data', 'classes', String(cls));
    mkdirSync(join(area, 'material'), { recursive: true });
    writeFileSync(join(area, 'material', 'nb.ipynb'), '{}');
    assert.equal((await tina.c.post(path('/archive'), { data_policy: 'burn' })).status, 400);
    assert.equal((await tara.c.post(path('/archive'), {})).status, 403, 'not a TA');
    assert.equal((await sam.c.post(path('/archive'), {})).status, 403);
    assert.equal((await otto.c.post(path('/archive'), {})).status, 404);
    const r = await tina.c.post(path('/archive'), { data_policy: 'remove' });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.state, 'archived');
    assert.equal(r.json.stopped.instances, 1);
    assert.ok(r.json.sessions_cancelled >= 1);
    assert.deepEqual(r.json.files, ['archive/roster.csv', 'archive/usage.csv']);
    assert.equal(r.json.files_error, undefined);
    await waitState(sam.c, inst.id, 'stopped', 30000);
    assert.equal(sql(w.srv, `SELECT state || ' ' || (invite_hash IS NULL) || ' ' || (archived_at IS NOT NULL) || ' ' || data_policy FROM classes WHERE id = ${cls}`),
      'archived true true remove');
    assert.equal(sql(w.srv, `SELECT count(*) FROM class_sessions WHERE class_id = ${cls} AND cancelled_at IS NULL`), '0');
    assert.equal(sql(w.srv, `SELECT count(*) FROM gc_class_reserved_now() WHERE class_id = ${cls}`), '0');
    {
      const roster = readFileSync(join(area, 'archive', 'roster.csv'), 'utf8').trim().split('\n');
      assert.equal(roster[0], 'username,display_name,email,role,state,joined_via,added_at');
      assert.equal(roster.length, 4, 'header, a TA, two students');
      const usage = readFileSync(join(area, 'archive', 'usage.csv'), 'utf8');
      assert.match(usage, /^username,role,gpu_hours,instances,jobs,home_bytes\n/);
      assert.match(usage, /"sam","student","0\.\d+","1","1",/);
      assert.ok(!existsSync(join(area, 'material')), 'the rest went to the trash');
      assert.deepEqual(readdirSync(area), ['archive']);
      // everything but the archive: the material, and the assignments'
      // collected/ and feedback/ folders the class area keeps
      assert.equal(sql(w.srv, `SELECT string_agg(path, ',' ORDER BY path) FROM trash_items WHERE area = 'class:${cls}'`),
        'collected,feedback,material');
    }
    const again = await tina.c.post(path('/archive'), {});
    assert.equal(again.status, 200);
    assert.equal(again.json.already, true);
    // an archived class: no notices, no reach
    assert.equal((await tina.c.post(path('/notices'), { body: 'late' })).status, 409);
    assert.equal((await tina.c.post(path(`/instances/${inst.id}/extend`), { seconds: 600 })).status, 403);
    assert.deepEqual((await sam.c.get('/api/v1/notices')).json.items, []);
    const audit = (await w.admin.get('/api/v1/audit?limit=200')).json.items.find((x) => x.action === 'class.archive');
    assert.equal(audit.actor, 'tina');
  });
});

// ---- the proxy, as a browser goes through it ----

function appReq(w, route, p, headers = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: w.srv.port, method: 'GET', path: p, agent: false,
      headers: { host: `${route}.localhost:${w.srv.port}`, ...headers } }, (res) => {
      const parts = [];
      res.on('data', (d) => parts.push(d));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, text: Buffer.concat(parts).toString() }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.setTimeout(15000, () => req.destroy(new Error('timeout')));
    req.end();
  });
}

async function mintTicket(c, route, state = randomBytes(32).toString('hex')) {
  return c.post(`/api/v1/routes/${route}/open`, { path: '/', state: createHash('sha256').update(state).digest('hex') });
}

// POST /open, the handshake on the route's origin, then GET / with the cookie.
async function openApp(w, c, route) {
  const state = randomBytes(32).toString('hex');
  const o = await mintTicket(c, route, state);
  assert.equal(o.status, 200, o.text);
  const loc = new URL(o.json.url);
  const hs = await appReq(w, route, loc.pathname + loc.search, { cookie: `gc_state=${state}` });
  assert.equal(hs.status, 302, hs.text);
  const cookie = hs.headers['set-cookie'][0].split(';')[0];
  const g = await appGet(w, route, cookie);
  return { ...g, cookie };
}

function appGet(w, route, cookie) {
  return appReq(w, route, '/', { cookie });
}
