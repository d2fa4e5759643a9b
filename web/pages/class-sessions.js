// pages/class-sessions.js — a class's lab sessions (#/class/sessions?id=N):
// each window with its slices, whether it repeats weekly, its next
// occurrences and an "open now" badge; the class's owner, co-teachers and
// admins open, change and cancel them (a dialog; weekly until a day).
// Members read; the reservation holds the slices for the class's work while
// a window is open, and the class's images are pulled to the pool's nodes
// before it opens. Server refusals (more than the allocation, more than the
// pool with other classes' sessions) are shown translated (errorParts).
import { api } from '../api.js';
import { t, formatNumber, formatDay, getLanguage } from '../i18n.js';
import { h, field, messageBox, busy, confirmDialog, openDialog, emptyRow, toast, icon, toastError } from '../ui.js';
import { classHead } from '../parts/classnav.js';

const COLS = 5;

// "Dec 3, 2026, 5:00 – 6:30 PM": one window, its day said once
function formatWindow(a, b) {
  const f = new Intl.DateTimeFormat(getLanguage(), { dateStyle: 'medium', timeStyle: 'short' });
  const x = new Date(a), y = new Date(b);
  return f.formatRange ? f.formatRange(x, y) : `${f.format(x)} – ${f.format(y)}`;
}

// "2026-09-07T10:00:00Z" → the datetime-local value in this browser's zone
function localValue(iso) {
  const d = new Date(iso);
  const pad = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

// Who may change the sessions: the class's owner, a co-teacher, an admin
// (teaching assistants read them like students).
const mayEdit = (cls, user) => user?.role === 'admin' || ['owner', 'teacher'].includes(cls?.my_role);

export function render(main, ctx) {
  const id = Number(new URLSearchParams(location.hash.split('?')[1] || '').get('id'));
  const msg = messageBox();
  const tbody = h('tbody', null, emptyRow(COLS, t('common.loading')));
  const head = h('div');
  const toolbar = h('div', { class: 'toolbar' });
  let cls = null;

  async function load() {
    try {
      // the list says enough of the class (and 404s for outsiders); the
      // class's own object adds its term and the tabs' roles when there
      const list = await api.get(`/classes/${id}/reservations`);
      const full = await api.get(`/classes/${id}`).catch(() => null);
      if (!main.isConnected) return;
      cls = full && full.id ? full : list.class;
      if (!cls.my_role && list.class?.my_role !== 'admin') cls.my_role = list.class?.my_role;
      head.replaceChildren(classHead(cls, ctx.user, 'sessions'));
      toolbar.replaceChildren(...(mayEdit(cls, ctx.user)
        ? [h('button', { type: 'button', class: 'btn btn-primary', 'data-action': 'open-create-session', onclick: () => dialog() }, icon('plus', 16), t('class.sessions.create'))]
        : []));
      show(list.items || []);
      msg.clear();
    } catch (err) {
      if (!main.isConnected) return;
      tbody.replaceChildren(emptyRow(COLS, '—'));
      msg.error(err);
    }
  }

  function show(items) {
    if (!items.length) {
      tbody.replaceChildren(h('tr', { class: 'empty', 'data-empty': 'sessions' }, h('td', { colspan: COLS }, t('class.sessions.none'))));
      return;
    }
    tbody.replaceChildren(...items.map(row));
  }

  function row(s) {
    const edit = mayEdit(cls, ctx.user);
    return h('tr', { 'data-session': s.id },
      h('td', null, h('strong', null, s.title || t('class.sessions.untitled')),
        s.active_now ? h('div', { class: 'cell-sub' }, h('span', { class: 'badge badge-on', 'data-active': '' }, t('class.sessions.activeNow'))) : null),
      h('td', null, formatWindow(s.starts_at, s.ends_at),
        h('div', { class: 'cell-sub muted', 'data-field': 'repeat' },
          s.weekly ? t('class.sessions.weeklyUntil', { day: formatDay(s.repeat_until) }) : t('class.sessions.once'))),
      h('td', { 'data-field': 'slices' }, formatNumber(s.slices)),
      h('td', null, h('ul', { class: 'session-next', 'data-field': 'next' },
        ...(s.next || []).map((n) => h('li', null, formatWindow(n.starts_at, n.ends_at))))),
      h('td', { class: 'cell-actions' }, ...(edit ? [
        h('button', { type: 'button', class: 'btn btn-small', 'data-action': 'edit', onclick: () => dialog(s) }, t('class.sessions.edit')),
        h('button', { type: 'button', class: 'btn btn-small btn-danger', 'data-action': 'cancel', onclick: () => cancel(s) }, t('class.sessions.cancel')),
      ] : [])));
  }

  // Create (s undefined) or change a session.
  function dialog(s) {
    return openDialog({
      title: s ? t('class.sessions.editTitle') : t('class.sessions.createTitle'),
      build: (close) => {
        const fmsg = messageBox();
        const start0 = s ? new Date(s.starts_at) : new Date(Math.ceil(Date.now() / 3600e3) * 3600e3 + 24 * 3600e3);
        const minutes0 = s ? Math.round((new Date(s.ends_at) - new Date(s.starts_at)) / 60e3) : 120;
        const title = h('input', { type: 'text', maxlength: 200, 'data-field': 'title', value: s ? s.title : '' });
        const start = h('input', { type: 'datetime-local', required: true, 'data-field': 'starts_at', value: localValue(start0.toISOString()) });
        const length = h('input', { type: 'number', min: 15, max: 1440, step: 15, required: true, 'data-field': 'minutes', value: minutes0 });
        const slices = h('input', { type: 'number', min: 0, max: cls?.allocation?.slices ?? 999, required: true, 'data-field': 'slices', value: s ? s.slices : (cls?.allocation?.slices || 0) });
        const weekly = h('input', { type: 'checkbox', 'data-field': 'weekly', checked: !!(s && s.weekly) });
        const until = h('input', { type: 'date', 'data-field': 'repeat_until', value: s?.repeat_until || '' });
        const untilField = field(t('class.sessions.until'), until, t('class.sessions.untilHelp'));
        untilField.hidden = !weekly.checked;
        weekly.addEventListener('change', () => { untilField.hidden = !weekly.checked; });
        const form = h('form', { class: 'form', novalidate: true, 'data-form': s ? 'edit-session' : 'create-session' },
          field(t('class.sessions.titleLabel'), title),
          field(t('class.sessions.start'), start),
          field(t('class.sessions.minutes'), length, t('class.sessions.minutesHelp')),
          field(t('class.sessions.slices'), slices, t('class.sessions.slicesHelp', { n: formatNumber(cls?.allocation?.slices ?? 0) })),
          h('div', { class: 'field checks' }, h('label', { class: 'check' }, weekly, ' ', t('class.sessions.weekly'))),
          untilField,
          fmsg.el,
          h('div', { class: 'actions' },
            h('button', { type: 'button', class: 'btn', onclick: () => close() }, t('common.cancel')),
            h('button', { type: 'submit', class: 'btn btn-primary', 'data-action': 'save-session' }, s ? t('class.sessions.save') : t('class.sessions.create'))));
        form.addEventListener('submit', async (e) => {
          e.preventDefault();
          fmsg.clear();
          const st = new Date(start.value);
          const mins = Number(length.value);
          if (Number.isNaN(st.getTime())) { fmsg.error(t('class.sessions.badStart')); start.focus(); return; }
          if (!(mins >= 1 && mins <= 1440)) { fmsg.error(t('class.sessions.badMinutes')); length.focus(); return; }
          if (weekly.checked && !until.value) { fmsg.error(t('class.sessions.badUntil')); until.focus(); return; }
          const body = {
            title: title.value.trim(), starts_at: st.toISOString(), ends_at: new Date(st.getTime() + mins * 60e3).toISOString(),
            slices: Number(slices.value), repeat_until: weekly.checked ? until.value : null,
          };
          await busy(form, async () => {
            try {
              if (s) await api.patch(`/classes/${id}/reservations/${s.id}`, body);
              else await api.post(`/classes/${id}/reservations`, body);
              toast(t(s ? 'class.sessions.saved' : 'class.sessions.created'));
              load();
              close(true);
            } catch (err) {
              fmsg.error(err);
            }
          });
        });
        return form;
      },
    });
  }

  async function cancel(s) {
    const ok = await confirmDialog({
      title: t('class.sessions.cancelTitle'),
      message: t('class.sessions.cancelConfirm', { title: s.title || t('class.sessions.untitled') }),
      confirmLabel: t('class.sessions.cancel'), danger: true,
    });
    if (!ok) return;
    try {
      await api.del(`/classes/${id}/reservations/${s.id}`);
      toast(t('class.sessions.cancelled'));
      load();
    } catch (err) {
      toastError(err);
    }
  }

  main.append(h('section', { class: 'page' },
    head,
    h('div', { class: 'page-head page-head-row' },
      h('div', { class: 'page-head-text' },
        h('h2', null, t('class.sessions.title')),
        h('p', { class: 'muted' }, t('class.sessions.intro'))),
      toolbar),
    msg.el,
    h('div', { class: 'card table-card' },
      h('table', { class: 'table', 'data-table': 'sessions' },
        h('thead', null, h('tr', null,
          h('th', null, t('class.sessions.colTitle')),
          h('th', null, t('class.sessions.colWhen')),
          h('th', null, t('class.sessions.colSlices')),
          h('th', null, t('class.sessions.colNext')),
          h('th', null, h('span', { class: 'visually-hidden' }, t('class.sessions.colActions'))))),
        tbody))));
  load();
}
