/* tunnel.c — websocket tunnels behind the app proxy.
 *
 * Owns: the open tunnels (a list), moving bytes between a client and an
 * app after a 101 (plain sockets read straight into the other side's
 * output; TLS sides through their bufferevents), backpressure (a side stops
 * being read while the other side's output is over TUN_HIGH), half-closes
 * (what one side sent still reaches the other, then both close), traffic
 * for activity, and closing tunnels whose route check fails on a re-check.
 * Does not own: the Upgrade request and the 101 head (proxy.c), the route
 * check itself (route.c), when re-checks run (proxy.c: a timer and NOTIFYs).
 */
#include "apps/tunnel.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>

#include "apps/activity.h"
#include "apps/route.h"
#include "apps/upstream.h"
#include "base/log.h"

#define TUN_HIGH (256 * 1024)
#define TUN_LOW  (64 * 1024)
#define TUN_READ (16 * 1024) /* bytes reserved per tunnel read */

struct tunnel {
	struct bufferevent *c, *u; /* client, app; NULL once that side closed */
	/* Plain sockets are read by these events, straight into the other
	 * side's output (libevent's own read asks FIONREAD first and copies
	 * through the input buffer: a syscall and a copy per message).  NULL
	 * for a TLS side, which its bufferevent reads. */
	struct event *rc, *ru;
	evutil_socket_t fdc, fdu; /* the sockets, taken once */
	char route[64];
	unsigned akey; /* activity_key(route) */
	char cookie_hash[65];
	long long instance_id;
	int closing; /* one side closed: flush the other, then close */
	struct tunnel *prev, *next;
};

static struct tunnel *tunnels;
static long long tunnels_open;
static unsigned long long tunnels_total;

static struct event **tun_raw(struct tunnel *t, struct bufferevent *bev)
{
	return bev == t->c ? &t->rc : &t->ru;
}

/* Stops reading bev (the other side is full or gone). */
static void tun_pause(struct tunnel *t, struct bufferevent *bev)
{
	struct event *ev = *tun_raw(t, bev);

	if (ev)
		event_del(ev);
	else
		bufferevent_disable(bev, EV_READ);
}

static void tun_resume(struct tunnel *t, struct bufferevent *bev)
{
	struct event *ev = *tun_raw(t, bev);

	if (ev)
		event_add(ev, NULL);
	else
		bufferevent_enable(bev, EV_READ);
}

/* Frees bev's side of t (its raw read event first: same descriptor). */
static void tun_side_free(struct tunnel *t, struct bufferevent *bev)
{
	struct event **ev = tun_raw(t, bev);

	if (*ev) {
		event_free(*ev);
		*ev = NULL;
	}
	bufferevent_free(bev);
}

static void tun_free(struct tunnel *t)
{
	if (t->prev)
		t->prev->next = t->next;
	else
		tunnels = t->next;
	if (t->next)
		t->next->prev = t->prev;
	if (t->c)
		tun_side_free(t, t->c);
	if (t->u)
		tun_side_free(t, t->u);
	free(t);
	tunnels_open--;
}

static struct bufferevent *tun_other(struct tunnel *t, struct bufferevent *bev)
{
	return bev == t->c ? t->u : t->c;
}

/* Writes what is queued on dst now when the socket takes it (not under
 * TLS); EV_WRITE only for the rest. */
static void tun_flush(struct bufferevent *dst)
{
	struct evbuffer *out = bufferevent_get_output(dst);

	if (evbuffer_get_length(out) == 0)
		return;
	if (!bufferevent_openssl_get_ssl(dst) && !(bufferevent_get_enabled(dst) & EV_WRITE))
		upstream_write_now(out, bufferevent_getfd(dst));
	if (evbuffer_get_length(out))
		bufferevent_enable(dst, EV_WRITE);
}

static void tun_read(struct bufferevent *bev, void *arg)
{
	struct tunnel *t = arg;
	struct bufferevent *dst = tun_other(t, bev);
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t n = evbuffer_get_length(in);

	if (!dst) {
		evbuffer_drain(in, n);
		return;
	}
	evbuffer_add_buffer(bufferevent_get_output(dst), in);
	if (n)
		activity_note_key(t->route, t->akey, t->instance_id, n);
	tun_flush(dst);
	if (evbuffer_get_length(bufferevent_get_output(dst)) >= TUN_HIGH)
		tun_pause(t, bev); /* resumed when dst drains */
}

static void tun_event(struct bufferevent *bev, short what, void *arg);

/* dst may be written straight from the stack: a plain socket with nothing
 * queued for it (what is queued must go first). */
static int tun_direct_ok(struct bufferevent *dst, struct evbuffer *out)
{
	return evbuffer_get_length(out) == 0 && !(bufferevent_get_enabled(dst) & EV_WRITE) &&
	       !bufferevent_openssl_get_ssl(dst);
}

/* A plain side is readable: read up to TUN_HIGH a wakeup and pass it to the
 * other side.  While that side has nothing queued, a read goes from a stack
 * buffer straight to its socket, and only what the socket does not take is
 * queued: a message costs a read and a send, and no buffer is allocated and
 * freed for it.  Otherwise reads go into its output, written at the end. */
static void tun_raw_read(struct tunnel *t, struct bufferevent *bev, evutil_socket_t fd)
{
	struct bufferevent *dst = tun_other(t, bev);
	evutil_socket_t dfd = dst == t->c ? t->fdc : t->fdu;
	struct evbuffer *out;
	size_t got = 0;
	char buf[TUN_READ];

	if (!dst) {
		tun_pause(t, bev);
		return;
	}
	out = bufferevent_get_output(dst);
	while (got < TUN_HIGH) {
		struct evbuffer_iovec v[2];
		int direct = tun_direct_ok(dst, out), nv = 0, used = 0;
		ssize_t n;
		size_t left;

		if (direct) {
			n = read(fd, buf, sizeof(buf));
		} else {
			nv = evbuffer_reserve_space(out, TUN_READ, v, 2);
			if (nv <= 0)
				break;
			n = readv(fd, (struct iovec *)v, nv);
		}
		if (n <= 0) {
			int err = n < 0 ? errno : 0;
			if (!direct)
				evbuffer_commit_space(out, v, 0);
			if (n < 0 && (err == EAGAIN || err == EWOULDBLOCK || err == EINTR))
				break;
			if (got) {
				activity_note_key(t->route, t->akey, t->instance_id, got);
				tun_flush(dst);
			}
			tun_event(bev,
			          n == 0 ? BEV_EVENT_EOF | BEV_EVENT_READING
			                 : BEV_EVENT_ERROR | BEV_EVENT_READING,
			          t);
			return;
		}
		if (direct) {
			ssize_t w;

			w = send(dfd, buf, (size_t)n, MSG_NOSIGNAL);
			/* the rest is queued; a send error surfaces when the
			 * bufferevent writes it */
			if (w < 0)
				w = 0;
			if (w < n)
				evbuffer_add(out, buf + w, (size_t)(n - w));
		} else {
			for (left = (size_t)n; used < nv && left; used++) {
				if (v[used].iov_len > left)
					v[used].iov_len = left;
				left -= v[used].iov_len;
			}
			evbuffer_commit_space(out, v, used);
		}
		got += (size_t)n;
		if ((size_t)n < TUN_READ)
			break; /* drained */
	}
	if (got)
		activity_note_key(t->route, t->akey, t->instance_id, got);
	tun_flush(dst);
	if (evbuffer_get_length(out) >= TUN_HIGH)
		tun_pause(t, bev); /* resumed when dst drains */
}

static void tun_raw_c(evutil_socket_t fd, short what, void *arg)
{
	struct tunnel *t = arg;

	(void)what;
	tun_raw_read(t, t->c, fd);
}

static void tun_raw_u(evutil_socket_t fd, short what, void *arg)
{
	struct tunnel *t = arg;

	(void)what;
	tun_raw_read(t, t->u, fd);
}

static void tun_write(struct bufferevent *bev, void *arg)
{
	struct tunnel *t = arg;
	struct bufferevent *src = tun_other(t, bev);

	if (t->closing) {
		if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
			tun_free(t);
		return;
	}
	if (evbuffer_get_length(bufferevent_get_output(bev)) == 0 &&
	    !bufferevent_openssl_get_ssl(bev))
		bufferevent_disable(bev, EV_WRITE); /* tun_flush writes directly again */
	if (src)
		tun_resume(t, src);
}

static void tun_event(struct bufferevent *bev, short what, void *arg)
{
	struct tunnel *t = arg;
	struct bufferevent *dst = tun_other(t, bev);
	struct timeval wt = { 10, 0 };

	(void)what;
	if (t->closing || !dst) {
		tun_free(t);
		return;
	}
	/* what this side still sent goes on; then the other side closes */
	evbuffer_add_buffer(bufferevent_get_output(dst), bufferevent_get_input(bev));
	tun_side_free(t, bev);
	if (bev == t->c)
		t->c = NULL;
	else
		t->u = NULL;
	if (evbuffer_get_length(bufferevent_get_output(dst)) == 0) {
		tun_free(t);
		return;
	}
	t->closing = 1;
	tun_pause(t, dst);
	bufferevent_setwatermark(dst, EV_WRITE, 0, 0);
	bufferevent_set_timeouts(dst, NULL, &wt);
	bufferevent_enable(dst, EV_WRITE);
}

struct tunnel *tunnel_new(void)
{
	return calloc(1, sizeof(struct tunnel));
}

void tunnel_start(struct tunnel *t, struct bufferevent *client, struct bufferevent *app,
                  const char *route, const char *cookie_hash, long long instance_id, int app_eof)
{
	struct event_base *base = bufferevent_get_base(app);

	t->c = client;
	t->u = app;
	t->fdc = bufferevent_getfd(client);
	t->fdu = bufferevent_getfd(app);
	snprintf(t->route, sizeof(t->route), "%s", route);
	t->akey = activity_key(t->route);
	snprintf(t->cookie_hash, sizeof(t->cookie_hash), "%s", cookie_hash);
	t->instance_id = instance_id;
	t->next = tunnels;
	if (tunnels)
		tunnels->prev = t;
	tunnels = t;
	tunnels_open++;
	tunnels_total++;
	bufferevent_setcb(t->c, tun_read, tun_write, tun_event, t);
	bufferevent_setcb(t->u, tun_read, tun_write, tun_event, t);
	bufferevent_setwatermark(t->c, EV_READ, 0, 0);
	bufferevent_setwatermark(t->u, EV_READ, 0, 0);
	bufferevent_setwatermark(t->c, EV_WRITE, TUN_LOW, 0);
	bufferevent_setwatermark(t->u, EV_WRITE, TUN_LOW, 0);
	bufferevent_set_timeouts(t->c, NULL, NULL);
	bufferevent_set_timeouts(t->u, NULL, NULL);
	bufferevent_disable(t->c, EV_WRITE);
	bufferevent_disable(t->u, EV_WRITE);
	bufferevent_disable(t->c, EV_READ);
	bufferevent_disable(t->u, EV_READ);
	if (!bufferevent_openssl_get_ssl(t->c))
		t->rc = event_new(base, bufferevent_getfd(t->c), EV_READ | EV_PERSIST, tun_raw_c,
		                  t);
	t->ru = event_new(base, bufferevent_getfd(t->u), EV_READ | EV_PERSIST, tun_raw_u, t);
	/* without its event (no memory, or TLS) a side is read by its bufferevent */
	tun_resume(t, t->c);
	tun_resume(t, t->u);
	tun_flush(t->c); /* the 101 and what followed it */
	tun_flush(t->u);
	if (app_eof) {
		tun_event(t->u, BEV_EVENT_EOF, t);
		return;
	}
	if (evbuffer_get_length(bufferevent_get_input(t->c)))
		tun_read(t->c, t); /* frames the client sent behind its request */
}

struct recheck {
	char route[64];
	char cookie_hash[65];
};

static void recheck_done(const struct route_check *ck, enum rc rc, void *arg)
{
	struct recheck *rk = arg;
	struct tunnel *t, *next;

	if (rc != RC_OK) {
		free(rk); /* the database is away: keep what is open */
		return;
	}
	if (ck->found && ck->allowed && strcmp(ck->state, "running") == 0 && ck->port) {
		free(rk);
		return;
	}
	for (t = tunnels; t; t = next) {
		next = t->next;
		if (strcmp(t->route, rk->route) == 0 &&
		    strcmp(t->cookie_hash, rk->cookie_hash) == 0) {
			log_msg(LOG_INFO, "proxy", NULL, "closing a websocket of route %s: %s",
			        t->route,
			        !ck->found     ? "route gone"
			        : !ck->allowed ? "session ended"
			                       : "instance not running");
			tun_free(t);
		}
	}
	free(rk);
}

void tunnel_recheck(long long id)
{
	for (struct tunnel *t = tunnels; t; t = t->next) {
		struct tunnel *o;
		struct recheck *rk;
		if (id >= 0 && t->instance_id != id)
			continue;
		for (o = tunnels; o != t; o = o->next)
			if ((id < 0 || o->instance_id == id) && strcmp(o->route, t->route) == 0 &&
			    strcmp(o->cookie_hash, t->cookie_hash) == 0)
				break;
		if (o != t)
			continue;
		rk = calloc(1, sizeof(*rk));
		if (!rk)
			return;
		snprintf(rk->route, sizeof(rk->route), "%s", t->route);
		snprintf(rk->cookie_hash, sizeof(rk->cookie_hash), "%s", t->cookie_hash);
		route_check_ask(rk->route, rk->cookie_hash, recheck_done, rk);
	}
}

long long tunnel_open_count(void)
{
	return tunnels_open;
}

void tunnel_close_all(void)
{
	while (tunnels)
		tun_free(tunnels);
}
