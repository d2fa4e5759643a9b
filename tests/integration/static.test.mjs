// The static frontend: index.html at /, strong ETags and 304s, gzip for
// compressible files over 1 KiB, content types and security headers, and
// no way out of the web root (traversal, dot-files, NULs, symlinks).
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, writeFileSync, readFileSync, symlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { startServer, ROOT } from '../lib/server.mjs';
import { rawOnce, RawConn, assertAlive, stopClean } from '../lib/itest.mjs';

const SECRET = 'secret-outside-the-web-root-7f3a';

async function raw(srv, path, headers = '', method = 'GET') {
  const { res, conn } = await rawOnce(srv.port, Buffer.from(
    `${method} ${path} HTTP/1.1\r\nHost: t\r\n${headers}Connection: close\r\n\r\n`, 'latin1'), { head: method === 'HEAD' });
  conn.destroy();
  return res;
}

describe('static files from the real web root', () => {
  let srv;
  before(async () => { srv = await startServer(); });
  after(async () => { await stopClean(srv); });

  it('serves index.html at / with an ETag', async () => {
    const res = await raw(srv, '/');
    assert.equal(res.status, 200);
    assert.match(res.headers['content-type'], /^text\/html/);
    assert.ok(res.headers.etag, 'no ETag');
    assert.deepEqual(res.body, readFileSync(join(ROOT, 'web/index.html')));
    const again = await raw(srv, '/', `If-None-Match: ${res.headers.etag}\r\n`);
    assert.equal(again.status, 304);
  });
});

describe('static files', () => {
  let srv, dir, web;
  const big = Array.from({ length: 200 }, (_, i) => `.rule-${i} { color: #${(i * 4099 % 0xffffff).toString(16).padStart(6, '0')}; }\n`).join('');
  const html = '<!doctype html><title>t</title><p>hello</p>\n';

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gcstatic-'));
    web = join(dir, 'web');
    mkdirSync(join(web, 'sub'), { recursive: true });
    mkdirSync(join(web, '.git'));
    writeFileSync(join(web, 'index.html'), html);
    writeFileSync(join(web, 'big.css'), big);
    writeFileSync(join(web, 'small.js'), 'export const x = 1;\n');
    writeFileSync(join(web, 'pic.png'), Buffer.alloc(4096, 7));
    writeFileSync(join(web, 'sub', 'index.html'), '<p>sub</p>\n');
    writeFileSync(join(web, '.git', 'config'), `[core]\n${SECRET}\n`);
    writeFileSync(join(web, '.env'), `${SECRET}\n`);
    writeFileSync(join(dir, 'secret.txt'), `${SECRET}\n`);
    symlinkSync(join(dir, 'secret.txt'), join(web, 'link.txt'));
    srv = await startServer({ args: [`--web-root=${web}`] });
  });
  after(async () => {
    await stopClean(srv);
    rmSync(dir, { recursive: true, force: true });
  });

  it('serves index.html at / and in directories, with security headers', async () => {
    const res = await raw(srv, '/');
    assert.equal(res.status, 200);
    assert.equal(res.text, html);
    assert.equal(res.headers['content-type'], 'text/html; charset=utf-8');
    assert.equal(res.headers['x-content-type-options'], 'nosniff');
    assert.match(res.headers['content-security-policy'] || '', /default-src 'self'/);
    assert.match(res.headers['content-security-policy'] || '', /frame-ancestors 'none'/);
    assert.equal((await raw(srv, '/index.html')).text, html);
    assert.equal((await raw(srv, '/sub/')).text, '<p>sub</p>\n');
    assert.match((await raw(srv, '/small.js')).headers['content-type'], /^text\/javascript/);
    assert.match((await raw(srv, '/big.css')).headers['content-type'], /^text\/css/);
    assert.equal((await raw(srv, '/pic.png')).headers['content-type'], 'image/png');
    assert.equal((await raw(srv, '/missing.html')).status, 404);
    assert.equal((await raw(srv, '/sub')).status, 404);
  });

  it('revalidates with strong ETags: 304 on a match, 200 after a change', async () => {
    const first = await raw(srv, '/index.html');
    const etag = first.headers.etag;
    assert.match(etag, /^"[^"]+"$/, 'a strong, quoted ETag');
    assert.equal(first.headers['cache-control'], 'no-cache');
    for (const inm of [etag, `W/${etag}`, `"other", ${etag}`, '*']) {
      const r = await raw(srv, '/index.html', `If-None-Match: ${inm}\r\n`);
      assert.equal(r.status, 304, `If-None-Match: ${inm}`);
      assert.equal(r.body.length, 0);
      assert.equal(r.headers.etag, etag);
      assert.equal(r.headers['content-length'], undefined, 'a 304 carries no body framing');
    }
    assert.equal((await raw(srv, '/index.html', 'If-None-Match: "nope"\r\n')).status, 200);
    // a 304 in the middle of a keep-alive connection leaves it usable
    const c = await RawConn.open(srv.port);
    c.write(`GET /index.html HTTP/1.1\r\nHost: t\r\nIf-None-Match: ${etag}\r\n\r\nGET /small.js HTTP/1.1\r\nHost: t\r\n\r\n`);
    assert.equal((await c.response()).status, 304);
    assert.equal((await c.response()).text, 'export const x = 1;\n');
    c.destroy();

    writeFileSync(join(web, 'index.html'), html.replace('hello', 'HELLO, changed'));
    const changed = await raw(srv, '/index.html', `If-None-Match: ${etag}\r\n`);
    assert.equal(changed.status, 200, 'a changed file still answered 304');
    assert.notEqual(changed.headers.etag, etag);
    assert.match(changed.text, /HELLO, changed/);
    writeFileSync(join(web, 'index.html'), html);
  });

  it('gzips a compressible file over 1 KiB when asked, and the bytes round-trip', async () => {
    const onDisk = readFileSync(join(web, 'big.css'));
    assert.ok(onDisk.length > 1024);
    const gz = await raw(srv, '/big.css', 'Accept-Encoding: gzip, deflate, br\r\n');
    assert.equal(gz.status, 200);
    assert.equal(gz.headers['content-encoding'], 'gzip');
    assert.match(gz.headers.vary || '', /accept-encoding/i);
    assert.equal(Number(gz.headers['content-length']), gz.body.length);
    assert.ok(gz.body.length < onDisk.length);
    assert.deepEqual(gunzipSync(gz.body), onDisk);

    const plain = await raw(srv, '/big.css');
    assert.equal(plain.headers['content-encoding'], undefined);
    assert.deepEqual(plain.body, onDisk);
    // RFC 9110 8.8.3: a strong ETag names one representation; the gzip body
    // needs its own (or a weak one)
    assert.ok(gz.headers.etag.startsWith('W/') || gz.headers.etag !== plain.headers.etag,
      `gzip and identity bodies share the strong ETag ${gz.headers.etag}`);
    const reval = await raw(srv, '/big.css', `Accept-Encoding: gzip\r\nIf-None-Match: ${gz.headers.etag}\r\n`);
    assert.equal(reval.status, 304, 'the gzip ETag does not revalidate');
    for (const ae of ['gzip;q=0', 'br', 'identity', 'deflate']) {
      const r = await raw(srv, '/big.css', `Accept-Encoding: ${ae}\r\n`);
      assert.equal(r.headers['content-encoding'], undefined, `Accept-Encoding: ${ae}`);
      assert.deepEqual(r.body, onDisk);
    }
    const headGz = await raw(srv, '/big.css', 'Accept-Encoding: gzip\r\n', 'HEAD');
    assert.equal(headGz.headers['content-length'], gz.headers['content-length']);
    assert.equal(headGz.headers['content-encoding'], 'gzip');
    // small files and images are sent as they are
    assert.equal((await raw(srv, '/small.js', 'Accept-Encoding: gzip\r\n')).headers['content-encoding'], undefined);
    assert.equal((await raw(srv, '/pic.png', 'Accept-Encoding: gzip\r\n')).headers['content-encoding'], undefined);
  });

  it('never serves anything outside the web root, dot-files or through symlinks', async () => {
    const attempts = [
      '/../secret.txt', '/../../../../etc/passwd', '/%2e%2e/secret.txt', '/%2e%2e/%2e%2e/%2e%2e/etc/passwd',
      '/..%2fsecret.txt', '/%2e%2e%2fsecret.txt', '/sub/../../secret.txt', '/sub/%2e%2e/%2e%2e/secret.txt',
      '/.git/config', '/%2egit/config', '/.env', '/%2eenv', '/sub/./../.env', '/.', '/..', '/%2e', '/%2e%2e',
      '/%00', '/index.html%00.png', '/%00/../secret.txt', '/..\\secret.txt', '/%5c..%5csecret.txt',
      '//etc/passwd', '/%2fetc%2fpasswd', '/link.txt', '/sub//index.html', '/%ff%fe', '/sub/%c0%ae%c0%ae/secret.txt',
    ];
    for (const p of attempts) {
      for (const method of ['GET', 'HEAD']) {
        const r = await raw(srv, p, '', method);
        assert.ok(r.status === 400 || r.status === 404, `${method} ${p} answered ${r.status}`);
        assert.ok(!r.text.includes(SECRET) && !r.text.includes('root:x:0:0') && !r.text.includes('[core]'),
          `${method} ${p} leaked file content`);
      }
    }
    await assertAlive(srv);
  });
});
