// load.mjs — a fixed-rate (open-loop) HTTP load generator for the benchmarks.
//
//   node load.mjs --url=URL --rate=2000 --duration=10 [--conns=20]
//                 [--warmup=1] [--count=N] [--header='Name: value' ...]
//
// Requests are scheduled at RATE per second whatever the server does; each
// one's latency is measured from the moment it was *scheduled*, so time spent
// waiting for a free socket counts (no coordinated omission). Requests go
// over at most CONNS keep-alive sockets. --count sends exactly N requests
// (at RATE) instead of running for DURATION. The warm-up second opens the
// sockets and is not measured.
//
// Prints one line of JSON: sent, ok, errors, rps (achieved), p50_ms, p90_ms,
// p99_ms, max_ms. Exits 1 when every request failed.
import http from 'node:http';

const opts = { rate: 2000, duration: 10, conns: 20, warmup: 1, count: 0, headers: {} };
for (const arg of process.argv.slice(2)) {
  const m = /^--([a-z]+)=(.*)$/s.exec(arg);
  if (!m) throw new Error(`unknown argument '${arg}'`);
  const [, k, v] = m;
  if (k === 'header') {
    const i = v.indexOf(':');
    opts.headers[v.slice(0, i).trim()] = v.slice(i + 1).trim();
  } else if (k === 'url') {
    opts.url = v;
  } else if (k in opts) {
    opts[k] = Number(v);
  } else {
    throw new Error(`unknown option '--${k}'`);
  }
}
if (!opts.url) throw new Error('--url is required');

const agent = new http.Agent({ keepAlive: true, maxSockets: opts.conns, maxFreeSockets: opts.conns });
const url = new URL(opts.url);
const reqOpts = {
  agent, host: url.hostname, port: url.port, path: url.pathname + url.search,
  method: 'GET', headers: opts.headers,
};

const now = () => Number(process.hrtime.bigint()) / 1e6; // ms

function send(scheduled, record) {
  return new Promise((resolve) => {
    const req = http.request(reqOpts, (res) => {
      res.resume();
      res.on('end', () => {
        record(res.statusCode >= 200 && res.statusCode < 300, now() - scheduled);
        resolve();
      });
    });
    req.on('error', () => { record(false, now() - scheduled); resolve(); });
    req.end();
  });
}

// Sends at opts.rate for `seconds` (or `count` requests); resolves once every
// reply is in.
function phase(seconds, count, record) {
  const total = count || Math.round(seconds * opts.rate);
  const interval = 1000 / opts.rate;
  const start = now();
  const pending = [];
  let i = 0;
  return new Promise((resolve) => {
    const tick = () => {
      const due = Math.min(total, Math.floor((now() - start) / interval) + 1);
      for (; i < due; i++) pending.push(send(start + i * interval, record));
      if (i < total) setTimeout(tick, 1);
      else Promise.all(pending).then(() => resolve(now() - start));
    };
    tick();
  });
}

const lat = [];
let ok = 0, errors = 0;
if (opts.warmup > 0 && !opts.count) await phase(opts.warmup, 0, () => {});
const elapsed = await phase(opts.duration, opts.count, (good, ms) => {
  if (good) { ok++; lat.push(ms); } else errors++;
});
agent.destroy();

lat.sort((a, b) => a - b);
const pct = (p) => (lat.length ? lat[Math.min(lat.length - 1, Math.ceil((p / 100) * lat.length) - 1)] : NaN);
const r2 = (x) => Math.round(x * 100) / 100;
console.log(JSON.stringify({
  sent: ok + errors, ok, errors, rps: Math.round((ok + errors) / (elapsed / 1000)),
  p50_ms: r2(pct(50)), p90_ms: r2(pct(90)), p99_ms: r2(pct(99)), max_ms: r2(lat[lat.length - 1] ?? NaN),
}));
process.exit(ok ? 0 : 1);
