// Simplified Chinese — teacher reach, notices, the class dashboard, end of term.
export default {
  'class.dashboard.title': '班级仪表板',
  'class.tab.dashboard': '仪表板',
};
