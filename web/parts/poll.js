// parts/poll.js — a list the page keeps fresh: fetch it now, then every ms
// while the page is shown, and at once when the browser tab becomes visible
// again. Stops by itself when `until` (the page's element) has left the
// document, so a page never has to clean up after itself.
//
//   const list = poll(() => api.get('/nodes'), 5000, {
//     until: main,
//     show: (reply) => ...,      // the newest reply, while the page is shown
//     fail: (err) => ...,        // a failed fetch, likewise
//     stopped: () => ...,        // once, when it stops (optional)
//   });
//   list.refresh();              // fetch now (after a change), dropping any
//                                // reply already on its way: it may predate it
//   list.stop();
//
// One fetch at a time: a tick while one is on its way is skipped.
export function poll(fetch, ms, { until, show = () => {}, fail = () => {}, stopped: onStop = () => {} }) {
  const gone = () => !until.isConnected;
  let seq = 0;
  let inflight = false;
  let stopped = false;

  async function load() {
    if (inflight || stopped) return;
    inflight = true;
    const mine = ++seq;
    try {
      const reply = await fetch();
      if (mine === seq && !gone()) show(reply);
    } catch (err) {
      if (mine === seq && !gone()) fail(err);
    } finally {
      if (mine === seq) inflight = false;
    }
  }

  function tick() {
    if (gone()) { stop(); return; }
    if (!document.hidden) load();
  }
  const onVisibility = () => { if (!document.hidden) tick(); };

  function stop() {
    if (stopped) return;
    stopped = true;
    clearInterval(timer);
    document.removeEventListener('visibilitychange', onVisibility);
    onStop();
  }

  const timer = setInterval(tick, ms);
  document.addEventListener('visibilitychange', onVisibility);
  load();

  return {
    refresh() { seq++; inflight = false; load(); },
    stop,
  };
}
