// parts/limits.js — the limits in force for a user (GET /me/limits, GET
// /quotas/effective) as a table a person can read: one row per pool open to
// them and one for CPU-only work, each cell "used of limit" with a meter,
// where the limit comes from under the pool's name; the home's storage
// below. On a narrow screen the rows stack (style.css), so nothing is wider
// than the window; wide content scrolls inside its own box, never the page.
//
//   card.append(limitsTable(lim));          // the home page, the admin's view
//   cores(2500) → "2.5 cores", mib(16384) → "16 GiB", duration(5400) → "1.5 h"
import { t, formatNumber, formatBytes } from '../i18n.js';
import { h } from '../ui.js';

export const cores = (millis) => t('limits.cores', { n: formatNumber(Math.round(millis / 100) / 10) });
export const mib = (n) => formatBytes(n * 1048576);
export const hours = (n) => t('limits.hours', { n: formatNumber(Math.round(n * 100) / 100) });
export function duration(s) {
  if (s % 3600 === 0 || s >= 36000) return hours(s / 3600);
  return t('limits.minutes', { n: formatNumber(Math.round(s / 6) / 10) });
}

// Where a limit comes from, in words ('user', 'role_pool', 'role', 'none').
export function sourceText(source, role) {
  return t(`limits.source.${source}`, { role: t(`role.${role}`) });
}

// The width through the CSSOM: the Content-Security-Policy refuses style attributes.
function meter(used, max, label) {
  const pct = Math.min(100, Math.round((used / max) * 100));
  const fill = h('div', { class: 'meter-fill' });
  fill.style.width = `${pct}%`;
  return h('div', {
    class: pct >= 90 ? 'meter meter-high' : 'meter', role: 'meter',
    'aria-valuemin': 0, 'aria-valuemax': 100, 'aria-valuenow': pct, 'aria-label': label,
  }, fill);
}

// One cell: "used of max" (or "max" alone when nothing is counted), a meter
// when there is a positive limit; null is no limit, 0 none at all.
// label: the column's name (shown before the value when the table is
// stacked on a narrow screen).
function cell(name, used, max, format, label) {
  const td = h('td', { 'data-limit': name, 'data-label': label });
  if (max === undefined) { td.dataset.empty = ''; td.append(h('span', { class: 'muted' }, '—')); return td; }
  if (max === null) {
    td.append(used ? t('limits.usedNoLimit', { used: format(used) }) : h('span', { class: 'muted' }, t('limits.noLimit')));
    return td;
  }
  if (max === 0) { td.append(h('span', { class: 'badge badge-off', 'data-none': '' }, t('limits.noneAllowed'))); return td; }
  td.append(used === undefined ? format(max) : t('limits.usedOf', { used: format(used), max: format(max) }));
  if (used !== undefined) td.append(meter(used, max, label));
  return td;
}

function poolRow(p, role) {
  return h('tr', { 'data-quota': `pool:${p.pool}`, 'data-source': p.source },
    h('th', { scope: 'row' },
      h('strong', { class: 'mono' }, p.pool),
      h('div', { class: 'cell-sub muted', 'data-field': 'source' }, sourceText(p.source, role))),
    cell('slices', p.slices_in_use, p.max_slices, formatNumber, t('limits.col.slices')),
    cell('cpu', p.cpu_millis_in_use, p.max_cpu_millis, cores, t('limits.col.cpu')),
    cell('memory', p.mem_mib_in_use, p.max_mem_mib, mib, t('limits.col.memory')),
    cell('gpu-hours', p.gpu_hours_7d, p.gpu_hours_per_week, hours, t('limits.col.gpuHours')),
    cell('runtime', undefined, p.max_runtime_s, duration, t('limits.col.runtime')));
}

function cpuOnlyRow(c, role) {
  return h('tr', { 'data-quota': 'cpu-only', 'data-source': c.source },
    h('th', { scope: 'row' },
      h('strong', null, t('limits.cpuOnly')),
      h('div', { class: 'cell-sub muted', 'data-field': 'source' }, sourceText(c.source, role)),
      h('div', { class: 'cell-sub muted', 'data-field': 'tensorboards' },
        c.max_tensorboards === null
          ? t('limits.tensorboardsNoLimit', { used: formatNumber(c.tensorboards_running) })
          : t('limits.tensorboards', { used: formatNumber(c.tensorboards_running), max: formatNumber(c.max_tensorboards) }))),
    cell('slices', undefined, undefined, null, t('limits.col.slices')),
    cell('cpu', c.cpu_millis_in_use, c.max_cpu_millis, cores, t('limits.col.cpu')),
    cell('memory', c.mem_mib_in_use, c.max_mem_mib, mib, t('limits.col.memory')),
    cell('gpu-hours', undefined, undefined, null, t('limits.col.gpuHours')),
    cell('runtime', undefined, undefined, null, t('limits.col.runtime')));
}

// The home's storage, as a short paragraph.
export function storageLine(st) {
  if (!st) return null;
  const bytes = st.bytes_hard === null
    ? t('limits.storageNoLimit', { used: formatBytes(st.bytes) })
    : t('limits.storageBytes', { used: formatBytes(st.bytes), hard: formatBytes(st.bytes_hard) });
  const files = st.files_hard === null
    ? t('limits.filesNoLimit', { used: formatNumber(st.files) })
    : t('limits.storageFiles', { used: formatNumber(st.files), hard: formatNumber(st.files_hard) });
  return h('p', { class: 'limits-storage', 'data-quota': 'storage', 'data-source': st.source },
    h('strong', null, t('limits.storage')), ' ', bytes, ' · ', files,
    st.bytes_soft !== null && (st.bytes_hard === null || st.bytes_soft < st.bytes_hard) ? h('span', { class: 'muted' }, ' ', t('limits.storageSoft', { soft: formatBytes(st.bytes_soft) })) : null,
    st.source === 'user' ? h('span', { class: 'muted' }, ' · ', t('limits.storageOwn')) : null);
}

// The table of a GET /me/limits reply. opts.closed: list pools closed to the
// role too (the admin's view), marked.
export function limitsTable(lim, { closed = false } = {}) {
  const role = lim.user?.role || 'student';
  const pools = (lim.pools || []).filter((p) => closed || p.open);
  const rows = [cpuOnlyRow(lim.cpu_only, role), ...pools.map((p) => {
    const tr = poolRow(p, role);
    if (!p.open) {
      tr.dataset.closed = '';
      tr.querySelector('[data-field=source]').textContent = t('limits.closed', { role: t(`role.${role}`) });
    }
    return tr;
  })];
  return h('div', { class: 'table-wrap limits-wrap' },
    h('table', { class: 'table limits-table', 'data-table': 'limits' },
      h('thead', null, h('tr', null,
        h('th', { scope: 'col' }, t('limits.col.pool')),
        h('th', { scope: 'col' }, t('limits.col.slices')),
        h('th', { scope: 'col' }, t('limits.col.cpu')),
        h('th', { scope: 'col' }, t('limits.col.memory')),
        h('th', { scope: 'col' }, t('limits.col.gpuHours')),
        h('th', { scope: 'col' }, t('limits.col.runtime')))),
      h('tbody', null, rows)));
}
