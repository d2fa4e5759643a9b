// Simplified Chinese — classes (the class object, roster, limits, invites).
export default {
  'nav.classes': '班级',
  'class.title': '班级',
  'class.roster.title': '花名册',
  'class.join.title': '加入班级',
  'class.tab.overview': '概览',
  'class.tab.roster': '花名册',
};
