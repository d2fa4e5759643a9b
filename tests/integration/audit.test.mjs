// audit.test.mjs — the audit log (/api/v1/audit, 0035_audit.sql):
//  - every category is recorded with its actor, target and address: logins
//    and failures, logout, password changes, role/quota/registry/image/node/
//    pool/settings changes, class changes and members, file deletions in
//    the shared and a class area;
//  - the system's own actions, driven for real: an idle stop and a lifetime
//    stop (short idle policies, --reclaim-interval=1), a reconciler removal
//    of an orphan container and a lost mark of a vanished one, a release
//    at the quota's maximum runtime by the scheduler, a job stopped at its
//    own maximum runtime — actor
//    "system" (actor_id null) with the reason;
//  - filters (from/to, actor, action exact and prefix, target exact and
//    prefix), cursor pages, CSV (header, quoting, formula defused);
//  - tenants: admins read all, teachers only their classes' entries,
//    students and researchers 403, read-only tokens read, an expired
//    session 401, bad input 400 with the JSON error shape;
//  - append-only: the trigger refuses UPDATE/DELETE/TRUNCATE even for the
//    owner, and an application role given gc_app_grant() gets "permission
//    denied" (its privileges shown by \dp).
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { Client, startServer } from '../lib/server.mjs';
import { stopClean, assertErrorShape, call } from '../lib/itest.mjs';
import { world, mkUser, create, waitState, cleanup, sql, eventually, docker, clusterId, ours, env } from './instances_lib.mjs';

const q = (o) => '?' + new URLSearchParams(o).toString();

describe('audit log', () => {
  let w, tara, tom, sam, rita, cls, cls2, classWork;
  const entries = async (c, o = {}) => {
    const r = await c.get('/api/v1/audit' + q({ limit: '500', ...o }));
    assert.equal(r.status, 200, r.text);
    return r.json.items;
  };
  const one = async (o) => {
    let items = [];
    const ok = await eventually(async () => (items = await entries(w.admin, o)).length > 0, 20000, 200);
    assert.ok(ok, `no audit entry for ${JSON.stringify(o)}`);
    return items[0];
  };

  before(async () => {
    w = await world({ node2: false, args: ['--reclaim-interval=1', '--idle-cpu-percent=15'] });
    tara = await mkUser(w, 'tara', 'teacher');
    tom = await mkUser(w, 'tom', 'teacher');
    sam = await mkUser(w, 'sam');
    rita = await mkUser(w, 'rita', 'researcher');
  });
  after(async () => { try { await stopClean(w?.srv); } finally { cleanup(w?.srv); } });

  it('records logins, failures, logout and password changes with the address', async () => {
    const bad = new Client(w.srv.base);
    assert.equal((await bad.login('tara', 'wrong-password-1')).status, 401);
    const f = await one({ action: 'login.failure', target: 'tara' });
    assert.equal(f.actor_id, null);
    assert.equal(f.ip, '127.0.0.1');
    const s = await one({ action: 'login.success', actor: 'tara' });
    assert.equal(s.actor_id, tara.id);
    assert.equal(s.ip, '127.0.0.1');
    const c = new Client(w.srv.base);
    assert.equal((await c.login('sam', 'sam-pass-1')).status, 200);
    assert.equal((await c.post('/api/v1/me/password', { current_password: 'sam-pass-1', new_password: 'sam-pass-2-longer' })).status, 204);
    assert.equal((await c.post('/api/v1/auth/logout')).status, 204);
    // the change ended sam's other sessions
    assert.equal((await sam.c.login('sam', 'sam-pass-2-longer')).status, 200);
    assert.equal((await one({ action: 'password.change', actor: 'sam' })).target, 'sam');
    assert.equal((await one({ action: 'logout', actor: 'sam' })).ip, '127.0.0.1');
    const pat = await mkUser(w, 'pat');
    assert.equal((await w.admin.post(`/api/v1/users/${pat.id}/password`, { password: 'pat-pass-new-1' })).status, 200);
    assert.equal((await one({ action: 'password.reset', actor: 'admin' })).target, 'pat');
  });

  it('records role, quota, registry, image, node, pool and settings changes', async () => {
    const u = await w.admin.post('/api/v1/users', { username: 'uma', role: 'student', password: 'uma-pass-1' });
    assert.equal(u.status, 201);
    assert.equal((await w.admin.patch(`/api/v1/users/${u.json.user.id}`, { role: 'researcher' })).status, 200);
    const role = await one({ action: 'user.role', target: 'uma' });
    assert.equal(role.actor, 'admin');
    assert.equal(role.details.role, 'researcher');
    // the world's set-up: registry, image, node, pool, default quotas
    for (const a of ['registry.create', 'image.create', 'node.create', 'pool.create', 'pool.gpus', 'quota_default.set']) {
      const e = await one({ action: a });
      assert.equal(e.actor, 'admin', a);
      assert.equal(e.ip, '127.0.0.1', a);
      assert.notEqual(e.target, '', a);
    }
    const st = await w.admin.req('PUT', '/api/v1/settings/tensorboard_image', { value: w.image.reference });
    assert.equal(st.status, 200, st.text);
    assert.equal((await one({ action: 'setting.set' })).target, 'tensorboard_image');
  });

  it('records class changes, members and file deletions in the shared and class areas', async () => {
    cls = (await tara.c.post('/api/v1/classes', { name: 'Audit 101' })).json;
    assert.ok(cls?.id);
    cls2 = (await tom.c.post('/api/v1/classes', { name: 'Other 202' })).json;
    assert.ok(cls2?.id);
    const cr = await one({ action: 'class.create', actor: 'tara' });
    assert.equal(cr.class_id, cls.id);
    assert.equal(cr.target, `class:${cls.id}`);
    assert.equal(cr.details.name, 'Audit 101');
    assert.equal((await tara.c.post(`/api/v1/classes/${cls.id}/members`, { username: 'sam' })).status, 201);
    assert.equal((await tom.c.post(`/api/v1/classes/${cls2.id}/members`, { username: 'sam' })).status, 201);
    const m = await one({ action: 'class.member.add', actor: 'tara' });
    assert.equal(m.target, `class:${cls.id}`);
    assert.equal(m.class_id, cls.id);
    assert.equal((await tara.c.patch(`/api/v1/classes/${cls.id}`, { description: 'logs' })).status, 200);
    assert.equal((await one({ action: 'class.update' })).class_id, cls.id);
    // files: a class area and the shared area
    const oct = { 'content-type': 'application/octet-stream' };
    assert.equal((await tara.c.req('PUT', `/api/v1/files/class:${cls.id}/lab.txt`, 'lab', oct)).status, 201);
    assert.equal((await tara.c.del(`/api/v1/files/class:${cls.id}/lab.txt`)).status, 200);
    const fd = await one({ action: 'file.delete', actor: 'tara' });
    assert.equal(fd.target, `files:class:${cls.id}/lab.txt`);
    assert.equal(fd.class_id, cls.id);
    assert.equal(fd.ip, '127.0.0.1');
    assert.equal((await w.admin.req('PUT', '/api/v1/files/shared/notes.txt', 'n', oct)).status, 201);
    assert.equal((await w.admin.del('/api/v1/files/shared/notes.txt')).status, 200);
    assert.equal((await one({ action: 'file.delete', actor: 'admin' })).target, 'files:shared/notes.txt');
    // one's own home is one's own business
    assert.equal((await sam.c.req('PUT', '/api/v1/files/home/mine.txt', 'm', oct)).status, 201);
    assert.equal((await sam.c.del('/api/v1/files/home/mine.txt')).status, 200);
    assert.equal((await entries(w.admin, { action: 'file.delete', actor: 'sam' })).length, 0);
  });

  it('records the system\'s idle and lifetime stops with the reason', async () => {
    assert.equal((await w.admin.req('PUT', '/api/v1/idle-policies/student', { idle_seconds: 2, warn_seconds: 1 })).status, 200);
    assert.equal((await w.admin.req('PUT', '/api/v1/idle-policies/researcher', { idle_seconds: null, warn_seconds: 0, max_lifetime_seconds: 3 })).status, 200);
    const idle = await create(sam.c, w, { name: 'idle', pool: 'a100', slices: 1, cmd: ['sleep', '3600'] });
    const long = await create(rita.c, w, { name: 'long', pool: 'a100', slices: 1, cmd: ['sh', '-c', 'while :; do :; done'] });
    await waitState(sam.c, idle.id, 'stopped', 30000);
    await waitState(rita.c, long.id, 'stopped', 30000);
    const cr = await one({ action: 'instance.create', target: `instance:${idle.id}` });
    assert.equal(cr.actor, 'sam');
    const i = await one({ action: 'instance.idle_stop', target: `instance:${idle.id}` });
    assert.equal(i.actor, 'system');
    assert.equal(i.actor_id, null);
    assert.match(i.details.reason, /idle for 2 s/);
    const l = await one({ action: 'instance.lifetime_stop', target: `instance:${long.id}` });
    assert.equal(l.actor, 'system');
    assert.match(l.details.reason, /maximum lifetime of 3 s/);
    sql(w.srv, "UPDATE idle_policies SET idle_seconds = NULL, max_lifetime_seconds = NULL");
    // sam's instance becomes class work (as class_ops.test does): what sam
    // does to it is then about tara's class
    sql(w.srv, `UPDATE instances SET class_id = ${cls.id} WHERE id = ${idle.id}`);
    classWork = idle.id;
    for (const [c, x] of [[sam.c, idle], [rita.c, long]]) {
      assert.equal((await c.del(`/api/v1/instances/${x.id}`)).status, 202);
      await waitState(c, x.id, 'deleted');
    }
  });

  it('records the scheduler\'s release at the maximum runtime', async () => {
    assert.equal((await w.admin.req('PUT', '/api/v1/quotas', { user_id: sam.id, pool: 'a100', max_runtime_s: 1 })).status, 200);
    assert.equal((await one({ action: 'quota.set', target: 'sam' })).actor, 'admin');
    const a = await sam.c.post('/api/v1/allocations', { lease_s: 3600, pool: 'a100', slices: 1 });
    assert.equal(a.status, 202, a.text);
    const e = await one({ action: 'allocation.max_runtime', target: `allocation:${a.json.id}` });
    assert.equal(e.actor, 'system');
    assert.equal(e.actor_id, null);
    assert.match(e.details.reason, /reached the maximum runtime of 1 s/);
    assert.equal(e.details.owner, 'sam');
    assert.equal((await w.admin.req('PUT', '/api/v1/quotas', { user_id: sam.id, pool: 'a100', max_runtime_s: null })).status, 200);
  });

  it('records a job stopped at its maximum runtime', async () => {
    const r = await rita.c.post('/api/v1/jobs', { name: 'too-long', image_id: w.image.id, command: ['sleep', '60'], cpu_millis: 200, mem_mib: 64, max_runtime_s: 2 });
    assert.equal(r.status, 201, r.text);
    assert.equal((await one({ action: 'job.submit', target: `job:${r.json.id}` })).actor, 'rita');
    const e = await one({ action: 'job.max_runtime', target: `job:${r.json.id}` });
    assert.equal(e.actor, 'system');
    assert.equal(e.details.reason, 'exceeded its maximum runtime of 2 s');
    assert.ok(await eventually(async () => (await rita.c.get(`/api/v1/jobs/${r.json.id}`)).json.state === 'failed', 20000));
  });

  it('records the reconciler\'s removals and lost marks', async () => {
    const url = env.GPUCLOUD_WORLD_DOCKER1;
    const cl = clusterId(w.srv);
    const orphan = `gc-${cl.slice(0, 8)}-inst-987654`;
    docker(url, 'create', '--name', orphan, '--label', `gpucloud.cluster=${cl}`, '--label', 'gpucloud.kind=instance', '--label', 'gpucloud.id=987654', env.GPUCLOUD_WORLD_IMAGE, 'sleep', '60');
    assert.ok(await eventually(() => !ours(w.srv, url).some((c) => c.name === orphan), 15000), 'the orphan was removed');
    const rm = await one({ action: 'reconcile.remove', target: `container:${orphan}` });
    assert.equal(rm.actor, 'system');
    assert.match(rm.details.reason, /removed from node 'node1': no such instance/);
    const inst = await create(rita.c, w, { name: 'gone', cmd: ['sleep', '3600'] });
    await waitState(rita.c, inst.id, 'running');
    docker(url, 'rm', '-f', `gc-${cl.slice(0, 8)}-inst-${inst.id}`);
    await waitState(rita.c, inst.id, 'lost', 15000);
    const lost = await one({ action: 'instance.lost', target: `instance:${inst.id}` });
    assert.equal(lost.actor, 'system');
    assert.match(lost.details.reason, /vanished from node 'node1'/);
    // "system" is an actor filter like any other
    const sys = await entries(w.admin, { actor: 'system' });
    assert.ok(sys.length >= 4 && sys.every((e) => e.actor === 'system' && e.actor_id === null));
  });

  it('filters by time, actor, action and target, in pages', async () => {
    const all = await entries(w.admin);
    assert.ok(all.length > 20);
    for (let k = 1; k < all.length; k++) assert.ok(all[k - 1].id > all[k].id, 'newest first');
    const cls1 = await entries(w.admin, { action: 'class.' });
    assert.ok(cls1.length >= 3 && cls1.every((e) => e.action.startsWith('class.')));
    const mem = await entries(w.admin, { action: 'class.mem*' });
    assert.ok(mem.length >= 2 && mem.every((e) => e.action.startsWith('class.mem')));
    assert.ok((await entries(w.admin, { action: 'login' })).every((e) => /^login\./.test(e.action)));
    assert.equal((await entries(w.admin, { action: 'class_mem*' })).length, 0, 'no LIKE wildcards');
    const t = await entries(w.admin, { target: `files:class:${cls.id}/*` });
    assert.deepEqual(t.map((e) => e.action), ['file.delete']);
    assert.deepEqual((await entries(w.admin, { target: `class:${cls.id}` })).map((e) => e.target).filter((x) => x !== `class:${cls.id}`), []);
    assert.ok((await entries(w.admin, { actor: 'tara' })).every((e) => e.actor === 'tara'));
    // time: a window that ends before the first entry is empty
    const first = all[all.length - 1];
    assert.equal((await entries(w.admin, { to: '2000-01-01' })).length, 0);
    const mid = all[Math.floor(all.length / 2)];
    const after = await entries(w.admin, { from: mid.at });
    assert.ok(after.every((e) => e.at >= mid.at) && after.some((e) => e.id === mid.id));
    const before2 = await entries(w.admin, { to: mid.at, from: first.at });
    assert.ok(before2.length > 0 && before2.every((e) => e.at < mid.at && e.at >= first.at));
    // pages
    const p1 = await w.admin.get('/api/v1/audit?limit=3&actor=admin');
    assert.equal(p1.json.items.length, 3);
    const p2 = await w.admin.get(`/api/v1/audit?limit=3&actor=admin&cursor=${p1.json.next_cursor}`);
    assert.ok(p2.json.items[0].id < p1.json.items[2].id);
  });

  it('exports CSV with a header, quoting and formulas defused', async () => {
    const bad = new Client(w.srv.base);
    assert.equal((await bad.login('=1+2', 'whatever-password')).status, 401);
    await one({ action: 'login.failure', target: '=1+2' });
    const r = await w.admin.get('/api/v1/audit?format=csv&action=login');
    assert.equal(r.status, 200);
    assert.match(r.headers.get('content-type'), /^text\/csv/);
    assert.match(r.headers.get('content-disposition'), /attachment; filename="audit.csv"/);
    const lines = r.text.trim().split('\r\n');
    assert.equal(lines[0], 'id,at,actor,action,target,ip,class_id,request_id,details');
    assert.ok(lines.length > 3);
    assert.ok(lines.slice(1).every((l) => /^\d+,\d{4}-/.test(l)));
    assert.ok(lines.some((l) => l.includes(`,login.failure,"'=1+2",127.0.0.1,`)), 'the formula is defused');
    // limit and the next export's start
    const two = await w.admin.get('/api/v1/audit?format=csv&limit=2');
    assert.equal(two.text.trim().split('\r\n').length, 3);
    assert.match(two.headers.get('x-next-cursor'), /^\d+$/);
  });

  it('teachers read only their classes\' entries; students and researchers 403', async () => {
    const mine = await entries(tara.c);
    assert.ok(mine.length >= 4);
    assert.ok(mine.every((e) => e.class_id === cls.id), JSON.stringify(mine.map((e) => [e.action, e.class_id])));
    for (const a of ['class.create', 'class.member.add', 'class.update', 'file.delete'])
      assert.ok(mine.some((e) => e.action === a), a);
    const work = mine.find((e) => e.action === 'instance.delete');
    assert.equal(work?.target, `instance:${classWork}`, 'a student\'s act on class work');
    assert.equal(work.actor, 'sam');
    assert.ok(!mine.some((e) => e.action === 'instance.create'), 'created before it was class work');
    const his = await entries(tom.c);
    assert.ok(his.length >= 2 && his.every((e) => e.class_id === cls2.id));
    assert.equal((await entries(tara.c, { target: `class:${cls2.id}` })).length, 0);
    assert.equal((await entries(tara.c, { class_id: String(cls2.id) })).length, 0);
    const byClass = await entries(w.admin, { class_id: String(cls2.id) });
    assert.ok(byClass.length >= 2 && byClass.every((e) => e.class_id === cls2.id));
    const csv = await tara.c.get('/api/v1/audit?format=csv');
    assert.equal(csv.status, 200);
    assert.ok(!csv.text.includes('login.'), 'no logins in a teacher\'s export');
    for (const c of [sam.c, rita.c]) {
      const r = await c.get('/api/v1/audit');
      assert.equal(r.status, 403);
      assertErrorShape(r.json, 'forbidden');
    }
    // a read-only token reads
    const tok = await w.admin.post('/api/v1/tokens', { name: 'auditor', scopes: ['read'] });
    assert.equal(tok.status, 201, tok.text);
    const ro = await call(w.srv.base, 'GET', '/api/v1/audit?limit=1', { bearer: tok.json.token });
    assert.equal(ro.status, 200);
    assert.equal(ro.json.items.length, 1);
    // an expired session
    const t2 = new Client(w.srv.base);
    assert.equal((await t2.login('tom', 'tom-pass-1')).status, 200);
    sql(w.srv, `UPDATE sessions SET created_at = now() - interval '2 hours', expires_at = now() - interval '1 second' WHERE user_id = ${tom.id}`);
    const ex = await t2.get('/api/v1/audit');
    assert.equal(ex.status, 401);
    assertErrorShape(ex.json, 'unauthorized');
    assert.equal((await call(w.srv.base, 'GET', '/api/v1/audit')).status, 401);
  });

  it('answers bad input with 400 and the JSON error', async () => {
    for (const p of ['from=yesterday', 'to=2026-13-01', 'from=2026-02-30', 'to=2026-12-01T25:00:00Z', 'from=2026-12-01T08:00:00+0', 'format=xml', 'limit=0', 'limit=501', 'cursor=abc',
      `target=${'x'.repeat(400)}`, 'action=%ff', 'class_id=0', 'class_id=x', 'format=%ff', 'format=']) {
      const r = await w.admin.get('/api/v1/audit?' + p);
      assert.equal(r.status, 400, `${p}: ${r.text}`);
      assert.ok(r.json?.error?.message, `${p}: ${r.text}`);
      assertErrorShape(r.json, 'invalid');
    }
    for (const p of ['from=2026-12-01', 'from=2026-12-01T08:00Z', 'to=2026-12-01T08:00:00.123456%2B08:00', 'from=2024-02-29 10:00:00', 'format=json'])
      assert.equal((await w.admin.get('/api/v1/audit?' + p)).status, 200, p);
  });

  it('is append-only: the trigger refuses even the owner; the app role lacks the grant', async () => {
    const n = sql(w.srv, 'SELECT count(*) FROM audit_log');
    for (const stmt of ['UPDATE audit_log SET target = \'x\'', 'DELETE FROM audit_log', 'TRUNCATE audit_log']) {
      const r = spawnSync('psql', ['-qAtX', '-v', 'ON_ERROR_STOP=1', w.srv.db.url, '-c', stmt], { encoding: 'utf8' });
      assert.notEqual(r.status, 0, stmt);
      assert.match(r.stderr, /the audit log is append-only/, stmt);
    }
    assert.equal(sql(w.srv, 'SELECT count(*) FROM audit_log'), n);
    // a user purged for real: the foreign key's SET NULL still works
    const id = sql(w.srv, "SELECT id FROM users WHERE username = 'uma'");
    sql(w.srv, `INSERT INTO audit_log (actor_id, actor_name, action, target) VALUES (${id}, 'uma', 'test.purge', 'user:uma')`);
    sql(w.srv, `DELETE FROM users WHERE id = ${id}`);
    assert.equal(sql(w.srv, "SELECT COALESCE(actor_id::text, 'null') || ' ' || actor_name FROM audit_log WHERE action = 'test.purge'"), 'null uma');
    // the application role of a two-role site
    const role = `gct_app_${process.pid}`;
    sql(w.srv, `CREATE ROLE ${role} LOGIN`);
    try {
      assert.equal(sql(w.srv, `SELECT gc_app_grant('${role}')`), 'ra');
      const u = new URL(w.srv.db.url);
      u.searchParams.set('user', role);
      const as = (stmt) => spawnSync('psql', ['-qAtX', '-v', 'ON_ERROR_STOP=1', u.toString(), '-c', stmt], { encoding: 'utf8' });
      for (const stmt of ['UPDATE audit_log SET target = \'x\'', 'DELETE FROM audit_log', 'TRUNCATE audit_log']) {
        const r = as(stmt);
        assert.notEqual(r.status, 0, stmt);
        assert.match(r.stderr, /permission denied for table audit_log/, stmt);
      }
      const ins = as("INSERT INTO audit_log (actor_name, action, target) VALUES ('app', 'test.app', 'x') RETURNING action");
      assert.equal(ins.status, 0, ins.stderr);
      assert.equal(ins.stdout.trim(), 'test.app');
      assert.equal(as("UPDATE users SET display_name = 'ok' WHERE username = 'sam'").status, 0, 'the rest of the schema is writable');
      const dp = execFileSync('psql', ['-X', w.srv.db.url, '-c', '\\dp audit_log'], { encoding: 'utf8' });
      console.log(dp);
      assert.match(dp, new RegExp(`${role}=ar/`));
      assert.ok(!/=[a-zA-Z]*[wdD][a-zA-Z]*\/[^\n]*$/m.test(dp.split('\n').filter((l) => l.includes(role)).join('\n')));
      // the server itself runs as the application role on the migrated database
      const app = await startServer({ db: { name: w.srv.db.name, url: u.toString() } });
      try {
        const c = new Client(app.base);
        assert.equal((await c.login('tara', 'tara-pass-1')).status, 200);
        assert.equal((await c.get('/api/v1/audit?limit=1')).status, 200);
        assert.ok(await eventually(() => sql(w.srv, `SELECT count(*) FROM audit_log WHERE action = 'login.success' AND actor_name = 'tara'`) === '2', 5000));
        assert.doesNotMatch(app.log(), /permission denied/);
      } finally {
        await app.stop();
      }
    } finally {
      sql(w.srv, `DROP OWNED BY ${role}; DROP ROLE ${role}`);
    }
  });
});
