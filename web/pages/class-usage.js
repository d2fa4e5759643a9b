// pages/class-usage.js — a class's usage, for its teachers
// (#/class/usage?id=N; ?class=N works too): pick one of the classes the
// caller teaches, then the GPU time each student used in the class's
// context over the chosen days (GET /usage?group_by=user&period=total
// &class=N: one row per student, with totals and a CSV download), the
// class's GPU time allocated against used per day, week or month as a
// chart, and the waste report — each student's GPU time allocated while
// idle, every idle period listed. The server decides who may see a class's
// usage (its teachers and admins); a student is told the page is not theirs.
import { api } from '../api.js';
import { t } from '../i18n.js';
import { h, messageBox, field } from '../ui.js';
import { classHead, isStaff } from '../parts/classnav.js';
import { PERIODS, rangeQuery, defaultRange, validDay, usageChart, usageTable, wasteTable, csvHref, rangeControls } from '../parts/usage.js';

function fromUrl() {
  const q = new URLSearchParams(location.hash.split('?').slice(1).join('?'));
  const d = defaultRange();
  return {
    id: Number(q.get('id') || q.get('class')) || null,
    period: PERIODS.includes(q.get('period')) && q.get('period') !== 'total' ? q.get('period') : 'week',
    from: validDay(q.get('from')) ? q.get('from') : d.from,
    to: validDay(q.get('to')) ? q.get('to') : d.to,
  };
}

function toUrl(f) {
  const q = new URLSearchParams({ id: String(f.id), period: f.period, from: f.from, to: f.to });
  history.replaceState(null, '', `#/class/usage?${q}`);
}

export function render(main, ctx) {
  const f = fromUrl();
  const user = ctx.user;
  const msg = messageBox();
  const page = h('section', { class: 'page usage-page', 'data-page': 'class-usage' });
  main.append(page);

  async function start() {
    let classes = [];
    try {
      const r = await api.get('/classes');
      classes = (r.items || []).filter((c) => isStaff(c, user));
    } catch (err) {
      page.append(msg.el);
      msg.error(err);
      return;
    }
    if (!classes.length) {
      page.append(h('div', { class: 'page-head' }, h('h1', null, t('usage.class.title'))),
        h('p', { class: 'msg msg-info', 'data-not-teacher': '' }, t('usage.class.notTeacher')));
      return;
    }
    if (!f.id || !classes.some((c) => c.id === f.id)) {
      if (f.id) {
        // a class the caller does not teach: say so, offer theirs
        page.append(h('p', { class: 'msg msg-info', 'data-not-teacher': '' }, t('usage.class.notYours')));
      }
      f.id = classes[0].id;
    }
    toUrl(f);
    const picker = h('select', { name: 'class', 'data-field': 'class' },
      ...classes.map((c) => h('option', { value: String(c.id), selected: c.id === f.id }, [c.name, c.code].filter(Boolean).join(' · '))));
    picker.addEventListener('change', () => {
      f.id = Number(picker.value);
      toUrl(f);
      page.replaceChildren();
      start();
    });
    let cls;
    try {
      cls = await api.get(`/classes/${f.id}`);
    } catch (err) {
      page.append(msg.el);
      msg.error(err);
      return;
    }
    build(cls, picker);
  }

  function build(cls, picker) {
    const chart = usageChart();
    const table = usageTable({ withPeriod: false });
    const waste = wasteTable();
    const wasteMsg = messageBox();
    const csv = h('a', { class: 'btn btn-small', 'data-action': 'csv' }, t('usage.csv'));
    const range = rangeControls({ from: f.from, to: f.to, period: f.period, onChange: () => { Object.assign(f, range.value()); load(); } });
    // the whole range per student in the table; the chart per period
    range.el.querySelector('[data-period="total"]')?.remove();
    let seq = 0;

    async function load() {
      toUrl(f);
      const my = ++seq;
      const span = rangeQuery(f.from, f.to);
      const students = { group_by: 'user', period: 'total', class: cls.id, ...span };
      csv.href = csvHref('/usage', students);
      csv.setAttribute('download', `class-${cls.id}-usage-${f.from}-${f.to}.csv`);
      try {
        const [tot, per, w] = await Promise.all([
          api.get('/usage', { query: students }),
          api.get('/usage', { query: { group_by: 'class', period: f.period, class: cls.id, ...span } }),
          api.get('/usage/waste', { query: { group_by: 'user', class: cls.id, ...span } }).catch((err) => ({ err })),
        ]);
        if (my !== seq) return;
        msg.clear();
        table.update(tot, t('usage.class.student'));
        chart.update(per);
        if (w.err) wasteMsg.error(w.err);
        else { wasteMsg.clear(); waste.update(w, t('usage.class.student')); }
      } catch (err) {
        if (my === seq) msg.error(err);
      }
    }

    page.append(
      classHead(cls, user, 'usage'),
      h('div', { class: 'page-head page-head-row' }, h('h2', null, t('usage.class.title')),
        h('div', { class: 'usage-class-pick' }, field(t('usage.class.pick'), picker))),
      msg.el,
      h('div', { class: 'card', 'data-card': 'usage-chart' },
        range.el,
        chart.el,
        h('p', { class: 'muted usage-note' }, t('usage.class.note'))),
      h('section', { class: 'card card-flush', 'aria-labelledby': 'usage-table-title' },
        h('div', { class: 'card-toolbar' }, h('h2', { id: 'usage-table-title', class: 'card-title' }, t('usage.class.students')), h('div', { class: 'toolbar-end' }, csv)),
        table.el),
      h('section', { class: 'card card-flush', 'aria-labelledby': 'usage-waste-title', 'data-card': 'waste' },
        h('div', { class: 'card-toolbar' }, h('h2', { id: 'usage-waste-title', class: 'card-title' }, t('usage.waste.title'))),
        h('p', { class: 'muted card-intro' }, t('usage.waste.intro')),
        wasteMsg.el,
        waste.el));
    load();
  }

  start();
}
