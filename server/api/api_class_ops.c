/* api_class_ops.c — teacher reach: the class's work, a teacher's stop and
 * extend of a student's instance, notices, the class dashboard (JSON and
 * CSV), end of term.
 *
 * Who: every query computes the caller's standing in the class in its
 * first CTE (gc_class_role, 0028; an admin is 'admin') and returns it as
 * column 0: NULL (not in the class, or no class) replies 404 so a class's
 * existence is not revealed; a member without the right gets 403.  What a
 * teacher or TA may do to a student's work is gc_class_reach (0032): the
 * class's reach flags, only over students' work in the class's context,
 * only while the class is active.  Mutations are conditioned on the same
 * test inside their statement, and every act on a student's work is
 * audit-logged with the student.
 * Does not own: the class object, roster, sessions (api_classes.c,
 * api_class_sessions.c), the proxy's check (apps/route.c), idle
 * reclamation (work/reclaim.c).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <http_parser.h>

#include "api/api.h"
#include "apps/proxy.h"
#include "auth/auth.h"
#include "base/events.h"
#include "base/worker.h"
#include "db/db.h"
#include "storage/files.h"
#include "storage/storage.h"

/* $1 the caller, $2 the class, $3 the caller is an admin. */
#define GATE_CTE                                                                             \
	"c AS (SELECT id, state, teacher_id, name, code, CASE WHEN $3::boolean THEN 'admin'" \
	" ELSE gc_class_role($1, id) END AS role FROM classes WHERE id = $2)"
#define STAFF_SQL   "('admin', 'owner', 'teacher', 'ta')"
#define TEACHER_SQL "('admin', 'owner', 'teacher')"

#define EXTEND_MAX_S (7 * 86400)

enum need { NEED_MEMBER, NEED_STAFF, NEED_TEACHER, NEED_OWNER };

static int role_in(const char *role, const char *const *set)
{
	for (; *set; set++)
		if (strcmp(role, *set) == 0)
			return 1;
	return 0;
}

/* 0 when role (column 0 of a gated query) meets need, else replies. */
static int gate(struct http_req *r, const char *role, enum need need)
{
	static const char *const staff[] = { "admin", "owner", "teacher", "ta", NULL };
	static const char *const teachers[] = { "admin", "owner", "teacher", NULL };
	static const char *const owners[] = { "admin", "owner", NULL };

	if (!role) {
		http_reply_error(r, RC_NOTFOUND, "GET /api/v1/classes lists yours",
		                 "no such class '%s'", http_param(r, "id"));
		return -1;
	}
	if (need == NEED_STAFF && !role_in(role, staff)) {
		http_reply_error(r, RC_FORBIDDEN, NULL,
		                 "only the class's teachers and teaching assistants may do this");
		return -1;
	}
	if (need == NEED_TEACHER && !role_in(role, teachers)) {
		http_reply_error(r, RC_FORBIDDEN, NULL, "only the class's teachers may do this");
		return -1;
	}
	if (need == NEED_OWNER && !role_in(role, owners)) {
		http_reply_error(r, RC_FORBIDDEN, "ask the class's owner or an admin",
		                 "only the class's owner may do this");
		return -1;
	}
	return 0;
}

/* The three gate parameters; 0, or -1 after replying 404 for a bad {id}. */
static int gate_args(struct http_req *r, struct db_args *a)
{
	long long cid;

	if (api_id(r, "id", &cid) < 0)
		return -1;
	db_arg_ll(a, (long long)r->auth->user_id);
	db_arg_ll(a, cid);
	db_arg_str(a, r->auth->role == ROLE_ADMIN ? "t" : "f");
	return 0;
}

/* Column col of row 0 as JSON (it holds a JSON document). */
static json_t *json_col(const PGresult *res, int col)
{
	const char *v = db_val(res, 0, col);
	json_t *j = v ? json_loads(v, 0, NULL) : NULL;
	return j ? j : json_null();
}

/* ---- the class's work ---- */

#define INSTANCE_JSON                                                                        \
	"json_build_object('id', i.id, 'name', i.name, 'kind', i.kind, 'state', i.state,"    \
	" 'desired', i.desired, 'reason', i.reason, 'slices', i.slices, 'pool', p.name,"     \
	" 'user', json_build_object('id', u.id, 'username', u.username, 'display_name',"     \
	" u.display_name), 'started_at', gc_ts(i.started_at), 'last_activity_at',"           \
	" gc_ts(i.last_activity_at), 'idle_warning_at', gc_ts(i.idle_warning_at),"           \
	" 'idle_message', i.idle_message, 'extended_until', gc_ts(i.extended_until),"        \
	" 'routes', (SELECT COALESCE(json_agg(json_build_object('id', rt.id, 'port_name',"   \
	" rt.port_name) ORDER BY rt.port_name), '[]') FROM routes rt WHERE rt.instance_id =" \
	" i.id))"
#define JOB_JSON                                                                                \
	"json_build_object('id', j.id, 'name', j.name, 'state', j.state, 'desired', j.desired," \
	" 'reason', j.reason, 'slices', j.slices, 'pool', p.name, 'user', json_build_object("   \
	"'id', u.id, 'username', u.username, 'display_name', u.display_name), 'created_at',"    \
	" gc_ts(j.created_at), 'started_at', gc_ts(j.started_at), 'finished_at',"               \
	" gc_ts(j.finished_at))"

/* Gives each route of each instance its app address. */
static void add_route_urls(json_t *instances)
{
	size_t i, k;
	json_t *in, *rt;
	char origin[512], url[600];

	json_array_foreach(instances, i, in)
	{
		json_array_foreach(json_object_get(in, "routes"), k, rt)
		{
			proxy_route_origin(json_string_value(json_object_get(rt, "id")), origin,
			                   sizeof(origin));
			snprintf(url, sizeof(url), "%s/", origin);
			json_object_set_new(rt, "url", json_string(url));
		}
	}
}

static void work_done(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;
	json_t *ins;

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "cannot read the class's work");
		return;
	}
	if (gate(r, db_val(res, 0, 0), NEED_STAFF) < 0)
		return;
	ins = json_col(res, 1);
	add_route_urls(ins);
	http_reply_json(r, 200,
	                json_pack("{s:o, s:o}", "instances", ins, "jobs", json_col(res, 2)));
}

static void work(struct http_req *r)
{
	struct db_args a = DB_ARGS_INIT;

	if (gate_args(r, &a) < 0)
		return;
	db_query_args("WITH " GATE_CTE ","
	              " ok AS (SELECT 1 FROM c WHERE role IN " STAFF_SQL ")"
	              " SELECT (SELECT role FROM c),"
	              " (SELECT COALESCE(json_agg(" INSTANCE_JSON " ORDER BY u.username, i.id),"
	              "  '[]')::text FROM instances i JOIN users u ON u.id = i.user_id"
	              "  LEFT JOIN pools p ON p.id = i.pool_id WHERE i.class_id = $2"
	              "  AND i.state <> 'deleted' AND EXISTS (SELECT 1 FROM ok)),"
	              " (SELECT COALESCE(json_agg(x ORDER BY (x->>'id')::bigint DESC), '[]')::text"
	              "  FROM (SELECT " JOB_JSON
	              " AS x FROM jobs j JOIN users u ON u.id = j.user_id"
	              "  LEFT JOIN pools p ON p.id = j.pool_id WHERE j.class_id = $2"
	              "  AND EXISTS (SELECT 1 FROM ok) AND (j.state IN ('queued', 'starting',"
	              "  'running', 'stopping') OR j.finished_at > now() - interval '7 days')"
	              "  ORDER BY j.id DESC LIMIT 500) q)",
	              &a, work_done, r);
}

/* ---- a teacher's stop and extend of a student's instance ---- */

struct act {
	int extend; /* else stop */
	long long seconds;
};

static void acted(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;
	struct act *st = r->data;
	const char *iid = http_param(r, "iid");

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "cannot act on the instance");
		return;
	}
	if (gate(r, db_val(res, 0, 0), NEED_STAFF) < 0)
		return;
	if (!db_val(res, 0, 1)) {
		http_reply_error(r, RC_NOTFOUND,
		                 "GET /api/v1/classes/{id}/work lists the class's work",
		                 "no instance %s of a student in this class", iid);
		return;
	}
	if (strcmp(db_val(res, 0, 2), "t") != 0) {
		http_reply_error(r, RC_FORBIDDEN, "the class's owner sets what assistants may do",
		                 "you may not %s this student's instance",
		                 st->extend ? "extend" : "stop");
		return;
	}
	if (strcmp(db_val(res, 0, 3), "0") == 0 && st->extend) {
		http_reply_error(r, RC_CONFLICT, "only a running instance can be extended",
		                 "instance %s is %s", iid, db_val(res, 0, 4));
		return;
	}
	if (strcmp(db_val(res, 0, 3), "0") != 0) {
		json_t *d = json_pack("{s:s, s:s}", "student", db_val(res, 0, 5), "class",
		                      http_param(r, "id"));
		if (st->extend)
			json_object_set_new(d, "seconds", json_integer(st->seconds));
		auth_audit(r, r->auth, st->extend ? "class.extend_instance" : "class.stop_instance",
		           iid, d);
		if (!st->extend)
			events_publish(EV_WORKLOAD_CHANGED); /* the driver stops it */
	}
	http_reply_json(r, st->extend ? 200 : 202, json_col(res, 6));
}

/* $4 the instance, $5 seconds.  From the later of now, the current
 * extension and the end of the lifetime the policy gives it. */
static const char extend_sql[] =
        "WITH " GATE_CTE ","
        " i AS (SELECT i.id, i.state, i.started_at, i.extended_until, ow.username"
        "  FROM instances i JOIN users ow ON ow.id = i.user_id, c"
        "  WHERE i.id = $4 AND i.class_id = c.id AND i.state <> 'deleted'"
        "  AND c.role IN " STAFF_SQL " AND gc_class_student(i.user_id, c.id)"
        "  FOR UPDATE OF i),"
        " ok AS (SELECT ((SELECT role FROM c) = 'admin' AND (SELECT state FROM c) = 'active')"
        "  OR gc_class_reach($1, $4, 'extend') AS ok),"
        " u AS (UPDATE instances SET extended_until = greatest(now(), i.extended_until,"
        "  i.started_at + make_interval(secs => pol.max_lifetime_seconds))"
        "  + make_interval(secs => $5::int), idle_warning_at = NULL, idle_message = '',"
        "  updated_at = now() FROM i, gc_instance_policy(i.id) pol"
        "  WHERE instances.id = i.id AND i.state = 'running' AND (SELECT ok FROM ok)"
        "  RETURNING instances.id, instances.extended_until)"
        " SELECT (SELECT role FROM c), (SELECT id FROM i), (SELECT ok FROM ok),"
        " (SELECT count(*) FROM u), (SELECT state FROM i), (SELECT username FROM i),"
        " (SELECT json_build_object('id', u.id, 'extended_until',"
        "  gc_ts(u.extended_until))::text FROM u)";

/* $4 the instance, $5 the reason. */
static const char stop_sql[] =
        "WITH " GATE_CTE ","
        " i AS (SELECT i.id, i.state, ow.username FROM instances i"
        "  JOIN users ow ON ow.id = i.user_id, c"
        "  WHERE i.id = $4 AND i.class_id = c.id AND i.state <> 'deleted'"
        "  AND c.role IN " STAFF_SQL " AND gc_class_student(i.user_id, c.id)"
        "  FOR UPDATE OF i),"
        " ok AS (SELECT (SELECT role FROM c) = 'admin' OR gc_class_reach($1, $4, 'stop') AS ok),"
        " u AS (UPDATE instances SET desired = 'stopped', reason = $5, updated_at = now()"
        "  FROM i WHERE instances.id = i.id AND (SELECT ok FROM ok)"
        "  AND i.state IN ('queued', 'pulling', 'creating', 'running', 'stopping')"
        "  AND instances.desired = 'running' RETURNING instances.id)"
        " SELECT (SELECT role FROM c), (SELECT id FROM i), (SELECT ok FROM ok),"
        " (SELECT count(*) FROM u), (SELECT state FROM i), (SELECT username FROM i),"
        " (SELECT json_build_object('id', i.id, 'state', i.state, 'desired',"
        "  'stopped')::text FROM i)";

/* $4 the instance, $5 seconds (extend) or the reason (stop). */
static void act_run(struct http_req *r, struct act *st, const char *reason)
{
	struct db_args a = DB_ARGS_INIT;
	long long iid;
	char secs[24];

	if (gate_args(r, &a) < 0 || api_id(r, "iid", &iid) < 0)
		return;
	db_arg_ll(&a, iid);
	snprintf(secs, sizeof(secs), "%lld", st->seconds);
	db_arg_str(&a, st->extend ? secs : reason);
	db_query_args(st->extend ? extend_sql : stop_sql, &a, acted, r);
}

static const struct jfield empty_spec[] = { { NULL, 0, 0, 0 } };

static void stop(struct http_req *r)
{
	json_t *body = api_json_body(r, empty_spec);
	struct act *st;
	char why[120];

	if (!body)
		return;
	json_decref(body);
	st = api_state(r, sizeof(*st), NULL);
	if (!st)
		return;
	snprintf(why, sizeof(why), "stopped by %s (class staff)", r->auth->username);
	act_run(r, st, why);
}

static void extend(struct http_req *r)
{
	static const struct jfield spec[] = { { "seconds", J_INT, 1, 0 }, { NULL, 0, 0, 0 } };
	json_t *body = api_json_body(r, spec);
	struct act *st;
	long long s;

	if (!body)
		return;
	s = (long long)json_integer_value(json_object_get(body, "seconds"));
	json_decref(body);
	if (s < 60 || s > EXTEND_MAX_S) {
		http_reply_error(r, RC_INVALID, "give seconds such as 1800 (60 to 604800)",
		                 "seconds must be between 60 and %d", EXTEND_MAX_S);
		return;
	}
	st = api_state(r, sizeof(*st), NULL);
	if (!st)
		return;
	st->extend = 1;
	st->seconds = s;
	act_run(r, st, NULL);
}

/* ---- notices ---- */

#define NOTICE_JSON                                                                       \
	"json_build_object('id', n.id, 'body', n.body, 'author', CASE WHEN au.id IS NULL" \
	" THEN NULL ELSE json_build_object('id', au.id, 'username', au.username,"         \
	" 'display_name', au.display_name) END, 'created_at', gc_ts(n.created_at),"       \
	" 'expires_at', gc_ts(n.expires_at)"

static void notices_done(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "cannot read the notices");
		return;
	}
	if (gate(r, db_val(res, 0, 0), NEED_MEMBER) < 0)
		return;
	http_reply_json(r, 200, json_pack("{s:o}", "items", json_col(res, 1)));
}

/* Members see live notices; staff also the expired ones (?all=1). */
static void notices_list(struct http_req *r)
{
	struct db_args a = DB_ARGS_INIT;
	char all[8] = "";
	long n = api_query(r, "all", all, sizeof(all));

	if (n == -2 || gate_args(r, &a) < 0)
		return;
	if (n >= 0 && strcmp(all, "1") && strcmp(all, "0")) {
		http_reply_error(r, RC_INVALID, "all=1 or all=0", "malformed all '%s'", all);
		return;
	}
	db_arg_str(&a, n >= 0 && strcmp(all, "1") == 0 ? "t" : "f");
	db_query_args("WITH " GATE_CTE
	              " SELECT (SELECT role FROM c), (SELECT COALESCE(json_agg(" NOTICE_JSON ")"
	              "  ORDER BY n.created_at DESC, n.id DESC), '[]')::text FROM class_notices n"
	              "  LEFT JOIN users au ON au.id = n.author_id WHERE n.class_id = $2"
	              "  AND EXISTS (SELECT 1 FROM c WHERE role IS NOT NULL)"
	              "  AND (n.expires_at IS NULL OR n.expires_at > now() OR ($4::boolean"
	              "  AND (SELECT role FROM c) IN " STAFF_SQL ")))",
	              &a, notices_done, r);
}

static void notice_posted(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "cannot post the notice");
		return;
	}
	if (gate(r, db_val(res, 0, 0), NEED_TEACHER) < 0)
		return;
	if (strcmp(db_val(res, 0, 1), "active") != 0) {
		http_reply_error(r, RC_CONFLICT, "an archived class is read-only",
		                 "the class is archived");
		return;
	}
	auth_audit(r, r->auth, "class.notice_post", http_param(r, "id"),
	           json_pack("{s:s}", "notice", db_val(res, 0, 2)));
	http_reply_json(r, 201, json_col(res, 3));
}

static void notice_post(struct http_req *r)
{
	static const struct jfield spec[] = { { "body", J_STRING, 1, 4000 },
		                              { "expires_in_s", J_INT, 0, 0 },
		                              { NULL, 0, 0, 0 } };
	json_t *body = api_json_body(r, spec);
	struct db_args a = DB_ARGS_INIT;
	const char *text;
	json_t *exp;
	const char *p;

	if (!body)
		return;
	text = json_string_value(json_object_get(body, "body"));
	for (p = text; *p == ' ' || *p == '\n' || *p == '\t' || *p == '\r'; p++)
		;
	exp = json_object_get(body, "expires_in_s");
	if (!*p) {
		json_decref(body);
		http_reply_error(r, RC_INVALID, "write what the class should read",
		                 "body must not be empty");
		return;
	}
	if (exp && (json_integer_value(exp) < 60 || json_integer_value(exp) > 366 * 86400)) {
		json_decref(body);
		http_reply_error(r, RC_INVALID, "give expires_in_s such as 86400, or leave it out",
		                 "expires_in_s must be between 60 and 31622400");
		return;
	}
	if (gate_args(r, &a) < 0) {
		json_decref(body);
		return;
	}
	db_arg_str(&a, text);
	db_arg_ll_opt(&a, exp ? (long long)json_integer_value(exp) : 0, exp != NULL);
	db_query_args("WITH " GATE_CTE ","
	              " n AS (INSERT INTO class_notices (class_id, author_id, body, expires_at)"
	              "  SELECT c.id, $1, $4, now() + make_interval(secs => $5::int) FROM c"
	              "  WHERE c.role IN " TEACHER_SQL " AND c.state = 'active' RETURNING *)"
	              " SELECT (SELECT role FROM c), (SELECT state FROM c), (SELECT id FROM n),"
	              " (SELECT " NOTICE_JSON ")::text FROM n LEFT JOIN users au"
	              "  ON au.id = n.author_id)",
	              &a, notice_posted, r);
	json_decref(body);
}

static void notice_deleted(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "cannot delete the notice");
		return;
	}
	if (gate(r, db_val(res, 0, 0), NEED_TEACHER) < 0)
		return;
	if (strcmp(db_val(res, 0, 1), "0") == 0) {
		http_reply_error(r, RC_NOTFOUND, NULL, "no notice %s in this class",
		                 http_param(r, "nid"));
		return;
	}
	auth_audit(r, r->auth, "class.notice_delete", http_param(r, "id"),
	           json_pack("{s:s}", "notice", http_param(r, "nid")));
	http_reply_json(r, 204, NULL);
}

static void notice_delete(struct http_req *r)
{
	struct db_args a = DB_ARGS_INIT;
	long long nid;

	if (gate_args(r, &a) < 0 || api_id(r, "nid", &nid) < 0)
		return;
	db_arg_ll(&a, nid);
	db_query_args("WITH " GATE_CTE ","
	              " d AS (DELETE FROM class_notices n USING c WHERE n.id = $4"
	              "  AND n.class_id = c.id AND c.role IN " TEACHER_SQL " RETURNING n.id)"
	              " SELECT (SELECT role FROM c), (SELECT count(*) FROM d)",
	              &a, notice_deleted, r);
}

/* GET /notices: the live notices of every active class the caller is in. */
static void my_notices(struct http_req *r)
{
	struct db_args a = DB_ARGS_INIT;

	db_arg_ll(&a, (long long)r->auth->user_id);
	db_query_args(
	        "SELECT 'me', (SELECT COALESCE(json_agg(x ORDER BY x->>'created_at' DESC),"
	        " '[]')::text FROM (SELECT " NOTICE_JSON ", 'class', json_build_object('id',"
	        " c.id, 'name', c.name, 'code', c.code)) AS x FROM class_notices n"
	        " JOIN classes c ON c.id = n.class_id LEFT JOIN users au ON au.id = n.author_id"
	        " WHERE c.state = 'active' AND gc_class_role($1, c.id) IS NOT NULL"
	        " AND (n.expires_at IS NULL OR n.expires_at > now())"
	        " ORDER BY n.created_at DESC LIMIT 50) q)",
	        &a, notices_done, r);
}

/* ---- the dashboard ---- */

/* Per student: work now, GPU-hours allocated this week (Monday 00:00 UTC)
 * vs the class's per-student limit, storage of the home vs the class's
 * per-student storage limit, idle instances, quota pressure.  GPU
 * utilisation is not measured (declared GPUs have none to read): the
 * dashboard says so instead of inventing a figure, and shows the last
 * activity the proxy and the idle sampler saw. */
static const char dashboard_sql[] =
        "WITH " GATE_CTE ","
        " ok AS (SELECT 1 FROM c WHERE role IN " STAFF_SQL "),"
        " cl AS (SELECT * FROM classes WHERE id = $2 AND EXISTS (SELECT 1 FROM ok)),"
        " wk AS (SELECT date_trunc('week', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AS t),"
        " gh AS (SELECT * FROM gc_class_gpu_hours($2, (SELECT t FROM wk))),"
        " st AS (SELECT m.user_id, u.username, u.display_name, m.state AS member_state"
        "  FROM class_members m JOIN users u ON u.id = m.user_id"
        "  WHERE m.class_id = $2 AND m.role = 'student' AND EXISTS (SELECT 1 FROM ok)),"
        " ins AS (SELECT i.* FROM instances i WHERE i.class_id = $2"
        "  AND i.state IN ('queued', 'pulling', 'creating', 'running', 'stopping')"
        "  AND EXISTS (SELECT 1 FROM ok)),"
        " jb AS (SELECT j.* FROM jobs j WHERE j.class_id = $2"
        "  AND j.state IN ('queued', 'starting', 'running', 'stopping')"
        "  AND EXISTS (SELECT 1 FROM ok)),"
        " idle AS (SELECT i.id, i.user_id, i.name, i.last_activity_at, i.idle_warning_at"
        "  FROM ins i WHERE i.state = 'running' AND (i.idle_warning_at IS NOT NULL"
        "  OR i.last_activity_at < now() - interval '10 minutes')),"
        " sr AS (SELECT st.*,"
        "  (SELECT COALESCE(sum(i.slices), 0) FROM ins i WHERE i.user_id = st.user_id"
        "   AND i.state <> 'queued') + (SELECT COALESCE(sum(j.slices), 0) FROM jb j"
        "   WHERE j.user_id = st.user_id AND j.state <> 'queued') AS slices_now,"
        "  COALESCE((SELECT gpu_hours FROM gh WHERE gh.user_id = st.user_id), 0) AS gpu_h,"
        "  (SELECT bytes FROM storage_areas sa WHERE sa.area = 'home:' || st.user_id) AS sbytes,"
        "  (SELECT max(i.last_activity_at) FROM ins i WHERE i.user_id = st.user_id) AS act"
        "  FROM st),"
        " pr AS (SELECT sr.*, cl.student_slices AS lim_slices, cl.student_gpu_hours_week"
        "  AS lim_gpu_h, cl.student_storage_bytes AS lim_bytes,"
        "  greatest(CASE WHEN cl.student_slices > 0 THEN slices_now::float8"
        "   / cl.student_slices END, CASE WHEN cl.student_gpu_hours_week > 0 THEN gpu_h"
        "   / cl.student_gpu_hours_week END, CASE WHEN cl.student_storage_bytes > 0 THEN"
        "   sbytes::float8 / cl.student_storage_bytes END) AS ratio FROM sr, cl)"
        " SELECT (SELECT role FROM c),"
        " (SELECT COALESCE(json_agg(json_build_object('user', json_build_object('id', user_id,"
        "  'username', username, 'display_name', display_name), 'member_state', member_state,"
        "  'instances', (SELECT COALESCE(json_agg(json_build_object('id', i.id, 'name', i.name,"
        "   'state', i.state, 'slices', i.slices) ORDER BY i.id), '[]') FROM ins i"
        "   WHERE i.user_id = pr.user_id),"
        "  'jobs', (SELECT COALESCE(json_agg(json_build_object('id', j.id, 'name', j.name,"
        "   'state', j.state, 'slices', j.slices) ORDER BY j.id), '[]') FROM jb j"
        "   WHERE j.user_id = pr.user_id),"
        "  'slices', json_build_object('used', slices_now, 'limit', lim_slices),"
        "  'gpu_hours_week', json_build_object('allocated', round(gpu_h::numeric, 3),"
        "   'limit', lim_gpu_h),"
        "  'gpu_utilization', json_build_object('measured', false, 'value', NULL),"
        "  'last_activity_at', gc_ts(act),"
        "  'idle', (SELECT COALESCE(json_agg(json_build_object('id', d.id, 'name', d.name,"
        "   'idle_since', gc_ts(d.last_activity_at), 'warned_at', gc_ts(d.idle_warning_at))"
        "   ORDER BY d.id), '[]') FROM idle d WHERE d.user_id = pr.user_id),"
        "  'storage', json_build_object('used_bytes', sbytes, 'limit_bytes', lim_bytes),"
        "  'pressure', CASE WHEN ratio >= 1 THEN 'at_limit' WHEN ratio >= 0.8"
        "   THEN 'near_limit' ELSE 'ok' END)"
        "  ORDER BY username), '[]')::text FROM pr),"
        " (SELECT json_build_object('students', (SELECT count(*) FROM st),"
        "  'running_instances', (SELECT count(*) FROM ins WHERE state = 'running'),"
        "  'queued', (SELECT count(*) FROM ins WHERE state = 'queued')"
        "   + (SELECT count(*) FROM jb WHERE state = 'queued'),"
        "  'running_jobs', (SELECT count(*) FROM jb WHERE state = 'running'),"
        "  'idle_instances', (SELECT count(*) FROM idle),"
        "  'slices', json_build_object('used', (SELECT COALESCE(sum(slices), 0) FROM ins"
        "   WHERE state <> 'queued') + (SELECT COALESCE(sum(slices), 0) FROM jb"
        "   WHERE state <> 'queued'), 'allocation', cl.alloc_slices),"
        "  'gpu_hours_week', json_build_object('allocated',"
        "   round((SELECT COALESCE(sum(gpu_hours), 0) FROM gh)::numeric, 3),"
        "   'allocation', cl.alloc_gpu_hours_week),"
        "  'storage', json_build_object('used_bytes', (SELECT bytes FROM storage_areas"
        "   WHERE area = 'class:' || $2), 'students_used_bytes', (SELECT sum(sbytes) FROM sr)),"
        "  'week_starts_at', gc_ts((SELECT t FROM wk)))::text FROM cl),"
        " (SELECT COALESCE(json_agg(json_build_object('id', d.id, 'name', d.name, 'user',"
        "  (SELECT username FROM users WHERE id = d.user_id), 'idle_since',"
        "  gc_ts(d.last_activity_at), 'warned_at', gc_ts(d.idle_warning_at))"
        "  ORDER BY d.last_activity_at), '[]')::text FROM idle d),"
        " (SELECT COALESCE(json_agg(json_build_object('id', s.session_id, 'title', s.title,"
        "  'starts_at', gc_ts(s.starts_at), 'ends_at', gc_ts(s.ends_at), 'slices', s.slices,"
        "  'active_now', s.active_now) ORDER BY s.starts_at), '[]')::text"
        "  FROM gc_class_next_sessions($2, 5) s WHERE EXISTS (SELECT 1 FROM ok)),"
        " gc_ts(now()),"
        " (SELECT json_build_object('id', c.id, 'name', c.name, 'code', c.code, 'term', cl.term,"
        "  'state', c.state, 'my_role', NULLIF(c.role, 'admin'), 'archived_at',"
        "  gc_ts(cl.archived_at), 'data_policy', cl.data_policy, 'reach', json_build_object("
        "  'teachers_open_apps', cl.teachers_open_apps, 'tas_open_apps', cl.tas_open_apps,"
        "  'tas_stop_work', cl.tas_stop_work))::text FROM c, cl)";

/* A growing text. */
struct sbuf {
	char *p;
	size_t n, cap;
	int failed;
};

static void sb_put(struct sbuf *b, char c)
{
	if (b->failed)
		return;
	if (b->n + 2 > b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 4096;
		char *np = realloc(b->p, cap);
		if (!np) {
			b->failed = 1;
			return;
		}
		b->p = np;
		b->cap = cap;
	}
	b->p[b->n++] = c;
	b->p[b->n] = '\0';
}

/* One CSV field (RFC 4180; a formula-looking value gets an apostrophe). */
static void csv_field(struct sbuf *b, const char *v, int last)
{
	sb_put(b, '"');
	if (v[0] && strchr("=+-@\t\r", v[0]))
		sb_put(b, '\'');
	for (; *v; v++) {
		if (*v == '"')
			sb_put(b, '"');
		sb_put(b, *v);
	}
	sb_put(b, '"');
	sb_put(b, last ? '\n' : ',');
}

static const char *jstr(json_t *o, const char *path1, const char *path2, char *buf, size_t n)
{
	json_t *v = json_object_get(o, path1);

	if (path2)
		v = json_object_get(v, path2);
	if (json_is_string(v))
		return json_string_value(v);
	if (json_is_integer(v))
		snprintf(buf, n, "%lld", (long long)json_integer_value(v));
	else if (json_is_real(v))
		snprintf(buf, n, "%.3f", json_real_value(v));
	else if (json_is_true(v))
		snprintf(buf, n, "true");
	else if (json_is_false(v))
		snprintf(buf, n, "false");
	else
		buf[0] = '\0';
	return buf;
}

static void dashboard_csv(struct http_req *r, json_t *students)
{
	static const char *const head[] = { "username",
		                            "display_name",
		                            "member_state",
		                            "instances_now",
		                            "jobs_now",
		                            "slices_used",
		                            "slices_limit",
		                            "gpu_hours_week",
		                            "gpu_hours_limit",
		                            "gpu_utilization",
		                            "last_activity_at",
		                            "idle_instances",
		                            "idle_since",
		                            "storage_bytes",
		                            "storage_limit",
		                            "pressure",
		                            NULL };
	struct sbuf sb = { NULL, 0, 0, 0 }, *out = &sb;
	json_t *s;
	size_t i;
	char b[64], n1[24], n2[24], disp[300];

	for (int k = 0; head[k]; k++)
		csv_field(out, head[k], !head[k + 1]);
	json_array_foreach(students, i, s)
	{
		json_t *idle = json_object_get(s, "idle");
		snprintf(n1, sizeof(n1), "%zu", json_array_size(json_object_get(s, "instances")));
		snprintf(n2, sizeof(n2), "%zu", json_array_size(json_object_get(s, "jobs")));
		csv_field(out, jstr(s, "user", "username", b, sizeof(b)), 0);
		snprintf(disp, sizeof(disp), "%s", jstr(s, "user", "display_name", b, sizeof(b)));
		csv_field(out, disp, 0);
		csv_field(out, jstr(s, "member_state", NULL, b, sizeof(b)), 0);
		csv_field(out, n1, 0);
		csv_field(out, n2, 0);
		csv_field(out, jstr(s, "slices", "used", b, sizeof(b)), 0);
		csv_field(out, jstr(s, "slices", "limit", b, sizeof(b)), 0);
		csv_field(out, jstr(s, "gpu_hours_week", "allocated", b, sizeof(b)), 0);
		csv_field(out, jstr(s, "gpu_hours_week", "limit", b, sizeof(b)), 0);
		csv_field(out, "not measured", 0);
		csv_field(out, jstr(s, "last_activity_at", NULL, b, sizeof(b)), 0);
		snprintf(n1, sizeof(n1), "%zu", json_array_size(idle));
		csv_field(out, n1, 0);
		csv_field(out, jstr(json_array_get(idle, 0), "idle_since", NULL, b, sizeof(b)), 0);
		csv_field(out, jstr(s, "storage", "used_bytes", b, sizeof(b)), 0);
		csv_field(out, jstr(s, "storage", "limit_bytes", b, sizeof(b)), 0);
		csv_field(out, jstr(s, "pressure", NULL, b, sizeof(b)), 1);
	}
	if (sb.failed) {
		free(sb.p);
		http_reply_error(r, RC_NOMEM, NULL, "out of memory");
		return;
	}
	{
		char cd[120];
		snprintf(cd, sizeof(cd), "attachment; filename=\"class-%s-dashboard.csv\"",
		         http_param(r, "id"));
		http_add_header(r, "Content-Disposition", cd);
		http_add_header(r, "Cache-Control", "no-store");
		http_reply(r, 200, "text/csv; charset=utf-8", sb.p, sb.n);
	}
	free(sb.p);
}

static void dashboard_done(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;
	const int *csv = r->data;
	json_t *students;

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "cannot read the dashboard");
		return;
	}
	if (gate(r, db_val(res, 0, 0), NEED_STAFF) < 0)
		return;
	students = json_col(res, 1);
	if (*csv) {
		dashboard_csv(r, students);
		json_decref(students);
		return;
	}
	http_reply_json(r, 200,
	                json_pack("{s:o, s:o, s:o, s:o, s:o, s:s}", "class", json_col(res, 6),
	                          "students", students, "totals", json_col(res, 2), "idle",
	                          json_col(res, 3), "upcoming_sessions", json_col(res, 4), "at",
	                          db_val(res, 0, 5)));
}

static void dashboard(struct http_req *r)
{
	struct db_args a = DB_ARGS_INIT;
	char fmt[8] = "";
	long n = api_query(r, "format", fmt, sizeof(fmt));
	int *csv;

	if (n == -2)
		return;
	if (n >= 0 && strcmp(fmt, "csv") && strcmp(fmt, "json")) {
		http_reply_error(r, RC_INVALID, "format=csv or format=json", "unknown format '%s'",
		                 fmt);
		return;
	}
	csv = api_state(r, sizeof(*csv), NULL);
	if (!csv || gate_args(r, &a) < 0)
		return;
	*csv = n >= 0 && strcmp(fmt, "csv") == 0;
	db_query_args(dashboard_sql, &a, dashboard_done, r);
}

/* ---- end of term ---- */

struct arch {
	long long class_id, teacher_id;
	char policy[16];
	char *roster, *usage; /* CSV texts */
	json_t *summary;
	json_t *trashed; /* [{path, trash_name, is_dir, bytes}] */
	struct files_result res;
};

static void arch_free(void *p)
{
	struct arch *x = p;

	free(x->roster);
	free(x->usage);
	json_decref(x->summary);
	json_decref(x->trashed);
	free(x);
}

/* Writes text as dir archive/<name> of the area (replacing). */
static int write_file(int root, int sfd, const struct storage_area *ar, const char *name,
                      const char *text, struct files_result *res)
{
	char stage[64], path[80];
	int fd;
	size_t len = strlen(text), off = 0;

	files_random_name("a", stage, sizeof(stage));
	fd = openat(sfd, stage, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
	if (fd < 0)
		return files_fail(res, errno, name) == RC_OK ? 0 : -1;
	while (off < len) {
		ssize_t w = write(fd, text + off, len - off);
		if (w < 0) {
			close(fd);
			unlinkat(sfd, stage, 0);
			return files_fail(res, errno, name) == RC_OK ? 0 : -1;
		}
		off += (size_t)w;
	}
	close(fd);
	snprintf(path, sizeof(path), "archive/%s", name);
	return files_place(sfd, stage, root, path, 1, ar->uid, ar->gid, res) == RC_OK ? 0 : -1;
}

/* Worker: the CSVs into archive/, then (data_policy remove) everything
 * else of the class area into its trash. */
static void arch_work(void *arg)
{
	struct http_req *r = arg;
	struct arch *x = r->data;
	struct storage_area ar;
	struct stat sb;
	int root, sfd, tfd;

	memset(&x->res, 0, sizeof(x->res));
	storage_area_class(&ar, x->class_id, x->teacher_id);
	root = storage_area_open(&ar);
	if (root < 0) {
		files_fail(&x->res, errno, "");
		return;
	}
	if (fstatat(root, "archive", &sb, AT_SYMLINK_NOFOLLOW) < 0 &&
	    files_mkdir(root, "archive", ar.uid, ar.gid, &x->res) != RC_OK) {
		close(root);
		return;
	}
	sfd = storage_staging_open();
	if (sfd < 0) {
		files_fail(&x->res, errno, "");
		close(root);
		return;
	}
	if (write_file(root, sfd, &ar, "roster.csv", x->roster, &x->res) < 0 ||
	    write_file(root, sfd, &ar, "usage.csv", x->usage, &x->res) < 0) {
		close(sfd);
		close(root);
		return;
	}
	close(sfd);
	x->res.rc = RC_OK;
	if (strcmp(x->policy, "remove") == 0 && (tfd = storage_trash_open(&ar)) >= 0) {
		int dfd = dup(root);
		DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
		struct dirent *e;
		if (!d && dfd >= 0)
			close(dfd);
		while (d && (e = readdir(d))) {
			char tn[48];
			int is_dir = 0;
			int64_t bytes = 0;
			struct files_result fr;
			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
			    !strcmp(e->d_name, "archive"))
				continue;
			memset(&fr, 0, sizeof(fr));
			if (files_trash(root, tfd, e->d_name, tn, &is_dir, &bytes, &fr) == RC_OK)
				json_array_append_new(
				        x->trashed, json_pack("{s:s, s:s, s:b, s:I}", "path",
				                              e->d_name, "trash_name", tn, "is_dir",
				                              is_dir, "bytes", (json_int_t)bytes));
			json_decref(fr.out);
		}
		if (d)
			closedir(d);
		close(tfd);
	}
	close(root);
}

static void arch_recorded(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;
	struct arch *x = r->data;

	(void)res;
	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "the class area went to the trash but was not recorded");
		return;
	}
	http_reply_json(r, 200, json_incref(x->summary));
}

static void arch_written(void *arg)
{
	struct http_req *r = arg;
	struct arch *x = r->data;
	char area[40], uid[24], *doc;
	const char *p[3];

	if (x->res.rc != RC_OK) {
		/* the class is archived already; the files can be written again
		 * by nobody but the owner's own hand: say what went wrong */
		json_object_set_new(x->summary, "files_error", json_string(x->res.msg));
		json_decref(x->res.out);
		x->res.out = NULL;
		http_reply_json(r, 200, json_incref(x->summary));
		return;
	}
	json_decref(x->res.out);
	x->res.out = NULL;
	json_object_set_new(x->summary, "files",
	                    json_pack("[s, s]", "archive/roster.csv", "archive/usage.csv"));
	json_object_set(x->summary, "trashed", x->trashed);
	if (json_array_size(x->trashed) == 0) {
		http_reply_json(r, 200, json_incref(x->summary));
		return;
	}
	snprintf(area, sizeof(area), "class:%lld", x->class_id);
	snprintf(uid, sizeof(uid), "%lld", (long long)r->auth->user_id);
	doc = json_dumps(x->trashed, JSON_COMPACT);
	p[0] = area;
	p[1] = doc ? doc : "[]";
	p[2] = uid;
	db_query("INSERT INTO trash_items (area, path, trash_name, is_dir, bytes, deleted_by)"
	         " SELECT $1, t.path, t.trash_name, t.is_dir, t.bytes, $3::bigint"
	         " FROM jsonb_to_recordset($2::jsonb) AS t(path text, trash_name text,"
	         " is_dir boolean, bytes bigint)",
	         3, p, arch_recorded, r);
	free(doc);
}

static void archived(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;
	struct arch *x = r->data;

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "cannot archive the class");
		return;
	}
	if (gate(r, db_val(res, 0, 0), NEED_OWNER) < 0)
		return;
	if (strcmp(db_val(res, 0, 1), "active") != 0) { /* again: nothing more to do */
		http_reply_json(r, 200,
		                json_pack("{s:I, s:s, s:s?, s:s, s:b}", "id",
		                          (json_int_t)x->class_id, "state", "archived",
		                          "archived_at", db_val(res, 0, 9), "data_policy",
		                          db_val(res, 0, 10), "already", 1));
		return;
	}
	x->teacher_id = strtoll(db_val(res, 0, 6), NULL, 10);
	snprintf(x->policy, sizeof(x->policy), "%s", db_val(res, 0, 5));
	x->roster = strdup(db_val(res, 0, 7));
	x->usage = strdup(db_val(res, 0, 8));
	x->trashed = json_array();
	x->summary = json_pack(
	        "{s:I, s:s, s:s, s:s, s:{s:I, s:I}, s:I, s:b}", "id", (json_int_t)x->class_id,
	        "state", "archived", "archived_at", db_val(res, 0, 9), "data_policy", x->policy,
	        "stopped", "instances", (json_int_t)strtoll(db_val(res, 0, 2), NULL, 10), "jobs",
	        (json_int_t)strtoll(db_val(res, 0, 3), NULL, 10), "sessions_cancelled",
	        (json_int_t)strtoll(db_val(res, 0, 4), NULL, 10), "already", 0);
	auth_audit(r, r->auth, "class.archive", http_param(r, "id"), json_deep_copy(x->summary));
	events_publish(EV_WORKLOAD_CHANGED); /* the drivers stop the work */
	events_publish(EV_ALLOC_CHANGED);
	if (!x->roster || !x->usage || !x->summary ||
	    worker_submit(arch_work, arch_written, r) < 0) {
		http_reply_error(r, RC_UNAVAILABLE, "archive it again to write the files",
		                 "the class is archived but its files could not be written now");
		return;
	}
}

static void archive(struct http_req *r)
{
	static const struct jfield spec[] = { { "data_policy", J_STRING, 0, 16 },
		                              { NULL, 0, 0, 0 } };
	json_t *body = api_json_body(r, spec);
	const char *pol;
	struct db_args a = DB_ARGS_INIT;
	struct arch *x;
	char why[120];

	if (!body)
		return;
	pol = json_string_value(json_object_get(body, "data_policy"));
	if (pol && strcmp(pol, "keep") && strcmp(pol, "remove")) {
		json_decref(body);
		http_reply_error(r, RC_INVALID, "keep or remove",
		                 "data_policy must be keep or remove");
		return;
	}
	x = api_state(r, sizeof(*x), arch_free);
	if (!x || gate_args(r, &a) < 0) {
		json_decref(body);
		return;
	}
	api_id(r, "id", &x->class_id);
	db_arg_str(&a, pol);
	snprintf(why, sizeof(why), "the class was archived by %s", r->auth->username);
	db_arg_str(&a, why);
	db_arg_str(&a, r->auth->username);
	db_query_args(
	        "WITH " GATE_CTE ","
	        " ok AS (SELECT 1 FROM c WHERE state = 'active' AND role IN ('admin', 'owner')),"
	        " si AS (UPDATE instances SET desired = 'stopped', reason = $5, updated_at = now()"
	        "  WHERE class_id = $2 AND EXISTS (SELECT 1 FROM ok) AND desired = 'running'"
	        "  AND state IN ('queued', 'pulling', 'creating', 'running', 'stopping')"
	        "  RETURNING id),"
	        " sj AS (UPDATE jobs SET desired = 'cancelled', cancelled_by = $6, updated_at = "
	        "now()"
	        "  WHERE class_id = $2 AND EXISTS (SELECT 1 FROM ok) AND desired = 'running'"
	        "  AND state IN ('queued', 'starting', 'running', 'stopping') RETURNING id),"
	        " ss AS (UPDATE class_sessions SET cancelled_at = now() WHERE class_id = $2"
	        "  AND EXISTS (SELECT 1 FROM ok) AND cancelled_at IS NULL AND (ends_at > now()"
	        "  OR repeat_until >= current_date) RETURNING id),"
	        " u AS (UPDATE classes SET state = 'archived', archived_at = now(), invite_hash ="
	        "  NULL, invite_expires_at = NULL, data_policy = COALESCE($4, data_policy),"
	        "  updated_at = now() WHERE id = $2 AND EXISTS (SELECT 1 FROM ok)"
	        "  RETURNING data_policy, archived_at)"
	        " SELECT (SELECT role FROM c), (SELECT state FROM c), (SELECT count(*) FROM si),"
	        " (SELECT count(*) FROM sj), (SELECT count(*) FROM ss), (SELECT data_policy FROM "
	        "u),"
	        " (SELECT teacher_id FROM c),"
	        " 'username,display_name,email,role,state,joined_via,added_at' || E'\\n' ||"
	        " COALESCE((SELECT string_agg(concat_ws(',', gc_csv(us.username),"
	        "  gc_csv(us.display_name), gc_csv(us.email), gc_csv(m.role), gc_csv(m.state),"
	        "  gc_csv(m.via), gc_csv(gc_ts(m.added_at))), E'\\n' ORDER BY m.role, us.username)"
	        "  || E'\\n' FROM class_members m JOIN users us ON us.id = m.user_id"
	        "  WHERE m.class_id = $2), ''),"
	        " 'username,role,gpu_hours,instances,jobs,home_bytes' || E'\\n' ||"
	        " COALESCE((SELECT string_agg(concat_ws(',', gc_csv(us.username), gc_csv(m.role),"
	        "  gc_csv(round(COALESCE(g.gpu_hours, 0)::numeric, 3)::text),"
	        "  gc_csv((SELECT count(*) FROM instances i WHERE i.class_id = $2"
	        "   AND i.user_id = m.user_id)::text),"
	        "  gc_csv((SELECT count(*) FROM jobs j WHERE j.class_id = $2"
	        "   AND j.user_id = m.user_id)::text),"
	        "  gc_csv((SELECT bytes FROM storage_areas WHERE area = 'home:' || "
	        "m.user_id)::text)),"
	        "  E'\\n' ORDER BY us.username) || E'\\n' FROM class_members m"
	        "  JOIN users us ON us.id = m.user_id"
	        "  LEFT JOIN gc_class_gpu_hours($2, '-infinity') g ON g.user_id = m.user_id"
	        "  WHERE m.class_id = $2 AND EXISTS (SELECT 1 FROM ok)), ''),"
	        " COALESCE((SELECT gc_ts(archived_at) FROM u),"
	        "  (SELECT gc_ts(archived_at) FROM classes WHERE id = $2)),"
	        " (SELECT data_policy FROM classes WHERE id = $2)",
	        &a, archived, r);
	json_decref(body); /* after the query: pol points into it */
}

const struct route api_class_ops_routes[] = {
	{ HTTP_GET, "/api/v1/classes/{id}/work", work, ROLES_ALL, 0, 0, NULL },
	{ HTTP_POST, "/api/v1/classes/{id}/instances/{iid}/stop", stop, ROLES_ALL, 0, 1024, NULL },
	{ HTTP_POST, "/api/v1/classes/{id}/instances/{iid}/extend", extend, ROLES_ALL, 0, 1024,
	  NULL },
	{ HTTP_GET, "/api/v1/classes/{id}/notices", notices_list, ROLES_ALL, 0, 0, NULL },
	{ HTTP_POST, "/api/v1/classes/{id}/notices", notice_post, ROLES_ALL, 0, 16384, NULL },
	{ HTTP_DELETE, "/api/v1/classes/{id}/notices/{nid}", notice_delete, ROLES_ALL, 0, 0, NULL },
	{ HTTP_GET, "/api/v1/notices", my_notices, ROLES_ALL, 0, 0, NULL },
	{ HTTP_GET, "/api/v1/classes/{id}/dashboard", dashboard, ROLES_ALL, 0, 0, NULL },
	{ HTTP_POST, "/api/v1/classes/{id}/archive", archive, ROLES_ALL, 0, 1024, NULL },
	{ 0, NULL, NULL, 0, 0, 0, NULL },
};
