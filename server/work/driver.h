/* driver.h — the leader's workload driver loop, written once for every
 * workload kind.
 *
 * A kind (instances today, with TensorBoards among them; jobs next)
 * registers a small table: the statement that reads its workloads whose
 * state and desired state disagree, and decide(), which starts at most one
 * engine operation for such a row.  The driver owns the rest of the loop:
 * one cron section per kind at the kind's period, brought forward by the
 * wake-ups EV_WORKLOAD_CHANGED and EV_ALLOC_GRANTED (a kick while a pass
 * is out gives one more pass right after it), passes on the leader only,
 * and the cluster identity every container name and label carries.
 *
 * Seam for the next kind: the engine steps of an operation (pull on the
 * allocated node, the user's network, create with the deterministic name
 * and reuse on a matching gpucloud.sig, start, inspect the published ports;
 * stop with a grace; remove) still live in instances.c next to the
 * instance's database writes.  Jobs move them here behind three more
 * callbacks of struct driver_kind — load (row → struct spec_input),
 * running (container id, ports) and ended (state, reason) — rather than
 * copying them.
 */
#ifndef GPUCLOUD_DRIVER_H
#define GPUCLOUD_DRIVER_H

#include <libpq-fe.h>

struct driver_kind {
	const char *name; /* logs and the cron section */
	int period_ms;    /* the pass period (e.g. cfg.instance_tick_ms) */
	int first_ms;     /* the first pass after start-up */
	/* the pass: rows whose state and desired state disagree (no
	 * parameters; ordered, bounded) */
	const char *pass_sql;
	/* one row of the pass, on the leader: start at most one operation */
	void (*decide)(const PGresult *res, int row);
};

/* Registers kind (a static table, borrowed for good) on the cron and the
 * wake-ups; cron_init() first.  Returns 0 or -1. */
int driver_register(const struct driver_kind *kind);

/* This database's cluster id (the gpucloud.cluster label of our
 * containers), "" until the first pass loaded it. */
const char *driver_cluster_id(void);

/* Forgets the kinds (their sections go with the cron). */
void driver_shutdown(void);

#endif
