// 简体中文 — 计费与用量：管理 → 用量，班级的用量页。
export default {
  'nav.usage': '用量',
  'usage.class.title': '班级用量',
};
