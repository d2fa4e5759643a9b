// nginx.mjs — a private nginx in front of gpucloudd replicas, as a
// production load balancer would be set up (README "Replicas"): one
// upstream over the replicas, the API and the apps' hosts (*.<apps_domain>)
// on one server, Server-Sent Events unbuffered, websockets upgraded, the
// client address passed in X-Forwarded-For.  Each response says which
// replica answered (X-Upstream), so a test can see both served.
//
//   const lb = await startNginx(dir, port, [p1, p2]);   // lb.base
//   await lb.setUpstreams([p2, p3]);                      // reload
//   await lb.stop();
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync, readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export function nginxConf(dir, port, upstreams) {
  const user = process.getuid && process.getuid() === 0 ? 'user root;\n' : '';
  return `# written by tests/lib/nginx.mjs
${user}daemon off;
worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${dir}/tmp/body;
  proxy_temp_path ${dir}/tmp/proxy;
  fastcgi_temp_path ${dir}/tmp/fastcgi;
  uwsgi_temp_path ${dir}/tmp/uwsgi;
  scgi_temp_path ${dir}/tmp/scgi;
  map $http_upgrade $connection_upgrade { default upgrade; '' ''; }
  upstream gpucloud {
${upstreams.map((p) => `    server 127.0.0.1:${p} max_fails=1 fail_timeout=2s;`).join('\n')}
    keepalive 64;
  }
  server {
    listen 127.0.0.1:${port};
    server_name localhost *.localhost;
    client_max_body_size 0;
    location / {
      proxy_pass http://gpucloud;
      proxy_http_version 1.1;
      proxy_set_header Host $http_host;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_set_header X-Forwarded-Proto $scheme;
      proxy_set_header Upgrade $http_upgrade;
      proxy_set_header Connection $connection_upgrade;
      proxy_buffering off;
      proxy_request_buffering off;
      proxy_connect_timeout 1s;
      proxy_read_timeout 1h;
      proxy_send_timeout 1h;
      proxy_next_upstream error timeout http_502;
      proxy_next_upstream_tries 3;
      add_header X-Upstream $upstream_addr always;
    }
  }
}
`;
}

export async function startNginx(dir, port, upstreams) {
  mkdirSync(join(dir, 'tmp'), { recursive: true });
  const conf = join(dir, 'nginx.conf');
  writeFileSync(conf, nginxConf(dir, port, upstreams));
  const proc = spawn('nginx', ['-p', dir, '-c', conf], { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  proc.stderr.on('data', (d) => { err += d; });
  let exited = false;
  proc.on('exit', () => { exited = true; });
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 100; i++) {
    if (exited) break;
    try { await fetch(`${base}/healthz`); break; } catch { await sleep(50); }
  }
  if (exited) throw new Error(`nginx did not start: ${err}${existsSync(join(dir, 'error.log')) ? readFileSync(join(dir, 'error.log'), 'utf8') : ''}`);
  return {
    base, port, proc,
    // rewrites the upstream list and reloads (old workers finish their requests)
    async setUpstreams(list) {
      writeFileSync(conf, nginxConf(dir, port, list));
      const pid = Number(readFileSync(join(dir, 'nginx.pid'), 'utf8'));
      process.kill(pid, 'SIGHUP');
      await sleep(300);
    },
    async stop() {
      if (exited) return;
      proc.kill('SIGQUIT');
      for (let i = 0; i < 50 && !exited; i++) await sleep(50);
      if (!exited) proc.kill('SIGKILL');
    },
  };
}
