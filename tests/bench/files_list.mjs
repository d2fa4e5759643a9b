// files_list.mjs — sequential GETs of one URL over a keep-alive connection;
// prints {"n","p50_ms","p99_ms","max_ms","first_ms"} (first_ms: the first
// request, before any cache is warm). Usage: node files_list.mjs URL N [COOKIE]
import http from 'node:http';

const [url, nStr, cookie] = process.argv.slice(2);
const n = Number(nStr || 200);
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
const get = () => new Promise((resolve, reject) => {
  const t0 = process.hrtime.bigint();
  http.get(url, { agent, headers: cookie ? { cookie } : {} }, (res) => {
    res.resume();
    res.on('end', () => {
      if (res.statusCode !== 200) reject(new Error(`status ${res.statusCode}`));
      else resolve(Number(process.hrtime.bigint() - t0) / 1e6);
    });
  }).on('error', reject);
});
const times = [];
for (let i = 0; i < n; i++) times.push(await get());
const first = times[0];
const sorted = [...times].sort((a, b) => a - b);
const pct = (p) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
console.log(JSON.stringify({ n, p50_ms: +pct(50).toFixed(2), p99_ms: +pct(99).toFixed(2), max_ms: +sorted.at(-1).toFixed(2), first_ms: +first.toFixed(2) }));
agent.destroy();
