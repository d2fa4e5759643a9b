// pages/files.js — the file manager: an area (my home, the shared area, a
// class area) with breadcrumbs, a sorted and paged listing, drag-and-drop
// upload of files and folders with per-file progress (small files in one
// streamed PUT, large ones as resumable parts that are sent again after a
// network error), download, preview (text, CSV, JSON, images), new
// folder, rename/move, delete to the trash and restore, and a usage bar
// against the quota. The folder lives in the hash: #/files?area=home&path=a/b
import { api } from '../api.js';
import { t, fromServer, formatBytes, formatDate } from '../i18n.js';
import { h, field, messageBox, openDialog, confirmDialog, emptyRow, toast, icon, errorParts } from '../ui.js';
import { tensorboardButton } from '../parts/route-buttons.js';

const PAGE = 200;
const HIDDEN_KEY = 'gpucloud.files.showHidden';
const showHiddenSaved = () => { try { return localStorage.getItem(HIDDEN_KEY) === '1'; } catch { return false; } };
const SMALL = 8 * 1024 * 1024;      // below: one PUT; above: resumable parts
const RETRIES = 6;

const enc = (p) => p.split('/').filter(Boolean).map(encodeURIComponent).join('/');
const join = (a, b) => (a ? `${a}/${b}` : b);
const csrf = () => { try { return sessionStorage.getItem('gpucloud.csrf') || ''; } catch { return ''; } };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function hashState() {
  const q = new URLSearchParams((location.hash.split('?')[1]) || '');
  return { area: q.get('area') || 'home', path: (q.get('path') || '').replace(/^\/+|\/+$/g, '') };
}

function setHash(area, path) {
  const q = new URLSearchParams({ area });
  if (path) q.set('path', path);
  location.hash = `#/files?${q}`;
}

// One XHR upload with progress; resolves {status, json}.
function xhrPut(url, body, onProgress) {
  return new Promise((resolve, reject) => {
    const x = new XMLHttpRequest();
    x.open('PUT', url);
    x.setRequestHeader('X-CSRF-Token', csrf());
    x.setRequestHeader('Content-Type', 'application/octet-stream');
    x.upload.onprogress = (e) => onProgress(e.loaded);
    x.onload = () => {
      let json = null;
      try { json = JSON.parse(x.responseText); } catch { /* not JSON */ }
      resolve({ status: x.status, json });
    };
    x.onerror = () => reject(new Error('network'));
    x.send(body);
  });
}

// Over the hard limit: the server says why in English (block_reason).
function overHard(serverText) {
  const { text, detail } = fromServer('files.overHard', serverText);
  return h('p', { class: 'msg msg-error', 'data-over-hard': '', title: detail || null }, text);
}

function apiErr(res) {
  const e = res.json?.error || {};
  const err = new Error(e.message || `HTTP ${res.status}`);
  err.code = e.code;
  err.hint = e.hint;
  err.status = res.status;
  return err;
}

// Uploads one File to area/path, reporting bytes sent.
async function uploadFile(area, path, file, onProgress) {
  if (file.size < SMALL) {
    const res = await xhrPut(`/api/v1/files/${encodeURIComponent(area)}/${enc(path)}`, file, onProgress);
    if (res.status !== 201) throw apiErr(res);
    return res.json;
  }
  const up = await api.post('/uploads', { area, path, size: file.size });
  const done = new Set(up.received);
  for (let n = 0; n < up.parts; n++) {
    if (done.has(n)) continue;
    const from = n * up.part_size;
    const blob = file.slice(from, Math.min(file.size, from + up.part_size));
    for (let attempt = 0; ; attempt++) {
      try {
        const res = await xhrPut(`/api/v1/uploads/${up.id}/parts/${n}`, blob, (b) => onProgress(from + b));
        if (res.status !== 200) throw apiErr(res);
        break;
      } catch (e) {
        // a network error: wait, then send the part again (the server keeps the others)
        if (e.status || attempt >= RETRIES) throw e;
        await sleep(500 * 2 ** attempt);
      }
    }
  }
  return api.post(`/uploads/${up.id}/complete`);
}

// Files of a drop, folders walked (webkitGetAsEntry): [{file, rel}].
async function dropped(dt) {
  const out = [];
  const walk = async (entry, prefix) => {
    if (entry.isFile) {
      out.push({ file: await new Promise((res, rej) => entry.file(res, rej)), rel: prefix + entry.name, dirs: [] });
    } else if (entry.isDirectory) {
      out.push({ dir: prefix + entry.name });
      const reader = entry.createReader();
      for (;;) {
        const batch = await new Promise((res, rej) => reader.readEntries(res, rej));
        if (!batch.length) break;
        for (const e of batch) await walk(e, `${prefix}${entry.name}/`);
      }
    }
  };
  const entries = [...(dt.items || [])].map((i) => i.webkitGetAsEntry?.()).filter(Boolean);
  if (entries.length) for (const e of entries) await walk(e, '');
  else for (const f of dt.files) out.push({ file: f, rel: f.name });
  return out;
}

export function render(main, ctx) {
  const { area, path } = hashState();
  const msg = messageBox();
  const tbody = h('tbody', null, emptyRow(5, t('common.loading')));
  const more = h('button', { type: 'button', class: 'btn', hidden: true, 'data-action': 'more' }, t('files.more'));
  const uploads = h('ul', { class: 'upload-list', 'data-uploads': '' });
  const usage = h('div', { class: 'files-usage', 'data-usage': '' });
  const support = h('p', { class: 'muted', 'data-quota-support': '' });
  const hiddenNote = h('span', { class: 'muted', 'data-hidden-count': '' });
  const readOnly = h('p', { class: 'msg msg-info', hidden: true, 'data-read-only': '' }, t('files.readOnly'));
  let cursor = null;
  let showTrash = false;
  let showHidden = showHiddenSaved();
  let writable = true;
  // /me once per page: the storage usage and whether TensorBoard is set up
  const mePromise = api.get('/me').catch(() => null);

  // ---- usage ----
  // The bar is the home's: other areas (shared, a class) are not counted
  // against the caller's quota, so it is not shown there.
  async function loadUsage() {
    try {
      const me = await mePromise;
      const s = me?.storage;
      if (!s || !main.isConnected || area !== 'home') return;
      const limit = s.bytes_hard;
      const pct = limit ? Math.min(100, Math.round((s.bytes / limit) * 100)) : 0;
      const fill = h('div', { class: 'meter-fill' });
      fill.style.width = `${pct}%`;
      usage.replaceChildren(...[
        h('span', { 'data-usage-text': '' }, limit
          ? t('files.usage', { used: formatBytes(s.bytes), limit: formatBytes(limit) })
          : t('files.usageNoLimit', { used: formatBytes(s.bytes) })),
        h('div', { class: pct >= 90 || s.over_soft ? 'meter meter-high' : 'meter', role: 'meter', 'aria-valuemin': 0, 'aria-valuemax': 100, 'aria-valuenow': pct, 'aria-label': t('files.usageLabel') }, fill),
        s.over_hard ? overHard(s.block_reason)
          : s.over_soft ? h('p', { class: 'msg msg-warn', 'data-over-soft': '' }, t('files.overSoft')) : null,
      ].filter(Boolean)); // replaceChildren would write a null as the text "null"
    } catch { /* the listing shows errors */ }
    if (ctx.user?.role === 'admin') {
      try {
        const st = await api.get('/storage');
        support.textContent = st.support.enforcement === 'kernel+software'
          ? t('files.kernelQuotas') : t('files.softwareQuotas', { reason: st.support.reason });
      } catch { /* admins only */ }
    }
  }

  // ---- listing ----
  function row(item, tensorboard) {
    const p = join(path, item.name);
    const url = `/api/v1/files/${encodeURIComponent(area)}/${enc(p)}`;
    const nameCell = item.type === 'dir'
      ? h('button', { type: 'button', class: 'link', 'data-open': item.name, onclick: () => setHash(area, p) }, icon('layers', 16), ' ', item.name)
      : h('button', { type: 'button', class: 'link', 'data-preview': item.name, onclick: () => preview(p, item) }, item.name);
    return h('tr', { 'data-file': item.name, 'data-type': item.type },
      h('td', null, nameCell),
      h('td', null, item.type === 'dir' ? '—' : formatBytes(item.size)),
      h('td', null, formatDate(item.mtime)),
      h('td', { class: 'actions-cell' },
        h('a', { class: 'btn btn-small', href: `${url}?download=1`, download: item.type === 'dir' ? `${item.name}.tar` : item.name, 'data-download': item.name }, t('files.download')),
        // write actions only where the caller may write
        ...(writable ? [' ',
          h('button', { type: 'button', class: 'btn btn-small', 'data-rename': item.name, onclick: () => rename(p, item.name) }, t('files.rename')),
          ' ',
          h('button', { type: 'button', class: 'btn btn-small btn-danger', 'data-delete': item.name, onclick: () => remove(p, item.name) }, t('files.delete'))] : []),
        // TensorBoard runs on a folder of one's own home, when the admin
        // has set it up; never on dot-folders (.local, .cache …)
        ...(tensorboard && item.type === 'dir' && area === 'home' && !item.name.startsWith('.')
          ? [' ', tensorboardButton(p, ctx, (e) => msg.error(e))] : [])));
  }

  function showWritable() {
    readOnly.hidden = writable;
    for (const el of drop.querySelectorAll('[data-write]')) el.hidden = !writable;
  }

  async function load(append = false) {
    try {
      const [reply, me] = await Promise.all([
        api.get(`/files/${encodeURIComponent(area)}/${enc(path)}`, { query: { limit: PAGE, cursor: append ? cursor : undefined, hidden: showHidden ? undefined : 0 } }),
        mePromise]);
      if (!main.isConnected) return;
      writable = reply.writable !== false;
      showWritable();
      hiddenNote.textContent = reply.hidden ? t(showHidden ? 'files.hiddenShown' : 'files.hiddenCount', { n: reply.hidden }) : '';
      if (!append) tbody.replaceChildren();
      if (!reply.items.length && !append) tbody.append(emptyRow(5, t(writable ? 'files.empty' : 'files.emptyReadOnly')));
      const tb = Boolean(me?.features?.tensorboard);
      for (const it of reply.items) tbody.append(row(it, tb));
      cursor = reply.next_cursor;
      more.hidden = !cursor;
      msg.clear();
    } catch (e) {
      tbody.replaceChildren(emptyRow(5, ''));
      msg.error(e);
    }
  }

  function refresh() { cursor = null; if (showTrash) loadTrash(); else load(); loadUsage(); }

  // ---- preview, rename, delete, mkdir ----
  async function preview(p, item) {
    let body;
    try {
      const pv = await api.get(`/files/${encodeURIComponent(area)}/${enc(p)}`, { query: { preview: 1 } });
      if (pv.kind === 'image') body = h('img', { src: `/api/v1/files/${encodeURIComponent(area)}/${enc(p)}?inline=1`, alt: item.name, class: 'preview-image' });
      else if (pv.kind === 'csv') {
        body = h('div', { class: 'table-wrap' }, h('table', { class: 'table', 'data-preview-csv': '' },
          h('tbody', null, pv.rows.map((r, i) => h('tr', null, r.map((c) => h(i === 0 ? 'th' : 'td', null, c)))))));
      } else if (pv.kind === 'json') body = h('pre', { class: 'preview-text', 'data-preview-text': '' }, JSON.stringify(pv.value, null, 2));
      else if (pv.kind === 'text') body = h('pre', { class: 'preview-text', 'data-preview-text': '' }, pv.text);
      else body = h('p', null, t('files.binary', { size: formatBytes(pv.size) }));
      if (pv.truncated) body = [body, h('p', { class: 'muted' }, t('files.truncated'))];
    } catch (e) {
      const { text, detail } = errorParts(e);
      body = h('p', { class: 'msg msg-error', title: detail || null }, text);
    }
    await openDialog({ title: item.name, wide: true, build: () => h('div', { 'data-preview': '' }, body) });
  }

  async function rename(p, name) {
    await openDialog({
      title: t('files.renameTitle', { name }),
      build: (close) => {
        const input = h('input', { type: 'text', value: p, required: true });
        const m = messageBox();
        return h('form', {
          onsubmit: async (e) => {
            e.preventDefault();
            try { await api.post(`/files/${encodeURIComponent(area)}/${enc(p)}`, { op: 'move', to: input.value }); close(true); refresh(); } catch (err) { m.error(err); }
          },
        }, field(t('files.newPath'), input), m.el,
        h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'btn btn-primary' }, t('files.rename'))));
      },
    });
  }

  async function remove(p, name) {
    if (!(await confirmDialog({ title: t('files.deleteTitle'), message: t('files.deleteConfirm', { name }), confirmLabel: t('files.delete'), danger: true }))) return;
    try { await api.del(`/files/${encodeURIComponent(area)}/${enc(p)}`); toast(t('files.deleted', { name })); refresh(); } catch (e) { msg.error(e); }
  }

  async function mkdir() {
    await openDialog({
      title: t('files.newFolder'),
      build: (close) => {
        const input = h('input', { type: 'text', required: true });
        const m = messageBox();
        return h('form', {
          onsubmit: async (e) => {
            e.preventDefault();
            try { await api.post(`/files/${encodeURIComponent(area)}/${enc(join(path, input.value))}`, { op: 'mkdir' }); close(true); refresh(); } catch (err) { m.error(err); }
          },
        }, field(t('files.folderName'), input), m.el,
        h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'btn btn-primary' }, t('files.create'))));
      },
    });
  }

  // ---- uploads ----
  async function uploadAll(list) {
    for (const d of list.filter((x) => x.dir)) {
      try { await api.post(`/files/${encodeURIComponent(area)}/${enc(join(path, d.dir))}`, { op: 'mkdir' }); } catch { /* exists */ }
    }
    await Promise.all(list.filter((x) => x.file).map(async ({ file, rel }) => {
      const bar = h('progress', { max: file.size || 1, value: 0 });
      const state = h('span', { class: 'muted', 'data-upload-state': '' }, t('files.uploading'));
      const li = h('li', { 'data-upload': rel }, h('span', null, rel), ' ', bar, ' ', state);
      uploads.append(li);
      try {
        await uploadFile(area, join(path, rel), file, (b) => { bar.value = b; });
        bar.value = file.size || 1;
        state.textContent = t('files.uploaded');
        li.dataset.done = 'ok';
      } catch (e) {
        const { text, detail } = errorParts(e);
        // a failed upload must not look like a finished one: the bar turns
        // red where it stopped, and the reason is shown as an error
        bar.classList.add('progress-failed');
        state.className = 'upload-error';
        state.textContent = text;
        if (detail) state.title = detail;
        li.dataset.done = 'error';
      }
    }));
    refresh();
  }

  const picker = h('input', { type: 'file', multiple: true, hidden: true, 'data-file-input': '', onchange: () => uploadAll([...picker.files].map((f) => ({ file: f, rel: f.name }))) });
  const folderPicker = h('input', { type: 'file', multiple: true, hidden: true, webkitdirectory: true, onchange: () => {
    const files = [...folderPicker.files];
    const dirs = new Set();
    for (const f of files) { const parts = f.webkitRelativePath.split('/'); for (let i = 1; i < parts.length; i++) dirs.add(parts.slice(0, i).join('/')); }
    uploadAll([...[...dirs].sort().map((d) => ({ dir: d })), ...files.map((f) => ({ file: f, rel: f.webkitRelativePath }))]);
  } });

  // ---- trash ----
  async function loadTrash() {
    try {
      const reply = await api.get('/trash', { query: { area } });
      tbody.replaceChildren();
      if (!reply.items.length) tbody.append(emptyRow(5, t('files.trashEmpty')));
      for (const it of reply.items) {
        tbody.append(h('tr', { 'data-trash': it.path },
          h('td', null, it.path),
          h('td', null, it.is_dir ? '—' : formatBytes(it.size)),
          h('td', null, formatDate(it.deleted_at)),
          h('td', { class: 'actions-cell' },
            h('button', { type: 'button', class: 'btn btn-small', 'data-restore': it.path, onclick: async () => {
              try { await api.post(`/trash/${it.id}/restore`); toast(t('files.restored', { name: it.path })); refresh(); } catch (e) { msg.error(e); }
            } }, t('files.restore')),
            ' ',
            h('button', { type: 'button', class: 'btn btn-small btn-danger', 'data-purge': it.path, onclick: async () => {
              try { await api.del(`/trash/${it.id}`); refresh(); } catch (e) { msg.error(e); }
            } }, t('files.purge')))));
      }
      more.hidden = true;
    } catch (e) { msg.error(e); }
  }

  const hiddenToggle = h('input', { type: 'checkbox', 'data-action': 'show-hidden', checked: showHidden, onchange: () => {
    showHidden = hiddenToggle.checked;
    try { localStorage.setItem(HIDDEN_KEY, showHidden ? '1' : '0'); } catch { /* private mode */ }
    refresh();
  } });
  const trashBtn = h('button', { type: 'button', class: 'btn', 'data-action': 'trash', 'data-write': '', 'aria-pressed': 'false', onclick: () => {
    showTrash = !showTrash;
    trashBtn.setAttribute('aria-pressed', String(showTrash));
    trashBtn.textContent = showTrash ? t('files.backToFiles') : t('files.trash');
    emptyBtn.hidden = !showTrash;
    refresh();
  } }, t('files.trash'));
  const emptyBtn = h('button', { type: 'button', class: 'btn btn-danger', hidden: true, 'data-action': 'empty-trash', onclick: async () => {
    if (!(await confirmDialog({ title: t('files.emptyTrash'), message: t('files.emptyConfirm'), danger: true }))) return;
    try { await api.del('/trash', { query: { area } }); refresh(); } catch (e) { msg.error(e); }
  } }, t('files.emptyTrash'));

  // ---- layout ----
  const crumbs = h('nav', { class: 'breadcrumbs', 'aria-label': t('files.breadcrumbs'), 'data-breadcrumbs': '' });
  const parts = path ? path.split('/') : [];
  const areaName = area === 'home' ? t('files.home') : area === 'shared' ? t('files.area.shared') : area;
  crumbs.append(h('a', { href: `#/files?area=${encodeURIComponent(area)}` }, areaName));
  parts.forEach((p, i) => crumbs.append(' / ', h('a', { href: `#/files?${new URLSearchParams({ area, path: parts.slice(0, i + 1).join('/') })}` }, p)));

  const areaSel = h('select', { 'data-area': '', onchange: (e) => setHash(e.target.value, '') },
    ['home', 'shared'].map((a) => h('option', { value: a, selected: a === area }, t(`files.area.${a}`))),
    area !== 'home' && area !== 'shared' ? h('option', { value: area, selected: true }, area) : null);

  const drop = h('section', { class: 'card files-drop', 'data-dropzone': '' },
    h('div', { class: 'toolbar' },
      h('label', { class: 'visually-hidden', for: 'files-area' }, t('files.areaLabel')),
      Object.assign(areaSel, { id: 'files-area' }),
      h('button', { type: 'button', class: 'btn btn-primary', 'data-action': 'upload', 'data-write': '', onclick: () => picker.click() }, icon('upload', 16), ' ', t('files.upload')),
      h('button', { type: 'button', class: 'btn', 'data-action': 'upload-folder', 'data-write': '', onclick: () => folderPicker.click() }, t('files.uploadFolder')),
      h('button', { type: 'button', class: 'btn', 'data-action': 'mkdir', 'data-write': '', onclick: mkdir }, icon('plus', 16), ' ', t('files.newFolder')),
      trashBtn, emptyBtn, picker, folderPicker,
      h('label', { class: 'check toolbar-end' }, hiddenToggle, ' ', t('files.showHidden')), hiddenNote),
    readOnly,
    h('p', { class: 'muted', 'data-write': '' }, t('files.dropHint')),
    uploads,
    msg.el,
    h('div', { class: 'table-wrap' }, h('table', { class: 'table', 'data-table': 'files' },
      h('thead', null, h('tr', null,
        h('th', { scope: 'col' }, t('files.name')), h('th', { scope: 'col' }, t('files.size')),
        h('th', { scope: 'col' }, t('files.modified')), h('th', { scope: 'col' }, t('common.actions')))),
      tbody)),
    more);
  more.addEventListener('click', () => load(true));
  drop.addEventListener('dragover', (e) => { e.preventDefault(); drop.classList.add('dragging'); });
  drop.addEventListener('dragleave', () => drop.classList.remove('dragging'));
  drop.addEventListener('drop', async (e) => {
    e.preventDefault();
    drop.classList.remove('dragging');
    if (showTrash || !writable) return;
    uploadAll(await dropped(e.dataTransfer));
  });

  main.append(h('section', { class: 'page' },
    h('div', { class: 'page-head' }, h('h1', null, t('files.title')), crumbs),
    usage, support, drop));
  refresh();
}
