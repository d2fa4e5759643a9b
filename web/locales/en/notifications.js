// English — notifications: the bell, the Notifications page, mail settings.
export default {
  'notif.title': 'Notifications',
};
