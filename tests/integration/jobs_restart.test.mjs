// jobs_restart.test.mjs — a job outlives a crash of gpucloudd: killed -9
// while a chatty job runs and restarted on the same database, the new
// process follows the job again from the log's checkpoint; the job ends
// succeeded and output.log holds every line the program printed, in
// order, none twice (also the ones printed while no gpucloudd ran).
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { startServer, dropDatabase, Client, ADMIN_PASSWORD } from '../lib/server.mjs';
import { stopClean } from '../lib/itest.mjs';
import { world, mkUser, cleanup, ours, sql, eventually, env, FAST } from './instances_lib.mjs';

describe('jobs across a gpucloudd crash', () => {
  let w, srv2, db, dir;
  before(async () => {
    w = await world({ node2: false });
    db = w.srv.db;
    dir = w.srv.dir;
  });
  after(async () => {
    try {
      if (srv2) await stopClean(srv2);
      if (w?.srv) await w.srv.stop({ keepDb: true });
    } finally {
      cleanup(w?.srv);
      if (db) dropDatabase(db.name);
    }
  });

  it('keeps the log complete and in order, without duplicates, and ends the job', async () => {
    const alice = await mkUser(w, 'alice');
    const N = 80;
    const r = await alice.c.post('/api/v1/jobs', {
      name: 'chatty', image_id: w.image.id, cpu_millis: 200, mem_mib: 64, pool: 'a100', slices: 1,
      command: ['sh', '-c', `i=0; while [ $i -lt ${N} ]; do i=$((i+1)); echo "line $i"; [ $((i % 7)) = 0 ] && echo "err $i" >&2; sleep 0.1; done`],
    });
    assert.equal(r.status, 201, r.text);
    const id = r.json.id;
    const log = join(dir, 'data', 'home', 'alice', r.json.directory, 'output.log');
    assert.ok(await eventually(() => { try { return /line 10\n/.test(readFileSync(log, 'utf8')); } catch { return false; } }, 20000), 'the job runs and logs');
    w.srv.proc.kill('SIGKILL');
    await eventually(() => w.srv.exited !== null, 5000);
    const atCrash = readFileSync(log, 'utf8');
    // lines go on being printed while no gpucloudd runs
    await new Promise((res) => setTimeout(res, 1500));
    srv2 = await startServer({ db, args: [...FAST, `--state-dir=${dir}`] });
    const admin = new Client(srv2.base);
    assert.equal((await admin.login('admin', ADMIN_PASSWORD)).status, 200);
    let job;
    assert.ok(await eventually(async () => { job = (await admin.get(`/api/v1/jobs/${id}`)).json; return ['succeeded', 'failed', 'lost', 'cancelled'].includes(job.state); }, 30000), `job ended: ${JSON.stringify(job)}`);
    assert.equal(job.state, 'succeeded', JSON.stringify(job));
    const text = readFileSync(log, 'utf8');
    const lines = text.split('\n').filter((l) => l.startsWith('line '));
    assert.deepEqual(lines, Array.from({ length: N }, (_, i) => `line ${i + 1}`), 'every stdout line once, in order');
    const errs = text.split('\n').filter((l) => l.startsWith('err '));
    assert.deepEqual(errs, Array.from({ length: Math.floor(N / 7) }, (_, i) => `err ${(i + 1) * 7}`), 'every stderr line once, in order');
    assert.equal(text.split('\n').filter(Boolean).length, N + Math.floor(N / 7), 'nothing else');
    assert.ok(text.startsWith(atCrash.slice(0, atCrash.lastIndexOf('line'))), 'what was written before the crash stays');
    assert.equal(Number(sql(w.srv, `SELECT count(*) FROM allocations a JOIN jobs j ON j.request_id = a.request_id WHERE j.id = ${id} AND a.released_at IS NULL`)), 0);
    assert.equal(ours(w.srv, env.GPUCLOUD_WORLD_DOCKER1).length, 0, 'container removed');
  });
});
