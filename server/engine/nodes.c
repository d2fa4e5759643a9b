/* nodes.c — engine clients for the registered nodes and their health check.
 *
 * Owns: the in-memory list of engine clients (rebuilt from the database at
 * every check, so changes made on any replica arrive), the TLS files libcurl
 * reads for tcp:// nodes (written under state_dir/nodes/<id>/, the key
 * decrypted from the database), and the check itself: GET /info and GET
 * /version on every node, then one UPDATE with what was seen.  A node that
 * stops answering keeps its health for cfg.node_down_after seconds, then
 * becomes down; one answer makes it up again.  Separately, launches report
 * whether the engine started their containers (nodes_launch_result): a node
 * whose engine fails cfg.node_degrade_after starts in a row, with errors of
 * its own, is degraded until a start succeeds or an admin clears it.
 * Does not own: the API (api_nodes.c) or what runs on the nodes.
 */
#include "engine/nodes.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <jansson.h>

#include "base/config.h"
#include "base/cron.h"
#include "base/crypto.h"
#include "db/db.h"
#include "engine/docker.h"
#include "base/log.h"
#include "engine/nvsmi.h"

#define MAX_NODES 4096

struct node_rt {
	long long id;
	char name[64];
	char ver[40]; /* digest of url and TLS material */
	struct docker_engine *eng;
	struct docker_call *call;  /* check in flight */
	json_t *info;              /* /info of the check in flight */
	int seen;                  /* present in the last listing */
	int has_nvidia;            /* the engine has an "nvidia" runtime */
	int discovered;            /* GPU discovery ran (or was tried) in this process */
	struct docker_call *dcall; /* discovery step in flight */
	struct discovery *disc;
	int health; /* last logged: 0 unknown, 1 up, 2 down */
};

struct discovery;
static struct event_base *base;
static struct cron_section *tick;
static struct node_rt *nodes[MAX_NODES];
static int nnodes;
static int listing;

int nodes_version_older(const char *version, const char *minimum)
{
	long a[3] = { 0, 0, 0 }, b[3] = { 0, 0, 0 };
	const char *p;
	char *end;

	for (int pass = 0; pass < 2; pass++) {
		long *v = pass ? b : a;
		p = pass ? minimum : version;
		while (*p == 'v' || *p == ' ')
			p++;
		if (*p < '0' || *p > '9')
			return -1;
		for (int i = 0; i < 3; i++) {
			v[i] = strtol(p, &end, 10);
			if (end == p)
				break;
			p = end;
			if (*p != '.')
				break;
			p++;
		}
	}
	for (int i = 0; i < 3; i++)
		if (a[i] != b[i])
			return a[i] < b[i];
	return 0;
}

static int write_file(const char *dir, const char *name, const char *content, mode_t mode)
{
	char path[1100];
	size_t n = strlen(content);
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
	if (fd < 0)
		return -1;
	if (fchmod(fd, mode) < 0 || write(fd, content, n) != (ssize_t)n) {
		close(fd);
		return -1;
	}
	return close(fd);
}

int nodes_write_tls(const char *dir, const char *ca, const char *cert, const char *key)
{
	if ((mkdir(dir, 0700) < 0 && errno != EEXIST) || chmod(dir, 0700) < 0)
		return -1;
	if (write_file(dir, "ca.pem", ca, 0644) < 0 ||
	    write_file(dir, "cert.pem", cert, 0644) < 0 ||
	    write_file(dir, "key.pem", key, 0600) < 0)
		return -1;
	return 0;
}

static void discovery_abort(struct node_rt *n);

static void rt_free(struct node_rt *n)
{
	if (!n)
		return;
	if (n->call)
		docker_cancel(n->call);
	discovery_abort(n);
	json_decref(n->info);
	docker_engine_free(n->eng);
	free(n);
}

static struct node_rt *rt_find(long long id)
{
	for (int i = 0; i < nnodes; i++)
		if (nodes[i]->id == id)
			return nodes[i];
	return NULL;
}

struct docker_engine *nodes_engine(long long node_id)
{
	struct node_rt *n = rt_find(node_id);

	return n ? n->eng : NULL;
}

static void log_health(struct node_rt *n, int health, const char *why)
{
	if (n->health == health)
		return;
	n->health = health;
	if (health == 1)
		log_msg(LOG_INFO, "nodes", NULL, "node '%s' is up", n->name);
	else
		log_msg(LOG_WARN, "nodes", NULL, "node '%s' is down: %s", n->name, why);
}

/* ---- recording what a check saw ---- */

/* Database completions name the node by id: it may be gone meanwhile. */
static void failed_done(PGresult *res, enum rc rc, void *arg)
{
	struct node_rt *n = rt_find((long long)(intptr_t)arg);

	if (n && rc == RC_OK && PQntuples(res) == 1 && strcmp(db_val(res, 0, 0), "down") == 0)
		log_health(n, 2, db_val(res, 0, 1));
}

static void check_failed(struct node_rt *n, const char *why)
{
	char id[24], grace[16];
	const char *p[3] = { id, why, grace };

	snprintf(id, sizeof(id), "%lld", n->id);
	snprintf(grace, sizeof(grace), "%d", cfg.node_down_after);
	db_query("UPDATE nodes SET last_error = left($2, 500), down_since = COALESCE(down_since, "
	         "now()),"
	         " health = CASE WHEN COALESCE(down_since, now()) <= now() - make_interval(secs => "
	         "$3::int)"
	         "  THEN 'down'::node_health ELSE health END, updated_at = now()"
	         " WHERE id = $1 RETURNING health, last_error",
	         3, p, failed_done, (void *)(intptr_t)n->id);
}

static void discovery_start(struct node_rt *n);

static void up_done(PGresult *res, enum rc rc, void *arg)
{
	struct node_rt *n = rt_find((long long)(intptr_t)arg);

	if (!n || rc != RC_OK)
		return;
	log_health(n, 1, "");
	/* declared GPUs are the admin's word: discovery is for the others */
	if (cfg.discovery_image && *cfg.discovery_image && n->has_nvidia && PQntuples(res) == 1 &&
	    strcmp(db_val(res, 0, 0), "0") == 0)
		discovery_start(n);
}

static const char *component_version(json_t *version, const char *name)
{
	size_t i;
	json_t *c;

	json_array_foreach(json_object_get(version, "Components"), i, c)
	{
		const char *cn = json_string_value(json_object_get(c, "Name"));
		if (cn && strcmp(cn, name) == 0)
			return json_string_value(json_object_get(c, "Version"));
	}
	return NULL;
}

static void check_succeeded(struct node_rt *n, json_t *info, json_t *version)
{
	char id[24], ncpu[24], mem[24];
	const char *runc = component_version(version, "runc");
	const char *p[9];
	json_t *runtimes = json_array();
	const char *key;
	json_t *v;
	char *rt_doc;

	n->has_nvidia = json_object_get(json_object_get(info, "Runtimes"), "nvidia") != NULL;
	json_object_foreach(json_object_get(info, "Runtimes"), key, v)
	        json_array_append_new(runtimes, json_string(key));
	rt_doc = json_dumps(runtimes, JSON_COMPACT);
	json_decref(runtimes);
	snprintf(id, sizeof(id), "%lld", n->id);
	snprintf(ncpu, sizeof(ncpu), "%lld",
	         (long long)json_integer_value(json_object_get(info, "NCPU")));
	snprintf(mem, sizeof(mem), "%lld",
	         (long long)json_integer_value(json_object_get(info, "MemTotal")));
	p[0] = id;
	p[1] = ncpu;
	p[2] = mem;
	p[3] = json_string_value(json_object_get(version, "Version"));
	p[4] = json_string_value(json_object_get(version, "ApiVersion"));
	p[5] = runc ? runc : "";
	p[6] = rt_doc ? rt_doc : "[]";
	p[7] = json_string_value(json_object_get(info, "OperatingSystem"));
	p[8] = json_string_value(json_object_get(info, "KernelVersion"));
	for (int i = 3; i < 9; i++)
		if (!p[i])
			p[i] = "";
	db_query(
	        "UPDATE nodes SET health = 'up', last_seen_at = now(), last_error = '', down_since "
	        "= NULL,"
	        " ncpu = $2, memory_bytes = $3, engine_version = $4, api_version = $5,"
	        " runc_version = $6, runtimes = $7::jsonb, os = $8, kernel = $9, updated_at = now()"
	        " WHERE id = $1"
	        " RETURNING (SELECT count(*) FROM gpus WHERE node_id = $1 AND simulated)",
	        9, p, up_done, (void *)(intptr_t)n->id);
	free(rt_doc);
}

static void version_done(struct docker_call *call, enum rc rc, int status, const char *body,
                         size_t len, const char *err, void *arg)
{
	struct node_rt *n = arg;
	json_t *version;

	(void)call;
	n->call = NULL;
	if (rc != RC_OK || status != 200) {
		check_failed(n, rc != RC_OK ? err : "the engine answered /version with an error");
		return;
	}
	version = json_loadb(body, len, 0, NULL);
	if (!json_is_object(version))
		check_failed(n, "the engine's /version is not JSON");
	else
		check_succeeded(n, n->info, version);
	json_decref(version);
	json_decref(n->info);
	n->info = NULL;
}

static void info_done(struct docker_call *call, enum rc rc, int status, const char *body,
                      size_t len, const char *err, void *arg)
{
	struct node_rt *n = arg;
	char msg[600];

	(void)call;
	n->call = NULL;
	if (rc != RC_OK) {
		snprintf(msg, sizeof(msg), "%s", err && *err ? err : rc_code(rc));
		check_failed(n, msg);
		return;
	}
	if (status != 200) {
		snprintf(msg, sizeof(msg), "the engine answered /info with HTTP %d", status);
		check_failed(n, msg);
		return;
	}
	n->info = json_loadb(body, len, 0, NULL);
	if (!json_is_object(n->info)) {
		json_decref(n->info);
		n->info = NULL;
		check_failed(n, "the engine's /info is not JSON");
		return;
	}
	n->call = docker_request(n->eng, "GET", "/version", NULL, NULL, 0, NULL,
	                         cfg.node_check_interval * 1000, version_done, n);
	if (!n->call)
		check_failed(n, "could not start a request to the engine");
}

/* ---- GPU discovery: nvidia-smi in a short-lived container ---- */

struct discovery {
	long long node_id;
	char name[64];
	char cid[80];
	struct evbuffer *out;
	int phase; /* 0: --query-gpu, 1: -L (MIG instances), 2: plain (CUDA version) */
	int ngpus;
	int cuda_rc; /* nvsmi_parse_cuda(): 1 read, 0 "N/A", -1 not read */
	int cuda;    /* encoded as nodes.cuda_max */
	struct nvsmi_gpu gpus[NVSMI_MAX_GPUS];
};

static void discovery_create(struct node_rt *n, struct discovery *d);

static void discovery_end(struct discovery *d, const char *why)
{
	struct node_rt *n = rt_find(d->node_id);
	char path[200];

	if (why)
		log_msg(LOG_WARN, "nodes", NULL, "GPU discovery on node '%s' failed: %s", d->name,
		        why);
	if (*d->cid && n && n->eng) {
		snprintf(path, sizeof(path), "/containers/%s?force=1", d->cid);
		docker_request(n->eng, "DELETE", path, NULL, NULL, 0, NULL, 30000, docker_ignore,
		               NULL);
	}
	if (n) {
		n->dcall = NULL;
		n->disc = NULL;
	}
	evbuffer_free(d->out);
	free(d);
}

static void discovery_abort(struct node_rt *n)
{
	if (n->dcall)
		docker_cancel(n->dcall);
	n->dcall = NULL;
	if (n->disc) {
		evbuffer_free(n->disc->out);
		free(n->disc);
	}
	n->disc = NULL;
}

/* What the GPU statement's completion still has to do. */
struct saved {
	char name[64];
	char node[24];
	char *mig; /* MIG instances as JSON, NULL when none */
};

static void mig_saved(PGresult *res, enum rc rc, void *arg)
{
	struct saved *sv = arg;

	if (rc != RC_OK)
		log_msg(LOG_WARN, "nodes", NULL,
		        "could not store the MIG instances discovered on node '%s': %s", sv->name,
		        res ? db_sqlstate(res) : rc_code(rc));
	else
		log_msg(LOG_INFO, "nodes", NULL, "discovered %s MIG instances on node '%s'",
		        db_val(res, 0, 0), sv->name);
	free(sv->mig);
	free(sv);
}

static void discovered_saved(PGresult *res, enum rc rc, void *arg)
{
	struct saved *sv = arg;
	const char *p[2] = { sv->node, sv->mig };

	if (rc != RC_OK) {
		log_msg(LOG_WARN, "nodes", NULL,
		        "could not store the GPUs discovered on node '%s': %s", sv->name,
		        res ? db_sqlstate(res) : rc_code(rc));
		free(sv->mig);
		free(sv);
		return;
	}
	log_msg(LOG_INFO, "nodes", NULL, "discovered %s GPUs on node '%s'", db_val(res, 0, 0),
	        sv->name);
	/* the MIG instances of the node's discovered GPUs become exactly these */
	db_query("WITH x AS (SELECT * FROM jsonb_to_recordset(COALESCE($2, '[]')::jsonb)"
	         "  AS x(gpu text, idx int, profile text, uuid text)),"
	         " g AS (SELECT id, uuid FROM gpus WHERE node_id = $1 AND NOT simulated),"
	         " del AS (DELETE FROM gpu_mig m USING g WHERE m.gpu_id = g.id"
	         "  AND m.uuid NOT IN (SELECT uuid FROM x)),"
	         " upd AS (UPDATE gpu_mig m SET idx = x.idx, profile = x.profile FROM x"
	         "  WHERE m.uuid = x.uuid),"
	         " ins AS (INSERT INTO gpu_mig (gpu_id, idx, profile, uuid)"
	         "  SELECT g.id, x.idx, x.profile, x.uuid FROM x JOIN g ON g.uuid = x.gpu"
	         "  WHERE x.uuid NOT IN (SELECT uuid FROM gpu_mig))"
	         " SELECT count(*) FROM x",
	         2, p, mig_saved, sv);
}

static void cuda_saved(PGresult *res, enum rc rc, void *arg)
{
	struct saved *sv = arg;

	if (rc != RC_OK)
		log_msg(LOG_WARN, "nodes", NULL,
		        "could not store the CUDA version discovered on node '%s': %s", sv->name,
		        res ? db_sqlstate(res) : rc_code(rc));
	else if (PQntuples(res) == 1)
		log_msg(LOG_INFO, "nodes", NULL,
		        "node '%s' supports CUDA %s by nvidia-smi; in use: %s (%s)", sv->name,
		        *db_val(res, 0, 0) ? db_val(res, 0, 0) : "N/A",
		        *db_val(res, 0, 1) ? db_val(res, 0, 1) : "unknown", db_val(res, 0, 2));
	free(sv);
}

/* Stores the CUDA version nvidia-smi's header told.  The admin's value
 * (cuda_source 'admin') stays in force; the discovered one is kept beside it
 * for when the admin clears theirs. */
static void discovery_store_cuda(struct discovery *d)
{
	struct saved *sv;
	char v[16];
	const char *p[2];

	if (d->cuda_rc < 0)
		return; /* not read: what was known stays */
	sv = calloc(1, sizeof(*sv));
	if (!sv)
		return;
	snprintf(sv->name, sizeof(sv->name), "%s", d->name);
	snprintf(sv->node, sizeof(sv->node), "%lld", d->node_id);
	snprintf(v, sizeof(v), "%d", d->cuda_rc > 0 ? d->cuda : 0);
	p[0] = sv->node;
	p[1] = v;
	db_query("UPDATE nodes SET cuda_discovered = NULLIF($2::int, 0),"
	         " cuda_max = CASE WHEN cuda_source = 'admin' THEN cuda_max"
	         "  ELSE NULLIF($2::int, 0) END,"
	         " cuda_source = CASE WHEN cuda_source = 'admin' THEN 'admin'"
	         "  WHEN $2::int > 0 THEN 'discovered' ELSE '' END"
	         " WHERE id = $1"
	         " RETURNING"
	         "  COALESCE(cuda_discovered / 1000 || '.' || cuda_discovered % 1000 / 10, ''),"
	         "  COALESCE(cuda_max / 1000 || '.' || cuda_max % 1000 / 10, ''), cuda_source",
	         2, p, cuda_saved, sv);
}

/* Stores what the nvidia-smi runs reported, then ends the discovery. */
static void discovery_store(struct discovery *d)
{
	struct saved *sv = calloc(1, sizeof(*sv));
	json_t *arr = json_array(), *mig = json_array();
	char *doc;
	const char *p[2];

	for (int i = 0; i < d->ngpus; i++) {
		const struct nvsmi_gpu *g = &d->gpus[i];
		json_array_append_new(arr,
		                      json_pack("{s:i, s:s, s:s, s:I, s:b}", "idx", g->index,
		                                "uuid", g->uuid, "model", g->name, "memory_mib",
		                                (json_int_t)g->memory_mib, "mig", g->mig_enabled));
		for (int k = 0; k < g->nmig; k++)
			json_array_append_new(mig,
			                      json_pack("{s:s, s:i, s:s, s:s}", "gpu", g->uuid,
			                                "idx", g->mig[k].index, "profile",
			                                g->mig[k].profile, "uuid", g->mig[k].uuid));
	}
	doc = json_dumps(arr, JSON_COMPACT);
	if (sv) {
		snprintf(sv->name, sizeof(sv->name), "%s", d->name);
		snprintf(sv->node, sizeof(sv->node), "%lld", d->node_id);
		sv->mig = json_array_size(mig) ? json_dumps(mig, JSON_COMPACT) : NULL;
	}
	json_decref(arr);
	json_decref(mig);
	if (sv && doc) {
		p[0] = sv->node;
		p[1] = doc;
		/* the node's discovered GPUs become exactly these (declared ones
		 * are the admin's and never touched) */
		db_query("WITH x AS (SELECT * FROM jsonb_to_recordset($2::jsonb)"
		         "  AS x(idx int, uuid text, model text, memory_mib bigint, mig boolean)),"
		         " del AS (DELETE FROM gpus g WHERE g.node_id = $1 AND NOT g.simulated"
		         "  AND g.uuid NOT IN (SELECT uuid FROM x)),"
		         " upd AS (UPDATE gpus g SET idx = x.idx, model = x.model,"
		         "  memory_mib = x.memory_mib, mig_enabled = x.mig FROM x"
		         "  WHERE g.uuid = x.uuid AND g.node_id = $1),"
		         " ins AS (INSERT INTO gpus (node_id, idx, uuid, model, memory_mib,"
		         "  mig_enabled, simulated)"
		         "  SELECT $1, idx, uuid, model, memory_mib, mig, false FROM x"
		         "  WHERE uuid NOT IN (SELECT uuid FROM gpus WHERE node_id = $1))"
		         " SELECT count(*) FROM x",
		         2, p, discovered_saved, sv);
	} else if (sv) {
		free(sv->mig);
		free(sv);
	}
	free(doc);
	discovery_store_cuda(d);
	discovery_end(d, NULL);
}

/* A failure of the current step: the CUDA header (phase 2) is a bonus, so
 * the GPUs already read are stored without it; before that, the discovery
 * ends with nothing stored. */
static void discovery_fail(struct discovery *d, const char *why)
{
	if (d->phase == 2 && rt_find(d->node_id)) {
		log_msg(LOG_WARN, "nodes", NULL,
		        "could not read the CUDA version on node '%s' (kept as it was): %s",
		        d->name, why);
		d->cuda_rc = -1;
		discovery_store(d);
		return;
	}
	discovery_end(d, why);
}

/* Replaces the finished step's container with one for phase. */
static void discovery_next(struct node_rt *n, struct discovery *d, int phase)
{
	char path[200];

	snprintf(path, sizeof(path), "/containers/%s?force=1", d->cid);
	docker_request(n->eng, "DELETE", path, NULL, NULL, 0, NULL, 30000, docker_ignore, NULL);
	d->cid[0] = '\0';
	evbuffer_drain(d->out, evbuffer_get_length(d->out));
	d->phase = phase;
	discovery_create(n, d);
}

static void discovery_logs_done(struct docker_call *call, enum rc rc, int status, const char *body,
                                size_t len, const char *err, void *arg)
{
	struct discovery *d = arg;
	struct node_rt *n = rt_find(d->node_id);
	const char *out;
	size_t olen;
	char why[300];
	int mig = 0;

	(void)call;
	(void)body;
	(void)len;
	if (rc != RC_OK || status != 200) {
		discovery_fail(d, rc != RC_OK ? err : "the engine refused the logs");
		return;
	}
	olen = evbuffer_get_length(d->out);
	out = olen ? (const char *)evbuffer_pullup(d->out, -1) : "";
	if (d->phase == 2) {
		d->cuda_rc = nvsmi_parse_cuda(out, olen, &d->cuda, why, sizeof(why));
		if (d->cuda_rc < 0) {
			discovery_fail(d, why);
			return;
		}
		discovery_store(d);
		return;
	}
	if (d->phase == 1) {
		if (nvsmi_parse_list(out, olen, d->gpus, d->ngpus, why, sizeof(why)) < 0) {
			discovery_end(d, why);
			return;
		}
		if (n && n->eng)
			discovery_next(n, d, 2);
		else
			discovery_end(d, "the node went away");
		return;
	}
	d->ngpus = nvsmi_parse_query(out, olen, d->gpus, NVSMI_MAX_GPUS, why, sizeof(why));
	if (d->ngpus < 0) {
		discovery_end(d, why);
		return;
	}
	for (int i = 0; i < d->ngpus; i++)
		mig |= d->gpus[i].mig_enabled;
	if (!n || !n->eng) {
		discovery_end(d, "the node went away");
		return;
	}
	/* MIG mode: a second run lists the instances; then plain nvidia-smi
	 * for the CUDA version its header tells (--query-gpu has no field
	 * for it, only driver_version) */
	discovery_next(n, d, mig ? 1 : 2);
}

static int discovery_out(struct docker_call *call, int stream, const char *data, size_t len,
                         void *arg)
{
	struct discovery *d = arg;

	(void)call;
	if (stream != 2 && evbuffer_get_length(d->out) + len < 64 * 1024)
		evbuffer_add(d->out, data, len);
	return 0;
}

static void discovery_waited(struct docker_call *call, enum rc rc, int status, const char *body,
                             size_t len, const char *err, void *arg)
{
	struct discovery *d = arg;
	struct node_rt *n = rt_find(d->node_id);
	json_t *w;
	char path[200];

	(void)call;
	if (rc != RC_OK || status != 200 || !n) {
		discovery_fail(d, rc != RC_OK ? err : "waiting for the discovery container failed");
		return;
	}
	w = json_loadb(body, len, 0, NULL);
	if (json_integer_value(json_object_get(w, "StatusCode")) != 0) {
		json_decref(w);
		discovery_fail(d,
		               "nvidia-smi exited with an error (is the NVIDIA runtime working?)");
		return;
	}
	json_decref(w);
	snprintf(path, sizeof(path), "/containers/%s/logs?stdout=1&stderr=1", d->cid);
	n->dcall = docker_stream(n->eng, "GET", path, NULL, NULL, 0, NULL, 30000, 1, discovery_out,
	                         discovery_logs_done, d);
	if (!n->dcall)
		discovery_fail(d, "could not read the container's output");
}

static void discovery_started(struct docker_call *call, enum rc rc, int status, const char *body,
                              size_t len, const char *err, void *arg)
{
	struct discovery *d = arg;
	struct node_rt *n = rt_find(d->node_id);
	char path[200];

	(void)call;
	(void)body;
	(void)len;
	if (rc != RC_OK || status / 100 != 2 || !n) {
		discovery_fail(d, rc != RC_OK
		                          ? err
		                          : "the engine could not start the discovery container");
		return;
	}
	snprintf(path, sizeof(path), "/containers/%s/wait", d->cid);
	n->dcall = docker_request(n->eng, "POST", path, NULL, NULL, 0, NULL, 60000,
	                          discovery_waited, d);
	if (!n->dcall)
		discovery_fail(d, "could not wait for the discovery container");
}

static void discovery_created(struct docker_call *call, enum rc rc, int status, const char *body,
                              size_t len, const char *err, void *arg)
{
	struct discovery *d = arg;
	struct node_rt *n = rt_find(d->node_id);
	json_t *j;
	char path[200], msg[400];

	(void)call;
	if (rc != RC_OK || status != 201 || !n) {
		j = rc == RC_OK ? json_loadb(body, len, 0, NULL) : NULL;
		snprintf(msg, sizeof(msg), "%s",
		         rc != RC_OK ? err
		         : json_string_value(json_object_get(j, "message"))
		                 ? json_string_value(json_object_get(j, "message"))
		                 : "the engine refused to create the container");
		json_decref(j);
		discovery_fail(d, msg);
		return;
	}
	j = json_loadb(body, len, 0, NULL);
	snprintf(d->cid, sizeof(d->cid), "%s",
	         json_string_value(json_object_get(j, "Id"))
	                 ? json_string_value(json_object_get(j, "Id"))
	                 : "");
	json_decref(j);
	if (!*d->cid || strspn(d->cid, "0123456789abcdef") != strlen(d->cid)) {
		d->cid[0] = '\0';
		discovery_fail(d, "the engine returned no container id");
		return;
	}
	snprintf(path, sizeof(path), "/containers/%s/start", d->cid);
	n->dcall = docker_request(n->eng, "POST", path, NULL, NULL, 0, NULL, 30000,
	                          discovery_started, d);
	if (!n->dcall)
		discovery_fail(d, "could not start the discovery container");
}

/* Creates the container of the current phase (nvidia-smi --query-gpu,
 * nvidia-smi -L, or plain nvidia-smi): hardened, without network, through
 * the NVIDIA runtime. */
static void discovery_create(struct node_rt *n, struct discovery *d)
{
	static unsigned seq;
	json_t *spec, *cmd;
	char *body, path[160];

	if (d->phase == 0)
		cmd = json_pack("[s,s,s]", "nvidia-smi",
		                "--query-gpu=index,uuid,name,memory.total,mig.mode.current",
		                "--format=csv,noheader");
	else if (d->phase == 1)
		cmd = json_pack("[s,s]", "nvidia-smi", "-L");
	else
		cmd = json_pack("[s]", "nvidia-smi");
	spec = json_pack("{s:s, s:o, s:[s,s], s:{s:s, s:s}, s:{s:s, s:s, s:b, s:[s], s:[s],"
	                 " s:I, s:I, s:I}}",
	                 "Image", cfg.discovery_image, "Cmd", cmd, "Env",
	                 "NVIDIA_VISIBLE_DEVICES=all", "NVIDIA_DRIVER_CAPABILITIES=utility",
	                 "Labels", "gpucloud.kind", "discovery", "gpucloud.node", n->name,
	                 "HostConfig", "Runtime", "nvidia", "NetworkMode", "none", "Privileged", 0,
	                 "CapDrop", "ALL", "SecurityOpt", "no-new-privileges", "Memory",
	                 (json_int_t)(256 << 20), "MemorySwap", (json_int_t)(256 << 20),
	                 "PidsLimit", (json_int_t)64);
	body = spec ? json_dumps(spec, JSON_COMPACT) : NULL;
	json_decref(spec);
	snprintf(path, sizeof(path), "/containers/create?name=gpucloud-discovery-%lld-%u-%ld",
	         n->id, ++seq, (long)getpid());
	n->dcall = NULL; /* the previous step's call has ended */
	if (body)
		n->dcall = docker_request(n->eng, "POST", path, "application/json", body,
		                          strlen(body), NULL, 30000, discovery_created, d);
	free(body);
	if (!n->dcall)
		discovery_fail(d, "could not ask the engine for a container");
}

/* Runs nvidia-smi through the node's NVIDIA runtime in a short-lived
 * container of cfg.discovery_image, once per node and process. */
static void discovery_start(struct node_rt *n)
{
	struct discovery *d;

	if (n->dcall || n->discovered || !n->eng)
		return;
	n->discovered = 1;
	d = calloc(1, sizeof(*d));
	if (!d || !(d->out = evbuffer_new())) {
		free(d);
		return;
	}
	n->disc = d;
	d->node_id = n->id;
	snprintf(d->name, sizeof(d->name), "%s", n->name);
	discovery_create(n, d);
}

/* ---- launches: the degraded state ---- */

static void launch_recorded(PGresult *res, enum rc rc, void *arg)
{
	(void)arg;
	if (rc != RC_OK || PQntuples(res) != 1)
		return;
	if (strcmp(db_val(res, 0, 1), "degraded") == 0)
		log_msg(LOG_WARN, "nodes", NULL,
		        "node '%s' is degraded: its engine failed %s container starts in a row"
		        " (last: %s); no work is placed there until a start succeeds or an admin"
		        " clears it",
		        db_val(res, 0, 0), db_val(res, 0, 2), db_val(res, 0, 3));
	else if (strcmp(db_val(res, 0, 1), "healthy") == 0)
		log_msg(LOG_INFO, "nodes", NULL,
		        "node '%s' started a container: it is no longer degraded",
		        db_val(res, 0, 0));
}

void nodes_launch_result(long long node_id, int ok, const char *why)
{
	char id[24], after[16];
	const char *p[3] = { id, why ? why : "", after };

	snprintf(id, sizeof(id), "%lld", node_id);
	snprintf(after, sizeof(after), "%d", cfg.node_degrade_after);
	if (ok) {
		/* most starts find nothing to reset: no row, no write */
		db_query("WITH o AS (SELECT id, degraded_since FROM nodes WHERE id = $1"
		         "  AND (start_failures > 0 OR degraded_since IS NOT NULL) FOR UPDATE)"
		         " UPDATE nodes n SET start_failures = 0, degraded_since = NULL,"
		         "  updated_at = now() FROM o WHERE n.id = o.id"
		         " RETURNING n.name, CASE WHEN o.degraded_since IS NOT NULL THEN 'healthy'"
		         "  ELSE '' END, 0, ''",
		         1, p, launch_recorded, NULL);
		return;
	}
	db_query(
	        "UPDATE nodes SET start_failures = start_failures + 1, start_error = left($2, 500),"
	        " degraded_since = CASE WHEN degraded_since IS NULL"
	        "  AND start_failures + 1 >= $3::int THEN now() ELSE degraded_since END,"
	        " updated_at = now() WHERE id = $1"
	        " RETURNING name, CASE WHEN degraded_since = now() THEN 'degraded' ELSE '' END,"
	        "  start_failures, start_error",
	        3, p, launch_recorded, NULL);
}

/* ---- the listing and the checks ---- */

static struct docker_engine *engine_for(long long id, const char *name, const char *url,
                                        const char *ca, const char *cert, const char *sealed,
                                        char *err, size_t errlen)
{
	char dir[1100], aad[128], cap[1200], certp[1200], keyp[1200];
	char *key;
	size_t klen;
	struct docker_engine *e;

	if (strncmp(url, "tcp://", 6) != 0)
		return docker_engine_new(url, NULL, NULL, NULL, err, errlen);
	snprintf(aad, sizeof(aad), "node-tls-key:%s", name);
	key = sealed ? crypto_open(sealed, aad, &klen) : NULL;
	if (!key) {
		snprintf(err, errlen,
		         "cannot decrypt the node's TLS key (is the master key the one it was "
		         "stored with?)");
		return NULL;
	}
	snprintf(dir, sizeof(dir), "%s/nodes", cfg.state_dir);
	mkdir(dir, 0700);
	snprintf(dir, sizeof(dir), "%s/nodes/%lld", cfg.state_dir, id);
	if (nodes_write_tls(dir, ca ? ca : "", cert ? cert : "", key) < 0) {
		free(key);
		snprintf(err, errlen, "cannot write the node's TLS files under '%.300s'", dir);
		return NULL;
	}
	free(key);
	snprintf(cap, sizeof(cap), "%s/ca.pem", dir);
	snprintf(certp, sizeof(certp), "%s/cert.pem", dir);
	snprintf(keyp, sizeof(keyp), "%s/key.pem", dir);
	e = docker_engine_new(url, cap, certp, keyp, err, errlen);
	return e;
}

static void start_check(struct node_rt *n)
{
	if (n->call)
		return;
	if (!n->eng) {
		check_failed(n, "no engine client for this node");
		return;
	}
	n->call = docker_request(n->eng, "GET", "/info", NULL, NULL, 0, NULL,
	                         cfg.node_check_interval * 1000, info_done, n);
	if (!n->call)
		check_failed(n, "could not start a request to the engine");
}

static void listed(PGresult *res, enum rc rc, void *arg)
{
	char err[512];

	(void)arg;
	listing = 0;
	if (rc != RC_OK)
		return; /* the database is down: try again next tick */
	for (int i = 0; i < nnodes; i++)
		nodes[i]->seen = 0;
	for (int r = 0; r < PQntuples(res); r++) {
		long long id = strtoll(db_val(res, r, 0), NULL, 10);
		const char *ver = db_val(res, r, 6);
		struct node_rt *n = rt_find(id);

		if (n && strcmp(n->ver, ver) != 0) {
			/* url or TLS material changed: a new client */
			if (n->call)
				docker_cancel(n->call);
			n->call = NULL;
			json_decref(n->info);
			n->info = NULL;
			discovery_abort(n);
			n->discovered = 0;
			docker_engine_free(n->eng);
			n->eng = NULL;
			n->ver[0] = '\0';
		}
		if (!n) {
			if (nnodes >= MAX_NODES)
				continue;
			n = calloc(1, sizeof(*n));
			if (!n)
				continue;
			n->id = id;
			nodes[nnodes++] = n;
		}
		n->seen = 1;
		snprintf(n->name, sizeof(n->name), "%s", db_val(res, r, 1));
		if (!n->eng) {
			n->eng = engine_for(id, n->name, db_val(res, r, 2), db_val(res, r, 3),
			                    db_val(res, r, 4), db_val(res, r, 5), err, sizeof(err));
			snprintf(n->ver, sizeof(n->ver), "%s", ver);
			if (!n->eng) {
				check_failed(n, err);
				continue;
			}
		}
		start_check(n);
	}
	for (int i = 0; i < nnodes;) {
		if (!nodes[i]->seen) {
			rt_free(nodes[i]);
			nodes[i] = nodes[--nnodes];
		} else {
			i++;
		}
	}
}

/* cron: every cfg.node_check_interval seconds, sooner on nodes_check_soon(). */
static void on_tick(struct cron_section *s, void *arg)
{
	(void)s;
	(void)arg;
	if (listing)
		return;
	listing = 1;
	db_query("SELECT id, name, url, tls_ca, tls_cert, tls_key_sealed,"
	         " md5(url || coalesce(tls_ca, '') || coalesce(tls_cert, '') || "
	         "coalesce(tls_key_sealed, ''))"
	         " FROM nodes ORDER BY id",
	         0, NULL, listed, NULL);
}

int nodes_seed_local(const char *db_url, const char *url)
{
	PGconn *pg;
	PGresult *res;
	const char *p[1] = { url };
	int rc = 0;

	if (!url || !*url)
		return 0;
	if (strncmp(url, "unix:///", 8) != 0) {
		log_msg(LOG_ERROR, "nodes", NULL,
		        "docker_host must be unix:///<socket>; register "
		        "tcp:// engines through the API (they need TLS material)");
		return -1;
	}
	pg = PQconnectdb(db_url);
	res = PQexecParams(pg,
	                   "INSERT INTO nodes (name, url) SELECT 'local', $1"
	                   " WHERE NOT EXISTS (SELECT 1 FROM nodes) RETURNING id",
	                   1, NULL, p, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		log_msg(LOG_ERROR, "nodes", NULL, "cannot register the local engine: %s",
		        PQerrorMessage(pg));
		rc = -1;
	} else if (PQntuples(res) == 1) {
		log_msg(LOG_INFO, "nodes", NULL, "registered the local engine %s as node 'local'",
		        url);
	}
	PQclear(res);
	PQfinish(pg);
	return rc;
}

int nodes_init(struct event_base *b)
{
	base = b;
	tick = cron_every("nodes", cfg.node_check_interval * 1000, 0, on_tick, NULL);
	return tick ? 0 : -1;
}

static void free_engine_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	docker_engine_free(arg);
}

void nodes_free_engine_later(struct docker_engine *e)
{
	if (e && (!base || event_base_once(base, -1, EV_TIMEOUT, free_engine_cb, e, NULL) < 0))
		docker_engine_free(e);
}

void nodes_check_soon(void)
{
	cron_soon(tick, 100);
}

void nodes_shutdown(void)
{
	tick = NULL; /* freed with the cron */
	for (int i = 0; i < nnodes; i++)
		rt_free(nodes[i]);
	nnodes = 0;
}
