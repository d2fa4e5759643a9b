/* driver.c — the workload driver loop (see driver.h).
 *
 * Owns: per kind, the cron section, the pass in flight (one at a time) and
 * the kick that came during it; the wake-up subscriptions; the cluster id;
 * the launches in flight and their engine steps.
 * Does not own: what a row means (the kind's decide()), state changes
 * (workload.c), leadership (db/leader.c).
 */
#include "work/driver.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/cron.h"
#include "base/events.h"
#include "base/log.h"
#include "db/db.h"
#include "db/leader.h"
#include "engine/nodes.h"

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

/* ---- the launcher ---- */

static struct driver_launch *launches;

void driver_engine_msg(enum rc rc, const char *body, size_t len, const char *err,
                       const char *fallback, char *out, size_t outlen)
{
	json_t *j = rc == RC_OK ? json_loadb(body, len, 0, NULL) : NULL;
	const char *m = json_string_value(json_object_get(j, "message"));

	snprintf(out, outlen, "%s",
	         rc != RC_OK ? (err && *err ? err : fallback)
	         : m         ? m
	                     : fallback);
	json_decref(j);
}

static void unlink_launch(struct driver_launch *l)
{
	struct driver_launch **pp;

	if (!l->linked)
		return;
	for (pp = &launches; *pp; pp = &(*pp)->next)
		if (*pp == l) {
			*pp = l->next;
			break;
		}
	l->linked = 0;
	l->next = NULL;
}

static void fail(struct driver_launch *l, const char *why)
{
	unlink_launch(l);
	l->ops->failed(l->arg, why);
}

static void do_create(struct driver_launch *l);
static void ensure_net(struct driver_launch *l);

static void inspected(struct docker_call *call, enum rc rc, int status, const char *body,
                      size_t len, const char *err, void *arg)
{
	struct driver_launch *l = arg;
	json_t *j, *ports, *out;
	size_t i;
	json_t *ap;
	char *doc;

	(void)call;
	l->call = NULL;
	l->t_eng1 = clock_now_ms();
	if (rc != RC_OK || status != 200) {
		char msg[300];
		driver_engine_msg(rc, body, len, err, "could not inspect the container", msg,
		                  sizeof(msg));
		fail(l, msg);
		return;
	}
	j = json_loadb(body, len, 0, NULL);
	ports = json_object_get(json_object_get(j, "NetworkSettings"), "Ports");
	out = json_array();
	json_array_foreach(l->app_ports, i, ap)
	{
		char key[32];
		json_t *b;
		snprintf(key, sizeof(key), "%lld/tcp",
		         (long long)json_integer_value(json_object_get(ap, "port")));
		b = json_array_get(json_object_get(ports, key), 0);
		if (!json_string_value(json_object_get(b, "HostPort")))
			continue;
		json_array_append_new(
		        out,
		        json_pack("{s:O, s:O, s:s, s:I}", "name", json_object_get(ap, "name"),
		                  "port", json_object_get(ap, "port"), "host", l->host, "host_port",
		                  (json_int_t)strtol(
		                          json_string_value(json_object_get(b, "HostPort")), NULL,
		                          10)));
	}
	json_decref(j);
	doc = json_dumps(out, JSON_COMPACT);
	json_decref(out);
	unlink_launch(l);
	l->ops->running(l->arg, doc ? doc : "[]");
	free(doc);
}

static void started(struct docker_call *call, enum rc rc, int status, const char *body, size_t len,
                    const char *err, void *arg)
{
	struct driver_launch *l = arg;
	struct docker_engine *e = nodes_engine(l->node_id);
	char path[200], msg[300];

	(void)call;
	l->call = NULL;
	if (rc != RC_OK || (status != 204 && status != 304)) {
		driver_engine_msg(rc, body, len, err, "the engine could not start the container",
		                  msg, sizeof(msg));
		fail(l, msg);
		return;
	}
	if (json_array_size(l->app_ports) == 0) {
		/* nothing published: nothing to read back */
		inspected(NULL, RC_OK, 200, "{}", 2, "", l);
		return;
	}
	snprintf(path, sizeof(path), "/containers/%s/json", l->cid);
	l->call =
	        e ? docker_request(e, "GET", path, NULL, NULL, 0, NULL, 30000, inspected, l) : NULL;
	if (!l->call)
		fail(l, "the node's engine is not available");
}

void driver_launch_start(struct driver_launch *l)
{
	struct docker_engine *e = nodes_engine(l->node_id);
	char path[200];

	snprintf(path, sizeof(path), "/containers/%s/start", l->cid);
	l->call =
	        e ? docker_request(e, "POST", path, NULL, NULL, 0, NULL, 60000, started, l) : NULL;
	if (!l->call)
		fail(l, "the node's engine is not available");
}

static void removed_for_recreate(struct docker_call *call, enum rc rc, int status, const char *body,
                                 size_t len, const char *err, void *arg)
{
	struct driver_launch *l = arg;
	char msg[300];

	(void)call;
	l->call = NULL;
	if (rc != RC_OK || (status != 204 && status != 404)) {
		driver_engine_msg(rc, body, len, err, "could not remove the old container", msg,
		                  sizeof(msg));
		fail(l, msg);
		return;
	}
	do_create(l);
}

/* The name is taken: ours from an earlier try (same instance, image and
 * GPUs) is reused; anything else of ours is replaced once. */
static void existing(struct docker_call *call, enum rc rc, int status, const char *body, size_t len,
                     const char *err, void *arg)
{
	struct driver_launch *l = arg;
	struct docker_engine *e = nodes_engine(l->node_id);
	json_t *j, *labels;
	const char *cl, *sig, *id;
	char msg[300], path[200];

	(void)call;
	l->call = NULL;
	if (rc != RC_OK || status != 200) {
		driver_engine_msg(rc, body, len, err, "could not inspect the existing container",
		                  msg, sizeof(msg));
		fail(l, msg);
		return;
	}
	j = json_loadb(body, len, 0, NULL);
	labels = json_object_get(json_object_get(j, "Config"), "Labels");
	cl = json_string_value(json_object_get(labels, "gpucloud.cluster"));
	sig = json_string_value(json_object_get(labels, "gpucloud.sig"));
	id = json_string_value(json_object_get(j, "Id"));
	if (!cl || strcmp(cl, driver_cluster_id()) != 0 || !id) {
		json_decref(j);
		fail(l, "a container of another owner holds this instance's name");
		return;
	}
	if (sig && strcmp(sig, l->sig) == 0) {
		snprintf(l->cid, sizeof(l->cid), "%s", id);
		json_decref(j);
		log_msg(LOG_INFO, "instances", NULL, "instance %lld: reusing container %.12s",
		        l->id, l->cid);
		l->ops->created(l->arg);
		return;
	}
	json_decref(j);
	if (l->recreated++ || !e) {
		fail(l, "could not replace the instance's old container");
		return;
	}
	/* other GPUs or another image: the old container cannot be reused */
	snprintf(path, sizeof(path), "/containers/%s?force=1", l->name);
	l->call = docker_request(e, "DELETE", path, NULL, NULL, 0, NULL, 60000,
	                         removed_for_recreate, l);
	if (!l->call)
		fail(l, "the node's engine is not available");
}

static void created(struct docker_call *call, enum rc rc, int status, const char *body, size_t len,
                    const char *err, void *arg)
{
	struct driver_launch *l = arg;
	struct docker_engine *e = nodes_engine(l->node_id);
	json_t *j;
	char msg[300], path[200];

	(void)call;
	l->call = NULL;
	if (rc == RC_OK && status == 409 && e) {
		snprintf(path, sizeof(path), "/containers/%s/json", l->name);
		l->call = docker_request(e, "GET", path, NULL, NULL, 0, NULL, 30000, existing, l);
		if (!l->call)
			fail(l, "the node's engine is not available");
		return;
	}
	if (rc == RC_OK && status == 404 && !l->netretried++) {
		/* the reconciler removed the (then empty) network between our
		 * ensure and this create: make it again, once */
		ensure_net(l);
		return;
	}
	if (rc != RC_OK || status != 201) {
		driver_engine_msg(rc, body, len, err, "the engine refused to create the container",
		                  msg, sizeof(msg));
		fail(l, msg);
		return;
	}
	j = json_loadb(body, len, 0, NULL);
	snprintf(l->cid, sizeof(l->cid), "%s",
	         json_string_value(json_object_get(j, "Id"))
	                 ? json_string_value(json_object_get(j, "Id"))
	                 : "");
	json_decref(j);
	if (!l->cid[0] || strspn(l->cid, "0123456789abcdef") != strlen(l->cid)) {
		fail(l, "the engine returned no container id");
		return;
	}
	l->ops->created(l->arg);
}

static void do_create(struct driver_launch *l)
{
	struct docker_engine *e = nodes_engine(l->node_id);
	char path[200], *body = json_dumps(l->spec, JSON_COMPACT);

	if (!l->t_eng0)
		l->t_eng0 = clock_now_ms();
	snprintf(path, sizeof(path), "/containers/create?name=%s", l->name);
	l->call = e && body ? docker_request(e, "POST", path, "application/json", body,
	                                     strlen(body), NULL, 60000, created, l)
	                    : NULL;
	free(body);
	if (!l->call)
		fail(l, "the node's engine is not available");
}

/* -- launch: the user's network on the node --
 *
 * Tenant isolation (SPEC §14): every user has one bridge network per node
 * (instances_network_name), made here on first use and removed by the
 * reconciler once no container of ours refers to it.  Within it the
 * user's containers reach each other (several instances of one job);
 * Docker's DOCKER-ISOLATION chains drop traffic between bridge networks,
 * so no other user's container is reachable.  This works without
 * br_netfilter, which one shared network with enable_icc=false would
 * need.  Published app ports are bound to an address containers cannot
 * reach as the node (127.0.0.1 on unix:// nodes; cfg.node_app_bind or
 * the node's address on tcp:// nodes, which the node's firewall must
 * keep to the control plane — README, "network isolation").
 * Two launches for one user and node share one create (netwait); a 409
 * (the name exists) is success. */
static void net_ensured(struct docker_call *call, enum rc rc, int status, const char *body,
                        size_t len, const char *err, void *arg)
{
	struct driver_launch *l = arg, *x, *next;
	char msg[420] = "";
	int ok = rc == RC_OK && (status == 201 || status == 409);

	(void)call;
	l->call = NULL;
	l->netcall = 0;
	if (!ok) {
		char m[200];
		driver_engine_msg(rc, body, len, err, "error", m, sizeof(m));
		snprintf(msg, sizeof(msg), "could not create network '%s' on the node: %s", l->net,
		         m);
	}
	for (x = launches; x; x = next) {
		next = x->next;
		if (x == l || !x->netwait || x->node_id != l->node_id ||
		    strcmp(x->net, l->net) != 0)
			continue;
		x->netwait = 0;
		if (ok)
			do_create(x);
		else
			fail(x, msg);
	}
	if (ok)
		do_create(l);
	else
		fail(l, msg);
}

static void ensure_net(struct driver_launch *l)
{
	struct docker_engine *e = nodes_engine(l->node_id);
	char uid[24], *body;
	json_t *j;

	for (struct driver_launch *x = launches; x; x = x->next)
		if (x != l && x->netcall && x->node_id == l->node_id &&
		    strcmp(x->net, l->net) == 0) {
			l->netwait = 1;
			return;
		}
	snprintf(uid, sizeof(uid), "%lld", l->user_id);
	j = json_pack("{s:s, s:b, s:s, s:{s:s, s:s, s:s, s:s},"
	              " s:{s:s}}",
	              "Name", l->net, "CheckDuplicate", 1, "Driver", "bridge", "Labels",
	              "gpucloud.cluster", driver_cluster_id(), "gpucloud.kind", "network",
	              "gpucloud.owner", l->owner, "gpucloud.user", uid, "Options",
	              "com.docker.network.bridge.enable_icc", "true");
	body = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	l->call = e && body ? docker_request(e, "POST", "/networks/create", "application/json",
	                                     body, strlen(body), NULL, 30000, net_ensured, l)
	                    : NULL;
	free(body);
	if (!l->call) {
		fail(l, "the node's engine is not available");
		return;
	}
	l->netcall = 1;
}

void driver_launch_begin(struct driver_launch *l)
{
	if (!l->linked) {
		l->next = launches;
		launches = l;
		l->linked = 1;
	}
	ensure_net(l);
}

void driver_launch_cancel(struct driver_launch *l)
{
	if (l->call)
		docker_cancel(l->call);
	l->call = NULL;
	unlink_launch(l);
}

void driver_launch_release(struct driver_launch *l)
{
	unlink_launch(l);
	json_decref(l->spec);
	json_decref(l->app_ports);
	l->spec = l->app_ports = NULL;
}

/* ---- the end of a container ---- */

struct docker_call *driver_container_stop(long long node_id, const char *name, int grace,
                                          docker_cb cb, void *arg)
{
	struct docker_engine *e = node_id ? nodes_engine(node_id) : NULL;
	char path[200];

	if (!e)
		return NULL;
	snprintf(path, sizeof(path), "/containers/%s/stop?t=%d", name, grace);
	return docker_request(e, "POST", path, NULL, NULL, 0, NULL, (grace + 30) * 1000, cb, arg);
}

struct docker_call *driver_container_remove(long long node_id, const char *name, docker_cb cb,
                                            void *arg)
{
	struct docker_engine *e = node_id ? nodes_engine(node_id) : NULL;
	char path[200];

	if (!e)
		return NULL;
	snprintf(path, sizeof(path), "/containers/%s?force=1&v=1", name);
	return docker_request(e, "DELETE", path, NULL, NULL, 0, NULL, 60000, cb, arg);
}
