// limits.test.mjs — the limits in force for a user as one table
// (GET /me/limits, GET /quotas/effective), removing a user's own quota
// (DELETE /quotas), and the TensorBoard image as an admin setting
// (/settings, /me features.tensorboard): where each limit comes from, what
// is in use, the largest node; who may read and change what; CSRF; bad input.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, Client, ADMIN_PASSWORD, dropDatabase } from '../lib/server.mjs';
import { sql, eventually, stopClean, call, assertErrorShape } from '../lib/itest.mjs';

const env = process.env;
const TB = 'registry.example/tensorboard:2.16';

describe('limits and settings', () => {
  let srv, admin, student, teacher, researcher, sid, other, node;

  before(async () => {
    assert.ok(env.GPUCLOUD_WORLD_DOCKER1 && env.GPUCLOUD_WORLD_NODE1_GPUS, 'run through make test (it starts the world)');
    srv = await startServer({ args: ['--node-check-interval=1', '--sched-interval-ms=200', `--tensorboard-image=${TB}`] });
    admin = new Client(srv.base);
    assert.equal((await admin.login('admin', ADMIN_PASSWORD)).status, 200);
    const gpus = env.GPUCLOUD_WORLD_NODE1_GPUS.split(',').map((d) => ({ model: 'NVIDIA A100-SXM4-80GB', memory_mib: 81920, devices: [d] }));
    node = (await admin.post('/api/v1/nodes', { name: 'node1', url: env.GPUCLOUD_WORLD_DOCKER1, gpus })).json;
    const pool = (await admin.post('/api/v1/pools', { name: 'a100' })).json;
    assert.equal((await admin.req('PUT', `/api/v1/pools/${pool.id}/gpus`, { gpu_ids: node.gpus.map((g) => g.id) })).status, 200);
    assert.equal((await admin.post('/api/v1/pools', { name: 'closed' })).status, 201);
    const closed = (await admin.get('/api/v1/pools')).json.items.find((p) => p.name === 'closed');
    assert.equal((await admin.patch(`/api/v1/pools/${closed.id}`, { roles: ['researcher'] })).status, 200);
    assert.ok(await eventually(async () => (await admin.get(`/api/v1/nodes/${node.id}`)).json.state === 'up', 10000));
    const mk = async (username, role) => (await admin.post('/api/v1/users', { username, role, password: 'user-pass-123' })).json.user.id;
    sid = await mk('lstudent', 'student');
    other = await mk('lother', 'student');
    await mk('lteacher', 'teacher');
    await mk('lresearcher', 'researcher');
    student = new Client(srv.base);
    assert.equal((await student.login('lstudent', 'user-pass-123')).status, 200);
    teacher = new Client(srv.base);
    assert.equal((await teacher.login('lteacher', 'user-pass-123')).status, 200);
    researcher = new Client(srv.base);
    assert.equal((await researcher.login('lresearcher', 'user-pass-123')).status, 200);
  });

  after(async () => { await stopClean(srv); });

  const pool = (lim, name) => lim.pools.find((p) => p.pool === name);

  it('shows a new student their role defaults: CPU for CPU-only work, no GPUs, closed pools marked', async () => {
    const r = await student.get('/api/v1/me/limits');
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.json.user, { id: sid, username: 'lstudent', display_name: '', role: 'student' });
    assert.equal(r.json.cpu_only.source, 'role');
    assert.equal(r.json.cpu_only.max_cpu_millis, 4000);
    assert.equal(r.json.cpu_only.max_mem_mib, 16384);
    assert.equal(r.json.cpu_only.max_tensorboards, 2);
    assert.equal(r.json.cpu_only.cpu_millis_in_use, 0);
    assert.deepEqual(r.json.pools.map((p) => p.pool), ['a100', 'closed']);
    const a = pool(r.json, 'a100');
    assert.equal(a.source, 'role');
    assert.equal(a.max_slices, 0, 'default deny: no GPUs until an admin opens the pool');
    assert.equal(a.open, true);
    assert.equal(pool(r.json, 'closed').open, false);
    // the largest node, as the engine reported it
    const n = (await admin.get(`/api/v1/nodes/${node.id}`)).json;
    assert.ok(n.ncpu > 0, JSON.stringify(n));
    assert.equal(a.node_cpu_millis, n.ncpu * 1000);
    assert.equal(r.json.cpu_only.node_cpu_millis, n.ncpu * 1000);
    assert.equal(pool(r.json, 'closed').node_cpu_millis, null, 'a pool without GPUs has no node');
    assert.equal(r.json.storage.source, 'default');
    assert.ok(r.json.storage.bytes_hard > 0);
  });

  it('follows the role default for the pool, then the user override, then back after DELETE /quotas', async () => {
    let r = await admin.req('PUT', '/api/v1/quotas/defaults', { role: 'student', pool: 'a100', max_slices: 1, max_cpu_millis: 2000, max_mem_mib: 8192, gpu_hours_per_week: 10 });
    assert.equal(r.status, 200, r.text);
    let a = pool((await student.get('/api/v1/me/limits')).json, 'a100');
    assert.equal(a.source, 'role_pool');
    assert.equal(a.max_slices, 1);
    assert.equal(a.gpu_hours_per_week, 10);
    r = await admin.req('PUT', '/api/v1/quotas', { user_id: sid, pool: 'a100', max_slices: 3, max_runtime_s: 3600 });
    assert.equal(r.status, 200, r.text);
    a = pool((await student.get('/api/v1/me/limits')).json, 'a100');
    assert.equal(a.source, 'user');
    assert.equal(a.max_slices, 3);
    assert.equal(a.max_cpu_millis, null, 'an override replaces the whole default: no CPU limit here');
    assert.equal(a.max_runtime_s, 3600);
    // what is in use shows up
    const al = (await student.post('/api/v1/allocations', { lease_s: 600, pool: 'a100', slices: 2, cpu_millis: 300, mem_mib: 512 })).json;
    assert.ok(await eventually(async () => (await student.get(`/api/v1/allocations/${al.id}`)).json.state === 'allocated', 10000));
    a = pool((await student.get('/api/v1/me/limits')).json, 'a100');
    assert.equal(a.slices_in_use, 2);
    assert.equal(a.cpu_millis_in_use, 300);
    assert.equal(a.mem_mib_in_use, 512);
    assert.equal((await student.del(`/api/v1/allocations/${al.id}`)).status, 200);
    // the admin sees the same for that user, and another user is untouched
    const eff = await admin.get(`/api/v1/quotas/effective?user_id=${sid}`);
    assert.equal(eff.status, 200, eff.text);
    assert.equal(pool(eff.json, 'a100').source, 'user');
    assert.equal(pool((await admin.get(`/api/v1/quotas/effective?user_id=${other}`)).json, 'a100').source, 'role_pool');
    // removing the override: the role default again, audited
    r = await admin.del(`/api/v1/quotas?user_id=${sid}&pool=a100`);
    assert.equal(r.status, 204, r.text);
    a = pool((await student.get('/api/v1/me/limits')).json, 'a100');
    assert.equal(a.source, 'role_pool');
    assert.equal(a.max_slices, 1);
    assert.equal(sql(srv, `SELECT count(*) FROM audit_log WHERE action = 'quota.delete' AND target = 'lstudent/a100'`), '1');
    r = await admin.del(`/api/v1/quotas?user_id=${sid}&pool=a100`);
    assert.equal(r.status, 404);
    assertErrorShape(r.json, 'not_found');
    // a storage override shows as the user's own
    assert.equal((await admin.req('PUT', '/api/v1/storage/quotas/home:lstudent', { bytes_hard: 1 << 30 })).status, 200);
    const st = (await student.get('/api/v1/me/limits')).json.storage;
    assert.equal(st.source, 'user');
    assert.equal(st.bytes_hard, 1 << 30);
    assert.equal(st.override.bytes_hard, 1 << 30);
    assert.equal(st.override.bytes_soft, null);
  });

  it('lets students, teachers and researchers read only their own limits and change nothing', async () => {
    for (const c of [student, teacher, researcher]) {
      for (const [m, p, b] of [
        ['GET', `/api/v1/quotas/effective?user_id=${other}`], ['GET', `/api/v1/quotas/effective?user_id=${sid}`],
        ['PUT', '/api/v1/quotas', { user_id: sid, pool: 'a100', max_slices: 8 }],
        ['DELETE', `/api/v1/quotas?user_id=${sid}&pool=a100`],
        ['PUT', '/api/v1/quotas/defaults', { role: 'student', pool: 'a100', max_slices: 8 }],
        ['DELETE', '/api/v1/quotas/defaults?role=student&pool=a100'],
        ['GET', '/api/v1/settings'], ['PUT', '/api/v1/settings/tensorboard_image', { value: '' }],
        ['DELETE', '/api/v1/settings/tensorboard_image'],
        ['GET', '/api/v1/idle-policies'], ['PUT', '/api/v1/idle-policies/student', { idle_seconds: null }],
      ]) {
        const r = await c.req(m, p, b);
        assert.equal(r.status, 403, `${m} ${p}: ${r.text}`);
        assertErrorShape(r.json, 'forbidden');
      }
    }
    assert.equal(pool((await student.get('/api/v1/me/limits')).json, 'a100').max_slices, 1, 'nothing changed');
    assert.equal((await teacher.get('/api/v1/me/limits')).json.user.role, 'teacher', 'each reads their own');
    // the pool closed to students is open to researchers
    const rl = (await researcher.get('/api/v1/me/limits')).json;
    assert.equal(rl.user.username, 'lresearcher');
    assert.equal(pool(rl, 'closed').open, true);
  });

  it('needs a live session, and a token with the write scope to change anything', async () => {
    const c = new Client(srv.base);
    assert.equal((await c.login('lother', 'user-pass-123')).status, 200);
    const cookie = [...c.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
    assert.equal((await call(srv.base, 'GET', '/api/v1/me/limits', { cookie })).status, 200);
    sql(srv, `UPDATE sessions SET created_at = now() - interval '2 hours', expires_at = now() - interval '1 second' WHERE user_id = ${other}`);
    const ex = await call(srv.base, 'GET', '/api/v1/me/limits', { cookie });
    assert.equal(ex.status, 401);
    assertErrorShape(ex.json, 'unauthorized');
    assert.equal((await call(srv.base, 'GET', '/api/v1/me/limits')).status, 401, 'anonymous');

    const ro = (await admin.post('/api/v1/tokens', { name: 'limits-reader', scopes: ['read'] })).json.token;
    const r1 = await call(srv.base, 'GET', `/api/v1/quotas/effective?user_id=${sid}`, { bearer: ro });
    assert.equal(r1.status, 200, r1.text);
    assert.equal((await call(srv.base, 'GET', '/api/v1/settings', { bearer: ro })).status, 200);
    for (const [m, p, b] of [['DELETE', `/api/v1/quotas?user_id=${sid}&pool=a100`],
      ['PUT', '/api/v1/settings/tensorboard_image', { value: '' }], ['DELETE', '/api/v1/settings/tensorboard_image']]) {
      const r = await call(srv.base, m, p, { bearer: ro, body: b });
      assert.equal(r.status, 403, `${m} ${p} with a read-only token: ${r.text}`);
    }
    const sro = (await student.post('/api/v1/tokens', { name: 'mine', scopes: ['read'] })).json.token;
    const mine = await call(srv.base, 'GET', '/api/v1/me/limits', { bearer: sro });
    assert.equal(mine.status, 200);
    assert.equal(mine.json.user.id, sid, 'a token reads its owner’s limits');
  });

  it('refuses cookie changes without the CSRF token or from another origin', async () => {
    assert.equal((await admin.req('PUT', '/api/v1/quotas', { user_id: other, pool: 'a100', max_slices: 2 })).status, 200);
    const cookie = admin.cookieHeader();
    for (const [m, p, b] of [['DELETE', `/api/v1/quotas?user_id=${other}&pool=a100`],
      ['PUT', '/api/v1/settings/tensorboard_image', { value: '' }], ['DELETE', '/api/v1/settings/tensorboard_image']]) {
      const noToken = await call(srv.base, m, p, { cookie, origin: srv.base, body: b });
      assert.equal(noToken.status, 403, `${m} ${p} without CSRF: ${noToken.text}`);
      const cross = await call(srv.base, m, p, { cookie, csrf: admin.csrf, origin: 'http://evil.example', body: b });
      assert.equal(cross.status, 403, `${m} ${p} from another origin: ${cross.text}`);
    }
    assert.equal(pool((await admin.get(`/api/v1/quotas/effective?user_id=${other}`)).json, 'a100').source, 'user', 'the override is still there');
    const s = (await admin.get('/api/v1/settings')).json.tensorboard_image;
    assert.equal(s.source, 'config', 'the setting is untouched');
  });

  it('refuses bad input with a clear 4xx', async () => {
    const bad = async (r, status, re) => {
      assert.equal(r.status, status, r.text);
      assertErrorShape(r.json);
      if (re) assert.match(r.json.error.message, re);
    };
    await bad(await admin.get('/api/v1/quotas/effective'), 400, /user_id/);
    await bad(await admin.get('/api/v1/quotas/effective?user_id=abc'), 400, /user_id/);
    await bad(await admin.get('/api/v1/quotas/effective?user_id=-3'), 400, /user_id/);
    await bad(await admin.get('/api/v1/quotas/effective?user_id=0'), 400, /user_id/);
    await bad(await admin.get('/api/v1/quotas/effective?user_id=999999'), 404, /no such user/);
    await bad(await admin.del('/api/v1/quotas?pool=a100'), 400, /user_id/);
    await bad(await admin.del(`/api/v1/quotas?user_id=${sid}`), 400, /pool/);
    await bad(await admin.del(`/api/v1/quotas?user_id=${sid}&pool=nope`), 404);
    await bad(await admin.del('/api/v1/quotas?user_id=1.5&pool=a100'), 400);
    // the writes the admin page makes
    await bad(await admin.req('PUT', '/api/v1/quotas', { user_id: sid, pool: 'a100', max_slices: -1 }), 400, /max_slices/);
    await bad(await admin.req('PUT', '/api/v1/quotas', { user_id: sid, pool: 'a100', max_mem_mib: '4096' }), 400);
    await bad(await admin.req('PUT', '/api/v1/quotas', { user_id: sid, pool: 'nope', max_slices: 1 }), 404);
    await bad(await admin.req('PUT', '/api/v1/quotas/defaults', { role: 'wizard', pool: 'a100' }), 400, /role/);
    await bad(await admin.req('PUT', '/api/v1/quotas/defaults', { role: 'student', pool: 'nope' }), 404);
    await bad(await admin.req('PUT', '/api/v1/quotas/defaults', { role: 'student', pool: 'a100', gpu_hours_per_week: -2 }), 400);
    await bad(await admin.req('PUT', '/api/v1/quotas/defaults', { role: 'student', pool: 'a100', max_runtime_s: 0 }), 400);
    await bad(await admin.req('PUT', '/api/v1/idle-policies/wizard', { idle_seconds: 60 }), 404);
    await bad(await admin.req('PUT', '/api/v1/idle-policies/student', { idle_seconds: -60 }), 400);
    await bad(await admin.req('PUT', '/api/v1/idle-policies/student', { idle_seconds: 'soon' }), 400);
    await bad(await admin.req('PUT', '/api/v1/settings/tensorboard_image', {}), 400, /value/);
    await bad(await admin.req('PUT', '/api/v1/settings/tensorboard_image', { value: 5 }), 400);
    await bad(await admin.req('PUT', '/api/v1/settings/tensorboard_image', { value: 'has space:1' }), 400, /image reference/);
    await bad(await admin.req('PUT', '/api/v1/settings/tensorboard_image', { value: 'x'.repeat(600) }), 400);
    await bad(await admin.req('PUT', '/api/v1/settings/tensorboard_image', { value: 'not/in-catalog:1' }), 400, /not in the image catalog/);
    await bad(await admin.req('PUT', '/api/v1/settings/tensorboard_image', { value: TB, extra: 1 }), 400);
    await bad(await admin.req('PUT', '/api/v1/settings/nope', { value: '' }), 404, /no such setting/);
    await bad(await admin.del('/api/v1/settings/nope'), 404);
    assert.equal((await admin.get('/api/v1/settings')).json.tensorboard_image.source, 'config', 'nothing changed');
  });

  it('keeps the TensorBoard image as an admin setting over the configuration, and /me says when it is set up', async () => {
    const features = async (c) => (await c.get('/api/v1/me')).json.features;
    let s = (await admin.get('/api/v1/settings')).json.tensorboard_image;
    assert.deepEqual({ value: s.value, source: s.source, config_value: s.config_value, in_catalog: s.in_catalog, admin_value: s.admin_value },
      { value: TB, source: 'config', config_value: TB, in_catalog: false, admin_value: null });
    assert.deepEqual(await features(student), { tensorboard: false }, 'configured but not in the catalog: not set up');
    // once the catalog has it
    const img = await admin.post('/api/v1/images', { reference: TB, display_name: 'TensorBoard', verify: false });
    assert.equal(img.status, 201, img.text);
    assert.equal((await admin.get('/api/v1/settings')).json.tensorboard_image.in_catalog, true);
    assert.deepEqual(await features(student), { tensorboard: true });
    // the admin turns it off: /me says so, and POST /tensorboards refuses
    let r = await admin.req('PUT', '/api/v1/settings/tensorboard_image', { value: '' });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.source, 'admin');
    assert.equal(r.json.value, '');
    assert.equal(r.json.updated_by, 'admin');
    assert.deepEqual(await features(student), { tensorboard: false });
    r = await student.post('/api/v1/tensorboards', { path: 'runs' });
    assert.equal(r.status, 409, r.text);
    assert.match(r.json.error.message, /TensorBoard is not set up/);
    // another catalog image as the admin's choice
    const other2 = await admin.post('/api/v1/images', { reference: 'registry.example/tb-other:1', display_name: 'TB other', verify: false });
    assert.equal(other2.status, 201, other2.text);
    r = await admin.req('PUT', '/api/v1/settings/tensorboard_image', { value: 'registry.example/tb-other:1' });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.value, 'registry.example/tb-other:1');
    assert.deepEqual(await features(student), { tensorboard: true });
    assert.equal(sql(srv, `SELECT count(*) FROM audit_log WHERE action = 'setting.set' AND target = 'tensorboard_image'`), '2');
    // reset: the configuration's again
    r = await admin.del('/api/v1/settings/tensorboard_image');
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.source, 'config');
    assert.equal(r.json.value, TB);
    assert.equal(sql(srv, `SELECT count(*) FROM audit_log WHERE action = 'setting.reset'`), '1');
  });

  it('keeps the admin’s setting across a restart with another configuration', async () => {
    assert.equal((await admin.req('PUT', '/api/v1/settings/tensorboard_image', { value: 'registry.example/tb-other:1' })).status, 200);
    const db = srv.db;
    await srv.stop({ keepDb: true });
    srv = null;
    const again = await startServer({ db, args: ['--tensorboard-image=registry.example/tb-new:3'] });
    const a = new Client(again.base);
    assert.equal((await a.login('admin', ADMIN_PASSWORD)).status, 200);
    const s = (await a.get('/api/v1/settings')).json.tensorboard_image;
    assert.equal(s.value, 'registry.example/tb-other:1');
    assert.equal(s.config_value, 'registry.example/tb-new:3', 'the new configuration is recorded');
    assert.equal((await a.del('/api/v1/settings/tensorboard_image')).json.value, 'registry.example/tb-new:3');
    await stopClean(again);
    dropDatabase(db.name);
  });
});
