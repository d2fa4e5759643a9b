// parts/instance.js — an instance as the list and its own page show it:
// the state badge, why it waits or stopped, and the actions that fit its
// state (start, stop, delete), each ending in a toast.
import { api } from '../api.js';
import { t, tMaybe, fromServer, formatNumber } from '../i18n.js';
import { h, toast, confirmDialog } from '../ui.js';
import { etaText } from './eta.js';

const STATE_CLASS = {
  running: 'badge-on', queued: 'badge-warn', pulling: 'badge-warn', creating: 'badge-warn',
  stopping: 'badge-warn', stopped: 'badge-off', failed: 'badge-warn', lost: 'badge-warn',
};

export function instanceStateBadge(state) {
  return h('span', { class: `badge badge-state ${STATE_CLASS[state] || ''}`.trim(), 'data-state': state },
    tMaybe(`inst.state.${state}`) || state);
}

// What a queued instance waits for, or why it stopped or failed:
// { text, detail }. The queue's reason code (quota, capacity, too_big, ...)
// is translated; the server's English sentence, which names the pool and the
// numbers, is the detail (see fromServer). A stop reason has no code and is
// shown as the server wrote it.
export function waitInfo(inst) {
  if (inst.state === 'queued' && inst.request && inst.request.state === 'queued') {
    const code = inst.request.reason_code;
    const said = fromServer(code ? `inst.reason.${code}` : null, inst.request.reason);
    const why = said.text || t('inst.waiting');
    const text = inst.request.position ? t('inst.queuePosition', { reason: why, n: formatNumber(inst.request.position) }) : why;
    return { text, detail: said.detail, eta: etaText(inst.request) };
  }
  if (['stopped', 'failed', 'lost', 'stopping'].includes(inst.state) && inst.reason) return { text: inst.reason, detail: '' };
  return { text: '', detail: '' };
}


const startable = (s) => ['stopped', 'failed', 'lost'].includes(s);
const stoppable = (s) => ['queued', 'pulling', 'creating', 'running'].includes(s);

// Runs an action on an instance; a toast says what happened.
export async function instanceAction(inst, action) {
  if (action === 'delete') {
    const ok = await confirmDialog({
      title: t('inst.deleteTitle'), message: t('inst.deleteMessage', { name: inst.name }),
      confirmLabel: t('inst.delete'), danger: true,
    });
    if (!ok) return false;
    await api.del(`/instances/${inst.id}`);
    toast(t('inst.deleting', { name: inst.name }));
    return true;
  }
  await api.post(`/instances/${inst.id}/${action}`);
  toast(t(`inst.did.${action}`, { name: inst.name }));
  return true;
}

export function actionButtons(inst, after, onError) {
  const run = (action) => async () => {
    try { if (await instanceAction(inst, action)) after(); } catch (err) { onError(err); }
  };
  return [
    startable(inst.state) ? h('button', { type: 'button', class: 'btn btn-small btn-primary', 'data-action': 'start', onclick: run('start') }, t('inst.start')) : null,
    stoppable(inst.state) ? h('button', { type: 'button', class: 'btn btn-small', 'data-action': 'stop', onclick: run('stop') }, t('inst.stop')) : null,
    h('button', { type: 'button', class: 'btn btn-small btn-danger-outline', 'data-action': 'delete', onclick: run('delete') }, t('inst.delete')),
  ];
}
