// English — Administration → Audit log.
export default {
  'nav.audit': 'Audit log',
};
