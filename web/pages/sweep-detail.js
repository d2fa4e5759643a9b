// pages/sweep-detail.js — one sweep (#/sweep?id=N): its state and runs per
// state, what ranks its runs, and each run side by side — its
// hyperparameters, state (why it waits and when it may start, or how it
// ended) and last metrics — with the best run marked. Polled every 2 s;
// "Cancel all runs" while any run lives.
import { api } from '../api.js';
import { t, formatNumber, formatDate } from '../i18n.js';
import { h, messageBox, toast, confirmDialog } from '../ui.js';
import { poll } from '../parts/poll.js';
import { jobStateBadge, jobReason, JOB_STATES } from '../parts/job.js';
import { sweepStateBadge, sweepGoal, sweepBest, metricValue } from '../parts/sweep.js';

const POLL_MS = 2000;

const keysOf = (objs) => [...new Set(objs.flatMap((o) => Object.keys(o || {})))];

export function render(main) {
  const id = Number(new URLSearchParams(location.hash.split('?')[1] || '').get('id'));
  const msg = messageBox();
  const head = h('div', { class: 'page-head page-head-row' });
  const summary = h('dl', { class: 'props', 'data-summary': '' });
  const table = h('table', { class: 'table', 'data-table': 'runs' });
  let key = '';

  async function cancelAll(s) {
    const ok = await confirmDialog({ title: t('sweep.detail.cancelAll'), message: t('sweep.detail.cancelConfirm', { name: s.name }), confirmLabel: t('sweep.detail.cancelAll'), danger: true });
    if (!ok) return;
    try {
      await api.post(`/sweeps/${s.id}/cancel`);
      toast(t('sweep.detail.cancelled', { name: s.name }));
      poller.refresh();
    } catch (err) { msg.error(err); }
  }

  function draw(s) {
    const live = s.jobs.some((j) => ['queued', 'starting', 'running', 'stopping'].includes(j.state) && j.desired !== 'cancelled');
    head.replaceChildren(
      h('div', { class: 'page-head-text' },
        h('h1', null, h('span', { class: 'mono' }, s.name), ' ', sweepStateBadge(s.state)),
        s.cancelled_by ? h('p', { class: 'muted', 'data-field': 'cancelled-by' }, t('sweep.detail.cancelledBy', { who: s.cancelled_by })) : null),
      h('div', { class: 'toolbar' },
        live ? h('button', { type: 'button', class: 'btn btn-small btn-danger', 'data-action': 'cancel-all', onclick: () => cancelAll(s) }, t('sweep.detail.cancelAll')) : null));
    const row = (k, v) => [h('dt', null, k), h('dd', null, v)];
    summary.replaceChildren(
      ...row(t('sweep.col.runs'), h('span', { 'data-field': 'counts' }, t('sweep.runs', { count: s.runs }), ' · ',
        ...JOB_STATES.filter((k) => s.counts?.[k]).flatMap((k) => [jobStateBadge(k), ' ', formatNumber(s.counts[k]), ' ']))),
      ...row(t('sweep.detail.goal'), sweepGoal(s)),
      ...row(t('sweep.detail.best'), s.best_job_id ? sweepBest(s) : h('span', { class: 'muted' }, t('sweep.noBest', { metric: s.metric }))),
      ...row(t('sweep.col.submitted'), formatDate(s.created_at)));
    // one column per hyperparameter and per metric (the ranking one first)
    const hps = keysOf(s.jobs.map((j) => j.hyperparameters));
    const metrics = [s.metric, ...keysOf(s.jobs.map((j) => j.last_metrics)).filter((m) => m !== s.metric)];
    table.replaceChildren(
      h('thead', null,
        h('tr', null,
          h('th', { scope: 'col' }, t('sweep.detail.run')),
          h('th', { scope: 'col' }, t('job.col.state')),
          ...hps.map((k) => h('th', { scope: 'col', class: 'mono', 'data-hp': k }, k)),
          ...metrics.map((m) => h('th', { scope: 'col', class: 'mono num', 'data-metric': m }, m)))),
      h('tbody', null, ...s.jobs.map((j) => {
        const why = jobReason(j);
        return h('tr', { 'data-run': j.name, 'data-id': j.id, 'data-state': j.state, class: j.best ? 'row-best' : null, 'data-best': j.best ? 'true' : null },
          h('td', null,
            h('a', { href: `#/job?id=${j.id}`, class: 'mono' }, j.name),
            j.best ? h('span', { class: 'badge badge-on badge-best', 'data-field': 'best-badge' }, '★ ', t('sweep.detail.bestBadge')) : null),
          h('td', null, jobStateBadge(j.state),
            why.text ? h('div', { class: 'cell-sub', title: why.detail || null }, why.text) : null,
            why.eta ? h('div', { class: 'cell-sub muted', 'data-field': 'eta' }, why.eta) : null),
          ...hps.map((k) => h('td', { class: 'mono', 'data-hp': k }, k in (j.hyperparameters || {}) ? String(j.hyperparameters[k]) : '—')),
          ...metrics.map((m) => h('td', { class: `mono num${m === s.metric ? ' metric-main' : ''}`, 'data-metric': m }, metricValue(j.last_metrics?.[m]))));
      })));
  }

  function show(s) {
    const k = JSON.stringify(s);
    if (k !== key) { key = k; draw(s); }
    msg.clear();
  }

  function fail(err) {
    if (err.status === 404) { head.replaceChildren(h('h1', null, t('sweep.detail.gone'))); poller?.stop(); }
    msg.error(err);
  }

  main.append(h('section', { class: 'page', 'data-sweep-page': id },
    h('p', null, h('a', { href: '#/sweeps' }, t('sweep.back'))),
    head, msg.el,
    h('section', { class: 'card' }, summary),
    h('section', { class: 'card card-flush sweep-runs' },
      h('div', { class: 'card-toolbar' }, h('h2', null, t('sweep.detail.runs')), h('span', { class: 'muted' }, t('sweep.detail.live'))),
      h('div', { class: 'table-wrap' }, table))));
  let poller = null;
  if (!Number.isInteger(id) || id < 1) { head.replaceChildren(h('h1', null, t('sweep.detail.gone'))); return; }
  poller = poll(() => api.get(`/sweeps/${id}`), POLL_MS, { until: main, show, fail });
}
