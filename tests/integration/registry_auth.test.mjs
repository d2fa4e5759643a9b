// registry_auth.test.mjs — registry credentials and catalog visibility against
// the world's engines and registry:
// - a registry password full of JSON and base64 specials travels intact in
//   X-Registry-Auth: the engine decodes the header and the registry answers
//   "unauthorized" for the wrong key (a broken encoding would fail earlier,
//   with the engine's header error); the password is in no API answer and
//   not in the server's log;
// - a restricted image is invisible to a student on every route: list,
//   GET /images/{id}, pull, delete and instance creation.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { startServer, Client, ADMIN_PASSWORD } from '../lib/server.mjs';
import { sql, eventually, assertErrorShape, stopClean } from '../lib/itest.mjs';

const env = process.env;
const REG = env.GPUCLOUD_WORLD_REGISTRY;
const PW = 'w"r\\o/n+g=\u00e9\u4f60-"},"username":"admin';

describe('registry credentials and image visibility', () => {
  let srv, admin, student, node, texts = [];

  before(async () => {
    for (const k of ['GPUCLOUD_WORLD_DOCKER1', 'GPUCLOUD_WORLD_REGISTRY', 'GPUCLOUD_WORLD_IMAGE'])
      assert.ok(env[k], `${k} is not set: source var/world/env`);
    srv = await startServer({ args: ['--node-check-interval=1', '--scrypt-ln=10'] });
    admin = new Client(srv.base);
    assert.equal((await admin.login('admin', ADMIN_PASSWORD)).status, 200);
    const n = await admin.post('/api/v1/nodes', {
      name: 'node1', url: env.GPUCLOUD_WORLD_DOCKER1,
      gpus: [{ model: 'NVIDIA A100-SXM4-80GB', memory_mib: 81920, devices: [env.GPUCLOUD_WORLD_NODE1_GPUS.split(',')[0]] }],
    });
    assert.equal(n.status, 201, n.text);
    node = n.json;
    assert.ok(await eventually(async () => (await admin.get(`/api/v1/nodes/${node.id}`)).json.state === 'up', 10000));
    const u = await admin.post('/api/v1/users', { username: 'stud', role: 'student', password: 'stud-pass-1' });
    assert.equal(u.status, 201, u.text);
    student = new Client(srv.base);
    assert.equal((await student.login('stud', 'stud-pass-1')).status, 200);
  });

  after(async () => { await stopClean(srv); });

  it('sends a password with quotes, backslashes and non-ASCII intact, and never shows it', async () => {
    const r = await admin.post('/api/v1/registries', { name: 'special', server: REG, username: '$oauthtoken', password: PW });
    assert.equal(r.status, 201, r.text);
    texts.push(r.text);
    // an image no one pushed: the registry's answer decides, after the engine decoded the header
    const ref = `${REG}/authcheck/never-pushed-${process.pid}:v1`;
    // added unchecked (the registry refuses the key, so the check would say 409)
    const img = await admin.post('/api/v1/images', { reference: ref, registry_id: r.json.id, display_name: 'never', verify: false });
    assert.equal(img.status, 201, img.text);
    const p = await admin.post(`/api/v1/images/${img.json.id}/pull`, { nodes: [node.id] });
    assert.ok(p.status === 202 || p.status === 200, p.text);
    let st;
    assert.ok(await eventually(async () => {
      st = (await admin.get(`/api/v1/images/${img.json.id}`)).json;
      texts.push(JSON.stringify(st));
      return st.nodes.find((x) => x.node_id === node.id)?.state === 'failed';
    }, 30000, 100), JSON.stringify(st));
    const err = st.nodes.find((x) => x.node_id === node.id).error;
    assert.match(err, /unauthorized|authentication required|401/i, err);
    assert.doesNotMatch(err, /X-Registry-Auth|invalid.*auth.*header|json|base64/i, err);
    const t = await admin.post(`/api/v1/registries/${r.json.id}/test`, {});
    assert.equal(t.status, 200, t.text);
    texts.push(t.text);
    assert.equal(t.json.ok, false);
    assert.match(t.json.message, /401|unauthorized/i);
    texts.push((await admin.get('/api/v1/registries')).text, (await admin.get(`/api/v1/registries/${r.json.id}`)).text);
    for (const s of texts) assert.ok(!s.includes('r\\\\o/n+g') && !s.includes('w"r\\o'), `password in an answer: ${s}`);
    const log = readFileSync(srv.logPath, 'utf8');
    assert.ok(!log.includes('r\\o/n+g') && !log.includes('r\\\\o/n+g'), 'password in the log');
    assert.ok(!log.includes(Buffer.from(JSON.stringify({ username: '$oauthtoken', password: PW, serveraddress: REG })).toString('base64url')), 'auth header in the log');
  });

  it('hides a restricted image from a student on every route', async () => {
    const img = await admin.post('/api/v1/images', {
      reference: `${REG}/authcheck/restricted-${process.pid}:v1`, display_name: 'teachers only',
      visibility: 'restricted', roles: ['teacher'], verify: false,
    });
    assert.equal(img.status, 201, img.text);
    const id = img.json.id;
    // as if a pull had verified it: the restriction alone hides it below
    sql(srv, `UPDATE images SET verified = true WHERE id = ${id}`);
    const list = await student.get('/api/v1/images');
    assert.equal(list.status, 200);
    assert.ok(!list.json.items.some((i) => i.id === id), 'listed to a student');
    const one = await student.get(`/api/v1/images/${id}`);
    assert.equal(one.status, 404, one.text);
    assertErrorShape(one.json);
    const pull = await student.post(`/api/v1/images/${id}/pull`, {});
    assert.equal(pull.status, 403, pull.text);
    const del = await student.del(`/api/v1/images/${id}`);
    assert.equal(del.status, 404, del.text);
    const inst = await student.post('/api/v1/instances', { name: 'sneak', image_id: id, cpu_millis: 100, mem_mib: 64 });
    assert.ok(inst.status >= 400 && inst.status < 500, `${inst.status} ${inst.text}`);
    assertErrorShape(inst.json);
    assert.equal(sql(srv, `SELECT count(*) FROM instances WHERE image_id = ${id}`).trim(), '0');
    // still there for the admin
    assert.equal((await admin.get(`/api/v1/images/${id}`)).status, 200);
  });
});
