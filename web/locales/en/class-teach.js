// English — teacher reach, notices, the class dashboard, end of term.
export default {
  'class.dashboard.title': 'Class dashboard',
  'class.tab.dashboard': 'Dashboard',
};
