// smtp_sink.mjs — starts tests/lib/smtp_sink.py (an aiosmtpd sink) on a free
// port and reads what it received: sink.mails() → [{from, rcpt, raw,
// headers: {lower-case name: [values]}, subject (RFC 2047 decoded), body
// (base64 decoded)}], oldest first.
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = dirname(fileURLToPath(import.meta.url));

function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
    s.on('error', reject);
  });
}

// "=?UTF-8?B?...?=" words (folded) → text.
export function decodeWords(v) {
  return v.replace(/\r?\n[ \t]/g, ' ').replace(/=\?UTF-8\?B\?([A-Za-z0-9+/=]*)\?=\s*(?==\?UTF-8\?B\?)/g, '=?UTF-8?B?$1?=')
    .replace(/=\?UTF-8\?B\?([A-Za-z0-9+/=]*)\?=/g, (m, b) => Buffer.from(b, 'base64').toString('utf8'));
}

export function parseMail(raw) {
  const text = raw.toString('latin1');
  const at = text.indexOf('\r\n\r\n');
  const head = text.slice(0, at), bodyRaw = text.slice(at + 4);
  const headers = {};
  // unfold, then one header per line
  for (const line of head.replace(/\r\n[ \t]/g, ' ').split('\r\n')) {
    const i = line.indexOf(':');
    const k = line.slice(0, i).toLowerCase();
    (headers[k] ||= []).push(line.slice(i + 1).trim());
  }
  const subject = decodeWords((headers.subject || [''])[0].replace(/\?= =\?/g, '?==?'));
  const body = /base64/i.test((headers['content-transfer-encoding'] || [''])[0])
    ? Buffer.from(bodyRaw.replace(/\s+/g, ''), 'base64').toString('utf8') : bodyRaw;
  return { raw: text, head, headers, subject, body };
}

export async function startSink({ failFirst = 0 } = {}) {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'gcsmtp-'));
  const proc = spawn('/usr/bin/python3', [join(HERE, 'smtp_sink.py'), String(port), dir, String(failFirst)],
    { stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise((resolve, reject) => {
    proc.stdout.on('data', (d) => { if (String(d).includes('ready')) resolve(); });
    proc.on('exit', (c) => reject(new Error(`smtp sink exited ${c}`)));
  });
  return {
    port, dir, url: `smtp://127.0.0.1:${port}`,
    mails() {
      return readdirSync(dir).filter((f) => f.endsWith('.eml')).sort().map((f) => {
        const env = JSON.parse(readFileSync(join(dir, f.replace('.eml', '.json')), 'utf8'));
        return { ...env, ...parseMail(readFileSync(join(dir, f))) };
      });
    },
    stop() { proc.kill(); },
  };
}
