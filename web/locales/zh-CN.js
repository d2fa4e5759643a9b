// 简体中文 (Simplified Chinese) dictionary: the parts in web/locales/zh-CN/, one per area of the
// interface, merged. Keys are "area.name"; {x} is filled by t(key, { x }).
// A value is a string or, for a sentence that counts, an object of plural
// forms chosen by params.count (see i18n.js). Every language holds the same
// keys and placeholders (tests/e2e/i18n.test.mjs checks).
import { merge } from './merge.js';
import shell from './zh-CN/shell.js';
import auth from './zh-CN/auth.js';
import home from './zh-CN/home.js';
import instances from './zh-CN/instances.js';
import files from './zh-CN/files.js';
import cluster from './zh-CN/cluster.js';
import users from './zh-CN/users.js';
import nodes from './zh-CN/nodes.js';
import pools from './zh-CN/pools.js';
import images from './zh-CN/images.js';
import jobs from './zh-CN/jobs.js';
import jobMembers from './zh-CN/job-members.js';
import quotas from './zh-CN/quotas.js';
import errors from './zh-CN/errors.js';
import sweeps from './zh-CN/sweeps.js';
import templates from './zh-CN/templates.js';
import sweepTemplates from './zh-CN/sweep-templates.js';
import classes from './zh-CN/classes.js';
import classSessions from './zh-CN/class-sessions.js';
import classAssignments from './zh-CN/class-assignments.js';
import classTeach from './zh-CN/class-teach.js';
import usage from './zh-CN/usage.js';
import audit from './zh-CN/audit.js';
import notif from './zh-CN/notifications.js';

export default merge(shell, errors, auth, home, instances, jobs, jobMembers, files, cluster, users, nodes, pools, images, quotas, sweeps, templates, sweepTemplates, classes, classSessions, classAssignments, classTeach, usage, audit, notif);
