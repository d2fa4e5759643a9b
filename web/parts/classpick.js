// parts/classpick.js — the "Class" choice of the new-instance and new-job
// forms: shown only when the user is in classes that have an allocation;
// choosing one puts the work in the class's context (body field "class"),
// which runs in the class's pool (the pool choice then follows the class
// and is locked), within the student's limits.
import { api } from '../api.js';
import { t } from '../i18n.js';
import { h, field } from '../ui.js';

// classPicker({ poolSelect, onChange }) → { el, value(), load() }: el is
// hidden until load() finds classes; value() is the chosen class id or null.
// A class id in the page's query (?class=7) is chosen at load.
export function classPicker({ poolSelect, onChange, preset }) {
  const select = h('select', { name: 'class', 'data-field': 'class' }, h('option', { value: '' }, t('class.pick.none')));
  const el = field(t('class.pick.label'), select, t('class.pick.help'));
  el.hidden = true;
  let classes = [];
  const chosen = () => classes.find((c) => String(c.id) === select.value) || null;
  function apply() {
    const c = chosen();
    if (poolSelect) {
      if (c && c.pool) {
        if (![...poolSelect.options].some((o) => o.value === c.pool.name))
          poolSelect.append(h('option', { value: c.pool.name }, c.pool.name));
        poolSelect.value = c.pool.name;
      }
      poolSelect.disabled = !!c;
    }
    if (onChange) onChange(c);
  }
  select.addEventListener('change', apply);
  return {
    el,
    value: () => (select.value ? Number(select.value) : null),
    cls: chosen,
    async load() {
      try {
        const r = await api.get('/classes');
        classes = (r.items || []).filter((c) => c.state !== 'archived' && c.pool && c.my_role);
      } catch { classes = []; }
      if (!classes.length) return;
      select.replaceChildren(h('option', { value: '' }, t('class.pick.none')),
        ...classes.map((c) => h('option', { value: c.id, 'data-class': c.id },
          t('class.pick.option', { name: c.name, code: c.code || '', pool: c.pool.name }))));
      el.hidden = false;
      if (preset && classes.some((c) => String(c.id) === String(preset))) {
        select.value = String(preset);
        apply();
      }
    },
  };
}
