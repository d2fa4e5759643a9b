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
#include "base/log.h"

#define TS(col) "to_char(" col " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')"

/* Every node appears, 'absent' where the image never went. */
#define IMAGE_SELECT                                                                               \
	"SELECT i.id, i.reference, i.registry_id, COALESCE(r.name, ''), i.display_name,"           \
	" i.framework, i.cuda_version, i.cuda_source, i.description, i.default_cmd::text,"         \
	" i.app_ports::text, i.owner_id, i.visibility, array_to_json(i.vis_roles)::text,"          \
	" array_to_json(i.vis_classes)::text, array_to_json(i.vis_groups)::text, " TS(             \
	        "i.created_at") ", " TS("i.updated_at") ","                                        \
	                                                " (SELECT "                                \
	                                                "COALESCE(json_agg(json_build_object('"    \
	                                                "node_id', n.id, 'node', n.name,"          \
	                                                "  'state', COALESCE(x.state, 'absent'), " \
	                                                "'progress', COALESCE(x.progress, 0),"     \
	                                                "  'error', COALESCE(x.error, ''), "       \
	                                                "'updated_at', " TS(                       \
	                                                        "x.updated_at") ")"                \
	                                                                        "  ORDER BY "      \
	                                                                        "n.name), '[]')"   \
	                                                                        "  FROM nodes n "  \
	                                                                        "LEFT JOIN "       \
	                                                                        "image_nodes x "   \
	                                                                        "ON x.node_id = "  \
	                                                                        "n.id AND "        \
	                                                                        "x.image_id = "    \
	                                                                        "i.id)::text,"     \
	                                                                        " i.cuda_min"      \
	                                                                        " FROM images i "  \
	                                                                        "LEFT JOIN "       \
	                                                                        "registries r ON " \
	                                                                        "r.id = "          \
	                                                                        "i.registry_id"

/* Who sees what: $2 the caller's id, $3 their role. */
#define IMAGE_VISIBLE                                                        \
	" (i.owner_id = $2::bigint OR (i.owner_id IS NULL AND ($3 = 'admin'" \
	" OR i.visibility = 'everyone' OR $3::user_role = ANY (i.vis_roles))))"

static json_t *jload(const char *s)
{
	json_t *j = s ? json_loads(s, 0, NULL) : NULL;

	return j ? j : json_null();
}

static json_t *image_row(const PGresult *res, int i)
{
	const char *reg = db_val(res, i, 2), *owner = db_val(res, i, 11);
	json_t *o = json_pack("{s:I, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "id",
	                      (json_int_t)strtoll(db_val(res, i, 0), NULL, 10), "reference",
	                      db_val(res, i, 1), "registry", db_val(res, i, 3), "display_name",
	                      db_val(res, i, 4), "framework", db_val(res, i, 5), "cuda_version",
	                      db_val(res, i, 6), "cuda_source", db_val(res, i, 7), "description",
	                      db_val(res, i, 8), "created_at", db_val(res, i, 16), "updated_at",
	                      db_val(res, i, 17));

	json_object_set_new(o, "registry_id",
	                    reg ? json_integer(strtoll(reg, NULL, 10)) : json_null());
	json_object_set_new(o, "cuda_min", json_integer(strtol(db_val(res, i, 19), NULL, 10)));
	json_object_set_new(o, "default_cmd", jload(db_val(res, i, 9)));
	json_object_set_new(o, "app_ports", jload(db_val(res, i, 10)));
	json_object_set_new(o, "owner_id",
	                    owner ? json_integer(strtoll(owner, NULL, 10)) : json_null());
	json_object_set_new(o, "personal", json_boolean(owner != NULL));
	json_object_set_new(o, "visibility", json_string(db_val(res, i, 12)));
	json_object_set_new(o, "roles", jload(db_val(res, i, 13)));
	json_object_set_new(o, "classes", jload(db_val(res, i, 14)));
	json_object_set_new(o, "groups", jload(db_val(res, i, 15)));
	json_object_set_new(o, "nodes", jload(db_val(res, i, 18)));
	return o;
}

static void caller(const struct http_req *r, char *uid, const char **role)
{
	snprintf(uid, 24, "%lld", (long long)r->auth->user_id);
	*role = auth_role_name(r->auth->role);
}

static void list_done(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;
	json_t *items;

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "");
		return;
	}
	items = json_array();
	for (int i = 0; i < PQntuples(res); i++)
		json_array_append_new(items, image_row(res, i));
	http_reply_json(r, 200, json_pack("{s:o}", "items", items));
}

static void list(struct http_req *r)
{
	char uid[24];
	const char *p[3] = { NULL, uid, NULL };

	caller(r, uid, &p[2]);
	db_query(IMAGE_SELECT
	         " WHERE $1::text IS NULL AND" IMAGE_VISIBLE
	         " ORDER BY i.owner_id NULLS FIRST, lower(i.display_name), i.reference",
	         3, p, list_done, r);
}

static void one_reply(PGresult *res, enum rc rc, struct http_req *r, int status)
{
	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "");
		return;
	}
	if (PQntuples(res) != 1) {
		http_reply_error(r, RC_NOTFOUND, NULL, "no such image");
		return;
	}
	http_reply_json(r, status, image_row(res, 0));
}

static void one_done(PGresult *res, enum rc rc, void *arg)
{
	one_reply(res, rc, arg, 200);
}

static void one_created(PGresult *res, enum rc rc, void *arg)
{
	one_reply(res, rc, arg, 201);
}

static void one_accepted(PGresult *res, enum rc rc, void *arg)
{
	one_reply(res, rc, arg, 202);
}

static void reply_image(struct http_req *r, const char *id, int status)
{
	char uid[24];
	const char *p[3] = { id, uid, NULL };

	caller(r, uid, &p[2]);
	db_query(IMAGE_SELECT " WHERE i.id = $1::bigint AND" IMAGE_VISIBLE, 3, p,
	         status == 201   ? one_created
	         : status == 202 ? one_accepted
	                         : one_done,
	         r);
}

static void get(struct http_req *r)
{
	long long id;
	char ids[24];

	if (api_id(r, "id", &id) < 0)
		return;
	snprintf(ids, sizeof(ids), "%lld", id);
	reply_image(r, ids, 200);
}

/* ---- create, change, remove ---- */

static const struct jfield image_spec[] = {
	{ "reference", J_STRING, 0, 255 },
	{ "registry_id", J_INT, 0, 0 },
	{ "display_name", J_STRING, 0, 200 },
	{ "framework", J_STRING, 0, 64 },
	{ "cuda_version", J_STRING, 0, 16 },
	{ "description", J_STRING, 0, 4000 },
	{ "visibility", J_STRING, 0, 16 },
	{ "roles", J_STRINGS, 0, 4 },
	{ "classes", J_ARRAY, 0, 1000 },
	{ "groups", J_ARRAY, 0, 1000 },
	{ "default_cmd", J_STRINGS, 0, 64 },
	{ "app_ports", J_ARRAY, 0, 16 },
	{ NULL, 0, 0, 0 },
};

/* The checked settings of a create or update, as statement parameters
 * (NULL = not given). */
struct image_params {
	char cuda_min[16];
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
	snprintf(ip->cuda_min, sizeof(ip->cuda_min), "%d",
	         cuda && *cuda ? images_cuda_parse(cuda) : 0);
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
	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "");
		return;
	}
	if (PQntuples(res) != 1) {
		http_reply_error(r, RC_NOTFOUND, NULL, "no such image");
		return;
	}
	auth_audit(r, r->auth, created ? "image.create" : "image.update", db_val(res, 0, 1), NULL);
	reply_image(r, db_val(res, 0, 0), created ? 201 : 200);
}

static void create(struct http_req *r)
{
	json_t *body = api_json_body(r, image_spec), *reg;
	struct image_params ip = { 0 };
	const char *ref, *cuda, *p[12];
	char regid[24];

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
	cuda = json_string_value(json_object_get(body, "cuda_version"));
	reg = json_object_get(body, "registry_id");
	snprintf(regid, sizeof(regid), "%lld", (long long)json_integer_value(reg));
	p[0] = ref;
	p[1] = json_is_integer(reg) ? regid : NULL;
	p[2] = json_string_value(json_object_get(body, "display_name"));
	p[3] = json_string_value(json_object_get(body, "framework"));
	p[4] = cuda && *cuda ? cuda : NULL;
	p[5] = ip.cuda_min;
	p[6] = json_string_value(json_object_get(body, "description"));
	p[7] = json_string_value(json_object_get(body, "visibility"));
	p[8] = ip.roles;
	p[9] = ip.classes;
	p[10] = ip.groups;
	p[11] = ip.cmd;
	/* without a registry_id, the registry whose server the reference
	 * starts with (the longest) */
	{
		const char *q[13];
		memcpy(q, p, sizeof(p));
		q[12] = ip.ports;
		db_query("INSERT INTO images (reference, registry_id, display_name, framework,"
		         " cuda_version, cuda_min, cuda_source, description, visibility, vis_roles,"
		         " vis_classes, vis_groups, default_cmd, app_ports)"
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
		         " $12::jsonb, COALESCE($13::jsonb, '[]')) RETURNING id, reference",
		         13, q, changed, r);
	}
out:
	params_free(&ip);
	json_decref(body);
}

static void update(struct http_req *r)
{
	json_t *body;
	struct image_params ip = { 0 };
	long long id;
	const char *cuda, *p[13];
	char ids[24];

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
	if (check(r, body, &ip) < 0)
		goto out;
	cuda = json_string_value(json_object_get(body, "cuda_version"));
	snprintf(ids, sizeof(ids), "%lld", id);
	p[0] = ids;
	p[1] = cuda; /* "" = unknown again (read from the image at the next pull) */
	p[2] = ip.cuda_min;
	p[3] = json_string_value(json_object_get(body, "display_name"));
	p[4] = json_string_value(json_object_get(body, "framework"));
	p[5] = json_string_value(json_object_get(body, "description"));
	p[6] = json_string_value(json_object_get(body, "visibility"));
	p[7] = ip.roles;
	p[8] = ip.classes;
	p[9] = ip.groups;
	p[10] = ip.cmd;
	p[11] = ip.ports;
	/* default_cmd: null in the body clears it; absent keeps it */
	p[12] = json_object_get(body, "default_cmd") ? "t" : "f";
	db_query("UPDATE images SET"
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
	         " WHERE id = $1 AND owner_id IS NULL RETURNING id, reference",
	         13, p, changed, r);
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
	char ids[24], uid[24];
	const char *p[3] = { ids, uid, NULL };

	if (api_id(r, "id", &id) < 0)
		return;
	snprintf(ids, sizeof(ids), "%lld", id);
	caller(r, uid, &p[2]);
	db_query("WITH img AS (SELECT id, reference FROM images WHERE id = $1"
	         "  AND (owner_id = $2::bigint OR $3 = 'admin') FOR UPDATE),"
	         " used AS (SELECT count(*) AS n FROM instances WHERE image_id = $1"
	         "  AND state <> 'deleted'),"
	         " gone AS (DELETE FROM images WHERE id IN (SELECT id FROM img)"
	         "  AND (SELECT n FROM used) = 0 RETURNING id)"
	         " SELECT (SELECT reference FROM img), (SELECT n FROM used)",
	         3, p, removed, r);
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
	reply_image(r, http_param(r, "id"), 202);
}

static const struct jfield pull_spec[] = {
	{ "nodes", J_ARRAY, 0, 4096 },
	{ NULL, 0, 0, 0 },
};

static void pull(struct http_req *r)
{
	json_t *body;
	long long id;
	char ids[24], *want = NULL;
	const char *p[2] = { ids, NULL };

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
	snprintf(ids, sizeof(ids), "%lld", id);
	p[1] = want;
	/* Marks the targets pulling before answering, so the answer already
	 * shows the pull; copies already present are checked, not marked. */
	db_query(
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
	        2, p, pull_targets, r);
	free(want);
}

const struct route api_images_routes[] = {
	{ HTTP_GET, "/api/v1/images", list, ROLES_ALL, 0, 0, NULL },
	{ HTTP_POST, "/api/v1/images", create, ROLE_ADMIN, 0, 65536, NULL },
	{ HTTP_GET, "/api/v1/images/{id}", get, ROLES_ALL, 0, 0, NULL },
	{ HTTP_PATCH, "/api/v1/images/{id}", update, ROLE_ADMIN, 0, 65536, NULL },
	{ HTTP_DELETE, "/api/v1/images/{id}", remove_image, ROLES_ALL, 0, 0, NULL },
	{ HTTP_POST, "/api/v1/images/{id}/pull", pull, ROLE_ADMIN, 0, 65536, NULL },
	{ 0, NULL, NULL, 0, 0, 0, NULL },
};
