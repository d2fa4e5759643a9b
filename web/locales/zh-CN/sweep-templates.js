// 简体中文 — a sweep from a job template (pages/sweep-new.js) and the submit
// form's distributed-job members and link to it (pages/job-new.js).
export default {
  'sweepTmpl.choices': '可选值：{choices}',
  'sweepTmpl.badValue': '{value}：{reason}',
  'sweepTmpl.link': '对这些超参数进行扫描',
  'job.form.members': '成员数',
  'job.form.membersHelp': '分布式作业：运行这么多个容器（1 到 16 个），每个节点一个，同时启动。',
  'job.form.perMember': '每个成员。',
  'job.form.badMembers': '成员数必须是 1 到 16 之间的整数。',
};
