// pages/job-detail.js — one job (#/job?id=N): its state (polled), why it
// waits or how it ended (reason, exit code), cancel while it lives, its
// facts (image, command, hyperparameters, node, GPUs, resources, directory,
// timestamps) and the tail of its log: followed live (Server-Sent Events,
// which resume by themselves after a dropped connection) while the job
// lives, read once when it has ended (the log is read from the job
// directory, so it is there after the container is gone).
import { api } from '../api.js';
import { t, formatNumber, formatDate } from '../i18n.js';
import { h, messageBox } from '../ui.js';
import { poll } from '../parts/poll.js';
import { jobStateBadge, jobReason, jobResources, jobLive, cancelButton } from '../parts/job.js';
import { jobOutputs } from '../parts/job-outputs.js';

const POLL_MS = 2000;
const TAIL = 500;

export function render(main) {
  const id = Number(new URLSearchParams(location.hash.split('?')[1] || '').get('id'));
  const msg = messageBox();
  const head = h('div', { class: 'page-head page-head-row' });
  const facts = h('dl', { class: 'props', 'data-facts': '' });
  const logBox = h('pre', { class: 'code-sample', 'data-log': '', 'aria-live': 'off', tabindex: 0 });
  const logState = h('p', { class: 'muted', 'data-log-state': '' });
  let job = null;
  let key = '';
  let lastLogState = '';
  let es = null; // the live log (EventSource) while the job lives
  const MAX_LOG = 200000;

  function draw() {
    const why = jobReason(job);
    head.replaceChildren(
      h('div', { class: 'page-head-text' },
        h('h1', null, h('span', { class: 'mono' }, job.name), ' ', jobStateBadge(job.state)),
        why.text ? h('p', { 'data-field': 'reason' }, why.text,
          why.detail ? h('span', { class: 'msg-detail muted', 'data-field': 'reason-detail', lang: 'en' }, why.detail) : null) : null),
      h('div', { class: 'toolbar' }, cancelButton(job, () => poller?.refresh(), (e) => msg.error(e))));
    const row = (k, v) => [h('dt', null, t(`job.detail.${k}`)), h('dd', { 'data-fact': k }, v)];
    facts.replaceChildren(
      ...row('image', h('span', { class: 'mono' }, job.image || '—')),
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
    lastLogState = job.state;
  }

  function fail(err) {
    if (err.status === 404) { head.replaceChildren(h('h1', null, t('job.detail.gone'))); poller?.stop(); }
    msg.error(err);
  }

  main.append(h('section', { class: 'page', 'data-job-page': id },
    h('p', null, h('a', { href: '#/jobs' }, t('job.back'))),
    head, msg.el,
    h('section', { class: 'card' }, h('h2', null, t('job.detail.facts')), facts),
    h('section', { class: 'card' },
      h('div', { class: 'page-head-row' }, h('h2', null, t('job.detail.log')),
        h('button', { type: 'button', class: 'btn btn-small', 'data-action': 'reload-log', onclick: () => { if (!es) loadLog(); } }, t('job.detail.reloadLog'))),
      logState, logBox)));
  let poller = null;
  if (!Number.isInteger(id) || id < 1) { head.replaceChildren(h('h1', null, t('job.detail.gone'))); return; }
  poller = poll(() => api.get(`/jobs/${id}`), POLL_MS, { until: main, show, fail, stopped: stopFollow });
  const outputs = jobOutputs(id); main.querySelector('[data-job-page]').append(outputs.el); outputs.refresh();
}
