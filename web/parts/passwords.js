// parts/passwords.js — one-time passwords the server returned once (a
// user import, a class roster import), saved here in the browser: a CSV,
// and a printable sheet with one slip per account to cut and hand out.
import { t } from '../i18n.js';
import { h } from '../ui.js';

function save(name, type, content) {
  const url = URL.createObjectURL(new Blob([content], { type }));
  const a = h('a', { href: url, download: name });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

// Only the accounts with a generated password: a given one the admin knows.
export function downloadCsv(created, name = 'gpucloud-new-users.csv') {
  const quote = (s) => (/[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s);
  const rows = created.filter((c) => c.password);
  const csv = 'username,display_name,password\n' + rows.map((c) => [c.username, c.display_name || '', c.password].map(quote).join(',')).join('\n') + '\n';
  save(name, 'text/csv', csv);
}

// A printable sheet, one slip per account to cut and hand out: a document
// of its own (opened from the downloads, it is printed as it is).
export function downloadSheet(created, name = 'gpucloud-new-users.html', title = t('users.sheetTitle')) {
  const esc = (s) => String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
  const site = location.origin + location.pathname;
  const slips = created.filter((c) => c.password).map((c) => `<section class="slip">
<h2>${esc(c.display_name || c.username)}</h2>
<dl><dt>${esc(t('users.sheetSite'))}</dt><dd>${esc(site)}</dd>
<dt>${esc(t('user.username'))}</dt><dd class="v">${esc(c.username)}</dd>
<dt>${esc(t('users.sheetPassword'))}</dt><dd class="v">${esc(c.password)}</dd></dl>
<p>${esc(t('users.sheetNote'))}</p></section>`).join('\n');
  const html = `<!doctype html>
<html lang="${esc(document.documentElement.lang || 'en')}"><head><meta charset="utf-8">
<title>${esc(title)}</title>
<style>
body { font: 14px/1.4 system-ui, "Noto Sans CJK SC", "WenQuanYi Micro Hei", sans-serif; margin: 2em; }
.slip { border: 1px dashed #888; padding: 1em 1.2em; margin: 0 0 1em; break-inside: avoid; }
.slip h2 { font-size: 1.1em; margin: 0 0 .5em; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: .2em 1em; margin: 0 0 .5em; }
dt { color: #555; } dd { margin: 0; } .v { font: 1.1em ui-monospace, monospace; }
p { margin: 0; color: #333; font-size: .9em; }
</style></head><body>
<h1>${esc(title)}</h1>
${slips}
</body></html>
`;
  save(name, 'text/html', html);
}
