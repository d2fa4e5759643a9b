// usage.test.mjs — Administration → Usage and a class's Usage tab in a real
// headless Chromium against a real gpucloudd (issue 15): a scripted
// November of accounting history is written with SQL (usage_intervals,
// gpu_samples, usage_idle_periods, as 0034_usage.sql defines them), then
//   - the admin page shows the right GPU-hours allocated and used per user,
//     class and pool, "not measurable" for a declared GPU, the totals;
//   - day / week / month split the figures by UTC calendar periods, and the
//     chart draws one point per period;
//   - the CSV link downloads the same figures as text/csv;
//   - the waste report lists the idle instance with its period, by user and
//     by class;
//   - the page in 简体中文;
//   - a teacher sees only the class they teach on #/class/usage, per student,
//     and none of the same student's usage in another class;
//   - a student cannot open the admin page (no link, the forbidden notice).
// Screenshots: var/test-logs/e2e-usage-*.png.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, Client, ADMIN_PASSWORD, psql } from '../lib/server.mjs';
import { launch, shot, newPage } from './browser.mjs';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function until(fn, what, ms = 15000) {
  const end = Date.now() + ms;
  let last;
  for (;;) {
    try { last = await fn(); if (last) return last; } catch (e) { last = e; }
    if (Date.now() > end) throw new Error(`timed out waiting for ${what} (last: ${last instanceof Error ? last.message : JSON.stringify(last)})`);
    await sleep(100);
  }
}

const RANGE = 'from=2026-11-01&to=2026-11-30';
const PEOPLE = [
  ['alice', 'student'], ['bob', 'student'], ['carol', 'researcher'], ['tina', 'teacher'], ['ted', 'teacher'],
];
const pass = (u) => `${u}-usage-pass-1`;

// What the history below adds up to, in GPU-seconds (by hand, not by the server).
const H = 3600;
const WANT = {
  user: { alice: [3 * H, 2 * H], bob: [2 * H, null], carol: [24 * H, 6 * H] },
  class: { 'Deep Learning': [4 * H], Robotics: [1 * H] },
  pool: { a100: [27 * H], shared: [2 * H] },
};

async function signIn(p, base, username, submit) {
  await p.goto(`${base}/#/login`);
  await p.locator('input[name=username]').waitFor({ timeout: 10000 }).catch(async () => { await shot(p, `usage-signin-${username}`); await p.reload(); });
  await p.locator('input[name=username]').fill(username);
  await p.locator('input[type=password]').first().fill(username === 'admin' ? ADMIN_PASSWORD : pass(username));
  await p.getByRole('button', { name: submit }).click();
  await p.locator('[data-nav="home"]').waitFor();
}

// The rows of the usage table: { key: [{ period, gpu, used, text }] }
async function tableRows(p, which = 'usage') {
  return p.evaluate((which) => {
    const out = {};
    for (const tr of document.querySelectorAll(`[data-table=${which}] tbody tr[data-key]`)) {
      const num = (f) => { const v = tr.querySelector(`[data-field=${f}]`)?.dataset.seconds; return v === '' || v === undefined ? null : Number(v); };
      (out[tr.dataset.key] ||= []).push({
        period: tr.dataset.period, gpu: num(which === 'usage' ? 'gpu' : 'idle'), used: num('gpu-used'),
        text: tr.textContent,
      });
    }
    return out;
  }, which);
}

describe('usage pages in the browser', () => {
  let srv, browser, ids = {}, dl, rob;
  const errors = [];
  const q = (text) => psql(srv.db.url, text);

  before(async () => {
    srv = await startServer({ args: ['--scrypt-ln=10'] });
    const admin = new Client(srv.base);
    assert.equal((await admin.login('admin', ADMIN_PASSWORD)).status, 200);
    for (const [u, role] of PEOPLE) {
      const r = await admin.post('/api/v1/users', { username: u, role, password: pass(u) });
      assert.equal(r.status, 201, r.text);
      ids[u] = r.json.user.id;
    }
    q(`INSERT INTO pools (name) VALUES ('a100')`);
    q(`INSERT INTO pools (name, sharing, slots_per_gpu, memory_per_slot_mib) VALUES ('shared', 'shared', 2, 20480)`);
    dl = q(`INSERT INTO classes (name, teacher_id, code, term) VALUES ('Deep Learning', ${ids.tina}, 'DL101', 'Autumn 2026') RETURNING id`);
    rob = q(`INSERT INTO classes (name, teacher_id, code, term) VALUES ('Robotics', ${ids.ted}, 'RB201', 'Autumn 2026') RETURNING id`);
    q(`INSERT INTO class_members (class_id, user_id, role) VALUES (${dl}, ${ids.alice}, 'student'), (${dl}, ${ids.bob}, 'student'), (${rob}, ${ids.alice}, 'student')`);
    const pool = (n) => `(SELECT id FROM pools WHERE name = '${n}')`;
    // The history: [allocation, request, user, class, pool, image, owner, gpu uuid, declared, slots, gpus, cpu, mem, from, to]
    const rows = [
      // alice in Deep Learning: a whole A100 for 2 h, sampled at 50 %
      [1, 101, 'alice', dl, 'a100', 'reg.local/pytorch:24', 'instance', '41', 'GPU-A1', false, 1, 1, 4000, 16384, '2026-11-02 10:00', '2026-11-02 12:00'],
      // bob in Deep Learning: half a declared GPU for 4 h — not measurable
      [2, 102, 'bob', dl, 'shared', 'reg.local/pytorch:24', 'job', '7', 'GPU-SIM-1', true, 2, 0.5, 2000, 8192, '2026-11-03 09:00', '2026-11-03 13:00'],
      // carol, no class: a whole A100 for 24 h over two days, sampled at 25 %
      [3, 103, 'carol', null, 'a100', 'reg.local/tensorflow:2', 'job', '8', 'GPU-A2', false, 1, 1, 8000, 32768, '2026-11-09 12:00', '2026-11-10 12:00'],
      // alice in Robotics: 1 h at 100 % — not Deep Learning's
      [4, 104, 'alice', rob, 'a100', 'reg.local/pytorch:24', 'instance', '42', 'GPU-A1', false, 1, 1, 2000, 4096, '2026-11-16 08:00', '2026-11-16 09:00'],
      // bob, CPU only (no GPU): 2 cores and 4 GiB for 2 h
      [5, 105, 'bob', null, null, 'reg.local/pytorch:24', 'job', '9', null, null, 1, 0, 2000, 4096, '2026-11-20 10:00', '2026-11-20 12:00'],
    ];
    // utilisation samples every 30 s, from before to after each measured
    // interval — first: usage_days reads them when an ended interval is written
    for (const [uuid, pct, from, to] of [['GPU-A1', 50, '2026-11-02 09:59', '2026-11-02 12:01'],
      ['GPU-A2', 25, '2026-11-09 11:59', '2026-11-10 12:01'], ['GPU-A1', 100, '2026-11-16 07:59', '2026-11-16 09:01']])
      q(`INSERT INTO gpu_samples (at, node_id, gpu_uuid, util_pct)
         SELECT g, 1, '${uuid}', ${pct} FROM generate_series('${from}+00'::timestamptz, '${to}+00', interval '30 seconds') g`);
    const lit = (v) => (v === null ? 'NULL' : typeof v === 'string' ? `'${v}'` : String(v));
    q(`INSERT INTO usage_intervals (allocation_id, request_id, user_id, username, class_id, class_name, pool_id, pool_name,
        image_id, image_ref, owner_kind, owner_id, node_id, gpu_uuid, gpu_declared, slots_per_gpu, gpus, cpu_millis, mem_mib,
        started_at, ended_at) VALUES ${rows.map(([a, r, u, c, p, im, ok, oid, g, d, slots, gpus, cpu, mem, from, to]) =>
      `(${a}, ${r}, ${ids[u]}, '${u}', ${c ?? 'NULL'}, ${c === dl ? "'Deep Learning'" : c === rob ? "'Robotics'" : 'NULL'},
        ${p ? pool(p) : 'NULL'}, ${lit(p)}, NULL, '${im}', '${ok}', '${oid}', 1, ${lit(g)}, ${lit(d)}, ${slots}, ${gpus}, ${cpu}, ${mem},
        '${from}+00', '${to}+00')`).join(',\n')}`);
    // alice's notebook sat idle for its second hour (then was reclaimed)
    q(`INSERT INTO usage_idle_periods (instance_id, instance_name, request_id, user_id, username, class_id, class_name,
        started_at, warned_at, ended_at, end_reason)
       VALUES (41, 'notebook', 101, ${ids.alice}, 'alice', ${dl}, 'Deep Learning', '2026-11-02 11:00+00', '2026-11-02 11:30+00',
        '2026-11-02 12:00+00', 'reclaimed')`);
    // alice's home held 2 GiB on Nov 5 (a day of scans)
    q(`INSERT INTO usage_storage_days (area, day, user_id, username, bytes)
       VALUES ('home:${ids.alice}', '2026-11-05', ${ids.alice}, 'alice', ${2 * 2 ** 30})`);
    browser = await launch();
  });

  after(async () => {
    await browser?.close();
    await srv?.stop();
    assert.deepEqual(errors, []);
  });

  it('admin: figures by user, class and pool; periods; CSV; waste', async () => {
    const p = await newPage(browser, errors, 'en-US');
    await signIn(p, srv.base, 'admin', 'Sign in');
    await p.locator('[data-nav="admin-usage"]').click();
    await p.getByRole('heading', { name: 'Usage', level: 1 }).waitFor();
    // the defaults: by user, per day, the last 30 days
    assert.equal(await p.locator('[data-group=user]').getAttribute('aria-pressed'), 'true');
    assert.equal(await p.locator('[data-period=day]').getAttribute('aria-pressed'), 'true');

    // the scripted November over its whole range
    await p.goto(`${srv.base}/#/admin/usage?group_by=user&period=total&${RANGE}`);
    await p.locator('[data-table=usage] tbody tr[data-key=carol]').waitFor();
    let rows = await tableRows(p);
    assert.deepEqual(Object.keys(rows).sort(), ['alice', 'bob', 'carol']);
    for (const [k, [gpu, used]] of Object.entries(WANT.user)) {
      assert.equal(rows[k].length, 1, k);
      assert.equal(rows[k][0].gpu, gpu, `${k} allocated`);
      if (used === null) assert.equal(rows[k][0].used, null, `${k} used`);
      else assert.ok(Math.abs(rows[k][0].used - used) < 1, `${k} used: ${rows[k][0].used} vs ${used}`);
    }
    const alice = p.locator('[data-table=usage] tr[data-key=alice]');
    assert.equal(await alice.locator('[data-field=gpu]').textContent(), '3');
    assert.equal(await alice.locator('[data-field=gpu-used]').textContent(), '2');
    assert.equal(await alice.locator('[data-field=cpu]').textContent(), '10', '4 cores × 2 h + 2 cores × 1 h');
    assert.equal(await alice.locator('[data-field=mem]').textContent(), '36', '16 GiB × 2 h + 4 GiB × 1 h');
    assert.equal(await alice.locator('[data-field=storage]').textContent(), '2', '2 GiB for a day');
    const bob = p.locator('[data-table=usage] tr[data-key=bob]');
    assert.equal(await bob.locator('[data-field=gpu]').textContent(), '2');
    assert.equal(await bob.locator('[data-field=gpu-used]').textContent(), 'not measurable');
    assert.equal(await bob.locator('[data-measured]').getAttribute('data-measured'), 'none');
    assert.equal(await bob.locator('[data-field=cpu]').textContent(), '12', '2 cores × 4 h + 2 cores × 2 h');
    assert.equal(await p.locator('[data-table=usage] tr[data-key=carol] [data-field=gpu-used]').textContent(), '6');
    assert.equal(await p.locator('[data-total=gpu]').textContent(), '29');
    assert.equal(await p.locator('[data-total=gpu-used]').textContent(), '8');
    assert.equal(await p.locator('[data-total=measured] [data-measured]').getAttribute('data-measured'), 'partly');
    // period=total: one point per series
    assert.equal(await p.locator('[data-chart=usage] polyline').first().getAttribute('data-points'), '1');

    // by class, then by pool (the same range)
    await p.locator('[data-group=class]').click();
    await p.locator('[data-table=usage] tbody tr[data-key=Robotics]').waitFor();
    rows = await tableRows(p);
    for (const [k, [gpu]] of Object.entries(WANT.class)) assert.equal(rows[k]?.[0].gpu, gpu, k);
    assert.match(p.url(), /group_by=class/);
    await p.locator('[data-group=pool]').click();
    await p.locator('[data-table=usage] tbody tr[data-key=shared]').waitFor();
    rows = await tableRows(p);
    for (const [k, [gpu]] of Object.entries(WANT.pool)) assert.equal(rows[k]?.[0].gpu, gpu, k);
    assert.equal(await p.locator('[data-table=usage] thead th').first().textContent(), 'Pool');

    // periods: per day carol's 24 h are two days of 12; per week one; per month one
    await p.locator('[data-group=user]').click();
    await p.locator('[data-period=day]').click();
    await until(async () => ((await tableRows(p)).carol || []).length === 2, 'carol over two days');
    rows = await tableRows(p);
    assert.deepEqual(rows.carol.map((r) => [r.period.slice(0, 10), r.gpu]), [['2026-11-09', 12 * H], ['2026-11-10', 12 * H]]);
    assert.match(rows.carol[0].text, /Nov 9, 2026/);
    // Nov 5: her storage only
    assert.deepEqual(rows.alice.map((r) => [r.period.slice(0, 10), r.gpu]), [['2026-11-02', 2 * H], ['2026-11-05', 0], ['2026-11-16', H]]);
    const storageOnly = p.locator('[data-table=usage] tr[data-key=alice][data-period="2026-11-05T00:00:00Z"]');
    assert.equal(await storageOnly.locator('[data-field=gpu-used]').textContent(), '—', 'no GPU time: nothing to measure');
    assert.equal(await storageOnly.locator('[data-field=storage]').textContent(), '2');
    assert.equal(await p.locator('[data-chart=usage] polyline').first().getAttribute('data-points'), '30', 'a point per day of November');
    await shot(p, 'usage-admin-day-en');
    await p.locator('[data-period=week]').click();
    await until(async () => ((await tableRows(p)).carol || []).length === 1, 'carol in one week');
    rows = await tableRows(p);
    assert.equal(rows.carol[0].gpu, 24 * H);
    assert.match(rows.carol[0].text, /Week of Nov 9, 2026/);
    // the weeks of Oct 26, Nov 2, 9, 16, 23 and 30
    assert.equal(await p.locator('[data-chart=usage] polyline').first().getAttribute('data-points'), '6');
    await p.locator('[data-period=month]').click();
    await until(async () => (await tableRows(p)).alice?.length === 1, 'one month');
    rows = await tableRows(p);
    assert.equal(rows.alice[0].gpu, 3 * H);
    assert.match(rows.alice[0].text, /November 2026/);
    assert.match(p.url(), /period=month/);

    // the CSV link: the same query, the same figures
    const href = await p.locator('[data-action=csv]').getAttribute('href');
    assert.match(href, /^\/api\/v1\/usage\?/);
    const qs = new URLSearchParams(href.split('?')[1]);
    assert.deepEqual([qs.get('group_by'), qs.get('period'), qs.get('format')], ['user', 'month', 'csv']);
    assert.equal(qs.get('from'), '2026-11-01T00:00:00Z');
    assert.equal(qs.get('to'), '2026-12-01T00:00:00Z');
    const got = await p.evaluate(async (u) => { const r = await fetch(u); return { status: r.status, type: r.headers.get('content-type'), text: await r.text() }; }, href);
    assert.equal(got.status, 200);
    assert.match(got.type, /^text\/csv/);
    const lines = got.text.trim().split(/\r?\n/);
    assert.equal(lines[0], 'key,period_start,gpu_seconds,gpu_used_seconds,gpu_measured,cpu_hours,memory_gib_hours,storage_gib_days');
    // quoted text fields ("alice"); none of these holds a comma
    const csv = Object.fromEntries(lines.slice(1).map((l) => l.split(',').map((f) => f.replace(/^"(.*)"$/, '$1'))).map((f) => [f[0], f]));
    for (const [k, [gpu]] of Object.entries(WANT.user)) assert.equal(Number(csv[k]?.[2]), gpu, `CSV ${k}`);
    assert.equal(csv.bob[3], '', 'not measurable: an empty used figure');
    assert.equal(csv.bob[4], 'not measurable');

    // the waste report: alice's idle hour on one whole GPU
    await p.locator('[data-table=waste] tbody tr[data-key=alice]').waitFor();
    const waste = await tableRows(p, 'waste');
    assert.deepEqual(Object.keys(waste), ['alice']);
    assert.equal(waste.alice[0].gpu, H);
    const period = p.locator('[data-table=waste] tr[data-key=alice] [data-idle-period]');
    assert.equal(await period.count(), 1);
    assert.match(await period.textContent(), /notebook.*Nov 2, 2026, 11:00 AM UTC – Nov 2, 2026, 12:00 PM UTC.*1 GPU.*1 h 0 min/);
    assert.equal(await p.locator('[data-total=idle]').textContent(), '1');
    await p.locator('[data-waste-group=class]').click();
    await p.locator('[data-table=waste] tbody tr[data-key="Deep Learning"]').waitFor();
    assert.match(await p.locator('[data-action=waste-csv]').getAttribute('href'), /^\/api\/v1\/usage\/waste\?group_by=class&.*format=csv/);
    await p.goto(`${srv.base}/#/admin/usage?group_by=user&period=week&${RANGE}&waste=user`);
    await p.locator('[data-table=waste] tbody tr[data-key=alice]').waitFor();
    await p.locator('[data-table=usage] tbody tr[data-key=carol]').waitFor();
    await shot(p, 'usage-admin-en');
    await p.context().close();
  });

  it('admin: the same page in 简体中文', async () => {
    const p = await newPage(browser, errors, 'zh-CN');
    await signIn(p, srv.base, 'admin', '登录');
    await p.goto(`${srv.base}/#/admin/usage?group_by=user&period=week&${RANGE}`);
    const bob = p.locator('[data-table=usage] tr[data-key=bob][data-period="2026-11-02T00:00:00Z"]');
    await bob.waitFor();
    assert.equal(await p.locator('h1').textContent(), '用量');
    assert.equal(await bob.locator('[data-field=gpu-used]').textContent(), '无法测量');
    assert.match(await p.locator('[data-table=usage] tr[data-key=carol] [data-field=period]').textContent(), /2026年11月9日 起的一周/);
    assert.equal(await p.locator('[data-period=month]').textContent(), '按月');
    await p.locator('[data-table=waste] tbody tr[data-key=alice]').waitFor();
    assert.match(await p.locator('[data-table=waste] tr[data-key=alice] [data-idle-period]').textContent(), /notebook.*实例.*1 个 GPU.*1 小时 0 分钟/);
    await shot(p, 'usage-admin-zh');
    await p.context().close();
  });

  it('a teacher sees their own class only, per student', async () => {
    for (const [locale, submit] of [['en-US', 'Sign in'], ['zh-CN', '登录']]) {
      const p = await newPage(browser, errors, locale);
      await signIn(p, srv.base, 'tina', submit);
      assert.equal(await p.locator('[data-nav="admin-usage"]').count(), 0);
      // from the class's tabs
      await p.goto(`${srv.base}/#/class?id=${dl}`);
      await p.locator('[data-tab=usage]').click();
      await p.locator('[data-page=class-usage]').waitFor();
      assert.match(p.url(), new RegExp(`#/class/usage\\?id=${dl}`));
      await p.goto(`${srv.base}/#/class/usage?id=${dl}&period=week&${RANGE}`);
      await p.locator('[data-table=usage] tbody tr[data-key=bob]').waitFor();
      assert.deepEqual(await p.locator('select[data-field=class] option').allTextContents(), ['Deep Learning · DL101']);
      const rows = await tableRows(p);
      assert.deepEqual(Object.keys(rows).sort(), ['alice', 'bob'], 'no carol: not in the class');
      assert.equal(rows.alice[0].gpu, 2 * H, 'alice in Deep Learning only, not her Robotics hour');
      assert.equal(rows.bob[0].gpu, 2 * H);
      assert.equal(await p.locator('[data-total=gpu]').textContent(), '4');
      assert.equal(await p.locator('[data-chart=usage] polyline').first().getAttribute('data-points'), '6');
      await p.locator('[data-table=waste] tbody tr[data-key=alice]').waitFor();
      const csv = await p.locator('[data-action=csv]').getAttribute('href');
      assert.match(csv, new RegExp(`class=${dl}`));
      const text = await p.evaluate(async (u) => (await fetch(u)).text(), csv);
      assert.doesNotMatch(text, /carol/);
      await shot(p, `usage-class-${locale === 'en-US' ? 'en' : 'zh'}`);
      if (locale === 'zh-CN') {
        assert.equal(await p.locator('[data-tab=usage]').textContent(), '用量');
        assert.equal(await p.locator('[data-table=usage] thead th').first().textContent(), '学生');
      }
      // another teacher's class: not shown; their own instead
      await p.goto(`${srv.base}/#/class/usage?id=${rob}&${RANGE}`);
      await p.locator('[data-page=class-usage] [data-not-teacher]').waitFor();
      await p.locator('[data-table=usage] tbody tr[data-key=alice]').waitFor();
      assert.equal(await p.locator('select[data-field=class]').inputValue(), String(dl));
      assert.equal((await tableRows(p)).alice[0].gpu, 2 * H);
      await p.context().close();
    }
  });

  it('a student cannot reach the admin page', async () => {
    const p = await newPage(browser, errors, 'en-US');
    await signIn(p, srv.base, 'alice', 'Sign in');
    assert.equal(await p.locator('[data-nav="admin-usage"]').count(), 0);
    await p.goto(`${srv.base}/#/admin/usage?${RANGE}`);
    await p.locator('[data-forbidden]').waitFor();
    assert.equal(await p.locator('[data-table=usage]').count(), 0);
    // and the class usage page says it is for teachers
    await p.goto(`${srv.base}/#/class/usage?id=${dl}`);
    await p.locator('[data-not-teacher]').waitFor();
    assert.equal(await p.locator('[data-table=usage]').count(), 0);
    // the API agrees: no one else's rows
    const c = new Client(srv.base);
    assert.equal((await c.login('alice', pass('alice'))).status, 200);
    const r = await c.get(`/api/v1/usage?group_by=user&period=total&from=2026-11-01T00:00:00Z&to=2026-12-01T00:00:00Z`);
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.json.rows.map((x) => x.key), ['alice']);
    await p.context().close();
  });
});
