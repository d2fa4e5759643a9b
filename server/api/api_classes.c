/* api_classes.c — /classes: the class object, the allocation an admin
 * grants it, the limits its students get inside it, and its roster (members
 * with roles, suspension, CSV import, invite codes and joining by one).
 *
 * Who may do what is decided in the database, on the class row locked for
 * the change (0029_class_api.sql, gc_class_*): each function answers the
 * result or {"error": {rc, message, hint}}, so a check and its change can
 * never be split by a racing one.  Here: the shape of each body, the CSV,
 * passwords and invite codes (which never reach the database in clear),
 * the audit log.  A caller not in a class gets 404 for everything about it.
 * Does not own lab sessions, assignments, notices or class work (the other
 * api_class_*.c files).
 */
#include <ctype.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <http_parser.h>
#include <libpq-fe.h>

#include "api/account_import.h"
#include "api/api.h"
#include "auth/auth.h"
#include "base/crypto.h"
#include "db/db.h"

#define INVITE_DEFAULT_S (7 * 86400)
#define INVITE_MAX_S     (180 * 86400)

static int is_admin(const struct http_req *r)
{
	return r->auth->role == ROLE_ADMIN;
}

/* ---- one call of a gc_class_* function ---- */

struct call {
	struct http_req *r;
	const char *key; /* the reply: this member of the answer (NULL: all of it) */
	int status;
	const char *action; /* audit action, or NULL */
	json_t *details;    /* audit details (owned) */
	char target[80];
	/* called with the answer instead of the plain reply (may be NULL) */
	void (*finish)(struct call *c, json_t *answer);
	char code[40]; /* invites: the code in clear, shown once */
};

static void call_free(void *p)
{
	struct call *c = p;

	json_decref(c->details);
	free(c);
}

static struct call *call_new(struct http_req *r, const char *key, int status, const char *action)
{
	struct call *c = api_state(r, sizeof(*c), call_free);

	if (!c)
		return NULL;
	c->r = r;
	c->key = key;
	c->status = status;
	c->action = action;
	return c;
}

static enum rc rc_from(const char *s)
{
	if (!s)
		return RC_INTERNAL;
	if (strcmp(s, "not_found") == 0)
		return RC_NOTFOUND;
	if (strcmp(s, "forbidden") == 0)
		return RC_FORBIDDEN;
	if (strcmp(s, "invalid") == 0)
		return RC_INVALID;
	if (strcmp(s, "conflict") == 0)
		return RC_CONFLICT;
	if (strcmp(s, "exceeds") == 0)
		return RC_EXCEEDS_QUOTA;
	return RC_INTERNAL;
}

/* The answer of a gc_class_* call: a refusal replies here (and returns
 * NULL); else the answer (new reference). */
static json_t *answer(struct http_req *r, PGresult *res, enum rc rc)
{
	json_t *a, *e;

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "");
		return NULL;
	}
	if (PQntuples(res) != 1 || !(a = json_loads(db_val(res, 0, 0), 0, NULL))) {
		http_reply_error(r, RC_NOTFOUND, NULL, "no such class '%s'",
		                 http_param(r, "id") ? http_param(r, "id") : "");
		return NULL;
	}
	e = json_object_get(a, "error");
	if (e) {
		const char *hint = json_string_value(json_object_get(e, "hint"));
		enum rc erc = rc_from(json_string_value(json_object_get(e, "rc")));
		json_t *details = json_object_get(e, "details");
		if (json_is_array(details))
			http_reply_error_details(r, erc, json_incref(details), hint,
			                         json_string_value(json_object_get(e, "message")));
		else
			http_reply_error(r, erc, hint, "%s",
			                 json_string_value(json_object_get(e, "message")));
		json_decref(a);
		return NULL;
	}
	return a;
}

static void call_done(PGresult *res, enum rc rc, void *arg)
{
	struct call *c = arg;
	json_t *a = answer(c->r, res, rc);

	if (!a)
		return;
	if (c->action) {
		/* a new class's id is known only now: the teachers' view needs it */
		json_t *cid = json_object_get(json_object_get(a, "class"), "id");
		if (json_is_integer(cid) && c->details && !json_object_get(c->details, "class_id"))
			json_object_set_new(c->details, "class_id",
			                    json_integer(json_integer_value(cid)));
		if (json_is_integer(cid) && strncmp(c->target, "class:", 6) != 0)
			snprintf(c->target, sizeof(c->target), "class:%lld",
			         (long long)json_integer_value(cid));
		auth_audit(c->r, c->r->auth, c->action, c->target, c->details);
		c->details = NULL; /* handed off */
	}
	if (c->finish) {
		c->finish(c, a);
		return;
	}
	http_reply_json(c->r, c->status,
	                c->key ? json_incref(json_object_get(a, c->key)) : json_incref(a));
	json_decref(a);
}

/* The route's {id}; replies 404 for one that is not an id. */
static int class_id(struct http_req *r, long long *id)
{
	return api_id(r, "id", id);
}

static void arg_caller(struct db_args *a, const struct http_req *r)
{
	db_arg_ll(a, r->auth->user_id);
	db_arg_str(a, is_admin(r) ? "t" : "f");
}

/* Runs "SELECT fn($1 class, $2 uid, $3 admin, $4 body)" style calls: sql
 * gets the class id, the caller and body (NULL: no body parameter). */
static void run(struct call *c, const char *sql, long long cid, json_t *body)
{
	struct db_args a = DB_ARGS_INIT;
	char *doc = NULL;

	if (cid > 0)
		db_arg_ll(&a, cid);
	arg_caller(&a, c->r);
	if (body) {
		doc = json_dumps(body, JSON_COMPACT);
		if (!doc) {
			http_reply_error(c->r, RC_NOMEM, NULL, "out of memory");
			return;
		}
		db_arg_str(&a, doc);
	}
	db_query_args(sql, &a, call_done, c);
	free(doc);
}

static void bad(struct http_req *r, const char *hint, const char *msg)
{
	http_reply_error(r, RC_INVALID, hint, "%s", msg);
}

/* ---- field checks ---- */

static int has_ctl(const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if ((*p < 0x20 && *p != '\n' && *p != '\t') || *p == 0x7f)
			return 1;
	return 0;
}

/* name, term, description, code of a create or a change; NULL when fine. */
static const char *check_texts(json_t *b, char *msg, size_t len)
{
	const char *name = json_string_value(json_object_get(b, "name"));
	const char *code = json_string_value(json_object_get(b, "code"));
	static const char *const texts[] = { "name", "term", "description" };

	if (json_object_get(b, "name") && (!name || !*name))
		return "name must be 1 to 100 characters";
	for (size_t i = 0; i < 3; i++) {
		const char *v = json_string_value(json_object_get(b, texts[i]));
		if (v && (i < 2 ? strchr(v, '\n') != NULL || has_ctl(v) : has_ctl(v))) {
			snprintf(msg, len, "%s must not contain control characters", texts[i]);
			return msg;
		}
	}
	if (code && *code) {
		size_t n = strlen(code);
		int ok = n <= 32 && isalnum((unsigned char)code[0]);
		for (size_t i = 1; ok && i < n; i++)
			ok = isalnum((unsigned char)code[i]) || code[i] == '.' || code[i] == '_' ||
			     code[i] == '-';
		if (!ok)
			return "code must be 1 to 32 letters, digits, '.', '_' or '-', starting "
			       "with "
			       "a letter or digit (e.g. CS231-2026)";
	}
	return NULL;
}

/* A limit: null, or a whole number 0..max (real: any number 0..max). */
static int limit_ok(json_t *v, int real, double min, double max)
{
	double d;

	if (json_is_null(v))
		return 1;
	if (real ? !json_is_number(v) : !json_is_integer(v))
		return 0;
	d = json_number_value(v);
	return d >= min && d <= max;
}

static const struct {
	const char *name;
	int real;
	double min, max;
} student_fields[] = {
	{ "slices", 0, 0, 4096 },        { "cpu_millis", 0, 0, 1e12 },
	{ "mem_mib", 0, 0, 1e12 },       { "storage_bytes", 0, 0, 9e15 },
	{ "gpu_hours_week", 1, 0, 1e6 }, { "max_session_s", 0, 1, INT_MAX },
};

static const char *const reach_fields[] = { "teachers_open_apps", "tas_open_apps", "tas_stop_work",
	                                    "tas_manage_roster" };

/* The nested parts of a PATCH body; NULL when fine, else the message. */
static const char *check_patch(json_t *b, char *msg, size_t len)
{
	json_t *sl = json_object_get(b, "student_limits"), *rc = json_object_get(b, "reach");
	json_t *imgs = json_object_get(b, "allowed_images"), *v;
	const char *k, *why, *dp = json_string_value(json_object_get(b, "data_policy"));
	static const char *const ints[] = { "offhours_slices", "idle_timeout_s", "max_lifetime_s" };
	size_t i;

	if ((why = check_texts(b, msg, len)))
		return why;
	json_object_foreach(sl, k, v)
	{
		for (i = 0; i < sizeof(student_fields) / sizeof(student_fields[0]); i++)
			if (strcmp(k, student_fields[i].name) == 0)
				break;
		if (i == sizeof(student_fields) / sizeof(student_fields[0])) {
			snprintf(msg, len,
			         "unknown field 'student_limits.%.64s' (use slices, cpu_millis, "
			         "mem_mib, storage_bytes, gpu_hours_week, max_session_s)",
			         k);
			return msg;
		}
		if (!limit_ok(v, student_fields[i].real, student_fields[i].min,
		              student_fields[i].max)) {
			snprintf(msg, len,
			         "student_limits.%s must be null or a %s from %.0f to %.0f", k,
			         student_fields[i].real ? "number" : "whole number",
			         student_fields[i].min, student_fields[i].max);
			return msg;
		}
	}
	json_object_foreach(rc, k, v)
	{
		for (i = 0; i < 4; i++)
			if (strcmp(k, reach_fields[i]) == 0)
				break;
		if (i == 4) {
			snprintf(msg, len,
			         "unknown field 'reach.%.64s' (use teachers_open_apps, "
			         "tas_open_apps, "
			         "tas_stop_work, tas_manage_roster)",
			         k);
			return msg;
		}
		if (!json_is_boolean(v)) {
			snprintf(msg, len, "reach.%s must be true or false", k);
			return msg;
		}
	}
	json_array_foreach(imgs, i, v)
	{
		if (!json_is_integer(v) || json_integer_value(v) <= 0)
			return "allowed_images must be an array of image ids";
	}
	for (i = 0; i < 3; i++) {
		v = json_object_get(b, ints[i]);
		if (v && !limit_ok(v, 0, i == 0 ? 0 : 1, i == 0 ? 4096 : INT_MAX)) {
			snprintf(msg, len, "%s must be null or a whole number from %d", ints[i],
			         i == 0 ? 0 : 1);
			return msg;
		}
	}
	if (json_object_get(b, "data_policy") &&
	    (!dp || (strcmp(dp, "keep") != 0 && strcmp(dp, "remove") != 0)))
		return "data_policy must be keep or remove";
	if (json_object_get(b, "name") && json_is_null(json_object_get(b, "name")))
		return "name cannot be removed";
	return NULL;
}

/* ---- list, read ---- */

static void list(struct http_req *r)
{
	struct call *c = call_new(r, NULL, 200, NULL);

	if (c)
		run(c,
		    "SELECT jsonb_build_object('items', COALESCE(jsonb_agg(gc_class_json(c.id, $1, "
		    "$2)"
		    "  ORDER BY c.state, c.name), '[]')) FROM classes c"
		    " WHERE $2::boolean OR gc_class_role($1, c.id) IS NOT NULL",
		    0, NULL);
}

static void get(struct http_req *r)
{
	long long id;
	struct call *c;

	if (class_id(r, &id) < 0 || !(c = call_new(r, NULL, 200, NULL)))
		return;
	run(c,
	    "SELECT COALESCE(gc_class_json($1, $2, $3::boolean),"
	    " gc_class_err('not_found', 'no such class ' || $1))",
	    id, NULL);
}

/* ---- create, change, delete ---- */

static const struct jfield create_spec[] = {
	{ "name", J_STRING, 1, 100 },  { "code", J_STRING, 0, 32 },
	{ "term", J_STRING, 0, 100 },  { "description", J_STRING, 0, 4000 },
	{ "teacher_id", J_INT, 0, 0 }, { NULL, 0, 0, 0 },
};

static void create(struct http_req *r)
{
	json_t *body = api_json_body(r, create_spec);
	const char *why;
	char msg[200];
	struct call *c;

	if (!body)
		return;
	if ((why = check_texts(body, msg, sizeof(msg)))) {
		json_decref(body);
		bad(r, NULL, why);
		return;
	}
	c = call_new(r, "class", 201, "class.create");
	if (c) {
		snprintf(c->target, sizeof(c->target), "%s",
		         json_string_value(json_object_get(body, "name")));
		c->details = json_deep_copy(body);
		run(c, "SELECT gc_class_create($1, $2::boolean, $3::jsonb)", 0, body);
	}
	json_decref(body);
}

static const struct jfield patch_spec[] = {
	{ "name", J_STRING, 0, 100 },         { "term", J_STRING, 0, 100 },
	{ "description", J_STRING, 0, 4000 }, { "teacher_id", J_INT, 0, 0 },
	{ "student_limits", J_OBJECT, 0, 0 }, { "allowed_images", J_ARRAY, 0, 1000 },
	{ "offhours_slices", J_INT, 0, 0 },   { "idle_timeout_s", J_INT, 0, 0 },
	{ "max_lifetime_s", J_INT, 0, 0 },    { "reach", J_OBJECT, 0, 0 },
	{ "data_policy", J_STRING, 0, 16 },   { NULL, 0, 0, 0 },
};

static void patch(struct http_req *r)
{
	json_t *body;
	long long id;
	const char *why;
	char msg[300];
	struct call *c;

	if (class_id(r, &id) < 0 || !(body = api_json_body(r, patch_spec)))
		return;
	if (json_object_size(body) == 0)
		why = "nothing to change";
	else
		why = check_patch(body, msg, sizeof(msg));
	if (why) {
		json_decref(body);
		bad(r, "check the API documentation at /api/v1/openapi.yaml", why);
		return;
	}
	c = call_new(r, "class", 200, "class.update");
	if (c) {
		snprintf(c->target, sizeof(c->target), "class:%lld", id);
		c->details = json_deep_copy(body);
		run(c, "SELECT gc_class_patch($1, $2, $3::boolean, $4::jsonb)", id, body);
	}
	json_decref(body);
}

static void del(struct http_req *r)
{
	long long id;
	struct call *c;

	if (class_id(r, &id) < 0 || !(c = call_new(r, "deleted", 200, "class.delete")))
		return;
	snprintf(c->target, sizeof(c->target), "class:%lld", id);
	run(c, "SELECT gc_class_delete($1, $2, $3::boolean)", id, NULL);
}

/* ---- allocation (admins) ---- */

static const struct jfield alloc_spec[] = {
	{ "pool", J_STRING, 0, 64 },
	{ "slices", J_INT, 0, 0 },
	{ "cpu_millis", J_INT, 0, 0 },
	{ "mem_mib", J_INT, 0, 0 },
	{ "gpu_hours_week", J_NUMBER, 0, 0 },
	{ "storage_bytes", J_INT, 0, 0 },
	{ NULL, 0, 0, 0 },
};

static void allocation(struct http_req *r)
{
	json_t *body;
	long long id;
	struct call *c;
	static const char *const caps[] = { "slices", "cpu_millis", "mem_mib", "gpu_hours_week",
		                            "storage_bytes" };

	if (class_id(r, &id) < 0 || !(body = api_json_body(r, alloc_spec)))
		return;
	for (size_t i = 0; i < 5; i++) {
		json_t *v = json_object_get(body, caps[i]);
		if (v && !limit_ok(v, i == 3, 0, i == 0 ? 4096 : i == 3 ? 1e7 : 9e15)) {
			char msg[120];
			snprintf(msg, sizeof(msg), "%s must be null or a %s from 0", caps[i],
			         i == 3 ? "number" : "whole number");
			json_decref(body);
			bad(r, NULL, msg);
			return;
		}
	}
	c = call_new(r, "class", 200, "class.allocation");
	if (c) {
		snprintf(c->target, sizeof(c->target), "class:%lld", id);
		c->details = json_deep_copy(body);
		run(c, "SELECT gc_class_allocate($1, $2, $4::jsonb) WHERE $3::boolean", id, body);
	}
	json_decref(body);
}

/* ---- roster ---- */

static void members(struct http_req *r)
{
	long long id;
	struct call *c;

	if (class_id(r, &id) < 0 || !(c = call_new(r, NULL, 200, NULL)))
		return;
	run(c, "SELECT gc_class_members($1, $2, $3::boolean)", id, NULL);
}

static int role_ok(const char *s)
{
	return s &&
	       (strcmp(s, "student") == 0 || strcmp(s, "ta") == 0 || strcmp(s, "teacher") == 0);
}

static const struct jfield member_add_spec[] = {
	{ "username", J_STRING, 0, 64 },
	{ "user_id", J_INT, 0, 0 },
	{ "role", J_STRING, 0, 16 },
	{ NULL, 0, 0, 0 },
};

static void member_add(struct http_req *r)
{
	json_t *body;
	long long id;
	struct call *c;
	const char *role, *user;
	struct db_args a = DB_ARGS_INIT;
	char *doc;

	if (class_id(r, &id) < 0 || !(body = api_json_body(r, member_add_spec)))
		return;
	role = json_string_value(json_object_get(body, "role"));
	user = json_string_value(json_object_get(body, "username"));
	if (!user == !json_is_integer(json_object_get(body, "user_id"))) {
		json_decref(body);
		bad(r, "e.g. {\"username\": \"alice\", \"role\": \"student\"}",
		    "name the user with either username or user_id");
		return;
	}
	if (json_object_get(body, "role") && !role_ok(role)) {
		json_decref(body);
		bad(r, NULL, "role must be student, ta or teacher");
		return;
	}
	if (!role)
		json_object_set_new(body, "role", json_string("student"));
	c = call_new(r, "member", 201, "class.member.add");
	doc = json_dumps(body, JSON_COMPACT);
	if (!c || !doc) {
		free(doc);
		json_decref(body);
		if (c)
			http_reply_error(r, RC_NOMEM, NULL, "out of memory");
		return;
	}
	snprintf(c->target, sizeof(c->target), "class:%lld", id);
	c->details = json_deep_copy(body);
	db_arg_ll(&a, id);
	arg_caller(&a, r);
	db_arg_ll_opt(&a, json_integer_value(json_object_get(body, "user_id")), !user);
	db_arg_str(&a, user);
	db_arg_str(&a, doc);
	db_query_args("SELECT gc_class_member($1, $2, $3::boolean, 'add', COALESCE($4::bigint,"
	              " (SELECT id FROM users WHERE username = $5), 0), $6::jsonb)",
	              &a, call_done, c);
	free(doc);
	json_decref(body);
}

static const struct jfield member_set_spec[] = {
	{ "role", J_STRING, 0, 16 },
	{ "state", J_STRING, 0, 16 },
	{ NULL, 0, 0, 0 },
};

/* PATCH and DELETE /classes/{id}/members/{user_id}. */
static void member_change(struct http_req *r, int remove)
{
	json_t *body = NULL;
	long long id, uid;
	struct call *c;
	const char *st;
	struct db_args a = DB_ARGS_INIT;
	char *doc;

	if (class_id(r, &id) < 0 || api_id(r, "user_id", &uid) < 0)
		return;
	if (!remove) {
		if (!(body = api_json_body(r, member_set_spec)))
			return;
		st = json_string_value(json_object_get(body, "state"));
		if (json_object_size(body) == 0 ||
		    (json_object_get(body, "role") &&
		     !role_ok(json_string_value(json_object_get(body, "role")))) ||
		    (json_object_get(body, "state") &&
		     (!st || (strcmp(st, "active") != 0 && strcmp(st, "suspended") != 0)))) {
			json_decref(body);
			bad(r, "e.g. {\"state\": \"suspended\"} or {\"role\": \"ta\"}",
			    "send role (student, ta, teacher) and/or state (active, suspended)");
			return;
		}
	} else {
		body = json_object();
	}
	c = call_new(r, "member", 200,
	             remove ? "class.member.remove"
	             : json_object_get(body, "state") && !json_object_get(body, "role")
	                     ? (strcmp(json_string_value(json_object_get(body, "state")),
	                               "suspended") == 0
	                                ? "class.member.suspend"
	                                : "class.member.resume")
	                     : "class.member.update");
	doc = json_dumps(body, JSON_COMPACT);
	if (!c || !doc) {
		free(doc);
		json_decref(body);
		if (c)
			http_reply_error(r, RC_NOMEM, NULL, "out of memory");
		return;
	}
	snprintf(c->target, sizeof(c->target), "class:%lld", id);
	c->details = json_pack("{s:I}", "user_id", (json_int_t)uid);
	json_object_update(c->details, body);
	db_arg_ll(&a, id);
	arg_caller(&a, r);
	db_arg_str(&a, remove ? "remove" : "set");
	db_arg_ll(&a, uid);
	db_arg_str(&a, doc);
	db_query_args("SELECT gc_class_member($1, $2, $3::boolean, $4, $5, $6::jsonb)", &a,
	              call_done, c);
	free(doc);
	json_decref(body);
}

static void member_set(struct http_req *r)
{
	member_change(r, 0);
}

static void member_remove(struct http_req *r)
{
	member_change(r, 1);
}

/* ---- invite codes ---- */

static void invite_made(struct call *c, json_t *a)
{
	char url[96];

	snprintf(url, sizeof(url), "/#/join?code=%s", c->code);
	http_reply_json(c->r, 201,
	                json_pack("{s:s, s:s, s:O}", "code", c->code, "url", url, "expires_at",
	                          json_object_get(a, "expires_at")));
	json_decref(a);
}

static const struct jfield invite_spec[] = {
	{ "expires_in_s", J_INT, 0, 0 },
	{ NULL, 0, 0, 0 },
};

static void invite(struct http_req *r)
{
	json_t *body;
	long long id, ttl = INVITE_DEFAULT_S;
	struct call *c;
	char hash[65];
	struct db_args a = DB_ARGS_INIT;

	if (class_id(r, &id) < 0 || !(body = api_json_body(r, invite_spec)))
		return;
	if (json_is_integer(json_object_get(body, "expires_in_s")))
		ttl = json_integer_value(json_object_get(body, "expires_in_s"));
	json_decref(body);
	if (ttl < 60 || ttl > INVITE_MAX_S) {
		bad(r, "e.g. 604800 for a week",
		    "expires_in_s must be from 60 to 15552000 (180 days)");
		return;
	}
	c = call_new(r, NULL, 201, "class.invite");
	if (!c)
		return;
	if (crypto_token(c->code, sizeof(c->code), 15) < 0) {
		http_reply_error(r, RC_INTERNAL, NULL, "no randomness available");
		return;
	}
	crypto_sha256_hex(c->code, strlen(c->code), hash);
	snprintf(c->target, sizeof(c->target), "class:%lld", id);
	c->details = json_pack("{s:I}", "expires_in_s", (json_int_t)ttl);
	c->finish = invite_made;
	db_arg_ll(&a, id);
	arg_caller(&a, r);
	db_arg_str(&a, hash);
	db_arg_ll(&a, ttl);
	db_query_args("SELECT gc_class_invite($1, $2, $3::boolean, $4, $5::integer)", &a, call_done,
	              c);
}

static void invite_off(struct http_req *r)
{
	long long id;
	struct call *c;

	if (class_id(r, &id) < 0 || !(c = call_new(r, NULL, 200, "class.invite.disable")))
		return;
	snprintf(c->target, sizeof(c->target), "class:%lld", id);
	run(c, "SELECT gc_class_invite($1, $2, $3::boolean, NULL, 0)", id, NULL);
}

static const struct jfield join_spec[] = {
	{ "code", J_STRING, 1, 64 },
	{ NULL, 0, 0, 0 },
};

static void join(struct http_req *r)
{
	json_t *body = api_json_body(r, join_spec);
	const char *code;
	char hash[65];
	struct call *c;
	struct db_args a = DB_ARGS_INIT;

	if (!body)
		return;
	code = json_string_value(json_object_get(body, "code"));
	crypto_sha256_hex(code, strlen(code), hash);
	json_decref(body);
	c = call_new(r, NULL, 200, "class.join");
	if (!c)
		return;
	arg_caller(&a, r);
	db_arg_str(&a, hash);
	db_query_args("SELECT gc_class_join($1, $2::boolean, $3)", &a, call_done, c);
}

/* ---- CSV import ----
 *
 * Columns username (required), display_name, email, role (student, ta,
 * teacher; default student), in any order.  Every line is checked and the
 * whole file reported at once (account_import.c): each row is 'create' (a
 * new student account with a one-time password), 'link' (an existing
 * account joins), 'already' (in the class) or an error; only a file without
 * errors changes anything, all of it in one statement (gc_class_import).
 * ?dry_run=1 reports only. */

static const char *import_check(const struct ai_row *row)
{
	return role_ok(row->v[AI_ROLE]) ? NULL : "role must be student, ta or teacher";
}

const struct ai_spec api_classes_import_spec = {
	.columns = 1u << AI_USERNAME | 1u << AI_DISPLAY | 1u << AI_EMAIL | 1u << AI_ROLE,
	.required = 1u << AI_USERNAME,
	.need_columns = "the header row must name the column username",
	.columns_hint = "username, display_name, email, role",
	.column_cut = 40,
	.column_ascii = 1,
	.header_utf8 = "the header row is not valid UTF-8",
	.header_cell_max = 599,
	.max_fields = 8,
	.field_max = 512,
	.field_long = "a field is too long (at most 512 bytes)",
	.field_utf8 = "a field is not valid UTF-8 (save the file as UTF-8)",
	.noun = "rows",
	.twice = "",
	.role_default = "student",
	.nothing = "imported",
	.check = import_check,
};

struct import {
	struct ai_import ai; /* first: the hashing's callback casts back */
	long long cid;
	json_t *report; /* the database's rows */
};

static void import_free(void *p)
{
	struct import *im = p;

	ai_release(&im->ai);
	json_decref(im->report);
	free(im);
}

/* The rows without a problem, as gc_class_import takes them. */
static json_t *import_rows(const struct ai_import *im, int with_hash)
{
	json_t *arr = json_array();

	for (int i = 0; i < im->n; i++) {
		const struct ai_row *w = &im->rows[i];
		json_t *o;
		if (w->bad)
			continue;
		o = json_pack("{s:i, s:s, s:s, s:s, s:s}", "line", w->line, "username",
		              w->v[AI_USERNAME], "display_name", w->v[AI_DISPLAY], "email",
		              w->v[AI_EMAIL], "role", w->v[AI_ROLE]);
		if (with_hash && w->phc)
			json_object_set_new(o, "password_hash", json_string(w->phc));
		json_array_append_new(arr, o);
	}
	return arr;
}

static void import_counts(json_t *out, json_t *rows)
{
	static const char *const acts[] = { "create", "link", "already" };
	static const char *const keys[] = { "created", "linked", "already" };
	size_t i;
	json_t *v;

	for (int k = 0; k < 3; k++) {
		int n = 0;
		json_array_foreach(rows, i, v) n +=
		        strcmp(json_string_value(json_object_get(v, "action")), acts[k]) == 0;
		json_object_set_new(out, keys[k], json_integer(n));
	}
}

static void import_applied(PGresult *res, enum rc rc, void *arg)
{
	struct import *im = arg;
	struct http_req *r = im->ai.r;
	json_t *a = answer(r, res, rc), *rows, *v, *out;
	size_t i;

	if (!a)
		return;
	rows = json_incref(json_object_get(a, "rows"));
	json_array_foreach(rows, i, v)
	{
		const char *u = json_string_value(json_object_get(v, "username"));
		if (strcmp(json_string_value(json_object_get(v, "action")), "create") == 0)
			json_object_set_new(v, "action", json_string("created"));
		else if (strcmp(json_string_value(json_object_get(v, "action")), "link") == 0)
			json_object_set_new(v, "action", json_string("linked"));
		for (int k = 0; k < im->ai.n; k++)
			if (strcmp(im->ai.rows[k].v[AI_USERNAME], u) == 0 &&
			    im->ai.rows[k].create && *im->ai.rows[k].generated)
				json_object_set_new(v, "password",
				                    json_string(im->ai.rows[k].generated));
	}
	out = json_pack("{s:b, s:o, s:O, s:b}", "dry_run", 0, "rows", rows, "class",
	                json_object_get(a, "class"), "must_change_password", 1);
	{
		int nc = 0, nl = 0, na = 0;
		json_array_foreach(rows, i, v)
		{
			const char *act = json_string_value(json_object_get(v, "action"));
			nc += strcmp(act, "created") == 0;
			nl += strcmp(act, "linked") == 0;
			na += strcmp(act, "already") == 0;
		}
		json_object_set_new(out, "created", json_integer(nc));
		json_object_set_new(out, "linked", json_integer(nl));
		json_object_set_new(out, "already", json_integer(na));
		auth_audit(r, r->auth, "class.import",
		           json_string_value(json_object_get(json_object_get(a, "class"), "name")),
		           json_pack("{s:I, s:i, s:i, s:i}", "class_id", (json_int_t)im->cid,
		                     "created", nc, "linked", nl, "already", na));
	}
	json_decref(a);
	http_reply_json(r, 200, out);
}

/* Every one-time password hashed (or not): one statement does it all. */
static void import_apply(struct ai_import *ai)
{
	struct import *im = (struct import *)ai;
	json_t *rows;
	char *doc;
	struct db_args a = DB_ARGS_INIT;

	if (ai->failed) {
		http_reply_error(
		        ai->r, RC_UNAVAILABLE, "retry in a few seconds",
		        "could not make the passwords (server busy); nothing was imported");
		return;
	}
	rows = import_rows(ai, 1);
	doc = json_dumps(rows, JSON_COMPACT);
	json_decref(rows);
	if (!doc) {
		http_reply_error(ai->r, RC_NOMEM, NULL, "out of memory");
		return;
	}
	db_arg_ll(&a, im->cid);
	arg_caller(&a, ai->r);
	db_arg_str(&a, doc);
	db_query_args("SELECT gc_class_import($1, $2, $3::boolean, $4::jsonb, true)", &a,
	              import_applied, im);
	free(doc);
}

static void import_checked(PGresult *res, enum rc rc, void *arg)
{
	struct import *im = arg;
	struct ai_import *ai = &im->ai;
	json_t *a = answer(ai->r, res, rc), *v, *out;
	size_t i;

	if (!a)
		return;
	im->report = json_incref(json_object_get(a, "rows"));
	json_array_foreach(im->report, i, v)
	{
		const char *act = json_string_value(json_object_get(v, "action"));
		if (strcmp(act, "error") == 0)
			ai_error(ai, (int)json_integer_value(json_object_get(v, "line")), "%s",
			         json_string_value(json_object_get(v, "message")));
		for (int k = 0; k < ai->n; k++)
			if (ai->rows[k].line == json_integer_value(json_object_get(v, "line")))
				ai->rows[k].create = strcmp(act, "create") == 0;
	}
	if (json_array_size(ai->errors)) {
		json_decref(a);
		ai_reply_errors(ai);
		return;
	}
	if (ai->dry_run) {
		out = json_pack("{s:b, s:O, s:O}", "dry_run", 1, "rows", im->report, "class",
		                json_object_get(a, "class"));
		import_counts(out, im->report);
		json_decref(a);
		http_reply_json(ai->r, 200, out);
		return;
	}
	json_decref(a);
	ai_hash(ai, import_apply);
}

static void import(struct http_req *r)
{
	const char *ct = http_header(r, "Content-Type");
	struct import *im;
	long long id;
	long dn;
	char dry[8];
	json_t *rows;
	char *doc;
	struct db_args a = DB_ARGS_INIT;

	if (class_id(r, &id) < 0)
		return;
	if (!ct || strncasecmp(ct, "text/csv", 8) != 0) {
		http_reply_error(r, RC_UNSUPPORTED, "send the file with 'Content-Type: text/csv'",
		                 "the roster import expects CSV");
		return;
	}
	dn = api_query(r, "dry_run", dry, sizeof(dry));
	if (dn == -2)
		return;
	if (dn >= 0 && strcmp(dry, "1") != 0 && strcmp(dry, "0") != 0 && strcmp(dry, "true") != 0 &&
	    strcmp(dry, "false") != 0) {
		http_reply_error(r, RC_INVALID, "use dry_run=1 or dry_run=0",
		                 "dry_run must be 1 or 0, not '%s'", dry);
		return;
	}
	im = api_state(r, sizeof(*im), import_free);
	if (!im || ai_init(&im->ai, r, &api_classes_import_spec) < 0)
		return;
	im->cid = id;
	im->ai.dry_run = dn >= 0 && (dry[0] == '1' || dry[0] == 't');
	/* the file's own problems first; the roster's need the database, and
	 * a caller who may not change it hears that before anything else */
	ai_parse(&im->ai, r->body ? (const char *)evbuffer_pullup(r->body, -1) : "",
	         r->body ? evbuffer_get_length(r->body) : 0);
	rows = import_rows(&im->ai, 0);
	doc = json_dumps(rows, JSON_COMPACT);
	json_decref(rows);
	if (!doc) {
		http_reply_error(r, RC_NOMEM, NULL, "out of memory");
		return;
	}
	db_arg_ll(&a, id);
	arg_caller(&a, r);
	db_arg_str(&a, doc);
	db_query_args("SELECT gc_class_import($1, $2, $3::boolean, $4::jsonb, false)", &a,
	              import_checked, im);
	free(doc);
}

const struct route api_classes_routes[] = {
	{ HTTP_GET, "/api/v1/classes", list, ROLES_ALL, 0, 0, NULL },
	{ HTTP_POST, "/api/v1/classes", create, ROLE_TEACHER | ROLE_ADMIN, 0, 16384, NULL },
	{ HTTP_POST, "/api/v1/classes/join", join, ROLES_ALL, 0, 4096, NULL },
	{ HTTP_GET, "/api/v1/classes/{id}", get, ROLES_ALL, 0, 0, NULL },
	{ HTTP_PATCH, "/api/v1/classes/{id}", patch, ROLES_ALL, 0, 65536, NULL },
	{ HTTP_DELETE, "/api/v1/classes/{id}", del, ROLES_ALL, 0, 0, NULL },
	{ HTTP_PUT, "/api/v1/classes/{id}/allocation", allocation, ROLE_ADMIN, 0, 4096, NULL },
	{ HTTP_GET, "/api/v1/classes/{id}/members", members, ROLES_ALL, 0, 0, NULL },
	{ HTTP_POST, "/api/v1/classes/{id}/members", member_add, ROLES_ALL, 0, 4096, NULL },
	{ HTTP_POST, "/api/v1/classes/{id}/members/import", import, ROLES_ALL, ROUTE_RAW_BODY,
	  1 << 20, NULL },
	{ HTTP_PATCH, "/api/v1/classes/{id}/members/{user_id}", member_set, ROLES_ALL, 0, 4096,
	  NULL },
	{ HTTP_DELETE, "/api/v1/classes/{id}/members/{user_id}", member_remove, ROLES_ALL, 0, 0,
	  NULL },
	{ HTTP_POST, "/api/v1/classes/{id}/invite", invite, ROLES_ALL, 0, 4096, NULL },
	{ HTTP_DELETE, "/api/v1/classes/{id}/invite", invite_off, ROLES_ALL, 0, 0, NULL },
	{ 0, NULL, NULL, 0, 0, 0, NULL },
};
