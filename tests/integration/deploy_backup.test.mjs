// deploy_backup.test.mjs — deploy/backup.sh and deploy/restore.sh, once:
// a server with users, files in a home (owners, modes, an extended
// attribute), jobs (one ended, one waiting), tokens, sessions and audit
// history is backed up and stopped, its database dropped and its state
// directory and data root wiped; restored into a fresh database of the same
// name and empty folders, it starts and serves the same users (passwords,
// sessions, tokens), the same bytes and the same history — every table's
// rows are the same as before.  Then the upgrade procedure of
// deploy/README.md: migrations at start, and a roll back by restore.
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync, execFileSync } from 'node:child_process';
import { appendFileSync, writeFileSync, cpSync, mkdirSync, readFileSync, rmSync, statSync, readdirSync } from 'node:fs';
import { randomBytes, createHash } from 'node:crypto';
import { join } from 'node:path';
import { ROOT, BIN, startServer, createDatabase, dropDatabase, psql, Client, ADMIN_PASSWORD } from '../lib/server.mjs';

const isRoot = process.getuid && process.getuid() === 0;
const sha = (b) => createHash('sha256').update(b).digest('hex');

function sh(script, args) {
  const r = spawnSync('bash', [join(ROOT, 'deploy', script), '--config', '/dev/null', ...args], { encoding: 'utf8', timeout: 120000 });
  assert.equal(r.status, 0, `${script}: ${r.stdout}\n${r.stderr}`);
  return r;
}

// every table of the database: its row count and a digest of its rows
function fingerprint(url) {
  const tables = psql(url, "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1").split('\n');
  return Object.fromEntries(tables.map((t) => [t, psql(url,
    `SELECT count(*) || ' ' || md5(coalesce(string_agg(x::text, '|' ORDER BY x::text), '')) FROM "${t}" x`)]));
}

describe('backup and restore', { skip: isRoot ? false : 'needs root (file owners)' }, () => {
  const dir = join(ROOT, `var/test-deploy-backup-${process.pid}`);
  const state = join(dir, 'state');
  const data = join(state, 'data'); // the default layout: data_root inside state_dir
  let db, srv, backup, args;

  after(async () => {
    if (srv) await srv.stop();
    if (db) dropDatabase(db.name);
    rmSync(dir, { recursive: true, force: true });
  });

  it('brings back the same users, files and history after a wipe', async () => {
    mkdirSync(dir, { recursive: true, mode: 0o711 });
    db = await createDatabase();
    args = [`--state-dir=${state}`, '--scrypt-ln=10'];
    srv = await startServer({ db, args });
    const admin = new Client(srv.base);
    assert.equal((await admin.login('admin', ADMIN_PASSWORD)).status, 200);
    const users = {};
    for (const [u, role] of [['alice', 'student'], ['bob', 'researcher']]) {
      const r = await admin.post('/api/v1/users', { username: u, role, password: `pw-${u}-123456` });
      assert.equal(r.status, 201, r.text);
      const c = new Client(srv.base);
      assert.equal((await c.login(u, `pw-${u}-123456`)).status, 200);
      users[u] = c;
    }
    // files: text, 1 MiB of random bytes, a nested folder
    const files = { 'notes.txt': Buffer.from('hello from before the backup\n'), 'blob.bin': randomBytes(1 << 20) };
    for (const [n, b] of Object.entries(files)) {
      const r = await users.alice.req('PUT', `/api/v1/files/home/${n}`, b, { 'content-type': 'application/octet-stream' });
      assert.equal(r.status, 201, r.text);
    }
    for (const d of ['runs', 'runs/a']) assert.equal((await users.alice.post(`/api/v1/files/home/${d}`, { op: 'mkdir' })).status, 201, d);
    const nested = await users.alice.req('PUT', '/api/v1/files/home/runs/a/result.csv', 'epoch,loss\n1,0.5\n', { 'content-type': 'application/octet-stream' });
    assert.equal(nested.status, 201, nested.text);
    // an extended attribute the tar must carry
    const blobPath = join(data, 'home/alice/blob.bin');
    execFileSync('/usr/bin/python3', ['-c', `import os; os.setxattr(${JSON.stringify(blobPath)}, 'user.gpucloud', b'kept')`]);
    // jobs: one ended (cancelled while queued: no node is registered), one waiting
    const img = await admin.post('/api/v1/images', { reference: '127.0.0.1:5055/nvidia/busybox:1.36', display_name: 'bb', verify: false });
    assert.equal(img.status, 201, img.text);
    const jobs = [];
    for (const name of ['ended', 'waiting']) {
      const j = await admin.post('/api/v1/jobs', { name, image_id: img.json.id, command: ['true'], cpu_millis: 100, mem_mib: 64 });
      assert.equal(j.status, 201, j.text);
      jobs.push(j.json.id);
    }
    assert.equal((await admin.post(`/api/v1/jobs/${jobs[0]}/cancel`)).status, 202);
    let jobStates;
    for (let i = 0; i < 300; i++) {
      jobStates = await Promise.all(jobs.map(async (id) => (await admin.get(`/api/v1/jobs/${id}`)).json.state));
      if (jobStates[0] === 'cancelled') break;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.deepEqual(jobStates, ['cancelled', 'queued']);
    const tok = await users.bob.post('/api/v1/tokens', { name: 'script', scopes: ['read'] });
    assert.equal(tok.status, 201, tok.text);
    assert.equal((await new Client(srv.base).login('alice', 'wrong-password')).status, 401); // a failure in the audit log
    const before = {
      st: statSync(blobPath),
      key: sha(readFileSync(join(state, 'master.key'))),
    };
    await srv.stop({ keepDb: true });
    srv = null;
    const fp = fingerprint(db.url);
    assert.ok(Number(fp.users.split(' ')[0]) >= 3, JSON.stringify(fp.users));
    assert.ok(Number(fp.audit_log.split(' ')[0]) > 0, 'there is audit history');

    // back up, then wipe everything
    const b = sh('backup.sh', ['--db-url', db.url, '--state-dir', state, '--out', join(dir, 'backups')]);
    backup = b.stdout.trim();
    assert.match(backup, /\/gpucloud-\d{8}T\d{6}Z$/);
    assert.deepEqual(readdirSync(backup).sort().filter((f) => !/^(data|state)\.tar\./.test(f)), ['INFO', 'SHA256SUMS', 'db.dump']);
    assert.match(readFileSync(join(backup, 'INFO'), 'utf8'), /^schema migration \d{4}_\w+$/m);
    dropDatabase(db.name);
    rmSync(state, { recursive: true, force: true });
    psql(db.url.replace(`/${db.name}`, '/postgres'), `CREATE DATABASE ${db.name}`);

    sh('restore.sh', ['--from', backup, '--db-url', db.url, '--state-dir', state]);
    assert.deepEqual(fingerprint(db.url), fp, 'every table has the same rows');
    const again = spawnSync('bash', [join(ROOT, 'deploy/restore.sh'), '--config', '/dev/null', '--from', backup,
      '--db-url', db.url, '--state-dir', join(dir, 'elsewhere')], { encoding: 'utf8' });
    assert.notEqual(again.status, 0);
    assert.match(again.stderr, /already has \d+ tables/);
    // a damaged backup is refused before anything is touched
    appendFileSync(join(backup, 'INFO'), 'x');
    const bad = spawnSync('bash', [join(ROOT, 'deploy/restore.sh'), '--config', '/dev/null', '--from', backup,
      '--db-url', db.url, '--state-dir', join(dir, 'elsewhere')], { encoding: 'utf8' });
    assert.notEqual(bad.status, 0);
    assert.match(bad.stderr, /fails its checksums/);
    writeFileSync(join(backup, 'INFO'), readFileSync(join(backup, 'INFO'), 'utf8').slice(0, -1));

    // files came back byte-identical, with owners, modes and the attribute
    for (const [n, bytes] of Object.entries(files)) assert.equal(sha(readFileSync(join(data, 'home/alice', n))), sha(bytes), n);
    const st = statSync(blobPath);
    assert.deepEqual([st.uid, st.gid, st.mode, st.size, st.mtimeMs], [before.st.uid, before.st.gid, before.st.mode, before.st.size, before.st.mtimeMs]);
    assert.equal(execFileSync('/usr/bin/python3', ['-c', `import os; print(os.getxattr(${JSON.stringify(blobPath)}, 'user.gpucloud').decode())`], { encoding: 'utf8' }).trim(), 'kept');
    assert.equal(sha(readFileSync(join(state, 'master.key'))), before.key, 'the master key');
    assert.equal(statSync(join(state, 'master.key')).mode & 0o777, 0o600);

    // the platform serves the same users, files and history
    srv = await startServer({ db, args });
    for (const [u, c] of Object.entries(users)) {
      c.base = srv.base;
      assert.equal((await c.get('/api/v1/me')).status, 200, `${u}'s session lives on`);
      const fresh = new Client(srv.base);
      assert.equal((await fresh.login(u, `pw-${u}-123456`)).status, 200, `${u} logs in`);
    }
    const got = await users.alice.get('/api/v1/files/home/blob.bin');
    assert.equal(got.status, 200);
    const list = await users.alice.get('/api/v1/files/home/');
    assert.deepEqual(list.json.items.map((i) => i.name).filter((n) => n in files).sort(), Object.keys(files).sort());
    assert.equal(readFileSync(join(data, 'home/alice/runs/a/result.csv'), 'utf8'), 'epoch,loss\n1,0.5\n');
    const ro = new Client(srv.base);
    ro.token = tok.json.token;
    const me = await ro.get('/api/v1/me');
    assert.equal(me.status, 200, 'the API token works');
    assert.match(me.text, /"bob"/);
    admin.base = srv.base;
    for (const [i, id] of jobs.entries()) assert.equal((await admin.get(`/api/v1/jobs/${id}`)).json.state, jobStates[i], `job ${id}`);
    const audit = await admin.get('/api/v1/audit');
    assert.equal(audit.status, 200, audit.text);
    assert.ok(JSON.stringify(audit.json).includes('alice'), 'the audit history names alice');
    // and the restored sequences go on: a new user gets a new id
    const carol = await admin.post('/api/v1/users', { username: 'carol', role: 'student', password: 'pw-carol-123456' });
    assert.equal(carol.status, 201, carol.text);
  });

  // deploy/README.md's upgrade: back up, start the new release (its new
  // migrations run at start, each in a transaction), roll back by restore.
  it('upgrades by migrations at start (a failing one changes nothing) and rolls back by restore', async () => {
    assert.ok(backup && srv, 'the backup test ran');
    await srv.stop({ keepDb: true });
    srv = null;
    const level = () => psql(db.url, 'SELECT max(version) FROM schema_migrations');
    const old = level();
    const next = join(dir, 'migrations-next');
    cpSync(join(ROOT, 'db/migrations'), next, { recursive: true });
    // a failing migration: gpucloudd does not start, and nothing of it stays
    writeFileSync(join(next, '9998_upgrade_bad.sql'), 'ALTER TABLE users ADD COLUMN upgrade_bad int;\nSELECT 1 / 0;\n');
    const p = spawn(BIN, [`--db-url=${db.url}`, `--migrations-dir=${next}`, `--state-dir=${state}`, '--port=0',
      `--web-root=${join(ROOT, 'web')}`, '--log-level=info'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    p.stdout.on('data', (d) => { out += d; });
    p.stderr.on('data', (d) => { out += d; });
    for (let i = 0; i < 60 && !/division by zero/.test(out); i++) await new Promise((r) => setTimeout(r, 100));
    p.kill('SIGKILL');
    assert.match(out, /division by zero/);
    assert.equal(level(), old, 'the failed migration is not recorded');
    assert.equal(psql(db.url, "SELECT count(*) FROM information_schema.columns WHERE table_name = 'users' AND column_name = 'upgrade_bad'"), '0');
    rmSync(join(next, '9998_upgrade_bad.sql'));
    // the new release's migration runs at start
    writeFileSync(join(next, '9999_upgrade_probe.sql'), "ALTER TABLE users ADD COLUMN upgrade_probe int NOT NULL DEFAULT 7;\n");
    srv = await startServer({ db, args: [...args, `--migrations-dir=${next}`] });
    assert.equal(level(), '9999_upgrade_probe');
    assert.equal(psql(db.url, "SELECT upgrade_probe FROM users WHERE username = 'alice'"), '7');
    assert.equal((await new Client(srv.base).login('alice', 'pw-alice-123456')).status, 200);
    await srv.stop({ keepDb: true });
    srv = null;
    // roll back: the backup into a fresh database (and state, with --force)
    dropDatabase(db.name);
    psql(db.url.replace(`/${db.name}`, '/postgres'), `CREATE DATABASE ${db.name}`);
    sh('restore.sh', ['--from', backup, '--db-url', db.url, '--state-dir', state, '--force']);
    assert.equal(level(), old);
    srv = await startServer({ db, args });
    assert.equal((await new Client(srv.base).login('alice', 'pw-alice-123456')).status, 200);
  });
});
