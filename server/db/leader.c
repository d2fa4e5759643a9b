/* leader.c — leadership and the way to the leader (see leader.h).
 *
 * Owns: the pinned pool connection and the advisory lock on it, the cron
 * section that tries the lock while this replica is not the leader, the
 * watchers told of a change, and the NOTIFY bridge of events.h (sender:
 * pg_notify on the pool, coalesced; receiver: a LISTEN connection of
 * notify.c).  Does not own: what the leader does (sched/, work/).
 */
#include "db/leader.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/config.h"
#include "base/cron.h"
#include "base/events.h"
#include "base/log.h"
#include "db/notify.h"

#define WAKE_CHANNEL "gc_wake"
#define MAX_WATCH    8

static struct cron_section *section;
static struct db_conn *held;
static int leader, trying, down;
static struct {
	leader_cb cb;
	void *arg;
} watch[MAX_WATCH];
static int nwatch;

/* the lease: leader_is() holds until lease_until (monotonic ms), renewed by
 * every answer on the lock session; beat_gen tells a stale answer */
static double lease_until, beat_sent;
static int beating;
static unsigned beat_gen;

static struct notify *listener;
static unsigned wake_pending; /* bits of events_kind waiting to be sent */
static int wake_sending;

static void tell(int is_leader)
{
	for (int i = 0; i < nwatch; i++)
		watch[i].cb(is_leader, watch[i].arg);
}

/* How long the leader acts on its last answer: the takeover time less one
 * heartbeat (and never less than one), so that it has stopped before
 * another replica may cut its session off. */
static double lease_ms(void)
{
	int ms = cfg.leader_takeover_ms - cfg.leader_heartbeat_ms;
	return ms > cfg.leader_heartbeat_ms ? ms : cfg.leader_heartbeat_ms;
}

int leader_is(void)
{
	return leader && clock_now_ms() < lease_until;
}

struct db_conn *leader_conn(void)
{
	return leader_is() ? held : NULL;
}

int leader_watch(leader_cb cb, void *arg)
{
	if (!cb || nwatch >= MAX_WATCH)
		return -1;
	watch[nwatch].cb = cb;
	watch[nwatch].arg = arg;
	nwatch++;
	return 0;
}

void leader_lost(const char *why)
{
	int was = leader;

	if (leader)
		log_msg(LOG_WARN, "leader", NULL, "lost the scheduler lock: %s", why);
	leader = 0;
	trying = 0;
	beating = 0;
	beat_gen++;
	if (held)
		db_release(held);
	held = NULL;
	cron_next(section, cfg.leader_heartbeat_ms);
	if (was)
		tell(0);
}

static void locked(PGresult *res, enum rc rc, void *arg)
{
	(void)arg;
	trying = 0;
	if (down)
		return;
	if (rc != RC_OK) {
		leader_lost(rc == RC_UNAVAILABLE ? "the database connection broke"
		                                 : "the lock query failed");
		return;
	}
	if (strcmp(db_val(res, 0, 0), "t") != 0) {
		/* another replica leads; when its session had been idle past the
		 * takeover time, it was just cut off: try again shortly */
		if (strcmp(db_val(res, 0, 1), "t") == 0) {
			log_msg(LOG_WARN, "leader", NULL,
			        "cut off the leader's lock session, silent for over %d ms",
			        cfg.leader_takeover_ms);
			cron_next(section, 100);
		}
		return;
	}
	log_msg(LOG_INFO, "leader", NULL, "this replica now runs the scheduler");
	leader = 1;
	lease_until = beat_sent + lease_ms();
	tell(1);
}

/* The lock attempt; when another session holds the lock and has been idle
 * (not running a statement) for leader_takeover_ms, its leader is frozen or
 * its host is gone (a dead process's socket closes, and PostgreSQL ends the
 * session at once): end that session, which frees the lock.  $1: the
 * takeover time, ms.  Columns: got, cut. */
#define LOCK_SQL                                                                                   \
	"SELECT l.got, CASE WHEN l.got THEN false ELSE coalesce((SELECT "                          \
	"bool_or(pg_terminate_backend(a.pid)) FROM pg_locks k JOIN pg_stat_activity a ON a.pid = " \
	"k.pid WHERE k.locktype = 'advisory' AND k.granted AND k.database = (SELECT oid FROM "     \
	"pg_database WHERE datname = current_database()) AND k.classid = 0 AND k.objid::bigint "   \
	"= " LEADER_LOCK_SCHED " AND k.objsubid = 1 AND a.pid <> pg_backend_pid() AND a.state IS " \
	"DISTINCT FROM 'active' AND a.state_change < clock_timestamp() - $1::int * interval '1 "   \
	"millisecond'), false) END FROM (SELECT pg_try_advisory_lock(" LEADER_LOCK_SCHED           \
	") AS got) l"

static void try_lock(void)
{
	char ms[16];
	const char *p[1] = { ms };

	snprintf(ms, sizeof(ms), "%d", cfg.leader_takeover_ms);
	beat_sent = clock_now_ms();
	db_conn_query(held, LOCK_SQL, 1, p, locked, NULL);
}

/* The leader's heartbeat answered: the session (and so the lock) lives. */
static void beat_done(PGresult *res, enum rc rc, void *arg)
{
	unsigned gen = (unsigned)(uintptr_t)arg;

	(void)res;
	if (down || gen != beat_gen || !leader)
		return;
	beating = 0;
	if (rc == RC_UNAVAILABLE) {
		leader_lost("the lock session stopped answering");
		return;
	}
	/* any answer, even an error inside a pass's transaction, is the
	 * session's */
	lease_until = beat_sent + lease_ms();
}

static void heartbeat(void)
{
	if (beating)
		return;
	beating = 1;
	beat_sent = clock_now_ms();
	db_conn_query(held, "SELECT 1", 0, NULL, beat_done, (void *)(uintptr_t)beat_gen);
}

static void acquired(struct db_conn *c, enum rc rc, void *arg)
{
	(void)arg;
	if (down) {
		trying = 0;
		if (c)
			db_release(c);
		return;
	}
	if (rc != RC_OK || !c) {
		trying = 0;
		return;
	}
	held = c;
	try_lock();
}

/* cron, every leader_heartbeat_ms: the leader checks its lock session;
 * another replica tries the lock (on the pinned connection, so the lock and
 * the passes share one session). */
static void attempt(struct cron_section *s, void *arg)
{
	(void)s;
	(void)arg;
	if (down)
		return;
	if (leader) {
		heartbeat();
		return;
	}
	if (trying)
		return;
	trying = 1;
	if (!held) {
		db_acquire(acquired, NULL);
		return;
	}
	try_lock();
}

/* A wake-up for the scheduler on a replica that is not the leader: try the
 * lock soon rather than a period later (the leader may be gone); a burst of
 * submissions makes one attempt. */
static void on_alloc_changed(enum events_kind kind, void *arg)
{
	(void)kind;
	(void)arg;
	if (!leader)
		cron_soon(section, 50);
}

/* ---- the wake bridge ----
 *
 * Two directions on one channel: the kinds that mean work for the leader's
 * passes go from any other replica to the leader; EV_JOB_LOG (the leader's
 * job driver wrote to a log) goes from the leader to every replica, whose
 * log followers (SSE) read at once instead of at their next poll.  A
 * replica hears its own NOTIFY too: a wake-up is idempotent.  Sends are
 * coalesced (one statement in flight) and at least WAKE_GAP_MS apart, so a
 * chatty job costs at most a few dozen NOTIFYs a second. */

#define WAKE_GAP_MS 20

static struct event *wake_timer;
static double wake_last;

static int to_everyone(int kind)
{
	return kind == EV_JOB_LOG;
}

static void wake_send(void);

static void wake_later(void)
{
	double gap = wake_last + WAKE_GAP_MS - clock_now_ms();
	struct timeval tv;

	if (gap <= 0 || !wake_timer) {
		wake_send();
		return;
	}
	if (evtimer_pending(wake_timer, NULL))
		return;
	tv.tv_sec = 0;
	tv.tv_usec = (long)(gap * 1000);
	evtimer_add(wake_timer, &tv);
}

static void wake_due(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	if (wake_pending && !wake_sending && !down)
		wake_send();
}

static void wake_sent(PGresult *res, enum rc rc, void *arg)
{
	(void)res;
	(void)arg;
	wake_sending = 0;
	if (rc != RC_OK)
		log_msg(LOG_DEBUG, "leader", NULL, "could not forward a wake-up (%s)", rc_code(rc));
	if (wake_pending && !down)
		wake_later();
}

static void wake_send(void)
{
	char payload[200] = "";
	const char *p[1] = { payload };
	size_t n = 0;

	for (int k = 0; k < EV__COUNT; k++)
		if (wake_pending & (1u << k))
			n += (size_t)snprintf(payload + n, sizeof(payload) - n, "%s%s",
			                      n ? "," : "", events_name((enum events_kind)k));
	wake_pending = 0;
	wake_sending = 1;
	wake_last = clock_now_ms();
	db_query("SELECT pg_notify('" WAKE_CHANNEL "', $1)", 1, p, wake_sent, NULL);
}

/* events.h's bridge: the leader heard its own kinds locally already and
 * sends only those for everyone; anyone else sends the leader's kinds. */
static void bridge(enum events_kind kind, void *arg)
{
	(void)arg;
	if (down || !listener)
		return;
	if (to_everyone(kind) ? !leader_is() : leader_is())
		return;
	wake_pending |= 1u << kind;
	if (!wake_sending)
		wake_later();
}

static void on_wake(const char *payload, void *arg)
{
	char buf[200], *save = NULL, *t;
	int lead = leader_is();

	(void)arg;
	if (!payload) {
		/* the listener (re)connected: wake-ups may have been missed */
		for (int k = 0; k < EV__COUNT; k++)
			if (lead || to_everyone(k))
				events_deliver((enum events_kind)k);
		return;
	}
	snprintf(buf, sizeof(buf), "%s", payload);
	for (t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		int k = events_parse(t);
		if (k >= 0 && (lead || to_everyone(k)))
			events_deliver((enum events_kind)k);
	}
}

int leader_init(struct event_base *base, const char *url)
{
	down = 0;
	section = cron_every("leader", cfg.leader_heartbeat_ms, 100, attempt, NULL);
	if (!section || events_subscribe(EV_ALLOC_CHANGED, on_alloc_changed, NULL) < 0)
		return -1;
	listener = notify_new(base, url, WAKE_CHANNEL, on_wake, NULL);
	wake_timer = evtimer_new(base, wake_due, NULL);
	if (!listener || !wake_timer)
		return -1;
	events_set_bridge(bridge, NULL);
	return 0;
}

void leader_shutdown(void)
{
	down = 1;
	events_set_bridge(NULL, NULL);
	notify_free(listener);
	listener = NULL;
	if (wake_timer)
		event_free(wake_timer);
	wake_timer = NULL;
	section = NULL; /* freed with the cron */
	if (held)
		db_release(held);
	held = NULL;
	leader = 0;
}
