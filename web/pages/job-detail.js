// pages/job-detail.js — one job (#/job?id=N): its state (polled), why it
// waits or how it ended (reason, exit code), cancel while it lives, its
// facts (image, command, hyperparameters, node, GPUs, resources, directory,
// timestamps) and the tail of its log: followed live (Server-Sent Events,
// which resume by themselves after a dropped connection) while the job
// lives, read once when it has ended (the log is read from the job
// directory, so it is there after the container is gone). Below, its
// metrics: one chart per scalar it reported (GPUCLOUD_METRIC lines or
// metrics.jsonl), growing while it runs (polled with after_step), and its
// CPU and memory use.
import { api } from '../api.js';
import { t, formatNumber, formatDate, formatBytes, getLanguage } from '../i18n.js';
import { h, messageBox } from '../ui.js';
import { poll } from '../parts/poll.js';
import { jobStateBadge, jobReason, jobResources, jobLive, cancelButton } from '../parts/job.js';
import { lineChart } from '../parts/chart.js';
import { jobMembers } from '../parts/job-members.js';
import { jobOutputs } from '../parts/job-outputs.js';

const POLL_MS = 2000;
const TAIL = 500;
const METRICS_MS = 2500;
const MAX_CLIENT_POINTS = 4000; // per series; beyond, read again thinned

// The metrics section: a chart per series and the usage charts, kept up to
// date by polling GET /jobs/{id}/metrics (only later steps after the first
// read) while the job lives, and once more after it ended.
function metricsSection(main, id, stateOf) {
  const series = new Map(); // name -> [[step, value], ...]
  const charts = new Map(); // name -> chart
  const grid = h('div', { class: 'chart-grid-list', 'data-metric-charts': '' });
  const hint = h('p', { class: 'muted metrics-hint', 'data-metrics-empty': '' },
    t('job.metrics.emptyBefore'), ' ', h('code', null, 'GPUCLOUD_METRIC {"step": 1, "loss": 0.5}'), ' ',
    t('job.metrics.emptyAfter'), ' ', h('code', null, 'metrics.jsonl'), '.');
  const fmtTime = (ms) => new Date(ms).toLocaleTimeString(getLanguage(), { hour: '2-digit', minute: '2-digit', second: '2-digit', hour12: false });
  const cpu = lineChart({ title: t('job.metrics.cpu'), formatX: fmtTime, formatY: (v) => `${Number(v.toPrecision(3))}%`, empty: t('job.metrics.noUsage') });
  // memory in MiB, so the ticks fall on round binary sizes
  const mem = lineChart({ title: t('job.metrics.memory'), formatX: fmtTime, formatY: (v) => formatBytes(v * 1048576), empty: t('job.metrics.noUsage') });
  const el = h('section', { class: 'card', 'data-metrics': '' },
    h('h2', null, t('job.metrics.title')), hint, grid,
    h('h3', null, t('job.metrics.usage')),
    h('div', { class: 'chart-grid-list', 'data-usage-charts': '' }, cpu.el, mem.el),
    h('p', { class: 'muted', 'data-gpu-usage': '' }, t('job.metrics.gpuNotMeasurable')));
  let full = true; // the next read is a whole one (the first, or a new series)
  let afterEnd = 0;
  let timer = null;

  function lastStep() {
    let m = Infinity;
    for (const pts of series.values()) if (pts.length) m = Math.min(m, pts.at(-1)[0]);
    return m === Infinity ? -1 : m;
  }

  function draw(names) {
    hint.hidden = names.length > 0;
    for (const name of names) {
      if (!charts.has(name)) {
        const c = lineChart({ title: name, xLabel: t('job.metrics.step') });
        charts.set(name, c);
        grid.append(c.el);
      }
      charts.get(name).update([{ name, points: series.get(name) || [] }]);
    }
  }

  async function load() {
    timer = null;
    if (!main.isConnected) return;
    try {
      const after = full ? -1 : lastStep();
      const r = await api.get(`/jobs/${id}/metrics?after_step=${after}`);
      if (!main.isConnected) return;
      if (full) series.clear();
      for (const [name, pts] of Object.entries(r.series)) {
        const have = series.get(name) || [];
        const last = have.length ? have.at(-1)[0] : -1;
        for (const [step, value] of pts) if (step > last) have.push([step, value]);
        series.set(name, have);
      }
      // a series the client has not seen, or one grown past what the page
      // keeps: read everything (thinned by the server) next time
      full = r.names.some((n) => !series.has(n)) || [...series.values()].some((p) => p.length > MAX_CLIENT_POINTS);
      draw(r.names);
      const samples = r.usage.samples;
      cpu.update([{ name: t('job.metrics.cpu'), points: samples.filter((s) => s[1] !== null).map((s) => [Date.parse(s[0]), s[1]]) }]);
      mem.update([{ name: t('job.metrics.memory'), points: samples.filter((s) => s[2] !== null).map((s) => [Date.parse(s[0]), s[2] / 1048576]) }]);
    } catch { /* the next poll tries again */ }
    const live = jobLive(stateOf());
    if (!live) afterEnd++;
    // the collector reads an ended job's last lines a moment later
    if (live || afterEnd <= 3) timer = setTimeout(load, METRICS_MS);
  }

  return {
    el,
    start() { if (!timer) load(); },
    wake() { if (!timer && jobLive(stateOf())) { afterEnd = 0; load(); } },
  };
}

export function render(main) {
  const id = Number(new URLSearchParams(location.hash.split('?')[1] || '').get('id'));
  const msg = messageBox();
  const head = h('div', { class: 'page-head page-head-row' });
  const facts = h('dl', { class: 'props', 'data-facts': '' });
  const logBox = h('pre', { class: 'code-sample', 'data-log': '', 'aria-live': 'off', tabindex: 0 });
  const logState = h('p', { class: 'muted', 'data-log-state': '' });
  const membersBox = h('div', { 'data-members-box': '' });
  let job = null;
  let key = '';
  let lastLogState = '';
  let es = null; // the live log (EventSource) while the job lives
  const MAX_LOG = 200000;
  const metrics = metricsSection(main, id, () => job?.state);
  const outputs = jobOutputs(id);

  function draw() {
    const why = jobReason(job);
    head.replaceChildren(
      h('div', { class: 'page-head-text' },
        h('h1', null, h('span', { class: 'mono' }, job.name), ' ', jobStateBadge(job.state)),
        why.text ? h('p', { 'data-field': 'reason' }, why.text,
          why.detail ? h('span', { class: 'msg-detail muted', 'data-field': 'reason-detail', lang: 'en' }, why.detail) : null) : null,
        why.eta ? h('p', { class: 'muted', 'data-field': 'eta' }, why.eta) : null),
      h('div', { class: 'toolbar' }, cancelButton(job, () => poller?.refresh(), (e) => msg.error(e))));
    const row = (k, v) => [h('dt', null, t(`job.detail.${k}`)), h('dd', { 'data-fact': k }, v)];
    facts.replaceChildren(
      ...(job.sweep_id ? [h('dt', null, t('sweep.detail.title')), h('dd', { 'data-fact': 'sweep' }, h('a', { href: `#/sweep?id=${job.sweep_id}` }, `#${job.sweep_id}`))] : []),
      ...row('image', h('span', { class: 'mono' }, job.image || '—')),
      ...(job.template ? row('template', job.template_title || job.template) : []),
      ...row('command', h('code', null, job.command.join(' '))),
      ...row('hyperparameters', h('code', null, JSON.stringify(job.hyperparameters))),
      ...row('exitCode', job.exit_code === null ? '—' : formatNumber(job.exit_code)),
      ...row('node', job.node || '—'),
      ...row('gpus', job.gpus.length ? job.gpus.map((g) => `${g.model} #${g.index}`).join(', ') : '—'),
      ...row('resources', jobResources(job)),
      ...row('directory', h('a', { class: 'mono', href: `#/files?${new URLSearchParams({ area: 'home', path: job.directory })}` }, `~/${job.directory}`)),
      ...row('maxRuntime', t('job.detail.seconds', { n: formatNumber(job.max_runtime_s) })),
      ...row('submitted', formatDate(job.created_at)),
      ...row('started', job.started_at ? formatDate(job.started_at) : '—'),
      ...row('finished', job.finished_at ? formatDate(job.finished_at) : '—'));
    membersBox.replaceChildren(...[jobMembers(job)].filter(Boolean));
  }

  async function loadLog() {
    try {
      const res = await fetch(`/api/v1/jobs/${id}/logs?tail=${TAIL}`, { credentials: 'same-origin', cache: 'no-store' });
      if (!res.ok || !main.isConnected) return;
      const text = await res.text();
      const atEnd = logBox.scrollTop + logBox.clientHeight >= logBox.scrollHeight - 4;
      if (logBox.textContent !== text) logBox.textContent = text;
      if (atEnd) logBox.scrollTop = logBox.scrollHeight;
      logState.textContent = !text ? t('job.detail.logEmpty') : jobLive(job?.state) ? t('job.detail.logLive') : '';
    } catch { /* the next poll tries again */ }
  }

  function follow() {
    if (es) return;
    logBox.textContent = '';
    logState.textContent = t('job.detail.logLive');
    es = new EventSource(`/api/v1/jobs/${id}/logs?follow=1&tail=${TAIL}`);
    es.onmessage = (e) => {
      if (!main.isConnected) { stopFollow(); return; }
      const atEnd = logBox.scrollTop + logBox.clientHeight >= logBox.scrollHeight - 4;
      logBox.append(`${e.data}\n`);
      if (logBox.textContent.length > MAX_LOG) logBox.textContent = logBox.textContent.slice(-MAX_LOG / 2);
      if (atEnd) logBox.scrollTop = logBox.scrollHeight;
    };
    es.addEventListener('end', () => {
      stopFollow();
      logState.textContent = logBox.textContent ? '' : t('job.detail.logEmpty');
    });
  }

  function stopFollow() {
    if (es) es.close();
    es = null;
  }

  function show(got) {
    job = got;
    const k = JSON.stringify(got);
    if (k !== key) { key = k; draw(); }
    msg.clear();
    // followed while it lives; an ended job's log is read once
    if (jobLive(job.state)) follow();
    else if (!es && lastLogState !== job.state) loadLog();
    // what the job wrote shows as its state moves on (a checkpoint at its end)
    if (lastLogState && lastLogState !== job.state) outputs.refresh();
    lastLogState = job.state;
    metrics.start();
    metrics.wake();
  }

  function fail(err) {
    if (err.status === 404) { head.replaceChildren(h('h1', null, t('job.detail.gone'))); poller?.stop(); }
    msg.error(err);
  }

  main.append(h('section', { class: 'page', 'data-job-page': id },
    h('p', null, h('a', { href: '#/jobs' }, t('job.back'))),
    head, msg.el,
    h('section', { class: 'card' }, h('h2', null, t('job.detail.facts')), facts),
    membersBox,
    metrics.el,
    h('section', { class: 'card' },
      h('div', { class: 'page-head-row' }, h('h2', null, t('job.detail.log')),
        h('button', { type: 'button', class: 'btn btn-small', 'data-action': 'reload-log', onclick: () => { if (!es) loadLog(); } }, t('job.detail.reloadLog'))),
      logState, logBox),
    outputs.el));
  let poller = null;
  if (!Number.isInteger(id) || id < 1) { head.replaceChildren(h('h1', null, t('job.detail.gone'))); return; }
  outputs.refresh();
  poller = poll(() => api.get(`/jobs/${id}`), POLL_MS, { until: main, show, fail, stopped: stopFollow });
}
