// parts/node-state.js — a node's health as a badge (up, down, degraded,
// draining, cordoned), shown by Administration → Nodes, the pools' GPU chooser and the
// Cluster page's GPU map.
import { t } from '../i18n.js';
import { h } from '../ui.js';

const STATE_CLASS = { up: 'badge-on', down: 'badge-off', degraded: 'badge-off', draining: 'badge-warn', cordoned: 'badge-warn', unknown: '' };

export function stateBadge(state) {
  const known = state in STATE_CLASS ? state : 'unknown';
  return h('span', { class: `badge badge-state ${STATE_CLASS[known]}`.trim(), 'data-state': state }, t(`nodes.state.${known}`));
}
