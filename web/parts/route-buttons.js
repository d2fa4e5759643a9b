// parts/route-buttons.js — "Open Jupyter / TensorBoard / <port>" and
// "Terminal" for an instance, for any page that shows one:
//
//   import { routeButtons } from '../parts/route-buttons.js';
//   cell.append(routeButtons(instance));   // instance: {id, state}
//
// Apps open on their own origin in a new tab: the app's address itself.  Not
// signed in there yet, the app's origin sets a sign-in state cookie and sends
// the tab to #/login?open=..., which mints a ticket bound to that state
// (POST /api/v1/routes/{id}/open) and follows it to the handshake.
import { api } from '../api.js';
import { t, tMaybe } from '../i18n.js';
import { h } from '../ui.js';

function label(portName) {
  return tMaybe(`routes.open.${portName}`) || t('routes.open.other', { name: portName });
}

export function routeButtons(instance) {
  const box = h('span', { class: 'route-buttons', 'data-route-buttons': String(instance.id) });
  if (instance.state !== 'running') return box;
  box.append(h('a', { class: 'btn btn-small', href: `#/terminal?instance=${instance.id}`, 'data-action': 'terminal' }, t('routes.terminal')));
  api.get('/routes', { query: { instance_id: instance.id } }).then((res) => {
    for (const r of res.items || []) {
      box.prepend(h('a', {
        class: 'btn btn-small', href: r.url, target: '_blank', rel: 'noopener',
        'data-action': `open-${r.port_name}`, 'data-route': r.id,
      }, label(r.port_name)));
    }
  }).catch(() => { /* the buttons are a convenience; the page shows errors */ });
  return box;
}

// "TensorBoard" for a folder of the home (path relative to it, e.g.
// "runs/exp1"): starts a TensorBoard instance on it, then takes the user to
// the instance, whose "Open TensorBoard" button appears once it runs.
//   cell.append(tensorboardButton('runs/exp1', ctx, (e) => msg.error(e)));
// The button is held in a variable: after an await the click event's
// currentTarget is null, and touching it threw before the error was shown.
export function tensorboardButton(path, ctx, onError) {
  const btn = h('button', {
    type: 'button', class: 'btn btn-small', 'data-action': 'tensorboard',
    onclick: async () => {
      btn.disabled = true;
      try {
        const r = await api.post('/tensorboards', { path });
        ctx.go(`/instance?id=${r.instance_id}`);
      } catch (err) {
        btn.disabled = false;
        if (onError) onError(err);
      }
    },
  }, t('routes.tensorboard'));
  return btn;
}
