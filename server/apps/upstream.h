/* upstream.h — connections from the app proxy to apps in containers, and
 * the idle pool that keeps them alive between requests (per host:port).
 * Internal to apps/ (the rest of the server uses proxy.h).
 */
#ifndef GPUCLOUD_UPSTREAM_H
#define GPUCLOUD_UPSTREAM_H

#include <stddef.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/util.h>
#include <http_parser.h>

struct preq; /* the proxied request using a connection (proxy.c) */

struct upstream {
	struct bufferevent *bev; /* connects and writes; its own read stays off */
	struct event *rd;        /* reads: see upstream_read() */
	/* the user's: the socket is readable (or has been silent for
	 * read_timeout seconds: timeout 1) */
	void (*on_read)(struct upstream *u, int timeout);
	int read_timeout;
	http_parser parser; /* the response, parsed by its user */
	struct preq *p;     /* the user; NULL while idle */
	char key[96];       /* host:port */
	int reused;         /* taken from the idle pool */
	int eof;
	int connected;
	struct upstream *next; /* idle list */
};

/* A new, unconnected connection for key ("host:port"): its bufferevent
 * closes the socket when freed; the caller connects it.  NULL without
 * memory.  Counted as a new upstream connection. */
struct upstream *upstream_new(struct event_base *base, const char *key);

/* An idle connection to key from the pool (marked reused, its callbacks
 * still the pool's: the caller sets its own), or NULL.  The caller owns it. */
struct upstream *upstream_take(const char *key);

/* Gives u back to the pool (takes ownership): kept at most a while and
 * only while the app says nothing; freed instead when the pool is full or
 * unread bytes are left. */
void upstream_put(struct upstream *u);

/* Closes and frees u.  upstream_free(NULL) is a no-op. */
void upstream_free(struct upstream *u);

/* Reading.  A connection's socket is read by its own event, not by its
 * bufferevent: libevent's read asks FIONREAD before every read, and a read
 * that came back short needs no second one that says EAGAIN.
 * upstream_read(u, 1) watches the socket once u is connected (call it
 * again from the CONNECTED event), 0 stops; each turn it is readable (data
 * or its end) u->on_read(u, 0) runs and reads with upstream_fill(), and
 * after u->read_timeout seconds without a byte u->on_read(u, 1).  While u
 * is idle in the pool the pool watches it.  Returns -1 without memory. */
int upstream_read(struct upstream *u, int on);
/* Reads straight into u's input buffer, up to max bytes, until a read comes
 * back short.  Returns 0 (read, or would block), 1 at the end of the
 * stream, -1 on error (errno says which). */
int upstream_fill(struct upstream *u, size_t max);

/* Writes what is queued for the app now when its socket takes it; only the
 * rest waits for EV_WRITE (saves two epoll registrations a request). */
void upstream_flush(struct upstream *u);

/* Writes out to the socket fd of a socket bufferevent's output now (a
 * socket bufferevent keeps its output frozen outside its own writes).
 * Errors surface on the bufferevent's next read or write.  (The tunnels
 * use it too.) */
void upstream_write_now(struct evbuffer *out, evutil_socket_t fd);

struct upstream_stats {
	unsigned long long fresh;  /* connections made */
	unsigned long long reused; /* connections taken from the pool */
	long long idle;            /* in the pool now */
};
void upstream_get_stats(struct upstream_stats *st);

/* Frees every idle connection (at shutdown). */
void upstream_shutdown(void);

#endif
