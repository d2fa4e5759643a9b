// pages/class-dashboard.js — #/class/dashboard?id=N, for a class's staff:
// totals against the class's allocation, one row per student (what runs now,
// slices and GPU-hours this week against their limits, GPU utilisation —
// never made up: declared GPUs have none to read —, last activity, idle
// instances, storage, quota pressure), the class's work with Open / Extend /
// Stop (as far as the class lets the caller reach), idle instances, the next
// lab sessions, notices (post, delete), the CSV export, and end of term.
// GET /classes/{id}/dashboard carries the class head's facts itself.
import { api } from '../api.js';
import { t, tMaybe, formatDate, formatNumber, formatBytes } from '../i18n.js';
import { h, messageBox, emptyRow, toast, toastError, openDialog, confirmDialog, field } from '../ui.js';
import { classHead } from '../parts/classnav.js';
import { poll } from '../parts/poll.js';

const POLL_MS = 10000;

const dash = (v) => (v === null || v === undefined || v === '' ? '—' : v);
const ofLimit = (used, limit, fmt = formatNumber) =>
  limit === null || limit === undefined ? fmt(used ?? 0) : t('teach.ofLimit', { used: fmt(used ?? 0), limit: fmt(limit) });

function pressureBadge(p) {
  const cls = p === 'at_limit' ? 'badge badge-off' : p === 'near_limit' ? 'badge badge-warn' : 'badge badge-on';
  return h('span', { class: cls, 'data-pressure': p }, t(`teach.pressure.${p}`));
}

function stateBadge(s) {
  return h('span', { class: 'badge', 'data-state': s }, tMaybe(`inst.state.${s}`) || tMaybe(`job.state.${s}`) || s);
}

// The class's work: a row per instance with what the caller may do to it.
function workRow(cls, user, i, refresh) {
  const role = user.role === 'admin' ? 'admin' : cls.my_role;
  const teacher = ['admin', 'owner', 'teacher'].includes(role);
  const mayOpen = role === 'admin' || (teacher ? cls.reach.teachers_open_apps : role === 'ta' && cls.reach.tas_open_apps);
  const mayStop = teacher || (role === 'ta' && cls.reach.tas_stop_work);
  const live = ['queued', 'pulling', 'creating', 'running', 'stopping'].includes(i.state);
  const actions = h('div', { class: 'row-actions' });
  if (mayOpen && i.state === 'running')
    for (const r of i.routes || [])
      actions.append(h('a', { class: 'btn btn-small', href: r.url, target: '_blank', rel: 'noopener', 'data-action': `open-${r.port_name}` },
        t('teach.open', { name: r.port_name })));
  if (mayStop && i.state === 'running')
    actions.append(h('button', { type: 'button', class: 'btn btn-small', 'data-action': 'extend', onclick: () => extendDialog(cls, i, refresh) }, t('teach.extend')));
  if (mayStop && live && i.desired === 'running')
    actions.append(h('button', {
      type: 'button', class: 'btn btn-small btn-danger', 'data-action': 'stop',
      onclick: async () => {
        const ok = await confirmDialog({ title: t('teach.stop.title'), message: t('teach.stop.confirm', { name: i.name, user: i.user.username }), confirmLabel: t('teach.stop'), danger: true });
        if (!ok) return;
        try {
          await api.post(`/classes/${cls.id}/instances/${i.id}/stop`, {});
          toast(t('teach.stop.done', { name: i.name }));
          refresh();
        } catch (err) { toastError(err); }
      },
    }, t('teach.stop')));
  return h('tr', { 'data-instance': String(i.id) },
    h('td', null, i.user.display_name || i.user.username, h('div', { class: 'muted' }, i.user.username)),
    h('td', null, i.name),
    h('td', null, stateBadge(i.state), i.reason ? h('div', { class: 'muted' }, i.reason) : null),
    h('td', null, formatNumber(i.slices)),
    h('td', null, i.last_activity_at ? formatDate(i.last_activity_at) : '—',
      i.extended_until ? h('div', { class: 'muted', 'data-field': 'extended' }, t('teach.extendedUntil', { at: formatDate(i.extended_until) })) : null,
      i.idle_message ? h('div', { class: 'muted' }, i.idle_message) : null),
    h('td', null, actions));
}

function extendDialog(cls, inst, refresh) {
  openDialog({
    title: t('teach.extend.title', { name: inst.name }),
    build: (close) => {
      const msg = messageBox();
      const sel = h('select', { name: 'seconds', 'data-field': 'seconds' },
        ...[1800, 3600, 7200, 14400].map((s) => h('option', { value: String(s) }, t('teach.extend.minutes', { n: s / 60 }))));
      const form = h('form', {
        onsubmit: async (e) => {
          e.preventDefault();
          try {
            await api.post(`/classes/${cls.id}/instances/${inst.id}/extend`, { seconds: Number(sel.value) });
            toast(t('teach.extend.done', { name: inst.name }));
            close(true);
            refresh();
          } catch (err) { msg.error(err); }
        },
      },
      h('p', { class: 'muted' }, t('teach.extend.help')),
      field(t('teach.extend.by'), sel), msg.el,
      h('div', { class: 'actions' },
        h('button', { type: 'button', class: 'btn', onclick: () => close(false) }, t('common.cancel')),
        h('button', { type: 'submit', class: 'btn btn-primary', 'data-action': 'confirm' }, t('teach.extend'))));
      return [form];
    },
  });
}

function archiveDialog(cls, done) {
  openDialog({
    title: t('teach.archive.title'),
    build: (close) => {
      const msg = messageBox();
      const radio = (v) => h('label', { class: 'check' },
        h('input', { type: 'radio', name: 'data_policy', value: v, checked: (cls.data_policy || 'keep') === v, 'data-policy': v }), ' ', t(`teach.archive.${v}`));
      const form = h('form', {
        onsubmit: async (e) => {
          e.preventDefault();
          const data_policy = form.querySelector('input[name=data_policy]:checked')?.value || 'keep';
          try {
            const r = await api.post(`/classes/${cls.id}/archive`, { data_policy });
            toast(t('teach.archive.done', { n: r.stopped ? r.stopped.instances + r.stopped.jobs : 0 }));
            close(true);
            done();
          } catch (err) { msg.error(err); }
        },
      },
      h('p', null, t('teach.archive.explain')),
      h('fieldset', { class: 'plain' }, h('legend', null, t('teach.archive.data')), radio('keep'), h('br'), radio('remove')),
      msg.el,
      h('div', { class: 'actions' },
        h('button', { type: 'button', class: 'btn', onclick: () => close(false) }, t('common.cancel')),
        h('button', { type: 'submit', class: 'btn btn-danger', 'data-action': 'confirm' }, t('teach.archive.confirm'))));
      return [form];
    },
  });
}

function noticesCard(cls, teacher) {
  const list = h('ul', { class: 'plain-list notices', 'data-notices': '' });
  const msg = messageBox();
  async function load() {
    try {
      const r = await api.get(`/classes/${cls.id}/notices`);
      list.replaceChildren(...(r.items.length ? r.items.map((n) => h('li', { 'data-notice': String(n.id) },
        h('p', { class: 'notice-body' }, n.body),
        h('p', { class: 'muted' }, t('teach.notice.by', { who: n.author ? (n.author.display_name || n.author.username) : '—', at: formatDate(n.created_at) }),
          n.expires_at ? ' · ' + t('teach.notice.until', { at: formatDate(n.expires_at) }) : '',
          teacher && cls.state === 'active' ? h('button', {
            type: 'button', class: 'btn btn-small btn-link', 'data-action': 'delete-notice',
            onclick: async () => {
              if (!await confirmDialog({ title: t('teach.notice.deleteTitle'), message: t('teach.notice.deleteConfirm'), confirmLabel: t('teach.notice.delete'), danger: true })) return;
              try { await api.del(`/classes/${cls.id}/notices/${n.id}`); load(); } catch (err) { toastError(err); }
            },
          }, t('teach.notice.delete')) : null)))
        : [h('li', { class: 'muted' }, t('teach.notice.none'))]));
    } catch (err) { msg.error(err); }
  }
  const body = h('textarea', { name: 'body', rows: 3, maxlength: 4000, required: true, 'data-field': 'notice-body' });
  const exp = h('select', { name: 'expires', 'data-field': 'notice-expires' },
    h('option', { value: '' }, t('teach.notice.never')),
    h('option', { value: '86400' }, t('teach.notice.day')),
    h('option', { value: '604800' }, t('teach.notice.week')));
  const form = teacher && cls.state === 'active' ? h('form', {
    class: 'notice-form',
    onsubmit: async (e) => {
      e.preventDefault();
      msg.clear();
      try {
        await api.post(`/classes/${cls.id}/notices`, exp.value ? { body: body.value, expires_in_s: Number(exp.value) } : { body: body.value });
        body.value = '';
        toast(t('teach.notice.posted'));
        load();
      } catch (err) { msg.error(err); }
    },
  }, field(t('teach.notice.new'), body), field(t('teach.notice.expires'), exp),
  h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'btn btn-primary', 'data-action': 'post-notice' }, t('teach.notice.post')))) : null;
  load();
  return h('section', { class: 'card', 'aria-labelledby': 'notices-title' },
    h('h2', { id: 'notices-title' }, t('teach.notices')), list, form, msg.el);
}

export function render(main, ctx) {
  const id = Number(new URLSearchParams(location.hash.split('?')[1] || '').get('id'));
  const user = ctx.user;
  const msg = messageBox();
  const page = h('section', { class: 'page class-dashboard' }, msg.el);
  main.append(page);
  let built = null;

  function build(d) {
    const cls = d.class;
    const role = user.role === 'admin' ? 'admin' : cls.my_role;
    const teacher = ['admin', 'owner', 'teacher'].includes(role);
    const totals = h('dl', { class: 'props', 'data-totals': '' });
    const students = h('tbody');
    const work = h('tbody');
    const idle = h('ul', { class: 'plain-list', 'data-idle': '' });
    const sessions = h('ul', { class: 'plain-list', 'data-sessions': '' });
    const updated = h('p', { class: 'muted', 'data-updated': '' });
    const csv = h('a', { class: 'btn btn-small', href: `/api/v1/classes/${cls.id}/dashboard?format=csv`, download: `class-${cls.id}-dashboard.csv`, 'data-action': 'csv' }, t('teach.csv'));
    const archiveBtn = (role === 'admin' || role === 'owner') && cls.state === 'active'
      ? h('button', { type: 'button', class: 'btn btn-small btn-danger', 'data-action': 'archive', onclick: () => archiveDialog(cls, rebuild) }, t('teach.archive'))
      : null;
    page.append(...[
      classHead(cls, user, 'dashboard'),
      cls.state === 'archived' ? h('p', { class: 'msg msg-info', 'data-archived': '' }, t('teach.archived', { at: formatDate(cls.archived_at) })) : null,
      h('div', { class: 'page-head page-head-row' }, h('h2', null, t('class.dashboard.title')), h('div', { class: 'actions' }, csv, archiveBtn)),
      updated,
      h('section', { class: 'card card-wide', 'aria-labelledby': 'totals-title' }, h('h2', { id: 'totals-title' }, t('teach.totals')), totals,
        h('p', { class: 'muted totals-note' }, t('teach.gpuNote'))),
      h('section', { class: 'card card-flush' }, h('h2', { class: 'card-title' }, t('teach.students')),
        h('div', { class: 'table-wrap' }, h('table', { class: 'table', 'data-table': 'students' },
          h('thead', null, h('tr', null, ...['student', 'now', 'slices', 'gpuHours', 'gpuUse', 'activity', 'idle', 'storage', 'pressure']
            .map((k) => h('th', { scope: 'col' }, t(`teach.col.${k}`))))),
          students))),
      h('section', { class: 'card card-flush' }, h('h2', { class: 'card-title' }, t('teach.work')),
        h('div', { class: 'table-wrap' }, h('table', { class: 'table', 'data-table': 'work' },
          h('thead', null, h('tr', null, ...['student', 'instance', 'state', 'slices', 'activity']
            .map((k) => h('th', { scope: 'col' }, t(`teach.col.${k}`))),
          h('th', { scope: 'col' }, h('span', { class: 'visually-hidden' }, t('common.actions'))))),
          work))),
      h('div', { class: 'grid' },
        h('section', { class: 'card', 'aria-labelledby': 'idle-title' }, h('h2', { id: 'idle-title' }, t('teach.idle')), idle),
        h('section', { class: 'card', 'aria-labelledby': 'sessions-title' }, h('h2', { id: 'sessions-title' }, t('teach.sessions')), sessions),
        noticesCard(cls, teacher))].filter(Boolean));
    built = { cls, totals, students, work, idle, sessions, updated };
  }

  // after the end of term: the page again from scratch (read-only now)
  function rebuild() {
    page.replaceChildren(msg.el);
    built = null;
    list.refresh();
  }

  function show([d, w]) {
    if (!built) build(d);
    const { cls, totals, students, work, idle, sessions, updated } = built;
    const tt = d.totals || {};
    const prop = (k, v) => [h('dt', null, t(`teach.total.${k}`)), h('dd', { 'data-total': k }, v)];
    totals.replaceChildren(
      ...prop('students', formatNumber(tt.students ?? 0)),
      ...prop('running', t('teach.total.runningValue', { i: formatNumber(tt.running_instances ?? 0), j: formatNumber(tt.running_jobs ?? 0) })),
      ...prop('queued', formatNumber(tt.queued ?? 0)),
      ...prop('idle', formatNumber(tt.idle_instances ?? 0)),
      ...prop('slices', ofLimit(tt.slices?.used, tt.slices?.allocation)),
      ...prop('gpuHours', ofLimit(tt.gpu_hours_week?.allocated, tt.gpu_hours_week?.allocation)),
      ...prop('storage', tt.storage?.used_bytes == null ? '—' : formatBytes(tt.storage.used_bytes)));
    students.replaceChildren(...(d.students.length ? d.students.map((s) => h('tr', { 'data-student': s.user.username },
      h('td', null, s.user.display_name || s.user.username, h('div', { class: 'muted' }, s.user.username),
        s.member_state === 'suspended' ? h('span', { class: 'badge badge-off' }, t('teach.suspended')) : null),
      h('td', null, ...[...s.instances, ...s.jobs].map((x) => h('div', null, x.name, ' ', stateBadge(x.state))),
        s.instances.length + s.jobs.length ? null : h('span', { class: 'muted' }, t('teach.nothing'))),
      h('td', null, ofLimit(s.slices.used, s.slices.limit)),
      h('td', null, ofLimit(s.gpu_hours_week.allocated, s.gpu_hours_week.limit)),
      h('td', { class: 'muted', 'data-field': 'gpu-use' }, s.gpu_utilization.measured ? formatNumber(s.gpu_utilization.value) : t('teach.notMeasured')),
      h('td', null, s.last_activity_at ? formatDate(s.last_activity_at) : '—'),
      h('td', null, s.idle.length ? s.idle.map((x) => h('div', null, x.name, ' · ', t('teach.idleSince', { at: formatDate(x.idle_since) }))) : '—'),
      h('td', null, s.storage.used_bytes == null ? '—' : ofLimit(s.storage.used_bytes, s.storage.limit_bytes, formatBytes)),
      h('td', null, pressureBadge(s.pressure))))
      : [emptyRow(9, t('teach.noStudents'))]));
    work.replaceChildren(...(w.instances.length ? w.instances.map((i) => workRow(cls, user, i, () => list.refresh()))
      : [emptyRow(6, t('teach.noWork'))]));
    idle.replaceChildren(...(d.idle.length ? d.idle.map((x) => h('li', { 'data-idle-instance': String(x.id) },
      h('strong', null, x.user), ' · ', x.name, ' · ', t('teach.idleSince', { at: formatDate(x.idle_since) }),
      x.warned_at ? h('span', { class: 'badge badge-warn' }, t('teach.warned')) : null))
      : [h('li', { class: 'muted' }, t('teach.noIdle'))]));
    sessions.replaceChildren(...(d.upcoming_sessions.length ? d.upcoming_sessions.map((s) => h('li', { 'data-session': String(s.id) },
      h('strong', null, dash(s.title) === '—' ? t('teach.session') : s.title), ' · ',
      formatDate(s.starts_at), ' – ', formatDate(s.ends_at), ' · ', t('teach.sessionSlices', { n: s.slices }),
      s.active_now ? h('span', { class: 'badge badge-on' }, t('teach.now')) : null))
      : [h('li', { class: 'muted' }, t('teach.noSessions'))]));
    updated.textContent = t('teach.updated', { at: formatDate(d.at) });
  }

  const list = poll(() => Promise.all([api.get(`/classes/${id}/dashboard`), api.get(`/classes/${id}/work`)]), POLL_MS, {
    until: main, show, fail: (err) => msg.error(err),
  });
}
