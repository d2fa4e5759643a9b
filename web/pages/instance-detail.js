// pages/instance-detail.js — one instance (#/instance?id=N): state (polled),
// why it waits or stopped, the idle warning, actions (start, stop, restart,
// delete, save as image, open its apps), its facts (image, node, GPUs,
// resources, ports), usage charts (CPU and memory from the engine's stats,
// sampled every 2 s while it runs; GPU use where the node can report it) and
// its log, followed live while the container runs.
import { api } from '../api.js';
import { t, formatNumber, formatBytes, formatDate } from '../i18n.js';
import { h, field, messageBox, busy, openDialog, toast } from '../ui.js';
import { routeButtons } from '../parts/route-buttons.js';
import { instanceStateBadge, waitInfo, actionButtons } from '../parts/instance.js';
import { poll } from '../parts/poll.js';

const POLL_MS = 2000;
const SAMPLES = 60;
const SVG = 'http://www.w3.org/2000/svg';

function svg(tag, attrs) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  return el;
}

// A small line chart of values in [0, max] (SVG, no style attributes: the
// page's CSP refuses them).
function chart(name, label) {
  const W = 300, H = 80;
  const line = svg('polyline', { fill: 'none', stroke: 'currentColor', 'stroke-width': 2, points: '' });
  const box = svg('svg', { viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: 'img', 'aria-label': label, 'data-chart': name });
  box.append(svg('rect', { x: 0, y: 0, width: W, height: H, fill: 'none', stroke: '#ccc' }), line);
  const now = h('span', { class: 'mono', 'data-now': name }, '—');
  const el = h('figure', { class: 'card-section' }, h('figcaption', null, label, ': ', now), box);
  return {
    el,
    draw(values, max, text) {
      const m = Math.max(max, 1e-9);
      line.setAttribute('points', values.map((v, i) => `${(i * W) / (SAMPLES - 1)},${H - (Math.min(v, m) / m) * (H - 4) - 2}`).join(' '));
      line.dataset.samples = String(values.length);
      now.textContent = text;
    },
  };
}

function saveDialog(inst) {
  return openDialog({
    title: t('inst.save.title'),
    build(close) {
      const msg = messageBox();
      const name = h('input', { type: 'text', required: true, maxlength: 63, 'data-field': 'image-name', value: inst.name });
      const tag = h('input', { type: 'text', maxlength: 128, 'data-field': 'image-tag', value: 'latest' });
      const form = h('form', { class: 'form' },
        h('p', { class: 'muted' }, t('inst.save.intro')),
        field(t('inst.save.name'), name), field(t('inst.save.tag'), tag), msg.el,
        h('div', { class: 'actions' },
          h('button', { type: 'button', class: 'btn', onclick: () => close(null) }, t('common.cancel')),
          h('button', { type: 'submit', class: 'btn btn-primary', 'data-action': 'save-image' }, t('inst.save.button'))));
      form.addEventListener('submit', (e) => {
        e.preventDefault();
        busy(form, async () => {
          try {
            const r = await api.post(`/instances/${inst.id}/save`, { name: name.value, tag: tag.value || 'latest' });
            toast(t('inst.save.done', { ref: r.reference }));
            close(r);
          } catch (err) { msg.error(err); }
        });
      });
      return [form];
    },
  });
}

export function render(main) {
  const id = Number(new URLSearchParams(location.hash.split('?')[1] || '').get('id'));
  const msg = messageBox();
  const head = h('div', { class: 'page-head page-head-row' });
  const facts = h('dl', { class: 'props', 'data-facts': '' });
  const cpuChart = chart('cpu', t('inst.detail.cpu'));
  const memChart = chart('memory', t('inst.detail.memory'));
  const gpuNote = h('p', { class: 'muted', 'data-field': 'gpu-note' });
  const logBox = h('pre', { class: 'code-sample', 'data-log': '', 'aria-live': 'off', tabindex: 0 });
  const logState = h('p', { class: 'muted', 'data-log-state': '' });
  const cpuVals = [], memVals = [];
  let inst = null;
  let key = '';
  let follow = null; // AbortController of the log stream
  let logShown = false;

  const gone = () => !main.isConnected;

  function drawHead() {
    const why = waitInfo(inst);
    head.replaceChildren(
      h('div', { class: 'page-head-text' },
        h('h1', null, h('span', { class: 'mono' }, inst.name), ' ', instanceStateBadge(inst.state)),
        why.text ? h('p', { 'data-field': 'why', title: why.detail || null }, why.text,
          why.detail ? h('span', { class: 'msg-detail muted', 'data-field': 'why-detail', lang: 'en' }, why.detail) : null) : null,
        why.eta ? h('p', { class: 'muted', 'data-field': 'eta' }, why.eta) : null,
        inst.idle_warning_at ? h('p', { class: 'callout warning', 'data-field': 'idle-warning' }, inst.idle_message || t('inst.idleWarned')) : null),
      h('div', { class: 'toolbar' },
        routeButtons(inst),
        inst.state === 'running' ? h('button', { type: 'button', class: 'btn btn-small', 'data-action': 'restart', onclick: () => act('restart') }, t('inst.restart')) : null,
        ['stopped', 'running'].includes(inst.state) ? h('button', { type: 'button', class: 'btn btn-small', 'data-action': 'save', onclick: () => saveDialog(inst) }, t('inst.save.open')) : null,
        actionButtons(inst, load, (e) => msg.error(e))));
    const row = (k, v) => [h('dt', null, t(`inst.detail.${k}`)), h('dd', { 'data-fact': k }, v)];
    facts.replaceChildren(
      ...row('image', h('span', { class: 'mono' }, inst.image || '—')),
      ...row('node', inst.node || '—'),
      ...row('gpus', inst.gpus.length ? inst.gpus.map((g) => `${g.model} #${g.index}`).join(', ') : (inst.slices ? t('inst.gpuCell', { n: inst.slices, pool: inst.pool }) : t('inst.noGpu'))),
      ...row('resources', t('inst.detail.resourcesText', { cpu: (inst.cpu_millis / 1000).toFixed(1), mem: formatNumber(inst.mem_mib), shm: formatNumber(inst.shm_mib) })),
      ...row('ports', inst.ports.length ? inst.ports.map((p) => `${p.name} ${p.port} → ${p.host}:${p.host_port}`).join(', ') : '—'),
      ...row('created', formatDate(inst.created_at)),
      ...row('started', inst.started_at ? formatDate(inst.started_at) : '—'));
  }

  async function act(action) {
    try { await api.post(`/instances/${inst.id}/${action}`); toast(t(`inst.did.${action}`, { name: inst.name })); load(); } catch (err) { msg.error(err); }
  }

  function show(got) {
    const was = inst?.state;
    inst = got;
    const k = JSON.stringify(got);
    if (k !== key) { key = k; drawHead(); }
    msg.clear();
    if (inst.state === 'running' && (!follow || was !== 'running')) startLog();
    else if (!logShown && inst.state !== 'running' && inst.container_name && inst.node) startLog(false);
    if (inst.state === 'running') sample();
  }

  function fail(err) {
    if (err.status === 404) { head.replaceChildren(h('h1', null, t('inst.detail.gone'))); stop(); }
    msg.error(err);
  }

  async function sample() {
    try {
      const s = await api.get(`/instances/${id}/stats`);
      if (gone()) return;
      cpuVals.push(s.cpu_percent ?? 0);
      memVals.push(s.memory_bytes || 0);
      while (cpuVals.length > SAMPLES) cpuVals.shift();
      while (memVals.length > SAMPLES) memVals.shift();
      cpuChart.draw(cpuVals, Math.max(100, ...cpuVals), s.cpu_percent === null ? '—' : `${s.cpu_percent.toFixed(1)} %`);
      memChart.draw(memVals, s.memory_limit_bytes || Math.max(...memVals), `${formatBytes(s.memory_bytes || 0)} / ${formatBytes(s.memory_limit_bytes || 0)}`);
      gpuNote.textContent = s.gpu_utilization_percent === null ? t('inst.detail.gpuUnavailable') : t('inst.detail.gpuUse', { n: s.gpu_utilization_percent });
    } catch { /* the next sample may work */ }
  }

  // Streams the log (tail, then follow) into the <pre>, until the
  // container stops or the page goes.
  async function startLog(live = true) {
    if (follow) follow.abort();
    const ctl = new AbortController();
    follow = ctl;
    logShown = true;
    logState.textContent = live ? t('inst.detail.following') : '';
    try {
      const res = await fetch(`/api/v1/instances/${id}/logs?tail=500${live ? '&follow=1' : ''}`, { credentials: 'same-origin', signal: ctl.signal, cache: 'no-store' });
      if (!res.ok) throw new Error(String(res.status));
      logBox.textContent = '';
      const reader = res.body.getReader();
      const dec = new TextDecoder();
      for (;;) {
        const { value, done } = await reader.read();
        if (done || gone()) break;
        logBox.append(dec.decode(value, { stream: true }));
        if (logBox.textContent.length > 200000) logBox.textContent = logBox.textContent.slice(-150000);
        logBox.scrollTop = logBox.scrollHeight;
      }
      if (follow === ctl && live) logState.textContent = t('inst.detail.logEnded');
    } catch {
      if (follow === ctl && !ctl.signal.aborted) logState.textContent = t('inst.detail.logUnavailable');
    } finally {
      if (follow === ctl) follow = null;
    }
  }

  // Leaving the page (or the instance gone) ends the polling and the log.
  let poller = null;
  const load = () => poller?.refresh();
  const stop = () => poller?.stop();
  const stopped = () => { if (follow) follow.abort(); };

  main.append(h('section', { class: 'page', 'data-instance-page': id },
    h('p', null, h('a', { href: '#/instances' }, t('inst.back'))),
    head, msg.el,
    h('div', { class: 'grid' },
      h('section', { class: 'card' }, h('h2', null, t('inst.detail.facts')), facts),
      h('section', { class: 'card' }, h('h2', null, t('inst.detail.usage')), cpuChart.el, memChart.el, gpuNote)),
    h('section', { class: 'card' },
      h('div', { class: 'page-head-row' }, h('h2', null, t('inst.detail.log')),
        h('button', { type: 'button', class: 'btn btn-small', 'data-action': 'reload-log', onclick: () => startLog(inst?.state === 'running') }, t('inst.detail.reloadLog'))),
      logState, logBox)));
  if (!Number.isInteger(id) || id < 1) { head.replaceChildren(h('h1', null, t('inst.detail.gone'))); return; }
  poller = poll(() => api.get(`/instances/${id}`), POLL_MS, { until: main, show, fail, stopped });
}
