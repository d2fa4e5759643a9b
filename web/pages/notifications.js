// pages/notifications.js — "Notifications": mine, newest first (all or
// unread only), each in the reader's language with a link to what it is
// about; mark read or unread, delete, mark all read; cursor pages ("Show
// more").  Refreshed every 15 s while shown; the bell follows each change.
import { api } from '../api.js';
import { t, formatDate } from '../i18n.js';
import { h, messageBox, toast, toastError } from '../ui.js';
import { poll } from '../parts/poll.js';
import { words, bellRefresh } from '../parts/notify.js';

const POLL_MS = 15000;
const PAGE = 50;

export function render(main) {
  const msg = messageBox();
  let unreadOnly = false;
  let shown = PAGE;
  const list = h('ul', { class: 'notif-list', 'data-list': 'notifications' });
  const more = h('button', { type: 'button', class: 'btn', 'data-action': 'more', hidden: true }, t('notif.more'));
  const filter = h('div', { class: 'seg', role: 'group', 'aria-label': t('notif.filter.label') },
    ['all', 'unread'].map((f) => h('button', {
      type: 'button', class: 'btn btn-small', 'data-filter': f, 'aria-pressed': String(f === 'all'),
      onclick: () => {
        unreadOnly = f === 'unread';
        shown = PAGE;
        for (const b of filter.querySelectorAll('button')) b.setAttribute('aria-pressed', String(b.dataset.filter === f));
        feed.refresh();
      },
    }, t(`notif.filter.${f}`))));

  const act = async (fn) => {
    try { await fn(); } catch (err) { toastError(err); }
    feed.refresh();
    bellRefresh();
  };

  function item(n) {
    const w = words(n);
    const mail = n.mail.state !== 'none' ? h('span', { class: `badge${n.mail.state === 'failed' ? ' badge-off' : ''}`, 'data-field': 'mail', title: n.mail.error || null },
      t(`notif.mail.${n.mail.state}`)) : null;
    return h('li', { class: `notif${n.read ? '' : ' notif-unread'}`, 'data-id': n.id, 'data-kind': n.kind, 'data-read': String(n.read) },
      h('div', { class: 'notif-main' },
        h('div', { class: 'notif-title' },
          n.read ? null : h('span', { class: 'notif-dot', title: t('notif.unread') }, h('span', { class: 'visually-hidden' }, t('notif.unread'))),
          n.link ? h('a', { href: '#' + n.link, 'data-action': 'open', onclick: () => { if (!n.read) api.post(`/notifications/${n.id}/read`).then(bellRefresh, () => {}); } }, w.title)
            : h('strong', null, w.title)),
        w.body ? h('p', { class: 'notif-body', 'data-field': 'body' }, w.body) : null,
        h('div', { class: 'cell-sub muted' }, formatDate(n.created_at), ' ', mail)),
      h('div', { class: 'notif-actions' },
        h('button', { type: 'button', class: 'btn btn-small', 'data-action': n.read ? 'unread' : 'read',
          onclick: () => act(() => api.post(`/notifications/${n.id}/${n.read ? 'unread' : 'read'}`)) },
        t(n.read ? 'notif.markUnread' : 'notif.markRead')),
        h('button', { type: 'button', class: 'btn btn-small btn-danger-outline', 'data-action': 'delete',
          onclick: () => act(async () => { await api.del(`/notifications/${n.id}`); toast(t('notif.deleted')); }) },
        t('notif.delete'))));
  }

  // the first `shown` notifications, page by page
  async function fetchAll() {
    const items = [];
    let cursor = null, next = null;
    do {
      const q = new URLSearchParams({ limit: String(Math.min(PAGE, shown - items.length)) });
      if (unreadOnly) q.set('unread', '1');
      if (cursor) q.set('cursor', cursor);
      const r = await api.get(`/notifications?${q}`);
      items.push(...r.items);
      next = r.next_cursor;
      cursor = next;
    } while (next && items.length < shown);
    return { items, more: Boolean(next) };
  }

  const feed = poll(fetchAll, POLL_MS, {
    until: list,
    show: ({ items, more: hasMore }) => {
      msg.clear();
      list.replaceChildren(...(items.length ? items.map(item)
        : [h('li', { class: 'notif notif-empty muted', 'data-empty': '' }, t(unreadOnly ? 'notif.emptyUnread' : 'notif.empty'))]));
      more.hidden = !hasMore;
    },
    fail: (err) => msg.error(err),
  });
  more.addEventListener('click', () => { shown += PAGE; feed.refresh(); });

  const markAll = h('button', { type: 'button', class: 'btn', 'data-action': 'read-all',
    onclick: () => act(async () => {
      const r = await api.post('/notifications/read_all');
      toast(t('notif.allRead', { count: r.marked }));
    }) }, t('notif.markAllRead'));

  main.append(h('section', { class: 'page' },
    h('div', { class: 'page-head page-head-row' },
      h('div', { class: 'page-head-text' }, h('h1', null, t('notif.title')), h('p', { class: 'muted' }, t('notif.intro'))),
      markAll),
    h('div', { class: 'card card-flush' },
      h('div', { class: 'card-toolbar notif-toolbar' }, filter),
      msg.el,
      list),
    h('div', { class: 'actions' }, more)));
}
