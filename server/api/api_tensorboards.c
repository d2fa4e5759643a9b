/* api_tensorboards.c — /tensorboards: one call starts a TensorBoard on a
 * folder of the caller's home.
 *
 * A TensorBoard is an instance (kind 'tensorboard', no GPUs, no pool, an
 * allocation request for its cpu and memory like every container) of the
 * catalog image of the tensorboard_image setting (gc_setting: the admin's,
 * else the configuration's; api_settings.c), whose default command serves the
 * directory in $GPUCLOUD_LOGDIR and whose app port is named "tensorboard":
 * the instances driver runs it like any instance, the route trigger gives it
 * its own origin, and idle reclamation stops it like any instance.
 * Does not own: running it (instances.c), routes (0010_proxy.sql, proxy.c).
 */
#include <stdlib.h>
#include <string.h>

#include <http_parser.h>

#include "api/api.h"
#include "auth/auth.h"
#include "base/events.h"
#include "db/db.h"

#define TB_CPU_MILLIS "500"
#define TB_MEM_MIB    "512"

struct tb_state {
	char logdir[600];
	char image[520]; /* the setting, read with the storage check */
};

/* A folder below the home: relative, no "..", no empty or odd segments. */
static int folder_ok(const char *s)
{
	size_t n = strlen(s);
	const char *seg = s;

	if (n == 0 || n > 512 || s[0] == '/')
		return 0;
	for (const char *p = s;; p++) {
		if (*p == '/' || *p == '\0') {
			size_t len = (size_t)(p - seg);
			if ((len == 0 && *p) || (len == 1 && seg[0] == '.') ||
			    (len == 2 && seg[0] == '.' && seg[1] == '.'))
				return 0;
			if (!*p)
				break;
			seg = p + 1;
			continue;
		}
		if ((unsigned char)*p < 0x20 || *p == 0x7f || *p == '\\')
			return 0;
	}
	return 1;
}

static void created(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;
	struct tb_state *st = r->data;

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "cannot start the TensorBoard");
		return;
	}
	if (PQntuples(res) != 1 || strcmp(db_val(res, 0, 3), "0") == 0) {
		http_reply_error(r, RC_CONFLICT, "an admin adds it to the catalog",
		                 "the TensorBoard image '%s' is not in the image catalog",
		                 st->image);
		return;
	}
	if (!db_val(res, 0, 0)) {
		http_reply_error(r, RC_CONFLICT,
		                 "stop a TensorBoard or a CPU-only instance, then try again", "%s",
		                 db_val(res, 0, 2) ? db_val(res, 0, 2) : "quota");
		return;
	}
	events_publish(EV_ALLOC_CHANGED);    /* a pass of the scheduler... */
	events_publish(EV_WORKLOAD_CHANGED); /* ...and of the driver, on the leader */
	http_reply_json(r, 202,
	                json_pack("{s:I, s:s, s:s, s:s}", "instance_id",
	                          (json_int_t)strtoll(db_val(res, 0, 0), NULL, 10), "name",
	                          db_val(res, 0, 1), "logdir", st->logdir, "state", "pulling"));
}

static void blocked(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;
	struct tb_state *st = r->data;
	char uid[24];
	const char *p[3] = { uid, st->image, st->logdir };

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "cannot check your storage");
		return;
	}
	snprintf(st->image, sizeof(st->image), "%s", db_val(res, 0, 1) ? db_val(res, 0, 1) : "");
	if (!*st->image) {
		http_reply_error(r, RC_CONFLICT,
		                 "an admin sets the TensorBoard image (Administration → Quotas)",
		                 "TensorBoard is not set up on this cluster");
		return;
	}
	if (db_val(res, 0, 0)) {
		http_reply_error(r, RC_CONFLICT, "free some space in your home, then try again",
		                 "%s", db_val(res, 0, 0));
		return;
	}
	snprintf(uid, sizeof(uid), "%lld", (long long)r->auth->user_id);
	/* like any container: an allocation request (no pool, no slices: cpu
	 * and memory on a node the scheduler picks), held to the user's
	 * CPU-only quota and TensorBoard cap, all in one statement */
	db_query("WITH v AS (SELECT nextval('instances_id_seq') AS iid),"
	         " img AS (SELECT id FROM images WHERE reference = $2 AND owner_id IS NULL),"
	         " cq AS (SELECT COALESCE(gc_cpu_only_block_reason($1, NULL, " TB_CPU_MILLIS
	         ", " TB_MEM_MIB "), gc_tensorboard_block_reason($1)) AS why FROM img),"
	         " req AS (INSERT INTO alloc_requests (user_id, pool_id, owner_kind, owner_id,"
	         "  slices, cpu_millis, mem_mib)"
	         "  SELECT $1, NULL, 'tensorboard', v.iid::text, 0, " TB_CPU_MILLIS ", " TB_MEM_MIB
	         "  FROM v, cq WHERE cq.why IS NULL RETURNING id),"
	         " ins AS (INSERT INTO instances (id, user_id, name, kind, image_id, cpu_millis,"
	         "  mem_mib, env, request_id, container_name)"
	         "  SELECT v.iid, $1, 'tb-' || v.iid, 'tensorboard', img.id, " TB_CPU_MILLIS
	         ", " TB_MEM_MIB ", jsonb_build_object('GPUCLOUD_LOGDIR', $3::text),"
	         "  (SELECT id FROM req),"
	         "  'gc-' || substr((SELECT cluster_id FROM cluster_identity), 1, 8) || '-inst-'"
	         "  || v.iid FROM v, img, cq WHERE cq.why IS NULL RETURNING id, name)"
	         " SELECT (SELECT id FROM ins), (SELECT name FROM ins), (SELECT why FROM cq),"
	         " (SELECT count(*) FROM img)",
	         3, p, created, r);
}

static void create(struct http_req *r)
{
	static const struct jfield spec[] = { { "path", J_STRING, 1, 512 }, { NULL, 0, 0, 0 } };
	json_t *body;
	struct tb_state *st;
	const char *path;
	char uid[24];
	const char *p[1] = { uid };
	size_t n;

	body = api_json_body(r, spec);
	if (!body)
		return;
	path = json_string_value(json_object_get(body, "path"));
	st = api_state(r, sizeof(*st), NULL);
	if (!st) {
		json_decref(body);
		return;
	}
	snprintf(st->logdir, sizeof(st->logdir), "/home/%s/%s", r->auth->username, path);
	n = strlen(st->logdir);
	while (n && st->logdir[n - 1] == '/')
		st->logdir[--n] = '\0';
	if (!folder_ok(path)) {
		json_decref(body);
		http_reply_error(r, RC_INVALID, "give a folder of your home such as 'runs/exp1'",
		                 "path must be a relative folder without '..'");
		return;
	}
	json_decref(body);
	snprintf(uid, sizeof(uid), "%lld", (long long)r->auth->user_id);
	db_query("SELECT gc_storage_block_reason($1), gc_setting('tensorboard_image')", 1, p,
	         blocked, r);
}

const struct route api_tensorboards_routes[] = {
	{ HTTP_POST, "/api/v1/tensorboards", create, ROLES_ALL, 0, 4096, NULL },
	{ 0, NULL, NULL, 0, 0, 0, NULL },
};
