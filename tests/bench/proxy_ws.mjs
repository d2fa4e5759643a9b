// proxy_ws.mjs — websocket helpers for tests/bench/proxy.sh, on node:net
// only (no npm package needed).
//
//   node proxy_ws.mjs echo PORT
//       an upstream that answers any Upgrade with 101 and then echoes every
//       byte back (frames included: an echo needs no framing)
//   node proxy_ws.mjs load PORT HOST_HEADER COOKIE CONNS SECONDS SIZE
//       opens CONNS websockets through the proxy at 127.0.0.1:PORT, then each
//       sends one masked SIZE-byte binary frame, waits for it to come back,
//       and sends the next, for SECONDS; prints {"conns","msgs","msgs_per_s",
//       "failed"} as one JSON line
import net from 'node:net';
import { randomBytes } from 'node:crypto';

const [mode, ...args] = process.argv.slice(2);

if (mode === 'echo') {
  const server = net.createServer((sock) => {
    let head = Buffer.alloc(0);
    const onData = (d) => {
      head = Buffer.concat([head, d]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      sock.off('data', onData);
      sock.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
        'Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n');
      const rest = head.subarray(end + 4);
      if (rest.length) sock.write(rest);
      sock.pipe(sock);
    };
    sock.on('data', onData);
    sock.on('error', () => {});
  });
  server.listen(Number(args[0]), '127.0.0.1');
} else if (mode === 'load') {
  const [port, hostHeader, cookie, conns, seconds, size] = args;
  const n = Number(conns), len = Number(size);
  const payload = randomBytes(len);
  const mask = randomBytes(4);
  const hdr = len < 126 ? Buffer.from([0x82, 0x80 | len]) : Buffer.from([0x82, 0x80 | 126, len >> 8, len & 255]);
  const frame = Buffer.concat([hdr, mask, Buffer.from(payload.map((b, i) => b ^ mask[i & 3]))]);
  let msgs = 0, failed = 0, running = false;
  const open = () => new Promise((resolve) => {
    const s = net.connect({ host: '127.0.0.1', port: Number(port) });
    s.setNoDelay(true);
    let upgraded = false, got = 0, buf = Buffer.alloc(0);
    s.on('connect', () => s.write(`GET /ws HTTP/1.1\r\nHost: ${hostHeader}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
      `Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n${cookie ? `Cookie: ${cookie}\r\n` : ''}\r\n`));
    s.on('data', (d) => {
      if (!upgraded) {
        buf = Buffer.concat([buf, d]);
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) return;
        if (!/^HTTP\/1\.1 101/.test(buf.toString('latin1', 0, 12))) { failed++; s.destroy(); resolve(null); return; }
        upgraded = true;
        d = buf.subarray(end + 4);
        resolve(s);
      }
      got += d.length;
      while (got >= frame.length) {
        got -= frame.length;
        if (running) { msgs++; s.write(frame); }
      }
    });
    s.on('error', () => { if (!upgraded) { failed++; resolve(null); } });
    s.start = () => s.write(frame);
  });
  const socks = [];
  for (let i = 0; i < n; i += 100) {
    const batch = await Promise.all(Array.from({ length: Math.min(100, n - i) }, open));
    socks.push(...batch.filter(Boolean));
  }
  running = true;
  for (const s of socks) s.start();
  const t0 = Date.now();
  await new Promise((r) => setTimeout(r, Number(seconds) * 1000));
  const dt = (Date.now() - t0) / 1000;
  running = false;
  const done = msgs;
  for (const s of socks) s.destroy();
  console.log(JSON.stringify({ conns: socks.length, msgs: done, msgs_per_s: Math.round(done / dt), failed }));
  process.exit(0);
} else {
  console.error('usage: proxy_ws.mjs echo PORT | load PORT HOST COOKIE CONNS SECONDS SIZE');
  process.exit(2);
}
