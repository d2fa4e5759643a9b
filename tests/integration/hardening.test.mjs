// hardening.test.mjs — every instance container is hardened (SPEC §14),
// checked with `docker inspect` on the real engine: no privileges, all
// capabilities dropped, no-new-privileges, default seccomp, the user's uid,
// limits set, no host namespaces, only the user's storage bound, no Docker
// socket, gpucloud.* labels, ports published on loopback only.  A container
// sees exactly the device files of its allocated GPUs (not the others'),
// and user attempts to override NVIDIA_* / CUDA_VISIBLE_DEVICES are ignored
// while ordinary variables pass.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { statSync } from 'node:fs';
import { stopClean } from '../lib/itest.mjs';
import { world, mkUser, create, waitState, cleanup, inspect, docker, clusterId, env, sql } from './instances_lib.mjs';

// host device files' minor numbers by path
const minor = (p) => statSync(p).rdev & 0xff;

describe('container hardening', () => {
  let w, dave;
  before(async () => {
    w = await world({ node2: false });
    dave = await mkUser(w, 'dave');
  });
  // the server first (no create may land after the clean-up), then its containers
  after(async () => { try { await stopClean(w?.srv); } finally { cleanup(w?.srv); } });

  it('sets every hardening flag, and the GPUs and environment exactly as allocated', async () => {
    const inst = await create(dave.c, w, {
      name: 'hard', pool: 'a100', slices: 2, cpu_millis: 500, mem_mib: 96, shm_mib: 32,
      cmd: ['sh', '-c', 'ls /dev > /tmp/devs; id; sleep 3600'],
      env: {
        NVIDIA_VISIBLE_DEVICES: 'all', CUDA_VISIBLE_DEVICES: '0,1,2,3', NVIDIA_DRIVER_CAPABILITIES: 'all',
        NVIDIA_REQUIRE_CUDA: 'cuda>=99', GPUCLOUD_APP_TOKEN: 'forged', HOME: '/root', FOO: 'bar baz',
      },
    });
    const run = await waitState(dave.c, inst.id, 'running');
    const ci = inspect(env.GPUCLOUD_WORLD_DOCKER1, run.container_name);
    const hc = ci.HostConfig;
    assert.equal(hc.Privileged, false);
    assert.deepEqual(hc.CapDrop, ['ALL']);
    assert.ok(!hc.CapAdd || hc.CapAdd.length === 0);
    assert.deepEqual(hc.SecurityOpt, ['no-new-privileges']); // no seccomp=unconfined: the default profile
    const uid = Number(sql(w.srv, `SELECT ${200000} + ${dave.id}`));
    assert.equal(ci.Config.User, `${uid}:${uid}`);
    assert.ok(hc.PidsLimit > 0);
    assert.equal(hc.Memory, 96 * 1024 * 1024);
    assert.equal(hc.MemorySwap, hc.Memory);
    assert.equal(hc.NanoCpus, 500 * 1e6);
    assert.equal(hc.ShmSize, 32 * 1024 * 1024);
    assert.equal(hc.NetworkMode, `gpucloud-${clusterId(w.srv)}-u${dave.id}`); // the user's own network
    assert.notEqual(hc.PidMode, 'host');
    assert.notEqual(hc.IpcMode, 'host');
    assert.notEqual(hc.UTSMode, 'host');
    assert.equal(hc.RestartPolicy.Name, 'no');
    // binds: only the user's home (rw) and the shared area (ro); never the docker socket
    assert.ok(hc.Binds.length >= 1);
    for (const b of hc.Binds) {
      assert.ok(!/docker\.sock|\/var\/run|\/run\/docker/.test(b), b);
      const [, target, mode] = b.split(':');
      assert.ok(target === '/home/dave' || (mode === 'ro' && ['/shared'].includes(target)) || (mode === 'ro' && target.startsWith('/classes')), b);
    }
    assert.ok(hc.Binds.some((b) => b.split(':')[1] === '/home/dave'));
    for (const m of ci.Mounts) assert.ok(!/docker\.sock/.test(m.Source));
    // labels
    assert.equal(ci.Config.Labels['gpucloud.cluster'], clusterId(w.srv));
    assert.equal(ci.Config.Labels['gpucloud.kind'], 'instance');
    assert.equal(ci.Config.Labels['gpucloud.id'], String(inst.id));
    assert.equal(ci.Config.Labels['gpucloud.owner'], 'dave');
    // ports only on loopback, with an engine-chosen host port
    for (const bs of Object.values(hc.PortBindings)) for (const b of bs) {
      assert.equal(b.HostIp, '127.0.0.1');
      assert.equal(b.HostPort, '');
    }
    // GPUs: exactly the allocated ones' device files, renumbered from 0
    const gpuPaths = sql(w.srv, `SELECT g.devices[1] FROM allocations a JOIN slices s ON s.id = a.slice_id JOIN gpus g ON g.id = s.gpu_id WHERE a.request_id = ${run.request.id} AND a.released_at IS NULL ORDER BY a.id`).split('\n');
    assert.equal(gpuPaths.length, 2);
    assert.deepEqual(hc.Devices.map((d) => d.PathOnHost), gpuPaths);
    assert.deepEqual(hc.Devices.map((d) => d.PathInContainer), ['/dev/nvidia0', '/dev/nvidia1']);
    const inside = docker(env.GPUCLOUD_WORLD_DOCKER1, 'exec', run.container_name, 'sh', '-c', 'ls /dev | grep nvidia; stat -c "%n %T" /dev/nvidia*');
    const names = inside.split('\n').filter((l) => /^nvidia\d+$/.test(l));
    assert.deepEqual(names, ['nvidia0', 'nvidia1']);
    // the minor numbers inside are the allocated GPUs' (not the others')
    const minorsInside = inside.split('\n').filter((l) => l.startsWith('/dev/nvidia')).map((l) => parseInt(l.split(' ')[1], 16));
    assert.deepEqual(minorsInside, gpuPaths.map(minor));
    const others = env.GPUCLOUD_WORLD_NODE1_GPUS.split(',').filter((p) => !gpuPaths.includes(p)).map(minor);
    for (const m of others) assert.ok(!minorsInside.includes(m));
    // environment: overrides ignored, ordinary variables kept
    const envs = ci.Config.Env;
    const get = (k) => envs.filter((e) => e.startsWith(`${k}=`));
    assert.deepEqual(get('NVIDIA_VISIBLE_DEVICES'), ['NVIDIA_VISIBLE_DEVICES=void']);
    assert.deepEqual(get('CUDA_VISIBLE_DEVICES'), ['CUDA_VISIBLE_DEVICES=0,1']);
    assert.deepEqual(get('NVIDIA_DRIVER_CAPABILITIES'), []);
    assert.deepEqual(get('NVIDIA_REQUIRE_CUDA'), []);
    assert.deepEqual(get('HOME'), ['HOME=/home/dave']);
    assert.deepEqual(get('USER'), ['USER=dave']);
    assert.deepEqual(get('FOO'), ['FOO=bar baz']);
    assert.equal(get('GPUCLOUD_APP_TOKEN').length, 1);
    assert.notEqual(get('GPUCLOUD_APP_TOKEN')[0], 'GPUCLOUD_APP_TOKEN=forged');
    assert.equal(get('GPUCLOUD_APP_TOKEN')[0], `GPUCLOUD_APP_TOKEN=${sql(w.srv, `SELECT app_token FROM instances WHERE id = ${inst.id}`)}`);
    assert.deepEqual(get('GPUCLOUD_INSTANCE_ID'), [`GPUCLOUD_INSTANCE_ID=${inst.id}`]);
    // the registry key is nowhere in the container's definition
    assert.ok(!JSON.stringify(ci).includes(env.GPUCLOUD_WORLD_REGISTRY_KEY));
    // it runs as that uid, not root
    const id = docker(env.GPUCLOUD_WORLD_DOCKER1, 'exec', run.container_name, 'id', '-u');
    assert.equal(id, String(uid));
    // ... which has a name, a group and a home there (issue 12: no "I have no name!")
    assert.equal(docker(env.GPUCLOUD_WORLD_DOCKER1, 'exec', run.container_name, 'sh', '-c', 'echo "$(id -un) $(id -gn) $HOME"'), 'dave dave /home/dave');
    assert.equal((await dave.c.del(`/api/v1/instances/${inst.id}`)).status, 202);
    await waitState(dave.c, inst.id, 'deleted');
  });
});
