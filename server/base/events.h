/* events.h — typed wake-ups between modules.
 *
 * A module publishes a kind ("allocations changed"); whoever cares
 * subscribed to it at start-up.  Neither names the other, so the scheduler
 * and the workload driver no longer call each other, and a kind that only
 * means something on the scheduler leader can be carried to it from
 * another replica by a bridge (db/leader.c plugs one in with PostgreSQL
 * NOTIFY) without the publisher knowing.
 *
 * A wake-up carries no data: it says "look again soon", and the subscriber
 * reads the database.  Delivery is synchronous, in subscription order, on
 * the event loop's thread; a subscriber must not block and should only
 * arm work (e.g. cron_soon()).
 */
#ifndef GPUCLOUD_EVENTS_H
#define GPUCLOUD_EVENTS_H

enum events_kind {
	EV_ALLOC_CHANGED,    /* a request was queued or released: a scheduler pass soon */
	EV_ALLOC_GRANTED,    /* the scheduler allocated something: a driver pass soon */
	EV_WORKLOAD_CHANGED, /* a workload was created or its desired state changed */
	EV_JOB_LOG,          /* a job's log grew here: followers read now (the bridge
	                      * carries it from the leader to every replica) */
	EV__COUNT
};

typedef void (*events_cb)(enum events_kind kind, void *arg);

/* Calls cb(kind, arg) on every later publish of kind.  Returns 0, or -1
 * when the table is full (a bug: it holds a fixed few). */
int events_subscribe(enum events_kind kind, events_cb cb, void *arg);

/* Wakes the subscribers of kind, and hands it to the bridge (when one is
 * set) so that other replicas hear of it too. */
void events_publish(enum events_kind kind);

/* Wakes this process's subscribers only: what a bridge calls with a
 * wake-up that came from another replica. */
void events_deliver(enum events_kind kind);

/* The bridge: called by events_publish() after local delivery.  NULL
 * removes it.  One at a time. */
typedef void (*events_bridge_fn)(enum events_kind kind, void *arg);
void events_set_bridge(events_bridge_fn fn, void *arg);

/* The kind's stable name ("alloc_changed"), or NULL; and back (-1 when
 * unknown).  Bridges send names, not numbers. */
const char *events_name(enum events_kind kind);
int events_parse(const char *name);

/* Forgets every subscriber and the bridge (shutdown, tests). */
void events_reset(void);

#endif
