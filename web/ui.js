// ui.js — small DOM helpers shared by the pages: element building (never
// innerHTML, so server data is always text), dialogs, notices, the
// shown-once secret box.
import { t, tMaybe, fromServer, getLanguage, SERVER_LANGUAGE, formatNumber, formatBytes } from './i18n.js';

// h('button', { class: 'btn', onclick: fn, 'data-nav': 'home' }, 'Text', child, ...)
// Attributes: "class", "text", on<event> handlers, boolean true/false for
// boolean attributes, null/undefined skipped; anything else via setAttribute.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
      else if (k === 'class') el.className = v;
      else if (k === 'text') el.textContent = v;
      else if (k === 'value') {
        if (tag === 'input') el.defaultValue = v;   // so form.reset() comes back to it
        el.value = v;
      } else if (k === 'checked') el.checked = el.defaultChecked = Boolean(v);
      else if (k === 'selected') el.selected = el.defaultSelected = Boolean(v);
      else if (k === 'disabled') el.disabled = Boolean(v);
      else el.setAttribute(k, v === true ? '' : String(v));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : String(c));
  }
}

let idSeq = 0;
export const uid = (prefix = 'f') => `${prefix}-${++idSeq}`;

// A labelled form field: field(label, input, help?) — the <label> is tied to
// the input by id, the optional help text by aria-describedby.
export function field(label, input, help) {
  if (!input.id) input.id = uid('in');
  const helpEl = help ? h('p', { class: 'field-help', id: `${input.id}-help` }, help) : null;
  if (helpEl) input.setAttribute('aria-describedby', helpEl.id);
  return h('div', { class: 'field' }, h('label', { for: input.id }, label), input, helpEl);
}

// An error as the person should read it: { text, detail }. An API error's
// code is translated (error.code.*) where the interface is not in the
// server's language; the server's message and hint are then the detail.
// Errors made here (new Error(t(...))) are shown as they are.
export function errorParts(err) {
  if (!err) return { text: '', detail: '' };
  if (err.code === 'network') return { text: t('error.network'), detail: '' };
  const server = err.message ? (err.hint ? `${err.message} — ${err.hint}` : err.message) : '';
  const numbers = refusalText(err);
  if (numbers && !(getLanguage() === SERVER_LANGUAGE && server)) return { text: numbers, detail: server };
  const said = fromServer(typeof err.code === 'string' ? `error.code.${err.code}` : null, server);
  return said.text ? said : { text: t('error.unknown'), detail: '' };
}

// A refusal the server explains with numbers (never_fits, exceeds_quota:
// details [{ what, most, asked, pool }]) as a sentence of the interface's
// language, with the amounts in the units the form shows; undefined when
// the dictionary has none for it.
const AMOUNT = {
  cpu_millis: (v) => formatNumber(v / 1000),
  mem_mib: (v) => formatBytes(v * 1024 * 1024),
};
function refusalText(err) {
  const d = Array.isArray(err.details) ? err.details[0] : null;
  if (!d || typeof d.what !== 'string' || typeof err.code !== 'string') return undefined;
  const amount = AMOUNT[d.what] || ((v) => formatNumber(v));
  const where = typeof d.pool === 'string' ? t('error.where.pool', { pool: d.pool }) : t('error.where.cluster');
  return tMaybe(`error.${err.code}.${d.what}`, { where, most: amount(d.most), asked: amount(d.asked) });
}

export function errorText(err) {
  return errorParts(err).text;
}

// An inline message area for a form: error(errOrText) and success(text) show
// it (as an alert or a status for screen readers), clear() hides it. An
// error's detail (the server's own words) follows on a line of its own.
export function messageBox() {
  const el = h('div', { class: 'msg', hidden: true });
  return {
    el,
    error(errOrText) {
      const { text, detail } = typeof errOrText === 'string' ? { text: errOrText, detail: '' } : errorParts(errOrText);
      el.className = 'msg msg-error';
      el.setAttribute('role', 'alert');
      el.replaceChildren(text);
      if (detail) el.append(h('span', { class: 'msg-detail', 'data-error-detail': '', lang: 'en' }, detail));
      el.hidden = false;
    },
    success(text) {
      el.className = 'msg msg-success';
      el.setAttribute('role', 'status');
      el.textContent = text;
      el.hidden = false;
    },
    clear() { el.hidden = true; el.textContent = ''; el.removeAttribute('role'); },
  };
}

// Transient notice in the corner (announced to screen readers). title: a
// tooltip with more (an error's detail).
export function toast(text, kind = 'success', title = null) {
  let region = document.getElementById('toasts');
  if (!region) {
    region = h('div', { id: 'toasts', class: 'toasts', role: 'status', 'aria-live': 'polite' });
    document.body.append(region);
  }
  const item = h('div', { class: `toast toast-${kind}`, title }, text);
  region.append(item);
  while (region.children.length > 3) region.firstElementChild.remove();
  setTimeout(() => item.remove(), 4000);
}

// An error as a toast; the server's own words, when they are not the text,
// as its tooltip.
export function toastError(err) {
  const { text, detail } = errorParts(err);
  toast(text, 'error', detail || null);
}

// Opens a modal <dialog>. build(close) returns the body nodes; close(value)
// resolves the returned promise. The dialog is removed when it closes.
// wide: true for a wider dialog, 'x' for a wider one still (tables).
export function openDialog({ title, build, wide = false }) {
  return new Promise((resolve) => {
    const titleId = uid('dlg');
    const size = wide === 'x' ? ' dialog-xwide' : wide ? ' dialog-wide' : '';
    const dlg = h('dialog', { class: `dialog${size}`, 'aria-labelledby': titleId });
    // Focus returns to what opened the dialog; for a menu item, to the menu's button.
    const active = document.activeElement;
    const pop = active?.closest?.('[popover]');
    const opener = pop ? document.querySelector(`[popovertarget="${pop.id}"]`) : active;
    let done = false;
    // Gone from the page at once (a shown-once secret must not linger), then
    // focus goes back to what opened the dialog.
    const finish = (value) => {
      if (done) return;
      done = true;
      if (dlg.open) dlg.close();
      dlg.remove();
      if (opener?.isConnected) opener.focus();
      resolve(value);
    };
    const close = (value) => finish(value);
    const header = h('div', { class: 'dialog-header' },
      h('h2', { id: titleId }, title),
      h('button', { type: 'button', class: 'btn-icon', 'aria-label': t('common.close'), onclick: () => close(undefined) }, '×'));
    dlg.append(header, h('div', { class: 'dialog-body' }, build(close)));
    dlg.addEventListener('close', () => finish(undefined));   // Escape
    document.body.append(dlg);
    dlg.showModal();
    const first = dlg.querySelector('.dialog-body input:not([type=hidden]):not([readonly]), .dialog-body select, .dialog-body textarea, .dialog-body button');
    first?.focus();
  });
}

// Resolves true when the person confirms.
export function confirmDialog({ title, message, confirmLabel, danger = false }) {
  return openDialog({
    title,
    build: (close) => [
      h('p', null, message),
      h('div', { class: 'actions' },
        h('button', { type: 'button', class: 'btn', onclick: () => close(false) }, t('common.cancel')),
        h('button', { type: 'button', class: danger ? 'btn btn-danger' : 'btn btn-primary', 'data-action': 'confirm', onclick: () => close(true) }, confirmLabel || t('common.confirm'))),
    ],
  }).then(Boolean);
}

// A secret shown once (generated password, API token): read-only field,
// copy button, warning.
export function secretBox({ label, value, warning }) {
  const input = h('input', { type: 'text', readonly: true, value, class: 'secret-value', 'data-secret': '', spellcheck: 'false', autocomplete: 'off' });
  const copied = h('span', { class: 'copied', 'aria-live': 'polite' });
  const copy = h('button', {
    type: 'button', class: 'btn', 'data-action': 'copy',
    onclick: async () => {
      const ok = await copyText(value, input);
      copied.textContent = ok ? t('common.copied') : t('common.copyFailed');
    },
  }, t('common.copy'));
  return h('div', { class: 'secret' },
    field(label, input),
    h('div', { class: 'secret-row' }, copy, copied),
    h('p', { class: 'warning' }, warning || t('common.shownOnce')));
}

async function copyText(text, input) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    input.select();
    try { return document.execCommand('copy'); } catch { return false; }
  }
}

export function emptyRow(cols, text) {
  return h('tr', { class: 'empty' }, h('td', { colspan: cols }, text));
}

// Disables a form's controls while an async action runs.
export async function busy(form, fn) {
  const controls = [...form.querySelectorAll('button, input, select, textarea')].filter((c) => !c.disabled);
  controls.forEach((c) => { c.disabled = true; });
  form.setAttribute('aria-busy', 'true');
  try { return await fn(); } finally {
    controls.forEach((c) => { c.disabled = false; });
    form.removeAttribute('aria-busy');
  }
}

// Inline icons (stroke glyphs in currentColor), so no asset has to be fetched.
const ICONS = {
  home: 'M3 11l9-7 9 7v9a1 1 0 0 1-1 1h-5v-6h-6v6H4a1 1 0 0 1-1-1z',
  user: 'M12 12a4 4 0 1 0 0-8 4 4 0 0 0 0 8zm-7 9a7 7 0 0 1 14 0',
  users: 'M9 11a4 4 0 1 0 0-8 4 4 0 0 0 0 8zm-7 10a7 7 0 0 1 14 0M16 3.5a4 4 0 0 1 0 7.5M18 14a6 6 0 0 1 4 7',
  menu: 'M4 6h16M4 12h16M4 18h16',
  globe: 'M12 21a9 9 0 1 0 0-18 9 9 0 0 0 0 18zM3 12h18M12 3c2.5 2.5 3.5 5.5 3.5 9s-1 6.5-3.5 9c-2.5-2.5-3.5-5.5-3.5-9s1-6.5 3.5-9z',
  search: 'M11 18a7 7 0 1 0 0-14 7 7 0 0 0 0 14zm5-2l5 5',
  plus: 'M12 5v14M5 12h14',
  upload: 'M12 16V4m0 0l-5 5m5-5l5 5M4 20h16',
  key: 'M14 10a4 4 0 1 0-3.9 4.9L12 17h2v2h2v2h4v-3l-6.1-6.1A4 4 0 0 0 14 10z',
  server: 'M4 4h16v7H4zM4 13h16v7H4zM8 7.5h.01M8 16.5h.01M12 7.5h4M12 16.5h4',
  grid: 'M4 4h6v6H4zM14 4h6v6h-6zM4 14h6v6H4zM14 14h6v6h-6z',
  layers: 'M12 3l9 5-9 5-9-5zM3 12.5l9 5 9-5M3 16.5l9 5 9-5',
  bars: 'M4 20h16M7 16v-5M12 16V5M17 16V9',
};

export function icon(name, size = 20) {
  const ns = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(ns, 'svg');
  const attrs = {
    viewBox: '0 0 24 24', width: size, height: size, fill: 'none', stroke: 'currentColor',
    'stroke-width': '1.8', 'stroke-linecap': 'round', 'stroke-linejoin': 'round', 'aria-hidden': 'true', focusable: 'false',
  };
  for (const [k, v] of Object.entries(attrs)) svg.setAttribute(k, String(v));
  const p = document.createElementNS(ns, 'path');
  p.setAttribute('d', ICONS[name] || '');
  svg.append(p);
  return svg;
}

// A button that opens a small menu (a popover in the top layer, so a
// scrolling table cannot clip it). items are nodes, usually menuItem()s.
// Light dismiss and Escape come with the popover; arrow keys move focus.
export function dropdown({ content, label, className = 'btn btn-small', attrs = {}, items, align = 'end' }) {
  const menu = h('div', { id: uid('menu'), class: 'menu', popover: 'auto', role: 'menu' }, items);
  const button = h('button', {
    type: 'button', class: className, popovertarget: menu.id,
    'aria-haspopup': 'menu', 'aria-expanded': 'false', 'aria-label': label, ...attrs,
  }, content);
  const place = () => {
    const r = button.getBoundingClientRect();
    const w = menu.offsetWidth, hgt = menu.offsetHeight;
    let left = align === 'end' ? r.right - w : r.left;
    left = Math.max(8, Math.min(left, window.innerWidth - w - 8));
    let top = r.bottom + 6;
    if (top + hgt > window.innerHeight - 8 && r.top - hgt - 6 > 8) top = r.top - hgt - 6;
    menu.style.left = `${left}px`;
    menu.style.top = `${top}px`;
  };
  const closeOnScroll = () => menu.hidePopover();
  menu.addEventListener('toggle', (e) => {
    const open = e.newState === 'open';
    button.setAttribute('aria-expanded', String(open));
    if (open) {
      place();
      window.addEventListener('scroll', closeOnScroll, { capture: true, once: true });
      menu.querySelector('.menu-item:not(:disabled)')?.focus();
    } else {
      window.removeEventListener('scroll', closeOnScroll, { capture: true });
    }
  });
  menu.addEventListener('click', (e) => { if (e.target.closest('.menu-item')) menu.hidePopover(); });
  menu.addEventListener('keydown', (e) => {
    if (e.key !== 'ArrowDown' && e.key !== 'ArrowUp') return;
    e.preventDefault();
    const all = [...menu.querySelectorAll('.menu-item:not(:disabled)')];
    const i = all.indexOf(document.activeElement);
    all[(i + (e.key === 'ArrowDown' ? 1 : all.length - 1)) % all.length]?.focus();
  });
  return h('div', { class: 'dropdown' }, button, menu);
}

export function menuItem({ label, action, onclick, href, danger = false, disabled = false, title }) {
  const cls = danger ? 'menu-item menu-item-danger' : 'menu-item';
  if (href) return h('a', { href, class: cls, role: 'menuitem', 'data-action': action }, label);
  return h('button', { type: 'button', class: cls, role: 'menuitem', 'data-action': action, onclick, disabled, title }, label);
}
