// pages/terminal.js — a shell in a running instance: xterm.js (served from
// web/vendor/, copied from npm by deploy/deps.sh) over the terminal
// websocket GET /api/v1/instances/{id}/terminal.  Text frames carry the
// keys typed, binary frames the terminal's output; a binary frame from here
// is a resize ({"cols","rows"}).
import { t } from '../i18n.js';
import { h } from '../ui.js';

const loaded = new Map();

// xterm.js is a UMD bundle: loaded once as a classic script, it defines
// globalThis.Terminal (and FitAddon).
function loadScript(src) {
  if (!loaded.has(src)) {
    loaded.set(src, new Promise((resolve, reject) => {
      const s = h('script', { src });
      s.addEventListener('load', resolve);
      s.addEventListener('error', () => reject(new Error(`cannot load ${src}`)));
      document.head.append(s);
    }));
  }
  return loaded.get(src);
}

function loadCss(href) {
  if (!document.querySelector(`link[href="${href}"]`)) document.head.append(h('link', { rel: 'stylesheet', href }));
}

export function instanceFromHash() {
  const q = new URLSearchParams(location.hash.split('?')[1] || '');
  const id = q.get('instance') || '';
  return /^[1-9]\d{0,17}$/.test(id) ? id : null;
}

export async function render(main) {
  const id = instanceFromHash();
  const status = h('p', { class: 'msg', role: 'status', 'data-terminal-status': 'connecting' }, t('terminal.connecting'));
  const box = h('div', { class: 'terminal-box', 'data-terminal': '' });
  box.style.height = '70vh'; // CSSOM: the page's CSP refuses style attributes
  main.append(h('section', { class: 'page page-terminal' },
    h('h1', null, id ? t('terminal.title', { id }) : t('terminal.titleNone')), status, box));
  if (!id) {
    status.textContent = t('terminal.noInstance');
    status.dataset.terminalStatus = 'error';
    return;
  }
  try {
    loadCss('vendor/xterm.css');
    loadCss('pages/terminal.css');
    await loadScript('vendor/xterm.js');
    await loadScript('vendor/addon-fit.js');
  } catch (e) {
    status.textContent = e.message;
    status.dataset.terminalStatus = 'error';
    return;
  }
  const term = new globalThis.Terminal({ cursorBlink: true, fontSize: 14, scrollback: 5000 });
  const fit = new globalThis.FitAddon.FitAddon();
  term.loadAddon(fit);
  term.open(box);
  try { fit.fit(); } catch { /* not laid out yet */ }
  const ws = new WebSocket(`${location.protocol === 'https:' ? 'wss:' : 'ws:'}//${location.host}/api/v1/instances/${id}/terminal`);
  ws.binaryType = 'arraybuffer';
  const enc = new TextEncoder();
  const sendSize = () => {
    if (ws.readyState === WebSocket.OPEN) ws.send(enc.encode(JSON.stringify({ cols: term.cols, rows: term.rows })));
  };
  ws.addEventListener('open', () => {
    status.textContent = t('terminal.connected');
    status.dataset.terminalStatus = 'open';
    sendSize();
    term.focus();
  });
  ws.addEventListener('message', (e) => term.write(new Uint8Array(e.data)));
  ws.addEventListener('close', (e) => {
    status.textContent = e.code === 1006 ? t('terminal.failed') : t('terminal.closed', { reason: e.reason || String(e.code) });
    status.dataset.terminalStatus = 'closed';
  });
  term.onData((d) => { if (ws.readyState === WebSocket.OPEN) ws.send(d); });
  term.onResize(sendSize);
  const onResize = () => { try { fit.fit(); } catch { /* hidden */ } };
  window.addEventListener('resize', onResize);
  // leaving the page ends the shell
  window.addEventListener('hashchange', () => {
    window.removeEventListener('resize', onResize);
    ws.close();
    term.dispose();
  }, { once: true });
}
