// assignments.test.mjs — class storage in containers and assignments, with
// real containers on the world's engines: the class area mounted read-only
// for students and read-write for the teacher, none for outsiders and none
// after removal; release (a student who joins later gets it too; quota
// counted), collect (consistent while a student's container writes at the
// deadline), the automatic collect at the deadline, late submissions,
// returned feedback; who may do what (other teacher 404, student 403 and only
// their own row, TA reads, read-only token, CSRF, expired session, bad input).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync, chownSync, readFileSync, readdirSync, existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { world, mkUser, create, waitState, docker, cleanup, sql, sleep, eventually, env } from './instances_lib.mjs';
import { Client } from '../lib/server.mjs';

let w, t1, t2, ta, s1, s2, s3, s4, cid, root, area;
const UID_BASE = 200000;
const cls = () => `/api/v1/classes/${cid}/assignments`;

function container(id) {
  const url = env.GPUCLOUD_WORLD_DOCKER1;
  const names = docker(url, 'ps', '-a', '--filter', `label=gpucloud.cluster=${w.srv._cluster}`,
    '--filter', `label=gpucloud.id=${id}`, '--filter', 'label=gpucloud.kind=instance', '--format', '{{.Names}}');
  return names.split('\n')[0];
}

function exec(id, script) {
  try {
    return { ok: true, out: docker(env.GPUCLOUD_WORLD_DOCKER1, 'exec', container(id), 'sh', '-c', script) };
  } catch (e) {
    return { ok: false, out: String(e.stderr || e.message) };
  }
}

async function running(u) {
  const i = await create(u.c, w, { name: `box-${u.username}` });
  await waitState(u.c, i.id, 'running', 30000);
  return i.id;
}

function put(rel, text, uid) {
  const p = join(area, rel);
  mkdirSync(join(p, '..'), { recursive: true });
  writeFileSync(p, text);
  chownSync(p, uid, UID_BASE + 100000000 + Number(cid));
}

after(async () => {
  if (w) {
    cleanup(w.srv);
    await w.srv.stop();
  }
});

test('set-up: a class with a teacher, a TA and students', async () => {
  w = await world({ node2: false });
  t1 = await mkUser(w, 'teach1', 'teacher');
  t2 = await mkUser(w, 'teach2', 'teacher');
  ta = await mkUser(w, 'assist', 'student');
  s1 = await mkUser(w, 'stud1');
  s2 = await mkUser(w, 'stud2');
  s3 = await mkUser(w, 'outsider');
  s4 = await mkUser(w, 'latecomer');
  cid = sql(w.srv, `INSERT INTO classes (name, teacher_id, code) VALUES ('Deep Learning', ${t1.id}, 'DL101') RETURNING id`);
  sql(w.srv, `INSERT INTO class_members (class_id, user_id, role) VALUES (${cid}, ${s1.id}, 'student'), (${cid}, ${s2.id}, 'student'), (${cid}, ${ta.id}, 'ta')`);
  root = join(w.srv.dir, 'data');
  area = join(root, 'classes', String(cid));
  mkdirSync(area, { recursive: true });
  chownSync(area, UID_BASE + t1.id, UID_BASE + 100000000 + Number(cid));
  put('hw1/README.txt', 'do the homework\n', UID_BASE + t1.id);
  put('hw1/data/input.csv', 'a,b\n1,2\n', UID_BASE + t1.id);
});

test('class area in containers: students read, cannot write; the teacher writes; outsiders have none; removal takes it at the next start', async () => {
  const i1 = await running(s1);
  const r = exec(i1, `cat /class/DL101/hw1/README.txt && id`);
  assert.ok(r.ok, r.out);
  assert.match(r.out, /do the homework/);
  assert.match(r.out, new RegExp(`${UID_BASE + 100000000 + Number(cid)}`), 'the class group is a supplementary group');
  const wr = exec(i1, 'touch /class/DL101/hw1/mine.txt');
  assert.equal(wr.ok, false, 'a student cannot write the class area');
  assert.match(wr.out, /Read-only file system/i);

  const it = await running(t1);
  const tw = exec(it, 'echo from-teacher > /class/DL101/notes.txt && cat /class/DL101/notes.txt');
  assert.ok(tw.ok, tw.out);
  assert.ok(existsSync(join(area, 'notes.txt')));

  // a co-teacher writes too (the class group may write the area; only
  // students' and TAs' mounts are read-only)
  const co = await mkUser(w, 'coteach', 'teacher');
  sql(w.srv, `INSERT INTO class_members (class_id, user_id, role) VALUES (${cid}, ${co.id}, 'teacher')`);
  const ic = await running(co);
  const cw = exec(ic, 'echo from-co > /class/DL101/co.txt && ls /class/DL101/hw1');
  assert.ok(cw.ok, cw.out);
  await co.c.del(`/api/v1/instances/${ic}`);
  // the TA reads, cannot write
  const ita = await running(ta);
  assert.ok(exec(ita, 'cat /class/DL101/hw1/README.txt').ok);
  assert.equal(exec(ita, 'touch /class/DL101/ta.txt').ok, false);
  await ta.c.del(`/api/v1/instances/${ita}`);

  const io = await running(s3);
  const o = exec(io, 'ls /class');
  assert.equal(o.ok, false, 'an outsider has no class mount');

  // removed: the next start has none (a new container, not the old one)
  sql(w.srv, `UPDATE class_members SET state = 'suspended' WHERE class_id = ${cid} AND user_id = ${s1.id}`);
  assert.equal((await s1.c.post(`/api/v1/instances/${i1}/stop`, {})).status < 300, true);
  await waitState(s1.c, i1, 'stopped', 30000);
  assert.ok((await s1.c.post(`/api/v1/instances/${i1}/start`, {})).status < 300);
  await waitState(s1.c, i1, 'running', 30000);
  assert.equal(exec(i1, 'ls /class/DL101').ok, false, 'a suspended member loses the mount');
  sql(w.srv, `UPDATE class_members SET state = 'active' WHERE class_id = ${cid} AND user_id = ${s1.id}`);
  for (const [u, id] of [[t1, it], [s3, io]]) await u.c.del(`/api/v1/instances/${id}`);
  s1.inst = i1;
  // a training job's container reads the class area too
  const j = await s2.c.post('/api/v1/jobs', { name: 'readclass', image_id: w.image.id, cpu_millis: 200, mem_mib: 64,
    command: ['sh', '-c', 'cat /class/DL101/hw1/README.txt; touch /class/DL101/x 2>/dev/null || echo refused'] });
  assert.equal(j.status, 201, j.text);
  assert.ok(await eventually(async () => ['succeeded', 'failed'].includes((await s2.c.get(`/api/v1/jobs/${j.json.id}`)).json.state), 30000));
  const logs = (await s2.c.get(`/api/v1/jobs/${j.json.id}/logs`)).text;
  assert.match(logs, /do the homework/);
  assert.match(logs, /refused/);
});

test('assignments: create, tenant checks, bad input', async () => {
  const bad = await t1.c.post(cls(), { name: '../x', source: 'hw1' });
  assert.equal(bad.status, 400, bad.text);
  assert.equal(bad.json.error.code, 'invalid');
  assert.equal((await t1.c.post(cls(), { name: 'hw1', source: '../etc' })).status, 400);
  assert.equal((await t1.c.post(cls(), { name: 'hw1', source: 'hw1', deadline: 'tomorrow' })).status, 400);
  assert.equal((await t1.c.post(cls(), { name: 'hw1', source: 'hw1', extra: 1 })).status, 400);
  assert.equal((await t1.c.post(cls(), { name: 'hw1', source: 7 })).status, 400);
  assert.equal((await t1.c.post(cls(), '{"name": "hw1",', { 'content-type': 'application/json' })).status, 400);
  assert.equal((await t1.c.get('/api/v1/classes/abc/assignments')).status, 404);
  assert.equal((await t1.c.get(`${cls()}/abc`)).status, 404);
  assert.equal((await t1.c.get(`${cls()}/999999`)).status, 404);
  const late = await t1.c.post(cls(), { name: 'hw1', source: 'hw1', deadline: '2030-01-02T00:00:00Z', late_until: '2030-01-01T00:00:00Z' });
  assert.equal(late.status, 400, late.text);
  const a = await t1.c.post(cls(), { name: 'hw1', source: 'hw1', description: 'first homework' });
  assert.equal(a.status, 201, a.text);
  assert.equal(a.json.state, 'draft');
  assert.equal(a.json.path, 'classes/DL101/hw1');
  assert.equal((await t1.c.post(cls(), { name: 'hw1', source: 'hw1' })).status, 409);
  w.aid = a.json.id;
  // another teacher, an outsider: no such class
  assert.equal((await t2.c.get(cls())).status, 404);
  assert.equal((await t2.c.post(cls(), { name: 'x', source: 'hw1' })).status, 404);
  assert.equal((await s3.c.get(`${cls()}/${w.aid}`)).status, 404);
  assert.equal((await t2.c.post(`${cls()}/${w.aid}/release`)).status, 404);
  // a student sees no drafts and changes nothing
  assert.deepEqual((await s1.c.get(cls())).json.items, []);
  assert.equal((await s1.c.get(`${cls()}/${w.aid}`)).status, 404);
  assert.equal((await s1.c.post(cls(), { name: 'x', source: 'hw1' })).status, 403);
  assert.equal((await s1.c.post(`${cls()}/${w.aid}/release`)).status, 403);
  // the TA reads, does not change
  assert.equal((await ta.c.get(cls())).json.items.length, 1);
  assert.equal((await ta.c.post(`${cls()}/${w.aid}/release`)).status, 403);
  assert.equal((await ta.c.patch(`${cls()}/${w.aid}`, { description: 'x' })).status, 403);
  // CSRF, expired session, read-only token
  const noCsrf = await t1.c.req('POST', `${cls()}/${w.aid}/release`, undefined, { 'x-csrf-token': 'nope' });
  assert.equal(noCsrf.status, 403, noCsrf.text);
  const tok = await t1.c.post('/api/v1/tokens', { name: 'ro', scopes: ['read'] });
  assert.equal(tok.status, 201, tok.text);
  const ro = new Client(w.srv.base);
  ro.token = tok.json.token;
  assert.equal((await ro.get(cls())).status, 200);
  assert.equal((await ro.post(`${cls()}/${w.aid}/release`)).status, 403);
  const gone = await mkUser(w, 'expired', 'teacher');
  sql(w.srv, `UPDATE sessions SET created_at = now() - interval '2 hours', expires_at = now() - interval '1 second' WHERE user_id = ${gone.id}`);
  assert.equal((await gone.c.get(cls())).status, 401);
  // a source that is not there
  const nos = await t1.c.post(cls(), { name: 'ghost', source: 'nothere' });
  assert.equal((await t1.c.post(`${cls()}/${nos.json.id}/release`)).status, 409);
  // a file is not a folder to release
  assert.equal((await t1.c.post(`${cls()}/${nos.json.id}/release`)).status, 409);
  assert.equal((await t1.c.patch(`${cls()}/${nos.json.id}`, { source: 'hw1/README.txt' })).status, 200);
  assert.equal((await t1.c.post(`${cls()}/${nos.json.id}/release`)).status, 409);
  assert.equal((await t1.c.del(`${cls()}/${nos.json.id}`)).status, 204);
  // an archived class is read-only
  sql(w.srv, `UPDATE classes SET state = 'archived' WHERE id = ${cid}`);
  assert.equal((await t1.c.post(cls(), { name: 'x', source: 'hw1' })).status, 409);
  assert.equal((await t1.c.get(cls())).status, 200);
  sql(w.srv, `UPDATE classes SET state = 'active' WHERE id = ${cid}`);
  // an admin outside the class manages it; the list carries the class's head
  const adm = await w.admin.get(cls());
  assert.equal(adm.status, 200);
  assert.equal(adm.json.class.code, 'DL101');
  assert.equal(adm.json.class.my_role, null);
  assert.equal((await t1.c.get(cls())).json.class.my_role, 'owner');
});

test('release: every student gets the folder in their home, quota counted; a full quota fails that student only; a later member gets it too', async () => {
  // s2's home is full
  assert.equal((await w.admin.req('PUT', `/api/v1/storage/quotas/home:${s2.id}`, { bytes_hard: 1 })).status, 200);
  const r = await t1.c.post(`${cls()}/${w.aid}/release`);
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.state, 'released');
  assert.equal(r.json.counts.released, 1);
  assert.equal(r.json.counts.failed, 1);
  const home1 = join(root, 'home', 'stud1', 'classes', 'DL101', 'hw1');
  assert.equal(readFileSync(join(home1, 'README.txt'), 'utf8'), 'do the homework\n');
  assert.equal(readFileSync(join(home1, 'data', 'input.csv'), 'utf8'), 'a,b\n1,2\n');
  const used = Number(sql(w.srv, `SELECT bytes FROM storage_areas WHERE area = 'home:${s1.id}'`));
  assert.ok(used > 0, 'the copy counts in the student\'s usage');
  const st = await t1.c.get(`${cls()}/${w.aid}/students`);
  const row2 = st.json.items.find((x) => x.user.username === 'stud2');
  assert.equal(row2.status, 'failed');
  assert.match(row2.message, /quota/);
  // the student sees their own row only, and "mine"
  const mine = await s1.c.get(`${cls()}/${w.aid}/students`);
  assert.deepEqual(mine.json.items.map((x) => x.user.username), ['stud1']);
  const me = await s1.c.get(`${cls()}/${w.aid}`);
  assert.equal(me.json.mine.status, 'released');
  assert.equal(me.json.mine.path, 'classes/DL101/hw1');
  assert.equal(me.json.counts, null);
  // the student's container sees it in the home
  assert.match(exec(s1.inst, 'cat ~/classes/DL101/hw1/README.txt').out, /homework/);
  // quota lifted, a second release retries the failed one
  assert.equal((await w.admin.req('PUT', `/api/v1/storage/quotas/home:${s2.id}`, { bytes_hard: null })).status, 200);
  assert.equal((await t1.c.post(`${cls()}/${w.aid}/release`)).json.counts.released, 2);
  // a student who joins later gets it from the leader's catch-up
  sql(w.srv, `INSERT INTO class_members (class_id, user_id, role) VALUES (${cid}, ${s4.id}, 'student')`);
  assert.ok(await eventually(() => existsSync(join(root, 'home', 'latecomer', 'classes', 'DL101', 'hw1', 'README.txt')), 10000),
    'the latecomer got the released folder');
  const audit = sql(w.srv, `SELECT count(*) FROM audit_log WHERE action = 'assignment.release'`);
  assert.ok(Number(audit) >= 2);
});

test('collect while the student\'s container writes: one moment of the folder, later changes not in it', async () => {
  // the writer: each generation announces itself (gen-N), then replaces
  // f1..f5 in order, each whole (written aside, renamed)
  const loop = 'cd ~/classes/DL101/hw1 && g=0; while true; do g=$((g+1)); : > gen-$g;'
    + ' for i in 1 2 3 4 5; do echo $g > .f$i.tmp; mv .f$i.tmp f$i; done; done';
  docker(env.GPUCLOUD_WORLD_DOCKER1, 'exec', '-d', container(s1.inst), 'sh', '-c', loop);
  assert.ok(await eventually(() => existsSync(join(root, 'home', 'stud1', 'classes', 'DL101', 'hw1', 'f5')), 10000));
  await sleep(300);
  const t0 = Math.floor(Date.now() / 1000) - 1;
  const r = await t1.c.post(`${cls()}/${w.aid}/collect`);
  const t1s = Math.ceil(Date.now() / 1000) + 1;
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.state, 'collected');
  // the student's container was frozen for the copy, and thawed after
  const ev = docker(env.GPUCLOUD_WORLD_DOCKER1, 'events', '--since', String(t0), '--until', String(t1s),
    '--filter', `container=${container(s1.inst)}`, '--format', '{{.Action}}');
  assert.deepEqual(ev.split('\n').filter((x) => /pause/.test(x)), ['pause', 'unpause']);
  const snap = join(area, 'collected', 'hw1', 'stud1');
  const gens = [1, 2, 3, 4, 5].map((i) => Number(readFileSync(join(snap, `f${i}`), 'utf8')));
  // a point in time: f1..fk of generation g, the rest of g-1
  for (let i = 1; i < 5; i++) assert.ok(gens[i - 1] >= gens[i], `generations in order: ${gens}`);
  assert.ok(gens[0] - gens[4] <= 1, `one moment: ${gens}`);
  const marks = readdirSync(snap).filter((n) => n.startsWith('gen-')).map((n) => Number(n.slice(4)));
  const newest = Math.max(...marks);
  assert.ok(newest === gens[0] || newest === gens[0] + 1, `announced ${newest}, written ${gens}`);
  assert.equal(marks.length, newest, 'every generation up to then, none after');
  // the container runs on (unpaused) and its later files are not in the snapshot
  await sleep(500);
  const live = readdirSync(join(root, 'home', 'stud1', 'classes', 'DL101', 'hw1')).filter((n) => n.startsWith('gen-')).length;
  assert.ok(live > newest + 2, `the writer goes on after the collect (${live} > ${newest})`);
  assert.equal(readdirSync(snap).filter((n) => n.startsWith('gen-')).length, newest);
  docker(env.GPUCLOUD_WORLD_DOCKER1, 'exec', container(s1.inst), 'sh', '-c', 'pkill -f "gen-" || kill $(pgrep -f "while true") || true');
  const st = await t1.c.get(`${cls()}/${w.aid}/students`);
  const row = st.json.items.find((x) => x.user.username === 'stud1');
  assert.equal(row.status, 'collected');
  assert.ok(row.files >= 7 && row.bytes > 0, JSON.stringify(row));
  assert.ok(row.collected_at);
  assert.equal((await s1.c.post(`${cls()}/${w.aid}/collect`)).status, 403);
  assert.equal(sql(w.srv, 'SELECT count(*) FROM assignment_pauses'), '0');
  // a replica that died mid-collect leaves its container paused: the leader thaws it
  const name = container(s1.inst);
  docker(env.GPUCLOUD_WORLD_DOCKER1, 'pause', name);
  const cidFull = docker(env.GPUCLOUD_WORLD_DOCKER1, 'inspect', '-f', '{{.Id}}', name);
  sql(w.srv, `INSERT INTO assignment_pauses (node_id, container_id, paused_at) VALUES (${w.n1.id}, '${cidFull}', now() - interval '11 minutes')`);
  assert.ok(await eventually(() => docker(env.GPUCLOUD_WORLD_DOCKER1, 'inspect', '-f', '{{.State.Paused}}', name) === 'false', 15000),
    'the leader unpaused the container left paused');
});

test('deadline: collected automatically; a change after it is collected again at late_until and marked late', async () => {
  docker(env.GPUCLOUD_WORLD_DOCKER1, 'rm', '-f', container(s1.inst));
  const a = await t1.c.post(cls(), { name: 'hw2', source: 'hw1' });
  assert.equal(a.status, 201, a.text);
  const aid = a.json.id;
  assert.equal((await t1.c.post(`${cls()}/${aid}/release`)).status, 200);
  const now = Date.now();
  const dl = new Date(now + 2500).toISOString(), lu = new Date(now + 6000).toISOString();
  const p = await t1.c.patch(`${cls()}/${aid}`, { deadline: dl, late_until: lu });
  assert.equal(p.status, 200, p.text);
  assert.ok(await eventually(async () => (await t1.c.get(`${cls()}/${aid}`)).json.state === 'collected', 10000), 'collected at the deadline');
  const rows = (await t1.c.get(`${cls()}/${aid}/students`)).json.items;
  assert.ok(rows.every((x) => x.status === 'collected' && !x.late), JSON.stringify(rows));
  // stud2 hands in after the deadline
  const f = join(root, 'home', 'stud2', 'classes', 'DL101', 'hw2', 'answer.txt');
  writeFileSync(f, 'late answer\n');
  chownSync(f, UID_BASE + s2.id, UID_BASE + s2.id);
  assert.ok(await eventually(async () => (await t1.c.get(`${cls()}/${aid}`)).json.late_collected_at !== null, 15000), 'the late collect ran');
  const after2 = (await t1.c.get(`${cls()}/${aid}/students`)).json.items;
  const r2 = after2.find((x) => x.user.username === 'stud2');
  assert.equal(r2.status, 'late');
  assert.equal(r2.late, true);
  assert.equal(readFileSync(join(area, 'collected', 'hw2', 'stud2', 'answer.txt'), 'utf8'), 'late answer\n');
  assert.equal(after2.find((x) => x.user.username === 'stud1').status, 'collected');
  assert.equal((await s2.c.get(`${cls()}/${aid}`)).json.mine.late, true);
});

test('return: feedback from the class area lands in the student\'s folder', async () => {
  put('feedback/hw1/stud1/grade.txt', 'A\n', UID_BASE + t1.id);
  const r = await t1.c.post(`${cls()}/${w.aid}/return`);
  assert.equal(r.status, 200, r.text);
  assert.equal(readFileSync(join(root, 'home', 'stud1', 'classes', 'DL101', 'hw1', 'feedback', 'grade.txt'), 'utf8'), 'A\n');
  const rows = (await t1.c.get(`${cls()}/${w.aid}/students`)).json.items;
  assert.equal(rows.find((x) => x.user.username === 'stud1').status, 'returned');
  assert.notEqual(rows.find((x) => x.user.username === 'stud2').status, 'returned', 'no feedback, nothing returned');
  assert.equal((await ta.c.post(`${cls()}/${w.aid}/return`)).status, 403);
  // classmates' work and feedback stay private: 0700 in the class area
  // (students read it through the class group), 404 in the Files API
  for (const d of ['collected', 'feedback']) assert.equal(statSync(join(area, d)).mode & 0o777, 0o700);
  assert.equal((await s1.c.get(`/api/v1/files/class:${cid}/hw1`)).status, 200);
  assert.equal((await s1.c.get(`/api/v1/files/class:${cid}/collected/hw1/stud2`)).status, 404);
  assert.equal((await s1.c.get(`/api/v1/files/class:${cid}/feedback`)).status, 404);
  assert.equal((await s1.c.get(`/api/v1/files/class:${cid}/?download=1`)).status, 403);
  assert.equal((await ta.c.get(`/api/v1/files/class:${cid}/collected/hw1`)).status, 200);
  assert.equal((await t1.c.get(`/api/v1/files/class:${cid}/collected/hw1/stud2`)).status, 200);
  const audit = sql(w.srv, `SELECT string_agg(DISTINCT action, ',' ORDER BY action) FROM audit_log WHERE action LIKE 'assignment.%'`);
  for (const a of ['assignment.collect', 'assignment.create', 'assignment.release', 'assignment.return']) assert.ok(audit.includes(a), audit);
});
