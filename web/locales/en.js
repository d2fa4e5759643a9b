// English dictionary: the parts in web/locales/en/, one per area of the
// interface, merged. Keys are "area.name"; {x} is filled by t(key, { x }).
// A value is a string or, for a sentence that counts, an object of plural
// forms chosen by params.count (see i18n.js). Every language holds the same
// keys and placeholders (tests/e2e/i18n.test.mjs checks).
import { merge } from './merge.js';
import shell from './en/shell.js';
import auth from './en/auth.js';
import home from './en/home.js';
import instances from './en/instances.js';
import files from './en/files.js';
import cluster from './en/cluster.js';
import users from './en/users.js';
import nodes from './en/nodes.js';
import pools from './en/pools.js';
import images from './en/images.js';
import jobs from './en/jobs.js';
import jobMembers from './en/job-members.js';
import quotas from './en/quotas.js';
import errors from './en/errors.js';
import sweeps from './en/sweeps.js';
import templates from './en/templates.js';
import sweepTemplates from './en/sweep-templates.js';
import classes from './en/classes.js';
import classSessions from './en/class-sessions.js';
import classAssignments from './en/class-assignments.js';
import classTeach from './en/class-teach.js';
import usage from './en/usage.js';
import audit from './en/audit.js';
import notif from './en/notifications.js';

export default merge(shell, errors, auth, home, instances, jobs, jobMembers, files, cluster, users, nodes, pools, images, quotas, sweeps, templates, sweepTemplates, classes, classSessions, classAssignments, classTeach, usage, audit, notif);
