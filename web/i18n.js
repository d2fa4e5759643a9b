// i18n.js — every string the interface shows goes through t().
//
// The dictionaries live in web/locales/, one module per language merging
// per-area parts; keys are "area.name". Placeholders are written {name} and
// filled from the params object. A sentence that counts something maps to
// its plural forms instead of a string (see t()). The chosen language is
// kept in localStorage; the first visit follows the browser's language.
import en from './locales/en.js';
import zhCN from './locales/zh-CN.js';

export const LANGUAGES = [
  { code: 'en', name: 'English' },
  { code: 'zh-CN', name: '简体中文' },
];

export const DICTIONARIES = { en, 'zh-CN': zhCN };

const STORAGE_KEY = 'gpucloud.lang';
const listeners = new Set();
let current = 'en';

// Maps a browser language tag to one of ours: any Chinese tag (zh, zh-CN,
// zh-Hans, zh-SG, even zh-TW until a traditional dictionary exists) → zh-CN.
export function matchLanguage(tag) {
  if (!tag) return 'en';
  const lower = String(tag).toLowerCase();
  if (lower === 'zh' || lower.startsWith('zh-')) return 'zh-CN';
  return 'en';
}

function storage() {
  try { return globalThis.localStorage || null; } catch { return null; }
}

export function initLanguage() {
  const saved = storage()?.getItem(STORAGE_KEY);
  if (saved && DICTIONARIES[saved]) current = saved;
  else current = matchLanguage(globalThis.navigator?.language);
  applyToDocument();
  return current;
}

export function getLanguage() { return current; }

export function setLanguage(code) {
  if (!DICTIONARIES[code] || code === current) return;
  current = code;
  storage()?.setItem(STORAGE_KEY, code);
  applyToDocument();
  for (const fn of listeners) fn(code);
}

export function onLanguageChange(fn) {
  listeners.add(fn);
  return () => listeners.delete(fn);
}

function applyToDocument() {
  if (globalThis.document) document.documentElement.lang = current;
}

// t('tokens.created', { name: 'ci' }). A key missing from the current
// dictionary falls back to English, then to the key itself (so a gap shows
// up on screen instead of an empty label).
//
// Plurals: a value may be an object of forms named by the language's
// Intl.PluralRules categories, e.g. { one: '{count} node', other: '{count}
// nodes' }; params.count (a number) picks the form, 'other' when it has no
// form of its own. {count} is filled with the number formatted for the
// language.
export function t(key, params) {
  const own = DICTIONARIES[current]?.[key];
  const lang = own === undefined ? 'en' : current;
  let s = own ?? en[key] ?? key;
  if (typeof s === 'object') s = pluralForm(s, lang, params?.count);
  if (params) {
    s = s.replace(/\{(\w+)\}/g, (m, name) => {
      if (!(name in params)) return m;
      const v = params[name];
      return name === 'count' && typeof v === 'number' ? formatNumber(v) : String(v);
    });
  }
  return s;
}

const pluralRules = new Map();
function pluralForm(forms, lang, count) {
  const n = Number(count);
  if (!Number.isFinite(n)) return forms.other;
  if (!pluralRules.has(lang)) pluralRules.set(lang, new Intl.PluralRules(lang));
  return forms[pluralRules.get(lang).select(n)] ?? forms.other;
}

// Like t(), but returns undefined when no dictionary has the key; for
// labels derived from server data (quota names, error codes).
export function tMaybe(key, params) {
  if (!(key in en) && !(key in (DICTIONARIES[current] || {}))) return undefined;
  return t(key, params);
}

// The server writes its messages in English, next to a machine code (an
// error code, a queue reason code). What to show for one: in English, the
// server's own words (they name the exact subject); in another language, the
// code's sentence from the dictionary (key), with the server's words kept as
// detail; for a code the dictionary does not know, the server's words.
// Returns { text, detail } (detail '' when there is nothing more to say).
export const SERVER_LANGUAGE = 'en';
export function fromServer(key, serverText) {
  const own = key ? tMaybe(key) : undefined;
  if (!own || (current === SERVER_LANGUAGE && serverText)) return { text: serverText || own || '', detail: '' };
  return { text: own, detail: serverText && serverText !== own ? serverText : '' };
}

export function formatDate(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  return new Intl.DateTimeFormat(current, { dateStyle: 'medium', timeStyle: 'short' }).format(d);
}

export function formatDay(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  return new Intl.DateTimeFormat(current, { dateStyle: 'medium' }).format(d);
}

export function formatNumber(n) {
  return new Intl.NumberFormat(current).format(n);
}

export function formatBytes(n) {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let v = Number(n), i = 0;
  while (Math.abs(v) >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  const digits = i === 0 || v >= 100 ? 0 : 1;
  return `${new Intl.NumberFormat(current, { maximumFractionDigits: digits }).format(v)} ${units[i]}`;
}
