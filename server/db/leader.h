/* leader.h — leadership among the replicas: exactly one gpucloudd sharing
 * a database runs the leader's passes (scheduler, workload driver,
 * reconcile, reclaim).  The leader is the replica whose pinned pool
 * connection holds a PostgreSQL session advisory lock.
 *
 * Every cfg.leader_heartbeat_ms the leader runs a statement on that session
 * and acts (leader_is()) only while its last answer is younger than
 * cfg.leader_takeover_ms less one heartbeat: the lease.  Every other replica
 * tries the lock as often (and on a local EV_ALLOC_CHANGED).  A dead
 * leader's socket closes and PostgreSQL ends its session at once, so the
 * next attempt wins; a frozen leader (SIGSTOP, a hung or vanished host)
 * keeps its session open, so an attempt that finds the holder's session
 * idle for cfg.leader_takeover_ms ends it (pg_terminate_backend: the
 * replicas share a database role), and the next attempt wins.  By then the
 * frozen leader's lease has run out: resumed, it does nothing as leader, and
 * learns of its lost session at its next heartbeat.
 *
 * Also the way between replicas: wake-ups for the leader's passes published
 * on another replica are sent to the leader with NOTIFY on channel gc_wake
 * and delivered there (events_deliver()); EV_JOB_LOG goes the other way,
 * from the leader to every replica (their log followers).  A lost NOTIFY
 * costs latency only: the passes and the followers are periodic too.
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
