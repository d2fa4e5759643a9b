/* api_settings.c — /settings: site settings an admin changes at run time
 * (table site_settings, 0017), the TensorBoard image and the most classes a teacher may create.
 *
 * A setting has the admin's value (PUT; DELETE removes it) and the value of
 * the configuration, which the replica that started last wrote
 * (api_settings_seed); the admin's wins, and gc_setting() in SQL reads the
 * one in force, so every replica sees a change at once.  Does not own what
 * a setting does: /tensorboards reads the image, /me says whether
 * TensorBoard is set up.
 */
#include <stdlib.h>
#include <string.h>

#include <http_parser.h>

#include "api/api.h"
#include "auth/auth.h"
#include "base/config.h"
#include "base/log.h"
#include "db/db.h"

/* One setting as JSON: the value in force, where it comes from, both
 * values, and (the image) whether the catalog has it. */
#define SETTING_JSON                                                                             \
	"json_build_object('name', s.name, 'value', COALESCE(s.value, s.config_value, ''),"      \
	" 'source', CASE WHEN s.value IS NOT NULL THEN 'admin'"                                  \
	"  WHEN COALESCE(s.config_value, '') <> '' THEN 'config' ELSE 'none' END,"               \
	" 'admin_value', s.value, 'config_value', COALESCE(s.config_value, ''),"                 \
	" 'in_catalog', EXISTS (SELECT 1 FROM images i WHERE i.owner_id IS NULL"                 \
	"  AND i.reference = COALESCE(s.value, s.config_value, '')),"                            \
	" 'updated_at', " DB_TS("s.updated_at") ", 'updated_by', (SELECT uu.username FROM users" \
	                                        "  uu WHERE uu.id = s.updated_by))::text"

static void list_done(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;
	json_t *out;

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "");
		return;
	}
	out = json_object();
	for (int i = 0; i < PQntuples(res); i++)
		json_object_set_new(out, db_val(res, i, 0), json_loads(db_val(res, i, 1), 0, NULL));
	http_reply_json(r, 200, out);
}

static void list(struct http_req *r)
{
	db_query("SELECT s.name, " SETTING_JSON " FROM site_settings s ORDER BY s.name", 0, NULL,
	         list_done, r);
}

/* The setting named by the route, or NULL after replying 404. */
static const char *setting_name(struct http_req *r)
{
	const char *name = http_param(r, "name");

	if (!name || (strcmp(name, "tensorboard_image") != 0 &&
	              strcmp(name, "max_classes_per_teacher") != 0)) {
		http_reply_error(r, RC_NOTFOUND,
		                 "settings: tensorboard_image, max_classes_per_teacher",
		                 "no such setting '%s'", name ? name : "");
		return NULL;
	}
	return name;
}

static void changed(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "could not change the setting");
		return;
	}
	if (PQntuples(res) != 1) {
		api_reply_db_error(r, RC_DB, "could not change the setting");
		return;
	}
	if (!db_val(res, 0, 1)) {
		/* the image check found nothing: the value named no catalog image */
		http_reply_error(r, RC_INVALID, "add it under Administration → Images first",
		                 "image '%s' is not in the image catalog", db_val(res, 0, 0));
		return;
	}
	auth_audit(r, r->auth, "setting.set", http_param(r, "name"),
	           json_loads(db_val(res, 0, 1), 0, NULL));
	http_reply_json(r, 200, json_loads(db_val(res, 0, 1), 0, NULL));
}

static const struct jfield put_spec[] = {
	{ "value", J_STRING, 1, 512 },
	{ NULL, 0, 0, 0 },
};

/* {"value": "<catalog image reference>"} sets it; "" turns TensorBoard off
 * whatever the configuration says. */
static void put(struct http_req *r)
{
	const char *name = setting_name(r), *value;
	json_t *body;
	struct db_args a = DB_ARGS_INIT;

	if (!name || !(body = api_json_body(r, put_spec)))
		return;
	value = json_string_value(json_object_get(body, "value"));
	if (strcmp(name, "max_classes_per_teacher") == 0) {
		/* a count, or "" for no cap (classes: gc_class_create) */
		size_t n = strspn(value, "0123456789");
		if (value[n] || n > 6) {
			json_decref(body);
			http_reply_error(r, RC_INVALID, "e.g. \"5\", or \"\" for no cap",
			                 "value must be a whole number of classes");
			return;
		}
	}
	for (const char *p = value; *p; p++)
		if ((unsigned char)*p < 0x21 || *p == 0x7f) {
			json_decref(body);
			http_reply_error(r, RC_INVALID, "e.g. registry.example/tensorboard:2.16",
			                 "value must be an image reference (no spaces or control "
			                 "characters), or \"\" for none");
			return;
		}
	db_arg_str(&a, name);
	db_arg_str(&a, value);
	db_arg_ll(&a, r->auth->user_id);
	/* one row back either way: the value, and the setting when it was
	 * changed (NULL: the image is not in the catalog) */
	db_query_args("WITH ok AS (SELECT 1 WHERE $2 = '' OR $1 <> 'tensorboard_image'"
	              "  OR EXISTS (SELECT 1 FROM images"
	              "  WHERE owner_id IS NULL AND reference = $2)),"
	              " s AS (UPDATE site_settings SET value = $2, updated_at = now(),"
	              "  updated_by = $3 WHERE name = $1 AND EXISTS (SELECT 1 FROM ok)"
	              "  RETURNING *)"
	              " SELECT $2::text, (SELECT " SETTING_JSON " FROM s)",
	              &a, changed, r);
	json_decref(body);
}

static void removed(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;

	if (api_one_row(r, res, rc, "setting", "could not change the setting") < 0)
		return;
	auth_audit(r, r->auth, "setting.reset", http_param(r, "name"), NULL);
	http_reply_json(r, 200, json_loads(db_val(res, 0, 0), 0, NULL));
}

/* Drops the admin's value: the configuration's applies again. */
static void del(struct http_req *r)
{
	const char *name = setting_name(r);
	struct db_args a = DB_ARGS_INIT;

	if (!name)
		return;
	db_arg_str(&a, name);
	db_arg_ll(&a, r->auth->user_id);
	db_query_args("WITH s AS (UPDATE site_settings SET value = NULL, updated_at = now(),"
	              " updated_by = $2 WHERE name = $1 RETURNING *)"
	              " SELECT " SETTING_JSON " FROM s",
	              &a, removed, r);
}

int api_settings_seed(const char *db_url)
{
	PGconn *conn = PQconnectdb(db_url);
	PGresult *res = NULL;
	const char *p[1] = { cfg.tensorboard_image ? cfg.tensorboard_image : "" };
	int rc = -1;

	if (PQstatus(conn) != CONNECTION_OK) {
		log_msg(LOG_ERROR, "settings", NULL, "cannot connect to record the settings: %s",
		        PQerrorMessage(conn));
		goto out;
	}
	res = PQexecParams(conn,
	                   "UPDATE site_settings SET config_value = NULLIF($1, '')"
	                   " WHERE name = 'tensorboard_image'",
	                   1, NULL, p, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_COMMAND_OK) {
		log_msg(LOG_ERROR, "settings", NULL, "cannot record the settings: %s",
		        PQerrorMessage(conn));
		goto out;
	}
	rc = 0;
out:
	PQclear(res);
	PQfinish(conn);
	return rc;
}

const struct route api_settings_routes[] = {
	{ HTTP_GET, "/api/v1/settings", list, ROLE_ADMIN, 0, 0, NULL },
	{ HTTP_PUT, "/api/v1/settings/{name}", put, ROLE_ADMIN, 0, 4096, NULL },
	{ HTTP_DELETE, "/api/v1/settings/{name}", del, ROLE_ADMIN, 0, 0, NULL },
	{ 0, NULL, NULL, 0, 0, 0, NULL },
};
