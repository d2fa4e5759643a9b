// images.test.mjs — registries, the image catalog and pulls over the world's
// real registry and engines: credentials sealed and write-only, a pull with
// the right key lands on both nodes (docker image inspect), a wrong key
// fails with the registry's message and caches nothing, the key is nowhere
// (server log, API answers, docker inspect, container environments),
// pulls show their state and are shared, the CUDA version is read from the
// image, visibility by role and owner, bad input 4xx everywhere, and CUDA
// placement: never on a node whose driver is older, a clear reason when no
// node qualifies.
//
// Each test image is pushed to the registry under a unique name first, so
// it is absent from both engines whatever ran before.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync, rmSync, readFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServer, Client, ADMIN_PASSWORD } from '../lib/server.mjs';
import { sql, eventually, sleep, assertErrorShape, stopClean } from '../lib/itest.mjs';

const env = process.env;
const KEY = env.GPUCLOUD_WORLD_REGISTRY_KEY;
const REG = env.GPUCLOUD_WORLD_REGISTRY;
const ARGS = ['--node-check-interval=1', '--sched-interval-ms=200'];

// Every answer any client got, to grep for the key.
const answers = [];
class RecClient extends Client {
  async req(...a) {
    const r = await super.req(...a);
    answers.push(r.text);
    return r;
  }
}

const sock = (n) => env[`GPUCLOUD_WORLD_DOCKER${n}`];
function dk(n, ...args) {
  return execFileSync('docker', ['--config', join(env.GPUCLOUD_WORLD_DIR, 'dockercfg'), '-H', sock(n), ...args],
    { encoding: 'utf8', stdio: ['pipe', 'pipe', 'pipe'] });
}
function present(n, ref) {
  try { dk(n, 'image', 'inspect', ref); return true; } catch { return false; }
}

// Pushes a tiny image (one file, the given ENV/LABEL changes) to the world
// registry under a unique name and removes it from node1: absent everywhere.
let seq = 0;
function pushTestImage(changes = []) {
  const ref = `${REG}/itest/images-${process.pid}-${Date.now()}-${seq++}:v1`;
  const dir = mkdtempSync(join(tmpdir(), 'gcimg-'));
  writeFileSync(join(dir, 'hello.txt'), `image ${ref}\n`);
  const tar = execFileSync('tar', ['-C', dir, '-cf', '-', 'hello.txt']);
  rmSync(dir, { recursive: true, force: true });
  const ch = changes.flatMap((c) => ['--change', c]);
  execFileSync('docker', ['-H', sock(1), 'import', ...ch, '-', ref], { input: tar, stdio: ['pipe', 'pipe', 'pipe'] });
  dk(1, 'push', '-q', ref);
  dk(1, 'rmi', ref);
  return ref;
}

async function world() {
  for (const k of ['GPUCLOUD_WORLD_DOCKER1', 'GPUCLOUD_WORLD_DOCKER2', 'GPUCLOUD_WORLD_REGISTRY_KEY', 'GPUCLOUD_WORLD_CUDA_IMAGE'])
    assert.ok(env[k], `${k} is not set: source var/world/env (deploy/world.sh up)`);
  const srv = await startServer({ args: ARGS });
  const admin = new RecClient(srv.base);
  assert.equal((await admin.login('admin', ADMIN_PASSWORD)).status, 200);
  const decl = (list) => list.split(',').map((d) => ({ model: 'NVIDIA A100-SXM4-80GB', memory_mib: 81920, devices: [d] }));
  const a = await admin.post('/api/v1/nodes', { name: 'node1', url: sock(1), gpus: decl(env.GPUCLOUD_WORLD_NODE1_GPUS) });
  assert.equal(a.status, 201, a.text);
  const b = await admin.post('/api/v1/nodes', { name: 'node2', url: sock(2), gpus: decl(env.GPUCLOUD_WORLD_NODE2_GPUS) });
  assert.equal(b.status, 201, b.text);
  for (const id of [a.json.id, b.json.id])
    assert.ok(await eventually(async () => (await admin.get(`/api/v1/nodes/${id}`)).json.state === 'up', 10000), `node ${id} came up`);
  return { srv, admin, n1: a.json, n2: b.json };
}

async function mkUser(w, username, role) {
  const password = `${username}-pass-1`;
  const r = await w.admin.post('/api/v1/users', { username, role, password });
  assert.equal(r.status, 201, r.text);
  const c = new RecClient(w.srv.base);
  assert.equal((await c.login(username, password)).status, 200);
  return { c, id: r.json.user.id };
}

// Polls the image until every listed node is in a final state.
async function settled(w, id, nodeIds, ms = 30000) {
  let img;
  const ok = await eventually(async () => {
    img = (await w.admin.get(`/api/v1/images/${id}`)).json;
    return nodeIds.every((n) => ['present', 'failed'].includes(img.nodes.find((x) => x.node_id === n)?.state));
  }, ms, 50);
  assert.ok(ok, `pulls did not finish: ${JSON.stringify(img?.nodes)}`);
  return img;
}

describe('registries and images', () => {
  let w, good, bad;

  before(async () => {
    w = await world();
  });
  after(async () => { await stopClean(w?.srv); });

  it('registries: the password is sealed in the database and never returned', async () => {
    const r = await w.admin.post('/api/v1/registries', { name: 'world', server: REG, username: '$oauthtoken', password: KEY, personal: true });
    assert.equal(r.status, 201, r.text);
    good = r.json;
    assert.deepEqual(Object.keys(good).sort(), ['created_at', 'has_password', 'id', 'images', 'name', 'personal', 'server', 'updated_at', 'username']);
    assert.equal(good.has_password, true);
    assert.equal(good.personal, true);
    assert.equal(good.username, '$oauthtoken');
    const b = await w.admin.post('/api/v1/registries', { name: 'wrong-key', server: REG, username: '$oauthtoken', password: 'not-the-key-0123456789' });
    assert.equal(b.status, 201, b.text);
    bad = b.json;
    const col = sql(w.srv, `SELECT secret_sealed FROM registries WHERE id = ${good.id}`).trim();
    assert.match(col, /^v1:/);
    assert.ok(!col.includes(KEY), 'the key is in the database in clear');
    assert.ok(!Buffer.from(col.slice(3), 'base64').toString('latin1').includes(KEY));
    const list = await w.admin.get('/api/v1/registries');
    assert.equal(list.status, 200);
    assert.equal(list.json.items.length, 2);
    assert.ok(!list.text.includes(KEY));
    // only one personal registry
    const two = await w.admin.patch(`/api/v1/registries/${bad.id}`, { personal: true });
    assert.equal(two.status, 409, two.text);
    // the audit log says a password changed, not what it is
    const audit = sql(w.srv, "SELECT string_agg(action || ' ' || COALESCE(details::text, ''), E'\\n') FROM audit_log WHERE action LIKE 'registry.%'");
    assert.match(audit, /registry\.create/);
    assert.ok(!audit.includes(KEY));
  });

  it('registries: bad input is a 4xx with the error shape, and admins only', async () => {
    const cases = [
      [{ name: 'Bad Name', server: REG }, 400],
      [{ name: 'x', server: 'https://nvcr.io' }, 400],
      [{ name: 'x', server: 'nvcr.io/path' }, 400],
      [{ name: 'x', server: 'nvcr.io:99999999' }, 400],
      [{ name: 'x' }, 400],
      [{ name: 'x', server: 'nvcr.io', password: 5 }, 400],
      [{ name: 'x', server: 'nvcr.io', secret: 'k' }, 400],
      [{ name: 'x', server: 'nvcr.io', username: 'a\nb' }, 400],
      [{ name: 'world', server: 'nvcr.io' }, 409],
    ];
    for (const [body, status] of cases) {
      const r = await w.admin.post('/api/v1/registries', body);
      assert.equal(r.status, status, `${JSON.stringify(body)} → ${r.status} ${r.text}`);
      assertErrorShape(r.json);
    }
    const raw = await w.admin.req('POST', '/api/v1/registries', '{"name":', { 'content-type': 'application/json' });
    assert.equal(raw.status, 400);
    assert.equal((await w.admin.patch(`/api/v1/registries/${good.id}`, { name: 'renamed' })).status, 400);
    assert.equal((await w.admin.get('/api/v1/registries/999999')).status, 404);
    assert.equal((await w.admin.get('/api/v1/registries/abc')).status, 404);
    assert.equal((await w.admin.post('/api/v1/registries/999999/test', {})).status, 404);
    assert.equal((await w.admin.post(`/api/v1/registries/${good.id}/test`, { node_id: 'x' })).status, 400);
    const s = await mkUser(w, 'regstudent', 'student');
    assert.equal((await s.c.get('/api/v1/registries')).status, 403);
    assert.equal((await s.c.post('/api/v1/registries', { name: 'mine', server: 'x.io' })).status, 403);
  });

  it('registries: test credentials reports the registry\'s answer', async () => {
    const ok = await w.admin.post(`/api/v1/registries/${good.id}/test`, {});
    assert.equal(ok.status, 200, ok.text);
    assert.equal(ok.json.ok, true);
    assert.match(ok.json.message, /login succeeded/i);
    const no = await w.admin.post(`/api/v1/registries/${bad.id}/test`, { node_id: w.n2.id });
    assert.equal(no.status, 200, no.text);
    assert.equal(no.json.ok, false);
    assert.equal(no.json.node, 'node2');
    assert.match(no.json.message, /401|unauthorized/i);
    // a sealed secret is bound to its registry: copied to another, it does not open
    sql(w.srv, `UPDATE registries SET secret_sealed = (SELECT secret_sealed FROM registries WHERE id = ${good.id}) WHERE id = ${bad.id}`);
    const moved = await w.admin.post(`/api/v1/registries/${bad.id}/test`, {});
    assert.equal(moved.status, 400, moved.text);
    assertErrorShape(moved.json);
    assert.match(moved.json.error.message, /cannot decrypt/);
    assert.equal((await w.admin.patch(`/api/v1/registries/${bad.id}`, { password: 'not-the-key-0123456789' })).status, 200);
  });

  it('registries: a secret is bound to its server; a new server needs the password again', async () => {
    // pointing the registry at another host must never send the key there
    const moved = await w.admin.patch(`/api/v1/registries/${good.id}`, { server: '127.0.0.1:5999' });
    assert.equal(moved.status, 400, moved.text);
    assertErrorShape(moved.json);
    assert.match(moved.json.error.message, /needs its password again/);
    assert.equal(sql(w.srv, `SELECT server FROM registries WHERE id = ${good.id}`).trim(), REG);
    // changed behind the API's back (the column alone): the secret does not open
    sql(w.srv, `UPDATE registries SET server = '127.0.0.1:5999' WHERE id = ${good.id}`);
    const t = await w.admin.post(`/api/v1/registries/${good.id}/test`, {});
    assert.equal(t.status, 400, t.text);
    assert.match(t.json.error.message, /cannot decrypt/);
    sql(w.srv, `UPDATE registries SET server = '${REG}' WHERE id = ${good.id}`);
    assert.equal((await w.admin.post(`/api/v1/registries/${good.id}/test`, {})).json.ok, true);
    // with the password, the server changes (and back)
    assert.equal((await w.admin.patch(`/api/v1/registries/${good.id}`, { server: '127.0.0.1:5999', password: KEY })).status, 200);
    const back = await w.admin.patch(`/api/v1/registries/${good.id}`, { server: REG, password: KEY });
    assert.equal(back.status, 200, back.text);
    assert.equal((await w.admin.post(`/api/v1/registries/${good.id}/test`, {})).json.ok, true);
  });

  let img1;
  it('pull with the right key lands on both nodes; CUDA is read from the image', async () => {
    const ref = pushTestImage(['ENV CUDA_VERSION=11.8.0']);
    assert.ok(!present(1, ref) && !present(2, ref));
    const c = await w.admin.post('/api/v1/images', {
      reference: ref, display_name: 'Test image', framework: 'busybox', description: 'a test',
      default_cmd: ['sh', '-c', 'sleep 1'], app_ports: [{ name: 'jupyter', port: 8888 }],
    });
    assert.equal(c.status, 201, c.text);
    img1 = c.json;
    assert.equal(img1.registry, 'world', 'the registry is found by the reference\'s server');
    assert.equal(img1.registry_id, good.id);
    assert.equal(img1.cuda_version, '');
    assert.deepEqual(img1.app_ports, [{ name: 'jupyter', port: 8888 }]);
    assert.deepEqual(img1.default_cmd, ['sh', '-c', 'sleep 1']);
    assert.deepEqual(img1.nodes.map((n) => n.state), ['absent', 'absent']);
    // two pulls at once share one engine pull per node
    const [p, p2] = await Promise.all([
      w.admin.post(`/api/v1/images/${img1.id}/pull`, {}),
      w.admin.post(`/api/v1/images/${img1.id}/pull`, { nodes: [w.n1.id, w.n2.id] }),
    ]);
    assert.equal(p.status, 202, p.text);
    assert.equal(p2.status, 202, p2.text);
    assert.ok(p.json.nodes.every((n) => ['pulling', 'present'].includes(n.state)), JSON.stringify(p.json.nodes));
    const done = await settled(w, img1.id, [w.n1.id, w.n2.id]);
    for (const n of done.nodes) {
      assert.equal(n.state, 'present', JSON.stringify(n));
      assert.equal(n.progress, 100);
      assert.equal(n.error, '');
    }
    assert.ok(present(1, ref), 'docker image inspect on node1');
    assert.ok(present(2, ref), 'docker image inspect on node2');
    assert.equal(done.cuda_version, '11.8');
    assert.equal(done.cuda_min, 11080);
    assert.equal(done.cuda_source, 'image');
    const log = w.srv.log();
    for (const n of [w.n1.id, w.n2.id]) {
      const starts = log.split('\n').filter((l) => l.includes(`pulling '${ref}' on node ${n}`));
      assert.equal(starts.length, 1, `one engine pull on node ${n}: ${starts.join('\n')}`);
    }
    // pulling again: already present, stays present
    const again = await w.admin.post(`/api/v1/images/${img1.id}/pull`, { nodes: [w.n1.id] });
    assert.equal(again.status, 202);
    assert.equal(again.json.nodes.find((n) => n.node_id === w.n1.id).state, 'present');
  });

  it('a wrong key fails with the registry\'s message and caches nothing', async () => {
    const ref = pushTestImage();
    // the registry refuses the key when the image is added (409); added
    // unchecked, the pull shows the registry's words
    const refused = await w.admin.post('/api/v1/images', { reference: ref, registry_id: bad.id });
    assert.equal(refused.status, 409, refused.text);
    assertErrorShape(refused.json, 'conflict');
    assert.match(refused.json.error.message, /refused the credentials of registry 'wrong-key'/);
    const c = await w.admin.post('/api/v1/images', { reference: ref, registry_id: bad.id, verify: false });
    assert.equal(c.status, 201, c.text);
    assert.equal(c.json.registry, 'wrong-key');
    assert.equal(c.json.verified, false);
    const p = await w.admin.post(`/api/v1/images/${c.json.id}/pull`, {});
    assert.equal(p.status, 202, p.text);
    const done = await settled(w, c.json.id, [w.n1.id, w.n2.id]);
    for (const n of done.nodes) {
      assert.equal(n.state, 'failed', JSON.stringify(n));
      assert.match(n.error, /unauthorized: authentication required/, n.error);
      assert.ok(n.error.includes(ref), 'the message names the image');
    }
    assert.ok(!present(1, ref), 'nothing cached on node1');
    assert.ok(!present(2, ref), 'nothing cached on node2');
    // fixed credentials: the same image pulls
    const fix = await w.admin.patch(`/api/v1/registries/${bad.id}`, { password: KEY });
    assert.equal(fix.status, 200, fix.text);
    assert.equal((await w.admin.post(`/api/v1/images/${c.json.id}/pull`, { nodes: [w.n2.id] })).status, 202);
    const ok = await settled(w, c.json.id, [w.n2.id]);
    assert.equal(ok.nodes.find((n) => n.node_id === w.n2.id).state, 'present');
    assert.ok(present(2, ref));
    assert.equal((await w.admin.patch(`/api/v1/registries/${bad.id}`, { password: 'wrong-again-123' })).status, 200);
  });

  it('a three-layer image shows pulling, then present at 100%, with its CUDA label', async () => {
    const ref = env.GPUCLOUD_WORLD_CUDA_IMAGE;
    for (const n of [1, 2]) { try { dk(n, 'rmi', ref); } catch { /* absent or in use */ } }
    const c = await w.admin.post('/api/v1/images', { reference: ref, display_name: 'PyTorch 24.08', framework: 'pytorch' });
    assert.equal(c.status, 201, c.text);
    const seen = new Set();
    const p = await w.admin.post(`/api/v1/images/${c.json.id}/pull`, { nodes: [w.n2.id] });
    assert.equal(p.status, 202);
    const first = p.json.nodes.find((n) => n.node_id === w.n2.id);
    seen.add(`${first.state}:${first.progress}`);
    assert.equal(first.state, present(2, ref) ? first.state : 'pulling');
    let img;
    await eventually(async () => {
      img = (await w.admin.get(`/api/v1/images/${c.json.id}`)).json;
      const n = img.nodes.find((x) => x.node_id === w.n2.id);
      seen.add(`${n.state}:${n.progress}`);
      return n.state === 'present' || n.state === 'failed';
    }, 30000, 20);
    const n2 = img.nodes.find((x) => x.node_id === w.n2.id);
    assert.equal(n2.state, 'present', JSON.stringify(n2));
    assert.equal(n2.progress, 100);
    assert.ok([...seen].some((s) => s.startsWith('pulling:')), `states seen: ${[...seen]}`);
    assert.equal(img.nodes.find((x) => x.node_id === w.n1.id).state, 'absent');
    assert.equal(img.cuda_version, '12.6');
    assert.equal(img.cuda_source, 'image');
    const hist = dk(2, 'image', 'inspect', '--format', '{{len .RootFS.Layers}}', ref).trim();
    assert.equal(hist, '3');
    // an admin's CUDA version wins over the image's
    const set = await w.admin.patch(`/api/v1/images/${c.json.id}`, { cuda_version: '12.4' });
    assert.equal(set.status, 200, set.text);
    assert.equal(set.json.cuda_source, 'admin');
    assert.equal((await w.admin.post(`/api/v1/images/${c.json.id}/pull`, { nodes: [w.n2.id] })).status, 202);
    await settled(w, c.json.id, [w.n2.id]);
    await sleep(200);
    assert.equal((await w.admin.get(`/api/v1/images/${c.json.id}`)).json.cuda_version, '12.4');
  });

  it('catalog: visibility by role, personal images by owner', async () => {
    const s = await mkUser(w, 'visstudent', 'student');
    const t = await mkUser(w, 'visteacher', 'teacher');
    const restricted = await w.admin.post('/api/v1/images', { reference: pushTestImage(), visibility: 'restricted', roles: ['teacher'], classes: [3], groups: [4] });
    assert.equal(restricted.status, 201, restricted.text);
    assert.equal(restricted.json.registry_id, good.id);
    assert.equal(restricted.json.verified, true);
    assert.deepEqual(restricted.json.roles, ['teacher']);
    assert.deepEqual(restricted.json.classes, [3]);
    const sees = async (c, id) => (await c.get('/api/v1/images')).json.items.some((i) => i.id === id);
    assert.equal(await sees(s.c, img1.id), true, 'everyone sees an everyone image');
    assert.equal(await sees(s.c, restricted.json.id), false);
    assert.equal((await s.c.get(`/api/v1/images/${restricted.json.id}`)).status, 404);
    assert.equal(await sees(t.c, restricted.json.id), true);
    assert.equal((await t.c.get(`/api/v1/images/${restricted.json.id}`)).status, 200);
    // a personal image (save-as-image makes these): its owner only
    const pid = sql(w.srv, `INSERT INTO images (reference, owner_id, display_name) VALUES ('${REG}/personal/visstudent:1', ${s.id}, 'mine') RETURNING id`).trim().split('\n')[0];
    const mine = await s.c.get(`/api/v1/images/${pid}`);
    assert.equal(mine.status, 200, mine.text);
    assert.equal(mine.json.personal, true);
    assert.equal(await sees(s.c, Number(pid)), true);
    assert.equal(await sees(t.c, Number(pid)), false);
    assert.equal((await t.c.del(`/api/v1/images/${pid}`)).status, 404);
    // users cannot curate
    assert.equal((await s.c.post('/api/v1/images', { reference: 'x/y:1' })).status, 403);
    assert.equal((await s.c.post(`/api/v1/images/${img1.id}/pull`, {})).status, 403);
    assert.equal((await s.c.patch(`/api/v1/images/${img1.id}`, { description: 'x' })).status, 403);
    assert.equal((await s.c.del(`/api/v1/images/${img1.id}`)).status, 404);
    assert.equal((await s.c.del(`/api/v1/images/${pid}`)).status, 204);
  });

  it('catalog: bad input is a 4xx with the error shape', async () => {
    const cases = [
      [{}, 400],
      [{ reference: '' }, 400],
      [{ reference: 'Nvcr.io/x:1' }, 400],
      [{ reference: 'x y' }, 400],
      [{ reference: 'x/../y' }, 400],
      [{ reference: 'a/b:1', cuda_version: 'twelve' }, 400],
      [{ reference: 'a/b:1', visibility: 'some' }, 400],
      [{ reference: 'a/b:1', roles: ['king'] }, 400],
      [{ reference: 'a/b:1', classes: ['x'] }, 400],
      [{ reference: 'a/b:1', groups: [0] }, 400],
      [{ reference: 'a/b:1', default_cmd: [] }, 400],
      [{ reference: 'a/b:1', default_cmd: 'sh' }, 400],
      [{ reference: 'a/b:1', app_ports: [{ name: 'j', port: 0 }] }, 400],
      [{ reference: 'a/b:1', app_ports: [{ name: 'Bad', port: 80 }] }, 400],
      [{ reference: 'a/b:1', app_ports: [{ name: 'j', port: 80, x: 1 }] }, 400],
      [{ reference: 'a/b:1', app_ports: [{ name: 'j', port: 80 }, { name: 'j', port: 81 }] }, 400],
      [{ reference: 'a/b:1', app_ports: [1] }, 400],
      [{ reference: 'a/b:1', registry_id: 999999 }, 400],
      [{ reference: 'a/b:1', unknown: 1 }, 400],
      [{ reference: img1.reference }, 409],
    ];
    for (const [body, status] of cases) {
      const r = await w.admin.post('/api/v1/images', body);
      assert.equal(r.status, status, `${JSON.stringify(body)} → ${r.status} ${r.text}`);
      assertErrorShape(r.json);
    }
    assert.equal((await w.admin.patch(`/api/v1/images/${img1.id}`, { reference: 'a/b:2' })).status, 400);
    assert.equal((await w.admin.patch(`/api/v1/images/${img1.id}`, { cuda_version: '1.x' })).status, 400);
    assert.equal((await w.admin.patch('/api/v1/images/999999', { description: 'x' })).status, 404);
    for (const body of [{ nodes: [] }, { nodes: ['a'] }, { nodes: [999999] }, { nodes: 1 }, { all: true }]) {
      const r = await w.admin.post(`/api/v1/images/${img1.id}/pull`, body);
      assert.equal(r.status, 400, `${JSON.stringify(body)} → ${r.status} ${r.text}`);
      assertErrorShape(r.json);
    }
    assert.equal((await w.admin.post('/api/v1/images/999999/pull', {})).status, 404);
    assert.equal((await w.admin.get('/api/v1/images/0')).status, 404);
    // a registry that catalog images use stays
    const del = await w.admin.del(`/api/v1/registries/${good.id}`);
    assert.equal(del.status, 409, del.text);
    assertErrorShape(del.json, 'conflict');
    // a catalog image used by a live instance stays; deleted instances do not count
    const uid = sql(w.srv, "SELECT id FROM users WHERE username = 'admin'").trim();
    sql(w.srv, `INSERT INTO instances (user_id, name, image_id, state) VALUES (${uid}, 'uses-it', ${img1.id}, 'stopped')`);
    const busy = await w.admin.del(`/api/v1/images/${img1.id}`);
    assert.equal(busy.status, 409, busy.text);
    sql(w.srv, `UPDATE instances SET state = 'deleted' WHERE name = 'uses-it'`);
    const tmp = await w.admin.post('/api/v1/images', { reference: 'a/b:gone', verify: false });
    assert.equal(tmp.status, 201, tmp.text);
    assert.equal((await w.admin.del(`/api/v1/images/${tmp.json.id}`)).status, 204);
    assert.equal((await w.admin.del(`/api/v1/images/${tmp.json.id}`)).status, 404);
  });

  it('the key is nowhere: log, answers, docker inspect, container environments', async () => {
    assert.ok(answers.length > 20);
    for (const a of answers) assert.ok(!a.includes(KEY), `an API answer holds the key: ${a.slice(0, 200)}`);
    assert.ok(!w.srv.log().includes(KEY), 'the server log holds the key');
    for (const n of [1, 2]) {
      const imgs = dk(n, 'image', 'ls', '-q').trim().split('\n').filter(Boolean);
      if (imgs.length) assert.ok(!dk(n, 'image', 'inspect', ...new Set(imgs)).includes(KEY), `docker image inspect on node${n}`);
      const ctrs = dk(n, 'ps', '-aq').trim().split('\n').filter(Boolean);
      if (!ctrs.length) continue;
      let info;
      try { info = JSON.parse(dk(n, 'inspect', ...ctrs)); } catch { continue; /* one went away meanwhile */ }
      assert.ok(!JSON.stringify(info).includes(KEY), `docker inspect of containers on node${n}`);
      for (const c of info) {
        const pid = c.State?.Pid;
        if (!pid || !existsSync(`/proc/${pid}/environ`)) continue;
        let e = '';
        try { e = readFileSync(`/proc/${pid}/environ`, 'latin1'); } catch { continue; }
        assert.ok(!e.includes(KEY), `/proc/${pid}/environ of ${c.Name}`);
      }
    }
  });
});

describe('CUDA placement', () => {
  let w;
  before(async () => { w = await world(); });
  after(async () => { await stopClean(w?.srv); });

  it('never places on an older driver; waits with the CUDA reason when none qualifies', async () => {
    const p = await w.admin.post('/api/v1/pools', { name: 'cuda' });
    assert.equal(p.status, 201, p.text);
    const gpus = [...w.n1.gpus, ...w.n2.gpus].map((g) => g.id);
    assert.equal((await w.admin.req('PUT', `/api/v1/pools/${p.json.id}/gpus`, { gpu_ids: gpus })).status, 200);
    const a = await w.admin.patch(`/api/v1/nodes/${w.n1.id}`, { cuda_version: '12.2' });
    assert.equal(a.status, 200, a.text);
    assert.equal(a.json.cuda_version, '12.2');
    assert.equal((await w.admin.patch(`/api/v1/nodes/${w.n2.id}`, { cuda_version: '12.8' })).json.cuda_version, '12.8');
    assert.equal((await w.admin.patch(`/api/v1/nodes/${w.n2.id}`, { cuda_version: 'new' })).status, 400);
    assert.equal((await w.admin.post('/api/v1/allocations', { pool: 'cuda', slices: 1, cuda_version: '12.x' })).status, 400);
    // six one-GPU requests needing 12.6: node2's four GPUs take four, two wait;
    // none ever lands on node1 though it has four free GPUs
    const ids = [];
    for (let i = 0; i < 6; i++) {
      const r = await w.admin.post('/api/v1/allocations', { pool: 'cuda', slices: 1, cpu_millis: 10, mem_mib: 16, cuda_version: '12.6' });
      assert.equal(r.status, 202, r.text);
      ids.push(r.json.id);
    }
    const all = async () => Promise.all(ids.map(async (id) => (await w.admin.get(`/api/v1/allocations/${id}`)).json));
    let st;
    assert.ok(await eventually(async () => { st = await all(); return st.filter((x) => x.state === 'allocated').length === 4; }, 10000), JSON.stringify(st));
    await sleep(600); // a few more passes
    st = await all();
    assert.equal(st.filter((x) => x.state === 'allocated').length, 4);
    const nodesOf = sql(w.srv, `SELECT DISTINCT node_id FROM allocations WHERE request_id IN (${ids.join(',')})`).trim().split('\n');
    assert.deepEqual(nodesOf, [String(w.n2.id)]);
    const waiting = st.filter((x) => x.state === 'queued');
    assert.equal(waiting.length, 2);
    // a request no node's driver can run waits with the CUDA reason
    const r = await w.admin.post('/api/v1/allocations', { pool: 'cuda', slices: 1, cpu_millis: 10, mem_mib: 16, cuda_version: '13.0' });
    assert.equal(r.status, 202);
    let q;
    assert.ok(await eventually(async () => { q = (await w.admin.get(`/api/v1/allocations/${r.json.id}`)).json; return q.reason_code === 'cuda'; }, 10000), JSON.stringify(q));
    assert.equal(q.state, 'queued');
    assert.equal(q.reason, "no node's driver supports CUDA 13.0 (newest: 12.8)");
    // without a CUDA need, node1 is fine
    const free = await w.admin.post('/api/v1/allocations', { pool: 'cuda', slices: 1, cpu_millis: 10, mem_mib: 16 });
    let f;
    assert.ok(await eventually(async () => { f = (await w.admin.get(`/api/v1/allocations/${free.json.id}`)).json; return f.state === 'allocated'; }, 10000), JSON.stringify(f));
    assert.equal(sql(w.srv, `SELECT DISTINCT node_id FROM allocations WHERE request_id = ${free.json.id}`).trim(), String(w.n1.id));
    // unknown driver again ("" clears it): the 13.0 request is placed
    assert.equal((await w.admin.patch(`/api/v1/nodes/${w.n1.id}`, { cuda_version: '' })).json.cuda_version, '');
    assert.ok(await eventually(async () => (await w.admin.get(`/api/v1/allocations/${r.json.id}`)).json.state === 'allocated', 10000));
  });
});
