// api.js — the one way the frontend talks to gpucloudd's JSON API.
//
// Session auth is an HttpOnly cookie the browser sends by itself; this module
// only keeps the CSRF token (in memory, mirrored to sessionStorage so a reload
// keeps working) and sends it on every non-GET request. Error replies
// ({"error":{code,message,hint,details}}) become ApiError exceptions.

const BASE = '/api/v1';
const CSRF_KEY = 'gpucloud.csrf';

let csrfToken = readStoredCsrf();
let unauthorizedHandler = null;

function readStoredCsrf() {
  try { return globalThis.sessionStorage?.getItem(CSRF_KEY) || null; } catch { return null; }
}

export function setCsrfToken(token) {
  csrfToken = token || null;
  try {
    if (csrfToken) sessionStorage.setItem(CSRF_KEY, csrfToken);
    else sessionStorage.removeItem(CSRF_KEY);
  } catch { /* storage disabled: memory is enough until reload */ }
}

// fn() runs when a request is refused with 401 (the session ended), unless
// the call passed { authRedirect: false }.
export function onUnauthorized(fn) { unauthorizedHandler = fn; }

// fn() runs when a request is refused because the account must choose a new
// password first (403 password_change_required: an admin asked for it).
let passwordChangeHandler = null;
export function onPasswordChangeRequired(fn) { passwordChangeHandler = fn; }

export class ApiError extends Error {
  constructor({ status = 0, code = 'error', message = '', hint = '', details = null, retryAfter = null }) {
    super(message || code);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    this.hint = hint || '';
    this.details = Array.isArray(details) ? details : null;
    this.retryAfter = retryAfter;
  }
}

function parseRetryAfter(value) {
  if (!value) return null;
  const n = Number(value);
  if (Number.isFinite(n)) return Math.max(0, Math.ceil(n));
  const when = Date.parse(value);
  return Number.isNaN(when) ? null : Math.max(0, Math.ceil((when - Date.now()) / 1000));
}

// request('POST', '/users', body, opts)
//   body: an object (sent as JSON), a string (sent as is, with opts.contentType), or undefined
//   opts.query: object of query parameters (undefined/null/'' values are left out)
//   opts.authRedirect: false to handle 401 yourself (login, first /me)
//   opts.headers: extra request headers (e.g. Idempotency-Key)
// Resolves to the parsed JSON body, or null for an empty reply (204).
export async function request(method, path, body, opts = {}) {
  let url = BASE + path;
  if (opts.query) {
    const qs = new URLSearchParams();
    for (const [k, v] of Object.entries(opts.query)) {
      if (v !== undefined && v !== null && v !== '') qs.set(k, String(v));
    }
    const s = qs.toString();
    if (s) url += (url.includes('?') ? '&' : '?') + s;
  }
  const headers = { Accept: 'application/json' };
  let payload;
  if (body !== undefined) {
    if (typeof body === 'string') {
      payload = body;
      headers['Content-Type'] = opts.contentType || 'text/plain; charset=utf-8';
    } else {
      payload = JSON.stringify(body);
      headers['Content-Type'] = 'application/json';
    }
  }
  if (opts.headers) Object.assign(headers, opts.headers);
  if (method !== 'GET' && method !== 'HEAD' && csrfToken) headers['X-CSRF-Token'] = csrfToken;

  let res;
  try {
    res = await fetch(url, { method, headers, body: payload, credentials: 'same-origin', cache: 'no-store' });
  } catch (e) {
    throw new ApiError({ code: 'network', message: e?.message || 'network error' });
  }

  const text = await res.text();
  let data = null;
  if (text) {
    try { data = JSON.parse(text); } catch { data = null; }
  }

  if (!res.ok) {
    const err = data && typeof data.error === 'object' && data.error ? data.error : {};
    const apiErr = new ApiError({
      status: res.status,
      code: err.code || `http_${res.status}`,
      message: err.message || `${res.status} ${res.statusText}`.trim(),
      hint: err.hint,
      details: err.details,
      retryAfter: parseRetryAfter(res.headers.get('Retry-After')),
    });
    if (res.status === 401 && opts.authRedirect !== false && unauthorizedHandler) unauthorizedHandler(apiErr);
    if (apiErr.code === 'password_change_required' && passwordChangeHandler) passwordChangeHandler(apiErr);
    throw apiErr;
  }
  if (text && data === null) throw new ApiError({ status: res.status, code: 'bad_response', message: 'the server sent a reply that is not JSON' });
  return data;
}

export const api = {
  get: (path, opts) => request('GET', path, undefined, opts),
  post: (path, body, opts) => request('POST', path, body, opts),
  patch: (path, body, opts) => request('PATCH', path, body, opts),
  put: (path, body, opts) => request('PUT', path, body, opts),
  del: (path, opts) => request('DELETE', path, undefined, opts),
};
