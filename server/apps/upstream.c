/* upstream.c — connections to apps in containers and their idle pool.
 *
 * Owns: making a connection's bufferevent, the idle pool (per host:port,
 * at most IDLE_MAX kept for IDLE_TIMEOUT seconds, dropped as soon as the
 * app says anything or hangs up), reading a connection's socket with its
 * own event (and writing it directly) where libevent's bufferevent would
 * cost syscalls, and the connection counters.
 * Does not own: what travels on a connection (proxy.c writes the request
 * and parses the response; tunnel.c takes a connection over after a 101),
 * connect timeouts (the user sets them).
 */
#include "apps/upstream.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#define READ_STEP    (64 * 1024) /* bytes reserved per read */
#define IDLE_MAX     128         /* idle upstream connections kept per host:port */
#define IDLE_TIMEOUT 30          /* seconds an idle upstream connection is kept */

struct pool {
	char key[96];
	struct upstream *idle;
	int nidle;
	struct pool *next;
};

static struct pool *pools;
static struct upstream_stats stats;

static struct pool *pool_get(const char *key, int create)
{
	struct pool *pl;

	for (pl = pools; pl; pl = pl->next)
		if (strcmp(pl->key, key) == 0)
			return pl;
	if (!create)
		return NULL;
	pl = calloc(1, sizeof(*pl));
	if (!pl)
		return NULL;
	snprintf(pl->key, sizeof(pl->key), "%s", key);
	pl->next = pools;
	pools = pl;
	return pl;
}

void upstream_free(struct upstream *u)
{
	if (!u)
		return;
	if (u->rd)
		event_free(u->rd);
	if (u->bev)
		bufferevent_free(u->bev);
	free(u);
}

static void pool_unlink(struct upstream *u)
{
	struct pool *pl = pool_get(u->key, 0);
	struct upstream **pp;

	if (!pl)
		return;
	for (pp = &pl->idle; *pp; pp = &(*pp)->next)
		if (*pp == u) {
			*pp = u->next;
			pl->nidle--;
			stats.idle--;
			return;
		}
}

static void idle_event(struct bufferevent *bev, short what, void *arg)
{
	struct upstream *u = arg;

	(void)bev;
	(void)what;
	pool_unlink(u); /* closed by the app, or idle too long */
	upstream_free(u);
}

void upstream_put(struct upstream *u)
{
	struct pool *pl = pool_get(u->key, 1);

	if (!pl || pl->nidle >= IDLE_MAX || evbuffer_get_length(bufferevent_get_input(u->bev))) {
		upstream_free(u);
		return;
	}
	u->p = NULL;
	u->next = pl->idle;
	pl->idle = u;
	pl->nidle++;
	stats.idle++;
	bufferevent_setcb(u->bev, NULL, NULL, idle_event, u);
	bufferevent_setwatermark(u->bev, EV_WRITE, 0, 0);
	bufferevent_set_timeouts(u->bev, NULL, NULL);
	bufferevent_disable(u->bev, EV_WRITE);
	if (upstream_read(u, 1) < 0) {
		pool_unlink(u);
		upstream_free(u);
	}
}

struct upstream *upstream_take(const char *key)
{
	struct pool *pl = pool_get(key, 0);
	struct upstream *u;

	if (!pl || !pl->idle)
		return NULL;
	u = pl->idle;
	pl->idle = u->next;
	pl->nidle--;
	stats.idle--;
	u->next = NULL;
	u->reused = 1;
	stats.reused++;
	return u;
}

static void on_readable(evutil_socket_t fd, short what, void *arg)
{
	struct upstream *u = arg;

	(void)fd;
	if (!u->p) {
		/* idle: an idle connection has nothing to say, so anything (a
		 * byte, its end, an error) or the idle time ends it */
		pool_unlink(u);
		upstream_free(u);
		return;
	}
	u->on_read(u, (what & EV_TIMEOUT) != 0);
}

int upstream_read(struct upstream *u, int on)
{
	struct timeval tv = { u->p ? u->read_timeout : IDLE_TIMEOUT, 0 };

	if (!on) {
		if (u->rd)
			event_del(u->rd);
		return 0;
	}
	if (!u->connected)
		return 0; /* the CONNECTED event calls again */
	if (!u->rd) {
		u->rd = event_new(bufferevent_get_base(u->bev), bufferevent_getfd(u->bev),
		                  EV_READ | EV_PERSIST, on_readable, u);
		if (!u->rd)
			return -1;
	}
	/* (a persistent event's timeout restarts with each wake-up: it is
	 * the time without a byte) */
	return event_add(u->rd, tv.tv_sec > 0 ? &tv : NULL);
}

int upstream_fill(struct upstream *u, size_t max)
{
	struct evbuffer *in = bufferevent_get_input(u->bev);
	evutil_socket_t fd = bufferevent_getfd(u->bev);
	size_t got = 0;
	int rc = 0;

	/* a socket bufferevent keeps its input's end frozen outside its own
	 * reads */
	evbuffer_unfreeze(in, 0);
	while (got < max) {
		struct evbuffer_iovec v[2];
		int nv = evbuffer_reserve_space(in, READ_STEP, v, 2), used = 0;
		ssize_t n;
		size_t left;

		if (nv <= 0) {
			rc = -1;
			break;
		}
		n = readv(fd, (struct iovec *)v, nv);
		if (n <= 0) {
			int err = errno;
			evbuffer_commit_space(in, v, 0);
			if (n == 0)
				rc = 1;
			else if (err != EAGAIN && err != EWOULDBLOCK && err != EINTR)
				rc = -1;
			errno = err;
			break;
		}
		for (left = (size_t)n; used < nv && left; used++) {
			if (v[used].iov_len > left)
				v[used].iov_len = left;
			left -= v[used].iov_len;
		}
		evbuffer_commit_space(in, v, used);
		got += (size_t)n;
		if ((size_t)n < READ_STEP)
			break; /* drained */
	}
	{
		int err = errno;
		evbuffer_freeze(in, 0);
		errno = err;
	}
	return rc;
}

/* Writes out to fd now.  A socket bufferevent keeps its output's start
 * frozen outside its own writes (evbuffer_write would fail without
 * writing): thaw it for this one write. */
void upstream_write_now(struct evbuffer *out, evutil_socket_t fd)
{
	evbuffer_unfreeze(out, 1);
	evbuffer_write(out, fd); /* errors surface on the next read or write */
	evbuffer_freeze(out, 1);
}

void upstream_flush(struct upstream *u)
{
	struct evbuffer *out = bufferevent_get_output(u->bev);

	if (evbuffer_get_length(out) == 0)
		return;
	if (u->connected && !(bufferevent_get_enabled(u->bev) & EV_WRITE))
		upstream_write_now(out, bufferevent_getfd(u->bev));
	if (evbuffer_get_length(out))
		bufferevent_enable(u->bev, EV_WRITE);
}

struct upstream *upstream_new(struct event_base *base, const char *key)
{
	struct upstream *u = calloc(1, sizeof(*u));

	if (!u || !(u->bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE))) {
		free(u);
		return NULL;
	}
	snprintf(u->key, sizeof(u->key), "%s", key);
	stats.fresh++;
	return u;
}

void upstream_get_stats(struct upstream_stats *st)
{
	*st = stats;
}

void upstream_shutdown(void)
{
	while (pools) {
		struct pool *pl = pools;
		pools = pl->next;
		while (pl->idle) {
			struct upstream *u = pl->idle;
			pl->idle = u->next;
			upstream_free(u);
		}
		free(pl);
	}
	stats.idle = 0;
}
