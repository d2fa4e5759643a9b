/* api_assignments.c — assignments: release a class folder to students' homes, collect snapshots, hand back feedback.
 *
 * /classes/{id}/assignments[/{aid}[/release|/collect|/return|/students]].
 * Staff (owner, co-teachers, admins) change them; TAs read everything;
 * a student reads the released ones and only their own row ("mine");
 * anyone else gets 404.
 *
 * The file work runs as a pass (struct pass) over the assignment's
 * students, one student at a time, each copy on the worker pool through
 * the storage layer's beneath-the-root paths:
 *   release: the class area's `source` into the student's home as
 *            classes/<code or id>/<name>/ (reserved in the student's quota
 *            first; an existing folder is the student's and is kept);
 *   collect: the student's folder into the class area's
 *            collected/<name>/<username>/ while the student's running
 *            containers are paused (Docker pause: the cgroup freezer), so
 *            the snapshot is one moment of the folder; the copy is staged
 *            and swapped in whole.  A folder whose newest change (ctime)
 *            is after the deadline is late; one unchanged since the last
 *            snapshot is not copied again;
 *   return:  the class area's feedback/<name>/<username>/ into the
 *            student's classes/<..>/<name>/feedback/.
 * The leader's cron section collects at the deadline, again at late_until,
 * and releases released assignments to students who joined since.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <http_parser.h>

#include "api/api.h"
#include "auth/auth.h"
#include "base/cron.h"
#include "base/log.h"
#include "base/worker.h"
#include "db/db.h"
#include "db/leader.h"
#include "engine/docker.h"
#include "engine/nodes.h"
#include "storage/files.h"
#include "storage/paths.h"
#include "storage/quota.h"
#include "storage/storage.h"

/* ---- the caller's standing in the class ---- */

struct ctx {
	struct http_req *r;
	long long cid, aid;
	char role[16]; /* owner, teacher, ta, student, admin */
	int staff;     /* may change assignments */
	int archived;  /* the class's term ended: read only */
	int reader;    /* sees every student */
	json_t *body;
	void (*next)(struct ctx *c);
};

static void ctx_free(void *p)
{
	struct ctx *c = p;

	json_decref(c->body);
	free(c);
}

static void no_class(struct http_req *r)
{
	http_reply_error(r, RC_NOTFOUND, "GET /api/v1/classes lists yours", "no such class");
}

static void role_done(PGresult *res, enum rc rc, void *arg)
{
	struct ctx *c = arg;
	const char *role;

	if (rc != RC_OK) {
		api_reply_db_error(c->r, rc, "");
		return;
	}
	if (PQntuples(res) != 1) {
		no_class(c->r);
		return;
	}
	role = db_val(res, 0, 0);
	if (c->r->auth->role == ROLE_ADMIN)
		role = role && strcmp(role, "student") && strcmp(role, "ta") ? role : "admin";
	if (!role) {
		no_class(c->r);
		return;
	}
	snprintf(c->role, sizeof(c->role), "%s", role);
	c->archived = db_val(res, 0, 1) && !strcmp(db_val(res, 0, 1), "archived");
	c->staff = !strcmp(role, "owner") || !strcmp(role, "teacher") || !strcmp(role, "admin");
	c->reader = c->staff || !strcmp(role, "ta");
	c->next(c);
}

/* Resolves {id} (and {aid} when the route has one) and the caller's role,
 * then next(c); someone not in the class gets 404. */
static void with_class(struct http_req *r, int has_aid, void (*next)(struct ctx *c))
{
	struct ctx *c;
	struct db_args a = DB_ARGS_INIT;
	long long cid, aid = 0;

	/* a capture that is not an id has been answered 404 */
	if (http_param_id(r, "id", &cid) < 0 || (has_aid && http_param_id(r, "aid", &aid) < 0))
		return;
	c = api_state(r, sizeof(*c), ctx_free);
	if (!c)
		return;
	c->r = r;
	c->cid = cid;
	c->aid = aid;
	c->next = next;
	db_arg_ll(&a, r->auth->user_id);
	db_arg_ll(&a, cid);
	db_query_args(
	        "SELECT gc_class_role($1::bigint, c.id), c.state FROM classes c WHERE c.id = $2",
	        &a, role_done, c);
}

static int need_staff(struct ctx *c)
{
	if (c->staff && c->archived) {
		http_reply_error(c->r, RC_CONFLICT, "an archived class is read-only",
		                 "the class is archived");
		return 0;
	}
	if (c->staff)
		return 1;
	http_reply_error(c->r, RC_FORBIDDEN, "the class's teachers manage its assignments",
	                 "only the class's teachers may change assignments");
	return 0;
}

/* ---- the assignment as JSON ---- */

/* $1 the class, $2 the caller (mine), $3 't' when the caller reads all. */
/* clang-format off */
#define ASSIGNMENT_JSON \
	"json_build_object('id', a.id, 'class_id', a.class_id, 'name', a.name," \
	" 'source', a.source, 'description', a.description, 'state', a.state," \
	" 'deadline', " DB_TS("a.deadline") ", 'late_until', " DB_TS("a.late_until") "," \
	" 'released_at', " DB_TS("a.released_at") "," \
	" 'collected_at', " DB_TS("a.collected_at") "," \
	" 'late_collected_at', " DB_TS("a.late_collected_at") "," \
	" 'created_at', " DB_TS("a.created_at") "," \
	" 'path', 'classes/' || COALESCE(c.code, c.id::text) || '/' || a.name," \
	" 'counts', CASE WHEN $3::bool THEN (SELECT json_build_object(" \
	"   'pending', count(*) FILTER (WHERE s.status = 'pending')," \
	"   'released', count(*) FILTER (WHERE s.status = 'released')," \
	"   'collected', count(*) FILTER (WHERE s.status = 'collected')," \
	"   'late', count(*) FILTER (WHERE s.status = 'late')," \
	"   'missing', count(*) FILTER (WHERE s.status = 'missing')," \
	"   'returned', count(*) FILTER (WHERE s.status = 'returned')," \
	"   'failed', count(*) FILTER (WHERE s.status = 'failed'))" \
	"  FROM assignment_students s WHERE s.assignment_id = a.id) END," \
	" 'mine', (SELECT json_build_object('status', s.status, 'late', s.late," \
	"   'released_at', " DB_TS("s.released_at") "," \
	"   'collected_at', " DB_TS("s.collected_at") "," \
	"   'returned_at', " DB_TS("s.returned_at") "," \
	"   'message', s.message," \
	"   'path', 'classes/' || COALESCE(c.code, c.id::text) || '/' || a.name)" \
	"  FROM assignment_students s WHERE s.assignment_id = a.id" \
	"  AND s.user_id = $2::bigint))"

/* The per-student rows of assignment a ($3: all of them, else $4's). */
#define STUDENTS_JSON \
	"(SELECT COALESCE(json_agg(json_build_object(" \
	"  'user', json_build_object('id', u.id, 'username', u.username," \
	"   'display_name', u.display_name)," \
	"  'status', s.status, 'late', s.late, 'files', s.files, 'bytes', s.bytes," \
	"  'released_at', " DB_TS("s.released_at") "," \
	"  'collected_at', " DB_TS("s.collected_at") "," \
	"  'returned_at', " DB_TS("s.returned_at") ", 'message', s.message)" \
	"  ORDER BY u.username), '[]')::text" \
	" FROM assignment_students s JOIN users u ON u.id = s.user_id" \
	" WHERE s.assignment_id = a.id AND ($3::bool OR s.user_id = $4::bigint))"
/* clang-format on */

#define ASSIGNMENT_FROM " FROM assignments a JOIN classes c ON c.id = a.class_id"

static void list_done(PGresult *res, enum rc rc, void *arg)
{
	struct ctx *c = arg;

	if (rc != RC_OK) {
		api_reply_db_error(c->r, rc, "");
		return;
	}
	http_reply_json(c->r, 200,
	                json_pack("{s:o, s:o}", "items", json_loads(db_val(res, 0, 0), 0, NULL),
	                          "class", json_loads(db_val(res, 0, 1), 0, NULL)));
}

static void list_go(struct ctx *c)
{
	struct db_args a = DB_ARGS_INIT;

	db_arg_ll(&a, c->cid);
	db_arg_ll(&a, c->r->auth->user_id);
	db_arg_str(&a, c->reader ? "t" : "f");
	/* students see what was released to them; the class's head comes
	 * along, so the page needs no second call */
	db_query_args("SELECT (SELECT COALESCE(json_agg(" ASSIGNMENT_JSON
	              " ORDER BY a.deadline NULLS LAST, a.id), '[]')::text" ASSIGNMENT_FROM
	              " WHERE a.class_id = $1 AND ($3::bool OR a.state <> 'draft')),"
	              " (SELECT json_build_object('id', k.id, 'name', k.name, 'code', k.code,"
	              " 'term', k.term, 'state', k.state, 'my_role', gc_class_role($2, k.id))::text"
	              " FROM classes k WHERE k.id = $1)",
	              &a, list_done, c);
}

static void list(struct http_req *r)
{
	with_class(r, 0, list_go);
}

static void one_done(PGresult *res, enum rc rc, void *arg, int status)
{
	struct ctx *c = arg;

	if (rc != RC_OK) {
		api_reply_db_error(c->r, rc, "");
		return;
	}
	if (PQntuples(res) != 1) {
		http_reply_error(c->r, RC_NOTFOUND, "GET .../assignments lists them",
		                 "no such assignment");
		return;
	}
	http_reply_json(c->r, status, json_loads(db_val(res, 0, 0), 0, NULL));
}

static void one_200(PGresult *res, enum rc rc, void *arg)
{
	one_done(res, rc, arg, 200);
}

static void one_201(PGresult *res, enum rc rc, void *arg)
{
	one_done(res, rc, arg, 201);
}

static void reply_one(struct ctx *c, long long aid, db_cb cb)
{
	struct db_args a = DB_ARGS_INIT;

	db_arg_ll(&a, c->cid);
	db_arg_ll(&a, c->r->auth->user_id);
	db_arg_str(&a, c->reader ? "t" : "f");
	db_arg_ll(&a, aid);
	db_query_args("SELECT " ASSIGNMENT_JSON "::text" ASSIGNMENT_FROM
	              " WHERE a.class_id = $1 AND a.id = $4 AND ($3::bool OR a.state <> 'draft')",
	              &a, cb, c);
}

static void get_go(struct ctx *c)
{
	reply_one(c, c->aid, one_200);
}

static void get(struct http_req *r)
{
	with_class(r, 1, get_go);
}

/* ---- create, change, remove ---- */

static const struct jfield create_spec[] = {
	{ "name", J_STRING, 1, 64 },          { "source", J_STRING, 1, 1024 },
	{ "description", J_STRING, 0, 4000 }, { "deadline", J_STRING, 0, 64 },
	{ "late_until", J_STRING, 0, 64 },    { NULL, 0, 0, 0 },
};

static const struct jfield patch_spec[] = {
	{ "source", J_STRING, 0, 1024 },
	{ "description", J_STRING, 0, 4000 },
	{ "deadline", J_STRING, 0, 64 },
	{ "late_until", J_STRING, 0, 64 },
	{ NULL, 0, 0, 0 },
};

static void bad_field(struct http_req *r, const char *field, const char *hint, const char *msg)
{
	http_reply_error_details(r, RC_INVALID,
	                         json_pack("[{s:s, s:s}]", "field", field, "reason", "invalid"),
	                         hint, msg);
}

static int name_ok(const char *s)
{
	size_t n = s ? strlen(s) : 0;
	const char *ok = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-";

	return n >= 1 && n <= 64 && strchr(ok, s[0]) && s[0] != '.' && s[0] != '_' && s[0] != '-' &&
	       strspn(s, ok) == n;
}

/* "" or null clears a time; otherwise an ISO 8601 time with a zone. */
static int time_ok(json_t *v)
{
	const char *s = json_string_value(v);
	size_t n;

	if (!v || json_is_null(v) || (s && !*s))
		return 1;
	if (!s)
		return 0;
	n = strlen(s);
	return n >= 20 && n <= 35 && s[4] == '-' && s[7] == '-' && s[10] == 'T' &&
	       strspn(s, "0123456789-:.TZ+") == n &&
	       (s[n - 1] == 'Z' || strchr(s + 19, '+') || strchr(s + 19, '-'));
}

/* Checks the fields both bodies share; replies 400 and returns -1. */
static int body_valid(struct http_req *r, json_t *b, char *source, size_t srclen)
{
	const char *why = NULL;
	const char *src = json_string_value(json_object_get(b, "source"));

	if (src && (paths_clean_decoded(src, source, srclen, &why) < 0 || !*source)) {
		bad_field(r, "source", "a folder of the class area, e.g. \"hw1\"",
		          "source must be a folder of the class area");
		return -1;
	}
	if (!time_ok(json_object_get(b, "deadline"))) {
		bad_field(r, "deadline", "e.g. \"2026-12-24T18:00:00Z\"",
		          "deadline must be a time in ISO 8601 with a zone");
		return -1;
	}
	if (!time_ok(json_object_get(b, "late_until"))) {
		bad_field(r, "late_until", "e.g. \"2026-12-25T18:00:00Z\"",
		          "late_until must be a time in ISO 8601 with a zone");
		return -1;
	}
	return 0;
}

static const char *time_arg(json_t *b, const char *k)
{
	const char *s = json_string_value(json_object_get(b, k));

	return s && *s ? s : NULL;
}

static void saved(PGresult *res, enum rc rc, void *arg, int status, const char *action)
{
	struct ctx *c = arg;
	long long aid;

	if (rc == RC_CONFLICT) {
		http_reply_error(c->r, RC_CONFLICT, "pick another name",
		                 "the class already has an assignment of that name");
		return;
	}
	if (rc == RC_INVALID) {
		http_reply_error(c->r, RC_INVALID,
		                 "late_until must not be before the deadline, which it needs",
		                 "the deadline and late_until do not fit together");
		return;
	}
	if (api_one_row(c->r, res, rc, "assignment", "could not save the assignment") < 0)
		return;
	aid = strtoll(db_val(res, 0, 0), NULL, 10);
	auth_audit(
	        c->r, c->r->auth, action, db_val(res, 0, 0),
	        json_pack("{s:I, s:s}", "class_id", (json_int_t)c->cid, "name", db_val(res, 0, 1)));
	reply_one(c, aid, status == 201 ? one_201 : one_200);
}

static void created(PGresult *res, enum rc rc, void *arg)
{
	saved(res, rc, arg, 201, "assignment.create");
}

static void patched(PGresult *res, enum rc rc, void *arg)
{
	saved(res, rc, arg, 200, "assignment.update");
}

static void create_go(struct ctx *c)
{
	struct db_args a = DB_ARGS_INIT;
	char source[PATHS_MAX + 1];
	json_t *b;

	if (!need_staff(c))
		return;
	b = c->body = api_json_body(c->r, create_spec);
	if (!b)
		return;
	if (!name_ok(json_string_value(json_object_get(b, "name")))) {
		bad_field(c->r, "name", "e.g. \"hw1\"",
		          "name must be 1 to 64 letters, digits, '.', '_' or '-', starting with a "
		          "letter or digit");
		return;
	}
	if (body_valid(c->r, b, source, sizeof(source)) < 0)
		return;
	db_arg_ll(&a, c->cid);
	db_arg_str(&a, json_string_value(json_object_get(b, "name")));
	db_arg_str(&a, source);
	db_arg_str(&a, json_string_value(json_object_get(b, "description")));
	db_arg_str(&a, time_arg(b, "deadline"));
	db_arg_str(&a, time_arg(b, "late_until"));
	db_arg_ll(&a, c->r->auth->user_id);
	db_query_args("INSERT INTO assignments (class_id, name, source, description, deadline,"
	              " late_until, created_by) VALUES ($1, $2, $3, COALESCE($4, ''),"
	              " $5::timestamptz, $6::timestamptz, $7) RETURNING id, name",
	              &a, created, c);
}

static void create(struct http_req *r)
{
	with_class(r, 0, create_go);
}

static void patch_go(struct ctx *c)
{
	struct db_args a = DB_ARGS_INIT;
	char source[PATHS_MAX + 1] = "";
	json_t *b;

	if (!need_staff(c))
		return;
	b = c->body = api_json_body(c->r, patch_spec);
	if (!b || body_valid(c->r, b, source, sizeof(source)) < 0)
		return;
	db_arg_ll(&a, c->cid);
	db_arg_ll(&a, c->aid);
	db_arg_str(&a, *source ? source : NULL);
	db_arg_str(&a, json_string_value(json_object_get(b, "description")));
	db_arg_str(&a, json_object_get(b, "deadline") ? "t" : "f");
	db_arg_str(&a, time_arg(b, "deadline"));
	db_arg_str(&a, json_object_get(b, "late_until") ? "t" : "f");
	db_arg_str(&a, time_arg(b, "late_until"));
	/* a later deadline opens a collected assignment again */
	db_query_args("UPDATE assignments SET source = COALESCE($3, source),"
	              " description = COALESCE($4, description),"
	              " deadline = CASE WHEN $5::bool THEN $6::timestamptz ELSE deadline END,"
	              " late_until = CASE WHEN $7::bool THEN $8::timestamptz ELSE late_until END,"
	              " state = CASE WHEN state = 'collected' AND $5::bool AND $6::timestamptz > "
	              "now() THEN 'released' ELSE state END,"
	              " late_collected_at = CASE WHEN $7::bool THEN NULL ELSE late_collected_at "
	              "END, updated_at = now()"
	              " WHERE class_id = $1 AND id = $2 RETURNING id, name",
	              &a, patched, c);
}

static void patch(struct http_req *r)
{
	with_class(r, 1, patch_go);
}

static void removed(PGresult *res, enum rc rc, void *arg)
{
	struct ctx *c = arg;

	if (api_one_row(c->r, res, rc, "assignment", "could not remove the assignment") < 0)
		return;
	auth_audit(
	        c->r, c->r->auth, "assignment.delete", db_val(res, 0, 0),
	        json_pack("{s:I, s:s}", "class_id", (json_int_t)c->cid, "name", db_val(res, 0, 1)));
	http_reply(c->r, 204, NULL, NULL, 0);
}

static void delete_go(struct ctx *c)
{
	struct db_args a = DB_ARGS_INIT;

	if (!need_staff(c))
		return;
	db_arg_ll(&a, c->cid);
	db_arg_ll(&a, c->aid);
	/* the copies in homes and the class area stay: they are files */
	db_query_args("DELETE FROM assignments WHERE class_id = $1 AND id = $2 RETURNING id, name",
	              &a, removed, c);
}

static void delete_one(struct http_req *r)
{
	with_class(r, 1, delete_go);
}

/* ---- per-student rows ---- */

static void students_done(PGresult *res, enum rc rc, void *arg)
{
	struct ctx *c = arg;

	if (rc != RC_OK) {
		api_reply_db_error(c->r, rc, "");
		return;
	}
	if (PQntuples(res) != 1 || !db_val(res, 0, 0)) {
		http_reply_error(c->r, RC_NOTFOUND, "GET .../assignments lists them",
		                 "no such assignment");
		return;
	}
	http_reply_json(c->r, 200,
	                json_pack("{s:o}", "items", json_loads(db_val(res, 0, 0), 0, NULL)));
}

static void students_go(struct ctx *c)
{
	struct db_args a = DB_ARGS_INIT;

	db_arg_ll(&a, c->cid);
	db_arg_ll(&a, c->aid);
	db_arg_str(&a, c->reader ? "t" : "f");
	db_arg_ll(&a, c->r->auth->user_id);
	db_query_args("SELECT " STUDENTS_JSON " FROM assignments a WHERE a.class_id = $1"
	              " AND a.id = $2 AND ($3::bool OR a.state <> 'draft')",
	              &a, students_done, c);
}

static void students(struct http_req *r)
{
	with_class(r, 1, students_go);
}

/* ---- passes: release, collect, return ---- */

enum pass_op { P_RELEASE, P_COLLECT, P_RETURN };

struct container {
	long long node;
	char id[80];
	int paused;
};

struct pass {
	enum pass_op op;
	long long aid, cid, teacher;
	char code[40], name[72], source[PATHS_MAX + 1];
	int64_t deadline_ns; /* 0: none */
	int late_pass;       /* at or after late_until */
	/* the students: [{id, username, status, changed_ns}] */
	json_t *students;
	size_t i;
	int ok, failed, skipped;
	/* the source's size (release) */
	int64_t src_bytes, src_count;
	/* the student in hand */
	long long uid;
	char username[64];
	int64_t changed_ns;
	long long reservation;
	struct container ctr[16];
	int nctr, cidx;
	/* worker results */
	struct files_result res;
	int64_t bytes, count, newest;
	int missing, unchanged, exists;
	void (*done)(struct pass *p, void *arg);
	void *arg;
};

static void pass_next(struct pass *p);

/* Clears the last result (a copy's answer JSON included). */
static void res_reset(struct pass *p)
{
	json_decref(p->res.out);
	memset(&p->res, 0, sizeof(p->res));
}

static void pass_free(struct pass *p)
{
	json_decref(p->students);
	json_decref(p->res.out);
	free(p);
}

static void pass_end(struct pass *p)
{
	if (p->done)
		p->done(p, p->arg);
	pass_free(p);
}

static int open_areas(struct pass *p, int *home, int *cls)
{
	struct storage_area h, c;

	memset(&h, 0, sizeof(h));
	memset(&c, 0, sizeof(c));
	storage_area_home(&h, p->uid, p->username);
	storage_area_class(&c, p->cid, p->teacher);
	*home = storage_area_open(&h);
	if (*home < 0)
		return -1;
	*cls = storage_area_open(&c);
	if (*cls < 0) {
		int e = errno;
		close(*home);
		errno = e;
		return -1;
	}
	return 0;
}

/* The worker's part for one student. */
static void pass_work(void *arg)
{
	struct pass *p = arg;
	char folder[PATHS_MAX + 1], dst[PATHS_MAX + 1], stage[48];
	int home = -1, cls = -1, sfd = -1;
	long long uid = storage_uid(p->uid);

	res_reset(p);
	p->bytes = p->count = p->newest = 0;
	p->missing = p->unchanged = p->exists = 0;
	if (open_areas(p, &home, &cls) < 0) {
		files_fail(&p->res, errno, "");
		return;
	}
	sfd = storage_staging_open();
	if (sfd < 0) {
		files_fail(&p->res, errno, "");
		goto out;
	}
	files_random_name("a", stage, sizeof(stage));
	snprintf(folder, sizeof(folder), "classes/%s/%s", p->code, p->name);
	switch (p->op) {
	case P_RELEASE:
		snprintf(dst, sizeof(dst), "classes/%s", p->code);
		if (files_mkdirs(home, dst, uid, uid, &p->res) != RC_OK)
			break;
		files_copy_into(cls, p->source, home, folder, 0, sfd, stage, uid, uid,
		                p->src_bytes + (1 << 20), &p->bytes, &p->res);
		if (p->res.rc == RC_CONFLICT) {
			/* there already: the student's, kept as it is */
			res_reset(p);
			p->exists = 1;
			p->bytes = 0;
		}
		break;
	case P_COLLECT:
		if (files_newest(home, folder, &p->newest, &p->res) != RC_OK) {
			if (p->res.rc == RC_NOTFOUND) {
				res_reset(p);
				p->missing = 1;
			}
			break;
		}
		if (p->changed_ns && p->newest <= p->changed_ns) {
			p->unchanged = 1;
			break;
		}
		if (storage_class_private(cls, storage_uid(p->teacher), storage_class_gid(p->cid)) <
		    0) {
			files_fail(&p->res, errno, "collected");
			break;
		}
		snprintf(dst, sizeof(dst), "collected/%s", p->name);
		if (files_mkdirs(cls, dst, storage_uid(p->teacher), storage_class_gid(p->cid),
		                 &p->res) != RC_OK)
			break;
		snprintf(dst, sizeof(dst), "collected/%s/%s", p->name, p->username);
		if (files_copy_into(home, folder, cls, dst, 1, sfd, stage, storage_uid(p->teacher),
		                    storage_class_gid(p->cid), -1, &p->bytes, &p->res) == RC_OK) {
			int64_t b;
			struct files_result tmp = { 0 };
			files_measure(cls, dst, &b, &p->count, &tmp);
			json_decref(tmp.out);
			p->count = p->count > 0 ? p->count - 1 : 0; /* the folder itself */
		}
		break;
	case P_RETURN:
		snprintf(dst, sizeof(dst), "feedback/%s/%s", p->name, p->username);
		if (faccessat(cls, dst, F_OK, AT_SYMLINK_NOFOLLOW) < 0) {
			p->missing = 1; /* no feedback for this student */
			break;
		}
		if (files_mkdirs(home, folder, uid, uid, &p->res) != RC_OK)
			break;
		{
			char to[PATHS_MAX + 16];
			snprintf(to, sizeof(to), "%s/feedback", folder);
			files_copy_into(cls, dst, home, to, 1, sfd, stage, uid, uid, -1, &p->bytes,
			                &p->res);
		}
		break;
	}
out:
	if (sfd >= 0)
		close(sfd);
	if (home >= 0)
		close(home);
	if (cls >= 0)
		close(cls);
}

static void student_written(PGresult *res, enum rc rc, void *arg)
{
	struct pass *p = arg;

	(void)res;
	if (rc != RC_OK)
		log_msg(LOG_WARN, "assignments", NULL, "assignment %lld: could not record %s: %s",
		        p->aid, p->username, rc_code(rc));
	p->i++;
	pass_next(p);
}

static void area_dirty(struct pass *p, int home)
{
	struct storage_area a;

	memset(&a, 0, sizeof(a));
	if (home)
		storage_area_home(&a, p->uid, p->username);
	else
		storage_area_class(&a, p->cid, p->teacher);
	quota_dirty(&a);
}

/* Records the student's outcome (on the loop, after the worker). */
static void student_record(struct pass *p)
{
	struct db_args a = DB_ARGS_INIT;
	char ns[32];
	const char *msg = p->res.rc != RC_OK ? p->res.msg : "";

	db_arg_ll(&a, p->aid);
	db_arg_ll(&a, p->uid);
	if (p->res.rc != RC_OK) {
		p->failed++;
		log_msg(LOG_WARN, "assignments", NULL, "assignment %lld, %s: %s", p->aid,
		        p->username, msg);
	} else if (p->unchanged || (p->op == P_RETURN && p->missing)) {
		p->skipped++;
	} else {
		p->ok++;
	}
	if (p->op == P_RELEASE) {
		char id[24], b[24];
		const char *q[3] = { id, b, "0" };
		if (p->reservation) {
			snprintf(id, sizeof(id), "%lld", p->reservation);
			snprintf(b, sizeof(b), "%lld", (long long)p->bytes);
			db_query("SELECT gc_storage_release($1::bigint, $2::bigint, $3::bigint)", 3,
			         q, db_ignore, NULL);
			p->reservation = 0;
		}
		area_dirty(p, 1);
		db_arg_str(&a, p->res.rc == RC_OK ? "released" : "failed");
		db_arg_str(&a, msg);
		db_arg_ll(&a, p->exists ? -1 : (long long)p->bytes);
		db_query_args("UPDATE assignment_students SET status = $3, message = $4,"
		              " released_at = CASE WHEN $3 = 'released' THEN COALESCE(released_at,"
		              " now()) END,"
		              " bytes = CASE WHEN $5::bigint >= 0 THEN $5::bigint ELSE bytes END"
		              " WHERE assignment_id = $1 AND user_id = $2"
		              " AND status IN ('pending', 'failed')",
		              &a, student_written, p);
		return;
	}
	if (p->op == P_COLLECT) {
		int late = p->deadline_ns && p->newest > p->deadline_ns;
		if (p->res.rc == RC_OK && !p->missing && !p->unchanged)
			area_dirty(p, 0);
		snprintf(ns, sizeof(ns), "%lld", (long long)p->newest);
		db_arg_str(&a, p->res.rc != RC_OK ? "failed"
		               : p->missing       ? "missing"
		               : late             ? "late"
		                                  : "collected");
		db_arg_str(&a, msg);
		db_arg_str(&a, p->unchanged ? "t" : "f");
		db_arg_str(&a, ns);
		db_arg_ll(&a, p->count);
		db_arg_ll(&a, p->bytes);
		db_query_args(
		        "UPDATE assignment_students SET"
		        " status = CASE WHEN $5::bool THEN status ELSE $3 END,"
		        " late = CASE WHEN $5::bool THEN late ELSE $3 = 'late' END,"
		        " message = $4,"
		        " collected_at = CASE WHEN $5::bool OR $3 IN ('missing', 'failed')"
		        "  THEN collected_at ELSE now() END,"
		        " changed_at = CASE WHEN $5::bool OR $3 <> 'collected' AND $3 <> 'late'"
		        "  THEN changed_at ELSE to_timestamp($6::numeric / 1e9) END,"
		        " files = CASE WHEN $3 IN ('collected', 'late') AND NOT $5::bool THEN $7"
		        "  ELSE files END,"
		        " bytes = CASE WHEN $3 IN ('collected', 'late') AND NOT $5::bool THEN $8"
		        "  ELSE bytes END"
		        " WHERE assignment_id = $1 AND user_id = $2",
		        &a, student_written, p);
		return;
	}
	area_dirty(p, 1);
	db_arg_str(&a, p->res.rc != RC_OK ? "failed" : p->missing ? "" : "returned");
	db_arg_str(&a, msg);
	db_query_args("UPDATE assignment_students SET status = CASE WHEN $3 = '' THEN status"
	              "  WHEN $3 = 'failed' THEN status ELSE $3 END,"
	              " returned_at = CASE WHEN $3 = 'returned' THEN now() ELSE returned_at END,"
	              " message = $4 WHERE assignment_id = $1 AND user_id = $2",
	              &a, student_written, p);
}

/* unpause the containers paused for this student, then record */
static void unpaused(struct docker_call *call, enum rc rc, int status, const char *body, size_t len,
                     const char *err, void *arg);

static void unpause_next(struct pass *p)
{
	while (p->cidx < p->nctr) {
		struct container *c = &p->ctr[p->cidx++];
		struct docker_engine *e = nodes_engine(c->node);
		char path[160];
		if (!c->paused || !e)
			continue;
		snprintf(path, sizeof(path), "/containers/%s/unpause", c->id);
		if (docker_request(e, "POST", path, NULL, NULL, 0, NULL, 30000, unpaused, p))
			return;
		log_msg(LOG_WARN, "assignments", NULL, "could not unpause container %.12s", c->id);
	}
	if (p->nctr > 0) {
		json_t *ids = json_array();
		char *text;
		for (int i = 0; i < p->nctr; i++)
			json_array_append_new(ids, json_string(p->ctr[i].id));
		text = json_dumps(ids, JSON_COMPACT);
		json_decref(ids);
		if (text) {
			const char *q[1] = { text };
			db_query("DELETE FROM assignment_pauses WHERE container_id IN"
			         " (SELECT jsonb_array_elements_text($1::jsonb))",
			         1, q, db_ignore, NULL);
			free(text);
		}
	}
	student_record(p);
}

static void unpaused(struct docker_call *call, enum rc rc, int status, const char *body, size_t len,
                     const char *err, void *arg)
{
	struct pass *p = arg;

	(void)call;
	(void)body;
	(void)len;
	if (rc != RC_OK || (status != 204 && status != 304))
		log_msg(LOG_WARN, "assignments", NULL,
		        "assignment %lld: could not unpause a container of %s: %s", p->aid,
		        p->username, err ? err : "engine error");
	unpause_next(p);
}

static void work_done(void *arg)
{
	struct pass *p = arg;

	p->cidx = 0;
	unpause_next(p);
}

static void run_work(struct pass *p)
{
	if (worker_submit(pass_work, work_done, p) < 0) {
		p->res.rc = RC_UNAVAILABLE;
		snprintf(p->res.msg, sizeof(p->res.msg), "the file workers are busy");
		p->cidx = 0;
		unpause_next(p);
	}
}

/* pause the student's running containers one after the other (collect) */
static void paused(struct docker_call *call, enum rc rc, int status, const char *body, size_t len,
                   const char *err, void *arg);

static void pause_next(struct pass *p)
{
	while (p->cidx < p->nctr) {
		struct container *c = &p->ctr[p->cidx];
		struct docker_engine *e = nodes_engine(c->node);
		char path[160];
		if (!e) {
			p->cidx++;
			continue;
		}
		snprintf(path, sizeof(path), "/containers/%s/pause", c->id);
		if (docker_request(e, "POST", path, NULL, NULL, 0, NULL, 30000, paused, p))
			return;
		p->cidx++;
	}
	run_work(p);
}

static void paused(struct docker_call *call, enum rc rc, int status, const char *body, size_t len,
                   const char *err, void *arg)
{
	struct pass *p = arg;

	(void)call;
	(void)body;
	(void)len;
	(void)err;
	/* 204 paused; 409 not running (gone meanwhile): nothing to freeze */
	p->ctr[p->cidx].paused = rc == RC_OK && status == 204;
	p->cidx++;
	pause_next(p);
}

static void containers_read(PGresult *res, enum rc rc, void *arg)
{
	struct pass *p = arg;

	p->nctr = 0;
	if (rc == RC_OK)
		for (int i = 0; i < PQntuples(res) && p->nctr < 16; i++) {
			struct container *c = &p->ctr[p->nctr++];
			c->node = strtoll(db_val(res, i, 0), NULL, 10);
			snprintf(c->id, sizeof(c->id), "%s", db_val(res, i, 1));
			c->paused = 0;
		}
	p->cidx = 0;
	pause_next(p);
}

static void reserved(PGresult *res, enum rc rc, void *arg)
{
	struct pass *p = arg;

	if (rc != RC_OK || !db_val(res, 0, 0)) {
		res_reset(p);
		p->res.rc = rc != RC_OK ? rc : RC_INSUFFICIENT_STORAGE;
		snprintf(p->res.msg, sizeof(p->res.msg), "%s",
		         rc != RC_OK ? "the database is unavailable"
		                     : "the student's storage quota is full");
		p->nctr = 0;
		student_record(p);
		return;
	}
	p->reservation = strtoll(db_val(res, 0, 0), NULL, 10);
	p->nctr = 0;
	run_work(p);
}

static void pass_next(struct pass *p)
{
	json_t *s = json_array_get(p->students, p->i);
	char uid[24], area[40], b[24], f[24];

	if (!s) {
		pass_end(p);
		return;
	}
	p->uid = json_integer_value(json_object_get(s, "id"));
	snprintf(p->username, sizeof(p->username), "%s",
	         json_string_value(json_object_get(s, "username")));
	p->changed_ns = json_integer_value(json_object_get(s, "changed_ns"));
	p->reservation = 0;
	snprintf(uid, sizeof(uid), "%lld", p->uid);
	if (p->op == P_RELEASE) {
		const char *q[4] = { area, uid, b, f };
		snprintf(area, sizeof(area), "home:%lld", p->uid);
		snprintf(b, sizeof(b), "%lld", (long long)p->src_bytes);
		snprintf(f, sizeof(f), "%lld", (long long)p->src_count);
		db_query("SELECT gc_storage_reserve($1, $2::bigint, NULL, $3::bigint, $4::bigint,"
		         " '1 hour')",
		         4, q, reserved, p);
		return;
	}
	if (p->op == P_COLLECT) {
		const char *q[1] = { uid };
		/* written down before they are paused: see assignment_pauses */
		db_query("WITH c AS (SELECT i.node_id, i.container_id FROM instances i"
		         "  WHERE i.user_id = $1 AND i.state = 'running'"
		         "  AND i.container_id IS NOT NULL AND i.node_id IS NOT NULL"
		         "  UNION SELECT m.node_id, m.container_id FROM job_members m"
		         "  JOIN jobs j ON j.id = m.job_id WHERE j.user_id = $1"
		         "  AND m.state = 'running' AND m.container_id IS NOT NULL"
		         "  AND m.node_id IS NOT NULL LIMIT 16),"
		         " w AS (INSERT INTO assignment_pauses (node_id, container_id)"
		         "  SELECT node_id, container_id FROM c ON CONFLICT (node_id, container_id)"
		         "  DO UPDATE SET paused_at = now())"
		         " SELECT node_id, container_id FROM c",
		         1, q, containers_read, p);
		return;
	}
	p->nctr = 0;
	run_work(p);
}

/* ---- starting a pass ---- */

struct start {
	struct pass *p;
	void (*fail)(struct pass *p, enum rc rc, const char *msg, void *arg);
};

static void measure_work(void *arg)
{
	struct pass *p = arg;
	struct storage_area c;
	int fd;

	memset(&c, 0, sizeof(c));
	res_reset(p);
	storage_area_class(&c, p->cid, p->teacher);
	fd = storage_area_open(&c);
	if (fd < 0) {
		files_fail(&p->res, errno, "");
		return;
	}
	{
		/* a folder, reached without following a link */
		int d = paths_open_nofollow(fd, p->source, O_RDONLY | O_DIRECTORY);
		if (d < 0) {
			files_fail(&p->res, errno == ENOTDIR ? ENOENT : errno, p->source);
			close(fd);
			return;
		}
		close(d);
	}
	files_measure(fd, p->source, &p->src_bytes, &p->src_count, &p->res);
	json_decref(p->res.out);
	p->res.out = NULL;
	close(fd);
}

static void students_read(PGresult *res, enum rc rc, void *arg)
{
	struct pass *p = arg;

	if (rc != RC_OK) {
		res_reset(p);
		p->res.rc = rc;
		snprintf(p->res.msg, sizeof(p->res.msg), "the database is unavailable");
		p->failed++;
		pass_end(p);
		return;
	}
	p->students = json_loads(db_val(res, 0, 0), 0, NULL);
	p->i = 0;
	pass_next(p);
}

/* The students the pass goes over, as [{id, username, changed_ns}]. */
static void read_students(struct pass *p)
{
	struct db_args a = DB_ARGS_INIT;
	const char *want = p->op == P_RELEASE ? "{pending,failed}"
	                   : p->op == P_COLLECT
	                           ? "{released,collected,late,missing,returned,failed}"
	                           : "{collected,late,returned}";

	db_arg_ll(&a, p->aid);
	db_arg_str(&a, want);
	db_arg_str(&a, p->op == P_COLLECT ? "t" : "f");
	/* a failed release is not a failed collect: only released folders are
	 * collected */
	db_query_args("SELECT COALESCE(json_agg(json_build_object('id', u.id, 'username',"
	              " u.username, 'changed_ns', COALESCE((extract(epoch FROM s.changed_at)"
	              " * 1e9)::bigint, 0)) ORDER BY u.username), '[]')::text"
	              " FROM assignment_students s JOIN users u ON u.id = s.user_id"
	              " WHERE s.assignment_id = $1 AND s.status = ANY ($2::text[])"
	              " AND (NOT $3::bool OR s.released_at IS NOT NULL)",
	              &a, students_read, p);
}

static void members_added(PGresult *res, enum rc rc, void *arg)
{
	struct pass *p = arg;

	(void)res;
	if (rc != RC_OK) {
		p->failed++;
		pass_end(p);
		return;
	}
	read_students(p);
}

static void measured(void *arg)
{
	struct pass *p = arg;
	struct db_args a = DB_ARGS_INIT;

	if (p->res.rc != RC_OK) {
		p->failed++;
		pass_end(p);
		return;
	}
	db_arg_ll(&a, p->aid);
	/* every active student gets a row; the assignment is released */
	db_query_args("WITH r AS (UPDATE assignments SET state = CASE WHEN state = 'draft'"
	              "  THEN 'released' ELSE state END,"
	              "  released_at = COALESCE(released_at, now()), updated_at = now()"
	              "  WHERE id = $1 RETURNING class_id)"
	              " INSERT INTO assignment_students (assignment_id, user_id)"
	              " SELECT $1, m.user_id FROM class_members m JOIN r ON r.class_id = m.class_id"
	              " WHERE m.role = 'student' AND m.state = 'active'"
	              " ON CONFLICT DO NOTHING",
	              &a, members_added, p);
}

/* Starts a pass over aid (row: id, class, teacher, code, name, source,
 * deadline ns, late pass). */
static struct pass *pass_new(enum pass_op op, const PGresult *res)
{
	struct pass *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->op = op;
	p->aid = strtoll(db_val(res, 0, 0), NULL, 10);
	p->cid = strtoll(db_val(res, 0, 1), NULL, 10);
	p->teacher = strtoll(db_val(res, 0, 2), NULL, 10);
	snprintf(p->code, sizeof(p->code), "%s", db_val(res, 0, 3));
	snprintf(p->name, sizeof(p->name), "%s", db_val(res, 0, 4));
	snprintf(p->source, sizeof(p->source), "%s", db_val(res, 0, 5));
	p->deadline_ns = db_val(res, 0, 6) ? strtoll(db_val(res, 0, 6), NULL, 10) : 0;
	p->late_pass = db_val(res, 0, 7) && !strcmp(db_val(res, 0, 7), "t");
	return p;
}

static void pass_start(struct pass *p)
{
	if (p->op == P_RELEASE) {
		if (worker_submit(measure_work, measured, p) < 0) {
			p->res.rc = RC_UNAVAILABLE;
			snprintf(p->res.msg, sizeof(p->res.msg), "the file workers are busy");
			p->failed++;
			pass_end(p);
		}
		return;
	}
	read_students(p);
}

/* The row pass_new() reads, for assignment $1 (and the claim of a collect). */
#define PASS_ROW                                                                          \
	"a.id, a.class_id, c.teacher_id, COALESCE(c.code, c.id::text), a.name, a.source," \
	" (extract(epoch FROM a.deadline) * 1e9)::bigint, COALESCE(now() >= a.late_until, false)"

/* A collect claims the assignment (state collecting) so two never run at
 * once; one stuck for 10 minutes (a replica died) may be claimed again. */
#define COLLECT_CLAIM                                                                     \
	"WITH a AS (UPDATE assignments SET state = 'collecting', updated_at = now()"      \
	" WHERE id = $1 AND (state IN ('released', 'collected') OR (state = 'collecting'" \
	"  AND updated_at < now() - interval '10 minutes')) RETURNING *)"                 \
	" SELECT " PASS_ROW " FROM a JOIN classes c ON c.id = a.class_id"

static void collect_finish(struct pass *p, db_cb cb, void *arg)
{
	struct db_args a = DB_ARGS_INIT;

	db_arg_ll(&a, p->aid);
	db_arg_str(&a, p->late_pass ? "t" : "f");
	db_query_args("UPDATE assignments SET state = 'collected',"
	              " collected_at = COALESCE(collected_at, now()),"
	              " late_collected_at = CASE WHEN $2::bool THEN now() ELSE late_collected_at"
	              " END, updated_at = now() WHERE id = $1 AND state = 'collecting'",
	              &a, cb, arg);
}

static void collect_finished(PGresult *res, enum rc rc, void *arg)
{
	struct ctx *c = arg;

	(void)res;
	(void)rc;
	reply_one(c, c->aid, one_200);
}

/* ---- the HTTP side of a pass ---- */

static void http_pass_done(struct pass *p, void *arg)
{
	struct ctx *c = arg;
	const char *action = p->op == P_RELEASE   ? "assignment.release"
	                     : p->op == P_COLLECT ? "assignment.collect"
	                                          : "assignment.return";
	char id[24];

	if (p->op == P_RELEASE && p->res.rc != RC_OK && !p->students) {
		/* the source could not be read: nothing was released */
		http_reply_error(c->r, p->res.rc == RC_NOTFOUND ? RC_CONFLICT : p->res.rc,
		                 "create the folder in the class area first",
		                 "the assignment's source folder '%s' cannot be read: %s",
		                 p->source, p->res.msg);
		return;
	}
	snprintf(id, sizeof(id), "%lld", p->aid);
	auth_audit(c->r, c->r->auth, action, id,
	           json_pack("{s:I, s:s, s:i, s:i, s:i}", "class_id", (json_int_t)p->cid, "name",
	                     p->name, "ok", p->ok, "failed", p->failed, "unchanged", p->skipped));
	if (p->op == P_COLLECT)
		collect_finish(p, collect_finished, c);
	else
		reply_one(c, p->aid, one_200);
}

static void pass_row(PGresult *res, enum rc rc, void *arg, enum pass_op op)
{
	struct ctx *c = arg;
	struct pass *p;

	if (rc != RC_OK) {
		api_reply_db_error(c->r, rc, "");
		return;
	}
	if (PQntuples(res) != 1) {
		http_reply_error(
		        c->r, op == P_COLLECT ? RC_CONFLICT : RC_NOTFOUND,
		        op == P_COLLECT ? "release it first, or wait for the running collect"
		                        : "GET .../assignments lists them",
		        op == P_COLLECT ? "the assignment is not released, or being collected"
		                        : "no such assignment");
		return;
	}
	p = pass_new(op, res);
	if (!p) {
		http_reply_error(c->r, RC_NOMEM, NULL, "out of memory");
		return;
	}
	p->done = http_pass_done;
	p->arg = c;
	pass_start(p);
}

static void release_row(PGresult *res, enum rc rc, void *arg)
{
	pass_row(res, rc, arg, P_RELEASE);
}

static void collect_row(PGresult *res, enum rc rc, void *arg)
{
	pass_row(res, rc, arg, P_COLLECT);
}

static void return_row(PGresult *res, enum rc rc, void *arg)
{
	pass_row(res, rc, arg, P_RETURN);
}

static void release_go(struct ctx *c)
{
	struct db_args a = DB_ARGS_INIT;

	if (!need_staff(c))
		return;
	db_arg_ll(&a, c->aid);
	db_arg_ll(&a, c->cid);
	db_query_args("SELECT " PASS_ROW ASSIGNMENT_FROM " WHERE a.id = $1 AND a.class_id = $2", &a,
	              release_row, c);
}

static void collect_exists(PGresult *res, enum rc rc, void *arg)
{
	struct ctx *c = arg;
	struct db_args a = DB_ARGS_INIT;

	if (rc != RC_OK) {
		api_reply_db_error(c->r, rc, "");
		return;
	}
	if (PQntuples(res) != 1) {
		http_reply_error(c->r, RC_NOTFOUND, "GET .../assignments lists them",
		                 "no such assignment");
		return;
	}
	db_arg_ll(&a, c->aid);
	db_query_args(COLLECT_CLAIM, &a, collect_row, c);
}

static void collect_go(struct ctx *c)
{
	struct db_args a = DB_ARGS_INIT;

	if (!need_staff(c))
		return;
	db_arg_ll(&a, c->aid);
	db_arg_ll(&a, c->cid);
	db_query_args("SELECT 1 FROM assignments WHERE id = $1 AND class_id = $2", &a,
	              collect_exists, c);
}

static void return_go(struct ctx *c)
{
	struct db_args a = DB_ARGS_INIT;

	if (!need_staff(c))
		return;
	db_arg_ll(&a, c->aid);
	db_arg_ll(&a, c->cid);
	db_query_args("SELECT " PASS_ROW ASSIGNMENT_FROM " WHERE a.id = $1 AND a.class_id = $2"
	              " AND a.state <> 'draft'",
	              &a, return_row, c);
}

static void release(struct http_req *r)
{
	with_class(r, 1, release_go);
}

static void collect(struct http_req *r)
{
	with_class(r, 1, collect_go);
}

static void return_feedback(struct http_req *r)
{
	with_class(r, 1, return_go);
}

/* ---- the leader's periodic part ---- */

static struct cron_section *section;
static int cron_busy;

static void cron_pass_done(struct pass *p, void *arg)
{
	char id[24];

	(void)arg;
	if (p->op == P_COLLECT)
		collect_finish(p, db_ignore, NULL);
	snprintf(id, sizeof(id), "%lld", p->aid);
	if (p->ok || p->failed)
		auth_audit(NULL, NULL,
		           p->op == P_COLLECT ? "assignment.collect" : "assignment.release", id,
		           json_pack("{s:I, s:s, s:i, s:i, s:s}", "class_id", (json_int_t)p->cid,
		                     "name", p->name, "ok", p->ok, "failed", p->failed, "by",
		                     p->op == P_COLLECT ? "deadline" : "new members"));
	cron_busy = 0;
	if (section)
		cron_soon(section, 50); /* more may be due */
}

static void cron_row(PGresult *res, enum rc rc, void *arg)
{
	struct pass *p;

	(void)arg;
	if (rc != RC_OK || PQntuples(res) != 1 || !db_val(res, 0, 0)) {
		cron_busy = 0;
		return;
	}
	p = pass_new(strcmp(db_val(res, 0, 8), "collect") ? P_RELEASE : P_COLLECT, res);
	if (!p) {
		cron_busy = 0;
		return;
	}
	p->done = cron_pass_done;
	pass_start(p);
}

/* Containers a dead replica left paused: thawed (the rows go first, so
 * two leaders in a row do not both try). */
static void stale_pauses(PGresult *res, enum rc rc, void *arg)
{
	(void)arg;
	if (rc != RC_OK)
		return;
	for (int i = 0; i < PQntuples(res); i++) {
		struct docker_engine *e = nodes_engine(strtoll(db_val(res, i, 0), NULL, 10));
		char path[160];
		if (!e)
			continue;
		snprintf(path, sizeof(path), "/containers/%s/unpause", db_val(res, i, 1));
		log_msg(LOG_WARN, "assignments", NULL,
		        "container %.12s was left paused by a collect: unpausing it",
		        db_val(res, i, 1));
		docker_request(e, "POST", path, NULL, NULL, 0, NULL, 30000, docker_ignore, NULL);
	}
}

static void on_cron(struct cron_section *s, void *arg)
{
	static unsigned runs;

	(void)s;
	(void)arg;
	if (cron_busy || !leader_is())
		return;
	if (runs++ % 10 == 0)
		db_query("DELETE FROM assignment_pauses WHERE paused_at < now() - interval '10 "
		         "minutes'"
		         " RETURNING node_id, container_id",
		         0, NULL, stale_pauses, NULL);
	cron_busy = 1;
	/* one due thing a pass: a deadline's (or late_until's) collect, claimed
	 * like a manual one; else a released assignment's students who joined
	 * since */
	db_query("WITH due AS (SELECT a.id FROM assignments a JOIN classes c ON c.id = a.class_id"
	         "  WHERE c.state = 'active' AND ((a.state = 'released' AND a.deadline <= now())"
	         "   OR (a.state = 'collected' AND a.late_until <= now()"
	         "    AND a.late_collected_at IS NULL)"
	         "   OR (a.state = 'collecting' AND a.updated_at < now() - interval '10 minutes'))"
	         "  ORDER BY a.deadline LIMIT 1),"
	         " claimed AS (UPDATE assignments SET state = 'collecting', updated_at = now()"
	         "  WHERE id = (SELECT id FROM due) RETURNING *),"
	         " joined AS (SELECT a.* FROM assignments a JOIN classes c ON c.id = a.class_id"
	         "  WHERE NOT EXISTS (SELECT 1 FROM claimed) AND c.state = 'active'"
	         "  AND a.state = 'released' AND EXISTS (SELECT 1 FROM class_members m"
	         "   WHERE m.class_id = a.class_id AND m.role = 'student' AND m.state = 'active'"
	         "   AND NOT EXISTS (SELECT 1 FROM assignment_students s"
	         "    WHERE s.assignment_id = a.id AND s.user_id = m.user_id))"
	         "  ORDER BY a.id LIMIT 1)"
	         " SELECT " PASS_ROW
	         ", 'collect' FROM claimed a JOIN classes c ON c.id = a.class_id"
	         " UNION ALL SELECT " PASS_ROW ", 'release' FROM joined a"
	         " JOIN classes c ON c.id = a.class_id",
	         0, NULL, cron_row, NULL);
}

void api_assignments_init(void)
{
	if (!section)
		section = cron_every("assignments", 1000, 1000, on_cron, NULL);
}

const struct route api_assignments_routes[] = {
	{ HTTP_GET, "/api/v1/classes/{id}/assignments", list, ROLES_ALL, 0, 0, NULL },
	{ HTTP_POST, "/api/v1/classes/{id}/assignments", create, ROLES_ALL, 0, 16384, NULL },
	{ HTTP_GET, "/api/v1/classes/{id}/assignments/{aid}", get, ROLES_ALL, 0, 0, NULL },
	{ HTTP_PATCH, "/api/v1/classes/{id}/assignments/{aid}", patch, ROLES_ALL, 0, 16384, NULL },
	{ HTTP_DELETE, "/api/v1/classes/{id}/assignments/{aid}", delete_one, ROLES_ALL, 0, 0,
	  NULL },
	{ HTTP_POST, "/api/v1/classes/{id}/assignments/{aid}/release", release, ROLES_ALL, 0, 0,
	  NULL },
	{ HTTP_POST, "/api/v1/classes/{id}/assignments/{aid}/collect", collect, ROLES_ALL, 0, 0,
	  NULL },
	{ HTTP_POST, "/api/v1/classes/{id}/assignments/{aid}/return", return_feedback, ROLES_ALL, 0,
	  0, NULL },
	{ HTTP_GET, "/api/v1/classes/{id}/assignments/{aid}/students", students, ROLES_ALL, 0, 0,
	  NULL },
	{ 0, NULL, NULL, 0, 0, 0, NULL },
};
