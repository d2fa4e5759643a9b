// parts/job-members.js — a distributed job's members on its page: one row
// per rank with its node, its address on the job's network (rank 0's is
// MASTER_ADDR), its state, exit code and reason, and a link to its log.
// jobMembers(job) is null for a job of one member.
import { t, tMaybe, fromServer, formatNumber } from '../i18n.js';
import { h } from '../ui.js';

const STATE_CLASS = {
  running: 'badge-on', succeeded: 'badge-on', queued: 'badge-warn', starting: 'badge-warn',
  failed: 'badge-off', lost: 'badge-off', stopped: '',
};

function memberState(state) {
  return h('span', { class: `badge badge-state ${STATE_CLASS[state] || ''}`.trim(), 'data-state': state },
    tMaybe(`jobMembers.state.${state}`) || state);
}

function memberReason(m) {
  if (!m.reason) return '—';
  // "rank 1: exited with code 137" on a stopped member: the peer that stopped it
  const said = fromServer(m.reason_code ? `job.reasonCode.${m.reason_code}` : null, m.reason);
  return h('span', null, said.text, said.detail ? h('span', { class: 'msg-detail muted', lang: 'en' }, said.detail) : null);
}

export function jobMembers(job) {
  if (!job || !(job.members > 1) || !Array.isArray(job.ranks)) return null;
  return h('section', { class: 'card', 'data-members': '' },
    h('h2', null, t('jobMembers.title', { count: job.members, n: formatNumber(job.members) })),
    h('p', { class: 'muted' }, t('jobMembers.intro')),
    h('div', { class: 'table-wrap' },
      h('table', { class: 'table', 'data-table': 'members' },
        h('thead', null, h('tr', null,
          h('th', { scope: 'col' }, t('jobMembers.col.rank')),
          h('th', { scope: 'col' }, t('jobMembers.col.node')),
          h('th', { scope: 'col' }, t('jobMembers.col.address')),
          h('th', { scope: 'col' }, t('jobMembers.col.state')),
          h('th', { scope: 'col' }, t('jobMembers.col.exitCode')),
          h('th', { scope: 'col' }, t('jobMembers.col.reason')),
          h('th', { scope: 'col' }, t('jobMembers.col.log')))),
        h('tbody', null, job.ranks.map((m) => h('tr', { 'data-rank': m.rank },
          h('td', { class: 'mono' }, formatNumber(m.rank)),
          h('td', null, m.node || '—'),
          h('td', { class: 'mono' }, m.address || '—'),
          h('td', null, memberState(m.state)),
          h('td', { class: 'mono' }, m.exit_code === null || m.exit_code === undefined ? '—' : formatNumber(m.exit_code)),
          h('td', { 'data-field': 'member-reason' }, memberReason(m)),
          h('td', null, h('a', {
            href: `/api/v1/jobs/${job.id}/logs?rank=${m.rank}&tail=100000`, target: '_blank', rel: 'noopener',
          }, m.rank === 0 ? 'output.log' : `output.rank${m.rank}.log`))))))));
}
