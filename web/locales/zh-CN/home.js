// 简体中文 — the home page.
export default {
  'home.welcome': '欢迎，{name}',
  'home.signedInAs': '当前身份',
  'home.quotas': '我的限额',
  'home.quotasIntro': '您可同时使用的资源（按 GPU 池及不使用 GPU 的任务），以及每项限额的来源。',
  'home.gettingStarted': '快速开始',
  'home.linkAccount': '修改密码或创建 API 令牌',
  'home.linkUsers': '管理用户账户',
  'home.linkNodes': '注册 GPU 节点并查看其健康状况',
  'home.linkCluster': '查看各 GPU 池的空闲容量',
  'home.linkQuotas': '设置配额、空闲策略和 TensorBoard 镜像',
  'home.linkPools': '将 GPU 分组为 GPU 池并设置共享方式',
};
