// images_stale.test.mjs — pulls left 'pulling' by a gpucloudd that died: a
// pull runs inside the process that started it, so after a crash its row
// would say 'pulling' forever.  The next gpucloudd marks rows untouched for
// two minutes 'failed' ("pull interrupted (gpucloudd restarted)") at
// start-up, and leaves fresh ones (another replica's live pull) and
// finished ones alone.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, Client, ADMIN_PASSWORD, dropDatabase } from '../lib/server.mjs';
import { sql, eventually, stopClean } from '../lib/itest.mjs';

const env = process.env;

describe('stale pulls', () => {
  it('marks pulls a dead gpucloudd left behind failed at start-up, and only those', async () => {
    assert.ok(env.GPUCLOUD_WORLD_DOCKER2, 'GPUCLOUD_WORLD_DOCKER2 is not set: run through make test (it starts the world)');
    let srv = await startServer({ args: ['--node-check-interval=1'] });
    const db = srv.db;
    try {
      let admin = new Client(srv.base);
      assert.equal((await admin.login('admin', ADMIN_PASSWORD)).status, 200);
      const node = await admin.post('/api/v1/nodes', { name: 'node2', url: env.GPUCLOUD_WORLD_DOCKER2 });
      assert.equal(node.status, 201, node.text);
      const [stale, fresh, done, failedBefore] = sql(srv, "INSERT INTO images (reference) VALUES"
        + " ('stale.example/a:1'), ('stale.example/b:1'), ('stale.example/c:1'), ('stale.example/d:1') RETURNING id")
        .split('\n').map(Number);
      // the first gpucloudd "crashes" mid-pull: nothing ends its rows
      await srv.stop({ keepDb: true, signal: 'SIGKILL' });
      const n = node.json.id;
      sql(srv, 'INSERT INTO image_nodes (image_id, node_id, state, progress, error, updated_at) VALUES'
        + ` (${stale}, ${n}, 'pulling', 42, '', now() - interval '10 minutes'),`
        + ` (${fresh}, ${n}, 'pulling', 7, '', now() - interval '20 seconds'),`
        + ` (${done}, ${n}, 'present', 100, '', now() - interval '1 day'),`
        + ` (${failedBefore}, ${n}, 'failed', 3, 'unauthorized', now() - interval '1 day')`);

      srv = await startServer({ db, args: ['--node-check-interval=1'] });
      admin = new Client(srv.base);
      assert.equal((await admin.login('admin', ADMIN_PASSWORD)).status, 200);
      const row = (id) => sql(srv, `SELECT state || '|' || error FROM image_nodes WHERE image_id = ${id}`);
      assert.ok(await eventually(() => row(stale).startsWith('failed|'), 5000, 50), row(stale));
      assert.equal(row(stale), 'failed|pull interrupted (gpucloudd restarted)');
      // the same statement saw the others: a fresh one may be another replica's live pull
      assert.equal(row(fresh), 'pulling|');
      assert.equal(row(done), 'present|');
      assert.equal(row(failedBefore), 'failed|unauthorized');
      assert.match(srv.log(), /1 pull\(s\) left by a gpucloudd that stopped marked failed/);
      // the API shows why
      const img = await admin.get(`/api/v1/images/${stale}`);
      assert.equal(img.status, 200, img.text);
      const on = img.json.nodes.find((x) => x.node_id === n);
      assert.equal(on.state, 'failed');
      assert.equal(on.error, 'pull interrupted (gpucloudd restarted)');
      await stopClean(srv);
      srv = null;
    } finally {
      await srv?.stop();
      dropDatabase(db.name);
    }
  });
});
