// parts/chart.js — a small line chart in SVG, no dependencies: axes with
// rounded ticks, one or more series (each its own colour from style.css's
// --chart-N, so dark and light both work), a legend when there are several,
// and the values nearest the pointer on hover (or keyboard focus).
//
//   const c = lineChart({ title: 'loss', xLabel: 'step',
//                         formatX: (x) => ..., formatY: (y) => ... });
//   main.append(c.el);
//   c.update([{ name: 'loss', points: [[x, y], ...] }, ...]);   // redraws
//
// Each series is one <polyline data-series="name" data-points="N">.
const NS = 'http://www.w3.org/2000/svg';
const W = 560, H = 220;
const PAD = { l: 56, r: 14, t: 12, b: 30 };

function svg(tag, attrs, ...kids) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== undefined && v !== null) el.setAttribute(k, String(v));
  for (const k of kids) if (k !== null && k !== undefined) el.append(k instanceof Node ? k : document.createTextNode(String(k)));
  return el;
}

// About n "nice" ticks (1, 2, 5 × 10^k apart) within [lo, hi] — or, with
// around, from the last tick at or below lo to the first at or above hi.
export function niceTicks(lo, hi, n = 5, around = false) {
  if (!Number.isFinite(lo) || !Number.isFinite(hi)) return [];
  if (lo === hi) { const d = Math.abs(lo) || 1; lo -= d / 2; hi += d / 2; }
  const raw = (hi - lo) / Math.max(1, n);
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw) || 10 * mag;
  const first = (around ? Math.floor(lo / step) : Math.ceil(lo / step)) * step;
  const last = (around ? Math.ceil(hi / step) : Math.floor(hi / step)) * step;
  const out = [];
  for (let i = 0, v = first; v <= last + step * 1e-9 && i < 100; i++, v = first + i * step)
    out.push(Math.abs(v) < step * 1e-9 ? 0 : Number(v.toPrecision(12)));
  return out;
}

const defaultFormat = (v) => {
  const a = Math.abs(v);
  if (a !== 0 && (a >= 1e6 || a < 1e-3)) return v.toExponential(2);
  return String(Number(v.toPrecision(4)));
};

export function lineChart({ title = '', xLabel = '', formatX = defaultFormat, formatY = defaultFormat, empty = '' } = {}) {
  const plot = svg('g', { class: 'chart-plot' });
  const axes = svg('g', { class: 'chart-axes' });
  const hover = svg('g', { class: 'chart-hover', visibility: 'hidden' });
  const root = svg('svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart-svg', role: 'img', 'aria-label': title, tabindex: 0 }, axes, plot, hover);
  const legend = document.createElement('div');
  legend.className = 'chart-legend';
  const tip = document.createElement('div');
  tip.className = 'chart-tip';
  tip.hidden = true;
  const el = document.createElement('figure');
  el.className = 'chart';
  el.dataset.chart = title;
  if (title) {
    const cap = document.createElement('figcaption');
    cap.className = 'chart-title';
    cap.textContent = title;
    el.append(cap);
  }
  const frame = document.createElement('div');
  frame.className = 'chart-frame';
  frame.append(root, tip);
  el.append(frame, legend);

  let data = [];
  let sx = () => 0, sy = () => 0, x0 = 0, x1 = 1;

  function update(series) {
    data = series.filter((s) => s.points.length);
    const xs = data.flatMap((s) => s.points.map((p) => p[0]));
    const ys = data.flatMap((s) => s.points.map((p) => p[1]));
    axes.replaceChildren();
    plot.replaceChildren();
    if (!xs.length) {
      axes.append(svg('text', { x: W / 2, y: H / 2, 'text-anchor': 'middle', class: 'chart-empty' }, empty));
      legend.replaceChildren();
      return;
    }
    x0 = Math.min(...xs); x1 = Math.max(...xs);
    let y0 = Math.min(...ys), y1 = Math.max(...ys);
    if (y0 === y1) { const d = Math.abs(y0) / 10 || 1; y0 -= d; y1 += d; }
    // the axis runs from tick to tick around the data
    const yt = niceTicks(y0, y1, 4, true);
    y0 = Math.min(y0, yt[0]); y1 = Math.max(y1, yt.at(-1));
    const xw = x1 - x0 || 1;
    sx = (x) => PAD.l + ((x - x0) / xw) * (W - PAD.l - PAD.r);
    sy = (y) => H - PAD.b - ((y - y0) / (y1 - y0)) * (H - PAD.t - PAD.b);
    for (const v of yt) {
      axes.append(svg('line', { x1: PAD.l, x2: W - PAD.r, y1: sy(v), y2: sy(v), class: 'chart-grid' }));
      axes.append(svg('text', { x: PAD.l - 6, y: sy(v) + 4, 'text-anchor': 'end', class: 'chart-tick' }, formatY(v)));
    }
    for (const v of niceTicks(x0, x1, 5).filter((v) => v >= x0 && v <= x1)) {
      axes.append(svg('line', { x1: sx(v), x2: sx(v), y1: H - PAD.b, y2: H - PAD.b + 4, class: 'chart-axis' }));
      axes.append(svg('text', { x: sx(v), y: H - PAD.b + 16, 'text-anchor': 'middle', class: 'chart-tick' }, formatX(v)));
    }
    axes.append(svg('line', { x1: PAD.l, x2: W - PAD.r, y1: H - PAD.b, y2: H - PAD.b, class: 'chart-axis' }));
    axes.append(svg('line', { x1: PAD.l, x2: PAD.l, y1: PAD.t, y2: H - PAD.b, class: 'chart-axis' }));
    if (xLabel) axes.append(svg('text', { x: W - PAD.r, y: H - 2, 'text-anchor': 'end', class: 'chart-tick chart-label' }, xLabel));
    data.forEach((s, i) => {
      const pts = s.points.map((p) => `${sx(p[0]).toFixed(1)},${sy(p[1]).toFixed(1)}`).join(' ');
      plot.append(svg('polyline', { points: pts, class: `chart-line chart-c${i % 6}`, 'data-series': s.name, 'data-points': s.points.length }));
      if (s.points.length === 1) plot.append(svg('circle', { cx: sx(s.points[0][0]), cy: sy(s.points[0][1]), r: 3, class: `chart-dot chart-c${i % 6}` }));
    });
    legend.replaceChildren(...(data.length > 1 ? data.map((s, i) => {
      const item = document.createElement('span');
      item.className = 'chart-key';
      const sw = document.createElement('span');
      sw.className = `chart-swatch chart-c${i % 6}`;
      item.append(sw, s.name);
      return item;
    }) : []));
  }

  // the point of each series nearest to x (a data value)
  function nearest(s, x) {
    let lo = 0, hi = s.points.length - 1;
    while (lo < hi) { const m = (lo + hi) >> 1; if (s.points[m][0] < x) lo = m + 1; else hi = m; }
    if (lo > 0 && Math.abs(s.points[lo - 1][0] - x) <= Math.abs(s.points[lo][0] - x)) lo--;
    return s.points[lo];
  }

  function showAt(x) {
    if (!data.length) return;
    const near = data.map((s) => [s, nearest(s, x)]);
    const px = near[0][1][0];
    hover.replaceChildren(svg('line', { x1: sx(px), x2: sx(px), y1: PAD.t, y2: H - PAD.b, class: 'chart-cursor' }),
      ...near.map(([, p], i) => svg('circle', { cx: sx(p[0]), cy: sy(p[1]), r: 3.5, class: `chart-dot chart-c${data.indexOf(near[i][0]) % 6}` })));
    hover.setAttribute('visibility', 'visible');
    tip.replaceChildren(...[`${xLabel ? `${xLabel} ` : ''}${formatX(px)}`, ...near.map(([s, p]) => `${s.name}: ${formatY(p[1])}`)]
      .map((line) => { const d = document.createElement('div'); d.textContent = line; return d; }));
    tip.hidden = false;
    const rel = (sx(px) / W) * 100;
    tip.style.left = rel > 60 ? '' : `calc(${rel}% + 12px)`;
    tip.style.right = rel > 60 ? `calc(${100 - rel}% + 12px)` : '';
  }

  function hide() { hover.setAttribute('visibility', 'hidden'); tip.hidden = true; }

  root.addEventListener('pointermove', (e) => {
    const r = root.getBoundingClientRect();
    const vx = ((e.clientX - r.left) / r.width) * W;
    showAt(x0 + ((vx - PAD.l) / (W - PAD.l - PAD.r)) * (x1 - x0 || 1));
  });
  root.addEventListener('pointerleave', hide);
  root.addEventListener('blur', hide);
  root.addEventListener('focus', () => showAt(x1));

  update([]);
  return { el, update };
}
