// pages/instance-new.js — "New instance": pick an image (cards of the images
// I may run: the catalog's visible ones and my saved ones), a pool (with its
// free slices now; pools I may not use are shown but not offered) or none,
// and resources with sliders bounded by the limits in force for me there
// (GET /me/limits) and by the largest node that could take it; a note says
// when the request will have to wait. Creating goes to the instance's page,
// which shows the queue reason while it waits; a request that could never
// run is refused, and the form says why (in the interface's language, with
// the numbers: errorParts). Free slices are those some request could use
// (usableFree).
import { api } from '../api.js';
import { t, formatNumber } from '../i18n.js';
import { h, field, messageBox, busy, uid } from '../ui.js';
import { usableFree } from '../parts/pool.js';
import { classPicker } from '../parts/classpick.js';

const NAME_RE = /^[a-z0-9][a-z0-9._-]{0,62}$/;

// A range input with its value shown next to it: slider(opts) →
// { el, input, set(max) }.
function slider({ name, min, max, step, value, format, help }) {
  const out = h('output', { class: 'mono', 'data-value': name });
  const input = h('input', { type: 'range', min, max, step, value, 'data-slider': name, name });
  const show = () => { out.textContent = format(Number(input.value)); };
  input.addEventListener('input', show);
  const helpEl = h('p', { class: 'field-help', 'data-limit': name }, help || '');
  const el = h('div', { class: 'field' },
    h('label', { for: input.id = uid('sl') }, t(`inst.new.${name}`), ' ', out),
    input, helpEl);
  show();
  return {
    el, input,
    set({ max: m, help: text }) {
      input.max = m;
      if (Number(input.value) > m) input.value = m;
      helpEl.textContent = text || '';
      show();
    },
  };
}

export function render(main, ctx) {
  const msg = messageBox();
  const cards = h('div', { class: 'pool-grid', 'data-images': '' }, h('p', { class: 'muted' }, t('common.loading')));
  let images = [];
  let pools = [];
  let chosen = null;

  const nameInput = h('input', { type: 'text', name: 'name', required: true, maxlength: 63, autocomplete: 'off', pattern: NAME_RE.source, 'data-field': 'name', value: `nb-${Math.random().toString(36).slice(2, 6)}` });
  const poolSelect = h('select', { name: 'pool', 'data-field': 'pool' }, h('option', { value: '' }, t('inst.new.noGpu')));
  const slices = slider({ name: 'slices', min: 1, max: 8, step: 1, value: 1, format: (v) => formatNumber(v) });
  const cpu = slider({ name: 'cpu', min: 100, max: 16000, step: 100, value: 1000, format: (v) => t('inst.new.cores', { n: (v / 1000).toFixed(1) }) });
  const mem = slider({ name: 'memory', min: 256, max: 65536, step: 256, value: 2048, format: (v) => t('inst.new.mib', { n: formatNumber(v) }) });
  const shm = slider({ name: 'shm', min: 64, max: 16384, step: 64, value: 256, format: (v) => t('inst.new.mib', { n: formatNumber(v) }) });
  const waitNote = h('p', { class: 'callout', 'data-field': 'wait-note', hidden: true });

  // The limits in force for me (GET /me/limits) and the largest node that
  // could take the work decide the sliders' ends and the waiting note.
  let limits = null;
  const limitFor = (p) => (p ? (limits?.pools || []).find((x) => x.pool === p.name) : limits?.cpu_only) || {};
  const num = (v) => typeof v === 'number';
  // the smallest of the limits that are numbers, else fallback
  const capOf = (fallback, ...vs) => (vs.some(num) ? Math.min(...vs.filter(num)) : fallback);

  function poolChanged() {
    const p = pools.find((x) => x.name === poolSelect.value);
    slices.el.hidden = !p;
    const q = limitFor(p);
    if (p) {
      const cap = Math.max(1, capOf(64, p.slices, q.max_slices));
      slices.set({
        max: cap,
        help: num(q.max_slices)
          ? t('inst.new.quotaSlices', { max: formatNumber(q.max_slices), used: formatNumber(q.slices_in_use || 0) })
          : t('inst.new.noQuota'),
      });
    }
    const cpuCap = capOf(16000, q.max_cpu_millis, q.node_cpu_millis);
    const memCap = capOf(65536, q.max_mem_mib, q.node_mem_mib);
    const cpuHelp = [num(q.max_cpu_millis) ? t('inst.new.quotaCpu', { n: formatNumber(q.max_cpu_millis / 1000) }) : '',
      num(q.node_cpu_millis) ? t('inst.new.nodeCpu', { n: formatNumber(q.node_cpu_millis / 1000) }) : ''].filter(Boolean).join(' ');
    const memHelp = [num(q.max_mem_mib) ? t('inst.new.quotaMem', { n: formatNumber(q.max_mem_mib) }) : '',
      num(q.node_mem_mib) ? t('inst.new.nodeMem', { n: formatNumber(q.node_mem_mib) }) : ''].filter(Boolean).join(' ');
    cpu.set({ max: Math.max(100, Math.floor(cpuCap / 100) * 100), help: cpuHelp });
    mem.set({ max: Math.max(256, Math.floor(memCap / 256) * 256), help: memHelp });
    shm.set({ max: Math.max(64, Math.min(16384, Math.floor(Number(mem.input.max) / 64) * 64)) });
    updateNote();
  }

  function updateNote() {
    const p = pools.find((x) => x.name === poolSelect.value);
    const q = limitFor(p);
    const want = Number(slices.input.value);
    const cpuWant = Number(cpu.input.value), memWant = Number(mem.input.value);
    let note = '';
    if (p && num(q.max_slices) && q.max_slices === 0) note = t('inst.new.noAccess', { pool: p.name });
    else if (!p && (q.max_cpu_millis === 0 || q.max_mem_mib === 0)) note = t('inst.new.noCpuQuota');
    else if (p && num(q.max_slices) && (q.slices_in_use || 0) + want > q.max_slices) note = t('inst.new.waitQuota');
    else if ((num(q.max_cpu_millis) && (q.cpu_millis_in_use || 0) + cpuWant > q.max_cpu_millis)
      || (num(q.max_mem_mib) && (q.mem_mib_in_use || 0) + memWant > q.max_mem_mib)) note = t('inst.new.waitQuota');
    else if (p && usableFree(p) < want) note = t('inst.new.waitFree', { free: formatNumber(usableFree(p)) });
    waitNote.textContent = note;
    waitNote.hidden = !note;
  }
  // a class (only when I am in classes): its pool, the student's slices
  const picker = classPicker({
    poolSelect,
    preset: new URLSearchParams(location.hash.split('?')[1] || '').get('class'),
    onChange: (c) => {
      poolChanged();
      const most = c?.my_role === 'student' ? c.student_limits?.slices : c?.allocation?.slices;
      if (c && typeof most === 'number') slices.set({ max: Math.max(1, most), help: t('class.pick.slices', { n: formatNumber(most) }) });
    },
  });
  slices.input.addEventListener('input', updateNote);
  cpu.input.addEventListener('input', updateNote);
  mem.input.addEventListener('input', updateNote);
  poolSelect.addEventListener('change', poolChanged);

  function imageCard(img) {
    const radio = h('input', { type: 'radio', name: 'image', value: img.id, id: uid('img'), 'data-image-radio': img.id });
    const card = h('label', { class: 'pool-card choice', for: radio.id, 'data-image': img.reference, 'data-id': img.id },
      radio,
      h('div', { class: 'choice-text' },
        h('strong', { class: 'pool-name' }, img.display_name || img.reference),
        h('span', { class: 'muted mono cell-sub' }, img.reference),
        h('span', { class: 'cell-sub' }, [img.framework, img.cuda_version ? `CUDA ${img.cuda_version}` : null].filter(Boolean).join(' · ')),
        img.personal ? h('span', { class: 'badge badge-label' }, t('inst.new.mine')) : null,
        img.description ? h('span', { class: 'pool-desc muted' }, img.description) : null));
    radio.addEventListener('change', () => { chosen = img; });
    return card;
  }

  async function load() {
    try {
      const [imgs, pls, lim] = await Promise.all([api.get('/images'), api.get('/pools'), api.get('/me/limits')]);
      if (!main.isConnected) return;
      limits = lim;
      images = imgs.items || [];
      pools = pls.items || [];
      cards.replaceChildren(...(images.length ? images.map(imageCard) : [h('p', { class: 'muted', 'data-empty': 'images' }, t('inst.new.noImages'))]));
      if (images.length) { cards.querySelector('input').checked = true; chosen = images[0]; }
      poolSelect.replaceChildren(h('option', { value: '' }, t('inst.new.noGpu')),
        ...pools.map((p) => {
          const q = limitFor(p);
          // closed to my role, or no slice for me at all: shown, not offered
          const shut = q.open === false || q.max_slices === 0;
          return h('option', { value: p.name, 'data-free': usableFree(p), disabled: shut, 'data-shut': shut ? '' : null },
            t(shut ? 'inst.new.poolOptionShut' : 'inst.new.poolOption', { name: p.name, free: formatNumber(usableFree(p)), total: formatNumber(p.slices || 0) }));
        }));
      const usable = pools.find((p) => { const q = limitFor(p); return q.open !== false && q.max_slices !== 0; });
      poolSelect.value = usable ? usable.name : '';
      poolChanged();
      await picker.load();
    } catch (err) {
      msg.error(err);
    }
  }

  const form = h('form', { class: 'form', novalidate: true, 'data-form': 'new-instance' },
    h('fieldset', { class: 'field' }, h('legend', null, t('inst.new.image')), cards),
    field(t('inst.new.name'), nameInput, t('inst.new.nameHelp')),
    picker.el,
    field(t('inst.new.pool'), poolSelect, t('inst.new.poolHelp')),
    slices.el, cpu.el, mem.el, shm.el,
    waitNote,
    msg.el,
    h('div', { class: 'actions' },
      h('a', { class: 'btn', href: '#/instances' }, t('common.cancel')),
      h('button', { type: 'submit', class: 'btn btn-primary', 'data-action': 'create' }, t('inst.new.create'))));

  form.addEventListener('submit', (e) => {
    e.preventDefault();
    msg.clear();
    if (!chosen) { msg.error(t('inst.new.pickImage')); return; }
    if (!NAME_RE.test(nameInput.value)) { msg.error(t('inst.new.badName')); nameInput.focus(); return; }
    busy(form, async () => {
      try {
        const body = {
          name: nameInput.value, image_id: chosen.id,
          cpu_millis: Number(cpu.input.value), mem_mib: Number(mem.input.value), shm_mib: Number(shm.input.value),
        };
        if (picker.value()) { body.class = picker.value(); body.slices = Number(slices.input.value); }
        else if (poolSelect.value) { body.pool = poolSelect.value; body.slices = Number(slices.input.value); }
        const inst = await api.post('/instances', body);
        ctx.go(`/instance?id=${inst.id}`);
      } catch (err) {
        msg.error(err);
      }
    });
  });

  main.append(h('section', { class: 'page' },
    h('div', { class: 'page-head' },
      h('h1', null, t('inst.new.title')),
      h('p', { class: 'muted' }, t('inst.new.intro'))),
    h('div', { class: 'card' }, form)));
  load();
}
