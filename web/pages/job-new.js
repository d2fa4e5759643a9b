// pages/job-new.js — "Submit a job": an image from the catalog (the ones I
// may run), a name, the command (run by sh -c in the job's directory), a
// pool and slices or none, CPU and memory, hyperparameters as a JSON object
// and a maximum runtime. Submitting goes to the job's page.
//
// Or from a job template (#/jobs/new?template=<id> picks one): the
// template fills the image, the resources and the command; its inputs
// (a script path...) and its typed hyperparameters become form fields
// (numbers with their bounds, choices as a list, booleans as a box), the
// command it will run is previewed as they change, and the server's
// refusal of one of them is shown under that field.
import { api } from '../api.js';
import { t, formatNumber, getLanguage, SERVER_LANGUAGE } from '../i18n.js';
import { h, field, messageBox, busy, uid } from '../ui.js';
import { classPicker } from '../parts/classpick.js';

const NAME_RE = /^[a-z0-9][a-z0-9._-]{0,62}$/;

// An Idempotency-Key (randomUUID needs a secure context; plain http on a
// LAN address has none)
const newKey = () => (globalThis.crypto?.randomUUID ? crypto.randomUUID()
  : `${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}-${Math.random().toString(36).slice(2)}`);

// ---- a template's command, as the server expands it (work/template.c) ----

const word = (v) => (typeof v === 'boolean' ? String(v) : v === undefined || v === null ? '' : String(v));

// The command the template runs for these values: { hp: {name: value},
// inputs: {name: text} }; "~/" of an input is the home.
export function expandPreview(tpl, hp, inputs, home) {
  const input = (n) => {
    const v = inputs[n] ?? '';
    return v.startsWith('~/') ? home + v.slice(1) : v;
  };
  const out = [];
  for (const el of tpl.command || []) {
    if (el === '{hyperparameters}') {
      for (const s of tpl.hyperparameters || []) {
        const v = hp[s.name];
        if (typeof v === 'boolean') { if (v) out.push(`--${s.name}`); continue; }
        out.push(`--${s.name}`, word(v));
      }
      continue;
    }
    out.push(el.replace(/\{\{|\}\}|\{([^{}]*)\}/g, (m, name) => {
      if (m === '{{') return '{';
      if (m === '}}') return '}';
      if (name.startsWith('hp.')) return word(hp[name.slice(3)]);
      return input(name);
    }));
  }
  return out;
}

// A command array as one shell-like line (for reading, not for running).
const shellLine = (argv) => argv.map((a) => (/^[A-Za-z0-9_./:=~@%+-]+$/.test(a) ? a : `'${a.replace(/'/g, `'\\''`)}'`)).join(' ');

// One hyperparameter's input: { el (the control), wrap (its field), get()
// (the value or undefined when the text is not one), err (its inline error) }.
function hpControl(s) {
  const id = uid('hp');
  let el;
  if (s.type === 'bool') {
    el = h('input', { id, type: 'checkbox', checked: s.default === true, 'data-hp': s.name });
  } else if (s.type === 'choice') {
    el = h('select', { id, 'data-hp': s.name },
      ...(s.choices || []).map((c, i) => h('option', { value: String(i), selected: c === s.default }, String(c))));
  } else if (s.type === 'int' || s.type === 'float') {
    el = h('input', {
      id, type: 'number', 'data-hp': s.name, step: s.type === 'int' ? 1 : 'any', inputmode: s.type === 'int' ? 'numeric' : 'decimal',
      min: s.min ?? undefined, max: s.max ?? undefined, value: s.default ?? '', class: 'mono',
    });
  } else {
    el = h('input', { id, type: 'text', 'data-hp': s.name, maxlength: 1024, value: s.default ?? '', autocomplete: 'off', class: 'mono' });
  }
  const err = h('p', { class: 'field-error', 'data-hp-error': s.name, hidden: true });
  const bounds = [];
  if (s.min !== undefined && s.min !== null) bounds.push(t('tmpl.hp.min', { n: String(s.min) }));
  if (s.max !== undefined && s.max !== null) bounds.push(t('tmpl.hp.max', { n: String(s.max) }));
  const help = [s.help, bounds.join(', ')].filter(Boolean).join(' — ');
  const label = h('span', null, h('span', { class: 'mono' }, `--${s.name}`), ' ', h('span', { class: 'badge badge-label' }, t(`tmpl.type.${s.type}`)));
  const wrap = s.type === 'bool'
    ? h('div', { class: 'field', 'data-hp-field': s.name }, h('label', { class: 'check', for: id }, el, ' ', label), help ? h('p', { class: 'field-help' }, help) : null, err)
    : h('div', { class: 'field', 'data-hp-field': s.name }, h('label', { for: id }, label), el, help ? h('p', { class: 'field-help' }, help) : null, err);
  const get = () => {
    if (s.type === 'bool') return el.checked;
    if (s.type === 'choice') return (s.choices || [])[Number(el.value)];
    if (s.type === 'string') return el.value;
    if (el.value.trim() === '') return undefined;
    const n = Number(el.value);
    if (!Number.isFinite(n) || (s.type === 'int' && !Number.isInteger(n))) return null;
    return n;
  };
  // The reason it is wrong here (before sending), or ''.
  const check = () => {
    const v = get();
    if (v === undefined) return s.default === undefined || s.default === null ? t('tmpl.hp.err.required') : '';
    if (v === null) return t(s.type === 'int' ? 'tmpl.hp.err.int' : 'tmpl.hp.err.number');
    if (typeof v === 'number') {
      if (s.min !== undefined && s.min !== null && v < s.min) return t('tmpl.hp.err.min', { limit: String(s.min) });
      if (s.max !== undefined && s.max !== null && v > s.max) return t('tmpl.hp.err.max', { limit: String(s.max) });
    }
    return '';
  };
  const showError = (text) => {
    err.textContent = text || '';
    err.hidden = !text;
    if (text) el.setAttribute('aria-invalid', 'true'); else el.removeAttribute('aria-invalid');
  };
  return { s, el, wrap, get, check, showError };
}

// The server's refusal of one field, in this interface's language: its own
// words in English, the reason's sentence otherwise.
function serverFieldError(err) {
  const d = err?.details?.[0];
  if (!d || typeof d.field !== 'string') return '';
  if (getLanguage() === SERVER_LANGUAGE && err.message) return err.message;
  const limit = typeof d.limit === 'number' ? String(d.limit) : '';
  const key = `tmpl.hp.err.${d.reason}`;
  const said = t(key, { limit });
  return said === key ? err.message : said;
}

const withNote = (f, note) => { f.append(note); return f; };

export function render(main, ctx) {
  const msg = messageBox();
  const query = new URLSearchParams((location.hash.split('?')[1]) || '');
  const home = `/home/${ctx.user.username}`;
  const templateSel = h('select', { name: 'template', 'data-field': 'template' }, h('option', { value: '' }, t('tmpl.pick.none')));
  const templateInfo = h('p', { class: 'field-help', 'data-template-description': '' });
  const imageSel = h('select', { name: 'image', 'data-field': 'image' });
  const nameInput = h('input', { type: 'text', name: 'name', required: true, maxlength: 63, autocomplete: 'off', 'data-field': 'name', value: `job-${Math.random().toString(36).slice(2, 6)}` });
  const cmdInput = h('textarea', { name: 'command', rows: 3, required: true, class: 'mono', 'data-field': 'command', placeholder: 'python3 train.py' });
  const poolSel = h('select', { name: 'pool', 'data-field': 'pool' }, h('option', { value: '' }, t('job.form.noGpu')));
  const slices = h('input', { type: 'number', min: 1, max: 64, value: 1, 'data-field': 'slices' });
  const cpu = h('input', { type: 'number', min: 10, max: 1024000, step: 100, value: 1000, 'data-field': 'cpu' });
  const mem = h('input', { type: 'number', min: 16, max: 16777216, step: 64, value: 1024, 'data-field': 'memory' });
  const hp = h('textarea', { name: 'hyperparameters', rows: 3, class: 'mono', 'data-field': 'hyperparameters', placeholder: '{"lr": 0.01, "epochs": 3}' });
  const runtime = h('input', { type: 'number', min: 1, max: 2592000, value: 3600, 'data-field': 'max-runtime' });
  const tags = h('input', { type: 'text', maxlength: 400, autocomplete: 'off', 'data-field': 'tags', placeholder: 'resnet, sweep-1' });
  const priority = h('select', { 'data-field': 'priority' },
    ...['normal', 'scavenger', ...(['teacher', 'admin'].includes(ctx.user.role) ? ['exam'] : [])]
      .map((p) => h('option', { value: p }, t(`job.form.priority.${p}`))));
  const retries = h('input', { type: 'number', min: 0, max: 10, value: 0, 'data-field': 'retry-limit' });
  const slicesField = field(t('job.form.slices'), slices);
  slicesField.hidden = true;
  // a distributed job (with a pool): members, each with the slices, CPU
  // and memory asked for
  const members = h('input', { type: 'number', min: 1, max: 16, step: 1, value: 1, 'data-field': 'members' });
  const membersField = field(t('job.form.members'), members, t('job.form.membersHelp'));
  membersField.hidden = true;
  const perMember = () => h('p', { class: 'field-help', 'data-per-member': '', hidden: true }, t('job.form.perMember'));
  const perMemberNotes = [perMember(), perMember(), perMember()];
  slicesField.append(perMemberNotes[0]);
  const poolChanged = () => {
    slicesField.hidden = !poolSel.value;
    membersField.hidden = !poolSel.value;
    for (const n of perMemberNotes) n.hidden = !poolSel.value;
  };
  poolSel.addEventListener('change', poolChanged);
  // a class (only when I am in classes): its pool
  const picker = classPicker({ poolSelect: poolSel, onChange: () => poolChanged() });
  // "Sweep over these hyperparameters": the sweep builder with this template
  const sweepLink = h('a', { class: 'btn btn-small', 'data-action': 'sweep-template' }, t('sweepTmpl.link'));
  const sweepLinkBox = h('p', { hidden: true }, sweepLink);

  // the template's part of the form
  const cmdField = field(t('job.form.command'), cmdInput, t('job.form.commandHelp'));
  const hpField = field(t('job.form.hyperparameters'), hp, t('job.form.hyperparametersHelp'));
  const preview = h('pre', { class: 'mono template-preview', 'data-command-preview': '' });
  const previewField = h('div', { class: 'field', hidden: true }, h('label', null, t('tmpl.preview')), preview, h('p', { class: 'field-help' }, t('tmpl.previewHelp')));
  const inputsBox = h('div', { class: 'form-inline-wide', 'data-template-inputs': '' });
  const hpBox = h('div', { class: 'form-inline-wide', 'data-template-hyperparameters': '' });
  const tplSection = h('fieldset', { class: 'template-params', hidden: true },
    h('legend', null, t('tmpl.params')), inputsBox, hpBox);
  const state = { templates: [], tpl: null, hps: [], inputs: [] };

  const hpValues = () => {
    const out = {};
    for (const c of state.hps) { const v = c.get(); if (v !== undefined && v !== null) out[c.s.name] = v; }
    return out;
  };
  const inputValues = () => Object.fromEntries(state.inputs.map((c) => [c.name, c.el.value]));
  const refreshPreview = () => {
    if (!state.tpl) return;
    const vals = { ...Object.fromEntries((state.tpl.hyperparameters || []).map((s) => [s.name, s.default ?? (s.type === 'bool' ? false : '')])), ...hpValues() };
    const ins = Object.fromEntries((state.tpl.inputs || []).map((i) => [i.name, i.default || '']));
    for (const [k, v] of Object.entries(inputValues())) if (v) ins[k] = v;
    preview.textContent = shellLine(expandPreview(state.tpl, vals, ins, home));
  };

  function pickTemplate(id) {
    const tpl = state.templates.find((x) => String(x.id) === String(id)) || null;
    state.tpl = tpl;
    templateSel.value = tpl ? String(tpl.id) : '';
    cmdField.hidden = !!tpl;
    hpField.hidden = !!tpl;
    previewField.hidden = !tpl;
    tplSection.hidden = !tpl;
    templateInfo.textContent = tpl ? tpl.description || '' : t('tmpl.pick.help');
    sweepLinkBox.hidden = !tpl || !(tpl.hyperparameters || []).length || tpl.members > 1;
    if (tpl) sweepLink.setAttribute('href', `#/sweeps/new?template=${tpl.id}`);
    const fixed = tpl && !tpl.allow_overrides;
    for (const el of [cpu, mem, runtime, poolSel, slices, members]) el.disabled = !!fixed;
    imageSel.disabled = !!(tpl && tpl.image_id && !tpl.allow_overrides);
    state.hps = [];
    state.inputs = [];
    inputsBox.replaceChildren();
    hpBox.replaceChildren();
    if (!tpl) return;
    // the template's defaults in the form
    if (tpl.image_id && [...imageSel.options].some((o) => o.value === String(tpl.image_id))) imageSel.value = String(tpl.image_id);
    cpu.value = tpl.cpu_millis;
    mem.value = tpl.mem_mib;
    runtime.value = tpl.max_runtime_s;
    if (tpl.pool && [...poolSel.options].some((o) => o.value === tpl.pool)) poolSel.value = tpl.pool;
    if (tpl.slices >= 1) slices.value = tpl.slices;
    members.value = tpl.members || 1;
    poolChanged();
    for (const inp of tpl.inputs || []) {
      const el = h('input', { type: 'text', class: 'mono', autocomplete: 'off', maxlength: 4096, value: inp.default || '', 'data-input': inp.name });
      const err = h('p', { class: 'field-error', 'data-input-error': inp.name, hidden: true });
      const f = field(inp.name, el, inp.help || '');
      f.append(err);
      el.addEventListener('input', refreshPreview);
      state.inputs.push({ name: inp.name, el, required: inp.required, showError: (text) => { err.textContent = text || ''; err.hidden = !text; } });
      inputsBox.append(f);
    }
    for (const s of tpl.hyperparameters || []) {
      const c = hpControl(s);
      c.el.addEventListener('input', () => { c.showError(''); refreshPreview(); });
      c.el.addEventListener('change', () => { c.showError(c.check()); refreshPreview(); });
      state.hps.push(c);
      hpBox.append(c.wrap);
    }
    if (!(tpl.hyperparameters || []).length) hpBox.append(h('p', { class: 'muted' }, t('tmpl.noHyperparameters')));
    refreshPreview();
  }
  templateSel.addEventListener('change', () => pickTemplate(templateSel.value));

  async function load() {
    try {
      const [imgs, pls, tpls] = await Promise.all([api.get('/images'), api.get('/pools'), api.get('/job-templates').catch(() => ({ items: [] }))]);
      if (!main.isConnected) return;
      const images = imgs.items || [];
      imageSel.replaceChildren(...images.map((i) => h('option', { value: i.id }, `${i.display_name || i.reference} — ${i.reference}`)));
      if (!images.length) msg.error(t('job.form.noImages'));
      poolSel.replaceChildren(h('option', { value: '' }, t('job.form.noGpu')),
        ...(pls.items || []).map((p) => h('option', { value: p.name }, t('job.form.poolOption', { name: p.name, free: formatNumber(p.free_slices || 0), total: formatNumber(p.slices || 0) }))));
      state.templates = (tpls.items || []).filter((x) => x.enabled);
      templateSel.replaceChildren(h('option', { value: '' }, t('tmpl.pick.none')),
        ...state.templates.map((x) => h('option', { value: x.id, 'data-template': x.name }, x.title)));
      pickTemplate(query.get('template') || '');
      await picker.load();
    } catch (err) { msg.error(err); }
  }

  const form = h('form', { class: 'form', novalidate: true, 'data-form': 'new-job' },
    field(t('tmpl.pick.label'), templateSel), templateInfo,
    field(t('job.form.image'), imageSel),
    field(t('job.form.name'), nameInput, t('job.form.nameHelp')),
    cmdField, tplSection, previewField,
    sweepLinkBox,
    picker.el, field(t('job.form.pool'), poolSel), slicesField, membersField,
    withNote(field(t('job.form.cpu'), cpu), perMemberNotes[1]), withNote(field(t('job.form.memory'), mem), perMemberNotes[2]),
    hpField,
    field(t('job.form.maxRuntime'), runtime),
    field(t('job.form.priority'), priority, t('job.form.priorityHelp')),
    field(t('job.form.retries'), retries, t('job.form.retriesHelp')),
    field(t('job.form.tags'), tags, t('job.form.tagsHelp')),
    msg.el,
    h('div', { class: 'actions' },
      h('a', { class: 'btn', href: '#/jobs' }, t('common.cancel')),
      h('button', { type: 'submit', class: 'btn btn-primary', 'data-action': 'submit-job' }, t('job.form.submit'))));

  // The server named a field of the template's part: show it there.
  function showServerField(err) {
    const f = err?.details?.[0]?.field;
    if (typeof f !== 'string') return false;
    const text = serverFieldError(err);
    if (f.startsWith('hyperparameters.')) {
      const c = state.hps.find((x) => x.s.name === f.slice(16));
      if (c) { c.showError(text); c.el.focus(); return true; }
    }
    if (f.startsWith('inputs.')) {
      const c = state.inputs.find((x) => x.name === f.slice(7));
      if (c) { c.showError(text); c.el.focus(); return true; }
    }
    return false;
  }

  form.addEventListener('submit', (e) => {
    e.preventDefault();
    msg.clear();
    const tpl = state.tpl;
    if (!imageSel.value && !(tpl && tpl.image_id)) { msg.error(t('job.form.pickImage')); return; }
    if (!NAME_RE.test(nameInput.value)) { msg.error(t('job.form.badName')); nameInput.focus(); return; }
    const nMembers = Number(members.value);
    if (poolSel.value && !(Number.isInteger(nMembers) && nMembers >= 1 && nMembers <= 16)) { msg.error(t('job.form.badMembers')); members.focus(); return; }
    let hyper = {};
    if (tpl) {
      let first = null;
      for (const c of state.hps) {
        const why = c.check();
        c.showError(why);
        if (why && !first) first = c;
      }
      for (const c of state.inputs) {
        const why = c.required && !c.el.value.trim() ? t('tmpl.hp.err.required') : '';
        c.showError(why);
        if (why && !first) first = c;
      }
      if (first) { msg.error(t('tmpl.fixFields')); first.el.focus(); return; }
      hyper = hpValues();
    } else {
      if (!cmdInput.value.trim()) { msg.error(t('job.form.badCommand')); cmdInput.focus(); return; }
      if (hp.value.trim()) {
        try { hyper = JSON.parse(hp.value); } catch { hyper = null; }
        if (!hyper || typeof hyper !== 'object' || Array.isArray(hyper)) { msg.error(t('job.form.badJson')); hp.focus(); return; }
      }
    }
    busy(form, async () => {
      try {
        const body = {
          name: nameInput.value, hyperparameters: hyper, priority: priority.value, retry_limit: Number(retries.value),
          tags: tags.value.split(',').map((x) => x.trim()).filter(Boolean),
        };
        if (!tpl) {
          Object.assign(body, { image_id: Number(imageSel.value), command: ['sh', '-c', cmdInput.value] });
        } else {
          body.template_id = tpl.id;
          body.inputs = inputValues();
          if (!tpl.image_id || (tpl.allow_overrides && imageSel.value)) body.image_id = Number(imageSel.value);
        }
        if (!tpl || tpl.allow_overrides) {
          Object.assign(body, { cpu_millis: Number(cpu.value), mem_mib: Number(mem.value), max_runtime_s: Number(runtime.value) });
          if (picker.value()) { body.class = picker.value(); body.slices = Number(slices.value); }
          else if (poolSel.value) { body.pool = poolSel.value; body.slices = Number(slices.value); }
          if (poolSel.value && nMembers > 1) body.members = nMembers;
        }
        if (picker.value()) body.class = picker.value();
        // a retried click never makes two jobs
        const job = await api.post('/jobs', body, { headers: { 'Idempotency-Key': form.dataset.key || (form.dataset.key = newKey()) } });
        ctx.go(`/job?id=${job.id}`);
      } catch (err) {
        showServerField(err);
        msg.error(err);
      }
    });
  });

  main.append(h('section', { class: 'page' },
    h('p', null, h('a', { href: '#/jobs' }, t('job.back'))),
    h('div', { class: 'page-head' }, h('h1', null, t('job.form.title')), h('p', { class: 'muted' }, t('job.form.intro'))),
    h('div', { class: 'card' }, form)));
  load();
}
