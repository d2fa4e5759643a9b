// deploy_unit.test.mjs — the production files of deploy/ that need no engine:
// the hardened systemd unit passes `systemd-analyze verify` (and its
// `systemd-analyze security` exposure is printed and kept low), and
// deploy/gpucloud.conf.example names every setting of --help-config and is
// accepted by gpucloudd as a config file, with every commented-out default
// switched on as well.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync, rmSync, statSync, existsSync, chmodSync, openSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT, BIN, startServer, createDatabase, dropDatabase, Client, ADMIN_PASSWORD } from '../lib/server.mjs';

const UNIT = join(ROOT, 'deploy/gpucloudd.service');
const EXAMPLE = join(ROOT, 'deploy/gpucloud.conf.example');
const haveAnalyze = spawnSync('systemd-analyze', ['--version']).status === 0;
const isRoot = process.getuid && process.getuid() === 0;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// gpucloudd as the unit runs it: an unprivileged uid (nobody here) with only
// the given capabilities (ambient, inheritable and bounding), no new privileges
async function startConfined(caps, db, dir) {
  const list = caps.map((c) => '+' + c.replace(/^CAP_/, '').toLowerCase()).join(',');
  const capArgs = list ? [`--inh-caps=-all,${list}`, `--ambient-caps=-all,${list}`, `--bounding-set=-all,${list}`]
    : ['--inh-caps=-all', '--ambient-caps=-all', '--bounding-set=-all'];
  const portFile = join(dir, 'port');
  rmSync(portFile, { force: true });
  const log = openSync(join(dir, 'log'), 'a');
  const proc = spawn('setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', ...capArgs, '--no-new-privs', '--',
    BIN, '--listen=127.0.0.1', '--port=0', `--port-file=${portFile}`, `--db-url=${db.url}`, `--state-dir=${join(dir, 'state')}`,
    `--web-root=${join(ROOT, 'web')}`, `--migrations-dir=${join(ROOT, 'db/migrations')}`, '--scrypt-ln=10'],
  { env: { ...process.env, GPUCLOUD_ADMIN_PASSWORD: ADMIN_PASSWORD }, stdio: ['ignore', log, log] });
  let exited = null;
  proc.on('exit', (code) => { exited = code; });
  for (let i = 0; i < 200 && exited === null && !(existsSync(portFile) && readFileSync(portFile, 'utf8').trim()); i++) await sleep(50);
  assert.ok(existsSync(portFile), `gpucloudd did not start: ${readFileSync(join(dir, 'log'), 'utf8').slice(-2000)}`);
  return { proc, base: `http://127.0.0.1:${readFileSync(portFile, 'utf8').trim()}`, stop: async () => { proc.kill('SIGTERM'); for (let i = 0; i < 100 && exited === null; i++) await sleep(50); } };
}

// every directive of a unit file, as [key, value] pairs
function directives(text) {
  return text.split('\n').filter((l) => /^[A-Za-z]+=/.test(l)).map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]);
}

describe('deploy/gpucloudd.service', () => {
  const text = readFileSync(UNIT, 'utf8');
  const d = directives(text);
  const get = (k) => d.filter(([key]) => key === k).map(([, v]) => v);

  it('is hardened: strict file system, no new privileges, a few capabilities, a system call filter', () => {
    for (const [k, v] of [['ProtectSystem', 'strict'], ['NoNewPrivileges', 'yes'], ['PrivateTmp', 'yes'],
      ['PrivateDevices', 'yes'], ['ProtectHome', 'yes'], ['ProtectKernelTunables', 'yes'],
      ['ProtectKernelModules', 'yes'], ['ProtectControlGroups', 'yes'], ['Restart', 'on-failure'],
      ['User', 'gpucloud'], ['StateDirectory', 'gpucloud']]) {
      assert.deepEqual(get(k), [v], `${k}=${v}`);
    }
    assert.ok(get('SystemCallFilter').some((v) => v.startsWith('@system-service')), 'SystemCallFilter=@system-service');
    assert.deepEqual(get('RestrictAddressFamilies'), ['AF_INET AF_INET6 AF_UNIX AF_NETLINK']);
    const caps = get('CapabilityBoundingSet')[0].split(/\s+/).sort();
    assert.deepEqual(caps, ['CAP_CHOWN', 'CAP_DAC_OVERRIDE', 'CAP_DAC_READ_SEARCH', 'CAP_FOWNER', 'CAP_FSETID', 'CAP_NET_BIND_SERVICE']);
    assert.deepEqual(get('AmbientCapabilities')[0].split(/\s+/).sort(), caps, 'ambient = bounding set');
    assert.ok(get('ReadWritePaths').includes('/srv/gpucloud'), 'the data root is writable');
    // class folders are setgid (02770): RestrictSUIDSGID would refuse that chmod
    assert.deepEqual(get('RestrictSUIDSGID'), []);
    // the config file it starts with is the example's install place
    assert.match(get('ExecStart')[0], /^\/usr\/local\/bin\/gpucloudd --config=\/etc\/gpucloud\/gpucloud\.conf$/);
    // and that example's paths are the ones the unit opens up
    const conf = readFileSync(EXAMPLE, 'utf8');
    assert.match(conf, /^state_dir = \/var\/lib\/gpucloud$/m);
    assert.match(conf, /^data_root = \/srv\/gpucloud$/m);
  });

  it('passes systemd-analyze verify, and prints its security exposure', { skip: haveAnalyze ? false : 'no systemd-analyze' }, () => {
    // verify needs ExecStart's binary to exist: a copy naming the built one
    const dir = mkdtempSync(join(tmpdir(), 'gct-unit-'));
    try {
      const copy = join(dir, 'gpucloudd.service');
      writeFileSync(copy, text.replace(/^ExecStart=\/usr\/local\/bin\/gpucloudd /m, `ExecStart=${BIN} `));
      const v = spawnSync('systemd-analyze', ['verify', copy], { encoding: 'utf8' });
      assert.equal(v.status, 0, v.stderr);
      assert.equal(v.stderr.trim(), '', 'no warnings');
    } finally { rmSync(dir, { recursive: true, force: true }); }
    const s = spawnSync('systemd-analyze', ['security', '--offline=yes', UNIT], { encoding: 'utf8' });
    assert.equal(s.status, 0, s.stderr);
    const m = s.stdout.match(/Overall exposure level for gpucloudd\.service: ([\d.]+) (\w+)/);
    assert.ok(m, s.stdout);
    console.log(`# systemd-analyze security: exposure ${m[1]} ${m[2]}`);
    assert.ok(Number(m[1]) <= 3.0, `exposure ${m[1]} (OK is below 4.0; this unit is at 2.2)`);
  });

  it('its user and capabilities suffice: homes, uploads, the shared area and class folders work', { skip: isRoot ? false : 'needs root (setpriv)' }, async () => {
    const caps = get('CapabilityBoundingSet')[0].split(/\s+/);
    const dir = mkdtempSync(join(tmpdir(), 'gct-caps-'));
    chmodSync(dir, 0o755);
    const db = await createDatabase();
    let srv;
    try {
      srv = await startConfined(caps, db, dir);
      const status = readFileSync(`/proc/${srv.proc.pid}/status`, 'utf8');
      assert.match(status, /^Uid:\s+65534\s+65534\s+65534\s+65534$/m);
      assert.match(status, /^CapBnd:\s+000000000000041f$/m, 'chown, dac_override, dac_read_search, fowner, fsetid, net_bind_service');
      const admin = new Client(srv.base);
      assert.equal((await admin.login('admin', ADMIN_PASSWORD)).status, 200);
      const mk = async (u, role) => {
        assert.equal((await admin.post('/api/v1/users', { username: u, role, password: `pw-${u}-123456` })).status, 201);
        const c = new Client(srv.base);
        assert.equal((await c.login(u, `pw-${u}-123456`)).status, 200);
        return c;
      };
      const alice = await mk('alice', 'student'), tina = await mk('tina', 'teacher');
      let r = await alice.req('PUT', '/api/v1/files/home/a.txt', 'hello', { 'content-type': 'application/octet-stream' });
      assert.equal(r.status, 201, r.text);
      assert.equal((await alice.post('/api/v1/files/home/d', { op: 'mkdir' })).status, 201);
      assert.equal((await alice.get('/api/v1/files/home/a.txt')).text, 'hello');
      const home = statSync(join(dir, 'state/data/home/alice/a.txt'));
      assert.ok(home.uid >= 200000, `owned by alice's uid (${home.uid})`);
      assert.equal((await admin.req('PUT', '/api/v1/files/shared/notes.txt', 'shared', { 'content-type': 'application/octet-stream' })).status, 201);
      const cls = await tina.post('/api/v1/classes', { name: 'Caps 101' });
      assert.equal(cls.status, 201, cls.text);
      r = await tina.req('PUT', `/api/v1/files/class:${cls.json.id}/lab.txt`, 'lab', { 'content-type': 'application/octet-stream' });
      assert.equal(r.status, 201, r.text);
      assert.equal(statSync(join(dir, `state/data/classes/${cls.json.id}`)).mode & 0o7777, 0o2770, 'setgid class folder');
      await srv.stop();
      srv = null;
      // and the first of them is needed: without CAP_CHOWN a new home cannot be given to its user
      srv = await startConfined(caps.filter((c) => c !== 'CAP_CHOWN'), db, dir);
      const admin2 = new Client(srv.base);
      assert.equal((await admin2.login('admin', ADMIN_PASSWORD)).status, 200);
      assert.equal((await admin2.post('/api/v1/users', { username: 'bob', role: 'student', password: 'pw-bob-123456' })).status, 201);
      const bob = new Client(srv.base);
      assert.equal((await bob.login('bob', 'pw-bob-123456')).status, 200);
      r = await bob.req('PUT', '/api/v1/files/home/b.txt', 'x', { 'content-type': 'application/octet-stream' });
      assert.ok(r.status >= 400, `${r.status} ${r.text}`);
    } finally {
      if (srv) await srv.stop();
      dropDatabase(db.name);
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('deploy/gpucloud.conf.example', () => {
  const conf = readFileSync(EXAMPLE, 'utf8');
  const settings = execFileSync(BIN, ['--help-config'], { encoding: 'utf8' }).split('\n').slice(1)
    .map((l) => l.split(/\s+/)).filter((w) => w.length >= 5 && /^[a-z_]+$/.test(w[0])).map((w) => w[0]);

  it('names every setting of --help-config (regenerate with deploy/conf-example.sh)', () => {
    assert.ok(settings.length > 50, `${settings.length} settings`);
    const missing = settings.filter((n) => !new RegExp(`^(# )?${n} =`, 'm').test(conf));
    assert.deepEqual(missing, [], 'run: bash deploy/conf-example.sh build/gpucloudd > deploy/gpucloud.conf.example');
    // and nothing that is not a setting
    const named = [...conf.matchAll(/^(?:# )?([a-z_]+) =/mg)].map((m) => m[1]);
    assert.deepEqual(named.filter((n) => !settings.includes(n)), []);
  });

  it('is accepted by gpucloudd as its config file, with every default uncommented too', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gct-conf-'));
    const all = join(dir, 'all.conf');
    writeFileSync(all, conf.replace(/^# ([a-z_]+ =.*)$/mg, '$1'));
    const files = [EXAMPLE, all];
    try {
      for (const file of files) {
        // flags win over the file: a loopback port, the test's database and
        // state directory, the checkout's files, no TLS
        const srv = await startServer({
          args: [`--config=${file}`, '--tls-cert=', '--tls-key=', `--openapi-file=${join(ROOT, 'server/api/openapi.yaml')}`,
            '--data-root=', '--public-url=', '--scrypt-ln=14', '--metrics-allow=127.0.0.1'],
        });
        try {
          const c = new Client(srv.base);
          const r = await c.login('admin', ADMIN_PASSWORD);
          assert.equal(r.status, 200, `${file}: ${JSON.stringify(r.json)}`);
        } finally { await srv.stop(); }
      }
      // and a wrong line is refused with its line number: the file is read
      writeFileSync(all, 'port = 80\nno_such_setting = 1\n');
      const bad = spawnSync(BIN, [`--config=${all}`, '--port=0', '--db-url=postgresql:///nonexistent?host=/nonexistent'], { encoding: 'utf8', timeout: 10000 });
      assert.notEqual(bad.status, 0);
      assert.match(bad.stderr, /all\.conf:2:/, bad.stderr);
    } finally { rmSync(dir, { recursive: true, force: true }); }
  });
});
