// English — assignments (release, collect, feedback).
export default {
  'class.assignments.title': 'Assignments',
  'class.tab.assignments': 'Assignments',
};
