/* scheduler.h — the scheduler: exactly one replica (the holder of a PostgreSQL
 * advisory lock) periodically turns queued allocation requests into
 * allocations, with the decisions of place.c, in one transaction per pass.
 *
 * Other modules create requests (alloc_requests rows, state 'queued') and
 * release them (gc_release_request() in SQL); they only call sched_kick()
 * to have a pass soon.  Every other replica keeps trying the lock and takes
 * over within a pass period when the holder dies (its session ends, and
 * with it the lock).
 */
#ifndef GPUCLOUD_SCHEDULER_H
#define GPUCLOUD_SCHEDULER_H

#include <event2/event.h>

/* Starts the pass timer (cfg.sched_interval_ms).  Returns 0 or -1. */
int sched_init(struct event_base *base);

/* A pass soon (a request was queued or released). */
void sched_kick(void);

/* 1 while this replica holds the scheduler lock. */
int sched_is_leader(void);

/* Stops the timer and gives back the pinned connection (and the lock). */
void sched_shutdown(void);

#endif
