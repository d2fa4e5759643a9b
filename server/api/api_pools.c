/* api_pools.c — /pools: named sets of GPUs with a sharing mode, and the
 * slices they are cut into.  Everyone may read pools with their capacity
 * (the cluster view); admins create, change, fill and remove them.
 *
 * Membership is set as a whole (PUT /pools/{id}/gpus) in one statement that
 * also remakes the pool's slices, so a pool's slices always match its GPUs.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <http_parser.h>

#include "api/api.h"
#include "auth/auth.h"
#include "db/db.h"
#include "sched/scheduler.h"

#define MAX_POOL_GPUS 4096

/* A pool's columns, by name (DB_COLS_*: db.h).  Capacity counts only GPUs
 * of schedulable nodes (up and active). */
#define SCHEDULABLE                                                                     \
	" FROM slices s JOIN gpus g ON g.id = s.gpu_id"                                 \
	"  JOIN nodes n ON n.id = g.node_id WHERE s.pool_id = p.id AND n.health = 'up'" \
	"  AND n.admin_state = 'active'"
/* What work holds on node n now: the sum of col (cpu_millis, mem_mib) over
 * the requests with a live allocation there (CPU-only ones included). */
#define NODE_USED(n, col)                                                                       \
	"(SELECT COALESCE(sum(r." col "), 0) FROM alloc_requests r WHERE r.state = 'allocated'" \
	" AND EXISTS (SELECT 1 FROM allocations a WHERE a.request_id = r.id"                    \
	" AND a.node_id = " n ".id AND a.released_at IS NULL))"
#define NODE_CPU_LEFT(n) "(COALESCE(" n ".ncpu, 0)::bigint * 1000 - " NODE_USED(n, "cpu_millis") ")"
#define NODE_MEM_LEFT(n) "(COALESCE(" n ".memory_bytes, 0) / 1048576 - " NODE_USED(n, "mem_mib") ")"
#define POOL_COLS(FIRST, COL)                                                                      \
	FIRST(POOL_ID, "p.id")                                                                     \
	COL(POOL_NAME, "p.name")                                                                   \
	COL(POOL_DESCRIPTION, "p.description")                                                     \
	COL(POOL_SHARING, "p.sharing")                                                             \
	COL(POOL_SLOTS_PER_GPU, "p.slots_per_gpu")                                                 \
	COL(POOL_MEMORY_PER_SLOT, "p.memory_per_slot_mib")                                         \
	COL(POOL_CREATED_AT, DB_TS("p.created_at"))                                                \
	COL(POOL_GPUS, "(SELECT count(*) FROM gpus g WHERE g.pool_id = p.id)")                     \
	COL(POOL_SLICES, "(SELECT count(*) FROM slices s WHERE s.pool_id = p.id)")                 \
	COL(POOL_SCHEDULABLE, "(SELECT count(*)" SCHEDULABLE ")")                                  \
	COL(POOL_FREE,                                                                             \
	    "(SELECT count(*)" SCHEDULABLE " AND NOT EXISTS (SELECT 1 FROM allocations a"          \
	    "  WHERE a.slice_id = s.id AND a.released_at IS NULL))")                               \
	/* free slices some request could use: a node whose cpu or memory is all \
	 * taken has none, however many of its slices are free */                 \
	COL(POOL_USABLE,                                                                           \
	    "(SELECT count(*)" SCHEDULABLE " AND NOT EXISTS (SELECT 1 FROM allocations a"          \
	    "  WHERE a.slice_id = s.id AND a.released_at IS NULL)"                                 \
	    "  AND " NODE_CPU_LEFT("n") " > 0 AND " NODE_MEM_LEFT("n") " > 0)")                    \
	COL(POOL_MODELS, "(SELECT COALESCE(json_agg(DISTINCT g.model), '[]') FROM gpus g"          \
	                 " WHERE g.pool_id = p.id)::text")                                         \
	COL(POOL_SIMULATED, "(SELECT bool_or(g.simulated) FROM gpus g WHERE g.pool_id = p.id)")    \
	COL(POOL_NODES,                                                                            \
	    "(SELECT COALESCE(json_agg(json_build_object('node_id', n.id, 'node', n.name,"         \
	    "   'state', CASE WHEN n.health = 'down' THEN 'down' WHEN n.admin_state <> 'active'"   \
	    "   THEN n.admin_state::text ELSE n.health::text END,"                                 \
	    "   'cpu_millis', n.ncpu::bigint * 1000, 'mem_mib', n.memory_bytes / 1048576,"         \
	    "   'cpu_free_millis', CASE WHEN n.ncpu IS NOT NULL THEN greatest(0, " NODE_CPU_LEFT(  \
	            "n") ") END, 'mem_free_mib', CASE WHEN n.memory_bytes IS NOT NULL"             \
	                 "   THEN greatest(0, " NODE_MEM_LEFT(                                     \
	                         "n") ") END,"                                                     \
	                              "   'gpus', (SELECT json_agg(json_build_object('id', g.id, " \
	                              "'index', g.idx,"                                            \
	                              "     'uuid', g.uuid, 'model', g.model, 'simulated', "       \
	                              "g.simulated, 'slices',"                                     \
	                              "     (SELECT count(*) FROM slices s WHERE s.gpu_id = "      \
	                              "g.id), 'used', (SELECT count(*)"                            \
	                              "     FROM slices s JOIN allocations a ON a.slice_id = "     \
	                              "s.id AND a.released_at IS NULL"                             \
	                              "     WHERE s.gpu_id = g.id)) ORDER BY g.idx)"               \
	                              "     FROM gpus g WHERE g.node_id = n.id AND g.pool_id = "   \
	                              "p.id)) ORDER BY n.name), "                                  \
	                              "'[]')"                                                      \
	                              "  FROM nodes n WHERE EXISTS (SELECT 1 FROM gpus g WHERE "   \
	                              "g.node_id = n.id"                                           \
	                              "  AND g.pool_id = p.id))::text")                            \
	COL(POOL_ROLES, "array_to_json(p.roles)::text")
enum pool_col { DB_COLS_ENUM(POOL_COLS) };
#define POOL_LIST DB_COLS_SQL(POOL_COLS)

#define POOL_SELECT "SELECT " POOL_LIST " FROM pools p"

static json_t *count(const PGresult *res, int i, int col)
{
	return json_integer(strtoll(db_val(res, i, col), NULL, 10));
}

static json_t *pool_row(const PGresult *res, int i)
{
	const char *mem = db_val(res, i, POOL_MEMORY_PER_SLOT),
	           *sharing = db_val(res, i, POOL_SHARING);
	const char *sim = db_val(res, i, POOL_SIMULATED);
	json_t *o = json_pack("{s:I, s:s, s:s, s:s, s:i, s:s}", "id",
	                      (json_int_t)strtoll(db_val(res, i, POOL_ID), NULL, 10), "name",
	                      db_val(res, i, POOL_NAME), "description",
	                      db_val(res, i, POOL_DESCRIPTION), "sharing", sharing, "slots_per_gpu",
	                      (int)strtol(db_val(res, i, POOL_SLOTS_PER_GPU), NULL, 10),
	                      "created_at", db_val(res, i, POOL_CREATED_AT));

	json_object_set_new(o, "memory_per_slot_mib",
	                    mem ? json_integer(strtoll(mem, NULL, 10)) : json_null());
	/* no node-installed CUDA interposer is known yet: a shared pool's
	 * per-slot memory is advisory until one is */
	json_object_set_new(o, "memory_cap",
	                    strcmp(sharing, "shared") == 0 ? json_string("advisory") : json_null());
	json_object_set_new(o, "gpus", count(res, i, POOL_GPUS));
	json_object_set_new(o, "slices", count(res, i, POOL_SLICES));
	json_object_set_new(o, "schedulable_slices", count(res, i, POOL_SCHEDULABLE));
	json_object_set_new(o, "free_slices", count(res, i, POOL_FREE));
	json_object_set_new(o, "usable_free_slices", count(res, i, POOL_USABLE));
	json_object_set_new(o, "models", json_loads(db_val(res, i, POOL_MODELS), 0, NULL));
	json_object_set_new(o, "simulated", json_boolean(sim && strcmp(sim, "t") == 0));
	json_object_set_new(o, "nodes", json_loads(db_val(res, i, POOL_NODES), 0, NULL));
	json_object_set_new(o, "roles", json_loads(db_val(res, i, POOL_ROLES), 0, NULL));
	return o;
}

static const struct api_resource pool_resource = { "pool", pool_row, 0 };

static void list(struct http_req *r)
{
	api_list(r, &pool_resource, POOL_SELECT " ORDER BY p.name", NULL);
}

static void reply_pool(struct http_req *r, long long id, int status)
{
	struct db_args a = DB_ARGS_INIT;

	db_arg_ll(&a, id);
	api_one(r, &pool_resource, status, POOL_SELECT " WHERE p.id = $1", &a);
}

static void get(struct http_req *r)
{
	api_get(r, &pool_resource, POOL_SELECT " WHERE p.id = $1");
}

/* ---- create, change, remove ---- */

static int name_ok(const char *n)
{
	size_t len = n ? strlen(n) : 0;

	if (len == 0 || len > 63 || !((n[0] >= 'a' && n[0] <= 'z') || (n[0] >= '0' && n[0] <= '9')))
		return 0;
	return strspn(n, "abcdefghijklmnopqrstuvwxyz0123456789._-") == len;
}

static void changed(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;
	int created = r->method == HTTP_POST;

	if (rc == RC_CONFLICT) {
		http_reply_error(r, RC_CONFLICT, "pick another name",
		                 "a pool with this name exists");
		return;
	}
	if (api_one_row(r, res, rc, "pool", "the pool settings are inconsistent") < 0)
		return;
	auth_audit(r, r->auth, created ? "pool.create" : "pool.update", db_val(res, 0, 1), NULL);
	if (!created)
		sched_kick(); /* its roles may have changed what waits */
	reply_pool(r, strtoll(db_val(res, 0, 0), NULL, 10), created ? 201 : 200);
}

static const struct jfield pool_spec[] = {
	{ "name", J_STRING, 0, 63 },
	{ "description", J_STRING, 0, 500 },
	{ "sharing", J_STRING, 0, 16 },
	{ "slots_per_gpu", J_INT, 0, 0 },
	{ "memory_per_slot_mib", J_INT, 0, 0 },
	{ "roles", J_ARRAY, 0, 4 },
	{ NULL, 0, 0, 0 },
};

/* The roles that may use a pool, as a PostgreSQL array literal into out
 * ("{student,teacher}"), or "" when the body does not set them.  Replies
 * 400 and returns -1 when they are wrong. */
static int roles_param(struct http_req *r, json_t *body, char *out, size_t len)
{
	json_t *roles = json_object_get(body, "roles"), *v;
	size_t i, n = 0;

	out[0] = '\0';
	if (!roles || json_is_null(roles))
		return 0;
	n += (size_t)snprintf(out, len, "{");
	json_array_foreach(roles, i, v)
	{
		if (!json_is_string(v) || auth_role_parse(json_string_value(v)) < 0) {
			http_reply_error(r, RC_INVALID,
			                 "roles: admin, teacher, researcher, student",
			                 "roles must list roles that may use the pool");
			return -1;
		}
		n += (size_t)snprintf(out + n, len - n, "%s%s", i ? "," : "", json_string_value(v));
	}
	snprintf(out + n, len - n, "}");
	return 0;
}

/* Checks the settings common to create and update; replies 400 and returns
 * -1 when they are wrong. */
static int check_settings(struct http_req *r, json_t *body, long long *slots, long long *mem)
{
	const char *sharing = json_string_value(json_object_get(body, "sharing"));
	json_t *sl = json_object_get(body, "slots_per_gpu"),
	       *m = json_object_get(body, "memory_per_slot_mib");

	if (sharing && strcmp(sharing, "exclusive") && strcmp(sharing, "shared") &&
	    strcmp(sharing, "mig")) {
		http_reply_error(r, RC_INVALID, "use exclusive, shared or mig",
		                 "sharing must be exclusive, shared or mig");
		return -1;
	}
	if (json_is_integer(sl) && (json_integer_value(sl) < 1 || json_integer_value(sl) > 64)) {
		http_reply_error(r, RC_INVALID, NULL, "slots_per_gpu must be from 1 to 64");
		return -1;
	}
	if (json_is_integer(m) && json_integer_value(m) < 1) {
		http_reply_error(r, RC_INVALID, NULL, "memory_per_slot_mib must be positive");
		return -1;
	}
	*slots = json_is_integer(sl) ? (long long)json_integer_value(sl) : 0;
	*mem = json_is_integer(m) ? (long long)json_integer_value(m) : 0;
	return 0;
}

static void create(struct http_req *r)
{
	json_t *body = api_json_body(r, pool_spec);
	const char *name, *sharing;
	long long slots, mem;
	char roles[96];
	struct db_args a = DB_ARGS_INIT;

	if (!body)
		return;
	name = json_string_value(json_object_get(body, "name"));
	if (roles_param(r, body, roles, sizeof(roles)) < 0) {
		json_decref(body);
		return;
	}
	sharing = json_string_value(json_object_get(body, "sharing"));
	if (!name_ok(name)) {
		json_decref(body);
		http_reply_error(r, RC_INVALID, "use a-z, 0-9, '.', '_' and '-'",
		                 "pool name must be 1 to 63 lower-case characters");
		return;
	}
	if (check_settings(r, body, &slots, &mem) < 0) {
		json_decref(body);
		return;
	}
	if (sharing && strcmp(sharing, "shared") == 0 && (slots == 0 || mem == 0)) {
		json_decref(body);
		http_reply_error(r, RC_INVALID, "e.g. 7 slots of 10240 MiB on an 80 GB GPU",
		                 "a shared pool needs slots_per_gpu and memory_per_slot_mib");
		return;
	}
	db_arg_str(&a, name);
	db_arg_str(&a, json_string_value(json_object_get(body, "description")));
	db_arg_str(&a, sharing ? sharing : "exclusive");
	db_arg_ll(&a, slots ? slots : 1);
	db_arg_ll_opt(&a, mem, mem != 0);
	db_arg_str(&a, roles[0] ? roles : NULL);
	db_query_args(
	        "INSERT INTO pools (name, description, sharing, slots_per_gpu, memory_per_slot_mib,"
	        " roles) VALUES ($1, COALESCE($2, ''), $3::pool_sharing, $4::int, $5::bigint,"
	        " COALESCE($6::user_role[], '{admin,teacher,researcher,student}'))"
	        " RETURNING id, name",
	        &a, changed, r);
	json_decref(body);
}

static void update(struct http_req *r)
{
	json_t *body;
	long long id, slots, mem;
	char roles[96];
	struct db_args a = DB_ARGS_INIT;

	if (api_id(r, "id", &id) < 0)
		return;
	body = api_json_body(r, pool_spec);
	if (!body)
		return;
	if (roles_param(r, body, roles, sizeof(roles)) < 0) {
		json_decref(body);
		return;
	}
	if (json_object_get(body, "name") || json_object_get(body, "sharing") ||
	    json_object_get(body, "slots_per_gpu")) {
		json_decref(body);
		http_reply_error(r, RC_INVALID, "make a new pool and move the GPUs",
		                 "a pool's name, sharing mode and slots cannot change");
		return;
	}
	if (check_settings(r, body, &slots, &mem) < 0) {
		json_decref(body);
		return;
	}
	db_arg_ll(&a, id);
	db_arg_str(&a, json_string_value(json_object_get(body, "description")));
	db_arg_ll_opt(&a, mem, mem != 0);
	db_arg_str(&a, roles[0] ? roles : NULL);
	db_query_args("UPDATE pools SET description = COALESCE($2, description),"
	              " memory_per_slot_mib = COALESCE($3::bigint, memory_per_slot_mib),"
	              " roles = COALESCE($4::user_role[], roles), updated_at = now()"
	              " WHERE id = $1 RETURNING id, name",
	              &a, changed, r);
	json_decref(body);
}

static void removed(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;

	if (rc == RC_INVALID) { /* a live allocation keeps its slice (a constraint) */
		http_reply_error(r, RC_CONFLICT, "release or wait for its allocations first",
		                 "the pool has allocated slices");
		return;
	}
	if (api_one_row(r, res, rc, "pool", "could not remove the pool") < 0)
		return;
	auth_audit(r, r->auth, "pool.delete", db_val(res, 0, 0), NULL);
	http_reply(r, 204, NULL, NULL, 0);
}

static void remove_pool(struct http_req *r)
{
	long long id;
	struct db_args a = DB_ARGS_INIT;

	if (api_id(r, "id", &id) < 0)
		return;
	db_arg_ll(&a, id);
	db_query_args("DELETE FROM pools WHERE id = $1 RETURNING name", &a, removed, r);
}

/* ---- membership ---- */

static void members_done(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;
	const char *taken;

	if (rc != RC_OK) {
		if (rc == RC_INVALID) /* a live allocation keeps its slice (a constraint) */
			http_reply_error(r, RC_CONFLICT,
			                 "release or wait for its allocations first",
			                 "a GPU leaving the pool has allocated slices");
		else
			api_reply_db_error(r, rc, "could not change the pool's GPUs");
		return;
	}
	if (PQntuples(res) != 1 || !db_val(res, 0, 0)) {
		http_reply_error(r, RC_NOTFOUND, NULL, "no such pool");
		return;
	}
	taken = db_val(res, 0, 2);
	if (taken && *taken) {
		http_reply_error(r, RC_CONFLICT, "take them out of their pool first",
		                 "GPUs %s are unknown or in another pool", taken);
		return;
	}
	taken = db_val(res, 0, 4);
	if (taken && *taken) {
		http_reply_error(r, RC_CONFLICT,
		                 "enable MIG on them and let the node be discovered again",
		                 "GPUs %s have no MIG instances", taken);
		return;
	}
	auth_audit(r, r->auth, "pool.gpus", db_val(res, 0, 1),
	           json_pack("{s:i}", "gpus", (int)strtol(db_val(res, 0, 3), NULL, 10)));
	reply_pool(r, strtoll(db_val(res, 0, 0), NULL, 10), 200);
}

static const struct jfield members_spec[] = {
	{ "gpu_ids", J_ARRAY, 1, MAX_POOL_GPUS },
	{ NULL, 0, 0, 0 },
};

static void set_members(struct http_req *r)
{
	json_t *body, *v;
	long long id;
	size_t i;
	char *doc;
	struct db_args a = DB_ARGS_INIT;

	if (api_id(r, "id", &id) < 0)
		return;
	body = api_json_body(r, members_spec);
	if (!body)
		return;
	json_array_foreach(json_object_get(body, "gpu_ids"), i,
	                   v) if (!json_is_integer(v) || json_integer_value(v) < 1)
	{
		json_decref(body);
		http_reply_error(r, RC_INVALID, NULL,
		                 "gpu_ids must be GPU ids (positive integers)");
		return;
	}
	doc = json_dumps(json_object_get(body, "gpu_ids"), JSON_COMPACT);
	json_decref(body);
	db_arg_ll(&a, id);
	db_arg_str(&a, doc);
	/* One statement: check, release the GPUs that leave (with their
	 * slices), take the new ones and cut them into slices; GPUs that stay keep
	 * their slices (they may be allocated).  Any GPU that is unknown or in
	 * another pool stops it before anything changes; removing a GPU whose
	 * slice is allocated fails (the live allocation keeps its slice). */
	db_query_args(
	        "WITH pool AS (SELECT id, name, slots_per_gpu, sharing FROM pools WHERE id = $1"
	        "  FOR UPDATE),"
	        " want AS (SELECT DISTINCT x::bigint AS gpu_id"
	        "  FROM jsonb_array_elements_text($2::jsonb) AS x),"
	        " bad AS (SELECT w.gpu_id FROM want w LEFT JOIN gpus g ON g.id = w.gpu_id"
	        "  WHERE g.id IS NULL OR (g.pool_id IS NOT NULL AND g.pool_id <> $1)),"
	        /* a mig pool takes only GPUs with MIG instances */
	        " nomig AS (SELECT w.gpu_id FROM want w WHERE (SELECT sharing FROM pool) = 'mig'"
	        "  AND NOT EXISTS (SELECT 1 FROM gpu_mig m WHERE m.gpu_id = w.gpu_id)),"
	        " ok AS (SELECT NOT EXISTS (SELECT 1 FROM bad) AND NOT EXISTS (SELECT 1 FROM nomig)"
	        "  AND EXISTS (SELECT 1 FROM pool) AS go),"
	        " leaving AS (SELECT id FROM gpus WHERE pool_id = $1"
	        "  AND id NOT IN (SELECT gpu_id FROM want) AND (SELECT go FROM ok)),"
	        " joining AS (SELECT gpu_id FROM want w WHERE (SELECT go FROM ok) AND NOT EXISTS"
	        "  (SELECT 1 FROM gpus g WHERE g.id = w.gpu_id AND g.pool_id = $1)),"
	        " drop_slices AS (DELETE FROM slices WHERE gpu_id IN (SELECT id FROM leaving)),"
	        " leave AS (UPDATE gpus SET pool_id = NULL WHERE id IN (SELECT id FROM leaving)),"
	        " join_ AS (UPDATE gpus SET pool_id = $1 WHERE id IN (SELECT gpu_id FROM joining)),"
	        " cut AS (INSERT INTO slices (pool_id, gpu_id, slot, mig_id)"
	        "  SELECT $1, j.gpu_id, s, NULL FROM joining j, pool,"
	        "  generate_series(0, pool.slots_per_gpu - 1) s WHERE pool.sharing <> 'mig'"
	        "  UNION ALL SELECT $1, m.gpu_id, m.idx, m.id FROM joining j"
	        "  JOIN gpu_mig m ON m.gpu_id = j.gpu_id, pool WHERE pool.sharing = 'mig')"
	        " SELECT (SELECT id FROM pool), (SELECT name FROM pool),"
	        " (SELECT string_agg(gpu_id::text, ', ' ORDER BY gpu_id) FROM bad),"
	        " (SELECT count(*) FROM want),"
	        " (SELECT string_agg(gpu_id::text, ', ' ORDER BY gpu_id) FROM nomig)",
	        &a, members_done, r);
	free(doc);
}

const struct route api_pools_routes[] = {
	{ HTTP_GET, "/api/v1/pools", list, ROLES_ALL, 0, 0, NULL },
	{ HTTP_POST, "/api/v1/pools", create, ROLE_ADMIN, 0, 16384, NULL },
	{ HTTP_GET, "/api/v1/pools/{id}", get, ROLES_ALL, 0, 0, NULL },
	{ HTTP_PATCH, "/api/v1/pools/{id}", update, ROLE_ADMIN, 0, 16384, NULL },
	{ HTTP_DELETE, "/api/v1/pools/{id}", remove_pool, ROLE_ADMIN, 0, 0, NULL },
	{ HTTP_PUT, "/api/v1/pools/{id}/gpus", set_members, ROLE_ADMIN, 0, 256 * 1024, NULL },
	{ 0, NULL, NULL, 0, 0, 0, NULL },
};
