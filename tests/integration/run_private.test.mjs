// run_private.test.mjs — `make run`'s embedded default (deploy/run.sh: a
// private PostgreSQL, the server on it) from a checkout inside a 0700 folder,
// the way root's clone in its home folder sits.  PostgreSQL runs as the user
// postgres, who cannot enter such a folder: the cluster must live where
// postgres can reach it, and everything must still start, answer and stop.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, cpSync, rmSync, statSync, existsSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import net from 'node:net';
import { ROOT } from '../lib/server.mjs';
import { eventually } from '../lib/itest.mjs';

const BIN = process.env.GPUCLOUD_BIN || join(ROOT, 'build/gpucloudd');
const PG_BIN = process.env.PG_BIN || '/usr/lib/postgresql/15/bin';
const isRoot = process.getuid && process.getuid() === 0;

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
    s.on('error', reject);
  });
}

describe('make run from a checkout inside a 0700 folder', { skip: isRoot ? false : 'needs root (PostgreSQL runs as postgres)' }, () => {
  let top, clone, child, out = '', port, pgPort, exited;

  before(async () => {
    assert.ok(process.env.GPUCLOUD_WORLD_DOCKER1, 'GPUCLOUD_WORLD_DOCKER1 is not set: run inside the test world');
    top = mkdtempSync(join(tmpdir(), 'gc-home-'));
    assert.equal(statSync(top).mode & 0o777, 0o700);
    // what run.sh reads of a checkout: its scripts, the migrations, the web root
    clone = join(top, 'gpucloud');
    mkdirSync(clone);
    for (const d of ['deploy', 'db', 'web']) cpSync(join(ROOT, d), join(clone, d), { recursive: true });
    port = await freePort();
    pgPort = await freePort();
    child = spawn('bash', [join(clone, 'deploy/run.sh')], {
      env: {
        ...process.env, GPUCLOUD_BIN: BIN, GPUCLOUD_PORT: String(port), GPUCLOUD_RUN_PG_PORT: String(pgPort),
        GPUCLOUD_DOCKER_HOST: process.env.GPUCLOUD_WORLD_DOCKER1, GPUCLOUD_DB_URL: '',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout.on('data', (d) => { out += d; });
    child.stderr.on('data', (d) => { out += d; });
    exited = new Promise((resolve) => child.on('exit', (code, sig) => resolve({ code, sig })));
  });

  after(async () => {
    if (child && child.exitCode === null) { child.kill('SIGTERM'); await exited; }
    const m = /host=([^&\s]+)/.exec(out);
    if (m && !m[1].startsWith(top)) rmSync(join(m[1], '..'), { recursive: true, force: true });
    if (top) rmSync(top, { recursive: true, force: true });
  });

  it('starts PostgreSQL where postgres can reach it and the server answers /readyz', async () => {
    const ready = await eventually(async () => {
      if (child.exitCode !== null) return 'exited';
      try { const r = await fetch(`http://127.0.0.1:${port}/readyz`); return r.status === 200 ? 'ready' : null; } catch { return null; }
    }, 120000, 500);
    assert.equal(ready, 'ready', `run.sh did not come up:\n${out}`);
    const m = /database: private PostgreSQL, postgresql:\/\/\/gpucloud\?host=([^&\s]+)/.exec(out);
    assert.ok(m, out);
    assert.ok(!m[1].startsWith(top), `the cluster's socket is outside the 0700 folder: ${m[1]}`);
    // postgres can reach the cluster's folder (this is what failed before)
    execFileSync('runuser', ['-u', 'postgres', '--', 'test', '-x', m[1]], { cwd: '/' });
    const me = await fetch(`http://127.0.0.1:${port}/api/v1/me`);
    assert.equal(me.status, 401);
  });

  it('stops the server and its PostgreSQL on SIGTERM', async () => {
    const m = /host=([^&\s]+)/.exec(out);
    child.kill('SIGTERM');
    const { code } = await exited;
    assert.equal(code, 0, out);
    assert.ok(existsSync(m[1]));
    let running = true;
    try { execFileSync(join(PG_BIN, 'pg_isready'), ['-q', '-h', m[1], '-p', String(pgPort)]); } catch { running = false; }
    assert.equal(running, false, 'the private PostgreSQL stopped');
  });
});
