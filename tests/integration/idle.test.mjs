// idle.test.mjs — idle reclamation with short policies (admin API
// /idle-policies, --reclaim-interval=1): an idle instance is warned (visible
// in the API, still running), then stopped with its GPUs released; an
// instance burning CPU and one with activity through the hook (what the
// proxy's traffic does) are left alone; a role's maximum lifetime stops
// instances that run longer.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { stopClean, sleep } from '../lib/itest.mjs';
import { world, mkUser, create, waitState, liveAllocations, cleanup, sql, eventually } from './instances_lib.mjs';

describe('idle reclamation', () => {
  let w, gina, hugo;
  before(async () => {
    w = await world({ node2: false, args: ['--reclaim-interval=1', '--idle-cpu-percent=15'] });
    gina = await mkUser(w, 'gina');
    hugo = await mkUser(w, 'hugo', 'researcher');
  });
  // the server first (no create may land after the clean-up), then its containers
  after(async () => { try { await stopClean(w?.srv); } finally { cleanup(w?.srv); } });

  it('admins read and set the policies per role', async () => {
    const l = await w.admin.get('/api/v1/idle-policies');
    assert.equal(l.status, 200);
    assert.deepEqual(l.json.items.map((p) => p.role).sort(), ['admin', 'researcher', 'student', 'teacher']);
    const s = await w.admin.req('PUT', '/api/v1/idle-policies/student', { idle_seconds: 3, warn_seconds: 3 });
    assert.equal(s.status, 200, s.text);
    assert.deepEqual(s.json, { role: 'student', idle_seconds: 3, warn_seconds: 3, max_lifetime_seconds: null });
    const r = await w.admin.req('PUT', '/api/v1/idle-policies/researcher', { idle_seconds: null, warn_seconds: 0, max_lifetime_seconds: 4 });
    assert.equal(r.status, 200, r.text);
    assert.equal((await gina.c.get('/api/v1/idle-policies')).status, 403);
  });

  it('warns an idle instance, then stops it and frees its GPUs; busy ones run on', async () => {
    const idle = await create(gina.c, w, { name: 'idle', pool: 'a100', slices: 1, cmd: ['sleep', '3600'] });
    const busy = await create(gina.c, w, { name: 'busy', pool: 'a100', slices: 1, cpu_millis: 500, cmd: ['sh', '-c', 'while :; do :; done'] });
    const used = await create(gina.c, w, { name: 'used', pool: 'a100', slices: 1, cmd: ['sleep', '3600'] });
    for (const i of [idle, busy, used]) await waitState(gina.c, i.id, 'running');
    assert.equal(liveAllocations(w.srv), 3);
    // activity through the hook every 500 ms (the proxy writes the same column)
    let stop = false;
    const pinger = (async () => {
      while (!stop) {
        const r = await gina.c.post(`/api/v1/instances/${used.id}/activity`);
        assert.equal(r.status, 204);
        await sleep(500);
      }
    })();
    try {
      const warned = await eventually(async () => (await gina.c.get(`/api/v1/instances/${idle.id}`)).json.idle_warning_at !== null, 25000);
      assert.ok(warned, 'the idle instance was warned');
      const wi = (await gina.c.get(`/api/v1/instances/${idle.id}`)).json;
      assert.equal(wi.state, 'running');
      assert.match(wi.idle_message, /idle for 3 s: it will be stopped at .* UTC unless it is used/);
      const st = await waitState(gina.c, idle.id, 'stopped', 25000);
      assert.match(st.reason, /idle/);
      assert.equal(st.gpus.length, 0);
      assert.equal(sql(w.srv, `SELECT state FROM alloc_requests WHERE id = ${st.request.id}`), 'released');
      await sleep(1500);
      for (const i of [busy, used]) {
        const g = (await gina.c.get(`/api/v1/instances/${i.id}`)).json;
        assert.equal(g.state, 'running', `${g.name} runs on`);
        assert.equal(g.idle_warning_at, null, `${g.name} was not warned`);
      }
      assert.equal(liveAllocations(w.srv), 2);
    } finally {
      stop = true;
      await pinger;
    }
    // resuming is one click
    assert.equal((await gina.c.post(`/api/v1/instances/${idle.id}/start`)).status, 202);
    const again = await waitState(gina.c, idle.id, 'running');
    assert.equal(again.idle_warning_at, null);
    sql(w.srv, "UPDATE idle_policies SET idle_seconds = NULL WHERE role = 'student'");
    for (const i of [idle, busy, used]) {
      assert.equal((await gina.c.del(`/api/v1/instances/${i.id}`)).status, 202);
      await waitState(gina.c, i.id, 'deleted');
    }
  });

  it('stops instances at their role\'s maximum lifetime', async () => {
    const inst = await create(hugo.c, w, { name: 'long', pool: 'a100', slices: 1, cmd: ['sh', '-c', 'while :; do :; done'] });
    const run = await waitState(hugo.c, inst.id, 'running');
    const st = await waitState(hugo.c, inst.id, 'stopped', 15000);
    assert.match(st.reason, /maximum lifetime of 4 s/);
    assert.ok(Date.parse(st.stopped_at) - Date.parse(run.started_at) >= 4000);
    assert.equal(liveAllocations(w.srv), 0);
    assert.equal((await hugo.c.del(`/api/v1/instances/${inst.id}`)).status, 202);
    await waitState(hugo.c, inst.id, 'deleted');
  });
});
