// parts/usage.js — what the two usage pages (Administration → Usage and a
// class's Usage tab) share: the range and period controls kept in the URL,
// the figures as a person reads them (GPU-hours from the API's
// GPU-seconds; "not measurable" said as such, never a made-up number), the
// chart of GPU time allocated against used per period (parts/chart.js), the
// table of every figure with its totals, and the waste report (GPU time
// allocated while idle, each idle period listed). GET /api/v1/usage and
// /api/v1/usage/waste; periods are UTC calendar buckets, so dates are shown
// in UTC too.
import { t, getLanguage, formatNumber } from '../i18n.js';
import { h, emptyRow } from '../ui.js';
import { lineChart } from './chart.js';

export const PERIODS = ['day', 'week', 'month', 'total'];
const DAY = 86400000;

// 'YYYY-MM-DD' of a Date, in UTC
export const ymd = (d) => d.toISOString().slice(0, 10);

// The range the API is asked for: from the first day's 00:00 UTC up to the
// end of the last day (both days shown in the form are included).
export function rangeQuery(fromDay, toDay) {
  const to = new Date(Date.parse(`${toDay}T00:00:00Z`) + DAY);
  return { from: `${fromDay}T00:00:00Z`, to: to.toISOString().replace('.000Z', 'Z') };
}

// The last 30 days, today included.
export function defaultRange() {
  const today = new Date();
  return { from: ymd(new Date(today.getTime() - 29 * DAY)), to: ymd(today) };
}

export const validDay = (s) => /^\d{4}-\d{2}-\d{2}$/.test(s || '') && !Number.isNaN(Date.parse(`${s}T00:00:00Z`));

// GPU-hours from GPU-seconds, two decimals at most
export const gpuHours = (s) => formatNumber(Math.round((s / 3600) * 100) / 100);
const twoPlaces = (v) => formatNumber(Math.round(v * 100) / 100);

// A period's start as the period's name: a day, "week of" its Monday, a month.
export function periodLabel(iso, period, short = false) {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  const lang = getLanguage();
  if (period === 'month') return new Intl.DateTimeFormat(lang, { timeZone: 'UTC', year: 'numeric', month: short ? 'short' : 'long' }).format(d);
  const day = new Intl.DateTimeFormat(lang, short ? { timeZone: 'UTC', month: 'short', day: 'numeric' } : { timeZone: 'UTC', dateStyle: 'medium' }).format(d);
  return period === 'week' && !short ? t('usage.weekOf', { date: day }) : day;
}

export const dayLabel = (iso) => periodLabel(iso, 'day');

// The start of every period of [from, to) (ISO strings), for the chart's
// x axis: periods with no usage are drawn as zero, not skipped.
export function periodStarts(from, to, period) {
  const a = new Date(from), b = new Date(to);
  if (period === 'total') return [a.toISOString()];
  let d = new Date(Date.UTC(a.getUTCFullYear(), a.getUTCMonth(), period === 'month' ? 1 : a.getUTCDate()));
  if (period === 'week') d = new Date(d.getTime() - ((d.getUTCDay() + 6) % 7) * DAY);
  const out = [];
  while (d < b && out.length < 2000) {
    out.push(d.toISOString());
    d = period === 'month' ? new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1))
      : new Date(d.getTime() + (period === 'week' ? 7 : 1) * DAY);
  }
  return out;
}

// The index of the period holding instant iso: the last start at or before it.
function bucketOf(starts, iso) {
  const at = Date.parse(iso);
  let i = -1;
  while (i + 1 < starts.length && Date.parse(starts[i + 1]) <= at) i++;
  return i < 0 && starts.length ? 0 : i;
}

// The chart: allocated and used GPU-hours per period, summed over the rows.
// update(reply) redraws it from a GET /usage reply.
export function usageChart() {
  let starts = [];
  let period = 'day';
  // x is the period's index: ticks fall on periods, labelled by their start
  const formatX = (i) => (Number.isInteger(i) && starts[i] ? periodLabel(starts[i], period, true) : '');
  const chart = lineChart({ title: t('usage.chart.title'), empty: t('usage.chart.empty'), formatX, formatY: twoPlaces });
  function update(r) {
    period = r.period;
    starts = periodStarts(r.from, r.to, r.period);
    // a period without rows used nothing (0); one whose rows are all not
    // measurable has no used figure (no point drawn)
    const alloc = starts.map(() => 0), used = starts.map(() => 0), seen = starts.map(() => false), known = starts.map(() => false);
    for (const row of r.rows || []) {
      const i = bucketOf(starts, row.period_start);
      if (i < 0) continue;
      alloc[i] += row.gpu_seconds || 0;
      seen[i] = true;
      if (row.gpu_used_seconds !== null && row.gpu_used_seconds !== undefined) { used[i] += row.gpu_used_seconds; known[i] = true; }
      else if (!row.gpu_seconds) known[i] = true;   // no GPU time (CPU or storage only): nothing unused
    }
    chart.update((r.rows || []).length ? [
      { name: t('usage.chart.allocated'), points: alloc.map((v, i) => [i, v / 3600]) },
      { name: t('usage.chart.used'), points: used.map((v, i) => [i, v / 3600]).filter(([i]) => known[i] || !seen[i]) },
    ] : []);
  }
  return { el: h('div', { class: 'usage-chart', 'data-chart': 'usage' }, chart.el), update };
}

// The measured badge: measured / partly measured / not measurable
export function measuredBadge(m) {
  const cls = m === 'measured' ? 'badge badge-on' : m === 'partly measured' ? 'badge badge-warn' : 'badge';
  const key = m === 'measured' ? 'measured' : m === 'partly measured' ? 'partly' : 'none';
  return h('span', { class: cls, 'data-measured': key }, t(`usage.measured.${key}`));
}

const maybe = (v, fmt) => (v === null || v === undefined ? '—' : fmt(v));

// The used figure: GPU-hours, or "not measurable" where nothing was sampled;
// a dash for a row without GPU time (CPU or storage only).
function usedCell(v, gpuSeconds) {
  if ((v === null || v === undefined) && gpuSeconds === 0) return '—';
  return v === null || v === undefined
    ? h('span', { class: 'muted', 'data-not-measurable': '' }, t('usage.notMeasurable'))
    : gpuHours(v);
}

const COLS = ['key', 'period', 'gpuHours', 'gpuUsed', 'measured', 'cpuHours', 'memHours', 'storageDays'];

// The table of a GET /usage reply: one row per key and period, every figure,
// totals in the foot. keyLabel: the column's heading for the key.
// withPeriod: false leaves the period column out (one period: the range).
export function usageTable({ withPeriod = true } = {}) {
  const cols = withPeriod ? COLS : COLS.filter((k) => k !== 'period');
  const head = h('tr');
  const body = h('tbody', null, emptyRow(cols.length, t('common.loading')));
  const foot = h('tfoot');
  const table = h('table', { class: 'table usage-table', 'data-table': 'usage' }, h('thead', null, head), body, foot);
  function update(r, keyLabel) {
    head.replaceChildren(...cols.map((k) => h('th', { scope: 'col', class: k === 'key' || k === 'period' || k === 'measured' ? null : 'num' },
      k === 'key' ? keyLabel : t(`usage.col.${k}`))));
    const rows = r.rows || [];
    body.replaceChildren(...(rows.length ? rows.map((x) => h('tr', { 'data-key': x.key, 'data-period': x.period_start },
      h('td', { 'data-field': 'key' }, x.key ?? '—'),
      withPeriod ? h('td', { class: 'nowrap', 'data-field': 'period' }, r.period === 'total' ? t('usage.wholeRange') : periodLabel(x.period_start, r.period)) : null,
      h('td', { class: 'num', 'data-field': 'gpu', 'data-seconds': x.gpu_seconds }, gpuHours(x.gpu_seconds)),
      h('td', { class: 'num', 'data-field': 'gpu-used', 'data-seconds': x.gpu_used_seconds ?? '' }, usedCell(x.gpu_used_seconds, x.gpu_seconds)),
      h('td', { 'data-field': 'measured' }, x.gpu_seconds === 0 ? null : measuredBadge(x.gpu_measured)),
      h('td', { class: 'num', 'data-field': 'cpu' }, maybe(x.cpu_hours, twoPlaces)),
      h('td', { class: 'num', 'data-field': 'mem' }, maybe(x.memory_gib_hours, twoPlaces)),
      h('td', { class: 'num', 'data-field': 'storage' }, maybe(x.storage_gib_days, twoPlaces))))
      : [h('tr', { class: 'empty', 'data-empty': 'usage' }, h('td', { colspan: cols.length }, t('usage.none')))]));
    const tt = r.totals || {};
    foot.replaceChildren(h('tr', { 'data-totals': '' },
      h('th', { scope: 'row', colspan: withPeriod ? 2 : 1 }, t('usage.totals')),
      h('td', { class: 'num', 'data-total': 'gpu', 'data-seconds': tt.gpu_seconds ?? 0 }, gpuHours(tt.gpu_seconds ?? 0)),
      h('td', { class: 'num', 'data-total': 'gpu-used', 'data-seconds': tt.gpu_used_seconds ?? '' }, usedCell(tt.gpu_used_seconds, tt.gpu_seconds ?? 0)),
      h('td', { 'data-total': 'measured' }, tt.gpu_measured && tt.gpu_seconds ? measuredBadge(tt.gpu_measured) : null),
      h('td', { class: 'num', 'data-total': 'cpu' }, maybe(tt.cpu_hours, twoPlaces)),
      h('td', { class: 'num', 'data-total': 'mem' }, maybe(tt.memory_gib_hours, twoPlaces)),
      h('td', { class: 'num', 'data-total': 'storage' }, maybe(tt.storage_gib_days, twoPlaces))));
  }
  return { el: h('div', { class: 'table-wrap' }, table), update };
}

// How long, as hours and minutes
function lasted(s) {
  const m = Math.round(s / 60);
  return m < 60 ? t('usage.minutes', { n: m }) : t('usage.hoursMinutes', { h: Math.floor(m / 60), m: m % 60 });
}

// The waste report of a GET /usage/waste reply: per key the GPU-hours
// allocated while idle, then each idle period (what, when, how many GPUs).
export function wasteTable() {
  const head = h('tr');
  const body = h('tbody', null, emptyRow(3, t('common.loading')));
  const foot = h('tfoot');
  const table = h('table', { class: 'table usage-waste', 'data-table': 'waste' }, h('thead', null, head), body, foot);
  function update(r, keyLabel) {
    head.replaceChildren(h('th', { scope: 'col' }, keyLabel), h('th', { scope: 'col', class: 'num' }, t('usage.waste.idle')),
      h('th', { scope: 'col' }, t('usage.waste.periods')));
    const rows = r.rows || [];
    body.replaceChildren(...(rows.length ? rows.map((x) => h('tr', { 'data-key': x.key },
      h('td', { 'data-field': 'key' }, x.key ?? '—'),
      h('td', { class: 'num', 'data-field': 'idle', 'data-seconds': x.allocated_idle_seconds }, gpuHours(x.allocated_idle_seconds)),
      h('td', null, h('ul', { class: 'plain-list waste-periods' }, ...(x.periods || []).map((p) => h('li', { 'data-idle-period': `${p.kind}:${p.id}` },
        h('strong', null, p.name || `#${p.id}`), ' ', h('span', { class: 'badge' }, t(`usage.waste.kind.${p.kind === 'job' ? 'job' : 'instance'}`)), ' · ',
        dayTime(p.started_at), ' – ', p.ended_at ? dayTime(p.ended_at) : t('usage.waste.ongoing'), ' · ',
        t('usage.waste.gpus', { count: Math.round(p.gpus * 100) / 100 }), ' · ', lasted(p.seconds)))))))
      : [h('tr', { class: 'empty', 'data-empty': 'waste' }, h('td', { colspan: 3 }, t('usage.waste.none')))]));
    foot.replaceChildren(h('tr', { 'data-totals': '' },
      h('th', { scope: 'row' }, t('usage.totals')),
      h('td', { class: 'num', 'data-total': 'idle', 'data-seconds': r.totals?.allocated_idle_seconds ?? 0 }, gpuHours(r.totals?.allocated_idle_seconds ?? 0)),
      h('td')));
  }
  return { el: h('div', { class: 'table-wrap' }, table), update };
}

// A moment, in UTC like the periods
function dayTime(iso) {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  return `${new Intl.DateTimeFormat(getLanguage(), { timeZone: 'UTC', dateStyle: 'medium', timeStyle: 'short' }).format(d)} UTC`;
}

// The link that downloads a report as CSV: the same query with format=csv.
export function csvHref(path, query) {
  const qs = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null && v !== '') qs.set(k, String(v));
  qs.set('format', 'csv');
  return `/api/v1${path}?${qs}`;
}

// The range form: From, To (both days included, UTC) and, when periods is
// set, the period as a segmented choice. onChange() after any change.
export function rangeControls({ from, to, period, periods = true, onChange }) {
  const fromIn = h('input', { type: 'date', name: 'from', 'data-filter': 'from', value: from, 'aria-label': t('usage.from') });
  const toIn = h('input', { type: 'date', name: 'to', 'data-filter': 'to', value: to, 'aria-label': t('usage.to') });
  let current = period;
  const seg = h('div', { class: 'seg', role: 'group', 'aria-label': t('usage.period') });
  function drawSeg() {
    seg.replaceChildren(...PERIODS.map((p) => h('button', {
      type: 'button', class: 'btn btn-small', 'data-period': p, 'aria-pressed': String(p === current),
      onclick: () => { current = p; drawSeg(); onChange(); },
    }, t(`usage.period.${p}`))));
  }
  drawSeg();
  for (const el of [fromIn, toIn]) el.addEventListener('change', () => { if (validDay(fromIn.value) && validDay(toIn.value)) onChange(); });
  const el = h('div', { class: 'filter-bar usage-range' },
    h('label', { class: 'inline-label' }, t('usage.from'), ' ', fromIn),
    h('label', { class: 'inline-label' }, t('usage.to'), ' ', toIn),
    periods ? seg : null);
  return {
    el,
    value: () => ({ from: fromIn.value, to: toIn.value, period: current }),
  };
}
