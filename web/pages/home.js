// pages/home.js — welcome, role, and the limits in force for me against
// what I use (GET /me/limits: per pool and for CPU-only work, with where
// each limit comes from; my home's storage).
import { api } from '../api.js';
import { t, formatDate } from '../i18n.js';
import { h, messageBox } from '../ui.js';
import { limitsTable, storageLine } from '../parts/limits.js';

function limitsCard() {
  const msg = messageBox();
  const body = h('div', { 'data-limits': '' }, h('p', { class: 'muted' }, t('common.loading')));
  const card = h('section', { class: 'card card-wide', 'aria-labelledby': 'quota-title' },
    h('h2', { id: 'quota-title' }, t('home.quotas')),
    h('p', { class: 'muted card-intro' }, t('home.quotasIntro')),
    body, msg.el);
  api.get('/me/limits').then((lim) => {
    body.replaceChildren(limitsTable(lim), storageLine(lim.storage));
  }, (err) => {
    body.replaceChildren();
    msg.error(err);
  });
  return card;
}

// Live notices of my classes (GET /notices); nothing at all when there are none.
function noticesCard() {
  const card = h('section', { class: 'card card-wide', 'aria-labelledby': 'notices-title', 'data-home-notices': '', hidden: true });
  api.get('/notices').then((r) => {
    if (!r.items?.length) return;
    card.append(h('h2', { id: 'notices-title' }, t('home.notices')),
      h('ul', { class: 'plain-list notices' }, ...r.items.map((n) => h('li', { 'data-notice': String(n.id) },
        h('p', { class: 'notice-body' }, n.body),
        h('p', { class: 'muted' }, t('home.noticeFrom', {
          class: n.class.code || n.class.name,
          who: n.author ? (n.author.display_name || n.author.username) : '—',
          at: formatDate(n.created_at),
        }), ' · ', h('a', { href: `#/class?id=${n.class.id}` }, n.class.name))))));
    card.hidden = false;
  }, () => { /* a convenience: the page stands without it */ });
  return card;
}

export function render(main, ctx) {
  const user = ctx.user;

  main.append(h('section', { class: 'page' },
    h('div', { class: 'page-head' },
      h('h1', null, t('home.welcome', { name: user.display_name || user.username })),
      h('p', { class: 'muted' }, t('home.signedInAs'), ' ',
        h('span', { class: `badge badge-role role-${user.role}`, 'data-role': user.role }, t(`role.${user.role}`)))),
    h('div', { class: 'grid' },
      noticesCard(),
      limitsCard(),
      h('section', { class: 'card', 'aria-labelledby': 'start-title' },
        h('h2', { id: 'start-title' }, t('home.gettingStarted')),
        h('ul', { class: 'plain-list' },
          h('li', null, h('a', { href: '#/cluster' }, t('home.linkCluster'))),
          h('li', null, h('a', { href: '#/account' }, t('home.linkAccount'))),
          user.role === 'admin' ? h('li', null, h('a', { href: '#/admin/users' }, t('home.linkUsers'))) : null,
          user.role === 'admin' ? h('li', null, h('a', { href: '#/admin/nodes' }, t('home.linkNodes'))) : null,
          user.role === 'admin' ? h('li', null, h('a', { href: '#/admin/pools' }, t('home.linkPools'))) : null,
          user.role === 'admin' ? h('li', null, h('a', { href: '#/admin/quotas' }, t('home.linkQuotas'))) : null)))));
}
