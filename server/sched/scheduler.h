/* scheduler.h — the scheduler: exactly one replica (the leader, db/leader.h)
 * periodically turns queued allocation requests into allocations, with the
 * decisions of place.c, in one transaction per pass.
 *
 * Other modules create requests (alloc_requests rows, state 'queued') and
 * release them (gc_release_request() in SQL); they only publish
 * EV_ALLOC_CHANGED (or call sched_kick()) to have a pass soon, on whichever
 * replica leads.  A pass that allocated publishes EV_ALLOC_GRANTED.
 */
#ifndef GPUCLOUD_SCHEDULER_H
#define GPUCLOUD_SCHEDULER_H

/* Registers the pass on the cron (cfg.sched_interval_ms) and its wake-ups;
 * cron_init() and leader_init() first.  Returns 0 or -1. */
int sched_init(void);

/* A pass soon (a request was queued or released): publishes
 * EV_ALLOC_CHANGED, which reaches the leader from any replica. */
void sched_kick(void);

/* Forgets the pass under way (leader_shutdown() gives the connection back). */
void sched_shutdown(void);

#endif
