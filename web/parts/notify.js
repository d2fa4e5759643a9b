// parts/notify.js — notifications in the shell and the Account page: the
// bell in the top bar (unread count, polled; pages that change notifications
// call bellRefresh()), the words of one notification (its kind and params in
// the reader's language), and the e-mail preferences card.
import { api } from '../api.js';
import { t, formatBytes, formatDate, LANGUAGES, getLanguage } from '../i18n.js';
import { h, field, messageBox, busy } from '../ui.js';
import { poll } from './poll.js';

// (one string: its parts are kinds, not dictionary keys)
export const KINDS = 'job.succeeded job.failed instance.idle_warning instance.stopped quota.storage quota.gpu_hours class.notice'.split(' ');
const [, JOB_FAILED, IDLE_WARNING, STOPPED, STORAGE] = KINDS;

const BELL_MS = 30000;
let bellPoll = null;

function bellIcon() {
  const ns = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(ns, 'svg');
  for (const [k, v] of Object.entries({ viewBox: '0 0 24 24', width: 20, height: 20, fill: 'none', stroke: 'currentColor',
    'stroke-width': '1.8', 'stroke-linecap': 'round', 'stroke-linejoin': 'round', 'aria-hidden': 'true', focusable: 'false' })) svg.setAttribute(k, String(v));
  const p = document.createElementNS(ns, 'path');
  p.setAttribute('d', 'M18 16V11a6 6 0 0 0-12 0v5l-2 2h16zM10 20a2 2 0 0 0 4 0');
  svg.append(p);
  return svg;
}

// The bell: a link to the Notifications page with the unread count.
export function bell() {
  const count = h('span', { class: 'bell-count', 'data-unread': '0', hidden: true }, '0');
  const link = h('a', { class: 'btn-icon bell', href: '#/notifications', 'data-bell': '', 'aria-label': t('notif.bell'), title: t('notif.bell') },
    bellIcon(), count);
  const show = (n) => {
    count.textContent = n > 99 ? '99+' : String(n);
    count.dataset.unread = String(n);
    count.hidden = n === 0;
    const label = n ? t('notif.bellUnread', { count: n }) : t('notif.bell');
    link.setAttribute('aria-label', label);
    link.title = label;
  };
  bellPoll = poll(() => api.get('/notifications/unread_count', { authRedirect: false }), BELL_MS,
    { until: link, show: (r) => show(r.unread) });
  return link;
}

// Asks the bell for the count now (after marking or deleting).
export function bellRefresh() { bellPoll?.refresh(); }

// { title, body } of a notification in the current language.
export function words(n) {
  const p = { ...n.params };
  const kind = KINDS.includes(n.kind) ? n.kind : null;
  if (!kind) return { title: t('notif.kind.unknown.title'), body: '' };
  if (kind === IDLE_WARNING && p.stop_at) p.stop_at = formatDate(p.stop_at);
  if (kind === STOPPED) p.why = t(p.why === 'idle' ? 'notif.why.idle' : 'notif.why.lifetime');
  if (kind === JOB_FAILED) p.state = t(`job.state.${p.state}`);
  if (kind === STORAGE) { p.bytes = formatBytes(p.bytes); p.limit = formatBytes(p.limit_bytes); }
  let body = t(`notif.kind.${kind}.body`, p);
  if (kind === JOB_FAILED && Number.isInteger(p.exit_code)) body += t('notif.exitCode', { code: p.exit_code });
  return { title: t(`notif.kind.${kind}.title`, p), body };
}

// The e-mail preferences card of the Account page.
export function mailPrefsCard() {
  const msg = messageBox();
  const email = h('input', { id: 'notif-email', type: 'email', autocomplete: 'email', maxlength: 254, 'data-field': 'notif-email' });
  const lang = h('select', { id: 'notif-lang', 'data-field': 'notif-lang' },
    LANGUAGES.map((l) => h('option', { value: l.code, lang: l.code }, l.name)));
  const boxes = new Map(KINDS.map((k) => [k, h('input', { type: 'checkbox', id: `notif-kind-${k.replace('.', '-')}`, 'data-kind': k })]));
  const note = h('p', { class: 'msg msg-info', 'data-no-mail-server': '', hidden: true }, t('notif.prefs.noServer'));
  const form = h('form', { class: 'form', 'data-form': 'notif-prefs', novalidate: true },
    note,
    field(t('notif.prefs.email'), email, t('notif.prefs.emailHelp')),
    field(t('notif.prefs.language'), lang),
    h('fieldset', { class: 'field checks notif-kinds' }, h('legend', null, t('notif.prefs.kinds')),
      KINDS.map((k) => h('label', { class: 'check', for: boxes.get(k).id }, boxes.get(k), ' ', t(`notif.prefs.kind.${k}`)))),
    msg.el,
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'btn btn-primary' }, t('notif.prefs.save'))));
  const fill = (p) => {
    email.value = p.email;
    lang.value = p.language;
    for (const [k, b] of boxes) b.checked = p.email_kinds[k] !== false;
    note.hidden = p.mail_enabled;
  };
  api.get('/notifications/preferences').then(fill, (err) => msg.error(err));
  // before anything is saved, mails follow the language on screen
  lang.value = getLanguage();
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    msg.clear();
    await busy(form, async () => {
      try {
        const email_kinds = Object.fromEntries([...boxes].map(([k, b]) => [k, b.checked]));
        const saved = await api.put('/notifications/preferences', { email: email.value.trim(), language: lang.value, email_kinds });
        fill(saved);
        // the profile beside it shows the address too
        form.closest('.page')?.querySelector('.props [data-field=email]')?.replaceChildren(saved.email || '—');
        msg.success(t('notif.prefs.saved'));
      } catch (err) {
        msg.error(err);
      }
    });
  });
  return h('section', { class: 'card', 'aria-labelledby': 'notif-prefs-title', 'data-card': 'notif-prefs' },
    h('h2', { id: 'notif-prefs-title' }, t('notif.prefs.title')),
    h('p', { class: 'muted' }, t('notif.prefs.intro')),
    form);
}
