// pages.js — the page table: every page of the app, once. The router and
// the side navigation are both derived from it.
//
//   route   the hash path (#/admin/nodes)
//   title   the dictionary key of the page's title (document.title)
//   nav     the stable data-nav id of its side-navigation link (tests and
//           links rely on it); a page without one is reached by links only
//   label   the link's dictionary key (defaults to the title)
//   icon    the link's icon (ui.js ICONS)
//   section the navigation section's heading key; null for the first,
//           unheaded one. Sections appear in the order of their first page.
//   roles   who may open it (and see its link)
//   load    imports the page module (export render(main, ctx)); called the
//           first time the page is opened, never before
import { ROLE_NAMES } from './roles.js';

const EVERYONE = ROLE_NAMES;
const ADMIN = ['admin'];
const ADMIN_SECTION = 'nav.section.admin';

export const PAGES = [
  { route: '/home', title: 'nav.home', nav: 'home', icon: 'home', section: null, roles: EVERYONE, load: () => import('./pages/home.js') },
  { route: '/instances', title: 'nav.instances', nav: 'instances', icon: 'server', section: null, roles: EVERYONE, load: () => import('./pages/instances.js') },
  { route: '/jobs', title: 'nav.jobs', nav: 'jobs', icon: 'layers', section: null, roles: EVERYONE, load: () => import('./pages/jobs.js') },
  { route: '/files', title: 'nav.files', nav: 'files', icon: 'upload', section: null, roles: EVERYONE, load: () => import('./pages/files.js') },
  { route: '/cluster', title: 'nav.cluster', nav: 'cluster', icon: 'grid', section: null, roles: EVERYONE, load: () => import('./pages/cluster.js') },
  { route: '/account', title: 'nav.account', nav: 'account', icon: 'user', section: null, roles: EVERYONE, load: () => import('./pages/account.js') },
  { route: '/instances/new', title: 'inst.new.title', roles: EVERYONE, load: () => import('./pages/instance-new.js') },
  { route: '/instance', title: 'inst.detail.title', roles: EVERYONE, load: () => import('./pages/instance-detail.js') },
  { route: '/jobs/new', title: 'job.form.title', roles: EVERYONE, load: () => import('./pages/job-new.js') },
  { route: '/job', title: 'job.detail.title', roles: EVERYONE, load: () => import('./pages/job-detail.js') },
  { route: '/sweeps', title: 'sweep.title', roles: EVERYONE, load: () => import('./pages/sweeps.js') },
  { route: '/sweeps/new', title: 'sweep.form.title', roles: EVERYONE, load: () => import('./pages/sweep-new.js') },
  { route: '/sweep', title: 'sweep.detail.title', roles: EVERYONE, load: () => import('./pages/sweep-detail.js') },
  { route: '/classes', title: 'nav.classes', nav: 'classes', icon: 'users', section: null, roles: EVERYONE, load: () => import('./pages/classes.js') },
  { route: '/class', title: 'class.title', roles: EVERYONE, load: () => import('./pages/class.js') },
  { route: '/class/roster', title: 'class.roster.title', roles: EVERYONE, load: () => import('./pages/class-roster.js') },
  { route: '/class/sessions', title: 'class.sessions.title', roles: EVERYONE, load: () => import('./pages/class-sessions.js') },
  { route: '/class/assignments', title: 'class.assignments.title', roles: EVERYONE, load: () => import('./pages/class-assignments.js') },
  { route: '/class/dashboard', title: 'class.dashboard.title', roles: EVERYONE, load: () => import('./pages/class-dashboard.js') },
  { route: '/join', title: 'class.join.title', roles: EVERYONE, load: () => import('./pages/class-join.js') },
  { route: '/notifications', title: 'notif.title', roles: EVERYONE, load: () => import('./pages/notifications.js') },
  { route: '/class/usage', title: 'usage.class.title', roles: EVERYONE, load: () => import('./pages/class-usage.js') },
  { route: '/terminal', title: 'terminal.titleNone', roles: EVERYONE, load: () => import('./pages/terminal.js') },
  { route: '/admin/users', title: 'nav.users', nav: 'admin-users', icon: 'users', section: ADMIN_SECTION, roles: ADMIN, load: () => import('./pages/admin-users.js') },
  { route: '/admin/nodes', title: 'nav.nodes', nav: 'admin-nodes', icon: 'server', section: ADMIN_SECTION, roles: ADMIN, load: () => import('./pages/admin-nodes.js') },
  { route: '/admin/pools', title: 'nav.pools', nav: 'admin-pools', icon: 'layers', section: ADMIN_SECTION, roles: ADMIN, load: () => import('./pages/admin-pools.js') },
  { route: '/admin/quotas', title: 'nav.quotas', nav: 'admin-quotas', icon: 'bars', section: ADMIN_SECTION, roles: ADMIN, load: () => import('./pages/admin-quotas.js') },
  { route: '/admin/images', title: 'nav.images', nav: 'admin-images', icon: 'upload', section: ADMIN_SECTION, roles: ADMIN, load: () => import('./pages/admin-images.js') },
  { route: '/admin/job-templates', title: 'nav.jobTemplates', nav: 'admin-job-templates', icon: 'layers', section: ADMIN_SECTION, roles: ADMIN, load: () => import('./pages/admin-job-templates.js') },
  { route: '/admin/usage', title: 'nav.usage', nav: 'admin-usage', icon: 'bars', section: ADMIN_SECTION, roles: ADMIN, load: () => import('./pages/admin-usage.js') },
  { route: '/admin/audit', title: 'nav.audit', nav: 'admin-audit', icon: 'key', section: ADMIN_SECTION, roles: ADMIN, load: () => import('./pages/admin-audit.js') },
  // a class's audit log: its owner and co-teachers (the server filters), admins
  { route: '/class/audit', title: 'nav.audit', roles: ['teacher', 'admin'], load: () => import('./pages/admin-audit.js') },
  { route: '/admin/registries', title: 'nav.registries', nav: 'admin-registries', icon: 'key', section: ADMIN_SECTION, roles: ADMIN, load: () => import('./pages/admin-registries.js') },
];

const byRoute = new Map(PAGES.map((p) => [p.route, p]));

// The page at a route, or undefined.
export const pageAt = (route) => byRoute.get(route);

// The navigation one role sees: [{ section, items: [{ nav, route, label, icon }] }],
// sections with no visible entry left out.
export function navFor(role) {
  const sections = new Map();
  for (const p of PAGES) {
    if (!p.nav || !p.roles.includes(role)) continue;
    if (!sections.has(p.section)) sections.set(p.section, []);
    sections.get(p.section).push({ nav: p.nav, route: p.route, label: p.label || p.title, icon: p.icon });
  }
  return [...sections].map(([section, items]) => ({ section, items }));
}

// Each page module once: the first opening imports it, later ones reuse it.
// A failed import (a network error) is tried again next time.
const modules = new Map();
export function loadPage(page) {
  if (!modules.has(page.route)) {
    modules.set(page.route, page.load().catch((err) => { modules.delete(page.route); throw err; }));
  }
  return modules.get(page.route);
}
