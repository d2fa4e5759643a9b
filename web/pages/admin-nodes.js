// pages/admin-nodes.js — Administration → Nodes: the Docker engines that run
// the containers, their health (polled every few seconds while the page is
// shown), versions and flags, and their GPUs. Admins register a node (unix
// socket, or tcp:// with client certificates), declare GPUs for a node
// without NVIDIA tooling (always marked simulated), drain, cordon or
// activate it, edit its labels, declared GPUs and CUDA version (read by GPU
// discovery from nvidia-smi unless the admin sets it), and remove it.
import { api } from '../api.js';
import { t, formatDate, formatNumber, getLanguage } from '../i18n.js';
import { h, field, messageBox, busy, confirmDialog, openDialog, emptyRow, toast, icon, dropdown, menuItem, uid, toastError } from '../ui.js';
import { stateBadge } from '../parts/node-state.js';
import { poll } from '../parts/poll.js';
import { keyedRows } from '../parts/keyed-rows.js';

const COLS = 8;
const POLL_MS = 5000;
const NAME_RE = /^[a-z0-9][a-z0-9._-]{0,62}$/;

function gib(n) {
  return t('nodes.gib', { n: new Intl.NumberFormat(getLanguage(), { maximumFractionDigits: 1 }).format(n) });
}

const memoryOf = (node) => (typeof node.memory_bytes === 'number' ? gib(node.memory_bytes / 1024 ** 3) : '—');
const gpuMemory = (mib) => (typeof mib === 'number' ? gib(mib / 1024) : '—');
const orDash = (v) => (v === null || v === undefined || v === '' ? '—' : String(v));
const CUDA_RE = /^\d{1,2}(\.\d{1,2}){0,2}$/;

// The node's CUDA version with where it comes from ('discovered' by
// nvidia-smi, or set by the admin); null when unknown.
function cudaInfo(n, long = false) {
  if (!n.cuda_version) return null;
  const source = n.cuda_source === 'admin' ? 'admin' : 'discovered';
  return h('span', { class: 'nowrap', 'data-cuda': n.cuda_version, 'data-cuda-source': source },
    t(long ? 'nodes.cudaLong' : 'nodes.cudaShort', { v: n.cuda_version }), ' ',
    h('span', { class: `badge ${source === 'admin' ? 'badge-warn' : 'badge-on'}`, title: t(`nodes.cudaSource.${source}.help`) },
      t(`nodes.cudaSource.${source}`)));
}

function flagBadge(flag) {
  const known = flag === 'runc_vulnerable' || flag === 'toolkit_vulnerable';
  return h('span', {
    class: 'badge badge-warn', 'data-flag': flag,
    title: known ? t(`nodes.flag.${flag}.help`) : null,
  }, known ? t(`nodes.flag.${flag}`) : flag);
}

function labelBadges(labels) {
  const entries = Object.entries(labels || {});
  if (!entries.length) return h('span', { class: 'muted' }, t('nodes.noLabels'));
  return entries.map(([k, v]) => h('span', { class: 'badge badge-label mono', 'data-label': k }, `${k}=${v}`));
}

// "key=value" lines → object; throws a translated message on a bad line.
function parseLabels(text) {
  const labels = {};
  text.split('\n').forEach((raw, i) => {
    const line = raw.trim();
    if (!line || line.startsWith('#')) return;
    const eq = line.indexOf('=');
    if (eq <= 0) throw new Error(t('nodes.badLabel', { line: i + 1 }));
    labels[line.slice(0, eq).trim()] = line.slice(eq + 1).trim();
  });
  return labels;
}

const labelsText = (labels) => Object.entries(labels || {}).map(([k, v]) => `${k}=${v}`).join('\n');

// The declared-GPUs editor: one row per GPU (model, memory in MiB, device
// files comma-separated). A new row starts with the model and memory of the
// row above, since a node's GPUs are usually all alike.
function gpuEditor(initial = []) {
  const rows = h('tbody');
  const empty = h('p', { class: 'muted gpu-editor-empty', 'data-empty': 'gpus' }, t('nodes.noDeclaredGpus'));
  const table = h('table', { class: 'table table-compact gpu-editor-table' },
    h('thead', null, h('tr', null,
      h('th', { scope: 'col' }, '#'),
      h('th', { scope: 'col' }, t('nodes.gpuModel')),
      h('th', { scope: 'col' }, t('nodes.gpuMemoryMib')),
      h('th', { scope: 'col' }, t('nodes.gpuDevices')),
      h('th', { scope: 'col' }, h('span', { class: 'visually-hidden' }, t('common.actions'))))),
    rows);

  function renumber() {
    [...rows.children].forEach((tr, i) => {
      tr.dataset.gpuRow = String(i);
      tr.querySelector('.gpu-n').textContent = String(i);
      tr.querySelector('[data-field=model]').setAttribute('aria-label', t('nodes.gpuModelN', { n: i }));
      tr.querySelector('[data-field=memory]').setAttribute('aria-label', t('nodes.gpuMemoryN', { n: i }));
      tr.querySelector('[data-field=devices]').setAttribute('aria-label', t('nodes.gpuDevicesN', { n: i }));
      tr.querySelector('[data-action=remove-gpu]').setAttribute('aria-label', t('nodes.removeGpuN', { n: i }));
    });
    table.hidden = rows.children.length === 0;
    empty.hidden = rows.children.length > 0;
  }

  function addRow(g = {}) {
    const last = rows.lastElementChild;
    const model = h('input', {
      type: 'text', 'data-field': 'model', autocomplete: 'off', spellcheck: 'false',
      placeholder: 'NVIDIA A100-SXM4-80GB',
      value: g.model ?? (last ? last.querySelector('[data-field=model]').value : ''),
    });
    const memory = h('input', {
      type: 'number', 'data-field': 'memory', min: 0, step: 1, inputmode: 'numeric', class: 'input-narrow',
      value: g.memory_mib ?? (last ? last.querySelector('[data-field=memory]').value : ''),
    });
    const devices = h('input', {
      type: 'text', 'data-field': 'devices', autocomplete: 'off', spellcheck: 'false', class: 'mono',
      placeholder: '/dev/nvidia0', value: (g.devices || []).join(', '),
    });
    const tr = h('tr', { 'data-uuid': g.uuid || null },
      h('td', { class: 'gpu-n muted' }),
      h('td', null, model),
      h('td', null, memory),
      h('td', null, devices),
      h('td', { class: 'cell-actions' }, h('button', {
        type: 'button', class: 'btn-icon', 'data-action': 'remove-gpu',
        onclick: () => {
          const next = tr.nextElementSibling || tr.previousElementSibling;
          tr.remove();
          renumber();
          (next?.querySelector('[data-field=model]') || addButton).focus();
        },
      }, '×')));
    rows.append(tr);
    renumber();
    return tr;
  }

  const addButton = h('button', {
    type: 'button', class: 'btn btn-small', 'data-action': 'add-gpu',
    onclick: () => addRow().querySelector(rows.children.length > 1 ? '[data-field=devices]' : '[data-field=model]').focus(),
  }, icon('plus', 14), t('nodes.addGpu'));

  for (const g of initial) addRow(g);
  renumber();

  // Reads the rows: { gpus } or throws a translated message. Rows left
  // entirely blank are skipped.
  function read() {
    const gpus = [];
    for (const tr of rows.children) {
      const i = Number(tr.dataset.gpuRow);
      const model = tr.querySelector('[data-field=model]').value.trim();
      const memRaw = tr.querySelector('[data-field=memory]').value.trim();
      const devices = tr.querySelector('[data-field=devices]').value.split(',').map((s) => s.trim()).filter(Boolean);
      if (!model && !memRaw && !devices.length) continue;
      if (!model) throw new Error(t('nodes.gpuModelRequired', { n: i }));
      if (!/^\d+$/.test(memRaw)) throw new Error(t('nodes.gpuMemoryInvalid', { n: i }));
      if (!devices.length) throw new Error(t('nodes.gpuDevicesRequired', { n: i }));
      const bad = devices.find((d) => !d.startsWith('/'));
      if (bad) throw new Error(t('nodes.gpuDevicePath', { n: i, path: bad }));
      const g = { model, memory_mib: Number(memRaw), devices };
      if (tr.dataset.uuid) g.uuid = tr.dataset.uuid;
      gpus.push(g);
    }
    return gpus;
  }

  const el = h('fieldset', { class: 'field gpu-editor', 'data-gpu-editor': '' },
    h('legend', null, t('nodes.declaredGpus')),
    h('p', { class: 'field-help' }, t('nodes.declaredGpusHelp')),
    empty,
    h('div', { class: 'table-wrap' }, table),
    h('div', null, addButton));
  return { el, read };
}

// A PEM field: a textarea and a file picker that reads the file into it.
function pemField(label, fileLabel, name, msg) {
  const text = h('textarea', { rows: 3, class: 'mono pem', spellcheck: 'false', autocomplete: 'off', 'data-pem': name, placeholder: '-----BEGIN …-----' });
  const file = h('input', { type: 'file', accept: '.pem,.crt,.key,.cer,text/plain', 'data-pem-file': name, 'aria-label': fileLabel, class: 'pem-file' });
  file.addEventListener('change', async () => {
    const f = file.files?.[0];
    if (!f) return;
    try { text.value = (await f.text()).trim() + '\n'; } catch (err) { msg.error(err); }
  });
  const f = field(label, text);
  f.append(file);
  return { el: f, text };
}

// ---- the page ----
//
// The page's state lives in one object handed to the functions below:
//   expanded  ids of the nodes whose detail row is open
//   rows      the table's rows by node id (keyedRows)
//   list      the polled GET /nodes (poll)
//   changed   after a change through the API (see render)

export function render(main) {
  const page = {
    expanded: new Set(),
    listMsg: messageBox(),
    tbody: h('tbody', null, emptyRow(COLS, t('common.loading'))),
    count: h('p', { class: 'muted table-count', 'data-node-count': '' }),
    loaded: false,
  };
  page.rows = keyedRows(page.tbody, {
    make: (n) => createRow(page, n),
    update: (r, n) => update(page, r, n),
    nodes: (r) => [r.tr, r.detail],
    gone: (r) => page.expanded.delete(r.node.id),
    empty: () => h('tr', { class: 'empty', 'data-empty': 'nodes' }, h('td', { colspan: COLS }, t('nodes.none'))),
  });
  // Show the node the server returned at once, then fetch the whole list.
  page.changed = (node) => {
    const r = node && page.rows.get(node.id);
    if (r) update(page, r, node);
    page.list.refresh();
  };
  main.append(view(page));
  page.list = poll(() => api.get('/nodes'), POLL_MS, {
    until: main,
    show: (reply) => show(page, reply?.items || []),
    fail: (err) => {
      if (!page.loaded) page.tbody.replaceChildren(emptyRow(COLS, '—'));
      page.listMsg.error(err);
    },
  });
}

// Keeps the server's order (by name); rows move only when it changed, so an
// open menu is not closed by a refresh.
function show(page, items) {
  page.loaded = true;
  page.rows.sync(items);
  page.listMsg.clear();
  page.count.textContent = t('nodes.count', { n: items.length, gpus: items.reduce((s, n) => s + (n.gpus?.length || 0), 0) });
}

// ---- rows ----

function createRow(page, n) {
  const detailId = uid('node-detail');
  const tr = h('tr', { 'data-node': n.name, 'data-id': n.id });
  const detailCell = h('td', { colspan: COLS });
  const detail = h('tr', { class: 'node-detail-row', id: detailId, 'data-node-detail': n.name, hidden: !page.expanded.has(n.id) }, detailCell);
  const toggle = h('button', {
    type: 'button', class: 'btn btn-small', 'data-action': 'details', 'aria-expanded': String(page.expanded.has(n.id)), 'aria-controls': detailId,
    onclick: () => {
      const open = detail.hidden;
      detail.hidden = !open;
      toggle.setAttribute('aria-expanded', String(open));
      if (open) page.expanded.add(r.node.id); else page.expanded.delete(r.node.id);
      if (open) fillDetail(r, true);
    },
  }, t('nodes.details'));
  const cells = h('td', { class: 'cell-actions' }, toggle, h('span', { class: 'menu-slot' }));
  const r = { page, node: n, tr, detail, detailCell, toggle, actionsCell: cells, rowKey: '', menuKey: '', detailKey: '' };
  update(page, r, n);
  return r;
}

function update(page, r, n) {
  r.node = n;
  r.tr.dataset.node = n.name;
  r.detail.dataset.nodeDetail = n.name;
  // The check time moves every few seconds and is not shown in the row.
  const rowKey = JSON.stringify({ ...n, last_seen_at: null });
  if (rowKey !== r.rowKey) {
    r.rowKey = rowKey;
    fillRow(r);
  }
  const menuKey = `${n.name}|${n.admin_state}|${n.degraded}`;
  if (menuKey !== r.menuKey) {
    r.menuKey = menuKey;
    r.actionsCell.querySelector('.menu-slot').replaceChildren(rowMenu(page, r));
  }
  if (!r.detail.hidden) fillDetail(r);
}

function fillRow(r) {
  const n = r.node;
  const gpus = n.gpus || [];
  const models = [...new Set(gpus.map((g) => g.model))];
  const simulated = gpus.some((g) => g.simulated);
  const versions = [];
  if (n.engine_version) versions.push(h('span', { class: 'nowrap', 'data-version': 'engine' }, t('nodes.engineShort', { v: n.engine_version })));
  if (n.runc_version) versions.push(h('span', { class: 'nowrap', 'data-version': 'runc' }, t('nodes.runcShort', { v: n.runc_version })));
  const cuda = cudaInfo(n);
  if (cuda) versions.push(cuda);
  const stateCell = h('td', { class: 'nowrap' }, stateBadge(n.state));
  if (n.admin_state && n.admin_state !== 'active' && n.state !== n.admin_state) stateCell.append(stateBadge(n.admin_state));
  if (n.last_error && n.state !== 'up') stateCell.title = n.last_error;
  // degraded: the engine's words under the badge (it answers, so last_error is empty)
  if (n.degraded) {
    stateCell.title = n.start_error;
    stateCell.append(h('div', { class: 'cell-sub node-degraded-msg', 'data-degraded': '' }, n.start_error));
  }
  const cells = [
    h('td', null, h('strong', { class: 'mono' }, n.name),
      Object.keys(n.labels || {}).length ? h('div', { class: 'cell-sub' }, labelBadges(n.labels)) : null),
    stateCell,
    h('td', { class: 'mono cell-url', 'data-field': 'url' }, n.url, n.tls ? h('span', { class: 'badge badge-tls' }, 'TLS') : null),
    h('td', { class: 'num', 'data-field': 'ncpu' }, n.ncpu == null ? '—' : formatNumber(n.ncpu)),
    h('td', { class: 'num nowrap', 'data-field': 'memory' }, memoryOf(n)),
    h('td', { 'data-field': 'versions' },
      versions.length ? h('div', { class: 'stack' }, versions) : h('span', { class: 'muted' }, '—'),
      (n.flags || []).length ? h('div', { class: 'cell-sub' }, n.flags.map(flagBadge)) : null),
    h('td', { 'data-field': 'gpus' },
      h('strong', { 'data-gpu-count': gpus.length }, formatNumber(gpus.length)),
      models.length ? h('div', { class: 'cell-sub muted' }, models.join(', ')) : null,
      simulated ? h('div', { class: 'cell-sub' }, h('span', { class: 'badge badge-sim' }, t('nodes.simulated'))) : null),
  ];
  // The actions cell stays in place: taking it out would close its menu.
  if (r.actionsCell.parentNode !== r.tr) r.tr.append(r.actionsCell);
  while (r.tr.firstChild !== r.actionsCell) r.tr.firstChild.remove();
  r.actionsCell.before(...cells);
}

function rowMenu(page, r) {
  const n = r.node;
  const stateItem = (s, label, danger = false) => menuItem({
    label, action: s === 'active' ? 'activate' : s === 'draining' ? 'drain' : 'cordon', danger,
    disabled: n.admin_state === s, onclick: () => setState(page, r, s),
  });
  return dropdown({
    className: 'btn-icon btn-more',
    label: t('nodes.actionsFor', { name: n.name }),
    attrs: { 'data-action': 'row-menu' },
    content: '⋯',
    items: [
      stateItem('active', t('nodes.activate')),
      stateItem('draining', t('nodes.drain')),
      stateItem('cordoned', t('nodes.cordon')),
      n.degraded ? menuItem({ label: t('nodes.clearDegraded'), action: 'clear-degraded', onclick: () => clearDegraded(page, r) }) : null,
      menuItem({ label: t('nodes.edit'), action: 'edit', onclick: () => editDialog(page, r) }),
      menuItem({ label: t('nodes.remove'), action: 'remove', danger: true, onclick: () => removeNode(page, r) }),
    ],
  });
}

function fillDetail(r, force = false) {
  const n = r.node;
  const key = JSON.stringify(n);
  if (!force && key === r.detailKey) return;
  r.detailKey = key;
  const gpus = n.gpus || [];
  const props = [
    [t('nodes.engineVersion'), orDash(n.engine_version), 'engine_version'],
    [t('nodes.apiVersion'), orDash(n.api_version), 'api_version'],
    [t('nodes.runcVersion'), orDash(n.runc_version), 'runc_version'],
    [t('nodes.toolkitVersion'), orDash(n.toolkit_version), 'toolkit_version'],
    [t('nodes.cudaVersion'), h('span', null, cudaInfo(n, true) || t('nodes.cudaUnknown'),
      n.cuda_source === 'admin' && n.cuda_discovered
        ? h('div', { class: 'cell-sub muted', 'data-cuda-discovered': n.cuda_discovered }, t('nodes.cudaDiscovered', { v: n.cuda_discovered }))
        : null), 'cuda_version'],
    [t('nodes.runtimes'), (n.runtimes || []).length ? n.runtimes.join(', ') : '—', 'runtimes'],
    [t('nodes.os'), [n.os, n.kernel].filter(Boolean).join(' · ') || '—', 'os'],
    [t('nodes.connection'), n.tls ? t('nodes.connTls') : n.url?.startsWith('unix://') ? t('nodes.connUnix') : '—', 'tls'],
    [t('nodes.lastSeen'), n.last_seen_at ? h('time', { datetime: n.last_seen_at }, formatDate(n.last_seen_at)) : t('nodes.never'), 'last_seen_at'],
    n.down_since ? [t('nodes.downSince'), h('time', { datetime: n.down_since }, formatDate(n.down_since)), 'down_since'] : null,
    n.degraded_since ? [t('nodes.degradedSince'), h('time', { datetime: n.degraded_since }, formatDate(n.degraded_since)), 'degraded_since'] : null,
    n.start_failures ? [t('nodes.startFailures'), formatNumber(n.start_failures), 'start_failures'] : null,
    [t('nodes.created'), h('time', { datetime: n.created_at }, formatDate(n.created_at)), 'created_at'],
    [t('nodes.labels'), h('span', null, labelBadges(n.labels)), 'labels'],
  ].filter(Boolean);
  const flags = (n.flags || []).map((f) => h('p', { class: 'warning', 'data-flag-note': f }, flagBadge(f), ' ',
    f === 'runc_vulnerable' || f === 'toolkit_vulnerable' ? t(`nodes.flag.${f}.help`) : f));
  const gpuTable = gpus.length
    ? h('div', { class: 'table-wrap' }, h('table', { class: 'table table-compact', 'data-table': 'gpus' },
      h('thead', null, h('tr', null,
        h('th', { scope: 'col' }, t('nodes.gpuIndex')),
        h('th', { scope: 'col' }, t('nodes.gpuModel')),
        h('th', { scope: 'col' }, t('nodes.gpuMemory')),
        h('th', { scope: 'col' }, t('nodes.gpuUuid')),
        h('th', { scope: 'col' }, t('nodes.gpuKind')),
        h('th', { scope: 'col' }, t('nodes.gpuDevices')))),
      h('tbody', null, gpus.map((g) => h('tr', { 'data-gpu': g.index, 'data-uuid': g.uuid },
        h('td', { class: 'num' }, String(g.index)),
        h('td', { class: 'nowrap' }, g.model),
        h('td', { class: 'num nowrap' }, gpuMemory(g.memory_mib)),
        h('td', { class: 'mono cell-uuid' }, g.uuid),
        h('td', null,
          g.simulated
            ? h('span', { class: 'badge badge-sim', 'data-simulated': '', title: t('nodes.simulatedHelp') }, t('nodes.simulated'))
            : h('span', { class: 'badge badge-on', 'data-discovered': '' }, t('nodes.discovered')),
          g.mig_enabled ? h('span', { class: 'badge' }, 'MIG') : null),
        h('td', { class: 'mono cell-devices', 'data-devices': '' }, (g.devices || []).length ? g.devices.join(', ') : '—'))))))
    : h('p', { class: 'muted', 'data-empty': 'gpus' }, t('nodes.noGpus'));
  r.detailCell.replaceChildren(h('div', { class: 'node-detail' },
    n.last_error ? h('div', { class: 'msg msg-error', 'data-last-error': '' }, h('strong', null, t('nodes.lastError')), ' ', n.last_error) : null,
    n.degraded ? h('div', { class: 'msg msg-error', 'data-degraded-note': '' },
      h('p', null, h('strong', null, t('nodes.degradedTitle')), ' ', t('nodes.degradedHelp', { n: n.start_failures })),
      h('p', null, t('nodes.degradedMessage'), ' ', h('span', { class: 'mono', 'data-start-error': '' }, n.start_error)),
      h('button', { type: 'button', class: 'btn btn-small', 'data-action': 'clear-degraded', onclick: () => clearDegraded(r.page, r) }, t('nodes.clearDegraded'))) : null,
    flags,
    h('div', { class: 'node-detail-grid' },
      h('section', { 'aria-label': t('nodes.engine') },
        h('h3', null, t('nodes.engine')),
        h('dl', { class: 'props-tiles' }, props.map(([k, v, name]) => h('div', null, h('dt', null, k), h('dd', { 'data-prop': name }, v))))),
      h('section', { 'aria-label': t('nodes.gpus') },
        h('h3', null, t('nodes.gpusOf', { n: gpus.length })),
        gpus.some((g) => g.simulated) ? h('p', { class: 'field-help' }, t('nodes.simulatedHelp')) : null,
        gpuTable))));
}

// ---- actions ----

async function setState(page, r, state) {
  const n = r.node;
  try {
    const updated = await api.patch(`/nodes/${encodeURIComponent(n.id)}`, { state });
    toast(t(`nodes.stateDone.${state}`, { name: n.name }));
    page.changed(updated);
  } catch (err) {
    toastError(err);
  }
}

async function clearDegraded(page, r) {
  const n = r.node;
  try {
    const updated = await api.post(`/nodes/${encodeURIComponent(n.id)}/clear-degraded`);
    toast(t('nodes.clearedDegraded', { name: n.name }));
    page.changed(updated);
  } catch (err) {
    toastError(err);
  }
}

async function removeNode(page, r) {
  const n = r.node;
  const ok = await confirmDialog({
    title: t('nodes.removeTitle'), message: t('nodes.removeConfirm', { name: n.name }),
    confirmLabel: t('nodes.remove'), danger: true,
  });
  if (!ok) return;
  try {
    await api.del(`/nodes/${encodeURIComponent(n.id)}`);
    toast(t('nodes.removed', { name: n.name }));
    page.changed(null);
  } catch (err) {
    toastError(err);
  }
}

function addDialog(page) {
  return openDialog({
    title: t('nodes.addTitle'),
    wide: true,
    build: (close) => {
      const msg = messageBox();
      const name = h('input', { id: 'node-name', type: 'text', required: true, autocomplete: 'off', autocapitalize: 'none', spellcheck: 'false', maxlength: 63 });
      const url = h('input', { id: 'node-url', type: 'text', required: true, autocomplete: 'off', autocapitalize: 'none', spellcheck: 'false', class: 'mono', placeholder: 'unix:///var/run/docker.sock' });
      const ca = pemField(t('nodes.tlsCa'), t('nodes.tlsCaFile'), 'ca', msg);
      const cert = pemField(t('nodes.tlsCert'), t('nodes.tlsCertFile'), 'cert', msg);
      const key = pemField(t('nodes.tlsKey'), t('nodes.tlsKeyFile'), 'key', msg);
      const tls = h('fieldset', { class: 'field tls-fields', 'data-tls': '', hidden: true },
        h('legend', null, t('nodes.tls')),
        h('p', { class: 'field-help' }, t('nodes.tlsHelp')),
        ca.el, cert.el, key.el);
      const syncTls = () => { tls.hidden = !url.value.trim().startsWith('tcp://'); };
      url.addEventListener('input', syncTls);
      const labels = h('textarea', { id: 'node-labels', rows: 3, class: 'mono', spellcheck: 'false', placeholder: 'zone=lab-a\nrack=r12' });
      const gpus = gpuEditor();
      const form = h('form', { class: 'form', 'data-form': 'add-node', novalidate: true },
        h('div', { class: 'form-inline-wide' },
          field(t('nodes.name'), name, t('nodes.nameHelp')),
          field(t('nodes.url'), url, t('nodes.urlHelp'))),
        tls,
        field(t('nodes.labelsField'), labels, t('nodes.labelsHelp')),
        gpus.el,
        msg.el,
        h('div', { class: 'actions' },
          h('button', { type: 'button', class: 'btn', onclick: () => close() }, t('common.cancel')),
          h('button', { type: 'submit', class: 'btn btn-primary', 'data-action': 'add-node' }, t('nodes.add'))));
      form.addEventListener('submit', async (e) => {
        e.preventDefault();
        msg.clear();
        const payload = { name: name.value.trim(), url: url.value.trim() };
        if (!NAME_RE.test(payload.name)) { msg.error(t('nodes.nameInvalid')); name.focus(); return; }
        const tcp = payload.url.startsWith('tcp://');
        if (!tcp && !payload.url.startsWith('unix:///')) { msg.error(t('nodes.urlInvalid')); url.focus(); return; }
        if (tcp) {
          const pems = [ca, cert, key];
          const missing = pems.find((p) => !p.text.value.trim());
          if (missing) { msg.error(t('nodes.tlsRequired')); missing.text.focus(); return; }
          payload.tls_ca = ca.text.value;
          payload.tls_cert = cert.text.value;
          payload.tls_key = key.text.value;
        }
        try {
          const l = parseLabels(labels.value);
          if (Object.keys(l).length) payload.labels = l;
          const g = gpus.read();
          if (g.length) payload.gpus = g;
        } catch (err) {
          msg.error(err.message);
          return;
        }
        msg.success(t('nodes.contacting', { url: payload.url }));
        await busy(form, async () => {
          try {
            const node = await api.post('/nodes', payload);
            toast(t('nodes.added', { name: node?.name || payload.name }));
            if (node?.id !== undefined) page.expanded.add(node.id);
            page.changed(null);
            close(node);
          } catch (err) {
            msg.error(err);
          }
        });
      });
      return form;
    },
  });
}

function editDialog(page, r) {
  const n = r.node;
  const declared = (n.gpus || []).filter((g) => g.simulated);
  const discovered = (n.gpus || []).length - declared.length;
  return openDialog({
    title: t('nodes.editTitle', { name: n.name }),
    wide: true,
    build: (close) => {
      const msg = messageBox();
      const labels = h('textarea', { id: 'edit-node-labels', rows: 3, class: 'mono', spellcheck: 'false', value: labelsText(n.labels) });
      // Empty = what discovery reads; the admin's value overrides it.
      const cudaBefore = n.cuda_source === 'admin' ? n.cuda_version : '';
      const cuda = h('input', {
        id: 'edit-node-cuda', type: 'text', 'data-field': 'cuda', autocomplete: 'off', spellcheck: 'false',
        inputmode: 'decimal', class: 'input-narrow', maxlength: 16, value: cudaBefore,
        placeholder: n.cuda_discovered || '12.4',
      });
      const cudaHelp = n.cuda_discovered ? t('nodes.cudaHelpDiscovered', { v: n.cuda_discovered }) : t('nodes.cudaHelp');
      const gpus = gpuEditor(declared);
      const before = JSON.stringify(gpus.read());
      const form = h('form', { class: 'form', 'data-form': 'edit-node', novalidate: true },
        field(t('nodes.labelsField'), labels, t('nodes.labelsHelp')),
        field(t('nodes.cudaVersion'), cuda, cudaHelp),
        gpus.el,
        discovered ? h('p', { class: 'muted' }, t('nodes.discoveredKept', { count: discovered })) : null,
        msg.el,
        h('div', { class: 'actions' },
          h('button', { type: 'button', class: 'btn', onclick: () => close() }, t('common.cancel')),
          h('button', { type: 'submit', class: 'btn btn-primary', 'data-action': 'save-node' }, t('nodes.save'))));
      form.addEventListener('submit', async (e) => {
        e.preventDefault();
        msg.clear();
        const payload = {};
        const c = cuda.value.trim();
        if (c && !CUDA_RE.test(c)) { msg.error(t('nodes.cudaInvalid')); cuda.focus(); return; }
        if (c !== cudaBefore) payload.cuda_version = c; // "" = back to the discovered version
        try {
          payload.labels = parseLabels(labels.value);
          const g = gpus.read();
          // Declared GPUs are replaced as a whole: send them only when edited.
          if (JSON.stringify(g) !== before) payload.gpus = g;
        } catch (err) {
          msg.error(err.message);
          return;
        }
        await busy(form, async () => {
          try {
            const updated = await api.patch(`/nodes/${encodeURIComponent(n.id)}`, payload);
            toast(t('nodes.saved', { name: n.name }));
            page.changed(updated);
            close(updated);
          } catch (err) {
            msg.error(err);
          }
        });
      });
      return form;
    },
  });
}

function view(page) {
  return h('section', { class: 'page' },
    h('div', { class: 'page-head page-head-row' },
      h('div', { class: 'page-head-text' },
        h('h1', null, t('nodes.title')),
        h('p', { class: 'muted' }, t('nodes.intro'))),
      h('div', { class: 'toolbar' },
        h('button', { type: 'button', class: 'btn btn-primary', 'data-action': 'open-add-node', onclick: () => addDialog(page) }, icon('plus', 16), t('nodes.add')))),
    h('div', { class: 'card card-flush' },
      h('div', { class: 'card-toolbar' }, page.count,
        h('button', { type: 'button', class: 'btn btn-small', 'data-action': 'refresh', onclick: () => page.list.refresh() }, t('nodes.refresh'))),
      page.listMsg.el,
      h('div', { class: 'table-wrap' }, h('table', { class: 'table', 'data-table': 'nodes' },
        h('thead', null, h('tr', null,
          h('th', { scope: 'col' }, t('nodes.name')),
          h('th', { scope: 'col' }, t('nodes.state')),
          h('th', { scope: 'col' }, t('nodes.url')),
          h('th', { scope: 'col', class: 'num' }, t('nodes.cpus')),
          h('th', { scope: 'col', class: 'num' }, t('nodes.memory')),
          h('th', { scope: 'col' }, t('nodes.versions')),
          h('th', { scope: 'col' }, t('nodes.gpus')),
          h('th', { scope: 'col' }, h('span', { class: 'visually-hidden' }, t('common.actions'))))),
        page.tbody))));
}

