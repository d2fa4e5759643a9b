// pages/admin-images.js — Administration → Images: the catalog of images
// users may run (e.g. nvcr.io/nvidia/pytorch:24.08-py3), each with its
// framework, CUDA version (read from the image after a pull unless set
// here), visibility, default command and app ports; and where each is
// pulled. "Pull" sends it to chosen nodes or all of them ("pre-pull before
// class"); every node shows its state with a progress bar while pulling and
// the registry's message when it failed. The list is polled every second
// while something is pulling, else every few seconds.
//
// A new entry's reference is checked against its registry (unless the admin
// unticks the check: then it stays hidden from users until a pull succeeds,
// shown here as "Unverified"). "Browse registry" lists a registry's
// repositories and their tags, newest first, each added in one click; a
// catalog image whose repository has a newer tag of the same series
// ("24.09-py3" after "24.08-py3") says so, with a button that adds it. The
// Jupyter preset fills framework "jupyter" and the app port jupyter:8888:
// such an entry opens signed in with the image's own command.
import { api } from '../api.js';
import { t } from '../i18n.js';
import { h, field, messageBox, busy, confirmDialog, openDialog, emptyRow, toast, icon, toastError } from '../ui.js';

const COLS = 5;
const FAST_MS = 1000;
const SLOW_MS = 5000;
const ROLES = ['student', 'researcher', 'teacher', 'admin'];
const REF_RE = /^[a-z0-9][A-Za-z0-9._/:@-]*$/;
const CUDA_RE = /^\d{1,2}(\.\d{1,2}){0,2}$/;

// One node's copy: state badge, progress bar while pulling, error if failed.
export function nodeStatus(n) {
  const cls = { present: 'badge-on', failed: 'badge-off', pulling: 'badge-warn' }[n.state] || '';
  const el = h('div', { class: 'image-node', 'data-node': n.node, 'data-state': n.state, 'data-progress': n.progress },
    h('span', { class: 'mono' }, n.node), ' ',
    h('span', { class: `badge ${cls}`.trim() }, t(`images.state.${n.state}`) || n.state));
  if (n.state === 'pulling') {
    el.append(' ', h('progress', { max: 100, value: n.progress, 'aria-label': t('images.progressFor', { node: n.node }) }),
      ' ', h('span', { class: 'muted' }, `${n.progress}%`));
  }
  if (n.state === 'failed' && n.error) el.append(h('div', { class: 'cell-sub msg-error', 'data-error': '' }, n.error));
  return el;
}

export function render(main) {
  const listMsg = messageBox();
  const tbody = h('tbody', null, emptyRow(COLS, t('common.loading')));
  let seq = 0;
  let timer = null;
  let nodes = [];
  let registries = [];

  async function load() {
    const mine = ++seq;
    clearTimeout(timer);
    let pulling = false;
    try {
      const reply = await api.get('/images');
      if (mine !== seq || !main.isConnected) return;
      const items = (reply?.items || []).filter((i) => !i.personal);
      pulling = items.some((i) => i.nodes.some((n) => n.state === 'pulling'));
      show(items);
      listMsg.clear();
      checkNewer(items);
    } catch (err) {
      if (mine !== seq || !main.isConnected) return;
      listMsg.error(err);
    }
    if (main.isConnected) timer = setTimeout(load, pulling ? FAST_MS : SLOW_MS);
  }

  async function loadRefs() {
    try { nodes = (await api.get('/nodes'))?.items || []; } catch { nodes = []; }
    try { registries = (await api.get('/registries'))?.items || []; } catch { registries = []; }
  }

  // newer tags, asked once per image per visit: id → { tag, reference } | null
  const newer = new Map();
  let lastItems = [];
  async function checkNewer(items) {
    for (const i of items) {
      if (newer.has(i.id)) continue;
      newer.set(i.id, null);
      try {
        const r = await api.get(`/images/${i.id}/newer`);
        const first = (r?.newer || []).find((x) => !x.in_catalog);
        if (first && main.isConnected) {
          newer.set(i.id, first);
          rows.delete(i.id);
          show(lastItems);
        }
      } catch { /* the registry cannot say: no badge */ }
    }
  }

  async function addNewer(img, tag) {
    const payload = {
      reference: tag.reference, framework: img.framework, description: img.description,
      display_name: img.display_name && img.display_name !== img.reference
        ? img.display_name.replace(img.reference.split(':').pop(), tag.tag) : tag.reference,
      visibility: img.visibility, roles: img.roles, app_ports: img.app_ports,
    };
    if (img.registry_id) payload.registry_id = img.registry_id;
    if (img.default_cmd) payload.default_cmd = img.default_cmd;
    try {
      const saved = await api.post('/images', payload);
      toast(t('images.created', { name: saved?.display_name || saved?.reference || '' }));
      newer.delete(img.id);
      rows.delete(img.id);
      changed();
    } catch (err) {
      toastError(err);
    }
  }

  const rows = new Map(); // id → { tr, key }
  function show(items) {
    lastItems = items;
    if (!items.length) {
      rows.clear();
      tbody.replaceChildren(h('tr', { class: 'empty', 'data-empty': 'images' }, h('td', { colspan: COLS }, t('images.none'))));
      return;
    }
    const want = items.map((i) => {
      const key = JSON.stringify(i) + JSON.stringify(newer.get(i.id) || null);
      const have = rows.get(i.id);
      if (have && have.key === key) return have.tr;
      const tr = row(i);
      rows.set(i.id, { tr, key });
      return tr;
    });
    tbody.replaceChildren(...want);
  }

  function row(i) {
    const nw = newer.get(i.id);
    return h('tr', { 'data-image': i.reference, 'data-id': i.id },
      h('td', null, h('strong', null, i.display_name || i.reference),
        i.verified === false ? [' ', h('span', { class: 'badge badge-warn', 'data-field': 'unverified', title: t('images.unverifiedHelp') }, t('images.unverified'))] : null,
        h('div', { class: 'cell-sub mono' }, i.reference),
        i.verified === false ? h('div', { class: 'cell-sub muted' }, t('images.unverifiedHelp')) : null,
        i.description ? h('div', { class: 'cell-sub muted' }, i.description) : null,
        nw ? h('div', { class: 'cell-sub', 'data-newer': nw.tag },
          h('span', { class: 'badge badge-on' }, t('images.newerTag', { tag: nw.tag })), ' ',
          h('button', { type: 'button', class: 'btn btn-small', 'data-action': 'add-newer', onclick: (e) => { e.currentTarget.disabled = true; addNewer(i, nw); } },
            icon('plus', 14), t('images.addTag', { tag: nw.tag }))) : null),
      h('td', null, i.framework || '—',
        h('div', { class: 'cell-sub', 'data-field': 'cuda' },
          i.cuda_version ? t('images.cudaCell', { v: i.cuda_version }) : h('span', { class: 'muted' }, t('images.cudaUnknown')),
          i.cuda_source === 'image' ? h('span', { class: 'muted' }, ` (${t('images.fromImage')})`) : null)),
      h('td', { 'data-field': 'visibility' },
        i.visibility === 'everyone' ? t('images.vis.everyone')
          : t('images.vis.restrictedTo', { roles: i.roles.length ? i.roles.map((r) => t(`role.${r}`)).join(', ') : '—' })),
      h('td', { 'data-field': 'nodes' }, i.nodes.length ? i.nodes.map(nodeStatus) : h('span', { class: 'muted' }, t('images.noNodes'))),
      h('td', { class: 'cell-actions' },
        h('button', { type: 'button', class: 'btn btn-small btn-primary', 'data-action': 'pull', onclick: () => pullDialog(i) }, t('images.pull')),
        h('button', { type: 'button', class: 'btn btn-small', 'data-action': 'edit', onclick: () => dialog(i) }, t('images.edit')),
        h('button', { type: 'button', class: 'btn btn-small btn-danger', 'data-action': 'delete', onclick: () => remove(i) }, t('images.delete'))));
  }

  function changed() {
    seq++;
    load();
  }

  // ---- create / edit ----

  function dialog(img) {
    return openDialog({
      title: img ? t('images.editTitle', { name: img.display_name || img.reference }) : t('images.createTitle'),
      wide: true,
      build: (close) => {
        const msg = messageBox();
        const ref = h('input', { id: 'image-reference', type: 'text', required: true, autocomplete: 'off', autocapitalize: 'none', spellcheck: 'false', maxlength: 255, placeholder: 'nvcr.io/nvidia/pytorch:24.08-py3', value: img ? img.reference : '', disabled: !!img });
        const reg = h('select', { id: 'image-registry', disabled: !!img },
          h('option', { value: '' }, t('images.registryAuto')),
          ...registries.map((r) => h('option', { value: r.id, selected: img && img.registry_id === r.id }, `${r.name} (${r.server})`)));
        const name = h('input', { id: 'image-name', type: 'text', maxlength: 200, value: img ? img.display_name : '' });
        const fw = h('input', { id: 'image-framework', type: 'text', maxlength: 64, placeholder: 'pytorch', value: img ? img.framework : '' });
        const cuda = h('input', { id: 'image-cuda', type: 'text', maxlength: 16, placeholder: '12.4', class: 'input-narrow', value: img && img.cuda_source === 'admin' ? img.cuda_version : '' });
        const desc = h('input', { id: 'image-description', type: 'text', maxlength: 4000, value: img ? img.description : '' });
        const cmd = h('input', { id: 'image-cmd', type: 'text', spellcheck: 'false', class: 'mono', placeholder: '["jupyter","lab","--ip=0.0.0.0"]', value: img && img.default_cmd ? JSON.stringify(img.default_cmd) : '' });
        const ports = h('input', { id: 'image-ports', type: 'text', spellcheck: 'false', class: 'mono', placeholder: 'jupyter:8888, tensorboard:6006', value: img ? img.app_ports.map((p) => `${p.name}:${p.port}`).join(', ') : '' });
        const everyone = h('input', { id: 'image-vis-everyone', type: 'checkbox', checked: !img || img.visibility === 'everyone' });
        const roleBoxes = ROLES.map((r) => h('input', { type: 'checkbox', id: `image-role-${r}`, value: r, checked: !!(img && img.roles.includes(r)) }));
        const rolesSet = h('fieldset', { class: 'field checks', 'data-roles': '' },
          h('legend', null, t('images.visibleRoles')),
          roleBoxes.map((b) => h('label', { class: 'check', for: b.id }, b, ' ', t(`role.${b.value}`))),
          h('p', { class: 'field-help' }, t('images.classesLater')));
        const verify = h('input', { id: 'image-verify', type: 'checkbox', checked: true });
        const preset = h('button', { type: 'button', class: 'btn btn-small', 'data-action': 'preset-jupyter',
          onclick: () => {
            fw.value = 'jupyter';
            const have = ports.value.split(',').map((x) => x.trim()).filter(Boolean);
            if (!have.some((x) => x.startsWith('jupyter:'))) ports.value = ['jupyter:8888', ...have].join(', ');
            if (!name.value.trim()) name.value = 'Jupyter';
          } }, t('images.presetJupyter'));
        const syncVis = () => { rolesSet.hidden = everyone.checked; };
        everyone.addEventListener('change', syncVis);
        syncVis();
        const form = h('form', { class: 'form', 'data-form': img ? 'edit-image' : 'create-image', novalidate: true },
          img ? null : h('div', { class: 'field field-preset', 'data-presets': '' }, preset, h('p', { class: 'field-help' }, t('images.presetJupyterHelp'))),
          field(t('images.reference'), ref, img ? t('images.referenceFixed') : t('images.referenceHelp')),
          field(t('images.registry'), reg),
          img ? null : h('div', { class: 'field checks' }, h('label', { class: 'check', for: verify.id }, verify, ' ', t('images.verify')),
            h('p', { class: 'field-help' }, t('images.verifyHelp'))),
          h('div', { class: 'form-inline-wide' },
            field(t('images.displayName'), name),
            field(t('images.framework'), fw),
            field(t('images.cuda'), cuda, t('images.cudaHelp'))),
          field(t('images.description'), desc),
          field(t('images.defaultCmd'), cmd, t('images.defaultCmdHelp')),
          field(t('images.appPorts'), ports, t('images.appPortsHelp')),
          h('div', { class: 'field checks' }, h('label', { class: 'check', for: everyone.id }, everyone, ' ', t('images.vis.everyone'))),
          rolesSet,
          msg.el,
          h('div', { class: 'actions' },
            h('button', { type: 'button', class: 'btn', onclick: () => close() }, t('common.cancel')),
            h('button', { type: 'submit', class: 'btn btn-primary', 'data-action': 'save-image' }, img ? t('images.save') : t('images.create'))));
        form.addEventListener('submit', async (e) => {
          e.preventDefault();
          msg.clear();
          const payload = {
            display_name: name.value.trim(), framework: fw.value.trim(), description: desc.value.trim(),
            visibility: everyone.checked ? 'everyone' : 'restricted',
            roles: everyone.checked ? [] : roleBoxes.filter((b) => b.checked).map((b) => b.value),
          };
          if (!img) {
            payload.reference = ref.value.trim();
            if (!REF_RE.test(payload.reference)) { msg.error(t('images.referenceInvalid')); ref.focus(); return; }
            if (reg.value) payload.registry_id = Number(reg.value);
            if (!payload.display_name) delete payload.display_name;
            if (!verify.checked) payload.verify = false;
          }
          const c = cuda.value.trim();
          if (c && !CUDA_RE.test(c)) { msg.error(t('images.cudaInvalid')); cuda.focus(); return; }
          if (c || (img && img.cuda_source === 'admin')) payload.cuda_version = c;
          const cv = cmd.value.trim();
          if (cv) {
            let parsed = null;
            try { parsed = JSON.parse(cv); } catch { /* below */ }
            if (!Array.isArray(parsed) || !parsed.length || parsed.some((x) => typeof x !== 'string')) { msg.error(t('images.defaultCmdInvalid')); cmd.focus(); return; }
            payload.default_cmd = parsed;
          } else if (img && img.default_cmd) {
            payload.default_cmd = null;
          }
          const list = ports.value.split(',').map((s) => s.trim()).filter(Boolean);
          payload.app_ports = [];
          for (const p of list) {
            const m = /^([a-z][a-z0-9-]{0,31}):(\d{1,5})$/.exec(p);
            if (!m || Number(m[2]) < 1 || Number(m[2]) > 65535) { msg.error(t('images.appPortsInvalid', { port: p })); ports.focus(); return; }
            payload.app_ports.push({ name: m[1], port: Number(m[2]) });
          }
          await busy(form, async () => {
            try {
              const saved = img ? await api.patch(`/images/${img.id}`, payload) : await api.post('/images', payload);
              toast(t(img ? 'images.saved' : 'images.created', { name: saved?.display_name || saved?.reference || '' }));
              changed();
              close(saved);
            } catch (err) {
              msg.error(err);
            }
          });
        });
        return form;
      },
    });
  }

  // ---- pull ----

  function pullDialog(img) {
    return openDialog({
      title: t('images.pullTitle', { name: img.display_name || img.reference }),
      build: (close) => {
        const msg = messageBox();
        const boxes = nodes.map((n) => h('input', { type: 'checkbox', id: `pull-node-${n.id}`, value: n.id, checked: true, 'data-pull-node': n.name }));
        const form = h('form', { class: 'form', 'data-form': 'pull-image', novalidate: true },
          h('p', { class: 'muted' }, t('images.pullIntro')),
          nodes.length
            ? h('fieldset', { class: 'field checks' }, h('legend', null, t('images.pullNodes')),
              boxes.map((b, k) => h('label', { class: 'check', for: b.id }, b, ' ', h('span', { class: 'mono' }, nodes[k].name), ' ',
                h('span', { class: 'muted' }, t(`nodes.state.${nodes[k].state}`)))))
            : h('p', { class: 'muted' }, t('images.noNodes')),
          msg.el,
          h('div', { class: 'actions' },
            h('button', { type: 'button', class: 'btn', onclick: () => close() }, t('common.cancel')),
            h('button', { type: 'submit', class: 'btn btn-primary', 'data-action': 'start-pull', disabled: !nodes.length }, t('images.pullStart'))));
        form.addEventListener('submit', async (e) => {
          e.preventDefault();
          msg.clear();
          const chosen = boxes.filter((b) => b.checked).map((b) => Number(b.value));
          if (!chosen.length) { msg.error(t('images.pullNone')); return; }
          await busy(form, async () => {
            try {
              await api.post(`/images/${img.id}/pull`, chosen.length === nodes.length ? {} : { nodes: chosen });
              toast(t('images.pullStarted', { count: chosen.length }));
              changed();
              close(true);
            } catch (err) {
              msg.error(err);
            }
          });
        });
        return form;
      },
    });
  }

  // ---- browse a registry: repositories → tags → add ----

  function browseDialog() {
    return openDialog({
      title: t('images.browseTitle'),
      wide: true,
      build: (close) => {
        const msg = messageBox();
        const pick = h('select', { id: 'browse-registry' },
          h('option', { value: '' }, t('images.browsePick')),
          ...registries.map((r) => h('option', { value: r.id }, `${r.name} (${r.server})`)));
        const repoList = h('ul', { class: 'browse-list', 'data-list': 'repositories' });
        const tagList = h('div', { 'data-list': 'tags' });
        let regId = null;
        async function showRepos() {
          msg.clear();
          repoList.replaceChildren();
          tagList.replaceChildren();
          regId = pick.value ? Number(pick.value) : null;
          if (!regId) return;
          repoList.append(h('li', { class: 'muted' }, t('common.loading')));
          try {
            const r = await api.get(`/registries/${regId}/repositories`);
            const items = r?.items || [];
            repoList.replaceChildren(...(items.length ? items.map((name) => h('li', null,
              h('button', { type: 'button', class: 'btn btn-small btn-link mono', 'data-repository': name, onclick: () => showTags(name) }, name)))
              : [h('li', { class: 'muted' }, t('images.browseNoRepos'))]));
          } catch (err) {
            repoList.replaceChildren();
            msg.error(err);
          }
        }
        async function showTags(repo) {
          msg.clear();
          tagList.replaceChildren(h('p', { class: 'muted' }, t('common.loading')));
          try {
            const r = await api.get(`/registries/${regId}/tags/${repo}`);
            const items = r?.items || [];
            tagList.replaceChildren(h('h3', { class: 'mono' }, repo),
              items.length ? h('table', { class: 'table', 'data-table': 'tags' }, h('tbody', null, items.map((tg) => h('tr', { 'data-tag': tg.tag },
                h('td', { class: 'mono' }, tg.tag),
                h('td', { class: 'cell-sub mono muted' }, tg.reference),
                h('td', { class: 'cell-actions' }, tg.in_catalog
                  ? h('span', { class: 'badge badge-on', 'data-in-catalog': '' }, t('images.inCatalog'))
                  : h('button', { type: 'button', class: 'btn btn-small btn-primary', 'data-action': 'add-tag', onclick: (e) => addTag(e.currentTarget, repo, tg) },
                    icon('plus', 14), t('images.addThis'))))))) : h('p', { class: 'muted' }, t('images.browseNoTags')));
          } catch (err) {
            tagList.replaceChildren();
            msg.error(err);
          }
        }
        async function addTag(btn, repo, tg) {
          btn.disabled = true;
          msg.clear();
          try {
            const saved = await api.post('/images', { reference: tg.reference, registry_id: regId, display_name: `${repo.split('/').pop()} ${tg.tag}` });
            toast(t('images.created', { name: saved?.display_name || saved?.reference || '' }));
            btn.replaceWith(h('span', { class: 'badge badge-on', 'data-in-catalog': '' }, t('images.inCatalog')));
            changed();
          } catch (err) {
            btn.disabled = false;
            msg.error(err);
          }
        }
        pick.addEventListener('change', showRepos);
        return h('div', { class: 'form', 'data-form': 'browse-registry' },
          field(t('images.registry'), pick, registries.length ? t('images.browseHelp') : t('registries.none')),
          msg.el,
          h('div', { class: 'browse' }, h('div', null, h('h3', null, t('images.repositories')), repoList), tagList),
          h('div', { class: 'actions' }, h('button', { type: 'button', class: 'btn', onclick: () => close() }, t('common.close'))));
      },
    });
  }

  async function remove(img) {
    const ok = await confirmDialog({
      title: t('images.deleteTitle'),
      message: t('images.deleteConfirm', { name: img.display_name || img.reference }),
      confirmLabel: t('images.delete'), danger: true,
    });
    if (!ok) return;
    try {
      await api.del(`/images/${img.id}`);
      toast(t('images.deleted', { name: img.display_name || img.reference }));
      changed();
    } catch (err) {
      toastError(err);
    }
  }

  main.append(h('section', { class: 'page' },
    h('div', { class: 'page-head page-head-row' },
      h('div', { class: 'page-head-text' },
        h('h1', null, t('images.title')),
        h('p', { class: 'muted' }, t('images.intro'))),
      h('div', { class: 'toolbar' },
        h('a', { class: 'btn', href: '#/admin/registries', 'data-action': 'view-registries' }, t('images.viewRegistries')),
        h('button', { type: 'button', class: 'btn', 'data-action': 'browse-registry', onclick: async () => { await loadRefs(); browseDialog(); } }, t('images.browse')),
        h('button', { type: 'button', class: 'btn btn-primary', 'data-action': 'open-create-image', onclick: async () => { await loadRefs(); dialog(); } }, icon('plus', 16), t('images.create')))),
    h('div', { class: 'card card-flush' },
      listMsg.el,
      h('div', { class: 'table-wrap' }, h('table', { class: 'table', 'data-table': 'images' },
        h('thead', null, h('tr', null,
          h('th', { scope: 'col' }, t('images.image')),
          h('th', { scope: 'col' }, t('images.framework')),
          h('th', { scope: 'col' }, t('images.visibility')),
          h('th', { scope: 'col' }, t('images.onNodes')),
          h('th', { scope: 'col' }, h('span', { class: 'visually-hidden' }, t('common.actions'))))),
        tbody)))));

  loadRefs().then(load);
}
