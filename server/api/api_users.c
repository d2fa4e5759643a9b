/* api_users.c — /users: list, create, read, update, soft delete, password
 * reset, CSV import, and the seeding of the first admin.
 *
 * Admin only (an admin holds every role, so an admin may grant any).  Owns
 * validation of account fields; the database's constraints are the last
 * word (unique usernames, the role set, one active admin always remains:
 * 0016_user_lifecycle.sql).  A deleted account keeps its row, so what it
 * did (audit, usage, instances) still names it; it cannot log in, edit or
 * run anything again.  Reset and imported accounts must change their
 * password at the next login (auth.c refuses them everything else).
 */
#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <http_parser.h>
#include <libpq-fe.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include "api/account_import.h"
#include "api/api.h"
#include "auth/auth.h"
#include "base/config.h"
#include "base/crypto.h"
#include "db/db.h"
#include "base/events.h"
#include "base/log.h"

/* ---- validation ---- */

const char *api_users_check_username(const char *u)
{
	size_t n = strlen(u);

	if (n < 2 || n > 32)
		return "username must be 2 to 32 characters";
	if (!(u[0] >= 'a' && u[0] <= 'z'))
		return "username must start with a lower-case letter";
	for (size_t i = 1; i < n; i++)
		if (!((u[i] >= 'a' && u[i] <= 'z') || (u[i] >= '0' && u[i] <= '9') || u[i] == '.' ||
		      u[i] == '_' || u[i] == '-'))
			return "username may contain only a-z, 0-9, '.', '_' and '-'";
	return NULL;
}

const char *api_users_check_email(const char *e)
{
	const char *at = strchr(e, '@');

	if (!*e)
		return NULL;
	if (strlen(e) > 254)
		return "email must be at most 254 characters";
	if (!at || at == e || !at[1] || strchr(at + 1, '@'))
		return "email must look like name@domain";
	for (; *e; e++)
		if (isspace((unsigned char)*e) || (unsigned char)*e < 0x20)
			return "email must not contain spaces";
	return NULL;
}

const char *api_users_check_display_name(const char *d)
{
	for (const unsigned char *p = (const unsigned char *)d; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			return "display name must not contain control characters";
	return strlen(d) > 200 ? "display name must be at most 200 bytes" : NULL;
}

static const char *str(json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));
	return s ? s : "";
}

/* ---- list ---- */

static json_t *user_row(const PGresult *res, int i)
{
	return api_user_row(res, i, 0);
}

static const struct api_resource user_resource = { "user", user_row, 1 };

#define USER_SELECT "SELECT " API_USER_SELECT " FROM users"

static void list(struct http_req *r)
{
	int limit;
	long long cursor;
	long n;
	char q[256], role[32], deleted[8];
	struct db_args a = DB_ARGS_INIT;

	if (api_page(r, 50, 500, &limit, &cursor) < 0)
		return;
	switch (api_query(r, "q", q, sizeof(q))) {
	case -2: return;
	case -1: q[0] = '\0';
	}
	n = api_query(r, "role", role, sizeof(role));
	if (n == -2)
		return;
	if (n > 0 && auth_role_parse(role) < 0) {
		http_reply_error(r, RC_INVALID, "use admin, teacher, researcher or student",
		                 "unknown role '%s'", role);
		return;
	}
	switch (api_query(r, "deleted", deleted, sizeof(deleted))) {
	case -2: return;
	case -1: snprintf(deleted, sizeof(deleted), "false"); break;
	default:
		if (strcmp(deleted, "true") != 0 && strcmp(deleted, "false") != 0) {
			http_reply_error(r, RC_INVALID, "use deleted=true or deleted=false",
			                 "deleted must be true or false, not '%s'", deleted);
			return;
		}
	}
	db_arg_ll(&a, cursor);
	db_arg_str(&a, *q ? q : NULL);
	db_arg_str(&a, n > 0 ? role : NULL);
	db_arg_ll(&a, limit + 1);
	db_arg_str(&a, deleted[0] == 't' ? "t" : "f");
	api_list_page(r, &user_resource, limit,
	              USER_SELECT " WHERE id > $1"
	                          " AND ($2::text IS NULL OR strpos(username, lower($2)) > 0"
	                          "  OR strpos(lower(display_name), lower($2)) > 0"
	                          "  OR strpos(lower(email), lower($2)) > 0)"
	                          " AND ($3::user_role IS NULL OR role = $3::user_role)"
	                          " AND (deleted_at IS NOT NULL) = $5::boolean"
	                          " ORDER BY id LIMIT $4::int",
	              &a);
}

/* ---- read ---- */

static void get(struct http_req *r)
{
	api_get(r, &user_resource, USER_SELECT " WHERE id = $1");
}

/* ---- create ---- */

struct create {
	struct http_req *r;
	json_t *body;
	char generated[32];
};

static void create_free(void *p)
{
	struct create *c = p;

	json_decref(c->body);
	free(c);
}

static void create_done(PGresult *res, enum rc rc, void *arg)
{
	struct create *c = arg;
	struct http_req *r = c->r;
	json_t *out;

	if (rc == RC_CONFLICT) {
		http_reply_error(r, RC_CONFLICT, "pick another username", "username '%s' is taken",
		                 str(c->body, "username"));
		return;
	}
	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "could not create the user");
		return;
	}
	out = json_pack("{s:o}", "user", api_user_row(res, 0, 0));
	if (*c->generated)
		json_object_set_new(out, "password", json_string(c->generated));
	auth_audit(r, r->auth, "user.create", str(c->body, "username"),
	           json_pack("{s:s}", "role", str(c->body, "role")));
	http_reply_json(r, 201, out);
}

static void create_hashed(void *arg, const char *phc)
{
	struct create *c = arg;
	struct db_args a = DB_ARGS_INIT;

	if (!phc) {
		http_reply_error(c->r, RC_INTERNAL, NULL, "could not hash the password");
		return;
	}
	db_arg_str(&a, str(c->body, "username"));
	db_arg_str(&a, str(c->body, "display_name"));
	db_arg_str(&a, str(c->body, "email"));
	db_arg_str(&a, str(c->body, "role"));
	db_arg_str(&a, phc);
	db_arg_ll(&a, c->r->auth->user_id);
	db_arg_str(&a, json_is_true(json_object_get(c->body, "must_change_password")) ? "t" : "f");
	db_query_args("INSERT INTO users (username, display_name, email, role, password_hash,"
	              " created_by, must_change_password)"
	              " VALUES ($1, $2, $3, $4::user_role, $5, $6, $7::boolean) "
	              "RETURNING " API_USER_SELECT,
	              &a, create_done, c);
}

static const struct jfield create_spec[] = {
	{ "username", J_STRING, 1, 64 },
	{ "display_name", J_STRING, 0, 200 },
	{ "email", J_STRING, 0, 254 },
	{ "role", J_STRING, 1, 16 },
	{ "password", J_STRING, 0, 1024 },
	{ "must_change_password", J_BOOL, 0, 0 },
	{ NULL, 0, 0, 0 },
};

static void create(struct http_req *r)
{
	json_t *body = api_json_body(r, create_spec);
	struct create *c;
	const char *why, *password;

	if (!body)
		return;
	if ((why = api_users_check_username(str(body, "username"))) ||
	    (why = api_users_check_email(str(body, "email"))) ||
	    (why = api_users_check_display_name(str(body, "display_name"))) ||
	    (auth_role_parse(str(body, "role")) < 0 &&
	     (why = "role must be admin, teacher, researcher or student")) ||
	    (json_is_string(json_object_get(body, "password")) &&
	     (why = auth_password_policy(str(body, "password"), str(body, "username"))))) {
		json_decref(body);
		http_reply_error(r, RC_INVALID, NULL, "%s", why);
		return;
	}
	c = api_state(r, sizeof(*c), create_free);
	if (!c) {
		json_decref(body);
		return;
	}
	c->r = r;
	c->body = body;
	password = str(body, "password");
	if (!*password) {
		if (auth_password_generate(c->generated, sizeof(c->generated)) < 0) {
			http_reply_error(r, RC_INTERNAL, NULL, "no randomness available");
			return;
		}
		password = c->generated;
	}
	if (auth_hash_async(password, create_hashed, c) < 0)
		http_reply_error(r, RC_UNAVAILABLE, "retry in a few seconds", "server busy");
}

/* ---- update ---- */

/* The trigger of 0016 refusing to lose the last active admin: 409. */
static int last_admin(struct http_req *r, const PGresult *res, enum rc rc)
{
	const char *c = res ? PQresultErrorField(res, PG_DIAG_CONSTRAINT_NAME) : NULL;

	if (rc != RC_INVALID || !c || strcmp(c, "users_last_admin") != 0)
		return 0;
	http_reply_error(r, RC_CONFLICT, "make another user an admin first",
	                 "this would leave no active admin");
	return 1;
}

static void update_done(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;
	json_t *body = r->data;

	if (last_admin(r, res, rc))
		return;
	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "could not update the user");
		return;
	}
	if (PQntuples(res) != 1) {
		http_reply_error(r, RC_NOTFOUND, NULL, "no such user '%s'", http_param(r, "id"));
		return;
	}
	if (strcmp(db_val(res, 0, API_USER_NCOLS), "t") == 0) {
		http_reply_error(r, RC_CONFLICT, "deleted accounts cannot be edited",
		                 "user '%s' was deleted", db_val(res, 0, USER_USERNAME));
		return;
	}
	auth_audit(r, r->auth,
	           json_is_string(json_object_get(body, "role")) ? "user.role" : "user.update",
	           db_val(res, 0, USER_USERNAME), json_deep_copy(body));
	http_reply_json(r, 200, api_user_row(res, 0, 0));
}

static void json_free(void *p)
{
	json_decref(p);
}

static const struct jfield update_spec[] = {
	{ "display_name", J_STRING, 0, 200 },
	{ "email", J_STRING, 0, 254 },
	{ "role", J_STRING, 0, 16 },
	{ "disabled", J_BOOL, 0, 0 },
	{ "must_change_password", J_BOOL, 0, 0 },
	{ NULL, 0, 0, 0 },
};

static const char *opt_bool(json_t *v)
{
	return json_is_boolean(v) ? (json_is_true(v) ? "t" : "f") : NULL;
}

static void update(struct http_req *r)
{
	json_t *body;
	long long id;
	const char *why = NULL;
	json_t *role, *disabled;
	struct db_args a = DB_ARGS_INIT;

	if (api_id(r, "id", &id) < 0)
		return;
	body = api_json_body(r, update_spec);
	if (!body)
		return;
	if (json_object_size(body) == 0) {
		json_decref(body);
		http_reply_error(r, RC_INVALID,
		                 "send display_name, email, role, disabled or must_change_password",
		                 "nothing to change");
		return;
	}
	role = json_object_get(body, "role");
	disabled = json_object_get(body, "disabled");
	if (json_is_string(json_object_get(body, "email")))
		why = api_users_check_email(str(body, "email"));
	if (!why && json_is_string(json_object_get(body, "display_name")))
		why = api_users_check_display_name(str(body, "display_name"));
	if (!why && json_is_string(role) && auth_role_parse(json_string_value(role)) < 0)
		why = "role must be admin, teacher, researcher or student";
	if (why) {
		json_decref(body);
		http_reply_error(r, RC_INVALID, NULL, "%s", why);
		return;
	}
	if (id == r->auth->user_id &&
	    ((json_is_string(role) && strcmp(json_string_value(role), "admin") != 0) ||
	     json_is_true(disabled))) {
		json_decref(body);
		http_reply_error(r, RC_CONFLICT, "ask another admin",
		                 "you cannot demote or disable yourself");
		return;
	}
	r->data = body;
	r->data_free = json_free;
	db_arg_ll(&a, id);
	db_arg_str(&a, json_is_string(json_object_get(body, "display_name"))
	                       ? str(body, "display_name")
	                       : NULL);
	db_arg_str(&a, json_is_string(json_object_get(body, "email")) ? str(body, "email") : NULL);
	db_arg_str(&a, json_is_string(role) ? json_string_value(role) : NULL);
	db_arg_str(&a, opt_bool(disabled));
	db_arg_str(&a, opt_bool(json_object_get(body, "must_change_password")));
	/* a deleted account is not changed: the second branch says it is one */
	db_query_args("WITH s AS (UPDATE sessions SET revoked_at = now()"
	              "  WHERE user_id = $1 AND $5::boolean IS TRUE AND revoked_at IS NULL"
	              "  AND EXISTS (SELECT 1 FROM users WHERE id = $1 AND deleted_at IS NULL)),"
	              " u AS (UPDATE users SET display_name = COALESCE($2, display_name),"
	              " email = COALESCE($3, email), role = COALESCE($4::user_role, role),"
	              " disabled = COALESCE($5::boolean, disabled),"
	              " must_change_password = COALESCE($6::boolean, must_change_password),"
	              " updated_at = now()"
	              " WHERE id = $1 AND deleted_at IS NULL RETURNING " API_USER_SELECT ")"
	              " SELECT *, false FROM u UNION ALL"
	              " SELECT " API_USER_SELECT ", true FROM users WHERE id = $1"
	              " AND deleted_at IS NOT NULL",
	              &a, update_done, r);
}

/* ---- delete (soft) ---- */

static void delete_done(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;

	if (last_admin(r, res, rc))
		return;
	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "could not delete the user");
		return;
	}
	if (PQntuples(res) != 1) {
		http_reply_error(r, RC_NOTFOUND, "deleted accounts are listed with ?deleted=true",
		                 "no such user '%s' (or it was deleted already)",
		                 http_param(r, "id"));
		return;
	}
	auth_audit(r, r->auth, "user.delete", db_val(res, 0, USER_USERNAME),
	           json_pack("{s:i}", "instances_stopped",
	                     (int)strtol(db_val(res, 0, API_USER_NCOLS), NULL, 10)));
	/* the driver stops their instances; the scheduler forgets their queue */
	events_publish(EV_ALLOC_CHANGED);
	events_publish(EV_WORKLOAD_CHANGED);
	http_reply_json(r, 200, api_user_row(res, 0, 0));
}

static void del(struct http_req *r)
{
	long long id;
	char why[80];
	struct db_args a = DB_ARGS_INIT;

	if (api_id(r, "id", &id) < 0)
		return;
	if (id == r->auth->user_id) {
		http_reply_error(r, RC_CONFLICT, "ask another admin", "you cannot delete yourself");
		return;
	}
	snprintf(why, sizeof(why), "stopped: the account was deleted by %s", r->auth->username);
	db_arg_ll(&a, id);
	db_arg_ll(&a, r->auth->user_id);
	db_arg_str(&a, why);
	/* one statement: the account is marked deleted (and disabled), its
	 * sessions and tokens end, its instances are told to stop and its raw
	 * allocations are released.  Rows stay: the history keeps its name. */
	db_query_args(
	        "WITH u AS (UPDATE users SET deleted_at = now(), deleted_by = $2, disabled = true,"
	        "  updated_at = now() WHERE id = $1 AND deleted_at IS NULL"
	        "  RETURNING " API_USER_SELECT "),"
	        " s AS (UPDATE sessions SET revoked_at = now()"
	        "  WHERE user_id = $1 AND revoked_at IS NULL AND EXISTS (SELECT 1 FROM u)),"
	        " t AS (UPDATE api_tokens SET revoked_at = now()"
	        "  WHERE user_id = $1 AND revoked_at IS NULL AND EXISTS (SELECT 1 FROM u)),"
	        " i AS (UPDATE instances SET desired = 'stopped', reason = $3, updated_at = now()"
	        "  WHERE user_id = $1 AND desired = 'running' AND state <> 'deleted'"
	        "  AND EXISTS (SELECT 1 FROM u) RETURNING id),"
	        " q AS (SELECT gc_release_request(id, 'the account was deleted') FROM "
	        "alloc_requests"
	        "  WHERE user_id = $1 AND owner_kind = 'api' AND state IN ('queued', 'allocated')"
	        "  AND EXISTS (SELECT 1 FROM u))"
	        " SELECT u.*, (SELECT count(*) FROM i), (SELECT count(*) FROM q) FROM u",
	        &a, delete_done, r);
}

/* ---- password reset ---- */

struct reset {
	struct http_req *r;
	long long id;
	int must_change; /* the user must choose their own at the next login */
	char generated[32];
};

static void reset_done(PGresult *res, enum rc rc, void *arg)
{
	struct reset *s = arg;
	struct http_req *r = s->r;
	json_t *out;

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "");
		return;
	}
	if (PQntuples(res) != 1) {
		http_reply_error(r, RC_NOTFOUND, NULL, "no such user '%lld'", s->id);
		return;
	}
	auth_audit(r, r->auth, "password.reset", db_val(res, 0, 0), NULL);
	out = json_object();
	if (*s->generated)
		json_object_set_new(out, "password", json_string(s->generated));
	http_reply_json(r, 200, out);
}

static void reset_hashed(void *arg, const char *phc)
{
	struct reset *s = arg;
	struct db_args a = DB_ARGS_INIT;

	if (!phc) {
		http_reply_error(s->r, RC_INTERNAL, NULL, "could not hash the password");
		return;
	}
	db_arg_ll(&a, s->id);
	db_arg_str(&a, phc);
	db_arg_str(&a, s->must_change ? "t" : "f");
	/* whoever knew the old password may hold a session or have made a
	 * token with it: all of them end; the login backoff is lifted too */
	db_query_args("WITH s AS (UPDATE sessions SET revoked_at = now() WHERE user_id = $1 AND "
	              "revoked_at IS NULL),"
	              " t AS (UPDATE api_tokens SET revoked_at = now() WHERE user_id = $1 AND "
	              "revoked_at IS NULL),"
	              " a AS (UPDATE login_addresses SET failures = 0, locked_until = NULL"
	              "  WHERE user_id = $1)"
	              " UPDATE users SET password_hash = $2, password_changed_at = now(),"
	              " login_window_at = NULL, login_main = 0, login_known = 0, login_new = 0,"
	              " must_change_password = $3::boolean, updated_at = now()"
	              " WHERE id = $1 AND deleted_at IS NULL RETURNING username",
	              &a, reset_done, s);
}

static const struct jfield reset_spec[] = {
	{ "password", J_STRING, 0, 1024 },
	{ "must_change_password", J_BOOL, 0, 0 },
	{ NULL, 0, 0, 0 },
};

static void reset_password(struct http_req *r)
{
	json_t *body;
	struct reset *s;
	const char *pw, *why;
	long long id;

	if (api_id(r, "id", &id) < 0)
		return;
	body = api_json_body(r, reset_spec);
	if (!body)
		return;
	s = api_state(r, sizeof(*s), free);
	if (!s) {
		json_decref(body);
		return;
	}
	s->r = r;
	s->id = id;
	/* an admin knows the new password: by default the user replaces it */
	s->must_change = !json_is_false(json_object_get(body, "must_change_password"));
	pw = str(body, "password");
	if (*pw) {
		why = auth_password_policy(pw, NULL);
		if (why) {
			json_decref(body);
			http_reply_error(r, RC_INVALID, NULL, "%s", why);
			return;
		}
	} else if (auth_password_generate(s->generated, sizeof(s->generated)) < 0) {
		json_decref(body);
		http_reply_error(r, RC_INTERNAL, NULL, "no randomness available");
		return;
	}
	if (auth_hash_async(*pw ? pw : s->generated, reset_hashed, s) < 0)
		http_reply_error(r, RC_UNAVAILABLE, "retry in a few seconds", "server busy");
	json_decref(body);
}

/* ---- CSV import ----
 *
 * One pass reports every problem with its line number: the file is parsed
 * and every row checked (account_import.c), then the usernames that are
 * fine are looked up in one query, and only a file without a single
 * problem creates anyone (in one statement).  ?dry_run=true stops after the
 * checks.  Every imported account must change its password at the first
 * login; generated passwords are in the reply, once. */

static const char *import_check(const struct ai_row *row)
{
	if (auth_role_parse(row->v[AI_ROLE]) < 0)
		return "role must be admin, teacher, researcher or student";
	if (*row->v[AI_PASSWORD])
		return auth_password_policy(row->v[AI_PASSWORD], row->v[AI_USERNAME]);
	return NULL;
}

const struct ai_spec api_users_import_spec = {
	.columns = 1u << AI_USERNAME | 1u << AI_DISPLAY | 1u << AI_EMAIL | 1u << AI_ROLE |
	           1u << AI_PASSWORD,
	.required = 1u << AI_USERNAME | 1u << AI_ROLE,
	.need_columns = "the header row must name at least the columns username and role",
	.columns_hint = "username, display_name, email, role, password",
	.column_cut = 64,
	.header_utf8 = "the header row is not valid UTF-8 (save the file as UTF-8)",
	.header_cell_max = 1099,
	.max_fields = 16,
	.field_max = 1024,
	.field_long = "field %s is too long",
	.field_utf8 = "field %s is not valid UTF-8 (save the file as UTF-8)",
	.noun = "users",
	.twice = " in the file",
	.nothing = "created",
	.check = import_check,
};

static void import_inserted(PGresult *res, enum rc rc, void *arg)
{
	struct ai_import *im = arg;
	struct http_req *r = im->r;
	json_t *created;

	if (rc == RC_CONFLICT) {
		http_reply_error(r, RC_CONFLICT, "import again",
		                 "a username was taken meanwhile; nothing was created");
		return;
	}
	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "could not import users");
		return;
	}
	created = json_array();
	for (int i = 0; i < PQntuples(res); i++) {
		const char *u = db_val(res, i, 1);
		json_t *o =
		        json_pack("{s:I, s:s, s:s, s:s}", "id",
		                  (json_int_t)strtoll(db_val(res, i, 0), NULL, 10), "username", u,
		                  "display_name", db_val(res, i, 2), "role", db_val(res, i, 3));
		for (int k = 0; k < im->n; k++)
			if (strcmp(im->rows[k].v[AI_USERNAME], u) == 0 && *im->rows[k].generated)
				json_object_set_new(o, "password",
				                    json_string(im->rows[k].generated));
		json_array_append_new(created, o);
	}
	auth_audit(r, r->auth, "user.import", "", json_pack("{s:i}", "count", PQntuples(res)));
	http_reply_json(r, 200,
	                json_pack("{s:o, s:b}", "created", created, "must_change_password", 1));
}

/* Every password hashed (or not): one statement creates all rows or none. */
static void import_insert(struct ai_import *im)
{
	json_t *arr;
	char *doc;
	struct db_args a = DB_ARGS_INIT;

	if (im->failed) {
		if (im->failed == AI_FAIL_BUSY)
			http_reply_error(im->r, RC_UNAVAILABLE, "retry in a few seconds",
			                 "server busy");
		else if (im->failed == AI_FAIL_PREPARE)
			http_reply_error(im->r, RC_INTERNAL, NULL, "could not prepare passwords");
		else
			http_reply_error(im->r, RC_INTERNAL, NULL,
			                 "could not hash passwords; nothing was created");
		return;
	}
	arr = json_array();
	for (int i = 0; i < im->n; i++) {
		struct ai_row *row = &im->rows[i];
		json_array_append_new(arr, json_pack("{s:s, s:s, s:s, s:s, s:s}", "username",
		                                     row->v[AI_USERNAME], "display_name",
		                                     row->v[AI_DISPLAY], "email", row->v[AI_EMAIL],
		                                     "role", row->v[AI_ROLE], "password_hash",
		                                     row->phc));
	}
	doc = json_dumps(arr, JSON_COMPACT);
	json_decref(arr);
	if (!doc) {
		http_reply_error(im->r, RC_NOMEM, NULL, "out of memory");
		return;
	}
	db_arg_str(&a, doc);
	db_arg_ll(&a, im->r->auth->user_id);
	db_query_args("INSERT INTO users (username, display_name, email, role, password_hash,"
	              " created_by, must_change_password)"
	              " SELECT x.username, x.display_name, x.email, x.role::user_role,"
	              " x.password_hash, $2, true"
	              " FROM jsonb_to_recordset($1::jsonb) AS x(username text, display_name text,"
	              " email text, role text, password_hash text)"
	              " RETURNING id, username, display_name, role",
	              &a, import_inserted, im);
	free(doc);
}

/* ?dry_run=true: what an import would create. */
static void import_reply_dry_run(struct ai_import *im)
{
	json_t *users = json_array();

	for (int i = 0; i < im->n; i++) {
		struct ai_row *row = &im->rows[i];
		json_array_append_new(users,
		                      json_pack("{s:i, s:s, s:s, s:s, s:s, s:b}", "line", row->line,
		                                "username", row->v[AI_USERNAME], "display_name",
		                                row->v[AI_DISPLAY], "email", row->v[AI_EMAIL],
		                                "role", row->v[AI_ROLE], "password_given",
		                                *row->v[AI_PASSWORD] != 0));
	}
	http_reply_json(im->r, 200, json_pack("{s:b, s:o}", "dry_run", 1, "users", users));
}

static void import_checked(PGresult *res, enum rc rc, void *arg)
{
	struct ai_import *im = arg;

	if (rc != RC_OK) {
		api_reply_db_error(im->r, rc, "");
		return;
	}
	for (int i = 0; res && i < PQntuples(res); i++) {
		const char *u = db_val(res, i, 0);
		int gone = strcmp(db_val(res, i, 1), "t") == 0;
		for (int k = 0; k < im->n; k++)
			if (!im->rows[k].bad && strcmp(im->rows[k].v[AI_USERNAME], u) == 0)
				ai_error(im, im->rows[k].line,
				         gone ? "username '%s' belongs to a deleted account"
				              : "username '%s' already exists",
				         u);
	}
	if (json_array_size(im->errors)) {
		ai_reply_errors(im);
		return;
	}
	if (im->dry_run) {
		import_reply_dry_run(im);
		return;
	}
	for (int i = 0; i < im->n; i++)
		im->rows[i].create = 1;
	ai_hash(im, import_insert);
}

static void import(struct http_req *r)
{
	const char *ct = http_header(r, "Content-Type");
	struct ai_import *im;
	size_t len = evbuffer_get_length(r->body);
	json_t *names;
	char *doc, dry[8];
	struct db_args a = DB_ARGS_INIT;
	long dn;

	if (!ct || strncasecmp(ct, "text/csv", 8) != 0) {
		http_reply_error(r, RC_UNSUPPORTED, "send the file with 'Content-Type: text/csv'",
		                 "the import expects CSV");
		return;
	}
	dn = api_query(r, "dry_run", dry, sizeof(dry));
	if (dn == -2)
		return;
	if (dn >= 0 && strcmp(dry, "true") != 0 && strcmp(dry, "false") != 0) {
		http_reply_error(r, RC_INVALID, "use dry_run=true or dry_run=false",
		                 "dry_run must be true or false, not '%s'", dry);
		return;
	}
	im = api_state(r, sizeof(*im), ai_free);
	if (!im || ai_init(im, r, &api_users_import_spec) < 0)
		return;
	im->dry_run = dn >= 0 && dry[0] == 't';
	if (ai_parse(im, (const char *)evbuffer_pullup(r->body, -1), len) < 0 && im->n == 0) {
		ai_reply_errors(im);
		return;
	}
	/* the usernames that are fine so far, against the accounts there are:
	 * their problems join the others in one reply */
	names = json_array();
	for (int i = 0; i < im->n; i++)
		if (!im->rows[i].bad)
			json_array_append_new(names, json_string(im->rows[i].v[AI_USERNAME]));
	doc = json_dumps(names, JSON_COMPACT);
	json_decref(names);
	if (!doc) {
		http_reply_error(r, RC_NOMEM, NULL, "out of memory");
		return;
	}
	db_arg_str(&a, doc);
	db_query_args("SELECT username, deleted_at IS NOT NULL FROM users WHERE username IN"
	              " (SELECT jsonb_array_elements_text($1::jsonb))",
	              &a, import_checked, im);
	free(doc);
}

/* ---- seeding the first admin (start-up, blocking) ---- */

static int write_secret_file(const char *path, const char *content)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	size_t n = strlen(content);

	if (fd < 0)
		return -1;
	if (fchmod(fd, 0600) < 0 || write(fd, content, n) != (ssize_t)n ||
	    write(fd, "\n", 1) != 1) {
		close(fd);
		return -1;
	}
	return close(fd);
}

/* scrypt needs 128 MiB; hashing in a short-lived child keeps that out of
 * the server's own peak memory (no threads exist yet, so fork is safe). */
static int hash_in_child(const char *pw, char *phc, size_t len)
{
	int fds[2], status;
	pid_t pid;
	ssize_t n = 0, got;

	if (pipe(fds) < 0)
		return -1;
	pid = fork();
	if (pid < 0) {
		close(fds[0]);
		close(fds[1]);
		return -1;
	}
	if (pid == 0) {
		char out[CRYPTO_PHC_MAX];
		close(fds[0]);
		if (crypto_password_hash(pw, cfg.scrypt_ln, out, sizeof(out)) < 0)
			_exit(1);
		_exit(write(fds[1], out, strlen(out)) == (ssize_t)strlen(out) ? 0 : 1);
	}
	close(fds[1]);
	while ((size_t)n + 1 < len && (got = read(fds[0], phc + n, len - 1 - (size_t)n)) > 0)
		n += got;
	close(fds[0]);
	phc[n] = '\0';
	if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
	    n == 0)
		return -1;
	return 0;
}

int api_users_seed_admin(const char *db_url)
{
	PGconn *conn = PQconnectdb(db_url);
	PGresult *res = NULL;
	char generated[32] = "", phc[CRYPTO_PHC_MAX], path[1024];
	const char *pw, *p[2];
	int rc = -1;

	if (PQstatus(conn) != CONNECTION_OK) {
		log_msg(LOG_ERROR, "users", NULL, "cannot connect to seed the admin: %s",
		        PQerrorMessage(conn));
		goto out;
	}
	res = PQexec(conn, "SELECT 1 FROM users WHERE role = 'admin' LIMIT 1");
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		log_msg(LOG_ERROR, "users", NULL, "cannot look for an admin: %s",
		        PQerrorMessage(conn));
		goto out;
	}
	if (PQntuples(res) > 0) {
		rc = 0;
		goto out;
	}
	PQclear(res);
	res = NULL;
	if (api_users_check_username(cfg.admin_username)) {
		log_msg(LOG_ERROR, "users", NULL, "admin_username '%s': %s", cfg.admin_username,
		        api_users_check_username(cfg.admin_username));
		goto out;
	}
	pw = cfg.admin_password;
	if (!pw || !*pw) {
		if (auth_password_generate(generated, sizeof(generated)) < 0)
			goto out;
		pw = generated;
	}
	if (hash_in_child(pw, phc, sizeof(phc)) < 0)
		goto out;
	p[0] = cfg.admin_username;
	p[1] = phc;
	res = PQexecParams(conn,
	                   "INSERT INTO users (username, display_name, role, password_hash)"
	                   " VALUES ($1, 'Administrator', 'admin', $2)"
	                   " ON CONFLICT (username) DO UPDATE SET role = 'admin', disabled = false,"
	                   " password_hash = EXCLUDED.password_hash",
	                   2, NULL, p, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_COMMAND_OK) {
		log_msg(LOG_ERROR, "users", NULL, "cannot seed the admin: %s",
		        PQerrorMessage(conn));
		goto out;
	}
	if (*generated) {
		snprintf(path, sizeof(path), "%s/admin-password", cfg.state_dir);
		if (write_secret_file(path, generated) < 0)
			log_msg(LOG_WARN, "users", NULL, "could not write %s", path);
		/* shown once, on the terminal, never in the log stream */
		fprintf(stdout,
		        "\n  Admin account created: user '%s', password '%s'\n"
		        "  (also saved in %s, mode 0600)\n\n",
		        cfg.admin_username, generated, path);
		fflush(stdout);
	}
	log_msg(LOG_INFO, "users", NULL, "seeded admin account '%s'", cfg.admin_username);
	rc = 0;
out:
	PQclear(res);
	PQfinish(conn);
	return rc;
}

const struct route api_users_routes[] = {
	{ HTTP_GET, "/api/v1/users", list, ROLE_ADMIN, 0, 0, NULL },
	{ HTTP_POST, "/api/v1/users", create, ROLE_ADMIN, 0, 16384, NULL },
	{ HTTP_POST, "/api/v1/users/import", import, ROLE_ADMIN, ROUTE_RAW_BODY, 1 << 20, NULL },
	{ HTTP_GET, "/api/v1/users/{id}", get, ROLE_ADMIN, 0, 0, NULL },
	{ HTTP_PATCH, "/api/v1/users/{id}", update, ROLE_ADMIN, 0, 16384, NULL },
	{ HTTP_DELETE, "/api/v1/users/{id}", del, ROLE_ADMIN, 0, 0, NULL },
	{ HTTP_POST, "/api/v1/users/{id}/password", reset_password, ROLE_ADMIN, 0, 8192, NULL },
	{ 0, NULL, NULL, 0, 0, 0, NULL },
};
