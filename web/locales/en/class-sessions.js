// English — lab sessions (reserved windows).
export default {
  'class.sessions.title': 'Lab sessions',
  'class.tab.sessions': 'Lab sessions',
};
