/* api_registries.c — /registries (admin): image registries and their
 * credentials.
 *
 * The password (an NGC API key, say) is write-only: sealed with AES-256-GCM
 * under the master key as soon as it arrives, bound to the registry's name
 * (which therefore cannot change), never returned, logged or audited —
 * answers say only whether one is set.  It is opened only by images.c, to
 * build X-Registry-Auth for one engine call.  "Test" asks a node's engine
 * to log in with them (POST /auth) and reports the registry's answer.
 * One registry may be "personal": where save-as-image pushes.
 */
#include <stdlib.h>
#include <string.h>

#include <http_parser.h>

#include "api/api.h"
#include "auth/auth.h"
#include "base/crypto.h"
#include "db/db.h"
#include "engine/images.h"
#include "engine/registry.h"

/* A registry's columns, by name (DB_COLS_*: db.h). */
#define REG_COLS(FIRST, COL)                               \
	FIRST(REG_ID, "id")                                \
	COL(REG_NAME, "name")                              \
	COL(REG_SERVER, "server")                          \
	COL(REG_USERNAME, "username")                      \
	COL(REG_HAS_PASSWORD, "secret_sealed IS NOT NULL") \
	COL(REG_PERSONAL, "personal")                      \
	COL(REG_CREATED_AT, DB_TS("created_at"))           \
	COL(REG_UPDATED_AT, DB_TS("updated_at"))           \
	COL(REG_IMAGES, "(SELECT count(*) FROM images i WHERE i.registry_id = registries.id)")
enum reg_col { DB_COLS_ENUM(REG_COLS) };
#define REG_LIST DB_COLS_SQL(REG_COLS)

#define REG_SELECT "SELECT " REG_LIST " FROM registries"

static json_t *reg_row(const PGresult *res, int i)
{
	return json_pack("{s:I, s:s, s:s, s:s, s:b, s:b, s:s, s:s, s:I}", "id",
	                 (json_int_t)strtoll(db_val(res, i, REG_ID), NULL, 10), "name",
	                 db_val(res, i, REG_NAME), "server", db_val(res, i, REG_SERVER), "username",
	                 db_val(res, i, REG_USERNAME), "has_password",
	                 strcmp(db_val(res, i, REG_HAS_PASSWORD), "t") == 0, "personal",
	                 strcmp(db_val(res, i, REG_PERSONAL), "t") == 0, "created_at",
	                 db_val(res, i, REG_CREATED_AT), "updated_at",
	                 db_val(res, i, REG_UPDATED_AT), "images",
	                 (json_int_t)strtoll(db_val(res, i, REG_IMAGES), NULL, 10));
}

static const struct api_resource reg_resource = { "registry", reg_row, 0 };

static void list(struct http_req *r)
{
	api_list(r, &reg_resource, REG_SELECT " ORDER BY name", NULL);
}

static void reply_reg(struct http_req *r, long long id, int status)
{
	struct db_args a = DB_ARGS_INIT;

	db_arg_ll(&a, id);
	api_one(r, &reg_resource, status, REG_SELECT " WHERE id = $1", &a);
}

static void get(struct http_req *r)
{
	api_get(r, &reg_resource, REG_SELECT " WHERE id = $1");
}

/* ---- create, change, remove ---- */

static const struct jfield reg_spec[] = {
	{ "name", J_STRING, 0, 63 },      { "server", J_STRING, 0, 255 },
	{ "username", J_STRING, 0, 255 }, { "password", J_STRING, 0, 4096 },
	{ "personal", J_BOOL, 0, 0 },     { NULL, 0, 0, 0 },
};

static int name_ok(const char *n)
{
	size_t len = n ? strlen(n) : 0;

	if (len == 0 || len > 63 || !((n[0] >= 'a' && n[0] <= 'z') || (n[0] >= '0' && n[0] <= '9')))
		return 0;
	return strspn(n, "abcdefghijklmnopqrstuvwxyz0123456789._-") == len;
}

/* host[:port], as image references begin (no scheme, no path). */
static int server_ok(const char *s)
{
	size_t len = s ? strlen(s) : 0;
	const char *colon = s ? strchr(s, ':') : NULL;

	if (len == 0 || len > 255 || s[0] == '.' || s[0] == '-' || s[0] == ':')
		return 0;
	if (strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:") != len)
		return 0;
	if (colon &&
	    (strchr(colon + 1, ':') || !colon[1] ||
	     strspn(colon + 1, "0123456789") != strlen(colon + 1) || strlen(colon + 1) > 5))
		return 0;
	return 1;
}

static int text_ok(const char *s)
{
	for (; s && *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return 0;
	return 1;
}

static void changed(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;
	int created = r->method == HTTP_POST;

	if (rc == RC_CONFLICT) {
		http_reply_error(r, RC_CONFLICT,
		                 "pick another name, or unset the other one's personal",
		                 "a registry with this name exists, or another is personal");
		return;
	}
	if (api_one_row(r, res, rc, "registry", "the registry settings are inconsistent") < 0)
		return;
	/* never the password: the audit says only that it changed */
	auth_audit(r, r->auth, created ? "registry.create" : "registry.update", db_val(res, 0, 1),
	           json_pack("{s:b}", "password_changed", strcmp(db_val(res, 0, 2), "t") == 0));
	reply_reg(r, strtoll(db_val(res, 0, 0), NULL, 10), created ? 201 : 200);
}

/* Checks the fields common to create and update; replies 400 and returns
 * -1 when one is wrong. */
static int check(struct http_req *r, json_t *body)
{
	const char *server = json_string_value(json_object_get(body, "server"));
	const char *user = json_string_value(json_object_get(body, "username"));
	const char *pw = json_string_value(json_object_get(body, "password"));

	if (server && !server_ok(server)) {
		http_reply_error(r, RC_INVALID,
		                 "e.g. nvcr.io or 127.0.0.1:5055 (no scheme, no path)",
		                 "server must be a host name with an optional port");
		return -1;
	}
	if (!text_ok(user) || !text_ok(pw)) {
		http_reply_error(r, RC_INVALID, NULL,
		                 "username and password must not contain control characters");
		return -1;
	}
	return 0;
}

/* The sealed form of body's password for registry name at server; NULL
 * when none was given (*fail set when sealing failed). */
static char *seal(json_t *body, const char *name, const char *server, int *fail)
{
	json_t *pw = json_object_get(body, "password");
	char aad[400];
	char *s;

	*fail = 0;
	if (!json_is_string(pw))
		return NULL;
	images_secret_aad(name, server, aad, sizeof(aad));
	s = crypto_seal(json_string_value(pw), json_string_length(pw), aad);
	if (!s)
		*fail = 1;
	return s;
}

static void create(struct http_req *r)
{
	json_t *body = api_json_body(r, reg_spec);
	const char *name;
	char *sealed = NULL;
	struct db_args a = DB_ARGS_INIT;
	int fail;

	if (!body)
		return;
	name = json_string_value(json_object_get(body, "name"));
	if (!name_ok(name)) {
		http_reply_error(r, RC_INVALID, "use a-z, 0-9, '.', '_' and '-'",
		                 "registry name must be 1 to 63 lower-case characters");
		goto out;
	}
	if (!json_object_get(body, "server")) {
		http_reply_error(r, RC_INVALID, "e.g. nvcr.io", "missing field 'server'");
		goto out;
	}
	if (check(r, body) < 0)
		goto out;
	sealed = seal(body, name, json_string_value(json_object_get(body, "server")), &fail);
	if (fail) {
		http_reply_error(r, RC_INTERNAL, NULL, "could not encrypt the password");
		goto out;
	}
	db_arg_str(&a, name);
	db_arg_str(&a, json_string_value(json_object_get(body, "server")));
	db_arg_str(&a, json_string_value(json_object_get(body, "username")));
	db_arg_str(&a, sealed);
	db_arg_str(&a, json_is_true(json_object_get(body, "personal")) ? "t" : "f");
	db_query_args("INSERT INTO registries (name, server, username, secret_sealed, personal)"
	              " VALUES ($1, $2, COALESCE($3, ''), $4, $5::boolean)"
	              " RETURNING id, name, ($4 IS NOT NULL)::text",
	              &a, changed, r);
out:
	free(sealed);
	json_decref(body);
}

struct upd {
	json_t *body;
};

static void upd_free(void *p)
{
	struct upd *u = p;

	json_decref(u->body);
	free(u);
}

/* The name and the server bind the sealed password, so an update reads
 * them first; a new server with a stored password needs the password again
 * (the old one stays sealed to the old server and would not open). */
#define UPD_COLS(FIRST, COL)      \
	FIRST(UPD_ID, "id")       \
	COL(UPD_NAME, "name")     \
	COL(UPD_SERVER, "server") \
	COL(UPD_SEALED, "secret_sealed")
enum upd_col { DB_COLS_ENUM(UPD_COLS) };
#define UPD_LIST DB_COLS_SQL(UPD_COLS)

static void upd_named(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;
	struct upd *u = r->data;
	struct db_args a = DB_ARGS_INIT;
	char *sealed = NULL;
	const char *server;
	json_t *pers, *pw;
	int fail;

	if (api_one_row(r, res, rc, "registry", "") < 0)
		return;
	server = json_string_value(json_object_get(u->body, "server"));
	pw = json_object_get(u->body, "password");
	if (server && strcmp(server, db_val(res, 0, UPD_SERVER)) != 0 &&
	    db_val(res, 0, UPD_SEALED) && !pw) {
		http_reply_error(
		        r, RC_INVALID,
		        "send the password with the new server, or an empty one to remove it",
		        "changing the server of registry '%s' needs its password again",
		        db_val(res, 0, UPD_NAME));
		return;
	}
	sealed = seal(u->body, db_val(res, 0, UPD_NAME),
	              server ? server : db_val(res, 0, UPD_SERVER), &fail);
	if (fail) {
		http_reply_error(r, RC_INTERNAL, NULL, "could not encrypt the password");
		return;
	}
	pers = json_object_get(u->body, "personal");
	db_arg_str(&a, db_val(res, 0, UPD_ID));
	db_arg_str(&a, json_string_value(json_object_get(u->body, "server")));
	db_arg_str(&a, json_string_value(json_object_get(u->body, "username")));
	db_arg_str(&a, sealed);
	db_arg_str(&a, json_is_boolean(pers) ? (json_is_true(pers) ? "t" : "f") : NULL);
	/* an empty password removes it (anonymous pulls) */
	db_arg_str(&a, json_is_string(json_object_get(u->body, "password")) &&
	                               json_string_length(json_object_get(u->body, "password")) == 0
	                       ? "t"
	                       : "f");
	db_query_args(
	        "UPDATE registries SET server = COALESCE($2::text, server),"
	        " username = COALESCE($3::text, username),"
	        " secret_sealed = CASE WHEN $6::text = 't' THEN NULL"
	        "  ELSE COALESCE($4::text, secret_sealed) END,"
	        " personal = COALESCE($5::boolean, personal), updated_at = now()"
	        " WHERE id = $1 RETURNING id, name, ($4::text IS NOT NULL OR $6::text = 't')::text",
	        &a, changed, r);
	free(sealed);
}

static void update(struct http_req *r)
{
	json_t *body;
	struct upd *u;
	long long id;
	struct db_args a = DB_ARGS_INIT;

	if (api_id(r, "id", &id) < 0)
		return;
	body = api_json_body(r, reg_spec);
	if (!body)
		return;
	if (json_object_get(body, "name")) {
		json_decref(body);
		http_reply_error(r, RC_INVALID, "add a new registry instead",
		                 "a registry's name cannot change");
		return;
	}
	if (check(r, body) < 0) {
		json_decref(body);
		return;
	}
	u = api_state(r, sizeof(*u), upd_free);
	if (!u) {
		json_decref(body);
		return;
	}
	u->body = body;
	db_arg_ll(&a, id);
	db_query_args("SELECT " UPD_LIST " FROM registries WHERE id = $1", &a, upd_named, r);
}

static void removed(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;

	if (rc == RC_INVALID) { /* images refer to it */
		http_reply_error(r, RC_CONFLICT, "remove or re-home its catalog images first",
		                 "catalog images use this registry");
		return;
	}
	if (api_one_row(r, res, rc, "registry", "") < 0)
		return;
	auth_audit(r, r->auth, "registry.delete", db_val(res, 0, 0), NULL);
	http_reply(r, 204, NULL, NULL, 0);
}

static void remove_reg(struct http_req *r)
{
	long long id;
	struct db_args a = DB_ARGS_INIT;

	if (api_id(r, "id", &id) < 0)
		return;
	db_arg_ll(&a, id);
	db_query_args("DELETE FROM registries WHERE id = $1 RETURNING name", &a, removed, r);
}

/* ---- test credentials ---- */

struct test {
	struct http_req *r;
	long long reg_id, node_id;
	int cancelled;
	char node[64];
};

static void tested(enum rc rc, const char *msg, void *arg)
{
	struct test *t = arg;
	struct http_req *r = t->r;

	if (rc == RC_NOTFOUND) {
		http_reply_error(r, RC_NOTFOUND, NULL, "no such registry");
	} else if (rc == RC_OK || rc == RC_FORBIDDEN) {
		auth_audit(r, r->auth, "registry.test", http_param(r, "id"),
		           json_pack("{s:b, s:s}", "ok", rc == RC_OK, "node", t->node));
		http_reply_json(r, 200,
		                json_pack("{s:b, s:s, s:I, s:s}", "ok", rc == RC_OK, "message", msg,
		                          "node_id", (json_int_t)t->node_id, "node", t->node));
	} else {
		http_reply_error(r, rc == RC_UNAVAILABLE || rc == RC_TIMEOUT ? RC_UNAVAILABLE : rc,
		                 "check the node, or pick another with node_id", "%s", msg);
	}
	free(t);
}

static void test_node(PGresult *res, enum rc rc, void *arg)
{
	struct test *t = arg;
	struct http_req *r = t->r;

	if (rc != RC_OK) {
		free(t);
		api_reply_db_error(r, rc, "");
		return;
	}
	if (PQntuples(res) != 1 || strcmp(db_val(res, 0, 0), "t") != 0) {
		free(t);
		http_reply_error(r, RC_NOTFOUND, NULL, "no such registry");
		return;
	}
	if (!db_val(res, 0, 1)) {
		free(t);
		http_reply_error(r, RC_CONFLICT, "add a node, or name an existing one in node_id",
		                 "no node can test the credentials");
		return;
	}
	t->node_id = strtoll(db_val(res, 0, 1), NULL, 10);
	snprintf(t->node, sizeof(t->node), "%s", db_val(res, 0, 2));
	if (images_registry_test(t->reg_id, t->node_id, tested, t) < 0) {
		free(t);
		http_reply_error(r, RC_NOMEM, NULL, "out of memory");
	}
}

static const struct jfield test_spec[] = {
	{ "node_id", J_INT, 0, 0 },
	{ NULL, 0, 0, 0 },
};

/* The engine does the login (its view of the registry is the one pulls
 * get: its proxy, mirrors and insecure-registry settings).  The request
 * stays until the engine answers (the reply frees nothing of t's). */
static void test(struct http_req *r)
{
	json_t *body;
	struct test *t;
	long long id;
	json_t *nid;
	struct db_args a = DB_ARGS_INIT;

	if (api_id(r, "id", &id) < 0)
		return;
	body = api_json_body(r, test_spec);
	if (!body)
		return;
	t = calloc(1, sizeof(*t));
	if (!t) {
		json_decref(body);
		http_reply_error(r, RC_NOMEM, NULL, "out of memory");
		return;
	}
	t->r = r;
	t->reg_id = id;
	nid = json_object_get(body, "node_id");
	db_arg_ll(&a, id);
	db_arg_ll_opt(&a, json_integer_value(nid), json_is_integer(nid));
	json_decref(body);
	db_query_args("SELECT EXISTS (SELECT 1 FROM registries WHERE id = $1), n.id, n.name"
	              " FROM (SELECT 1) one LEFT JOIN LATERAL (SELECT id, name FROM nodes"
	              "  WHERE $2::bigint IS NULL OR id = $2::bigint"
	              "  ORDER BY (health = 'up') DESC, id LIMIT 1) n ON true",
	              &a, test_node, t);
}

/* ---- browsing: repositories and tags, asked of the registry ---- */

struct browse {
	char server[256], repo[256];
	json_t *catalog; /* the catalog's references */
};

static void browse_free(void *p)
{
	struct browse *b = p;

	json_decref(b->catalog);
	free(b);
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void repos_listed(enum rc rc, const char *body, size_t len, const char *err, void *arg)
{
	struct http_req *r = arg;
	json_t *j, *list, *items = json_array();
	const char **v;
	size_t n, k = 0;

	if (rc != RC_OK) {
		json_decref(items);
		api_reply_registry_error(r, rc, err);
		return;
	}
	j = json_loadb(body, len, 0, NULL);
	list = json_object_get(j, "repositories");
	n = json_array_size(list);
	v = calloc(n ? n : 1, sizeof(*v));
	if (!v || !items) {
		free(v);
		json_decref(j);
		json_decref(items);
		http_reply_error(r, RC_NOMEM, NULL, "out of memory");
		return;
	}
	for (size_t i = 0; i < n; i++)
		if (json_is_string(json_array_get(list, i)))
			v[k++] = json_string_value(json_array_get(list, i));
	qsort(v, k, sizeof(*v), by_name);
	for (size_t i = 0; i < k; i++)
		json_array_append_new(items, json_string(v[i]));
	free(v);
	json_decref(j);
	http_reply_json(r, 200,
	                json_pack("{s:s, s:o}", "registry", http_param(r, "id"), "items", items));
}

static void tags_listed(enum rc rc, const char *body, size_t len, const char *err, void *arg)
{
	struct http_req *r = arg;
	struct browse *b = r->data;
	char prefix[600];
	json_t *j, *items;

	if (rc != RC_OK) {
		api_reply_registry_error(r, rc, err);
		return;
	}
	j = json_loadb(body, len, 0, NULL);
	snprintf(prefix, sizeof(prefix), "%s/%s", b->server, b->repo);
	items = api_tag_items(prefix, json_object_get(j, "tags"), NULL, b->catalog);
	json_decref(j);
	if (!items) {
		http_reply_error(r, RC_NOMEM, NULL, "out of memory");
		return;
	}
	http_reply_json(r, 200, json_pack("{s:s, s:o}", "repository", b->repo, "items", items));
}

/* Row: 0 server, 1 the catalog's references (JSON). */
static void browse_row(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;
	struct browse *b = r->data;
	long long id = strtoll(http_param(r, "id"), NULL, 10);
	int ret;

	if (api_one_row(r, res, rc, "registry", "") < 0)
		return;
	snprintf(b->server, sizeof(b->server), "%s", db_val(res, 0, 0));
	b->catalog = json_loads(db_val(res, 0, 1), 0, NULL);
	ret = b->repo[0] ? registry_list_tags(id, b->repo, tags_listed, r)
	                 : registry_list_repos(id, repos_listed, r);
	if (ret < 0)
		http_reply_error(r, RC_NOMEM, NULL, "out of memory");
}

static void browse(struct http_req *r, const char *repo)
{
	struct browse *b;
	long long id;
	struct db_args a = DB_ARGS_INIT;

	if (api_id(r, "id", &id) < 0)
		return;
	b = api_state(r, sizeof(*b), browse_free);
	if (!b)
		return;
	snprintf(b->repo, sizeof(b->repo), "%s", repo ? repo : "");
	db_arg_ll(&a, id);
	db_query_args("SELECT server, (SELECT COALESCE(json_agg(reference), '[]') FROM images"
	              " WHERE owner_id IS NULL)::text FROM registries WHERE id = $1",
	              &a, browse_row, r);
}

/* The registry's repositories (/v2/_catalog; registries that do not offer
 * it, like Docker Hub, answer an error the reply passes on). */
static void repositories(struct http_req *r)
{
	browse(r, NULL);
}

/* A repository's tags, newest first, each with the reference it makes and
 * whether that is in the catalog already. */
static void tags(struct http_req *r)
{
	const char *repo = http_param(r, "repository");

	if (!registry_repo_valid(repo)) {
		http_reply_error(r, RC_INVALID, "e.g. nvidia/pytorch (see GET .../repositories)",
		                 "'%.100s' is not a repository name", repo ? repo : "");
		return;
	}
	browse(r, repo);
}

const struct route api_registries_routes[] = {
	{ HTTP_GET, "/api/v1/registries", list, ROLE_ADMIN, 0, 0, NULL },
	{ HTTP_POST, "/api/v1/registries", create, ROLE_ADMIN, 0, 16384, NULL },
	{ HTTP_GET, "/api/v1/registries/{id}", get, ROLE_ADMIN, 0, 0, NULL },
	{ HTTP_PATCH, "/api/v1/registries/{id}", update, ROLE_ADMIN, 0, 16384, NULL },
	{ HTTP_DELETE, "/api/v1/registries/{id}", remove_reg, ROLE_ADMIN, 0, 0, NULL },
	{ HTTP_POST, "/api/v1/registries/{id}/test", test, ROLE_ADMIN, 0, 1024, NULL },
	{ HTTP_GET, "/api/v1/registries/{id}/repositories", repositories, ROLE_ADMIN, 0, 0, NULL },
	{ HTTP_GET, "/api/v1/registries/{id}/tags/{repository...}", tags, ROLE_ADMIN, 0, 0, NULL },
	{ 0, NULL, NULL, 0, 0, 0, NULL },
};
