/* driver.c — the workload driver loop (see driver.h).
 *
 * Owns: per kind, the cron section, the pass in flight (one at a time) and
 * the kick that came during it; the wake-up subscriptions; the cluster id.
 * Does not own: what a row means (the kind's decide()), state changes
 * (workload.c), leadership (db/leader.c).
 */
#include "work/driver.h"

#include <stdio.h>

#include "base/cron.h"
#include "base/events.h"
#include "db/db.h"
#include "db/leader.h"

#define MAX_KINDS 4

struct loop {
	const struct driver_kind *kind;
	struct cron_section *section;
	int busy;   /* a pass (or the cluster id read) is out */
	int kicked; /* a wake-up came meanwhile: pass again soon */
};

static struct loop loops[MAX_KINDS];
static int nloops;
static char cluster[40];
static long long passes;

const char *driver_cluster_id(void)
{
	return cluster;
}

static void rows(PGresult *res, enum rc rc, void *arg)
{
	struct loop *l = arg;

	l->busy = 0;
	if (rc == RC_OK && leader_is())
		for (int i = 0; i < PQntuples(res); i++)
			l->kind->decide(res, i);
	if (l->kicked) {
		l->kicked = 0;
		cron_soon(l->section, 5);
	}
}

static void cluster_loaded(PGresult *res, enum rc rc, void *arg)
{
	struct loop *l = arg;

	l->busy = 0;
	if (rc == RC_OK && PQntuples(res) == 1)
		snprintf(cluster, sizeof(cluster), "%s", db_val(res, 0, 0));
}

/* cron: one pass of one kind, on the leader only. */
static void on_cron(struct cron_section *s, void *arg)
{
	struct loop *l = arg;

	(void)s;
	if (l->busy) {
		l->kicked = 1;
		return;
	}
	if (!cluster[0]) {
		l->busy = 1;
		db_query("SELECT cluster_id FROM cluster_identity", 0, NULL, cluster_loaded, l);
		return;
	}
	if (!leader_is())
		return;
	passes++;
	l->busy = 1;
	db_query(l->kind->pass_sql, 0, NULL, rows, l);
}

/* EV_WORKLOAD_CHANGED, EV_ALLOC_GRANTED: every kind passes soon (a grant
 * or a change does not say whose workload it is; a pass is one read). */
static void on_wake(enum events_kind kind, void *arg)
{
	(void)kind;
	(void)arg;
	for (int i = 0; i < nloops; i++) {
		loops[i].kicked = 1;
		cron_soon(loops[i].section, 1);
	}
}

int driver_register(const struct driver_kind *kind)
{
	struct loop *l;

	if (!kind || !kind->decide || !kind->pass_sql || nloops >= MAX_KINDS)
		return -1;
	l = &loops[nloops];
	l->kind = kind;
	l->section = cron_every(kind->name, kind->period_ms, kind->first_ms, on_cron, l);
	if (!l->section)
		return -1;
	if (nloops++ == 0 && (events_subscribe(EV_WORKLOAD_CHANGED, on_wake, NULL) < 0 ||
	                      events_subscribe(EV_ALLOC_GRANTED, on_wake, NULL) < 0))
		return -1;
	return 0;
}

void driver_shutdown(void)
{
	for (int i = 0; i < nloops; i++)
		loops[i].section = NULL;
	nloops = 0;
}
