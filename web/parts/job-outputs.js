// parts/job-outputs.js — a job's "Outputs" card for its page: what its
// folder holds (the file area job:{id}, read-only), each file with a
// download link, folders to open, and the whole folder as one archive.
// Changing the files is done in Files (the folder is in the owner's home).
//
//   import { jobOutputs } from '../parts/job-outputs.js';
//   const outputs = jobOutputs(job.id);   // { el, refresh() }
//   page.append(outputs.el);
//   outputs.refresh();                    // again when the job has ended
import { api } from '../api.js';
import { t, formatBytes, formatDate } from '../i18n.js';
import { h, icon, messageBox } from '../ui.js';

const LIMIT = 200;
const enc = (p) => p.split('/').filter(Boolean).map(encodeURIComponent).join('/');

export function jobOutputs(jobId) {
  const area = `job:${jobId}`;
  const base = `/api/v1/files/${encodeURIComponent(area)}`;
  const msg = messageBox();
  const crumbs = h('p', { class: 'muted', 'data-outputs-path': '' });
  const tbody = h('tbody');
  const more = h('p', { class: 'muted', hidden: true, 'data-outputs-more': '' });
  const archive = h('a', { class: 'btn btn-small', href: `${base}/?download=1`, download: `job-${jobId}.tar`, 'data-action': 'download-outputs' },
    t('job.outputs.archive'));
  let path = '';

  async function refresh() {
    try {
      const r = await api.get(`/files/${encodeURIComponent(area)}/${enc(path)}`, { query: { limit: LIMIT, hidden: 0 } });
      const items = r.items || [];
      crumbs.replaceChildren(path
        ? h('button', { type: 'button', class: 'link', 'data-action': 'outputs-up', onclick: () => open(path.split('/').slice(0, -1).join('/')) }, t('job.outputs.up'))
        : '', path ? ` ${path}/` : '');
      tbody.replaceChildren(...(items.length ? items.map(row)
        : [h('tr', { class: 'empty' }, h('td', { colspan: 4 }, t('job.outputs.empty')))]));
      more.hidden = !r.next_cursor;
      more.textContent = t('job.outputs.more', { n: LIMIT });
      archive.href = `${base}/${enc(path)}?download=1`;
      msg.clear();
    } catch (err) {
      tbody.replaceChildren(h('tr', { class: 'empty' }, h('td', { colspan: 4 }, t('job.outputs.none'))));
      if (err.status !== 404) msg.error(err);
    }
  }

  function open(p) { path = p; refresh(); }

  function row(item) {
    const p = path ? `${path}/${item.name}` : item.name;
    const url = `${base}/${enc(p)}`;
    return h('tr', { 'data-output': item.name, 'data-type': item.type },
      h('td', null, item.type === 'dir'
        ? h('button', { type: 'button', class: 'link', 'data-open': item.name, onclick: () => open(p) }, icon('layers', 16), ' ', item.name)
        : h('span', { class: 'mono' }, item.name)),
      h('td', null, item.type === 'dir' ? '—' : formatBytes(item.size)),
      h('td', { class: 'nowrap muted' }, formatDate(item.mtime)),
      h('td', { class: 'actions-cell' },
        h('a', { class: 'btn btn-small', href: `${url}?download=1`, download: item.type === 'dir' ? `${item.name}.tar` : item.name, 'data-download': item.name }, t('files.download'))));
  }

  const el = h('section', { class: 'card', 'data-job-outputs': jobId },
    h('div', { class: 'page-head-row' }, h('h2', null, t('job.outputs.title')),
      h('div', { class: 'toolbar' },
        h('button', { type: 'button', class: 'btn btn-small', 'data-action': 'reload-outputs', onclick: () => refresh() }, t('job.outputs.reload')),
        archive)),
    h('p', { class: 'muted' }, t('job.outputs.intro')),
    msg.el, crumbs,
    h('div', { class: 'table-wrap' },
      h('table', { class: 'table', 'data-table': 'outputs' },
        h('thead', null, h('tr', null,
          h('th', { scope: 'col' }, t('files.name')),
          h('th', { scope: 'col' }, t('files.size')),
          h('th', { scope: 'col' }, t('job.outputs.modified')),
          h('th', { scope: 'col' }, h('span', { class: 'visually-hidden' }, t('files.download'))))),
        tbody)),
    more);
  return { el, refresh };
}
