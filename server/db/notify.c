/* notify.c — one PostgreSQL LISTEN connection on the event loop.
 *
 * Owns its libpq connection (non-blocking, one event on PQsocket()), a timer
 * (connect timeout, then reconnect backoff) and the channel name.  Does not
 * own the event base or what the callback does with a payload.
 *
 * States: DOWN (timer armed for the next try) → CONNECTING (PQconnectPoll
 * steps) → LISTENING ("LISTEN" sent, its result awaited) → UP (every
 * readable wakeup: PQconsumeInput, then each PQnotifies()).  Any failure goes
 * back to DOWN.  The callback runs from the socket event; it must not free
 * the listener.
 */
#include "db/notify.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "base/log.h"

#define BACKOFF_MIN_MS     250
#define BACKOFF_MAX_MS     2000
#define CONNECT_TIMEOUT_MS 10000

enum notify_state { NOTIFY_DOWN, NOTIFY_CONNECTING, NOTIFY_LISTENING, NOTIFY_UP };

struct notify {
	struct event_base *base;
	char *url;
	char channel[64];
	notify_cb cb;
	void *arg;
	PGconn *pg;
	struct event *io;
	struct event *timer;
	enum notify_state state;
	int backoff_ms;
	int logged_down; /* "listener down" logged once per outage */
};

static void on_io(evutil_socket_t fd, short what, void *arg);
static void connect_start(struct notify *n);

/* The socket may change between PQconnectPoll() steps: register afresh. */
static int watch(struct notify *n, short what)
{
	evutil_socket_t fd = PQsocket(n->pg);

	if (fd < 0)
		return -1;
	event_del(n->io);
	if (event_assign(n->io, n->base, fd, what | EV_PERSIST, on_io, n) < 0 ||
	    event_add(n->io, NULL) < 0)
		return -1;
	return 0;
}

static void down(struct notify *n, const char *why)
{
	struct timeval tv = { n->backoff_ms / 1000, (n->backoff_ms % 1000) * 1000 };

	if (!n->logged_down)
		LOG_W("notify", "listener on '%s' down: %.200s", n->channel, why ? why : "");
	n->logged_down = 1;
	event_del(n->io);
	PQfinish(n->pg);
	n->pg = NULL;
	n->state = NOTIFY_DOWN;
	evtimer_add(n->timer, &tv);
	n->backoff_ms *= 2;
	if (n->backoff_ms > BACKOFF_MAX_MS)
		n->backoff_ms = BACKOFF_MAX_MS;
}

static void send_listen(struct notify *n)
{
	char sql[96];

	evtimer_del(n->timer);
	snprintf(sql, sizeof(sql), "LISTEN %s", n->channel);
	if (PQsetnonblocking(n->pg, 1) < 0 || !PQsendQuery(n->pg, sql) || PQflush(n->pg) < 0 ||
	    watch(n, EV_READ) < 0) {
		down(n, PQerrorMessage(n->pg));
		return;
	}
	n->state = NOTIFY_LISTENING;
}

static void poll_connect(struct notify *n)
{
	switch (PQconnectPoll(n->pg)) {
	case PGRES_POLLING_READING:
		if (watch(n, EV_READ) < 0)
			down(n, PQerrorMessage(n->pg));
		break;
	case PGRES_POLLING_WRITING:
		if (watch(n, EV_WRITE) < 0)
			down(n, PQerrorMessage(n->pg));
		break;
	case PGRES_POLLING_OK: send_listen(n); break;
	default: down(n, PQerrorMessage(n->pg)); break;
	}
}

/* Reads what arrived: the LISTEN's result first, then notifications. */
static void drain(struct notify *n)
{
	PGnotify *nt;

	if (!PQconsumeInput(n->pg)) {
		down(n, PQerrorMessage(n->pg));
		return;
	}
	if (n->state == NOTIFY_LISTENING) {
		PGresult *res;
		int ok = 1;
		if (PQisBusy(n->pg))
			return;
		while ((res = PQgetResult(n->pg)) != NULL) {
			if (PQresultStatus(res) != PGRES_COMMAND_OK)
				ok = 0;
			PQclear(res);
		}
		if (!ok) {
			down(n, PQerrorMessage(n->pg));
			return;
		}
		n->state = NOTIFY_UP;
		n->backoff_ms = BACKOFF_MIN_MS;
		if (n->logged_down)
			LOG_I("notify", "listener on '%s' up", n->channel);
		n->logged_down = 0;
		n->cb(NULL, n->arg); /* what was missed while down is unknown */
	}
	while (n->state == NOTIFY_UP && (nt = PQnotifies(n->pg)) != NULL) {
		n->cb(nt->extra ? nt->extra : "", n->arg);
		PQfreemem(nt);
	}
}

static void on_io(evutil_socket_t fd, short what, void *arg)
{
	struct notify *n = arg;

	(void)fd;
	(void)what;
	if (n->state == NOTIFY_CONNECTING)
		poll_connect(n);
	else if (n->state == NOTIFY_LISTENING || n->state == NOTIFY_UP)
		drain(n);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct notify *n = arg;

	(void)fd;
	(void)what;
	if (n->state == NOTIFY_DOWN)
		connect_start(n);
	else if (n->state != NOTIFY_UP)
		down(n, "connect timed out");
}

static void connect_start(struct notify *n)
{
	struct timeval tv = { CONNECT_TIMEOUT_MS / 1000, 0 };

	n->pg = PQconnectStart(n->url);
	if (!n->pg || PQstatus(n->pg) == CONNECTION_BAD) {
		down(n, n->pg ? PQerrorMessage(n->pg) : "out of memory");
		return;
	}
	n->state = NOTIFY_CONNECTING;
	evtimer_add(n->timer, &tv);
	/* as if PQconnectPoll() had answered PGRES_POLLING_WRITING */
	if (watch(n, EV_WRITE) < 0)
		down(n, PQerrorMessage(n->pg));
}

static int channel_ok(const char *s)
{
	size_t len = strlen(s);

	if (len == 0 || len >= sizeof(((struct notify *)0)->channel))
		return 0;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_'))
			return 0;
	return 1;
}

struct notify *notify_new(struct event_base *base, const char *url, const char *channel,
                          notify_cb cb, void *arg)
{
	struct notify *n = NULL;

	if (!base || !url || !channel || !cb || !channel_ok(channel))
		return NULL;
	n = calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	n->base = base;
	n->cb = cb;
	n->arg = arg;
	n->backoff_ms = BACKOFF_MIN_MS;
	snprintf(n->channel, sizeof(n->channel), "%s", channel);
	n->url = strdup(url);
	n->io = event_new(base, -1, 0, on_io, n);
	n->timer = evtimer_new(base, on_timer, n);
	if (!n->url || !n->io || !n->timer) {
		notify_free(n);
		return NULL;
	}
	connect_start(n);
	return n;
}

int notify_up(const struct notify *n)
{
	return n && n->state == NOTIFY_UP;
}

void notify_free(struct notify *n)
{
	if (!n)
		return;
	if (n->io)
		event_free(n->io);
	if (n->timer)
		event_free(n->timer);
	PQfinish(n->pg);
	free(n->url);
	free(n);
}
