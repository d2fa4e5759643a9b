/* api_instances.c — /instances (create, list, start, stop, restart,
 * delete, save as image, logs, usage) and /idle-policies.
 *
 * Handlers only write records and desired states (and queue allocation
 * requests, in the same statement as the instance); the driver on the
 * scheduler leader (instances.c) does the engine work.  Logs, usage,
 * restart and save talk to the instance's node directly, on any replica.
 * A user sees and acts on their own instances only (admins on all);
 * someone else's instance is "not found".
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <http_parser.h>

#include "api/api.h"
#include "api/admit.h"
#include "auth/auth.h"
#include "base/config.h"
#include "base/events.h"
#include "db/db.h"
#include "engine/docker.h"
#include "engine/images.h"
#include "base/log.h"
#include "engine/nodes.h"
#include "work/reclaim.h"

/* A queued request's start estimate, or why it has none (sched/eta.h). */
#define REQ_ETA "'eta', " DB_TS("r.eta_at") ", 'eta_reason', NULLIF(r.eta_reason, '')"

/* One instance as a JSON document (text), built by the database. */
#define INST_JSON                                                                                                                                         \
	"json_build_object('id', i.id, 'name', i.name, 'user_id', i.user_id, 'username',"                                                                 \
	" u.username, 'kind', i.kind, 'image_id', i.image_id, 'image', im.reference,"                                                                     \
	" 'image_name', im.display_name, 'app_ports', COALESCE(im.app_ports, '[]'), 'cmd', i.cmd,"                                                        \
	" 'env', i.env, 'pool', p.name, 'pool_id', i.pool_id, 'slices', i.slices,"                                                                        \
	" 'class', CASE WHEN cls.id IS NULL THEN NULL ELSE json_build_object('id', cls.id,"                                                               \
	"  'name', cls.name, 'code', cls.code) END,"                                                                                                      \
	" 'cpu_millis', i.cpu_millis, 'mem_mib', i.mem_mib, 'shm_mib', i.shm_mib,"                                                                        \
	" 'priority', i.priority, 'state', i.state, 'desired', i.desired, 'reason', i.reason,"                                                            \
	" 'exit_code', i.exit_code, 'node', n.name, 'node_id', i.node_id,"                                                                                \
	" 'container_name', NULLIF(i.container_name, ''), 'container_id', i.container_id,"                                                                \
	" 'ports', COALESCE((SELECT json_agg(json_build_object('name', ip.name, 'port', ip.port,"                                                         \
	"  'host', ip.host, 'host_port', ip.host_port) ORDER BY ip.name) FROM instance_ports ip"                                                          \
	"  WHERE ip.instance_id = i.id), '[]'),"                                                                                                          \
	" 'request', CASE WHEN r.id IS NULL THEN NULL ELSE json_build_object('id', r.id,"                                                                 \
	"  'state', r.state, 'reason_code', r.reason_code, 'reason', r.reason, 'position',"                                                               \
	"  r.position, " REQ_ETA ", 'preempt_requested_at', " DB_TS(                                                                                      \
	        "r.preempt_requested_at") ") END,"                                                                                                        \
	                                  " 'gpus', COALESCE((SELECT "                                                                                    \
	                                  "json_agg(json_build_object('uuid', g.uuid, 'index', "                                                          \
	                                  "g.idx,"                                                                                                        \
	                                  "  'model', g.model, 'simulated', g.simulated, 'slot', "                                                        \
	                                  "s.slot, 'util_pct', " GPU_UTIL_NOW ") ORDER BY a.id)"                                                          \
	                                  "  FROM allocations a JOIN slices s ON s.id = "                                                                 \
	                                  "a.slice_id JOIN gpus g ON g.id = s.gpu_id"                                                                     \
	                                  "  WHERE a.request_id = i.request_id AND a.released_at "                                                        \
	                                  "IS NULL), '[]'),"                                                                                              \
	                                  " 'idle_warning_at', " DB_TS(                                                                                   \
	                                          "i.idle_warning_at") ", 'idle_message',"                                                                \
	                                                               " NULLIF(i.idle_message, "                                                         \
	                                                               "''), "                                                                            \
	                                                               "'last_activity_at',"                                                              \
	                                                               " " DB_TS(                                                                         \
	                                                                       "i.last_activity_"                                                         \
	                                                                       "at") ","                                                                  \
	                                                                             " 'created_"                                                         \
	                                                                             "at',"                                                               \
	                                                                             " " DB_TS(                                                           \
	                                                                                     "i"                                                          \
	                                                                                     "."                                                          \
	                                                                                     "c"                                                          \
	                                                                                     "r"                                                          \
	                                                                                     "e"                                                          \
	                                                                                     "a"                                                          \
	                                                                                     "t"                                                          \
	                                                                                     "e"                                                          \
	                                                                                     "d"                                                          \
	                                                                                     "_"                                                          \
	                                                                                     "a"                                                          \
	                                                                                     "t") ", 'started_at', " DB_TS("i."                           \
	                                                                                                                   "sta"                          \
	                                                                                                                   "rte"                          \
	                                                                                                                   "d_"                           \
	                                                                                                                   "at") ","                      \
	                                                                                                                         " 'stopped_at', " DB_TS( \
	                                                                                                                                 "i.stopped_at") ")::text"

#define INST_FROM                                                                                  \
	" FROM instances i JOIN users u ON u.id = i.user_id"                                       \
	" LEFT JOIN images im ON im.id = i.image_id LEFT JOIN pools p ON p.id = i.pool_id"         \
	" LEFT JOIN nodes n ON n.id = i.node_id LEFT JOIN alloc_requests r ON r.id = i.request_id" \
	" LEFT JOIN classes cls ON cls.id = i.class_id"

/* An audit target "instance:<id>" (the trigger of 0035 finds its class
 * from it), in a buffer that lives as long as the enclosing block. */
static const char *instance_target(char *buf, size_t len, const char *id)
{
	snprintf(buf, len, "instance:%s", id ? id : "");
	return buf;
}
#define INSTANCE_TARGET(id) instance_target((char[48]){ 0 }, 48, (id))

static int is_admin(const struct http_req *r)
{
	return r->auth->role == ROLE_ADMIN;
}

/* The caller's id as a parameter, or NULL for admins (they see all). */
static const char *owner_param(struct http_req *r, char *buf, size_t len)
{
	snprintf(buf, len, "%lld", (long long)r->auth->user_id);
	return is_admin(r) ? NULL : buf;
}

/* ---- read ---- */

static void list_done(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;
	int n, limit = (int)(intptr_t)r->data;
	json_t *items, *out;

	r->data = NULL;
	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "");
		return;
	}
	n = PQntuples(res);
	items = json_array();
	for (int i = 0; i < n && i < limit; i++)
		json_array_append_new(items, json_loads(db_val(res, i, 1), 0, NULL));
	out = json_pack("{s:o}", "items", items);
	json_object_set_new(out, "next_cursor",
	                    n > limit ? json_string(db_val(res, limit - 1, 0)) : json_null());
	http_reply_json(r, 200, out);
}

static void list(struct http_req *r)
{
	int limit;
	long long cursor;
	char all[8], uid[24], cur[24], lim[16];
	const char *p[3];
	long na;

	if (api_page(r, 100, 1000, &limit, &cursor) < 0)
		return;
	if ((na = api_query(r, "all", all, sizeof(all))) == -2)
		return;
	snprintf(uid, sizeof(uid), "%lld", (long long)r->auth->user_id);
	snprintf(cur, sizeof(cur), "%lld", cursor);
	snprintf(lim, sizeof(lim), "%d", limit + 1);
	p[0] = is_admin(r) && na >= 0 && strcmp(all, "0") != 0 ? NULL : uid;
	p[1] = cursor ? cur : NULL;
	p[2] = lim;
	r->data = (void *)(intptr_t)limit;
	db_query("SELECT i.id, " INST_JSON INST_FROM
	         " WHERE i.state <> 'deleted' AND ($1::bigint IS NULL OR i.user_id = $1::bigint)"
	         " AND ($2::bigint IS NULL OR i.id < $2::bigint) ORDER BY i.id DESC LIMIT $3::int",
	         3, p, list_done, r);
}

static void one_reply(PGresult *res, enum rc rc, struct http_req *r, int status)
{
	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "");
		return;
	}
	if (PQntuples(res) != 1) {
		http_reply_error(r, RC_NOTFOUND, NULL, "no such instance");
		return;
	}
	http_reply_json(r, status, json_loads(db_val(res, 0, 0), 0, NULL));
}

static void one_200(PGresult *res, enum rc rc, void *arg)
{
	one_reply(res, rc, arg, 200);
}

static void one_202(PGresult *res, enum rc rc, void *arg)
{
	one_reply(res, rc, arg, 202);
	/* accepted work: the reply shows the instance as the request left it
	 * (queued, stopping...); only then the scheduler and the driver go */
	events_publish(EV_ALLOC_CHANGED);    /* a pass of the scheduler... */
	events_publish(EV_WORKLOAD_CHANGED); /* ...and of the driver, on the leader */
}

static void reply_instance(struct http_req *r, const char *id, int status)
{
	char uid[24];
	const char *p[2] = { id, owner_param(r, uid, sizeof(uid)) };

	db_query("SELECT " INST_JSON INST_FROM " WHERE i.id = $1 AND i.state <> 'deleted'"
	         " AND ($2::bigint IS NULL OR i.user_id = $2::bigint)",
	         2, p, status == 202 ? one_202 : one_200, r);
}

static void get(struct http_req *r)
{
	long long id;
	char ids[24];

	if (api_id(r, "id", &id) < 0)
		return;
	snprintf(ids, sizeof(ids), "%lld", id);
	reply_instance(r, ids, 200);
}

/* ---- create ---- */

struct create_ctx {
	json_t *body;
	char id[24];
	struct admit fit;
};

static void create_free(void *p)
{
	struct create_ctx *c = p;

	json_decref(c->body);
	free(c);
}

static const struct jfield create_spec[] = {
	{ "name", J_STRING, 1, 63 },     { "image_id", J_INT, 1, 0 },   { "pool", J_STRING, 0, 63 },
	{ "slices", J_INT, 0, 0 },       { "cpu_millis", J_INT, 0, 0 }, { "mem_mib", J_INT, 0, 0 },
	{ "shm_mib", J_INT, 0, 0 },      { "cmd", J_ARRAY, 0, 64 },     { "env", J_OBJECT, 0, 0 },
	{ "priority", J_STRING, 0, 16 }, { "class", J_INT, 0, 0 },      { NULL, 0, 0, 0 },
};

static int name_ok(const char *s, size_t max)
{
	size_t n = strlen(s);

	if (n == 0 || n > max || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= '0' && s[0] <= '9')))
		return 0;
	return strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789._-") == n;
}

static int env_key_ok(const char *k)
{
	size_t n = strlen(k);

	if (n == 0 || n > 128 || (k[0] >= '0' && k[0] <= '9'))
		return 0;
	return strspn(k, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") == n;
}

static long long int_or(json_t *body, const char *name, long long def)
{
	json_t *v = json_object_get(body, name);

	return json_is_integer(v) ? (long long)json_integer_value(v) : def;
}

static void created(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;

	if (rc == RC_CONFLICT) {
		http_reply_error(r, RC_CONFLICT, "pick another name, or delete the other instance",
		                 "you already have an instance with this name");
		return;
	}
	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "could not create the instance");
		return;
	}
	if (PQntuples(res) == 1 && !db_val(res, 0, 0) && db_val(res, 0, 2)) {
		/* no quota would ever admit it (0015) */
		http_reply_error(r, RC_FORBIDDEN,
		                 "an admin sets a quota for you or a default for your role", "%s",
		                 db_val(res, 0, 2));
		return;
	}
	if (PQntuples(res) == 1 && !db_val(res, 0, 0) && db_val(res, 0, 1)) {
		http_reply_error(r, RC_CONFLICT,
		                 "stop another CPU-only instance, or ask for less CPU or memory",
		                 "%s", db_val(res, 0, 1));
		return;
	}
	if (PQntuples(res) != 1 || !db_val(res, 0, 0)) {
		http_reply_error(r, RC_NOTFOUND, "GET /api/v1/images and /api/v1/pools list them",
		                 "no such image or pool (or the image is not available to you)");
		return;
	}
	auth_audit(r, r->auth, "instance.create", INSTANCE_TARGET(db_val(res, 0, 0)), NULL);
	reply_instance(r, db_val(res, 0, 0), 202);
}

static void create_insert(struct http_req *r)
{
	struct create_ctx *c = r->data;
	json_t *b = c->body;
	char uid[24], img[24], sl[16], cpu[24], mem[24], shm[24], cls[24];
	char *cmd = NULL, *env = NULL;
	const char *p[13];
	json_t *e = json_object_get(b, "env");

	snprintf(uid, sizeof(uid), "%lld", (long long)r->auth->user_id);
	snprintf(img, sizeof(img), "%lld", int_or(b, "image_id", 0));
	snprintf(sl, sizeof(sl), "%lld", int_or(b, "slices", c->fit.pool ? 1 : 0));
	snprintf(cls, sizeof(cls), "%lld", c->fit.class_id);
	snprintf(cpu, sizeof(cpu), "%lld", int_or(b, "cpu_millis", 1000));
	snprintf(mem, sizeof(mem), "%lld", int_or(b, "mem_mib", 1024));
	snprintf(shm, sizeof(shm), "%lld", int_or(b, "shm_mib", 64));
	if (json_is_array(json_object_get(b, "cmd")) && json_array_size(json_object_get(b, "cmd")))
		cmd = json_dumps(json_object_get(b, "cmd"), JSON_COMPACT);
	env = json_is_object(e) ? json_dumps(e, JSON_COMPACT) : NULL;
	p[0] = uid;
	p[1] = img;
	p[2] = c->fit.pool; /* a class's work: its pool (admit.h) */
	p[3] = json_string_value(json_object_get(b, "name"));
	p[4] = sl;
	p[5] = cpu;
	p[6] = mem;
	p[7] = shm;
	p[8] = cmd;
	p[9] = env ? env : "{}";
	p[10] = json_string_value(json_object_get(b, "priority"))
	                ? json_string_value(json_object_get(b, "priority"))
	                : "normal";
	p[11] = auth_role_name(r->auth->role);
	p[12] = c->fit.class_id ? cls : NULL;
	/* the instance and its allocation request in one statement: both or
	 * neither */
	db_query("WITH v AS (SELECT nextval('instances_id_seq') AS iid),"
	         " img AS (SELECT id, cuda_min FROM images WHERE id = $2 AND (owner_id = $1"
	         "  OR (owner_id IS NULL AND ($12 = 'admin' OR (verified AND"
	         "  (visibility = 'everyone' OR $12::user_role = ANY (vis_roles)"
	         "  OR gc_in_any_class($1, vis_classes))))))),"
	         " pl AS (SELECT id FROM pools WHERE name = $3),"
	         /* CPU-only: the user's tightest CPU and memory quotas (0008) */
	         " cq AS (SELECT gc_cpu_only_block_reason($1, NULL, $6, $7) AS why"
	         "  WHERE $3::text IS NULL),"
	         /* a pool: refused at once when no quota would ever admit it (in
	          * a class: the class's limits, checked by admit.c) */
	         " rq AS (SELECT gc_request_refusal($1, pl.id, $5, $6, $7) AS why FROM pl"
	         "  WHERE $13::bigint IS NULL),"
	         /* every instance asks the scheduler: CPU-only ones for cpu and
	          * memory on a node (no pool, no slices) */
	         " req AS (INSERT INTO alloc_requests (user_id, pool_id, owner_kind, owner_id,"
	         "  priority, slices, cpu_millis, mem_mib, cuda_min, class_id)"
	         "  SELECT $1, pl.id, 'instance', v.iid::text, $11::alloc_priority,"
	         "  CASE WHEN pl.id IS NULL THEN 0 ELSE $5::int END, $6, $7,"
	         "  CASE WHEN pl.id IS NULL THEN 0 ELSE img.cuda_min END, $13::bigint"
	         "  FROM v CROSS JOIN img LEFT JOIN pl ON true"
	         "  WHERE ($3::text IS NULL OR pl.id IS NOT NULL)"
	         "  AND NOT EXISTS (SELECT 1 FROM cq WHERE why IS NOT NULL)"
	         "  AND NOT EXISTS (SELECT 1 FROM rq WHERE why IS NOT NULL) RETURNING id),"
	         " ins AS (INSERT INTO instances (id, user_id, name, image_id, pool_id, slices,"
	         "  cpu_millis, mem_mib, shm_mib, cmd, env, priority, request_id, container_name,"
	         "  class_id)"
	         "  SELECT v.iid, $1, $4, img.id, (SELECT id FROM pl), CASE WHEN $3::text IS NULL"
	         "  THEN 0 ELSE $5::int END, $6, $7, $8, $9::jsonb, $10::jsonb,"
	         "  $11::alloc_priority, (SELECT id FROM req),"
	         "  'gc-' || substr((SELECT cluster_id FROM cluster_identity), 1, 8) || '-inst-'"
	         "  || v.iid, $13::bigint"
	         "  FROM v, img WHERE ($3::text IS NULL OR EXISTS (SELECT 1 FROM pl))"
	         "  AND NOT EXISTS (SELECT 1 FROM cq WHERE why IS NOT NULL)"
	         "  AND NOT EXISTS (SELECT 1 FROM rq WHERE why IS NOT NULL) RETURNING id)"
	         " SELECT (SELECT id FROM ins), (SELECT why FROM cq), (SELECT why FROM rq)",
	         13, p, created, r);
	free(cmd);
	free(env);
}

static void create_blocked(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;
	struct create_ctx *c = r->data;
	json_t *b = c->body;

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "");
		return;
	}
	if (db_val(res, 0, 0)) {
		http_reply_error(r, RC_CONFLICT, "free some space in your home, then try again",
		                 "%s", db_val(res, 0, 0));
		return;
	}
	/* refused at once when no limit would ever admit it or no node could
	 * ever hold it */
	c->fit.pool = json_string_value(json_object_get(b, "pool"));
	c->fit.class_id = int_or(b, "class", 0);
	c->fit.image_id = int_or(b, "image_id", 0);
	c->fit.slices = (int)int_or(b, "slices", c->fit.pool || c->fit.class_id ? 1 : 0);
	c->fit.nodes = 1;
	c->fit.cpu = int_or(b, "cpu_millis", 1000);
	c->fit.mem = int_or(b, "mem_mib", 1024);
	c->fit.ok = create_insert;
	admit_check(r, &c->fit);
}

static void storage_check(struct http_req *r, db_cb cb)
{
	char uid[24];
	const char *p[1] = { uid };

	snprintf(uid, sizeof(uid), "%lld", (long long)r->auth->user_id);
	db_query("SELECT gc_storage_block_reason($1)", 1, p, cb, r);
}

static void create(struct http_req *r)
{
	json_t *body = api_json_body(r, create_spec), *v;
	struct create_ctx *c;
	const char *prio, *k;
	size_t i;
	int has_pool;

	if (!body)
		return;
	/* a class's work runs in the class's pool (admit.c) */
	has_pool = json_is_string(json_object_get(body, "pool")) ||
	           json_is_integer(json_object_get(body, "class"));
	prio = json_string_value(json_object_get(body, "priority"));
	if (json_is_integer(json_object_get(body, "class")) && int_or(body, "class", 0) < 1) {
		http_reply_error(r, RC_NOTFOUND, "GET /api/v1/classes lists your classes",
		                 "no such class (or you are not in it)");
		goto bad;
	}
	if (!name_ok(json_string_value(json_object_get(body, "name")), 63)) {
		http_reply_error(
		        r, RC_INVALID, "e.g. \"my-notebook\"",
		        "name must be 1 to 63 lower-case letters, digits, '.', '_' or '-', "
		        "starting with a letter or digit");
		goto bad;
	}
	if (prio && strcmp(prio, "normal") && strcmp(prio, "scavenger") && strcmp(prio, "exam")) {
		http_reply_error(r, RC_INVALID, NULL, "priority must be exam, normal or scavenger");
		goto bad;
	}
	if (prio && strcmp(prio, "exam") == 0 && !(r->auth->role & (ROLE_TEACHER | ROLE_ADMIN))) {
		http_reply_error(r, RC_FORBIDDEN, NULL,
		                 "only teachers and admins may ask for exam priority");
		goto bad;
	}
	if (json_object_get(body, "slices") && !json_is_null(json_object_get(body, "slices")) &&
	    (!has_pool || int_or(body, "slices", 0) < 1 || int_or(body, "slices", 0) > 64)) {
		http_reply_error(r, RC_INVALID, "name a pool to have GPUs",
		                 "slices must be 1 to 64, with a pool");
		goto bad;
	}
	if (int_or(body, "image_id", 0) < 1 || int_or(body, "cpu_millis", 1000) < 10 ||
	    int_or(body, "cpu_millis", 1000) > 1024000 || int_or(body, "mem_mib", 1024) < 16 ||
	    int_or(body, "mem_mib", 1024) > (1LL << 24) || int_or(body, "shm_mib", 64) < 1 ||
	    int_or(body, "shm_mib", 64) > (1LL << 20)) {
		http_reply_error(r, RC_INVALID, NULL,
		                 "image_id must be positive; cpu_millis 10 to 1024000, mem_mib 16 "
		                 "to 16777216, shm_mib 1 to 1048576");
		goto bad;
	}
	json_array_foreach(json_object_get(body, "cmd"), i,
	                   v) if (!json_is_string(v) || json_string_length(v) > 8192 ||
	                          memchr(json_string_value(v), '\0', json_string_length(v)))
	{
		http_reply_error(r, RC_INVALID, "e.g. [\"sh\", \"-c\", \"sleep infinity\"]",
		                 "cmd must be an array of strings (each at most 8192 bytes)");
		goto bad;
	}
	if (json_object_size(json_object_get(body, "env")) > 64) {
		http_reply_error(r, RC_INVALID, NULL, "env has more than 64 variables");
		goto bad;
	}
	json_object_foreach(json_object_get(body, "env"), k,
	                    v) if (!env_key_ok(k) || !json_is_string(v) ||
	                           json_string_length(v) > 4096 ||
	                           memchr(json_string_value(v), '\0', json_string_length(v)))
	{
		http_reply_error(r, RC_INVALID, "e.g. {\"EPOCHS\": \"3\"}",
		                 "env must map variable names (letters, digits, '_') to strings "
		                 "of at most 4096 bytes");
		goto bad;
	}
	c = api_state(r, sizeof(*c), create_free);
	if (!c)
		goto bad;
	c->body = body;
	storage_check(r, create_blocked);
	return;
bad:
	json_decref(body);
}

/* ---- actions on one instance ---- */

enum action { A_START, A_STOP, A_RESTART, A_DELETE, A_LOGS, A_STATS, A_SAVE, A_ACTIVITY };

struct act {
	enum action what;
	long long id;
	char ids[24];
	char state[16];
	long long node_id;
	char name[96];
	char cid[80];
	char username[40];
	long long user_id;
	long long image_id;
	struct docker_call *call;
	int begun;    /* logs: stream started */
	json_t *body; /* save: the request */
	long long new_image;
	char ref[600];
};

static void act_free(void *p)
{
	struct act *a = p;

	json_decref(a->body);
	free(a);
}

static void act_run(struct http_req *r);

static void act_loaded(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;
	struct act *a = r->data;

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "");
		return;
	}
	if (PQntuples(res) != 1) {
		http_reply_error(r, RC_NOTFOUND, NULL, "no such instance");
		return;
	}
	snprintf(a->state, sizeof(a->state), "%s", db_val(res, 0, 0));
	a->node_id = db_val(res, 0, 1) ? strtoll(db_val(res, 0, 1), NULL, 10) : 0;
	snprintf(a->name, sizeof(a->name), "%s", db_val(res, 0, 2));
	snprintf(a->cid, sizeof(a->cid), "%s", db_val(res, 0, 3) ? db_val(res, 0, 3) : "");
	snprintf(a->username, sizeof(a->username), "%s", db_val(res, 0, 4));
	a->user_id = strtoll(db_val(res, 0, 5), NULL, 10);
	a->image_id = db_val(res, 0, 6) ? strtoll(db_val(res, 0, 6), NULL, 10) : 0;
	act_run(r);
}

static void act_begin(struct http_req *r, enum action what, json_t *body)
{
	long long id;
	struct act *a;
	char uid[24];
	const char *p[2];

	if (api_id(r, "id", &id) < 0) {
		json_decref(body);
		return;
	}
	a = api_state(r, sizeof(*a), act_free);
	if (!a) {
		json_decref(body);
		return;
	}
	a->what = what;
	a->id = id;
	a->body = body;
	snprintf(a->ids, sizeof(a->ids), "%lld", id);
	p[0] = a->ids;
	p[1] = owner_param(r, uid, sizeof(uid));
	db_query("SELECT i.state, i.node_id, i.container_name, i.container_id, u.username,"
	         " i.user_id, i.image_id FROM instances i JOIN users u ON u.id = i.user_id"
	         " WHERE i.id = $1 AND i.state <> 'deleted'"
	         " AND ($2::bigint IS NULL OR i.user_id = $2::bigint)",
	         2, p, act_loaded, r);
}

static int in(const char *s, const char *const *set)
{
	for (; *set; set++)
		if (strcmp(s, *set) == 0)
			return 1;
	return 0;
}

static void updated_202(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;
	struct act *a = r->data;
	const char *c = res ? PQresultErrorField(res, PG_DIAG_CONSTRAINT_NAME) : NULL;

	if (rc == RC_INVALID && c && strcmp(c, "user_deleted") == 0) {
		/* 0016: nothing of a deleted account runs again */
		http_reply_error(r, RC_CONFLICT, "a deleted account's instances stay stopped",
		                 "the owner of instance %lld was deleted", a->id);
		return;
	}
	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "");
		return;
	}
	if (PQntuples(res) == 1 && !db_val(res, 0, 0) && db_val(res, 0, 1)) {
		/* start refused: a CPU-only instance over the user's CPU or
		 * memory quota, or an image no longer visible to its owner */
		http_reply_error(
		        r, RC_CONFLICT,
		        PQnfields(res) > 2 && db_val(res, 0, 2)
		                ? db_val(res, 0, 2)
		                : "stop another CPU-only instance, or ask for less CPU or memory",
		        "%s", db_val(res, 0, 1));
		return;
	}
	if (PQntuples(res) != 1) {
		http_reply_error(r, RC_CONFLICT, "look at the instance's state and try again",
		                 "the instance changed state meanwhile");
		return;
	}
	if (a->what == A_START || a->what == A_RESTART)
		log_msg(LOG_INFO, "instances", r->reqid,
		        "instance %lld: %s → queued (started by %s)", a->id, a->state,
		        r->auth->username);
	reply_instance(r, a->ids, 202);
}

static void start_blocked(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;
	struct act *a = r->data;
	const char *p[1] = { a->ids };

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "");
		return;
	}
	if (db_val(res, 0, 0)) {
		http_reply_error(r, RC_CONFLICT, "free some space in your home, then try again",
		                 "%s", db_val(res, 0, 0));
		return;
	}
	auth_audit(r, r->auth, "instance.start", INSTANCE_TARGET(a->ids), NULL);
	/* a new allocation request, queued with the instance, atomically */
	db_query("WITH i AS (SELECT * FROM instances WHERE id = $1"
	         "  AND state IN ('stopped', 'failed', 'lost') FOR UPDATE),"
	         /* CPU-only: the user's tightest CPU and memory quotas (0008) */
	         " cq AS (SELECT gc_cpu_only_block_reason(i.user_id, i.id, i.cpu_millis,"
	         "  i.mem_mib) AS why, NULL::text AS hint FROM i WHERE i.pool_id IS NULL),"
	         /* the image may have been restricted since the instance was made */
	         " vq AS (SELECT 'image ''' || COALESCE(im.reference, '?') || ''' is no longer"
	         " available to ' || ow.username AS why, 'create an instance from an image"
	         " you may use' AS hint FROM i JOIN users ow ON ow.id = i.user_id"
	         "  LEFT JOIN images im ON im.id = i.image_id WHERE NOT COALESCE(im.owner_id"
	         "  = i.user_id OR (im.owner_id IS NULL AND (ow.role = 'admin' OR (im.verified"
	         "  AND (im.visibility = 'everyone' OR ow.role = ANY (im.vis_roles)"
	         "  OR gc_in_any_class(ow.id, im.vis_classes))))), false)),"
	         /* class work: still a member of the class, within its limits
	          * (0030); the class's limits replace the user's own quota */
	         " kq AS (SELECT l.why, l.hint FROM i, gc_class_limit(i.user_id, i.class_id,"
	         "  i.pool_id, i.image_id, greatest(i.slices, 1), i.cpu_millis, i.mem_mib) l"
	         "  WHERE i.class_id IS NOT NULL),"
	         /* a pool: refused when no quota would ever admit it (0015) */
	         " rq AS (SELECT gc_request_refusal(i.user_id, i.pool_id, i.slices, i.cpu_millis,"
	         "  i.mem_mib) AS why, 'an admin sets a quota for you or a default for your role'"
	         "  AS hint FROM i WHERE i.pool_id IS NOT NULL AND i.class_id IS NULL),"
	         " bq AS (SELECT why, hint FROM cq WHERE why IS NOT NULL UNION ALL"
	         "  SELECT why, hint FROM vq UNION ALL SELECT why, hint FROM rq"
	         "  WHERE why IS NOT NULL UNION ALL SELECT why, hint FROM kq),"
	         /* every instance asks the scheduler (CPU-only: no pool, no slices) */
	         " req AS (INSERT INTO alloc_requests (user_id, pool_id, owner_kind, owner_id,"
	         "  priority, slices, cpu_millis, mem_mib, cuda_min, class_id)"
	         "  SELECT i.user_id, i.pool_id, 'instance', i.id::text, i.priority,"
	         "  CASE WHEN i.pool_id IS NULL THEN 0 ELSE greatest(i.slices, 1) END,"
	         "  i.cpu_millis, i.mem_mib, CASE WHEN i.pool_id IS NULL THEN 0 ELSE"
	         "  COALESCE((SELECT cuda_min FROM images WHERE id = i.image_id), 0) END,"
	         "  i.class_id FROM i"
	         "  WHERE NOT EXISTS (SELECT 1 FROM bq) RETURNING id),"
	         " u AS (UPDATE instances SET state = 'queued', desired = 'running', reason = '',"
	         "  exit_code = NULL, request_id = (SELECT id FROM req), idle_warning_at = NULL,"
	         "  idle_message = '', updated_at = now() FROM i WHERE instances.id = i.id"
	         "  AND NOT EXISTS (SELECT 1 FROM bq)"
	         "  RETURNING instances.id)"
	         " SELECT u.id, NULL, NULL FROM u UNION ALL (SELECT NULL, why, hint FROM bq"
	         "  LIMIT 1)",
	         1, p, updated_202, r);
}

static void restarted(struct docker_call *call, enum rc rc, int status, const char *body,
                      size_t len, const char *err, void *arg)
{
	struct http_req *r = arg;
	struct act *a = r->data;

	(void)call;
	(void)body;
	(void)len;
	a->call = NULL;
	if (rc != RC_OK) {
		http_reply_error(r, RC_DOCKER, NULL, "the node's engine did not answer: %s", err);
		return;
	}
	if (status != 204) {
		http_reply_error(r, RC_DOCKER, NULL, "the engine could not restart the container");
		return;
	}
	/* activity: a restart is use */
	reply_instance(r, a->ids, 200);
}

static void restart_marked(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;
	struct act *a = r->data;
	char path[200];

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "");
		return;
	}
	if (PQntuples(res) != 1 || !nodes_engine(a->node_id)) {
		http_reply_error(r, RC_CONFLICT, "look at the instance's state and try again",
		                 "the instance changed state meanwhile");
		return;
	}
	snprintf(path, sizeof(path), "/containers/%s/restart?t=%d", a->name,
	         cfg.instance_stop_grace);
	a->call = docker_request(nodes_engine(a->node_id), "POST", path, NULL, NULL, 0, NULL,
	                         (cfg.instance_stop_grace + 60) * 1000, restarted, r);
	if (!a->call)
		http_reply_error(r, RC_UNAVAILABLE, NULL, "the node's engine is not available");
}

static void act_save(struct http_req *r);
static void act_logs(struct http_req *r);
static void act_stats(struct http_req *r);

static void act_run(struct http_req *r)
{
	struct act *a = r->data;
	static const char *const startable[] = { "stopped", "failed", "lost", NULL };
	static const char *const stoppable[] = { "queued",  "pulling",  "creating",
		                                 "running", "stopping", NULL };
	char why[200];
	const char *p[2] = { a->ids, why };

	switch (a->what) {
	case A_START:
		if (!in(a->state, startable)) {
			http_reply_error(
			        r, RC_CONFLICT, "stop it first, or wait until it is stopped",
			        "the instance is %s: only stopped, failed or lost instances "
			        "can be started",
			        a->state);
			return;
		}
		storage_check(r, start_blocked);
		return;
	case A_RESTART:
		if (in(a->state, startable)) {
			storage_check(r, start_blocked);
			return;
		}
		if (strcmp(a->state, "running") != 0 || !a->node_id || !nodes_engine(a->node_id)) {
			http_reply_error(r, RC_CONFLICT, "wait until it runs or stops",
			                 "the instance is %s: it can be restarted when running or "
			                 "stopped",
			                 a->state);
			return;
		}
		auth_audit(r, r->auth, "instance.restart", INSTANCE_TARGET(a->ids), NULL);
		/* first the record: the reconciler must not take the brief exit
		 * of a restart for the end of the instance */
		db_query("UPDATE instances SET restarted_at = now() WHERE id = $1"
		         " AND state = 'running' RETURNING id",
		         1, p, restart_marked, r);
		return;
	case A_STOP:
		if (!in(a->state, stoppable)) {
			reply_instance(r, a->ids, 200); /* stopped already */
			return;
		}
		snprintf(why, sizeof(why), "stopped by %s", r->auth->username);
		auth_audit(r, r->auth, "instance.stop", INSTANCE_TARGET(a->ids), NULL);
		db_query("UPDATE instances SET desired = 'stopped', reason = $2, updated_at = now()"
		         " WHERE id = $1 AND state IN ('queued', 'pulling', 'creating', 'running',"
		         " 'stopping') RETURNING id",
		         2, p, updated_202, r);
		return;
	case A_DELETE:
		snprintf(why, sizeof(why), "deleted by %s", r->auth->username);
		auth_audit(r, r->auth, "instance.delete", INSTANCE_TARGET(a->ids), NULL);
		db_query("UPDATE instances SET desired = 'deleted', reason = $2, updated_at = now()"
		         " WHERE id = $1 AND state <> 'deleted' RETURNING id",
		         2, p, updated_202, r);
		return;
	case A_ACTIVITY:
		db_query("UPDATE instances SET last_activity_at = now() WHERE id = $1 RETURNING id",
		         1, p, one_200, r);
		return;
	case A_LOGS: act_logs(r); return;
	case A_STATS: act_stats(r); return;
	case A_SAVE: act_save(r); return;
	}
}

static void del(struct http_req *r)
{
	act_begin(r, A_DELETE, NULL);
}

static void activity_done(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "");
		return;
	}
	if (PQntuples(res) != 1) {
		http_reply_error(r, RC_NOTFOUND, NULL, "no such instance");
		return;
	}
	http_reply_json(r, 204, NULL);
}

/* The activity hook (the proxy writes the column itself; this is for
 * other clients, e.g. a terminal keep-alive). */
static void activity(struct http_req *r)
{
	long long id;
	char ids[24], uid[24];
	const char *p[2] = { ids, owner_param(r, uid, sizeof(uid)) };

	if (api_id(r, "id", &id) < 0)
		return;
	snprintf(ids, sizeof(ids), "%lld", id);
	db_query("UPDATE instances SET last_activity_at = now() WHERE id = $1"
	         " AND ($2::bigint IS NULL OR user_id = $2::bigint) AND state <> 'deleted'"
	         " RETURNING id",
	         2, p, activity_done, r);
}

/* ---- logs ---- */

static int logs_data(struct docker_call *call, int stream, const char *data, size_t len, void *arg)
{
	struct http_req *r = arg;
	struct act *a = r->data;

	(void)call;
	(void)stream;
	if (!a->begun) {
		http_add_header(r, "Cache-Control", "no-store");
		http_add_header(r, "X-Content-Type-Options", "nosniff");
		http_stream_begin(r, 200, "text/plain; charset=utf-8", -1);
		a->begun = 1;
	}
	if (http_stream_backlog(r) > (8u << 20))
		return 0; /* a client that does not read loses lines, not memory */
	return http_stream_write(r, data, len) < 0 ? -1 : 0;
}

static void logs_done(struct docker_call *call, enum rc rc, int status, const char *body,
                      size_t len, const char *err, void *arg)
{
	struct http_req *r = arg;
	struct act *a = r->data;

	(void)call;
	(void)body;
	(void)len;
	a->call = NULL;
	if (a->begun) {
		http_stream_end(r);
		return;
	}
	if (rc != RC_OK) {
		http_reply_error(r, RC_DOCKER, NULL, "the node's engine did not answer: %s", err);
		return;
	}
	if (status == 404) {
		http_reply_error(r, RC_NOTFOUND, "start the instance first",
		                 "the instance has no container (yet)");
		return;
	}
	if (status != 200) {
		http_reply_error(r, RC_DOCKER, NULL, "the engine refused the logs (status %d)",
		                 status);
		return;
	}
	http_add_header(r, "Cache-Control", "no-store");
	http_reply(r, 200, "text/plain; charset=utf-8", "", 0);
}

static void logs_gone(struct http_req *r, void *arg)
{
	struct act *a = r->data;

	(void)arg;
	if (a->call) {
		docker_cancel(a->call);
		a->call = NULL;
		if (a->begun)
			http_stream_end(r);
		else
			http_reply_error(r, RC_DOCKER, NULL, "client gone");
	}
}

static void act_logs(struct http_req *r)
{
	struct act *a = r->data;
	char tail[16], follow[8], path[300];
	long nt = api_query(r, "tail", tail, sizeof(tail)), nf;

	if (nt == -2 || (nf = api_query(r, "follow", follow, sizeof(follow))) == -2)
		return;
	if (nt >= 0 && (nt == 0 || strspn(tail, "0123456789") != (size_t)nt ||
	                strtol(tail, NULL, 10) > 100000)) {
		http_reply_error(r, RC_INVALID, NULL,
		                 "tail must be a number of lines up to 100000");
		return;
	}
	if (!a->node_id || !a->name[0]) {
		http_reply_error(r, RC_NOTFOUND, "start the instance first",
		                 "the instance has no container (yet)");
		return;
	}
	if (!nodes_engine(a->node_id)) {
		http_reply_error(r, RC_UNAVAILABLE, NULL, "the node's engine is not available");
		return;
	}
	snprintf(path, sizeof(path), "/containers/%s/logs?stdout=1&stderr=1&tail=%s%s", a->name,
	         nt > 0 ? tail : "1000", nf > 0 && strcmp(follow, "0") != 0 ? "&follow=1" : "");
	a->call = docker_stream(nodes_engine(a->node_id), "GET", path, NULL, NULL, 0, NULL,
	                        nf > 0 && strcmp(follow, "0") != 0 ? 0 : 30000, 1, logs_data,
	                        logs_done, r);
	if (!a->call) {
		http_reply_error(r, RC_UNAVAILABLE, NULL, "the node's engine is not available");
		return;
	}
	http_req_on_close(r, logs_gone, NULL);
}

static void logs(struct http_req *r)
{
	act_begin(r, A_LOGS, NULL);
}

/* ---- usage ---- */

static void stats_done(struct docker_call *call, enum rc rc, int status, const char *body,
                       size_t len, const char *err, void *arg)
{
	struct http_req *r = arg;
	struct act *a = r->data;
	json_t *j, *ms, *out;
	double cpu;
	long long usage, cache;

	(void)call;
	a->call = NULL;
	if (rc != RC_OK) {
		http_reply_error(r, RC_DOCKER, NULL, "the node's engine did not answer: %s", err);
		return;
	}
	if (status == 404) {
		http_reply_error(r, RC_NOTFOUND, "start the instance first",
		                 "the instance has no container (yet)");
		return;
	}
	if (status != 200 || !(j = json_loadb(body, len, 0, NULL))) {
		http_reply_error(r, RC_DOCKER, NULL, "the engine gave no usage (status %d)",
		                 status);
		return;
	}
	cpu = reclaim_cpu_percent(j);
	ms = json_object_get(j, "memory_stats");
	usage = (long long)json_integer_value(json_object_get(ms, "usage"));
	cache = (long long)json_integer_value(
	        json_object_get(json_object_get(ms, "stats"), "total_inactive_file"));
	if (cache > usage)
		cache = 0;
	out = json_pack("{s:I, s:s, s:o, s:I, s:I, s:o, s:n, s:s}", "id", (json_int_t)a->id,
	                "state", a->state, "cpu_percent", cpu >= 0 ? json_real(cpu) : json_null(),
	                "memory_bytes", (json_int_t)(usage - cache), "memory_limit_bytes",
	                (json_int_t)json_integer_value(json_object_get(ms, "limit")), "pids",
	                json_object_get(json_object_get(j, "pids_stats"), "current")
	                        ? json_integer(json_integer_value(json_object_get(
	                                  json_object_get(j, "pids_stats"), "current")))
	                        : json_null(),
	                "gpu_utilization_percent", "gpu_note",
	                "GPU utilisation is not measured on this node (declared GPUs cannot "
	                "report it)");
	json_decref(j);
	http_reply_json(r, 200, out);
}

static void act_stats(struct http_req *r)
{
	struct act *a = r->data;
	char path[300];

	if (strcmp(a->state, "running") != 0 || !a->node_id) {
		http_reply_error(r, RC_CONFLICT, "start the instance first",
		                 "the instance is %s: usage is measured while it runs", a->state);
		return;
	}
	if (!nodes_engine(a->node_id)) {
		http_reply_error(r, RC_UNAVAILABLE, NULL, "the node's engine is not available");
		return;
	}
	snprintf(path, sizeof(path), "/containers/%s/stats?stream=false", a->name);
	a->call = docker_request(nodes_engine(a->node_id), "GET", path, NULL, NULL, 0, NULL, 15000,
	                         stats_done, r);
	if (!a->call)
		http_reply_error(r, RC_UNAVAILABLE, NULL, "the node's engine is not available");
}

static void stats(struct http_req *r)
{
	act_begin(r, A_STATS, NULL);
}

/* ---- save as image ---- */

static const struct jfield save_spec[] = {
	{ "name", J_STRING, 1, 63 },
	{ "tag", J_STRING, 0, 128 },
	{ "description", J_STRING, 0, 500 },
	{ NULL, 0, 0, 0 },
};

static void save_undo(struct act *a)
{
	char img[24];
	const char *p[1] = { img };

	snprintf(img, sizeof(img), "%lld", a->new_image);
	db_query("DELETE FROM images WHERE id = $1", 1, p, db_ignore, NULL);
}

static void pushed(enum rc rc, const char *err, void *arg)
{
	struct http_req *r = arg;
	struct act *a = r->data;

	if (rc != RC_OK) {
		save_undo(a);
		http_reply_error(r, RC_DOCKER, "check the personal registry's credentials",
		                 "could not push '%s': %s", a->ref, err ? err : "error");
		return;
	}
	auth_audit(r, r->auth, "instance.save", INSTANCE_TARGET(a->ids),
	           json_pack("{s:s}", "image", a->ref));
	http_reply_json(r, 201,
	                json_pack("{s:I, s:s, s:I}", "image_id", (json_int_t)a->new_image,
	                          "reference", a->ref, "instance_id", (json_int_t)a->id));
}

static void committed(struct docker_call *call, enum rc rc, int status, const char *body,
                      size_t len, const char *err, void *arg)
{
	struct http_req *r = arg;
	struct act *a = r->data;
	json_t *j;

	(void)call;
	a->call = NULL;
	if (rc != RC_OK || status != 201) {
		j = rc == RC_OK ? json_loadb(body, len, 0, NULL) : NULL;
		save_undo(a);
		http_reply_error(r, RC_DOCKER, NULL, "could not commit the instance: %s",
		                 rc != RC_OK ? err
		                 : json_string_value(json_object_get(j, "message"))
		                         ? json_string_value(json_object_get(j, "message"))
		                         : "the engine refused");
		json_decref(j);
		return;
	}
	if (images_push(a->new_image, a->node_id, pushed, r) < 0) {
		save_undo(a);
		http_reply_error(r, RC_NOMEM, NULL, "out of memory");
	}
}

#define COMMIT_CONFIG                                                  \
	"{\"Env\":[\"GPUCLOUD_APP_TOKEN=\",\"GPUCLOUD_INSTANCE_ID=\"," \
	"\"NVIDIA_VISIBLE_DEVICES=\",\"CUDA_VISIBLE_DEVICES=\",\"NVIDIA_DRIVER_CAPABILITIES=\"]}"

static void save_inserted(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;
	struct act *a = r->data;
	char path[1400], repo[600], *erepo, *etag;
	const char *tag = json_string_value(json_object_get(a->body, "tag"));

	if (rc == RC_CONFLICT) {
		http_reply_error(r, RC_CONFLICT, "pick another name or tag",
		                 "an image with this name and tag exists");
		return;
	}
	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "could not save the image");
		return;
	}
	if (PQntuples(res) != 1 || !db_val(res, 0, 0)) {
		http_reply_error(r, RC_CONFLICT, "an admin marks one registry as personal",
		                 "no registry is marked personal: saved images have nowhere to go");
		return;
	}
	if (!db_val(res, 0, 1)) {
		http_reply_error(r, RC_CONFLICT, "delete one of your images first",
		                 "you have %s personal images: the quota is %d", db_val(res, 0, 2),
		                 cfg.user_image_quota);
		return;
	}
	a->new_image = strtoll(db_val(res, 0, 1), NULL, 10);
	snprintf(a->ref, sizeof(a->ref), "%s", db_val(res, 0, 3));
	snprintf(repo, sizeof(repo), "%.*s",
	         (int)(strlen(a->ref) - strlen(tag ? tag : "latest") - 1), a->ref);
	erepo = curl_easy_escape(NULL, repo, 0);
	etag = curl_easy_escape(NULL, tag ? tag : "latest", 0);
	snprintf(path, sizeof(path), "/commit?container=%s&repo=%s&tag=%s&pause=1", a->name,
	         erepo ? erepo : "", etag ? etag : "");
	curl_free(erepo);
	curl_free(etag);
	/* the image keeps the container's environment except what the platform
	 * put there for this instance (its app token, its GPUs): the engine
	 * merges the container's variables into the ones given, so those are
	 * given empty */
	a->call = nodes_engine(a->node_id)
	                  ? docker_request(nodes_engine(a->node_id), "POST", path,
	                                   "application/json", COMMIT_CONFIG, strlen(COMMIT_CONFIG),
	                                   NULL, 300000, committed, r)
	                  : NULL;
	if (!a->call) {
		save_undo(a);
		http_reply_error(r, RC_UNAVAILABLE, NULL, "the node's engine is not available");
	}
}

static int tag_ok(const char *s)
{
	size_t n = strlen(s);

	return n >= 1 && n <= 128 && s[0] != '.' && s[0] != '-' &&
	       strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") == n;
}

static void act_save(struct http_req *r)
{
	struct act *a = r->data;
	const char *name = json_string_value(json_object_get(a->body, "name"));
	const char *tag = json_string_value(json_object_get(a->body, "tag"));
	const char *desc = json_string_value(json_object_get(a->body, "description"));
	char uid[24], img[24], quota[16];
	const char *p[7];

	if (!name_ok(name, 63) || (tag && !tag_ok(tag))) {
		http_reply_error(r, RC_INVALID, "e.g. {\"name\": \"my-env\", \"tag\": \"v1\"}",
		                 "name must be lower-case letters, digits, '.', '_' or '-'; tag "
		                 "letters, digits, '.', '_' or '-'");
		return;
	}
	if ((strcmp(a->state, "stopped") != 0 && strcmp(a->state, "running") != 0) || !a->node_id ||
	    !a->name[0]) {
		http_reply_error(r, RC_CONFLICT, "stop the instance, then save it",
		                 "the instance is %s: only a stopped or running instance with a "
		                 "container can be saved",
		                 a->state);
		return;
	}
	snprintf(uid, sizeof(uid), "%lld", a->user_id);
	snprintf(img, sizeof(img), "%lld", a->image_id);
	snprintf(quota, sizeof(quota), "%d", cfg.user_image_quota);
	p[0] = uid;
	p[1] = img;
	p[2] = a->username;
	p[3] = name;
	p[4] = tag ? tag : "latest";
	p[5] = quota;
	p[6] = desc ? desc : "";
	/* quota and insert at once, counted under a per-user lock (0015): two
	 * concurrent saves cannot both take the last place; the row is undone
	 * when the commit or the push fails */
	db_query("SELECT * FROM gc_save_image($1, $2, $3, $4, $5, $6::int, $7)", 7, p,
	         save_inserted, r);
}

static const struct jfield empty_spec[] = { { NULL, 0, 0, 0 } };

static void save(struct http_req *r)
{
	json_t *body = api_json_body(r, save_spec);

	if (body)
		act_begin(r, A_SAVE, body);
}

static void action_nobody(struct http_req *r, enum action what)
{
	json_t *body = api_json_body(r, empty_spec);

	if (!body)
		return;
	json_decref(body);
	act_begin(r, what, NULL);
}

static void start_route(struct http_req *r)
{
	action_nobody(r, A_START);
}
static void stop_route(struct http_req *r)
{
	action_nobody(r, A_STOP);
}
static void restart_route(struct http_req *r)
{
	action_nobody(r, A_RESTART);
}

/* ---- idle policies ---- */

#define POLICY_JSON                                                     \
	"json_build_object('role', role, 'idle_seconds', idle_seconds," \
	" 'warn_seconds', warn_seconds, 'max_lifetime_seconds',"        \
	" max_lifetime_seconds)::text"

static void policies_done(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;
	json_t *items;

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "");
		return;
	}
	items = json_array();
	for (int i = 0; i < PQntuples(res); i++)
		json_array_append_new(items, json_loads(db_val(res, i, 0), 0, NULL));
	http_reply_json(r, 200, json_pack("{s:o}", "items", items));
}

static void policies(struct http_req *r)
{
	db_query("SELECT " POLICY_JSON " FROM idle_policies ORDER BY role", 0, NULL, policies_done,
	         r);
}

static void policy_set(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "could not set the policy");
		return;
	}
	auth_audit(r, r->auth, "idle_policy.set", db_val(res, 0, 1),
	           json_loads(db_val(res, 0, 0), 0, NULL));
	http_reply_json(r, 200, json_loads(db_val(res, 0, 0), 0, NULL));
}

static const struct jfield policy_spec[] = {
	{ "idle_seconds", J_INT, 0, 0 },
	{ "warn_seconds", J_INT, 0, 0 },
	{ "max_lifetime_seconds", J_INT, 0, 0 },
	{ NULL, 0, 0, 0 },
};

static void policy_put(struct http_req *r)
{
	const char *role = http_param(r, "role");
	json_t *body = api_json_body(r, policy_spec);
	char idle[24], warn[24], life[24];
	const char *p[4];
	json_t *v;

	if (!body)
		return;
	if (!role || auth_role_parse(role) < 0) {
		json_decref(body);
		http_reply_error(r, RC_NOTFOUND, "roles: admin, teacher, researcher, student",
		                 "no such role");
		return;
	}
	v = json_object_get(body, "idle_seconds");
	if ((json_is_integer(v) &&
	     (json_integer_value(v) < 1 || json_integer_value(v) > 31536000)) ||
	    (json_is_integer(json_object_get(body, "warn_seconds")) &&
	     (json_integer_value(json_object_get(body, "warn_seconds")) < 0 ||
	      json_integer_value(json_object_get(body, "warn_seconds")) > 31536000)) ||
	    (json_is_integer(json_object_get(body, "max_lifetime_seconds")) &&
	     (json_integer_value(json_object_get(body, "max_lifetime_seconds")) < 1 ||
	      json_integer_value(json_object_get(body, "max_lifetime_seconds")) > 31536000))) {
		json_decref(body);
		http_reply_error(r, RC_INVALID, "null means never",
		                 "idle_seconds and max_lifetime_seconds must be 1 to 31536000, "
		                 "warn_seconds 0 to 31536000");
		return;
	}
	p[0] = role;
	p[1] = json_is_integer(v)
	               ? (snprintf(idle, sizeof(idle), "%lld", (long long)json_integer_value(v)),
	                  idle)
	               : NULL;
	v = json_object_get(body, "warn_seconds");
	p[2] = json_is_integer(v)
	               ? (snprintf(warn, sizeof(warn), "%lld", (long long)json_integer_value(v)),
	                  warn)
	               : "900";
	v = json_object_get(body, "max_lifetime_seconds");
	p[3] = json_is_integer(v)
	               ? (snprintf(life, sizeof(life), "%lld", (long long)json_integer_value(v)),
	                  life)
	               : NULL;
	json_decref(body);
	db_query("INSERT INTO idle_policies (role, idle_seconds, warn_seconds,"
	         " max_lifetime_seconds) VALUES ($1::user_role, $2, $3, $4)"
	         " ON CONFLICT (role) DO UPDATE SET idle_seconds = EXCLUDED.idle_seconds,"
	         " warn_seconds = EXCLUDED.warn_seconds,"
	         " max_lifetime_seconds = EXCLUDED.max_lifetime_seconds, updated_at = now()"
	         " RETURNING " POLICY_JSON ", role::text",
	         4, p, policy_set, r);
}

const struct route api_instances_routes[] = {
	{ HTTP_GET, "/api/v1/instances", list, ROLES_ALL, 0, 0, NULL },
	{ HTTP_POST, "/api/v1/instances", create, ROLES_ALL, 0, 131072, NULL },
	{ HTTP_GET, "/api/v1/instances/{id}", get, ROLES_ALL, 0, 0, NULL },
	{ HTTP_DELETE, "/api/v1/instances/{id}", del, ROLES_ALL, 0, 0, NULL },
	{ HTTP_POST, "/api/v1/instances/{id}/start", start_route, ROLES_ALL, 0, 1024, NULL },
	{ HTTP_POST, "/api/v1/instances/{id}/stop", stop_route, ROLES_ALL, 0, 1024, NULL },
	{ HTTP_POST, "/api/v1/instances/{id}/restart", restart_route, ROLES_ALL, 0, 1024, NULL },
	{ HTTP_POST, "/api/v1/instances/{id}/save", save, ROLES_ALL, 0, 8192, NULL },
	{ HTTP_POST, "/api/v1/instances/{id}/activity", activity, ROLES_ALL, 0, 1024, NULL },
	{ HTTP_GET, "/api/v1/instances/{id}/logs", logs, ROLES_ALL, 0, 0, NULL },
	{ HTTP_GET, "/api/v1/instances/{id}/stats", stats, ROLES_ALL, 0, 0, NULL },
	{ HTTP_GET, "/api/v1/idle-policies", policies, ROLE_ADMIN, 0, 0, NULL },
	{ HTTP_PUT, "/api/v1/idle-policies/{role}", policy_put, ROLE_ADMIN, 0, 4096, NULL },
	{ 0, NULL, NULL, 0, 0, 0, NULL },
};
