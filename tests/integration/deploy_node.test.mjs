// deploy_node.test.mjs — deploy/node-setup.sh turns a Docker host into a node:
// it makes the mTLS certificates, dockerd's daemon.json and the app-port
// firewall, and prints the registration command.  Here it configures an
// engine of the test's own (tests/integration/deploy_node.sh: world-style,
// own bridge, never a world engine), which must then answer only clients with
// the control plane's certificate, and register with a real gpucloudd over
// mTLS by the printed command, and come up.  The firewall goes into test
// chains nothing jumps to there; deploy_fw.sh tries the same rule on real
// packets in network namespaces of its own.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync, execFileSync } from 'node:child_process';
import { readFileSync, readdirSync, writeFileSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT, startServer, Client, ADMIN_PASSWORD } from '../lib/server.mjs';

const isRoot = process.getuid && process.getuid() === 0;
const SH = join(ROOT, 'tests/integration/deploy_node.sh');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
  });
}

function sh(...args) {
  const r = spawnSync('bash', [SH, ...args], { encoding: 'utf8', timeout: 120000 });
  assert.equal(r.status, 0, `deploy_node.sh ${args[0]}: ${r.stdout}\n${r.stderr}`);
  return r;
}

// curl to the engine's TLS port with the given client files
function ping(port, tls, extra = []) {
  return spawnSync('curl', ['-sS', '-m', '10', '--cacert', join(tls, 'ca.pem'), ...extra,
    `https://127.0.0.1:${port}/_ping`], { encoding: 'utf8' });
}

describe('deploy/node-setup.sh', { skip: isRoot ? false : 'needs root (dockerd, bridges, iptables)' }, () => {
  const dir = join(ROOT, `var/test-deploy-node-${process.pid}`);
  const tls = join(dir, 'target/etc/docker/gpucloud-tls');
  let srv, admin, port, setup, token;

  before(async () => {
    srv = await startServer({ args: ['--node-check-interval-s=1'] });
    admin = new Client(srv.base);
    assert.equal((await admin.login('admin', ADMIN_PASSWORD)).status, 200);
    const t = await admin.post('/api/v1/tokens', { name: 'node-setup', scopes: ['read', 'write'] });
    assert.equal(t.status, 201, t.text);
    token = t.json.token;
    port = await freePort();
    setup = sh('setup', dir, String(port), srv.base);
    sh('start', dir);
  });

  after(async () => {
    spawnSync('bash', [SH, 'down', dir], { stdio: 'inherit', timeout: 120000 });
    if (srv) await srv.stop();
  });

  it('writes daemon.json with TLS, live-restore, icc=false and default ulimits', () => {
    const d = JSON.parse(readFileSync(join(dir, 'target/etc/docker/daemon.json'), 'utf8'));
    assert.deepEqual(d.hosts, [`unix://${dir}/node.sock`, `tcp://127.0.0.1:${port}`]);
    assert.equal(d.tls, true);
    assert.equal(d.tlsverify, true);
    assert.equal(d.tlscacert, join(tls, 'ca.pem'));
    assert.equal(d['live-restore'], true);
    assert.equal(d.icc, false);
    assert.equal(d['default-ulimits'].nofile.Hard, 65536);
    // the server certificate names the node's address; the client one is for clients
    const srvText = execFileSync('openssl', ['x509', '-noout', '-text', '-in', join(tls, 'server-cert.pem')], { encoding: 'utf8' });
    assert.match(srvText, /IP Address:127\.0\.0\.1/);
    assert.match(srvText, /TLS Web Server Authentication/);
    const cliText = execFileSync('openssl', ['x509', '-noout', '-text', '-in', join(tls, 'client-cert.pem')], { encoding: 'utf8' });
    assert.match(cliText, /TLS Web Client Authentication/);
    // keys and the registration body (it holds the client key) are private
    for (const f of ['server-key.pem', 'client-key.pem', 'register.json']) {
      const mode = Number(execFileSync('stat', ['-c', '%a', join(tls, f)], { encoding: 'utf8' }).trim());
      assert.equal(mode, 600, f);
    }
  });

  it('lets only the control plane open connections to published ports (test chains, applied and idempotent)', () => {
    const apps = execFileSync('iptables', ['-w', '-S', 'GCT-DEPLOY-APPS'], { encoding: 'utf8' });
    assert.match(apps, /^-A GCT-DEPLOY-APPS -s 127\.0\.0\.1(\/32)? -j RETURN$/m);
    assert.match(apps, /^-A GCT-DEPLOY-APPS -m conntrack --ctstate DNAT --ctdir ORIGINAL -j DROP$/m);
    const user = () => execFileSync('iptables', ['-w', '-S', 'GCT-DEPLOY-USER'], { encoding: 'utf8' });
    assert.match(user(), /^-A GCT-DEPLOY-USER -j GCT-DEPLOY-APPS$/m);
    // applied again (as the docker.service drop-in does at every start): same rules
    execFileSync(join(dir, 'target/usr/local/sbin/gpucloud-node-firewall'));
    assert.equal(execFileSync('iptables', ['-w', '-S', 'GCT-DEPLOY-APPS'], { encoding: 'utf8' }), apps);
    assert.equal((user().match(/-j GCT-DEPLOY-APPS/g) || []).length, 1);
    const dropin = readFileSync(join(dir, 'target/etc/systemd/system/docker.service.d/gpucloud-firewall.conf'), 'utf8');
    assert.match(dropin, new RegExp(`^ExecStartPost=${dir}/target/usr/local/sbin/gpucloud-node-firewall$`, 'm'));
    // and docker.service starts dockerd without -H (daemon.json names the hosts)
    const hosts = readFileSync(join(dir, 'target/etc/systemd/system/docker.service.d/gpucloud-hosts.conf'), 'utf8');
    assert.match(hosts, /^ExecStart=\n^ExecStart=\S*dockerd( --containerd=\S+)?$/m);
    // the machine's forwarding path does not reach the test chains
    assert.doesNotMatch(execFileSync('iptables', ['-w', '-S', 'FORWARD'], { encoding: 'utf8' }), /GCT-DEPLOY/);
  });

  it('the engine answers the control plane\'s certificate and refuses clients without it', () => {
    const ok = ping(port, tls, ['--cert', join(tls, 'client-cert.pem'), '--key', join(tls, 'client-key.pem')]);
    assert.equal(ok.status, 0, ok.stderr);
    assert.equal(ok.stdout, 'OK');
    const none = ping(port, tls);
    assert.notEqual(none.status, 0, 'no client certificate: refused');
    assert.notEqual(none.stdout, 'OK');
    // a certificate from another CA
    const other = mkdtempSync(join(tmpdir(), 'gct-rogue-'));
    try {
      execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
        '-subj', '/CN=rogue', '-days', '1', '-keyout', join(other, 'k.pem'), '-out', join(other, 'c.pem')], { stdio: 'ignore' });
      const rogue = ping(port, tls, ['--cert', join(other, 'c.pem'), '--key', join(other, 'k.pem')]);
      assert.notEqual(rogue.status, 0, 'a certificate of another CA: refused');
    } finally { rmSync(other, { recursive: true, force: true }); }
    // and plain HTTP on the TLS port gets nothing useful
    const plain = spawnSync('curl', ['-sS', '-m', '5', `http://127.0.0.1:${port}/_ping`], { encoding: 'utf8' });
    assert.notEqual(plain.stdout, 'OK');
  });

  it('registers over mTLS with the printed command and comes up', async () => {
    const cmd = setup.stdout.trim().split('\n').filter((l) => l.startsWith('curl '));
    assert.equal(cmd.length, 1, setup.stdout);
    assert.match(cmd[0], new RegExp(`--data-binary @${tls}/register\\.json ${srv.base}/api/v1/nodes$`));
    assert.match(setup.stderr, /register the node/);
    // without a token: refused
    const anon = spawnSync('bash', ['-c', cmd[0]], { encoding: 'utf8', env: { ...process.env, GPUCLOUD_TOKEN: '' } });
    assert.notEqual(anon.status, 0);
    const r = spawnSync('bash', ['-c', cmd[0]], { encoding: 'utf8', env: { ...process.env, GPUCLOUD_TOKEN: token }, timeout: 30000 });
    assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
    const node = JSON.parse(r.stdout);
    assert.equal(node.name, 'gctdeploy');
    assert.equal(node.url, `tcp://127.0.0.1:${port}`);
    assert.equal(node.tls, true);
    let n;
    for (let i = 0; i < 300; i++) {
      n = (await admin.get(`/api/v1/nodes/${node.id}`)).json;
      if (n && n.health === 'up') break;
      await sleep(200);
    }
    assert.equal(n.health, 'up', JSON.stringify(n));
    assert.ok(n.engine_version, 'the engine told its version');
    // the same body with a client certificate the engine does not trust: refused
    const body = JSON.parse(readFileSync(join(tls, 'register.json'), 'utf8'));
    body.name = 'gctdeploy-rogue';
    body.tls_cert = readFileSync(join(tls, 'server-cert.pem'), 'utf8');
    body.tls_key = readFileSync(join(tls, 'server-key.pem'), 'utf8');
    const bad = await admin.post('/api/v1/nodes', body);
    assert.equal(bad.status, 400, bad.text);
    const names = (await admin.get('/api/v1/nodes')).json.items.map((x) => x.name);
    assert.deepEqual(names, ['gctdeploy'], 'nothing stored for the refused one');
  });

  it('signs with a given CA (one CA for all nodes) or installs given certificates, and says what it needs', () => {
    const run = (...args) => spawnSync('bash', [join(ROOT, 'deploy/node-setup.sh'), '--control-plane', '10.0.0.5', '--dry-run', ...args], { encoding: 'utf8' });
    const second = join(dir, 'second'), third = join(dir, 'third');
    // a GPU host: the NVIDIA toolkit's runtime on PATH (a stand-in), and a
    // daemon.json the toolkit wrote already
    const bin = join(dir, 'bin');
    mkdirSync(join(second, 'etc/docker'), { recursive: true });
    mkdirSync(bin, { recursive: true });
    writeFileSync(join(bin, 'nvidia-container-runtime'), '#!/bin/sh\nexit 0\n', { mode: 0o755 });
    writeFileSync(join(second, 'etc/docker/daemon.json'), JSON.stringify({ 'data-root': '/data/docker', icc: true, runtimes: { runsc: { path: 'runsc' } } }));
    const env = { ...process.env, PATH: `${bin}:${process.env.PATH}` };
    let r = spawnSync('bash', [join(ROOT, 'deploy/node-setup.sh'), '--control-plane', '10.0.0.5', '--dry-run',
      '--address', 'node2.example.edu', '--san', 'IP:10.0.0.7', '--name', 'node2', '--target', second,
      '--ca-cert', join(tls, 'ca.pem'), '--ca-key', join(tls, 'ca-key.pem')], { encoding: 'utf8', env });
    assert.equal(r.status, 0, r.stderr);
    const d = JSON.parse(readFileSync(join(second, 'etc/docker/daemon.json'), 'utf8'));
    assert.equal(d['data-root'], '/data/docker', 'existing settings are kept');
    assert.equal(d.icc, false, 'ours win');
    assert.deepEqual(Object.keys(d.runtimes).sort(), ['nvidia', 'runsc']);
    assert.equal(d.runtimes.nvidia.path, 'nvidia-container-runtime');
    assert.ok(readdirSync(join(second, 'etc/docker')).some((f) => f.startsWith('daemon.json.bak.')), 'a backup is left');
    const tls2 = join(second, 'etc/docker/gpucloud-tls');
    assert.equal(readFileSync(join(tls2, 'ca.pem'), 'utf8'), readFileSync(join(tls, 'ca.pem'), 'utf8'));
    execFileSync('openssl', ['verify', '-CAfile', join(tls, 'ca.pem'), join(tls2, 'server-cert.pem'), join(tls2, 'client-cert.pem')]);
    const text = execFileSync('openssl', ['x509', '-noout', '-ext', 'subjectAltName', '-in', join(tls2, 'server-cert.pem')], { encoding: 'utf8' });
    assert.match(text, /DNS:node2\.example\.edu, IP Address:10\.0\.0\.7/);
    assert.match(readFileSync(join(tls2, 'register.json'), 'utf8'), /"url": "tcp:\/\/node2\.example\.edu:2376"/);
    // the firewall was only printed (--dry-run)
    assert.match(r.stderr, /iptables -w -A GPUCLOUD-APPS -s 10\.0\.0\.5 -j RETURN/);
    r = run('--address', '10.0.0.8', '--name', 'node3', '--target', third, '--ca-cert', join(tls, 'ca.pem'),
      '--server-cert', join(tls2, 'server-cert.pem'), '--server-key', join(tls2, 'server-key.pem'),
      '--client-cert', join(tls2, 'client-cert.pem'), '--client-key', join(tls2, 'client-key.pem'));
    assert.equal(r.status, 0, r.stderr);
    assert.equal(readFileSync(join(third, 'etc/docker/gpucloud-tls/server-cert.pem'), 'utf8'), readFileSync(join(tls2, 'server-cert.pem'), 'utf8'));
    // mistakes are named
    for (const [args, re] of [[[], /--control-plane ADDR is needed/], [['--control-plane', 'x;y'], /must be IP addresses or CIDRs/],
      [['--control-plane', '10.0.0.5', '--name', 'Bad Name'], /node name/], [['--control-plane', '10.0.0.5', '--bogus', '1'], /unknown option --bogus/]]) {
      const bad = spawnSync('bash', [join(ROOT, 'deploy/node-setup.sh'), '--dry-run', '--target', join(dir, 'bad'), ...args], { encoding: 'utf8' });
      assert.notEqual(bad.status, 0);
      assert.match(bad.stderr, re);
    }
  });
});

describe('the app-port firewall on real packets', { skip: isRoot ? false : 'needs root (network namespaces)' }, () => {
  it('lets the control plane, and only it, open connections to a published port', () => {
    const dir = join(ROOT, `var/test-deploy-fw-${process.pid}`);
    const r = spawnSync('bash', [join(ROOT, 'tests/integration/deploy_fw.sh'), dir], { encoding: 'utf8', timeout: 60000 });
    const out = `${r.stdout}\n${r.stderr}`;
    assert.equal(r.status, 0, out);
    assert.doesNotMatch(r.stdout, /^FAIL/m, out);
    for (const re of [/^ok without the rule, any address reaches/m, /^ok the control plane reaches/m, /^ok another address cannot reach/m,
      /^ok traffic Docker did not DNAT/m, /^ok the container's own outgoing connections pass/m, /^ok applying it again changes nothing/m]) {
      assert.match(r.stdout, re, out);
    }
  });
});
