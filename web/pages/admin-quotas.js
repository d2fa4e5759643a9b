// pages/admin-quotas.js — Administration → Quotas: what each role gets by
// default (per pool, and for all pools and CPU-only work), a user's own
// quotas (find the user, see the limits in force for them and where each
// comes from, set or remove their quota per pool and their home's storage),
// home storage for everyone, idle policies per role, and the TensorBoard
// image. Quotas are default deny: a role without a default gets nothing.
//
// Limits are entered in the units people think in (cores, GiB, hours) and
// sent in the API's (millicores, MiB, seconds); an empty field is no limit.
import { api } from '../api.js';
import { t, formatNumber, formatBytes } from '../i18n.js';
import { h, field, messageBox, busy, confirmDialog, openDialog, emptyRow, toast, toastError, uid } from '../ui.js';
import { ROLE_NAMES } from '../roles.js';
import { limitsTable, storageLine, cores, mib, hours, duration } from '../parts/limits.js';

const GIB = 1073741824;

// ---- the limit fields (defaults and a user's own quota share them) ----
//
// name: the API field; unit: how the input maps to it; min: the API's lower
// bound (0, or 1 for a runtime).
const LIMITS = [
  { name: 'max_slices', label: 'quotas.f.slices', help: 'quotas.f.slicesHelp', step: 1, toApi: (v) => Math.round(v), fromApi: (v) => v, min: 0 },
  { name: 'max_cpu_millis', label: 'quotas.f.cpu', help: 'quotas.f.cpuHelp', step: 0.1, toApi: (v) => Math.round(v * 1000), fromApi: (v) => v / 1000, min: 0 },
  { name: 'max_mem_mib', label: 'quotas.f.memory', help: 'quotas.f.memoryHelp', step: 0.5, toApi: (v) => Math.round(v * 1024), fromApi: (v) => v / 1024, min: 0 },
  { name: 'gpu_hours_per_week', label: 'quotas.f.gpuHours', help: 'quotas.f.gpuHoursHelp', step: 1, toApi: (v) => Math.round(v), fromApi: (v) => v, min: 0 },
  { name: 'max_runtime_s', label: 'quotas.f.runtime', help: 'quotas.f.runtimeHelp', step: 0.5, toApi: (v) => Math.round(v * 3600), fromApi: (v) => v / 3600, min: 1 },
];
const TB_LIMIT = { name: 'max_tensorboards', label: 'quotas.f.tensorboards', help: 'quotas.f.tensorboardsHelp', step: 1, toApi: (v) => Math.round(v), fromApi: (v) => v, min: 0 };

// Number inputs for specs, filled from current (API units); read() returns
// the API body or throws an Error whose message names the bad field.
function limitInputs(specs, current = {}) {
  const inputs = specs.map((s) => {
    const v = current[s.name];
    const input = h('input', {
      type: 'number', min: 0, step: s.step, inputmode: 'decimal', class: 'input-narrow',
      'data-limit-input': s.name, placeholder: t('quotas.f.noLimit'),
      value: typeof v === 'number' ? String(Math.round(s.fromApi(v) * 1000) / 1000) : '',
    });
    return { s, input, el: field(t(s.label), input, t(s.help)) };
  });
  return {
    nodes: h('div', { class: 'form-inline-wide' }, inputs.map((x) => x.el)),
    read() {
      const body = {};
      for (const { s, input } of inputs) {
        const raw = input.value.trim();
        if (raw === '') { body[s.name] = null; continue; }
        const n = Number(raw);
        if (!Number.isFinite(n) || n < 0 || s.toApi(n) < s.min) {
          input.focus();
          throw new Error(t(s.min > 0 ? 'quotas.f.positive' : 'quotas.f.notNegative', { field: t(s.label) }));
        }
        body[s.name] = s.toApi(n);
      }
      return body;
    },
  };
}

// A dialog with limit inputs; save(body) does the change. Resolves true once saved.
function limitsDialog({ title, intro, specs, current, save }) {
  return openDialog({
    title,
    wide: true,
    build: (close) => {
      const msg = messageBox();
      const li = limitInputs(specs, current);
      const form = h('form', { class: 'form', novalidate: true, 'data-form': 'limits' },
        intro ? h('p', { class: 'muted' }, intro) : null,
        li.nodes, msg.el,
        h('div', { class: 'actions' },
          h('button', { type: 'button', class: 'btn', onclick: () => close(false) }, t('common.cancel')),
          h('button', { type: 'submit', class: 'btn btn-primary', 'data-action': 'save-limits' }, t('quotas.save'))));
      form.addEventListener('submit', (e) => {
        e.preventDefault();
        msg.clear();
        let body;
        try { body = li.read(); } catch (err) { msg.error(err.message); return; }
        busy(form, async () => {
          try { await save(body); close(true); } catch (err) { msg.error(err); }
        });
      });
      return form;
    },
  }).then(Boolean);
}

// A limit for a table cell: "No limit", "None" or the value in its unit.
function limitText(v, format) {
  if (v === null || v === undefined) return h('span', { class: 'muted' }, t('limits.noLimit'));
  if (v === 0) return h('span', { class: 'badge badge-off' }, t('limits.noneAllowed'));
  return format(v);
}

const FORMATS = {
  max_slices: formatNumber, max_cpu_millis: cores, max_mem_mib: mib, gpu_hours_per_week: hours,
  max_runtime_s: duration, max_tensorboards: formatNumber,
};

function limitCells(row, withTb) {
  return [...LIMITS, ...(withTb ? [TB_LIMIT] : [])].map((s) => h('td', { 'data-limit': s.name }, limitText(row?.[s.name], FORMATS[s.name])));
}

// ---- role defaults ----

function defaultsCard() {
  const msg = messageBox();
  const roleSelect = h('select', { 'data-field': 'default-role', id: uid('role') },
    ROLE_NAMES.map((r) => h('option', { value: r, selected: r === 'student' }, t(`role.${r}`))));
  const tbody = h('tbody', null, emptyRow(8, t('common.loading')));
  let defaults = [], pools = [];

  function row(pool) {
    const role = roleSelect.value;
    const d = defaults.find((x) => x.role === role && x.pool === (pool ? pool.name : null));
    const closed = pool && role !== 'admin' && !(pool.roles || []).includes(role);
    const label = pool ? pool.name : t('quotas.allPools');
    const tr = h('tr', { 'data-default': pool ? pool.name : '*', 'data-set': d ? '' : null },
      h('th', { scope: 'row' },
        h('strong', { class: pool ? 'mono' : null }, label),
        h('div', { class: 'cell-sub muted' },
          closed ? t('quotas.closedToRole', { role: t(`role.${role}`) })
            : !d ? (pool ? t('quotas.usesGlobal') : t('quotas.noGlobal'))
              : pool ? t('quotas.forPool') : t('quotas.globalHelp'))));
    if (d) tr.append(...limitCells(d, true).map((c, i) => (pool && i === 5 ? h('td', { 'data-limit': 'max_tensorboards' }, h('span', { class: 'muted' }, '—')) : c)));
    else tr.append(h('td', { colspan: 6, class: 'muted' }, pool ? '' : t('quotas.denied')));
    const edit = h('button', {
      type: 'button', class: 'btn btn-small', 'data-action': d ? 'edit-default' : 'set-default',
      onclick: async () => {
        const specs = pool ? LIMITS : [...LIMITS, TB_LIMIT];
        const saved = await limitsDialog({
          title: t('quotas.defaultTitle', { role: t(`role.${role}`), scope: label }),
          intro: pool ? t('quotas.defaultPoolIntro') : t('quotas.defaultGlobalIntro'),
          specs, current: d || {},
          save: (body) => api.put('/quotas/defaults', { role, pool: pool ? pool.name : null, ...body }),
        });
        if (saved) { toast(t('quotas.saved')); load(); }
      },
    }, d ? t('quotas.edit') : t('quotas.set'));
    const remove = d ? h('button', {
      type: 'button', class: 'btn btn-small btn-danger-outline', 'data-action': 'remove-default',
      onclick: async () => {
        const ok = await confirmDialog({
          title: t('quotas.removeDefaultTitle'),
          message: pool ? t('quotas.removeDefaultPool', { role: t(`role.${role}`), pool: pool.name }) : t('quotas.removeDefaultGlobal', { role: t(`role.${role}`) }),
          confirmLabel: t('quotas.remove'), danger: true,
        });
        if (!ok) return;
        try {
          await api.del('/quotas/defaults', { query: { role, pool: pool ? pool.name : undefined } });
          toast(t('quotas.removed'));
          load();
        } catch (err) { toastError(err); }
      },
    }, t('quotas.remove')) : null;
    tr.append(h('td', { class: 'cell-actions' }, edit, remove));
    return tr;
  }

  function show() {
    tbody.replaceChildren(row(null), ...pools.map(row));
  }

  async function load() {
    try {
      const [d, p] = await Promise.all([api.get('/quotas/defaults'), api.get('/pools')]);
      defaults = d.items || [];
      pools = p.items || [];
      show();
      msg.clear();
    } catch (err) { msg.error(err); }
  }
  roleSelect.addEventListener('change', show);
  load();

  return h('section', { class: 'card card-wide', 'aria-labelledby': 'defaults-title', 'data-card': 'defaults' },
    h('h2', { id: 'defaults-title' }, t('quotas.defaultsTitle')),
    h('p', { class: 'muted' }, t('quotas.defaultsIntro')),
    h('div', { class: 'role-pick' }, h('label', { for: roleSelect.id }, t('quotas.role')), roleSelect),
    msg.el,
    h('div', { class: 'table-wrap' }, h('table', { class: 'table', 'data-table': 'defaults' },
      h('thead', null, h('tr', null,
        h('th', { scope: 'col' }, t('quotas.scope')),
        h('th', { scope: 'col' }, t('limits.col.slices')),
        h('th', { scope: 'col' }, t('limits.col.cpu')),
        h('th', { scope: 'col' }, t('limits.col.memory')),
        h('th', { scope: 'col' }, t('quotas.gpuHoursWeek')),
        h('th', { scope: 'col' }, t('limits.col.runtime')),
        h('th', { scope: 'col' }, t('quotas.tensorboards')),
        h('th', { scope: 'col' }, h('span', { class: 'visually-hidden' }, t('common.actions'))))),
      tbody)),
    storageDefaults());
}

// Home storage for every user (PUT /storage/defaults), in GiB and files.
function storageDefaults() {
  const msg = messageBox();
  const mk = (name, gib) => h('input', { type: 'number', min: 0, step: gib ? 1 : 1000, class: gib ? 'input-narrow' : 'input-files', 'data-storage-default': name, placeholder: t('quotas.f.noLimit') });
  const inputs = { user_bytes_soft: mk('user_bytes_soft', true), user_bytes_hard: mk('user_bytes_hard', true), user_files_soft: mk('user_files_soft'), user_files_hard: mk('user_files_hard') };
  const form = h('form', { class: 'form', novalidate: true, 'data-form': 'storage-defaults' },
    h('div', { class: 'form-inline-wide' },
      field(t('quotas.storage.bytesSoft'), inputs.user_bytes_soft, t('quotas.storage.gibHelp')),
      field(t('quotas.storage.bytesHard'), inputs.user_bytes_hard, t('quotas.storage.gibHelp')),
      field(t('quotas.storage.filesSoft'), inputs.user_files_soft),
      field(t('quotas.storage.filesHard'), inputs.user_files_hard)),
    msg.el,
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'btn btn-primary', 'data-action': 'save-storage-defaults' }, t('quotas.save'))));
  api.get('/storage').then((s) => {
    for (const [k, input] of Object.entries(inputs)) {
      const v = s.defaults?.[k];
      input.value = typeof v === 'number' ? String(k.includes('bytes') ? Math.round((v / GIB) * 100) / 100 : v) : '';
    }
  }, (err) => msg.error(err));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    msg.clear();
    let body;
    try { body = storageBody(inputs, (k) => k.includes('bytes')); } catch (err) { msg.error(err.message); return; }
    busy(form, async () => {
      try { await api.put('/storage/defaults', body); msg.success(t('quotas.saved')); } catch (err) { msg.error(err); }
    });
  });
  return h('div', { class: 'card-section' },
    h('h3', null, t('quotas.storage.defaultsTitle')),
    h('p', { class: 'muted' }, t('quotas.storage.defaultsIntro')),
    form);
}

// Storage inputs → API body (bytes from GiB); empty → null.
function storageBody(inputs, isBytes) {
  const body = {};
  for (const [k, input] of Object.entries(inputs)) {
    const raw = input.value.trim();
    if (raw === '') { body[k] = null; continue; }
    const n = Number(raw);
    if (!Number.isFinite(n) || n < 0) { input.focus(); throw new Error(t('quotas.f.notNegative', { field: input.closest('.field')?.querySelector('label')?.textContent || k })); }
    body[k] = isBytes(k) ? Math.round(n * GIB) : Math.round(n);
  }
  return body;
}

// ---- a user's own quotas ----

function usersCard() {
  const msg = messageBox();
  const search = h('input', { type: 'search', 'data-field': 'user-search', id: uid('q'), autocomplete: 'off', spellcheck: 'false', placeholder: t('quotas.searchPlaceholder') });
  const results = h('ul', { class: 'user-results plain-list', 'data-user-results': '' });
  const detail = h('div', { 'data-user-detail': '' });
  let seq = 0;

  async function find() {
    const mine = ++seq;
    const q = search.value.trim();
    try {
      const r = await api.get('/users', { query: { q, limit: 20 } });
      if (mine !== seq) return;
      const items = r.items || [];
      results.replaceChildren(...(items.length ? items.map((u) => h('li', null,
        h('button', { type: 'button', class: 'btn btn-small', 'data-pick-user': u.username, onclick: () => open(u) },
          u.username, u.display_name ? ` (${u.display_name})` : ''),
        ' ', h('span', { class: `badge badge-role role-${u.role}` }, t(`role.${u.role}`))))
        : [h('li', { class: 'muted' }, t('quotas.noUsers'))]));
      msg.clear();
    } catch (err) { msg.error(err); }
  }

  async function open(u) {
    results.replaceChildren();
    detail.replaceChildren(h('p', { class: 'muted' }, t('common.loading')));
    try {
      const [lim, own, pools] = await Promise.all([
        api.get('/quotas/effective', { query: { user_id: u.id } }),
        api.get('/quotas', { query: { user_id: u.id } }),
        api.get('/pools'),
      ]);
      showUser(u, lim, own.items || [], pools.items || []);
    } catch (err) { detail.replaceChildren(); msg.error(err); }
  }

  function showUser(u, lim, own, pools) {
    const ownRows = pools.map((p) => {
      const q = own.find((x) => x.pool === p.name);
      const tr = h('tr', { 'data-override': p.name, 'data-set': q ? '' : null },
        h('th', { scope: 'row' }, h('strong', { class: 'mono' }, p.name),
          h('div', { class: 'cell-sub muted' }, q ? t('quotas.ownSet') : t('quotas.ownNone'))));
      if (q) tr.append(...limitCells(q, false));
      else tr.append(h('td', { colspan: 5, class: 'muted' }, ''));
      tr.append(h('td', { class: 'cell-actions' },
        h('button', {
          type: 'button', class: 'btn btn-small', 'data-action': q ? 'edit-override' : 'set-override',
          onclick: async () => {
            const saved = await limitsDialog({
              title: t('quotas.overrideTitle', { user: u.username, pool: p.name }),
              intro: t('quotas.overrideIntro'), specs: LIMITS, current: q || {},
              save: (body) => api.put('/quotas', { user_id: u.id, pool: p.name, ...body }),
            });
            if (saved) { toast(t('quotas.saved')); open(u); }
          },
        }, q ? t('quotas.edit') : t('quotas.set')),
        q ? h('button', {
          type: 'button', class: 'btn btn-small btn-danger-outline', 'data-action': 'remove-override',
          onclick: async () => {
            const ok = await confirmDialog({ title: t('quotas.removeOverrideTitle'), message: t('quotas.removeOverride', { user: u.username, pool: p.name }), confirmLabel: t('quotas.remove'), danger: true });
            if (!ok) return;
            try { await api.del('/quotas', { query: { user_id: u.id, pool: p.name } }); toast(t('quotas.removed')); open(u); } catch (err) { toastError(err); }
          },
        }, t('quotas.remove')) : null));
      return tr;
    });
    detail.replaceChildren(
      h('h3', { 'data-user-heading': u.username }, u.username, ' ',
        h('span', { class: `badge badge-role role-${u.role}` }, t(`role.${u.role}`))),
      h('p', { class: 'muted' }, t('quotas.effectiveIntro')),
      limitsTable(lim, { closed: true }),
      storageLine(lim.storage),
      h('h3', { class: 'limits-sub' }, t('quotas.ownTitle')),
      h('div', { class: 'table-wrap' }, h('table', { class: 'table', 'data-table': 'overrides' },
        h('thead', null, h('tr', null,
          h('th', { scope: 'col' }, t('limits.col.pool')),
          h('th', { scope: 'col' }, t('limits.col.slices')),
          h('th', { scope: 'col' }, t('limits.col.cpu')),
          h('th', { scope: 'col' }, t('limits.col.memory')),
          h('th', { scope: 'col' }, t('quotas.gpuHoursWeek')),
          h('th', { scope: 'col' }, t('limits.col.runtime')),
          h('th', { scope: 'col' }, h('span', { class: 'visually-hidden' }, t('common.actions'))))),
        h('tbody', null, ownRows.length ? ownRows : emptyRow(7, t('quotas.noPools'))))),
      storageOverride(u, lim.storage, () => open(u)));
  }

  search.addEventListener('input', () => { if (search.value.trim().length >= 1) find(); else results.replaceChildren(); });
  search.addEventListener('keydown', (e) => { if (e.key === 'Enter') { e.preventDefault(); find(); } });

  return h('section', { class: 'card card-wide', 'aria-labelledby': 'users-title', 'data-card': 'overrides' },
    h('h2', { id: 'users-title' }, t('quotas.usersTitle')),
    h('p', { class: 'muted' }, t('quotas.usersIntro')),
    field(t('quotas.findUser'), search),
    results, msg.el, detail);
}

// A user's home storage override (PUT /storage/quotas/home:<username>); empty: the default.
function storageOverride(u, st, reload) {
  const msg = messageBox();
  const o = st?.override || {};
  const mk = (k, gib) => h('input', {
    type: 'number', min: 0, step: gib ? 1 : 1000, class: gib ? 'input-narrow' : 'input-files', 'data-storage-override': k, placeholder: t('quotas.storage.default'),
    value: typeof o[k] === 'number' ? String(gib ? Math.round((o[k] / GIB) * 100) / 100 : o[k]) : '',
  });
  const inputs = { bytes_soft: mk('bytes_soft', true), bytes_hard: mk('bytes_hard', true), files_soft: mk('files_soft'), files_hard: mk('files_hard') };
  const form = h('form', { class: 'form', novalidate: true, 'data-form': 'storage-override' },
    h('div', { class: 'form-inline-wide' },
      field(t('quotas.storage.bytesSoft'), inputs.bytes_soft, t('quotas.storage.gibHelp')),
      field(t('quotas.storage.bytesHard'), inputs.bytes_hard, t('quotas.storage.gibHelp')),
      field(t('quotas.storage.filesSoft'), inputs.files_soft),
      field(t('quotas.storage.filesHard'), inputs.files_hard)),
    msg.el,
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'btn btn-primary', 'data-action': 'save-storage-override' }, t('quotas.save'))));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    msg.clear();
    let body;
    try { body = storageBody(inputs, (k) => k.startsWith('bytes')); } catch (err) { msg.error(err.message); return; }
    busy(form, async () => {
      try { await api.put(`/storage/quotas/home:${encodeURIComponent(u.username)}`, body); toast(t('quotas.saved')); reload(); } catch (err) { msg.error(err); }
    });
  });
  return h('div', { class: 'card-section' },
    h('h3', null, t('quotas.storage.overrideTitle')),
    h('p', { class: 'muted' }, t('quotas.storage.overrideIntro', { soft: st?.bytes_soft != null ? formatBytes(st.bytes_soft) : '—' })),
    form);
}

// ---- idle policies ----

const IDLE = [
  { name: 'idle_seconds', label: 'quotas.idle.after', help: 'quotas.idle.afterHelp', unit: 60, min: 1 },
  { name: 'warn_seconds', label: 'quotas.idle.warn', help: 'quotas.idle.warnHelp', unit: 60, min: 0, required: true },
  { name: 'max_lifetime_seconds', label: 'quotas.idle.lifetime', help: 'quotas.idle.lifetimeHelp', unit: 3600, min: 1 },
];

function idleCard() {
  const msg = messageBox();
  const tbody = h('tbody', null, emptyRow(5, t('common.loading')));
  const fmt = (v) => (v === null || v === undefined ? h('span', { class: 'muted' }, t('quotas.idle.never')) : duration(v));

  function row(p) {
    return h('tr', { 'data-idle': p.role },
      h('th', { scope: 'row' }, h('span', { class: `badge badge-role role-${p.role}` }, t(`role.${p.role}`))),
      h('td', { 'data-field': 'idle_seconds' }, fmt(p.idle_seconds)),
      h('td', { 'data-field': 'warn_seconds' }, duration(p.warn_seconds)),
      h('td', { 'data-field': 'max_lifetime_seconds' }, fmt(p.max_lifetime_seconds)),
      h('td', { class: 'cell-actions' }, h('button', { type: 'button', class: 'btn btn-small', 'data-action': 'edit-idle', onclick: () => edit(p) }, t('quotas.edit'))));
  }

  function edit(p) {
    openDialog({
      title: t('quotas.idle.title', { role: t(`role.${p.role}`) }),
      build: (close) => {
        const dmsg = messageBox();
        const inputs = IDLE.map((s) => {
          const input = h('input', {
            type: 'number', min: 0, step: s.unit === 3600 ? 0.5 : 1, class: 'input-narrow', 'data-idle-input': s.name,
            placeholder: s.required ? '' : t('quotas.idle.never'),
            value: typeof p[s.name] === 'number' ? String(Math.round((p[s.name] / s.unit) * 100) / 100) : '',
          });
          return { s, input, el: field(t(s.label), input, t(s.help)) };
        });
        const form = h('form', { class: 'form', novalidate: true, 'data-form': 'idle' },
          h('div', { class: 'form-inline-wide' }, inputs.map((x) => x.el)), dmsg.el,
          h('div', { class: 'actions' },
            h('button', { type: 'button', class: 'btn', onclick: () => close() }, t('common.cancel')),
            h('button', { type: 'submit', class: 'btn btn-primary', 'data-action': 'save-idle' }, t('quotas.save'))));
        form.addEventListener('submit', (e) => {
          e.preventDefault();
          dmsg.clear();
          const body = {};
          for (const { s, input } of inputs) {
            const raw = input.value.trim();
            if (raw === '' && !s.required) { body[s.name] = null; continue; }
            const n = Number(raw);
            if (raw === '' || !Number.isFinite(n) || Math.round(n * s.unit) < s.min) {
              input.focus();
              dmsg.error(t(s.min > 0 ? 'quotas.f.positive' : 'quotas.f.notNegative', { field: t(s.label) }));
              return;
            }
            body[s.name] = Math.round(n * s.unit);
          }
          busy(form, async () => {
            try { await api.put(`/idle-policies/${p.role}`, body); close(); toast(t('quotas.saved')); load(); } catch (err) { dmsg.error(err); }
          });
        });
        return form;
      },
    });
  }

  async function load() {
    try {
      const r = await api.get('/idle-policies');
      const items = r.items || [];
      items.sort((a, b) => ROLE_NAMES.indexOf(a.role) - ROLE_NAMES.indexOf(b.role));
      tbody.replaceChildren(...items.map(row));
      msg.clear();
    } catch (err) { msg.error(err); }
  }
  load();

  return h('section', { class: 'card card-wide', 'aria-labelledby': 'idle-title', 'data-card': 'idle' },
    h('h2', { id: 'idle-title' }, t('quotas.idle.heading')),
    h('p', { class: 'muted' }, t('quotas.idle.intro')),
    msg.el,
    h('div', { class: 'table-wrap' }, h('table', { class: 'table', 'data-table': 'idle' },
      h('thead', null, h('tr', null,
        h('th', { scope: 'col' }, t('quotas.role')),
        h('th', { scope: 'col' }, t('quotas.idle.afterShort')),
        h('th', { scope: 'col' }, t('quotas.idle.warnShort')),
        h('th', { scope: 'col' }, t('quotas.idle.lifetimeShort')),
        h('th', { scope: 'col' }, h('span', { class: 'visually-hidden' }, t('common.actions'))))),
      tbody)));
}

// ---- the TensorBoard image ----

function tensorboardCard() {
  const msg = messageBox();
  const select = h('select', { 'data-field': 'tensorboard-image', id: uid('tb') });
  const status = h('p', { class: 'field-help', 'data-tensorboard-status': '' });
  const reset = h('button', { type: 'button', class: 'btn', 'data-action': 'tensorboard-reset', hidden: true }, t('quotas.tb.useConfig'));

  function show(s, images) {
    const refs = images.filter((i) => !i.owner_id).map((i) => i.reference);
    const opts = [h('option', { value: '' }, t('quotas.tb.off'))];
    for (const ref of refs) opts.push(h('option', { value: ref }, ref));
    if (s.value && !refs.includes(s.value)) opts.push(h('option', { value: s.value, 'data-missing': '' }, t('quotas.tb.missing', { ref: s.value })));
    select.replaceChildren(...opts);
    select.value = s.value;
    status.dataset.source = s.source;
    status.textContent = [
      t(`quotas.tb.source.${s.source}`),
      s.source === 'admin' && s.config_value ? t('quotas.tb.configIs', { ref: s.config_value }) : '',
      s.value && !s.in_catalog ? t('quotas.tb.notInCatalog') : '',
    ].filter(Boolean).join(' ');
    reset.hidden = s.source !== 'admin';
  }

  async function load() {
    try {
      const [s, imgs] = await Promise.all([api.get('/settings'), api.get('/images')]);
      show(s.tensorboard_image, imgs.items || []);
      msg.clear();
    } catch (err) { msg.error(err); }
  }

  const form = h('form', { class: 'form', novalidate: true, 'data-form': 'tensorboard' },
    field(t('quotas.tb.image'), select, t('quotas.tb.help')), status, msg.el,
    h('div', { class: 'actions' }, reset,
      h('button', { type: 'submit', class: 'btn btn-primary', 'data-action': 'tensorboard-save' }, t('quotas.save'))));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    msg.clear();
    busy(form, async () => {
      try {
        await api.put('/settings/tensorboard_image', { value: select.value });
        msg.success(t('quotas.saved'));
        await load();
      } catch (err) { msg.error(err); }
    });
  });
  reset.addEventListener('click', () => busy(form, async () => {
    try { await api.del('/settings/tensorboard_image'); msg.success(t('quotas.saved')); await load(); } catch (err) { msg.error(err); }
  }));
  load();

  return h('section', { class: 'card', 'aria-labelledby': 'tb-title', 'data-card': 'tensorboard' },
    h('h2', { id: 'tb-title' }, t('quotas.tb.heading')),
    h('p', { class: 'muted' }, t('quotas.tb.intro')),
    form);
}

export function render(main) {
  main.append(h('section', { class: 'page', 'data-page': 'admin-quotas' },
    h('div', { class: 'page-head' },
      h('h1', null, t('quotas.title')),
      h('p', { class: 'muted' }, t('quotas.intro'))),
    h('div', { class: 'grid' },
      defaultsCard(),
      usersCard(),
      idleCard(),
      tensorboardCard())));
}
