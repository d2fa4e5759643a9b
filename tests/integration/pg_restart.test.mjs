// PostgreSQL stopped and started under a running gpucloudd: requests during
// the outage get a quick 503 with Retry-After and the JSON error shape,
// /readyz says 503, /healthz and static files still answer, the process
// stays up, and full service returns by itself once PostgreSQL is back.
//
// Controls the test world's cluster: $GPUCLOUD_TEST_PG_DATA, else
// $GPUCLOUD_WORLD_DIR/pg (deploy/world.sh keeps its settings in the data
// directory, so a plain pg_ctl start brings it back as it was). The cluster
// is started again whatever happens.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { startServer, Client, ADMIN_PASSWORD } from '../lib/server.mjs';
import { call, assertErrorShape, assertAlive, eventually, sleep, stopClean } from '../lib/itest.mjs';

const PG_BIN = process.env.PG_BIN || '/usr/lib/postgresql/15/bin';
const DATA = process.env.GPUCLOUD_TEST_PG_DATA ||
  (process.env.GPUCLOUD_WORLD_DIR ? join(process.env.GPUCLOUD_WORLD_DIR, 'pg') : '');
const LOG = process.env.GPUCLOUD_TEST_PG_LOG || (DATA ? join(dirname(DATA), 'pg.log') : '');
const usable = DATA && existsSync(join(DATA, 'PG_VERSION')) && existsSync(join(PG_BIN, 'pg_ctl'));

// pg_ctl as the cluster's owner (postgres) when we are root.
function pgCtl(args, { check = true } = {}) {
  const argv = [join(PG_BIN, 'pg_ctl'), '-D', DATA, ...args];
  const [cmd, rest] = process.getuid?.() === 0 ? ['runuser', ['-u', 'postgres', '--', ...argv]] : [argv[0], argv.slice(1)];
  try {
    return { code: 0, out: execFileSync(cmd, rest, { cwd: '/', stdio: ['ignore', 'pipe', 'pipe'], timeout: 90000, encoding: 'utf8' }) };
  } catch (e) {
    if (check) throw new Error(`pg_ctl ${args.join(' ')} failed (${e.status}): ${e.stderr || e.message}`);
    return { code: e.status, out: String(e.stdout || '') };
  }
}
const pgRunning = () => pgCtl(['status'], { check: false }).code === 0;
const pgStart = () => pgCtl(['-l', LOG, '-w', '-t', '60', 'start']);
const pgStop = () => pgCtl(['-m', 'fast', '-w', '-t', '60', 'stop']);

// The postmaster and its children, for freezing the cluster with SIGSTOP.
function pgPids() {
  const pm = Number(readFileSync(join(DATA, 'postmaster.pid'), 'utf8').split('\n')[0]);
  const kids = execFileSync('ps', ['-o', 'pid=', '--ppid', String(pm)], { encoding: 'utf8' })
    .trim().split(/\s+/).filter(Boolean).map(Number);
  return [pm, ...kids];
}
let frozen = [];
function thaw() {
  for (const p of frozen) { try { process.kill(p, 'SIGCONT'); } catch { /* gone */ } }
  frozen = [];
}
process.on('exit', thaw); // even if the runner dies mid-test

describe('PostgreSQL restart', { skip: usable ? false : 'no controllable PostgreSQL data directory (set GPUCLOUD_WORLD_DIR or GPUCLOUD_TEST_PG_DATA)' }, () => {
  let srv, admin, token;

  before(async () => {
    assert.ok(pgRunning(), `PostgreSQL in ${DATA} is not running`);
    srv = await startServer();
    admin = new Client(srv.base);
    assert.equal((await admin.login('admin', ADMIN_PASSWORD)).status, 200);
    const t = await admin.post('/api/v1/tokens', { name: 'outage', scopes: ['read'] });
    assert.equal(t.status, 201);
    token = t.json.token;
  });

  after(async () => {
    // whatever happened above, leave the world's database running
    thaw();
    if (usable && !pgRunning()) pgStart();
    await stopClean(srv);
  });

  it('degrades to 503 while PostgreSQL is down and recovers on its own', async () => {
    assert.equal((await call(srv.base, 'GET', '/readyz')).status, 200);
    assert.equal((await admin.get('/api/v1/me')).status, 200);

    pgStop();
    try {
      assert.equal(pgRunning(), false);
      await assertAlive(srv);

      const timed = async (what, fn) => {
        const t0 = Date.now();
        const r = await fn();
        const ms = Date.now() - t0;
        assert.ok(ms < 6000, `${what} took ${ms} ms during the outage`);
        return r;
      };
      const ready = await eventually(async () => (await call(srv.base, 'GET', '/readyz')).status === 503, 5000);
      assert.ok(ready, '/readyz does not notice the database is gone');
      const rz = await call(srv.base, 'GET', '/readyz');
      assert.equal(rz.json.status, 'not_ready');

      const cases = [
        ['session request', () => admin.get('/api/v1/me')],
        ['token request', () => call(srv.base, 'GET', '/api/v1/me', { bearer: token })],
        ['login', () => new Client(srv.base).login('admin', ADMIN_PASSWORD)],
        ['user list', () => admin.get('/api/v1/users')],
        ['mutation', () => admin.patch('/api/v1/users/1', { display_name: 'during outage' })],
      ];
      for (const [what, fn] of cases) {
        const r = await timed(what, fn);
        assert.equal(r.status, 503, `${what}: ${r.status} ${r.text}`);
        assertErrorShape(r.json, 'unavailable');
        const ra = r.headers.get('retry-after');
        assert.ok(ra && Number(ra) >= 1, `${what}: Retry-After ${ra}`);
      }

      // many at once, for a few seconds: none hangs, none is a 500
      const t0 = Date.now();
      while (Date.now() - t0 < 3000) {
        const batch = await timed('a batch of 20', () => Promise.all(Array.from({ length: 20 }, () => admin.get('/api/v1/me'))));
        assert.ok(batch.every((r) => r.status === 503), batch.map((r) => r.status).join(','));
        await sleep(250);
      }

      // what needs no database still works
      assert.equal((await call(srv.base, 'GET', '/healthz')).status, 200);
      assert.equal((await call(srv.base, 'GET', '/')).status, 200);
      await assertAlive(srv);
    } finally {
      pgStart();
    }

    const t1 = Date.now();
    const back = await eventually(async () => (await admin.get('/api/v1/me')).status === 200, 10000, 200);
    assert.ok(back, `no service ${Date.now() - t1} ms after PostgreSQL came back`);
    assert.equal((await call(srv.base, 'GET', '/readyz')).status, 200);
    assert.equal((await call(srv.base, 'GET', '/api/v1/me', { bearer: token })).status, 200);
    const edit = await admin.patch('/api/v1/users/1', { display_name: 'after outage' });
    assert.equal(edit.status, 200, edit.text);
    assert.equal((await new Client(srv.base).login('admin', ADMIN_PASSWORD)).status, 200);
    const m = await call(srv.base, 'GET', '/metrics');
    assert.match(m.text, /gpucloud_db_pool_connections\{state="up"\} [1-9]/);
    await assertAlive(srv);
  });

  it('answers within seconds when PostgreSQL stops responding (frozen), and recovers', async () => {
    // a network partition or a stuck server looks like this: connections
    // stay open, nothing answers
    assert.equal((await admin.get('/api/v1/me')).status, 200);
    const limit = 10000;
    frozen = pgPids();
    for (const p of frozen) process.kill(p, 'SIGSTOP');
    let results;
    const t0 = Date.now();
    try {
      const bounded = (p) => Promise.race([p, sleep(limit + 5000).then(() => ({ status: 'no answer' }))]);
      results = await Promise.all([
        bounded(admin.get('/api/v1/me')),
        bounded(admin.get('/api/v1/users')),
        bounded(call(srv.base, 'GET', '/api/v1/me', { bearer: token })),
      ]);
    } finally {
      thaw();
    }
    const ms = Date.now() - t0;
    await assertAlive(srv);
    for (const r of results) {
      assert.ok(r.status === 503 || r.status === 504, `a request during the freeze got: ${r.status} after ${ms} ms`);
      assertErrorShape(r.json);
    }
    assert.ok(ms <= limit, `requests hung ${ms} ms on a frozen database`);
    const back = await eventually(async () => (await admin.get('/api/v1/me')).status === 200, 10000, 200);
    assert.ok(back, 'no service after PostgreSQL resumed');
  });
});
