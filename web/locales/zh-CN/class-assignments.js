// Simplified Chinese — assignments (release, collect, feedback).
export default {
  'class.assignments.title': '作业',
  'class.tab.assignments': '作业',
};
