// class_sched_sessions.test.mjs — lab sessions of a class
// (/api/v1/classes/{id}/reservations): teachers create, change and cancel
// them, members read them, anyone else gets a 404; the next occurrences of
// a weekly session and whether one is open now; a session reserves at most
// the class's allocation and, with every other class's overlapping
// sessions, at most the pool (409 naming the other class and the time);
// bad input is a 4xx with the field; and the class's images are pre-pulled
// to the pool's nodes before a window opens.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { assertErrorShape, stopClean } from '../lib/itest.mjs';
import { Client } from '../lib/server.mjs';
import { world, mkUser, cleanup, sql, eventually } from './instances_lib.mjs';

const iso = (ms) => new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');
const H = 3600e3;

describe('lab sessions', () => {
  let w, teacher, other, student, ta, outsider, cls, cls2, base;
  const path = (c = cls) => `/api/v1/classes/${c}/reservations`;

  before(async () => {
    w = await world();
    teacher = await mkUser(w, 'lsteacher', 'teacher');
    other = await mkUser(w, 'lsother', 'teacher');
    student = await mkUser(w, 'lsstudent');
    ta = await mkUser(w, 'lsta');
    outsider = await mkUser(w, 'lsout');
    const pool = sql(w.srv, "SELECT id FROM pools WHERE name = 'a100'");
    cls = Number(sql(w.srv, `INSERT INTO classes (name, code, teacher_id, pool_id, alloc_slices)
      VALUES ('Vision', 'CV1', ${teacher.id}, ${pool}, 3) RETURNING id`).split('\n')[0]);
    cls2 = Number(sql(w.srv, `INSERT INTO classes (name, code, teacher_id, pool_id, alloc_slices)
      VALUES ('Robotics', 'RB1', ${other.id}, ${pool}, 4) RETURNING id`).split('\n')[0]);
    sql(w.srv, `INSERT INTO class_members (class_id, user_id, role) VALUES
      (${cls}, ${student.id}, 'student'), (${cls}, ${ta.id}, 'ta')`);
    base = Date.now() + 48 * H;
  });
  after(async () => { try { await stopClean(w?.srv); } finally { cleanup(w?.srv); } });

  it('lets the teacher create a weekly session with its next occurrences; members read it, others get 404', async () => {
    const r = await teacher.c.post(path(), {
      title: 'Lab A', starts_at: iso(base), ends_at: iso(base + 2 * H),
      repeat_until: new Date(base + 30 * 24 * H).toISOString().slice(0, 10), slices: 2,
    });
    assert.equal(r.status, 201, r.text);
    const s = r.json;
    assert.equal(s.title, 'Lab A');
    assert.equal(s.slices, 2);
    assert.equal(s.weekly, true);
    assert.equal(s.active_now, false);
    assert.equal(s.starts_at, iso(base));
    assert.equal(s.next.length, 5);
    assert.deepEqual(s.next[1], { starts_at: iso(base + 7 * 24 * H), ends_at: iso(base + 7 * 24 * H + 2 * H) });
    for (const u of [student, ta, teacher]) {
      const l = await u.c.get(path());
      assert.equal(l.status, 200, l.text);
      assert.deepEqual(l.json.items.map((x) => x.id), [s.id]);
      assert.equal((await u.c.get(`${path()}/${s.id}`)).status, 200);
    }
    assert.equal((await w.admin.get(path())).status, 200);
    for (const u of [outsider, other]) {
      const l = await u.c.get(path());
      assert.equal(l.status, 404, l.text);
      assertErrorShape(l.json, 'not_found');
      assert.equal((await u.c.get(`${path()}/${s.id}`)).status, 404);
      assert.equal((await u.c.req('DELETE', `${path()}/${s.id}`)).status, 404);
    }
    // members read, only staff change
    const st = await student.c.post(path(), { starts_at: iso(base), ends_at: iso(base + H), slices: 1 });
    assert.equal(st.status, 403, st.text);
    assert.equal((await ta.c.req('PATCH', `${path()}/${s.id}`, { slices: 1 })).status, 403);
    assert.equal((await student.c.req('DELETE', `${path()}/${s.id}`)).status, 403);
    // the session of another class is not reachable through this class
    assert.equal((await other.c.get(`${path(cls2)}/${s.id}`)).status, 404);
    // audit
    assert.ok(Number(sql(w.srv, "SELECT count(*) FROM audit_log WHERE action = 'class_session.create'")) >= 1);
  });

  it('refuses bad input with the field, more than the allocation, and more than the pool with other classes', async () => {
    const bad = async (body, status, field) => {
      const r = await teacher.c.post(path(), body);
      assert.equal(r.status, status, `${JSON.stringify(body)}: ${r.text}`);
      if (field) assert.equal(r.json.error.details[0].field, field);
      return r;
    };
    await bad({ starts_at: 'not a time', ends_at: iso(base), slices: 1 }, 400, 'starts_at');
    await bad({ starts_at: iso(base), ends_at: iso(base - H), slices: 1 }, 400, 'ends_at');
    await bad({ starts_at: iso(base), ends_at: iso(base + 25 * H), slices: 1 }, 400, 'ends_at');
    await bad({ starts_at: iso(base), ends_at: iso(base + H), slices: -1 }, 400, 'slices');
    await bad({ starts_at: iso(base), ends_at: iso(base + H), slices: 1, repeat_until: 'soon' }, 400, 'repeat_until');
    await bad({ starts_at: iso(base), ends_at: iso(base + H) }, 400, 'slices');
    await bad({ starts_at: iso(base), ends_at: iso(base + H), slices: 1, extra: 1 }, 400);
    const over = await bad({ starts_at: iso(base), ends_at: iso(base + H), slices: 4 }, 422);
    assert.equal(over.json.error.message, "the class's allocation is 3 slices");
    // the pool has 4 slices; Vision holds 2 at base (weekly): Robotics may
    // add 2 there, not 3 — a week later too
    const r3 = await other.c.post(path(cls2), { title: 'Robots', starts_at: iso(base + 7 * 24 * H + H), ends_at: iso(base + 7 * 24 * H + 3 * H), slices: 3 });
    assert.equal(r3.status, 409, r3.text);
    assertErrorShape(r3.json, 'conflict');
    const at = new Date(base + 7 * 24 * H + H).toISOString().slice(0, 16).replace('T', ' ');
    assert.equal(r3.json.error.message, `the pool has 4 slices; at ${at} UTC lab sessions (class 'Vision' among them) reserve 2`);
    assert.equal(r3.json.error.hint, 'reserve at most 2 slices then, or pick another time');
    const r2 = await other.c.post(path(cls2), { title: 'Robots', starts_at: iso(base + 7 * 24 * H + H), ends_at: iso(base + 7 * 24 * H + 3 * H), slices: 2 });
    assert.equal(r2.status, 201, r2.text);
    // not overlapping: the whole allocation
    const r4 = await other.c.post(path(cls2), { starts_at: iso(base + 3 * H), ends_at: iso(base + 4 * H), slices: 4 });
    assert.equal(r4.status, 201, r4.text);
  });

  it('changes and cancels a session', async () => {
    const c = await teacher.c.post(path(), { title: 'once', starts_at: iso(base + 24 * H), ends_at: iso(base + 25 * H), slices: 1 });
    assert.equal(c.status, 201, c.text);
    assert.equal(c.json.weekly, false);
    assert.equal(c.json.next.length, 1);
    const p = await teacher.c.req('PATCH', `${path()}/${c.json.id}`, { title: 'moved', slices: 3 });
    assert.equal(p.status, 200, p.text);
    assert.equal(p.json.title, 'moved');
    assert.equal(p.json.slices, 3);
    assert.equal(p.json.starts_at, iso(base + 24 * H));
    const bad = await teacher.c.req('PATCH', `${path()}/${c.json.id}`, { ends_at: iso(base) });
    assert.equal(bad.status, 400, bad.text);
    const d = await teacher.c.req('DELETE', `${path()}/${c.json.id}`);
    assert.equal(d.status, 204, d.text);
    assert.equal((await teacher.c.get(`${path()}/${c.json.id}`)).status, 404);
    assert.equal((await teacher.c.req('DELETE', `${path()}/${c.json.id}`)).status, 404);
    assert.equal((await teacher.c.req('PATCH', `${path()}/${c.json.id}`, { slices: 1 })).status, 404);
    assert.ok(Number(sql(w.srv, "SELECT count(*) FROM audit_log WHERE action = 'class_session.cancel'")) === 1);
  });

  it('says a window is open now, and refuses an expired session or no CSRF token', async () => {
    const now = Date.now();
    const c = await teacher.c.post(path(), { title: 'now', starts_at: iso(now - 60e3), ends_at: iso(now + H), slices: 1 });
    assert.equal(c.status, 201, c.text);
    assert.equal(c.json.active_now, true);
    assert.equal(c.json.next[0].starts_at, iso(now - 60e3));
    assert.equal(Number(sql(w.srv, `SELECT count(*) FROM gc_class_reserved_now() WHERE session_id = ${c.json.id}`)), 1);
    const nocsrf = await teacher.c.req('POST', path(), { starts_at: iso(base), ends_at: iso(base + H), slices: 0 }, { 'x-csrf-token': 'nope' });
    assert.equal(nocsrf.status, 403, nocsrf.text);
    const anon = new Client(w.srv.base);
    assert.equal((await anon.get(path())).status, 401);
    // a read-only token reads the sessions and changes none; a foreign Origin changes none
    const tok = await teacher.c.post('/api/v1/tokens', { name: 'ro-sessions', scopes: ['read'] });
    assert.equal(tok.status, 201, tok.text);
    const ro = new Client(w.srv.base);
    ro.token = tok.json.token;
    assert.equal((await ro.get(path())).status, 200);
    const before = sql(w.srv, `SELECT count(*) FROM class_sessions WHERE class_id = ${cls}`);
    for (const [m, p, b] of [['POST', path(), { starts_at: iso(base), ends_at: iso(base + H), slices: 0 }],
      ['PATCH', `${path()}/${c.json.id}`, { slices: 0 }], ['DELETE', `${path()}/${c.json.id}`]]) {
      const r = await ro.req(m, p, b);
      assert.equal(r.status, 403, `a read token does not ${m} ${p}: ${r.text}`);
      assertErrorShape(r.json, 'forbidden');
      const o = await teacher.c.req(m, p, b, { origin: 'http://evil.example' });
      assert.equal(o.status, 403, `a foreign Origin does not ${m} ${p}`);
    }
    assert.equal(sql(w.srv, `SELECT count(*) FROM class_sessions WHERE class_id = ${cls}`), before);
    assert.equal(sql(w.srv, `SELECT slices || ' ' || (cancelled_at IS NULL) FROM class_sessions WHERE id = ${c.json.id}`), '1 true');
  });

  it('pre-pulls the class\'s images to the pool\'s nodes before a session opens', async () => {
    sql(w.srv, "DELETE FROM image_nodes");
    sql(w.srv, `UPDATE classes SET allowed_images = '{${w.image.id}}' WHERE id = ${cls}`);
    const soon = Date.now() + 10 * 60e3;
    const c = await teacher.c.post(path(), { title: 'soon', starts_at: iso(soon), ends_at: iso(soon + H), slices: 0 });
    assert.equal(c.status, 201, c.text);
    assert.ok(await eventually(async () => sql(w.srv,
      `SELECT state FROM image_nodes WHERE image_id = ${w.image.id} AND node_id = ${w.n1.id}`) === 'present', 45000, 500),
    'the image is on node1 (the pool\'s node)');
    assert.equal(sql(w.srv, `SELECT count(*) FROM image_nodes WHERE node_id = ${w.n2.id}`), '0', 'node2 carries none of the pool');
    assert.equal(sql(w.srv, `SELECT prepulled_for IS NOT NULL FROM class_sessions WHERE id = ${c.json.id}`), 't');
  });
});
