/* driver.c — the workload driver loop (see driver.h).
 *
 * Owns: per kind, the cron section, the pass in flight (one at a time) and
 * the kick that came during it; the wake-up subscriptions; the cluster id;
 * the launches in flight and their engine steps (the user's account in the
 * container's /etc/passwd and /etc/group among them), and telling nodes.c
 * what each launch came to on its node (an engine's own errors, HTTP 5xx,
 * count towards the node's degraded state; a start resets it).
 * Does not own: what a row means (the kind's decide()), state changes
 * (workload.c), leadership (db/leader.c).
 */
#include "work/driver.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/cron.h"
#include "base/events.h"
#include "base/log.h"
#include "db/db.h"
#include "db/leader.h"
#include "engine/nodes.h"
#include "storage/tar.h"
#include "work/passwd.h"

#define MAX_KINDS 4

struct loop {
	const struct driver_kind *kind;
	struct cron_section *section;
	int busy;   /* a pass (or the cluster id read) is out */
	int kicked; /* a wake-up came meanwhile: pass again soon */
};

static struct loop loops[MAX_KINDS];
static int nloops;
static char cluster[40];
static long long passes;

const char *driver_cluster_id(void)
{
	return cluster;
}

static void rows(PGresult *res, enum rc rc, void *arg)
{
	struct loop *l = arg;

	l->busy = 0;
	if (rc == RC_OK && leader_is())
		for (int i = 0; i < PQntuples(res); i++)
			l->kind->decide(res, i);
	if (l->kicked) {
		l->kicked = 0;
		cron_soon(l->section, 5);
	}
}

static void cluster_loaded(PGresult *res, enum rc rc, void *arg)
{
	struct loop *l = arg;

	l->busy = 0;
	if (rc == RC_OK && PQntuples(res) == 1)
		snprintf(cluster, sizeof(cluster), "%s", db_val(res, 0, 0));
}

/* cron: one pass of one kind, on the leader only. */
static void on_cron(struct cron_section *s, void *arg)
{
	struct loop *l = arg;

	(void)s;
	if (l->busy) {
		l->kicked = 1;
		return;
	}
	if (!cluster[0]) {
		l->busy = 1;
		db_query("SELECT cluster_id FROM cluster_identity", 0, NULL, cluster_loaded, l);
		return;
	}
	if (!leader_is())
		return;
	passes++;
	l->busy = 1;
	db_query(l->kind->pass_sql, 0, NULL, rows, l);
}

/* EV_WORKLOAD_CHANGED, EV_ALLOC_GRANTED: every kind passes soon (a grant
 * or a change does not say whose workload it is; a pass is one read). */
static void on_wake(enum events_kind kind, void *arg)
{
	(void)kind;
	(void)arg;
	for (int i = 0; i < nloops; i++) {
		loops[i].kicked = 1;
		cron_soon(loops[i].section, 1);
	}
}

int driver_register(const struct driver_kind *kind)
{
	struct loop *l;

	if (!kind || !kind->decide || !kind->pass_sql || nloops >= MAX_KINDS)
		return -1;
	l = &loops[nloops];
	l->kind = kind;
	l->section = cron_every(kind->name, kind->period_ms, kind->first_ms, on_cron, l);
	if (!l->section)
		return -1;
	if (nloops++ == 0 && (events_subscribe(EV_WORKLOAD_CHANGED, on_wake, NULL) < 0 ||
	                      events_subscribe(EV_ALLOC_GRANTED, on_wake, NULL) < 0))
		return -1;
	return 0;
}

void driver_shutdown(void)
{
	for (int i = 0; i < nloops; i++)
		loops[i].section = NULL;
	nloops = 0;
}

/* ---- the launcher ---- */

static struct driver_launch *launches;

void driver_engine_msg(enum rc rc, const char *body, size_t len, const char *err,
                       const char *fallback, char *out, size_t outlen)
{
	json_t *j = rc == RC_OK ? json_loadb(body, len, 0, NULL) : NULL;
	const char *m = json_string_value(json_object_get(j, "message"));

	snprintf(out, outlen, "%s",
	         rc != RC_OK ? (err && *err ? err : fallback)
	         : m         ? m
	                     : fallback);
	json_decref(j);
}

static void unlink_launch(struct driver_launch *l)
{
	struct driver_launch **pp;

	if (!l->linked)
		return;
	for (pp = &launches; *pp; pp = &(*pp)->next)
		if (*pp == l) {
			*pp = l->next;
			break;
		}
	l->linked = 0;
	l->next = NULL;
}

static void fail(struct driver_launch *l, const char *why)
{
	unlink_launch(l);
	l->ops->failed(l->arg, why);
}

/* An engine step failed: when the engine answered with an error of its
 * own (5xx: "could not find bridge docker0", a declared device file that
 * is not there), the node is to blame and it counts towards degraded; a
 * 4xx is about what was asked (the image, the command), and no answer at
 * all is the health check's business. */
static void engine_fail(struct driver_launch *l, enum rc rc, int status, const char *why)
{
	if (rc == RC_OK && status >= 500)
		nodes_launch_result(l->node_id, 0, why);
	fail(l, why);
}

static void do_create(struct driver_launch *l);
static void ensure_net(struct driver_launch *l);

static void inspected(struct docker_call *call, enum rc rc, int status, const char *body,
                      size_t len, const char *err, void *arg)
{
	struct driver_launch *l = arg;
	json_t *j, *ports, *out;
	size_t i;
	json_t *ap;
	char *doc;

	(void)call;
	l->call = NULL;
	l->t_eng1 = clock_now_ms();
	if (rc != RC_OK || status != 200) {
		char msg[300];
		driver_engine_msg(rc, body, len, err, "could not inspect the container", msg,
		                  sizeof(msg));
		fail(l, msg);
		return;
	}
	j = json_loadb(body, len, 0, NULL);
	ports = json_object_get(json_object_get(j, "NetworkSettings"), "Ports");
	out = json_array();
	json_array_foreach(l->app_ports, i, ap)
	{
		char key[32];
		json_t *b;
		snprintf(key, sizeof(key), "%lld/tcp",
		         (long long)json_integer_value(json_object_get(ap, "port")));
		b = json_array_get(json_object_get(ports, key), 0);
		if (!json_string_value(json_object_get(b, "HostPort")))
			continue;
		json_array_append_new(
		        out,
		        json_pack("{s:O, s:O, s:s, s:I}", "name", json_object_get(ap, "name"),
		                  "port", json_object_get(ap, "port"), "host", l->host, "host_port",
		                  (json_int_t)strtol(
		                          json_string_value(json_object_get(b, "HostPort")), NULL,
		                          10)));
	}
	json_decref(j);
	doc = json_dumps(out, JSON_COMPACT);
	json_decref(out);
	unlink_launch(l);
	l->ops->running(l->arg, doc ? doc : "[]");
	free(doc);
}

static void started(struct docker_call *call, enum rc rc, int status, const char *body, size_t len,
                    const char *err, void *arg)
{
	struct driver_launch *l = arg;
	struct docker_engine *e = nodes_engine(l->node_id);
	char path[200], msg[300];

	(void)call;
	l->call = NULL;
	if (rc != RC_OK || (status != 204 && status != 304)) {
		driver_engine_msg(rc, body, len, err, "the engine could not start the container",
		                  msg, sizeof(msg));
		engine_fail(l, rc, status, msg);
		return;
	}
	nodes_launch_result(l->node_id, 1, NULL);
	if (json_array_size(l->app_ports) == 0) {
		/* nothing published: nothing to read back */
		inspected(NULL, RC_OK, 200, "{}", 2, "", l);
		return;
	}
	snprintf(path, sizeof(path), "/containers/%s/json", l->cid);
	l->call =
	        e ? docker_request(e, "GET", path, NULL, NULL, 0, NULL, 30000, inspected, l) : NULL;
	if (!l->call)
		fail(l, "the node's engine is not available");
}

static void do_start(struct driver_launch *l)
{
	struct docker_engine *e = nodes_engine(l->node_id);
	char path[200];

	snprintf(path, sizeof(path), "/containers/%s/start", l->cid);
	l->call =
	        e ? docker_request(e, "POST", path, NULL, NULL, 0, NULL, 60000, started, l) : NULL;
	if (!l->call)
		fail(l, "the node's engine is not available");
}

/* -- launch: the user's account in the container --
 *
 * The container runs as the user's mapped uid, which the image does not
 * know ("I have no name!" in a shell, tools that look the user up fail).
 * Before the start, /etc/passwd and /etc/group are read out of the created
 * container (the Engine API's archive GET: a tar of one file), the user's
 * lines are added (passwd.c: once, so a container started again keeps
 * one) and the changed files go back in one archive PUT into /etc.  A file
 * the image lacks is made; one that is not a regular file (a link) is left
 * alone.  None of this stops a launch: on an error it is logged and the
 * container starts as it is.
 *
 * Each archive GET costs the engine a mount of the container's root (~100
 * ms here), and every container of one image starts with the same two
 * files: so the files as an image has them are kept per node and image id
 * (the container's inspect names it, without a mount), read from the first
 * container this process creates from it, and later launches go straight
 * to the PUT.  Only a container this launch created uses or fills the
 * table: a reused one's files are its own (they may hold a user's line, or
 * what root changed in it), so they are read out of it as before. */
static const char *const etc_names[2] = { "passwd", "group" };

#define ETC_CACHE 32

static struct etc_cached {
	char image_id[80];
	struct driver_etc etc[2]; /* text NULL: the image's file is left alone */
	unsigned long long used;  /* for replacing the least recently used */
} etc_cache[ETC_CACHE];
static unsigned long long etc_tick;

static struct etc_cached *etc_lookup(const char *image_id)
{
	for (int i = 0; i < ETC_CACHE; i++)
		if (image_id[0] && strcmp(etc_cache[i].image_id, image_id) == 0)
			return &etc_cache[i];
	return NULL;
}

static int etc_copy(struct driver_etc *to, const struct driver_etc *from)
{
	*to = *from;
	to->text = NULL;
	if (from->text) {
		to->text = malloc(from->len + 1);
		if (!to->text)
			return -1;
		memcpy(to->text, from->text, from->len);
		to->text[from->len] = '\0';
	}
	return 0;
}

/* Remembers l's files as its image's (both read, nothing edited yet). */
static void etc_remember(const struct driver_launch *l)
{
	struct etc_cached *c;
	struct driver_etc copy[2];

	if (!l->fresh || !l->image_id[0] || etc_lookup(l->image_id))
		return;
	if (etc_copy(&copy[0], &l->etc[0]) < 0)
		return;
	if (etc_copy(&copy[1], &l->etc[1]) < 0) {
		free(copy[0].text);
		return;
	}
	c = &etc_cache[0];
	for (int i = 1; i < ETC_CACHE; i++)
		if (etc_cache[i].used < c->used)
			c = &etc_cache[i];
	free(c->etc[0].text);
	free(c->etc[1].text);
	snprintf(c->image_id, sizeof(c->image_id), "%s", l->image_id);
	c->etc[0] = copy[0];
	c->etc[1] = copy[1];
	c->used = ++etc_tick;
}

static void etc_clear(struct driver_launch *l)
{
	for (int i = 0; i < 2; i++) {
		free(l->etc[i].text);
		l->etc[i].text = NULL;
	}
}

static void account_done(struct driver_launch *l, const char *why)
{
	if (why)
		log_msg(LOG_WARN, "instances", NULL,
		        "instance %lld: could not add the user to container %.12s's /etc/passwd"
		        " and /etc/group: %s; starting it as it is",
		        l->id, l->cid, why);
	etc_clear(l);
	do_start(l);
}

static void etc_put(struct docker_call *call, enum rc rc, int status, const char *body, size_t len,
                    const char *err, void *arg)
{
	struct driver_launch *l = arg;
	char msg[300];

	(void)call;
	l->call = NULL;
	if (rc != RC_OK || status != 200) {
		driver_engine_msg(rc, body, len, err, "the engine refused the files", msg,
		                  sizeof(msg));
		account_done(l, msg);
		return;
	}
	account_done(l, NULL);
}

/* The user from the spec: User "uid:gid", home /home/<owner>. */
static int account_user(const struct driver_launch *l, struct passwd_user *u, char *home,
                        size_t homelen)
{
	const char *s = json_string_value(json_object_get(l->spec, "User"));
	char *end;

	if (!s)
		return -1;
	u->uid = strtoll(s, &end, 10);
	if (end == s || *end != ':')
		return -1;
	s = end + 1;
	u->gid = strtoll(s, &end, 10);
	if (end == s || *end)
		return -1;
	snprintf(home, homelen, "/home/%s", l->owner);
	u->name = l->owner;
	u->home = home;
	u->shell = "/bin/sh";
	return 0;
}

/* Both files read: add the user, put back what changed. */
static void etc_write(struct driver_launch *l)
{
	struct docker_engine *e = nodes_engine(l->node_id);
	struct passwd_user u;
	unsigned char *tar = NULL;
	char home[100], path[200], *edited[2] = { NULL, NULL };
	const char *why = NULL;
	size_t cap = 1024, n = 0;
	long elen[2] = { 0, 0 };
	int changed[2] = { 0, 0 };

	if (account_user(l, &u, home, sizeof(home)) < 0) {
		why = "the container's user is not uid:gid";
		goto out;
	}
	for (int i = 0; i < 2; i++) {
		const struct driver_etc *f = &l->etc[i];
		if (!f->text)
			continue;
		edited[i] = malloc(f->len + PASSWD_GROWTH);
		if (!edited[i]) {
			why = "out of memory";
			goto out;
		}
		elen[i] = i == 0 ? passwd_add_user(f->text, f->len, &u, edited[i],
		                                   f->len + PASSWD_GROWTH, &changed[i])
		                 : passwd_add_group(f->text, f->len, &u, edited[i],
		                                    f->len + PASSWD_GROWTH, &changed[i]);
		if (elen[i] < 0) {
			why = i == 0 ? "the image's /etc/passwd has both the user's names for "
			               "other uids"
			             : "the image's /etc/group has both the user's names for other "
			               "gids";
			goto out;
		}
		if (changed[i])
			cap += tar_file_size((size_t)elen[i]);
	}
	if (!changed[0] && !changed[1])
		goto out; /* there already (started before) */
	tar = malloc(cap);
	if (!tar) {
		why = "out of memory";
		goto out;
	}
	for (int i = 0; i < 2; i++)
		if (changed[i])
			n += tar_put_file(tar + n, etc_names[i], edited[i], (size_t)elen[i],
			                  l->etc[i].mode, l->etc[i].uid, l->etc[i].gid, time(NULL));
	memset(tar + n, 0, 1024);
	n += 1024;
	log_msg(LOG_INFO, "instances", NULL,
	        "instance %lld: adding user '%s' (uid %lld) to container %.12s's%s%s%s", l->id,
	        l->owner, u.uid, l->cid, changed[0] ? " /etc/passwd" : "",
	        changed[1] ? " /etc/group" : "",
	        l->etc_known ? " (as its image has them, remembered)" : "");
	snprintf(path, sizeof(path), "/containers/%s/archive?path=/etc", l->cid);
	l->call = e ? docker_request(e, "PUT", path, "application/x-tar", (const char *)tar, n,
	                             NULL, 30000, etc_put, l)
	            : NULL;
	if (!l->call)
		why = "the node's engine is not available";
out:
	free(edited[0]);
	free(edited[1]);
	free(tar);
	if (!l->call)
		account_done(l, why);
}

static void etc_read(struct driver_launch *l, int i);

/* One file's archive: its text, a new file when the image lacks it. */
static void etc_got(struct docker_call *call, enum rc rc, int status, const char *body, size_t len,
                    const char *err, void *arg)
{
	struct driver_launch *l = arg;
	int i = l->etc_at;
	struct driver_etc *f = &l->etc[i];
	struct tar_entry te;
	char msg[300];
	long r;

	(void)call;
	l->call = NULL;
	if (rc == RC_OK && status == 404) {
		/* the image has none: a new file with root in it */
		const char *base = i == 0 ? "root:x:0:0:root:/root:/bin/sh\n" : "root:x:0:\n";
		f->text = strdup(base);
		f->len = strlen(base);
		f->mode = 0644;
	} else if (rc == RC_OK && status == 200) {
		r = tar_next((const unsigned char *)body, len, &te);
		if (r > 0 && (te.type == '0' || te.type == '\0')) {
			f->mode = te.mode ? te.mode : 0644;
			f->text = malloc(te.size + 1);
			if (f->text) {
				memcpy(f->text, body + te.data_off, te.size);
				f->text[te.size] = '\0';
			}
			f->len = te.size;
			f->uid = te.uid;
			f->gid = te.gid;
		} else {
			log_msg(LOG_WARN, "instances", NULL,
			        "instance %lld: container %.12s's /etc/%s %s; left as it is", l->id,
			        l->cid, etc_names[i],
			        r > 0 ? "is not a regular file" : "came in an unreadable archive");
		}
	} else {
		driver_engine_msg(rc, body, len, err, "could not read the file", msg, sizeof(msg));
		account_done(l, msg);
		return;
	}
	if (i == 0) {
		etc_read(l, 1);
		return;
	}
	etc_remember(l);
	etc_write(l);
}

static void etc_read(struct driver_launch *l, int i)
{
	struct docker_engine *e = nodes_engine(l->node_id);
	char path[200];

	l->etc_at = i;
	snprintf(path, sizeof(path), "/containers/%s/archive?path=/etc/%s", l->cid, etc_names[i]);
	l->call = e ? docker_request(e, "GET", path, NULL, NULL, 0, NULL, 30000, etc_got, l) : NULL;
	if (!l->call)
		account_done(l, "the node's engine is not available");
}

/* The container's image id: the files come from the table when they are
 * there, else out of the container. */
static void etc_inspected(struct docker_call *call, enum rc rc, int status, const char *body,
                          size_t len, const char *err, void *arg)
{
	struct driver_launch *l = arg;
	struct etc_cached *c;
	json_t *j;

	(void)call;
	(void)err;
	l->call = NULL;
	l->image_id[0] = '\0';
	if (rc == RC_OK && status == 200) {
		j = json_loadb(body, len, 0, NULL);
		const char *img = json_string_value(json_object_get(j, "Image"));
		if (img && strlen(img) < sizeof(l->image_id))
			snprintf(l->image_id, sizeof(l->image_id), "%s", img);
		json_decref(j);
	}
	c = etc_lookup(l->image_id);
	if (c && etc_copy(&l->etc[0], &c->etc[0]) == 0 && etc_copy(&l->etc[1], &c->etc[1]) == 0) {
		c->used = ++etc_tick;
		l->etc_known = 1;
		etc_write(l);
		return;
	}
	etc_clear(l);
	etc_read(l, 0);
}

void driver_launch_start(struct driver_launch *l)
{
	struct docker_engine *e = nodes_engine(l->node_id);
	char path[200];

	etc_clear(l);
	memset(l->etc, 0, sizeof(l->etc));
	l->etc_known = 0;
	if (!l->fresh) {
		l->image_id[0] = '\0';
		etc_read(l, 0);
		return;
	}
	snprintf(path, sizeof(path), "/containers/%s/json", l->cid);
	l->call = e ? docker_request(e, "GET", path, NULL, NULL, 0, NULL, 30000, etc_inspected, l)
	            : NULL;
	if (!l->call)
		account_done(l, "the node's engine is not available");
}

static void removed_for_recreate(struct docker_call *call, enum rc rc, int status, const char *body,
                                 size_t len, const char *err, void *arg)
{
	struct driver_launch *l = arg;
	char msg[300];

	(void)call;
	l->call = NULL;
	if (rc != RC_OK || (status != 204 && status != 404)) {
		driver_engine_msg(rc, body, len, err, "could not remove the old container", msg,
		                  sizeof(msg));
		fail(l, msg);
		return;
	}
	do_create(l);
}

/* The name is taken: ours from an earlier try (same instance, image and
 * GPUs) is reused; anything else of ours is replaced once. */
static void existing(struct docker_call *call, enum rc rc, int status, const char *body, size_t len,
                     const char *err, void *arg)
{
	struct driver_launch *l = arg;
	struct docker_engine *e = nodes_engine(l->node_id);
	json_t *j, *labels;
	const char *cl, *sig, *id;
	char msg[300], path[200];

	(void)call;
	l->call = NULL;
	if (rc != RC_OK || status != 200) {
		driver_engine_msg(rc, body, len, err, "could not inspect the existing container",
		                  msg, sizeof(msg));
		fail(l, msg);
		return;
	}
	j = json_loadb(body, len, 0, NULL);
	labels = json_object_get(json_object_get(j, "Config"), "Labels");
	cl = json_string_value(json_object_get(labels, "gpucloud.cluster"));
	sig = json_string_value(json_object_get(labels, "gpucloud.sig"));
	id = json_string_value(json_object_get(j, "Id"));
	if (!cl || strcmp(cl, driver_cluster_id()) != 0 || !id) {
		json_decref(j);
		fail(l, "a container of another owner holds this instance's name");
		return;
	}
	if (sig && strcmp(sig, l->sig) == 0) {
		snprintf(l->cid, sizeof(l->cid), "%s", id);
		json_decref(j);
		log_msg(LOG_INFO, "instances", NULL, "instance %lld: reusing container %.12s",
		        l->id, l->cid);
		l->fresh = 0;
		l->ops->created(l->arg);
		return;
	}
	json_decref(j);
	if (l->recreated++ || !e) {
		fail(l, "could not replace the instance's old container");
		return;
	}
	/* other GPUs or another image: the old container cannot be reused */
	snprintf(path, sizeof(path), "/containers/%s?force=1", l->name);
	l->call = docker_request(e, "DELETE", path, NULL, NULL, 0, NULL, 60000,
	                         removed_for_recreate, l);
	if (!l->call)
		fail(l, "the node's engine is not available");
}

static void created(struct docker_call *call, enum rc rc, int status, const char *body, size_t len,
                    const char *err, void *arg)
{
	struct driver_launch *l = arg;
	struct docker_engine *e = nodes_engine(l->node_id);
	json_t *j;
	char msg[300], path[200];

	(void)call;
	l->call = NULL;
	if (rc == RC_OK && status == 409 && e) {
		snprintf(path, sizeof(path), "/containers/%s/json", l->name);
		l->call = docker_request(e, "GET", path, NULL, NULL, 0, NULL, 30000, existing, l);
		if (!l->call)
			fail(l, "the node's engine is not available");
		return;
	}
	if (rc == RC_OK && status == 404 && !l->netretried++) {
		/* the reconciler removed the (then empty) network between our
		 * ensure and this create: make it again, once */
		ensure_net(l);
		return;
	}
	if (rc != RC_OK || status != 201) {
		driver_engine_msg(rc, body, len, err, "the engine refused to create the container",
		                  msg, sizeof(msg));
		engine_fail(l, rc, status, msg);
		return;
	}
	j = json_loadb(body, len, 0, NULL);
	snprintf(l->cid, sizeof(l->cid), "%s",
	         json_string_value(json_object_get(j, "Id"))
	                 ? json_string_value(json_object_get(j, "Id"))
	                 : "");
	json_decref(j);
	if (!l->cid[0] || strspn(l->cid, "0123456789abcdef") != strlen(l->cid)) {
		fail(l, "the engine returned no container id");
		return;
	}
	l->fresh = 1;
	l->ops->created(l->arg);
}

static void do_create(struct driver_launch *l)
{
	struct docker_engine *e = nodes_engine(l->node_id);
	char path[200], *body = json_dumps(l->spec, JSON_COMPACT);

	if (!l->t_eng0)
		l->t_eng0 = clock_now_ms();
	snprintf(path, sizeof(path), "/containers/create?name=%s", l->name);
	l->call = e && body ? docker_request(e, "POST", path, "application/json", body,
	                                     strlen(body), NULL, 60000, created, l)
	                    : NULL;
	free(body);
	if (!l->call)
		fail(l, "the node's engine is not available");
}

/* -- launch: the user's network on the node --
 *
 * Tenant isolation (SPEC §14): every user has one bridge network per node
 * (instances_network_name), made here on first use and removed by the
 * reconciler once no container of ours refers to it.  Within it the
 * user's containers reach each other (several instances of one job);
 * Docker's DOCKER-ISOLATION chains drop traffic between bridge networks,
 * so no other user's container is reachable.  This works without
 * br_netfilter, which one shared network with enable_icc=false would
 * need.  Published app ports are bound to an address containers cannot
 * reach as the node (127.0.0.1 on unix:// nodes; cfg.node_app_bind or
 * the node's address on tcp:// nodes, which the node's firewall must
 * keep to the control plane — README, "network isolation").
 * Two launches for one user and node share one create (netwait); a 409
 * (the name exists) is success. */
static int net_send(struct driver_launch *l);

static void net_ensured(struct docker_call *call, enum rc rc, int status, const char *body,
                        size_t len, const char *err, void *arg)
{
	struct driver_launch *l = arg, *x, *next;
	char msg[420] = "";
	int ok = rc == RC_OK && (status == 201 || status == 409);

	(void)call;
	l->call = NULL;
	l->netcall = 0;
	if (!ok) {
		char m[200];
		driver_engine_msg(rc, body, len, err, "error", m, sizeof(m));
		snprintf(msg, sizeof(msg), "could not create network '%s' on the node: %s", l->net,
		         m);
		/* the engine's own failure, such as its iptables rules raced by
		 * another engine on the host rebuilding its chains during a start
		 * storm: passing, so asked again (twice) before the launch, and
		 * those that wait on it, fail */
		if (rc == RC_OK && status >= 500 && l->netfails++ < 2) {
			log_msg(LOG_WARN, "instances", NULL, "instance %lld: %s; asking again",
			        l->id, msg);
			if (net_send(l) == 0)
				return;
		}
		/* once for the node, not once per launch that waited on it */
		if (rc == RC_OK && status >= 500)
			nodes_launch_result(l->node_id, 0, msg);
	}
	for (x = launches; x; x = next) {
		next = x->next;
		if (x == l || !x->netwait || x->node_id != l->node_id ||
		    strcmp(x->net, l->net) != 0)
			continue;
		x->netwait = 0;
		if (ok)
			do_create(x);
		else
			fail(x, msg);
	}
	if (ok)
		do_create(l);
	else
		fail(l, msg);
}

/* Sends l's network create; 0 when it is out, -1 when it could not be sent. */
static int net_send(struct driver_launch *l)
{
	struct docker_engine *e = nodes_engine(l->node_id);
	char uid[24], *body;
	json_t *j;

	snprintf(uid, sizeof(uid), "%lld", l->user_id);
	if (l->netbody)
		j = json_incref(l->netbody);
	else
		j = json_pack("{s:s, s:b, s:s, s:{s:s, s:s, s:s, s:s},"
		              " s:{s:s}}",
		              "Name", l->net, "CheckDuplicate", 1, "Driver", "bridge", "Labels",
		              "gpucloud.cluster", driver_cluster_id(), "gpucloud.kind", "network",
		              "gpucloud.owner", l->owner, "gpucloud.user", uid, "Options",
		              "com.docker.network.bridge.enable_icc", "true");
	body = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	/* a start storm (a class's lab: dozens of users' first launches on a
	 * node at once) queues the creates behind the engine's network lock:
	 * give them as long as a container create */
	l->call = e && body ? docker_request(e, "POST", "/networks/create", "application/json",
	                                     body, strlen(body), NULL, 90000, net_ensured, l)
	                    : NULL;
	free(body);
	l->netcall = l->call != NULL;
	return l->call ? 0 : -1;
}

static void ensure_net(struct driver_launch *l)
{
	for (struct driver_launch *x = launches; x; x = x->next)
		if (x != l && x->netcall && x->node_id == l->node_id &&
		    strcmp(x->net, l->net) == 0) {
			l->netwait = 1;
			return;
		}
	if (net_send(l) < 0)
		fail(l, "the node's engine is not available");
}

void driver_launch_begin(struct driver_launch *l)
{
	if (!l->linked) {
		l->next = launches;
		launches = l;
		l->linked = 1;
	}
	ensure_net(l);
}

void driver_launch_cancel(struct driver_launch *l)
{
	if (l->call)
		docker_cancel(l->call);
	l->call = NULL;
	unlink_launch(l);
	etc_clear(l);
}

void driver_launch_release(struct driver_launch *l)
{
	unlink_launch(l);
	etc_clear(l);
	json_decref(l->spec);
	json_decref(l->app_ports);
	json_decref(l->netbody);
	l->spec = l->app_ports = l->netbody = NULL;
}

/* ---- the end of a container ---- */

struct docker_call *driver_container_stop(long long node_id, const char *name, int grace,
                                          docker_cb cb, void *arg)
{
	struct docker_engine *e = node_id ? nodes_engine(node_id) : NULL;
	char path[200];

	if (!e)
		return NULL;
	snprintf(path, sizeof(path), "/containers/%s/stop?t=%d", name, grace);
	return docker_request(e, "POST", path, NULL, NULL, 0, NULL, (grace + 30) * 1000, cb, arg);
}

struct docker_call *driver_container_remove(long long node_id, const char *name, docker_cb cb,
                                            void *arg)
{
	struct docker_engine *e = node_id ? nodes_engine(node_id) : NULL;
	char path[200];

	if (!e)
		return NULL;
	snprintf(path, sizeof(path), "/containers/%s?force=1&v=1", name);
	return docker_request(e, "DELETE", path, NULL, NULL, 0, NULL, 60000, cb, arg);
}
