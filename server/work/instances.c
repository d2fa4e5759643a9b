/* instances.c — the instance kind of the leader's workload driver.
 *
 * Owns: the instance kind of the driver loop (driver.c runs its pass on the
 * leader every cfg.instance_tick_ms, sooner on EV_WORKLOAD_CHANGED and
 * EV_ALLOC_GRANTED): the pass reads the instances whose state and desired
 * state disagree, decide() starts one operation per instance, and every
 * state change goes through workload_set_state():
 *   launch  queued → pulling (images_ensure on the allocated node) →
 *           creating (the container spec of spec.c; the engine steps —
 *           the user's network, hardened create, start, inspect for
 *           ports — by driver.c's launcher) → running
 *   stop    → stopping (docker stop with a grace) → stopped, releasing the
 *           allocation request
 *   delete  remove the container, release → deleted
 * An operation whose process died (kill -9, leader change) is resumed from
 * the state in the database: a create with the deterministic name that
 * answers 409 inspects the existing container and reuses it when it is the
 * same instance with the same GPUs.
 * Does not own: the API (api_instances.c), the loop, the launcher and the
 * stop and remove calls (driver.c), the spec (spec.c), the state machine (workload.c), listing
 * engines against records (reconcile.c) or idle policy (reclaim.c).
 */
#include "work/instances.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "base/clock.h"
#include "base/config.h"
#include "base/events.h"
#include "base/log.h"
#include "db/db.h"
#include "engine/docker.h"
#include "engine/images.h"
#include "engine/nodes.h"
#include "storage/storage.h"
#include "work/driver.h"
#include "work/spec.h"
#include "work/workload.h"

enum op_kind { OP_LAUNCH, OP_STOP, OP_DELETE };

/* one engine operation in flight for one instance */
struct op {
	long long id;
	enum op_kind kind;
	long long node_id;  /* where the work happens */
	long long old_node; /* launch: where an earlier container may be */
	long long image_id;
	long long request_id; /* 0: none */
	int grace;            /* stop: seconds */
	int pending;          /* launch: record and image steps still out */
	double t_launch;      /* launch: monotonic ms at its start */
	int changed;          /* launch: rows the pulling write changed */
	char failed[400];     /* launch: why the image step failed */
	char name[96];        /* container name */
	char reason[300];
	struct driver_launch l;   /* launch: the engine steps (driver.c) */
	struct docker_call *call; /* stop, delete */
	struct event *pause;
	struct op *next;
};

static struct event_base *base;
static struct op *ops;
static int nops;

/* ---- state changes (workload.c) ---- */

#define Q WL_BIT(WL_QUEUED)
#define P WL_BIT(WL_PULLING)
#define C WL_BIT(WL_CREATING)
#define R WL_BIT(WL_RUNNING)
#define S WL_BIT(WL_STOPPING)

static void set_state(long long id, unsigned from, enum workload_state to, const char *reason,
                      unsigned flags, workload_set_cb cb, void *arg)
{
	struct workload_change c = {
		.id = id, .from = from, .to = to, .reason = reason, .flags = flags
	};

	workload_set_state(&c, cb, arg);
}

/* ---- identity ---- */

const char *instances_cluster_id(void)
{
	return driver_cluster_id();
}

void instances_container_name(long long id, char *out, size_t outlen)
{
	snprintf(out, outlen, "gc-%.8s-inst-%lld", driver_cluster_id(), id);
}

void instances_network_name(long long user_id, char *out, size_t outlen)
{
	snprintf(out, outlen, "gpucloud-%s-u%lld", driver_cluster_id(), user_id);
}

/* ---- operations ---- */

static struct op *op_find(long long id)
{
	for (struct op *o = ops; o; o = o->next)
		if (o->id == id)
			return o;
	return NULL;
}

int instances_op_busy(long long id)
{
	return op_find(id) != NULL;
}

int instances_launching(long long node_id)
{
	for (struct op *o = ops; o; o = o->next)
		if (o->kind == OP_LAUNCH && o->node_id == node_id)
			return 1;
	return 0;
}

static struct op *op_new(long long id, enum op_kind kind)
{
	struct op *o = calloc(1, sizeof(*o));

	if (!o)
		return NULL;
	o->id = id;
	o->kind = kind;
	instances_container_name(id, o->name, sizeof(o->name));
	o->next = ops;
	ops = o;
	nops++;
	return o;
}

static void op_free(struct op *o)
{
	struct op **pp;

	for (pp = &ops; *pp; pp = &(*pp)->next)
		if (*pp == o) {
			*pp = o->next;
			nops--;
			break;
		}
	if (o->pause)
		event_free(o->pause);
	driver_launch_release(&o->l);
	free(o);
}

static void op_end_cb(int changed, void *arg)
{
	(void)changed;
	op_free(arg);
}

/* The launch failed: record why and give the GPUs back. */
static void launch_fail(struct op *o, const char *why)
{
	set_state(o->id, Q | P | C, WL_FAILED, why, WL_RELEASE | WL_SETTLE, op_end_cb, o);
}

/* -- launch: running -- */

static void ran(PGresult *res, enum rc rc, void *arg)
{
	struct op *o = arg;

	if (rc != RC_OK || PQntuples(res) != 1 || strcmp(db_val(res, 0, 1), "0") == 0) {
		/* stopped or deleted meanwhile: the next tick stops it */
		op_free(o);
		return;
	}
	/* the engine's share (create, start, inspect) against the whole
	 * launch: the rest is ours (the benchmark reads this line) */
	log_msg(LOG_INFO, "instances", NULL,
	        "instance %lld: %s → running (container %.12s; launch %.1f ms, engine %.1f ms)",
	        o->id, db_val(res, 0, 0), o->l.cid, clock_now_ms() - o->t_launch,
	        o->l.t_eng1 - o->l.t_eng0);
	op_free(o);
}

/* launcher: started, ports read back: running, with its ports, in one
 * statement */
static void launch_running(void *arg, const char *ports)
{
	struct op *o = arg;
	char ids[24];
	const char *p[3];

	snprintf(ids, sizeof(ids), "%lld", o->id);
	p[0] = ids;
	p[1] = ports;
	p[2] = o->l.cid;
	db_query("WITH o AS (SELECT state FROM instances WHERE id = $1 FOR UPDATE),"
	         " d AS (DELETE FROM instance_ports WHERE instance_id = $1),"
	         " i AS (UPDATE instances SET state = 'running', reason = '', exit_code = NULL,"
	         "  container_id = $3, started_at = now(), stopped_at = NULL,"
	         "  last_activity_at = now(), idle_warning_at = NULL, idle_message = '',"
	         "  updated_at = now() WHERE id = $1 AND state IN ('pulling', 'creating')"
	         "  RETURNING id),"
	         " p AS (INSERT INTO instance_ports (instance_id, name, port, host, host_port)"
	         "  SELECT i.id, x.name, x.port, x.host, x.host_port FROM i,"
	         "  jsonb_to_recordset($2::jsonb) AS x(name text, port int, host text,"
	         "  host_port int) ON CONFLICT DO NOTHING)"
	         " SELECT (SELECT state FROM o), (SELECT count(*) FROM i)",
	         3, p, ran, o);
}

static void recorded(PGresult *res, enum rc rc, void *arg)
{
	struct op *o = arg;

	if (rc != RC_OK || PQntuples(res) != 1) {
		/* stopped or deleted meanwhile; the container stays for the
		 * stop/delete path (it is found by name) */
		op_free(o);
		return;
	}
	driver_launch_start(&o->l);
}

static void record_container(struct op *o)
{
	char ids[24];
	const char *p[2] = { ids, o->l.cid };

	snprintf(ids, sizeof(ids), "%lld", o->id);
	db_query("UPDATE instances SET container_id = $2, updated_at = now()"
	         " WHERE id = $1 AND state = 'creating' AND desired = 'running' RETURNING id",
	         2, p, recorded, o);
}

static void paused(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	record_container(arg);
}

/* Created: start it.  The container id is written with the running state
 * (one statement less on the way); a crash before that is resumed by name. */
static void launch_created(void *arg)
{
	struct op *o = arg;
	struct timeval tv;

	if (cfg.instance_test_pause_ms <= 0) {
		driver_launch_start(&o->l);
		return;
	}
	/* tests kill the process here: created, not recorded */
	log_msg(LOG_INFO, "instances", NULL,
	        "instance %lld: container %s created; pausing %d ms (test setting)", o->id, o->name,
	        cfg.instance_test_pause_ms);
	o->pause = evtimer_new(base, paused, o);
	tv.tv_sec = cfg.instance_test_pause_ms / 1000;
	tv.tv_usec = (cfg.instance_test_pause_ms % 1000) * 1000;
	if (!o->pause || evtimer_add(o->pause, &tv) < 0)
		record_container(o);
}

static void launch_failed(void *arg, const char *why)
{
	launch_fail(arg, why);
}

static const struct driver_launch_ops launch_ops = {
	.failed = launch_failed,
	.created = launch_created,
	.running = launch_running,
};

/* Both the record of the node (pulling) and the image on it (ensure) must
 * be there before the create: they run side by side, the later one goes on.
 * The record comes first for the reconciler: a container on a node the
 * record does not name is an orphan. */
static void launch_joined(struct op *o)
{
	if (--o->pending > 0)
		return;
	if (o->failed[0]) {
		if (o->changed <= 0)
			op_free(o);
		else
			launch_fail(o, o->failed);
		return;
	}
	if (o->changed <= 0) {
		op_free(o);
		return;
	}
	/* "creating" is written while the engine creates (the running write
	 * accepts either) */
	set_state(o->id, P | C, WL_CREATING, "", 0, NULL, NULL);
	o->l.ops = &launch_ops;
	o->l.arg = o;
	o->l.id = o->id;
	o->l.node_id = o->node_id;
	snprintf(o->l.name, sizeof(o->l.name), "%s", o->name);
	driver_launch_begin(&o->l);
}

static void image_ready(enum rc rc, const char *err, void *arg)
{
	struct op *o = arg;

	if (rc != RC_OK)
		snprintf(o->failed, sizeof(o->failed), "could not pull the image: %s",
		         err ? err : "error");
	launch_joined(o);
}

static void pulling_set(int changed, void *arg)
{
	struct op *o = arg;
	struct docker_engine *e;
	char path[200];

	o->changed = changed;
	if (changed > 0 && o->old_node && o->old_node != o->node_id &&
	    (e = nodes_engine(o->old_node))) {
		/* started again on another node: the old container goes */
		snprintf(path, sizeof(path), "/containers/%s?force=1", o->name);
		docker_request(e, "DELETE", path, NULL, NULL, 0, NULL, 60000, docker_ignore, NULL);
	}
	launch_joined(o);
}

/* The create body from the launch row (see launch_row): the row's values
 * in a spec_input, the storage module's binds, and spec_build(). */
static int build_spec(struct op *o, const PGresult *res, char *err, size_t errlen)
{
	const char *username = db_val(res, 0, 2), *kind = db_val(res, 0, 11);
	json_t *cmd = db_val(res, 0, 5) ? json_loads(db_val(res, 0, 5), 0, NULL) : NULL;
	json_t *ports = json_loads(db_val(res, 0, 6), 0, NULL);
	json_t *env = json_loads(db_val(res, 0, 7), 0, NULL);
	json_t *gpus = json_loads(db_val(res, 0, 13), 0, NULL);
	json_t *binds = json_array(), *g, *groups = json_array();
	json_t *classes = json_loads(db_val(res, 0, 20) ? db_val(res, 0, 20) : "[]", 0, NULL);
	struct spec_gpu sg[64];
	struct spec_input in = { 0 };
	char csig[300] = "";
	size_t i;
	int rc = -1;

	spec_publish_host(db_val(res, 0, 14), cfg.node_app_bind, o->l.host, sizeof(o->l.host));
	o->l.user_id = strtoll(db_val(res, 0, 1), NULL, 10);
	snprintf(o->l.owner, sizeof(o->l.owner), "%s", username);
	instances_network_name(o->l.user_id, o->l.net, sizeof(o->l.net));
	if (!binds || !groups || storage_binds(o->l.user_id, username, binds, err, errlen) < 0)
		goto out;
	/* TensorBoards read the owner's logs only: no class areas */
	if (strcmp(kind, "tensorboard") != 0 &&
	    storage_class_binds(classes, binds, groups, csig, sizeof(csig), err, errlen) < 0)
		goto out;
	memset(sg, 0, sizeof(sg));
	json_array_foreach(gpus, i, g)
	{
		json_t *devs = json_object_get(g, "devices"), *dv;
		size_t d;
		struct spec_gpu *x = &sg[in.ngpus];
		if (in.ngpus >= (int)(sizeof(sg) / sizeof(sg[0])))
			break;
		x->uuid = json_string_value(json_object_get(g, "mig"))
		                  ? json_string_value(json_object_get(g, "mig"))
		                  : json_string_value(json_object_get(g, "uuid"));
		json_array_foreach(devs, d, dv)
		{
			if (x->ndevices < SPEC_MAX_DEVICES)
				x->devices[x->ndevices++] = json_string_value(dv);
		}
		in.ngpus++;
	}
	in.cluster = driver_cluster_id();
	in.kind = kind;
	in.id = o->id;
	in.name = o->name;
	in.owner = username;
	in.uid = storage_uid(o->l.user_id);
	in.image_id = strtoll(db_val(res, 0, 3), NULL, 10);
	in.image = db_val(res, 0, 4);
	in.cmd = cmd;
	/* a TensorBoard's variables are the platform's (api_tensorboards.c
	 * sets GPUCLOUD_LOGDIR); an instance's are its user's */
	if (strcmp(kind, "tensorboard") == 0)
		in.platform_env = env;
	else
		in.env = env;
	in.app_token = db_val(res, 0, 12);
	in.jupyter = spec_jupyter(db_val(res, 0, 19), ports);
	in.binds = binds;
	in.groups = groups;
	in.classes = csig;
	in.gpus = sg;
	in.app_ports = ports;
	in.host = o->l.host;
	in.network = o->l.net;
	in.cpu_millis = strtoll(db_val(res, 0, 8), NULL, 10);
	in.mem_mib = strtoll(db_val(res, 0, 9), NULL, 10);
	in.shm_mib = strtoll(db_val(res, 0, 10), NULL, 10);
	in.pids_limit = cfg.instance_pids_limit;
	o->l.spec = spec_build(&in, o->l.sig, sizeof(o->l.sig));
	if (!o->l.spec) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	o->l.app_ports = ports;
	ports = NULL; /* handed off */
	rc = 0;
out:
	json_decref(cmd);
	json_decref(ports);
	json_decref(env);
	json_decref(gpus);
	json_decref(binds);
	json_decref(groups);
	json_decref(classes);
	return rc;
}

/* Columns read for a launch: 0 id, 1 user_id, 2 username, 3 image_id,
 * 4 reference, 5 cmd (instance's, else the image's default), 6 app_ports,
 * 7 env, 8 cpu_millis, 9 mem_mib, 10 shm_mib, 11 kind, 12 app_token,
 * 13 GPUs [{uuid, idx, devices, mig}], 14 node url, 15 target node,
 * 16 old node, 17 state, 18 request state, 19 the image's framework,
 * 20 the class areas to mount (gc_class_mounts()). */
static void launch_row(PGresult *res, enum rc rc, void *arg)
{
	struct op *o = arg;
	char err[400];

	if (rc != RC_OK || PQntuples(res) != 1) {
		op_free(o);
		return;
	}
	if (strcmp(db_val(res, 0, 17), "queued") == 0 && db_val(res, 0, 18) &&
	    strcmp(db_val(res, 0, 18), "allocated") != 0) {
		op_free(o);
		return;
	}
	if (!db_val(res, 0, 3) || !db_val(res, 0, 4)) {
		launch_fail(o, "the instance's image was removed from the catalog");
		return;
	}
	if (!db_val(res, 0, 15)) {
		/* no GPUs and no node up: wait */
		set_state(o->id, Q, WL_QUEUED, "waiting for a node to be up", 0, op_end_cb, o);
		return;
	}
	if (!nodes_engine(strtoll(db_val(res, 0, 15), NULL, 10))) {
		/* this process has no client for the node yet (start-up): a later
		 * pass goes on */
		op_free(o);
		return;
	}
	o->image_id = strtoll(db_val(res, 0, 3), NULL, 10);
	o->node_id = strtoll(db_val(res, 0, 15), NULL, 10);
	o->old_node = db_val(res, 0, 16) ? strtoll(db_val(res, 0, 16), NULL, 10) : 0;
	if (build_spec(o, res, err, sizeof(err)) < 0) {
		launch_fail(o, err);
		return;
	}
	{
		struct workload_change c = { .id = o->id,
			                     .from = Q | P | C,
			                     .to = WL_PULLING,
			                     .reason = "",
			                     .flags = WL_PLACE,
			                     .node_id = o->node_id,
			                     .container_name = o->name };
		o->pending = 2;
		workload_set_state(&c, pulling_set, o);
		if (images_ensure(o->image_id, o->node_id, image_ready, o) < 0) {
			snprintf(o->failed, sizeof(o->failed), "out of memory");
			launch_joined(o);
		}
	}
}

static void op_launch(long long id)
{
	struct op *o = op_new(id, OP_LAUNCH);
	char ids[24];
	const char *p[1] = { ids };

	if (!o)
		return;
	o->t_launch = clock_now_ms();
	snprintf(ids, sizeof(ids), "%lld", id);
	db_query("SELECT i.id, i.user_id, u.username, i.image_id, im.reference,"
	         " COALESCE(i.cmd, im.default_cmd)::text, COALESCE(im.app_ports, '[]')::text,"
	         " i.env::text, i.cpu_millis, i.mem_mib, i.shm_mib, i.kind, i.app_token,"
	         " COALESCE((SELECT json_agg(json_build_object('uuid', g.uuid, 'idx', g.idx,"
	         "   'devices', g.devices, 'mig', m.uuid) ORDER BY x.first)"
	         "  FROM (SELECT s.gpu_id, s.mig_id, min(a.id) AS first FROM allocations a"
	         "   JOIN slices s ON s.id = a.slice_id"
	         "   WHERE a.request_id = i.request_id AND a.released_at IS NULL"
	         "   GROUP BY s.gpu_id, s.mig_id) x"
	         "  JOIN gpus g ON g.id = x.gpu_id LEFT JOIN gpu_mig m ON m.id = x.mig_id),"
	         "  '[]')::text,"
	         " n.url, t.node_id, i.node_id, i.state, r.state, im.framework,"
	         " gc_class_mounts(i.user_id)"
	         " FROM instances i JOIN users u ON u.id = i.user_id"
	         " LEFT JOIN images im ON im.id = i.image_id"
	         " LEFT JOIN alloc_requests r ON r.id = i.request_id"
	         " LEFT JOIN LATERAL (SELECT CASE WHEN i.request_id IS NOT NULL THEN"
	         "   (SELECT a.node_id FROM allocations a WHERE a.request_id = i.request_id"
	         "    AND a.released_at IS NULL ORDER BY a.id LIMIT 1)"
	         "  ELSE (SELECT n2.id FROM nodes n2 WHERE n2.health = 'up'"
	         "    AND n2.admin_state = 'active'"
	         "   ORDER BY COALESCE(n2.id = i.node_id, false) DESC,"
	         "    (SELECT count(*) FROM instances x WHERE x.node_id = n2.id"
	         "     AND x.state IN ('pulling', 'creating', 'running')), n2.id LIMIT 1)"
	         "  END AS node_id) t ON true"
	         " LEFT JOIN nodes n ON n.id = t.node_id"
	         " WHERE i.id = $1",
	         1, p, launch_row, o);
}

/* -- stop -- */

static void stop_end(struct op *o, enum workload_state to, const char *why)
{
	set_state(o->id, S, to, why ? why : (o->reason[0] ? o->reason : NULL),
	          WL_RELEASE | WL_SETTLE | WL_STOPPED_AT, op_end_cb, o);
}

static void stopped(struct docker_call *call, enum rc rc, int status, const char *body, size_t len,
                    const char *err, void *arg)
{
	struct op *o = arg;
	char why[400];

	(void)call;
	(void)body;
	(void)len;
	o->call = NULL;
	if (rc == RC_UNAVAILABLE) {
		snprintf(why, sizeof(why), "the node's engine is unreachable: %s", err);
		stop_end(o, WL_LOST, why);
		return;
	}
	if (rc != RC_OK || (status != 204 && status != 304 && status != 404))
		log_msg(LOG_WARN, "instances", NULL,
		        "instance %lld: the engine answered %d to stop (%s)", o->id, status,
		        rc_code(rc));
	stop_end(o, WL_STOPPED, NULL);
}

static void stopping_set(int changed, void *arg)
{
	struct op *o = arg;
	if (changed <= 0) {
		op_free(o);
		return;
	}
	if (!o->node_id) {
		stop_end(o, WL_STOPPED, NULL);
		return;
	}
	o->call = driver_container_stop(o->node_id, o->name, o->grace, stopped, o);
	if (!o->call)
		stop_end(o, WL_LOST, "the node's engine is not available");
}

static void op_stop(long long id, long long node_id, int grace, const char *reason)
{
	struct op *o = op_new(id, OP_STOP);

	if (!o)
		return;
	o->node_id = node_id;
	o->grace = grace;
	snprintf(o->reason, sizeof(o->reason), "%s", reason ? reason : "");
	set_state(id, R | P | C | S, WL_STOPPING, reason && *reason ? reason : NULL, 0,
	          stopping_set, o);
}

/* -- delete -- */

static void deleted(struct docker_call *call, enum rc rc, int status, const char *body, size_t len,
                    const char *err, void *arg)
{
	struct op *o = arg;

	(void)call;
	(void)body;
	(void)len;
	(void)err;
	o->call = NULL;
	if (rc != RC_OK || (status != 204 && status != 404))
		/* the reconciler removes it when the engine is back: a deleted
		 * instance's container is an orphan */
		log_msg(LOG_WARN, "instances", NULL,
		        "instance %lld: container not removed yet (%s, status %d)", o->id,
		        rc_code(rc), status);
	set_state(o->id, Q | WL_BIT(WL_STOPPED) | WL_BIT(WL_FAILED) | WL_BIT(WL_LOST) | R | S,
	          WL_DELETED, NULL, WL_RELEASE | WL_DELETED_AT | WL_CLEAR_CONTAINER, op_end_cb, o);
}

static void op_delete(long long id, long long node_id)
{
	struct op *o = op_new(id, OP_DELETE);

	if (!o)
		return;
	o->node_id = node_id;
	o->call = driver_container_remove(node_id, o->name, deleted, o);
	if (!o->call)
		deleted(NULL, node_id ? RC_UNAVAILABLE : RC_OK, node_id ? 0 : 404, "", 0,
		        "no engine", o);
}

/* ---- the driver's pass ---- */

static void decide(const PGresult *res, int i)
{
	long long id = strtoll(db_val(res, i, 0), NULL, 10);
	const char *state = db_val(res, i, 1), *desired = db_val(res, i, 2);
	const char *rstate = db_val(res, i, 3), *rwhy = db_val(res, i, 4);
	int preempt = strcmp(db_val(res, i, 5), "t") == 0;
	long long node = strtoll(db_val(res, i, 6), NULL, 10);
	int has_req = strcmp(db_val(res, i, 7), "t") == 0;
	char why[400];

	if (op_find(id))
		return;
	if (node && !nodes_engine(node) && strcmp(state, "queued") != 0)
		return; /* the node's client is not loaded yet (start-up): wait */
	if (strcmp(desired, "deleted") == 0) {
		if (strcmp(state, "running") == 0 || strcmp(state, "pulling") == 0 ||
		    strcmp(state, "creating") == 0)
			op_stop(id, node, 0, NULL);
		else
			op_delete(id, node);
		return;
	}
	if (strcmp(desired, "stopped") == 0) {
		if (strcmp(state, "queued") == 0)
			set_state(id, Q, WL_STOPPED, NULL, WL_RELEASE, NULL, NULL);
		else
			op_stop(id, node, cfg.instance_stop_grace, NULL);
		return;
	}
	/* desired running */
	if (strcmp(state, "queued") == 0) {
		if (has_req && strcmp(rstate, "allocated") != 0 && strcmp(rstate, "queued") != 0) {
			snprintf(why, sizeof(why), "the allocation request ended: %s",
			         *rwhy ? rwhy : rstate);
			set_state(id, Q, WL_FAILED, why, WL_RELEASE | WL_SETTLE, NULL, NULL);
			return;
		}
		if (!has_req || strcmp(rstate, "allocated") == 0)
			op_launch(id);
		return;
	}
	if (strcmp(state, "pulling") == 0 || strcmp(state, "creating") == 0) {
		/* an operation of a process that died: resume it */
		op_launch(id);
		return;
	}
	if (strcmp(state, "stopping") == 0) {
		op_stop(id, node, cfg.instance_stop_grace, NULL);
		return;
	}
	if (strcmp(state, "running") == 0 && has_req) {
		if (strcmp(rstate, "allocated") != 0) {
			snprintf(why, sizeof(why), "its GPUs were released: %s",
			         *rwhy ? rwhy : rstate);
			op_stop(id, node, cfg.instance_stop_grace, why);
		} else if (preempt) {
			op_stop(id, node, cfg.preempt_grace, "preempted by higher-priority work");
		}
	}
}

static const struct driver_kind kind = {
	.name = "instances",
	.first_ms = 50,
	.pass_sql = "SELECT i.id, i.state, i.desired, COALESCE(r.state::text, ''),"
	            " COALESCE(r.release_reason, ''), r.preempt_requested_at IS NOT NULL,"
	            " COALESCE(i.node_id, 0), i.request_id IS NOT NULL OR i.pool_id IS NOT NULL"
	            " FROM instances i LEFT JOIN alloc_requests r ON r.id = i.request_id"
	            " WHERE i.state IN ('pulling', 'creating', 'stopping')"
	            " OR (i.state = 'queued' AND (i.desired <> 'running' OR i.request_id IS NULL"
	            "  OR r.state <> 'queued'))"
	            " OR (i.state = 'running' AND (i.desired <> 'running'"
	            "  OR (i.request_id IS NOT NULL AND (r.state IS DISTINCT FROM 'allocated'"
	            "   OR r.preempt_requested_at IS NOT NULL))))"
	            " OR (i.desired = 'deleted' AND i.state IN ('stopped', 'failed', 'lost'))"
	            " ORDER BY i.id LIMIT 1000",
	.decide = decide,
};

void instances_kick(void)
{
	events_publish(EV_WORKLOAD_CHANGED);
}

int instances_init(struct event_base *b)
{
	static struct driver_kind k;

	base = b;
	k = kind;
	k.period_ms = cfg.instance_tick_ms;
	return driver_register(&k);
}

void instances_shutdown(void)
{
	driver_shutdown();
	/* operations may still have database callbacks queued: they stay
	 * allocated (and reachable) until the process exits; only their engine
	 * calls and pauses end here */
	for (struct op *o = ops; o; o = o->next) {
		if (o->call)
			docker_cancel(o->call);
		o->call = NULL;
		driver_launch_cancel(&o->l);
		if (o->pause)
			event_free(o->pause);
		o->pause = NULL;
	}
}
