// Graceful shutdown: on SIGTERM the listener closes at once, idle
// keep-alive connections are closed, requests in flight still get their
// response, and the process exits 0 soon after; past shutdown_timeout the
// stragglers are cut off and the exit is still clean.
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, Client, ADMIN_PASSWORD } from '../lib/server.mjs';
import { RawConn, sleep, eventually, stopClean } from '../lib/itest.mjs';

const LOGIN = JSON.stringify({ username: 'admin', password: ADMIN_PASSWORD });
const loginHead = (len) =>
  `POST /api/v1/auth/login HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: ${len}\r\n\r\n`;

async function refused(port) {
  try {
    const c = await RawConn.open(port);
    c.destroy();
    return false;
  } catch (e) {
    return e.code === 'ECONNREFUSED';
  }
}

async function exitOf(srv, ms) {
  await eventually(() => srv.exited !== null, ms, 20);
  return srv.exited;
}

describe('graceful shutdown', () => {
  const servers = [];
  after(async () => {
    const errors = [];
    for (const s of servers) {
      try { await stopClean(s); } catch (e) { errors.push(e); }
    }
    if (errors.length) throw errors[0];
  });

  it('completes a request in flight, refuses new connections and exits 0', async () => {
    const srv = await startServer({ args: ['--shutdown-timeout=10'] });
    servers.push(srv);

    const idle = await RawConn.open(srv.port);
    idle.write('GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n');
    assert.equal((await idle.response()).status, 200);

    // a login whose body is still arriving when the signal comes
    const slow = await RawConn.open(srv.port);
    slow.write(loginHead(LOGIN.length) + LOGIN.slice(0, 10));
    await sleep(100);

    srv.proc.kill('SIGTERM');
    assert.ok(await idle.closedWithin(2000), 'an idle keep-alive connection is not closed on SIGTERM');
    assert.ok(await eventually(() => refused(srv.port), 2000, 50), 'new connections are still accepted');
    assert.equal(srv.exited, null, 'exited with a request in flight');

    await slow.trickle(LOGIN.slice(10), { step: 8, gapMs: 60 });
    const res = await slow.response({ timeout: 10000 });
    const done = Date.now();
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.user.username, 'admin');
    assert.ok(res.headers['set-cookie'].length === 1);
    assert.equal(res.headers.connection, 'close', 'a draining server says it closes');
    assert.ok(await slow.closedWithin(2000));

    const ex = await exitOf(srv, 5000);
    assert.deepEqual(ex, { code: 0, sig: null }, srv.log().slice(-1500));
    assert.ok(Date.now() - done < 3000, 'slow to exit once the last request was answered');
  });

  it('lets a login being hashed finish after SIGTERM', async () => {
    const srv = await startServer({ args: ['--shutdown-timeout=10'] });
    servers.push(srv);
    const pending = new Client(srv.base).login('admin', ADMIN_PASSWORD);
    await sleep(80); // scrypt takes about half a second
    srv.proc.kill('SIGTERM');
    const r = await pending;
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(await exitOf(srv, 5000), { code: 0, sig: null });
  });

  it('cuts off stragglers after shutdown_timeout and still exits cleanly', async () => {
    const srv = await startServer({ args: ['--shutdown-timeout=1', '--body-timeout=60', '--header-timeout=60'] });
    servers.push(srv);
    const stuck = await RawConn.open(srv.port);
    stuck.write(loginHead(100) + '{"user'); // the rest never comes
    const half = await RawConn.open(srv.port);
    half.write('GET /healthz HTTP/1.1\r\nHost: t\r\n'); // headers never end
    await sleep(100);
    const t0 = Date.now();
    srv.proc.kill('SIGTERM');
    const ex = await exitOf(srv, 6000);
    assert.ok(ex, 'did not exit after shutdown_timeout');
    assert.deepEqual(ex, { code: 0, sig: null }, srv.log().slice(-1500));
    assert.ok(Date.now() - t0 < 4000, `took ${Date.now() - t0} ms with shutdown_timeout=1`);
    assert.ok(await stuck.closedWithin(1000));
    assert.ok(await half.closedWithin(1000));
  });

  it('exits cleanly when shutdown_timeout cuts off requests still being handled', async () => {
    // logins queue up for the two scrypt workers (eight accounts: one
    // address gets one check at a time per account); the timeout fires
    // while handlers still own their requests
    const srv = await startServer({ args: ['--shutdown-timeout=1'] });
    servers.push(srv);
    const logins = Array.from({ length: 8 }, (_, i) => new Client(srv.base).login(`nobody${i}`, 'some-password').catch((e) => ({ status: e.message })));
    await sleep(150);
    srv.proc.kill('SIGTERM');
    const ex = await exitOf(srv, 8000);
    assert.deepEqual(ex, { code: 0, sig: null }, `exit ${JSON.stringify(ex)}\n${srv.log().slice(-1500)}`);
    // each one either got its answer in time or saw the connection end;
    // none hangs and none gets a garbled reply
    const rs = await Promise.all(logins);
    for (const r of rs) {
      assert.ok(r.status === 401 || typeof r.status === 'string', `a cut-off login got ${r.status}`);
    }
  });
});
