// pages/job-new.js — "Submit a job": an image from the catalog (the ones I
// may run), a name, the command (run by sh -c in the job's directory), a
// pool and slices or none, CPU and memory, hyperparameters as a JSON object
// and a maximum runtime. Submitting goes to the job's page.
import { api } from '../api.js';
import { t, formatNumber } from '../i18n.js';
import { h, field, messageBox, busy } from '../ui.js';

const NAME_RE = /^[a-z0-9][a-z0-9._-]{0,62}$/;

// An Idempotency-Key (randomUUID needs a secure context; plain http on a
// LAN address has none)
const newKey = () => (globalThis.crypto?.randomUUID ? crypto.randomUUID()
  : `${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}-${Math.random().toString(36).slice(2)}`);

export function render(main, ctx) {
  const msg = messageBox();
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
  poolSel.addEventListener('change', () => { slicesField.hidden = !poolSel.value; });

  async function load() {
    try {
      const [imgs, pls] = await Promise.all([api.get('/images'), api.get('/pools')]);
      if (!main.isConnected) return;
      const images = imgs.items || [];
      imageSel.replaceChildren(...images.map((i) => h('option', { value: i.id }, `${i.display_name || i.reference} — ${i.reference}`)));
      if (!images.length) msg.error(t('job.form.noImages'));
      poolSel.replaceChildren(h('option', { value: '' }, t('job.form.noGpu')),
        ...(pls.items || []).map((p) => h('option', { value: p.name }, t('job.form.poolOption', { name: p.name, free: formatNumber(p.free_slices || 0), total: formatNumber(p.slices || 0) }))));
    } catch (err) { msg.error(err); }
  }

  const form = h('form', { class: 'form', novalidate: true, 'data-form': 'new-job' },
    field(t('job.form.image'), imageSel),
    field(t('job.form.name'), nameInput, t('job.form.nameHelp')),
    field(t('job.form.command'), cmdInput, t('job.form.commandHelp')),
    field(t('job.form.pool'), poolSel), slicesField,
    field(t('job.form.cpu'), cpu), field(t('job.form.memory'), mem),
    field(t('job.form.hyperparameters'), hp, t('job.form.hyperparametersHelp')),
    field(t('job.form.maxRuntime'), runtime),
    field(t('job.form.priority'), priority, t('job.form.priorityHelp')),
    field(t('job.form.retries'), retries, t('job.form.retriesHelp')),
    field(t('job.form.tags'), tags, t('job.form.tagsHelp')),
    msg.el,
    h('div', { class: 'actions' },
      h('a', { class: 'btn', href: '#/jobs' }, t('common.cancel')),
      h('button', { type: 'submit', class: 'btn btn-primary', 'data-action': 'submit-job' }, t('job.form.submit'))));

  form.addEventListener('submit', (e) => {
    e.preventDefault();
    msg.clear();
    if (!imageSel.value) { msg.error(t('job.form.pickImage')); return; }
    if (!NAME_RE.test(nameInput.value)) { msg.error(t('job.form.badName')); nameInput.focus(); return; }
    if (!cmdInput.value.trim()) { msg.error(t('job.form.badCommand')); cmdInput.focus(); return; }
    let hyper = {};
    if (hp.value.trim()) {
      try { hyper = JSON.parse(hp.value); } catch { hyper = null; }
      if (!hyper || typeof hyper !== 'object' || Array.isArray(hyper)) { msg.error(t('job.form.badJson')); hp.focus(); return; }
    }
    busy(form, async () => {
      try {
        const body = {
          name: nameInput.value, image_id: Number(imageSel.value), command: ['sh', '-c', cmdInput.value],
          cpu_millis: Number(cpu.value), mem_mib: Number(mem.value), max_runtime_s: Number(runtime.value),
          hyperparameters: hyper, priority: priority.value, retry_limit: Number(retries.value),
          tags: tags.value.split(',').map((x) => x.trim()).filter(Boolean),
        };
        if (poolSel.value) { body.pool = poolSel.value; body.slices = Number(slices.value); }
        // a retried click never makes two jobs
        const job = await api.post('/jobs', body, { headers: { 'Idempotency-Key': form.dataset.key || (form.dataset.key = newKey()) } });
        ctx.go(`/job?id=${job.id}`);
      } catch (err) { msg.error(err); }
    });
  });

  main.append(h('section', { class: 'page' },
    h('p', null, h('a', { href: '#/jobs' }, t('job.back'))),
    h('div', { class: 'page-head' }, h('h1', null, t('job.form.title')), h('p', { class: 'muted' }, t('job.form.intro'))),
    h('div', { class: 'card' }, form)));
  load();
}
