/* leader.h — leadership among the replicas: exactly one gpucloudd sharing
 * a database runs the leader's passes (scheduler, workload driver,
 * reconcile, reclaim).  The leader is the replica whose pinned pool
 * connection holds a PostgreSQL session advisory lock; it stays leader as
 * long as that session lives, and every other replica keeps trying the
 * lock (every cfg.sched_interval_ms, and on a local EV_ALLOC_CHANGED) and
 * takes over within that period when the holder dies.
 *
 * Also the way to the leader: wake-ups published on a replica that is not
 * the leader are sent to the leader with NOTIFY on channel gc_wake and
 * delivered there (events_deliver()).  A lost NOTIFY costs latency only:
 * the leader's passes are periodic.
 */
#ifndef GPUCLOUD_LEADER_H
#define GPUCLOUD_LEADER_H

#include <event2/event.h>

#include "db/db.h"

/* The advisory-lock keys, in one place (pg_try_advisory_lock(bigint)). */
#define LEADER_LOCK_SCHED "1735553635" /* "gpuc" + 's' */

/* Registers the lock attempts on the cron (cron_init() first), the wake
 * bridge and its listener on url.  Returns 0 or -1. */
int leader_init(struct event_base *base, const char *url);

/* 1 while this replica holds the lock. */
int leader_is(void);

/* cb(1, arg) when this replica became the leader, cb(0, arg) when it lost
 * the lock.  Called on the loop; at most 8 watchers.  Returns 0 or -1. */
typedef void (*leader_cb)(int is_leader, void *arg);
int leader_watch(leader_cb cb, void *arg);

/* The connection whose session holds the lock, NULL unless leader_is().
 * Borrowed: its one user (the scheduler's pass) runs statements on it one
 * at a time, so that a pass never commits after the lock was lost, and
 * calls leader_lost() when it breaks. */
struct db_conn *leader_conn(void);

/* The pinned connection broke (why: for the log): leadership ends with its
 * session; the watchers hear cb(0); the next attempt comes a period later. */
void leader_lost(const char *why);

/* Stops trying and listening; gives back the connection (the lock ends
 * with its session when the pool closes). */
void leader_shutdown(void);

#endif
