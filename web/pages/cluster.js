// pages/cluster.js — the Cluster page, for everyone: free capacity per GPU
// pool (sharing mode, models, a capacity bar; free slices on a node whose CPU
// or memory is all in use are shown apart, as no request can use them) and a
// map of the pool's GPUs, node by node, one square per GPU filled by the
// share of it in use. Polled every few seconds while the page is shown.
import { api } from '../api.js';
import { t, formatNumber } from '../i18n.js';
import { h, messageBox, icon } from '../ui.js';
import { stateBadge } from '../parts/node-state.js';
import { sharingBadge, sharingDetail, memoryCapNote, simulatedBadge, capacityMeter, usableFree } from '../parts/pool.js';
import { poll } from '../parts/poll.js';
import { keyedRows } from '../parts/keyed-rows.js';

const POLL_MS = 5000;

// A node that takes work but whose CPU or memory is all in use: its free
// slices are of no use to any request now.
const cpuFull = (n) => n.state === 'up' && n.cpu_free_millis === 0;
const memFull = (n) => n.state === 'up' && n.mem_free_mib === 0;
const full = (n) => cpuFull(n) || memFull(n);

function gpuSquare(node, g) {
  const slices = Math.max(0, g.slices || 0);
  const used = Math.max(0, Math.min(slices, g.used || 0));
  const off = node.state !== 'up';
  const stuck = !off && full(node) && used < slices;
  const parts = [
    t('cluster.gpuTip', {
      index: g.index, model: g.model, uuid: g.uuid,
      free: formatNumber(slices - used), slices: formatNumber(slices),
    }),
  ];
  if (g.simulated) parts.push(t('pools.simulated'));
  if (off) parts.push(t('cluster.gpuUnavailable'));
  if (stuck) parts.push(t('cluster.gpuStuck'));
  const label = parts.join(' · ');
  const fill = h('span', { class: 'gpu-fill', 'aria-hidden': 'true' });
  fill.style.height = `${slices > 0 ? (used / slices) * 100 : 0}%`;
  return h('span', {
    class: `gpu-square${off ? ' gpu-off' : ''}${stuck ? ' gpu-stuck' : ''}${used > 0 ? ' gpu-busy' : ''}${g.simulated ? ' gpu-sim' : ''}`,
    role: 'img', 'aria-label': label, title: label,
    'data-gpu': g.index, 'data-gpu-id': g.id, 'data-uuid': g.uuid,
    'data-slices': slices, 'data-used': used,
  }, fill);
}

function gpuMap(pool) {
  const nodes = pool.nodes || [];
  if (!nodes.length) return h('p', { class: 'muted pool-empty', 'data-empty': 'gpus' }, t('cluster.noGpus'));
  return h('div', { class: 'gpu-map', 'data-gpu-map': '' },
    nodes.map((n) => h('div', { class: 'gpu-map-node', 'data-node': n.node, 'data-state': n.state },
      h('div', { class: 'gpu-map-head' },
        h('span', { class: 'mono gpu-map-name' }, n.node),
        stateBadge(n.state),
        cpuFull(n) ? h('span', { class: 'badge badge-warn', 'data-full': 'cpu' }, t('cluster.cpuFull')) : null,
        memFull(n) ? h('span', { class: 'badge badge-warn', 'data-full': 'memory' }, t('cluster.memFull')) : null),
      h('div', { class: 'gpu-squares', role: 'group', 'aria-label': t('cluster.gpusOn', { node: n.node }) },
        (n.gpus || []).map((g) => gpuSquare(n, g))))));
}

function poolCard(pool) {
  const titleId = `pool-${pool.id}-title`;
  const total = pool.slices || 0;
  const sched = pool.schedulable_slices || 0;
  const free = pool.free_slices || 0;
  const usable = usableFree(pool);
  const unit = pool.sharing === 'exclusive' ? 'cluster.freeGpus' : 'cluster.freeSlots';
  const sub = [t('cluster.totalSlices', { n: formatNumber(total), gpus: formatNumber(pool.gpus || 0) })];
  if (total > sched) sub.push(t('cluster.unavailable', { n: formatNumber(total - sched) }));
  return h('section', {
    class: 'card pool-card', 'aria-labelledby': titleId,
    'data-pool': pool.name, 'data-pool-id': pool.id,
    'data-free': free, 'data-usable': usable, 'data-schedulable': sched, 'data-slices': total,
  },
  h('div', { class: 'pool-card-head' },
    h('h2', { id: titleId, class: 'mono pool-name' }, pool.name),
    h('div', { class: 'pool-badges' }, sharingBadge(pool), simulatedBadge(pool))),
  pool.description ? h('p', { class: 'muted pool-desc', 'data-field': 'description' }, pool.description) : null,
  h('dl', { class: 'pool-facts' },
    h('div', null, h('dt', null, t('pools.sharingLabel')),
      h('dd', { 'data-field': 'sharing' }, sharingDetail(pool), ' ', memoryCapNote(pool))),
    h('div', null, h('dt', null, t('pools.models')),
      h('dd', { 'data-field': 'models' }, (pool.models || []).length ? pool.models.join(', ') : '—'))),
  h('div', { class: 'pool-capacity' },
    h('div', { class: 'pool-capacity-head' },
      h('span', null,
        h('strong', { class: 'pool-free', 'data-field': 'free' }, formatNumber(usable)), ' ',
        h('span', null, t(unit))),
      h('span', { class: 'muted', 'data-field': 'schedulable' }, t('cluster.ofAvailable', { n: formatNumber(sched) }))),
    capacityMeter(pool, t('cluster.capacityOf', { name: pool.name })),
    free > usable ? h('p', { class: 'pool-stuck', 'data-field': 'stuck' }, t('cluster.stuck', { n: formatNumber(free - usable) })) : null,
    h('p', { class: 'muted pool-capacity-sub', 'data-field': 'slices' }, sub.join(' · '))),
  gpuMap(pool));
}

function legend() {
  const item = (cls, label) => h('span', { class: 'legend-item' }, h('span', { class: `legend-swatch ${cls}`, 'aria-hidden': 'true' }), label);
  return h('div', { class: 'legend', 'data-legend': '' },
    item('swatch-free', t('cluster.legendFree')),
    item('swatch-stuck', t('cluster.legendStuck')),
    item('swatch-used', t('cluster.legendUsed')),
    item('swatch-off', t('cluster.legendOff')));
}

export function render(main, ctx) {
  const isAdmin = ctx.user?.role === 'admin';
  const listMsg = messageBox();
  const grid = h('div', { class: 'grid pool-grid', 'data-pools': '' }, h('p', { class: 'muted' }, t('common.loading')));
  const summary = h('p', { class: 'muted table-count', 'data-cluster-summary': '', 'aria-live': 'polite' });
  // A card is drawn again only when its pool changed.
  const cards = keyedRows(grid, {
    make: (p) => ({ el: poolCard(p), key: JSON.stringify(p) }),
    update: (c, p) => {
      const key = JSON.stringify(p);
      if (key === c.key) return;
      const el = poolCard(p);
      c.el.replaceWith(el);
      Object.assign(c, { el, key });
    },
    empty: () => h('div', { class: 'card card-wide', 'data-empty': 'pools' },
      h('p', { class: 'muted' }, t('cluster.none')),
      isAdmin ? h('p', null, h('a', { href: '#/admin/pools' }, t('cluster.createPool'))) : null),
  });
  let loaded = false;

  main.append(h('section', { class: 'page' },
    h('div', { class: 'page-head page-head-row' },
      h('div', { class: 'page-head-text' },
        h('h1', null, t('cluster.title')),
        h('p', { class: 'muted' }, t('cluster.intro'))),
      isAdmin
        ? h('div', { class: 'toolbar' }, h('a', { class: 'btn', href: '#/admin/pools', 'data-action': 'manage-pools' }, icon('layers', 16), t('cluster.managePools')))
        : null),
    h('div', { class: 'cluster-bar' }, summary, legend()),
    listMsg.el,
    grid));

  poll(() => api.get('/pools'), POLL_MS, {
    until: main,
    show: (reply) => {
      const items = reply?.items || [];
      loaded = true;
      cards.sync(items);
      listMsg.clear();
      summary.textContent = summaryText(items);
    },
    fail: (err) => {
      if (!loaded) grid.replaceChildren();
      listMsg.error(err);
    },
  });
}

function summaryText(items) {
  const sum = (f) => items.reduce((s, p) => s + (p[f] || 0), 0);
  return t('cluster.summary', {
    pools: formatNumber(items.length), gpus: formatNumber(sum('gpus')),
    free: formatNumber(items.reduce((s, p) => s + usableFree(p), 0)), sched: formatNumber(sum('schedulable_slices')),
  });
}
