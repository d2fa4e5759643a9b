// sched_scale.test.mjs — one scheduler pass that grants thousands of slices
// commits within the statement timeout.
//
// A pass writes all its grants in one statement, and the usage trigger on
// allocations (0034, 0039) writes one interval per grant.  When that
// trigger ran a SQL function per row (re-planned each call, ~0.9 ms), a pass
// granting 8,000 slices ran past db_statement_timeout, lost its connection
// and the leader lock, and retried the same pass for ever: nothing was ever
// granted.  Here 3,000 grants must commit with a timeout of one second (the
// per-row trigger needed ~3 s; the statement trigger ~0.2 s).
//
// The cluster is seeded with SQL: 375 nodes x 8 declared GPUs that no engine
// answers for (the node check is pushed out of the test's way) and 3,000
// queued one-slice requests from 30 students.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, dropDatabase } from '../lib/server.mjs';
import { sql, eventually, stopClean } from '../lib/itest.mjs';

const GRANTS = 3000;

describe('a pass granting thousands of slices', () => {
  let srv, db;

  before(async () => {
    // first start: the migrations; then the synthetic cluster
    const first = await startServer({ args: ['--sched-interval-ms=600000'] });
    await first.stop({ keepDb: true });
    db = first.db;
    sql(first, `
      INSERT INTO users (username, role, password_hash)
      SELECT 'scale' || i, 'student', '$scrypt$none' FROM generate_series(1, 30) i;
      INSERT INTO nodes (name, url, health, admin_state, ncpu, memory_bytes)
      SELECT 'scale' || i, 'unix:///nonexistent/scale' || i || '.sock', 'up', 'active', 64,
             549755813888
      FROM generate_series(1, ${GRANTS / 8}) i;
      INSERT INTO pools (name) VALUES ('scale');
      INSERT INTO quota_defaults (role, pool_id) VALUES ('student', (SELECT id FROM pools));
      INSERT INTO gpus (node_id, idx, uuid, model, memory_mib, simulated, devices, pool_id)
      SELECT n.id, g, 'GPU-scale-' || n.id || '-' || g, 'NVIDIA A100-SXM4-80GB', 81920, true,
             ARRAY['/dev/null'], (SELECT id FROM pools)
      FROM nodes n, generate_series(0, 7) g;
      INSERT INTO slices (pool_id, gpu_id, slot) SELECT pool_id, id, 0 FROM gpus;
      INSERT INTO alloc_requests (user_id, pool_id, slices, nodes, cpu_millis, mem_mib)
      SELECT (SELECT id FROM users WHERE username = 'scale' || (1 + i % 30)),
             (SELECT id FROM pools), 1, 1, 100, 64
      FROM generate_series(1, ${GRANTS}) i;
      ANALYZE;`);
    srv = await startServer({
      db,
      args: ['--db-statement-timeout=1', '--sched-interval-ms=1000',
        '--node-check-interval=3600', '--node-down-after=86400'],
    });
  });

  after(async () => {
    await stopClean(srv);
    if (db) dropDatabase(db.name); // a server given opts.db keeps it
  });

  it('grants every request in one committed pass, each slice once, each with its usage interval', async () => {
    const live = () => Number(sql(srv, 'SELECT count(*) FROM allocations WHERE released_at IS NULL'));
    assert.ok(await eventually(async () => live() === GRANTS, 30000, 250),
      `${live()} of ${GRANTS} slices granted; log ${srv.logPath}:\n${srv.log().slice(-1500)}`);
    assert.equal(sql(srv, "SELECT count(*) FROM alloc_requests WHERE state <> 'allocated'"), '0');
    assert.equal(sql(srv, 'SELECT count(*) - count(DISTINCT slice_id) FROM allocations WHERE released_at IS NULL'), '0');
    assert.equal(sql(srv, 'SELECT count(*) FROM usage_intervals WHERE ended_at IS NULL'), String(GRANTS));
    const passes = srv.log().match(/module=sched msg="pass: \d+ placed/g) || [];
    assert.equal(passes[0], `module=sched msg="pass: ${GRANTS} placed`, 'the first pass placed everything');
    assert.doesNotMatch(srv.log(), /module=sched msg="pass step \d+ failed/);
  });
});
