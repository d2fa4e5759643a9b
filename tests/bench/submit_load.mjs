// submit_load.mjs — closed-loop job submissions for tests/bench/jobs_submit.sh:
// CONNS keep-alive connections each POST /api/v1/jobs back to back for
// DURATION seconds, every request with its own Idempotency-Key.
//
//   node submit_load.mjs --url=http://127.0.0.1:PORT --cookie=gc_session=... \
//        --csrf=TOKEN --image=ID --conns=16 --duration=10
//
// Prints one line of JSON: sent, created (201), errors, rps (201s per
// second), p50_ms, p99_ms, max_ms.
import http from 'node:http';

const o = { conns: 16, duration: 10 };
for (const a of process.argv.slice(2)) {
  const m = /^--([a-z]+)=(.*)$/s.exec(a);
  if (!m) throw new Error(`unknown argument '${a}'`);
  o[m[1]] = /^(conns|duration|image)$/.test(m[1]) ? Number(m[2]) : m[2];
}
const url = new URL(o.url);
const agent = new http.Agent({ keepAlive: true, maxSockets: o.conns });
const body = JSON.stringify({ name: 'bench', image_id: o.image, command: ['true'], cpu_millis: 100, mem_mib: 32, tags: ['bench'] });
const lat = [];
let sent = 0, created = 0, errors = 0, seq = 0;
const run = `${process.pid}-${Date.now()}`;

function post() {
  return new Promise((resolve) => {
    const t0 = performance.now();
    const req = http.request({
      agent, host: url.hostname, port: url.port, path: '/api/v1/jobs', method: 'POST',
      headers: {
        cookie: o.cookie, 'x-csrf-token': o.csrf, origin: o.url, 'content-type': 'application/json',
        'content-length': Buffer.byteLength(body), 'idempotency-key': `b-${run}-${seq++}`,
      },
    }, (res) => {
      res.resume();
      res.on('end', () => {
        lat.push(performance.now() - t0);
        if (res.statusCode === 201) created++; else errors++;
        resolve();
      });
    });
    req.on('error', () => { errors++; resolve(); });
    req.end(body);
    sent++;
  });
}

const end = performance.now() + o.duration * 1000;
const t0 = performance.now();
await Promise.all(Array.from({ length: o.conns }, async () => { while (performance.now() < end) await post(); }));
const secs = (performance.now() - t0) / 1000;
lat.sort((a, b) => a - b);
const pct = (p) => (lat.length ? lat[Math.min(lat.length - 1, Math.ceil(lat.length * p) - 1)] : 0).toFixed(2);
console.log(JSON.stringify({ sent, created, errors, rps: Math.round(created / secs), p50_ms: Number(pct(0.5)), p99_ms: Number(pct(0.99)), max_ms: Number(pct(1)) }));
agent.destroy();
