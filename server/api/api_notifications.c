/* api_notifications.c — /notifications: a user's own notifications (list,
 * unread count, mark read, delete) and their e-mail preferences (the
 * address, which kinds are mailed, the mails' language).
 *
 * Owns the routes and the preference checks.  The notifications are made by
 * the database (0038's triggers) and mailed by work/mailer.c; everything
 * here is the caller's own: another user's notification is a 404.
 */
#include <stdlib.h>
#include <string.h>

#include <http_parser.h>

#include "api/api.h"
#include "auth/auth.h"
#include "base/config.h"
#include "db/db.h"
#include "work/mailer.h"

static const char *const kinds[] = {
	"job.succeeded", "job.failed",      "instance.idle_warning", "instance.stopped",
	"quota.storage", "quota.gpu_hours", "class.notice",
};
#define NKINDS (sizeof(kinds) / sizeof(kinds[0]))

/* One notification as a JSON document (text), from notifications n. */
#define NOTIFICATION_JSON                                                                      \
	"json_build_object('id', n.id, 'kind', n.kind, 'params', n.params, 'link', n.link,"    \
	" 'created_at', " DB_TS(                                                               \
	        "n.created_at") ", 'read', n.read_at IS NOT NULL,"                             \
	                        " 'read_at', " DB_TS(                                          \
	                                "n.read_at") ", 'mail', json_build_object('state', "   \
	                                             "n.mail_state,"                           \
	                                             " 'attempts', n.mail_attempts, 'error', " \
	                                             "n.mail_error, 'sent_at', " DB_TS(        \
	                                                     "n.mailed_at") "))::text"

static json_t *notification_row(const PGresult *res, int i)
{
	return json_loads(db_val(res, i, 1), 0, NULL);
}

static const struct api_resource notification_resource = { "notification", notification_row, 1 };

/* GET /notifications?unread=1&limit=&cursor= — newest first. */
static void list(struct http_req *r)
{
	int limit;
	long long cursor;
	char unread[8] = "";
	struct db_args a = DB_ARGS_INIT;

	if (api_page(r, 50, 200, &limit, &cursor) < 0 ||
	    api_query(r, "unread", unread, sizeof(unread)) == -2)
		return;
	if (*unread && strcmp(unread, "1") && strcmp(unread, "0") && strcmp(unread, "true") &&
	    strcmp(unread, "false")) {
		http_reply_error(r, RC_INVALID, "use unread=1 or unread=0", "bad unread '%s'",
		                 unread);
		return;
	}
	db_arg_ll(&a, r->auth->user_id);
	db_arg_ll(&a, cursor);
	db_arg_ll(&a, limit + 1);
	db_arg_str(&a, strcmp(unread, "1") == 0 || strcmp(unread, "true") == 0 ? "t" : "f");
	api_list_page(r, &notification_resource, limit,
	              "SELECT n.id, " NOTIFICATION_JSON " FROM notifications n"
	              " WHERE n.user_id = $1 AND ($2::bigint = 0 OR n.id < $2)"
	              " AND (NOT $4::boolean OR n.read_at IS NULL)"
	              " ORDER BY n.id DESC LIMIT $3",
	              &a);
}

static void count_done(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "cannot count the notifications");
		return;
	}
	http_reply_json(
	        r, 200,
	        json_pack("{s:I}", "unread", (json_int_t)strtoll(db_val(res, 0, 0), NULL, 10)));
}

/* GET /notifications/unread_count — what the bell shows. */
static void unread_count(struct http_req *r)
{
	struct db_args a = DB_ARGS_INIT;

	db_arg_ll(&a, r->auth->user_id);
	db_query_args("SELECT count(*) FROM notifications WHERE user_id = $1 AND read_at IS NULL",
	              &a, count_done, r);
}

static void changed_done(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "cannot change the notification");
		return;
	}
	if (PQntuples(res) != 1) {
		http_reply_error(r, RC_NOTFOUND, NULL, "no such notification '%s'",
		                 http_param(r, "id"));
		return;
	}
	http_reply(r, 204, NULL, NULL, 0);
}

/* POST /notifications/{id}/read */
static void mark_read(struct http_req *r)
{
	long long id;
	struct db_args a = DB_ARGS_INIT;

	if (api_id(r, "id", &id) < 0)
		return;
	db_arg_ll(&a, id);
	db_arg_ll(&a, r->auth->user_id);
	db_query_args("UPDATE notifications SET read_at = COALESCE(read_at, now())"
	              " WHERE id = $1 AND user_id = $2 RETURNING id",
	              &a, changed_done, r);
}

/* POST /notifications/{id}/unread */
static void mark_unread(struct http_req *r)
{
	long long id;
	struct db_args a = DB_ARGS_INIT;

	if (api_id(r, "id", &id) < 0)
		return;
	db_arg_ll(&a, id);
	db_arg_ll(&a, r->auth->user_id);
	db_query_args("UPDATE notifications SET read_at = NULL"
	              " WHERE id = $1 AND user_id = $2 RETURNING id",
	              &a, changed_done, r);
}

static void all_read_done(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "cannot mark the notifications read");
		return;
	}
	http_reply_json(r, 200, json_pack("{s:I}", "marked", (json_int_t)PQntuples(res)));
}

/* POST /notifications/read_all */
static void mark_all_read(struct http_req *r)
{
	struct db_args a = DB_ARGS_INIT;

	db_arg_ll(&a, r->auth->user_id);
	db_query_args("UPDATE notifications SET read_at = now()"
	              " WHERE user_id = $1 AND read_at IS NULL RETURNING id",
	              &a, all_read_done, r);
}

/* DELETE /notifications/{id} */
static void delete (struct http_req *r)
{
	long long id;
	struct db_args a = DB_ARGS_INIT;

	if (api_id(r, "id", &id) < 0)
		return;
	db_arg_ll(&a, id);
	db_arg_ll(&a, r->auth->user_id);
	db_query_args("DELETE FROM notifications WHERE id = $1 AND user_id = $2 RETURNING id", &a,
	              changed_done, r);
}

/* ---- preferences ---- */

static void prefs_done(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;
	json_t *off, *email_kinds;

	if (rc != RC_OK || PQntuples(res) != 1) {
		api_reply_db_error(r, rc == RC_OK ? RC_NOTFOUND : rc,
		                   "cannot read the notification preferences");
		return;
	}
	off = json_loads(db_val(res, 0, 1), 0, NULL);
	email_kinds = json_object();
	for (size_t k = 0; k < NKINDS; k++) {
		int on = 1;
		size_t i;
		json_t *e;
		json_array_foreach(off, i, e) if (json_is_string(e) &&
		                                  strcmp(json_string_value(e), kinds[k]) == 0) on =
		        0;
		json_object_set_new(email_kinds, kinds[k], json_boolean(on));
	}
	json_decref(off);
	http_reply_json(r, 200,
	                json_pack("{s:s, s:o, s:s, s:b}", "email", db_val(res, 0, 0), "email_kinds",
	                          email_kinds, "language", db_val(res, 0, 2), "mail_enabled",
	                          cfg.smtp_url && *cfg.smtp_url));
}

#define PREFS_SELECT                                                                 \
	"SELECT u.email, COALESCE(array_to_json(p.email_off), '[]')::text,"          \
	" COALESCE(p.language, 'en') FROM users u LEFT JOIN notification_prefs p ON" \
	" p.user_id = u.id WHERE u.id = $1"

/* GET /notifications/preferences */
static void prefs_get(struct http_req *r)
{
	struct db_args a = DB_ARGS_INIT;

	db_arg_ll(&a, r->auth->user_id);
	db_query_args(PREFS_SELECT, &a, prefs_done, r);
}

static const struct jfield prefs_spec[] = {
	{ "email", J_STRING, 0, 254 },
	{ "email_kinds", J_OBJECT, 0, 0 },
	{ "language", J_STRING, 0, 16 },
	{ NULL, 0, 0, 0 },
};

/* Appends s to a PostgreSQL array literal of plain words. */
static void arr_add(char *out, size_t outlen, const char *s)
{
	size_t n = strlen(out);

	snprintf(out + n, outlen - n, "%s%s", n > 1 ? "," : "", s);
}

static void arr_close(char *out, size_t outlen)
{
	size_t n = strlen(out);

	snprintf(out + n, outlen - n, "}");
}

/* PUT /notifications/preferences {email?, email_kinds?: {kind: bool}, language?} */
static void prefs_put(struct http_req *r)
{
	json_t *body, *kinds_in, *v;
	const char *email, *lang, *why, *key;
	char off[256] = "{", on[256] = "{";
	struct db_args a = DB_ARGS_INIT;

	body = api_json_body(r, prefs_spec);
	if (!body)
		return;
	email = json_string_value(json_object_get(body, "email"));
	lang = json_string_value(json_object_get(body, "language"));
	kinds_in = json_object_get(body, "email_kinds");
	if (email && (why = api_users_check_email(email))) {
		http_reply_error(r, RC_INVALID, "give an address like name@example.org, or \"\"",
		                 "%s", why);
		goto out;
	}
	if (lang && strcmp(lang, "en") && strcmp(lang, "zh-CN")) {
		http_reply_error(r, RC_INVALID, "use 'en' or 'zh-CN'", "unknown language '%.16s'",
		                 lang);
		goto out;
	}
	json_object_foreach(kinds_in, key, v)
	{
		size_t k;
		for (k = 0; k < NKINDS && strcmp(kinds[k], key); k++)
			;
		if (k == NKINDS) {
			http_reply_error(r, RC_INVALID,
			                 "kinds: job.succeeded, job.failed, "
			                 "instance.idle_warning, instance.stopped, quota.storage, "
			                 "quota.gpu_hours, class.notice",
			                 "unknown notification kind '%.40s'", key);
			goto out;
		}
		if (!json_is_boolean(v)) {
			http_reply_error(r, RC_INVALID, NULL,
			                 "email_kinds.%s must be true or false", kinds[k]);
			goto out;
		}
		arr_add(json_is_true(v) ? on : off, sizeof(on), kinds[k]);
	}
	arr_close(off, sizeof(off));
	arr_close(on, sizeof(on));
	db_arg_ll(&a, r->auth->user_id);
	db_arg_str(&a, email);
	db_arg_str(&a, off);
	db_arg_str(&a, on);
	db_arg_str(&a, lang);
	if (email)
		auth_audit(r, r->auth, "user.email", r->auth->username, NULL);
	db_query_args(
	        "WITH u AS (UPDATE users SET email = COALESCE($2, email),"
	        "  updated_at = CASE WHEN $2 IS NULL THEN updated_at ELSE now() END"
	        "  WHERE id = $1 RETURNING id, email),"
	        " p AS (INSERT INTO notification_prefs (user_id, email_off, language)"
	        "  SELECT $1, $3::text[], COALESCE($5, 'en') FROM u"
	        "  ON CONFLICT (user_id) DO UPDATE SET"
	        "  email_off = ARRAY(SELECT DISTINCT k FROM unnest(notification_prefs.email_off"
	        "   || $3::text[]) k WHERE k <> ALL ($4::text[]) ORDER BY k),"
	        "  language = COALESCE($5, notification_prefs.language), updated_at = now()"
	        "  RETURNING email_off, language)"
	        " SELECT u.email, array_to_json(p.email_off)::text, p.language FROM p, u",
	        &a, prefs_done, r);
out:
	json_decref(body);
}

void api_notifications_init(void)
{
	mailer_init();
}

const struct route api_notifications_routes[] = {
	{ HTTP_GET, "/api/v1/notifications", list, ROLES_ALL, 0, 0, NULL },
	{ HTTP_GET, "/api/v1/notifications/unread_count", unread_count, ROLES_ALL, 0, 0, NULL },
	{ HTTP_POST, "/api/v1/notifications/read_all", mark_all_read, ROLES_ALL, 0, 1024, NULL },
	{ HTTP_GET, "/api/v1/notifications/preferences", prefs_get, ROLES_ALL, 0, 0, NULL },
	{ HTTP_PUT, "/api/v1/notifications/preferences", prefs_put, ROLES_ALL, 0, 8192, NULL },
	{ HTTP_POST, "/api/v1/notifications/{id}/read", mark_read, ROLES_ALL, 0, 1024, NULL },
	{ HTTP_POST, "/api/v1/notifications/{id}/unread", mark_unread, ROLES_ALL, 0, 1024, NULL },
	{ HTTP_DELETE, "/api/v1/notifications/{id}", delete, ROLES_ALL, 0, 0, NULL },
	{ 0, NULL, NULL, 0, 0, 0, NULL },
};
