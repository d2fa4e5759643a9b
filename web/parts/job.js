// parts/job.js — a job as the list and its own page show it: the state
// badge, why it waits or how it ended (the code's sentence in the reader's
// language, the server's own words as detail), and the cancel button.
import { api } from '../api.js';
import { t, tMaybe, fromServer, formatNumber } from '../i18n.js';
import { h, toast, confirmDialog } from '../ui.js';
import { etaText } from './eta.js';

const STATE_CLASS = {
  running: 'badge-on', succeeded: 'badge-on', queued: 'badge-warn', starting: 'badge-warn',
  stopping: 'badge-warn', failed: 'badge-off', lost: 'badge-off', cancelled: '',
};

export const JOB_STATES = ['queued', 'starting', 'running', 'stopping', 'succeeded', 'failed', 'cancelled', 'lost'];
export const jobLive = (s) => ['queued', 'starting', 'running', 'stopping'].includes(s);

export function jobStateBadge(state) {
  return h('span', { class: `badge badge-state ${STATE_CLASS[state] || ''}`.trim(), 'data-state': state },
    tMaybe(`job.state.${state}`) || state);
}

// { text, detail }: the queue's reason while queued, else the end's reason.
export function jobReason(job) {
  if (job.state === 'queued' && job.request && job.request.state === 'queued') {
    const code = job.request.reason_code;
    const said = fromServer(code ? `inst.reason.${code}` : null, job.request.reason);
    const why = said.text || t('inst.waiting');
    const text = job.request.position ? t('inst.queuePosition', { reason: why, n: formatNumber(job.request.position) }) : why;
    return { text, detail: said.detail, eta: etaText(job.request) };
  }
  if (!job.reason) return { text: '', detail: '' };
  return fromServer(job.reason_code ? `job.reasonCode.${job.reason_code}` : null, job.reason);
}

export function jobResources(job) {
  const cpu = t('job.cpuCell', { cpu: (job.cpu_millis / 1000).toFixed(1), mem: formatNumber(job.mem_mib) });
  return job.slices ? `${t('job.gpuCell', { count: job.slices, n: formatNumber(job.slices), pool: job.pool || '—' })} · ${cpu}` : `${t('job.noGpu')} · ${cpu}`;
}

// The cancel button of a live job; after() runs once it was accepted.
export function cancelButton(job, after, onError) {
  if (!jobLive(job.state) || job.desired === 'cancelled') return null;
  return h('button', {
    type: 'button', class: 'btn btn-small btn-danger', 'data-action': 'cancel',
    onclick: async () => {
      const ok = await confirmDialog({ title: t('job.cancel'), message: t('job.cancelConfirm', { name: job.name }), confirmLabel: t('job.cancel'), danger: true });
      if (!ok) return;
      try {
        await api.post(`/jobs/${job.id}/cancel`);
        toast(t('job.cancelled', { name: job.name }));
        after();
      } catch (err) { onError(err); }
    },
  }, t('job.cancel'));
}
