// English — accounting: Administration → Usage, a class's usage tab.
export default {
  'nav.usage': 'Usage',
  'usage.class.title': 'Class usage',
};
