/* images.c — images on nodes: pulls and pushes through a node's engine with
 * the registry's credentials, their progress, and the per-node state kept
 * in image_nodes.
 *
 * Owns: the pulls in flight in this process (one per image and node; later
 * callers join it), the X-Registry-Auth header (built from the sealed secret
 * for one call and wiped after), the progress stream parser, reading an
 * image's CUDA version from its config after a pull, and the "test
 * credentials" call.  Does not own the catalog API (api_images.c) or the
 * registries API (api_registries.c).
 *
 * The engine answers a pull with 200 and reports failure inside the stream
 * ({"error": ...} lines), so success is only believed after the stream ended
 * clean and the image inspects as present.
 */
#include "engine/images.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <jansson.h>

#include "base/clock.h"
#include "base/cron.h"
#include "base/crypto.h"
#include "db/db.h"
#include "engine/docker.h"
#include "base/log.h"
#include "engine/nodes.h"

#define INSPECT_TIMEOUT_MS 30000
#define PULL_TIMEOUT_MS    (2 * 3600 * 1000) /* NGC images are tens of GB */
#define PROGRESS_WRITE_MS  300
#define SWEEP_S            30  /* how often stale pulls are looked for */
#define STALE_S            120 /* a 'pulling' row this long untouched has no pull behind it */
#define STALE_ERROR        "pull interrupted (gpucloudd restarted)"

/* ---- pure parts ---- */

static int64_t jint(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);

	return json_is_integer(v) && json_integer_value(v) > 0 ? json_integer_value(v) : 0;
}

static struct images_layer *layer_of(struct images_progress *p, const char *id)
{
	int i;

	for (i = 0; i < p->nlayers; i++)
		if (strcmp(p->layers[i].id, id) == 0)
			return &p->layers[i];
	if (p->nlayers == IMAGES_MAX_LAYERS)
		return NULL;
	memset(&p->layers[i], 0, sizeof(p->layers[i]));
	snprintf(p->layers[i].id, sizeof(p->layers[i].id), "%s", id);
	p->nlayers++;
	return &p->layers[i];
}

/* One JSON line of the stream. */
static void progress_line(struct images_progress *p, const char *line, size_t len)
{
	json_t *o = json_loadb(line, len, 0, NULL), *detail;
	const char *status, *id, *err;
	struct images_layer *l;

	if (!json_is_object(o))
		goto out;
	p->lines++;
	err = json_string_value(json_object_get(o, "error"));
	if (!err)
		err = json_string_value(
		        json_object_get(json_object_get(o, "errorDetail"), "message"));
	if (err) {
		if (!p->failed)
			snprintf(p->error, sizeof(p->error), "%s", *err ? err : "unknown error");
		p->failed = 1;
		goto out;
	}
	status = json_string_value(json_object_get(o, "status"));
	id = json_string_value(json_object_get(o, "id"));
	if (!status || !id || !*id)
		goto out;
	/* "Pulling from x" and "Digest: ..." carry the tag as id: only layer
	 * statuses make a layer. */
	detail = json_object_get(o, "progressDetail");
	if (strcmp(status, "Pulling fs layer") == 0 || strcmp(status, "Waiting") == 0 ||
	    strcmp(status, "Preparing") == 0) {
		layer_of(p, id);
	} else if (strcmp(status, "Downloading") == 0 || strcmp(status, "Pushing") == 0) {
		if ((l = layer_of(p, id))) {
			l->dl_cur = jint(detail, "current");
			if (jint(detail, "total"))
				l->dl_total = jint(detail, "total");
		}
	} else if (strcmp(status, "Verifying Checksum") == 0 ||
	           strcmp(status, "Download complete") == 0) {
		if ((l = layer_of(p, id)))
			l->downloaded = 1;
	} else if (strcmp(status, "Extracting") == 0) {
		if ((l = layer_of(p, id))) {
			l->downloaded = 1;
			l->ex_cur = jint(detail, "current");
			if (jint(detail, "total"))
				l->ex_total = jint(detail, "total");
		}
	} else if (strcmp(status, "Pull complete") == 0 || strcmp(status, "Already exists") == 0 ||
	           strcmp(status, "Pushed") == 0 || strcmp(status, "Layer already exists") == 0 ||
	           strncmp(status, "Mounted from", 12) == 0) {
		if ((l = layer_of(p, id)))
			l->done = 1;
	}
out:
	json_decref(o);
}

long images_progress_feed(struct images_progress *p, const char *buf, size_t len)
{
	size_t off = 0;
	const char *nl;

	while (off < len && (nl = memchr(buf + off, '\n', len - off))) {
		size_t n = (size_t)(nl - (buf + off));
		if (n > 0 && n <= IMAGES_LINE_MAX)
			progress_line(p, buf + off, n);
		off += n + 1;
	}
	if (len - off > IMAGES_LINE_MAX)
		return -1;
	return (long)off;
}

static double frac(int64_t cur, int64_t total)
{
	if (total <= 0)
		return 0;
	return cur >= total ? 1.0 : (double)cur / (double)total;
}

int images_progress_percent(const struct images_progress *p)
{
	double sum = 0;
	int all_done = p->nlayers > 0, pct;

	for (int i = 0; i < p->nlayers; i++) {
		const struct images_layer *l = &p->layers[i];
		if (l->done) {
			sum += 1;
			continue;
		}
		all_done = 0;
		/* downloading is most of the wait; extracting the rest */
		sum += 0.7 * (l->downloaded ? 1.0 : frac(l->dl_cur, l->dl_total)) +
		       0.3 * frac(l->ex_cur, l->ex_total);
	}
	if (all_done)
		return 100;
	if (p->nlayers == 0)
		return 0;
	pct = (int)(100.0 * sum / p->nlayers);
	return pct > 99 ? 99 : pct < 0 ? 0 : pct;
}

int images_cuda_parse(const char *s)
{
	long major, minor = 0;
	char *end;

	if (!s)
		return -1;
	if (*s == 'v' || *s == 'V')
		s++;
	if (*s < '0' || *s > '9')
		return -1;
	major = strtol(s, &end, 10);
	if (*end == '.') {
		s = end + 1;
		if (*s < '0' || *s > '9')
			return -1;
		minor = strtol(s, &end, 10);
		if (*end == '.') { /* patch level: ignored */
			s = end + 1;
			if (*s < '0' || *s > '9')
				return -1;
			strtol(s, &end, 10);
		}
	}
	if (*end != '\0' || major < 1 || major > 99 || minor < 0 || minor > 99)
		return -1;
	return (int)(major * 1000 + minor * 10);
}

void images_cuda_format(int v, char *out, size_t outlen)
{
	if (v <= 0)
		snprintf(out, outlen, "%s", "");
	else
		snprintf(out, outlen, "%d.%d", v / 1000, (v % 1000) / 10);
}

int images_ref_valid(const char *ref)
{
	size_t n = ref ? strlen(ref) : 0, name_end;
	const char *slash, *at, *colon;

	if (n == 0 || n > 255)
		return 0;
	if (strspn(ref, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/:@") !=
	    n)
		return 0;
	if (!((ref[0] >= 'a' && ref[0] <= 'z') || (ref[0] >= '0' && ref[0] <= '9')))
		return 0;
	if (strstr(ref, "//") || strstr(ref, "..") || strstr(ref, "/:") || strstr(ref, "/@") ||
	    ref[n - 1] == '/' || ref[n - 1] == ':' || ref[n - 1] == '@')
		return 0;
	at = strchr(ref, '@');
	if (at && strchr(at + 1, '@'))
		return 0;
	/* the name (before the tag or digest) is lower-case; a tag need not be */
	slash = strrchr(ref, '/');
	colon = strrchr(ref, ':');
	if (at)
		name_end = (size_t)(at - ref);
	else if (colon && (!slash || colon > slash))
		name_end = (size_t)(colon - ref);
	else
		name_end = n;
	for (size_t i = 0; i < name_end; i++)
		if (ref[i] >= 'A' && ref[i] <= 'Z')
			return 0;
	return 1;
}

int images_ref_split(const char *ref, char *repo, size_t repolen, char *tag, size_t taglen)
{
	const char *at = strchr(ref, '@'), *slash = strrchr(ref, '/'), *colon;
	size_t rn;

	if (at) {
		rn = (size_t)(at - ref);
		if ((size_t)snprintf(tag, taglen, "%s", at + 1) >= taglen)
			return -1;
	} else {
		colon = strrchr(ref, ':');
		if (colon && (!slash || colon > slash)) {
			rn = (size_t)(colon - ref);
			if ((size_t)snprintf(tag, taglen, "%s", colon + 1) >= taglen)
				return -1;
		} else {
			rn = strlen(ref);
			snprintf(tag, taglen, "%s", "latest");
		}
	}
	if (rn == 0 || rn >= repolen)
		return -1;
	memcpy(repo, ref, rn);
	repo[rn] = '\0';
	return 0;
}

void images_secret_aad(const char *registry_name, const char *server, char *out, size_t outlen)
{
	snprintf(out, outlen, "registry-secret:%s@%s", registry_name, server ? server : "");
}

/* ---- pulls and pushes ---- */

struct waiter {
	images_ready_cb cb;
	void *arg;
	struct waiter *next;
};

enum pull_kind { PULL, PUSH, AUTH_TEST };

struct pull {
	enum pull_kind kind;
	long long image_id, node_id; /* AUTH_TEST: image_id is the registry id */
	char ref[300], repo[300], tag[160];
	char *auth;      /* "X-Registry-Auth: ..." (wiped when freed) */
	char *auth_body; /* AUTH_TEST: the JSON for POST /auth (wiped when freed) */
	int cuda_admin;  /* the admin set the CUDA version: do not read it */
	int cuda;        /* what the image's config says (0: nothing) */
	struct docker_call *call;
	struct evbuffer *buf; /* partial line of the stream */
	struct images_progress *prog;
	int last_pct;
	double last_write;
	int writing; /* a progress UPDATE in flight */
	int dead;    /* delivered; freed when the UPDATE returns */
	int told;    /* the waiters heard already (found present, no pull) */
	enum rc rc;
	char err[700];
	struct waiter *waiters;
	struct pull *next;
};

static struct pull *pulls;

static void wipe_free(char *s)
{
	if (s) {
		explicit_bzero(s, strlen(s));
		free(s);
	}
}

static void pull_free(struct pull *p)
{
	struct waiter *w, *next;

	for (w = p->waiters; w; w = next) {
		next = w->next;
		free(w);
	}
	wipe_free(p->auth);
	wipe_free(p->auth_body);
	if (p->buf)
		evbuffer_free(p->buf);
	free(p->prog);
	free(p);
}

static void unlink_pull(struct pull *p)
{
	for (struct pull **pp = &pulls; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			return;
		}
}

/* Fires the waiters and frees p (already unlinked). */
static void tell(struct pull *p)
{
	if (p->told)
		return;
	p->told = 1;
	for (struct waiter *w = p->waiters; w; w = w->next)
		w->cb(p->rc, p->rc == RC_OK ? "" : p->err, w->arg);
}

static void deliver(struct pull *p)
{
	tell(p);
	if (p->writing)
		p->dead = 1;
	else
		pull_free(p);
}

static void state_written(PGresult *res, enum rc rc, void *arg)
{
	(void)res;
	if (rc != RC_OK)
		LOG_W("images", "could not record a pull's result: %s", rc_code(rc));
	deliver(arg);
}

/* The image's CUDA version changes to the one read ($7). */
#define CUDA_NEW "($7::int > 0 AND cuda_source <> 'admin' AND cuda_min <> $7::int)"

/* Ends p with rc and (for failures) a message; records the node's state
 * first so the API shows it by the time the callers hear. */
static void finish(struct pull *p, enum rc rc, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static void finish(struct pull *p, enum rc rc, const char *fmt, ...)
{
	char img[24], node[24], pct[16], ver[16], enc[16];
	const char *params[7] = { img, node, NULL, pct, NULL, ver, enc };
	va_list ap;

	unlink_pull(p);
	p->call = NULL;
	p->rc = rc;
	if (fmt) {
		va_start(ap, fmt);
		vsnprintf(p->err, sizeof(p->err), fmt, ap);
		va_end(ap);
	}
	if (rc != RC_OK)
		LOG_I("images", "%s of '%s' on node %lld failed: %s",
		      p->kind == PUSH   ? "push"
		      : p->kind == PULL ? "pull"
		                        : "credentials test",
		      p->ref, p->node_id, p->err);
	if (p->kind != PULL) {
		/* pushes and tests leave the node's copy as it was */
		deliver(p);
		return;
	}
	snprintf(img, sizeof(img), "%lld", p->image_id);
	snprintf(node, sizeof(node), "%lld", p->node_id);
	snprintf(pct, sizeof(pct), "%d", rc == RC_OK ? 100 : p->last_pct);
	params[2] = rc == RC_OK ? "present" : "failed";
	params[4] = rc == RC_OK ? "" : p->err;
	images_cuda_format(rc == RC_OK ? p->cuda : 0, ver, sizeof(ver));
	snprintf(enc, sizeof(enc), "%d", rc == RC_OK ? p->cuda : 0);
	/* one statement with the CUDA version read from the image, so whoever
	 * sees the node present sees the version too */
	/* ... and an image added unverified is verified by its first pull */
	db_query("WITH cuda AS (UPDATE images SET"
	         "  cuda_version = CASE WHEN " CUDA_NEW " THEN $6 ELSE cuda_version END,"
	         "  cuda_min = CASE WHEN " CUDA_NEW " THEN $7::int ELSE cuda_min END,"
	         "  cuda_source = CASE WHEN " CUDA_NEW " THEN 'image' ELSE cuda_source END,"
	         "  verified = verified OR $3 = 'present', updated_at = now()"
	         "  WHERE id = $1 AND (" CUDA_NEW " OR ($3 = 'present' AND NOT verified)))"
	         " INSERT INTO image_nodes (image_id, node_id, state, progress, error)"
	         " SELECT $1, $2, $3, $4::int, $5 WHERE EXISTS (SELECT 1 FROM images WHERE id = $1)"
	         " AND EXISTS (SELECT 1 FROM nodes WHERE id = $2)"
	         " ON CONFLICT (image_id, node_id) DO UPDATE SET state = EXCLUDED.state,"
	         " progress = EXCLUDED.progress, error = EXCLUDED.error, updated_at = now()",
	         7, params, state_written, p);
}

/* The engine's {"message": ...} of an error answer, or a fallback. */
static void engine_message(const char *body, size_t len, int status, char *out, size_t outlen)
{
	json_t *j = json_loadb(body ? body : "", len, 0, NULL);
	const char *m = json_string_value(json_object_get(j, "message"));

	if (m && *m)
		snprintf(out, outlen, "%s", m);
	else
		snprintf(out, outlen, "the engine answered HTTP %d", status);
	json_decref(j);
}

/* The CUDA version an image's config declares: the CUDA_VERSION variable
 * of NVIDIA's images, or the com.nvidia.cuda.version label. */
static int config_cuda(json_t *inspect)
{
	json_t *config = json_object_get(inspect, "Config"), *env, *v;
	const char *label;
	size_t i;

	label = json_string_value(
	        json_object_get(json_object_get(config, "Labels"), "com.nvidia.cuda.version"));
	if (label && images_cuda_parse(label) > 0)
		return images_cuda_parse(label);
	env = json_object_get(config, "Env");
	json_array_foreach(env, i, v)
	{
		const char *e = json_string_value(v);
		if (e && strncmp(e, "CUDA_VERSION=", 13) == 0 && images_cuda_parse(e + 13) > 0)
			return images_cuda_parse(e + 13);
	}
	return 0;
}

static void inspected(struct docker_call *call, enum rc rc, int status, const char *body,
                      size_t len, const char *err, void *arg);

static void inspect(struct pull *p)
{
	struct docker_engine *e = nodes_engine(p->node_id);
	char path[400];

	if (!e) {
		finish(p, RC_UNAVAILABLE,
		       "node %lld is not reachable from this server (unknown or no engine client "
		       "yet)",
		       p->node_id);
		return;
	}
	snprintf(path, sizeof(path), "/images/%s/json", p->ref);
	p->call = docker_request(e, "GET", path, NULL, NULL, 0, NULL, INSPECT_TIMEOUT_MS, inspected,
	                         p);
	if (!p->call)
		finish(p, RC_NOMEM, "could not ask the engine about image '%s'", p->ref);
}

/* Appends the percent-encoding of s to b. */
static void add_encoded(struct evbuffer *b, const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		    c == '-' || c == '_' || c == '.' || c == '~')
			evbuffer_add(b, s, 1);
		else
			evbuffer_add_printf(b, "%%%02X", c);
	}
}

static void write_progress(struct pull *p);

static void progress_written(PGresult *res, enum rc rc, void *arg)
{
	struct pull *p = arg;

	(void)res;
	(void)rc;

	p->writing = 0;
	if (p->dead)
		pull_free(p);
}

/* Records the percent now and then (and only while the row says pulling,
 * so a late write cannot undo the final state). */
static void write_progress(struct pull *p)
{
	char img[24], node[24], pct[16];
	const char *params[3] = { img, node, pct };
	int v = images_progress_percent(p->prog);
	double t = clock_now_ms();

	if (p->writing || v == p->last_pct || t - p->last_write < PROGRESS_WRITE_MS)
		return;
	p->last_pct = v;
	p->last_write = t;
	p->writing = 1;
	snprintf(img, sizeof(img), "%lld", p->image_id);
	snprintf(node, sizeof(node), "%lld", p->node_id);
	snprintf(pct, sizeof(pct), "%d", v);
	db_query("UPDATE image_nodes SET progress = $3::int, updated_at = now()"
	         " WHERE image_id = $1 AND node_id = $2 AND state = 'pulling'",
	         3, params, progress_written, p);
}

static int stream_data(struct docker_call *call, int stream, const char *data, size_t len,
                       void *arg)
{
	struct pull *p = arg;
	size_t have;
	long used;

	(void)call;
	(void)stream;
	if (evbuffer_add(p->buf, data, len) < 0)
		return -1;
	have = evbuffer_get_length(p->buf);
	used = images_progress_feed(p->prog, (const char *)evbuffer_pullup(p->buf, -1), have);
	if (used < 0) {
		p->prog->failed = 1;
		snprintf(p->prog->error, sizeof(p->prog->error),
		         "the engine sent an unreadable progress stream");
		return -1;
	}
	evbuffer_drain(p->buf, (size_t)used);
	if (p->kind == PULL)
		write_progress(p);
	return 0;
}

static void stream_done(struct docker_call *call, enum rc rc, int status, const char *body,
                        size_t len, const char *err, void *arg)
{
	struct pull *p = arg;
	const char *what = p->kind == PUSH ? "push" : "pull";
	char msg[600];

	(void)call;
	p->call = NULL;
	/* a last line without its newline */
	if (rc == RC_OK && evbuffer_get_length(p->buf) && evbuffer_add(p->buf, "\n", 1) == 0)
		images_progress_feed(p->prog, (const char *)evbuffer_pullup(p->buf, -1),
		                     evbuffer_get_length(p->buf));
	if (p->prog->failed) {
		finish(p, RC_DOCKER, "could not %s image '%s': %s", what, p->ref, p->prog->error);
		return;
	}
	if (rc != RC_OK) {
		finish(p, rc, "could not %s image '%s': %s", what, p->ref, err);
		return;
	}
	if (status / 100 != 2) {
		engine_message(body, len, status, msg, sizeof(msg));
		finish(p, status == 404 ? RC_NOTFOUND : RC_DOCKER, "could not %s image '%s': %s",
		       what, p->ref, msg);
		return;
	}
	if (p->kind == PUSH) {
		finish(p, RC_OK, NULL);
		return;
	}
	/* believe it when the engine has it */
	inspect(p);
}

static void start_stream(struct pull *p)
{
	struct docker_engine *e = nodes_engine(p->node_id);
	const char *headers[2] = { p->auth, NULL };
	struct evbuffer *path = evbuffer_new();

	if (!e || !path) {
		if (path)
			evbuffer_free(path);
		finish(p, e ? RC_NOMEM : RC_UNAVAILABLE,
		       "node %lld is not reachable from this server", p->node_id);
		return;
	}
	if (p->kind == PULL) {
		evbuffer_add_printf(path, "/images/create?fromImage=");
		add_encoded(path, p->repo);
		evbuffer_add_printf(path, "&tag=");
		add_encoded(path, p->tag);
	} else {
		evbuffer_add_printf(path, "/images/%s/push?tag=", p->repo);
		add_encoded(path, p->tag);
	}
	evbuffer_add(path, "", 1);
	LOG_I("images", "%s '%s' on node %lld", p->kind == PULL ? "pulling" : "pushing", p->ref,
	      p->node_id);
	p->call = docker_stream(e, "POST", (const char *)evbuffer_pullup(path, -1), NULL, NULL, 0,
	                        p->auth ? headers : NULL, PULL_TIMEOUT_MS, 0, stream_data,
	                        stream_done, p);
	evbuffer_free(path);
	if (!p->call)
		finish(p, RC_NOMEM, "could not ask the engine to pull image '%s'", p->ref);
}

static void marked_pulling(PGresult *res, enum rc rc, void *arg)
{
	struct pull *p = arg;

	(void)res;
	if (rc != RC_OK) {
		finish(p, rc, "could not record the pull of '%s' (database %s)", p->ref,
		       rc_code(rc));
		return;
	}
	start_stream(p);
}

static void inspected(struct docker_call *call, enum rc rc, int status, const char *body,
                      size_t len, const char *err, void *arg)
{
	struct pull *p = arg;
	char img[24], node[24], msg[600];
	const char *params[2] = { img, node };
	json_t *j;

	(void)call;
	p->call = NULL;
	snprintf(img, sizeof(img), "%lld", p->image_id);
	snprintf(node, sizeof(node), "%lld", p->node_id);
	if (rc != RC_OK) {
		finish(p, rc, "could not look for image '%s': %s", p->ref, err);
		return;
	}
	if (status == 200) {
		j = json_loadb(body, len, 0, NULL);
		p->cuda = p->cuda_admin ? 0 : config_cuda(j);
		json_decref(j);
		if (!p->prog->lines) {
			/* there before we looked (the common case of every
			 * launch): the row most likely says present already, so
			 * the waiters go on at once and the write follows instead
			 * of costing a launch one more database round trip */
			p->rc = RC_OK;
			unlink_pull(p);
			tell(p);
		}
		finish(p, RC_OK, NULL);
		return;
	}
	if (status != 404) {
		engine_message(body, len, status, msg, sizeof(msg));
		finish(p, RC_DOCKER, "could not look for image '%s': %s", p->ref, msg);
		return;
	}
	if (p->prog->lines) {
		/* pulled clean, yet not there */
		finish(p, RC_DOCKER, "image '%s' is not on the node after its pull", p->ref);
		return;
	}
	db_query("INSERT INTO image_nodes (image_id, node_id, state, progress, error)"
	         " VALUES ($1, $2, 'pulling', 0, '') ON CONFLICT (image_id, node_id) DO UPDATE"
	         " SET state = 'pulling', progress = 0, error = '', updated_at = now()",
	         2, params, marked_pulling, p);
}

/* Builds p->auth (and for tests p->auth_body) from the registry's row. */
static int build_auth(struct pull *p, const char *name, const char *server, const char *user,
                      const char *sealed)
{
	char aad[400], *secret = NULL, *doc = NULL, *b64 = NULL;
	size_t slen = 0, dlen, blen;
	json_t *j = NULL;
	int ret = -1;

	images_secret_aad(name, server, aad, sizeof(aad));
	secret = sealed && *sealed ? crypto_open(sealed, aad, &slen) : NULL;
	if (sealed && *sealed && !secret) {
		snprintf(p->err, sizeof(p->err),
		         "cannot decrypt the credentials of registry '%s' (is the master key the "
		         "one they were stored with?)",
		         name);
		goto out;
	}
	j = json_pack("{s:s, s:s, s:s}", "username", user ? user : "", "password",
	              secret ? secret : "", "serveraddress", server);
	doc = j ? json_dumps(j, JSON_COMPACT) : NULL;
	if (!doc)
		goto out;
	dlen = strlen(doc);
	blen = 4 * ((dlen + 2) / 3) + 1;
	b64 = malloc(blen + 24);
	if (!b64)
		goto out;
	/* base64url with padding: what the engine's decoder (Go's
	 * base64.URLEncoding) reads */
	{
		size_t n = crypto_b64url(doc, dlen, b64, blen);
		if (n == 0)
			goto out;
		while (n % 4)
			b64[n++] = '=';
		b64[n] = '\0';
	}
	p->auth = malloc(strlen(b64) + 20);
	if (!p->auth)
		goto out;
	snprintf(p->auth, strlen(b64) + 20, "X-Registry-Auth: %s", b64);
	if (p->kind == AUTH_TEST) {
		p->auth_body = doc;
		doc = NULL; /* handed off */
	}
	ret = 0;
out:
	if (secret) {
		explicit_bzero(secret, slen);
		free(secret);
	}
	wipe_free(doc);
	wipe_free(b64);
	if (j) {
		/* jansson keeps its copy of the password until freed */
		json_t *pw = json_object_get(j, "password");
		if (pw && json_string_length(pw))
			explicit_bzero((char *)json_string_value(pw), json_string_length(pw));
		json_decref(j);
	}
	return ret;
}

static void auth_tested(struct docker_call *call, enum rc rc, int status, const char *body,
                        size_t len, const char *err, void *arg)
{
	struct pull *p = arg;
	json_t *j;
	char msg[600];

	(void)call;
	p->call = NULL;
	if (rc != RC_OK) {
		finish(p, rc, "%s", err);
		return;
	}
	if (status / 100 != 2) {
		engine_message(body, len, status, msg, sizeof(msg));
		finish(p, RC_FORBIDDEN, "%s", msg);
		return;
	}
	j = json_loadb(body, len, 0, NULL);
	snprintf(p->err, sizeof(p->err), "%s",
	         json_string_value(json_object_get(j, "Status"))
	                 ? json_string_value(json_object_get(j, "Status"))
	                 : "credentials accepted");
	json_decref(j);
	/* for tests the message travels on success too */
	unlink_pull(p);
	p->rc = RC_OK;
	for (struct waiter *w = p->waiters; w; w = w->next)
		w->cb(RC_OK, p->err, w->arg);
	pull_free(p);
}

static void loaded(PGresult *res, enum rc rc, void *arg)
{
	struct pull *p = arg;
	struct docker_engine *e;

	if (rc != RC_OK) {
		finish(p, rc, "could not read the image's record (database %s)", rc_code(rc));
		return;
	}
	if (PQntuples(res) != 1) {
		finish(p, RC_NOTFOUND, "no such %s %lld",
		       p->kind == AUTH_TEST ? "registry" : "image", p->image_id);
		return;
	}
	/* reference, registry name, server, username, secret, cuda_source */
	snprintf(p->ref, sizeof(p->ref), "%s", db_val(res, 0, 0));
	p->cuda_admin = db_val(res, 0, 5) && strcmp(db_val(res, 0, 5), "admin") == 0;
	if (p->kind != AUTH_TEST &&
	    images_ref_split(p->ref, p->repo, sizeof(p->repo), p->tag, sizeof(p->tag)) < 0) {
		finish(p, RC_INVALID, "image reference '%s' cannot be pulled", p->ref);
		return;
	}
	if (db_val(res, 0, 1) && build_auth(p, db_val(res, 0, 1), db_val(res, 0, 2),
	                                    db_val(res, 0, 3), db_val(res, 0, 4)) < 0) {
		if (!*p->err)
			snprintf(p->err, sizeof(p->err), "out of memory");
		finish(p, RC_INVALID, NULL);
		return;
	}
	if (p->kind == PULL) {
		inspect(p);
		return;
	}
	if (p->kind == PUSH) {
		start_stream(p);
		return;
	}
	e = nodes_engine(p->node_id);
	if (!e) {
		finish(p, RC_UNAVAILABLE, "node %lld is not reachable from this server",
		       p->node_id);
		return;
	}
	p->call = docker_request(e, "POST", "/auth", "application/json", p->auth_body,
	                         strlen(p->auth_body), NULL, INSPECT_TIMEOUT_MS, auth_tested, p);
	if (!p->call)
		finish(p, RC_NOMEM, "could not ask the engine to check the credentials");
}

static int begin(enum pull_kind kind, long long id, long long node_id, images_ready_cb cb,
                 void *arg)
{
	struct pull *p;
	struct waiter *w = calloc(1, sizeof(*w));
	char ids[24];
	const char *params[1] = { ids };

	if (!w)
		return -1;
	w->cb = cb;
	w->arg = arg;
	if (kind == PULL)
		for (p = pulls; p; p = p->next)
			if (p->kind == PULL && p->image_id == id && p->node_id == node_id) {
				w->next = p->waiters;
				p->waiters = w;
				return 0;
			}
	p = calloc(1, sizeof(*p));
	if (!p || !(p->buf = evbuffer_new()) || !(p->prog = calloc(1, sizeof(*p->prog)))) {
		if (p)
			pull_free(p);
		free(w);
		return -1;
	}
	p->kind = kind;
	p->image_id = id;
	p->node_id = node_id;
	p->waiters = w;
	p->last_pct = 0;
	p->next = pulls;
	pulls = p;
	snprintf(ids, sizeof(ids), "%lld", id);
	if (kind == AUTH_TEST)
		db_query("SELECT r.server, r.name, r.server, r.username, r.secret_sealed, ''"
		         " FROM registries r WHERE r.id = $1",
		         1, params, loaded, p);
	else
		db_query("SELECT i.reference, r.name, r.server, r.username, r.secret_sealed,"
		         " i.cuda_source FROM images i LEFT JOIN registries r ON r.id = "
		         "i.registry_id"
		         " WHERE i.id = $1",
		         1, params, loaded, p);
	return 0;
}

int images_ensure(long long image_id, long long node_id, images_ready_cb cb, void *arg)
{
	return begin(PULL, image_id, node_id, cb, arg);
}

int images_push(long long image_id, long long node_id, images_ready_cb cb, void *arg)
{
	return begin(PUSH, image_id, node_id, cb, arg);
}

int images_registry_test(long long registry_id, long long node_id, images_ready_cb cb, void *arg)
{
	return begin(AUTH_TEST, registry_id, node_id, cb, arg);
}

/* ---- stale pulls ----
 *
 * A pull runs inside the gpucloudd that started it, so a row left
 * 'pulling' by a process that died would say so forever (and whoever waits
 * on it would wait).  Every process touches the rows of its own pulls at
 * each sweep and fails the rows nobody touched for STALE_S, in one
 * statement; with SWEEP_S well under STALE_S a live pull on any replica is
 * never taken for a dead one, even when its percent does not move. */

static struct cron_section *sweep_section;
static int sweeping; /* a sweep statement in flight */

static void swept(PGresult *res, enum rc rc, void *arg)
{
	(void)arg;
	sweeping = 0;
	if (rc != RC_OK) {
		LOG_W("images", "could not look for stale pulls: %s", rc_code(rc));
		return;
	}
	if (PQntuples(res) == 1 && strcmp(db_val(res, 0, 0), "0") != 0)
		LOG_I("images", "%s pull(s) left by a gpucloudd that stopped marked failed",
		      db_val(res, 0, 0));
}

static void sweep(struct cron_section *s, void *arg)
{
	struct evbuffer *imgs = evbuffer_new(), *nodes = evbuffer_new();
	char stale[16], *iv = NULL, *nv = NULL;
	const char *params[4];
	size_t n;

	(void)s;
	(void)arg;
	if (sweeping || !imgs || !nodes)
		goto out;
	/* this process's pulls as two arrays: "{1,2}" and "{5,6}" */
	evbuffer_add(imgs, "{", 1);
	evbuffer_add(nodes, "{", 1);
	for (struct pull *p = pulls; p; p = p->next) {
		if (p->kind != PULL || p->dead)
			continue;
		evbuffer_add_printf(imgs, "%s%lld", evbuffer_get_length(imgs) > 1 ? "," : "",
		                    p->image_id);
		evbuffer_add_printf(nodes, "%s%lld", evbuffer_get_length(nodes) > 1 ? "," : "",
		                    p->node_id);
	}
	evbuffer_add(imgs, "}", 2);
	evbuffer_add(nodes, "}", 2);
	n = evbuffer_get_length(imgs);
	iv = (char *)evbuffer_pullup(imgs, (ev_ssize_t)n);
	n = evbuffer_get_length(nodes);
	nv = (char *)evbuffer_pullup(nodes, (ev_ssize_t)n);
	if (!iv || !nv)
		goto out;
	snprintf(stale, sizeof(stale), "%d", STALE_S);
	params[0] = iv;
	params[1] = nv;
	params[2] = STALE_ERROR;
	params[3] = stale;
	sweeping = 1;
	db_query("WITH mine AS (SELECT * FROM unnest($1::bigint[], $2::bigint[])"
	         "  AS m(image_id, node_id)),"
	         " beat AS (UPDATE image_nodes i SET updated_at = now() FROM mine"
	         "  WHERE i.image_id = mine.image_id AND i.node_id = mine.node_id"
	         "  AND i.state = 'pulling'),"
	         " dead AS (UPDATE image_nodes i SET state = 'failed', error = $3,"
	         "  updated_at = now()"
	         "  WHERE i.state = 'pulling'"
	         "  AND i.updated_at < now() - make_interval(secs => $4::int)"
	         "  AND NOT EXISTS (SELECT 1 FROM mine"
	         "   WHERE mine.image_id = i.image_id AND mine.node_id = i.node_id)"
	         "  RETURNING 1)"
	         " SELECT count(*) FROM dead",
	         4, params, swept, NULL);
out:
	if (imgs)
		evbuffer_free(imgs);
	if (nodes)
		evbuffer_free(nodes);
}

int images_init(struct event_base *base)
{
	(void)base;
	/* a cron section every SWEEP_S, the first one at start-up */
	sweep_section = cron_every("images", SWEEP_S * 1000, 0, sweep, NULL);
	return sweep_section ? 0 : -1;
}

void images_shutdown(void)
{
	sweep_section = NULL; /* freed with the cron */
}
