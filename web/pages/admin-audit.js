// admin-audit.js — being built (issue 15).
export function render(main) {
  main.textContent = '';
}
