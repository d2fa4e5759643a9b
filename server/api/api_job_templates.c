/* api_job_templates.c — /job-templates: the curated ways to submit a job (a
 * command pattern, a typed hyperparameter schema, default resources).
 * Everyone signed in reads the enabled ones (admins all); admins create,
 * replace and remove them.  What a template says is checked by
 * work/template.c before it is stored, so a stored template always expands;
 * the expansion for a submit is in job_body.c (job_body_expand()).
 */
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <http_parser.h>

#include "api/api.h"
#include "auth/auth.h"
#include "db/db.h"
#include "work/template.h"

static int is_admin(const struct http_req *r)
{
	return r->auth->role == ROLE_ADMIN;
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
	items = json_loads(db_val(res, 0, 0), 0, NULL);
	if (!json_is_array(items)) {
		json_decref(items);
		items = json_array();
	}
	http_reply_json(r, 200, json_pack("{s:o}", "items", items));
}

static void list(struct http_req *r)
{
	const char *p[1] = { is_admin(r) ? "t" : "f" };

	db_query("SELECT COALESCE(json_agg(x.doc::json ORDER BY x.title, x.id), '[]')::text"
	         " FROM (SELECT t.id, t.title, " API_JOB_TEMPLATE_JSON
	         " AS doc" API_JOB_TEMPLATE_FROM " WHERE t.enabled OR $1::bool) x",
	         1, p, list_done, r);
}

static void one_reply(PGresult *res, enum rc rc, struct http_req *r, int status)
{
	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "");
		return;
	}
	if (PQntuples(res) != 1) {
		http_reply_error(r, RC_NOTFOUND, "GET /api/v1/job-templates lists them",
		                 "no such job template");
		return;
	}
	http_reply_json(r, status, json_loads(db_val(res, 0, 0), 0, NULL));
}

static void one_200(PGresult *res, enum rc rc, void *arg)
{
	one_reply(res, rc, arg, 200);
}

static void one_201(PGresult *res, enum rc rc, void *arg)
{
	one_reply(res, rc, arg, 201);
}

static void reply_template(struct http_req *r, const char *id, db_cb cb)
{
	const char *p[2] = { id, is_admin(r) ? "t" : "f" };

	db_query("SELECT " API_JOB_TEMPLATE_JSON API_JOB_TEMPLATE_FROM
	         " WHERE t.id = $1 AND (t.enabled OR $2::bool)",
	         2, p, cb, r);
}

static void get(struct http_req *r)
{
	long long id;
	char ids[24];

	if (api_id(r, "id", &id) < 0)
		return;
	snprintf(ids, sizeof(ids), "%lld", id);
	reply_template(r, ids, one_200);
}

/* ---- create, replace, remove ---- */

static const struct jfield template_spec[] = {
	{ "name", J_STRING, 1, 63 },          { "title", J_STRING, 1, 120 },
	{ "description", J_STRING, 0, 2000 }, { "kind", J_STRING, 0, 16 },
	{ "image_id", J_INT, 0, 0 },          { "command", J_ARRAY, 1, 256 },
	{ "inputs", J_ARRAY, 0, 0 },          { "hyperparameters", J_ARRAY, 0, 0 },
	{ "pool", J_STRING, 0, 63 },          { "slices", J_INT, 0, 0 },
	{ "cpu_millis", J_INT, 0, 0 },        { "mem_mib", J_INT, 0, 0 },
	{ "shm_mib", J_INT, 0, 0 },           { "max_runtime_s", J_INT, 0, 0 },
	{ "members", J_INT, 0, 0 },           { "allow_overrides", J_BOOL, 0, 0 },
	{ "enabled", J_BOOL, 0, 0 },          { NULL, 0, 0, 0 },
};

static int slug_ok(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (n == 0 || n > 63 || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= '0' && s[0] <= '9')))
		return 0;
	return strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789._-") == n;
}

static void bad_field(struct http_req *r, const char *field, const char *reason, const char *hint,
                      const char *msg)
{
	/* details: one entry per field at fault, as other refusals list theirs */
	http_reply_error_details(r, RC_INVALID,
	                         json_pack("[{s:s, s:s}]", "field", field, "reason", reason), hint,
	                         msg);
}

/* A number field within [lo, hi] (absent: fine). */
static int range_ok(struct http_req *r, json_t *body, const char *name, long long lo, long long hi)
{
	json_t *v = json_object_get(body, name);
	char msg[160];

	if (!json_is_integer(v) || (json_integer_value(v) >= lo && json_integer_value(v) <= hi))
		return 1;
	snprintf(msg, sizeof(msg), "%s must be %lld to %lld", name, lo, hi);
	bad_field(r, name, "range", NULL, msg);
	return 0;
}

/* Checks a template body; replies 400 naming the field and returns -1. */
static int template_valid(struct http_req *r, json_t *body)
{
	const char *kind = json_string_value(json_object_get(body, "kind"));
	const char *title = json_string_value(json_object_get(body, "title"));
	json_t *empty = json_array();
	struct template_def def = { json_object_get(body, "command"),
		                    json_object_get(body, "hyperparameters"),
		                    json_object_get(body, "inputs") };
	struct template_error err;
	int rc;

	if (!slug_ok(json_string_value(json_object_get(body, "name")))) {
		json_decref(empty);
		bad_field(r, "name", "name", "e.g. \"pytorch-resnet\"",
		          "name must be 1 to 63 lower-case letters, digits, '.', '_' or '-', "
		          "starting with a letter or digit");
		return -1;
	}
	if (!title || !*title) {
		json_decref(empty);
		bad_field(r, "title", "required", "e.g. \"PyTorch ResNet\"",
		          "title must not be empty");
		return -1;
	}
	if (kind && strcmp(kind, "pytorch") && strcmp(kind, "pytorch-ddp") &&
	    strcmp(kind, "script")) {
		json_decref(empty);
		bad_field(r, "kind", "choice", NULL, "kind must be pytorch, pytorch-ddp or script");
		return -1;
	}
	if (json_is_string(json_object_get(body, "pool")) &&
	    !slug_ok(json_string_value(json_object_get(body, "pool")))) {
		json_decref(empty);
		bad_field(r, "pool", "name", "GET /api/v1/pools lists them",
		          "pool must be a pool name");
		return -1;
	}
	if (json_is_integer(json_object_get(body, "image_id")) &&
	    json_integer_value(json_object_get(body, "image_id")) < 1) {
		json_decref(empty);
		bad_field(r, "image_id", "range", "leave it out to let users pick",
		          "image_id must be a catalog image's id");
		return -1;
	}
	if (!range_ok(r, body, "slices", 0, 64) || !range_ok(r, body, "cpu_millis", 10, 1024000) ||
	    !range_ok(r, body, "mem_mib", 16, 1LL << 24) ||
	    !range_ok(r, body, "shm_mib", 1, 1LL << 20) ||
	    !range_ok(r, body, "max_runtime_s", 1, 30 * 86400) ||
	    !range_ok(r, body, "members", 1, 16)) {
		json_decref(empty);
		return -1;
	}
	if (!def.schema || json_is_null(def.schema))
		def.schema = empty;
	if (json_is_null(def.inputs))
		def.inputs = NULL;
	rc = template_check(&def, &err);
	json_decref(empty);
	if (rc < 0) {
		bad_field(r, err.field, err.reason, NULL, err.msg);
		return -1;
	}
	return 0;
}

static void changed(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;
	int created = r->method == HTTP_POST;

	if (rc == RC_CONFLICT) {
		http_reply_error_details(
		        r, RC_CONFLICT,
		        json_pack("[{s:s, s:s}]", "field", "name", "reason", "taken"),
		        "pick another name", "a job template with this name exists");
		return;
	}
	if (rc == RC_INVALID) { /* the image's foreign key */
		bad_field(r, "image_id", "unknown", "GET /api/v1/images lists them",
		          "no such image");
		return;
	}
	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "could not save the job template");
		return;
	}
	if (PQntuples(res) != 1) {
		http_reply_error(r, RC_NOTFOUND, "GET /api/v1/job-templates lists them",
		                 "no such job template");
		return;
	}
	auth_audit(r, r->auth, created ? "job_template.create" : "job_template.update",
	           db_val(res, 0, 1), NULL);
	reply_template(r, db_val(res, 0, 0), created ? one_201 : one_200);
}

/* the array field f of the body as sent, [] when absent or null */
#define ARR(f)                                                                          \
	"(CASE WHEN jsonb_typeof($7::jsonb->'" f "') = 'array' THEN $7::jsonb->'" f "'" \
	" ELSE '[]' END)"

static void save(struct http_req *r, long long id)
{
	json_t *body = api_json_body(r, template_spec), *v;
	struct db_args a = DB_ARGS_INIT;
	char *text = NULL;

	if (!body)
		return;
	if (template_valid(r, body) < 0) {
		json_decref(body);
		return;
	}
	/* the command, inputs and schema come from the body as sent ($7):
	 * numbers stay exactly as written (0.01, not 0.010000000000000000) */
	text = strndup((const char *)evbuffer_pullup(r->body, -1), evbuffer_get_length(r->body));
	if (!text) {
		json_decref(body);
		http_reply_error(r, RC_NOMEM, NULL, "out of memory");
		return;
	}
	db_arg_ll_opt(&a, id, id > 0);                                           /* $1 */
	db_arg_str(&a, json_string_value(json_object_get(body, "name")));        /* $2 */
	db_arg_str(&a, json_string_value(json_object_get(body, "title")));       /* $3 */
	db_arg_str(&a, json_string_value(json_object_get(body, "description"))); /* $4 */
	db_arg_str(&a, json_string_value(json_object_get(body, "kind")));        /* $5 */
	v = json_object_get(body, "image_id");
	db_arg_ll_opt(&a, json_integer_value(v), json_is_integer(v));     /* $6 */
	db_arg_str(&a, text);                                             /* $7 */
	db_arg_str(&a, json_string_value(json_object_get(body, "pool"))); /* $8 */
	{
		static const char *const nums[] = { "slices",  "cpu_millis",    "mem_mib",
			                            "shm_mib", "max_runtime_s", "members",
			                            NULL };
		for (int i = 0; nums[i]; i++) { /* $9 .. $14 */
			v = json_object_get(body, nums[i]);
			db_arg_ll_opt(&a, json_integer_value(v), json_is_integer(v));
		}
	}
	v = json_object_get(body, "allow_overrides");
	db_arg_str(&a, json_is_boolean(v) ? (json_is_true(v) ? "t" : "f") : NULL); /* $15 */
	v = json_object_get(body, "enabled");
	db_arg_str(&a, json_is_boolean(v) ? (json_is_true(v) ? "t" : "f") : NULL); /* $16 */
	/* PUT replaces the whole template: what the body leaves out is the
	 * column's default again */
	if (id > 0)
		db_query_args("UPDATE job_templates SET name = $2, title = $3,"
		              " description = COALESCE($4, ''), kind = COALESCE($5, 'script'),"
		              " image_id = $6, command = ARRAY(SELECT "
		              "jsonb_array_elements_text($7::jsonb->'command')),"
		              " inputs = " ARR("inputs") ", hyperparameters = " ARR(
		                      "hyperparameters") ","
		                                         " pool = $8, slices = COALESCE($9::int, "
		                                         "1), cpu_millis = COALESCE($10, 1000),"
		                                         " mem_mib = COALESCE($11, 1024), shm_mib "
		                                         "= COALESCE($12, 64),"
		                                         " max_runtime_s = COALESCE($13::int, "
		                                         "86400), members = COALESCE($14::int, 1),"
		                                         " allow_overrides = COALESCE($15::bool, "
		                                         "true), enabled = COALESCE($16::bool, "
		                                         "true),"
		                                         " updated_at = now() WHERE id = $1 "
		                                         "RETURNING id, name",
		              &a, changed, r);
	else
		db_query_args(
		        "INSERT INTO job_templates (name, title, description, kind, image_id, "
		        "command,"
		        " inputs, hyperparameters, pool, slices, cpu_millis, mem_mib, shm_mib,"
		        " max_runtime_s, members, allow_overrides, enabled)"
		        " SELECT $2, $3, COALESCE($4, ''), COALESCE($5, 'script'), $6,"
		        " ARRAY(SELECT jsonb_array_elements_text($7::jsonb->'command')),"
		        " " ARR("inputs") ", " ARR(
		                "hyperparameters") ", $8,"
		                                   " COALESCE($9::int, 1), COALESCE($10, 1000), "
		                                   "COALESCE($11, 1024),"
		                                   " COALESCE($12, 64), COALESCE($13::int, 86400), "
		                                   "COALESCE($14::int, 1),"
		                                   " COALESCE($15::bool, true), "
		                                   "COALESCE($16::bool, true)"
		                                   " WHERE $1::bigint IS NULL RETURNING id, name",
		        &a, changed, r);
	free(text);
	json_decref(body);
}

static void create(struct http_req *r)
{
	save(r, 0);
}

static void replace(struct http_req *r)
{
	long long id;

	if (api_id(r, "id", &id) < 0)
		return;
	save(r, id);
}

static void removed(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "could not remove the job template");
		return;
	}
	if (PQntuples(res) != 1) {
		http_reply_error(r, RC_NOTFOUND, "GET /api/v1/job-templates lists them",
		                 "no such job template");
		return;
	}
	auth_audit(r, r->auth, "job_template.delete", db_val(res, 0, 0), NULL);
	http_reply(r, 204, NULL, NULL, 0);
}

static void remove_template(struct http_req *r)
{
	long long id;
	struct db_args a = DB_ARGS_INIT;

	if (api_id(r, "id", &id) < 0)
		return;
	db_arg_ll(&a, id);
	/* jobs made from it keep their command; their template_id becomes NULL */
	db_query_args("DELETE FROM job_templates WHERE id = $1 RETURNING name", &a, removed, r);
}

const struct route api_job_templates_routes[] = {
	{ HTTP_GET, "/api/v1/job-templates", list, ROLES_ALL, 0, 0, NULL },
	{ HTTP_POST, "/api/v1/job-templates", create, ROLE_ADMIN, 0, 262144, NULL },
	{ HTTP_GET, "/api/v1/job-templates/{id}", get, ROLES_ALL, 0, 0, NULL },
	{ HTTP_PUT, "/api/v1/job-templates/{id}", replace, ROLE_ADMIN, 0, 262144, NULL },
	{ HTTP_DELETE, "/api/v1/job-templates/{id}", remove_template, ROLE_ADMIN, 0, 0, NULL },
	{ 0, NULL, NULL, 0, 0, 0, NULL },
};
