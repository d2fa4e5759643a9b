// pages/admin-job-templates.js — Administration → Job templates: the
// curated ways to submit a job. Each has a command pattern (one argument
// per line, with {hyperparameters}, {hp.NAME} and input placeholders), a
// table of typed hyperparameters (name, type, default, bounds or choices,
// help), the inputs a submitter types (a script path), the image (or the
// submitter's pick) and default resources. Admins create, edit, enable or
// disable and delete them; the server checks every field and the field it
// names is marked here.
import { api } from '../api.js';
import { t, formatBytes } from '../i18n.js';
import { h, field, messageBox, busy, confirmDialog, openDialog, emptyRow, toast, icon, toastError, dropdown, menuItem } from '../ui.js';

const COLS = 5;
const NAME_RE = /^[a-z0-9][a-z0-9._-]{0,62}$/;
const TYPES = ['float', 'int', 'string', 'bool', 'choice'];
const KINDS = ['pytorch', 'pytorch-ddp', 'script'];
// what PUT takes: the template's own fields, not the server's additions
const BODY_FIELDS = ['name', 'title', 'description', 'kind', 'image_id', 'command', 'inputs', 'hyperparameters', 'pool',
  'slices', 'cpu_millis', 'mem_mib', 'shm_mib', 'max_runtime_s', 'members', 'allow_overrides', 'enabled'];

const bodyOf = (tpl) => Object.fromEntries(BODY_FIELDS.filter((k) => tpl[k] !== undefined).map((k) => [k, tpl[k]]));

export function render(main) {
  const listMsg = messageBox();
  const tbody = h('tbody', null, emptyRow(COLS, t('common.loading')));
  const count = h('p', { class: 'muted table-count', 'data-template-count': '' });
  let seq = 0;

  async function load() {
    const mine = ++seq;
    try {
      const reply = await api.get('/job-templates');
      if (mine !== seq || !main.isConnected) return;
      const items = reply?.items || [];
      tbody.replaceChildren(...(items.length ? items.map(row)
        : [h('tr', { class: 'empty', 'data-empty': 'templates' }, h('td', { colspan: COLS }, t('tmpl.none')))]));
      count.textContent = t('tmpl.count', { count: items.length });
      listMsg.clear();
    } catch (err) {
      if (mine !== seq || !main.isConnected) return;
      tbody.replaceChildren(emptyRow(COLS, '—'));
      listMsg.error(err);
    }
  }

  function row(x) {
    const hps = x.hyperparameters || [];
    return h('tr', { 'data-template': x.name, 'data-id': x.id },
      h('td', null, h('strong', null, x.title), ' ',
        h('span', { class: `badge ${x.enabled ? 'badge-on' : 'badge-off'}`, 'data-enabled': String(x.enabled) }, x.enabled ? t('tmpl.enabled') : t('tmpl.disabled')),
        h('div', { class: 'cell-sub muted mono' }, x.name),
        x.description ? h('div', { class: 'cell-sub muted cell-clamp', title: x.description }, x.description) : null),
      h('td', { 'data-field': 'kind' }, h('span', { class: 'badge badge-label' }, t(`tmpl.kind.${x.kind}`)),
        x.members > 1 ? h('div', { class: 'cell-sub muted' }, t('tmpl.membersCell', { count: x.members })) : null),
      h('td', { 'data-field': 'command' }, h('code', { class: 'mono' }, (x.command || []).join(' ')),
        h('div', { class: 'cell-sub muted' }, hps.length ? hps.map((s) => s.name).join(', ') : t('tmpl.noHyperparameters'))),
      h('td', { 'data-field': 'resources' },
        x.image_name || x.image ? h('div', null, x.image_name || x.image) : h('div', { class: 'muted' }, t('tmpl.imagePicked')),
        h('div', { class: 'cell-sub muted' }, t('tmpl.resourcesCell', { count: x.cpu_millis / 1000, mem: formatBytes(x.mem_mib * 1048576) }))),
      h('td', { class: 'cell-actions' },
        h('button', { type: 'button', class: 'btn btn-small', 'data-action': 'edit', onclick: () => dialog(x) }, t('tmpl.edit')),
        h('span', { class: 'menu-slot' }, dropdown({
          className: 'btn-icon btn-more',
          label: t('tmpl.actionsFor', { name: x.title }),
          attrs: { 'data-action': 'row-menu' },
          content: '⋯',
          items: [
            menuItem({ label: x.enabled ? t('tmpl.disable') : t('tmpl.enable'), action: x.enabled ? 'disable' : 'enable', onclick: () => toggle(x) }),
            menuItem({ label: t('tmpl.delete'), action: 'delete', danger: true, onclick: () => remove(x) }),
          ],
        }))));
  }

  async function toggle(x) {
    try {
      await api.put(`/job-templates/${x.id}`, { ...bodyOf(x), enabled: !x.enabled });
      toast(t(x.enabled ? 'tmpl.disabledToast' : 'tmpl.enabledToast', { name: x.title }));
      load();
    } catch (err) {
      toastError(err);
    }
  }

  async function remove(x) {
    const ok = await confirmDialog({ title: t('tmpl.deleteTitle'), message: t('tmpl.deleteConfirm', { name: x.title }), confirmLabel: t('tmpl.delete'), danger: true });
    if (!ok) return;
    try {
      await api.del(`/job-templates/${x.id}`);
      toast(t('tmpl.deleted', { name: x.title }));
      load();
    } catch (err) {
      toastError(err);
    }
  }

  function dialog(x) {
    return openDialog({
      title: x ? t('tmpl.editTitle', { name: x.title }) : t('tmpl.createTitle'),
      wide: 'x',
      build: (close) => editor(x, close, load),
    });
  }

  main.append(h('section', { class: 'page' },
    h('div', { class: 'page-head page-head-row' },
      h('div', { class: 'page-head-text' }, h('h1', null, t('tmpl.title')), h('p', { class: 'muted' }, t('tmpl.intro'))),
      h('div', { class: 'toolbar' },
        h('button', { type: 'button', class: 'btn btn-primary', 'data-action': 'open-create-template', onclick: () => dialog() }, icon('plus', 16), t('tmpl.create')))),
    h('div', { class: 'card card-flush' },
      h('div', { class: 'card-toolbar' }, count),
      listMsg.el,
      h('div', { class: 'table-wrap' }, h('table', { class: 'table', 'data-table': 'job-templates' },
        h('thead', null, h('tr', null,
          h('th', { scope: 'col' }, t('tmpl.col.template')),
          h('th', { scope: 'col' }, t('tmpl.col.kind')),
          h('th', { scope: 'col' }, t('tmpl.col.command')),
          h('th', { scope: 'col' }, t('tmpl.col.resources')),
          h('th', { scope: 'col' }, h('span', { class: 'visually-hidden' }, t('common.actions'))))),
        tbody)))));
  load();
}

// ---- the editor ----

// A number input's value: a number, undefined when empty, NaN when not one.
const num = (el) => (el.value.trim() === '' ? undefined : Number(el.value));

function hpRow(s, onRemove) {
  const name = h('input', { type: 'text', class: 'mono', maxlength: 64, autocomplete: 'off', value: s?.name || '', 'data-hp-col': 'name', 'aria-label': t('tmpl.hp.name') });
  const type = h('select', { 'data-hp-col': 'type', 'aria-label': t('tmpl.hp.type') }, ...TYPES.map((k) => h('option', { value: k, selected: (s?.type || 'float') === k }, t(`tmpl.type.${k}`))));
  const def = h('input', { type: 'text', class: 'mono', autocomplete: 'off', value: s?.default === undefined || s?.default === null ? '' : String(s.default), 'data-hp-col': 'default', 'aria-label': t('tmpl.hp.default') });
  const min = h('input', { type: 'number', step: 'any', value: s?.min ?? '', 'data-hp-col': 'min', 'aria-label': t('tmpl.hp.minLabel') });
  const max = h('input', { type: 'number', step: 'any', value: s?.max ?? '', 'data-hp-col': 'max', 'aria-label': t('tmpl.hp.maxLabel') });
  const choices = h('input', { type: 'text', class: 'mono', autocomplete: 'off', value: (s?.choices || []).join(', '), 'data-hp-col': 'choices', 'aria-label': t('tmpl.hp.choices') });
  const help = h('input', { type: 'text', maxlength: 500, autocomplete: 'off', value: s?.help || '', 'data-hp-col': 'help', 'aria-label': t('tmpl.hp.help') });
  const tr = h('tr', { 'data-hp-row': '' },
    h('td', null, name), h('td', null, type), h('td', null, def), h('td', null, min), h('td', null, max), h('td', null, choices), h('td', null, help),
    h('td', { class: 'cell-actions' }, h('button', { type: 'button', class: 'btn-icon', 'aria-label': t('tmpl.hp.remove'), 'data-action': 'remove-hp', onclick: () => onRemove(tr) }, '×')));
  const sync = () => {
    const numeric = type.value === 'int' || type.value === 'float';
    min.disabled = max.disabled = !numeric;
    choices.disabled = type.value !== 'choice';
    choices.placeholder = type.value === 'choice' ? 'adam, sgd' : '';
    def.placeholder = type.value === 'bool' ? 'false' : '';
  };
  type.addEventListener('change', sync);
  sync();
  // The schema entry, or an error text naming what is wrong.
  tr.read = () => {
    const out = { name: name.value.trim(), type: type.value };
    const numeric = type.value === 'int' || type.value === 'float';
    const asValue = (text) => {
      if (numeric || type.value === 'choice') {
        const n = Number(text);
        if (text !== '' && Number.isFinite(n) && (numeric || /^-?[0-9.]+(e-?[0-9]+)?$/i.test(text))) return n;
      }
      if (type.value === 'bool') return text === 'true' ? true : text === 'false' ? false : text;
      return text;
    };
    if (def.value.trim() !== '') out.default = asValue(def.value.trim());
    if (numeric && min.value !== '') out.min = num(min);
    if (numeric && max.value !== '') out.max = num(max);
    if (type.value === 'choice') out.choices = choices.value.split(',').map((c) => c.trim()).filter(Boolean).map(asValue);
    if (help.value.trim()) out.help = help.value.trim();
    return out;
  };
  tr.focusCol = (col) => tr.querySelector(`[data-hp-col=${col}]`)?.focus();
  return tr;
}

function inputRow(inp, onRemove) {
  const name = h('input', { type: 'text', class: 'mono', maxlength: 32, autocomplete: 'off', value: inp?.name || '', 'data-input-col': 'name', 'aria-label': t('tmpl.input.name') });
  const def = h('input', { type: 'text', class: 'mono', maxlength: 4096, autocomplete: 'off', value: inp?.default || '', 'data-input-col': 'default', 'aria-label': t('tmpl.input.default') });
  const help = h('input', { type: 'text', maxlength: 500, autocomplete: 'off', value: inp?.help || '', 'data-input-col': 'help', 'aria-label': t('tmpl.input.help') });
  const req = h('input', { type: 'checkbox', checked: !!inp?.required, 'data-input-col': 'required', 'aria-label': t('tmpl.input.required') });
  const tr = h('tr', { 'data-input-row': '' }, h('td', null, name), h('td', null, def), h('td', null, help), h('td', null, req),
    h('td', { class: 'cell-actions' }, h('button', { type: 'button', class: 'btn-icon', 'aria-label': t('tmpl.input.remove'), onclick: () => onRemove(tr) }, '×')));
  tr.read = () => {
    const out = { name: name.value.trim(), required: req.checked };
    if (def.value) out.default = def.value;
    if (help.value.trim()) out.help = help.value.trim();
    return out;
  };
  tr.focusCol = (col) => tr.querySelector(`[data-input-col=${col}]`)?.focus();
  return tr;
}

function editor(x, close, reload) {
  const msg = messageBox();
  const name = h('input', { id: 'template-name', type: 'text', required: true, maxlength: 63, autocomplete: 'off', autocapitalize: 'none', spellcheck: 'false', placeholder: 'pytorch-resnet', value: x?.name || '', 'data-field': 'name' });
  const title = h('input', { id: 'template-title', type: 'text', required: true, maxlength: 120, autocomplete: 'off', value: x?.title || '', 'data-field': 'title' });
  const desc = h('textarea', { id: 'template-description', rows: 2, class: 'textarea-short', maxlength: 2000, 'data-field': 'description' }, x?.description || '');
  const kind = h('select', { id: 'template-kind', 'data-field': 'kind' }, ...KINDS.map((k) => h('option', { value: k, selected: (x?.kind || 'script') === k }, t(`tmpl.kind.${k}`))));
  const image = h('select', { id: 'template-image', 'data-field': 'image' }, h('option', { value: '' }, t('tmpl.imagePicked')));
  const command = h('textarea', { id: 'template-command', rows: 4, class: 'mono', required: true, 'data-field': 'command', placeholder: 'python3\n{script}\n{hyperparameters}' }, (x?.command || []).join('\n'));
  const pool = h('select', { id: 'template-pool', 'data-field': 'pool' }, h('option', { value: '' }, t('tmpl.poolPicked')));
  const numIn = (id, f, v, min, max) => h('input', { id, type: 'number', min, max, value: v, 'data-field': f });
  const slices = numIn('template-slices', 'slices', x?.slices ?? 1, 0, 64);
  const cpu = numIn('template-cpu', 'cpu', x?.cpu_millis ?? 1000, 10, 1024000);
  const mem = numIn('template-mem', 'memory', x?.mem_mib ?? 1024, 16, 16777216);
  const shm = numIn('template-shm', 'shm', x?.shm_mib ?? 64, 1, 1048576);
  const runtime = numIn('template-runtime', 'max-runtime', x?.max_runtime_s ?? 3600, 1, 2592000);
  const members = numIn('template-members', 'members', x?.members ?? 1, 1, 16);
  const overrides = h('input', { id: 'template-overrides', type: 'checkbox', checked: x ? !!x.allow_overrides : true, 'data-field': 'allow-overrides' });
  const enabled = h('input', { id: 'template-enabled', type: 'checkbox', checked: x ? !!x.enabled : true, 'data-field': 'enabled' });

  const hpBody = h('tbody');
  const removeRow = (tr) => tr.remove();
  for (const s of x?.hyperparameters || []) hpBody.append(hpRow(s, removeRow));
  const inBody = h('tbody');
  for (const inp of x?.inputs || []) inBody.append(inputRow(inp, removeRow));

  (async () => {
    try {
      const [imgs, pls] = await Promise.all([api.get('/images'), api.get('/pools')]);
      image.append(...(imgs.items || []).map((i) => h('option', { value: i.id, selected: x?.image_id === i.id }, `${i.display_name || i.reference} — ${i.reference}`)));
      pool.append(...(pls.items || []).map((p) => h('option', { value: p.name, selected: x?.pool === p.name }, p.name)));
    } catch (err) { msg.error(err); }
  })();

  const form = h('form', { class: 'form', novalidate: true, 'data-form': x ? 'edit-template' : 'create-template' },
    h('div', { class: 'form-inline-wide' },
      field(t('tmpl.name'), name, t('tmpl.nameHelp')),
      field(t('tmpl.titleLabel'), title),
      field(t('tmpl.kind'), kind),
      field(t('tmpl.image'), image, t('tmpl.imageHelp'))),
    field(t('tmpl.description'), desc),
    field(t('tmpl.command'), command, t('tmpl.commandHelp')),
    h('fieldset', { class: 'field' }, h('legend', null, t('tmpl.inputs')),
      h('p', { class: 'field-help' }, t('tmpl.inputsHelp')),
      h('div', { class: 'table-wrap' }, h('table', { class: 'table schema-table', 'data-table': 'template-inputs' },
        h('thead', null, h('tr', null, ...['name', 'default', 'help', 'required'].map((c) => h('th', { scope: 'col' }, t(`tmpl.input.${c}`))), h('th'))),
        inBody)),
      h('div', null, h('button', { type: 'button', class: 'btn btn-small', 'data-action': 'add-input', onclick: () => { const r = inputRow(null, removeRow); inBody.append(r); r.focusCol('name'); } }, icon('plus', 14), t('tmpl.input.add')))),
    h('fieldset', { class: 'field' }, h('legend', null, t('tmpl.hyperparameters')),
      h('p', { class: 'field-help' }, t('tmpl.hyperparametersHelp')),
      h('div', { class: 'table-wrap' }, h('table', { class: 'table schema-table', 'data-table': 'template-schema' },
        h('thead', null, h('tr', null, ...['name', 'type', 'default', 'minLabel', 'maxLabel', 'choices', 'help'].map((c) => h('th', { scope: 'col' }, t(`tmpl.hp.${c}`))), h('th'))),
        hpBody)),
      h('div', null, h('button', { type: 'button', class: 'btn btn-small', 'data-action': 'add-hp', onclick: () => { const r = hpRow(null, removeRow); hpBody.append(r); r.focusCol('name'); } }, icon('plus', 14), t('tmpl.hp.add')))),
    h('div', { class: 'form-inline-wide' },
      field(t('tmpl.pool'), pool), field(t('tmpl.slices'), slices, t('tmpl.slicesHelp')),
      field(t('tmpl.cpu'), cpu), field(t('tmpl.memory'), mem), field(t('tmpl.shm'), shm),
      field(t('tmpl.maxRuntime'), runtime), field(t('tmpl.members'), members, t('tmpl.membersHelp'))),
    h('div', { class: 'field checks' },
      h('label', { class: 'check', for: overrides.id }, overrides, ' ', t('tmpl.allowOverrides')),
      h('label', { class: 'check', for: enabled.id }, enabled, ' ', t('tmpl.enabledLabel'))),
    msg.el,
    h('div', { class: 'actions' },
      h('button', { type: 'button', class: 'btn', onclick: () => close() }, t('common.cancel')),
      h('button', { type: 'submit', class: 'btn btn-primary', 'data-action': 'save-template' }, x ? t('tmpl.save') : t('tmpl.create'))));

  // The server named a field: focus it (a schema row's cell, an input row's).
  function mark(f) {
    if (typeof f !== 'string') return;
    const m = /^(hyperparameters|inputs)\[(\d+)\](?:\.(\w+))?$/.exec(f);
    if (m) {
      const rows = (m[1] === 'inputs' ? inBody : hpBody).children;
      const tr = rows[Number(m[2])];
      if (tr) { tr.classList.add('row-error'); tr.focusCol(m[3] || 'name'); }
      return;
    }
    const byField = { name, title, kind, image_id: image, command, pool, slices, cpu_millis: cpu, mem_mib: mem, shm_mib: shm, max_runtime_s: runtime, members };
    (byField[f] || (f.startsWith('command') ? command : null))?.focus();
  }

  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    msg.clear();
    for (const tr of form.querySelectorAll('.row-error')) tr.classList.remove('row-error');
    const body = {
      name: name.value.trim(), title: title.value.trim(), description: desc.value, kind: kind.value,
      image_id: image.value ? Number(image.value) : null,
      command: command.value.split('\n').map((l) => l.replace(/\r$/, '')).filter((l, i, all) => l !== '' || (i > 0 && i < all.length - 1)),
      inputs: [...inBody.children].map((tr) => tr.read()),
      hyperparameters: [...hpBody.children].map((tr) => tr.read()),
      pool: pool.value || null, slices: num(slices), cpu_millis: num(cpu), mem_mib: num(mem), shm_mib: num(shm),
      max_runtime_s: num(runtime), members: num(members), allow_overrides: overrides.checked, enabled: enabled.checked,
    };
    if (!NAME_RE.test(body.name)) { msg.error(t('tmpl.nameInvalid')); name.focus(); return; }
    if (!body.title) { msg.error(t('tmpl.titleRequired')); title.focus(); return; }
    if (!body.command.length) { msg.error(t('tmpl.commandRequired')); command.focus(); return; }
    for (const k of ['slices', 'cpu_millis', 'mem_mib', 'shm_mib', 'max_runtime_s', 'members']) {
      if (body[k] === undefined) delete body[k];
      else if (!Number.isInteger(body[k])) { msg.error(t('tmpl.wholeNumber')); mark(k); return; }
    }
    await busy(form, async () => {
      try {
        const saved = x ? await api.put(`/job-templates/${x.id}`, body) : await api.post('/job-templates', body);
        toast(t(x ? 'tmpl.saved' : 'tmpl.created', { name: saved?.title || body.title }));
        reload();
        close(saved);
      } catch (err) {
        msg.error(err);
        mark(err?.details?.[0]?.field);
      }
    });
  });
  return form;
}
