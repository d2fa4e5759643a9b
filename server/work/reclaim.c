/* reclaim.c — idle reclamation (see reclaim.h).
 *
 * Owns: one round = read the running instances under an idle policy, ask
 * each container's engine for a stats sample (CPU use counts as activity;
 * so does a measured GPU of the instance busy in the recent gpu_samples),
 * record the activity seen, then one statement applies the policies:
 * clear warnings of instances active again, warn the newly idle, stop the
 * warned ones still idle after warn_seconds and those past their maximum
 * lifetime (desired = stopped; the driver does the stopping).
 */
#include "work/reclaim.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "base/cron.h"
#include "base/events.h"
#include "base/log.h"
#include "db/db.h"
#include "db/leader.h"
#include "engine/docker.h"
#include "engine/nodes.h"

static int busy, pending;
static json_t *active; /* ids with CPU activity this round */

double reclaim_cpu_percent(const json_t *stats)
{
	const json_t *cs = json_object_get(stats, "cpu_stats");
	const json_t *ps = json_object_get(stats, "precpu_stats");
	double cpu, pre, sys, presys, ncpu;

	if (!json_is_object(cs) || !json_is_object(ps))
		return -1;
	cpu = (double)json_integer_value(
	        json_object_get(json_object_get(cs, "cpu_usage"), "total_usage"));
	pre = (double)json_integer_value(
	        json_object_get(json_object_get(ps, "cpu_usage"), "total_usage"));
	sys = (double)json_integer_value(json_object_get(cs, "system_cpu_usage"));
	presys = (double)json_integer_value(json_object_get(ps, "system_cpu_usage"));
	ncpu = (double)json_integer_value(json_object_get(cs, "online_cpus"));
	if (ncpu <= 0)
		ncpu = (double)json_array_size(
		        json_object_get(json_object_get(cs, "cpu_usage"), "percpu_usage"));
	if (sys <= presys || cpu < pre || ncpu <= 0 || presys <= 0)
		return -1;
	return (cpu - pre) / (sys - presys) * ncpu * 100.0;
}

static void applied(PGresult *res, enum rc rc, void *arg)
{
	(void)arg;
	busy = 0;
	if (rc != RC_OK)
		return;
	if (strcmp(db_val(res, 0, 1), "0") || strcmp(db_val(res, 0, 2), "0") ||
	    strcmp(db_val(res, 0, 3), "0"))
		log_msg(LOG_INFO, "reclaim", NULL,
		        "idle check: %s warning(s) cleared, %s warned, %s stopped idle, %s stopped "
		        "at their maximum lifetime",
		        db_val(res, 0, 0), db_val(res, 0, 1), db_val(res, 0, 2), db_val(res, 0, 3));
	if (strcmp(db_val(res, 0, 2), "0") || strcmp(db_val(res, 0, 3), "0"))
		events_publish(EV_WORKLOAD_CHANGED); /* the driver stops them */
}

static void apply(PGresult *res, enum rc rc, void *arg)
{
	(void)res;
	(void)arg;
	if (rc != RC_OK) {
		busy = 0;
		return;
	}
	/* the branches touch disjoint rows: one UPDATE per row and statement */
	/* the policy is the class's for class work that sets one, else the
	 * role's (gc_instance_policy, 0032); a teacher's extension counts as
	 * activity until it ends and pushes the lifetime to it */
	db_query("WITH p AS (SELECT i.id, greatest(i.last_activity_at, i.extended_until) AS act,"
	         "  i.idle_warning_at AS warned, i.started_at, i.extended_until AS ext,"
	         "  pol.idle_seconds, pol.warn_seconds, pol.max_lifetime_seconds"
	         "  FROM instances i CROSS JOIN LATERAL gc_instance_policy(i.id) pol"
	         "  WHERE i.state = 'running' AND i.desired = 'running'),"
	         " c AS (UPDATE instances SET idle_warning_at = NULL, idle_message = ''"
	         "  FROM p WHERE instances.id = p.id AND p.warned IS NOT NULL AND p.act > p.warned"
	         "  RETURNING instances.id),"
	         " w AS (UPDATE instances SET idle_warning_at = now(),"
	         "  idle_message = 'idle for ' || p.idle_seconds || ' s: it will be stopped at '"
	         "  || to_char((now() + make_interval(secs => p.warn_seconds)) AT TIME ZONE 'UTC',"
	         "  'YYYY-MM-DD HH24:MI:SS') || ' UTC unless it is used'"
	         "  FROM p WHERE instances.id = p.id AND p.warned IS NULL"
	         "  AND p.idle_seconds IS NOT NULL"
	         "  AND p.act < now() - make_interval(secs => p.idle_seconds)"
	         "  RETURNING instances.id),"
	         " s AS (UPDATE instances SET desired = 'stopped',"
	         "  reason = 'stopped after being idle for ' || p.idle_seconds || ' s (and ' ||"
	         "  p.warn_seconds || ' s after the warning)'"
	         "  FROM p WHERE instances.id = p.id AND p.warned IS NOT NULL AND p.act <= p.warned"
	         "  AND p.warned < now() - make_interval(secs => p.warn_seconds)"
	         "  RETURNING instances.id, instances.reason),"
	         " l AS (UPDATE instances SET desired = 'stopped',"
	         "  reason = 'reached the maximum lifetime of ' || p.max_lifetime_seconds || ' s'"
	         "  FROM p WHERE instances.id = p.id AND p.max_lifetime_seconds IS NOT NULL"
	         "  AND p.started_at < now() - make_interval(secs => p.max_lifetime_seconds)"
	         "  AND (p.ext IS NULL OR p.ext < now())"
	         "  AND NOT (p.warned IS NOT NULL AND p.act > p.warned)"
	         "  AND p.id NOT IN (SELECT id FROM w) AND p.id NOT IN (SELECT id FROM s)"
	         "  RETURNING instances.id, instances.reason),"
	         /* the system's own actions are audited (0035) */
	         " a AS (SELECT gc_audit_system(x.act, 'instance:' || x.id,"
	         "  jsonb_build_object('reason', x.reason)) FROM (SELECT 'instance.idle_stop' AS "
	         "act,"
	         "  id, reason FROM s UNION ALL SELECT 'instance.lifetime_stop', id, reason FROM "
	         "l) x)"
	         " SELECT (SELECT count(*) FROM c), (SELECT count(*) FROM w), (SELECT count(*) "
	         "FROM s),"
	         " (SELECT count(*) FROM l), (SELECT count(*) FROM a)",
	         0, NULL, applied, NULL);
}

static void sampled_all(void)
{
	char *doc = json_dumps(active, JSON_COMPACT);
	char window[16], pct[16];
	const char *p[3] = { doc ? doc : "[]", window, pct };

	json_decref(active);
	active = NULL;
	/* the GPU signal (SPEC §6): a measured GPU the instance holds was busy
	 * in the samples of the last two sampling intervals (at least 60 s: a
	 * sampling that runs late leaves no gap); declared GPUs are never
	 * sampled, so they give no signal either way */
	snprintf(window, sizeof(window), "%d",
	         cfg.gpu_sample_interval_s <= 0       ? 0
	         : 2 * cfg.gpu_sample_interval_s < 60 ? 60
	                                              : 2 * cfg.gpu_sample_interval_s);
	snprintf(pct, sizeof(pct), "%d", cfg.idle_gpu_percent);
	db_query("UPDATE instances SET last_activity_at = now() WHERE state = 'running'"
	         " AND (id IN (SELECT x::bigint FROM jsonb_array_elements_text($1::jsonb) x)"
	         "  OR EXISTS (SELECT 1 FROM allocations a JOIN slices sl ON sl.id = a.slice_id"
	         "   JOIN gpus g ON g.id = sl.gpu_id AND NOT g.simulated"
	         "   JOIN gpu_samples gs ON gs.gpu_uuid = g.uuid"
	         "   WHERE a.request_id = instances.request_id AND a.released_at IS NULL"
	         "   AND gs.at > now() - make_interval(secs => $2::int)"
	         "   AND gs.util_pct >= $3::int))",
	         3, p, apply, NULL);
	free(doc);
}

static void sampled(struct docker_call *call, enum rc rc, int status, const char *body, size_t len,
                    const char *err, void *arg)
{
	long long id = (long long)(intptr_t)arg;
	json_t *j;
	double pct;

	(void)call;
	(void)err;
	if (rc == RC_OK && status == 200 && (j = json_loadb(body, len, 0, NULL))) {
		pct = reclaim_cpu_percent(j);
		if (pct >= cfg.idle_cpu_percent && active)
			json_array_append_new(active, json_integer(id));
		json_decref(j);
	}
	if (--pending == 0)
		sampled_all();
}

static void running_read(PGresult *res, enum rc rc, void *arg)
{
	char path[200];

	(void)arg;
	if (rc != RC_OK) {
		busy = 0;
		return;
	}
	active = json_array();
	pending = 1;
	for (int i = 0; i < PQntuples(res); i++) {
		struct docker_engine *e = nodes_engine(strtoll(db_val(res, i, 1), NULL, 10));
		long long id = strtoll(db_val(res, i, 0), NULL, 10);
		if (!e || !db_val(res, i, 2))
			continue;
		snprintf(path, sizeof(path), "/containers/%s/stats?stream=false",
		         db_val(res, i, 2));
		pending++;
		if (!docker_request(e, "GET", path, NULL, NULL, 0, NULL, 15000, sampled,
		                    (void *)(intptr_t)id))
			pending--;
	}
	if (--pending == 0)
		sampled_all();
}

void reclaim_run(void)
{
	if (busy)
		return;
	busy = 1;
	db_query("SELECT i.id, i.node_id, i.container_id FROM instances i"
	         " CROSS JOIN LATERAL gc_instance_policy(i.id) ip"
	         " WHERE i.state = 'running' AND i.desired = 'running' AND i.node_id IS NOT NULL"
	         " AND (ip.idle_seconds IS NOT NULL OR ip.max_lifetime_seconds IS NOT NULL)",
	         0, NULL, running_read, NULL);
}

/* cron: a round on the leader (asked again at the driver's period while
 * this replica does not lead, so the first round comes once it does). */
static void on_cron(struct cron_section *s, void *arg)
{
	(void)arg;
	if (!leader_is()) {
		cron_soon(s, cfg.instance_tick_ms);
		return;
	}
	reclaim_run();
}

int reclaim_init(void)
{
	return cron_every("reclaim", cfg.reclaim_interval * 1000, cfg.instance_tick_ms, on_cron,
	                  NULL)
	               ? 0
	               : -1;
}
