// Account administration (issue 12, item 6): edit, role change, disable,
// soft delete keeping the history, the last active admin, forced password
// changes after a reset or an import, and the CSV import's one-pass report
// with line numbers and its dry run.
//
// Each login costs about 0.5 s of scrypt: sessions are reused.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, Client, ADMIN_PASSWORD } from '../lib/server.mjs';
import { call, sql, assertErrorShape, eventually, stopClean } from '../lib/itest.mjs';

const PW = {
  stu: 'student-pass-01',
  tea: 'teacher-pass-01',
  res: 'research-pass-01',
  adm2: 'second-admin-01',
  adm3: 'third-admin-001',
  gone: 'gone-user-pass-1',
  edit: 'edit-user-pass-1',
  fc: 'forced-change-01',
};
const ROLES = { stu: 'student', tea: 'teacher', res: 'researcher', adm2: 'admin', adm3: 'admin', gone: 'student', edit: 'student', fc: 'student' };

describe('user administration', () => {
  let srv, admin;
  const ids = {};
  const s = {};   // sessions by username

  const csv = (text, q = '') => admin.req('POST', `/api/v1/users/import${q}`, Buffer.from(text), { 'content-type': 'text/csv' });
  const count = (like) => sql(srv, `SELECT count(*) FROM users WHERE username LIKE '${like}'`);

  async function loginAs(user, password = PW[user]) {
    const c = new Client(srv.base);
    const r = await c.login(user, password);
    assert.equal(r.status, 200, `login ${user}: ${r.text}`);
    c.loginReply = r.json;
    return c;
  }

  before(async () => {
    srv = await startServer();
    admin = new Client(srv.base);
    assert.equal((await admin.login('admin', ADMIN_PASSWORD)).status, 200);
    for (const u of Object.keys(PW)) {
      const r = await admin.post('/api/v1/users', { username: u, role: ROLES[u], password: PW[u], display_name: `User ${u}` });
      assert.equal(r.status, 201, r.text);
      assert.equal(r.json.user.must_change_password, false);
      assert.equal(r.json.user.deleted_at, null);
      ids[u] = r.json.user.id;
    }
    for (const u of ['stu', 'tea', 'res', 'gone']) s[u] = await loginAs(u);
  });
  after(async () => { await stopClean(srv); });

  describe('who may call', () => {
    it('refuses every other role, with 403, on every users route', async () => {
      for (const u of ['stu', 'tea', 'res']) {
        for (const [m, p, b] of [['GET', '/api/v1/users'], ['GET', '/api/v1/users?deleted=true'],
          ['PATCH', `/api/v1/users/${ids.edit}`, { role: 'admin' }], ['PATCH', `/api/v1/users/${ids[u]}`, { role: 'admin' }],
          ['DELETE', `/api/v1/users/${ids.edit}`]]) {
          const r = await s[u].req(m, p, b);
          assert.equal(r.status, 403, `${u} ${m} ${p}: ${r.text}`);
          assertErrorShape(r.json, 'forbidden');
        }
        const imp = await s[u].req('POST', '/api/v1/users/import?dry_run=true', 'username,role\nx-imp,admin\n', { 'content-type': 'text/csv' });
        assert.equal(imp.status, 403);
      }
      assert.equal(sql(srv, `SELECT role || ' ' || (deleted_at IS NULL) FROM users WHERE id = ${ids.edit}`), 'student true');
    });

    it('refuses an expired session (401) and a read-only token for changes (403)', async () => {
      const c = await loginAs('adm3');
      sql(srv, `UPDATE sessions SET expires_at = now() - interval '1 second', created_at = now() - interval '1 hour' WHERE user_id = ${ids.adm3}`);
      const r = await c.del(`/api/v1/users/${ids.edit}`);
      assert.equal(r.status, 401, r.text);
      assertErrorShape(r.json, 'unauthorized');
      const tok = await admin.post('/api/v1/tokens', { name: 'users-read', scopes: ['read'] });
      assert.equal(tok.status, 201, tok.text);
      const list = await call(srv.base, 'GET', '/api/v1/users?deleted=true', { bearer: tok.json.token });
      assert.equal(list.status, 200);
      for (const [m, p, b] of [['DELETE', `/api/v1/users/${ids.edit}`], ['PATCH', `/api/v1/users/${ids.edit}`, { display_name: 'x' }]]) {
        const w = await call(srv.base, m, p, { bearer: tok.json.token, body: b });
        assert.equal(w.status, 403, `${m} with a read token: ${w.text}`);
        assertErrorShape(w.json, 'forbidden');
      }
      assert.equal(sql(srv, `SELECT deleted_at IS NULL FROM users WHERE id = ${ids.edit}`), 't');
    });

    it('wants the CSRF token and our Origin on cookie-authenticated changes', async () => {
      const cookie = admin.cookieHeader();
      const noCsrf = await call(srv.base, 'DELETE', `/api/v1/users/${ids.edit}`, { cookie, origin: srv.base });
      assert.equal(noCsrf.status, 403);
      assertErrorShape(noCsrf.json, 'forbidden');
      const evil = await call(srv.base, 'PATCH', `/api/v1/users/${ids.edit}`, { cookie, csrf: admin.csrf, origin: 'http://evil.example', body: { role: 'admin' } });
      assert.equal(evil.status, 403);
      const imp = await call(srv.base, 'POST', '/api/v1/users/import', { cookie, origin: srv.base, body: 'username,role\nx-csrf,admin\n', ctype: 'text/csv' });
      assert.equal(imp.status, 403);
      assert.equal(count('x-%'), '0');
      assert.equal(sql(srv, `SELECT role || ' ' || (deleted_at IS NULL) FROM users WHERE id = ${ids.edit}`), 'student true');
    });
  });

  describe('edit', () => {
    it('changes name, email and role, and audits a role change as user.role', async () => {
      const r = await admin.patch(`/api/v1/users/${ids.edit}`, { display_name: 'Edited Name', email: 'edit@example.org', role: 'teacher' });
      assert.equal(r.status, 200, r.text);
      assert.equal(r.json.display_name, 'Edited Name');
      assert.equal(r.json.email, 'edit@example.org');
      assert.equal(r.json.role, 'teacher');
      assert.ok(await eventually(() => sql(srv, "SELECT count(*) FROM audit_log WHERE action = 'user.role' AND target = 'edit'") === '1', 3000));
      const n = await admin.patch(`/api/v1/users/${ids.edit}`, { display_name: 'Only the name' });
      assert.equal(n.status, 200);
      assert.equal(n.json.role, 'teacher', 'an edit of the name keeps the role');
      assert.ok(await eventually(() => sql(srv, "SELECT count(*) FROM audit_log WHERE action = 'user.update' AND target = 'edit'") === '1', 3000));
    });

    it('rejects bad input with a clear 400 and unknown ids with 404', async () => {
      for (const body of [{}, { role: 'wizard' }, { email: 'no-at-sign' }, { display_name: 'a\u0001b' }, { disabled: 'yes' },
        { username: 'renamed' }, { must_change_password: 1 }]) {
        const r = await admin.patch(`/api/v1/users/${ids.edit}`, body);
        assert.equal(r.status, 400, `${JSON.stringify(body)}: ${r.text}`);
        assertErrorShape(r.json, 'invalid');
      }
      const bad = await admin.req('PATCH', `/api/v1/users/${ids.edit}`, '{"role":', { 'content-type': 'application/json' });
      assert.equal(bad.status, 400);
      for (const id of ['999999', 'abc', '-1']) {
        const r = await admin.patch(`/api/v1/users/${id}`, { display_name: 'x' });
        assert.equal(r.status, 404, `PATCH ${id}`);
        assertErrorShape(r.json, 'not_found');
        const d = await admin.del(`/api/v1/users/${id}`);
        assert.equal(d.status, 404, `DELETE ${id}`);
        assertErrorShape(d.json, 'not_found');
      }
      const q = await admin.get('/api/v1/users?deleted=maybe');
      assert.equal(q.status, 400);
      assertErrorShape(q.json, 'invalid');
      assert.equal(sql(srv, `SELECT role FROM users WHERE id = ${ids.edit}`), 'teacher');
    });

    it('disables and enables; a disabled user is logged out', async () => {
      const c = await loginAs('edit');
      const off = await admin.patch(`/api/v1/users/${ids.edit}`, { disabled: true });
      assert.equal(off.status, 200);
      assert.equal(off.json.disabled, true);
      assert.equal((await c.get('/api/v1/me')).status, 401);
      const on = await admin.patch(`/api/v1/users/${ids.edit}`, { disabled: false });
      assert.equal(on.json.disabled, false);
      await loginAs('edit');
    });
  });

  describe('the last active admin', () => {
    it('refuses self-demotion, self-disabling and self-deletion with 409', async () => {
      const me = (await admin.get('/api/v1/me')).json.user.id;
      for (const body of [{ role: 'student' }, { disabled: true }]) {
        const r = await admin.patch(`/api/v1/users/${me}`, body);
        assert.equal(r.status, 409);
        assertErrorShape(r.json, 'conflict');
      }
      const d = await admin.del(`/api/v1/users/${me}`);
      assert.equal(d.status, 409);
      assertErrorShape(d.json, 'conflict');
      assert.equal(sql(srv, `SELECT role || ' ' || disabled || ' ' || (deleted_at IS NULL) FROM users WHERE id = ${me}`), 'admin false true');
    });

    it('keeps one active admin even when two admins demote each other at once', async () => {
      const a2 = await loginAs('adm2');
      const me = (await admin.get('/api/v1/me')).json.user.id;
      // adm3 is an admin too; take it out of the way first (allowed: two remain)
      const off = await admin.patch(`/api/v1/users/${ids.adm3}`, { role: 'teacher' });
      assert.equal(off.status, 200, off.text);
      const [x, y] = await Promise.all([
        admin.patch(`/api/v1/users/${ids.adm2}`, { role: 'student' }),
        a2.patch(`/api/v1/users/${me}`, { role: 'student' }),
      ]);
      const codes = [x.status, y.status].sort().join(',');
      assert.ok(codes === '200,409' || codes === '200,403', `both demotions went through: ${codes} ${x.text} ${y.text}`);
      assert.equal(sql(srv, "SELECT count(*) FROM users WHERE role = 'admin' AND NOT disabled AND deleted_at IS NULL"), '1');
      // put things back: whoever is admin promotes the other
      const boss = x.status === 200 ? admin : a2;
      const other = x.status === 200 ? ids.adm2 : me;
      assert.equal((await boss.patch(`/api/v1/users/${other}`, { role: 'admin' })).status, 200);
      if (boss !== admin) assert.equal((await admin.login('admin', ADMIN_PASSWORD)).status, 200);
    });

    it('is kept by the database itself (trigger), whatever the statement', async () => {
      sql(srv, `UPDATE users SET role = 'student' WHERE id = ${ids.adm2}`);
      assert.throws(() => sql(srv, "UPDATE users SET role = 'student' WHERE username = 'admin'"), /last active admin/);
      assert.throws(() => sql(srv, "UPDATE users SET disabled = true WHERE username = 'admin'"), /last active admin/);
      assert.throws(() => sql(srv, "DELETE FROM users WHERE username = 'admin'"), /last active admin/);
      sql(srv, `UPDATE users SET role = 'admin' WHERE id = ${ids.adm2}`);
      sql(srv, "UPDATE users SET disabled = true WHERE username = 'admin'");
      assert.throws(() => sql(srv, `UPDATE users SET disabled = true WHERE id = ${ids.adm2}`), /last active admin/);
      sql(srv, "UPDATE users SET disabled = false WHERE username = 'admin'");
      assert.equal((await admin.get('/api/v1/me')).status, 200);
    });
  });

  describe('soft delete', () => {
    let inst, stopped;

    it('deletes: sessions and tokens end, instances stop, the history stays', async () => {
      const tok = await s.gone.post('/api/v1/tokens', { name: 'gone-script', scopes: ['read', 'write'] });
      assert.equal(tok.status, 201, tok.text);
      const img = sql(srv, "INSERT INTO images (reference, display_name) VALUES ('example.org/test/users:1', 'users test') RETURNING id");
      inst = sql(srv, `INSERT INTO instances (user_id, name, image_id, state, desired) VALUES (${ids.gone}, 'busy', ${img}, 'running', 'running') RETURNING id`);
      stopped = sql(srv, `INSERT INTO instances (user_id, name, image_id, state, desired) VALUES (${ids.gone}, 'idle', ${img}, 'stopped', 'stopped') RETURNING id`);
      const raw = sql(srv, `INSERT INTO alloc_requests (user_id, slices, cpu_millis, mem_mib) VALUES (${ids.gone}, 0, 100, 64) RETURNING id`);
      const audits = sql(srv, `SELECT count(*) FROM audit_log WHERE actor_id = ${ids.gone}`);
      assert.ok(Number(audits) >= 2, 'login and token creation are audited');

      const r = await admin.del(`/api/v1/users/${ids.gone}`);
      assert.equal(r.status, 200, r.text);
      assert.equal(r.json.username, 'gone');
      assert.equal(typeof r.json.deleted_at, 'string');
      assert.equal(r.json.disabled, true);

      assert.equal((await s.gone.get('/api/v1/me')).status, 401, 'the session survives');
      assert.equal((await call(srv.base, 'GET', '/api/v1/me', { bearer: tok.json.token })).status, 401, 'the token survives');
      assert.equal((await new Client(srv.base).login('gone', PW.gone)).status, 401, 'a deleted account logs in');
      assert.equal(sql(srv, `SELECT desired FROM instances WHERE id = ${inst}`), 'stopped');
      assert.match(sql(srv, `SELECT reason FROM instances WHERE id = ${inst}`), /deleted by admin/);
      assert.equal(sql(srv, `SELECT state || ' ' || release_reason FROM alloc_requests WHERE id = ${raw}`), 'cancelled the account was deleted');
      // the history stays and still names them
      assert.ok(Number(sql(srv, `SELECT count(*) FROM audit_log WHERE actor_id = ${ids.gone}`)) >= Number(audits));
      assert.equal(sql(srv, `SELECT count(*) FROM instances WHERE user_id = ${ids.gone}`), '2');
      assert.equal(sql(srv, `SELECT username || ' ' || (deleted_by IS NOT NULL) FROM users WHERE id = ${ids.gone}`), 'gone true');
      assert.ok(await eventually(() => sql(srv, "SELECT count(*) FROM audit_log WHERE action = 'user.delete' AND target = 'gone'") === '1', 3000));
    });

    it('lists deleted accounts apart, and keeps them out of every change', async () => {
      const live = await admin.get('/api/v1/users?limit=500');
      assert.ok(!live.json.items.some((u) => u.username === 'gone'), 'a deleted user in the normal list');
      const dead = await admin.get('/api/v1/users?deleted=true');
      assert.deepEqual(dead.json.items.map((u) => u.username), ['gone']);
      const one = await admin.get(`/api/v1/users/${ids.gone}`);
      assert.equal(one.status, 200);
      assert.notEqual(one.json.deleted_at, null);
      const again = await admin.del(`/api/v1/users/${ids.gone}`);
      assert.equal(again.status, 404);
      const edit = await admin.patch(`/api/v1/users/${ids.gone}`, { disabled: false });
      assert.equal(edit.status, 409, edit.text);
      assertErrorShape(edit.json, 'conflict');
      const reset = await admin.post(`/api/v1/users/${ids.gone}/password`, {});
      assert.equal(reset.status, 404);
      assert.equal(sql(srv, `SELECT disabled FROM users WHERE id = ${ids.gone}`), 't');
    });

    it("never starts a deleted account's work again", async () => {
      const r = await admin.post(`/api/v1/instances/${stopped}/start`, {});
      assert.equal(r.status, 409, r.text);
      assertErrorShape(r.json, 'conflict');
      assert.match(r.json.error.message, /deleted/);
      assert.equal(sql(srv, `SELECT state || ' ' || desired FROM instances WHERE id = ${stopped}`), 'stopped stopped');
      assert.throws(() => sql(srv, `INSERT INTO alloc_requests (user_id, slices, cpu_millis, mem_mib) VALUES (${ids.gone}, 0, 100, 64)`), /deleted/);
      assert.throws(() => sql(srv, `INSERT INTO instances (user_id, name) VALUES (${ids.gone}, 'sneaky')`), /deleted/);
    });
  });

  describe('forced password change', () => {
    it('after an admin reset: only /me, logout and the change until a new password is chosen', async () => {
      const r = await admin.post(`/api/v1/users/${ids.fc}/password`, {});
      assert.equal(r.status, 200, r.text);
      const one = r.json.password;
      assert.equal(sql(srv, `SELECT must_change_password FROM users WHERE id = ${ids.fc}`), 't');
      const c = await loginAs('fc', one);
      assert.equal(c.loginReply.user.must_change_password, true, 'the login reply says so');
      const me = await c.get('/api/v1/me');
      assert.equal(me.status, 200);
      assert.equal(me.json.user.must_change_password, true);
      for (const [m, p, b] of [['GET', '/api/v1/instances'], ['GET', '/api/v1/tokens'], ['POST', '/api/v1/tokens', { name: 't', scopes: ['read'] }],
        ['GET', '/api/v1/files/home/']]) {
        const x = await c.req(m, p, b);
        assert.equal(x.status, 403, `${m} ${p}: ${x.text}`);
        assertErrorShape(x.json, 'password_change_required');
      }
      // the change itself still wants CSRF
      const noCsrf = await call(srv.base, 'POST', '/api/v1/me/password', { cookie: c.cookieHeader(), origin: srv.base, body: { current_password: one, new_password: 'my-own-password-1' } });
      assert.equal(noCsrf.status, 403);
      const same = await c.post('/api/v1/me/password', { current_password: one, new_password: one });
      assert.equal(same.status, 400, 'the one-time password kept');
      assertErrorShape(same.json, 'invalid');
      const wrong = await c.post('/api/v1/me/password', { current_password: 'not-the-one-time', new_password: 'my-own-password-1' });
      assert.equal(wrong.status, 403);
      const ok = await c.post('/api/v1/me/password', { current_password: one, new_password: 'my-own-password-1' });
      assert.equal(ok.status, 204, ok.text);
      assert.equal((await c.get('/api/v1/instances')).status, 200);
      assert.equal((await c.get('/api/v1/me')).json.user.must_change_password, false);
    });

    it('is not forced when the admin resets with must_change_password false', async () => {
      const r = await admin.post(`/api/v1/users/${ids.fc}/password`, { password: 'chosen-by-admin-1', must_change_password: false });
      assert.equal(r.status, 200, r.text);
      assert.equal(r.json.password, undefined);
      const c = await loginAs('fc', 'chosen-by-admin-1');
      assert.equal(c.loginReply.user.must_change_password, false);
      assert.equal((await c.get('/api/v1/instances')).status, 200);
      const bad = await admin.post(`/api/v1/users/${ids.fc}/password`, { must_change_password: 'no' });
      assert.equal(bad.status, 400);
    });

    it('can be asked for at creation and by PATCH', async () => {
      const r = await admin.post('/api/v1/users', { username: 'fc-new', role: 'student', password: 'fc-new-pass-01', must_change_password: true });
      assert.equal(r.status, 201, r.text);
      assert.equal(r.json.user.must_change_password, true);
      const c = await loginAs('fc-new', 'fc-new-pass-01');
      assert.equal((await c.get('/api/v1/instances')).status, 403);
      const p = await admin.patch(`/api/v1/users/${r.json.user.id}`, { must_change_password: false });
      assert.equal(p.status, 200);
      assert.equal(p.json.must_change_password, false);
      assert.equal((await c.get('/api/v1/instances')).status, 200);
    });
  });

  describe('CSV import', () => {
    it('reports every problem of the file with its line number, in one reply, and creates nothing', async () => {
      const text = [
        'username,display_name,email,role,password', // 1
        'imp-a1,"Ann, A",ann@example.org,student,', // 2
        'Bad Name,,,student,', // 3
        'imp-a2,"two', // 4: a quoted name over two lines (a control character in a name)
        'lines",,researcher,', // 5
        'imp-a3,,,wizard,', // 6
        'imp-a4,"unbalanced,,student,', // 7: malformed from here...
        '',
        'imp-a5,,student', // 9: too few fields
        'imp-a1,,,teacher,', // 10: repeats line 2
        'stu,,,student,', // 11: exists
        'gone,,,student,', // 12: a deleted account's name
        'imp-a6,,not-an-email,student,', // 13
        'imp-a7,,,student,short', // 14
        'imp-ok,,,student,', // 15
      ].join('\n') + '\n';
      const r = await csv(text);
      assert.equal(r.status, 400, r.text);
      assertErrorShape(r.json, 'invalid');
      const lines = r.json.error.details.map((d) => d.line);
      assert.deepEqual(lines, [...lines].sort((a, b) => a - b), 'problems in file order');
      for (const want of [3, 4, 6, 9, 10, 11, 12, 13, 14]) assert.ok(lines.includes(want), `line ${want} missing from ${JSON.stringify(r.json.error.details)}`);
      assert.ok(lines.includes(7), 'the malformed line');
      assert.ok(!lines.includes(2) && !lines.includes(5) && !lines.includes(15), 'good lines reported');
      const msg = Object.fromEntries(r.json.error.details.map((d) => [d.line, d.message]));
      assert.match(msg[10], /twice.*line 2/);
      assert.match(msg[11], /already exists/);
      assert.match(msg[12], /deleted account/);
      assert.match(r.json.error.message, /problems/);
      assert.equal(count('imp-%'), '0', 'a file with problems created users');
    });

    it('names a line that is not UTF-8 (a Latin-1 spreadsheet export) instead of failing', async () => {
      // found by fuzz_users_import: a message quoting such bytes was no JSON and got lost
      const body = Buffer.concat([Buffer.from('username,display_name,role\nimp-l1,Andr'), Buffer.from([0xe9]),
        Buffer.from(',student\nimp-l2,\u4e2d\u6587,student\n')]);
      const r = await admin.req('POST', '/api/v1/users/import', body, { 'content-type': 'text/csv' });
      assert.equal(r.status, 400, r.text);
      assert.deepEqual(r.json.error.details.map((d) => d.line), [2]);
      assert.match(r.json.error.details[0].message, /UTF-8/);
      const head = Buffer.concat([Buffer.from('username,r'), Buffer.from([0xf4]), Buffer.from('le\nimp-l3,student\n')]);
      const h = await admin.req('POST', '/api/v1/users/import', head, { 'content-type': 'text/csv' });
      assert.equal(h.status, 400, h.text);
      assert.deepEqual(h.json.error.details.map((d) => d.line), [1]);
      assert.equal(count('imp-l%'), '0');
    });

    it('reports the lines after a multi-line field with the right numbers', async () => {
      const r = await csv('username,display_name,role\nimp-m1,"one\ntwo\nthree",student\nimp-m2,,wizard\n');
      assert.equal(r.status, 400);
      // the name spanning lines 2-4 is refused (control characters); the next record is line 5
      assert.deepEqual(r.json.error.details.map((d) => d.line), [2, 5]);
    });

    it('checks only with ?dry_run=true, then imports; imported users must change their password', async () => {
      const text = 'username,display_name,email,role,password\nimp-d1,Dee One,d1@example.org,student,\nimp-d2,Dee Two,,researcher,imp-d2-pass-01\n';
      const bad = await csv(text, '?dry_run=perhaps');
      assert.equal(bad.status, 400);
      const dry = await csv(text, '?dry_run=true');
      assert.equal(dry.status, 200, dry.text);
      assert.equal(dry.json.dry_run, true);
      assert.deepEqual(dry.json.users.map((u) => [u.line, u.username, u.role, u.password_given]),
        [[2, 'imp-d1', 'student', false], [3, 'imp-d2', 'researcher', true]]);
      assert.ok(!JSON.stringify(dry.json).includes('imp-d2-pass-01'), 'a dry run echoes a password');
      assert.equal(count('imp-d%'), '0', 'a dry run created users');
      const dryBad = await csv('username,role\nimp-d3,wizard\n', '?dry_run=true');
      assert.equal(dryBad.status, 400);
      assert.deepEqual(dryBad.json.error.details.map((d) => d.line), [2]);

      const r = await csv(text);
      assert.equal(r.status, 200, r.text);
      assert.equal(r.json.must_change_password, true);
      const created = Object.fromEntries(r.json.created.map((u) => [u.username, u]));
      assert.equal(typeof created['imp-d1'].password, 'string');
      assert.equal(created['imp-d1'].display_name, 'Dee One');
      assert.equal(created['imp-d1'].role, 'student');
      assert.equal(created['imp-d2'].password, undefined, 'a given password is echoed');
      assert.equal(sql(srv, "SELECT string_agg(must_change_password::text, ',') FROM users WHERE username LIKE 'imp-d%'"), 'true,true');
      const c = await loginAs('imp-d1', created['imp-d1'].password);
      assert.equal(c.loginReply.user.must_change_password, true);
      const x = await c.get('/api/v1/instances');
      assert.equal(x.status, 403);
      assertErrorShape(x.json, 'password_change_required');
      const ok = await c.post('/api/v1/me/password', { current_password: created['imp-d1'].password, new_password: 'dee-one-own-pass' });
      assert.equal(ok.status, 204);
      assert.equal((await c.get('/api/v1/instances')).status, 200);
    });
  });
});
