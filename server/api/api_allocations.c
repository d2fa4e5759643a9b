/* api_allocations.c — /allocations (asking the scheduler for slices of a
 * pool, seeing why a request waits, releasing), /quotas (per user and
 * pool, per-role defaults) and the limits in force for a user
 * (/me/limits, /quotas/effective: gc_effective_limits, 0017).  Instances
 * and jobs will create requests the same way, with their own owner kind;
 * this is the surface to use and test the scheduler alone.
 */
#include <stdlib.h>
#include <string.h>

#include <http_parser.h>

#include "api/api.h"
#include "api/admit.h"
#include "auth/auth.h"
#include "db/db.h"
#include "base/config.h"
#include "engine/images.h"
#include "sched/scheduler.h"

/* An allocation request's columns, by name (DB_COLS_*: db.h). */
#define ALLOC_COLS(FIRST, COL)                                                                     \
	FIRST(ALLOC_ID, "r.id")                                                                    \
	COL(ALLOC_USER_ID, "r.user_id")                                                            \
	COL(ALLOC_USERNAME, "u.username")                                                          \
	COL(ALLOC_POOL, "p.name")                                                                  \
	COL(ALLOC_POOL_ID, "r.pool_id")                                                            \
	COL(ALLOC_PRIORITY, "r.priority")                                                          \
	COL(ALLOC_SLICES, "r.slices")                                                              \
	COL(ALLOC_NODES, "r.nodes")                                                                \
	COL(ALLOC_CPU_MILLIS, "r.cpu_millis")                                                      \
	COL(ALLOC_MEM_MIB, "r.mem_mib")                                                            \
	COL(ALLOC_STATE, "r.state")                                                                \
	COL(ALLOC_REASON_CODE, "r.reason_code")                                                    \
	COL(ALLOC_REASON, "r.reason")                                                              \
	COL(ALLOC_POSITION, "r.position")                                                          \
	COL(ALLOC_PREEMPT_REQUESTED_AT, DB_TS("r.preempt_requested_at"))                           \
	COL(ALLOC_CREATED_AT, DB_TS("r.created_at"))                                               \
	COL(ALLOC_ALLOCATED_AT, DB_TS("r.allocated_at"))                                           \
	COL(ALLOC_RELEASED_AT, DB_TS("r.released_at"))                                             \
	COL(ALLOC_RELEASE_REASON, "r.release_reason")                                              \
	COL(ALLOC_GRANTS,                                                                          \
	    "COALESCE((SELECT json_agg(json_build_object('slice_id', a.slice_id, 'node_id',"       \
	    "  a.node_id, 'node', n.name, 'gpu_uuid', g.uuid, 'gpu_index', g.idx, 'slot', s.slot)" \
	    "  ORDER BY a.id) FROM allocations a JOIN slices s ON s.id = a.slice_id"               \
	    "  JOIN gpus g ON g.id = s.gpu_id JOIN nodes n ON n.id = a.node_id"                    \
	    "  WHERE a.request_id = r.id AND a.released_at IS NULL), '[]')::text")                 \
	COL(ALLOC_LEASE_S, "r.lease_s")                                                            \
	COL(ALLOC_LEASE_ENDS_AT, DB_TS("r.allocated_at + make_interval(secs => r.lease_s)"))
enum alloc_col { DB_COLS_ENUM(ALLOC_COLS) };
#define ALLOC_LIST DB_COLS_SQL(ALLOC_COLS)

#define ALLOC_SELECT                                           \
	"SELECT " ALLOC_LIST " FROM alloc_requests r"          \
	" JOIN users u ON u.id = r.user_id LEFT JOIN pools p " \
	"ON p.id = r.pool_id"

static json_t *nullable(const char *s)
{
	return s ? json_string(s) : json_null();
}

static json_t *int_col(const PGresult *res, int i, int c)
{
	const char *v = db_val(res, i, c);
	return v ? json_integer(strtoll(v, NULL, 10)) : json_null();
}

static json_t *alloc_row(const PGresult *res, int i)
{
	json_t *o = json_pack(
	        "{s:o, s:o, s:s, s:o, s:o, s:s, s:o, s:o, s:o, s:o, s:s, s:s, s:s}", "id",
	        int_col(res, i, ALLOC_ID), "user_id", int_col(res, i, ALLOC_USER_ID), "username",
	        db_val(res, i, ALLOC_USERNAME), "pool", nullable(db_val(res, i, ALLOC_POOL)),
	        "pool_id", int_col(res, i, ALLOC_POOL_ID), "priority",
	        db_val(res, i, ALLOC_PRIORITY), "slices", int_col(res, i, ALLOC_SLICES), "nodes",
	        int_col(res, i, ALLOC_NODES), "cpu_millis", int_col(res, i, ALLOC_CPU_MILLIS),
	        "mem_mib", int_col(res, i, ALLOC_MEM_MIB), "state", db_val(res, i, ALLOC_STATE),
	        "reason_code", db_val(res, i, ALLOC_REASON_CODE), "reason",
	        db_val(res, i, ALLOC_REASON));

	json_object_set_new(o, "position", int_col(res, i, ALLOC_POSITION));
	json_object_set_new(o, "preempt_requested_at",
	                    nullable(db_val(res, i, ALLOC_PREEMPT_REQUESTED_AT)));
	json_object_set_new(o, "created_at", nullable(db_val(res, i, ALLOC_CREATED_AT)));
	json_object_set_new(o, "allocated_at", nullable(db_val(res, i, ALLOC_ALLOCATED_AT)));
	json_object_set_new(o, "released_at", nullable(db_val(res, i, ALLOC_RELEASED_AT)));
	json_object_set_new(o, "release_reason", nullable(db_val(res, i, ALLOC_RELEASE_REASON)));
	json_object_set_new(o, "grants", json_loads(db_val(res, i, ALLOC_GRANTS), 0, NULL));
	json_object_set_new(o, "lease_s", int_col(res, i, ALLOC_LEASE_S));
	json_object_set_new(o, "lease_ends_at", nullable(db_val(res, i, ALLOC_LEASE_ENDS_AT)));
	return o;
}

static const struct api_resource alloc_resource = { "allocation", alloc_row, 0 };

static int is_admin(const struct http_req *r)
{
	return r->auth->role == ROLE_ADMIN;
}

/* ---- read ---- */

static void list(struct http_req *r)
{
	int limit;
	long long cursor;
	char all[8];
	struct db_args a = DB_ARGS_INIT;

	if (api_page(r, 100, 1000, &limit, &cursor) < 0)
		return;
	if (api_query(r, "all", all, sizeof(all)) == -2)
		return;
	db_arg_ll_opt(&a, r->auth->user_id,
	              !(is_admin(r) && http_query(r, "all", all, sizeof(all)) >= 0 &&
	                strcmp(all, "0") != 0));
	db_arg_ll_opt(&a, cursor, cursor != 0);
	db_arg_ll(&a, limit + 1);
	api_list_page(r, &alloc_resource, limit,
	              ALLOC_SELECT " WHERE ($1::bigint IS NULL OR r.user_id = $1::bigint)"
	                           " AND ($2::bigint IS NULL OR r.id < $2::bigint)"
	                           " ORDER BY r.id DESC LIMIT $3::int",
	              &a);
}

/* Owner or admin only; someone else's request is "not found". */
static void reply_alloc(struct http_req *r, long long id, int status)
{
	struct db_args a = DB_ARGS_INIT;

	db_arg_ll(&a, id);
	db_arg_ll_opt(&a, r->auth->user_id, !is_admin(r));
	api_one(r, &alloc_resource, status,
	        ALLOC_SELECT " WHERE r.id = $1 AND ($2::bigint IS NULL OR r.user_id = $2::bigint)",
	        &a);
}

static void get(struct http_req *r)
{
	long long id;

	if (api_id(r, "id", &id) < 0)
		return;
	reply_alloc(r, id, 200);
}

/* ---- ask ---- */

/* The new request read back, then the scheduler woken: kicked before the
 * read, a pass could commit first and the 202 show it allocated already. */
static void created_read(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;

	if (api_one_row(r, res, rc, "allocation", "") == 0)
		http_reply_json(r, 202, alloc_resource.row(res, 0));
	sched_kick();
}

static void created(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "could not queue the request");
		return;
	}
	if (PQntuples(res) != 1 || (!db_val(res, 0, 0) && !db_val(res, 0, 1))) {
		http_reply_error(r, RC_NOTFOUND, "GET /api/v1/pools lists them", "no such pool");
		return;
	}
	if (!db_val(res, 0, 0)) {
		/* no quota would ever admit it (an admin changed it since
		 * admit_check()): say so now rather than queue it for good */
		http_reply_error(r, RC_FORBIDDEN,
		                 "an admin sets a quota for you or a default for your role"
		                 " (PUT /api/v1/quotas/defaults)",
		                 "%s", db_val(res, 0, 1));
		return;
	}
	{
		struct db_args a = DB_ARGS_INIT;

		db_arg_ll(&a, strtoll(db_val(res, 0, 0), NULL, 10));
		db_query_args(ALLOC_SELECT " WHERE r.id = $1", &a, created_read, r);
	}
}

static const struct jfield ask_spec[] = {
	{ "pool", J_STRING, 1, 63 },
	{ "slices", J_INT, 1, 0 },
	{ "nodes", J_INT, 0, 0 },
	{ "cpu_millis", J_INT, 0, 0 },
	{ "mem_mib", J_INT, 0, 0 },
	{ "priority", J_STRING, 0, 16 },
	{ "cuda_version", J_STRING, 0, 16 },
	{ "lease_s", J_INT, 0, 0 },
	{ NULL, 0, 0, 0 },
};

static int in_range(json_t *v, long long lo, long long hi)
{
	return !v || json_is_null(v) ||
	       (json_integer_value(v) >= lo && json_integer_value(v) <= hi);
}

struct ask_state {
	json_t *body;
	struct admit fit;
};

static void ask_free(void *p)
{
	struct ask_state *st = p;

	json_decref(st->body);
	free(st);
}

static void ask_insert(struct http_req *r);

static void ask(struct http_req *r)
{
	json_t *body = api_json_body(r, ask_spec);
	const char *prio, *cuda;
	json_t *lv, *nodes;
	struct ask_state *st;

	if (!body)
		return;
	prio = json_string_value(json_object_get(body, "priority"));
	if (!prio)
		prio = "normal";
	if (strcmp(prio, "exam") && strcmp(prio, "normal") && strcmp(prio, "scavenger")) {
		json_decref(body);
		http_reply_error(r, RC_INVALID, "use exam, normal or scavenger",
		                 "priority must be exam, normal or scavenger");
		return;
	}
	if (strcmp(prio, "exam") == 0 && !(r->auth->role & (ROLE_TEACHER | ROLE_ADMIN))) {
		json_decref(body);
		http_reply_error(r, RC_FORBIDDEN, NULL,
		                 "only teachers and admins may ask for exam priority");
		return;
	}
	if (!in_range(json_object_get(body, "slices"), 1, 64) ||
	    !in_range(json_object_get(body, "nodes"), 1, 64) ||
	    !in_range(json_object_get(body, "cpu_millis"), 0, 1LL << 40) ||
	    !in_range(json_object_get(body, "mem_mib"), 0, 1LL << 40)) {
		json_decref(body);
		http_reply_error(
		        r, RC_INVALID, NULL,
		        "slices and nodes must be 1 to 64; cpu_millis and mem_mib not negative");
		return;
	}
	/* the CUDA the work needs: never placed on a node whose driver is older */
	cuda = json_string_value(json_object_get(body, "cuda_version"));
	if (cuda && *cuda && images_cuda_parse(cuda) < 0) {
		json_decref(body);
		http_reply_error(r, RC_INVALID, "e.g. 12.4", "cuda_version must be a CUDA version");
		return;
	}
	/* a raw allocation is not tied to a container that ends: only admins
	 * may hold one without a lease */
	lv = json_object_get(body, "lease_s");
	if (json_is_integer(lv) &&
	    (json_integer_value(lv) < 1 ||
	     (!is_admin(r) && json_integer_value(lv) > cfg.alloc_max_lease_s) ||
	     json_integer_value(lv) > 31536000)) {
		json_decref(body);
		http_reply_error(r, RC_INVALID, NULL, "lease_s must be 1 to %d seconds",
		                 is_admin(r) ? 31536000 : cfg.alloc_max_lease_s);
		return;
	}
	if (!json_is_integer(lv) && !is_admin(r)) {
		json_decref(body);
		http_reply_error(
		        r, RC_FORBIDDEN,
		        "give lease_s (seconds, at most the alloc_max_lease_s setting), or "
		        "create an instance",
		        "only admins may hold an allocation without a lease");
		return;
	}
	st = api_state(r, sizeof(*st), ask_free);
	if (!st) {
		json_decref(body);
		return;
	}
	st->body = body; /* handed off */
	nodes = json_object_get(body, "nodes");
	st->fit.pool = json_string_value(json_object_get(body, "pool"));
	st->fit.slices = (int)json_integer_value(json_object_get(body, "slices"));
	st->fit.nodes = json_is_integer(nodes) ? (int)json_integer_value(nodes) : 1;
	st->fit.cpu = json_integer_value(json_object_get(body, "cpu_millis"));
	st->fit.mem = json_integer_value(json_object_get(body, "mem_mib"));
	st->fit.ok = ask_insert;
	/* refused at once when no limit would ever admit it or no node could
	 * ever hold it */
	admit_check(r, &st->fit);
}

/* Queues the request admit_check() let through. */
static void ask_insert(struct http_req *r)
{
	struct ask_state *st = r->data;
	json_t *body = st->body, *lv = json_object_get(body, "lease_s"), *nodes;
	const char *prio = json_string_value(json_object_get(body, "priority"));
	const char *cuda = json_string_value(json_object_get(body, "cuda_version"));
	struct db_args a = DB_ARGS_INIT;

	nodes = json_object_get(body, "nodes");
	db_arg_ll(&a, r->auth->user_id);
	db_arg_str(&a, json_string_value(json_object_get(body, "pool")));
	db_arg_str(&a, prio ? prio : "normal");
	db_arg_ll(&a, json_integer_value(json_object_get(body, "slices")));
	db_arg_ll(&a, json_is_integer(nodes) ? json_integer_value(nodes) : 1);
	db_arg_ll(&a, json_integer_value(json_object_get(body, "cpu_millis")));
	db_arg_ll(&a, json_integer_value(json_object_get(body, "mem_mib")));
	db_arg_ll(&a, cuda && *cuda ? images_cuda_parse(cuda) : 0);
	db_arg_ll_opt(&a, json_integer_value(lv), json_is_integer(lv));
	/* refused at once when no quota would ever admit it (0015) */
	db_query_args(
	        "WITH p AS (SELECT id FROM pools WHERE name = $2),"
	        " w AS (SELECT gc_request_refusal($1, p.id, $4::bigint * $5, $6::bigint * $5,"
	        "  $7::bigint * $5) AS why FROM p),"
	        " ins AS (INSERT INTO alloc_requests (user_id, pool_id, priority, slices, nodes,"
	        "  cpu_millis, mem_mib, cuda_min, lease_s)"
	        "  SELECT $1, p.id, $3::alloc_priority, $4, $5, $6, $7, $8::int, $9::int FROM p"
	        "  WHERE NOT EXISTS (SELECT 1 FROM w WHERE why IS NOT NULL) RETURNING id)"
	        " SELECT (SELECT id FROM ins), (SELECT why FROM w)",
	        &a, created, r);
}

/* ---- release ---- */

static void released(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;

	if (api_one_row(r, res, rc, "allocation", "could not release") < 0)
		return;
	sched_kick();
	auth_audit(r, r->auth, "allocation.release", db_val(res, 0, 0), NULL);
	reply_alloc(r, strtoll(db_val(res, 0, 0), NULL, 10), 200);
}

static void release(struct http_req *r)
{
	long long id;
	char why[96];
	struct db_args a = DB_ARGS_INIT;

	if (api_id(r, "id", &id) < 0)
		return;
	snprintf(why, sizeof(why), "released by %s", r->auth->username);
	db_arg_ll(&a, id);
	db_arg_str(&a, why);
	db_arg_ll_opt(&a, r->auth->user_id, !is_admin(r));
	db_query_args("SELECT r.id, gc_release_request(r.id, $2) FROM alloc_requests r"
	              " WHERE r.id = $1 AND ($3::bigint IS NULL OR r.user_id = $3::bigint)",
	              &a, released, r);
}

/* ---- quotas ---- */

/* A quota's columns, by name (DB_COLS_*: db.h). */
#define QUOTA_COLS(FIRST, COL)                        \
	FIRST(QUOTA_USER_ID, "q.user_id")             \
	COL(QUOTA_USERNAME, "u.username")             \
	COL(QUOTA_POOL, "p.name")                     \
	COL(QUOTA_MAX_SLICES, "q.max_slices")         \
	COL(QUOTA_MAX_CPU_MILLIS, "q.max_cpu_millis") \
	COL(QUOTA_MAX_MEM_MIB, "q.max_mem_mib")       \
	COL(QUOTA_GPU_HOURS, "q.gpu_hours_per_week")  \
	COL(QUOTA_MAX_RUNTIME_S, "q.max_runtime_s")
enum quota_col { DB_COLS_ENUM(QUOTA_COLS) };
#define QUOTA_LIST DB_COLS_SQL(QUOTA_COLS)

static json_t *quota_row(const PGresult *res, int i)
{
	const char *h = db_val(res, i, QUOTA_GPU_HOURS);

	return json_pack("{s:o, s:s, s:s, s:o, s:o, s:o, s:o, s:o}", "user_id",
	                 int_col(res, i, QUOTA_USER_ID), "username", db_val(res, i, QUOTA_USERNAME),
	                 "pool", db_val(res, i, QUOTA_POOL), "max_slices",
	                 int_col(res, i, QUOTA_MAX_SLICES), "max_cpu_millis",
	                 int_col(res, i, QUOTA_MAX_CPU_MILLIS), "max_mem_mib",
	                 int_col(res, i, QUOTA_MAX_MEM_MIB), "gpu_hours_per_week",
	                 h ? json_real(strtod(h, NULL)) : json_null(), "max_runtime_s",
	                 int_col(res, i, QUOTA_MAX_RUNTIME_S));
}

static const struct api_resource quota_resource = { "quota", quota_row, 0 };

static void quota_set(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;

	if (api_one_row(r, res, rc, "user or pool", "could not set the quota") < 0)
		return;
	auth_audit(r, r->auth, "quota.set", db_val(res, 0, QUOTA_USERNAME), quota_row(res, 0));
	http_reply_json(r, 200, quota_row(res, 0));
}

static const struct jfield quota_spec[] = {
	{ "user_id", J_INT, 1, 0 },       { "pool", J_STRING, 1, 63 },
	{ "max_slices", J_INT, 0, 0 },    { "max_cpu_millis", J_INT, 0, 0 },
	{ "max_mem_mib", J_INT, 0, 0 },   { "gpu_hours_per_week", J_INT, 0, 0 },
	{ "max_runtime_s", J_INT, 0, 0 }, { NULL, 0, 0, 0 },
};

/* A limit as a parameter: NULL (no limit) when absent or null. */
static void limit_arg(struct db_args *a, json_t *body, const char *name)
{
	json_t *v = json_object_get(body, name);

	db_arg_ll_opt(a, json_integer_value(v), json_is_integer(v));
}

/* Sets every limit of a user in a pool at once; an absent limit is none. */
static void quota_put(struct http_req *r)
{
	json_t *body = api_json_body(r, quota_spec);
	struct db_args a = DB_ARGS_INIT;
	static const char *const names[5] = { "max_slices", "max_cpu_millis", "max_mem_mib",
		                              "gpu_hours_per_week", "max_runtime_s" };

	if (!body)
		return;
	for (int i = 0; i < 5; i++)
		if (!in_range(json_object_get(body, names[i]), i == 4 ? 1 : 0, 1LL << 40)) {
			json_decref(body);
			http_reply_error(r, RC_INVALID, "omit a limit (or send null) for none",
			                 "%s must not be negative%s", names[i],
			                 i == 4 ? " or zero" : "");
			return;
		}
	db_arg_ll(&a, json_integer_value(json_object_get(body, "user_id")));
	db_arg_str(&a, json_string_value(json_object_get(body, "pool")));
	for (int i = 0; i < 5; i++)
		limit_arg(&a, body, names[i]);
	db_query_args(
	        "WITH q AS (INSERT INTO quotas (user_id, pool_id, max_slices, max_cpu_millis,"
	        "  max_mem_mib, gpu_hours_per_week, max_runtime_s)"
	        "  SELECT u.id, p.id, $3, $4, $5, $6, $7 FROM users u, pools p"
	        "  WHERE u.id = $1 AND p.name = $2"
	        "  ON CONFLICT (user_id, pool_id) DO UPDATE SET max_slices = EXCLUDED.max_slices,"
	        "  max_cpu_millis = EXCLUDED.max_cpu_millis, max_mem_mib = EXCLUDED.max_mem_mib,"
	        "  gpu_hours_per_week = EXCLUDED.gpu_hours_per_week,"
	        "  max_runtime_s = EXCLUDED.max_runtime_s, updated_at = now() RETURNING *)"
	        " SELECT " QUOTA_LIST " FROM q JOIN users u ON u.id = q.user_id"
	        " JOIN pools p ON p.id = q.pool_id",
	        &a, quota_set, r);
	json_decref(body);
	sched_kick();
}

static void quota_list(struct http_req *r)
{
	char uid[32];
	long n = api_query(r, "user_id", uid, sizeof(uid));
	struct db_args a = DB_ARGS_INIT;

	if (n == -2)
		return;
	if (n > 0 && strspn(uid, "0123456789") != (size_t)n) {
		http_reply_error(r, RC_INVALID, NULL, "user_id must be a number");
		return;
	}
	db_arg_str(&a, n > 0 ? uid : NULL);
	api_list(r, &quota_resource,
	         "SELECT " QUOTA_LIST " FROM quotas q"
	         " JOIN users u ON u.id = q.user_id JOIN pools p "
	         "ON p.id = q.pool_id"
	         " WHERE $1::bigint IS NULL OR q.user_id = "
	         "$1::bigint ORDER BY u.username, p.name",
	         &a);
}

/* Removes a user's own quota in a pool (?user_id=&pool=): the role's
 * defaults apply to them there again. */
static void quota_removed(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;
	char target[120];

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "could not remove the quota");
		return;
	}
	if (PQntuples(res) != 1) {
		http_reply_error(r, RC_NOTFOUND, "GET /api/v1/quotas?user_id= lists them",
		                 "no such quota");
		return;
	}
	snprintf(target, sizeof(target), "%s/%s", db_val(res, 0, 0), db_val(res, 0, 1));
	auth_audit(r, r->auth, "quota.delete", target, NULL);
	sched_kick();
	http_reply(r, 204, NULL, NULL, 0);
}

/* ?user_id= as a positive number: 0 with *uid set, else replies 400 and
 * returns -1. */
static int user_id_query(struct http_req *r, long long *uid)
{
	char v[24];
	long n = api_query(r, "user_id", v, sizeof(v));

	if (n == -2)
		return -1;
	if (n <= 0 || strspn(v, "0123456789") != (size_t)n || (*uid = strtoll(v, NULL, 10)) < 1) {
		http_reply_error(r, RC_INVALID, "e.g. ?user_id=7 (GET /api/v1/users finds it)",
		                 "user_id must be a user's id");
		return -1;
	}
	return 0;
}

static void quota_delete(struct http_req *r)
{
	char pool[72];
	long long uid;
	long np;
	struct db_args a = DB_ARGS_INIT;

	if (user_id_query(r, &uid) < 0 || (np = api_query(r, "pool", pool, sizeof(pool))) == -2)
		return;
	if (np <= 0) {
		http_reply_error(r, RC_INVALID, "e.g. ?user_id=7&pool=a100", "pool is required");
		return;
	}
	db_arg_ll(&a, uid);
	db_arg_str(&a, pool);
	db_query_args("DELETE FROM quotas q USING users u, pools p"
	              " WHERE q.user_id = $1 AND u.id = q.user_id AND p.id = q.pool_id"
	              " AND p.name = $2 RETURNING u.username, p.name",
	              &a, quota_removed, r);
}

/* ---- the limits in force (0017) ---- */

/* One document: the user, the CPU-only row, a row per pool (by name) and
 * the home's storage limits, each limit with where it comes from. */
#define LIMITS_SQL                                                                                 \
	"WITH e AS (SELECT * FROM gc_effective_limits($1))"                                        \
	" SELECT json_build_object('user', json_build_object('id', u.id, 'username', u.username,"  \
	"  'display_name', u.display_name, 'role', u.role),"                                       \
	" 'cpu_only', (SELECT json_build_object('source', e.source, 'max_cpu_millis',"             \
	"  e.max_cpu_millis, 'max_mem_mib', e.max_mem_mib, 'max_tensorboards',"                    \
	"  e.max_tensorboards, 'cpu_millis_in_use', e.cpu_millis_in_use, 'mem_mib_in_use',"        \
	"  e.mem_mib_in_use, 'tensorboards_running', e.tensorboards_running, 'node_cpu_millis',"   \
	"  e.node_cpu_millis, 'node_mem_mib', e.node_mem_mib) FROM e WHERE e.pool IS NULL),"       \
	" 'pools', COALESCE((SELECT json_agg(json_build_object('pool', e.pool, 'open', e.open,"    \
	"  'source', e.source, 'max_slices', e.max_slices, 'max_cpu_millis', e.max_cpu_millis,"    \
	"  'max_mem_mib', e.max_mem_mib, 'gpu_hours_per_week', e.gpu_hours_per_week,"              \
	"  'max_runtime_s', e.max_runtime_s, 'slices_in_use', e.slices_in_use,"                    \
	"  'cpu_millis_in_use', e.cpu_millis_in_use, 'mem_mib_in_use', e.mem_mib_in_use,"          \
	"  'gpu_hours_7d', round((e.gpu_seconds_7d / 3600)::numeric, 2), 'node_cpu_millis',"       \
	"  e.node_cpu_millis, 'node_mem_mib', e.node_mem_mib) ORDER BY e.pool)"                    \
	"  FROM e WHERE e.pool IS NOT NULL), '[]'),"                                               \
	" 'storage', (SELECT json_build_object('source', CASE WHEN num_nonnulls(a.bytes_soft,"     \
	"  a.bytes_hard, a.files_soft, a.files_hard) > 0 THEN 'user' ELSE 'default' END,"          \
	"  'bytes', COALESCE(a.bytes, 0), 'files', COALESCE(a.files, 0),"                          \
	"  'bytes_soft', COALESCE(a.bytes_soft, d.user_bytes_soft),"                               \
	"  'bytes_hard', COALESCE(a.bytes_hard, d.user_bytes_hard),"                               \
	"  'files_soft', COALESCE(a.files_soft, d.user_files_soft),"                               \
	"  'files_hard', COALESCE(a.files_hard, d.user_files_hard),"                               \
	"  'override', json_build_object('bytes_soft', a.bytes_soft, 'bytes_hard', a.bytes_hard,"  \
	"  'files_soft', a.files_soft, 'files_hard', a.files_hard))"                               \
	"  FROM storage_defaults d LEFT JOIN storage_areas a ON a.area = 'home:' || u.id LIMIT 1)" \
	" )::text FROM users u WHERE u.id = $1"

static void limits_done(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;
	json_t *doc;

	if (api_one_row(r, res, rc, "user", "could not read the limits") < 0)
		return;
	doc = json_loads(db_val(res, 0, 0), 0, NULL);
	if (!doc) {
		http_reply_error(r, RC_INTERNAL, NULL, "could not read the limits");
		return;
	}
	http_reply_json(r, 200, doc);
}

static void limits_of(struct http_req *r, long long uid)
{
	struct db_args a = DB_ARGS_INIT;

	db_arg_ll(&a, uid);
	db_query_args(LIMITS_SQL, &a, limits_done, r);
}

/* Mine: everyone may read their own, nobody another's. */
static void me_limits(struct http_req *r)
{
	limits_of(r, r->auth->user_id);
}

/* Anyone's (admins): ?user_id= */
static void quota_effective(struct http_req *r)
{
	long long uid;

	if (user_id_query(r, &uid) < 0)
		return;
	limits_of(r, uid);
}

/* ---- per-role default quotas (0015) ---- */

/* A default quota's columns, by name (DB_COLS_*: db.h). */
#define DEFAULT_COLS(FIRST, COL)                    \
	FIRST(DEF_ROLE, "d.role::text")             \
	COL(DEF_POOL, "p.name")                     \
	COL(DEF_MAX_SLICES, "d.max_slices")         \
	COL(DEF_MAX_CPU_MILLIS, "d.max_cpu_millis") \
	COL(DEF_MAX_MEM_MIB, "d.max_mem_mib")       \
	COL(DEF_GPU_HOURS, "d.gpu_hours_per_week")  \
	COL(DEF_MAX_RUNTIME_S, "d.max_runtime_s")   \
	COL(DEF_MAX_TENSORBOARDS, "d.max_tensorboards")
enum default_col { DB_COLS_ENUM(DEFAULT_COLS) };
#define DEFAULT_LIST DB_COLS_SQL(DEFAULT_COLS)

static json_t *default_row(const PGresult *res, int i)
{
	const char *h = db_val(res, i, DEF_GPU_HOURS);

	return json_pack("{s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "role",
	                 db_val(res, i, DEF_ROLE), "pool", nullable(db_val(res, i, DEF_POOL)),
	                 "max_slices", int_col(res, i, DEF_MAX_SLICES), "max_cpu_millis",
	                 int_col(res, i, DEF_MAX_CPU_MILLIS), "max_mem_mib",
	                 int_col(res, i, DEF_MAX_MEM_MIB), "gpu_hours_per_week",
	                 h ? json_real(strtod(h, NULL)) : json_null(), "max_runtime_s",
	                 int_col(res, i, DEF_MAX_RUNTIME_S), "max_tensorboards",
	                 int_col(res, i, DEF_MAX_TENSORBOARDS));
}

static const struct api_resource default_resource = { "default quota", default_row, 0 };

static void defaults_list(struct http_req *r)
{
	api_list(r, &default_resource,
	         "SELECT " DEFAULT_LIST
	         " FROM quota_defaults d LEFT JOIN pools p ON p.id = d.pool_id"
	         " ORDER BY d.role, p.name NULLS FIRST",
	         NULL);
}

static void default_set(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;
	json_t *row;
	char target[96];

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "could not set the default quota");
		return;
	}
	if (PQntuples(res) != 1) {
		http_reply_error(r, RC_NOTFOUND, "GET /api/v1/pools lists them", "no such pool");
		return;
	}
	row = default_row(res, 0);
	snprintf(target, sizeof(target), "%s/%s", db_val(res, 0, DEF_ROLE),
	         db_val(res, 0, DEF_POOL) ? db_val(res, 0, DEF_POOL) : "*");
	auth_audit(r, r->auth, "quota_default.set", target, json_deep_copy(row));
	sched_kick();
	http_reply_json(r, 200, row);
}

static const struct jfield default_spec[] = {
	{ "role", J_STRING, 1, 16 },
	{ "pool", J_STRING, 0, 63 },
	{ "max_slices", J_INT, 0, 0 },
	{ "max_cpu_millis", J_INT, 0, 0 },
	{ "max_mem_mib", J_INT, 0, 0 },
	{ "gpu_hours_per_week", J_INT, 0, 0 },
	{ "max_runtime_s", J_INT, 0, 0 },
	{ "max_tensorboards", J_INT, 0, 0 },
	{ NULL, 0, 0, 0 },
};

/* Sets a role's default in one pool (or for all pools and CPU-only work
 * when pool is absent or null); an absent limit is none. */
static void default_put(struct http_req *r)
{
	json_t *body = api_json_body(r, default_spec);
	const char *role;
	struct db_args a = DB_ARGS_INIT;
	static const char *const names[6] = { "max_slices",    "max_cpu_millis",
		                              "max_mem_mib",   "gpu_hours_per_week",
		                              "max_runtime_s", "max_tensorboards" };

	if (!body)
		return;
	role = json_string_value(json_object_get(body, "role"));
	if (auth_role_parse(role) < 0) {
		json_decref(body);
		http_reply_error(r, RC_INVALID, "roles: admin, teacher, researcher, student",
		                 "role must be admin, teacher, researcher or student");
		return;
	}
	for (int i = 0; i < 6; i++)
		if (!in_range(json_object_get(body, names[i]), i == 4 ? 1 : 0, 1LL << 40)) {
			json_decref(body);
			http_reply_error(r, RC_INVALID, "omit a limit (or send null) for none",
			                 "%s must not be negative%s", names[i],
			                 i == 4 ? " or zero" : "");
			return;
		}
	db_arg_str(&a, role);
	db_arg_str(&a, json_string_value(json_object_get(body, "pool")));
	for (int i = 0; i < 6; i++)
		limit_arg(&a, body, names[i]);
	db_query_args(
	        "WITH pl AS (SELECT id, name FROM pools WHERE name = $2),"
	        " d AS (INSERT INTO quota_defaults (role, pool_id, max_slices, max_cpu_millis,"
	        "  max_mem_mib, gpu_hours_per_week, max_runtime_s, max_tensorboards)"
	        "  SELECT $1::user_role, (SELECT id FROM pl), $3, $4, $5, $6, $7, $8"
	        "  WHERE $2::text IS NULL OR EXISTS (SELECT 1 FROM pl)"
	        "  ON CONFLICT (role, pool_id) DO UPDATE SET max_slices = EXCLUDED.max_slices,"
	        "  max_cpu_millis = EXCLUDED.max_cpu_millis, max_mem_mib = EXCLUDED.max_mem_mib,"
	        "  gpu_hours_per_week = EXCLUDED.gpu_hours_per_week,"
	        "  max_runtime_s = EXCLUDED.max_runtime_s,"
	        "  max_tensorboards = EXCLUDED.max_tensorboards, updated_at = now() RETURNING *)"
	        " SELECT " DEFAULT_LIST " FROM d LEFT JOIN pools p ON p.id = d.pool_id",
	        &a, default_set, r);
	json_decref(body);
}

static void default_removed(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;
	char target[96];

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "could not remove the default quota");
		return;
	}
	if (PQntuples(res) != 1) {
		http_reply_error(r, RC_NOTFOUND, "GET /api/v1/quotas/defaults lists them",
		                 "no such default quota");
		return;
	}
	snprintf(target, sizeof(target), "%s/%s", db_val(res, 0, 0),
	         db_val(res, 0, 1) ? db_val(res, 0, 1) : "*");
	auth_audit(r, r->auth, "quota_default.delete", target, NULL);
	sched_kick();
	http_reply(r, 204, NULL, NULL, 0);
}

/* Removes a role's default (?role=&pool=; no pool: the global one).  A role
 * left without any default gets nothing (default deny). */
static void default_delete(struct http_req *r)
{
	char role[24], pool[72];
	long nr = api_query(r, "role", role, sizeof(role)), np;
	struct db_args a = DB_ARGS_INIT;

	if (nr == -2 || (np = api_query(r, "pool", pool, sizeof(pool))) == -2)
		return;
	if (nr <= 0 || auth_role_parse(role) < 0) {
		http_reply_error(r, RC_INVALID, "e.g. ?role=student&pool=a100",
		                 "role must be admin, teacher, researcher or student");
		return;
	}
	db_arg_str(&a, role);
	db_arg_str(&a, np > 0 ? pool : NULL);
	db_query_args("DELETE FROM quota_defaults d WHERE d.role = $1::user_role"
	              " AND d.pool_id IS NOT DISTINCT FROM (SELECT id FROM pools WHERE name = $2)"
	              " AND ($2::text IS NULL OR EXISTS (SELECT 1 FROM pools WHERE name = $2))"
	              " RETURNING d.role::text, $2::text",
	              &a, default_removed, r);
}

const struct route api_allocations_routes[] = {
	{ HTTP_GET, "/api/v1/allocations", list, ROLES_ALL, 0, 0, NULL },
	{ HTTP_POST, "/api/v1/allocations", ask, ROLES_ALL, 0, 8192, NULL },
	{ HTTP_GET, "/api/v1/allocations/{id}", get, ROLES_ALL, 0, 0, NULL },
	{ HTTP_DELETE, "/api/v1/allocations/{id}", release, ROLES_ALL, 0, 0, NULL },
	{ HTTP_GET, "/api/v1/quotas", quota_list, ROLE_ADMIN, 0, 0, NULL },
	{ HTTP_PUT, "/api/v1/quotas", quota_put, ROLE_ADMIN, 0, 8192, NULL },
	{ HTTP_DELETE, "/api/v1/quotas", quota_delete, ROLE_ADMIN, 0, 0, NULL },
	{ HTTP_GET, "/api/v1/quotas/effective", quota_effective, ROLE_ADMIN, 0, 0, NULL },
	{ HTTP_GET, "/api/v1/me/limits", me_limits, ROLES_ALL, 0, 0, NULL },
	{ HTTP_GET, "/api/v1/quotas/defaults", defaults_list, ROLE_ADMIN, 0, 0, NULL },
	{ HTTP_PUT, "/api/v1/quotas/defaults", default_put, ROLE_ADMIN, 0, 8192, NULL },
	{ HTTP_DELETE, "/api/v1/quotas/defaults", default_delete, ROLE_ADMIN, 0, 0, NULL },
	{ 0, NULL, NULL, 0, 0, 0, NULL },
};
