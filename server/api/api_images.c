/* api_images.c — /images: the catalog of runnable images, and pulls.
 *
 * Admins curate catalog images (owner_id NULL) and pull them to nodes;
 * everyone reads the catalog images visible to them (visibility
 * "everyone", or "restricted" to roles, classes or groups — classes and
 * groups are stored now and take effect once those objects exist; today a
 * restricted image is seen through its roles only) and their own personal
 * images (owner_id = them, made by "save as image").  Per-node pull state
 * and progress come from image_nodes, written by images.c.
 */
#include <stdlib.h>
#include <string.h>

#include <http_parser.h>

#include "api/api.h"
#include "auth/auth.h"
#include "db/db.h"
#include "engine/images.h"
#include "engine/registry.h"
#include "base/log.h"

/* An image's columns, by name (DB_COLS_*: db.h).  Every node appears in
 * IMAGE_NODES, 'absent' where the image never went. */
#define IMAGE_COLS(FIRST, COL)                                                                    \
	FIRST(IMAGE_ID, "i.id")                                                                   \
	COL(IMAGE_REFERENCE, "i.reference")                                                       \
	COL(IMAGE_REGISTRY_ID, "i.registry_id")                                                   \
	COL(IMAGE_REGISTRY, "COALESCE(r.name, '')")                                               \
	COL(IMAGE_DISPLAY_NAME, "i.display_name")                                                 \
	COL(IMAGE_FRAMEWORK, "i.framework")                                                       \
	COL(IMAGE_CUDA_VERSION, "i.cuda_version")                                                 \
	COL(IMAGE_CUDA_SOURCE, "i.cuda_source")                                                   \
	COL(IMAGE_DESCRIPTION, "i.description")                                                   \
	COL(IMAGE_DEFAULT_CMD, "i.default_cmd::text")                                             \
	COL(IMAGE_APP_PORTS, "i.app_ports::text")                                                 \
	COL(IMAGE_OWNER_ID, "i.owner_id")                                                         \
	COL(IMAGE_VISIBILITY, "i.visibility")                                                     \
	COL(IMAGE_ROLES, "array_to_json(i.vis_roles)::text")                                      \
	COL(IMAGE_CLASSES, "array_to_json(i.vis_classes)::text")                                  \
	COL(IMAGE_GROUPS, "array_to_json(i.vis_groups)::text")                                    \
	COL(IMAGE_CREATED_AT, DB_TS("i.created_at"))                                              \
	COL(IMAGE_UPDATED_AT, DB_TS("i.updated_at"))                                              \
	COL(IMAGE_NODES,                                                                          \
	    "(SELECT COALESCE(json_agg(json_build_object('node_id', n.id, 'node', n.name,"        \
	    "  'state', COALESCE(x.state, 'absent'), 'progress', COALESCE(x.progress, 0),"        \
	    "  'error', COALESCE(x.error, ''), 'updated_at', " DB_TS(                             \
	            "x.updated_at") ")"                                                           \
	                            "  ORDER BY n.name), '[]')"                                   \
	                            "  FROM nodes n LEFT JOIN image_nodes x ON x.node_id = n.id " \
	                            "AND x.image_id = i.id)::text")                               \
	COL(IMAGE_CUDA_MIN, "i.cuda_min")                                                         \
	COL(IMAGE_VERIFIED, "i.verified")
enum image_col { DB_COLS_ENUM(IMAGE_COLS) };

#define IMAGE_SELECT           \
	"SELECT " DB_COLS_SQL( \
	        IMAGE_COLS) " FROM images i LEFT JOIN registries r ON r.id = i.registry_id"

/* Who sees what: $2 the caller's id, $3 their role (or their classes,
 * 0030).  A catalog image added
 * without checking the registry (verified false) is seen by admins only
 * until a pull of it succeeds. */
#define IMAGE_VISIBLE                                                        \
	" (i.owner_id = $2::bigint OR (i.owner_id IS NULL AND ($3 = 'admin'" \
	" OR (i.verified AND (i.visibility = 'everyone'"                     \
	" OR $3::user_role = ANY (i.vis_roles)"                              \
	" OR gc_in_any_class($2::bigint, i.vis_classes))))))"

static json_t *jload(const char *s)
{
	json_t *j = s ? json_loads(s, 0, NULL) : NULL;

	return j ? j : json_null();
}

static json_t *image_row(const PGresult *res, int i)
{
	const char *reg = db_val(res, i, IMAGE_REGISTRY_ID),
	           *owner = db_val(res, i, IMAGE_OWNER_ID);
	json_t *o = json_pack(
	        "{s:I, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "id",
	        (json_int_t)strtoll(db_val(res, i, IMAGE_ID), NULL, 10), "reference",
	        db_val(res, i, IMAGE_REFERENCE), "registry", db_val(res, i, IMAGE_REGISTRY),
	        "display_name", db_val(res, i, IMAGE_DISPLAY_NAME), "framework",
	        db_val(res, i, IMAGE_FRAMEWORK), "cuda_version", db_val(res, i, IMAGE_CUDA_VERSION),
	        "cuda_source", db_val(res, i, IMAGE_CUDA_SOURCE), "description",
	        db_val(res, i, IMAGE_DESCRIPTION), "created_at", db_val(res, i, IMAGE_CREATED_AT),
	        "updated_at", db_val(res, i, IMAGE_UPDATED_AT));

	json_object_set_new(o, "registry_id",
	                    reg ? json_integer(strtoll(reg, NULL, 10)) : json_null());
	json_object_set_new(o, "cuda_min",
	                    json_integer(strtol(db_val(res, i, IMAGE_CUDA_MIN), NULL, 10)));
	json_object_set_new(o, "default_cmd", jload(db_val(res, i, IMAGE_DEFAULT_CMD)));
	json_object_set_new(o, "app_ports", jload(db_val(res, i, IMAGE_APP_PORTS)));
	json_object_set_new(o, "owner_id",
	                    owner ? json_integer(strtoll(owner, NULL, 10)) : json_null());
	json_object_set_new(o, "personal", json_boolean(owner != NULL));
	json_object_set_new(o, "verified",
	                    json_boolean(strcmp(db_val(res, i, IMAGE_VERIFIED), "t") == 0));
	json_object_set_new(o, "visibility", json_string(db_val(res, i, IMAGE_VISIBILITY)));
	json_object_set_new(o, "roles", jload(db_val(res, i, IMAGE_ROLES)));
	json_object_set_new(o, "classes", jload(db_val(res, i, IMAGE_CLASSES)));
	json_object_set_new(o, "groups", jload(db_val(res, i, IMAGE_GROUPS)));
	json_object_set_new(o, "nodes", jload(db_val(res, i, IMAGE_NODES)));
	return o;
}

static const struct api_resource image_resource = { "image", image_row, 0 };

/* The caller, as IMAGE_VISIBLE's $2 and $3. */
static void caller_args(struct db_args *a, const struct http_req *r)
{
	db_arg_ll(a, r->auth->user_id);
	db_arg_str(a, auth_role_name(r->auth->role));
}

static void list(struct http_req *r)
{
	struct db_args a = DB_ARGS_INIT;

	db_arg_null(&a); /* $1 is the id of reply_image(): the same visibility clause */
	caller_args(&a, r);
	api_list(r, &image_resource,
	         IMAGE_SELECT
	         " WHERE $1::text IS NULL AND" IMAGE_VISIBLE
	         " ORDER BY i.owner_id NULLS FIRST, lower(i.display_name), i.reference",
	         &a);
}

static void reply_image(struct http_req *r, long long id, int status)
{
	struct db_args a = DB_ARGS_INIT;

	db_arg_ll(&a, id);
	caller_args(&a, r);
	api_one(r, &image_resource, status,
	        IMAGE_SELECT " WHERE i.id = $1::bigint AND" IMAGE_VISIBLE, &a);
}

static void get(struct http_req *r)
{
	long long id;

	if (api_id(r, "id", &id) < 0)
		return;
	reply_image(r, id, 200);
}

/* ---- create, change, remove ---- */

static const struct jfield image_spec[] = {
	{ "reference", J_STRING, 0, 255 },    { "registry_id", J_INT, 0, 0 },
	{ "display_name", J_STRING, 0, 200 }, { "framework", J_STRING, 0, 64 },
	{ "cuda_version", J_STRING, 0, 16 },  { "description", J_STRING, 0, 4000 },
	{ "visibility", J_STRING, 0, 16 },    { "roles", J_STRINGS, 0, 4 },
	{ "classes", J_ARRAY, 0, 1000 },      { "groups", J_ARRAY, 0, 1000 },
	{ "default_cmd", J_STRINGS, 0, 64 },  { "app_ports", J_ARRAY, 0, 16 },
	{ "verify", J_BOOL, 0, 0 },           { NULL, 0, 0, 0 },
};

/* The checked settings of a create or update, as statement parameters
 * (NULL = not given). */
struct image_params {
	int cuda_min;
	char *roles, *classes, *groups, *cmd, *ports; /* JSON, malloc'd */
};

static void params_free(struct image_params *ip)
{
	free(ip->roles);
	free(ip->classes);
	free(ip->groups);
	free(ip->cmd);
	free(ip->ports);
}

static int ids_ok(json_t *a)
{
	size_t i;
	json_t *v;

	json_array_foreach(a, i, v) if (!json_is_integer(v) || json_integer_value(v) < 1) return 0;
	return 1;
}

static int port_name_ok(const char *n)
{
	size_t len = n ? strlen(n) : 0;

	return len > 0 && len <= 32 && n[0] >= 'a' && n[0] <= 'z' &&
	       strspn(n, "abcdefghijklmnopqrstuvwxyz0123456789-") == len;
}

/* Checks body's settings; replies 400 and returns -1 when one is wrong. */
static int check(struct http_req *r, json_t *body, struct image_params *ip)
{
	const char *cuda = json_string_value(json_object_get(body, "cuda_version"));
	const char *vis = json_string_value(json_object_get(body, "visibility"));
	json_t *roles = json_object_get(body, "roles"), *ports = json_object_get(body, "app_ports");
	json_t *cmd = json_object_get(body, "default_cmd"), *v;
	size_t i, j;

	if (cuda && *cuda && images_cuda_parse(cuda) < 0) {
		http_reply_error(r, RC_INVALID, "e.g. \"12.4\"",
		                 "cuda_version '%.16s' is not a CUDA version", cuda);
		return -1;
	}
	ip->cuda_min = cuda && *cuda ? images_cuda_parse(cuda) : 0;
	if (vis && strcmp(vis, "everyone") && strcmp(vis, "restricted")) {
		http_reply_error(r, RC_INVALID, "use everyone or restricted",
		                 "visibility must be everyone or restricted");
		return -1;
	}
	json_array_foreach(roles, i, v) if (auth_role_parse(json_string_value(v)) < 0)
	{
		http_reply_error(r, RC_INVALID, "use admin, teacher, researcher or student",
		                 "unknown role '%.32s' in roles", json_string_value(v));
		return -1;
	}
	if (!ids_ok(json_object_get(body, "classes")) || !ids_ok(json_object_get(body, "groups"))) {
		http_reply_error(r, RC_INVALID, NULL,
		                 "classes and groups must be ids (positive integers)");
		return -1;
	}
	if (json_is_array(cmd) && json_array_size(cmd) == 0) {
		http_reply_error(r, RC_INVALID, "omit it (or send null) to use the image's own",
		                 "default_cmd must not be empty");
		return -1;
	}
	json_array_foreach(ports, i, v)
	{
		json_t *name = json_object_get(v, "name"), *port = json_object_get(v, "port");
		if (!json_is_object(v) || json_object_size(v) != 2 ||
		    !port_name_ok(json_string_value(name)) || !json_is_integer(port) ||
		    json_integer_value(port) < 1 || json_integer_value(port) > 65535) {
			http_reply_error(
			        r, RC_INVALID, "e.g. [{\"name\":\"jupyter\",\"port\":8888}]",
			        "app_ports must be objects with a name (a-z, 0-9, '-') and a "
			        "port from 1 to 65535");
			return -1;
		}
		for (j = 0; j < i; j++)
			if (strcmp(json_string_value(name),
			           json_string_value(json_object_get(json_array_get(ports, j),
			                                             "name"))) == 0) {
				http_reply_error(r, RC_INVALID, NULL, "app port '%s' appears twice",
				                 json_string_value(name));
				return -1;
			}
	}
#define DUMP(field, dst)                                 \
	if (json_is_array(json_object_get(body, field))) \
		dst = json_dumps(json_object_get(body, field), JSON_COMPACT);
	DUMP("roles", ip->roles);
	DUMP("classes", ip->classes);
	DUMP("groups", ip->groups);
	DUMP("default_cmd", ip->cmd);
	DUMP("app_ports", ip->ports);
#undef DUMP
	return 0;
}

static void changed(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;
	int created = r->method == HTTP_POST;

	if (rc == RC_CONFLICT) {
		http_reply_error(r, RC_CONFLICT, "edit the existing entry",
		                 "an image with this reference is in the catalog");
		return;
	}
	if (rc == RC_INVALID) {
		http_reply_error(r, RC_INVALID, "see GET /api/v1/registries", "no such registry");
		return;
	}
	if (api_one_row(r, res, rc, "image", "") < 0)
		return;
	auth_audit(r, r->auth, created ? "image.create" : "image.update", db_val(res, 0, 1),
	           created ? json_pack("{s:b}", "verified", strcmp(db_val(res, 0, 2), "t") == 0)
	                   : NULL);
	reply_image(r, strtoll(db_val(res, 0, 0), NULL, 10), created ? 201 : 200);
}

/* Inserts body's image (checked by create()); verified: the registry
 * said the reference exists. */
static void insert(struct http_req *r, json_t *body, int verified)
{
	struct image_params ip = { 0 };
	const char *ref = json_string_value(json_object_get(body, "reference")), *cuda;
	json_t *reg;
	struct db_args a = DB_ARGS_INIT;

	if (check(r, body, &ip) < 0)
		goto out;
	cuda = json_string_value(json_object_get(body, "cuda_version"));
	reg = json_object_get(body, "registry_id");
	db_arg_str(&a, ref);
	db_arg_ll_opt(&a, json_integer_value(reg), json_is_integer(reg));
	db_arg_str(&a, json_string_value(json_object_get(body, "display_name")));
	db_arg_str(&a, json_string_value(json_object_get(body, "framework")));
	db_arg_str(&a, cuda && *cuda ? cuda : NULL);
	db_arg_ll(&a, ip.cuda_min);
	db_arg_str(&a, json_string_value(json_object_get(body, "description")));
	db_arg_str(&a, json_string_value(json_object_get(body, "visibility")));
	db_arg_str(&a, ip.roles);
	db_arg_str(&a, ip.classes);
	db_arg_str(&a, ip.groups);
	db_arg_str(&a, ip.cmd);
	db_arg_str(&a, ip.ports);
	db_arg_str(&a, verified ? "t" : "f");
	/* without a registry_id, the registry whose server the reference
	 * starts with (the longest) */
	db_query_args("INSERT INTO images (reference, registry_id, display_name, framework,"
	              " cuda_version, cuda_min, cuda_source, description, visibility, vis_roles,"
	              " vis_classes, vis_groups, default_cmd, app_ports, verified)"
	              " VALUES ($1, COALESCE($2::bigint, (SELECT id FROM registries"
	              "  WHERE starts_with($1, server || '/') ORDER BY length(server) DESC, "
	              "id LIMIT 1)),"
	              " COALESCE($3, $1), COALESCE($4, ''), COALESCE($5, ''), $6::int,"
	              " CASE WHEN $5 IS NULL THEN '' ELSE 'admin' END, COALESCE($7, ''),"
	              " COALESCE($8, 'everyone')::image_visibility,"
	              " ARRAY(SELECT jsonb_array_elements_text(COALESCE($9::jsonb, "
	              "'[]')))::user_role[],"
	              " ARRAY(SELECT jsonb_array_elements_text(COALESCE($10::jsonb, "
	              "'[]'))::bigint),"
	              " ARRAY(SELECT jsonb_array_elements_text(COALESCE($11::jsonb, "
	              "'[]'))::bigint),"
	              " $12::jsonb, COALESCE($13::jsonb, '[]'), $14::boolean)"
	              " RETURNING id, reference, verified",
	              &a, changed, r);
out:
	params_free(&ip);
}

struct pending {
	json_t *body;
};

static void pending_free(void *p)
{
	struct pending *u = p;

	json_decref(u->body);
	free(u);
}

/* The registry's answer about a new image's reference. */
static void ref_checked(enum rc rc, const char *body, size_t len, const char *err, void *arg)
{
	struct http_req *r = arg;
	struct pending *u = r->data;

	(void)body;
	(void)len;
	switch (rc) {
	case RC_OK: insert(r, u->body, 1); return;
	case RC_NOTFOUND:
		http_reply_error(r, RC_INVALID,
		                 "check the repository and tag (Browse registry lists them)", "%s",
		                 err);
		return;
	case RC_FORBIDDEN:
		http_reply_error(
		        r, RC_CONFLICT,
		        "fix the registry's credentials (Administration > Registries), or "
		        "add it with \"verify\": false: it stays hidden from users until a "
		        "pull succeeds",
		        "%s", err);
		return;
	case RC_INVALID: http_reply_error(r, RC_INVALID, NULL, "%s", err); return;
	case RC_NOMEM:
	case RC_DB: http_reply_error(r, rc, NULL, "%s", err); return;
	default:
		http_reply_error(
		        r, RC_UNAVAILABLE,
		        "add it with \"verify\": false: it stays hidden from users until a "
		        "pull succeeds",
		        "%s", err);
		return;
	}
}

/* The reference is checked against its registry first (HEAD of its
 * manifest, with the registry's credentials): an image that does not
 * exist never reaches the catalog.  "verify": false skips the check for a
 * registry gpucloudd cannot reach; such an image stays hidden from users
 * until a pull of it has succeeded. */
static void create(struct http_req *r)
{
	json_t *body = api_json_body(r, image_spec), *reg;
	struct image_params ip = { 0 };
	struct pending *u;
	const char *ref;

	if (!body)
		return;
	ref = json_string_value(json_object_get(body, "reference"));
	if (!ref || !images_ref_valid(ref)) {
		http_reply_error(r, RC_INVALID, "e.g. nvcr.io/nvidia/pytorch:24.08-py3",
		                 "reference must be an image reference");
		goto out;
	}
	if (check(r, body, &ip) < 0)
		goto out;
	if (json_is_false(json_object_get(body, "verify"))) {
		insert(r, body, 0);
		goto out;
	}
	u = api_state(r, sizeof(*u), pending_free);
	if (!u)
		goto out;
	u->body = json_incref(body);
	reg = json_object_get(body, "registry_id");
	if (registry_check_ref(json_is_integer(reg) ? json_integer_value(reg) : 0, ref, ref_checked,
	                       r) < 0)
		http_reply_error(r, RC_NOMEM, NULL, "out of memory");
out:
	params_free(&ip);
	json_decref(body);
}

static void update(struct http_req *r)
{
	json_t *body;
	struct image_params ip = { 0 };
	long long id;
	const char *cuda;
	struct db_args a = DB_ARGS_INIT;

	if (api_id(r, "id", &id) < 0)
		return;
	body = api_json_body(r, image_spec);
	if (!body)
		return;
	if (json_object_get(body, "reference") || json_object_get(body, "registry_id")) {
		http_reply_error(r, RC_INVALID, "add a new catalog entry instead",
		                 "an image's reference and registry cannot change");
		goto out;
	}
	if (json_object_get(body, "verify")) {
		http_reply_error(r, RC_INVALID, "pull it: a successful pull verifies it",
		                 "verify applies when an image is added");
		goto out;
	}
	if (check(r, body, &ip) < 0)
		goto out;
	cuda = json_string_value(json_object_get(body, "cuda_version"));
	db_arg_ll(&a, id);
	db_arg_str(&a, cuda); /* "" = unknown again (read from the image at the next pull) */
	db_arg_ll(&a, ip.cuda_min);
	db_arg_str(&a, json_string_value(json_object_get(body, "display_name")));
	db_arg_str(&a, json_string_value(json_object_get(body, "framework")));
	db_arg_str(&a, json_string_value(json_object_get(body, "description")));
	db_arg_str(&a, json_string_value(json_object_get(body, "visibility")));
	db_arg_str(&a, ip.roles);
	db_arg_str(&a, ip.classes);
	db_arg_str(&a, ip.groups);
	db_arg_str(&a, ip.cmd);
	db_arg_str(&a, ip.ports);
	/* default_cmd: null in the body clears it; absent keeps it */
	db_arg_str(&a, json_object_get(body, "default_cmd") ? "t" : "f");
	db_query_args(
	        "UPDATE images SET"
	        " cuda_version = COALESCE($2, cuda_version),"
	        " cuda_min = CASE WHEN $2 IS NULL THEN cuda_min ELSE $3::int END,"
	        " cuda_source = CASE WHEN $2 IS NULL THEN cuda_source WHEN $2 = '' THEN ''"
	        "  ELSE 'admin' END,"
	        " display_name = COALESCE($4, display_name), framework = COALESCE($5, framework),"
	        " description = COALESCE($6, description),"
	        " visibility = COALESCE($7::image_visibility, visibility),"
	        " vis_roles = CASE WHEN $8::jsonb IS NULL THEN vis_roles ELSE"
	        "  ARRAY(SELECT jsonb_array_elements_text($8::jsonb))::user_role[] END,"
	        " vis_classes = CASE WHEN $9::jsonb IS NULL THEN vis_classes ELSE"
	        "  ARRAY(SELECT jsonb_array_elements_text($9::jsonb)::bigint) END,"
	        " vis_groups = CASE WHEN $10::jsonb IS NULL THEN vis_groups ELSE"
	        "  ARRAY(SELECT jsonb_array_elements_text($10::jsonb)::bigint) END,"
	        " default_cmd = CASE WHEN $13 = 't' THEN $11::jsonb ELSE default_cmd END,"
	        " app_ports = COALESCE($12::jsonb, app_ports), updated_at = now()"
	        " WHERE id = $1 AND owner_id IS NULL RETURNING id, reference, verified",
	        &a, changed, r);
out:
	params_free(&ip);
	json_decref(body);
}

static void removed(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "");
		return;
	}
	if (PQntuples(res) != 1 || !db_val(res, 0, 0)) {
		http_reply_error(r, RC_NOTFOUND, NULL, "no such image");
		return;
	}
	if (strcmp(db_val(res, 0, 1), "0") != 0) {
		http_reply_error(r, RC_CONFLICT, "delete the instances made from it first",
		                 "the image is used by %s instances", db_val(res, 0, 1));
		return;
	}
	auth_audit(r, r->auth, "image.delete", db_val(res, 0, 0), NULL);
	http_reply(r, 204, NULL, NULL, 0);
}

/* Admins remove catalog images (and anyone's personal ones); users their
 * own personal images; not while an instance not deleted uses it (its
 * reference would dangle on start).  Copies on nodes stay. */
static void remove_image(struct http_req *r)
{
	long long id;
	struct db_args a = DB_ARGS_INIT;

	if (api_id(r, "id", &id) < 0)
		return;
	db_arg_ll(&a, id);
	caller_args(&a, r);
	db_query_args("WITH img AS (SELECT id, reference FROM images WHERE id = $1"
	              "  AND (owner_id = $2::bigint OR $3 = 'admin') FOR UPDATE),"
	              " used AS (SELECT count(*) AS n FROM instances WHERE image_id = $1"
	              "  AND state <> 'deleted'),"
	              " gone AS (DELETE FROM images WHERE id IN (SELECT id FROM img)"
	              "  AND (SELECT n FROM used) = 0 RETURNING id)"
	              " SELECT (SELECT reference FROM img), (SELECT n FROM used)",
	              &a, removed, r);
}

/* ---- pulls ---- */

static void pulled(enum rc rc, const char *err, void *arg)
{
	(void)rc;
	(void)err;
	(void)arg; /* images.c recorded and logged the outcome */
}

static void pull_targets(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;
	json_t *nodes, *v;
	long long img;
	size_t i;

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "");
		return;
	}
	if (PQntuples(res) != 1 || strcmp(db_val(res, 0, 0), "0") == 0) {
		http_reply_error(r, RC_NOTFOUND, NULL, "no such image");
		return;
	}
	if (db_val(res, 0, 1)) {
		http_reply_error(r, RC_INVALID, "see GET /api/v1/nodes", "no such nodes: %s",
		                 db_val(res, 0, 1));
		return;
	}
	img = strtoll(http_param(r, "id"), NULL, 10);
	nodes = json_loads(db_val(res, 0, 2), 0, NULL);
	json_array_foreach(nodes, i,
	                   v) if (images_ensure(img, json_integer_value(v), pulled, NULL) < 0)
	        LOG_W("images", "out of memory starting a pull");
	auth_audit(r, r->auth, "image.pull", db_val(res, 0, 3),
	           json_pack("{s:o}", "nodes", nodes ? nodes : json_array()));
	reply_image(r, img, 202);
}

static const struct jfield pull_spec[] = {
	{ "nodes", J_ARRAY, 0, 4096 },
	{ NULL, 0, 0, 0 },
};

static void pull(struct http_req *r)
{
	json_t *body;
	long long id;
	char *want = NULL;
	struct db_args a = DB_ARGS_INIT;

	if (api_id(r, "id", &id) < 0)
		return;
	body = api_json_body(r, pull_spec);
	if (!body)
		return;
	if (json_object_get(body, "nodes")) {
		if (!ids_ok(json_object_get(body, "nodes")) ||
		    json_array_size(json_object_get(body, "nodes")) == 0) {
			json_decref(body);
			http_reply_error(r, RC_INVALID, "omit nodes to pull to every node",
			                 "nodes must be a non-empty list of node ids");
			return;
		}
		want = json_dumps(json_object_get(body, "nodes"), JSON_COMPACT);
	}
	json_decref(body);
	db_arg_ll(&a, id);
	db_arg_str(&a, want);
	/* Marks the targets pulling before answering, so the answer already
	 * shows the pull; copies already present are checked, not marked. */
	db_query_args(
	        "WITH img AS (SELECT id, reference FROM images WHERE id = $1 AND owner_id IS NULL),"
	        " want AS (SELECT DISTINCT x::bigint AS id"
	        "  FROM jsonb_array_elements_text(COALESCE($2::jsonb, '[]')) x),"
	        " bad AS (SELECT w.id FROM want w LEFT JOIN nodes n ON n.id = w.id WHERE n.id IS "
	        "NULL),"
	        " tgt AS (SELECT n.id FROM nodes n WHERE EXISTS (SELECT 1 FROM img)"
	        "  AND NOT EXISTS (SELECT 1 FROM bad)"
	        "  AND ($2::jsonb IS NULL OR n.id IN (SELECT id FROM want))),"
	        " mark AS (INSERT INTO image_nodes (image_id, node_id, state, progress, error)"
	        "  SELECT $1, id, 'pulling', 0, '' FROM tgt ON CONFLICT (image_id, node_id) DO "
	        "UPDATE"
	        "  SET state = 'pulling', progress = 0, error = '', updated_at = now()"
	        "  WHERE image_nodes.state <> 'present')"
	        " SELECT (SELECT count(*) FROM img), (SELECT string_agg(id::text, ', ' ORDER BY id)"
	        " FROM bad), (SELECT COALESCE(json_agg(id ORDER BY id), '[]') FROM tgt)::text,"
	        " (SELECT reference FROM img)",
	        &a, pull_targets, r);
	free(want);
}

/* ---- newer tags ---- */

struct newer {
	char ref[300], name[300], tag[160];
	json_t *catalog; /* the catalog's references */
};

static void newer_free(void *p)
{
	struct newer *n = p;

	json_decref(n->catalog);
	free(n);
}

static void newer_tags(enum rc rc, const char *body, size_t len, const char *err, void *arg)
{
	struct http_req *r = arg;
	struct newer *n = r->data;
	json_t *j, *items;

	if (rc != RC_OK) {
		api_reply_registry_error(r, rc, err);
		return;
	}
	j = json_loadb(body, len, 0, NULL);
	items = api_tag_items(n->name, json_object_get(j, "tags"), n->tag, n->catalog);
	json_decref(j);
	if (!items) {
		http_reply_error(r, RC_NOMEM, NULL, "out of memory");
		return;
	}
	http_reply_json(r, 200,
	                json_pack("{s:s, s:s, s:s, s:o}", "reference", n->ref, "repository",
	                          n->name, "tag", n->tag, "newer", items));
}

/* Row: 0 reference, 1 registry_id, 2 the catalog's references (JSON). */
static void newer_row(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;
	struct newer *n;

	if (api_one_row(r, res, rc, "image", "") < 0)
		return;
	n = api_state(r, sizeof(*n), newer_free);
	if (!n)
		return;
	snprintf(n->ref, sizeof(n->ref), "%s", db_val(res, 0, 0));
	n->catalog = json_loads(db_val(res, 0, 2), 0, NULL);
	if (strchr(n->ref, '@') ||
	    images_ref_split(n->ref, n->name, sizeof(n->name), n->tag, sizeof(n->tag)) < 0) {
		/* pinned by digest: no tag to be newer than */
		images_ref_split(n->ref, n->name, sizeof(n->name), n->tag, sizeof(n->tag));
		http_reply_json(r, 200,
		                json_pack("{s:s, s:s, s:s, s:[]}", "reference", n->ref,
		                          "repository", n->name, "tag", n->tag, "newer"));
		return;
	}
	if (registry_ref_tags(db_val(res, 0, 1) ? strtoll(db_val(res, 0, 1), NULL, 10) : 0, n->ref,
	                      newer_tags, r) < 0)
		http_reply_error(r, RC_NOMEM, NULL, "out of memory");
}

/* The tags of a catalog image's repository that are newer than its own
 * (same series: "24.09-py3" after "24.08-py3"), asked of the registry. */
static void newer(struct http_req *r)
{
	long long id;
	struct db_args a = DB_ARGS_INIT;

	if (api_id(r, "id", &id) < 0)
		return;
	db_arg_ll(&a, id);
	db_query_args("SELECT reference, registry_id, (SELECT COALESCE(json_agg(reference), '[]')"
	              " FROM images WHERE owner_id IS NULL)::text"
	              " FROM images WHERE id = $1 AND owner_id IS NULL",
	              &a, newer_row, r);
}

const struct route api_images_routes[] = {
	{ HTTP_GET, "/api/v1/images", list, ROLES_ALL, 0, 0, NULL },
	{ HTTP_POST, "/api/v1/images", create, ROLE_ADMIN, 0, 65536, NULL },
	{ HTTP_GET, "/api/v1/images/{id}", get, ROLES_ALL, 0, 0, NULL },
	{ HTTP_PATCH, "/api/v1/images/{id}", update, ROLE_ADMIN, 0, 65536, NULL },
	{ HTTP_DELETE, "/api/v1/images/{id}", remove_image, ROLES_ALL, 0, 0, NULL },
	{ HTTP_POST, "/api/v1/images/{id}/pull", pull, ROLE_ADMIN, 0, 65536, NULL },
	{ HTTP_GET, "/api/v1/images/{id}/newer", newer, ROLE_ADMIN, 0, 0, NULL },
	{ 0, NULL, NULL, 0, 0, 0, NULL },
};
