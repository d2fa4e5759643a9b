// parts/classnav.js — the head every class page shares: the class's name,
// code and term, and one tab per class page (overview, roster, lab
// sessions, assignments, dashboard, usage), the current one marked. Tabs a caller
// cannot use are left out: a student sees the overview, lab sessions and
// assignments; teachers and assistants see all.
import { t } from '../i18n.js';
import { h } from '../ui.js';

// tab: the page's route without '#' (e.g. '/class/roster'); key: its label
const TABS = [
  { route: '/class', key: 'class.tab.overview', tab: 'overview', staff: false },
  { route: '/class/roster', key: 'class.tab.roster', tab: 'roster', staff: true },
  { route: '/class/sessions', key: 'class.tab.sessions', tab: 'sessions', staff: false },
  { route: '/class/assignments', key: 'class.tab.assignments', tab: 'assignments', staff: false },
  { route: '/class/dashboard', key: 'class.tab.dashboard', tab: 'dashboard', staff: true },
  { route: '/class/usage', key: 'usage.class.tab', tab: 'usage', staff: true },
  // the class's audit log: its owner and co-teachers, and admins (not TAs)
  { route: '/class/audit', key: 'class.tab.audit', tab: 'audit', staff: true, teach: true },
];

// Whether the caller teaches the class: its owner, a co-teacher, a
// teaching assistant, or an admin. cls.my_role comes from GET /classes/{id}.
export function isStaff(cls, user) {
  return user?.role === 'admin' || ['owner', 'teacher', 'ta'].includes(cls?.my_role);
}

// Whether the caller may read the class's audit log: its owner, a
// co-teacher, or an admin.
function teaches(cls, user) {
  return user?.role === 'admin' || (user?.role === 'teacher' && ['owner', 'teacher'].includes(cls?.my_role));
}

// The tab bar for class cls (GET /classes/{id}) with `current` marked.
export function classTabs(cls, user, current) {
  const staff = isStaff(cls, user);
  return h('nav', { class: 'tabs class-tabs', 'aria-label': t('nav.classes') },
    ...TABS.filter((x) => (staff || !x.staff) && (!x.teach || teaches(cls, user))).map((x) => h('a', {
      href: `#${x.route}?id=${cls.id}`,
      class: x.tab === current ? 'tab active' : 'tab',
      'data-tab': x.tab,
      'aria-current': x.tab === current ? 'page' : null,
    }, t(x.key))));
}

// The page head: back link, the class's name with its code and term, tabs.
export function classHead(cls, user, current) {
  return h('div', { class: 'class-head' },
    h('p', null, h('a', { href: '#/classes' }, '← ', t('nav.classes'))),
    h('div', { class: 'page-head' },
      h('h1', null, cls.name),
      h('p', { class: 'muted' }, [cls.code, cls.term].filter(Boolean).join(' · '))),
    classTabs(cls, user, current));
}
