/* reconcile.c — records and engines agree (see reconcile.h).
 *
 * Owns: the per-node listing of our containers, the comparison with the
 * instance records, removing orphans and settling records whose container
 * exited or vanished, removing job containers whose job is not live there, and removing our per-user networks (labelled
 * gpucloud.cluster with our id, never another cluster's) that no container
 * of ours refers to.  Instances with an operation in flight in this
 * process are skipped: the operation owns them until it ends.
 * Does not own: the transitions themselves (workload_set_state).
 */
#include "work/reconcile.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <jansson.h>

#include "base/config.h"
#include "base/cron.h"
#include "base/log.h"
#include "db/db.h"
#include "db/leader.h"
#include "engine/docker.h"
#include "engine/nodes.h"
#include "work/instances.h"
#include "work/jobs.h"
#include "work/workload.h"

#define MAX_NODES 256

struct round_node {
	long long id;
	char name[72];
	json_t *containers; /* [{id, cid, state, exit}] of instance kinds */
};

static int busy;
static int pending;
static long long down[MAX_NODES];
static int ndown;

int reconcile_node_unreachable(long long node_id)
{
	for (int i = 0; i < ndown; i++)
		if (down[i] == node_id)
			return 1;
	return 0;
}

static void mark(long long node_id, int unreachable)
{
	for (int i = 0; i < ndown; i++)
		if (down[i] == node_id) {
			if (!unreachable)
				down[i] = down[--ndown];
			return;
		}
	if (unreachable && ndown < MAX_NODES)
		down[ndown++] = node_id;
}

int reconcile_exit_code(const char *status)
{
	int code;

	if (!status || sscanf(status, "Exited (%d)", &code) != 1)
		return -1;
	return code;
}

static void one_done(void)
{
	if (--pending <= 0)
		busy = 0;
}

static void ignore_call(struct docker_call *call, enum rc rc, int status, const char *body,
                        size_t len, const char *err, void *arg)
{
	(void)call;
	(void)body;
	(void)len;
	(void)err;
	(void)arg;
	if (rc != RC_OK || (status / 100 != 2 && status != 304 && status != 404))
		log_msg(LOG_WARN, "reconcile", NULL, "an engine call failed (%s, status %d)",
		        rc_code(rc), status);
}

static json_t *find(json_t *arr, long long id)
{
	size_t i;
	json_t *c;

	json_array_foreach(arr, i,
	                   c) if (json_integer_value(json_object_get(c, "id")) == id) return c;
	return NULL;
}

/* one node's networks: those our containers use (set of names) */
struct nets {
	long long node_id;
	char node[72];
	json_t *used;
};

static void net_removed(struct docker_call *call, enum rc rc, int status, const char *body,
                        size_t len, const char *err, void *arg)
{
	(void)call;
	(void)body;
	(void)len;
	(void)err;
	(void)arg;
	/* 403: a container joined it meanwhile; 404: gone already */
	if (rc != RC_OK || (status / 100 != 2 && status != 403 && status != 404))
		log_msg(LOG_WARN, "reconcile", NULL, "could not remove a network (%s, status %d)",
		        rc_code(rc), status);
}

static void nets_listed(struct docker_call *call, enum rc rc, int status, const char *body,
                        size_t len, const char *err, void *arg)
{
	struct nets *k = arg;
	struct docker_engine *e = nodes_engine(k->node_id);
	json_t *list = NULL, *nw;
	size_t i;
	char path[300];

	(void)call;
	(void)err;
	if (rc != RC_OK || status != 200 || !e || !(list = json_loadb(body, len, 0, NULL)))
		goto out;
	json_array_foreach(list, i, nw)
	{
		const char *name = json_string_value(json_object_get(nw, "Name"));
		const char *id = json_string_value(json_object_get(nw, "Id"));
		const char *cl = json_string_value(
		        json_object_get(json_object_get(nw, "Labels"), "gpucloud.cluster"));
		/* the label filter asked for ours; checked again before a delete */
		if (!name || !id || !cl || strcmp(cl, instances_cluster_id()) != 0 ||
		    strspn(id, "0123456789abcdef") != strlen(id) || json_object_get(k->used, name))
			continue;
		if (instances_launching(k->node_id) || jobs_launching(k->node_id))
			break; /* a launch may be about to use it: next round */
		log_msg(LOG_INFO, "reconcile", NULL, "node '%s': removing empty network %s",
		        k->node, name);
		snprintf(path, sizeof(path), "/networks/%s", id);
		docker_request(e, "DELETE", path, NULL, NULL, 0, NULL, 30000, net_removed, NULL);
	}
out:
	json_decref(list);
	json_decref(k->used);
	free(k);
	one_done();
}

/* Lists the node's networks of our cluster; those in no container's
 * NetworkMode (used) go. Takes ownership of used. */
static void sweep_networks(struct round_node *n, json_t *used)
{
	struct docker_engine *e = nodes_engine(n->id);
	struct nets *k = calloc(1, sizeof(*k));
	char path[400], filt[200], *esc;

	if (!e || !k) {
		free(k);
		json_decref(used);
		return;
	}
	k->node_id = n->id;
	snprintf(k->node, sizeof(k->node), "%s", n->name);
	k->used = used;
	snprintf(filt, sizeof(filt), "{\"label\":[\"gpucloud.cluster=%s\"]}",
	         instances_cluster_id());
	esc = curl_easy_escape(NULL, filt, 0);
	snprintf(path, sizeof(path), "/networks?filters=%s", esc ? esc : "");
	curl_free(esc);
	pending++;
	if (!docker_request(e, "GET", path, NULL, NULL, 0, NULL, 10000, nets_listed, k)) {
		pending--;
		json_decref(k->used);
		free(k);
	}
}

struct check {
	long long id;
	char node[72];
	int code;
	char why[300];
};

/* The record says whether a restart in place is under way (its container
 * is briefly not running): then this is not the end of it. */
static void settle(PGresult *res, enum rc rc, void *arg)
{
	struct check *k = arg;

	if (rc == RC_OK && PQntuples(res) == 1 && strcmp(db_val(res, 0, 0), "f") == 0 &&
	    !instances_op_busy(k->id)) {
		struct workload_change c = {
			.id = k->id,
			.from = WL_BIT(WL_RUNNING),
			.to = k->code == 0 ? WL_STOPPED : WL_FAILED,
			.reason = k->why,
			.flags = WL_RELEASE | WL_SETTLE | WL_EXIT_CODE | WL_STOPPED_AT,
			.exit_code = k->code,
		};
		workload_set_state(&c, NULL, NULL);
	}
	free(k);
}

/* Audits the removal of one of our containers (c: {id, cid, name}) from
 * node as the system's action. */
static void removed(const char *node, json_t *c, const char *because)
{
	char target[160], why[400];
	const char *name = json_string_value(json_object_get(c, "name"));

	if (name && *name == '/') /* the engine's names start with '/' */
		name++;
	snprintf(target, sizeof(target), "container:%s", name ? name : "");
	snprintf(why, sizeof(why), "removed from node '%s': %s", node, because);
	workload_audit("reconcile.remove", target, why);
}

/* The listing is older than the records read after it: before settling a
 * running record, the container is inspected now (by its deterministic
 * name) — gone: lost; exited: stopped or failed with its code. */
static void verified(struct docker_call *call, enum rc rc, int status, const char *body, size_t len,
                     const char *err, void *arg)
{
	struct check *k = arg;
	json_t *j = NULL, *st;
	const char *status_s;
	char why[300], ids[32];
	const char *p[1] = { ids };
	int x;

	(void)call;
	(void)err;
	if (rc != RC_OK || instances_op_busy(k->id))
		goto out;
	if (status == 404) {
		snprintf(why, sizeof(why), "the container vanished from node '%s'", k->node);
		snprintf(ids, sizeof(ids), "instance:%lld", k->id);
		workload_audit("instance.lost", ids, why);
		struct workload_change c = {
			.id = k->id,
			.from = WL_BIT(WL_RUNNING),
			.to = WL_LOST,
			.reason = why,
			.flags = WL_RELEASE | WL_SETTLE | WL_STOPPED_AT | WL_CLEAR_CONTAINER,
		};
		workload_set_state(&c, NULL, NULL);
		goto out;
	}
	if (status != 200 || !(j = json_loadb(body, len, 0, NULL)))
		goto out;
	st = json_object_get(j, "State");
	if (json_is_true(json_object_get(st, "Running")) ||
	    json_is_true(json_object_get(st, "Restarting")) ||
	    json_is_true(json_object_get(st, "Paused")))
		goto out;
	/* being removed (docker rm -f kills first): it is about to vanish, and
	 * the next round says so; read now, it would look killed (137) */
	status_s = json_string_value(json_object_get(st, "Status"));
	if (json_is_true(json_object_get(st, "Dead")) ||
	    (status_s && !strcmp(status_s, "removing")))
		goto out;
	x = (int)json_integer_value(json_object_get(st, "ExitCode"));
	if (json_is_true(json_object_get(st, "OOMKilled")))
		snprintf(k->why, sizeof(k->why), "the container ran out of memory (code %d)", x);
	else if (x == 0)
		snprintf(k->why, sizeof(k->why), "the container exited (code 0)");
	else if (x == 137)
		snprintf(k->why, sizeof(k->why),
		         "the container was killed (code 137: SIGKILL, e.g. killed from outside)");
	else
		snprintf(k->why, sizeof(k->why), "the container exited with code %d", x);
	k->code = x;
	snprintf(ids, sizeof(ids), "%lld", k->id);
	json_decref(j);
	db_query("SELECT COALESCE(restarted_at > now() - interval '2 minutes', false)"
	         " FROM instances WHERE id = $1 AND state = 'running'",
	         1, p, settle, k);
	return;
out:
	json_decref(j);
	free(k);
}

static void verify(struct round_node *n, long long id)
{
	struct docker_engine *e = nodes_engine(n->id);
	struct check *k = calloc(1, sizeof(*k));
	char name[96], path[200];

	if (!k || !e) {
		free(k);
		return;
	}
	k->id = id;
	snprintf(k->node, sizeof(k->node), "%s", n->name);
	instances_container_name(id, name, sizeof(name));
	snprintf(path, sizeof(path), "/containers/%s/json", name);
	if (!docker_request(e, "GET", path, NULL, NULL, 0, NULL, 10000, verified, k))
		free(k);
}

/* Compares one node's containers (n->containers) with the records
 * (id, state, node_id, desired) read for them. */
static void compare(PGresult *res, enum rc rc, void *arg)
{
	struct round_node *n = arg;
	struct docker_engine *e = nodes_engine(n->id);
	size_t i;
	json_t *c;
	char path[200];

	if (rc != RC_OK || !e)
		goto out;
	/* containers: orphans go, running ones of settled records stop */
	json_array_foreach(n->containers, i, c)
	{
		long long id = json_integer_value(json_object_get(c, "id"));
		const char *cstate = json_string_value(json_object_get(c, "state"));
		int row = -1;
		for (int r = 0; r < PQntuples(res); r++)
			if (strtoll(db_val(res, r, 0), NULL, 10) == id)
				row = r;
		if (instances_op_busy(id))
			continue;
		if (row < 0 || strcmp(db_val(res, row, 1), "deleted") == 0 ||
		    strtoll(db_val(res, row, 2), NULL, 10) != n->id) {
			log_msg(LOG_INFO, "reconcile", NULL,
			        "node '%s': removing container %s (%s)", n->name,
			        json_string_value(json_object_get(c, "name")),
			        row < 0 ? "no such instance"
			        : strcmp(db_val(res, row, 1), "deleted") == 0
			                ? "the instance was deleted"
			                : "the instance lives on another node");
			snprintf(path, sizeof(path), "/containers/%s?force=1&v=1",
			         json_string_value(json_object_get(c, "cid")));
			docker_request(e, "DELETE", path, NULL, NULL, 0, NULL, 60000, ignore_call,
			               NULL);
			removed(n->name, c,
			        row < 0 ? "no such instance"
			        : strcmp(db_val(res, row, 1), "deleted") == 0
			                ? "the instance was deleted"
			                : "the instance lives on another node");
			continue;
		}
		if (strcmp(cstate, "running") == 0 &&
		    (strcmp(db_val(res, row, 1), "stopped") == 0 ||
		     strcmp(db_val(res, row, 1), "failed") == 0 ||
		     strcmp(db_val(res, row, 1), "lost") == 0)) {
			/* its record holds no GPUs any more: it must not run */
			log_msg(LOG_INFO, "reconcile", NULL,
			        "node '%s': stopping container %s (instance %lld is %s)", n->name,
			        json_string_value(json_object_get(c, "name")), id,
			        db_val(res, row, 1));
			snprintf(path, sizeof(path), "/containers/%s/stop?t=5",
			         json_string_value(json_object_get(c, "cid")));
			docker_request(e, "POST", path, NULL, NULL, 0, NULL, 60000, ignore_call,
			               NULL);
			continue;
		}
		if (strcmp(db_val(res, row, 1), "running") == 0 && strcmp(cstate, "running") != 0 &&
		    strcmp(cstate, "paused") != 0 && strcmp(cstate, "restarting") != 0)
			verify(n, id);
	}
	/* records: running here without a container */
	for (int r = 0; r < PQntuples(res); r++) {
		long long id = strtoll(db_val(res, r, 0), NULL, 10);
		if (strcmp(db_val(res, r, 1), "running") != 0 ||
		    strtoll(db_val(res, r, 2), NULL, 10) != n->id || find(n->containers, id) ||
		    instances_op_busy(id))
			continue;
		verify(n, id);
	}
out:
	json_decref(n->containers);
	free(n);
	one_done();
}

/* -- job containers: a job's container lives while its job starts, runs
 * or stops on that node; the driver removes it at the end, and this
 * removes one the end could not (its engine was away) or that no job
 * owns.  Jobs with an operation in this process are left to it. */
struct job_check {
	long long node_id;
	char node[72];
	json_t *containers; /* [{id, cid, name}] */
};

static void jobs_compared(PGresult *res, enum rc rc, void *arg)
{
	struct job_check *k = arg;
	struct docker_engine *e = nodes_engine(k->node_id);
	size_t i;
	json_t *c;
	char path[200];

	if (rc == RC_OK && e)
		json_array_foreach(k->containers, i, c)
		{
			long long id = json_integer_value(json_object_get(c, "id"));
			int live = 0;
			for (int r = 0; r < PQntuples(res); r++)
				if (strtoll(db_val(res, r, 0), NULL, 10) == id)
					live = 1;
			if (live || jobs_op_busy(id))
				continue;
			log_msg(LOG_INFO, "reconcile", NULL,
			        "node '%s': removing container %s (job %lld has ended or is not "
			        "here)",
			        k->node, json_string_value(json_object_get(c, "name")), id);
			snprintf(path, sizeof(path), "/containers/%s?force=1&v=1",
			         json_string_value(json_object_get(c, "cid")));
			docker_request(e, "DELETE", path, NULL, NULL, 0, NULL, 60000, ignore_call,
			               NULL);
			removed(k->node, c, "its job has ended or is not on this node");
		}
	json_decref(k->containers);
	free(k);
	one_done();
}

/* Reads which of the node's job containers (stolen) have a live job there. */
static void check_jobs(struct round_node *n, json_t *containers)
{
	struct job_check *k;
	json_t *ids, *c;
	size_t i;
	char *doc, nid[24];
	const char *p[2];

	if (json_array_size(containers) == 0 || !(k = calloc(1, sizeof(*k)))) {
		json_decref(containers);
		return;
	}
	k->node_id = n->id;
	snprintf(k->node, sizeof(k->node), "%s", n->name);
	k->containers = containers;
	ids = json_array();
	json_array_foreach(containers, i, c) json_array_append(ids, json_object_get(c, "id"));
	doc = json_dumps(ids, JSON_COMPACT);
	json_decref(ids);
	snprintf(nid, sizeof(nid), "%lld", n->id);
	p[0] = doc ? doc : "[]";
	p[1] = nid;
	pending++;
	/* read after the listing: the driver records a job's node (starting)
	 * before it creates the container */
	db_query("SELECT j.id FROM jobs j"
	         " WHERE j.id IN (SELECT x::bigint FROM jsonb_array_elements_text($1::jsonb) x)"
	         /* a distributed job's members: on their own nodes (0027) */
	         " AND (j.node_id = $2 OR EXISTS (SELECT 1 FROM job_members m"
	         "  WHERE m.job_id = j.id AND m.node_id = $2))"
	         " AND j.state IN ('starting', 'running', 'stopping')",
	         2, p, jobs_compared, k);
	free(doc);
}

static void listed(struct docker_call *call, enum rc rc, int status, const char *body, size_t len,
                   const char *err, void *arg)
{
	struct round_node *n = arg;
	json_t *list, *c, *ids, *used, *jobs;
	size_t i;
	char *idsdoc, nid[24];
	const char *p[2];

	(void)call;
	(void)err;
	if (rc != RC_OK || status != 200 || !(list = json_loadb(body, len, 0, NULL))) {
		if (!reconcile_node_unreachable(n->id))
			log_msg(LOG_WARN, "reconcile", NULL,
			        "node '%s': cannot list containers (%s)", n->name,
			        rc != RC_OK ? err : "bad answer");
		mark(n->id, 1);
		free(n);
		one_done();
		return;
	}
	mark(n->id, 0);
	n->containers = json_array();
	jobs = json_array();
	ids = json_array();
	used = json_object();
	json_array_foreach(list, i, c)
	{
		const char *nm = json_string_value(
		        json_object_get(json_object_get(c, "HostConfig"), "NetworkMode"));
		if (nm && used)
			json_object_set_new(used, nm, json_true());
	}
	sweep_networks(n, used);
	json_array_foreach(list, i, c)
	{
		json_t *labels = json_object_get(c, "Labels");
		const char *kind = json_string_value(json_object_get(labels, "gpucloud.kind"));
		const char *id = json_string_value(json_object_get(labels, "gpucloud.id"));
		const char *name =
		        json_string_value(json_array_get(json_object_get(c, "Names"), 0));
		const char *cid = json_string_value(json_object_get(c, "Id"));
		const char *st = json_string_value(json_object_get(c, "State"));
		long long iid;
		if (kind && id && cid && strcmp(kind, "job") == 0 &&
		    strspn(cid, "0123456789abcdef") == strlen(cid) && strtoll(id, NULL, 10) > 0) {
			json_array_append_new(jobs,
			                      json_pack("{s:I, s:s, s:s}", "id",
			                                (json_int_t)strtoll(id, NULL, 10), "cid",
			                                cid, "name", name ? name : cid));
			continue;
		}
		if (!kind || !id || !cid || !st ||
		    (strcmp(kind, "instance") != 0 && strcmp(kind, "tensorboard") != 0))
			continue; /* others are not ours to judge */
		iid = strtoll(id, NULL, 10);
		if (iid <= 0 || strspn(cid, "0123456789abcdef") != strlen(cid))
			continue;
		json_array_append_new(
		        n->containers,
		        json_pack("{s:I, s:s, s:s, s:s, s:i}", "id", (json_int_t)iid, "cid", cid,
		                  "name", name ? name : cid, "state", st, "exit",
		                  reconcile_exit_code(
		                          json_string_value(json_object_get(c, "Status")))));
		json_array_append_new(ids, json_integer(iid));
	}
	json_decref(list);
	check_jobs(n, jobs);
	idsdoc = json_dumps(ids, JSON_COMPACT);
	json_decref(ids);
	snprintf(nid, sizeof(nid), "%lld", n->id);
	p[0] = idsdoc ? idsdoc : "[]";
	p[1] = nid;
	/* read after the listing: a container seen is never newer than its
	 * record's node (the driver records the node before creating) */
	db_query("SELECT i.id, i.state, COALESCE(i.node_id, 0), i.desired FROM instances i"
	         " WHERE i.id IN (SELECT x::bigint FROM jsonb_array_elements_text($1::jsonb) x)"
	         " OR (i.node_id = $2 AND i.state = 'running')",
	         2, p, compare, n);
	free(idsdoc);
}

static void nodes_read(PGresult *res, enum rc rc, void *arg)
{
	char path[400], filt[200], *esc;
	(void)arg;

	if (rc != RC_OK || PQntuples(res) == 0) {
		busy = 0;
		return;
	}
	snprintf(filt, sizeof(filt), "{\"label\":[\"gpucloud.cluster=%s\"]}",
	         instances_cluster_id());
	esc = curl_easy_escape(NULL, filt, 0);
	snprintf(path, sizeof(path), "/containers/json?all=1&filters=%s", esc ? esc : "");
	curl_free(esc);
	pending = 1; /* held until every call is out */
	for (int i = 0; i < PQntuples(res); i++) {
		struct docker_engine *e = nodes_engine(strtoll(db_val(res, i, 0), NULL, 10));
		struct round_node *n;
		if (!e || !(n = calloc(1, sizeof(*n))))
			continue;
		n->id = strtoll(db_val(res, i, 0), NULL, 10);
		snprintf(n->name, sizeof(n->name), "%s", db_val(res, i, 1));
		pending++;
		if (!docker_request(e, "GET", path, NULL, NULL, 0, NULL, 10000, listed, n)) {
			free(n);
			pending--;
		}
	}
	one_done();
}

void reconcile_run(void)
{
	if (busy || !*instances_cluster_id())
		return;
	busy = 1;
	db_query("SELECT id, name FROM nodes ORDER BY id", 0, NULL, nodes_read, NULL);
}

/* cron: a round on the leader once the cluster id is known; until then it
 * asks again at the driver's period (the first round comes as soon as this
 * replica leads). */
static void on_cron(struct cron_section *s, void *arg)
{
	(void)arg;
	if (!leader_is() || !*instances_cluster_id()) {
		cron_soon(s, cfg.instance_tick_ms);
		return;
	}
	reconcile_run();
}

int reconcile_init(void)
{
	return cron_every("reconcile", cfg.reconcile_interval_ms, cfg.instance_tick_ms, on_cron,
	                  NULL)
	               ? 0
	               : -1;
}
