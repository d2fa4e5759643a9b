// pages/admin-pools.js — Administration → Pools: GPU pools group GPUs by
// model or purpose, each with a sharing mode (whole GPUs, or N slots per GPU
// with a memory share). Admins create a pool, edit its description and
// per-slot memory, choose its GPUs from every node's (the membership is set
// as a whole; a GPU is in one pool at most) and delete it. The list is
// polled every few seconds while shown, since capacity follows node health.
import { api } from '../api.js';
import { t, formatNumber } from '../i18n.js';
import { h, field, messageBox, busy, confirmDialog, openDialog, emptyRow, toast, icon, dropdown, menuItem, uid, toastError } from '../ui.js';
import { stateBadge } from '../parts/node-state.js';
import { sharingBadge, sharingDetail, memoryCapNote, simulatedBadge, memoryText } from '../parts/pool.js';
import { poll } from '../parts/poll.js';
import { keyedRows } from '../parts/keyed-rows.js';

const COLS = 6;
const POLL_MS = 5000;
const NAME_RE = /^[a-z0-9][a-z0-9._-]{0,62}$/;
const MAX_SLOTS = 64;

const isWhole = (s) => /^\d+$/.test(s);

// ---- the page ----
//
// The page's state lives in one object handed to the functions below:
//   rows     the table's rows by pool id (keyedRows)
//   list     the polled GET /pools (poll)
//   changed  after a change through the API (see render)

export function render(main) {
  const page = {
    listMsg: messageBox(),
    tbody: h('tbody', null, emptyRow(COLS, t('common.loading'))),
    count: h('p', { class: 'muted table-count', 'data-pool-count': '' }),
    loaded: false,
  };
  page.rows = keyedRows(page.tbody, {
    make: (p) => createRow(page, p),
    update: (r, p) => update(page, r, p),
    nodes: (r) => [r.tr],
    empty: () => h('tr', { class: 'empty', 'data-empty': 'pools' }, h('td', { colspan: COLS }, t('pools.none'))),
  });
  // Show the pool the server returned at once, then fetch the whole list.
  page.changed = (pool) => {
    const r = pool && page.rows.get(pool.id);
    if (r) update(page, r, pool);
    page.list.refresh();
  };
  main.append(view(page));
  page.list = poll(() => api.get('/pools'), POLL_MS, {
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
  page.count.textContent = t('pools.count', { n: formatNumber(items.length), gpus: formatNumber(items.reduce((s, p) => s + (p.gpus || 0), 0)) });
}

// ---- rows ----

function createRow(page, p) {
  const tr = h('tr', { 'data-pool': p.name, 'data-id': p.id });
  const gpusButton = h('button', { type: 'button', class: 'btn btn-small', 'data-action': 'gpus', onclick: () => gpusDialog(page, r.pool) }, t('pools.gpusButton'));
  const actionsCell = h('td', { class: 'cell-actions' }, gpusButton, h('span', { class: 'menu-slot' }));
  const r = { pool: p, tr, actionsCell, rowKey: '', menuKey: '' };
  update(page, r, p);
  return r;
}

function update(page, r, p) {
  r.pool = p;
  r.tr.dataset.pool = p.name;
  const rowKey = JSON.stringify(p);
  if (rowKey !== r.rowKey) {
    r.rowKey = rowKey;
    fillRow(r);
  }
  const menuKey = p.name;
  if (menuKey !== r.menuKey) {
    r.menuKey = menuKey;
    r.actionsCell.querySelector('.menu-slot').replaceChildren(rowMenu(page, r));
  }
}

function fillRow(r) {
  const p = r.pool;
  const nodes = (p.nodes || []).map((n) => n.node);
  const cells = [
    h('td', null, h('strong', { class: 'mono' }, p.name),
      p.description ? h('div', { class: 'cell-sub muted', 'data-field': 'description' }, p.description) : null),
    h('td', { 'data-field': 'sharing' },
      sharingBadge(p),
      h('div', { class: 'cell-sub' }, sharingDetail(p)),
      p.memory_cap ? h('div', { class: 'cell-sub' }, memoryCapNote(p)) : null),
    h('td', { 'data-field': 'gpus' },
      h('strong', { 'data-gpu-count': p.gpus || 0 }, formatNumber(p.gpus || 0)),
      (p.models || []).length ? h('div', { class: 'cell-sub muted' }, p.models.join(', ')) : null,
      p.simulated ? h('div', { class: 'cell-sub' }, simulatedBadge(p)) : null),
    h('td', { 'data-field': 'nodes' }, nodes.length ? h('span', { class: 'mono' }, nodes.join(', ')) : h('span', { class: 'muted' }, '—')),
    h('td', { class: 'nowrap', 'data-field': 'slices', 'data-free': p.free_slices, 'data-schedulable': p.schedulable_slices, 'data-slices': p.slices },
      t('pools.slicesCell', { free: formatNumber(p.free_slices || 0), sched: formatNumber(p.schedulable_slices || 0) }),
      h('div', { class: 'cell-sub muted' }, t('pools.slicesTotal', { n: formatNumber(p.slices || 0) }))),
  ];
  // The actions cell stays in place: taking it out would close its menu.
  if (r.actionsCell.parentNode !== r.tr) r.tr.append(r.actionsCell);
  while (r.tr.firstChild !== r.actionsCell) r.tr.firstChild.remove();
  r.actionsCell.before(...cells);
}

function rowMenu(page, r) {
  const p = r.pool;
  return dropdown({
    className: 'btn-icon btn-more',
    label: t('pools.actionsFor', { name: p.name }),
    attrs: { 'data-action': 'row-menu' },
    content: '⋯',
    items: [
      menuItem({ label: t('pools.gpusButton'), action: 'gpus', onclick: () => gpusDialog(page, r.pool) }),
      menuItem({ label: t('pools.edit'), action: 'edit', onclick: () => editDialog(page, r.pool) }),
      menuItem({ label: t('pools.delete'), action: 'delete', danger: true, onclick: () => deletePool(page, r.pool) }),
    ],
  });
}

// ---- create ----

function createDialog(page) {
  return openDialog({
    title: t('pools.createTitle'),
    build: (close) => {
      const msg = messageBox();
      const name = h('input', { id: 'pool-name', type: 'text', required: true, autocomplete: 'off', autocapitalize: 'none', spellcheck: 'false', maxlength: 63, placeholder: 'a100-train' });
      const desc = h('input', { id: 'pool-description', type: 'text', autocomplete: 'off', maxlength: 500 });
      const group = uid('sharing');
      const choice = (value, label, help, disabled = false, title = null) => {
        const input = h('input', { id: uid('sharing'), type: 'radio', name: group, value, checked: value === 'exclusive', disabled, 'data-sharing-choice': value });
        const helpEl = h('p', { class: 'field-help', id: `${input.id}-help` }, help);
        input.setAttribute('aria-describedby', helpEl.id);
        return h('div', { class: `choice${disabled ? ' choice-disabled' : ''}`, title },
          input,
          h('div', { class: 'choice-text' }, h('label', { for: input.id, class: 'choice-label' }, label), helpEl));
      };
      const slots = h('input', { id: 'pool-slots', type: 'number', min: 1, max: MAX_SLOTS, step: 1, inputmode: 'numeric', class: 'input-narrow', value: '4' });
      const mem = h('input', { id: 'pool-memory', type: 'number', min: 1, step: 1, inputmode: 'numeric', class: 'input-narrow' });
      const preview = h('p', { class: 'field-help', 'aria-live': 'polite', 'data-shared-preview': '' });
      const shared = h('fieldset', { class: 'field shared-fields', 'data-shared-fields': '', hidden: true },
        h('legend', null, t('pools.sharedSettings')),
        h('div', { class: 'form-inline-wide' },
          field(t('pools.slotsPerGpu'), slots, t('pools.slotsHelp', { max: MAX_SLOTS })),
          field(t('pools.memoryPerSlot'), mem, t('pools.memoryHelp'))),
        preview);
      const sharingSet = h('fieldset', { class: 'field sharing-choices' },
        h('legend', null, t('pools.sharingLabel')),
        choice('exclusive', t('pools.sharing.exclusive'), t('pools.exclusiveHelp')),
        choice('shared', t('pools.sharing.shared'), t('pools.sharedHelp')),
        choice('mig', t('pools.sharing.mig'), `${t('pools.migHelp')} ${t('pools.migSlices')}`));
      const sharing = () => sharingSet.querySelector('input:checked')?.value || 'exclusive';
      const sync = () => {
        shared.hidden = sharing() !== 'shared';
        const s = slots.value.trim(), m = mem.value.trim();
        preview.textContent = isWhole(s) && isWhole(m) && Number(s) > 0 && Number(m) > 0
          ? t('pools.sharedPreview', { detail: t('pools.sharedDetail', { slots: formatNumber(Number(s)), mem: memoryText(Number(m)) }) })
          : '';
      };
      sharingSet.addEventListener('change', sync);
      slots.addEventListener('input', sync);
      mem.addEventListener('input', sync);
      const form = h('form', { class: 'form', 'data-form': 'create-pool', novalidate: true },
        field(t('pools.name'), name, t('pools.nameHelp')),
        field(t('pools.description'), desc),
        sharingSet,
        shared,
        msg.el,
        h('div', { class: 'actions' },
          h('button', { type: 'button', class: 'btn', onclick: () => close() }, t('common.cancel')),
          h('button', { type: 'submit', class: 'btn btn-primary', 'data-action': 'create-pool' }, t('pools.create'))));
      form.addEventListener('submit', async (e) => {
        e.preventDefault();
        msg.clear();
        const payload = { name: name.value.trim(), sharing: sharing() };
        if (!NAME_RE.test(payload.name)) { msg.error(t('pools.nameInvalid')); name.focus(); return; }
        if (desc.value.trim()) payload.description = desc.value.trim();
        if (payload.sharing === 'shared') {
          const s = slots.value.trim(), m = mem.value.trim();
          if (!isWhole(s) || Number(s) < 1 || Number(s) > MAX_SLOTS) { msg.error(t('pools.slotsInvalid', { max: MAX_SLOTS })); slots.focus(); return; }
          if (!isWhole(m) || Number(m) < 1) { msg.error(t('pools.memoryInvalid')); mem.focus(); return; }
          payload.slots_per_gpu = Number(s);
          payload.memory_per_slot_mib = Number(m);
        }
        await busy(form, async () => {
          try {
            const pool = await api.post('/pools', payload);
            toast(t('pools.created', { name: pool?.name || payload.name }));
            page.changed(null);
            close(pool);
          } catch (err) {
            msg.error(err);
          }
        });
      });
      sync();
      return form;
    },
  });
}

// ---- edit ----

function editDialog(page, p) {
  return openDialog({
    title: t('pools.editTitle', { name: p.name }),
    build: (close) => {
      const msg = messageBox();
      const desc = h('input', { id: 'edit-pool-description', type: 'text', autocomplete: 'off', maxlength: 500, value: p.description || '' });
      const isShared = p.sharing === 'shared';
      const mem = isShared
        ? h('input', { id: 'edit-pool-memory', type: 'number', min: 1, step: 1, inputmode: 'numeric', class: 'input-narrow', value: p.memory_per_slot_mib == null ? '' : String(p.memory_per_slot_mib) })
        : null;
      const form = h('form', { class: 'form', 'data-form': 'edit-pool', novalidate: true },
        h('dl', { class: 'props' },
          h('dt', null, t('pools.sharingLabel')),
          h('dd', null, sharingBadge(p), ' ', sharingDetail(p))),
        h('p', { class: 'field-help' }, t('pools.fixedSettings')),
        field(t('pools.description'), desc),
        mem ? field(t('pools.memoryPerSlot'), mem, t('pools.memoryHelp')) : null,
        msg.el,
        h('div', { class: 'actions' },
          h('button', { type: 'button', class: 'btn', onclick: () => close() }, t('common.cancel')),
          h('button', { type: 'submit', class: 'btn btn-primary', 'data-action': 'save-pool' }, t('pools.save'))));
      form.addEventListener('submit', async (e) => {
        e.preventDefault();
        msg.clear();
        const payload = {};
        if (desc.value.trim() !== (p.description || '')) payload.description = desc.value.trim();
        if (mem) {
          const m = mem.value.trim();
          if (!isWhole(m) || Number(m) < 1) { msg.error(t('pools.memoryInvalid')); mem.focus(); return; }
          if (Number(m) !== p.memory_per_slot_mib) payload.memory_per_slot_mib = Number(m);
        }
        if (!Object.keys(payload).length) { close(); return; }
        await busy(form, async () => {
          try {
            const updated = await api.patch(`/pools/${encodeURIComponent(p.id)}`, payload);
            toast(t('pools.saved', { name: p.name }));
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

// ---- membership ----

// Every GPU of every node, with a checkbox; the pool a GPU is in comes from
// the pools list (the nodes API does not say). GPUs of another pool can be
// ticked: the server refuses the change and says which.
function gpusDialog(page, p) {
  return openDialog({
    title: t('pools.gpusTitle', { name: p.name }),
    wide: 'x',
    build: (close) => {
      const msg = messageBox();
      const body = h('div', { class: 'pool-gpus-body' }, h('p', { class: 'muted' }, t('common.loading')));
      const selected = h('p', { class: 'muted pool-gpus-count', 'data-selected-count': '', 'aria-live': 'polite' });
      const save = h('button', { type: 'submit', class: 'btn btn-primary', 'data-action': 'save-gpus', disabled: true }, t('pools.saveGpus'));
      const form = h('form', { class: 'form', 'data-form': 'pool-gpus', novalidate: true },
        h('p', { class: 'field-help' }, t('pools.gpusIntro')),
        body,
        msg.el,
        h('div', { class: 'actions actions-spread' },
          selected,
          h('div', { class: 'actions' },
            h('button', { type: 'button', class: 'btn', onclick: () => close() }, t('common.cancel')),
            save)));
      const boxes = [];          // { input, gpu, node, tr }
      const nodeBoxes = [];      // { input, items }
      let poolOf = new Map();    // gpu id → { id, name }

      // A GPU the node's checkbox may tick: free, or in this pool already.
      const eligible = (b) => { const other = poolOf.get(b.gpu.id); return !other || other.id === p.id; };
      const countText = () => {
        const n = boxes.filter((b) => b.input.checked).length;
        selected.textContent = t('pools.selected', { n: formatNumber(n), slices: formatNumber(n * (p.slots_per_gpu || 1)) });
        for (const nb of nodeBoxes) {
          const free = nb.items.filter(eligible);
          const on = free.filter((b) => b.input.checked).length;
          nb.input.disabled = free.length === 0;
          nb.input.checked = free.length > 0 && on === free.length;
          nb.input.indeterminate = on > 0 && on < free.length;
        }
      };

      function poolCell(g) {
        const other = poolOf.get(g.id);
        if (!other) return h('span', { class: 'muted', 'data-pool-of': '' }, t('pools.noPool'));
        if (other.id === p.id) return h('span', { class: 'badge badge-on', 'data-pool-of': other.name }, t('pools.thisPool'));
        return h('span', { class: 'badge badge-warn', 'data-pool-of': other.name, title: t('pools.inOtherPool', { name: other.name }) }, other.name);
      }

      // Marks ticked GPUs of another pool; returns them.
      function markConflicts() {
        const found = [];
        for (const b of boxes) {
          const other = poolOf.get(b.gpu.id);
          const conflict = b.input.checked && other && other.id !== p.id;
          b.tr.classList.toggle('row-conflict', Boolean(conflict));
          if (conflict) {
            b.tr.dataset.conflict = '';
            found.push(t('pools.conflictGpu', { node: b.node.name, index: b.gpu.index, pool: other.name }));
          } else delete b.tr.dataset.conflict;
          b.tr.querySelector('.pool-of-cell').replaceChildren(poolCell(b.gpu));
        }
        return found;
      }

      async function fetchMembership() {
        const reply = await api.get('/pools');
        const map = new Map();
        for (const pool of reply?.items || []) {
          for (const n of pool.nodes || []) for (const g of n.gpus || []) map.set(g.id, { id: pool.id, name: pool.name });
        }
        return map;
      }

      function table(nodes) {
        const rows = [];
        for (const n of nodes) {
          const gpus = n.gpus || [];
          if (!gpus.length) continue;
          const items = [];
          const all = h('input', {
            type: 'checkbox', 'data-select-node': n.name, 'aria-label': t('pools.selectNode', { node: n.name }),
            onchange: (e) => {
              for (const b of items) if (eligible(b)) b.input.checked = e.target.checked;
              countText();
            },
          });
          nodeBoxes.push({ input: all, items });
          rows.push(h('tr', { class: 'group-row', 'data-node-group': n.name },
            h('td', { class: 'cell-check' }, all),
            h('th', { scope: 'colgroup', colspan: 5 },
              h('span', { class: 'mono' }, n.name), ' ', stateBadge(n.state),
              h('span', { class: 'muted group-sub' }, t('pools.nodeGpus', { count: gpus.length })))));
          for (const g of gpus) {
            const other = poolOf.get(g.id);
            const input = h('input', {
              type: 'checkbox', value: g.id, checked: Boolean(other && other.id === p.id),
              'aria-label': t('pools.gpuCheck', { node: n.name, index: g.index }),
              onchange: countText,
            });
            const tr = h('tr', { 'data-gpu-id': g.id, 'data-node': n.name, 'data-gpu': g.index, 'data-uuid': g.uuid },
              h('td', { class: 'cell-check' }, input),
              h('td', { class: 'num' }, String(g.index)),
              h('td', { class: 'nowrap' }, g.model, h('div', { class: 'cell-sub muted mono cell-uuid' }, g.uuid)),
              h('td', { class: 'num nowrap' }, typeof g.memory_mib === 'number' ? memoryText(g.memory_mib) : '—'),
              h('td', null, g.simulated
                ? h('span', { class: 'badge badge-sim', 'data-simulated': '', title: t('nodes.simulatedHelp') }, t('nodes.simulated'))
                : h('span', { class: 'badge badge-on', 'data-discovered': '' }, t('nodes.discovered'))),
              h('td', { class: 'pool-of-cell' }));
            const b = { input, gpu: g, node: n, tr };
            items.push(b);
            boxes.push(b);
            rows.push(tr);
          }
        }
        return h('div', { class: 'table-wrap pool-gpus-wrap' }, h('table', { class: 'table table-compact', 'data-table': 'pool-gpus' },
          h('thead', null, h('tr', null,
            h('th', { scope: 'col', class: 'cell-check' }, h('span', { class: 'visually-hidden' }, t('pools.select'))),
            h('th', { scope: 'col', class: 'num' }, t('nodes.gpuIndex')),
            h('th', { scope: 'col' }, t('nodes.gpuModel')),
            h('th', { scope: 'col', class: 'num' }, t('nodes.gpuMemory')),
            h('th', { scope: 'col' }, t('nodes.gpuKind')),
            h('th', { scope: 'col' }, t('pools.currentPool')))),
          h('tbody', null, rows)));
      }

      (async () => {
        try {
          const [nodesReply, membership] = await Promise.all([api.get('/nodes'), fetchMembership()]);
          poolOf = membership;
          const nodes = (nodesReply?.items || []).filter((n) => (n.gpus || []).length);
          if (!nodes.length) {
            body.replaceChildren(h('p', { class: 'muted', 'data-empty': 'gpus' }, t('pools.noNodes'), ' ',
              h('a', { href: '#/admin/nodes', onclick: () => close() }, t('pools.goNodes'))));
            countText();
            return;
          }
          body.replaceChildren(table(nodes));
          markConflicts();
          countText();
          save.disabled = false;
        } catch (err) {
          body.replaceChildren();
          msg.error(err);
        }
      })();

      form.addEventListener('submit', async (e) => {
        e.preventDefault();
        msg.clear();
        const ids = boxes.filter((b) => b.input.checked).map((b) => b.gpu.id);
        await busy(form, async () => {
          try {
            const updated = await api.put(`/pools/${encodeURIComponent(p.id)}/gpus`, { gpu_ids: ids });
            toast(t('pools.gpusSaved', { name: p.name, count: updated?.gpus ?? ids.length }));
            page.changed(updated);
            close(updated);
          } catch (err) {
            msg.error(err);
            // Show which ticked GPUs are (now) in another pool.
            if (err.status === 409) {
              try { poolOf = await fetchMembership(); } catch { /* keep what we knew */ }
              const found = markConflicts();
              if (found.length) msg.el.append(h('span', { class: 'msg-detail', 'data-conflicts': '' }, t('pools.conflicts', { gpus: found.join(', ') })));
              form.querySelector('tr[data-conflict]')?.scrollIntoView({ block: 'nearest' });
            }
          }
        });
      });
      return form;
    },
  });
}

// ---- delete ----

async function deletePool(page, p) {
  const ok = await confirmDialog({
    title: t('pools.deleteTitle'),
    message: p.gpus ? t('pools.deleteConfirmGpus', { name: p.name, count: p.gpus }) : t('pools.deleteConfirm', { name: p.name }),
    confirmLabel: t('pools.delete'), danger: true,
  });
  if (!ok) return;
  try {
    await api.del(`/pools/${encodeURIComponent(p.id)}`);
    toast(t('pools.deleted', { name: p.name }));
    page.changed(null);
  } catch (err) {
    toastError(err);
  }
}

function view(page) {
  return h('section', { class: 'page' },
    h('div', { class: 'page-head page-head-row' },
      h('div', { class: 'page-head-text' },
        h('h1', null, t('pools.title')),
        h('p', { class: 'muted' }, t('pools.intro'))),
      h('div', { class: 'toolbar' },
        h('a', { class: 'btn', href: '#/cluster', 'data-action': 'view-cluster' }, t('pools.viewCluster')),
        h('button', { type: 'button', class: 'btn btn-primary', 'data-action': 'open-create-pool', onclick: () => createDialog(page) }, icon('plus', 16), t('pools.create')))),
    h('div', { class: 'card card-flush' },
      h('div', { class: 'card-toolbar' }, page.count,
        h('button', { type: 'button', class: 'btn btn-small', 'data-action': 'refresh', onclick: () => page.list.refresh() }, t('pools.refresh'))),
      page.listMsg.el,
      h('div', { class: 'table-wrap' }, h('table', { class: 'table', 'data-table': 'pools' },
        h('thead', null, h('tr', null,
          h('th', { scope: 'col' }, t('pools.name')),
          h('th', { scope: 'col' }, t('pools.sharingLabel')),
          h('th', { scope: 'col' }, t('pools.gpus')),
          h('th', { scope: 'col' }, t('pools.nodes')),
          h('th', { scope: 'col' }, t('pools.slices')),
          h('th', { scope: 'col' }, h('span', { class: 'visually-hidden' }, t('common.actions'))))),
        page.tbody))));
}

