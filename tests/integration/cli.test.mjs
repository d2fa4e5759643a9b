// cli.test.mjs — the `gpucloud` command-line client (build/gpucloud) run as
// a user runs it, against a real gpucloudd on the world's engines: login
// (token saved 0600, never printed, never in a URL), submit from flags, a
// YAML and a JSON job file, a sweep, jobs --json, logs -f on a running job,
// cancel, instances, cp both ways byte-identical with an interrupted 64 MiB
// upload and download resumed, usage, bad input and its exit codes, an
// expired and a revoked token, logout, the man page.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync, execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync, readFileSync, statSync, existsSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { randomBytes, createHash } from 'node:crypto';
import { BIN, ROOT, startServer, ADMIN_PASSWORD } from '../lib/server.mjs';
import { stopClean, sleep } from '../lib/itest.mjs';
import { world, mkUser, cleanup, sql, eventually, env } from './instances_lib.mjs';

// GPUCLOUD_CLI: another build of the client (a sanitizer build, say)
const CLI = process.env.GPUCLOUD_CLI || join(dirname(BIN), 'gpucloud');
const EXIT = { ok: 0, usage: 1, refused: 2, server: 3, notfound: 4, auth: 5, local: 6 };
const sha = (buf) => createHash('sha256').update(buf).digest('hex');

describe('gpucloud CLI', () => {
  let w, alice, home, work, run;

  // Runs the CLI; resolves {code, stdout, stderr, json}.  opts.input feeds
  // stdin, opts.env adds to the environment, opts.proc receives the child.
  function gc(args, opts = {}) {
    return new Promise((resolve) => {
      const p = spawn(CLI, args, {
        cwd: work,
        env: { PATH: process.env.PATH, HOME: home, XDG_CONFIG_HOME: join(home, '.config'), ...(opts.env || {}) },
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      let stdout = '', stderr = '';
      p.stdout.on('data', (d) => { stdout += d; });
      p.stderr.on('data', (d) => { stderr += d; });
      p.stdin.on('error', () => { /* it exited before reading its input */ });
      p.stdin.end(opts.input ?? '');
      if (opts.proc) opts.proc(p);
      p.on('close', (code, signal) => {
        let json = null;
        try { json = JSON.parse(stdout); } catch { /* text or JSON lines */ }
        resolve({ code, signal, stdout, stderr, json });
      });
    });
  }

  async function waitJob(id, states, ms = 30000) {
    let last = null;
    const ok = await eventually(async () => {
      const r = await gc(['--json', 'jobs', String(id)]);
      last = r.json;
      return r.code === 0 && states.includes(r.json.state);
    }, ms, 200);
    assert.ok(ok, `job ${id} did not reach ${states}: ${JSON.stringify(last)}`);
    return last;
  }

  before(async () => {
    w = await world({ node2: false, args: ['--scrypt-ln=10'] }); // logins cheap: this tests the client
    alice = await mkUser(w, 'alice');
    home = mkdtempSync(join(tmpdir(), 'gccli-home-'));
    work = mkdtempSync(join(tmpdir(), 'gccli-work-'));
    run = gc;
  });
  after(async () => {
    try { cleanup(w?.srv); } finally { await stopClean(w?.srv); }
    for (const d of [home, work]) if (d) rmSync(d, { recursive: true, force: true });
  });

  const credPath = () => join(home, '.config', 'gpucloud', 'credentials.json');

  it('logs in: a named token saved 0600, never printed; a wrong password is exit 5 with the server\'s message', async () => {
    const bad = await run(['login', w.srv.base, '-u', 'alice', '--password-stdin'], { input: 'nope\n' });
    assert.equal(bad.code, EXIT.auth, bad.stderr);
    assert.match(bad.stderr, /gpucloud: log in: .+/);
    assert.ok(!existsSync(credPath()));
    const r = await run(['login', w.srv.base, '-u', 'alice', '--password-stdin', '--json'], { input: 'alice-pass-1\n' });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.json.username, 'alice');
    assert.equal(r.json.server, w.srv.base);
    assert.deepEqual(r.json.token.scopes, ['read', 'write']);
    assert.match(r.json.token.name, /^gpucloud-cli /);
    assert.equal(statSync(credPath()).mode & 0o777, 0o600);
    assert.equal(statSync(dirname(credPath())).mode & 0o777, 0o700);
    const saved = JSON.parse(readFileSync(credPath(), 'utf8'));
    assert.match(saved.token, /^gct_/);
    assert.ok(!r.stdout.includes(saved.token) && !r.stderr.includes(saved.token), 'the token is never printed');
    // the login's browser session was ended; the token is alice's
    assert.equal(sql(w.srv, `SELECT count(*) FROM api_tokens WHERE user_id = ${alice.id} AND revoked_at IS NULL`), '1');
    const me = await run(['whoami', '--json']);
    assert.equal(me.code, 0, me.stderr);
    assert.equal(me.json.user.username, 'alice');
    assert.equal(me.json.auth, 'token');
    const text = await run(['whoami']);
    assert.match(text.stdout, /^alice \(student\) on http/);
  });

  it('submits from flags, from a YAML file and from a JSON file; lists them with jobs --json', async () => {
    const a = await run(['submit', '--json', '--name', 'from-flags', '--image', 'BusyBox', '--cpu', '0.2', '--memory', '64M',
      '--env', 'GREETING=hi', '--hp', 'lr=0.1', '--tag', 'cli', '--', 'sh', '-c', 'echo "$GREETING from flags $GPUCLOUD_HP_LR"']);
    assert.equal(a.code, 0, a.stderr);
    assert.equal(a.json.name, 'from-flags');
    assert.equal(a.json.image_id, w.image.id);
    assert.deepEqual(a.json.command, ['sh', '-c', 'echo "$GREETING from flags $GPUCLOUD_HP_LR"']);
    assert.equal(a.json.cpu_millis, 200);
    assert.equal(a.json.mem_mib, 64);
    assert.deepEqual(a.json.hyperparameters, { lr: 0.1 });
    assert.deepEqual(a.json.tags, ['cli']);
    // sent with an Idempotency-Key, so a retry after a cut connection makes no second job
    assert.match(sql(w.srv, `SELECT idempotency_key FROM jobs WHERE id = ${a.json.id}`), /^gpucloud-cli-[0-9a-f]{32}$/);

    writeFileSync(join(work, 'job.yaml'), [
      '# a job file',
      'name: from-yaml',
      `image: ${env.GPUCLOUD_WORLD_IMAGE}`,
      'command: echo "yaml $GPUCLOUD_HP_EPOCHS $GPUCLOUD_HP_OPT $MODE"',
      'cpu: 200m',
      'memory: 0.0625G',
      'max_runtime: 10m',
      'env: {MODE: fast, PORT: 8080}',
      'hyperparameters:',
      '  epochs: 3',
      '  opt: "sgd"',
      '  warm: true',
      'tags: [cli, yaml]',
      '',
    ].join('\n'));
    const b = await run(['submit', '--json', '-f', 'job.yaml']);
    assert.equal(b.code, 0, b.stderr);
    assert.equal(b.json.name, 'from-yaml');
    assert.equal(b.json.image_id, w.image.id);
    assert.deepEqual(b.json.command, ['sh', '-c', 'echo "yaml $GPUCLOUD_HP_EPOCHS $GPUCLOUD_HP_OPT $MODE"']);
    assert.equal(b.json.cpu_millis, 200);
    assert.equal(b.json.mem_mib, 64);
    assert.equal(b.json.max_runtime_s, 600);
    assert.deepEqual(b.json.env, { MODE: 'fast', PORT: '8080' });
    assert.deepEqual(b.json.hyperparameters, { epochs: 3, opt: 'sgd', warm: true });

    writeFileSync(join(work, 'job.json'), JSON.stringify({
      name: 'from-json', image_id: w.image.id, command: ['sh', '-c', 'echo json'], cpu_millis: 200, mem_mib: 64,
    }));
    // flags win over the file
    const c = await run(['submit', '--json', '-f', 'job.json', '--name', 'from-json-2']);
    assert.equal(c.code, 0, c.stderr);
    assert.equal(c.json.name, 'from-json-2');

    for (const j of [a.json, b.json, c.json]) assert.equal((await waitJob(j.id, ['succeeded', 'failed'])).state, 'succeeded');
    const logs = await run(['logs', String(b.json.id)]);
    assert.equal(logs.code, 0, logs.stderr);
    assert.match(logs.stdout, /^yaml 3 sgd fast$/m);
    assert.match((await run(['logs', String(a.json.id)])).stdout, /^hi from flags 0.1$/m);

    const l = await run(['jobs', '--json', '--tag', 'cli']);
    assert.equal(l.code, 0, l.stderr);
    assert.deepEqual(l.json.items.map((j) => j.name).sort(), ['from-flags', 'from-yaml']);
    const s = await run(['jobs', '--json', '--state', 'succeeded', '--all']);
    assert.ok([a, b, c].every((x) => s.json.items.some((j) => j.id === x.json.id)));
    const t = await run(['jobs']);
    assert.match(t.stdout, /^ID\s+NAME\s+STATE/);
    assert.match(t.stdout, /from-yaml\s+succeeded/);
  });

  it('submits a sweep from a file with a grid', async () => {
    writeFileSync(join(work, 'sweep.yaml'), [
      'name: lr-sweep',
      'image: BusyBox',
      'command: ["sh", "-c", "echo loss=$GPUCLOUD_HP_LR"]',
      'cpu: 0.1',
      'memory: 32M',
      'metric: loss',
      'goal: min',
      'grid:',
      '  lr: [0.1, 0.01]',
      '  bs: [16]',
      '',
    ].join('\n'));
    const r = await run(['submit', '--json', '-f', 'sweep.yaml']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.json.name, 'lr-sweep');
    assert.equal(r.json.runs, 2);
    assert.match(sql(w.srv, `SELECT idempotency_key FROM sweeps WHERE id = ${r.json.id}`), /^gpucloud-cli-[0-9a-f]{32}$/);
    const txt = await run(['submit', '-f', 'sweep.yaml', '--name', 'lr-sweep-2']);
    assert.equal(txt.code, 0, txt.stderr);
    const m = /^submitted sweep (\d+) 'lr-sweep-2': 2 runs$/m.exec(txt.stdout);
    assert.ok(m, txt.stdout);
    const sw = await alice.c.get(`/api/v1/sweeps/${r.json.id}`);
    assert.deepEqual(sw.json.jobs.map((x) => [x.name, x.hyperparameters]), [['lr-sweep-1', { lr: 0.1, bs: 16 }], ['lr-sweep-2', { lr: 0.01, bs: 16 }]]);
    // the runs are not needed further: leave the node to the other tests
    for (const id of [r.json.id, Number(m[1])]) assert.equal((await alice.c.post(`/api/v1/sweeps/${id}/cancel`)).status, 202);
  });

  it('follows a running job\'s log until it ends (logs -f), in text and --json', async () => {
    const s = await run(['submit', '--json', '--name', 'slow', '--image', 'BusyBox', '--cpu', '0.1', '--memory', '32M',
      '--command', 'for i in 1 2 3 4; do echo line $i; sleep 0.4; done; echo; echo after-blank']);
    assert.equal(s.code, 0, s.stderr);
    await waitJob(s.json.id, ['running', 'succeeded']);
    const f = await run(['logs', '-f', String(s.json.id)]);
    assert.equal(f.code, 0, f.stderr);
    assert.deepEqual(f.stdout.split('\n'), ['line 1', 'line 2', 'line 3', 'line 4', '', 'after-blank', '']);
    assert.match(f.stderr, /job \d+ ended: succeeded/);
    const j = await run(['logs', '-f', '--json', String(s.json.id)]);
    const lines = j.stdout.trim().split('\n').map((x) => JSON.parse(x));
    assert.deepEqual(lines.slice(0, 6).map((x) => x.line), ['line 1', 'line 2', 'line 3', 'line 4', '', 'after-blank']);
    assert.ok(lines.slice(0, 6).every((x, i, a) => Number.isInteger(x.offset) && (i === 0 || x.offset > a[i - 1].offset)), 'each line with its byte offset');
    assert.deepEqual(lines[6], { job: s.json.id, end: 'succeeded' });
    // the job's folder is an area too: its log comes down whole
    const cp = await run(['cp', `job:${s.json.id}:output.log`, 'slow.log']);
    assert.equal(cp.code, 0, cp.stderr);
    assert.equal(readFileSync(join(work, 'slow.log'), 'utf8'), f.stdout);
  });

  it('cancels a job; an ended job is exit 2, a missing one exit 4', async () => {
    const s = await run(['submit', '--json', '--name', 'sleeper', '--image', 'BusyBox', '--cpu', '0.1', '--memory', '32M', '--', 'sleep', '60']);
    assert.equal(s.code, 0, s.stderr);
    await waitJob(s.json.id, ['running']);
    const c = await run(['cancel', '--json', String(s.json.id)]);
    assert.equal(c.code, 0, c.stderr);
    assert.equal(c.json.id, s.json.id);
    assert.equal((await waitJob(s.json.id, ['cancelled'])).state, 'cancelled');
    const again = await run(['cancel', String(s.json.id)]);
    assert.equal(again.code, EXIT.refused, again.stderr);
    assert.match(again.stderr, new RegExp(`^gpucloud: cancel job ${s.json.id}: .+`, 'm'));
    const missing = await run(['cancel', '--json', '999999']);
    assert.equal(missing.code, EXIT.notfound);
    assert.equal(missing.json.error.code, 'not_found');
    assert.equal(missing.json.exit_code, EXIT.notfound);
  });

  it('lists instances', async () => {
    const empty = await run(['instances', '--json']);
    assert.equal(empty.code, 0, empty.stderr);
    assert.deepEqual(empty.json.items, []);
    const made = await alice.c.post('/api/v1/instances', { name: 'nb', image_id: w.image.id, cpu_millis: 100, mem_mib: 32 });
    assert.equal(made.status, 202, made.text);
    const l = await run(['instances', '--json']);
    assert.deepEqual(l.json.items.map((i) => i.name), ['nb']);
    const t = await run(['instances']);
    assert.match(t.stdout, /^\d+\s+nb\s+\w+/m);
  });

  it('copies files to and from home, byte-identical; a killed 64 MiB upload and download resume', async () => {
    const small = randomBytes(100000);
    writeFileSync(join(work, 'small.bin'), small);
    const up = await run(['cp', '--json', 'small.bin', 'home:']);
    assert.equal(up.code, 0, up.stderr);
    assert.equal(up.json.path, 'small.bin');
    assert.equal(up.json.size, small.length);
    const clash = await run(['cp', 'small.bin', 'home:small.bin']);
    assert.equal(clash.code, EXIT.refused, 'an existing file is replaced only with --overwrite');
    assert.equal((await run(['cp', '-o', 'small.bin', 'home:small.bin'])).code, 0);
    const down = await run(['cp', '--json', 'home:small.bin', 'small.out']);
    assert.equal(down.code, 0, down.stderr);
    assert.ok(readFileSync(join(work, 'small.out')).equals(small));

    // 64 MiB in 8 MiB parts, sent at 16 MiB/s and killed part-way
    const big = randomBytes(64 << 20);
    writeFileSync(join(work, 'big.bin'), big);
    let child;
    const killed = run(['cp', '--limit-rate', '16M', 'big.bin', 'home:big.bin'], { proc: (p) => { child = p; } });
    const stateDir = join(home, '.config', 'gpucloud', 'uploads');
    assert.ok(await eventually(async () => existsSync(stateDir) && readdirSync(stateDir).length === 1, 10000, 50), 'the upload began');
    const upId = JSON.parse(readFileSync(join(stateDir, readdirSync(stateDir)[0]), 'utf8')).id;
    assert.ok(await eventually(async () => (await alice.c.get(`/api/v1/uploads/${upId}`)).json.received.length >= 2, 15000, 50));
    child.kill('SIGKILL');
    const k = await killed;
    assert.equal(k.signal, 'SIGKILL');
    const mid = await alice.c.get(`/api/v1/uploads/${upId}`);
    assert.ok(mid.json.received.length >= 2 && mid.json.received.length < 8, JSON.stringify(mid.json));
    const again = await run(['cp', '--json', 'big.bin', 'home:big.bin']);
    assert.equal(again.code, 0, again.stderr);
    assert.equal(again.json.resumed, true);
    assert.equal(again.json.upload_id, upId);
    assert.equal(again.json.parts, 8);
    assert.equal(again.json.parts_sent, 8 - mid.json.received.length, 'only the missing parts were sent');
    assert.equal(again.json.entry.sha256, sha(big), 'the server checked the SHA-256');
    assert.equal(readdirSync(stateDir).length, 0, 'the state is gone once complete');
    assert.equal(sha(readFileSync(join(w.srv.dir, 'data', 'home', 'alice', 'big.bin'))), sha(big));

    // download, killed part-way, then resumed with a Range request
    const killedDown = run(['cp', '--limit-rate', '16M', 'home:big.bin', 'big.out'], { proc: (p) => { child = p; } });
    const part = join(work, 'big.out.gcpart');
    assert.ok(await eventually(async () => existsSync(part) && statSync(part).size > (8 << 20), 15000, 50), 'the download began');
    child.kill('SIGKILL');
    await killedDown;
    const have = statSync(part).size;
    assert.ok(have > 0 && have < big.length, `partial: ${have}`);
    assert.ok(!existsSync(join(work, 'big.out')));
    const resumed = await run(['cp', '--json', 'home:big.bin', 'big.out']);
    assert.equal(resumed.code, 0, resumed.stderr);
    assert.equal(resumed.json.resumed, true);
    assert.equal(sha(readFileSync(join(work, 'big.out'))), sha(big));
    assert.ok(!existsSync(part));
    // into a local folder, keeping the name; a folder is not a file
    assert.equal((await run(['cp', 'home:small.bin', '.'])).code, 0);
    const dir = await run(['cp', 'home:', 'x']);
    assert.equal(dir.code, EXIT.usage);
    const none = await run(['cp', 'home:nope.bin', 'x']);
    assert.equal(none.code, EXIT.notfound, none.stderr);
    const noLocal = await run(['cp', 'missing.bin', 'home:']);
    assert.equal(noLocal.code, EXIT.local);
    assert.match(noLocal.stderr, /cannot read 'missing.bin'/);
  });

  it('shows usage (skipped where /api/v1/usage is not there yet)', async (t) => {
    const span = ['--from', '2026-01-01T00:00:00Z', '--to', '2031-01-01T00:00:00Z'];
    const r = await run(['usage', '--json', '--group-by', 'user', '--period', 'total', ...span]);
    if (r.code === EXIT.notfound) { t.skip('GET /api/v1/usage answers 404 on this branch'); return; }
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.json.group_by, 'user');
    assert.ok(Array.isArray(r.json.rows));
    const txt = await run(['usage', '--period', 'total', ...span]);
    assert.equal(txt.code, 0, txt.stderr);
    assert.match(txt.stdout, /^KEY\s+PERIOD\s+GPU_SECONDS/);
    const csv = await run(['usage', '--csv', '--period', 'total', ...span]);
    assert.equal(csv.code, 0, csv.stderr);
    assert.match(csv.stdout, /,/);
    const waste = await run(['usage', 'waste', '--json', ...span]);
    assert.equal(waste.code, 0, waste.stderr);
    assert.ok(Array.isArray(waste.json.rows));
    assert.equal((await run(['usage', 'waste', '--period', 'day'])).code, EXIT.usage);
    assert.equal((await run(['usage', '--period', 'year'])).code, EXIT.usage);
  });

  it('answers bad input with exit codes and the server\'s message and hint', async () => {
    const cases = [
      [['nosuch'], EXIT.usage, /no command 'nosuch'/],
      [['jobs', '--bogus'], EXIT.usage, /Try 'gpucloud jobs --help'/],
      [['logs', 'abc'], EXIT.usage, /'abc' is not a job id/],
      [['submit', '--image', 'BusyBox', '--', 'true'], EXIT.usage, /give the job a --name/],
      [['submit', '--name', 'x', '--image', 'BusyBox'], EXIT.usage, /give a command/],
      [['submit', '--name', 'x', '--image', 'BusyBox', '--cpu', 'lots', '--', 'true'], EXIT.usage, /'cpu' must be CPUs/],
      [['submit', '--name', 'x', '--image', 'no-such-image', '--', 'true'], EXIT.notfound, /no such image 'no-such-image'/],
      [['submit', '--name', 'Bad Name', '--image', 'BusyBox', '--', 'true'], EXIT.refused, /name must be 1 to 63/],
      [['submit', '--name', 'x', '--image', 'BusyBox', '--pool', 'nope', '--', 'true'], EXIT.notfound, /pool/],
      [['jobs', '999999'], EXIT.notfound, /get the job: /],
      [['logs', '999999'], EXIT.notfound, /get the log: /],
      [['cp', 'a', 'b'], EXIT.usage, /one side must be local/],
      [['submit', '-f', 'missing.yaml'], EXIT.local, /cannot read 'missing.yaml'/],
    ];
    for (const [args, code, re] of cases) {
      const r = await run(args);
      assert.equal(r.code, code, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, re, args.join(' '));
    }
    writeFileSync(join(work, 'typo.yaml'), 'name: x\nimage: BusyBox\ncomand: true\n');
    const typo = await run(['submit', '-f', 'typo.yaml']);
    assert.equal(typo.code, EXIT.usage);
    assert.match(typo.stderr, /typo.yaml: unknown field 'comand'/);
    writeFileSync(join(work, 'broken.yaml'), 'name: [x\n');
    const broken = await run(['submit', '-f', 'broken.yaml']);
    assert.equal(broken.code, EXIT.usage);
    assert.match(broken.stderr, /broken.yaml: line \d+, column \d+: /);
    // the server's hint is shown, and with --json the error is on stdout
    const j = await run(['submit', '--json', '--name', 'x', '--image', 'BusyBox', '--priority', 'exam', '--', 'true']);
    assert.equal(j.code, EXIT.refused);
    assert.equal(j.json.error.message, 'only teachers and admins may ask for exam priority');
    assert.equal(j.json.status, 403);
    // --help for every command, on stdout, exit 0
    for (const cmd of ['login', 'logout', 'whoami', 'submit', 'jobs', 'logs', 'cancel', 'instances', 'cp', 'usage']) {
      const h = await run([cmd, '--help']);
      assert.equal(h.code, 0, cmd);
      assert.match(h.stdout, new RegExp(`^usage: gpucloud ${cmd}`), cmd);
    }
    // not logged in (another config folder)
    const anon = await run(['jobs'], { env: { XDG_CONFIG_HOME: join(home, 'empty') } });
    assert.equal(anon.code, EXIT.auth);
    assert.match(anon.stderr, /not logged in: run gpucloud login/);
    // the server gone: a network error
    const gone = await run(['jobs', '--server', 'http://127.0.0.1:1']);
    assert.equal(gone.code, EXIT.server);
    assert.match(gone.stderr, /cannot reach http:\/\/127.0.0.1:1/);
  });

  it('an expired or revoked token is exit 5; logout revokes the token and forgets it', async () => {
    const token = JSON.parse(readFileSync(credPath(), 'utf8')).token;
    sql(w.srv, `UPDATE api_tokens SET expires_at = now() - interval '1 second' WHERE user_id = ${alice.id} AND revoked_at IS NULL`);
    const exp = await run(['jobs']);
    assert.equal(exp.code, EXIT.auth);
    assert.match(exp.stderr, /API token unknown, expired or revoked/);
    assert.match(exp.stderr, /hint: create a new API token/);
    // log in again; revoke the new token from the web session
    const r = await run(['login', '-u', 'alice', '--password-stdin', '--json', '--name', 'laptop', '--read-only'], { input: 'alice-pass-1\n' });
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(r.json.token.scopes, ['read']);
    assert.equal((await run(['jobs'])).code, 0);
    const ro = await run(['cancel', '1']);
    assert.equal(ro.code, EXIT.refused);
    assert.match(ro.stderr, /this token lacks the 'write' scope/);
    assert.equal((await alice.c.del(`/api/v1/tokens/${r.json.token.id}`)).status, 204);
    const rev = await run(['whoami']);
    assert.equal(rev.code, EXIT.auth);
    // --token saves a token made elsewhere; logout revokes it
    const made = await alice.c.post('/api/v1/tokens', { name: 'script', scopes: ['read', 'write'] });
    assert.equal(made.status, 201, made.text);
    const t = await run(['login', '--token', '-', '--json'], { input: made.json.token + '\n' });
    assert.equal(t.code, 0, t.stderr);
    assert.equal(t.json.token_id, made.json.id);
    assert.ok(!t.stdout.includes(made.json.token));
    const out = await run(['logout', '--json']);
    assert.equal(out.code, 0, out.stderr);
    assert.deepEqual(out.json, { logged_out: true, token_revoked: true });
    assert.ok(!existsSync(credPath()));
    assert.equal(sql(w.srv, `SELECT revoked_at IS NOT NULL FROM api_tokens WHERE id = ${made.json.id}`), 't');
    assert.equal((await run(['jobs'])).code, EXIT.auth);
    // no token ever went into a URL: the server's log never saw one
    const log = w.srv.log();
    for (const tok of [token, made.json.token]) assert.ok(!log.includes(tok));
    assert.ok(!/gct_[A-Za-z0-9_-]{20}/.test(log), 'no token in the server log');
  });

  it('logs in over TLS, trusting a campus CA from GPUCLOUD_CACERT', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gccli-tls-'));
    execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256',
      '-nodes', '-days', '2', '-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1',
      '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem')], { stdio: 'ignore' });
    const tls = await startServer({ args: ['--scrypt-ln=10', `--tls-cert=${join(dir, 'cert.pem')}`, `--tls-key=${join(dir, 'key.pem')}`] });
    try {
      const url = `https://127.0.0.1:${tls.port}`;
      const cfg = { XDG_CONFIG_HOME: join(dir, 'cfg') };
      const untrusted = await run(['login', url, '-u', 'admin', '--password-stdin'], { input: ADMIN_PASSWORD + '\n', env: cfg });
      assert.equal(untrusted.code, EXIT.server);
      assert.match(untrusted.stderr, /cannot reach https:\/\/127.0.0.1:\d+: .*certificate/i);
      const trusted = { ...cfg, GPUCLOUD_CACERT: join(dir, 'cert.pem') };
      const r = await run(['login', url, '-u', 'admin', '--password-stdin'], { input: ADMIN_PASSWORD + '\n', env: trusted });
      assert.equal(r.code, 0, r.stderr);
      const me = await run(['whoami', '--json'], { env: trusted });
      assert.equal(me.code, 0, me.stderr);
      assert.equal(me.json.user.username, 'admin');
    } finally {
      await tls.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('has a man page that groff reads without warnings', () => {
    const page = join(ROOT, 'server/cli/gpucloud.1');
    const g = spawnSync('groff', ['-man', '-Tutf8', '-ww', '-z', page], { encoding: 'utf8' });
    assert.equal(g.status, 0);
    assert.equal(g.stderr, '', 'no groff warnings');
    // man's overstrike bold (c\bc) taken out
    const text = execFileSync('man', ['-l', page], { encoding: 'utf8', env: { ...process.env, MANWIDTH: '80', MANPAGER: 'cat' } }).replace(/.\x08/g, '');
    for (const s of ['login', 'submit', 'logs', 'cancel', 'instances', 'cp', 'usage', 'EXIT STATUS'])
      assert.ok(text.includes(s), s);
  });
});
