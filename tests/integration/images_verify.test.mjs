// images_verify.test.mjs — catalog references checked against the world's
// real registry (Registry HTTP API v2, htpasswd, user $oauthtoken):
// - POST /images answers 400 for a tag the registry does not have, 409 when
//   the registry refuses the credentials, 503 when it cannot be reached;
//   verify:false adds it anyway, hidden from non-admins (list, GET, instance
//   creation) until a pull has succeeded, then shown;
// - browsing: GET /registries/{id}/repositories and /tags/{repository...}
//   list what was pushed, newest first, with in_catalog; GET
//   /images/{id}/newer names the newer tags of the same series only;
// - the Bearer token flow of nvcr.io and Docker Hub, through a token front
//   (realm, service, scope; Basic credentials at the realm) that passes
//   authorised calls on to the world's registry;
// - every new route: admin only (each role, read-only token, expired
//   session), bad input 4xx with the error shape; the key in no answer.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createServer } from 'node:http';
import { mkdtempSync, writeFileSync, rmSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServer, Client, ADMIN_PASSWORD } from '../lib/server.mjs';
import { sql, eventually, assertErrorShape, stopClean, call, sha256hex } from '../lib/itest.mjs';

const env = process.env;
const REG = env.GPUCLOUD_WORLD_REGISTRY;
const KEY = env.GPUCLOUD_WORLD_REGISTRY_KEY;
const sock = env.GPUCLOUD_WORLD_DOCKER1;
const dk = (...a) => execFileSync('docker', ['--config', join(env.GPUCLOUD_WORLD_DIR, 'dockercfg'), '-H', sock, ...a],
  { encoding: 'utf8', stdio: ['pipe', 'pipe', 'pipe'] });

// Pushes one tiny image under every tag given, in a repository of its own.
function pushSeries(repo, tags) {
  const dir = mkdtempSync(join(tmpdir(), 'gcver-'));
  writeFileSync(join(dir, 'hello.txt'), `series ${repo}\n`);
  const tar = execFileSync('tar', ['-C', dir, '-cf', '-', 'hello.txt']);
  rmSync(dir, { recursive: true, force: true });
  const first = `${REG}/${repo}:${tags[0]}`;
  execFileSync('docker', ['-H', sock, 'import', '-', first], { input: tar, stdio: ['pipe', 'pipe', 'pipe'] });
  for (const t of tags) {
    if (t !== tags[0]) dk('tag', first, `${REG}/${repo}:${t}`);
    dk('push', '-q', `${REG}/${repo}:${t}`);
  }
  for (const t of tags) dk('rmi', `${REG}/${repo}:${t}`);
}

// A token front for the world's registry, as nvcr.io answers: /v2/ calls
// without a token get 401 + WWW-Authenticate: Bearer realm=...; the realm
// trades $oauthtoken + the key (Basic) for a token scoped to what was asked;
// calls with the token go on to the registry with its Basic credentials.
async function tokenFront() {
  const seen = [];
  const tokens = new Map(); // token → scope
  const basic = 'Basic ' + Buffer.from(`$oauthtoken:${KEY}`).toString('base64');
  const srv = createServer(async (req, res) => {
    const url = new URL(req.url, 'http://x');
    if (url.pathname === '/token') {
      seen.push({ token: true, service: url.searchParams.get('service'), scope: url.searchParams.get('scope'), auth: req.headers.authorization === basic });
      if (req.headers.authorization !== basic) { res.writeHead(401, { 'content-type': 'application/json' }); res.end('{"details":"bad credentials"}'); return; }
      const tok = `tok-${tokens.size + 1}`;
      tokens.set(tok, url.searchParams.get('scope'));
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ token: tok, expires_in: 300 }));
      return;
    }
    const m = /^Bearer (.+)$/.exec(req.headers.authorization || '');
    seen.push({ api: `${req.method} ${url.pathname}`, bearer: m ? m[1] : null });
    const want = url.pathname === '/v2/_catalog' ? 'registry:catalog:*'
      : `repository:${url.pathname.replace(/^\/v2\//, '').replace(/\/(manifests|tags)\/.*$/, '')}:pull`;
    if (!m || tokens.get(m[1]) !== want) {
      res.writeHead(401, { 'content-type': 'application/json', 'www-authenticate': `Bearer realm="http://127.0.0.1:${srv.address().port}/token",service="front",scope="${want}"` });
      res.end('{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}');
      return;
    }
    const up = await fetch(`http://${REG}${req.url}`, { method: req.method, headers: { authorization: basic, accept: req.headers.accept || '*/*' } });
    const body = Buffer.from(await up.arrayBuffer());
    res.writeHead(up.status, { 'content-type': up.headers.get('content-type') || 'application/json' });
    res.end(req.method === 'HEAD' ? undefined : body);
  });
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  return { srv, seen, addr: `127.0.0.1:${srv.address().port}` };
}

describe('catalog references checked against the registry; browsing it', () => {
  let srv, admin, student, teacher, node, reg, wrong, texts = [];
  const repo = `itest/verify-${process.pid}-${Date.now()}`;

  before(async () => {
    for (const k of ['GPUCLOUD_WORLD_DOCKER1', 'GPUCLOUD_WORLD_REGISTRY', 'GPUCLOUD_WORLD_REGISTRY_KEY'])
      assert.ok(env[k], `${k} is not set: source var/world/env`);
    pushSeries(repo, ['24.08-py3', '24.09-py3', '24.10-py3-igpu', '24.07-py3']);
    srv = await startServer({ args: ['--node-check-interval=1', '--scrypt-ln=10'] });
    admin = new Client(srv.base);
    assert.equal((await admin.login('admin', ADMIN_PASSWORD)).status, 200);
    const n = await admin.post('/api/v1/nodes', { name: 'node1', url: sock });
    assert.equal(n.status, 201, n.text);
    node = n.json;
    assert.ok(await eventually(async () => (await admin.get(`/api/v1/nodes/${node.id}`)).json.state === 'up', 10000));
    const r = await admin.post('/api/v1/registries', { name: 'world', server: REG, username: '$oauthtoken', password: KEY });
    assert.equal(r.status, 201, r.text);
    reg = r.json;
    const bad = await admin.post('/api/v1/registries', { name: 'wrong', server: REG, username: '$oauthtoken', password: 'nope' });
    assert.equal(bad.status, 201, bad.text);
    wrong = bad.json;
    for (const [u, role] of [['vstud', 'student'], ['vteach', 'teacher']])
      assert.equal((await admin.post('/api/v1/users', { username: u, role, password: `${u}-pass-1` })).status, 201);
    student = new Client(srv.base);
    assert.equal((await student.login('vstud', 'vstud-pass-1')).status, 200);
    teacher = new Client(srv.base);
    assert.equal((await teacher.login('vteach', 'vteach-pass-1')).status, 200);
  });

  after(async () => {
    await stopClean(srv);
  });

  it('adds an image that exists (verified), refuses one that does not with 400', async () => {
    const ok = await admin.post('/api/v1/images', { reference: `${REG}/${repo}:24.08-py3`, display_name: 'Series 24.08' });
    assert.equal(ok.status, 201, ok.text);
    assert.equal(ok.json.verified, true);
    assert.equal(ok.json.registry_id, reg.id);
    const missing = await admin.post('/api/v1/images', { reference: `${REG}/${repo}:99.99-py3` });
    assert.equal(missing.status, 400, missing.text);
    assertErrorShape(missing.json, 'invalid');
    assert.match(missing.json.error.message, new RegExp(`image '${REG}/${repo}:99\\.99-py3' not found in registry`));
    assert.ok(missing.json.error.hint);
    const norepo = await admin.post('/api/v1/images', { reference: `${REG}/itest/never-${process.pid}:1` });
    assert.equal(norepo.status, 400, norepo.text);
    assert.match(norepo.json.error.message, /not found in registry/);
    assert.equal(sql(srv, `SELECT count(*) FROM images WHERE reference LIKE '%99.99-py3' OR reference LIKE '%never-%'`).trim(), '0');
    texts.push(ok.text, missing.text);
  });

  it('409 when the registry refuses the credentials, 503 when it cannot be reached', async () => {
    const refused = await admin.post('/api/v1/images', { reference: `${REG}/${repo}:24.09-py3`, registry_id: wrong.id });
    assert.equal(refused.status, 409, refused.text);
    assertErrorShape(refused.json, 'conflict');
    assert.match(refused.json.error.message, /refused the credentials of registry 'wrong'/);
    assert.match(refused.json.error.hint, /verify/);
    const away = await admin.post('/api/v1/images', { reference: '127.0.0.1:1/nvidia/pytorch:24.08-py3' });
    assert.equal(away.status, 503, away.text);
    assertErrorShape(away.json, 'unavailable');
    assert.match(away.json.error.message, /could not reach registry '127\.0\.0\.1:1'/);
    assert.match(away.json.error.hint, /"verify": false/);
    const noreg = await admin.post('/api/v1/images', { reference: `${REG}/${repo}:24.09-py3`, registry_id: 999999 });
    assert.equal(noreg.status, 400, noreg.text);
    assert.match(noreg.json.error.message, /no such registry/);
    texts.push(refused.text, away.text);
  });

  it('verify:false adds it hidden from users until a pull succeeds', async () => {
    const ref = `${REG}/${repo}:24.07-py3`;
    const c = await admin.post('/api/v1/images', { reference: ref, registry_id: reg.id, verify: false, display_name: 'Unchecked' });
    assert.equal(c.status, 201, c.text);
    assert.equal(c.json.verified, false);
    const id = c.json.id;
    const sees = async (cl) => (await cl.get('/api/v1/images')).json.items.some((i) => i.id === id);
    assert.equal(await sees(admin), true, 'the admin sees it, marked unverified');
    assert.equal(await sees(student), false);
    assert.equal(await sees(teacher), false);
    assert.equal((await student.get(`/api/v1/images/${id}`)).status, 404);
    const inst = await student.post('/api/v1/instances', { name: 'early', image_id: id, cpu_millis: 100, mem_mib: 64 });
    assert.ok(inst.status >= 400 && inst.status < 500, `${inst.status} ${inst.text}`);
    assertErrorShape(inst.json);
    assert.equal(sql(srv, `SELECT count(*) FROM instances WHERE image_id = ${id}`).trim(), '0');
    assert.equal(sql(srv, `SELECT details->>'verified' FROM audit_log WHERE action = 'image.create' AND target = '${ref}'`).trim(), 'false');
    // a pull that succeeds verifies it
    assert.equal((await admin.post(`/api/v1/images/${id}/pull`, { nodes: [node.id] })).status, 202);
    let st;
    assert.ok(await eventually(async () => {
      st = (await admin.get(`/api/v1/images/${id}`)).json;
      return st.verified === true;
    }, 30000, 100), JSON.stringify(st));
    assert.equal(st.nodes.find((x) => x.node_id === node.id).state, 'present');
    assert.equal(await sees(student), true);
    assert.equal((await student.get(`/api/v1/images/${id}`)).json.verified, true);
    // a failed pull does not: an unchecked reference that does not exist stays hidden
    const ghost = await admin.post('/api/v1/images', { reference: `${REG}/${repo}:0.0-py3`, verify: false });
    assert.equal(ghost.status, 201, ghost.text);
    await admin.post(`/api/v1/images/${ghost.json.id}/pull`, { nodes: [node.id] });
    assert.ok(await eventually(async () => (await admin.get(`/api/v1/images/${ghost.json.id}`)).json.nodes
      .find((x) => x.node_id === node.id)?.state === 'failed', 30000, 100));
    assert.equal((await admin.get(`/api/v1/images/${ghost.json.id}`)).json.verified, false);
    assert.equal((await student.get(`/api/v1/images/${ghost.json.id}`)).status, 404);
  });

  it('browses repositories and tags, newest first, with in_catalog', async () => {
    const repos = await admin.get(`/api/v1/registries/${reg.id}/repositories`);
    assert.equal(repos.status, 200, repos.text);
    assert.ok(repos.json.items.includes(repo), repos.text);
    assert.ok(repos.json.items.includes('nvidia/busybox'), repos.text);
    assert.deepEqual([...repos.json.items].sort(), repos.json.items, 'sorted');
    const tags = await admin.get(`/api/v1/registries/${reg.id}/tags/${repo}`);
    assert.equal(tags.status, 200, tags.text);
    assert.equal(tags.json.repository, repo);
    assert.deepEqual(tags.json.items.map((t) => t.tag), ['24.10-py3-igpu', '24.09-py3', '24.08-py3', '24.07-py3']);
    const t8 = tags.json.items.find((t) => t.tag === '24.08-py3');
    assert.equal(t8.reference, `${REG}/${repo}:24.08-py3`);
    assert.equal(t8.in_catalog, true);
    assert.equal(tags.json.items.find((t) => t.tag === '24.09-py3').in_catalog, false);
    // the registry's own refusal and its 404 come through
    const refused = await admin.get(`/api/v1/registries/${wrong.id}/tags/${repo}`);
    assert.equal(refused.status, 409, refused.text);
    assertErrorShape(refused.json, 'conflict');
    const refusedRepos = await admin.get(`/api/v1/registries/${wrong.id}/repositories`);
    assert.equal(refusedRepos.status, 409, refusedRepos.text);
    const none = await admin.get(`/api/v1/registries/${reg.id}/tags/itest/none-${process.pid}`);
    assert.equal(none.status, 404, none.text);
    assertErrorShape(none.json, 'not_found');
    texts.push(repos.text, tags.text, refused.text);
  });

  it('names the newer tags of the same series; one click adds one', async () => {
    const img = (await admin.get('/api/v1/images')).json.items.find((i) => i.reference === `${REG}/${repo}:24.08-py3`);
    let nw = await admin.get(`/api/v1/images/${img.id}/newer`);
    assert.equal(nw.status, 200, nw.text);
    assert.equal(nw.json.tag, '24.08-py3');
    assert.equal(nw.json.repository, `${REG}/${repo}`);
    assert.deepEqual(nw.json.newer.map((t) => [t.tag, t.in_catalog]), [['24.09-py3', false]], 'not -igpu, not older ones');
    const add = await admin.post('/api/v1/images', { reference: nw.json.newer[0].reference, display_name: 'Series 24.09' });
    assert.equal(add.status, 201, add.text);
    nw = await admin.get(`/api/v1/images/${img.id}/newer`);
    assert.deepEqual(nw.json.newer.map((t) => [t.tag, t.in_catalog]), [['24.09-py3', true]]);
    const newest = await admin.get(`/api/v1/images/${add.json.id}/newer`);
    assert.deepEqual(newest.json.newer, []);
    // an image whose registry cannot be reached: 503, the error shape
    const away = await admin.post('/api/v1/images', { reference: '127.0.0.1:1/x/y:1.0', verify: false });
    assert.equal(away.status, 201, away.text);
    const aw = await admin.get(`/api/v1/images/${away.json.id}/newer`);
    assert.equal(aw.status, 503, aw.text);
    assertErrorShape(aw.json, 'unavailable');
    assert.equal((await admin.get('/api/v1/images/999999/newer')).status, 404);
    texts.push(nw.text);
  });

  it('speaks the Bearer token flow (realm, service, scope, Basic at the realm)', async () => {
    const front = await tokenFront();
    try {
      const r = await admin.post('/api/v1/registries', { name: 'front', server: front.addr, username: '$oauthtoken', password: KEY });
      assert.equal(r.status, 201, r.text);
      const ok = await admin.post('/api/v1/images', { reference: `${front.addr}/${repo}:24.09-py3`, verify: true });
      assert.equal(ok.status, 201, ok.text);
      assert.equal(ok.json.registry_id, r.json.id);
      assert.equal(ok.json.verified, true);
      const tok = front.seen.find((x) => x.token);
      assert.deepEqual(tok, { token: true, service: 'front', scope: `repository:${repo}:pull`, auth: true });
      assert.ok(front.seen.some((x) => x.api === `HEAD /v2/${repo}/manifests/24.09-py3` && x.bearer), JSON.stringify(front.seen));
      const missing = await admin.post('/api/v1/images', { reference: `${front.addr}/${repo}:1.0-nope` });
      assert.equal(missing.status, 400, missing.text);
      const tags = await admin.get(`/api/v1/registries/${r.json.id}/tags/${repo}`);
      assert.equal(tags.status, 200, tags.text);
      assert.equal(tags.json.items[0].reference, `${front.addr}/${repo}:24.10-py3-igpu`);
      const repos = await admin.get(`/api/v1/registries/${r.json.id}/repositories`);
      assert.equal(repos.status, 200, repos.text);
      assert.ok(repos.json.items.includes(repo));
      assert.ok(front.seen.some((x) => x.token && x.scope === 'registry:catalog:*'));
      const nw = await admin.get(`/api/v1/images/${ok.json.id}/newer`);
      assert.equal(nw.status, 200, nw.text);
      assert.deepEqual(nw.json.newer, []);
      // a wrong key at the realm: 409 with the registry's name
      const bad = await admin.post('/api/v1/registries', { name: 'front-wrong', server: front.addr, username: '$oauthtoken', password: 'nope' });
      const refused = await admin.post('/api/v1/images', { reference: `${front.addr}/${repo}:24.08-py3`, registry_id: bad.json.id });
      assert.equal(refused.status, 409, refused.text);
      assert.match(refused.json.error.message, /refused the credentials of registry 'front-wrong'/);
      texts.push(ok.text, tags.text, refused.text);
    } finally {
      front.srv.close();
    }
  });

  it('new routes: admin only, bad input 4xx, no key in any answer', async () => {
    const paths = [`/api/v1/registries/${reg.id}/repositories`, `/api/v1/registries/${reg.id}/tags/${repo}`,
      `/api/v1/images/${(await admin.get('/api/v1/images')).json.items[0].id}/newer`];
    for (const p of paths) {
      for (const c of [student, teacher]) {
        const r = await c.get(p);
        assert.equal(r.status, 403, `${p}: ${r.text}`);
        assertErrorShape(r.json, 'forbidden');
      }
      const anon = await call(srv.base, 'GET', p);
      assert.equal(anon.status, 401, p);
    }
    // a read-only token of the admin may read them
    const tok = await admin.post('/api/v1/tokens', { name: 'reader', scopes: ['read'] });
    assert.equal(tok.status, 201, tok.text);
    const ro = await call(srv.base, 'GET', paths[1], { bearer: tok.json.token });
    assert.equal(ro.status, 200, ro.text);
    // ... but not add an image
    const roAdd = await call(srv.base, 'POST', '/api/v1/images', { bearer: tok.json.token, body: { reference: `${REG}/${repo}:24.07-py3` } });
    assert.equal(roAdd.status, 403, roAdd.text);
    // an expired session: 401
    const t2 = new Client(srv.base);
    assert.equal((await t2.login('admin', ADMIN_PASSWORD)).status, 200);
    const h = sha256hex(t2.cookies.get('gc_session'));
    sql(srv, `UPDATE sessions SET created_at = now() - interval '2 hours', expires_at = now() - interval '1 second' WHERE token_hash = '${h}'`);
    const ex = await t2.get(paths[0]);
    assert.equal(ex.status, 401, ex.text);
    assertErrorShape(ex.json, 'unauthorized');
    // bad input
    for (const [p, want] of [
      [`/api/v1/registries/${reg.id}/tags/`, 400], [`/api/v1/registries/${reg.id}/tags/UPPER/case`, 400],
      [`/api/v1/registries/${reg.id}/tags/a/b..c`, 400], [`/api/v1/registries/${reg.id}/tags/a%2fb`, 400],
      ['/api/v1/registries/999999/tags/a/b', 404], ['/api/v1/registries/999999/repositories', 404],
      ['/api/v1/registries/x/repositories', 404], ['/api/v1/images/x/newer', 404],
      [`/api/v1/registries/${reg.id}`, 200],
    ]) {
      const r = await admin.get(p);
      assert.equal(r.status, want, `${p}: ${r.text}`);
      if (want >= 400) assertErrorShape(r.json);
    }
    const bad = await admin.post('/api/v1/images', { reference: `${REG}/${repo}:24.07-py3`, verify: 'no' });
    assert.equal(bad.status, 400, bad.text);
    const anyImg = (await admin.get('/api/v1/images')).json.items[0];
    const patchVerify = await admin.patch(`/api/v1/images/${anyImg.id}`, { verify: false });
    assert.equal(patchVerify.status, 400, patchVerify.text);
    assertErrorShape(patchVerify.json, 'invalid');
    for (const s of texts) assert.ok(!s.includes(KEY), `the key in an answer: ${s.slice(0, 200)}`);
    assert.ok(!readFileSync(srv.logPath, 'utf8').includes(KEY), 'the key in the log');
    assert.ok(!readFileSync(srv.logPath, 'utf8').includes(Buffer.from(`$oauthtoken:${KEY}`).toString('base64')), 'the Basic header in the log');
  });
});
