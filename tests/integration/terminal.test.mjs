// terminal.test.mjs — the web terminal's websocket on a real container
// (the world's busybox image): who may open it (owner only, same-origin
// only, a websocket only, a running instance only), input and output through
// docker exec with a TTY, resize, ping/pong, close, and closing when the
// instance stops.  The shell's user has a name (the prompt shows it).
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { RawConn, assertErrorShape, stopClean, eventually } from '../lib/itest.mjs';
import { world, mkUser, waitState, cleanup, sql } from './instances_lib.mjs';

// A masked client frame.
function frame(opcode, payload, fin = true) {
  const data = Buffer.isBuffer(payload) ? payload : Buffer.from(payload);
  const mask = randomBytes(4);
  const len = data.length;
  const head = len < 126 ? Buffer.from([(fin ? 0x80 : 0) | opcode, 0x80 | len])
    : Buffer.from([(fin ? 0x80 : 0) | opcode, 0x80 | 126, len >> 8, len & 255]);
  const body = Buffer.from(data.map((b, i) => b ^ mask[i & 3]));
  return Buffer.concat([head, mask, body]);
}

// Server frames parsed from the connection's buffer: [{opcode, data}].
function frames(c) {
  const out = [];
  let b = c.buf;
  for (;;) {
    if (b.length < 2) break;
    let len = b[1] & 0x7f, off = 2;
    if (len === 126) { if (b.length < 4) break; len = b.readUInt16BE(2); off = 4; }
    else if (len === 127) { if (b.length < 10) break; len = Number(b.readBigUInt64BE(2)); off = 10; }
    if (b.length < off + len) break;
    out.push({ opcode: b[0] & 0x0f, data: b.subarray(off, off + len) });
    b = b.subarray(off + len);
  }
  c.buf = b;
  return out;
}

async function output(c, re, ms = 8000) {
  let text = '';
  const ok = await eventually(() => {
    for (const f of frames(c)) if (f.opcode === 2) text += f.data.toString();
    return re.test(text);
  }, ms, 20);
  assert.ok(ok, `terminal output ${JSON.stringify(text.slice(-300))} does not match ${re}`);
  return text;
}

describe('web terminal', () => {
  let w, alice, bob, inst;

  function upgrade(id, cookie, { origin = w.srv.base, headers = '' } = {}) {
    return `GET /api/v1/instances/${id}/terminal HTTP/1.1\r\nHost: 127.0.0.1:${w.srv.port}\r\n` +
      'Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n' +
      'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n' + (origin ? `Origin: ${origin}\r\n` : '') +
      `Cookie: ${cookie}\r\n${headers}\r\n`;
  }

  async function open(id, user) {
    const c = await RawConn.open(w.srv.port);
    c.write(upgrade(id, user.c.cookieHeader()));
    const res = await c.response();
    assert.equal(res.status, 101, res.head + res.text);
    assert.equal(res.headers['sec-websocket-accept'], 's3pPLMBiTxaQ9kYGzzhZRbK+xOo=');
    return c;
  }

  before(async () => {
    w = await world({ node2: false, args: ['--proxy-recheck=1'] });
    alice = await mkUser(w, 'alice');
    bob = await mkUser(w, 'bob');
    const i = await alice.c.post('/api/v1/instances', { name: 'sh1', image_id: w.image.id, cpu_millis: 200, mem_mib: 64 });
    assert.equal(i.status, 202, i.text);
    inst = await waitState(alice.c, i.json.id, 'running', 60000);
  });

  after(async () => { cleanup(w?.srv); await stopClean(w?.srv); });

  it('refuses other users, other origins, plain requests and bad handshakes', async () => {
    const other = await RawConn.open(w.srv.port);
    other.write(upgrade(inst.id, bob.c.cookieHeader()));
    const r1 = await other.response();
    assert.equal(r1.status, 404);
    assertErrorShape(r1.json, 'not_found');
    other.destroy();
    const evil = await RawConn.open(w.srv.port);
    evil.write(upgrade(inst.id, alice.c.cookieHeader(), { origin: 'http://evil.example' }));
    assert.equal((await evil.response()).status, 403);
    evil.destroy();
    const noOrigin = await RawConn.open(w.srv.port);
    noOrigin.write(upgrade(inst.id, alice.c.cookieHeader(), { origin: null }));
    assert.equal((await noOrigin.response()).status, 403);
    noOrigin.destroy();
    const plain = await alice.c.get(`/api/v1/instances/${inst.id}/terminal`);
    assert.equal(plain.status, 400);
    assertErrorShape(plain.json, 'invalid');
    const anon = await RawConn.open(w.srv.port);
    anon.write(upgrade(inst.id, 'gc_session=nope'));
    assert.equal((await anon.response()).status, 401);
    anon.destroy();
    const badKey = await RawConn.open(w.srv.port);
    badKey.write(upgrade(inst.id, alice.c.cookieHeader()).replace('dGhlIHNhbXBsZSBub25jZQ==', 'short'));
    assert.equal((await badKey.response()).status, 400);
    badKey.destroy();
  });

  it('runs commands with a TTY: input, output, resize, ping, close', async () => {
    const c = await open(inst.id, alice);
    c.write(frame(2, JSON.stringify({ cols: 100, rows: 40 })));
    await new Promise((r) => setTimeout(r, 300));
    c.write(frame(1, 'echo "hi-$((2+3))"; stty size; id -u\n'));
    const text = await output(c, /hi-5[\s\S]*40 100[\s\S]*\d+/);
    assert.match(text, new RegExp(`${200000 + Number(alice.id)}`), 'the shell runs as the instance user');
    // who has a name (the container's /etc/passwd names the uid): the
    // prompt's \u says it (busybox's ash prints "[]" for an unknown uid,
    // bash "I have no name!"), and the home is the user's
    c.write(frame(1, "PS1='[\\u:\\w]\\$ '; id -un\n"));
    const named = await output(c, /\[alice:~\]\$ /);
    assert.doesNotMatch(named, /I have no name|\[:/);
    // fragmented input (text + continuation) arrives whole
    c.write(frame(1, 'echo fr', false));
    c.write(frame(0, 'ag-ok\n'));
    await output(c, /frag-ok/);
    c.write(frame(9, 'pp'));
    assert.ok(await eventually(() => frames(c).some((f) => f.opcode === 10 && f.data.toString() === 'pp'), 3000, 20), 'no pong');
    c.write(frame(8, Buffer.from([0x03, 0xe8])));
    assert.ok(await c.closedWithin(3000));
  });

  it('closes on protocol errors (unmasked frames)', async () => {
    const c = await open(inst.id, alice);
    c.write(Buffer.from([0x81, 0x02, 0x68, 0x69]));
    assert.ok(await c.closedWithin(3000));
    assert.ok(frames(c).some((f) => f.opcode === 8 && f.data.readUInt16BE(0) === 1002));
  });

  it('needs a write token, and a token revoked meanwhile closes the terminal', async () => {
    const mk = async (scopes) => {
      const t = await alice.c.post('/api/v1/tokens', { name: `t-${scopes.join('-')}-${Date.now()}`, scopes });
      assert.equal(t.status, 201, t.text);
      return t.json;
    };
    const viaToken = (tok) => `GET /api/v1/instances/${inst.id}/terminal HTTP/1.1\r\nHost: 127.0.0.1:${w.srv.port}\r\n` +
      'Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n' +
      `Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nAuthorization: Bearer ${tok}\r\n\r\n`;
    // a read-only token reads; it does not open a shell
    const ro = await mk(['read']);
    const c1 = await RawConn.open(w.srv.port);
    c1.write(viaToken(ro.token));
    const r1 = await c1.response();
    assert.equal(r1.status, 403, r1.head + r1.text);
    assertErrorShape(r1.json);
    c1.sock?.destroy?.();
    // a write token opens it; revoking the token ends it at the next re-check (1 s here)
    const rw = await mk(['read', 'write']);
    const c2 = await RawConn.open(w.srv.port);
    c2.write(viaToken(rw.token));
    const r2 = await c2.response();
    assert.equal(r2.status, 101, r2.head + r2.text);
    c2.write(frame(1, 'echo tok-ok\n'));
    await output(c2, /tok-ok/);
    assert.equal((await alice.c.del(`/api/v1/tokens/${rw.id}`)).status, 204);
    assert.ok(await c2.closedWithin(5000), 'the terminal outlived its revoked token');
  });

  it('opens a student\'s terminal for the class\'s teacher as the class allows, audit-logged; nobody else', async () => {
    const tina = await mkUser(w, 'tina', 'teacher');
    const otto = await mkUser(w, 'otto', 'teacher');
    const cls = sql(w.srv, `INSERT INTO classes (name, teacher_id, code) VALUES ('Terminals', ${tina.id}, 'TT1') RETURNING id`);
    sql(w.srv, `INSERT INTO class_members (class_id, user_id, role) VALUES (${cls}, ${alice.id}, 'student'), (${cls}, ${bob.id}, 'student')`);
    const refused = async (user) => {
      const c = await RawConn.open(w.srv.port);
      c.write(upgrade(inst.id, user.c.cookieHeader()));
      const r = await c.response();
      c.destroy();
      return r.status;
    };
    // alice's instance is her own, not class work: her teacher cannot open it
    assert.equal(await refused(tina), 404);
    sql(w.srv, `UPDATE instances SET class_id = ${cls} WHERE id = ${inst.id}`);
    const t = await open(inst.id, tina);
    t.write(frame(1, 'id -un\n'));
    await output(t, /\balice\b/);
    const audit = await w.admin.get('/api/v1/audit?limit=200');
    const e = audit.json.items.find((x) => x.action === 'class.open_terminal');
    assert.ok(e, 'the opening is in the audit log');
    assert.equal(e.actor, 'tina');
    assert.equal(e.target, String(inst.id));
    assert.equal(e.details.student, 'alice');
    // a classmate, another teacher: nothing
    assert.equal(await refused(bob), 404);
    assert.equal(await refused(otto), 404);
    // the class stops letting teachers in: refused, and the open one closes
    sql(w.srv, `UPDATE classes SET teachers_open_apps = false WHERE id = ${cls}`);
    assert.equal(await refused(tina), 404);
    assert.ok(await t.closedWithin(5000), 'the teacher\'s terminal outlived the class\'s consent');
    sql(w.srv, `UPDATE instances SET class_id = NULL WHERE id = ${inst.id}`);
  });

  it('closes when the shell exits and when the instance stops', async () => {
    const c = await open(inst.id, alice);
    c.write(frame(1, 'exit\n'));
    assert.ok(await c.closedWithin(5000), 'still open after exit');
    const d = await open(inst.id, alice);
    const s = await alice.c.post(`/api/v1/instances/${inst.id}/stop`);
    assert.equal(s.status, 202, s.text);
    assert.ok(await d.closedWithin(15000), 'still open after the instance stopped');
    await waitState(alice.c, inst.id, 'stopped');
    const e = await RawConn.open(w.srv.port);
    e.write(upgrade(inst.id, alice.c.cookieHeader()));
    assert.equal((await e.response()).status, 409);
    e.destroy();
  });
});
