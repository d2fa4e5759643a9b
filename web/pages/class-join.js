// pages/class-join.js — joining a class by its invite link (#/join?code=...)
// or a code typed in: one click (a change is never made by opening a link
// alone) makes the signed-in user a student of the class, then opens it.
import { api } from '../api.js';
import { t } from '../i18n.js';
import { h, field, messageBox, busy, toast } from '../ui.js';

export function render(main, ctx) {
  const code = new URLSearchParams(location.hash.split('?')[1] || '').get('code') || '';
  const msg = messageBox();
  const input = h('input', { type: 'text', name: 'code', value: code, autocomplete: 'off', spellcheck: 'false', class: 'mono', required: true });
  const form = h('form', { class: 'form', 'data-form': 'join', novalidate: true },
    field(t('join.code'), input, t('join.codeHelp')),
    msg.el,
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'btn btn-primary', 'data-action': 'join-class' }, t('join.join'))));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    msg.clear();
    if (!input.value.trim()) { input.focus(); return; }
    busy(form, async () => {
      try {
        const r = await api.post('/classes/join', { code: input.value.trim() });
        toast(r.joined ? t('join.joined', { name: r.class.name }) : t('join.already', { name: r.class.name }));
        ctx.go(`/class?id=${r.class.id}`);
      } catch (err) { msg.error(err); }
    });
  });
  main.append(h('section', { class: 'page', 'data-page': 'class-join' },
    h('div', { class: 'page-head' },
      h('h1', null, t('class.join.title')),
      h('p', { class: 'muted' }, code ? t('join.introLink', { user: ctx.user?.username || '' }) : t('join.intro'))),
    h('div', { class: 'card join-card' }, form)));
}
