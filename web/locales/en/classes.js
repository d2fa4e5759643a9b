// English — classes (the class object, roster, limits, invites).
export default {
  'nav.classes': 'Classes',
  'class.title': 'Class',
  'class.roster.title': 'Roster',
  'class.join.title': 'Join a class',
  'class.tab.overview': 'Overview',
  'class.tab.roster': 'Roster',
};
