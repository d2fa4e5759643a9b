// usage.test.mjs — accounting (issue 15): GET /api/v1/usage and
// /api/v1/usage/waste over a scripted history whose every figure is worked
// out by hand to the second (allocations written as the scheduler and
// gc_release_request write them, at known times in February 2026, so the
// 0034 triggers record them), across day, week and month buckets and the
// clip at from and to; utilisation from gpu_samples of a real GPU against a
// declared one's "not measurable"; deleting a pool and a user keeps the
// history and its names; the waste report from idle periods the triggers
// derive from what reclaim writes, plus one real instance reclaimed for
// idleness whose figures reconcile with its allocation row; storage-days;
// the tenant rules; bad input; CSV.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { stopClean, assertErrorShape } from '../lib/itest.mjs';
import { Client } from '../lib/server.mjs';
import { world, mkUser, create, waitState, cleanup, sql, eventually } from './instances_lib.mjs';

const FEB = 'from=2026-02-01T00:00:00Z&to=2026-03-01T00:00:00Z';
const GIB = 1024 ** 3;

describe('accounting (usage, waste, CSV, history kept)', () => {
  let w, alice, bob, carl, tina, otto, ivy, dl, ot, px, ps, node, inst1;

  const q = async (c, query) => {
    const r = await c.get(`/api/v1/usage?${query}`);
    assert.equal(r.status, 200, r.text);
    return r.json;
  };
  const row = (j, key, start) => j.rows.find((x) => x.key === key && (!start || x.period_start === start));

  before(async () => {
    w = await world({ node2: false, args: ['--reclaim-interval=1', '--idle-cpu-percent=50'] });
    alice = await mkUser(w, 'alice');
    bob = await mkUser(w, 'bob');
    carl = await mkUser(w, 'carl');
    tina = await mkUser(w, 'tina', 'teacher');
    otto = await mkUser(w, 'otto', 'teacher');
    ivy = await mkUser(w, 'ivy', 'researcher');
    dl = sql(w.srv, `INSERT INTO classes (name, teacher_id, code) VALUES ('Deep Learning', ${tina.id}, 'DL1') RETURNING id`);
    ot = sql(w.srv, `INSERT INTO classes (name, teacher_id, code) VALUES ('Other', ${otto.id}, 'OT1') RETURNING id`);
    sql(w.srv, `INSERT INTO class_members (class_id, user_id, role) VALUES (${dl}, ${alice.id}, 'student')`);
    // an accounting node nobody can reach (cordoned), with a declared GPU,
    // a measured one, and a measured GPU shared two ways
    node = sql(w.srv, `INSERT INTO nodes (name, url, admin_state) VALUES ('acct', 'unix:///nonexistent/acct.sock', 'cordoned') RETURNING id`);
    px = sql(w.srv, `INSERT INTO pools (name) VALUES ('px') RETURNING id`);
    ps = sql(w.srv, `INSERT INTO pools (name, sharing, slots_per_gpu, memory_per_slot_mib) VALUES ('ps', 'shared', 2, 1000) RETURNING id`);
    sql(w.srv, `INSERT INTO gpus (node_id, idx, uuid, model, memory_mib, simulated, devices, pool_id) VALUES
      (${node}, 0, 'GPU-acct-decl', 'A100', 81920, true, ARRAY['/dev/null'], ${px}),
      (${node}, 1, 'GPU-acct-real', 'A100', 81920, false, '{}', ${px}),
      (${node}, 2, 'GPU-acct-shr', 'A100', 81920, false, '{}', ${ps})`);
    sql(w.srv, `INSERT INTO slices (pool_id, gpu_id, slot) SELECT pool_id, id, 0 FROM gpus WHERE uuid LIKE 'GPU-acct-%';
      INSERT INTO slices (pool_id, gpu_id, slot) SELECT pool_id, id, 1 FROM gpus WHERE uuid = 'GPU-acct-shr'`);
    const slice = (uuid, slot = 0) => `(SELECT s.id FROM slices s JOIN gpus g ON g.id = s.gpu_id WHERE g.uuid = '${uuid}' AND s.slot = ${slot})`;
    // alice's instance (class DL, the world image) that owned A1
    inst1 = sql(w.srv, `INSERT INTO instances (user_id, name, image_id, pool_id, slices, state, desired, class_id)
      VALUES (${alice.id}, 'acct1', ${w.image.id}, ${px}, 1, 'stopped', 'stopped', ${dl}) RETURNING id`);
    const reqSql = (uid, pool, cls, kind, owner, slices, cpu, mem) => `INSERT INTO alloc_requests (user_id, pool_id,
      class_id, owner_kind, owner_id, slices, cpu_millis, mem_mib, state) VALUES (${uid}, ${pool}, ${cls}, '${kind}',
      '${owner}', ${slices}, ${cpu}, ${mem}, 'released') RETURNING id`;
    const r1 = sql(w.srv, reqSql(alice.id, px, dl, 'instance', inst1, 1, 2000, 4096));
    const r2 = sql(w.srv, reqSql(bob.id, px, 'NULL', 'api', '', 1, 1000, 2048));
    const r3 = sql(w.srv, reqSql(alice.id, ps, 'NULL', 'api', '', 2, 3000, 3000));
    const r4 = sql(w.srv, reqSql(alice.id, px, dl, 'api', '', 1, 500, 512));
    const r5 = sql(w.srv, reqSql(carl.id, px, 'NULL', 'api', '', 1, 1000, 1024));
    sql(w.srv, `UPDATE instances SET request_id = ${r1} WHERE id = ${inst1}`);
    // utilisation samples of the measured GPUs (one outside every interval),
    // taken while the work ran (so before its release, as the sampler stamps them)
    sql(w.srv, `INSERT INTO gpu_samples (at, node_id, gpu_uuid, util_pct) VALUES
      ('2026-02-01T06:00:00Z', ${node}, 'GPU-acct-real', 50), ('2026-02-01T18:00:00Z', ${node}, 'GPU-acct-real', 100),
      ('2026-02-02T01:00:00Z', ${node}, 'GPU-acct-real', 20), ('2026-02-05T00:00:00Z', ${node}, 'GPU-acct-real', 90),
      ('2026-02-28T12:00:00Z', ${node}, 'GPU-acct-shr', 40)`);
    // A1 live from 2026-01-31 22:00 (released below, after its idle periods):
    // 27.5 h on the measured GPU
    // A2 bob 2 h on the declared GPU; A4 alice 30 s (class DL, declared);
    // A5 carl 1 h (declared)
    sql(w.srv, `INSERT INTO allocations (request_id, slice_id, node_id, allocated_at) VALUES
        (${r1}, ${slice('GPU-acct-real')}, ${node}, '2026-01-31T22:00:00Z');
      INSERT INTO allocations (request_id, slice_id, node_id, allocated_at, released_at) VALUES
        (${r2}, ${slice('GPU-acct-decl')}, ${node}, '2026-02-10T10:00:00Z', '2026-02-10T12:00:00Z'),
        (${r4}, ${slice('GPU-acct-decl')}, ${node}, '2026-02-15T00:00:00Z', '2026-02-15T00:00:30Z'),
        (${r5}, ${slice('GPU-acct-decl')}, ${node}, '2026-02-20T00:00:00Z', '2026-02-20T01:00:00Z')`);
    // A3 alice on both slots of the shared GPU (0.5 GPU each), live, then
    // released at 2026-03-01 02:00 (after the report's end)
    sql(w.srv, `INSERT INTO allocations (request_id, slice_id, node_id, allocated_at) VALUES
        (${r3}, ${slice('GPU-acct-shr', 0)}, ${node}, '2026-02-27T23:00:00Z'),
        (${r3}, ${slice('GPU-acct-shr', 1)}, ${node}, '2026-02-27T23:00:00Z');
      UPDATE allocations SET released_at = '2026-03-01T02:00:00Z' WHERE request_id = ${r3}`);
    // inst1's idle periods, written as reclaim.c writes them: idle since
    // 10:00, warned 10:30, active again at 13:00 (3 h); idle since 19:00,
    // warned 20:00, stopped by reclamation, released at 01:30 (6.5 h)
    sql(w.srv, `UPDATE instances SET last_activity_at = '2026-02-01T10:00:00Z' WHERE id = ${inst1};
      UPDATE instances SET idle_warning_at = '2026-02-01T10:30:00Z' WHERE id = ${inst1};
      UPDATE instances SET idle_warning_at = NULL, last_activity_at = '2026-02-01T13:00:00Z' WHERE id = ${inst1};
      UPDATE instances SET last_activity_at = '2026-02-01T19:00:00Z' WHERE id = ${inst1};
      UPDATE instances SET idle_warning_at = '2026-02-01T20:00:00Z' WHERE id = ${inst1};
      UPDATE instances SET desired = 'running' WHERE id = ${inst1};
      UPDATE instances SET desired = 'stopped', reason = 'stopped after being idle for 3600 s (and 900 s after the warning)' WHERE id = ${inst1};
      UPDATE allocations SET released_at = '2026-02-02T01:30:00Z' WHERE request_id = ${r1}`);
    // alice's home as the quota scans saw it: 2 GiB on 02-10 (the most of
    // two scans), 4 GiB on 02-11
    sql(w.srv, `INSERT INTO storage_areas (area, user_id, bytes, scanned_at) VALUES ('home:${alice.id}', ${alice.id}, ${2 * GIB}, '2026-02-10T05:00:00Z')
        ON CONFLICT (area) DO UPDATE SET bytes = ${2 * GIB}, scanned_at = '2026-02-10T05:00:00Z';
      UPDATE storage_areas SET bytes = ${GIB}, scanned_at = '2026-02-10T09:00:00Z' WHERE area = 'home:${alice.id}';
      UPDATE storage_areas SET bytes = ${4 * GIB}, scanned_at = '2026-02-11T01:00:00Z' WHERE area = 'home:${alice.id}'`);
  });
  after(async () => { try { await stopClean(w?.srv); } finally { cleanup(w?.srv); } });

  it('records one interval per allocation, with snapshots, kept by the triggers', () => {
    const n = sql(w.srv, `SELECT count(*) || ' ' || count(*) FILTER (WHERE ended_at IS NULL) FROM usage_intervals
      WHERE node_id = ${node}`);
    assert.equal(n, '6 0');
    const a1 = sql(w.srv, `SELECT username, class_name, pool_name, image_ref, owner_kind, gpus, cpu_millis, mem_mib,
      gpu_uuid, gpu_declared, gc_ts(started_at), gc_ts(ended_at) FROM usage_intervals WHERE owner_id = '${inst1}'`);
    assert.equal(a1, `alice|Deep Learning|px|${w.image.reference}|instance|1|2000|4096|GPU-acct-real|f|2026-01-31T22:00:00Z|2026-02-02T01:30:00Z`);
    // ended intervals are also cut into UTC days once (usage_days): A1's three
    assert.equal(sql(w.srv, `SELECT string_agg(day || '=' || gpu_seconds || '/' || COALESCE(gpu_used_seconds::text, '-'), ',' ORDER BY day)
      FROM usage_days d JOIN usage_intervals u USING (allocation_id) WHERE u.owner_id = '${inst1}'`),
    '2026-01-31=7200/-,2026-02-01=86400/64800,2026-02-02=5400/1080');
    assert.equal(sql(w.srv, `SELECT string_agg(gpus || '/' || cpu_millis || '/' || mem_mib, ',') FROM usage_intervals WHERE pool_name = 'ps'`),
      '0.5/1500/1500,0.5/1500/1500', 'a node\'s rows share the request\'s CPU and memory');
    assert.equal(sql(w.srv, `SELECT string_agg(gc_ts(started_at) || '>' || gc_ts(ended_at) || ':' || end_reason, ',' ORDER BY started_at)
      FROM usage_idle_periods WHERE instance_id = ${inst1}`),
    '2026-02-01T10:00:00Z>2026-02-01T13:00:00Z:active,2026-02-01T19:00:00Z>2026-02-02T01:30:00Z:reclaimed');
    assert.equal(sql(w.srv, `SELECT string_agg(day || '=' || bytes, ',' ORDER BY day) FROM usage_storage_days WHERE user_id = ${alice.id}
      AND day < '2026-03-01'`), `2026-02-10=${2 * GIB},2026-02-11=${4 * GIB}`);
  });

  it('sums a month per user to the second, clipped at from and to', async () => {
    const j = await q(w.admin, `group_by=user&period=total&${FEB}`);
    assert.equal(j.group_by, 'user');
    assert.equal(j.period, 'total');
    assert.equal(j.from, '2026-02-01T00:00:00Z');
    assert.equal(j.to, '2026-03-01T00:00:00Z');
    assert.deepEqual(j.rows.map((r) => r.key).sort(), ['alice', 'bob', 'carl']);
    const a = row(j, 'alice');
    assert.equal(a.key_id, alice.id);
    assert.equal(a.period_start, '2026-02-01T00:00:00Z');
    // A1 clipped at from: 02-01 00:00 → 02-02 01:30 = 91800 s; A3 clipped
    // at to: 2 × 0.5 GPU × (02-27 23:00 → 03-01 00:00 = 90000 s); A4 30 s
    assert.equal(a.gpu_seconds, 91800 + 90000 + 30);
    // utilisation per UTC day part: A1 on 02-01 the mean of 50 and 100 ×
    // 86400, on 02-02 20 % × 5400; A3 40 % × 86400 on 02-28, its hour of
    // 02-27 unsampled; A4 on a declared GPU: partly measured
    assert.equal(a.gpu_used_seconds, 64800 + 1080 + 34560);
    assert.equal(a.gpu_measured, 'partly measured');
    assert.equal(a.cpu_hours, 126.004167); // 2 × 25.5 + 3 × 25 + 0.5 × 30/3600
    assert.equal(a.memory_gib_hours, 175.246354); // 4 × 25.5 + 3000/1024 × 25 + 0.5 × 30/3600
    assert.equal(a.storage_gib_days, 6);
    const b = row(j, 'bob');
    assert.equal(b.gpu_seconds, 7200);
    assert.equal(b.gpu_used_seconds, null, 'a declared GPU is not measurable, never 0');
    assert.equal(b.gpu_measured, 'not measurable');
    assert.equal(b.cpu_hours, 2);
    assert.equal(b.memory_gib_hours, 4);
    assert.equal(b.storage_gib_days, null);
    assert.equal(row(j, 'carl').gpu_seconds, 3600);
    assert.equal(j.totals.gpu_seconds, 181830 + 7200 + 3600);
    assert.equal(j.totals.gpu_used_seconds, 100440);
    assert.equal(j.totals.gpu_measured, 'partly measured');
    assert.equal(j.totals.storage_gib_days, 6);
    // the clip: from 02-01 12:00 to 02-27 23:30; storage day 02-10 counts half
    const c = await q(w.admin, 'group_by=user&period=total&from=2026-02-10T12:00:00Z&to=2026-02-27T23:30:00Z');
    assert.equal(row(c, 'alice').gpu_seconds, 30 + 1800);
    assert.equal(row(c, 'alice').storage_gib_days, 1 + 4);
    assert.equal(row(c, 'bob'), undefined, 'bob ended at 12:00 on the 10th');
    assert.equal(row(c, 'carl').gpu_seconds, 3600);
  });

  it('buckets by UTC day, ISO week and month', async () => {
    const d = await q(w.admin, `group_by=user&period=day&${FEB}`);
    const a = d.rows.filter((r) => r.key === 'alice' && r.gpu_seconds > 0).map((r) => [r.period_start, r.gpu_seconds, r.gpu_used_seconds, r.gpu_measured]);
    assert.deepEqual(a, [
      ['2026-02-01T00:00:00Z', 86400, 64800, 'measured'], // samples 50 and 100
      ['2026-02-02T00:00:00Z', 5400, 1080, 'measured'], // sample 20
      ['2026-02-15T00:00:00Z', 30, null, 'not measurable'],
      ['2026-02-27T00:00:00Z', 3600, null, 'not measurable'], // a real GPU with no sample that hour
      ['2026-02-28T00:00:00Z', 86400, 34560, 'measured'],
    ]);
    // storage days are bucketed too (rows of their own when nothing else ran)
    assert.equal(row(d, 'alice', '2026-02-10T00:00:00Z').storage_gib_days, 2);
    assert.equal(row(d, 'alice', '2026-02-11T00:00:00Z').storage_gib_days, 4);
    assert.equal(row(d, 'alice', '2026-02-10T00:00:00Z').gpu_seconds, 0);
    const wk = await q(w.admin, `group_by=user&period=week&${FEB}`);
    // ISO weeks from Monday: 02-01 is a Sunday (its week starts 01-26,
    // clipped at from); A4 on Sunday 02-15 and the storage of 02-10/11 fall
    // in the week of 02-09
    assert.deepEqual(wk.rows.filter((r) => r.key === 'alice').map((r) => [r.period_start, r.gpu_seconds, r.storage_gib_days]), [
      ['2026-01-26T00:00:00Z', 86400, null], ['2026-02-02T00:00:00Z', 5400, null],
      ['2026-02-09T00:00:00Z', 30, 6], ['2026-02-23T00:00:00Z', 90000, null],
    ]);
    const m = await q(w.admin, 'group_by=user&period=month&from=2026-01-15T00:00:00Z&to=2026-03-15T00:00:00Z');
    const months = m.rows.filter((r) => r.key === 'alice').map((r) => [r.period_start, r.gpu_seconds]);
    // A1 from 01-31 22:00: 2 h in January; February: 86400 + 5400 + 30 +
    // 90000; March: A3 until 02:00 = 2 × 0.5 × 7200
    assert.deepEqual(months, [['2026-01-01T00:00:00Z', 7200], ['2026-02-01T00:00:00Z', 181830], ['2026-03-01T00:00:00Z', 7200]]);
  });

  it('groups by class, pool and image', async () => {
    const keys = (j) => Object.fromEntries(j.rows.map((r) => [r.key, [r.key_id, r.gpu_seconds]]));
    assert.deepEqual(keys(await q(w.admin, `group_by=class&period=total&${FEB}`)),
      { 'Deep Learning': [Number(dl), 91830], '(no class)': [null, 90000 + 7200 + 3600] });
    assert.deepEqual(keys(await q(w.admin, `group_by=pool&period=total&${FEB}`)),
      { px: [Number(px), 91800 + 7200 + 30 + 3600], ps: [Number(ps), 90000] });
    const img = await q(w.admin, `group_by=image&period=total&${FEB}`);
    assert.deepEqual(keys(img), { [w.image.reference]: [w.image.id, 91800], '(no image)': [null, 90000 + 7200 + 30 + 3600] });
    assert.equal(img.totals.storage_gib_days, null, 'storage is per user');
    assert.equal(img.rows[0].storage_gib_days, null);
  });

  it('reports idle GPU time (waste) by user and class, with the idle periods', async () => {
    const r = await w.admin.get(`/api/v1/usage/waste?group_by=user&${FEB}`);
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.group_by, 'user');
    const a = r.json.rows.find((x) => x.key === 'alice');
    assert.equal(a.key_id, alice.id);
    assert.equal(a.allocated_idle_seconds, 10800 + 23400);
    assert.deepEqual(a.periods.map((p) => [p.kind, p.id, p.name, p.started_at, p.ended_at, p.end_reason, p.gpus, p.seconds, p.gpu_seconds]), [
      ['instance', String(inst1), 'acct1', '2026-02-01T10:00:00Z', '2026-02-01T13:00:00Z', 'active', 1, 10800, 10800],
      ['instance', String(inst1), 'acct1', '2026-02-01T19:00:00Z', '2026-02-02T01:30:00Z', 'reclaimed', 1, 23400, 23400],
    ]);
    assert.equal(r.json.totals.allocated_idle_seconds, 34200);
    const c = await w.admin.get(`/api/v1/usage/waste?group_by=class&${FEB}`);
    assert.deepEqual(c.json.rows.map((x) => [x.key, x.key_id, x.allocated_idle_seconds]), [['Deep Learning', Number(dl), 34200]]);
    const clip = await w.admin.get('/api/v1/usage/waste?from=2026-02-01T12:00:00Z&to=2026-02-02T01:00:00Z');
    assert.equal(clip.json.rows[0].allocated_idle_seconds, 3600 + 21600);
    assert.deepEqual(clip.json.rows[0].periods.map((p) => p.seconds), [3600, 21600]);
    const csv = await w.admin.get(`/api/v1/usage/waste?format=csv&${FEB}`);
    assert.equal(csv.status, 200);
    assert.match(csv.headers.get('content-type'), /^text\/csv/);
    const lines = csv.text.trim().split('\r\n');
    assert.equal(lines[0], 'key,kind,id,name,started_at,warned_at,ended_at,end_reason,gpus,seconds,allocated_idle_seconds');
    assert.equal(lines[2], `"alice",instance,${inst1},"acct1",2026-02-01T19:00:00Z,2026-02-01T20:00:00Z,2026-02-02T01:30:00Z,reclaimed,1.000000,23400.000,23400.000`);
  });

  it('exports CSV', async () => {
    const r = await w.admin.get(`/api/v1/usage?group_by=user&period=total&format=csv&${FEB}`);
    assert.equal(r.status, 200);
    assert.match(r.headers.get('content-type'), /^text\/csv/);
    assert.match(r.headers.get('content-disposition'), /attachment/);
    const lines = r.text.trim().split('\r\n');
    assert.equal(lines[0], 'key,period_start,gpu_seconds,gpu_used_seconds,gpu_measured,cpu_hours,memory_gib_hours,storage_gib_days');
    assert.deepEqual(lines.slice(1), [
      '"alice",2026-02-01T00:00:00Z,181830.000,100440.000,partly measured,126.004167,175.246354,6.000000',
      '"bob",2026-02-01T00:00:00Z,7200.000,,not measurable,2.000000,4.000000,',
      '"carl",2026-02-01T00:00:00Z,3600.000,,not measurable,1.000000,1.000000,',
    ]);
  });

  it('shows each caller only what they may see', async () => {
    // a teacher: the class-context work of the classes they teach
    const t = await q(tina.c, `group_by=user&period=total&${FEB}`);
    assert.deepEqual(t.rows.map((r) => [r.key, r.gpu_seconds, r.gpu_used_seconds, r.gpu_measured, r.storage_gib_days]),
      [['alice', 91830, 65880, 'partly measured', null]]);
    assert.deepEqual((await q(tina.c, `group_by=user&period=total&class=${dl}&${FEB}`)).rows.map((r) => r.gpu_seconds), [91830]);
    assert.deepEqual((await q(tina.c, `group_by=pool&period=total&${FEB}`)).rows.map((r) => [r.key, r.gpu_seconds]), [['px', 91830]]);
    const tw = await tina.c.get(`/api/v1/usage/waste?group_by=user&${FEB}`);
    assert.equal(tw.json.rows[0].allocated_idle_seconds, 34200);
    for (const [c, cls, code] of [[tina.c, ot, 403], [otto.c, dl, 403], [alice.c, dl, 403], [tina.c, 999999, 404]]) {
      for (const p of ['/api/v1/usage', '/api/v1/usage/waste']) {
        const r = await c.get(`${p}?class=${cls}&${FEB}`);
        assert.equal(r.status, code, `${p} class=${cls}: ${r.text}`);
        assertErrorShape(r.json, code === 403 ? 'forbidden' : 'not_found');
      }
    }
    assert.deepEqual((await q(otto.c, `group_by=user&period=total&${FEB}`)).rows, [], 'another class\'s teacher sees none of it');
    assert.deepEqual((await otto.c.get(`/api/v1/usage/waste?${FEB}`)).json.rows, []);
    // a student: their own rows only, whatever the grouping
    const s = await q(alice.c, `group_by=user&period=total&${FEB}`);
    assert.deepEqual(s.rows.map((r) => [r.key, r.gpu_seconds, r.storage_gib_days]), [['alice', 181830, 6]]);
    assert.deepEqual((await q(alice.c, `group_by=pool&period=total&${FEB}`)).rows.map((r) => [r.key, r.gpu_seconds]),
      [['ps', 90000], ['px', 91830]]);
    assert.deepEqual((await q(bob.c, `group_by=user&period=total&${FEB}`)).rows.map((r) => [r.key, r.gpu_seconds]), [['bob', 7200]]);
    assert.deepEqual((await bob.c.get(`/api/v1/usage/waste?${FEB}`)).json.rows, [], 'another user\'s idle periods stay hidden');
    assert.deepEqual((await q(ivy.c, `group_by=class&period=total&${FEB}`)).rows, []);
    // a read-only token reads; no session, an expired one: 401
    const tok = await alice.c.post('/api/v1/tokens', { name: 'ro', scopes: ['read'] });
    assert.equal(tok.status, 201, tok.text);
    const ro = new Client(w.srv.base);
    ro.token = tok.json.token;
    assert.equal((await q(ro, `group_by=user&period=total&${FEB}`)).rows[0].gpu_seconds, 181830);
    assert.equal((await ro.get(`/api/v1/usage/waste?${FEB}`)).status, 200);
    assert.equal((await new Client(w.srv.base).get('/api/v1/usage')).status, 401);
    const tmp = await mkUser(w, 'tmpuser');
    sql(w.srv, `UPDATE sessions SET created_at = now() - interval '2 days', last_seen_at = now() - interval '2 days',
      expires_at = now() - interval '1 second' WHERE user_id = ${tmp.id}`);
    for (const p of ['/api/v1/usage', '/api/v1/usage/waste', '/api/v1/usage?format=csv'])
      assert.equal((await tmp.c.get(p)).status, 401, p);
  });

  it('refuses bad input with 400', async () => {
    const bad = ['group_by=node', 'period=year', 'format=xml', 'from=2026-13-01', 'from=2026-02-30', 'to=yesterday',
      'from=2026-02-01T00:00:00+08:00', `from=2026-02-01&to=2026-02-01`, 'from=2026-03-01&to=2026-02-01',
      'period=day&from=2022-01-01&to=2026-01-02', 'period=total&from=2010-01-01&to=2026-01-01', 'class=abc', 'class=0',
      'class=-1', 'from=%ZZ'];
    for (const b of bad) {
      const r = await w.admin.get(`/api/v1/usage?${b}`);
      assert.equal(r.status, 400, `${b}: ${r.text}`);
      assertErrorShape(r.json, 'invalid');
    }
    for (const b of ['group_by=pool', 'group_by=image', 'period=day', 'from=nope']) {
      const r = await w.admin.get(`/api/v1/usage/waste?${b}`);
      assert.equal(r.status, 400, `waste ${b}: ${r.text}`);
      assertErrorShape(r.json, 'invalid');
    }
    // what is fine: dates alone, fractions of a second, a long total, defaults
    for (const ok of ['from=2026-02-01&to=2026-03-01', 'from=2026-02-01T00:00:00.000Z&to=2026-03-01T00:00:00.000Z',
      'period=total&from=2026-01-01T00:00:00Z&to=2031-01-01T00:00:00Z', ''])
      assert.equal((await w.admin.get(`/api/v1/usage?${ok}`)).status, 200, ok);
    const d = await q(w.admin, '');
    assert.equal(d.group_by, 'user');
    assert.equal(d.period, 'day');
    assert.equal(Date.parse(d.to) - Date.parse(d.from), 30 * 86400000);
  });

  it('keeps the history and its names when a pool and users are deleted', async () => {
    const before = await q(w.admin, `group_by=pool&period=total&${FEB}`);
    const del = await w.admin.del(`/api/v1/pools/${px}`);
    assert.equal(del.status, 204, del.text);
    assert.equal(sql(w.srv, `SELECT count(*) FROM alloc_requests WHERE pool_id = ${px}`), '0', 'the pool\'s requests went with it');
    assert.equal(sql(w.srv, `SELECT count(*) FROM usage_intervals WHERE node_id = ${node}`), '6');
    const after = await q(w.admin, `group_by=pool&period=total&${FEB}`);
    assert.deepEqual(after.rows.map((r) => [r.key, r.key_id, r.gpu_seconds]),
      [['ps', Number(ps), 90000], ['px', null, 102630]]);
    assert.equal(after.totals.gpu_seconds, before.totals.gpu_seconds);
    // a deleted user (the API's soft delete) and one removed outright
    assert.equal((await w.admin.del(`/api/v1/users/${bob.id}`)).status, 200);
    assert.notEqual(sql(w.srv, `SELECT deleted_at FROM users WHERE id = ${bob.id}`), '');
    sql(w.srv, `DELETE FROM sessions WHERE user_id = ${carl.id}; DELETE FROM storage_areas WHERE user_id = ${carl.id};
      DELETE FROM users WHERE id = ${carl.id}`);
    const u = await q(w.admin, `group_by=user&period=total&${FEB}`);
    assert.deepEqual(u.rows.map((r) => [r.key, r.key_id, r.gpu_seconds]),
      [['alice', alice.id, 181830], ['bob', bob.id, 7200], ['carl', null, 3600]]);
    assert.equal(u.totals.gpu_seconds, 181830 + 7200 + 3600);
  });

  it('reconciles a real instance reclaimed for idleness with its allocation', async () => {
    const pol = await w.admin.req('PUT', '/api/v1/idle-policies/researcher', { idle_seconds: 3, warn_seconds: 3 });
    assert.equal(pol.status, 200, pol.text);
    const t0 = new Date(Date.now() - 60000).toISOString();
    const inst = await create(ivy.c, w, { name: 'idler', pool: 'a100', slices: 1 });
    await waitState(ivy.c, inst.id, 'running', 60000);
    await waitState(ivy.c, inst.id, 'stopped', 60000);
    assert.ok(await eventually(() => sql(w.srv, `SELECT count(*) FROM usage_idle_periods WHERE instance_id = ${inst.id}
      AND ended_at IS NOT NULL`) === '1', 15000), 'the idle period closed with the release');
    const t1 = new Date(Date.now() + 60000).toISOString();
    const span = `from=${t0}&to=${t1}`;
    // the allocation row and the idle period, as the database holds them
    const [alloc, idle, reason] = sql(w.srv, `SELECT round(extract(epoch FROM a.released_at - a.allocated_at), 3),
      round(extract(epoch FROM p.ended_at - p.started_at), 3), p.end_reason
      FROM allocations a JOIN usage_idle_periods p ON p.request_id = a.request_id WHERE p.instance_id = ${inst.id}`).split('|');
    assert.equal(reason, 'reclaimed');
    assert.ok(Number(idle) >= 3, `idle ${idle} s`);
    const u = await q(ivy.c, `group_by=user&period=total&${span}`);
    assert.equal(u.rows.length, 1);
    assert.equal(u.rows[0].gpu_seconds, Number(alloc), 'GPU-seconds are the allocation\'s interval');
    assert.equal(u.rows[0].gpu_measured, 'not measurable', 'the world\'s GPUs are declared');
    assert.equal(u.rows[0].gpu_used_seconds, null);
    assert.ok(Math.abs(u.rows[0].cpu_hours - 0.2 * Number(alloc) / 3600) <= 1e-6, `${u.rows[0].cpu_hours} CPU-hours`);
    const ws = await ivy.c.get(`/api/v1/usage/waste?${span}`);
    assert.equal(ws.status, 200, ws.text);
    const p = ws.json.rows[0].periods[0];
    assert.equal(p.name, 'idler');
    assert.equal(p.end_reason, 'reclaimed');
    assert.equal(p.gpu_seconds, Number(idle));
    assert.equal(ws.json.rows[0].allocated_idle_seconds, Number(idle));
    assert.ok(Number(idle) < Number(alloc));
  });
});
