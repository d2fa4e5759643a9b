// pages/class-assignments.js — a class's assignments (#/class/assignments?id=N).
// Teachers (owner, co-teachers, admins) create one from a folder of the
// class area, release it into every student's home, collect it now (it is
// also collected at the deadline, and again at "late until" for late
// work), hand back feedback, and see each student's status; teaching
// assistants see the same without the buttons. A student sees the released
// ones with their own status and a link to their copy in Files (and to the
// feedback once returned). Polled every 5 s.
import { api } from '../api.js';
import { t, formatDate, formatBytes } from '../i18n.js';
import { h, field, messageBox, toast, toastError, confirmDialog, openDialog, emptyRow, icon, dropdown, menuItem } from '../ui.js';
import { poll } from '../parts/poll.js';
import { classHead } from '../parts/classnav.js';

const POLL_MS = 5000;
const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const PRIVATE = new Set(['collected', 'feedback']);

const filesLink = (area, path, text) => h('a', { href: `#/files?${new URLSearchParams({ area, path })}`, class: 'mono' }, text);

// datetime-local value <-> ISO time
const toLocal = (iso) => {
  if (!iso) return '';
  const d = new Date(iso);
  const p = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}`;
};
const fromLocal = (v) => (v ? new Date(v).toISOString() : null);

function stateBadge(state) {
  const cls = { draft: 'badge-off', released: 'badge-on', collecting: 'badge-warn', collected: 'badge-label' }[state] || 'badge-label';
  return h('span', { class: `badge ${cls}`, 'data-state': state }, t(`class.assignments.state.${state}`));
}

function statusBadge(status, late) {
  const cls = { failed: 'badge-warn', missing: 'badge-warn', late: 'badge-warn', returned: 'badge-on', collected: 'badge-on' }[status] || 'badge-label';
  return h('span', { class: `badge ${cls}`, 'data-status': status },
    t(`class.assignments.status.${status}`), late && status !== 'late' ? ` · ${t('class.assignments.status.late')}` : '');
}

export function render(main, ctx) {
  const id = Number(new URLSearchParams(location.hash.split('?')[1] || '').get('id'));
  const msg = messageBox();
  const head = h('div');
  const body = h('div');
  const open = new Set(); // assignments whose student table is shown
  let cls = null;

  const staffOf = (c) => ctx.user?.role === 'admin' || ['owner', 'teacher'].includes(c?.my_role);
  const readerOf = (c) => staffOf(c) || c?.my_role === 'ta';

  async function act(a, what) {
    const labels = { release: 'class.assignments.releaseConfirm', collect: 'class.assignments.collectConfirm', return: 'class.assignments.returnConfirm' };
    const ok = await confirmDialog({ title: t(`class.assignments.${what}`), message: t(labels[what], { name: a.name }), confirmLabel: t(`class.assignments.${what}`) });
    if (!ok) return;
    try {
      const r = await api.post(`/classes/${id}/assignments/${a.id}/${what}`);
      const c = r?.counts || {};
      toast(t(`class.assignments.${what}Done`, { name: a.name, count: (what === 'release' ? c.released : what === 'collect' ? (c.collected || 0) + (c.late || 0) : c.returned) || 0, failed: c.failed || 0 }));
      open.add(a.id);
      list.refresh();
    } catch (err) { toastError(err); }
  }

  async function remove(a) {
    const ok = await confirmDialog({ title: t('class.assignments.delete'), message: t('class.assignments.deleteConfirm', { name: a.name }), confirmLabel: t('class.assignments.delete'), danger: true });
    if (!ok) return;
    try {
      await api.del(`/classes/${id}/assignments/${a.id}`);
      toast(t('class.assignments.deleted', { name: a.name }));
      list.refresh();
    } catch (err) { toastError(err); }
  }

  function editor(a) {
    openDialog({
      title: a ? t('class.assignments.editTitle', { name: a.name }) : t('class.assignments.createTitle'),
      build: (close) => {
        const m = messageBox();
        const name = h('input', { type: 'text', class: 'mono', maxlength: 64, required: true, autocomplete: 'off', value: a?.name || '', disabled: !!a, 'data-field': 'name' });
        const source = h('select', { 'data-field': 'source', disabled: a && a.state !== 'draft' }, h('option', { value: a?.source || '' }, a?.source || t('common.loading')));
        const desc = h('textarea', { rows: 3, maxlength: 4000, 'data-field': 'description' }, a?.description || '');
        const deadline = h('input', { type: 'datetime-local', value: toLocal(a?.deadline), 'data-field': 'deadline' });
        const late = h('input', { type: 'datetime-local', value: toLocal(a?.late_until), 'data-field': 'late_until' });
        // the class area's folders (not its private collected/ and feedback/)
        api.get(`/files/class:${id}/`).then((r) => {
          const dirs = (r?.items || []).filter((x) => x.type === 'dir' && !PRIVATE.has(x.name) && !x.name.startsWith('.'));
          source.replaceChildren(...(dirs.length ? dirs.map((x) => h('option', { value: x.name, selected: x.name === a?.source }, x.name))
            : [h('option', { value: '' }, t('class.assignments.noFolders'))]));
        }).catch(() => source.replaceChildren(h('option', { value: a?.source || '' }, a?.source || t('class.assignments.noFolders'))));
        const save = async (ev) => {
          ev.preventDefault();
          if (!a && !NAME_RE.test(name.value.trim())) { m.error(t('class.assignments.badName')); return; }
          if (!source.value) { m.error(t('class.assignments.pickFolder')); return; }
          if (late.value && !deadline.value) { m.error(t('class.assignments.lateNeedsDeadline')); return; }
          const b = { source: source.value, description: desc.value, deadline: fromLocal(deadline.value), late_until: fromLocal(late.value) };
          try {
            if (a) await api.patch(`/classes/${id}/assignments/${a.id}`, b);
            else await api.post(`/classes/${id}/assignments`, { name: name.value.trim(), ...b });
            toast(t(a ? 'class.assignments.saved' : 'class.assignments.created', { name: a?.name || name.value.trim() }));
            close();
            list.refresh();
          } catch (err) { m.error(err); }
        };
        return h('form', { class: 'form', onsubmit: save, 'data-form': 'assignment' },
          m.el,
          field(t('class.assignments.name'), name, t('class.assignments.nameHelp')),
          field(t('class.assignments.source'), source, t('class.assignments.sourceHelp')),
          field(t('class.assignments.description'), desc),
          field(t('class.assignments.deadline'), deadline, t('class.assignments.deadlineHelp')),
          field(t('class.assignments.lateUntil'), late, t('class.assignments.lateHelp')),
          h('div', { class: 'form-actions' },
            h('button', { type: 'button', class: 'btn', onclick: close }, t('common.cancel')),
            h('button', { type: 'submit', class: 'btn btn-primary', 'data-action': 'save-assignment' }, t('class.assignments.save'))));
      },
    });
  }

  // the per-student table, loaded when an assignment is opened
  function studentsRow(a, cols) {
    const tbody = h('tbody', null, emptyRow(6, t('common.loading')));
    api.get(`/classes/${id}/assignments/${a.id}/students`).then((r) => {
      const items = r?.items || [];
      tbody.replaceChildren(...(items.length ? items.map((s) => h('tr', { 'data-student': s.user.username },
        h('td', null, s.user.display_name || s.user.username, h('div', { class: 'cell-sub muted mono' }, s.user.username)),
        h('td', null, statusBadge(s.status, s.late), s.message ? h('div', { class: 'cell-sub muted', lang: 'en' }, s.message) : null),
        h('td', null, s.released_at ? formatDate(s.released_at) : '—'),
        h('td', null, s.collected_at ? formatDate(s.collected_at) : '—'),
        h('td', null, s.collected_at ? t('class.assignments.filesBytes', { count: s.files, bytes: formatBytes(s.bytes) }) : '—'),
        h('td', null, s.collected_at && staffOf(cls) ? filesLink(`class:${id}`, `collected/${a.name}/${s.user.username}`, t('class.assignments.open')) : null)))
        : [emptyRow(6, t('class.assignments.noStudents'))]));
    }).catch((err) => tbody.replaceChildren(emptyRow(6, err.message || '—')));
    return h('tr', { class: 'row-detail', 'data-students-of': a.name }, h('td', { colspan: cols },
      h('table', { class: 'table table-inner', 'data-table': 'assignment-students' },
        h('thead', null, h('tr', null,
          h('th', { scope: 'col' }, t('class.assignments.col.student')),
          h('th', { scope: 'col' }, t('class.assignments.col.status')),
          h('th', { scope: 'col' }, t('class.assignments.col.released')),
          h('th', { scope: 'col' }, t('class.assignments.col.collected')),
          h('th', { scope: 'col' }, t('class.assignments.col.snapshot')),
          h('th', { scope: 'col' }, h('span', { class: 'visually-hidden' }, t('common.actions'))))),
        tbody)));
  }

  function countsText(c) {
    if (!c) return '';
    const parts = ['released', 'collected', 'late', 'missing', 'returned', 'failed', 'pending'].filter((k) => c[k]).map((k) => `${t(`class.assignments.status.${k}`)} ${c[k]}`);
    return parts.join(' · ') || t('class.assignments.noStudentsYet');
  }

  // the step that comes next is a button; the rest are in the row's menu
  function actions(a) {
    const next = a.state === 'draft' ? 'release' : a.state === 'collected' ? 'return' : 'collect';
    const items = [
      next !== 'release' ? menuItem({ label: t('class.assignments.release'), action: 'release', onclick: () => act(a, 'release') }) : null,
      next !== 'collect' && a.state !== 'draft' ? menuItem({ label: t('class.assignments.collect'), action: 'collect', onclick: () => act(a, 'collect') }) : null,
      next !== 'return' && a.collected_at ? menuItem({ label: t('class.assignments.return'), action: 'return', onclick: () => act(a, 'return') }) : null,
      menuItem({ label: t('class.assignments.edit'), action: 'edit', onclick: () => editor(a) }),
      menuItem({ label: t('class.assignments.delete'), action: 'delete', danger: true, onclick: () => remove(a) }),
    ].filter(Boolean);
    return h('span', { class: 'row-actions' },
      h('button', { type: 'button', class: `btn btn-small${next === 'release' ? ' btn-primary' : ''}`, 'data-action': next, disabled: a.state === 'collecting', onclick: () => act(a, next) }, t(`class.assignments.${next}`)),
      h('span', { class: 'menu-slot' }, dropdown({
        className: 'btn-icon btn-more',
        label: t('class.assignments.actionsFor', { name: a.name }),
        attrs: { 'data-action': 'row-menu' },
        content: '⋯',
        items,
      })));
  }

  function staffTable(items) {
    const COLS = 5;
    const staff = staffOf(cls);
    const rows = [];
    for (const a of items) {
      rows.push(h('tr', { 'data-assignment': a.name, 'data-id': a.id },
        h('td', null,
          h('button', { type: 'button', class: 'btn-link', 'aria-expanded': String(open.has(a.id)), 'data-action': 'toggle-students', onclick: () => { if (open.has(a.id)) open.delete(a.id); else open.add(a.id); draw(); } },
            h('strong', { class: 'mono' }, a.name)),
          h('div', { class: 'cell-sub muted' }, t('class.assignments.fromFolder'), ' ', filesLink(`class:${id}`, a.source, a.source)),
          a.description ? h('div', { class: 'cell-sub muted cell-clamp', title: a.description }, a.description) : null),
        h('td', null, stateBadge(a.state)),
        h('td', null, a.deadline ? formatDate(a.deadline) : h('span', { class: 'muted' }, t('class.assignments.noDeadline')),
          a.late_until ? h('div', { class: 'cell-sub muted' }, t('class.assignments.lateUntilCell', { when: formatDate(a.late_until) })) : null),
        h('td', { 'data-field': 'counts' }, countsText(a.counts)),
        h('td', { class: 'cell-actions' }, staff ? actions(a) : null)));
      if (open.has(a.id)) rows.push(studentsRow(a, COLS));
    }
    return h('div', { class: 'card card-flush' },
      h('div', { class: 'table-wrap' }, h('table', { class: 'table', 'data-table': 'assignments' },
        h('thead', null, h('tr', null,
          h('th', { scope: 'col' }, t('class.assignments.col.assignment')),
          h('th', { scope: 'col' }, t('class.assignments.col.state')),
          h('th', { scope: 'col' }, t('class.assignments.col.deadline')),
          h('th', { scope: 'col' }, t('class.assignments.col.students')),
          h('th', { scope: 'col' }, h('span', { class: 'visually-hidden' }, t('common.actions'))))),
        h('tbody', null, ...(rows.length ? rows : [h('tr', { class: 'empty', 'data-empty': 'assignments' }, h('td', { colspan: COLS }, t('class.assignments.none')))])))));
  }

  function studentTable(items) {
    const COLS = 4;
    return h('div', { class: 'card card-flush' },
      h('div', { class: 'table-wrap' }, h('table', { class: 'table', 'data-table': 'my-assignments' },
        h('thead', null, h('tr', null,
          h('th', { scope: 'col' }, t('class.assignments.col.assignment')),
          h('th', { scope: 'col' }, t('class.assignments.col.deadline')),
          h('th', { scope: 'col' }, t('class.assignments.col.status')),
          h('th', { scope: 'col' }, t('class.assignments.col.folder')))),
        h('tbody', null, ...(items.length ? items.map((a) => {
          const mine = a.mine;
          const have = mine && !['pending', 'failed'].includes(mine.status);
          return h('tr', { 'data-assignment': a.name, 'data-id': a.id },
            h('td', null, h('strong', { class: 'mono' }, a.name), a.description ? h('div', { class: 'cell-sub muted' }, a.description) : null),
            h('td', null, a.deadline ? formatDate(a.deadline) : h('span', { class: 'muted' }, t('class.assignments.noDeadline')),
              a.late_until ? h('div', { class: 'cell-sub muted' }, t('class.assignments.lateUntilCell', { when: formatDate(a.late_until) })) : null),
            h('td', null, mine ? statusBadge(mine.status, mine.late) : h('span', { class: 'muted' }, t('class.assignments.notYours')),
              mine?.collected_at ? h('div', { class: 'cell-sub muted' }, t('class.assignments.collectedAt', { when: formatDate(mine.collected_at) })) : null,
              mine?.status === 'failed' && mine.message ? h('div', { class: 'cell-sub muted', lang: 'en' }, mine.message) : null),
            h('td', null, have ? filesLink('home', mine.path, `~/${mine.path}/`) : '—',
              mine?.returned_at ? h('div', { class: 'cell-sub' }, filesLink('home', `${mine.path}/feedback`, t('class.assignments.feedback'))) : null));
        }) : [h('tr', { class: 'empty', 'data-empty': 'assignments' }, h('td', { colspan: COLS }, t('class.assignments.noneYet')))])))));
  }

  let last = null;
  function draw() {
    if (!last) return;
    cls = last.class;
    head.replaceChildren(classHead(cls, ctx.user, 'assignments'));
    const staff = staffOf(cls);
    body.replaceChildren(
      h('div', { class: 'page-head page-head-row' },
        h('div', { class: 'page-head-text' }, h('h2', null, t('class.assignments.title')),
          h('p', { class: 'muted' }, t(readerOf(cls) ? 'class.assignments.introStaff' : 'class.assignments.introStudent', { code: cls.code || cls.id }))),
        staff ? h('div', { class: 'toolbar' }, h('button', { type: 'button', class: 'btn btn-primary', 'data-action': 'open-create-assignment', onclick: () => editor(null) }, icon('plus', 16), t('class.assignments.create'))) : null),
      readerOf(cls) ? staffTable(last.items || []) : studentTable(last.items || []));
  }

  main.append(h('section', { class: 'page', 'data-page': 'class-assignments' }, head, msg.el, body));
  const list = poll(() => api.get(`/classes/${id}/assignments`), POLL_MS, {
    until: main,
    show: (reply) => {
      msg.clear();
      const key = JSON.stringify(reply);
      if (last && key === JSON.stringify(last)) return;
      last = reply;
      draw();
    },
    fail: (err) => msg.error(err),
  });
}
