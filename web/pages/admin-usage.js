// pages/admin-usage.js — Administration → Usage (#/admin/usage): GPU time
// allocated and actually used, grouped by user, class, pool or image, per
// day, week, month or over the whole range (UTC calendar periods), as a
// chart and a table of every figure with totals and a CSV download; then
// the waste report — GPU time allocated while idle, by user or class, each
// idle period listed. The choices live in the URL
// (#/admin/usage?group_by=pool&period=week&from=2026-11-01&to=2026-11-30),
// so a view can be shared and survives a reload.
import { api } from '../api.js';
import { t } from '../i18n.js';
import { h, messageBox } from '../ui.js';
import { PERIODS, rangeQuery, defaultRange, validDay, usageChart, usageTable, wasteTable, csvHref, rangeControls } from '../parts/usage.js';

const GROUPS = ['user', 'class', 'pool', 'image'];
const WASTE_GROUPS = ['user', 'class'];

function fromUrl() {
  const q = new URLSearchParams(location.hash.split('?').slice(1).join('?'));
  const d = defaultRange();
  return {
    group_by: GROUPS.includes(q.get('group_by')) ? q.get('group_by') : 'user',
    period: PERIODS.includes(q.get('period')) ? q.get('period') : 'day',
    from: validDay(q.get('from')) ? q.get('from') : d.from,
    to: validDay(q.get('to')) ? q.get('to') : d.to,
    waste: WASTE_GROUPS.includes(q.get('waste')) ? q.get('waste') : 'user',
  };
}

function toUrl(f) {
  const q = new URLSearchParams(f);
  history.replaceState(null, '', `#/admin/usage?${q}`);
}

function segmented(name, label, values, current, onPick) {
  const el = h('div', { class: 'seg', role: 'group', 'aria-label': label, 'data-choice': name });
  const draw = (v) => el.replaceChildren(...values.map((x) => h('button', {
    type: 'button', class: 'btn btn-small', [`data-${name}`]: x, 'aria-pressed': String(x === v),
    onclick: () => { draw(x); onPick(x); },
  }, t(`usage.group.${x}`))));
  draw(current);
  return el;
}

export function render(main) {
  const f = fromUrl();
  const msg = messageBox();
  const wasteMsg = messageBox();
  const chart = usageChart();
  const table = usageTable();
  const waste = wasteTable();
  const csv = h('a', { class: 'btn btn-small', 'data-action': 'csv' }, t('usage.csv'));
  const wasteCsv = h('a', { class: 'btn btn-small', 'data-action': 'waste-csv' }, t('usage.csv'));
  const note = h('p', { class: 'muted', 'data-range': '' });
  let seq = 0;

  const range = rangeControls({ from: f.from, to: f.to, period: f.period, onChange: () => { Object.assign(f, range.value()); load(); loadWaste(); } });
  const groupSeg = segmented('group', t('usage.groupBy'), GROUPS, f.group_by, (g) => { f.group_by = g; load(); });
  const wasteSeg = segmented('waste-group', t('usage.groupBy'), WASTE_GROUPS, f.waste, (g) => { f.waste = g; loadWaste(); });

  async function load() {
    toUrl(f);
    const my = ++seq;
    const q = { group_by: f.group_by, period: f.period, ...rangeQuery(f.from, f.to) };
    csv.href = csvHref('/usage', q);
    csv.setAttribute('download', `usage-${f.group_by}-${f.period}-${f.from}-${f.to}.csv`);
    try {
      const r = await api.get('/usage', { query: q });
      if (my !== seq) return;   // a later choice is on its way
      msg.clear();
      chart.update(r);
      table.update(r, t(`usage.group.${r.group_by}`));
      note.textContent = t('usage.rangeNote', { from: f.from, to: f.to });
    } catch (err) {
      if (my === seq) msg.error(err);
    }
  }

  let wasteSeq = 0;
  async function loadWaste() {
    toUrl(f);
    const my = ++wasteSeq;
    const q = { group_by: f.waste, ...rangeQuery(f.from, f.to) };
    wasteCsv.href = csvHref('/usage/waste', q);
    wasteCsv.setAttribute('download', `usage-waste-${f.waste}-${f.from}-${f.to}.csv`);
    try {
      const r = await api.get('/usage/waste', { query: q });
      if (my !== wasteSeq) return;
      wasteMsg.clear();
      waste.update(r, t(`usage.group.${r.group_by}`));
    } catch (err) {
      if (my === wasteSeq) wasteMsg.error(err);
    }
  }

  main.append(h('section', { class: 'page usage-page', 'data-page': 'admin-usage' },
    h('div', { class: 'page-head' },
      h('h1', null, t('nav.usage')),
      h('p', { class: 'muted' }, t('usage.intro'))),
    msg.el,
    h('div', { class: 'card', 'data-card': 'usage-chart' },
      h('div', { class: 'usage-controls' },
        h('div', { class: 'filter-bar' }, h('span', { class: 'muted' }, t('usage.groupBy')), groupSeg),
        range.el),
      note,
      chart.el,
      h('p', { class: 'muted usage-note' }, t('usage.gpuNote'))),
    h('section', { class: 'card card-flush', 'aria-labelledby': 'usage-table-title' },
      h('div', { class: 'card-toolbar' }, h('h2', { id: 'usage-table-title', class: 'card-title' }, t('usage.table')), h('div', { class: 'toolbar-end' }, csv)),
      table.el),
    h('section', { class: 'card card-flush', 'aria-labelledby': 'usage-waste-title', 'data-card': 'waste' },
      h('div', { class: 'card-toolbar' },
        h('h2', { id: 'usage-waste-title', class: 'card-title' }, t('usage.waste.title')),
        h('div', { class: 'filter-bar' }, h('span', { class: 'muted' }, t('usage.groupBy')), wasteSeg),
        h('div', { class: 'toolbar-end' }, wasteCsv)),
      h('p', { class: 'muted card-intro' }, t('usage.waste.intro')),
      wasteMsg.el,
      waste.el)));
  load();
  loadWaste();
}
