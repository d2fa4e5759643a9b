/* workload.c — the workload state machine (see workload.h).
 *
 * Owns: the state names, the edges, and workload_set_state(): one static
 * statement that checks the current state, writes the new one and the
 * columns the flags name, forgets the published ports and releases the
 * allocation request when asked.  Does not own: deciding what happens next
 * (the driver, reconcile, the API).
 */
#include "work/workload.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/events.h"
#include "base/log.h"
#include "db/db.h"

static const char *const names[WL__COUNT] = {
	[WL_QUEUED] = "queued",     [WL_PULLING] = "pulling",     [WL_CREATING] = "creating",
	[WL_RUNNING] = "running",   [WL_STOPPING] = "stopping",   [WL_STOPPED] = "stopped",
	[WL_FAILED] = "failed",     [WL_LOST] = "lost",           [WL_DELETED] = "deleted",
	[WL_STARTING] = "starting", [WL_SUCCEEDED] = "succeeded", [WL_CANCELLED] = "cancelled",
};

/* edges[from]: the states that may follow it */
#define B(s) WL_BIT(WL_##s)
static const unsigned edges[WL__COUNT] = {
	[WL_QUEUED] = B(QUEUED) | B(PULLING) | B(STOPPED) | B(FAILED) | B(LOST) | B(DELETED) |
	              B(STARTING) | B(CANCELLED),
	[WL_PULLING] = B(PULLING) | B(CREATING) | B(STOPPING) | B(FAILED) | B(LOST) | B(DELETED),
	[WL_CREATING] = B(PULLING) | B(CREATING) | B(RUNNING) | B(STOPPING) | B(FAILED) | B(LOST) |
	                B(DELETED),
	[WL_RUNNING] = B(STOPPING) | B(STOPPED) | B(FAILED) | B(LOST) | B(DELETED) | B(SUCCEEDED),
	[WL_STOPPING] = B(STOPPING) | B(STOPPED) | B(FAILED) | B(LOST) | B(DELETED) | B(CANCELLED) |
	                B(SUCCEEDED),
	[WL_STOPPED] = B(QUEUED) | B(DELETED),
	[WL_FAILED] = B(QUEUED) | B(DELETED),
	[WL_LOST] = B(QUEUED) | B(DELETED),
	[WL_DELETED] = 0,
	/* jobs: a start may be cancelled, fail or lose its node */
	[WL_STARTING] = B(STARTING) | B(RUNNING) | B(STOPPING) | B(FAILED) | B(LOST) | B(CANCELLED),
	[WL_SUCCEEDED] = 0,
	[WL_CANCELLED] = 0,
};
#undef B

const char *workload_state_name(enum workload_state s)
{
	return (int)s >= 0 && s < WL__COUNT ? names[s] : "?";
}

int workload_state_parse(const char *s)
{
	for (int i = 0; s && i < WL__COUNT; i++)
		if (strcmp(names[i], s) == 0)
			return i;
	return -1;
}

int workload_edge_ok(enum workload_state from, enum workload_state to)
{
	if ((int)from < 0 || from >= WL__COUNT || (int)to < 0 || to >= WL__COUNT)
		return 0;
	return (edges[from] & WL_BIT(to)) != 0;
}

#define NOUN(k)   ((k) == WL_KIND_JOB ? "job" : "instance")
#define MODULE(k) ((k) == WL_KIND_JOB ? "jobs" : "instances")

struct set_ctx {
	enum workload_kind kind;
	long long id;
	enum workload_state to;
	char reason[300];
	workload_set_cb cb;
	void *arg;
};

static void set_done(PGresult *res, enum rc rc, void *arg)
{
	struct set_ctx *c = arg;
	const char *to = workload_state_name(c->to);
	int changed = -1;

	if (rc == RC_OK) {
		const char *was = db_val(res, 0, 0);
		changed = (int)strtol(db_val(res, 0, 1), NULL, 10);
		if (changed && !(was && strcmp(was, to) == 0))
			log_msg(LOG_INFO, MODULE(c->kind), NULL, "%s %lld: %s → %s%s%s",
			        NOUN(c->kind), c->id, was ? was : "?", to, c->reason[0] ? ": " : "",
			        c->reason);
	} else {
		log_msg(LOG_WARN, MODULE(c->kind), NULL, "%s %lld: could not record %s (%s)",
		        NOUN(c->kind), c->id, to, rc_code(rc));
	}
	if (c->cb)
		c->cb(changed, c->arg);
	free(c);
}

/* A job's change: its columns (started_at with running, finished_at with
 * a final state, the reason code), the request released when asked.
 * p: the parameters workload_set_state() made. */
static void set_job(const struct workload_change *ch, const char **p, struct set_ctx *c)
{
	const char *q[9] = { p[0], p[1], p[2], p[3], p[4], p[8], p[9], p[10], p[11] };
	const char *all[10];

	memcpy(all, q, sizeof(q));
	all[9] = ch->reason_code;
	db_query(
	        "WITH o AS (SELECT state FROM jobs WHERE id = $1 FOR UPDATE),"
	        " i AS (UPDATE jobs SET state = $2, reason = COALESCE($3, reason),"
	        "  reason_code = COALESCE($10, reason_code), updated_at = now(),"
	        "  started_at = CASE WHEN $2 = 'running' THEN COALESCE(started_at, now())"
	        "   ELSE started_at END,"
	        "  finished_at = CASE WHEN $2 IN ('succeeded', 'failed', 'cancelled', 'lost')"
	        "   THEN now() ELSE finished_at END,"
	        "  container_id = CASE WHEN $6::boolean THEN NULL ELSE container_id END,"
	        "  exit_code = CASE WHEN $7::int IS NOT NULL THEN $7::int ELSE exit_code END,"
	        "  node_id = CASE WHEN $8::bigint IS NOT NULL THEN $8::bigint ELSE node_id END,"
	        "  container_name = CASE WHEN $8::bigint IS NOT NULL THEN $9"
	        "   ELSE container_name END"
	        "  WHERE id = $1 AND state = ANY($4::text[]) RETURNING id, request_id, reason),"
	        " x AS (SELECT gc_release_request(request_id, reason) AS s FROM i"
	        "  WHERE $5::boolean AND request_id IS NOT NULL)"
	        " SELECT (SELECT state FROM o), (SELECT count(*) FROM i), (SELECT count(*) FROM x)",
	        10, all, set_done, c);
	if (ch->flags & WL_RELEASE)
		events_publish(EV_ALLOC_CHANGED);
}

void workload_set_state(const struct workload_change *ch, workload_set_cb cb, void *arg)
{
	struct set_ctx *c;
	char ids[24], fromv[240], code[16], node[24];
	const char *p[12];
	size_t n = 0;

	for (int s = 0; s < WL__COUNT; s++)
		if ((ch->from & WL_BIT(s)) && !workload_edge_ok((enum workload_state)s, ch->to)) {
			/* a bug, not input: refuse rather than corrupt the record */
			log_msg(LOG_ERROR, MODULE(ch->kind), NULL,
			        "%s %lld: refused transition %s → %s", NOUN(ch->kind), ch->id,
			        workload_state_name((enum workload_state)s),
			        workload_state_name(ch->to));
			if (cb)
				cb(-1, arg);
			return;
		}
	c = calloc(1, sizeof(*c));
	if (!c || !ch->from || (int)ch->to < 0 || ch->to >= WL__COUNT) {
		free(c);
		if (cb)
			cb(-1, arg);
		return;
	}
	c->kind = ch->kind;
	c->id = ch->id;
	c->to = ch->to;
	snprintf(c->reason, sizeof(c->reason), "%s", ch->reason ? ch->reason : "");
	c->cb = cb;
	c->arg = arg;
	snprintf(ids, sizeof(ids), "%lld", ch->id);
	fromv[n++] = '{';
	fromv[n] = '\0';
	for (int s = 0; s < WL__COUNT; s++)
		if (ch->from & WL_BIT(s))
			n += (size_t)snprintf(fromv + n, sizeof(fromv) - n, "%s%s",
			                      n > 1 ? "," : "",
			                      workload_state_name((enum workload_state)s));
	snprintf(fromv + n, sizeof(fromv) - n, "}");
	snprintf(code, sizeof(code), "%d", ch->exit_code);
	snprintf(node, sizeof(node), "%lld", ch->node_id);
#define FLAG(f) (ch->flags & (f) ? "true" : "false")
	p[0] = ids;
	p[1] = workload_state_name(ch->to);
	p[2] = ch->reason;
	p[3] = fromv;
	p[4] = FLAG(WL_RELEASE);
	p[5] = FLAG(WL_SETTLE);
	p[6] = FLAG(WL_STOPPED_AT);
	p[7] = FLAG(WL_DELETED_AT);
	p[8] = FLAG(WL_CLEAR_CONTAINER);
	p[9] = ch->flags & WL_EXIT_CODE ? code : NULL;
	p[10] = ch->flags & WL_PLACE ? node : NULL;
	p[11] = ch->flags & WL_PLACE ? ch->container_name : NULL;
#undef FLAG
	if (ch->kind == WL_KIND_JOB) {
		set_job(ch, p, c);
		return;
	}
	db_query(
	        "WITH o AS (SELECT state FROM instances WHERE id = $1 FOR UPDATE),"
	        " i AS (UPDATE instances SET state = $2, reason = COALESCE($3, reason),"
	        "  updated_at = now(),"
	        "  desired = CASE WHEN $6::boolean AND desired = 'running' THEN 'stopped'"
	        "   ELSE desired END,"
	        "  stopped_at = CASE WHEN $7::boolean THEN now() ELSE stopped_at END,"
	        "  deleted_at = CASE WHEN $8::boolean THEN now() ELSE deleted_at END,"
	        "  container_id = CASE WHEN $9::boolean THEN NULL ELSE container_id END,"
	        "  exit_code = CASE WHEN $10::int IS NOT NULL THEN $10::int ELSE exit_code END,"
	        "  node_id = CASE WHEN $11::bigint IS NOT NULL THEN $11::bigint ELSE node_id END,"
	        "  container_name = CASE WHEN $11::bigint IS NOT NULL THEN $12"
	        "   ELSE container_name END"
	        "  WHERE id = $1 AND state = ANY($4::text[]) RETURNING id, request_id, reason),"
	        " d AS (DELETE FROM instance_ports WHERE $5::boolean"
	        "  AND instance_id IN (SELECT id FROM i) RETURNING 1),"
	        " x AS (SELECT gc_release_request(request_id, reason) AS s FROM i"
	        "  WHERE $5::boolean AND request_id IS NOT NULL)"
	        " SELECT (SELECT state FROM o), (SELECT count(*) FROM i), (SELECT count(*) FROM x),"
	        " (SELECT count(*) FROM d)",
	        12, p, set_done, c);
	if (ch->flags & WL_RELEASE)
		events_publish(EV_ALLOC_CHANGED);
}

void workload_audit(const char *action, const char *target, const char *reason)
{
	const char *p[3] = { action, target, reason ? reason : "" };

	db_query("SELECT gc_audit_system($1, $2, jsonb_build_object('reason', $3::text))", 3, p,
	         db_ignore, NULL);
}
