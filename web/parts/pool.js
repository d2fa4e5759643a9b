// parts/pool.js — pieces the Cluster page and Administration → Pools
// both show for a GPU pool: its sharing mode, the memory-limit note, the
// simulated mark and the capacity meter.
import { t, formatNumber, formatBytes } from '../i18n.js';
import { h } from '../ui.js';

const MIB = 1024 * 1024;
const SHARING = ['exclusive', 'shared', 'mig'];

export const memoryText = (mib) => formatBytes(mib * MIB);

export function sharingBadge(pool) {
  const known = SHARING.includes(pool.sharing);
  return h('span', { class: `badge badge-sharing sharing-${known ? pool.sharing : 'other'}`, 'data-sharing': pool.sharing },
    known ? t(`pools.sharing.${pool.sharing}`) : pool.sharing);
}

// "Whole GPUs" or "7 slots × 2 GiB per GPU".
export function sharingDetail(pool) {
  if (pool.sharing === 'shared') {
    const mem = typeof pool.memory_per_slot_mib === 'number' ? memoryText(pool.memory_per_slot_mib) : '—';
    return t('pools.sharedDetail', { slots: formatNumber(pool.slots_per_gpu), mem });
  }
  if (pool.sharing === 'exclusive') return t('pools.exclusiveDetail');
  return t('pools.sliceDetail', { slots: formatNumber(pool.slots_per_gpu) });
}

// A shared pool's per-slot memory is either enforced on the node or only
// advisory; the API says which (memory_cap), and the interface says so too.
export function memoryCapNote(pool) {
  if (pool.memory_cap === 'advisory') {
    return h('span', { class: 'badge badge-warn', 'data-memory-cap': 'advisory', title: t('pools.memoryAdvisoryHelp') }, t('pools.memoryAdvisory'));
  }
  if (pool.memory_cap === 'enforced') {
    return h('span', { class: 'badge badge-on', 'data-memory-cap': 'enforced', title: t('pools.memoryEnforcedHelp') }, t('pools.memoryEnforced'));
  }
  return null;
}

export function simulatedBadge(pool) {
  return pool.simulated
    ? h('span', { class: 'badge badge-sim', 'data-simulated': '', title: t('pools.simulatedHelp') }, t('pools.simulated'))
    : null;
}

// A segment of the capacity bar. Its width is set through the CSSOM: the
// page's Content-Security-Policy (style-src 'self') refuses style attributes.
function segment(cls, n, total) {
  const el = h('div', { class: `capacity-seg ${cls}` });
  el.style.width = `${total > 0 ? (n / total) * 100 : 0}%`;
  return el;
}

// Free slices some request could use: a node whose CPU or memory is all
// in use has none, however many of its slices are free (the API's
// usable_free_slices; free_slices when a server does not send it).
export function usableFree(pool) {
  const free = Math.max(0, pool.free_slices || 0);
  return typeof pool.usable_free_slices === 'number' ? Math.max(0, Math.min(free, pool.usable_free_slices)) : free;
}

// One bar over all the pool's slices: free and usable, free but not usable
// (its node's CPU or memory is all in use), in use, and on nodes that are not
// taking work (down, draining, cordoned). As a meter it reads usable free
// out of schedulable.
export function capacityMeter(pool, label) {
  const total = Math.max(0, pool.slices || 0);
  const sched = Math.max(0, Math.min(total, pool.schedulable_slices || 0));
  const free = Math.max(0, Math.min(sched, pool.free_slices || 0));
  const usable = Math.min(free, usableFree(pool));
  return h('div', {
    class: 'capacity', role: 'meter', 'aria-label': label,
    'aria-valuemin': 0, 'aria-valuemax': sched, 'aria-valuenow': usable,
    'aria-valuetext': t('pools.meterText', { free: formatNumber(usable), sched: formatNumber(sched), total: formatNumber(total) }),
  },
  segment('capacity-free', usable, total),
  segment('capacity-stuck', free - usable, total),
  segment('capacity-used', sched - free, total),
  segment('capacity-off', total - sched, total));
}
