// instances.test.mjs — the instance lifecycle on the world's real engines:
// create → queued → pulling → creating → running (port published, logs,
// usage), stop (GPUs released, container kept), start again, delete
// (container removed, row kept as deleted); a container killed from outside
// fails the instance and frees its GPUs at once; a student over their GPU
// quota waits with the quota reason; GPU-less instances (held to the user's
// tightest CPU and memory quota); a storage block
// refuses starts; bad input; save as image with its quota.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { assertErrorShape, stopClean, sleep } from '../lib/itest.mjs';
import {
  world, mkUser, create, waitState, liveAllocations, cleanup, inspect, ours, docker, sql, eventually, env,
} from './instances_lib.mjs';

describe('instances', () => {
  let w, alice, bob;
  before(async () => {
    w = await world();
    alice = await mkUser(w, 'alice');
    bob = await mkUser(w, 'bob');
  });
  // the server first (no create may land after the clean-up), then its containers
  after(async () => { try { await stopClean(w?.srv); } finally { cleanup(w?.srv); } });

  it('runs an instance end to end: create, run, logs, usage, stop, start, delete', async () => {
    const inst = await create(alice.c, w, { name: 'nb1', pool: 'a100', slices: 1 });
    assert.equal(inst.name, 'nb1');
    assert.equal(inst.username, 'alice');
    assert.equal(inst.image, env.GPUCLOUD_WORLD_IMAGE);
    assert.equal(inst.request.state === 'queued' || inst.request.state === 'allocated', true);
    const run = await waitState(alice.c, inst.id, 'running');
    assert.equal(run.node, 'node1');
    assert.equal(run.gpus.length, 1);
    assert.equal(run.request.state, 'allocated');
    assert.match(run.container_name, /^gc-[0-9a-f]{8}-inst-\d+$/);
    assert.equal(run.ports.length, 1);
    assert.equal(run.ports[0].name, 'http');
    assert.equal(run.ports[0].port, 8080);
    assert.equal(run.ports[0].host, '127.0.0.1');
    assert.ok(run.ports[0].host_port > 0);
    // the app answers on the published port (busybox httpd: 404 for /);
    // 'running' means its container started, not that httpd has bound its
    // port yet: a first connection may be refused
    let res = null;
    for (let i = 0; i < 50 && !res; i++) {
      res = await fetch(`http://127.0.0.1:${run.ports[0].host_port}/nothing`).catch(() => null);
      if (!res) await sleep(100);
    }
    assert.ok(res, 'the app answered on its published port within 5 s');
    assert.equal(res.status, 404);
    assert.equal(liveAllocations(w.srv), 1);
    // logs: tail
    const logs = await eventually(async () => (await alice.c.get(`/api/v1/instances/${inst.id}/logs?tail=10`)).text.includes('hello from alice'), 5000);
    assert.ok(logs, 'the log shows the command output');
    // usage
    const st = await alice.c.get(`/api/v1/instances/${inst.id}/stats`);
    assert.equal(st.status, 200, st.text);
    assert.ok(st.json.memory_bytes > 0);
    assert.equal(st.json.memory_limit_bytes, 64 * 1024 * 1024);
    assert.equal(st.json.gpu_utilization_percent, null);
    assert.ok(st.json.cpu_percent === null || typeof st.json.cpu_percent === 'number');
    // someone else's instance does not exist for them
    assert.equal((await bob.c.get(`/api/v1/instances/${inst.id}`)).status, 404);
    assert.equal((await bob.c.post(`/api/v1/instances/${inst.id}/stop`)).status, 404);
    assert.equal((await bob.c.get(`/api/v1/instances/${inst.id}/logs`)).status, 404);
    assert.ok(!(await bob.c.get('/api/v1/instances')).json.items.some((i) => i.id === inst.id));
    assert.ok((await alice.c.get('/api/v1/instances')).json.items.some((i) => i.id === inst.id));
    // stop: GPUs back, container kept (stopped)
    const s = await alice.c.post(`/api/v1/instances/${inst.id}/stop`);
    assert.equal(s.status, 202, s.text);
    const stopped = await waitState(alice.c, inst.id, 'stopped');
    assert.equal(stopped.ports.length, 0);
    assert.equal(stopped.gpus.length, 0);
    assert.match(stopped.reason, /stopped by alice/);
    assert.equal(liveAllocations(w.srv), 0);
    assert.equal(inspect(env.GPUCLOUD_WORLD_DOCKER1, run.container_name).State.Running, false);
    // a file written before survives a start on the same GPU (same container)
    // start again: a new request, running again
    const st2 = await alice.c.post(`/api/v1/instances/${inst.id}/start`);
    assert.equal(st2.status, 202, st2.text);
    assert.ok(['queued', 'pulling', 'creating', 'running'].includes(st2.json.state), st2.text);
    assert.notEqual(st2.json.request.id, run.request.id);
    const run2 = await waitState(alice.c, inst.id, 'running');
    assert.equal(run2.request.state, 'allocated');
    assert.equal(liveAllocations(w.srv), 1);
    assert.equal(ours(w.srv, env.GPUCLOUD_WORLD_DOCKER1).filter((c) => c.name === run.container_name).length, 1);
    // start while running: 409
    const again = await alice.c.post(`/api/v1/instances/${inst.id}/start`);
    assert.equal(again.status, 409);
    assertErrorShape(again.json, 'conflict');
    // restart in place keeps the GPUs
    const rs = await alice.c.post(`/api/v1/instances/${inst.id}/restart`);
    assert.equal(rs.status, 200, rs.text);
    assert.equal(liveAllocations(w.srv), 1);
    // the reconciler (every 500 ms here) does not take the restart for an exit
    await sleep(1500);
    assert.equal((await alice.c.get(`/api/v1/instances/${inst.id}`)).json.state, 'running');
    assert.ok(sql(w.srv, `SELECT restarted_at IS NOT NULL FROM instances WHERE id = ${inst.id}`) === 't');
    // delete: container gone, row kept as deleted, GPUs free
    const d = await alice.c.del(`/api/v1/instances/${inst.id}`);
    assert.equal(d.status, 202, d.text);
    await waitState(alice.c, inst.id, 'deleted');
    assert.equal(sql(w.srv, `SELECT state FROM instances WHERE id = ${inst.id}`), 'deleted');
    assert.equal(liveAllocations(w.srv), 0);
    assert.ok(await eventually(() => ours(w.srv, env.GPUCLOUD_WORLD_DOCKER1).every((c) => c.name !== run.container_name), 5000));
    // the states it went through, in order, in the log
    const log = w.srv.log();
    for (const t of ['queued → pulling', 'pulling → creating', 'creating → running', 'running → stopping', 'stopping → stopped', 'stopped → queued'])
      assert.ok(log.includes(`instance ${inst.id}: ${t}`), `log has ${t}`);
  });

  it('a container killed from outside fails the instance and frees its GPUs at once', async () => {
    const inst = await create(alice.c, w, { name: 'victim', pool: 'a100', slices: 2, cmd: ['sleep', '3600'] });
    const run = await waitState(alice.c, inst.id, 'running');
    assert.equal(run.gpus.length, 2);
    assert.equal(liveAllocations(w.srv), 2);
    // kill the container's process from outside (its host pid)
    const pid = inspect(env.GPUCLOUD_WORLD_DOCKER1, run.container_name).State.Pid;
    assert.ok(pid > 1);
    process.kill(pid, 'SIGKILL');
    const failed = await waitState(alice.c, inst.id, 'failed', 10000);
    assert.equal(failed.exit_code, 137);
    assert.match(failed.reason, /killed/);
    assert.equal(failed.gpus.length, 0);
    assert.equal(liveAllocations(w.srv), 0);
    assert.equal(sql(w.srv, `SELECT state FROM alloc_requests WHERE id = ${run.request.id}`), 'released');
    // a command that ends by itself: stopped with code 0
    const quick = await create(alice.c, w, { name: 'quick', pool: 'a100', slices: 1, cmd: ['sh', '-c', 'sleep 1'] });
    const q = await waitState(alice.c, quick.id, 'stopped', 15000);
    assert.equal(q.exit_code, 0);
    assert.equal(liveAllocations(w.srv), 0);
    for (const id of [inst.id, quick.id]) {
      assert.equal((await alice.c.del(`/api/v1/instances/${id}`)).status, 202);
      await waitState(alice.c, id, 'deleted');
    }
  });

  it('streams the log live, and ends the stream when the container stops', async () => {
    const inst = await create(alice.c, w, { name: 'talker', cmd: ['sh', '-c', 'echo first-line; i=0; while :; do i=$((i+1)); echo line-$i; sleep 0.2; done'] });
    await waitState(alice.c, inst.id, 'running');
    const res = await fetch(`${w.srv.base}/api/v1/instances/${inst.id}/logs?tail=5&follow=1`, { headers: { cookie: alice.c.cookieHeader() } });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type'), /^text\/plain/);
    assert.equal(res.headers.get('transfer-encoding'), 'chunked');
    const reader = res.body.getReader();
    const dec = new TextDecoder();
    let text = '';
    const deadline = Date.now() + 10000;
    while (!/line-\d+\n[\s\S]*line-\d+\n[\s\S]*line-\d+\n/.test(text) && Date.now() < deadline) {
      const { value, done } = await reader.read();
      if (done) break;
      text += dec.decode(value, { stream: true });
    }
    assert.match(text, /line-\d+\n/);
    // lines keep coming while it runs; the stop ends the response
    assert.equal((await alice.c.post(`/api/v1/instances/${inst.id}/stop`)).status, 202);
    const t0 = Date.now();
    for (;;) {
      const { done } = await reader.read();
      if (done) break;
      assert.ok(Date.now() - t0 < 15000, 'the log stream ended');
    }
    await waitState(alice.c, inst.id, 'stopped');
    // the whole log of a stopped instance, and a client that leaves mid-stream
    const whole = await alice.c.get(`/api/v1/instances/${inst.id}/logs?tail=100000`);
    assert.equal(whole.status, 200);
    assert.match(whole.text, /^first-line\n/);
    assert.equal((await alice.c.post(`/api/v1/instances/${inst.id}/start`)).status, 202);
    await waitState(alice.c, inst.id, 'running');
    const ctl = new AbortController();
    const r2 = await fetch(`${w.srv.base}/api/v1/instances/${inst.id}/logs?follow=1`, { headers: { cookie: alice.c.cookieHeader() }, signal: ctl.signal });
    await r2.body.getReader().read();
    ctl.abort();
    assert.equal((await alice.c.get(`/api/v1/instances/${inst.id}`)).status, 200, 'the server carries on');
    assert.equal((await alice.c.del(`/api/v1/instances/${inst.id}`)).status, 202);
    await waitState(alice.c, inst.id, 'deleted');
  });

  it('a preempted scavenger instance is stopped after the grace and its GPUs go to exam work', async () => {
    const teach = await mkUser(w, 'tess', 'teacher');
    const scav = await create(alice.c, w, { name: 'scav', pool: 'a100', slices: 4, priority: 'scavenger', cmd: ['sleep', '3600'] });
    await waitState(alice.c, scav.id, 'running');
    const exam = await teach.c.post('/api/v1/allocations', { pool: 'a100', slices: 2, priority: 'exam', cpu_millis: 100, mem_mib: 64, lease_s: 3600 });
    assert.equal(exam.status, 202, exam.text);
    const st = await waitState(alice.c, scav.id, 'stopped', 20000);
    assert.match(st.reason, /preempted/);
    assert.ok(await eventually(async () => (await teach.c.get(`/api/v1/allocations/${exam.json.id}`)).json.state === 'allocated', 10000), 'the exam request got the GPUs');
    assert.equal((await teach.c.del(`/api/v1/allocations/${exam.json.id}`)).status, 200);
    assert.equal((await alice.c.del(`/api/v1/instances/${scav.id}`)).status, 202);
    await waitState(alice.c, scav.id, 'deleted');
  });

  it('a student over their GPU quota waits with the quota reason', async () => {
    const q = await w.admin.req('PUT', '/api/v1/quotas', { user_id: bob.id, pool: 'a100', max_slices: 1 });
    assert.equal(q.status, 200, q.text);
    const first = await create(bob.c, w, { name: 'q1', pool: 'a100', slices: 1, cmd: ['sleep', '3600'] });
    await waitState(bob.c, first.id, 'running');
    const second = await create(bob.c, w, { name: 'q2', pool: 'a100', slices: 1, cmd: ['sleep', '3600'] });
    const ok = await eventually(async () => (await bob.c.get(`/api/v1/instances/${second.id}`)).json.request.reason_code === 'quota', 5000);
    assert.ok(ok, 'the request says quota');
    const got = (await bob.c.get(`/api/v1/instances/${second.id}`)).json;
    assert.equal(got.state, 'queued');
    assert.match(got.request.reason, /quota/i);
    assert.equal(ours(w.srv, env.GPUCLOUD_WORLD_DOCKER1).filter((c) => c.name === got.container_name).length, 0);
    // stopping a queued instance cancels its request
    assert.equal((await bob.c.post(`/api/v1/instances/${second.id}/stop`)).status, 202);
    const st = await waitState(bob.c, second.id, 'stopped');
    assert.equal(sql(w.srv, `SELECT state FROM alloc_requests WHERE id = ${st.request.id}`), 'cancelled');
    for (const id of [first.id, second.id]) {
      assert.equal((await bob.c.del(`/api/v1/instances/${id}`)).status, 202);
      await waitState(bob.c, id, 'deleted');
    }
    await w.admin.req('PUT', '/api/v1/quotas', { user_id: bob.id, pool: 'a100' });
  });

  it('runs a GPU-less instance through the scheduler: a request for cpu and memory, no slices', async () => {
    const inst = await create(alice.c, w, { name: 'cpu-only', cmd: ['sleep', '3600'] });
    assert.ok(inst.request, 'every container asks the scheduler');
    assert.equal(inst.pool, null);
    const run = await waitState(alice.c, inst.id, 'running');
    assert.equal(sql(w.srv, `SELECT pool_id IS NULL, slices, cpu_millis, state FROM alloc_requests WHERE id = ${run.request.id}`), 't|0|200|allocated');
    assert.equal(sql(w.srv, `SELECT slice_id IS NULL, node_id = ${run.node_id} FROM allocations WHERE request_id = ${run.request.id} AND released_at IS NULL`), 't|t');
    const url = run.node === 'node1' ? env.GPUCLOUD_WORLD_DOCKER1 : env.GPUCLOUD_WORLD_DOCKER2;
    const ci = inspect(url, run.container_name);
    assert.ok(ci.Config.Env.includes('CUDA_VISIBLE_DEVICES='));
    assert.ok(ci.Config.Env.includes('NVIDIA_VISIBLE_DEVICES=void'));
    assert.deepEqual(ci.HostConfig.Devices, []);
    assert.equal((await alice.c.del(`/api/v1/instances/${inst.id}`)).status, 202);
    await waitState(alice.c, inst.id, 'deleted');
  });

  it('refuses to start a stopped instance whose image was restricted meanwhile', async () => {
    const inst = await create(alice.c, w, { name: 'vis', cmd: ['sleep', '3600'] });
    await waitState(alice.c, inst.id, 'running');
    assert.equal((await alice.c.post(`/api/v1/instances/${inst.id}/stop`)).status, 202);
    await waitState(alice.c, inst.id, 'stopped');
    const hide = await w.admin.req('PATCH', `/api/v1/images/${w.image.id}`, { visibility: 'restricted', roles: ['teacher'] });
    assert.equal(hide.status, 200, hide.text);
    try {
      const r = await alice.c.post(`/api/v1/instances/${inst.id}/start`);
      assert.equal(r.status, 409, r.text);
      assertErrorShape(r.json, 'conflict');
      assert.match(r.json.error.message, /is no longer available to alice/);
      assert.equal((await alice.c.get(`/api/v1/instances/${inst.id}`)).json.state, 'stopped');
    } finally {
      assert.equal((await w.admin.req('PATCH', `/api/v1/images/${w.image.id}`, { visibility: 'everyone', roles: [] })).status, 200);
    }
    assert.equal((await alice.c.post(`/api/v1/instances/${inst.id}/start`)).status, 202);
    assert.equal((await alice.c.del(`/api/v1/instances/${inst.id}`)).status, 202);
    await waitState(alice.c, inst.id, 'deleted');
  });

  it('holds GPU-less instances to the tightest CPU and memory quota of the user', async () => {
    const carol = await mkUser(w, 'carol');
    const pool = await w.admin.post('/api/v1/pools', { name: 'cpuq', sharing: 'shared', slots_per_gpu: 8, memory_per_slot_mib: 1024 });
    assert.equal(pool.status, 201, pool.text);
    for (const q of [{ pool: 'a100', max_cpu_millis: 3000, max_mem_mib: 1024 }, { pool: 'cpuq', max_cpu_millis: 1500, max_mem_mib: 512 }])
      assert.equal((await w.admin.req('PUT', '/api/v1/quotas', { user_id: carol.id, ...q })).status, 200);
    const body = (name, cpu, mem) => ({ name, image_id: w.image.id, cpu_millis: cpu, mem_mib: mem, cmd: ['sleep', '3600'] });
    // two at once that only fit one by one: exactly one is taken
    const two = await Promise.all(['c1', 'c1b'].map((n) => carol.c.post('/api/v1/instances', body(n, 1000, 256))));
    assert.deepEqual(two.map((r) => r.status).sort(), [202, 409], two.map((r) => r.text).join(' | '));
    const a = two.find((r) => r.status === 202).json;
    const over = two.find((r) => r.status === 409).json;
    assertErrorShape(over, 'conflict');
    assert.match(over.error.message, /CPU quota: .* 1500 CPU millis .* 1000 are in use, this one asks 1000/);
    // memory likewise; nothing is recorded for a refusal
    const mem = await carol.c.post('/api/v1/instances', body('c2', 400, 300));
    assert.equal(mem.status, 409, mem.text);
    assert.match(mem.json.error.message, /memory quota: .* 512 MiB .* 256 MiB are in use/);
    assert.equal(sql(w.srv, `SELECT count(*) FROM instances WHERE user_id = ${carol.id}`), '1');
    const b = await create(carol.c, w, body('c2', 400, 200));
    // a stopped one does not count; starting it again does
    assert.equal((await carol.c.post(`/api/v1/instances/${a.id}/stop`)).status, 202);
    await waitState(carol.c, a.id, 'stopped');
    const c = await create(carol.c, w, body('c3', 1000, 200));
    const again = await carol.c.post(`/api/v1/instances/${a.id}/start`);
    assert.equal(again.status, 409, again.text);
    assert.match(again.json.error.message, /CPU quota/);
    assert.equal((await carol.c.get(`/api/v1/instances/${a.id}`)).json.state, 'stopped');
    for (const id of [a.id, b.id, c.id]) {
      assert.equal((await carol.c.del(`/api/v1/instances/${id}`)).status, 202);
      await waitState(carol.c, id, 'deleted');
    }
  });

  it('refuses a start while the storage says no, with its reason', async () => {
    sql(w.srv, `CREATE OR REPLACE FUNCTION gc_storage_block_reason(uid bigint) RETURNS text LANGUAGE sql STABLE AS $$ SELECT CASE WHEN uid = ${bob.id} THEN 'home over its hard limit (test)' END $$`);
    try {
      const r = await bob.c.post('/api/v1/instances', { name: 'blocked', image_id: w.image.id });
      assert.equal(r.status, 409);
      assertErrorShape(r.json, 'conflict');
      assert.match(r.json.error.message, /hard limit \(test\)/);
      assert.equal(sql(w.srv, "SELECT count(*) FROM instances WHERE name = 'blocked'"), '0');
    } finally {
      sql(w.srv, 'CREATE OR REPLACE FUNCTION gc_storage_block_reason(uid bigint) RETURNS text LANGUAGE sql STABLE AS $$ SELECT NULL::text $$');
    }
  });

  it('rejects bad input with 4xx JSON errors', async () => {
    const bad = [
      [{ name: 'Bad Name', image_id: w.image.id }, 400],
      [{ name: 'x', image_id: w.image.id, slices: 1 }, 400],
      [{ name: 'x', image_id: w.image.id, pool: 'a100', slices: 0 }, 400],
      [{ name: 'x', image_id: w.image.id, pool: 'a100', slices: 65 }, 400],
      [{ name: 'x', image_id: w.image.id, surprise: 1 }, 400],
      [{ name: 'x', image_id: 'one' }, 400],
      [{ name: 'x', image_id: w.image.id, env: { 'BAD-KEY': 'v' } }, 400],
      [{ name: 'x', image_id: w.image.id, env: { K: 1 } }, 400],
      [{ name: 'x', image_id: w.image.id, cmd: [1, 2] }, 400],
      [{ name: 'x', image_id: w.image.id, mem_mib: 1 }, 400],
      [{ name: 'x', image_id: w.image.id, priority: 'exam' }, 403],
      [{ name: 'x', image_id: 999999 }, 404],
      [{ name: 'x', image_id: w.image.id, pool: 'nope', slices: 1 }, 404],
    ];
    for (const [body, status] of bad) {
      const r = await alice.c.post('/api/v1/instances', body);
      assert.equal(r.status, status, `${JSON.stringify(body)} → ${r.status} ${r.text}`);
      assertErrorShape(r.json);
    }
    const raw = await alice.c.post('/api/v1/instances', '{"name":', { 'content-type': 'application/json' });
    assert.equal(raw.status, 400);
    for (const p of ['/api/v1/instances/abc', '/api/v1/instances/0', '/api/v1/instances/99999999'])
      assert.equal((await alice.c.get(p)).status, 404);
    assert.equal((await alice.c.get('/api/v1/instances?limit=x')).status, 400);
    const inst = await create(alice.c, w, { name: 'dup', cmd: ['sleep', '3600'] });
    const dup = await alice.c.post('/api/v1/instances', { name: 'dup', image_id: w.image.id });
    assert.equal(dup.status, 409);
    assertErrorShape(dup.json, 'conflict');
    assert.equal((await alice.c.get(`/api/v1/instances/${inst.id}/logs?tail=abc`)).status, 400);
    assert.equal((await alice.c.post(`/api/v1/instances/${inst.id}/stop`, { x: 1 })).status, 400);
    assert.equal((await alice.c.post(`/api/v1/instances/${inst.id}/save`, { name: 'Bad' })).status, 400);
    assert.equal((await alice.c.req('PUT', '/api/v1/idle-policies/student', { idle_seconds: 0 })).status, 403);
    assert.equal((await w.admin.req('PUT', '/api/v1/idle-policies/student', { idle_seconds: 0 })).status, 400);
    assert.equal((await w.admin.req('PUT', '/api/v1/idle-policies/nobody', { idle_seconds: 5 })).status, 404);
    assert.equal((await alice.c.del(`/api/v1/instances/${inst.id}`)).status, 202);
    await waitState(alice.c, inst.id, 'deleted');
  });

  it('saves a stopped instance as a personal image, within the image quota', async () => {
    const inst = await create(alice.c, w, { name: 'env1', cmd: ['sh', '-c', 'echo saved-marker > /tmp/marker; sleep 3600'] });
    await waitState(alice.c, inst.id, 'running');
    await eventually(async () => {
      const r = await alice.c.get(`/api/v1/instances/${inst.id}`);
      return r.json.state === 'running';
    });
    assert.equal((await alice.c.post(`/api/v1/instances/${inst.id}/stop`)).status, 202);
    await waitState(alice.c, inst.id, 'stopped');
    const sv = await alice.c.post(`/api/v1/instances/${inst.id}/save`, { name: 'myenv', tag: 'v1' });
    assert.equal(sv.status, 201, sv.text);
    assert.equal(sv.json.reference, `${env.GPUCLOUD_WORLD_REGISTRY}/gpucloud-users/alice/myenv:v1`);
    assert.equal(sql(w.srv, `SELECT owner_id FROM images WHERE id = ${sv.json.image_id}`), String(alice.id));
    // the same name and tag again: 409
    const dup = await alice.c.post(`/api/v1/instances/${inst.id}/save`, { name: 'myenv', tag: 'v1' });
    assert.equal(dup.status, 409);
    // the saved image runs for its owner (with the file the instance wrote)
    const again = await create(alice.c, w, { name: 'from-saved', image_id: sv.json.image_id, cmd: ['sh', '-c', 'cat /tmp/marker; sleep 3600'] });
    const run = await waitState(alice.c, again.id, 'running');
    assert.ok(await eventually(async () => (await alice.c.get(`/api/v1/instances/${again.id}/logs`)).text.includes('saved-marker'), 5000));
    // ... and not for anyone else
    const other = await bob.c.post('/api/v1/instances', { name: 'steal', image_id: sv.json.image_id });
    assert.equal(other.status, 404);
    // quota: 1 image
    sql(w.srv, 'SELECT 1');
    for (const id of [inst.id, again.id]) {
      assert.equal((await alice.c.del(`/api/v1/instances/${id}`)).status, 202);
      await waitState(alice.c, id, 'deleted');
    }
    void run;
  });
});

describe('instances: save-as-image limits', () => {
  let w, carol;
  before(async () => {
    w = await world({ args: ['--user-image-quota=1'], node2: false });
    carol = await mkUser(w, 'carol');
  });
  // the server first (no create may land after the clean-up), then its containers
  after(async () => { try { await stopClean(w?.srv); } finally { cleanup(w?.srv); } });

  it('refuses a second image over the quota, and saving without a personal registry', async () => {
    const inst = await create(carol.c, w, { name: 'e', cmd: ['sleep', '3600'] });
    await waitState(carol.c, inst.id, 'running');
    // a running instance is paused and committed
    const a = await carol.c.post(`/api/v1/instances/${inst.id}/save`, { name: 'one' });
    assert.equal(a.status, 201, a.text);
    assert.match(a.json.reference, /\/gpucloud-users\/carol\/one:latest$/);
    const b = await carol.c.post(`/api/v1/instances/${inst.id}/save`, { name: 'two' });
    assert.equal(b.status, 409);
    assert.match(b.json.error.message, /quota is 1/);
    sql(w.srv, 'UPDATE registries SET personal = false');
    sql(w.srv, `DELETE FROM images WHERE owner_id = ${carol.id}`);
    const c = await carol.c.post(`/api/v1/instances/${inst.id}/save`, { name: 'three' });
    assert.equal(c.status, 409);
    assert.match(c.json.error.message, /no registry is marked personal/);
    assert.ok(c.json.error.hint);
    assert.equal((await carol.c.del(`/api/v1/instances/${inst.id}`)).status, 202);
    await waitState(carol.c, inst.id, 'deleted');
  });
  it('lets exactly one of concurrent saves take the last place, and strips the app token from the image', async () => {
    sql(w.srv, 'UPDATE registries SET personal = true');
    sql(w.srv, `DELETE FROM images WHERE owner_id = ${carol.id}`);
    const inst = await create(carol.c, w, { name: 'race', cmd: ['sleep', '3600'] });
    const run = await waitState(carol.c, inst.id, 'running');
    const token = sql(w.srv, `SELECT app_token FROM instances WHERE id = ${inst.id}`);
    assert.ok(inspect(env.GPUCLOUD_WORLD_DOCKER1, run.container_name).Config.Env.includes(`GPUCLOUD_APP_TOKEN=${token}`));
    const res = await Promise.all(['r1', 'r2', 'r3', 'r4'].map((name) => carol.c.post(`/api/v1/instances/${inst.id}/save`, { name })));
    const codes = res.map((r) => r.status).sort();
    assert.deepEqual(codes, [201, 409, 409, 409], res.map((r) => r.text).join(' | '));
    for (const r of res.filter((x) => x.status === 409)) assert.match(r.json.error.message, /quota is 1/);
    assert.equal(sql(w.srv, `SELECT count(*) FROM images WHERE owner_id = ${carol.id}`), '1');
    // the committed image carries no platform secret of the instance
    const ref = res.find((r) => r.status === 201).json.reference;
    const cfgEnv = JSON.parse(docker(env.GPUCLOUD_WORLD_DOCKER1, 'image', 'inspect', ref))[0].Config.Env;
    assert.ok(!cfgEnv.some((e) => e.includes(token)), `image env: ${JSON.stringify(cfgEnv)}`);
    assert.ok(!cfgEnv.some((e) => /^GPUCLOUD_APP_TOKEN=./.test(e)), `image env: ${JSON.stringify(cfgEnv)}`);
    assert.ok(cfgEnv.some((e) => e.startsWith('PATH=')), 'the rest of the environment stays');
    assert.equal((await carol.c.del(`/api/v1/instances/${inst.id}`)).status, 202);
    await waitState(carol.c, inst.id, 'deleted');
  });
});

describe('instances: CPU-only work counts against node capacity', () => {
  let w, dan;
  before(async () => {
    w = await world({ node2: false });
    dan = await mkUser(w, 'dan');
  });
  after(async () => { try { await stopClean(w?.srv); } finally { cleanup(w?.srv); } });

  it('a CPU-only instance waits with a reason while the only node\'s CPU is taken, and runs when it frees', async () => {
    const ncpu = Number(sql(w.srv, "SELECT ncpu FROM nodes WHERE name = 'node1'"));
    assert.ok(ncpu >= 1, 'the node reports its CPUs');
    const cpu = ncpu * 1000;
    // everything the node has, then a little more
    assert.equal((await w.admin.req('PUT', '/api/v1/quotas/defaults', { role: 'student', max_cpu_millis: cpu * 4, max_mem_mib: 4096 })).status, 200);
    const a = await create(dan.c, w, { name: 'fill', cpu_millis: cpu - 100, cmd: ['sleep', '3600'] });
    await waitState(dan.c, a.id, 'running');
    const b = await create(dan.c, w, { name: 'wait', cpu_millis: 500, cmd: ['sleep', '3600'] });
    let got;
    assert.ok(await eventually(async () => { got = (await dan.c.get(`/api/v1/instances/${b.id}`)).json; return got.request?.reason_code === 'capacity'; }, 8000),
      `waits for capacity: ${JSON.stringify(got)}`);
    assert.equal(got.state, 'queued');
    assert.match(got.request.reason, /no node has 500 millicores of cpu and 64 MiB of memory free now/);
    assert.equal(ours(w.srv, env.GPUCLOUD_WORLD_DOCKER1).filter((c) => c.name === got.container_name).length, 0);
    // a request no node could ever hold is refused at once, saying how much there is
    const huge = await dan.c.post('/api/v1/instances', { image_id: w.image.id, name: 'huge', cpu_millis: cpu + 1000, mem_mib: 64, cmd: ['sleep', '3600'] });
    assert.equal(huge.status, 422, huge.text);
    assertErrorShape(huge.json, 'never_fits');
    assert.equal(huge.json.error.hint, `ask for at most ${cpu} millicores of cpu`);
    assert.equal((await dan.c.post(`/api/v1/instances/${a.id}/stop`)).status, 202);
    await waitState(dan.c, b.id, 'running', 30000);
    for (const id of [a.id, b.id]) {
      assert.equal((await dan.c.del(`/api/v1/instances/${id}`)).status, 202);
      await waitState(dan.c, id, 'deleted');
    }
  });
});
