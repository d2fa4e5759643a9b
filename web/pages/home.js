// pages/home.js — welcome, role, and the account's quotas against usage.
// Quotas and usage are open-ended objects from GET /me; known names get a
// translated label and a unit, others are shown as they come.
import { t, tMaybe, formatNumber, formatBytes } from '../i18n.js';
import { h } from '../ui.js';

// Known resources first, in this order; any other name after them.
const QUOTA_ORDER = ['gpus', 'gpu_hours', 'cpus', 'memory_bytes', 'storage_bytes', 'instances', 'jobs'];

function formatValue(name, v) {
  if (v === null || v === undefined) return '—';
  if (typeof v === 'number') return /bytes$/.test(name) ? formatBytes(v) : formatNumber(v);
  if (typeof v === 'boolean') return v ? t('common.yes') : t('common.no');
  if (typeof v === 'object') return JSON.stringify(v);
  return String(v);
}

// The width is set through the CSSOM: the page's Content-Security-Policy
// (style-src 'self') refuses style attributes.
function fill(pct) {
  const el = h('div', { class: 'meter-fill' });
  el.style.width = `${pct}%`;
  return el;
}

function quotaRows(quotas, usage) {
  const rank = (n) => { const i = QUOTA_ORDER.indexOf(n); return i < 0 ? QUOTA_ORDER.length : i; };
  const names = [...new Set([...Object.keys(quotas), ...Object.keys(usage)])]
    .sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
  return names.map((name) => {
    const limit = quotas[name];
    const used = usage[name];
    const label = tMaybe(`quota.${name}`) || name;
    let bar = null;
    if (typeof limit === 'number' && typeof used === 'number' && limit > 0) {
      const pct = Math.min(100, Math.round((used / limit) * 100));
      bar = h('div', {
        class: pct >= 90 ? 'meter meter-high' : 'meter', role: 'meter',
        'aria-valuemin': 0, 'aria-valuemax': 100, 'aria-valuenow': pct, 'aria-label': label,
      }, fill(pct));
    }
    return h('tr', { 'data-quota': name },
      h('th', { scope: 'row' }, label),
      h('td', null, formatValue(name, used)),
      h('td', null, limit === undefined ? t('home.unlimited') : formatValue(name, limit)),
      h('td', { class: 'meter-cell' }, bar));
  });
}

function quotaCard(quotas, usage) {
  const hasQuota = Object.keys(quotas).length > 0 || Object.keys(usage).length > 0;
  return h('section', { class: 'card', 'aria-labelledby': 'quota-title' },
    h('h2', { id: 'quota-title' }, t('home.quotas')),
    hasQuota
      ? h('div', { class: 'table-wrap' }, h('table', { class: 'table' },
        h('thead', null, h('tr', null,
          h('th', { scope: 'col' }, t('home.resource')),
          h('th', { scope: 'col' }, t('home.used')),
          h('th', { scope: 'col' }, t('home.limit')),
          h('th', { scope: 'col' }, h('span', { class: 'visually-hidden' }, t('home.usageBar'))))),
        h('tbody', null, quotaRows(quotas, usage))))
      : h('p', { class: 'muted', 'data-empty': 'quotas' }, t('home.noQuotas')));
}

export function render(main, ctx) {
  const user = ctx.user;
  let quotas = quotaCard(ctx.quotas || {}, ctx.usage || {});

  main.append(h('section', { class: 'page' },
    h('div', { class: 'page-head' },
      h('h1', null, t('home.welcome', { name: user.display_name || user.username })),
      h('p', { class: 'muted' }, t('home.signedInAs'), ' ',
        h('span', { class: `badge badge-role role-${user.role}`, 'data-role': user.role }, t(`role.${user.role}`)))),
    h('div', { class: 'grid' },
      quotas,
      h('section', { class: 'card', 'aria-labelledby': 'start-title' },
        h('h2', { id: 'start-title' }, t('home.gettingStarted')),
        h('ul', { class: 'plain-list' },
          h('li', null, h('a', { href: '#/cluster' }, t('home.linkCluster'))),
          h('li', null, h('a', { href: '#/account' }, t('home.linkAccount'))),
          user.role === 'admin' ? h('li', null, h('a', { href: '#/admin/users' }, t('home.linkUsers'))) : null,
          user.role === 'admin' ? h('li', null, h('a', { href: '#/admin/nodes' }, t('home.linkNodes'))) : null,
          user.role === 'admin' ? h('li', null, h('a', { href: '#/admin/pools' }, t('home.linkPools'))) : null)))));

  // Usage moves; show what /me says now, not what it said at sign-in.
  ctx.refreshMe().then(() => {
    const fresh = quotaCard(ctx.quotas || {}, ctx.usage || {});
    quotas.replaceWith(fresh);
    quotas = fresh;
  }, () => { /* keep the figures we have */ });
}
