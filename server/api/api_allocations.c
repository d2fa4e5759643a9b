/* api_allocations.c — /allocations (asking the scheduler for slices of a
 * pool, seeing why a request waits, releasing) and /quotas (per user and
 * pool).  Instances and jobs will create requests the same way, with their
 * own owner kind; this is the surface to use and test the scheduler alone.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <http_parser.h>

#include "api/api.h"
#include "auth/auth.h"
#include "db/db.h"
#include "base/config.h"
#include "engine/images.h"
#include "sched/scheduler.h"

#define TS(col) "to_char(" col " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')"

#define ALLOC_SELECT                                                                               \
	"SELECT r.id, r.user_id, u.username, p.name, r.pool_id, r.priority, r.slices, r.nodes,"    \
	" r.cpu_millis, r.mem_mib, r.state, r.reason_code, r.reason, r.position,"                  \
	" " TS("r.preempt_requested_at") ", " TS("r.created_at") ", " TS(                          \
	        "r.allocated_at") ","                                                              \
	                          " " TS("r.released_at") ", r.release_reason,"                    \
	                                                  " COALESCE((SELECT "                     \
	                                                  "json_agg(json_build_object('slice_id'," \
	                                                  " a.slice_id, 'node_id',"                \
	                                                  "  a.node_id, 'node', n.name, "          \
	                                                  "'gpu_uuid', g.uuid, 'gpu_index', "      \
	                                                  "g.idx, 'slot', s.slot)"                 \
	                                                  "  ORDER BY a.id) FROM allocations a "   \
	                                                  "JOIN slices s ON s.id = a.slice_id"     \
	                                                  "  JOIN gpus g ON g.id = s.gpu_id JOIN " \
	                                                  "nodes n ON n.id = a.node_id"            \
	                                                  "  WHERE a.request_id = r.id AND "       \
	                                                  "a.released_at IS NULL), '[]')::text,"   \
	                                                  " r.lease_s, " TS(                       \
	                                                          "(r.allocated_at + "             \
	                                                          "make_interval(secs "            \
	                                                          "=> r.lease_s))") " FROM "       \
	                                                                            "alloc_"       \
	                                                                            "requests r "  \
	                                                                            "JOIN users "  \
	                                                                            "u "           \
	                                                                            "ON u.id = "   \
	                                                                            "r.user_id "   \
	                                                                            "LEFT JOIN "   \
	                                                                            "pools p "     \
	                                                                            "ON p.id = "   \
	                                                                            "r.pool_id"

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
	json_t *o = json_pack("{s:o, s:o, s:s, s:o, s:o, s:s, s:o, s:o, s:o, s:o, s:s, s:s, s:s}",
	                      "id", int_col(res, i, 0), "user_id", int_col(res, i, 1), "username",
	                      db_val(res, i, 2), "pool", nullable(db_val(res, i, 3)), "pool_id",
	                      int_col(res, i, 4), "priority", db_val(res, i, 5), "slices",
	                      int_col(res, i, 6), "nodes", int_col(res, i, 7), "cpu_millis",
	                      int_col(res, i, 8), "mem_mib", int_col(res, i, 9), "state",
	                      db_val(res, i, 10), "reason_code", db_val(res, i, 11), "reason",
	                      db_val(res, i, 12));

	json_object_set_new(o, "position", int_col(res, i, 13));
	json_object_set_new(o, "preempt_requested_at", nullable(db_val(res, i, 14)));
	json_object_set_new(o, "created_at", nullable(db_val(res, i, 15)));
	json_object_set_new(o, "allocated_at", nullable(db_val(res, i, 16)));
	json_object_set_new(o, "released_at", nullable(db_val(res, i, 17)));
	json_object_set_new(o, "release_reason", nullable(db_val(res, i, 18)));
	json_object_set_new(o, "grants", json_loads(db_val(res, i, 19), 0, NULL));
	json_object_set_new(o, "lease_s", int_col(res, i, 20));
	json_object_set_new(o, "lease_ends_at", nullable(db_val(res, i, 21)));
	return o;
}

static int is_admin(const struct http_req *r)
{
	return r->auth->role == ROLE_ADMIN;
}

/* ---- read ---- */

static void list_done(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;
	int n, limit = (int)(intptr_t)r->data;
	json_t *items, *out;

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "");
		return;
	}
	n = PQntuples(res);
	items = json_array();
	for (int i = 0; i < n && i < limit; i++)
		json_array_append_new(items, alloc_row(res, i));
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
	const char *p[4];

	if (api_page(r, 100, 1000, &limit, &cursor) < 0)
		return;
	if (api_query(r, "all", all, sizeof(all)) == -2)
		return;
	snprintf(uid, sizeof(uid), "%lld", (long long)r->auth->user_id);
	snprintf(cur, sizeof(cur), "%lld", cursor);
	snprintf(lim, sizeof(lim), "%d", limit + 1);
	p[0] = is_admin(r) && http_query(r, "all", all, sizeof(all)) >= 0 && strcmp(all, "0") != 0
	               ? NULL
	               : uid;
	p[1] = cursor ? cur : NULL;
	p[2] = lim;
	r->data = (void *)(intptr_t)limit;
	db_query(ALLOC_SELECT " WHERE ($1::bigint IS NULL OR r.user_id = $1::bigint)"
	                      " AND ($2::bigint IS NULL OR r.id < $2::bigint)"
	                      " ORDER BY r.id DESC LIMIT $3::int",
	         3, p, list_done, r);
}

static void one_reply(PGresult *res, enum rc rc, struct http_req *r, int status)
{
	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "");
		return;
	}
	if (PQntuples(res) != 1) {
		http_reply_error(r, RC_NOTFOUND, NULL, "no such allocation");
		return;
	}
	http_reply_json(r, status, alloc_row(res, 0));
}

static void one_done(PGresult *res, enum rc rc, void *arg)
{
	one_reply(res, rc, arg, 200);
}

static void one_accepted(PGresult *res, enum rc rc, void *arg)
{
	one_reply(res, rc, arg, 202);
}

/* Owner or admin only; someone else's request is "not found". */
static void reply_alloc(struct http_req *r, const char *id, int status)
{
	char uid[24];
	const char *p[2] = { id, uid };

	snprintf(uid, sizeof(uid), "%lld", (long long)r->auth->user_id);
	if (is_admin(r))
		p[1] = NULL;
	db_query(ALLOC_SELECT " WHERE r.id = $1 AND ($2::bigint IS NULL OR r.user_id = $2::bigint)",
	         2, p, status == 202 ? one_accepted : one_done, r);
}

static void get(struct http_req *r)
{
	long long id;
	char ids[24];

	if (api_id(r, "id", &id) < 0)
		return;
	snprintf(ids, sizeof(ids), "%lld", id);
	reply_alloc(r, ids, 200);
}

/* ---- ask ---- */

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
		/* no quota would ever admit it: say so now rather than queue it
		 * for good */
		http_reply_error(r, RC_FORBIDDEN,
		                 "an admin sets a quota for you or a default for your role"
		                 " (PUT /api/v1/quotas/defaults)",
		                 "%s", db_val(res, 0, 1));
		return;
	}
	sched_kick();
	reply_alloc(r, db_val(res, 0, 0), 202);
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

static void ask(struct http_req *r)
{
	json_t *body = api_json_body(r, ask_spec);
	const char *prio, *cuda, *p[9];
	char uid[24], slices[16], nodes[16], cpu[24], mem[24], cuda_min[16], lease[24];
	json_t *lv;

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
	snprintf(cuda_min, sizeof(cuda_min), "%d", cuda && *cuda ? images_cuda_parse(cuda) : 0);
	/* a raw allocation is not tied to a container that ends: only admins
	 * may hold one without a lease */
	lv = json_object_get(body, "lease_s");
	if (json_is_integer(lv) &&
	    (json_integer_value(lv) < 1 ||
	     (!is_admin(r) && json_integer_value(lv) > cfg.alloc_max_lease) ||
	     json_integer_value(lv) > 31536000)) {
		json_decref(body);
		http_reply_error(r, RC_INVALID, NULL, "lease_s must be 1 to %d seconds",
		                 is_admin(r) ? 31536000 : cfg.alloc_max_lease);
		return;
	}
	if (!json_is_integer(lv) && !is_admin(r)) {
		json_decref(body);
		http_reply_error(r, RC_FORBIDDEN,
		                 "give lease_s (seconds, at most the alloc_max_lease setting), or "
		                 "create an instance",
		                 "only admins may hold an allocation without a lease");
		return;
	}
	if (json_is_integer(lv))
		snprintf(lease, sizeof(lease), "%lld", (long long)json_integer_value(lv));
	snprintf(uid, sizeof(uid), "%lld", (long long)r->auth->user_id);
	snprintf(slices, sizeof(slices), "%lld",
	         (long long)json_integer_value(json_object_get(body, "slices")));
	snprintf(nodes, sizeof(nodes), "%lld",
	         json_is_integer(json_object_get(body, "nodes"))
	                 ? (long long)json_integer_value(json_object_get(body, "nodes"))
	                 : 1LL);
	snprintf(cpu, sizeof(cpu), "%lld",
	         (long long)json_integer_value(json_object_get(body, "cpu_millis")));
	snprintf(mem, sizeof(mem), "%lld",
	         (long long)json_integer_value(json_object_get(body, "mem_mib")));
	p[0] = uid;
	p[1] = json_string_value(json_object_get(body, "pool"));
	p[2] = prio;
	p[3] = slices;
	p[4] = nodes;
	p[5] = cpu;
	p[6] = mem;
	p[7] = cuda_min;
	p[8] = json_is_integer(lv) ? lease : NULL;
	/* refused at once when no quota would ever admit it (0015) */
	db_query("WITH p AS (SELECT id FROM pools WHERE name = $2),"
	         " w AS (SELECT gc_request_refusal($1, p.id, $4::bigint * $5, $6::bigint * $5,"
	         "  $7::bigint * $5) AS why FROM p),"
	         " ins AS (INSERT INTO alloc_requests (user_id, pool_id, priority, slices, nodes,"
	         "  cpu_millis, mem_mib, cuda_min, lease_s)"
	         "  SELECT $1, p.id, $3::alloc_priority, $4, $5, $6, $7, $8::int, $9::int FROM p"
	         "  WHERE NOT EXISTS (SELECT 1 FROM w WHERE why IS NOT NULL) RETURNING id)"
	         " SELECT (SELECT id FROM ins), (SELECT why FROM w)",
	         9, p, created, r);
	json_decref(body);
}

/* ---- release ---- */

static void released(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "could not release");
		return;
	}
	if (PQntuples(res) != 1) {
		http_reply_error(r, RC_NOTFOUND, NULL, "no such allocation");
		return;
	}
	sched_kick();
	auth_audit(r, r->auth, "allocation.release", db_val(res, 0, 0), NULL);
	reply_alloc(r, db_val(res, 0, 0), 200);
}

static void release(struct http_req *r)
{
	long long id;
	char ids[24], uid[24], why[96];
	const char *p[3] = { ids, why, uid };

	if (api_id(r, "id", &id) < 0)
		return;
	snprintf(ids, sizeof(ids), "%lld", id);
	snprintf(uid, sizeof(uid), "%lld", (long long)r->auth->user_id);
	snprintf(why, sizeof(why), "released by %s", r->auth->username);
	if (is_admin(r))
		p[2] = NULL;
	db_query("SELECT r.id, gc_release_request(r.id, $2) FROM alloc_requests r"
	         " WHERE r.id = $1 AND ($3::bigint IS NULL OR r.user_id = $3::bigint)",
	         3, p, released, r);
}

/* ---- quotas ---- */

#define QUOTA_COLS                                                                      \
	"q.user_id, u.username, p.name, q.max_slices, q.max_cpu_millis, q.max_mem_mib," \
	" q.gpu_hours_per_week, q.max_runtime_s"

static json_t *quota_row(const PGresult *res, int i)
{
	const char *h = db_val(res, i, 6);

	return json_pack("{s:o, s:s, s:s, s:o, s:o, s:o, s:o, s:o}", "user_id", int_col(res, i, 0),
	                 "username", db_val(res, i, 1), "pool", db_val(res, i, 2), "max_slices",
	                 int_col(res, i, 3), "max_cpu_millis", int_col(res, i, 4), "max_mem_mib",
	                 int_col(res, i, 5), "gpu_hours_per_week",
	                 h ? json_real(strtod(h, NULL)) : json_null(), "max_runtime_s",
	                 int_col(res, i, 7));
}

static void quota_set(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "could not set the quota");
		return;
	}
	if (PQntuples(res) != 1) {
		http_reply_error(r, RC_NOTFOUND, NULL, "no such user or pool");
		return;
	}
	auth_audit(r, r->auth, "quota.set", db_val(res, 0, 1), quota_row(res, 0));
	http_reply_json(r, 200, quota_row(res, 0));
}

static const struct jfield quota_spec[] = {
	{ "user_id", J_INT, 1, 0 },       { "pool", J_STRING, 1, 63 },
	{ "max_slices", J_INT, 0, 0 },    { "max_cpu_millis", J_INT, 0, 0 },
	{ "max_mem_mib", J_INT, 0, 0 },   { "gpu_hours_per_week", J_INT, 0, 0 },
	{ "max_runtime_s", J_INT, 0, 0 }, { NULL, 0, 0, 0 },
};

/* A limit as a parameter: NULL (no limit) when absent or null. */
static const char *limit_param(json_t *body, const char *name, char *buf, size_t len)
{
	json_t *v = json_object_get(body, name);

	if (!json_is_integer(v))
		return NULL;
	snprintf(buf, len, "%lld", (long long)json_integer_value(v));
	return buf;
}

/* Sets every limit of a user in a pool at once; an absent limit is none. */
static void quota_put(struct http_req *r)
{
	json_t *body = api_json_body(r, quota_spec);
	char uid[24], lim[5][24];
	const char *p[7];
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
	snprintf(uid, sizeof(uid), "%lld",
	         (long long)json_integer_value(json_object_get(body, "user_id")));
	p[0] = uid;
	p[1] = json_string_value(json_object_get(body, "pool"));
	for (int i = 0; i < 5; i++)
		p[2 + i] = limit_param(body, names[i], lim[i], sizeof(lim[i]));
	db_query("WITH q AS (INSERT INTO quotas (user_id, pool_id, max_slices, max_cpu_millis,"
	         "  max_mem_mib, gpu_hours_per_week, max_runtime_s)"
	         "  SELECT u.id, p.id, $3, $4, $5, $6, $7 FROM users u, pools p"
	         "  WHERE u.id = $1 AND p.name = $2"
	         "  ON CONFLICT (user_id, pool_id) DO UPDATE SET max_slices = EXCLUDED.max_slices,"
	         "  max_cpu_millis = EXCLUDED.max_cpu_millis, max_mem_mib = EXCLUDED.max_mem_mib,"
	         "  gpu_hours_per_week = EXCLUDED.gpu_hours_per_week,"
	         "  max_runtime_s = EXCLUDED.max_runtime_s, updated_at = now() RETURNING *)"
	         " SELECT " QUOTA_COLS " FROM q JOIN users u ON u.id = q.user_id"
	         " JOIN pools p ON p.id = q.pool_id",
	         7, p, quota_set, r);
	json_decref(body);
	sched_kick();
}

static void quota_list_done(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;
	json_t *items;

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "");
		return;
	}
	items = json_array();
	for (int i = 0; i < PQntuples(res); i++)
		json_array_append_new(items, quota_row(res, i));
	http_reply_json(r, 200, json_pack("{s:o}", "items", items));
}

static void quota_list(struct http_req *r)
{
	char uid[32];
	long n = api_query(r, "user_id", uid, sizeof(uid));
	const char *p[1];

	if (n == -2)
		return;
	if (n > 0 && strspn(uid, "0123456789") != (size_t)n) {
		http_reply_error(r, RC_INVALID, NULL, "user_id must be a number");
		return;
	}
	p[0] = n > 0 ? uid : NULL;
	db_query("SELECT " QUOTA_COLS " FROM quotas q"
	         " JOIN users u ON u.id = q.user_id JOIN pools p ON p.id = q.pool_id"
	         " WHERE $1::bigint IS NULL OR q.user_id = $1::bigint ORDER BY u.username, p.name",
	         1, p, quota_list_done, r);
}

/* ---- per-role default quotas (0015) ---- */

#define DEFAULT_COLS                                                           \
	"d.role::text, p.name, d.max_slices, d.max_cpu_millis, d.max_mem_mib," \
	" d.gpu_hours_per_week, d.max_runtime_s, d.max_tensorboards"

static json_t *default_row(const PGresult *res, int i)
{
	const char *h = db_val(res, i, 5);

	return json_pack("{s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "role", db_val(res, i, 0),
	                 "pool", nullable(db_val(res, i, 1)), "max_slices", int_col(res, i, 2),
	                 "max_cpu_millis", int_col(res, i, 3), "max_mem_mib", int_col(res, i, 4),
	                 "gpu_hours_per_week", h ? json_real(strtod(h, NULL)) : json_null(),
	                 "max_runtime_s", int_col(res, i, 6), "max_tensorboards",
	                 int_col(res, i, 7));
}

static void defaults_list_done(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;
	json_t *items;

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "");
		return;
	}
	items = json_array();
	for (int i = 0; i < PQntuples(res); i++)
		json_array_append_new(items, default_row(res, i));
	http_reply_json(r, 200, json_pack("{s:o}", "items", items));
}

static void defaults_list(struct http_req *r)
{
	db_query("SELECT " DEFAULT_COLS
	         " FROM quota_defaults d LEFT JOIN pools p ON p.id = d.pool_id"
	         " ORDER BY d.role, p.name NULLS FIRST",
	         0, NULL, defaults_list_done, r);
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
	snprintf(target, sizeof(target), "%s/%s", db_val(res, 0, 0),
	         db_val(res, 0, 1) ? db_val(res, 0, 1) : "*");
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
	char lim[6][24];
	const char *p[8], *role;
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
	p[0] = role;
	p[1] = json_string_value(json_object_get(body, "pool"));
	for (int i = 0; i < 6; i++)
		p[2 + i] = limit_param(body, names[i], lim[i], sizeof(lim[i]));
	db_query("WITH pl AS (SELECT id, name FROM pools WHERE name = $2),"
	         " d AS (INSERT INTO quota_defaults (role, pool_id, max_slices, max_cpu_millis,"
	         "  max_mem_mib, gpu_hours_per_week, max_runtime_s, max_tensorboards)"
	         "  SELECT $1::user_role, (SELECT id FROM pl), $3, $4, $5, $6, $7, $8"
	         "  WHERE $2::text IS NULL OR EXISTS (SELECT 1 FROM pl)"
	         "  ON CONFLICT (role, pool_id) DO UPDATE SET max_slices = EXCLUDED.max_slices,"
	         "  max_cpu_millis = EXCLUDED.max_cpu_millis, max_mem_mib = EXCLUDED.max_mem_mib,"
	         "  gpu_hours_per_week = EXCLUDED.gpu_hours_per_week,"
	         "  max_runtime_s = EXCLUDED.max_runtime_s,"
	         "  max_tensorboards = EXCLUDED.max_tensorboards, updated_at = now() RETURNING *)"
	         " SELECT " DEFAULT_COLS " FROM d LEFT JOIN pools p ON p.id = d.pool_id",
	         8, p, default_set, r);
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
	const char *p[2];

	if (nr == -2 || (np = api_query(r, "pool", pool, sizeof(pool))) == -2)
		return;
	if (nr <= 0 || auth_role_parse(role) < 0) {
		http_reply_error(r, RC_INVALID, "e.g. ?role=student&pool=a100",
		                 "role must be admin, teacher, researcher or student");
		return;
	}
	p[0] = role;
	p[1] = np > 0 ? pool : NULL;
	db_query("DELETE FROM quota_defaults d WHERE d.role = $1::user_role"
	         " AND d.pool_id IS NOT DISTINCT FROM (SELECT id FROM pools WHERE name = $2)"
	         " AND ($2::text IS NULL OR EXISTS (SELECT 1 FROM pools WHERE name = $2))"
	         " RETURNING d.role::text, $2::text",
	         2, p, default_removed, r);
}

const struct route api_allocations_routes[] = {
	{ HTTP_GET, "/api/v1/allocations", list, ROLES_ALL, 0, 0, NULL },
	{ HTTP_POST, "/api/v1/allocations", ask, ROLES_ALL, 0, 8192, NULL },
	{ HTTP_GET, "/api/v1/allocations/{id}", get, ROLES_ALL, 0, 0, NULL },
	{ HTTP_DELETE, "/api/v1/allocations/{id}", release, ROLES_ALL, 0, 0, NULL },
	{ HTTP_GET, "/api/v1/quotas", quota_list, ROLE_ADMIN, 0, 0, NULL },
	{ HTTP_PUT, "/api/v1/quotas", quota_put, ROLE_ADMIN, 0, 8192, NULL },
	{ HTTP_GET, "/api/v1/quotas/defaults", defaults_list, ROLE_ADMIN, 0, 0, NULL },
	{ HTTP_PUT, "/api/v1/quotas/defaults", default_put, ROLE_ADMIN, 0, 8192, NULL },
	{ HTTP_DELETE, "/api/v1/quotas/defaults", default_delete, ROLE_ADMIN, 0, 0, NULL },
	{ 0, NULL, NULL, 0, 0, 0, NULL },
};
