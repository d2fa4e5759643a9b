// coexist.test.mjs — `make run` and `make world` on one machine (gpucloud
// issue 12): make run's private engine and a world engine, each with the
// network settings deploy/lib.sh gives it, the world's restarted as `make
// world` restarts it; both must still run containers on their bridge
// networks.  Before the fix make run's engine used docker0, and dockerd 20.10
// deletes docker0 at start-up when it has address pools and finds its earlier
// default network (any restart of a world engine): every later container
// start on make run's engine failed with "could not find bridge docker0".
// The work is tests/integration/coexist.sh (its own engines, nothing shared).
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { ROOT } from '../lib/server.mjs';

const isRoot = process.getuid && process.getuid() === 0;

describe('make run beside the test world', { skip: isRoot ? false : 'needs root (dockerd, bridges)' }, () => {
  it('keeps both engines able to run bridged containers across a world engine restart', () => {
    const dir = join(ROOT, `var/test-coexist-${process.pid}`);
    const r = spawnSync('bash', [join(ROOT, 'tests/integration/coexist.sh'), dir], { encoding: 'utf8', timeout: 240000 });
    const out = `${r.stdout}\n${r.stderr}`;
    assert.equal(r.status, 0, out);
    assert.match(r.stdout, /^ok run: a container ran on the bridge network/m, out);
    assert.match(r.stdout, /^ok world: a container ran on the bridge network/m, out);
    // the run engine's container ran twice: before and after the world engine's restart
    assert.equal((r.stdout.match(/^ok run: a container ran/mg) || []).length, 2, out);
    assert.doesNotMatch(r.stdout, /^FAIL/m, out);
  });
});
