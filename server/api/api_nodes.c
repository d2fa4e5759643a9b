/* api_nodes.c — /nodes: registering Docker engines as GPU nodes (unix
 * socket or tcp:// with mutual TLS), their declared GPUs, labels and admin
 * state (active, draining, cordoned).  Admin only.  A node whose engine
 * fails to start containers is degraded (nodes.c, 0019): shown as state
 * "degraded" with the engine's words, cleared by POST .../clear-degraded or
 * by setting the node active.
 *
 * A node is registered only after its engine answered GET /info with the
 * credentials given, so a wrong address or client certificate is an error
 * at once, with the engine's (or TLS library's) words.  The health check
 * afterwards is nodes.c's.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <http_parser.h>

#include "api/api.h"
#include "engine/images.h"
#include "auth/auth.h"
#include "base/config.h"
#include "base/crypto.h"
#include "db/db.h"
#include "engine/docker.h"
#include "engine/nodes.h"

#define MAX_DECLARED_GPUS 16
#define MAX_DEVICES       8
#define PROBE_TIMEOUT_MS  5000
#define RUNC_MIN          "1.1.12" /* CVE-2024-21626 fixed */
#define TOOLKIT_MIN       "1.17.8" /* CVE-2025-23266 fixed */

/* A node's columns, by name (DB_COLS_*: db.h). */
#define NODE_COLS(FIRST, COL)                                                                     \
	FIRST(NODE_ID, "n.id")                                                                    \
	COL(NODE_NAME, "n.name")                                                                  \
	COL(NODE_URL, "n.url")                                                                    \
	COL(NODE_LABELS, "n.labels::text")                                                        \
	COL(NODE_ADMIN_STATE, "n.admin_state")                                                    \
	COL(NODE_HEALTH, "n.health")                                                              \
	COL(NODE_LAST_SEEN_AT, DB_TS("n.last_seen_at"))                                           \
	COL(NODE_LAST_ERROR, "n.last_error")                                                      \
	COL(NODE_DOWN_SINCE, DB_TS("n.down_since"))                                               \
	COL(NODE_NCPU, "n.ncpu")                                                                  \
	COL(NODE_MEMORY_BYTES, "n.memory_bytes")                                                  \
	COL(NODE_ENGINE_VERSION, "n.engine_version")                                              \
	COL(NODE_API_VERSION, "n.api_version")                                                    \
	COL(NODE_RUNC_VERSION, "n.runc_version")                                                  \
	COL(NODE_TOOLKIT_VERSION, "n.toolkit_version")                                            \
	COL(NODE_RUNTIMES, "n.runtimes::text")                                                    \
	COL(NODE_OS, "n.os")                                                                      \
	COL(NODE_KERNEL, "n.kernel")                                                              \
	COL(NODE_CREATED_AT, DB_TS("n.created_at"))                                               \
	COL(NODE_TLS, "n.tls_cert IS NOT NULL")                                                   \
	COL(NODE_GPUS,                                                                            \
	    "COALESCE((SELECT json_agg(json_build_object('id', g.id, 'index', g.idx, 'uuid', "    \
	    "g.uuid,"                                                                             \
	    "  'model', g.model, 'memory_mib', g.memory_mib, 'mig_enabled', g.mig_enabled,"       \
	    "  'simulated', g.simulated, 'devices', g.devices, 'mig', (SELECT COALESCE(json_agg(" \
	    "  json_build_object('index', m.idx, 'profile', m.profile, 'uuid', m.uuid) ORDER BY"  \
	    "  m.idx), '[]') FROM gpu_mig m WHERE m.gpu_id = g.id)) ORDER BY g.idx)"              \
	    "  FROM gpus g WHERE g.node_id = n.id), '[]')::text")                                 \
	COL(NODE_CUDA_MAX, "n.cuda_max")                                                          \
	COL(NODE_CUDA_SOURCE, "n.cuda_source")                                                    \
	COL(NODE_CUDA_DISCOVERED, "n.cuda_discovered")                                            \
	COL(NODE_START_FAILURES, "n.start_failures")                                              \
	COL(NODE_START_ERROR, "n.start_error")                                                    \
	COL(NODE_DEGRADED_SINCE, DB_TS("n.degraded_since"))
enum node_col { DB_COLS_ENUM(NODE_COLS) };
#define NODE_LIST DB_COLS_SQL(NODE_COLS)

#define NODE_SELECT "SELECT " NODE_LIST " FROM nodes n"

static json_t *str_or_null(const char *s)
{
	return s && *s ? json_string(s) : json_null();
}

static json_t *node_row(const PGresult *res, int i)
{
	const char *health = db_val(res, i, NODE_HEALTH), *admin = db_val(res, i, NODE_ADMIN_STATE);
	const char *runc = db_val(res, i, NODE_RUNC_VERSION),
	           *toolkit = db_val(res, i, NODE_TOOLKIT_VERSION);
	const char *degraded = db_val(res, i, NODE_DEGRADED_SINCE);
	/* down, then degraded (it answers, but its containers do not start),
	 * then what the admin set */
	const char *state = strcmp(health, "down") == 0    ? "down"
	                    : degraded                     ? "degraded"
	                    : strcmp(admin, "active") != 0 ? admin
	                    : strcmp(health, "up") == 0    ? "up"
	                                                   : "unknown";
	int runc_old = runc && *runc ? nodes_version_older(runc, RUNC_MIN) : -1;
	int tk_old = toolkit && *toolkit ? nodes_version_older(toolkit, TOOLKIT_MIN) : -1;
	const char *ncpu = db_val(res, i, NODE_NCPU), *mem = db_val(res, i, NODE_MEMORY_BYTES);
	json_t *o = json_pack("{s:I, s:s, s:s, s:o, s:s, s:s, s:s, s:o, s:s, s:o}", "id",
	                      (json_int_t)strtoll(db_val(res, i, NODE_ID), NULL, 10), "name",
	                      db_val(res, i, NODE_NAME), "url", db_val(res, i, NODE_URL), "labels",
	                      json_loads(db_val(res, i, NODE_LABELS), 0, NULL), "state", state,
	                      "admin_state", admin, "health", health, "last_seen_at",
	                      str_or_null(db_val(res, i, NODE_LAST_SEEN_AT)), "last_error",
	                      db_val(res, i, NODE_LAST_ERROR), "down_since",
	                      str_or_null(db_val(res, i, NODE_DOWN_SINCE)));
	json_t *gpus = json_loads(db_val(res, i, NODE_GPUS), 0, NULL);
	json_t *flags = json_array();

	if (runc_old == 1)
		json_array_append_new(flags, json_string("runc_vulnerable"));
	if (tk_old == 1)
		json_array_append_new(flags, json_string("toolkit_vulnerable"));
	json_object_set_new(o, "ncpu", ncpu ? json_integer(strtoll(ncpu, NULL, 10)) : json_null());
	json_object_set_new(o, "memory_bytes",
	                    mem ? json_integer(strtoll(mem, NULL, 10)) : json_null());
	json_object_set_new(o, "engine_version", str_or_null(db_val(res, i, NODE_ENGINE_VERSION)));
	json_object_set_new(o, "api_version", str_or_null(db_val(res, i, NODE_API_VERSION)));
	json_object_set_new(o, "runc_version", str_or_null(runc));
	json_object_set_new(o, "toolkit_version", str_or_null(toolkit));
	json_object_set_new(o, "runtimes", json_loads(db_val(res, i, NODE_RUNTIMES), 0, NULL));
	json_object_set_new(o, "os", str_or_null(db_val(res, i, NODE_OS)));
	json_object_set_new(o, "kernel", str_or_null(db_val(res, i, NODE_KERNEL)));
	json_object_set_new(o, "created_at", json_string(db_val(res, i, NODE_CREATED_AT)));
	json_object_set_new(o, "tls", json_boolean(strcmp(db_val(res, i, NODE_TLS), "t") == 0));
	json_object_set_new(o, "flags", flags);
	json_object_set_new(o, "degraded", json_boolean(degraded != NULL));
	json_object_set_new(o, "degraded_since", str_or_null(degraded));
	json_object_set_new(o, "start_failures",
	                    json_integer(strtoll(db_val(res, i, NODE_START_FAILURES), NULL, 10)));
	json_object_set_new(o, "start_error", json_string(db_val(res, i, NODE_START_ERROR)));
	json_object_set_new(o, "gpus", gpus ? gpus : json_array());
	/* the newest CUDA the driver supports ("" = unknown), and whether GPU
	 * discovery read it from nvidia-smi or the admin set it */
	{
		const char *max = db_val(res, i, NODE_CUDA_MAX),
		           *found = db_val(res, i, NODE_CUDA_DISCOVERED);
		char cv[16] = "";
		if (max)
			images_cuda_format((int)strtol(max, NULL, 10), cv, sizeof(cv));
		json_object_set_new(o, "cuda_version", json_string(cv));
		json_object_set_new(o, "cuda_source",
		                    json_string(db_val(res, i, NODE_CUDA_SOURCE)));
		cv[0] = '\0';
		if (found)
			images_cuda_format((int)strtol(found, NULL, 10), cv, sizeof(cv));
		json_object_set_new(o, "cuda_discovered", json_string(cv));
	}
	return o;
}

static const struct api_resource node_resource = { "node", node_row, 0 };

/* ---- read ---- */

static void list(struct http_req *r)
{
	api_list(r, &node_resource, NODE_SELECT " ORDER BY n.name", NULL);
}

static void reply_node(struct http_req *r, long long id, int status)
{
	struct db_args a = DB_ARGS_INIT;

	db_arg_ll(&a, id);
	api_one(r, &node_resource, status, NODE_SELECT " WHERE n.id = $1", &a);
}

static void get(struct http_req *r)
{
	api_get(r, &node_resource, NODE_SELECT " WHERE n.id = $1");
}

/* ---- declared GPUs ---- */

static int path_ok(const char *p)
{
	return p[0] == '/' && !strstr(p, "/../") && !strstr(p, "/./") && strlen(p) < 256 &&
	       strcmp(p + (strlen(p) >= 3 ? strlen(p) - 3 : 0), "/..") != 0 && !strpbrk(p, ":,\n");
}

/* Checks the declared GPUs and returns them as the JSON the INSERT reads,
 * or NULL with a message. */
static json_t *declared_gpus(json_t *gpus, char *err, size_t errlen)
{
	json_t *out = json_array(), *g, *d;
	size_t i, k;
	char uuid[64];
	unsigned char rnd[16];

	json_array_foreach(gpus, i, g)
	{
		json_t *model = json_object_get(g, "model"),
		       *mem = json_object_get(g, "memory_mib");
		json_t *devs = json_object_get(g, "devices"), *u = json_object_get(g, "uuid");
		const char *key;
		json_t *v;

		json_object_foreach(g, key, v) if (strcmp(key, "model") &&
		                                   strcmp(key, "memory_mib") &&
		                                   strcmp(key, "devices") && strcmp(key, "uuid"))
		{
			snprintf(err, errlen, "gpus[%zu]: unknown field '%.32s'", i, key);
			goto bad;
		}
		if (!json_is_string(model) || !json_string_length(model) ||
		    json_string_length(model) > 95) {
			snprintf(err, errlen,
			         "gpus[%zu].model must be a name like 'NVIDIA A100-SXM4-80GB'", i);
			goto bad;
		}
		if (!json_is_integer(mem) || json_integer_value(mem) < 0 ||
		    json_integer_value(mem) > (1LL << 30)) {
			snprintf(err, errlen, "gpus[%zu].memory_mib must be a non-negative integer",
			         i);
			goto bad;
		}
		if (!json_is_array(devs) || json_array_size(devs) == 0 ||
		    json_array_size(devs) > MAX_DEVICES) {
			snprintf(err, errlen, "gpus[%zu].devices must list 1 to %d device files", i,
			         MAX_DEVICES);
			goto bad;
		}
		json_array_foreach(devs, k,
		                   d) if (!json_is_string(d) || !path_ok(json_string_value(d)))
		{
			snprintf(err, errlen, "gpus[%zu].devices[%zu] must be an absolute path", i,
			         k);
			goto bad;
		}
		if (u && !json_is_null(u)) {
			if (!json_is_string(u) || strncmp(json_string_value(u), "GPU-", 4) != 0 ||
			    json_string_length(u) > 63) {
				snprintf(err, errlen, "gpus[%zu].uuid must look like 'GPU-...'", i);
				goto bad;
			}
			snprintf(uuid, sizeof(uuid), "%s", json_string_value(u));
		} else {
			if (crypto_random(rnd, sizeof(rnd)) < 0)
				goto bad;
			snprintf(uuid, sizeof(uuid),
			         "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%"
			         "02x%02x",
			         rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7],
			         rnd[8], rnd[9], rnd[10], rnd[11], rnd[12], rnd[13], rnd[14],
			         rnd[15]);
		}
		json_array_append_new(out, json_pack("{s:i, s:s, s:O, s:O, s:O}", "idx", (int)i,
		                                     "uuid", uuid, "model", model, "memory_mib",
		                                     mem, "devices", devs));
	}
	return out;
bad:
	json_decref(out);
	return NULL;
}

/* ---- register ---- */

struct create {
	struct http_req *r;
	json_t *body;
	json_t *gpus;
	struct docker_engine *probe;
	char dir[1100];
	char *sealed;
};

static void remove_probe_dir(struct create *c)
{
	char path[1200];

	if (!*c->dir)
		return;
	for (int i = 0; i < 3; i++) {
		static const char *const f[] = { "ca.pem", "cert.pem", "key.pem" };
		snprintf(path, sizeof(path), "%s/%s", c->dir, f[i]);
		unlink(path);
	}
	rmdir(c->dir);
	c->dir[0] = '\0';
}

static void create_free(void *p)
{
	struct create *c = p;

	remove_probe_dir(c);
	nodes_free_engine_later(c->probe);
	json_decref(c->body);
	json_decref(c->gpus);
	free(c->sealed);
	free(c);
}

static const char *str(json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));
	return s ? s : NULL;
}

static void created(PGresult *res, enum rc rc, void *arg)
{
	struct create *c = arg;
	struct http_req *r = c->r;

	if (rc == RC_CONFLICT) {
		http_reply_error(r, RC_CONFLICT, "pick another name, or declare other GPU UUIDs",
		                 "a node named '%s' or one of its GPU UUIDs exists already",
		                 str(c->body, "name"));
		return;
	}
	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "could not register the node");
		return;
	}
	auth_audit(r, r->auth, "node.create", str(c->body, "name"),
	           json_pack("{s:s}", "url", str(c->body, "url")));
	nodes_check_soon();
	reply_node(r, strtoll(db_val(res, 0, 0), NULL, 10), 201);
}

static void probed(struct docker_call *call, enum rc rc, int status, const char *body, size_t len,
                   const char *err, void *arg)
{
	struct create *c = arg;
	struct http_req *r = c->r;
	char *labels, *gpus;
	struct db_args a = DB_ARGS_INIT;

	(void)call;
	(void)body;
	(void)len;
	remove_probe_dir(c);
	if (rc != RC_OK || status != 200) {
		char msg[700];
		if (rc == RC_OK)
			snprintf(msg, sizeof(msg), "the engine answered GET /info with HTTP %d",
			         status);
		else
			snprintf(msg, sizeof(msg), "%s", err && *err ? err : rc_code(rc));
		http_reply_error(r, RC_INVALID,
		                 strncmp(str(c->body, "url"), "tcp://", 6) == 0
		                         ? "check the address, and that the engine trusts this "
		                           "client certificate and we trust its CA"
		                         : "check that the engine runs and listens on that socket",
		                 "could not reach the engine at '%s': %s", str(c->body, "url"),
		                 msg);
		return;
	}
	labels = json_is_object(json_object_get(c->body, "labels"))
	                 ? json_dumps(json_object_get(c->body, "labels"), JSON_COMPACT)
	                 : NULL;
	gpus = json_dumps(c->gpus, JSON_COMPACT);
	db_arg_str(&a, str(c->body, "name"));
	db_arg_str(&a, str(c->body, "url"));
	db_arg_str(&a, str(c->body, "tls_ca"));
	db_arg_str(&a, str(c->body, "tls_cert"));
	db_arg_str(&a, c->sealed);
	db_arg_str(&a, labels ? labels : "{}");
	db_arg_str(&a, gpus ? gpus : "[]");
	db_query_args(
	        "WITH n AS (INSERT INTO nodes (name, url, tls_ca, tls_cert, tls_key_sealed, labels)"
	        "  VALUES ($1, $2, $3, $4, $5, $6::jsonb) RETURNING id),"
	        " g AS (INSERT INTO gpus (node_id, idx, uuid, model, memory_mib, simulated, "
	        "devices)"
	        "  SELECT n.id, x.idx, x.uuid, x.model, x.memory_mib, true, x.devices"
	        "  FROM n, jsonb_to_recordset($7::jsonb) AS x(idx int, uuid text, model text,"
	        "  memory_mib bigint, devices text[]))"
	        " SELECT id FROM n",
	        &a, created, c);
	free(labels);
	free(gpus);
}

static const struct jfield create_spec[] = {
	{ "name", J_STRING, 1, 63 },
	{ "url", J_STRING, 1, 300 },
	{ "tls_ca", J_STRING, 0, 65536 },
	{ "tls_cert", J_STRING, 0, 65536 },
	{ "tls_key", J_STRING, 0, 65536 },
	{ "labels", J_OBJECT, 0, 0 },
	{ "gpus", J_ARRAY, 0, MAX_DECLARED_GPUS },
	{ NULL, 0, 0, 0 },
};

static int name_ok(const char *n)
{
	size_t len = strlen(n);

	if (len == 0 || len > 63 || !((n[0] >= 'a' && n[0] <= 'z') || (n[0] >= '0' && n[0] <= '9')))
		return 0;
	return strspn(n, "abcdefghijklmnopqrstuvwxyz0123456789._-") == len;
}

static int labels_ok(json_t *labels)
{
	const char *k;
	json_t *v;

	if (!labels || json_is_null(labels))
		return 1;
	if (json_object_size(labels) > 64)
		return 0;
	json_object_foreach(labels, k, v) if (!*k || strlen(k) > 63 || !json_is_string(v) ||
	                                      json_string_length(v) > 255) return 0;
	return 1;
}

static void create(struct http_req *r)
{
	json_t *body = api_json_body(r, create_spec);
	struct create *c;
	const char *url, *ca, *cert, *key;
	char err[512], aad[128], cap[1200], certp[1200], keyp[1200];
	unsigned char rnd[8];
	int tcp;

	if (!body)
		return;
	c = api_state(r, sizeof(*c), create_free);
	if (!c) {
		json_decref(body);
		return;
	}
	c->r = r;
	c->body = body;
	url = str(body, "url");
	ca = str(body, "tls_ca");
	cert = str(body, "tls_cert");
	key = str(body, "tls_key");
	tcp = strncmp(url, "tcp://", 6) == 0;
	if (!name_ok(str(body, "name"))) {
		http_reply_error(r, RC_INVALID, "use a-z, 0-9, '.', '_' and '-'",
		                 "node name must be 1 to 63 lower-case characters");
		return;
	}
	if (!tcp && (strncmp(url, "unix:///", 8) != 0 || !path_ok(url + 7))) {
		http_reply_error(r, RC_INVALID,
		                 "e.g. unix:///var/run/docker.sock or tcp://10.0.0.5:2376",
		                 "url must be unix:///<socket path> or tcp://<host>:<port>");
		return;
	}
	if (tcp && (!ca || !cert || !key)) {
		http_reply_error(
		        r, RC_INVALID,
		        "Docker's remote API must only be reachable with TLS client certificates",
		        "a tcp:// node needs tls_ca, tls_cert and tls_key (PEM)");
		return;
	}
	if (!tcp && (ca || cert || key)) {
		http_reply_error(r, RC_INVALID, NULL, "TLS material is only for tcp:// nodes");
		return;
	}
	if (!labels_ok(json_object_get(body, "labels"))) {
		http_reply_error(r, RC_INVALID, NULL,
		                 "labels must map up to 64 names to strings of at most 255 bytes");
		return;
	}
	c->gpus = declared_gpus(json_object_get(body, "gpus"), err, sizeof(err));
	if (!c->gpus) {
		http_reply_error(r, RC_INVALID,
		                 "declare GPUs as {model, memory_mib, devices:[paths]}", "%s", err);
		return;
	}
	if (tcp) {
		snprintf(aad, sizeof(aad), "node-tls-key:%s", str(body, "name"));
		c->sealed = crypto_seal(key, strlen(key), aad);
		if (!c->sealed || crypto_random(rnd, sizeof(rnd)) < 0) {
			http_reply_error(r, RC_INTERNAL, NULL, "cannot encrypt the TLS key");
			return;
		}
		snprintf(c->dir, sizeof(c->dir), "%s/probe-%02x%02x%02x%02x%02x%02x%02x%02x",
		         cfg.state_dir, rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6],
		         rnd[7]);
		if (nodes_write_tls(c->dir, ca, cert, key) < 0) {
			http_reply_error(r, RC_INTERNAL, NULL,
			                 "cannot write TLS files under state_dir");
			return;
		}
		snprintf(cap, sizeof(cap), "%s/ca.pem", c->dir);
		snprintf(certp, sizeof(certp), "%s/cert.pem", c->dir);
		snprintf(keyp, sizeof(keyp), "%s/key.pem", c->dir);
	}
	c->probe = docker_engine_new(url, tcp ? cap : NULL, tcp ? certp : NULL, tcp ? keyp : NULL,
	                             err, sizeof(err));
	if (!c->probe) {
		http_reply_error(r, RC_INVALID, NULL, "unusable engine address '%s': %s", url, err);
		return;
	}
	if (!docker_request(c->probe, "GET", "/info", NULL, NULL, 0, NULL, PROBE_TIMEOUT_MS, probed,
	                    c))
		http_reply_error(r, RC_INTERNAL, NULL, "could not start a request to the engine");
}

/* ---- change ---- */

static void updated(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;

	if (rc == RC_CONFLICT) {
		http_reply_error(r, RC_CONFLICT, NULL, "a declared GPU UUID exists already");
		return;
	}
	if (rc == RC_INVALID) { /* a live allocation keeps its slice (a constraint) */
		http_reply_error(r, RC_CONFLICT, "release or wait for its allocations first",
		                 "a declared GPU being replaced has allocated slices");
		return;
	}
	if (api_one_row(r, res, rc, "node", "could not update the node") < 0)
		return;
	auth_audit(r, r->auth, "node.update", db_val(res, 0, 1), NULL);
	nodes_check_soon();
	reply_node(r, strtoll(db_val(res, 0, 0), NULL, 10), 200);
}

static const struct jfield update_spec[] = {
	{ "labels", J_OBJECT, 0, 0 },
	{ "state", J_STRING, 0, 16 },
	{ "gpus", J_ARRAY, 0, MAX_DECLARED_GPUS },
	{ "toolkit_version", J_STRING, 0, 32 },
	{ "cuda_version", J_STRING, 0, 16 },
	{ NULL, 0, 0, 0 },
};

static void update(struct http_req *r)
{
	json_t *body, *gpus = NULL;
	long long id;
	char err[512];
	char *labels = NULL, *gdoc = NULL;
	const char *state, *tk, *cuda;
	struct db_args a = DB_ARGS_INIT;

	if (api_id(r, "id", &id) < 0)
		return;
	body = api_json_body(r, update_spec);
	if (!body)
		return;
	state = str(body, "state");
	if (state && strcmp(state, "active") && strcmp(state, "draining") &&
	    strcmp(state, "cordoned")) {
		json_decref(body);
		http_reply_error(r, RC_INVALID, "use active, draining or cordoned",
		                 "state must be active, draining or cordoned");
		return;
	}
	if (!labels_ok(json_object_get(body, "labels"))) {
		json_decref(body);
		http_reply_error(r, RC_INVALID, NULL,
		                 "labels must map up to 64 names to strings of at most 255 bytes");
		return;
	}
	if (json_is_array(json_object_get(body, "gpus"))) {
		gpus = declared_gpus(json_object_get(body, "gpus"), err, sizeof(err));
		if (!gpus) {
			json_decref(body);
			http_reply_error(r, RC_INVALID, NULL, "%s", err);
			return;
		}
		gdoc = json_dumps(gpus, JSON_COMPACT);
		json_decref(gpus);
	}
	if (json_is_object(json_object_get(body, "labels")))
		labels = json_dumps(json_object_get(body, "labels"), JSON_COMPACT);
	db_arg_ll(&a, id);
	db_arg_str(&a, labels);
	db_arg_str(&a, state);
	db_arg_str(&a, gdoc);
	/* the Engine API does not tell the NVIDIA container toolkit's version:
	 * the admin does, from the node's inventory, and it is flagged when old */
	tk = json_string_value(json_object_get(body, "toolkit_version"));
	if (tk && *tk && nodes_version_older(tk, TOOLKIT_MIN) < 0) {
		free(labels);
		free(gdoc);
		json_decref(body);
		http_reply_error(r, RC_INVALID, "e.g. 1.17.8",
		                 "toolkit_version must be a version number");
		return;
	}
	db_arg_str(&a, tk);
	/* the newest CUDA the node's driver supports (nvidia-smi's "CUDA
	 * Version"); placement keeps images needing more off the node.  Set, it
	 * overrides what discovery reads; "" falls back to that */
	cuda = json_string_value(json_object_get(body, "cuda_version"));
	if (cuda && *cuda && images_cuda_parse(cuda) < 0) {
		free(labels);
		free(gdoc);
		json_decref(body);
		http_reply_error(r, RC_INVALID, "e.g. 12.4, or \"\" for unknown",
		                 "cuda_version must be a CUDA version");
		return;
	}
	db_arg_ll_opt(&a, cuda && *cuda ? images_cuda_parse(cuda) : 0, cuda != NULL);
	/* declared GPUs are replaced as a whole when given */
	db_query_args(
	        "WITH n AS (UPDATE nodes SET labels = COALESCE($2::jsonb, labels),"
	        "  admin_state = COALESCE($3::node_admin_state, admin_state),"
	        /* setting it active is the admin's word that the engine is
	         * fixed: a degraded node gets work again */
	        "  start_failures = CASE WHEN $3 = 'active' THEN 0 ELSE start_failures END,"
	        "  degraded_since = CASE WHEN $3 = 'active' THEN NULL ELSE degraded_since END,"
	        "  toolkit_version = COALESCE($5, toolkit_version),"
	        "  cuda_max = CASE WHEN $6::int IS NULL THEN cuda_max"
	        "   WHEN $6::int = 0 THEN cuda_discovered ELSE $6::int END,"
	        "  cuda_source = CASE WHEN $6::int IS NULL THEN cuda_source"
	        "   WHEN $6::int > 0 THEN 'admin'"
	        "   WHEN cuda_discovered IS NOT NULL THEN 'discovered'"
	        "   ELSE '' END,"
	        "  updated_at = now()"
	        "  WHERE id = $1 RETURNING id, name),"
	        " d AS (DELETE FROM gpus WHERE $4::jsonb IS NOT NULL AND node_id IN (SELECT id "
	        "FROM n)"
	        "  AND simulated),"
	        " g AS (INSERT INTO gpus (node_id, idx, uuid, model, memory_mib, simulated, "
	        "devices)"
	        "  SELECT n.id, x.idx, x.uuid, x.model, x.memory_mib, true, x.devices"
	        "  FROM n, jsonb_to_recordset(COALESCE($4::jsonb, '[]')) AS x(idx int, uuid text,"
	        "  model text, memory_mib bigint, devices text[]))"
	        " SELECT id, name FROM n",
	        &a, updated, r);
	free(labels);
	free(gdoc);
	json_decref(body);
}

static void deleted(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;

	if (rc == RC_INVALID) { /* a live allocation keeps its slice (a constraint) */
		http_reply_error(r, RC_CONFLICT, "release or wait for its allocations first",
		                 "the node has allocated slices");
		return;
	}
	if (api_one_row(r, res, rc, "node", "could not remove the node") < 0)
		return;
	auth_audit(r, r->auth, "node.delete", db_val(res, 0, 0), NULL);
	nodes_check_soon();
	http_reply(r, 204, NULL, NULL, 0);
}

static void delete_node(struct http_req *r)
{
	long long id;
	struct db_args a = DB_ARGS_INIT;

	if (api_id(r, "id", &id) < 0)
		return;
	db_arg_ll(&a, id);
	db_query_args("DELETE FROM nodes WHERE id = $1 RETURNING name", &a, deleted, r);
}

/* ---- declaring a node dead ---- */

static void declared(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;
	long long id;

	if (api_one_row(r, res, rc, "node", "could not declare the node dead") < 0)
		return;
	if (strcmp(db_val(res, 0, 1), "up") == 0) {
		http_reply_error(r, RC_CONFLICT, "drain it instead, or wait until it is down",
		                 "node '%s' answers its health checks", db_val(res, 0, 0));
		return;
	}
	auth_audit(r, r->auth, "node.dead", db_val(res, 0, 0),
	           json_pack("{s:i}", "released", (int)strtol(db_val(res, 0, 2), NULL, 10)));
	if (api_id(r, "id", &id) < 0) /* checked by declare_dead(): cannot fail */
		return;
	reply_node(r, id, 200);
}

/* A node that is down and will not come back: its allocations are
 * released (their GPU-seconds accounted) and it is cordoned, so nothing is
 * placed there until an admin activates it again.  Refused while it answers. */
static void declare_dead(struct http_req *r)
{
	long long id;
	struct db_args a = DB_ARGS_INIT;

	if (api_id(r, "id", &id) < 0)
		return;
	db_arg_ll(&a, id);
	db_query_args("WITH n AS (SELECT id, name, health FROM nodes WHERE id = $1 FOR UPDATE),"
	              " c AS (UPDATE nodes SET admin_state = 'cordoned', updated_at = now()"
	              "  WHERE id IN (SELECT id FROM n WHERE health <> 'up'))"
	              " SELECT n.name, n.health, (SELECT count(gc_release_request(r.id,"
	              "  'node ' || n.name || ' declared dead')) FROM alloc_requests r"
	              "  WHERE n.health <> 'up' AND r.state = 'allocated' AND EXISTS (SELECT 1 FROM"
	              "  allocations a WHERE a.request_id = r.id AND a.node_id = n.id"
	              "  AND a.released_at IS NULL))"
	              " FROM n",
	              &a, declared, r);
}

/* ---- clearing the degraded state ---- */

static void cleared(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;
	long long id;

	if (api_one_row(r, res, rc, "node", "could not clear the node") < 0)
		return;
	auth_audit(r, r->auth, "node.clear_degraded", db_val(res, 0, 0),
	           json_pack("{s:b, s:i}", "was_degraded", strcmp(db_val(res, 0, 1), "t") == 0,
	                     "start_failures", (int)strtol(db_val(res, 0, 2), NULL, 10)));
	if (api_id(r, "id", &id) < 0) /* checked by clear_degraded(): cannot fail */
		return;
	reply_node(r, id, 200);
}

/* The admin says the node's engine is fixed: its count of failed starts
 * goes to 0 and a degraded node gets work again (idempotent). */
static void clear_degraded(struct http_req *r)
{
	long long id;
	struct db_args a = DB_ARGS_INIT;

	if (api_id(r, "id", &id) < 0)
		return;
	db_arg_ll(&a, id);
	db_query_args("WITH o AS (SELECT id, name, degraded_since, start_failures FROM nodes"
	              "  WHERE id = $1 FOR UPDATE),"
	              " u AS (UPDATE nodes n SET start_failures = 0, degraded_since = NULL,"
	              "  updated_at = now() FROM o WHERE n.id = o.id)"
	              " SELECT name, degraded_since IS NOT NULL, start_failures FROM o",
	              &a, cleared, r);
}

const struct route api_nodes_routes[] = {
	{ HTTP_GET, "/api/v1/nodes", list, ROLE_ADMIN, 0, 0, NULL },
	{ HTTP_POST, "/api/v1/nodes", create, ROLE_ADMIN, 0, 256 * 1024, NULL },
	{ HTTP_GET, "/api/v1/nodes/{id}", get, ROLE_ADMIN, 0, 0, NULL },
	{ HTTP_PATCH, "/api/v1/nodes/{id}", update, ROLE_ADMIN, 0, 64 * 1024, NULL },
	{ HTTP_DELETE, "/api/v1/nodes/{id}", delete_node, ROLE_ADMIN, 0, 0, NULL },
	{ HTTP_POST, "/api/v1/nodes/{id}/declare-dead", declare_dead, ROLE_ADMIN, 0, 0, NULL },
	{ HTTP_POST, "/api/v1/nodes/{id}/clear-degraded", clear_degraded, ROLE_ADMIN, 0, 0, NULL },
	{ 0, NULL, NULL, 0, 0, 0, NULL },
};
