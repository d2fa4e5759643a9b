/* api.c — what every REST handler shares: strict JSON bodies (unknown
 * fields, wrong types and bad UTF-8 are 400s), database error replies,
 * the read side of a resource (list, page, one row, 404), pagination and
 * ids, and the registration of all route tables.  The SQL of a resource is
 * not here: each api_<resource>.c keeps its own.
 */
#include "api/api.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>

#include "auth/auth.h"
#include "db/db.h"
#include "engine/registry.h"
#include "base/log.h"

static const char *type_name(enum jtype t)
{
	switch (t) {
	case J_STRING: return "a string";
	case J_INT: return "an integer";
	case J_BOOL: return "a boolean";
	case J_STRINGS: return "an array of strings";
	case J_OBJECT: return "an object";
	case J_ARRAY: return "an array";
	case J_NUMBER: return "a number";
	}
	return "?";
}

static int type_ok(json_t *v, const struct jfield *f, char *err, size_t errlen)
{
	switch (f->type) {
	case J_STRING:
		if (!json_is_string(v))
			break;
		if (f->max_len && json_string_length(v) > f->max_len) {
			snprintf(err, errlen, "field '%s' is longer than %zu bytes", f->name,
			         f->max_len);
			return 0;
		}
		if (memchr(json_string_value(v), '\0', json_string_length(v))) {
			snprintf(err, errlen, "field '%s' contains a NUL character", f->name);
			return 0;
		}
		return 1;
	case J_INT:
		if (json_is_integer(v))
			return 1;
		break;
	case J_NUMBER:
		if (json_is_number(v))
			return 1;
		break;
	case J_BOOL:
		if (json_is_boolean(v))
			return 1;
		break;
	case J_STRINGS: {
		size_t i;
		json_t *e;
		if (!json_is_array(v))
			break;
		if (f->max_len && json_array_size(v) > f->max_len) {
			snprintf(err, errlen, "field '%s' has more than %zu elements", f->name,
			         f->max_len);
			return 0;
		}
		json_array_foreach(v, i, e)
		{
			if (!json_is_string(e) || json_string_length(e) > 256) {
				snprintf(err, errlen,
				         "field '%s' must be an array of short strings", f->name);
				return 0;
			}
		}
		return 1;
	}
	case J_OBJECT:
		if (json_is_object(v))
			return 1;
		break;
	case J_ARRAY:
		if (!json_is_array(v))
			break;
		if (f->max_len && json_array_size(v) > f->max_len) {
			snprintf(err, errlen, "field '%s' has more than %zu elements", f->name,
			         f->max_len);
			return 0;
		}
		return 1;
	}
	snprintf(err, errlen, "field '%s' must be %s", f->name, type_name(f->type));
	return 0;
}

json_t *api_json_decode(const char *buf, size_t len, const struct jfield *spec, char *err,
                        size_t errlen)
{
	json_error_t jerr = { 0 };
	json_t *obj, *v;
	const char *key;

	if (len == 0)
		obj = json_object();
	else
		obj = json_loadb(buf, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
	if (!obj) {
		snprintf(err, errlen, "malformed JSON at line %d column %d: %s", jerr.line,
		         jerr.column, jerr.text);
		return NULL;
	}
	if (!json_is_object(obj)) {
		snprintf(err, errlen, "the body must be a JSON object");
		json_decref(obj);
		return NULL;
	}
	json_object_foreach(obj, key, v)
	{
		const struct jfield *f;
		for (f = spec; f->name; f++)
			if (strcmp(f->name, key) == 0)
				break;
		if (!f->name) {
			snprintf(err, errlen, "unknown field '%.64s'", key);
			json_decref(obj);
			return NULL;
		}
		if (json_is_null(v) && !f->required)
			continue;
		if (!type_ok(v, f, err, errlen)) {
			json_decref(obj);
			return NULL;
		}
	}
	for (const struct jfield *f = spec; f->name; f++)
		if (f->required && !json_object_get(obj, f->name)) {
			snprintf(err, errlen, "missing field '%s'", f->name);
			json_decref(obj);
			return NULL;
		}
	return obj;
}

json_t *api_json_body(struct http_req *r, const struct jfield *spec)
{
	const char *ct = http_header(r, "Content-Type");
	size_t len = r->body ? evbuffer_get_length(r->body) : 0;
	char err[256];
	json_t *obj;

	if (len && (!ct || strncasecmp(ct, "application/json", 16) != 0 ||
	            (ct[16] != '\0' && ct[16] != ';' && ct[16] != ' '))) {
		http_reply_error(r, RC_UNSUPPORTED, "send 'Content-Type: application/json'",
		                 "request body must be JSON");
		return NULL;
	}
	obj = api_json_decode(len ? (const char *)evbuffer_pullup(r->body, -1) : "", len, spec, err,
	                      sizeof(err));
	if (!obj) {
		http_reply_error(r, RC_INVALID,
		                 "check the API documentation at /api/v1/openapi.yaml", "%s", err);
		return NULL;
	}
	return obj;
}

void api_reply_db_error(struct http_req *r, enum rc rc, const char *what)
{
	http_reply_db_error(r, rc, what);
}

void api_reply_registry_error(struct http_req *r, enum rc rc, const char *err)
{
	switch (rc) {
	case RC_NOTFOUND: http_reply_error(r, RC_NOTFOUND, NULL, "%s", err); return;
	case RC_FORBIDDEN:
		http_reply_error(r, RC_CONFLICT,
		                 "fix the registry's username and password (Administration > "
		                 "Registries)",
		                 "%s", err);
		return;
	case RC_INVALID: http_reply_error(r, RC_INVALID, NULL, "%s", err); return;
	case RC_NOMEM:
	case RC_DB: http_reply_error(r, rc, NULL, "%s", err); return;
	default:
		http_reply_error(r, RC_UNAVAILABLE,
		                 "check the registry's server, and that gpucloudd reaches it", "%s",
		                 err);
		return;
	}
}

static int tag_desc(const void *a, const void *b)
{
	return registry_tag_cmp(*(const char *const *)b, *(const char *const *)a);
}

json_t *api_tag_items(const char *prefix, json_t *tags, const char *after, json_t *catalog)
{
	size_t n = json_array_size(tags), k = 0, i, j;
	const char **v = calloc(n ? n : 1, sizeof(*v));
	json_t *items = json_array(), *c;
	char ref[600];

	if (!v || !items) {
		free(v);
		json_decref(items);
		return NULL;
	}
	for (i = 0; i < n; i++) {
		const char *t = json_string_value(json_array_get(tags, i));
		if (t && (!after || registry_tag_newer(after, t)))
			v[k++] = t;
	}
	qsort(v, k, sizeof(*v), tag_desc);
	for (i = 0; i < k; i++) {
		int in = 0;
		snprintf(ref, sizeof(ref), "%s:%s", prefix, v[i]);
		json_array_foreach(catalog, j, c) if (json_is_string(c) &&
		                                      strcmp(json_string_value(c), ref) == 0) in =
		        1;
		json_array_append_new(items, json_pack("{s:s, s:s, s:b}", "tag", v[i], "reference",
		                                       ref, "in_catalog", in));
	}
	free(v);
	return items;
}

void *api_state(struct http_req *r, size_t size, void (*free_fn)(void *))
{
	void *p = calloc(1, size);

	if (!p) {
		http_reply_error(r, RC_NOMEM, NULL, "out of memory");
		return NULL;
	}
	r->data = p;
	r->data_free = free_fn ? free_fn : free;
	return p;
}

long api_query(struct http_req *r, const char *name, char *out, size_t outlen)
{
	long n = http_query(r, name, out, outlen);

	if (n == -2)
		http_reply_error(r, RC_INVALID,
		                 "percent-encode the value as UTF-8 and keep it short",
		                 "malformed query parameter '%s'", name);
	return n;
}

int api_page(struct http_req *r, int def, int max, int *limit, long long *cursor)
{
	char buf[32];
	long long v;
	long n;

	*limit = def;
	*cursor = 0;
	switch (api_query(r, "limit", buf, sizeof(buf))) {
	case -2: return -1;
	case -1: break;
	default:
		if (http_parse_decimal(buf, &v) < 0 || v < 1 || v > max) {
			http_reply_error(r, RC_INVALID, NULL,
			                 "limit must be an integer from 1 to %d", max);
			return -1;
		}
		*limit = (int)v;
	}
	n = api_query(r, "cursor", buf, sizeof(buf));
	if (n == -2)
		return -1;
	if (n > 0) {
		if (http_parse_decimal(buf, &v) < 0) {
			http_reply_error(r, RC_INVALID, "pass back next_cursor unchanged",
			                 "malformed cursor");
			return -1;
		}
		*cursor = v;
	}
	return 0;
}

int api_id(struct http_req *r, const char *name, long long *id)
{
	return http_param_id(r, name, id);
}

/* ---- the read side of a resource ---- */

/* What a read's completion needs besides the request; freed there. */
struct read {
	struct http_req *r;
	const struct api_resource *rs;
	int status; /* one row: the reply's status */
	int limit;  /* a page: its size; 0 = every row */
};

static void one_read(PGresult *res, enum rc rc, void *arg)
{
	struct read *q = arg;
	const char *id = http_param(q->r, "id");

	if (rc == RC_OK && PQntuples(res) != 1 && q->rs->quote_id)
		http_reply_error(q->r, RC_NOTFOUND, NULL, "no such %s '%s'", q->rs->noun,
		                 id ? id : "");
	else if (api_one_row(q->r, res, rc, q->rs->noun, "") == 0)
		http_reply_json(q->r, q->status, q->rs->row(res, 0));
	free(q);
}

static void list_read(PGresult *res, enum rc rc, void *arg)
{
	struct read *q = arg;
	struct http_req *r = q->r;
	int n, shown;
	json_t *items, *out;

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "");
		free(q);
		return;
	}
	n = PQntuples(res);
	shown = q->limit && n > q->limit ? q->limit : n;
	items = json_array();
	for (int i = 0; i < shown; i++)
		json_array_append_new(items, q->rs->row(res, i));
	out = json_pack("{s:o}", "items", items);
	if (q->limit)
		json_object_set_new(out, "next_cursor",
		                    n > q->limit ? json_string(db_val(res, q->limit - 1, 0))
		                                 : json_null());
	http_reply_json(r, 200, out);
	free(q);
}

static void read_start(struct http_req *r, const struct api_resource *rs, int status, int limit,
                       const char *sql, const struct db_args *a, db_cb cb)
{
	struct read *q = malloc(sizeof(*q));

	if (!q) {
		http_reply_error(r, RC_NOMEM, NULL, "out of memory");
		return;
	}
	q->r = r;
	q->rs = rs;
	q->status = status;
	q->limit = limit;
	if (a)
		db_query_args(sql, a, cb, q);
	else
		db_query(sql, 0, NULL, cb, q);
}

void api_list(struct http_req *r, const struct api_resource *rs, const char *sql,
              const struct db_args *a)
{
	read_start(r, rs, 200, 0, sql, a, list_read);
}

void api_list_page(struct http_req *r, const struct api_resource *rs, int limit, const char *sql,
                   const struct db_args *a)
{
	assert(limit >= 1);
	read_start(r, rs, 200, limit, sql, a, list_read);
}

void api_one(struct http_req *r, const struct api_resource *rs, int status, const char *sql,
             const struct db_args *a)
{
	read_start(r, rs, status, 0, sql, a, one_read);
}

void api_get(struct http_req *r, const struct api_resource *rs, const char *sql)
{
	long long id;
	struct db_args a = DB_ARGS_INIT;

	if (api_id(r, "id", &id) < 0)
		return;
	db_arg_ll(&a, id);
	api_one(r, rs, 200, sql, &a);
}

int api_one_row(struct http_req *r, const PGresult *res, enum rc rc, const char *noun,
                const char *what)
{
	if (rc != RC_OK) {
		api_reply_db_error(r, rc, what);
		return -1;
	}
	if (PQntuples(res) != 1) {
		http_reply_error(r, RC_NOTFOUND, NULL, "no such %s", noun);
		return -1;
	}
	return 0;
}

json_t *api_user_row(const PGresult *res, int row, int col)
{
	const char *dn = db_val(res, row, col + USER_DISPLAY_NAME),
	           *em = db_val(res, row, col + USER_EMAIL),
	           *del = db_val(res, row, col + USER_DELETED_AT);

	return json_pack("{s:I, s:s, s:s, s:s, s:s, s:b, s:s, s:b, s:o}", "id",
	                 (json_int_t)strtoll(db_val(res, row, col + USER_ID), NULL, 10), "username",
	                 db_val(res, row, col + USER_USERNAME), "display_name", dn ? dn : "",
	                 "email", em ? em : "", "role", db_val(res, row, col + USER_ROLE),
	                 "disabled", strcmp(db_val(res, row, col + USER_DISABLED), "t") == 0,
	                 "created_at", db_val(res, row, col + USER_CREATED_AT),
	                 "must_change_password",
	                 strcmp(db_val(res, row, col + USER_MUST_CHANGE), "t") == 0, "deleted_at",
	                 del ? json_string(del) : json_null());
}

void api_area_resolve(const struct auth_info *auth, const char *name, int want_write, areas_cb cb,
                      void *arg)
{
	struct areas_caller who = { auth->user_id, auth->username, auth->role == ROLE_ADMIN };

	areas_resolve(&who, name, want_write, cb, arg);
}

void api_register_all(void)
{
	router_add(api_health_routes);
	api_auth_register();
	router_add(api_users_routes);
	router_add(api_tokens_routes);
	router_add(api_audit_routes);
	router_add(api_nodes_routes);
	router_add(api_pools_routes);
	router_add(api_allocations_routes);
	router_add(api_files_routes);
	router_add(api_uploads_routes);
	router_add(api_images_routes);
	router_add(api_registries_routes);
	router_add(api_routes_routes);
	router_add(api_terminal_routes);
	router_add(api_tensorboards_routes);
	router_add(api_instances_routes);
	router_add(api_settings_routes);
	router_add(api_jobs_routes);
	router_add(api_job_metrics_routes);
	router_add(api_sweeps_routes);
	router_add(api_job_templates_routes);
	router_add(api_classes_routes);
	router_add(api_class_sessions_routes);
	api_class_sessions_init();
	router_add(api_assignments_routes);
	api_assignments_init();
	router_add(api_class_ops_routes);
	router_add(api_usage_routes);
	router_add(api_notifications_routes);
	api_notifications_init();
}

/* ---- byte ranges (files and job logs) ---- */

/* (api.h) Single byte range "bytes=a-b", "bytes=a-", "bytes=-n".  Returns 1 with
 * [*from, *from+*len) set, 0 when absent or not usable (serve it all), -1
 * when unsatisfiable (416). */
int api_byte_range(const char *h, int64_t size, int64_t *from, int64_t *len)
{
	char *end;
	long long a, b;

	if (!h || strncasecmp(h, "bytes=", 6) != 0 || strchr(h, ','))
		return 0;
	h += 6;
	while (*h == ' ')
		h++;
	if (*h == '-') {
		errno = 0;
		b = strtoll(h + 1, &end, 10);
		if (errno || *end || end == h + 1 || b < 0)
			return 0;
		if (b == 0 || size == 0)
			return -1;
		if (b > size)
			b = size;
		*from = size - b;
		*len = b;
		return 1;
	}
	errno = 0;
	a = strtoll(h, &end, 10);
	if (errno || end == h || *end != '-' || a < 0)
		return 0;
	h = end + 1;
	if (!*h) {
		b = size - 1;
	} else {
		b = strtoll(h, &end, 10);
		if (errno || *end || b < a)
			return 0;
	}
	if (a >= size)
		return -1;
	if (b >= size)
		b = size - 1;
	*from = a;
	*len = b - a + 1;
	return 1;
}
