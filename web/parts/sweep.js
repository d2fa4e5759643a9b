// parts/sweep.js — a sweep as its list and its own page show it: the state
// badge, the run count, the goal ("lowest loss") and the best value.
import { t, tMaybe, formatNumber } from '../i18n.js';
import { h } from '../ui.js';

const STATE_CLASS = { running: 'badge-warn', finished: 'badge-on', cancelled: '' };

export function sweepStateBadge(state) {
  return h('span', { class: `badge badge-state ${STATE_CLASS[state] || ''}`.trim(), 'data-state': state },
    tMaybe(`sweep.state.${state}`) || state);
}

export const sweepGoal = (s) => t(`sweep.goal.${s.goal}`, { metric: s.metric });

// A metric's value for a table cell: numbers in the reader's format.
export function metricValue(v) {
  if (typeof v === 'number') return Math.abs(v) >= 1e-3 || v === 0 ? formatNumber(Number(v.toPrecision(6))) : v.toExponential(3);
  if (v === undefined || v === null) return '—';
  return String(v);
}

export function sweepBest(s) {
  if (s.best_job_id === null || s.best_job_id === undefined) return h('span', { class: 'muted' }, '—');
  return h('span', { 'data-field': 'best' }, t('sweep.bestValue', { metric: s.metric, value: metricValue(s.best_value) }));
}
