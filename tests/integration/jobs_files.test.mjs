// jobs_files.test.mjs — a job's folder as the file area job:{id} and its
// log by byte ranges and by search, on a real chatty job in the world's
// engine.
//
// The area: lists, downloads, previews and archives the folder; read-only
// (mutations 403 with a hint to use home); the owner and admins read,
// everyone else gets 404; the owner's quota counts it.  The owner controls
// the home, so the attacks are the owner's: the job folder (or jobs/)
// replaced with a link to /, to another user's home or to another of their
// own folders, or with a file; links inside the folder that lead out of it;
// '..' and its encodings.  Nothing is followed out.
//
// The log: Range and ?offset=&length= give 206 with Content-Range, 416 past
// the end; ?q= (and regex=1) returns matching lines with their numbers and
// byte offsets, capped with truncated; a 50 MB log is searched without the
// server growing by its size.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync, appendFileSync, symlinkSync, renameSync, rmSync, mkdirSync, statSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { assertErrorShape, stopClean } from '../lib/itest.mjs';
import { world, mkUser, cleanup, sql, eventually } from './instances_lib.mjs';

const FINAL = ['succeeded', 'failed', 'cancelled', 'lost'];

async function waitJob(c, id, ms = 40000) {
  let last = null;
  const ok = await eventually(async () => {
    const r = await c.get(`/api/v1/jobs/${id}`);
    last = r.json;
    return r.status === 200 && FINAL.includes(r.json.state);
  }, ms, 150);
  assert.ok(ok, `job ${id} did not end: ${JSON.stringify(last)}`);
  return last;
}

function vmHWM(pid) {
  const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m[1]) * 1024;
}

describe('a job\'s folder (job:{id}) and its log by range and search', () => {
  let w, alice, bob, job, job2, dir, home, log;
  before(async () => {
    w = await world({ node2: false, args: ['--storage-scan-interval=1'] });
    alice = await mkUser(w, 'alice');
    bob = await mkUser(w, 'bob');
    // a chatty job: 20000 numbered lines, an error line, outputs in a folder
    const r = await alice.c.post('/api/v1/jobs', {
      name: 'chatty', image_id: w.image.id, cpu_millis: 500, mem_mib: 64,
      command: ['sh', '-c', 'i=0; while [ $i -lt 20000 ]; do echo "step $i loss=0.$i"; i=$((i+1)); done; echo "ERROR: final (done)"; mkdir -p out; echo weights > out/model.bin; echo note > notes.txt'],
    });
    assert.equal(r.status, 201, r.text);
    job = await waitJob(alice.c, r.json.id);
    assert.equal(job.state, 'succeeded', JSON.stringify(job));
    const r2 = await alice.c.post('/api/v1/jobs', { name: 'other', image_id: w.image.id, cpu_millis: 200, mem_mib: 64, command: ['sh', '-c', 'echo secret-of-other > mine.txt'] });
    assert.equal(r2.status, 201, r2.text);
    job2 = await waitJob(alice.c, r2.json.id);
    home = join(w.srv.dir, 'data', 'home', 'alice');
    dir = join(home, job.directory);
    log = readFileSync(join(dir, 'output.log'), 'utf8');
    assert.equal(log.split('\n').length, 20002, 'the whole log is there');
  });
  after(async () => { try { cleanup(w?.srv); } finally { await stopClean(w?.srv); } });

  const area = () => `/api/v1/files/job:${job.id}`;

  it('lists, downloads, previews and archives the job folder', async () => {
    const l = await alice.c.get(`${area()}/`);
    assert.equal(l.status, 200, l.text);
    // (the driver's own dot-file of where it stopped copying the log aside)
    const names = l.json.items.map((x) => x.name).filter((n) => !n.startsWith('.')).sort();
    assert.deepEqual(names, ['hyperparameters.json', 'notes.txt', 'out', 'output.log']);
    assert.equal(l.json.writable, false);
    const d = await alice.c.get(`${area()}/output.log?download=1`);
    assert.equal(d.status, 200);
    assert.equal(d.text, log);
    const sub = await alice.c.get(`${area()}/out/model.bin?download=1`);
    assert.equal(sub.text, 'weights\n');
    const p = await alice.c.get(`${area()}/notes.txt?preview=1`);
    assert.equal(p.status, 200, p.text);
    // the folder as one archive, named after the job folder
    const t = await fetch(w.srv.base + `${area()}/?download=1`, { headers: { cookie: alice.c.cookieHeader() } });
    assert.equal(t.status, 200);
    assert.match(t.headers.get('content-disposition'), new RegExp(`${job.id}-chatty\\.tar`));
    const tar = Buffer.from(await t.arrayBuffer());
    assert.ok(tar.includes(Buffer.from('out/model.bin')), 'the archive holds the outputs');
    assert.ok(tar.includes(Buffer.from('step 19999 loss=0.19999')), 'and the log');
    // admins read it too
    assert.equal((await w.admin.get(`${area()}/notes.txt?download=1`)).text, 'note\n');
  });

  it('is read-only here: every change is 403 with a hint to use home', async () => {
    const tries = [
      alice.c.req('PUT', `${area()}/new.txt`, 'x', { 'content-type': 'application/octet-stream' }),
      alice.c.post(`${area()}/newdir`, { op: 'mkdir' }),
      alice.c.post(`${area()}/notes.txt`, { op: 'move', to: 'n2.txt' }),
      alice.c.post(`${area()}/notes.txt`, { op: 'copy', to: 'n2.txt' }),
      alice.c.del(`${area()}/notes.txt`),
      alice.c.post('/api/v1/uploads', { area: `job:${job.id}`, path: 'big.bin', size: 10 }),
      alice.c.get(`/api/v1/trash?area=job:${job.id}`),
    ];
    for (const r of await Promise.all(tries)) {
      assert.equal(r.status, 403, r.text);
      assertErrorShape(r.json, 'forbidden');
      assert.match(r.json.error.message, /read-only/);
    }
    assert.ok(existsSync(join(dir, 'notes.txt')));
    assert.ok(!existsSync(join(dir, 'new.txt')));
    // the owner changes the same files through home
    const h = await alice.c.req('PUT', `/api/v1/files/home/${job.directory}/added.txt`, 'added', { 'content-type': 'application/octet-stream' });
    assert.ok([200, 201].includes(h.status), h.text);
    assert.equal((await alice.c.get(`${area()}/added.txt?download=1`)).text, 'added');
  });

  it('is "not found" for everyone else, writes included; bad ids too', async () => {
    for (const r of [
      await bob.c.get(`${area()}/`),
      await bob.c.get(`${area()}/output.log?download=1`),
      await bob.c.req('PUT', `${area()}/x`, 'x', { 'content-type': 'application/octet-stream' }),
      await bob.c.del(`${area()}/notes.txt`),
      await alice.c.get('/api/v1/files/job:99999999/'),
      await alice.c.get('/api/v1/files/job:abc/'),
      await alice.c.get('/api/v1/files/job:/'),
    ]) {
      assert.equal(r.status, 404, r.text);
      assertErrorShape(r.json, 'not_found');
    }
    // a read-only token reads; an expired session does not
    const tok = await alice.c.post('/api/v1/tokens', { name: 'ro', scopes: ['read'] });
    assert.equal(tok.status, 201, tok.text);
    const ro = await fetch(w.srv.base + `${area()}/notes.txt?download=1`, { headers: { authorization: `Bearer ${tok.json.token}` } });
    assert.equal(ro.status, 200);
    const rw = await fetch(w.srv.base + `${area()}/x.txt`, { method: 'PUT', body: 'x', headers: { authorization: `Bearer ${tok.json.token}` } });
    assert.equal(rw.status, 403);
    const anon = await fetch(w.srv.base + `${area()}/`);
    assert.equal(anon.status, 401);
  });

  it('never follows the owner\'s links out of the job folder', async () => {
    // inside: links that leave the folder (to the home, to /, to bob)
    symlinkSync('../../../bob', join(dir, 'to-bob'));
    symlinkSync('/etc/passwd', join(dir, 'passwd'));
    symlinkSync(`../${job2.directory.split('/').pop()}/mine.txt`, join(dir, 'sibling.txt'));
    symlinkSync('notes.txt', join(dir, 'inside.txt'));
    mkdirSync(join(w.srv.dir, 'data', 'home', 'bob'), { recursive: true });
    writeFileSync(join(w.srv.dir, 'data', 'home', 'bob', 'secret.txt'), 'bob-secret');
    for (const p of ['to-bob/secret.txt', 'passwd', 'sibling.txt']) {
      const r = await alice.c.get(`${area()}/${p}?download=1`);
      assert.ok([403, 404].includes(r.status), `${p}: ${r.status} ${r.text}`);
      assert.doesNotMatch(r.text, /bob-secret|root:|secret-of-other/);
    }
    // a link that stays inside is fine
    assert.equal((await alice.c.get(`${area()}/inside.txt?download=1`)).text, 'note\n');
    // '..' and its encodings are refused before any lookup
    for (const p of ['%2e%2e/%2e%2e/bob/secret.txt', '..%2f..%2fbob', '%252e%252e/x', 'a/%2E%2E/%2E%2E/x', '..\\..\\x']) {
      const r = await alice.c.get(`${area()}/${p}?download=1`);
      assert.ok([400, 404].includes(r.status), `${p}: ${r.status} ${r.text}`);
      assert.doesNotMatch(r.text, /bob-secret|secret-of-other/);
    }
    // the job folder itself replaced with a link: to /, to bob's home, to
    // another of alice's own job folders — none is followed
    const moved = dir + '.real';
    renameSync(dir, moved);
    try {
      for (const target of ['/', join(w.srv.dir, 'data', 'home', 'bob'), join(home, job2.directory), `../../bob`, job2.directory.split('/').pop()]) {
        symlinkSync(target, dir);
        for (const p of ['', 'secret.txt', 'mine.txt', 'etc/passwd']) {
          const r = await alice.c.get(`${area()}/${p}${p ? '?download=1' : ''}`);
          assert.equal(r.status, 404, `${target} ${p}: ${r.text}`);
          assert.doesNotMatch(r.text, /bob-secret|secret-of-other|root:/);
        }
        const adm = await w.admin.get(`${area()}/`);
        assert.equal(adm.status, 404, `admin via ${target}: ${adm.text}`);
        rmSync(dir);
      }
      // a file in its place
      writeFileSync(dir, 'not a folder');
      assert.equal((await alice.c.get(`${area()}/`)).status, 404);
      rmSync(dir);
      // jobs/ itself a link to bob's home holding a same-named folder
      const jobs = join(home, 'jobs');
      renameSync(jobs, jobs + '.real');
      mkdirSync(join(w.srv.dir, 'data', 'home', 'bob', job.directory), { recursive: true });
      writeFileSync(join(w.srv.dir, 'data', 'home', 'bob', job.directory, 'secret.txt'), 'bob-secret');
      symlinkSync(join(w.srv.dir, 'data', 'home', 'bob', 'jobs'), jobs);
      const r = await alice.c.get(`${area()}/secret.txt?download=1`);
      assert.equal(r.status, 404, r.text);
      rmSync(jobs);
      renameSync(jobs + '.real', jobs);
    } finally {
      if (!existsSync(dir)) renameSync(moved, dir);
    }
    assert.equal((await alice.c.get(`${area()}/notes.txt?download=1`)).text, 'note\n', 'back as it was');
  });

  it('reads the log by byte range: Range and offset/length give 206, past the end 416', async () => {
    const size = Buffer.byteLength(log);
    const L = `/api/v1/jobs/${job.id}/logs`;
    let r = await alice.c.get(L, { range: 'bytes=0-99' });
    assert.equal(r.status, 206, r.text);
    assert.equal(r.headers.get('content-range'), `bytes 0-99/${size}`);
    assert.equal(r.text, log.slice(0, 100));
    r = await alice.c.get(L, { range: 'bytes=-50' });
    assert.equal(r.status, 206);
    assert.equal(r.text, log.slice(-50));
    assert.equal(r.headers.get('content-range'), `bytes ${size - 50}-${size - 1}/${size}`);
    r = await alice.c.get(L, { range: `bytes=${size - 10}-` });
    assert.equal(r.text, log.slice(-10));
    r = await alice.c.get(`${L}?offset=1000&length=300`);
    assert.equal(r.status, 206);
    assert.equal(r.headers.get('content-range'), `bytes 1000-1299/${size}`);
    assert.equal(r.text, log.slice(1000, 1300));
    r = await alice.c.get(`${L}?offset=${size - 5}&length=300`);
    assert.equal(r.text, log.slice(-5));
    r = await alice.c.get(`${L}?offset=${size - 5}`);
    assert.equal(r.text, log.slice(-5));
    for (const [h, q] of [[{ range: `bytes=${size}-` }, ''], [{}, `?offset=${size}`], [{}, `?offset=${size + 100}&length=5`]]) {
      r = await alice.c.get(L + q, h);
      assert.equal(r.status, 416, r.text);
      assert.equal(r.headers.get('content-range'), `bytes */${size}`);
      assertErrorShape(r.json, 'range_not_satisfiable');
    }
    // no range: the tail as before
    r = await alice.c.get(`${L}?tail=1`);
    assert.equal(r.status, 200);
    assert.equal(r.text, 'ERROR: final (done)\n');
    assert.equal((await bob.c.get(L, { range: 'bytes=0-9' })).status, 404);
  });

  it('searches the log: lines with numbers and offsets, regex, limit and truncated', async () => {
    const L = `/api/v1/jobs/${job.id}/logs`;
    const lines = log.split('\n');
    const offsets = [];
    for (let i = 0, o = 0; i < lines.length; i++) { offsets.push(o); o += Buffer.byteLength(lines[i]) + 1; }
    let r = await alice.c.get(`${L}?q=${encodeURIComponent('loss=0.1999')}`);
    assert.equal(r.status, 200, r.text);
    const want = lines.map((t, i) => ({ t, i })).filter(({ t }) => t.includes('loss=0.1999'));
    assert.equal(r.json.matches.length, want.length);
    assert.equal(r.json.truncated, false);
    for (const [k, m] of r.json.matches.entries()) {
      assert.equal(m.line, want[k].i + 1);
      assert.equal(m.offset, offsets[want[k].i]);
      assert.equal(m.text, want[k].t);
      assert.equal(m.length, Buffer.byteLength(want[k].t));
    }
    // case-insensitive text, found at the end
    r = await alice.c.get(`${L}?q=error:%20FINAL`);
    assert.deepEqual(r.json.matches.map((m) => m.line), [20001]);
    // regex; the default cap of 100 and truncated; a higher limit
    r = await alice.c.get(`${L}?regex=1&q=${encodeURIComponent('^step 1[0-9]{3} ')}`);
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.matches.length, 100);
    assert.equal(r.json.truncated, true);
    assert.equal(r.json.matches[0].text, 'step 1000 loss=0.1000');
    r = await alice.c.get(`${L}?regex=1&limit=1000&q=${encodeURIComponent('^step 1[0-9]{3} ')}`);
    assert.equal(r.json.matches.length, 1000);
    assert.equal(r.json.truncated, false);
    // the text as given, not a pattern, without regex
    r = await alice.c.get(`${L}?q=${encodeURIComponent('(done)')}`);
    assert.equal(r.json.matches.length, 1);
    r = await alice.c.get(`${L}?q=nothing-like-this`);
    assert.deepEqual(r.json.matches, []);
    assert.equal(r.json.timed_out, false);
    // back-references (glibc backtracks on them: a shared worker's time) are refused
    const br = await alice.c.get(`${L}?regex=1&q=${encodeURIComponent('(a*)*\\1b')}`);
    assert.equal(br.status, 400, br.text);
    assert.match(br.json.error.message, /back-references/);
    // an escaped backslash followed by a digit is a plain character, not one
    assert.equal((await alice.c.get(`${L}?regex=1&q=${encodeURIComponent('\\\\1')}`)).status, 200);
    // bad input
    for (const q of ['?regex=1&q=(', '?q=', '?q=x&limit=0', '?q=x&limit=5000', '?q=x&regex=2', '?regex=1', '?offset=-1', '?offset=x', '?length=0',
      '?follow=1&q=x', '?q=x&offset=5']) {
      const b = await alice.c.get(L + q);
      assert.equal(b.status, 400, `${q}: ${b.text}`);
      assertErrorShape(b.json, 'invalid');
    }
    assert.equal((await bob.c.get(`${L}?q=step`)).status, 404);
    assert.equal((await w.admin.get(`${L}?q=ERROR`)).json.matches.length, 1);
  });

  it('searches a 50 MB log without reading it into memory; the owner\'s quota counts the folder', async () => {
    const p = join(dir, 'output.log');
    const block = 'x'.repeat(99) + '\n';
    const chunk = block.repeat(10000); // 1 MB
    for (let i = 0; i < 50; i++) appendFileSync(p, chunk);
    appendFileSync(p, 'the needle at the end\n');
    const size = statSync(p).size;
    assert.ok(size > 50e6);
    const before = vmHWM(w.srv.proc.pid);
    const t0 = Date.now();
    const r = await alice.c.get(`/api/v1/jobs/${job.id}/logs?q=NEEDLE`);
    const ms = Date.now() - t0;
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.matches.length, 1);
    assert.equal(r.json.matches[0].line, 20002 + 500000);
    assert.equal(r.json.size, size);
    const grew = vmHWM(w.srv.proc.pid) - before;
    assert.ok(grew < 20e6, `the server's peak memory grew by ${grew} bytes for a ${size}-byte log`);
    console.log(`# 50 MB log searched in ${ms} ms; peak RSS grew ${(grew / 1e6).toFixed(1)} MB`);
    // a range deep inside it
    const rg = await alice.c.get(`/api/v1/jobs/${job.id}/logs`, { range: `bytes=${size - 22}-` });
    assert.equal(rg.text, 'the needle at the end\n');
    // the home's usage includes the job folder (it is in the home)
    sql(w.srv, `UPDATE storage_areas SET scanned_at = now() - interval '1 hour' WHERE area = 'home:${alice.id}'`);
    const since = sql(w.srv, 'SELECT now()');
    assert.ok(await eventually(() => sql(w.srv, `SELECT scanned_at > '${since}' FROM storage_areas WHERE area = 'home:${alice.id}'`) === 't', 15000), 'rescanned');
    const me = (await alice.c.get('/api/v1/me')).json;
    assert.ok(me.storage.bytes >= size, `usage ${me.storage.bytes} < the log's ${size}`);
  });
});
