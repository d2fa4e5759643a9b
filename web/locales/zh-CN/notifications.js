// 简体中文 — 通知：铃铛、通知页、邮件设置。
export default {
  'notif.title': '通知',
};
