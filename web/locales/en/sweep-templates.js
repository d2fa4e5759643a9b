// English — a sweep from a job template (pages/sweep-new.js) and the submit
// form's distributed-job members and link to it (pages/job-new.js).
export default {
  'sweepTmpl.choices': 'one of {choices}',
  'sweepTmpl.badValue': '{value}: {reason}',
  'sweepTmpl.link': 'Sweep over these hyperparameters',
  'job.form.members': 'Members',
  'job.form.membersHelp': 'A distributed job: this many containers (1 to 16), one per node, started together.',
  'job.form.perMember': 'Per member.',
  'job.form.badMembers': 'Members must be a whole number from 1 to 16.',
};
