// pages/sweep-new.js — "New sweep": the job every run shares (an image, the
// command run by sh -c, a pool and slices or none, CPU, memory, maximum
// runtime), the hyperparameters — a grid (a name and comma-separated values
// per row; every combination runs) or a list (one JSON set per line) — and
// the metric that ranks the runs. The run count is shown before submitting;
// submitting goes to the sweep's page.
//
// Or from a job template (#/sweeps/new?template=<id> picks one): the
// template supplies the command and the resources, its inputs become fields
// and its hyperparameters grid rows prefilled with their defaults, each
// showing its type and range; every value is checked against the schema
// before submitting, and the server's refusal of one (details field
// "grid.lr[2]") is shown under its row.
import { api } from '../api.js';
import { t, formatNumber, getLanguage, SERVER_LANGUAGE } from '../i18n.js';
import { h, field, messageBox, busy } from '../ui.js';

const NAME_RE = /^[a-z0-9][a-z0-9._-]{0,55}$/;
const PARAM_RE = /^[A-Za-z_][A-Za-z0-9_]*[A-Za-z0-9_.-]*$/;
const METRIC_RE = /^[A-Za-z_][A-Za-z0-9_./-]{0,63}$/;
const MAX_RUNS = 256;
const NUMBER_RE = /^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/;

const newKey = () => (globalThis.crypto?.randomUUID ? crypto.randomUUID()
  : `${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}-${Math.random().toString(36).slice(2)}`);

// "0.1, 0.01, adam, true" → [0.1, 0.01, 'adam', true]
export function parseValues(text) {
  return text.split(',').map((v) => v.trim()).filter((v) => v !== '').map((v) => {
    if (NUMBER_RE.test(v)) return Number(v);
    if (v === 'true' || v === 'false') return v === 'true';
    return v;
  });
}

// Why value v is not one of schema s's (a reason key and its limit), or null.
export function schemaRefusal(s, v) {
  if (s.type === 'bool') return typeof v === 'boolean' ? null : { reason: 'type' };
  if (s.type === 'string') return null; // (sent as text)
  if (s.type === 'choice') return (s.choices || []).some((c) => c === v || String(c) === String(v)) ? null : { reason: 'choice' };
  if (typeof v !== 'number' || !Number.isFinite(v)) return { reason: s.type === 'int' ? 'int' : 'number' };
  if (s.type === 'int' && !Number.isInteger(v)) return { reason: 'int' };
  if (s.min !== undefined && s.min !== null && v < s.min) return { reason: 'min', limit: s.min };
  if (s.max !== undefined && s.max !== null && v > s.max) return { reason: 'max', limit: s.max };
  return null;
}

// A schema's type and range, for reading: "number, at least 0, at most 1".
function schemaLine(s) {
  const parts = [t(`tmpl.type.${s.type}`)];
  if (s.min !== undefined && s.min !== null) parts.push(t('tmpl.hp.min', { n: String(s.min) }));
  if (s.max !== undefined && s.max !== null) parts.push(t('tmpl.hp.max', { n: String(s.max) }));
  if (s.type === 'choice') parts.push(t('sweepTmpl.choices', { choices: (s.choices || []).map(String).join(', ') }));
  return parts.join(', ');
}

const reasonText = (reason, limit) => {
  const key = `tmpl.hp.err.${reason}`;
  const said = t(key, { limit: limit === undefined ? '' : String(limit) });
  return said === key ? t('tmpl.hp.err.type') : said;
};

export function render(main, ctx) {
  const msg = messageBox();
  const query = new URLSearchParams((location.hash.split('?')[1]) || '');
  const templateSel = h('select', { name: 'template', 'data-field': 'template' }, h('option', { value: '' }, t('tmpl.pick.none')));
  const templateInfo = h('p', { class: 'field-help', 'data-template-description': '' });
  const inputsBox = h('div', { class: 'form-inline-wide', 'data-template-inputs': '' });
  const state = { templates: [], tpl: null, inputs: [] };
  const imageSel = h('select', { name: 'image', 'data-field': 'image' });
  const nameInput = h('input', { type: 'text', name: 'name', required: true, maxlength: 56, autocomplete: 'off', 'data-field': 'name', value: `sweep-${Math.random().toString(36).slice(2, 6)}` });
  const cmdInput = h('textarea', { name: 'command', rows: 3, required: true, class: 'mono', 'data-field': 'command', placeholder: 'python3 train.py' });
  const poolSel = h('select', { name: 'pool', 'data-field': 'pool' }, h('option', { value: '' }, t('job.form.noGpu')));
  const slices = h('input', { type: 'number', min: 1, max: 64, value: 1, 'data-field': 'slices' });
  const cpu = h('input', { type: 'number', min: 10, max: 1024000, step: 100, value: 1000, 'data-field': 'cpu' });
  const mem = h('input', { type: 'number', min: 16, max: 16777216, step: 64, value: 1024, 'data-field': 'memory' });
  const runtime = h('input', { type: 'number', min: 1, max: 2592000, value: 3600, 'data-field': 'max-runtime' });
  const metric = h('input', { type: 'text', maxlength: 64, value: 'loss', autocomplete: 'off', 'data-field': 'metric' });
  const goal = h('select', { 'data-field': 'goal' },
    h('option', { value: 'min' }, t('sweep.form.goal.min')), h('option', { value: 'max' }, t('sweep.form.goal.max')));
  const cmdField = field(t('job.form.command'), cmdInput, t('job.form.commandHelp'));
  const slicesField = field(t('job.form.slices'), slices);
  slicesField.hidden = true;
  poolSel.addEventListener('change', () => { slicesField.hidden = !poolSel.value; });

  // the hyperparameters: a grid of rows, or a list of sets
  const modeGrid = h('input', { type: 'radio', name: 'mode', value: 'grid', checked: true, 'data-field': 'mode-grid' });
  const modeList = h('input', { type: 'radio', name: 'mode', value: 'list', 'data-field': 'mode-list' });
  const rows = h('div', { class: 'sweep-params', 'data-params': '' });
  const listInput = h('textarea', { rows: 5, class: 'mono', 'data-field': 'list', placeholder: '{"lr": 0.1, "batch": 32}\n{"lr": 0.01, "batch": 64}' });
  const listField = field(t('sweep.form.list'), listInput, t('sweep.form.listHelp'));
  const count = h('p', { class: 'callout', 'data-run-count': '', 'aria-live': 'polite' });
  const addBtn = h('button', { type: 'button', class: 'btn btn-small', 'data-action': 'add-param', onclick: () => { addRow('', ''); update(); } }, t('sweep.form.addParam'));
  const gridBox = h('div', { 'data-grid': '' }, rows, addBtn);

  // a row; with schema (a template's hyperparameter) its name is fixed,
  // its type and range are shown and its values checked against them
  function addRow(name, values, schema = null) {
    const n = h('input', { type: 'text', maxlength: 64, autocomplete: 'off', class: 'mono', 'data-field': 'param-name', 'aria-label': t('sweep.form.param'), placeholder: 'lr', value: name, readonly: !!schema });
    const v = h('input', { type: 'text', autocomplete: 'off', class: 'mono', 'data-field': 'param-values', 'aria-label': t('sweep.form.values'), placeholder: '0.1, 0.01', value: values });
    const err = h('p', { class: 'field-error', 'data-param-error': name, hidden: true });
    const r = h('div', { class: 'sweep-param', 'data-param': '' },
      h('div', { class: 'field' }, h('label', null, t('sweep.form.param')), n),
      h('div', { class: 'field' }, h('label', null, t('sweep.form.values')), v,
        schema ? h('p', { class: 'field-help', 'data-param-schema': name }, schemaLine(schema)) : null, err),
      h('button', { type: 'button', class: 'btn btn-small', 'data-action': 'remove-param', onclick: () => { r.remove(); update(); } }, t('sweep.form.removeParam')));
    r.schema = schema;
    r.showError = (text) => {
      err.textContent = text || '';
      err.hidden = !text;
      if (text) v.setAttribute('aria-invalid', 'true'); else v.removeAttribute('aria-invalid');
    };
    n.addEventListener('input', update);
    v.addEventListener('input', () => { r.showError(''); update(); });
    rows.append(r);
  }

  // the row's values for the request: a template's text hyperparameters
  // stay text ("1" is not a number there)
  const rowValues = (r) => {
    const text = r.querySelector('[data-field=param-values]').value;
    if (r.schema?.type === 'string') return text.split(',').map((x) => x.trim()).filter((x) => x !== '');
    return parseValues(text);
  };

  // Every value of a template row the schema refuses: marks the rows; the
  // first such row, or null.
  function checkRows() {
    let first = null;
    for (const r of rows.querySelectorAll('[data-param]')) {
      if (!r.schema) continue;
      const bad = rowValues(r).map((x) => [x, schemaRefusal(r.schema, x)]).find(([, why]) => why);
      r.showError(bad ? t('sweepTmpl.badValue', { value: String(bad[0]), reason: reasonText(bad[1].reason, bad[1].limit) }) : '');
      if (bad && !first) first = r;
    }
    return first;
  }

  function pickTemplate(id) {
    const tpl = state.templates.find((x) => String(x.id) === String(id)) || null;
    state.tpl = tpl;
    templateSel.value = tpl ? String(tpl.id) : '';
    cmdField.hidden = !!tpl;
    templateInfo.textContent = tpl ? tpl.description || '' : t('tmpl.pick.help');
    const fixed = tpl && !tpl.allow_overrides;
    for (const el of [cpu, mem, runtime, poolSel, slices]) el.disabled = !!fixed;
    imageSel.disabled = !!(tpl && tpl.image_id && !tpl.allow_overrides);
    state.inputs = [];
    inputsBox.replaceChildren();
    rows.replaceChildren();
    if (!tpl) { addRow('lr', '0.1, 0.01'); update(); return; }
    if (tpl.image_id && [...imageSel.options].some((o) => o.value === String(tpl.image_id))) imageSel.value = String(tpl.image_id);
    cpu.value = tpl.cpu_millis;
    mem.value = tpl.mem_mib;
    runtime.value = tpl.max_runtime_s;
    if (tpl.pool && [...poolSel.options].some((o) => o.value === tpl.pool)) poolSel.value = tpl.pool;
    if (tpl.slices >= 1) slices.value = tpl.slices;
    slicesField.hidden = !poolSel.value;
    for (const inp of tpl.inputs || []) {
      const el = h('input', { type: 'text', class: 'mono', autocomplete: 'off', maxlength: 4096, value: inp.default || '', 'data-input': inp.name });
      state.inputs.push({ name: inp.name, el, required: inp.required });
      inputsBox.append(field(inp.name, el, inp.help || ''));
    }
    for (const s of tpl.hyperparameters || []) addRow(s.name, s.default === undefined || s.default === null ? '' : String(s.default), s);
    update();
  }
  templateSel.addEventListener('change', () => pickTemplate(templateSel.value));

  // { grid } | { list } | { error } from the form as it stands
  function sets() {
    if (modeList.checked) {
      const lines = listInput.value.split('\n').map((l) => l.trim()).filter(Boolean);
      const list = [];
      for (let i = 0; i < lines.length; i++) {
        let o = null;
        try { o = JSON.parse(lines[i]); } catch { o = null; }
        if (!o || typeof o !== 'object' || Array.isArray(o)) return { error: t('sweep.form.badList', { n: i + 1 }) };
        list.push(o);
      }
      return list.length ? { list, runs: list.length } : { error: t('sweep.form.noRuns') };
    }
    const grid = {};
    let runs = 1;
    for (const r of rows.querySelectorAll('[data-param]')) {
      const name = r.querySelector('[data-field=param-name]').value.trim();
      const values = rowValues(r);
      if (!name && !values.length) continue;
      if (!PARAM_RE.test(name) || !values.length) return { error: t('sweep.form.badParam') };
      grid[name] = values;
      runs *= values.length;
    }
    return Object.keys(grid).length ? { grid, runs } : { error: t('sweep.form.noRuns') };
  }

  function update() {
    const list = modeList.checked;
    gridBox.hidden = list;
    listField.hidden = !list;
    const s = sets();
    count.classList.toggle('warning', !!s.error || s.runs > MAX_RUNS);
    count.textContent = s.error ? s.error
      : s.runs > MAX_RUNS ? t('sweep.form.tooMany', { count: formatNumber(s.runs), max: formatNumber(MAX_RUNS) })
        : t('sweep.form.count', { count: s.runs });
    count.dataset.runs = s.error ? '' : String(s.runs);
  }
  modeGrid.addEventListener('change', update);
  modeList.addEventListener('change', update);
  listInput.addEventListener('input', update);

  async function load() {
    try {
      const [imgs, pls, tpls] = await Promise.all([api.get('/images'), api.get('/pools'), api.get('/job-templates').catch(() => ({ items: [] }))]);
      if (!main.isConnected) return;
      const images = imgs.items || [];
      imageSel.replaceChildren(...images.map((i) => h('option', { value: i.id }, `${i.display_name || i.reference} — ${i.reference}`)));
      if (!images.length) msg.error(t('job.form.noImages'));
      poolSel.replaceChildren(h('option', { value: '' }, t('job.form.noGpu')),
        ...(pls.items || []).map((p) => h('option', { value: p.name }, t('job.form.poolOption', { name: p.name, free: formatNumber(p.free_slices || 0), total: formatNumber(p.slices || 0) }))));
      // (a sweep's runs are not distributed)
      state.templates = (tpls.items || []).filter((x) => x.enabled && !(x.members > 1));
      templateSel.replaceChildren(h('option', { value: '' }, t('tmpl.pick.none')),
        ...state.templates.map((x) => h('option', { value: x.id, 'data-template': x.name }, x.title)));
      if (query.get('template')) pickTemplate(query.get('template'));
      else templateInfo.textContent = t('tmpl.pick.help');
    } catch (err) { msg.error(err); }
  }

  const form = h('form', { class: 'form', novalidate: true, 'data-form': 'new-sweep' },
    field(t('tmpl.pick.label'), templateSel), templateInfo,
    field(t('job.form.image'), imageSel),
    field(t('sweep.form.name'), nameInput, t('sweep.form.nameHelp')),
    cmdField, inputsBox,
    field(t('job.form.pool'), poolSel), slicesField,
    field(t('job.form.cpu'), cpu), field(t('job.form.memory'), mem),
    field(t('job.form.maxRuntime'), runtime),
    h('fieldset', { class: 'field sweep-mode' },
      h('legend', null, t('sweep.form.mode')),
      h('label', { class: 'check' }, modeGrid, ' ', t('sweep.form.mode.grid')),
      h('label', { class: 'check' }, modeList, ' ', t('sweep.form.mode.list'))),
    gridBox, listField,
    field(t('sweep.form.metric'), metric, t('sweep.form.metricHelp')),
    field(t('sweep.form.goal'), goal),
    count,
    msg.el,
    h('div', { class: 'actions' },
      h('a', { class: 'btn', href: '#/sweeps' }, t('common.cancel')),
      h('button', { type: 'submit', class: 'btn btn-primary', 'data-action': 'submit-sweep' }, t('sweep.form.submit'))));

  // The server named a grid value ("grid.lr[2]"): show it under its row.
  function showServerField(err) {
    const d = err?.details?.[0];
    const m = typeof d?.field === 'string' ? /^grid\.(.+)\[\d+\]$/.exec(d.field) : null;
    if (!m) return;
    const r = [...rows.querySelectorAll('[data-param]')].find((x) => x.querySelector('[data-field=param-name]').value.trim() === m[1]);
    if (!r) return;
    r.showError(getLanguage() === SERVER_LANGUAGE && err.message ? err.message : reasonText(d.reason, d.limit));
    r.querySelector('[data-field=param-values]').focus();
  }

  form.addEventListener('submit', (e) => {
    e.preventDefault();
    msg.clear();
    const tpl = state.tpl;
    if (!imageSel.value && !(tpl && tpl.image_id)) { msg.error(t('job.form.pickImage')); return; }
    if (!NAME_RE.test(nameInput.value)) { msg.error(t('sweep.form.badName')); nameInput.focus(); return; }
    if (!tpl && !cmdInput.value.trim()) { msg.error(t('job.form.badCommand')); cmdInput.focus(); return; }
    if (!METRIC_RE.test(metric.value.trim())) { msg.error(t('sweep.form.badMetric')); metric.focus(); return; }
    const s = sets();
    if (s.error) { msg.error(s.error); return; }
    if (tpl && !modeList.checked) {
      const bad = checkRows();
      if (bad) { msg.error(t('tmpl.fixFields')); bad.querySelector('[data-field=param-values]').focus(); return; }
    }
    busy(form, async () => {
      try {
        const job = {};
        if (tpl) {
          job.template_id = tpl.id;
          job.inputs = Object.fromEntries(state.inputs.map((c) => [c.name, c.el.value]));
          if (!tpl.image_id || (tpl.allow_overrides && imageSel.value)) job.image_id = Number(imageSel.value);
        } else {
          Object.assign(job, { image_id: Number(imageSel.value), command: ['sh', '-c', cmdInput.value] });
        }
        if (!tpl || tpl.allow_overrides) {
          Object.assign(job, { cpu_millis: Number(cpu.value), mem_mib: Number(mem.value), max_runtime_s: Number(runtime.value) });
          if (poolSel.value) { job.pool = poolSel.value; job.slices = Number(slices.value); }
        }
        const body = { name: nameInput.value, job, metric: metric.value.trim(), goal: goal.value, ...(s.grid ? { grid: s.grid } : { list: s.list }) };
        // a retried click never makes two sweeps
        const sw = await api.post('/sweeps', body, { headers: { 'Idempotency-Key': form.dataset.key || (form.dataset.key = newKey()) } });
        ctx.go(`/sweep?id=${sw.id}`);
      } catch (err) { showServerField(err); msg.error(err); }
    });
  });
  // a change after a failed submit is a new submission
  form.addEventListener('input', () => { delete form.dataset.key; });

  if (!query.get('template')) addRow('lr', '0.1, 0.01');
  update();
  main.append(h('section', { class: 'page' },
    h('p', null, h('a', { href: '#/sweeps' }, t('sweep.back'))),
    h('div', { class: 'page-head' }, h('h1', null, t('sweep.form.title')), h('p', { class: 'muted' }, t('sweep.form.intro'))),
    h('div', { class: 'card' }, form)));
  load();
}
