// notifications.test.mjs — notifications in the API and by e-mail through a
// local SMTP sink (aiosmtpd, tests/lib/smtp_sink.py): a job that succeeds
// and one that fails, the idle warning and the idle stop, a class notice to
// its members, the quota-near rule (once per crossing), a header injection
// attempt through a notice, the retry of a refused mail, preferences, and
// the routes' tenant checks.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { assertErrorShape, stopClean } from '../lib/itest.mjs';
import { Client, startServer, ADMIN_PASSWORD } from '../lib/server.mjs';
import { startSink } from '../lib/smtp_sink.mjs';
import { world, mkUser, create, waitState, cleanup, sql, eventually } from './instances_lib.mjs';

async function notes(c, q = '') {
  const r = await c.get(`/api/v1/notifications${q}`);
  assert.equal(r.status, 200, r.text);
  return r.json.items;
}

async function waitNote(c, pred, what, ms = 30000) {
  let found = null;
  const ok = await eventually(async () => { found = (await notes(c)).find(pred); return !!found; }, ms, 200);
  assert.ok(ok, `no ${what} notification: ${JSON.stringify(await notes(c))}`);
  return found;
}

async function waitMail(sink, pred, what, ms = 15000) {
  let found = null;
  const ok = await eventually(async () => { found = sink.mails().find(pred); return !!found; }, ms, 200);
  assert.ok(ok, `no mail ${what}: ${JSON.stringify(sink.mails().map((m) => [m.rcpt, m.subject]))}`);
  return found;
}

describe('notifications', () => {
  let w, sink, alice, bob, tina;
  before(async () => {
    // the sink refuses the first mail: the mailer must try it again
    sink = await startSink({ failFirst: 1 });
    w = await world({
      node2: false,
      args: ['--reclaim-interval=1', `--smtp-url=${sink.url}`, '--smtp-from=gpucloud <noreply@gpucloud.test>',
        '--mail-poll-ms=200', '--mail-retry-s=1'],
    });
    alice = await mkUser(w, 'alice');
    bob = await mkUser(w, 'bob');
    tina = await mkUser(w, 'tina', 'teacher');
    for (const [u, email, language] of [[alice, 'alice@example.org', 'en'], [bob, 'bob@example.org', 'zh-CN']]) {
      const r = await u.c.req('PUT', '/api/v1/notifications/preferences', { email, language });
      assert.equal(r.status, 200, r.text);
      assert.equal(r.json.email, email);
      assert.equal(r.json.language, language);
      assert.equal(r.json.mail_enabled, true);
      assert.equal(r.json.email_kinds['job.failed'], true);
    }
  });
  after(async () => { try { await stopClean(w?.srv); } finally { cleanup(w?.srv); sink?.stop(); } });

  it('a job that succeeds and one that fails notify their owner and mail them', async () => {
    const sub = async (name, cmd) => {
      const r = await alice.c.post('/api/v1/jobs', { name, image_id: w.image.id, command: ['sh', '-c', cmd], cpu_millis: 200, mem_mib: 64 });
      assert.equal(r.status, 201, r.text);
      return r.json;
    };
    const ok = await sub('fine', 'exit 0');
    const bad = await sub('broken', 'echo oops; exit 3');
    const n1 = await waitNote(alice.c, (n) => n.kind === 'job.succeeded' && n.params.job_id === ok.id, 'job.succeeded');
    assert.equal(n1.params.name, 'fine');
    assert.equal(n1.link, `/job?id=${ok.id}`);
    assert.equal(n1.read, false);
    const n2 = await waitNote(alice.c, (n) => n.kind === 'job.failed' && n.params.job_id === bad.id, 'job.failed');
    assert.equal(n2.params.exit_code, 3);
    const m1 = await waitMail(sink, (m) => m.subject === 'Job fine finished', 'for the finished job');
    assert.deepEqual(m1.rcpt, ['alice@example.org']);
    assert.equal(m1.from, 'noreply@gpucloud.test');
    assert.match(m1.body, /Your job fine \(#\d+\) finished successfully\./);
    assert.match(m1.headers['content-type'][0], /charset=UTF-8/);
    const m2 = await waitMail(sink, (m) => m.subject === 'Job broken failed', 'for the failed job');
    assert.match(m2.body, /Exit code: 3\./);
    // the first mail was refused once (451): tried again, then sent
    const tried = await eventually(async () => (await notes(alice.c)).some((n) => n.mail.attempts >= 2 && n.mail.state === 'sent'), 10000);
    assert.ok(tried, 'a refused mail was retried');
    // bob has nothing of alice's
    assert.equal((await notes(bob.c)).filter((n) => n.kind.startsWith('job.')).length, 0);
  });

  it('the idle warning and the idle stop notify, in the user\'s language', async () => {
    const s = await w.admin.req('PUT', '/api/v1/idle-policies/student', { idle_seconds: 2, warn_seconds: 3 });
    assert.equal(s.status, 200, s.text);
    const inst = await create(bob.c, w, { name: 'sleepy', cmd: ['sleep', '3600'] });
    await waitState(bob.c, inst.id, 'running');
    const warn = await waitNote(bob.c, (n) => n.kind === 'instance.idle_warning' && n.params.instance_id === inst.id, 'idle warning');
    assert.equal(warn.params.name, 'sleepy');
    assert.equal(warn.params.idle_seconds, 2);
    assert.match(warn.params.stop_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    const stop = await waitNote(bob.c, (n) => n.kind === 'instance.stopped' && n.params.instance_id === inst.id, 'idle stop');
    assert.equal(stop.params.why, 'idle');
    // bob reads Chinese: the subject is RFC 2047 encoded UTF-8
    const m = await waitMail(sink, (x) => x.rcpt[0] === 'bob@example.org' && x.subject === '实例 sleepy 即将被停止', 'of the warning');
    assert.match(m.headers.subject[0], /^=\?UTF-8\?B\?/);
    assert.match(m.body, /你的实例 sleepy 已空闲 2 秒/);
    await waitMail(sink, (x) => x.rcpt[0] === 'bob@example.org' && x.subject === '实例 sleepy 已被停止', 'of the stop');
    sql(w.srv, "UPDATE idle_policies SET idle_seconds = NULL WHERE role = 'student'");
    assert.equal((await bob.c.del(`/api/v1/instances/${inst.id}`)).status, 202);
  });

  it('a class notice reaches every member but its author; CR/LF cannot inject headers', async () => {
    const cls = sql(w.srv, `INSERT INTO classes (name, teacher_id, code) VALUES ('Deep Learning', ${tina.id}, 'DL1') RETURNING id`);
    sql(w.srv, `INSERT INTO class_members (class_id, user_id, role) VALUES (${cls}, ${tina.id}, 'teacher'),
      (${cls}, ${alice.id}, 'student'), (${cls}, ${bob.id}, 'student')`);
    const body = 'Lab moved\r\nBcc: victim@evil.test\r\nSubject: pwned\r\n\r\nfake body';
    const p = await tina.c.post(`/api/v1/classes/${cls}/notices`, { body });
    assert.equal(p.status, 201, p.text);
    for (const u of [alice, bob]) {
      const n = await waitNote(u.c, (x) => x.kind === 'class.notice', 'class notice');
      assert.equal(n.params.class, 'Deep Learning');
      assert.equal(n.params.author, 'tina');
      assert.equal(n.params.body, body);
      assert.equal(n.link, `/class?id=${cls}`);
    }
    assert.equal((await notes(tina.c)).filter((n) => n.kind === 'class.notice').length, 0, 'not to its author');
    const m = await waitMail(sink, (x) => x.rcpt[0] === 'alice@example.org' && x.subject.startsWith('Notice in Deep Learning'), 'of the notice');
    assert.equal(m.subject, 'Notice in Deep Learning: Lab moved');
    assert.deepEqual(m.rcpt, ['alice@example.org']);
    assert.equal(m.headers.bcc, undefined);
    assert.equal(m.headers.subject.length, 1);
    assert.ok(!/victim/.test(m.head), 'nothing of the body in the headers');
    assert.match(m.body, /Bcc: victim@evil\.test/, 'the text stays in the body');
    // a class whose name holds CR/LF (the database allows it): still one
    // Subject, encoded
    const evil = sql(w.srv, `INSERT INTO classes (name, teacher_id, code) VALUES (E'Evil\\r\\nBcc: victim@evil.test', ${tina.id}, 'EV1') RETURNING id`);
    sql(w.srv, `INSERT INTO class_members (class_id, user_id, role) VALUES (${evil}, ${tina.id}, 'teacher'), (${evil}, ${alice.id}, 'student')`);
    assert.equal((await tina.c.post(`/api/v1/classes/${evil}/notices`, { body: 'hello' })).status, 201);
    const e = await waitMail(sink, (x) => x.subject.startsWith('Notice in Evil'), 'of the evil class');
    assert.equal(e.subject, 'Notice in Evil  Bcc: victim@evil.test: hello');
    assert.equal(e.headers.bcc, undefined);
    assert.equal(e.headers.subject.length, 1);
    assert.deepEqual(e.rcpt, ['alice@example.org']);
    // every mail so far went to its one recipient
    for (const x of sink.mails()) assert.equal(x.rcpt.length, 1);
  });

  it('quota near its limit: once per crossing of 90 %, again after falling below 80 %', async () => {
    const area = `home:${alice.id}`;
    sql(w.srv, `INSERT INTO storage_areas (area, user_id) VALUES ('${area}', ${alice.id}) ON CONFLICT DO NOTHING`);
    sql(w.srv, `UPDATE storage_areas SET bytes_hard = 1000 WHERE area = '${area}'`);
    const count = async () => (await notes(alice.c)).filter((n) => n.kind === 'quota.storage').length;
    // what a quota scan writes
    sql(w.srv, `UPDATE storage_areas SET bytes = 850 WHERE area = '${area}'`);
    assert.equal(await count(), 0);
    sql(w.srv, `UPDATE storage_areas SET bytes = 920 WHERE area = '${area}'`);
    sql(w.srv, `UPDATE storage_areas SET bytes = 960 WHERE area = '${area}'`);
    sql(w.srv, `UPDATE storage_areas SET bytes = 850 WHERE area = '${area}'`);
    sql(w.srv, `UPDATE storage_areas SET bytes = 930 WHERE area = '${area}'`);
    assert.equal(await count(), 1, 'once per crossing');
    const n = (await notes(alice.c)).find((x) => x.kind === 'quota.storage');
    assert.deepEqual({ ...n.params }, { area, bytes: 920, limit_bytes: 1000, percent: 92 });
    sql(w.srv, `UPDATE storage_areas SET bytes = 100 WHERE area = '${area}'`);
    sql(w.srv, `UPDATE storage_areas SET bytes = 990 WHERE area = '${area}'`);
    assert.equal(await count(), 2, 'again after falling below 80 %');
    sql(w.srv, `UPDATE storage_areas SET bytes_hard = NULL WHERE area = '${area}'`);
    // GPU-hours in a pool against the weekly limit, as releases add them
    const q = await w.admin.req('PUT', '/api/v1/quotas', { user_id: bob.id, pool: 'a100', gpu_hours_per_week: 1 });
    assert.equal(q.status, 200, q.text);
    const pool = sql(w.srv, "SELECT id FROM pools WHERE name = 'a100'");
    sql(w.srv, `INSERT INTO gpu_usage (user_id, pool_id, day, gpu_seconds) VALUES (${bob.id}, ${pool}, current_date, 3000)`);
    assert.equal((await notes(bob.c)).filter((x) => x.kind === 'quota.gpu_hours').length, 0);
    sql(w.srv, `UPDATE gpu_usage SET gpu_seconds = 3300 WHERE user_id = ${bob.id}`);
    sql(w.srv, `UPDATE gpu_usage SET gpu_seconds = 3500 WHERE user_id = ${bob.id}`);
    const g = (await notes(bob.c)).filter((x) => x.kind === 'quota.gpu_hours');
    assert.equal(g.length, 1);
    assert.equal(g[0].params.pool, 'a100');
    assert.equal(g[0].params.limit_hours, 1);
    assert.equal(g[0].params.percent, 91);
    await waitMail(sink, (x) => x.rcpt[0] === 'bob@example.org' && x.subject === '资源池 a100 的 GPU 时长已用 91%', 'of the GPU-hours');
  });

  it('lists with a cursor and the unread filter; marks read and unread; deletes', async () => {
    const all = await notes(alice.c);
    assert.ok(all.length >= 5, JSON.stringify(all));
    const p1 = await alice.c.get('/api/v1/notifications?limit=2');
    assert.equal(p1.json.items.length, 2);
    assert.ok(p1.json.next_cursor);
    const p2 = await alice.c.get(`/api/v1/notifications?limit=2&cursor=${p1.json.next_cursor}`);
    assert.ok(p2.json.items[0].id < p1.json.items[1].id);
    const c0 = (await alice.c.get('/api/v1/notifications/unread_count')).json.unread;
    assert.equal(c0, all.length);
    assert.equal((await alice.c.post(`/api/v1/notifications/${all[0].id}/read`)).status, 204);
    assert.equal((await alice.c.get('/api/v1/notifications/unread_count')).json.unread, c0 - 1);
    assert.equal((await notes(alice.c, '?unread=1')).length, c0 - 1);
    assert.equal((await notes(alice.c)).find((n) => n.id === all[0].id).read, true);
    assert.equal((await alice.c.post(`/api/v1/notifications/${all[0].id}/unread`)).status, 204);
    assert.equal((await alice.c.get('/api/v1/notifications/unread_count')).json.unread, c0);
    const ra = await alice.c.post('/api/v1/notifications/read_all');
    assert.equal(ra.status, 200);
    assert.equal(ra.json.marked, c0);
    assert.equal((await alice.c.get('/api/v1/notifications/unread_count')).json.unread, 0);
    assert.equal((await alice.c.del(`/api/v1/notifications/${all[0].id}`)).status, 204);
    assert.equal((await alice.c.del(`/api/v1/notifications/${all[0].id}`)).status, 404);
    assert.equal((await notes(alice.c)).length, all.length - 1);
  });

  it('tenant checks, read-only tokens, CSRF, expired sessions, bad input', async () => {
    const mine = (await notes(bob.c))[0];
    // another user's notification is not there
    for (const r of [await alice.c.post(`/api/v1/notifications/${mine.id}/read`),
      await alice.c.post(`/api/v1/notifications/${mine.id}/unread`),
      await alice.c.del(`/api/v1/notifications/${mine.id}`),
      await w.admin.del(`/api/v1/notifications/${mine.id}`)]) {
      assert.equal(r.status, 404, r.text);
      assertErrorShape(r.json, 'not_found');
    }
    assert.ok(!(await notes(w.admin)).some((n) => n.id === mine.id), 'not even an admin lists it');
    assert.equal((await notes(bob.c)).find((n) => n.id === mine.id).read, false);
    // a read-only token reads, but cannot mark or change preferences
    const tok = await bob.c.post('/api/v1/tokens', { name: 'ro', scopes: ['read'] });
    assert.equal(tok.status, 201, tok.text);
    const ro = new Client(w.srv.base);
    ro.token = tok.json.token;
    assert.equal((await ro.get('/api/v1/notifications')).status, 200);
    assert.equal((await ro.get('/api/v1/notifications/preferences')).status, 200);
    assert.equal((await ro.post(`/api/v1/notifications/${mine.id}/read`)).status, 403);
    assert.equal((await ro.post('/api/v1/notifications/read_all')).status, 403);
    assert.equal((await ro.req('PUT', '/api/v1/notifications/preferences', { language: 'en' })).status, 403);
    // cookie mutations need the CSRF token and our Origin
    assert.equal((await bob.c.req('POST', `/api/v1/notifications/${mine.id}/read`, undefined, { 'x-csrf-token': 'nope' })).status, 403);
    assert.equal((await bob.c.req('POST', '/api/v1/notifications/read_all', undefined, { origin: 'http://evil.test' })).status, 403);
    assert.equal((await bob.c.req('PUT', '/api/v1/notifications/preferences', { email: 'x@evil.test' }, { origin: 'http://evil.test' })).status, 403);
    assert.equal((await notes(bob.c)).find((n) => n.id === mine.id).read, false, 'nothing was marked');
    // an expired session
    const gone = await mkUser(w, 'gone');
    sql(w.srv, `UPDATE sessions SET created_at = now() - interval '2 hours', expires_at = now() - interval '1 second' WHERE user_id = ${gone.id}`);
    assert.equal((await gone.c.get('/api/v1/notifications')).status, 401);
    assert.equal((await gone.c.get('/api/v1/notifications/unread_count')).status, 401);
    // bad input
    for (const [m, p, b] of [['GET', '/api/v1/notifications?unread=maybe'], ['GET', '/api/v1/notifications?limit=x'],
      ['PUT', '/api/v1/notifications/preferences', { email: 'a@b.c\r\nBcc: x@evil.test' }],
      ['PUT', '/api/v1/notifications/preferences', { email: 'not-an-address' }],
      ['PUT', '/api/v1/notifications/preferences', { language: 'fr' }],
      ['PUT', '/api/v1/notifications/preferences', { email_kinds: { 'job.nope': false } }],
      ['PUT', '/api/v1/notifications/preferences', { email_kinds: { 'job.failed': 'no' } }],
      ['PUT', '/api/v1/notifications/preferences', { extra: 1 }],
      ['PUT', '/api/v1/notifications/preferences', '{not json']]) {
      const r = await bob.c.req(m, p, b, typeof b === 'string' ? { 'content-type': 'application/json' } : {});
      assert.equal(r.status, 400, `${m} ${p} ${JSON.stringify(b)}: ${r.text}`);
      assertErrorShape(r.json, 'invalid');
    }
    for (const p of ['/api/v1/notifications/abc/read', '/api/v1/notifications/0/read'])
      assert.equal((await bob.c.post(p)).status, 404);
    // turning a kind off: its notifications are still listed, not mailed
    const off = await alice.c.req('PUT', '/api/v1/notifications/preferences', { email_kinds: { 'job.succeeded': false, 'job.failed': true } });
    assert.equal(off.status, 200, off.text);
    assert.equal(off.json.email_kinds['job.succeeded'], false);
    assert.equal(off.json.email_kinds['job.failed'], true);
    assert.equal(off.json.email, 'alice@example.org', 'the address stays');
    const j = await alice.c.post('/api/v1/jobs', { name: 'quiet', image_id: w.image.id, command: ['true'], cpu_millis: 200, mem_mib: 64 });
    assert.equal(j.status, 201, j.text);
    const n = await waitNote(alice.c, (x) => x.kind === 'job.succeeded' && x.params.name === 'quiet', 'quiet job');
    assert.equal(n.mail.state, 'none');
    assert.ok(!sink.mails().some((x) => x.subject === 'Job quiet finished'));
  });
});

describe('mail over a server that offers no STARTTLS', () => {
  it('smtp_tls=required sends nothing in the clear: the mail fails with the reason', async () => {
    const sink = await startSink();
    const srv = await startServer({ args: ['--scrypt-ln=10', `--smtp-url=${sink.url}`, '--smtp-tls=required',
      '--mail-poll-ms=200', '--mail-max-attempts=1'] });
    try {
      const admin = new Client(srv.base);
      assert.equal((await admin.login('admin', ADMIN_PASSWORD)).status, 200);
      const u = await admin.post('/api/v1/users', { username: 'tls', role: 'student', password: 'tls-pass-123', email: 'tls@example.org' });
      assert.equal(u.status, 201, u.text);
      sql(srv, `SELECT gc_notify(${u.json.user.id}, 'job.succeeded', '{"name":"x","job_id":1}', '/job?id=1')`);
      const c = new Client(srv.base);
      assert.equal((await c.login('tls', 'tls-pass-123')).status, 200);
      let n = null;
      const done = await eventually(async () => { n = (await notes(c))[0]; return n.mail.state === 'failed'; }, 10000);
      assert.ok(done, JSON.stringify(n));
      assert.ok(n.mail.error.length > 0);
      assert.equal(sink.mails().length, 0);
    } finally { await srv.stop(); sink.stop(); }
  });
});
