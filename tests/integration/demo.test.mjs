// demo.test.mjs — `make demo` (deploy/demo.sh) against a real gpucloudd whose
// node `local` is the world's first engine, the way `make run` registers its
// engine: the script declares simulated GPUs, starts its own registry, builds
// the world's Jupyter recipe (from the world's debootstrap cache: no mirror
// needed) and pushes it, then adds the registry, the catalog image, the pool
// and the demo accounts through the API.  A student signs in with the printed
// password and starts the image on a simulated GPU; a second run changes
// nothing.  Without a server it says to start `make run`.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, existsSync, readFileSync, statSync, rmSync, cpSync } from 'node:fs';
import { join, dirname } from 'node:path';
import net from 'node:net';
import { ROOT, startServer, Client, ADMIN_PASSWORD } from '../lib/server.mjs';
import { FAST, docker, inspect, cleanup, clusterId, waitState, eventually, env } from './instances_lib.mjs';

const isRoot = process.getuid && process.getuid() === 0;

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
    s.on('error', reject);
  });
}

// Runs deploy/demo.sh; resolves {code, out} (stdout and stderr together).
function demo(extraEnv, args = ['up'], ms = 600000, script = join(ROOT, 'deploy/demo.sh')) {
  return new Promise((resolve) => {
    const child = spawn('bash', [script, ...args], {
      env: { ...process.env, ...extraEnv }, stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d) => { out += d; });
    child.stderr.on('data', (d) => { out += d; });
    const t = setTimeout(() => child.kill('SIGKILL'), ms);
    // 'exit' can come before the last of its output has been read (a quick
    // failure then read as ''): answer on 'close', when the pipes are
    // drained, or 2 s after 'exit' should a process it left hold them
    let code;
    const done = () => { clearTimeout(t); resolve({ code, out }); };
    child.on('exit', (c, sig) => { code = c ?? sig; setTimeout(done, 2000); });
    child.on('close', done);
  });
}

// What the demo made, as the admin sees it (pull states, which move, left out).
async function snapshot(admin) {
  const get = async (p) => { const r = await admin.get(p); assert.equal(r.status, 200, `${p}: ${r.text}`); return r.json; };
  const nodes = (await get('/api/v1/nodes')).items.map((n) => ({ name: n.name, labels: n.labels, gpus: n.gpus }));
  const pools = [];
  for (const p of (await get('/api/v1/pools')).items) {
    const one = await get(`/api/v1/pools/${p.id}`);
    pools.push({ name: one.name, description: one.description, sharing: one.sharing, roles: one.roles,
      gpus: one.nodes.flatMap((n) => n.gpus.map((g) => g.id)) });
  }
  const registries = (await get('/api/v1/registries')).items.map(({ images, ...r }) => r);
  const images = (await get('/api/v1/images')).items.map(({ nodes, ...i }) => i);
  const users = (await get('/api/v1/users')).items;
  const quotas = (await get('/api/v1/quotas')).items;
  const defaults = (await get('/api/v1/quotas/defaults')).items;
  return { nodes, pools, registries, images, users, quotas, defaults };
}

describe('make demo', { skip: isRoot ? false : 'needs root (device files, the registry)' }, () => {
  let srv, admin, dir, regPort, demoEnv, first, accounts, student, inst, cache, pulled = null;
  const demoRefs = () => [`127.0.0.1:${regPort}/nvidia/jupyter:1`, `127.0.0.1:${regPort}/nvidia/tensorboard-standin:1`];

  before(async () => {
    for (const k of ['GPUCLOUD_WORLD_DOCKER1', 'GPUCLOUD_WORLD_DIR', 'GPUCLOUD_WORLD_JUPYTER_IMAGE'])
      assert.ok(env[k], `${k} is not set: run inside the test world`);
    srv = await startServer({ args: [...FAST, `--docker-host=${env.GPUCLOUD_WORLD_DOCKER1}`] });
    clusterId(srv);
    admin = new Client(srv.base);
    assert.equal((await admin.login('admin', ADMIN_PASSWORD)).status, 200);
    mkdirSync(join(ROOT, 'var'), { recursive: true });
    dir = mkdtempSync(join(ROOT, 'var', 'test-demo-'));
    regPort = await freePort();
    // the world's debootstrap cache (world.sh's default, or where it was told)
    cache = env.GPUCLOUD_WORLD_CACHE || join(dirname(env.GPUCLOUD_WORLD_DIR), 'cache');
    demoEnv = {
      GPUCLOUD_DEMO_URL: srv.base, GPUCLOUD_ADMIN_PASSWORD: ADMIN_PASSWORD,
      GPUCLOUD_STATE_DIR: join(dir, 'state'), GPUCLOUD_DEMO_DIR: join(dir, 'demo'),
      GPUCLOUD_DEMO_REGISTRY_PORT: String(regPort), GPUCLOUD_WORLD_CACHE: cache,
    };
    if (!existsSync(join(cache, 'jupyter-rootfs-bookworm.tar'))) {
      // no cached root filesystem (a world whose registry outlived its cache):
      // push the world's image instead of debootstrapping for minutes
      const cfg = join(dir, 'dockercfg');
      mkdirSync(cfg);
      execFileSync('docker', ['--config', cfg, '-H', env.GPUCLOUD_WORLD_DOCKER1, 'login', '-u', env.GPUCLOUD_WORLD_REGISTRY_USER,
        '--password-stdin', env.GPUCLOUD_WORLD_REGISTRY], { input: env.GPUCLOUD_WORLD_REGISTRY_KEY, stdio: ['pipe', 'ignore', 'pipe'] });
      try { docker(env.GPUCLOUD_WORLD_DOCKER1, 'image', 'inspect', env.GPUCLOUD_WORLD_JUPYTER_IMAGE); } catch { pulled = env.GPUCLOUD_WORLD_JUPYTER_IMAGE; }
      execFileSync('docker', ['--config', cfg, '-H', env.GPUCLOUD_WORLD_DOCKER1, 'pull', '-q', env.GPUCLOUD_WORLD_JUPYTER_IMAGE], { stdio: 'ignore' });
      demoEnv.GPUCLOUD_DEMO_IMAGE_FROM = env.GPUCLOUD_WORLD_JUPYTER_IMAGE;
    }
  });

  after(async () => {
    if (srv) cleanup(srv, [env.GPUCLOUD_WORLD_DOCKER1]);
    await srv?.stop();
    if (dir) {
      await demo(demoEnv, ['down'], 60000);
      rmSync(dir, { recursive: true, force: true });
    }
    for (const ref of [...(regPort ? demoRefs() : []), ...(pulled ? [pulled] : [])]) {
      try { docker(env.GPUCLOUD_WORLD_DOCKER1, 'rmi', ref); } catch { /* never pulled */ }
    }
  });

  it('says to start `make run` when no server answers, and changes nothing', async () => {
    const port = await freePort();
    const r = await demo({ ...demoEnv, GPUCLOUD_DEMO_URL: `http://127.0.0.1:${port}` });
    assert.notEqual(r.code, 0, r.out);
    assert.match(r.out, /no gpucloudd answers on http:\/\/127\.0\.0\.1:\d+: start it first with `make run`/);
    assert.ok(!existsSync(join(dir, 'demo')), 'nothing was made');
  });

  it('sets up simulated GPUs, a pool, the Jupyter image in its registry and the demo accounts', async () => {
    first = await demo(demoEnv);
    assert.equal(first.code, 0, first.out);
    // the accounts: printed, and saved 0600 with the passwords
    const file = join(dir, 'state', 'demo-accounts');
    assert.equal(statSync(file).mode & 0o777, 0o600);
    accounts = Object.fromEntries(readFileSync(file, 'utf8').split('\n').filter((l) => l && !l.startsWith('#'))
      .map((l) => { const [u, role, pw] = l.split(' '); return [u, { role, pw }]; }));
    assert.deepEqual(Object.keys(accounts).sort(), ['demo-student1', 'demo-student2', 'demo-student3', 'demo-teacher']);
    for (const [u, a] of Object.entries(accounts)) {
      assert.match(first.out, new RegExp(`${u}\\s+${a.role}\\s+${a.pw}`), 'printed');
      assert.ok(a.pw.length >= 12);
    }
    assert.match(first.out, /simulated GPUs, not real ones/);

    const s = await snapshot(admin);
    // node local: four declared GPUs on device files under the demo's folder
    const local = s.nodes.find((n) => n.name === 'local');
    assert.ok(local, JSON.stringify(s.nodes));
    assert.equal(local.gpus.length, 4);
    for (const [i, g] of local.gpus.entries()) {
      assert.equal(g.simulated, true);
      assert.match(g.model, /demo/i);
      assert.deepEqual(g.devices, [join(dir, 'demo', 'gpus', `nvidia${i}`)]);
      const st = statSync(g.devices[0]);
      assert.ok(st.isCharacterDevice(), g.devices[0]);
    }
    // the pool, over those GPUs
    const pool = s.pools.find((p) => p.name === 'demo');
    assert.ok(pool, JSON.stringify(s.pools));
    assert.match(pool.description, /demo/);
    assert.deepEqual(pool.gpus.sort(), local.gpus.map((g) => g.id).sort());
    // its registry (answering with its htpasswd user) and the catalog image in it
    const reg = s.registries.find((r) => r.name === 'demo');
    assert.ok(reg, JSON.stringify(s.registries));
    assert.equal(reg.server, `127.0.0.1:${regPort}`);
    assert.equal(reg.username, 'demo');
    assert.equal(reg.has_password, true);
    assert.equal(reg.personal, true, 'save-as-image has somewhere to push');
    const key = readFileSync(join(dir, 'demo', 'registry', 'key'), 'utf8').trim();
    const tags = await fetch(`http://127.0.0.1:${regPort}/v2/nvidia/jupyter/tags/list`,
      { headers: { authorization: 'Basic ' + Buffer.from(`demo:${key}`).toString('base64') } });
    assert.equal(tags.status, 200);
    assert.deepEqual((await tags.json()).tags, ['1']);
    assert.equal((await fetch(`http://127.0.0.1:${regPort}/v2/nvidia/jupyter/tags/list`)).status, 401);
    const img = s.images.find((i) => i.reference === `127.0.0.1:${regPort}/nvidia/jupyter:1`);
    assert.ok(img, JSON.stringify(s.images));
    assert.equal(img.registry_id, reg.id);
    assert.equal(img.framework, 'jupyter');
    assert.match(img.display_name, /demo/);
    assert.match(img.description, /demo/);
    assert.deepEqual(img.app_ports, [{ name: 'jupyter', port: 8888 }]);
    // the accounts and their quotas on the pool
    for (const [u, a] of Object.entries(accounts)) {
      const user = s.users.find((x) => x.username === u);
      assert.ok(user, u);
      assert.equal(user.role, a.role);
      assert.match(user.display_name, /^Demo /);
      const q = s.quotas.find((x) => x.user_id === user.id && x.pool === 'demo');
      assert.ok(q, `${u} has a quota on pool demo`);
      assert.equal(q.max_slices, a.role === 'teacher' ? 2 : 1);
    }
  });

  it('lets a student sign in with the printed password and start Jupyter on a simulated GPU', async () => {
    assert.ok(accounts, 'the demo was set up');
    student = new Client(srv.base);
    assert.equal((await student.login('demo-student1', accounts['demo-student1'].pw)).status, 200);
    const imgs = await student.get('/api/v1/images');
    const img = imgs.json.items.find((i) => i.display_name === 'Jupyter Notebook (demo)');
    assert.ok(img, `the student sees the demo image: ${imgs.text}`);
    const pools = await student.get('/api/v1/pools');
    assert.ok(pools.json.items.some((p) => p.name === 'demo' && p.free_slices === 4), pools.text);
    // more than the quota's one GPU is refused at once, saying so
    const two = await student.post('/api/v1/instances', { name: 'nb2', image_id: img.id, pool: 'demo', slices: 2, cpu_millis: 500, mem_mib: 512 });
    assert.equal(two.status, 422, two.text);
    assert.equal(two.json.error.code, 'exceeds_quota', two.text);
    const r = await student.post('/api/v1/instances', { name: 'nb', image_id: img.id, pool: 'demo', slices: 1, cpu_millis: 1000, mem_mib: 768 });
    assert.equal(r.status, 202, r.text);
    inst = await waitState(student, r.json.id, 'running', 300000);
    // the container got one of the demo's device files as /dev/nvidia0
    const c = (await student.get(`/api/v1/instances/${inst.id}`)).json;
    const name = docker(env.GPUCLOUD_WORLD_DOCKER1, 'ps', '-a', '--filter', `label=gpucloud.cluster=${clusterId(srv)}`, '--format', '{{.Names}}');
    assert.ok(name, `a container of the instance: ${JSON.stringify(c)}`);
    const devs = inspect(env.GPUCLOUD_WORLD_DOCKER1, name.split('\n')[0]).HostConfig.Devices;
    assert.equal(devs.length, 1, JSON.stringify(devs));
    assert.ok(devs[0].PathOnHost.startsWith(join(dir, 'demo', 'gpus', 'nvidia')), JSON.stringify(devs));
    assert.equal(devs[0].PathInContainer, '/dev/nvidia0');
    // and Jupyter's route, through the proxy on its own origin
    const routes = await student.get(`/api/v1/routes?instance_id=${inst.id}`);
    assert.equal(routes.status, 200, routes.text);
    assert.ok(routes.json.items.some((x) => x.port_name === 'jupyter'), routes.text);
  });

  it('changes nothing when run again', async () => {
    assert.ok(first && first.code === 0, 'the first run succeeded');
    const before = await snapshot(admin);
    const audit = await admin.get('/api/v1/audit?limit=1');
    assert.equal(audit.status, 200, audit.text);
    assert.ok(audit.json.items.length, audit.text);
    const lastId = audit.json.items[0].id;
    const accountsBefore = readFileSync(join(dir, 'state', 'demo-accounts'), 'utf8');
    const again = await demo(demoEnv);
    assert.equal(again.code, 0, again.out);
    assert.doesNotMatch(again.out, /adding|declaring|building|pushing|quota of|setting a new|is now/, again.out);
    assert.deepEqual(await snapshot(admin), before);
    assert.equal(readFileSync(join(dir, 'state', 'demo-accounts'), 'utf8'), accountsBefore);
    // the admin's session came and went; nothing else was written
    const since = (await admin.get('/api/v1/audit?limit=50')).json.items.filter((e) => e.id > lastId);
    assert.deepEqual([...new Set(since.map((e) => e.action))].sort(), ['login.success', 'logout']);
    // the student's instance still runs
    assert.equal((await student.get(`/api/v1/instances/${inst.id}`)).json.state, 'running');
  });
});

// Offline: an image already on the engine is pushed under the recipe's name
// instead of being built (the world's small busybox image stands in for it).
describe('make demo with GPUCLOUD_DEMO_IMAGE_FROM', { skip: isRoot ? false : 'needs root (device files, the registry)' }, () => {
  let srv, admin, dir, regPort, demoEnv, hadFrom = true;
  const from = () => env.GPUCLOUD_WORLD_IMAGE;

  before(async () => {
    for (const k of ['GPUCLOUD_WORLD_DOCKER1', 'GPUCLOUD_WORLD_IMAGE', 'GPUCLOUD_WORLD_REGISTRY_KEY'])
      assert.ok(env[k], `${k} is not set: run inside the test world`);
    srv = await startServer({ args: [...FAST, `--docker-host=${env.GPUCLOUD_WORLD_DOCKER1}`] });
    admin = new Client(srv.base);
    assert.equal((await admin.login('admin', ADMIN_PASSWORD)).status, 200);
    mkdirSync(join(ROOT, 'var'), { recursive: true });
    dir = mkdtempSync(join(ROOT, 'var', 'test-demo-'));
    regPort = await freePort();
    const cfg = join(dir, 'dockercfg');
    mkdirSync(cfg);
    execFileSync('docker', ['--config', cfg, '-H', env.GPUCLOUD_WORLD_DOCKER1, 'login', '-u', env.GPUCLOUD_WORLD_REGISTRY_USER,
      '--password-stdin', env.GPUCLOUD_WORLD_REGISTRY], { input: env.GPUCLOUD_WORLD_REGISTRY_KEY, stdio: ['pipe', 'ignore', 'pipe'] });
    try { docker(env.GPUCLOUD_WORLD_DOCKER1, 'image', 'inspect', from()); } catch { hadFrom = false; }
    execFileSync('docker', ['--config', cfg, '-H', env.GPUCLOUD_WORLD_DOCKER1, 'pull', '-q', from()], { stdio: 'ignore' });
    demoEnv = {
      GPUCLOUD_DEMO_URL: srv.base, GPUCLOUD_ADMIN_PASSWORD: ADMIN_PASSWORD,
      GPUCLOUD_STATE_DIR: join(dir, 'state'), GPUCLOUD_DEMO_DIR: join(dir, 'demo'),
      GPUCLOUD_DEMO_REGISTRY_PORT: String(regPort), GPUCLOUD_WORLD_CACHE: join(dir, 'no-cache'),
      GPUCLOUD_DEMO_IMAGE_FROM: from(),
    };
  });

  after(async () => {
    await srv?.stop();
    if (dir) {
      await demo(demoEnv, ['down'], 60000);
      rmSync(dir, { recursive: true, force: true });
    }
    // what this test put on the shared engine (the world's image only when it was not there)
    for (const ref of [`127.0.0.1:${regPort}/nvidia/jupyter:1`, ...(hadFrom ? [] : [from()])]) {
      try { docker(env.GPUCLOUD_WORLD_DOCKER1, 'rmi', ref); } catch { /* not there */ }
    }
  });

  it('pushes that image, builds nothing, and node local pulls it from there', async () => {
    const r = await demo(demoEnv);
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, new RegExp(`pushing ${from().replace(/[.]/g, '\\.')} as 127\\.0\\.0\\.1:${regPort}/nvidia/jupyter:1`));
    assert.doesNotMatch(r.out, /debootstrap|building/);
    assert.ok(!existsSync(join(dir, 'no-cache')), 'no debootstrap cache was made');
    // the registry holds the given image under the recipe's name
    const key = readFileSync(join(dir, 'demo', 'registry', 'key'), 'utf8').trim();
    const m = await fetch(`http://127.0.0.1:${regPort}/v2/nvidia/jupyter/manifests/1`, {
      headers: { authorization: 'Basic ' + Buffer.from(`demo:${key}`).toString('base64'),
        accept: 'application/vnd.docker.distribution.manifest.v2+json' } });
    assert.equal(m.status, 200);
    const cfgDigest = (await m.json()).config.digest;
    assert.equal(cfgDigest, JSON.parse(docker(env.GPUCLOUD_WORLD_DOCKER1, 'image', 'inspect', from()))[0].Id);
    // in the catalog, and node local pulls it from the demo's registry with its credentials
    const img = (await admin.get('/api/v1/images')).json.items.find((i) => i.reference === `127.0.0.1:${regPort}/nvidia/jupyter:1`);
    assert.ok(img, 'in the catalog');
    let last;
    assert.ok(await eventually(async () => {
      last = (await admin.get(`/api/v1/images/${img.id}`)).json;
      return last.nodes.length === 1 && last.nodes[0].state === 'present';
    }, 60000, 250), `pulled to node local: ${JSON.stringify(last?.nodes)}`);
  });

  it('sets its registry up again when the demo folder was removed, with the catalog told the new password', async () => {
    const stop = await demo(demoEnv, ['down'], 60000);
    assert.equal(stop.code, 0, stop.out);
    rmSync(join(dir, 'demo'), { recursive: true, force: true });
    const r = await demo(demoEnv);
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, /registry 'demo' is now 127\.0\.0\.1:\d+ with a new password/);
    assert.match(r.out, /pushing/);
    assert.ok(statSync(join(dir, 'demo', 'gpus', 'nvidia0')).isCharacterDevice(), 'the device files are back');
    // the engine logs in to the registry with what the catalog holds
    const reg = (await admin.get('/api/v1/registries')).json.items.find((x) => x.name === 'demo');
    const t = await admin.post(`/api/v1/registries/${reg.id}/test`, {});
    assert.equal(t.status, 200, t.text);
    assert.equal(t.json.ok, true, t.text);
  });
});

// The way a newcomer types it: deploy/run.sh (make run) from a checkout, then
// deploy/demo.sh (make demo) with nothing set: it finds the server on
// GPUCLOUD_PORT and the admin's password in var/run/state/admin-password.
// run.sh's Ctrl-C stops the demo's registry too, and its next start starts it
// again, so the catalog image stays pullable.
describe('make run, then make demo', { skip: isRoot ? false : 'needs root (make run, device files)' }, () => {
  let top, clone, run, port, pgPort, regPort, baseEnv, pulledFrom = false;
  const from = () => env.GPUCLOUD_WORLD_IMAGE;

  function startRun() {
    const child = spawn('bash', [join(clone, 'deploy/run.sh')], { env: baseEnv, stdio: ['ignore', 'pipe', 'pipe'] });
    const r = { child, out: '' };
    child.stdout.on('data', (d) => { r.out += d; });
    child.stderr.on('data', (d) => { r.out += d; });
    r.exited = new Promise((resolve) => child.on('exit', (code, sig) => resolve({ code, sig })));
    return r;
  }
  async function ready(r) {
    const ok = await eventually(async () => {
      if (r.child.exitCode !== null) return 'exited';
      try { return (await fetch(`http://127.0.0.1:${port}/readyz`)).status === 200 ? 'ready' : null; } catch { return null; }
    }, 120000, 250);
    assert.equal(ok, 'ready', `run.sh did not come up:\n${r.out}`);
  }
  async function stopRun(r) {
    r.child.kill('SIGTERM');
    const { code } = await r.exited;
    assert.equal(code, 0, r.out);
  }
  const regAnswers = async () => {
    try { return (await fetch(`http://127.0.0.1:${regPort}/v2/`)).status === 401; } catch { return false; }
  };

  before(async () => {
    for (const k of ['GPUCLOUD_WORLD_DOCKER1', 'GPUCLOUD_WORLD_IMAGE', 'GPUCLOUD_WORLD_REGISTRY_KEY'])
      assert.ok(env[k], `${k} is not set: run inside the test world`);
    mkdirSync(join(ROOT, 'var'), { recursive: true });
    top = mkdtempSync(join(ROOT, 'var', 'test-demo-run-'));
    execFileSync('chmod', ['0755', top]); // postgres keeps its cluster in the clone
    clone = join(top, 'gpucloud');
    mkdirSync(clone);
    for (const d of ['deploy', 'db', 'web']) cpSync(join(ROOT, d), join(clone, d), { recursive: true });
    [port, pgPort, regPort] = [await freePort(), await freePort(), await freePort()];
    // a small image stands in for the Jupyter build (offline: GPUCLOUD_DEMO_IMAGE_FROM)
    const cfg = join(top, 'dockercfg');
    mkdirSync(cfg);
    try { docker(env.GPUCLOUD_WORLD_DOCKER1, 'image', 'inspect', from()); } catch { pulledFrom = true; }
    execFileSync('docker', ['--config', cfg, '-H', env.GPUCLOUD_WORLD_DOCKER1, 'login', '-u', env.GPUCLOUD_WORLD_REGISTRY_USER,
      '--password-stdin', env.GPUCLOUD_WORLD_REGISTRY], { input: env.GPUCLOUD_WORLD_REGISTRY_KEY, stdio: ['pipe', 'ignore', 'pipe'] });
    execFileSync('docker', ['--config', cfg, '-H', env.GPUCLOUD_WORLD_DOCKER1, 'pull', '-q', from()], { stdio: 'ignore' });
    baseEnv = { ...process.env };
    for (const k of Object.keys(baseEnv)) if (/^GPUCLOUD_(ADMIN_PASSWORD|STATE_DIR|DEMO_|DB_URL)/.test(k)) delete baseEnv[k];
    Object.assign(baseEnv, {
      GPUCLOUD_BIN: process.env.GPUCLOUD_BIN || join(ROOT, 'build/gpucloudd'), GPUCLOUD_PORT: String(port),
      GPUCLOUD_RUN_PG_PORT: String(pgPort), GPUCLOUD_DOCKER_HOST: env.GPUCLOUD_WORLD_DOCKER1,
      GPUCLOUD_NODE_CHECK_INTERVAL_S: '1', GPUCLOUD_DEMO_REGISTRY_PORT: String(regPort),
      GPUCLOUD_DEMO_IMAGE_FROM: from(),
    });
  });

  after(async () => {
    for (const r of [run1, run2]) if (r && r.child.exitCode === null) { r.child.kill('SIGTERM'); await r.exited; }
    if (clone) await demo(baseEnv, ['down'], 60000, join(clone, 'deploy/demo.sh'));
    if (top) rmSync(top, { recursive: true, force: true });
    for (const ref of [`127.0.0.1:${regPort}/nvidia/jupyter:1`, ...(pulledFrom ? [from()] : [])]) {
      try { docker(env.GPUCLOUD_WORLD_DOCKER1, 'rmi', ref); } catch { /* not there */ }
    }
  });

  let run1, run2;
  it('sets up the demo with the admin password make run saved, and Ctrl-C stops its registry', async () => {
    run1 = startRun();
    await ready(run1);
    const pwFile = join(clone, 'var/run/state/admin-password');
    assert.ok(existsSync(pwFile), run1.out);
    const r = await demo(baseEnv, ['up'], 600000, join(clone, 'deploy/demo.sh'));
    assert.equal(r.code, 0, r.out);
    assert.equal(statSync(join(clone, 'var/run/state/demo-accounts')).mode & 0o777, 0o600);
    assert.ok(existsSync(join(clone, 'var/run/demo/gpus/nvidia3')));
    const admin = new Client(`http://127.0.0.1:${port}`);
    assert.equal((await admin.login('admin', readFileSync(pwFile, 'utf8').trim())).status, 200);
    const pools = (await admin.get('/api/v1/pools')).json.items;
    assert.equal(pools.find((p) => p.name === 'demo')?.gpus, 4, JSON.stringify(pools));
    assert.ok(await regAnswers(), 'the demo registry runs');
    await stopRun(run1);
    assert.equal(await regAnswers(), false, 'Ctrl-C stopped the demo registry');
  });

  it('starts the demo registry again with make run, and a second make demo changes nothing', async () => {
    assert.ok(run1, 'the first run happened');
    run2 = startRun();
    await ready(run2);
    assert.ok(await regAnswers(), `the demo registry answers again:\n${run2.out}`);
    const again = await demo(baseEnv, ['up'], 600000, join(clone, 'deploy/demo.sh'));
    assert.equal(again.code, 0, again.out);
    assert.doesNotMatch(again.out, /adding|declaring|building|pushing|quota of|setting a new|is now/, again.out);
    await stopRun(run2);
    assert.equal(await regAnswers(), false);
  });
});
