// proxy_metrics.test.mjs — /metrics is not public (an admin's API token or a
// metrics_allow address) and /readyz says ok / not ok per check, no paths.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, Client, ADMIN_PASSWORD } from '../lib/server.mjs';
import { stopClean, call, assertErrorShape } from '../lib/itest.mjs';

describe('/metrics and /readyz', () => {
  let srv, admin;
  before(async () => {
    srv = await startServer({ args: ['--metrics-allow='] }); // no scrape address: tokens only
    admin = new Client(srv.base);
    assert.equal((await admin.login('admin', ADMIN_PASSWORD)).status, 200);
    assert.equal((await admin.post('/api/v1/users', { username: 'sam', role: 'student', password: 'sam-password-1' })).status, 201);
  });
  after(async () => { await stopClean(srv); });

  it('needs an admin token', async () => {
    const anon = await call(srv.base, 'GET', '/metrics');
    assert.equal(anon.status, 401, anon.text);
    assertErrorShape(anon.json);
    const sam = new Client(srv.base);
    assert.equal((await sam.login('sam', 'sam-password-1')).status, 200);
    const st = await sam.post('/api/v1/tokens', { name: 's', scopes: ['read'] });
    assert.equal((await call(srv.base, 'GET', '/metrics', { bearer: st.json.token })).status, 403);
    assert.equal((await call(srv.base, 'GET', '/metrics', { bearer: 'gct_nonsense' })).status, 403);
    const at = await admin.post('/api/v1/tokens', { name: 'prom', scopes: ['read'] });
    const ok = await call(srv.base, 'GET', '/metrics', { bearer: at.json.token });
    assert.equal(ok.status, 200, ok.text);
    assert.match(ok.text, /gpucloud_proxy_bytes_total \d+/);
    assert.doesNotMatch(ok.text, /route="[0-9a-f]{32}"|instance="/);
  });

  it('says ok per check and nothing more in /readyz', async () => {
    const r = await call(srv.base, 'GET', '/readyz');
    assert.equal(r.status, 200);
    assert.deepEqual(r.json, { status: 'ready', checks: { database: { status: 'ok' }, storage: { status: 'ok' }, nodes: { status: 'none' } } });
    assert.doesNotMatch(r.text, /data_root|\//);
  });
});
