// English — the home page.
export default {
  'home.welcome': 'Welcome, {name}',
  'home.signedInAs': 'Signed in as',
  'home.quotas': 'Your limits',
  'home.quotasIntro': 'What you may use at once, per GPU pool and without GPUs, and where each limit comes from.',
  'home.gettingStarted': 'Getting started',
  'home.linkAccount': 'Change your password or create an API token',
  'home.linkUsers': 'Manage user accounts',
  'home.linkNodes': 'Register GPU nodes and see their health',
  'home.linkCluster': 'See free GPU capacity in every pool',
  'home.linkQuotas': 'Set quotas, idle policies and the TensorBoard image',
  'home.linkPools': 'Group GPUs into pools and choose how they are shared',
};
