// pages/classes.js — my classes (GET /classes: an admin sees every class,
// anyone else the classes they own or are a member of), each with its
// teacher, my role and its students; "New class" for teachers and admins
// (an admin may name the teacher); "Join with a code" for everyone; for
// admins the cap on how many classes a teacher may create (the
// max_classes_per_teacher setting).
import { api } from '../api.js';
import { t, formatNumber } from '../i18n.js';
import { h, field, messageBox, busy, openDialog, emptyRow, toast, icon } from '../ui.js';

const COLS = 6;

export function classRoleBadge(role) {
  if (!role) return h('span', { class: 'muted' }, '—');
  return h('span', { class: `badge badge-role class-role-${role}`, 'data-class-role': role }, t(`class.role.${role}`));
}

export function render(main, ctx) {
  const msg = messageBox();
  const tbody = h('tbody', null, emptyRow(COLS, t('common.loading')));
  const user = ctx.user;
  const canCreate = ['teacher', 'admin'].includes(user?.role);

  async function load() {
    try {
      const reply = await api.get('/classes');
      const items = reply?.items || [];
      tbody.replaceChildren(...items.map(classRow));
      if (!items.length) tbody.append(emptyRow(COLS, canCreate ? t('classes.noneTeacher') : t('classes.none')));
      msg.clear();
    } catch (err) {
      tbody.replaceChildren(emptyRow(COLS, '—'));
      msg.error(err);
    }
  }

  function classRow(c) {
    return h('tr', { 'data-class': c.code || c.name, 'data-class-id': c.id },
      h('td', null, h('a', { href: `#/class?id=${c.id}`, 'data-action': 'open-class' }, c.name),
        c.state === 'archived' ? [' ', h('span', { class: 'badge badge-off' }, t('class.archived'))] : null),
      h('td', { class: 'mono' }, c.code || '—'),
      h('td', null, c.term || '—'),
      h('td', null, c.teacher.display_name || c.teacher.username),
      h('td', null, classRoleBadge(c.my_role)),
      h('td', { class: 'num', 'data-field': 'students' }, formatNumber(c.counts.students)));
  }

  function createDialog() {
    openDialog({
      title: t('classes.new'),
      build: (close) => {
        const m = messageBox();
        const name = h('input', { type: 'text', name: 'name', required: true, maxlength: 100 });
        const code = h('input', { type: 'text', name: 'code', maxlength: 32, placeholder: 'CS231-2026', class: 'mono' });
        const term = h('input', { type: 'text', name: 'term', maxlength: 100, placeholder: t('classes.termExample') });
        const desc = h('textarea', { name: 'description', maxlength: 4000, rows: 3 });
        const teacher = user?.role === 'admin' ? h('input', { type: 'text', name: 'teacher', autocomplete: 'off', placeholder: user.username }) : null;
        const form = h('form', { class: 'form', 'data-form': 'new-class', novalidate: true },
          field(t('class.name'), name),
          field(t('class.code'), code, t('class.codeHelp')),
          field(t('class.term'), term),
          field(t('class.description'), desc),
          teacher ? field(t('classes.teacherUsername'), teacher, t('classes.teacherHelp')) : null,
          m.el,
          h('div', { class: 'actions' },
            h('button', { type: 'button', class: 'btn', onclick: () => close() }, t('common.cancel')),
            h('button', { type: 'submit', class: 'btn btn-primary', 'data-action': 'create-class' }, t('classes.create'))));
        form.addEventListener('submit', (e) => {
          e.preventDefault();
          m.clear();
          if (!name.value.trim()) { m.error(t('classes.nameNeeded')); name.focus(); return; }
          busy(form, async () => {
            try {
              const body = { name: name.value.trim(), term: term.value.trim(), description: desc.value.trim() };
              if (code.value.trim()) body.code = code.value.trim();
              if (teacher && teacher.value.trim() && teacher.value.trim() !== user.username) {
                const found = await api.get('/users', { query: { q: teacher.value.trim(), limit: 50 } });
                const u = (found?.items || []).find((x) => x.username === teacher.value.trim());
                if (!u) { m.error(t('classes.noSuchTeacher', { name: teacher.value.trim() })); return; }
                body.teacher_id = u.id;
              }
              const c = await api.post('/classes', body);
              toast(t('classes.created', { name: c.name }));
              close();
              ctx.go(`/class?id=${c.id}`);
            } catch (err) { m.error(err); }
          });
        });
        return [form];
      },
    });
  }

  function capCard() {
    const m = messageBox();
    const input = h('input', { type: 'number', min: 0, step: 1, id: 'class-cap', 'data-field': 'max-classes', placeholder: t('classes.noCap') });
    const form = h('form', { class: 'form form-inline-wide', 'data-form': 'class-cap', novalidate: true },
      field(t('classes.capLabel'), input, t('classes.capHelp')),
      m.el,
      h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'btn', 'data-action': 'save-cap' }, t('classes.save'))));
    api.get('/settings').then((s) => { input.value = s?.max_classes_per_teacher?.value || ''; }).catch((err) => m.error(err));
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      busy(form, async () => {
        try {
          await api.put('/settings/max_classes_per_teacher', { value: input.value.trim() });
          m.success(t('classes.saved'));
        } catch (err) { m.error(err); }
      });
    });
    return h('div', { class: 'card', 'data-card': 'class-cap' }, h('h2', null, t('classes.capTitle')), form);
  }

  main.append(h('section', { class: 'page' },
    h('div', { class: 'page-head page-head-row' },
      h('div', { class: 'page-head-text' },
        h('h1', null, t('nav.classes')),
        h('p', { class: 'muted' }, canCreate ? t('classes.introTeacher') : t('classes.intro'))),
      h('div', { class: 'toolbar' },
        h('a', { class: 'btn', href: '#/join', 'data-action': 'join' }, t('classes.joinWithCode')),
        canCreate ? h('button', { type: 'button', class: 'btn btn-primary', 'data-action': 'new-class', onclick: createDialog }, icon('plus', 16), t('classes.new')) : null)),
    msg.el,
    h('div', { class: 'card card-flush' },
      h('div', { class: 'table-wrap' }, h('table', { class: 'table', 'data-table': 'classes' },
        h('thead', null, h('tr', null,
          h('th', { scope: 'col' }, t('class.name')),
          h('th', { scope: 'col' }, t('class.code')),
          h('th', { scope: 'col' }, t('class.term')),
          h('th', { scope: 'col' }, t('class.teacher')),
          h('th', { scope: 'col' }, t('classes.myRole')),
          h('th', { scope: 'col', class: 'num' }, t('class.students')))),
        tbody))),
    user?.role === 'admin' ? h('div', { class: 'grid class-admin' }, capCard()) : null));
  load();
}
