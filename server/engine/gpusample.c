/* gpusample.c — GPU utilisation sampling (see gpusample.h).
 *
 * Owns: the cron section, one sampling per node at a time (a node whose
 * previous sampling has not ended is skipped), the short-lived sampler
 * container (create, start, wait, logs, remove — hardened like discovery's;
 * the first sampling of a node in a process removes those a previous
 * process left behind)
 * or the DCGM exporter read, and the INSERT into gpu_samples.  Does not own
 * the parsers (nvsmi.c), the engines (nodes.c) or what reads the samples.
 * A sampling that fails is logged once per node until one succeeds again;
 * no row is written for it (no sample is not the same as 0 %).
 */
#include "engine/gpusample.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <jansson.h>

#include "base/config.h"
#include "base/cron.h"
#include "base/log.h"
#include "db/db.h"
#include "db/leader.h"
#include "engine/docker.h"
#include "engine/nodes.h"
#include "engine/nvsmi.h"

#define MAX_INFLIGHT 256

struct sampling {
	long long node_id;
	char name[64];
	char cid[80];
	struct evbuffer *out;
};

static long long inflight[MAX_INFLIGHT]; /* node ids being sampled */
static long long failing[MAX_INFLIGHT];  /* node ids whose last sampling failed (logged) */
static int reading;

static int list_has(const long long *l, long long id)
{
	for (int i = 0; i < MAX_INFLIGHT; i++)
		if (l[i] == id)
			return 1;
	return 0;
}

static int list_put(long long *l, long long id)
{
	for (int i = 0; i < MAX_INFLIGHT; i++)
		if (l[i] == 0) {
			l[i] = id;
			return 0;
		}
	return -1;
}

static void list_del(long long *l, long long id)
{
	for (int i = 0; i < MAX_INFLIGHT; i++)
		if (l[i] == id)
			l[i] = 0;
}

int gpusample_node_host(const char *url, char *out, size_t outlen)
{
	const char *h, *e;
	size_t n;

	if (strncmp(url, "unix://", 7) == 0) {
		h = "127.0.0.1";
		n = strlen(h);
	} else if (strncmp(url, "tcp://", 6) == 0) {
		h = url + 6;
		if (*h == '[') {
			e = strchr(h, ']');
			if (!e)
				return -1;
			e++;
		} else {
			e = h + strcspn(h, ":/");
		}
		n = (size_t)(e - h);
		if (n == 0)
			return -1;
	} else {
		return -1;
	}
	if (n >= outlen)
		return -1;
	memcpy(out, h, n);
	out[n] = '\0';
	return 0;
}

/* The end of one node's sampling: why is NULL on success. */
static void sampling_end(struct sampling *s, const char *why)
{
	char path[200];
	struct docker_engine *e = nodes_engine(s->node_id);

	if (*s->cid && e) {
		snprintf(path, sizeof(path), "/containers/%s?force=1", s->cid);
		docker_request(e, "DELETE", path, NULL, NULL, 0, NULL, 30000, docker_ignore, NULL);
	}
	if (why && !list_has(failing, s->node_id)) {
		log_msg(LOG_WARN, "gpusample", NULL, "GPU sampling on node '%s' failed: %s",
		        s->name, why);
		list_put(failing, s->node_id);
	} else if (!why && list_has(failing, s->node_id)) {
		log_msg(LOG_INFO, "gpusample", NULL, "GPU sampling on node '%s' works again",
		        s->name);
		list_del(failing, s->node_id);
	}
	list_del(inflight, s->node_id);
	if (s->out)
		evbuffer_free(s->out);
	free(s);
}

/* Stores the parsed samples: only for this node's measured GPUs, only
 * those with a utilisation (MIG mode reports none). */
static void store(struct sampling *s, const struct nvsmi_util *u, int n)
{
	json_t *arr = json_array();
	char id[24], *doc;
	const char *p[2];

	for (int i = 0; i < n; i++)
		if (u[i].util_pct >= 0)
			json_array_append_new(
			        arr,
			        json_pack("{s:s, s:i, s:o}", "uuid", u[i].uuid, "util",
			                  u[i].util_pct, "mem",
			                  u[i].mem_used_mib >= 0 && u[i].mem_used_mib <= INT32_MAX
			                          ? json_integer(u[i].mem_used_mib)
			                          : json_null()));
	doc = json_dumps(arr, JSON_COMPACT);
	json_decref(arr);
	snprintf(id, sizeof(id), "%lld", s->node_id);
	p[0] = id;
	p[1] = doc ? doc : "[]";
	db_query("INSERT INTO gpu_samples (node_id, gpu_uuid, util_pct, mem_used_mib)"
	         " SELECT $1, x.uuid, x.util, x.mem"
	         " FROM jsonb_to_recordset($2::jsonb) AS x(uuid text, util real, mem integer)"
	         " JOIN gpus g ON g.uuid = x.uuid AND g.node_id = $1 AND NOT g.simulated"
	         " ON CONFLICT DO NOTHING",
	         2, p, NULL, NULL);
	free(doc);
}

static void parsed(struct sampling *s, const char *out, size_t olen, int dcgm)
{
	static struct nvsmi_util u[NVSMI_MAX_GPUS];
	char why[300];
	int n = dcgm ? nvsmi_parse_dcgm(out, olen, u, NVSMI_MAX_GPUS, why, sizeof(why))
	             : nvsmi_parse_util(out, olen, u, NVSMI_MAX_GPUS, why, sizeof(why));

	if (n < 0) {
		sampling_end(s, why);
		return;
	}
	store(s, u, n);
	sampling_end(s, NULL);
}

/* ---- the DCGM exporter ---- */

static void dcgm_done(struct docker_call *call, enum rc rc, int status, const char *body,
                      size_t len, const char *err, void *arg)
{
	struct sampling *s = arg;
	char why[200];

	(void)call;
	if (rc != RC_OK) {
		sampling_end(s, err ? err : "the DCGM exporter did not answer");
		return;
	}
	if (status != 200) {
		snprintf(why, sizeof(why), "the DCGM exporter answered HTTP %d", status);
		sampling_end(s, why);
		return;
	}
	parsed(s, body, len, 1);
}

/* cfg.gpu_dcgm_url with "{host}" replaced by the node's host. */
static int dcgm_url(const char *node_url, char *out, size_t outlen)
{
	char host[256];
	const char *t = cfg.gpu_dcgm_url, *at = strstr(t, "{host}");
	int n;

	if (!at) {
		n = snprintf(out, outlen, "%s", t);
		return n < 0 || (size_t)n >= outlen ? -1 : 0;
	}
	if (gpusample_node_host(node_url, host, sizeof(host)) < 0)
		return -1;
	n = snprintf(out, outlen, "%.*s%s%s", (int)(at - t), t, host, at + 6);
	return n < 0 || (size_t)n >= outlen ? -1 : 0;
}

/* ---- the sampler container ---- */

static int container_out(struct docker_call *call, int stream, const char *data, size_t len,
                         void *arg)
{
	struct sampling *s = arg;

	(void)call;
	if (stream != 2 && evbuffer_get_length(s->out) + len < 64 * 1024)
		evbuffer_add(s->out, data, len);
	return 0;
}

static void logs_done(struct docker_call *call, enum rc rc, int status, const char *body,
                      size_t len, const char *err, void *arg)
{
	struct sampling *s = arg;
	size_t olen;

	(void)call;
	(void)body;
	(void)len;
	if (rc != RC_OK || status != 200) {
		sampling_end(s, rc != RC_OK && err ? err : "the engine refused the logs");
		return;
	}
	olen = evbuffer_get_length(s->out);
	parsed(s, olen ? (const char *)evbuffer_pullup(s->out, -1) : "", olen, 0);
}

static void waited(struct docker_call *call, enum rc rc, int status, const char *body, size_t len,
                   const char *err, void *arg)
{
	struct sampling *s = arg;
	struct docker_engine *e = nodes_engine(s->node_id);
	json_t *w;
	char path[200];
	long long code;

	(void)call;
	if (rc != RC_OK || status != 200 || !e) {
		sampling_end(s,
		             rc != RC_OK && err ? err : "waiting for the sampler container failed");
		return;
	}
	w = json_loadb(body, len, 0, NULL);
	code = json_integer_value(json_object_get(w, "StatusCode"));
	json_decref(w);
	if (code != 0) {
		sampling_end(s, "nvidia-smi exited with an error (is the NVIDIA runtime working?)");
		return;
	}
	snprintf(path, sizeof(path), "/containers/%s/logs?stdout=1&stderr=1", s->cid);
	if (!docker_stream(e, "GET", path, NULL, NULL, 0, NULL, 30000, 1, container_out, logs_done,
	                   s))
		sampling_end(s, "could not read the container's output");
}

static void started(struct docker_call *call, enum rc rc, int status, const char *body, size_t len,
                    const char *err, void *arg)
{
	struct sampling *s = arg;
	struct docker_engine *e = nodes_engine(s->node_id);
	char path[200];

	(void)call;
	(void)body;
	(void)len;
	if (rc != RC_OK || status / 100 != 2 || !e) {
		sampling_end(s,
		             rc != RC_OK && err ? err : "the engine could not start the sampler");
		return;
	}
	snprintf(path, sizeof(path), "/containers/%s/wait", s->cid);
	if (!docker_request(e, "POST", path, NULL, NULL, 0, NULL, 60000, waited, s))
		sampling_end(s, "could not wait for the sampler container");
}

static void created(struct docker_call *call, enum rc rc, int status, const char *body, size_t len,
                    const char *err, void *arg)
{
	struct sampling *s = arg;
	struct docker_engine *e = nodes_engine(s->node_id);
	json_t *j;
	const char *id;
	char path[200];

	(void)call;
	if (rc != RC_OK || status != 201 || !e) {
		sampling_end(s,
		             rc != RC_OK && err ? err : "the engine refused to create the sampler");
		return;
	}
	j = json_loadb(body, len, 0, NULL);
	id = json_string_value(json_object_get(j, "Id"));
	snprintf(s->cid, sizeof(s->cid), "%s", id ? id : "");
	json_decref(j);
	if (!*s->cid || strspn(s->cid, "0123456789abcdef") != strlen(s->cid)) {
		s->cid[0] = '\0';
		sampling_end(s, "the engine returned no container id");
		return;
	}
	snprintf(path, sizeof(path), "/containers/%s/start", s->cid);
	if (!docker_request(e, "POST", path, NULL, NULL, 0, NULL, 30000, started, s))
		sampling_end(s, "could not start the sampler container");
}

/* nvidia-smi's utilisation query in a container like discovery's: the
 * NVIDIA runtime, no network, no capabilities, small limits. */
static void sample_container(struct sampling *s, struct docker_engine *e)
{
	static unsigned seq;
	json_t *spec;
	char *body, path[160];

	spec = json_pack("{s:s, s:[s,s,s], s:[s,s], s:{s:s, s:s}, s:{s:s, s:s, s:b, s:[s], s:[s],"
	                 " s:I, s:I, s:I}}",
	                 "Image", cfg.discovery_image, "Cmd", "nvidia-smi",
	                 "--query-gpu=uuid,utilization.gpu,memory.used",
	                 "--format=csv,noheader,nounits", "Env", "NVIDIA_VISIBLE_DEVICES=all",
	                 "NVIDIA_DRIVER_CAPABILITIES=utility", "Labels", "gpucloud.kind", "sampler",
	                 "gpucloud.node", s->name, "HostConfig", "Runtime", "nvidia", "NetworkMode",
	                 "none", "Privileged", 0, "CapDrop", "ALL", "SecurityOpt",
	                 "no-new-privileges", "Memory", (json_int_t)(256 << 20), "MemorySwap",
	                 (json_int_t)(256 << 20), "PidsLimit", (json_int_t)64);
	body = spec ? json_dumps(spec, JSON_COMPACT) : NULL;
	json_decref(spec);
	snprintf(path, sizeof(path), "/containers/create?name=gpucloud-sampler-%lld-%u-%ld",
	         s->node_id, ++seq, (long)getpid());
	if (!body || !docker_request(e, "POST", path, "application/json", body, strlen(body), NULL,
	                             30000, created, s))
		sampling_end(s, "could not ask the engine for a container");
	free(body);
}

/* The first sampling of a node in this process removes the sampler
 * containers a previous process left (it stopped mid-sampling), then
 * samples. */
static long long swept[MAX_INFLIGHT];

static void leftovers_listed(struct docker_call *call, enum rc rc, int status, const char *body,
                             size_t len, const char *err, void *arg)
{
	struct sampling *s = arg;
	struct docker_engine *e = nodes_engine(s->node_id);
	json_t *list, *c;
	size_t i;
	char path[200];

	(void)call;
	(void)err;
	if (!e) {
		sampling_end(s, "the node went away");
		return;
	}
	list = rc == RC_OK && status == 200 ? json_loadb(body, len, 0, NULL) : NULL;
	json_array_foreach(list, i, c)
	{
		const char *id = json_string_value(json_object_get(c, "Id"));

		if (!id || strspn(id, "0123456789abcdef") != strlen(id) || strlen(id) > 80)
			continue;
		snprintf(path, sizeof(path), "/containers/%s?force=1", id);
		docker_request(e, "DELETE", path, NULL, NULL, 0, NULL, 30000, docker_ignore, NULL);
	}
	json_decref(list);
	sample_container(s, e);
}

static void sweep_then_sample(struct sampling *s, struct docker_engine *e)
{
	/* {"label":["gpucloud.kind=sampler","gpucloud.node=<name>"]}; node
	 * names are [a-z0-9._-], nothing to escape */
	char path[400];

	list_put(swept, s->node_id);
	snprintf(path, sizeof(path),
	         "/containers/json?all=1&filters=%%7B%%22label%%22%%3A%%5B%%22gpucloud.kind%%3D"
	         "sampler%%22%%2C%%22gpucloud.node%%3D%s%%22%%5D%%7D",
	         s->name);
	if (!docker_request(e, "GET", path, NULL, NULL, 0, NULL, 15000, leftovers_listed, s))
		sample_container(s, e);
}

/* ---- the round ---- */

static void nodes_read(PGresult *res, enum rc rc, void *arg)
{
	char url[1024];

	(void)arg;
	reading = 0;
	if (rc != RC_OK)
		return;
	for (int i = 0; i < PQntuples(res); i++) {
		long long id = strtoll(db_val(res, i, 0), NULL, 10);
		struct docker_engine *e = nodes_engine(id);
		struct sampling *s;
		int dcgm = cfg.gpu_dcgm_url && *cfg.gpu_dcgm_url;

		if (list_has(inflight, id) || (!dcgm && !e))
			continue;
		s = calloc(1, sizeof(*s));
		if (!s || !(s->out = evbuffer_new())) {
			free(s);
			return;
		}
		s->node_id = id;
		snprintf(s->name, sizeof(s->name), "%s", db_val(res, i, 1));
		if (list_put(inflight, id) < 0) {
			evbuffer_free(s->out);
			free(s);
			return;
		}
		if (!dcgm) {
			if (list_has(swept, id))
				sample_container(s, e);
			else
				sweep_then_sample(s, e);
		} else if (dcgm_url(db_val(res, i, 2), url, sizeof(url)) < 0) {
			sampling_end(s, "gpu_dcgm_url: the node's host does not fit in the URL");
		} else if (!docker_http("GET", url, NULL, 10000, dcgm_done, s)) {
			sampling_end(s, "could not reach the DCGM exporter");
		}
	}
}

void gpusample_run(void)
{
	if (reading)
		return;
	reading = 1;
	/* nodes that answer and hold measured GPUs; declared ones are the
	 * admin's word and never sampled */
	db_query("SELECT n.id, n.name, n.url FROM nodes n WHERE n.health = 'up'"
	         " AND EXISTS (SELECT 1 FROM gpus g WHERE g.node_id = n.id AND NOT g.simulated)"
	         " ORDER BY n.id",
	         0, NULL, nodes_read, NULL);
}

static void on_cron(struct cron_section *s, void *arg)
{
	(void)arg;
	if (!leader_is()) {
		cron_soon(s, 1000);
		return;
	}
	gpusample_run();
}

int gpusample_init(void)
{
	int has_image = cfg.discovery_image && *cfg.discovery_image;
	int has_dcgm = cfg.gpu_dcgm_url && *cfg.gpu_dcgm_url;

	if (cfg.gpu_sample_interval_s <= 0 || (!has_image && !has_dcgm))
		return 0;
	return cron_every("gpusample", cfg.gpu_sample_interval_s * 1000,
	                  cfg.gpu_sample_interval_s * 1000, on_cron, NULL)
	               ? 0
	               : -1;
}
