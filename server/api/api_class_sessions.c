/* api_class_sessions.c — lab sessions: time windows, one-off or weekly,
 * each reserving slices of the class's pool for its members
 * (/api/v1/classes/{id}/reservations), and the pre-pull of the class's
 * images to the pool's nodes before a window opens.
 *
 * Who: the class's owner, co-teachers and admins create, change and cancel
 * sessions; every member (TAs and students too) reads them; anyone else gets
 * a 404, as for the class itself.  A session reserves at most the class's
 * allocation, and never more than the pool holds together with every other
 * class's sessions that overlap it in time (409, naming the other class and
 * the moment).  The scheduler reads open windows through
 * gc_class_reserved_now() (0028); what a reservation does to placement is
 * sched/place.c's.
 *
 * Pre-pull: a periodic section on the leader sends the class's allowed
 * images (none listed: nothing) to every node of the class's pool that is
 * up, once per occurrence, from PREPULL_LEAD_S before the window opens; the
 * pulls are engine/images.c's and show as pull progress (image_nodes).
 */
#include <stdlib.h>
#include <string.h>

#include <http_parser.h>

#include "api/api.h"
#include "auth/auth.h"
#include "base/cron.h"
#include "base/log.h"
#include "db/db.h"
#include "db/leader.h"
#include "engine/images.h"
#include "sched/scheduler.h"

#define PREPULL_LEAD_S  900
#define PREPULL_TICK_MS 30000

/* One session as JSON text: its next 5 occurrences (one that is open now
 * first), and whether a window is open now. */
#define SESSION_JSON                                                                             \
	"json_build_object('id', s.id, 'class_id', s.class_id, 'title', s.title,"                \
	" 'starts_at', " DB_TS("s.starts_at") ", 'ends_at', " DB_TS(                             \
	        "s.ends_at") ", 'repeat_until', s.repeat_until, 'weekly',"                       \
	                     " s.repeat_until IS NOT NULL, 'slices', s.slices,"                  \
	                     " 'next', (SELECT COALESCE(json_agg(json_build_object('starts_at'," \
	                     " " DB_TS("n.starts_at") ", 'ends_at', " DB_TS(                     \
	                             "n.ends_at") ") ORDER BY n.starts_at), '[]')"               \
	                                          " FROM gc_class_session_next(s.id, now(), 5) " \
	                                          "n),"                                          \
	                                          " 'active_now', EXISTS (SELECT 1 FROM"         \
	                                          " gc_class_session_next(s.id, now(), 1) n"     \
	                                          " WHERE n.starts_at <= now()),"                \
	                                          " 'created_at', " DB_TS(                       \
	                                                  "s.created_at") ")::text"

/* The class and the caller's standing in it ($1 the caller, $2 't' for an
 * admin, $3 the class): role NULL when not in it. */
#define CLASS_ACCESS                                                                         \
	" c AS (SELECT cl.id, cl.name, cl.pool_id, cl.alloc_slices, cl.state,"               \
	" CASE WHEN $2::bool THEN 'admin' ELSE gc_class_role($1::bigint, cl.id) END AS role" \
	" FROM classes cl WHERE cl.id = $3::bigint)"

static const char *const STAFF = "owner teacher admin";

static int staff(const char *role)
{
	return role && strstr(STAFF, role) != NULL;
}

static void access_args(struct http_req *r, struct db_args *a, long long cid)
{
	db_arg_ll(a, (long long)r->auth->user_id);
	db_arg_str(a, r->auth->role == ROLE_ADMIN ? "t" : "f");
	db_arg_ll(a, cid);
}

static void no_class(struct http_req *r)
{
	http_reply_error(r, RC_NOTFOUND, "GET /api/v1/classes lists your classes",
	                 "no such class (or you are not in it)");
}

static void no_session(struct http_req *r)
{
	http_reply_error(r, RC_NOTFOUND, "GET /api/v1/classes/{id}/reservations lists them",
	                 "no such lab session");
}

/* ---- read ---- */

static void list_done(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;
	json_t *items;

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "");
		return;
	}
	if (PQntuples(res) != 1 || !db_val(res, 0, 0)) {
		no_class(r);
		return;
	}
	items = json_loads(db_val(res, 0, 1), 0, NULL);
	if (!json_is_array(items)) {
		json_decref(items);
		items = json_array();
	}
	/* the class as far as a lab session page needs it (the class's own
	 * object is GET /classes/{id}) */
	http_reply_json(r, 200,
	                json_pack("{s:o, s:{s:I, s:s, s:o, s:s, s:{s:I}}}", "items", items, "class",
	                          "id", (json_int_t)strtoll(db_val(res, 0, 2), NULL, 10), "name",
	                          db_val(res, 0, 3), "code",
	                          db_val(res, 0, 4) ? json_string(db_val(res, 0, 4)) : json_null(),
	                          "my_role", db_val(res, 0, 0), "allocation", "slices",
	                          (json_int_t)strtoll(db_val(res, 0, 5), NULL, 10)));
}

static void list(struct http_req *r)
{
	struct db_args a = DB_ARGS_INIT;
	long long cid;

	if (api_id(r, "id", &cid) < 0)
		return;
	access_args(r, &a, cid);
	db_query_args(
	        "WITH" CLASS_ACCESS
	        " SELECT c.role, (SELECT COALESCE(json_agg(x.doc::json ORDER BY x.st, x.id),"
	        "  '[]')::text FROM (SELECT s.id, s.starts_at AS st, " SESSION_JSON " AS doc"
	        "  FROM class_sessions s WHERE s.class_id = c.id AND s.cancelled_at IS NULL)"
	        "  x), c.id, c.name, (SELECT code FROM classes WHERE id = c.id), c.alloc_slices"
	        " FROM c",
	        &a, list_done, r);
}

static void one_reply(PGresult *res, enum rc rc, struct http_req *r, int status)
{
	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "");
		return;
	}
	if (PQntuples(res) != 1 || !db_val(res, 0, 0)) {
		no_class(r);
		return;
	}
	if (!db_val(res, 0, 1)) {
		no_session(r);
		return;
	}
	http_reply_json(r, status, json_loads(db_val(res, 0, 1), 0, NULL));
}

static void one_200(PGresult *res, enum rc rc, void *arg)
{
	one_reply(res, rc, arg, 200);
}

static void one_201(PGresult *res, enum rc rc, void *arg)
{
	one_reply(res, rc, arg, 201);
}

static void reply_session(struct http_req *r, long long cid, long long sid, db_cb cb)
{
	struct db_args a = DB_ARGS_INIT;

	access_args(r, &a, cid);
	db_arg_ll(&a, sid);
	db_query_args("WITH" CLASS_ACCESS " SELECT c.role, (SELECT " SESSION_JSON
	              " FROM class_sessions s WHERE s.id = $4::bigint AND s.class_id = c.id"
	              " AND s.cancelled_at IS NULL) FROM c",
	              &a, cb, r);
}

static void get(struct http_req *r)
{
	long long cid, sid;

	if (api_id(r, "id", &cid) < 0 || api_id(r, "sid", &sid) < 0)
		return;
	reply_session(r, cid, sid, one_200);
}

/* ---- create and change ---- */

static const struct jfield session_spec[] = {
	{ "title", J_STRING, 0, 200 },
	{ "starts_at", J_STRING, 0, 64 },
	{ "ends_at", J_STRING, 0, 64 },
	{ "repeat_until", J_STRING, 0, 32 }, /* a date; null: once */
	{ "slices", J_INT, 0, 0 },
	{ NULL, 0, 0, 0 },
};

struct save {
	long long cid, sid; /* sid 0: a new session */
};

static void bad_field(struct http_req *r, const char *field, const char *reason, const char *hint,
                      const char *msg)
{
	http_reply_error_details(r, RC_INVALID,
	                         json_pack("[{s:s, s:s}]", "field", field, "reason", reason), hint,
	                         msg);
}

static void saved(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;
	struct save *s = r->data;
	const char *err;
	char id[24];

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "could not save the lab session");
		return;
	}
	err = PQntuples(res) == 1 ? db_val(res, 0, 0) : "not_found";
	if (!err) {
		snprintf(id, sizeof(id), "%s", db_val(res, 0, 1));
		auth_audit(r, r->auth, s->sid ? "class_session.update" : "class_session.create", id,
		           NULL);
		sched_kick(); /* an open window may have changed */
		reply_session(r, s->cid, strtoll(id, NULL, 10), s->sid ? one_200 : one_201);
		return;
	}
	if (strcmp(err, "not_found") == 0)
		no_class(r);
	else if (strcmp(err, "no_session") == 0)
		no_session(r);
	else if (strcmp(err, "forbidden") == 0)
		http_reply_error(r, RC_FORBIDDEN, NULL,
		                 "only the class's teachers change its lab sessions");
	else if (strcmp(err, "archived") == 0)
		http_reply_error(r, RC_CONFLICT, NULL, "the class is archived");
	else if (strcmp(err, "starts_at") == 0 || strcmp(err, "ends_at") == 0)
		bad_field(r, err, "invalid", "e.g. \"2026-09-07T10:00:00Z\"",
		          strcmp(err, "starts_at") == 0
		                  ? "starts_at must be a time (ISO 8601, with its zone)"
		                  : "ends_at must be a time (ISO 8601, with its zone)");
	else if (strcmp(err, "window") == 0)
		bad_field(r, "ends_at", "range", "a lab session lasts at most 24 hours",
		          "ends_at must be after starts_at, at most 24 hours later");
	else if (strcmp(err, "repeat_until") == 0)
		bad_field(r, "repeat_until", "invalid", "e.g. \"2026-12-18\"",
		          "repeat_until must be a date");
	else if (strcmp(err, "repeat_before") == 0)
		bad_field(r, "repeat_until", "range", NULL,
		          "repeat_until must not be before the first session's day");
	else if (strcmp(err, "slices") == 0)
		bad_field(r, "slices", "range", NULL, "slices must be 0 or more");
	else if (strcmp(err, "over_alloc") == 0) {
		char msg[96];

		snprintf(msg, sizeof(msg), "the class's allocation is %s slices",
		         db_val(res, 0, 2));
		http_reply_error_details(
		        r, RC_EXCEEDS_QUOTA,
		        json_pack("[{s:s, s:I}]", "what", "slices", "most",
		                  (json_int_t)strtoll(db_val(res, 0, 2), NULL, 10)),
		        "reserve at most the class's allocation, or ask an admin for more", msg);
	} else if (strcmp(err, "pool_full") == 0) {
		long long total = strtoll(db_val(res, 0, 6), NULL, 10);
		long long other = db_val(res, 0, 3) ? strtoll(db_val(res, 0, 3), NULL, 10) : 0;
		char hint[96];

		snprintf(hint, sizeof(hint),
		         "reserve at most %lld slices then, or pick another time",
		         total - other > 0 ? total - other : 0);
		if (!other)
			http_reply_error(r, RC_CONFLICT, hint, "the pool has %lld slices", total);
		else
			http_reply_error(r, RC_CONFLICT, hint,
			                 "the pool has %lld slices; at %s lab sessions (class '%s' "
			                 "among them) reserve %lld",
			                 total, db_val(res, 0, 5), db_val(res, 0, 4), other);
	} else
		api_reply_db_error(r, RC_DB, "could not save the lab session");
}

static void save(struct http_req *r, long long cid, long long sid)
{
	json_t *body = api_json_body(r, session_spec), *v;
	struct db_args a = DB_ARGS_INIT;
	struct save *s;

	if (!body)
		return;
	if (!sid && (!json_is_string(json_object_get(body, "starts_at")) ||
	             !json_is_string(json_object_get(body, "ends_at")) ||
	             !json_is_integer(json_object_get(body, "slices")))) {
		bad_field(r,
		          !json_is_string(json_object_get(body, "starts_at")) ? "starts_at"
		          : !json_is_string(json_object_get(body, "ends_at")) ? "ends_at"
		                                                              : "slices",
		          "required", NULL, "a lab session needs starts_at, ends_at and slices");
		json_decref(body);
		return;
	}
	s = api_state(r, sizeof(*s), NULL);
	if (!s) {
		json_decref(body);
		return;
	}
	s->cid = cid;
	s->sid = sid;
	access_args(r, &a, cid);                                                  /* $1-$3 */
	db_arg_ll_opt(&a, sid, sid > 0);                                          /* $4 */
	db_arg_str(&a, json_string_value(json_object_get(body, "title")));        /* $5 */
	db_arg_str(&a, json_string_value(json_object_get(body, "starts_at")));    /* $6 */
	db_arg_str(&a, json_string_value(json_object_get(body, "ends_at")));      /* $7 */
	db_arg_str(&a, json_string_value(json_object_get(body, "repeat_until"))); /* $8 */
	db_arg_str(&a, json_object_get(body, "repeat_until") ? "t" : "f");        /* $9 */
	v = json_object_get(body, "slices");
	db_arg_ll_opt(&a, json_integer_value(v), json_is_integer(v)); /* $10 */
	db_query_args(
	        "WITH" CLASS_ACCESS ","
	        " old AS (SELECT * FROM class_sessions WHERE id = $4::bigint"
	        "  AND class_id = $3::bigint AND cancelled_at IS NULL),"
	        " v AS (SELECT COALESCE($5::text, (SELECT title FROM old), '') AS title,"
	        "  CASE WHEN $6::text IS NULL THEN (SELECT starts_at FROM old)"
	        "  ELSE gc_try_ts($6) END AS st,"
	        "  CASE WHEN $7::text IS NULL THEN (SELECT ends_at FROM old)"
	        "  ELSE gc_try_ts($7) END AS en,"
	        "  CASE WHEN $9::bool THEN gc_try_date($8) ELSE (SELECT repeat_until FROM old)"
	        "  END AS ru, COALESCE($10::int, (SELECT slices FROM old)) AS slices),"
	        " tot AS (SELECT count(*) AS n FROM slices WHERE pool_id = (SELECT pool_id FROM "
	        "c)),"
	        " chk AS (SELECT CASE"
	        "  WHEN c.id IS NULL OR c.role IS NULL THEN 'not_found'"
	        "  WHEN $4::bigint IS NOT NULL AND NOT EXISTS (SELECT 1 FROM old) THEN 'no_session'"
	        "  WHEN c.role NOT IN ('owner', 'teacher', 'admin') THEN 'forbidden'"
	        "  WHEN c.state <> 'active' THEN 'archived'"
	        "  WHEN v.st IS NULL THEN 'starts_at'"
	        "  WHEN v.en IS NULL THEN 'ends_at'"
	        "  WHEN v.en <= v.st OR v.en > v.st + interval '24 hours' THEN 'window'"
	        "  WHEN $9::bool AND $8::text IS NOT NULL AND v.ru IS NULL THEN 'repeat_until'"
	        "  WHEN v.ru IS NOT NULL AND v.ru < (v.st AT TIME ZONE 'UTC')::date"
	        "  THEN 'repeat_before'"
	        "  WHEN v.slices IS NULL OR v.slices < 0 THEN 'slices'"
	        "  WHEN v.slices > c.alloc_slices THEN 'over_alloc'"
	        "  WHEN v.slices > 0 AND COALESCE(x.slices, 0) + v.slices > tot.n"
	        "  THEN 'pool_full' END AS err,"
	        "  c.alloc_slices, x.slices AS other, x.class_name, x.at, tot.n AS total"
	        "  FROM (SELECT 1) one LEFT JOIN c ON true CROSS JOIN v CROSS JOIN tot"
	        "  LEFT JOIN LATERAL gc_class_session_clash(c.pool_id, v.st, v.en, v.ru,"
	        "  $4::bigint) x ON v.st IS NOT NULL AND v.en > v.st AND v.slices > 0),"
	        " ins AS (INSERT INTO class_sessions (class_id, title, starts_at, ends_at,"
	        "  repeat_until, slices, created_by) SELECT $3::bigint, v.title, v.st, v.en, v.ru,"
	        "  v.slices, $1::bigint FROM v, chk WHERE chk.err IS NULL AND $4::bigint IS NULL"
	        "  RETURNING id),"
	        " upd AS (UPDATE class_sessions s SET title = v.title, starts_at = v.st,"
	        "  ends_at = v.en, repeat_until = v.ru, slices = v.slices, prepulled_for = NULL"
	        "  FROM v, chk WHERE chk.err IS NULL AND s.id = $4::bigint RETURNING s.id)"
	        " SELECT chk.err, COALESCE((SELECT id FROM ins), (SELECT id FROM upd)),"
	        " chk.alloc_slices, chk.other, chk.class_name,"
	        " to_char(chk.at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI \"UTC\"'), chk.total"
	        " FROM chk",
	        &a, saved, r);
	json_decref(body);
}

static void create(struct http_req *r)
{
	long long cid;

	if (api_id(r, "id", &cid) < 0)
		return;
	save(r, cid, 0);
}

static void patch(struct http_req *r)
{
	long long cid, sid;

	if (api_id(r, "id", &cid) < 0 || api_id(r, "sid", &sid) < 0)
		return;
	save(r, cid, sid);
}

/* ---- cancel ---- */

static void cancelled(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "could not cancel the lab session");
		return;
	}
	if (PQntuples(res) != 1 || !db_val(res, 0, 0)) {
		no_class(r);
		return;
	}
	if (strcmp(db_val(res, 0, 2), "t") != 0) {
		no_session(r);
		return;
	}
	if (!staff(db_val(res, 0, 0))) {
		http_reply_error(r, RC_FORBIDDEN, NULL,
		                 "only the class's teachers change its lab sessions");
		return;
	}
	auth_audit(r, r->auth, "class_session.cancel", db_val(res, 0, 1), NULL);
	sched_kick();
	http_reply_json(r, 204, NULL);
}

static void cancel(struct http_req *r)
{
	struct db_args a = DB_ARGS_INIT;
	long long cid, sid;

	if (api_id(r, "id", &cid) < 0 || api_id(r, "sid", &sid) < 0)
		return;
	access_args(r, &a, cid);
	db_arg_ll(&a, sid);
	db_query_args("WITH" CLASS_ACCESS ","
	              " d AS (UPDATE class_sessions SET cancelled_at = now() WHERE id = $4::bigint"
	              "  AND class_id = $3::bigint AND cancelled_at IS NULL"
	              "  AND (SELECT role FROM c) IN ('owner', 'teacher', 'admin') RETURNING id)"
	              " SELECT c.role, (SELECT id FROM d), EXISTS (SELECT 1 FROM class_sessions"
	              "  WHERE id = $4::bigint AND class_id = $3::bigint"
	              "  AND cancelled_at IS NULL) OR EXISTS (SELECT 1 FROM d) FROM c",
	              &a, cancelled, r);
}

/* ---- pre-pull before a window opens ---- */

static struct cron_section *prepull_cron;
static int prepull_busy;

static void pulled(enum rc rc, const char *err, void *arg)
{
	(void)arg;
	if (rc != RC_OK)
		log_msg(LOG_WARN, "classes", NULL, "pre-pull for a lab session failed: %s",
		        err ? err : rc_code(rc));
}

static void prepull_due(PGresult *res, enum rc rc, void *arg)
{
	(void)arg;
	prepull_busy = 0;
	if (rc != RC_OK)
		return;
	for (int i = 0; i < PQntuples(res); i++) {
		long long img = strtoll(db_val(res, i, 0), NULL, 10);
		long long node = strtoll(db_val(res, i, 1), NULL, 10);

		if (images_ensure(img, node, pulled, NULL) < 0)
			log_msg(LOG_WARN, "classes", NULL, "pre-pull: out of memory");
	}
	if (PQntuples(res) > 0)
		log_msg(LOG_INFO, "classes", NULL, "pre-pull: %d image pulls for lab sessions",
		        PQntuples(res));
}

static void prepull_tick(struct cron_section *sec, void *arg)
{
	char lead[16];
	const char *p[1] = { lead };

	(void)sec;
	(void)arg;
	if (prepull_busy || !leader_is())
		return;
	prepull_busy = 1;
	snprintf(lead, sizeof(lead), "%d", PREPULL_LEAD_S);
	/* each occurrence once: the session remembers the one it pulled for */
	db_query("WITH due AS (SELECT s.id, n.starts_at AS occ, c.pool_id, c.allowed_images"
	         "  FROM class_sessions s JOIN classes c ON c.id = s.class_id"
	         "  CROSS JOIN LATERAL gc_class_session_next(s.id, now(), 1) n"
	         "  WHERE s.cancelled_at IS NULL AND c.state = 'active' AND c.pool_id IS NOT NULL"
	         "  AND cardinality(c.allowed_images) > 0"
	         "  AND n.starts_at <= now() + make_interval(secs => $1::int)"
	         "  AND s.prepulled_for IS DISTINCT FROM n.starts_at),"
	         " mark AS (UPDATE class_sessions s SET prepulled_for = due.occ FROM due"
	         "  WHERE s.id = due.id)"
	         " SELECT DISTINCT i.id, g.node_id FROM due"
	         "  CROSS JOIN unnest(due.allowed_images) AS x(id)"
	         "  JOIN images i ON i.id = x.id AND i.owner_id IS NULL"
	         "  JOIN slices sl ON sl.pool_id = due.pool_id JOIN gpus g ON g.id = sl.gpu_id"
	         "  JOIN nodes nd ON nd.id = g.node_id AND nd.health = 'up'"
	         "  AND nd.admin_state = 'active'",
	         1, p, prepull_due, NULL);
}

void api_class_sessions_init(void)
{
	if (!prepull_cron)
		prepull_cron =
		        cron_every("class-prepull", PREPULL_TICK_MS, 2000, prepull_tick, NULL);
}

const struct route api_class_sessions_routes[] = {
	{ HTTP_GET, "/api/v1/classes/{id}/reservations", list, ROLES_ALL, 0, 0, NULL },
	{ HTTP_POST, "/api/v1/classes/{id}/reservations", create, ROLES_ALL, 0, 0, NULL },
	{ HTTP_GET, "/api/v1/classes/{id}/reservations/{sid}", get, ROLES_ALL, 0, 0, NULL },
	{ HTTP_PATCH, "/api/v1/classes/{id}/reservations/{sid}", patch, ROLES_ALL, 0, 0, NULL },
	{ HTTP_DELETE, "/api/v1/classes/{id}/reservations/{sid}", cancel, ROLES_ALL, 0, 0, NULL },
	{ 0, NULL, NULL, 0, 0, 0, NULL },
};
