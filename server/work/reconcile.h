/* reconcile.h — making the database and the engines agree.
 *
 * On the scheduler leader, at start-up and every cfg.reconcile_interval_ms,
 * every node's containers labelled gpucloud.cluster=<our cluster id> are
 * listed and compared with the instance records: a container without a
 * live record (no row, deleted, or recorded on another node) is removed; a
 * running record whose container vanished becomes lost, one whose
 * container exited becomes stopped (exit 0) or failed (with the code), and
 * its allocation is released once (gc_release_request is idempotent).
 * Containers of other clusters sharing an engine are never touched.
 */
#ifndef GPUCLOUD_RECONCILE_H
#define GPUCLOUD_RECONCILE_H

/* Registers the round on the cron (cfg.reconcile_interval_ms, leader only;
 * cron_init() first).  Returns 0 or -1. */
int reconcile_init(void);

/* One round over every node (does nothing while a round is under way). */
void reconcile_run(void);

/* 1 while the last listing of node_id failed (engine unreachable). */
int reconcile_node_unreachable(long long node_id);

/* Pure: the exit code in a container list's Status ("Exited (137) 3
 * seconds ago" → 137), or -1. */
int reconcile_exit_code(const char *status);

#endif
