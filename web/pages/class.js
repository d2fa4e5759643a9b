// pages/class.js — one class's overview (#/class?id=N): who teaches it,
// its term and description, its allocation and the limits each student
// gets; for its teachers (and admins) the forms that change them — the
// class's settings, the students' limits (each at most the class's own
// figure: the server says which and by how much), the policies and what
// assistants may do, and for admins the allocation from a pool. Students
// see their own limits. Lab sessions, assignments and notices come from
// the other class pages' APIs and are shown when those answer.
import { api } from '../api.js';
import { t, formatNumber, formatDate, formatBytes } from '../i18n.js';
import { h, field, messageBox, busy, toast } from '../ui.js';
import { classHead, isStaff } from '../parts/classnav.js';
import { classRoleBadge } from './classes.js';

const GIB = 1024 ** 3;

// Amounts as the forms show them (cores, GiB, hours) and back.
const UNITS = {
  slices: { div: 1, step: 1 },
  cpu_millis: { div: 1000, step: 0.5 },
  mem_mib: { div: 1024, step: 1 },
  storage_bytes: { div: GIB, step: 1 },
  gpu_hours_week: { div: 1, step: 0.5 },
  max_session_s: { div: 3600, step: 0.5 },
};
const shown = (k, v) => (v == null ? '' : String(Math.round((v / UNITS[k].div) * 100) / 100));
const sent = (k, s) => (s.trim() === '' ? null : k === 'gpu_hours_week' ? Number(s) : Math.round(Number(s) * UNITS[k].div));

function amount(k, v) {
  if (v == null) return t('class.noCap');
  switch (k) {
    case 'cpu_millis': return t('class.amount.cores', { n: formatNumber(v / 1000) });
    case 'mem_mib': return formatBytes(v * 1024 * 1024);
    case 'storage_bytes': return formatBytes(v);
    case 'gpu_hours_week': return t('class.amount.gpuHours', { n: formatNumber(v) });
    case 'max_session_s': return t('class.amount.hours', { n: formatNumber(v / 3600) });
    default: return formatNumber(v);
  }
}

const LIMITS = ['slices', 'cpu_millis', 'mem_mib', 'storage_bytes', 'gpu_hours_week', 'max_session_s'];
const ALLOC = ['slices', 'cpu_millis', 'mem_mib', 'gpu_hours_week', 'storage_bytes'];
const REACH = ['teachers_open_apps', 'tas_open_apps', 'tas_stop_work', 'tas_manage_roster'];

export function render(main, ctx) {
  const id = Number(new URLSearchParams(location.hash.split('?')[1] || '').get('id'));
  const msg = messageBox();
  const root = h('section', { class: 'page', 'data-page': 'class' }, msg.el);
  main.append(root);

  async function load() {
    try {
      const cls = await api.get(`/classes/${id}`);
      draw(cls);
    } catch (err) {
      msg.error(err);
    }
  }

  function props(rows) {
    return h('dl', { class: 'props' }, rows.filter(Boolean).flatMap(([k, v, name]) => [h('dt', null, k), h('dd', { 'data-field': name || null }, v)]));
  }

  function summaryCard(cls) {
    const co = cls.co_teachers || [];
    return h('div', { class: 'card', 'data-card': 'summary' },
      h('h2', null, t('class.about')),
      props([
        [t('class.teacher'), cls.teacher.display_name || cls.teacher.username, 'teacher'],
        co.length ? [t('class.coTeachers'), co.map((u) => u.display_name || u.username).join(', '), 'co-teachers'] : null,
        [t('class.term'), cls.term || '—'],
        [t('classes.myRole'), classRoleBadge(cls.my_role)],
        [t('class.members'), t('class.countsLine', { students: cls.counts.students, tas: cls.counts.tas, teachers: cls.counts.teachers }), 'counts'],
        cls.counts.suspended ? [t('class.suspended'), formatNumber(cls.counts.suspended)] : null,
        [t('class.createdAt'), formatDate(cls.created_at)],
        cls.state === 'archived' ? [t('class.archivedAt'), formatDate(cls.archived_at)] : null,
      ]),
      cls.description ? h('p', { class: 'class-description', 'data-field': 'description' }, cls.description) : null);
  }

  function allocationProps(cls) {
    return props([
      [t('class.pool'), cls.pool ? `${cls.pool.name} (${t('class.poolSlices', { n: cls.pool.slices })})` : t('class.noPool'), 'pool'],
      ...ALLOC.map((k) => [t(`class.alloc.${k}`), amount(k, cls.allocation[k]), `alloc-${k}`]),
    ]);
  }

  function limitsProps(cls) {
    return props(LIMITS.map((k) => [t(`class.limit.${k}`), amount(k, cls.student_limits[k]), `limit-${k}`]));
  }

  // A form of number inputs (one per key, in the forms' units); submit
  // gets { key: value in the API's units | null }.
  function numbersForm({ name, keys, values, label, help, onSave, disabled, extra = [] }) {
    const m = messageBox();
    const inputs = Object.fromEntries(keys.map((k) => [k, h('input', {
      type: 'number', min: 0, step: UNITS[k].step, name: k, 'data-field': k, value: shown(k, values[k]), placeholder: t('class.noCap'), disabled,
    })]));
    const form = h('form', { class: 'form form-inline-wide', 'data-form': name, novalidate: true },
      ...extra,
      ...keys.map((k) => field(`${label(k)} (${t(`class.unit.${k}`)})`, inputs[k], help ? help(k) : null)),
      m.el,
      disabled ? null : h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'btn btn-primary', 'data-action': `save-${name}` }, t('classes.save'))));
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      m.clear();
      const out = {};
      for (const k of keys) {
        const v = inputs[k].value;
        if (v.trim() !== '' && !(Number(v) >= 0)) { m.error(t('class.badNumber')); inputs[k].focus(); return; }
        out[k] = sent(k, v);
      }
      busy(form, async () => {
        try { await onSave(out); toast(t('classes.saved')); load(); } catch (err) { m.error(err); }
      });
    });
    return form;
  }

  function settingsForm(cls, canEdit) {
    const m = messageBox();
    const name = h('input', { type: 'text', name: 'name', value: cls.name, maxlength: 100, disabled: !canEdit });
    const term = h('input', { type: 'text', name: 'term', value: cls.term, maxlength: 100, disabled: !canEdit });
    const desc = h('textarea', { name: 'description', maxlength: 4000, rows: 3, disabled: !canEdit }, cls.description);
    const form = h('form', { class: 'form', 'data-form': 'settings', novalidate: true },
      field(t('class.name'), name), field(t('class.term'), term), field(t('class.description'), desc), m.el,
      canEdit ? h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'btn btn-primary', 'data-action': 'save-settings' }, t('classes.save'))) : null);
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      busy(form, async () => {
        try {
          await api.patch(`/classes/${cls.id}`, { name: name.value.trim(), term: term.value.trim(), description: desc.value.trim() });
          toast(t('classes.saved'));
          load();
        } catch (err) { m.error(err); }
      });
    });
    return form;
  }

  function policyForm(cls, canEdit, images) {
    const m = messageBox();
    const num = (k, div, v) => h('input', { type: 'number', min: 0, step: 1, name: k, 'data-field': k, value: v == null ? '' : String(Math.round((v / div) * 100) / 100), placeholder: t('class.noCap'), disabled: !canEdit });
    const offhours = num('offhours_slices', 1, cls.offhours_slices);
    const idle = num('idle_timeout_s', 60, cls.idle_timeout_s);
    const life = num('max_lifetime_s', 3600, cls.max_lifetime_s);
    const policy = h('select', { name: 'data_policy', 'data-field': 'data_policy', disabled: !canEdit },
      ['keep', 'remove'].map((p) => h('option', { value: p, selected: cls.data_policy === p }, t(`class.policy.${p}`))));
    const imgs = h('select', { name: 'allowed_images', multiple: true, size: Math.min(6, Math.max(2, images.length)), 'data-field': 'allowed_images', disabled: !canEdit },
      images.map((i) => h('option', { value: i.id, selected: cls.allowed_images.includes(i.id) }, i.display_name || i.reference)));
    const reach = Object.fromEntries(REACH.map((k) => [k, h('input', { type: 'checkbox', name: k, 'data-field': k, checked: cls.reach[k], disabled: !canEdit })]));
    const form = h('form', { class: 'form', 'data-form': 'policy', novalidate: true },
      h('div', { class: 'form-inline-wide' },
        field(t('class.offhours'), offhours, t('class.offhoursHelp', { n: cls.allocation.slices })),
        field(t('class.idleTimeout'), idle, t('class.idleHelp')),
        field(t('class.maxLifetime'), life, t('class.lifetimeHelp')),
        field(t('class.dataPolicy'), policy, t('class.dataPolicyHelp'))),
      field(t('class.allowedImages'), imgs, t('class.allowedImagesHelp')),
      h('fieldset', { class: 'field checks' }, h('legend', null, t('class.reach')),
        REACH.map((k) => h('label', { class: 'check' }, reach[k], t(`class.reach.${k}`)))),
      m.el,
      canEdit ? h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'btn btn-primary', 'data-action': 'save-policy' }, t('classes.save'))) : null);
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      const val = (input, mul) => (input.value.trim() === '' ? null : Math.round(Number(input.value) * mul));
      busy(form, async () => {
        try {
          await api.patch(`/classes/${cls.id}`, {
            offhours_slices: val(offhours, 1),
            idle_timeout_s: val(idle, 60) || null,
            max_lifetime_s: val(life, 3600) || null,
            data_policy: policy.value,
            allowed_images: [...imgs.selectedOptions].map((o) => Number(o.value)),
            reach: Object.fromEntries(REACH.map((k) => [k, reach[k].checked])),
          });
          toast(t('classes.saved'));
          load();
        } catch (err) { m.error(err); }
      });
    });
    return form;
  }

  function allocationForm(cls, pools) {
    const pool = h('select', { name: 'pool', 'data-field': 'pool' },
      h('option', { value: '' }, t('class.noPool')),
      pools.map((p) => h('option', { value: p.name, selected: cls.pool?.name === p.name }, p.name)));
    return numbersForm({
      name: 'allocation', keys: ALLOC, values: cls.allocation, label: (k) => t(`class.alloc.${k}`),
      extra: [field(t('class.pool'), pool)],
      onSave: (out) => api.put(`/classes/${cls.id}/allocation`, { pool: pool.value || null, ...out, slices: out.slices ?? 0 }),
    });
  }

  // A read-only section from another part's API; a 404 (that part is not
  // there yet) or an empty list shows a quiet line.
  function otherSection(cls, path, titleKey, emptyKey, item) {
    const body = h('div', null, h('p', { class: 'muted' }, t('common.loading')));
    api.get(`/classes/${cls.id}/${path}`).then((reply) => {
      const items = reply?.items || [];
      body.replaceChildren(items.length
        ? h('ul', { class: 'class-list' }, items.slice(0, 10).map((x) => h('li', null, item(x))))
        : h('p', { class: 'muted' }, t(emptyKey)));
    }).catch(() => body.replaceChildren(h('p', { class: 'muted' }, t(emptyKey))));
    return h('div', { class: 'card', 'data-card': path }, h('h2', null, t(titleKey)), body);
  }

  async function draw(cls) {
    const user = ctx.user;
    const staff = isStaff(cls, user);
    const canEdit = cls.state === 'active' && (user?.role === 'admin' || ['owner', 'teacher'].includes(cls.my_role));
    const [images, pools] = await Promise.all([
      staff ? api.get('/images').then((r) => (r?.items || []).filter((i) => !i.personal)).catch(() => []) : [],
      user?.role === 'admin' ? api.get('/pools').then((r) => r?.items || []).catch(() => []) : [],
    ]);
    const cards = [summaryCard(cls)];
    if (staff) {
      cards.push(h('div', { class: 'card', 'data-card': 'allocation' },
        h('h2', null, t('class.allocation')),
        user?.role === 'admin' ? allocationForm(cls, pools) : [allocationProps(cls), h('p', { class: 'muted' }, t('class.allocationByAdmin'))]));
      cards.push(h('div', { class: 'card', 'data-card': 'limits' },
        h('h2', null, t('class.studentLimits')),
        h('p', { class: 'muted' }, t('class.studentLimitsIntro')),
        numbersForm({
          name: 'limits', keys: LIMITS, values: cls.student_limits, label: (k) => t(`class.limit.${k}`), disabled: !canEdit,
          help: (k) => (k === 'max_session_s' ? null : cls.allocation[k] == null ? t('class.classNoCap') : t('class.classHolds', { amount: amount(k, cls.allocation[k]) })),
          onSave: (out) => api.patch(`/classes/${cls.id}`, { student_limits: out }),
        })));
      cards.push(h('div', { class: 'card', 'data-card': 'settings' }, h('h2', null, t('class.settings')), settingsForm(cls, canEdit)));
      cards.push(h('div', { class: 'card card-wide', 'data-card': 'policy' }, h('h2', null, t('class.policies')), policyForm(cls, canEdit, images)));
    } else {
      cards.push(h('div', { class: 'card', 'data-card': 'my-limits' },
        h('h2', null, t('class.myLimits')),
        limitsProps(cls),
        cls.allowed_images.length ? h('p', { class: 'muted' }, t('class.imagesLimited', { n: cls.allowed_images.length })) : null));
    }
    cards.push(otherSection(cls, 'reservations', 'class.sessionsTitle', 'class.noSessions',
      (s) => [h('strong', null, s.title || t('class.session')), ' ', formatDate(s.next?.[0]?.starts_at || s.starts_at)]));
    cards.push(otherSection(cls, 'assignments', 'class.assignmentsTitle', 'class.noAssignments',
      (a) => [h('strong', null, a.name), a.deadline ? [' — ', t('class.deadline', { when: formatDate(a.deadline) })] : null]));
    cards.push(otherSection(cls, 'notices', 'class.noticesTitle', 'class.noNotices',
      (n) => [h('span', null, n.body), ' ', h('span', { class: 'muted' }, formatDate(n.created_at))]));
    root.replaceChildren(classHead(cls, user, 'overview'), msg.el, h('div', { class: 'grid', 'data-class-id': cls.id }, ...cards));
  }

  if (!id) { msg.error(t('class.noId')); return; }
  load();
}
