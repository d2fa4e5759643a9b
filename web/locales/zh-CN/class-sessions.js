// Simplified Chinese — lab sessions (reserved windows).
export default {
  'class.sessions.title': '实验课时段',
  'class.tab.sessions': '实验课时段',
};
