// passwd.test.mjs — the user has a name in the container (issue 12, 11):
// before the start the driver adds the mapped uid to the container's
// /etc/passwd and /etc/group (name, group, home /home/<user>), so `id -un`
// and a shell's prompt show the user's name rather than "I have no name!".
// Checked on the real engine with the world's busybox image: the lines, the
// files' owner and mode, HOME; a stop and start adds nothing twice; an image
// with the uid under another name (ours goes first), without /etc/group (a
// new one), or with the user's name for another uid (gc-<name>); a
// passwd that is a link is left alone and the container starts anyway.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { stopClean } from '../lib/itest.mjs';
import { world, mkUser, create, waitState, cleanup, docker, env } from './instances_lib.mjs';

describe('the user in the container', () => {
  let w;
  before(async () => { w = await world({ node2: false }); });
  after(async () => { try { await stopClean(w?.srv); } finally { cleanup(w?.srv); } });

  const uidOf = (u) => 200000 + Number(u.id);
  const exec = (cn, ...a) => docker(env.GPUCLOUD_WORLD_DOCKER1, 'exec', cn, ...a);
  const lines = (cn, f) => exec(cn, 'cat', f).split('\n');
  const withId = (cn, f, id) => lines(cn, f).filter((l) => l.split(':')[2] === String(id));

  async function cycle(u, inst) {
    assert.equal((await u.c.post(`/api/v1/instances/${inst.id}/stop`)).status, 202);
    await waitState(u.c, inst.id, 'stopped');
    assert.equal((await u.c.post(`/api/v1/instances/${inst.id}/start`)).status, 202);
    return waitState(u.c, inst.id, 'running');
  }

  it('names the uid, with its group and home, once across stop and start', async () => {
    const erin = await mkUser(w, 'erin');
    const uid = uidOf(erin);
    const inst = await create(erin.c, w, { name: 'pw', cmd: ['sh', '-c', 'sleep 3600'] });
    let run = await waitState(erin.c, inst.id, 'running');
    const cn = run.container_name;
    const check = () => {
      assert.equal(exec(cn, 'id', '-un'), 'erin');
      assert.equal(exec(cn, 'id', '-gn'), 'erin');
      assert.equal(exec(cn, 'sh', '-c', 'echo "$HOME $(pwd)"'), '/home/erin /home/erin');
      assert.deepEqual(withId(cn, '/etc/passwd', uid), [`erin:x:${uid}:${uid}::/home/erin:/bin/sh`]);
      assert.deepEqual(withId(cn, '/etc/group', uid), [`erin:x:${uid}:`]);
      // the image's accounts stay, the files stay root's and readable
      assert.ok(lines(cn, '/etc/passwd').includes('root:x:0:0:root:/root:/bin/sh'));
      assert.ok(lines(cn, '/etc/group').includes('users:x:100:user'));
      assert.equal(exec(cn, 'stat', '-c', '%u %g %a', '/etc/passwd', '/etc/group'), '0 0 644\n0 0 644');
    };
    check();
    assert.match(w.srv.log(), new RegExp(`adding user 'erin' \\(uid ${uid}\\) to container \\w+'s /etc/passwd /etc/group`));
    // stopped and started again (the same container): nothing twice
    const before = exec(cn, 'cat', '/etc/passwd', '/etc/group');
    run = await cycle(erin, inst);
    assert.equal(run.container_name, cn);
    check();
    assert.equal(exec(cn, 'cat', '/etc/passwd', '/etc/group'), before);

    // an image with the uid under another name and no /etc/group (made so
    // here, as root): ours goes first, the group file is made
    docker(env.GPUCLOUD_WORLD_DOCKER1, 'exec', '-u', '0', cn, 'sh', '-c',
      "sed -i 's/^erin:/jovyan:/' /etc/passwd && rm /etc/group");
    assert.equal(exec(cn, 'id', '-un'), 'jovyan');
    run = await cycle(erin, inst);
    assert.equal(exec(cn, 'id', '-un'), 'erin');
    assert.deepEqual(withId(cn, '/etc/passwd', uid),
      [`erin:x:${uid}:${uid}::/home/erin:/bin/sh`, `jovyan:x:${uid}:${uid}::/home/erin:/bin/sh`]);
    assert.deepEqual(lines(cn, '/etc/group'), ['root:x:0:', `erin:x:${uid}:`]);
    assert.equal(exec(cn, 'stat', '-c', '%u %g %a', '/etc/group'), '0 0 644');
    assert.doesNotMatch(w.srv.log(), /could not add the user|not a regular file/);

    // an /etc/passwd that is a link is left alone (logged), the start goes on
    docker(env.GPUCLOUD_WORLD_DOCKER1, 'exec', '-u', '0', cn, 'sh', '-c',
      "grep -v '^erin:' /etc/passwd > /etc/passwd.img && rm /etc/passwd && ln -s passwd.img /etc/passwd");
    run = await cycle(erin, inst);
    assert.equal(exec(cn, 'readlink', '/etc/passwd'), 'passwd.img');
    assert.equal(exec(cn, 'id', '-un'), 'jovyan');
    assert.match(w.srv.log(), /container \w+'s \/etc\/passwd is not a regular file; left as it is/);
    assert.equal((await erin.c.del(`/api/v1/instances/${inst.id}`)).status, 202);
    await waitState(erin.c, inst.id, 'deleted');
  });

  it("a second new container of an image takes the image's files as remembered, without the first user's line", async () => {
    const fay = await mkUser(w, 'fay');
    const gus = await mkUser(w, 'gus');
    const a = await create(fay.c, w, { name: 'pa', cmd: ['sh', '-c', 'sleep 3600'] });
    const ra = await waitState(fay.c, a.id, 'running');
    const b = await create(gus.c, w, { name: 'pb', cmd: ['sh', '-c', 'sleep 3600'] });
    const rb = await waitState(gus.c, b.id, 'running');
    // the image's files were read once (earlier in this process); gus's
    // container got them from memory: two archive GETs less on the way
    assert.match(w.srv.log(), new RegExp(`adding user 'gus' \\(uid ${uidOf(gus)}\\) to container \\w+'s /etc/passwd /etc/group \\(as its image has them, remembered\\)`));
    assert.equal(exec(rb.container_name, 'id', '-un'), 'gus');
    assert.deepEqual(withId(rb.container_name, '/etc/passwd', uidOf(gus)), [`gus:x:${uidOf(gus)}:${uidOf(gus)}::/home/gus:/bin/sh`]);
    assert.deepEqual(withId(rb.container_name, '/etc/group', uidOf(gus)), [`gus:x:${uidOf(gus)}:`]);
    // nobody else's line: not fay's, not erin's (whose container changed its own files)
    for (const f of ['/etc/passwd', '/etc/group']) {
      const names = lines(rb.container_name, f).map((l) => l.split(':')[0]);
      assert.ok(!names.includes('fay') && !names.includes('erin') && !names.includes('jovyan'), `${f}: ${names}`);
      assert.ok(names.includes('root'));
    }
    assert.equal(exec(ra.container_name, 'id', '-un'), 'fay');
    for (const [u, i] of [[fay, a], [gus, b]]) {
      assert.equal((await u.c.del(`/api/v1/instances/${i.id}`)).status, 202);
      await waitState(u.c, i.id, 'deleted');
    }
  });

  it('takes gc-<name> when the image has the name for another uid', async () => {
    // the world image has "user" (uid 1000)
    const u = await mkUser(w, 'user');
    const uid = uidOf(u);
    const inst = await create(u.c, w, { name: 'pw2', cmd: ['sh', '-c', 'sleep 3600'] });
    const run = await waitState(u.c, inst.id, 'running');
    const cn = run.container_name;
    assert.equal(exec(cn, 'id', '-un'), 'gc-user');
    assert.equal(exec(cn, 'sh', '-c', 'echo $HOME'), '/home/user');
    assert.deepEqual(withId(cn, '/etc/passwd', uid), [`gc-user:x:${uid}:${uid}::/home/user:/bin/sh`]);
    assert.deepEqual(withId(cn, '/etc/passwd', 1000), ['user:x:1000:1000:user:/home/user:/bin/sh']);
    assert.deepEqual(withId(cn, '/etc/group', uid), [`gc-user:x:${uid}:`]);
    await cycle(u, inst);
    assert.deepEqual(withId(cn, '/etc/passwd', uid), [`gc-user:x:${uid}:${uid}::/home/user:/bin/sh`]);
    assert.equal((await u.c.del(`/api/v1/instances/${inst.id}`)).status, 202);
    await waitState(u.c, inst.id, 'deleted');
  });
});
