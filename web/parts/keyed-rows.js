// parts/keyed-rows.js — the rows of a polled table (or the cards of a grid)
// kept in step with the list the server sent, by key: a new item gets a new
// row, a known one is updated in place, a gone one is removed. Elements are
// moved only when the order changed, so a refresh does not close a menu
// that is open in a row, nor lose focus.
//
//   const rows = keyedRows(tbody, {
//     key: (n) => n.id,                  // default
//     make: (n) => ({ el: tr, ... }),    // a row: any object; el its element
//     update: (row, n) => { ... },       // redraw what changed
//     nodes: (row) => [row.el],          // default; e.g. [row.tr, row.detail]
//     gone: (row) => { ... },            // after a row left (optional)
//     empty: () => emptyRow(...),        // shown when the list is empty
//   });
//   rows.sync(items);
//   rows.get(id)                         // the row of an item, or undefined
export function keyedRows(container, { key = (item) => item.id, make, update = () => {}, nodes = (row) => [row.el], gone = () => {}, empty }) {
  const rows = new Map();

  function sync(items) {
    const seen = new Set();
    for (const item of items) {
      const k = key(item);
      seen.add(k);
      const row = rows.get(k);
      if (row) update(row, item);
      else rows.set(k, make(item));
    }
    for (const [k, row] of rows) {
      if (!seen.has(k)) {
        for (const el of nodes(row)) el.remove();
        rows.delete(k);
        gone(row);
      }
    }
    if (!items.length && empty) { container.replaceChildren(empty()); return; }
    const want = items.flatMap((item) => nodes(rows.get(key(item))));
    const have = [...container.children];
    if (want.length !== have.length || want.some((el, i) => el !== have[i])) container.replaceChildren(...want);
  }

  return {
    sync,
    get: (k) => rows.get(k),
    clear() { rows.clear(); },
  };
}
