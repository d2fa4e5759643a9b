/* activity.c — what apps behind the proxy move.
 *
 * Owns: the byte counter of all proxied traffic, a small per-route table
 * (open addressing, bounded), and the throttled UPDATE of
 * instances.last_activity_at that tells the idle reclaimer an app is in use.
 * Does not own: reclaiming idle instances (work/reclaim.c), the metrics
 * text (proxy_metrics in proxy.c).
 */
#include "apps/activity.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/log.h"
#include "db/db.h"

#define RSTATS_MAX     4096
#define ACTIVITY_EVERY 5.0 /* seconds between last_activity_at updates per route */

struct rstat {
	char route[64];
	long long instance_id;
	unsigned long long bytes;
	time_t last_seen;
	double last_db;
};

static struct rstat rstats[RSTATS_MAX];
static int nrstats;
static unsigned long long total_bytes;

static unsigned hash_str(const char *s)
{
	unsigned h = 2166136261u;

	while (*s)
		h = (h ^ (unsigned char)*s++) * 16777619u;
	return h;
}

/* A db_cb for the activity update: nobody waits for it, failures are only
 * logged. */
static void activity_written(PGresult *res, enum rc rc, void *arg)
{
	(void)res;
	(void)arg;
	if (rc != RC_OK)
		log_msg(LOG_WARN, "proxy", NULL, "cannot record app activity: %s", rc_code(rc));
}

unsigned activity_key(const char *route)
{
	return hash_str(route);
}

void activity_note(const char *route, long long instance_id, size_t bytes)
{
	activity_note_key(route, hash_str(route), instance_id, bytes);
}

void activity_note_key(const char *route, unsigned key, long long instance_id, size_t bytes)
{
	unsigned b = key % RSTATS_MAX;
	struct rstat *s = NULL;
	double t = clock_now_s();

	total_bytes += bytes;
	for (int i = 0; i < RSTATS_MAX; i++) {
		struct rstat *c = &rstats[(b + (unsigned)i) % RSTATS_MAX];
		if (!c->route[0] || strcmp(c->route, route) == 0) {
			s = c;
			break;
		}
	}
	if (!s)
		return; /* full: counters are best effort, activity is not lost for long */
	if (!s->route[0]) {
		snprintf(s->route, sizeof(s->route), "%s", route);
		nrstats++;
	}
	s->instance_id = instance_id;
	s->bytes += bytes;
	s->last_seen = time(NULL);
	if (t - s->last_db >= ACTIVITY_EVERY) {
		char id[24];
		const char *p[1] = { id };
		s->last_db = t;
		snprintf(id, sizeof(id), "%lld", instance_id);
		db_query("UPDATE instances SET last_activity_at = now() WHERE id = $1", 1, p,
		         activity_written, NULL);
	}
}

unsigned long long activity_bytes(void)
{
	return total_bytes;
}
