// 简体中文 — 管理 → 审计日志。
export default {
  'nav.audit': '审计日志',
};
