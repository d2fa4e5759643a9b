/* proxy.c — reverse proxy for apps in containers, one origin per route.
 *
 * Owns: the proxied request (struct preq) from the http layer's virtual-
 * host hook to its one final reply: the route check's verdict turned into
 * an answer, the request head for the app (hop-by-hop headers removed,
 * gpucloud's cookies kept back, the app's token and X-Forwarded-* added),
 * the request body streamed to the app and the response parsed and
 * streamed back, both with backpressure, a stale pooled connection retried
 * once, the 101 that turns a request into a tunnel, the proxy's counters,
 * and the timer and NOTIFY listener (gc_routes, db/migrations/
 * 0012_route_notify.sql) that re-check routes and tunnels.
 * Does not own: which route and whether the caller may use it, the
 * handshake (route.c), the upstream connections and their pool
 * (upstream.c), moving tunnel bytes (tunnel.c), header rules (forward.c),
 * its own pages (page.c), activity (activity.c), making routes (database
 * triggers), tickets (api/api_routes.c), the instances themselves.
 *
 * Flow of one request: proxy_begin (the virtual host's hook, like auth) →
 * route check (cached) → upstream connection (pooled or new) → request head
 * written → http_resume: the body streams through proxy_on_body → the
 * handler runs at the end of the request → the response head and body
 * stream back from the upstream parser, which reads only while the client
 * keeps up.  A preq lives until its one final reply; every path ends in
 * finish_*() (or hands the connection to a tunnel).
 */
#include "apps/proxy.h"

#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/util.h>
#include <http_parser.h>

#include "apps/activity.h"
#include "apps/forward.h"
#include "apps/page.h"
#include "apps/route.h"
#include "apps/tunnel.h"
#include "apps/upstream.h"
#include "base/config.h"
#include "base/crypto.h"
#include "base/log.h"
#include "db/notify.h"

#define UP_HIGH        (256 * 1024) /* request bytes queued upstream before the client is paused */
#define UP_LOW         (64 * 1024)
#define CLIENT_HIGH    (1024 * 1024) /* response bytes queued to a client before the app is paused */
#define UP_READ_MAX    (256 * 1024)  /* app bytes read before the request is complete */
#define STEP           (64 * 1024)   /* upstream bytes parsed between backpressure checks */
#define MAX_RESP_HDRS  100
#define MAX_RESP_BYTES (64 * 1024)

static struct event_base *ev_base;
static struct event *recheck_timer;
/* LISTEN gc_routes: instance changes from any replica invalidate the cache
 * and re-check tunnels at once */
static struct notify *route_notify;
static unsigned long long requests, errors;

/* ---- proxied requests ---- */

struct preq {
	struct http_req *r;
	struct upstream *u;
	char route[64];
	char cookie_hash[65];
	struct route_check ck;
	struct evbuffer *head; /* request head, kept to retry on a stale pooled connection */
	int chunked;           /* the client's body is chunked: so is ours */
	int has_body;
	int websocket;   /* the client asked for a websocket upgrade */
	int msg_done;    /* the client's request is complete (handler ran) */
	int head_sent;   /* the response head went to the client */
	int resp_done;   /* the upstream response is complete */
	int keep;        /* the upstream connection may be reused */
	int body_paused; /* the client's body waits for the upstream */
	int retried;
	int head_only; /* HEAD: the response has no body */
	int status;
	uint64_t body_left; /* a Content-Length body still to move (not parsed) */
	/* The app's response headers: their bytes go into one buffer as the
	 * parser hands them over ("name\0value\0..."), at offsets; rh points
	 * into it once the head is complete (rh_final). */
	struct http_header rh[MAX_RESP_HDRS];
	struct {
		uint32_t name, value; /* offsets into rh_buf */
		int has_value;
	} rh_at[MAX_RESP_HDRS];
	int nrh;
	char *rh_buf;
	size_t rh_len, rh_cap;
	size_t rh_bytes;
	int rh_last_value;
	int rh_overflow;
};

static void preq_free(struct preq *p)
{
	if (!p)
		return;
	free(p->rh_buf);
	if (p->head)
		evbuffer_free(p->head);
	free(p);
}

static void resp_headers_clear(struct preq *p)
{
	p->rh_len = 0;
	p->nrh = 0;
	p->rh_bytes = 0;
	p->rh_last_value = 0;
}

/* Detaches and frees p's upstream connection (keep: back to the pool). */
static void drop_upstream(struct preq *p, int keep)
{
	struct upstream *u = p->u;

	if (!u)
		return;
	p->u = NULL;
	u->p = NULL;
	if (keep)
		upstream_put(u);
	else
		upstream_free(u);
}

/* The final reply of p (frees p): see page_reply(). */
static void finish_page(struct preq *p, int status, const char *code, const char *title,
                        const char *message, const char *hint, int retry)
{
	struct http_req *r = p->r;

	drop_upstream(p, 0);
	preq_free(p);
	page_reply(r, status, code, title, message, hint, retry);
}

/* Not signed in to this route (frees p): see route_sign_in(). */
static void finish_unauthenticated(struct preq *p)
{
	struct http_req *r = p->r;
	char route[64];

	snprintf(route, sizeof(route), "%s", p->route);
	drop_upstream(p, 0);
	preq_free(p);
	route_sign_in(r, route);
}

/* The client went away while we waited; only the reply frees r. */
static void finish_gone(struct preq *p)
{
	struct http_req *r = p->r;

	drop_upstream(p, 0);
	preq_free(p);
	http_reply(r, 499, NULL, NULL, 0);
}

static void on_client_close(struct http_req *r, void *arg);

static void finish_gone_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	finish_gone(arg);
}

/* ---- the upstream response ---- */

/* 1 when the app's response header i goes on to the client.  own_head:
 * our reply's head carries its own Date and X-Request-Id (not a 101, which
 * is written as the app sent it). */
static int resp_header_passes(const struct preq *p, int i, int own_head)
{
	const char *n = p->rh[i].name, *v = p->rh[i].value;
	size_t len;

	if (!n || !forward_value_ok(v) || forward_hop_by_hop(n) ||
	    forward_in_connection(p->rh, p->nrh, n))
		return 0;
	len = strlen(n);
	if (FORWARD_NAME_IS(n, len, "Content-Length") ||
	    (own_head &&
	     (FORWARD_NAME_IS(n, len, "Date") || FORWARD_NAME_IS(n, len, "X-Request-Id"))))
		return 0;
	return !FORWARD_NAME_IS(n, len, "Set-Cookie") || forward_set_cookie_ok(v);
}

/* Appends len bytes of at to the header buffer, after a NUL ending the
 * piece before when nul; 0 or -1 (out of memory). */
static int rh_add(struct preq *p, int nul, const char *at, size_t len)
{
	size_t need = p->rh_len + (size_t)nul + len + 1; /* + rh_final's NUL */

	if (need > p->rh_cap) {
		size_t cap = p->rh_cap ? p->rh_cap : 1024;
		char *b;

		while (cap < need)
			cap *= 2;
		if (!(b = realloc(p->rh_buf, cap)))
			return -1;
		p->rh_buf = b;
		p->rh_cap = cap;
	}
	if (nul)
		p->rh_buf[p->rh_len++] = '\0';
	memcpy(p->rh_buf + p->rh_len, at, len);
	p->rh_len += len;
	return 0;
}

/* The head is complete: rh points into the buffer, which grows no more. */
static void rh_final(struct preq *p)
{
	if (p->nrh > 0)
		p->rh_buf[p->rh_len++] = '\0'; /* rh_add kept room for it */
	for (int i = 0; i < p->nrh; i++) {
		p->rh[i].name = p->rh_buf + p->rh_at[i].name;
		p->rh[i].value = p->rh_at[i].has_value ? p->rh_buf + p->rh_at[i].value : NULL;
	}
}

static int up_header_field(http_parser *hp, const char *at, size_t len)
{
	struct upstream *u = hp->data;
	struct preq *p = u->p;
	int nul = 0;

	if (!p)
		return 1;
	p->rh_bytes += len;
	if (p->rh_bytes > MAX_RESP_BYTES)
		return 1;
	if (p->rh_last_value || p->nrh == 0) {
		if (p->nrh >= MAX_RESP_HDRS) {
			p->rh_overflow = 1;
			return 1;
		}
		nul = p->nrh > 0; /* ends the value (or name) before */
		p->rh_at[p->nrh].name = (uint32_t)(p->rh_len + (size_t)nul);
		p->rh_at[p->nrh].has_value = 0;
		p->nrh++;
		p->rh_last_value = 0;
	}
	return rh_add(p, nul, at, len) < 0;
}

static int up_header_value(http_parser *hp, const char *at, size_t len)
{
	struct upstream *u = hp->data;
	struct preq *p = u->p;
	int nul = 0;

	if (!p || p->nrh == 0)
		return 1;
	p->rh_bytes += len;
	if (p->rh_bytes > MAX_RESP_BYTES)
		return 1;
	if (!p->rh_last_value) {
		nul = 1; /* ends the name */
		p->rh_at[p->nrh - 1].value = (uint32_t)(p->rh_len + 1);
		p->rh_at[p->nrh - 1].has_value = 1;
		p->rh_last_value = 1;
	}
	return rh_add(p, nul, at, len) < 0;
}

static int up_headers_complete(http_parser *hp)
{
	struct upstream *u = hp->data;
	struct preq *p = u->p;
	struct http_req *r;
	int64_t length;

	if (!p)
		return -1;
	r = p->r;
	p->status = hp->status_code;
	rh_final(p);
	if (p->status < 200)
		return 0; /* 1xx: 101 is handled at message end, others are dropped */
	for (int i = 0; i < p->nrh; i++)
		if (resp_header_passes(p, i, 1))
			http_add_header(r, p->rh[i].name, p->rh[i].value);
	if (p->status == 204 || p->status == 304)
		length = -2;
	else if (hp->flags & F_CHUNKED)
		length = p->head_only ? -2 : -1;
	else if ((hp->flags & F_CONTENTLENGTH) && hp->content_length != ULLONG_MAX)
		length = (int64_t)hp->content_length;
	else
		length = p->head_only ? -2 : -1; /* until the app closes: chunked to the client */
	http_stream_begin(r, p->status, NULL, length);
	http_stream_on_drain(r, NULL, NULL);
	p->head_sent = 1;
	if (length > 0 && !p->head_only && !(hp->flags & F_CHUNKED)) {
		/* a body of known length is moved buffer to buffer, not parsed:
		 * the parser is told there is none */
		p->body_left = (uint64_t)length;
		return 1;
	}
	return p->head_only ? 1 : 0;
}

static int up_body(http_parser *hp, const char *at, size_t len)
{
	struct upstream *u = hp->data;
	struct preq *p = u->p;

	if (!p)
		return -1;
	activity_note(p->route, p->ck.instance_id, len);
	http_stream_write(p->r, at, len);
	return 0;
}

static int up_message_complete(http_parser *hp)
{
	struct upstream *u = hp->data;
	struct preq *p = u->p;

	if (!p)
		return -1;
	if (p->status >= 100 && p->status < 200 && p->status != 101) {
		resp_headers_clear(p); /* 100 Continue, 103 Early Hints: the answer follows */
		return 0;
	}
	p->resp_done = 1;
	p->keep = http_should_keep_alive(hp) && p->status != 101;
	http_parser_pause(hp, 1);
	return 0;
}

static http_parser_settings up_settings = {
	.on_header_field = up_header_field,
	.on_header_value = up_header_value,
	.on_headers_complete = up_headers_complete,
	.on_body = up_body,
	.on_message_complete = up_message_complete,
};

static void start_tunnel(struct preq *p);
static void up_drive(struct preq *p);
static void up_failed(struct preq *p, const char *why, int timeout);
static void connect_upstream(struct preq *p);

/* The upstream failed (connect refused, reset, timeout, bad response). */
static void up_failed(struct preq *p, const char *why, int timeout)
{
	struct http_req *r = p->r;

	log_msg(LOG_INFO, "proxy", r->reqid, "upstream %s:%d for route %s: %s", p->ck.host,
	        p->ck.port, p->route, why);
	if (p->head_sent) {
		/* mid-response: the client must see a truncated message, not a
		 * complete one */
		drop_upstream(p, 0);
		preq_free(p);
		errors++;
		http_stream_abort(r);
		return;
	}
	if (p->u && p->u->reused && !p->retried && !p->has_body && p->status == 0 && !timeout) {
		/* a pooled connection the app had closed meanwhile: once more on a
		 * fresh one (safe: nothing of the request body was consumed) */
		drop_upstream(p, 0);
		p->retried = 1;
		connect_upstream(p);
		return;
	}
	errors++;
	if (timeout)
		finish_page(p, 504, "timeout", "The app did not answer",
		            "the app did not answer in time", "retry, or restart the instance", 0);
	else
		finish_page(p, 502, "bad_gateway",
		            strcmp(p->ck.port_name, "jupyter") == 0 ? "Jupyter is starting…"
		                                                    : "The app is starting…",
		            "the app in the instance is not answering yet; this page retries",
		            "wait a few seconds", 2);
}

static void client_drained(struct http_req *r, void *arg)
{
	struct preq *p = arg;

	(void)r;
	http_stream_on_drain(p->r, NULL, NULL);
	if (p->u && !p->u->eof)
		upstream_read(p->u, 1);
	up_drive(p);
}

/* Parses what the app sent, as far as the client keeps up. */
static void up_drive(struct preq *p)
{
	while (p->u && p->msg_done) {
		struct upstream *u = p->u;
		struct evbuffer *in = bufferevent_get_input(u->bev);
		struct evbuffer_iovec v;
		size_t n, nparsed;
		enum http_errno e;

		if (p->head_sent && http_stream_backlog(p->r) > CLIENT_HIGH) {
			/* the client is slower than the app: stop reading the app */
			upstream_read(u, 0);
			http_stream_on_drain(p->r, client_drained, p);
			return;
		}
		if (p->body_left) {
			size_t have = evbuffer_get_length(in);
			size_t n = have < p->body_left ? have : (size_t)p->body_left;
			if (n == 0) {
				if (!u->eof)
					return;
				up_failed(p, "closed mid-response", 0);
				return;
			}
			if (n > 4 * STEP)
				n = 4 * STEP;
			activity_note(p->route, p->ck.instance_id, n);
			http_stream_write_buffer(p->r, in, n);
			p->body_left -= n;
			continue;
		}
		if (p->resp_done)
			break;
		if (evbuffer_peek(in, -1, NULL, &v, 1) < 1 || v.iov_len == 0) {
			if (!u->eof)
				return;
			/* the app closed: that ends a read-until-close body */
			http_parser_execute(&u->parser, &up_settings, NULL, 0);
			if (p->resp_done && p->u) {
				p->keep = 0;
				break;
			}
			up_failed(p, p->status ? "closed mid-response" : "closed before answering",
			          0);
			return;
		}
		n = v.iov_len < STEP ? v.iov_len : STEP;
		nparsed = http_parser_execute(&u->parser, &up_settings, v.iov_base, n);
		evbuffer_drain(in, nparsed);
		e = HTTP_PARSER_ERRNO(&u->parser);
		if (e == HPE_PAUSED)
			continue; /* the response's head is done: its body, then the end */
		if (e != HPE_OK) {
			up_failed(p, http_errno_description(e), 0);
			return;
		}
	}
	if (!p->u || !p->resp_done)
		return;
	if (p->status == 101) {
		start_tunnel(p);
		return;
	}
	{
		struct http_req *r = p->r;
		int keep = p->keep && !p->u->eof;
		if (p->head_sent) {
			drop_upstream(p, keep);
			preq_free(p);
			http_stream_end(r);
		} else {
			up_failed(p, "no response", 0);
		}
	}
}

/* The app's socket is readable, or said nothing for proxy_timeout: read
 * what the request may take now (upstream.h), then parse it. */
static void up_readable(struct upstream *u, int timeout)
{
	struct preq *p = u->p;
	size_t have = evbuffer_get_length(bufferevent_get_input(u->bev)), max;
	int rc;

	if (timeout) {
		up_failed(p, "timed out", 1);
		return;
	}
	if (!p->msg_done)
		/* the request is still coming: an early answer waits, up to a
		 * cap (proxy_handler reads on) */
		max = have < UP_READ_MAX ? UP_READ_MAX - have : 0;
	else if (p->head_sent && http_stream_backlog(p->r) > CLIENT_HIGH)
		/* the client is behind: up_drive (the same test) waits for
		 * client_drained, which reads on */
		max = 0;
	else
		/* a big response arrives in ~64 KiB pieces: reading on until
		 * the socket is empty takes it in a few wake-ups, not one per
		 * piece */
		max = CLIENT_HIGH;
	if (max == 0) {
		upstream_read(u, 0);
	} else {
		rc = upstream_fill(u, max);
		if (rc < 0) {
			up_failed(p, evutil_socket_error_to_string(errno), 0);
			return;
		}
		if (rc == 1) {
			/* (the app hung up while the request was still coming:
			 * what it answered is read once the request is done) */
			u->eof = 1;
			upstream_read(u, 0);
		}
	}
	up_drive(p);
}

static void up_write(struct bufferevent *bev, void *arg)
{
	struct upstream *u = arg;
	struct preq *p = u->p;

	if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
		bufferevent_disable(bev, EV_WRITE); /* upstream_flush writes directly again */
	if (p && p->body_paused) {
		p->body_paused = 0;
		http_body_resume(p->r);
	}
}

static void up_event(struct bufferevent *bev, short what, void *arg)
{
	struct upstream *u = arg;
	struct preq *p = u->p;
	struct timeval rt = { cfg.proxy_timeout, 0 };

	if (what & BEV_EVENT_CONNECTED) {
		int one = 1;
		u->connected = 1;
		setsockopt(bufferevent_getfd(bev), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		bufferevent_set_timeouts(bev, NULL, &rt);
		if (p && upstream_read(u, 1) < 0) {
			up_failed(p, "out of memory", 0);
			return;
		}
		if (p && !p->msg_done)
			http_resume(p->r); /* now the body may flow */
		return;
	}
	if (!p) {
		upstream_free(u);
		return;
	}
	if (what & BEV_EVENT_TIMEOUT) {
		up_failed(p, "timed out", 1);
		return;
	}
	up_failed(p, evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()), 0);
}

/* Writes p->head and points the connection at p. */
static void attach(struct preq *p, struct upstream *u)
{
	struct timeval rt = { cfg.proxy_timeout, 0 };

	p->u = u;
	u->p = p;
	u->eof = 0;
	http_parser_init(&u->parser, HTTP_RESPONSE);
	u->parser.data = u;
	u->on_read = up_readable;
	u->read_timeout = cfg.proxy_timeout;
	bufferevent_setcb(u->bev, NULL, up_write, up_event, u);
	bufferevent_setwatermark(u->bev, EV_WRITE, UP_LOW, 0);
	evbuffer_add(bufferevent_get_output(u->bev), evbuffer_pullup(p->head, -1),
	             evbuffer_get_length(p->head));
	if (u->reused)
		bufferevent_set_timeouts(u->bev, NULL, &rt);
	if (u->connected) {
		upstream_read(u, 1); /* (a connected one has its event: no allocation) */
		upstream_flush(u);
	} else {
		bufferevent_enable(u->bev, EV_WRITE); /* connecting */
	}
}

static void connect_upstream(struct preq *p)
{
	char key[96];
	struct upstream *u;
	struct sockaddr_storage ss;
	int sslen = sizeof(ss);
	struct timeval ct = { cfg.proxy_connect_timeout, 0 };

	snprintf(key, sizeof(key), "%s:%d", p->ck.host, p->ck.port);
	if (!p->retried && (u = upstream_take(key)) != NULL) {
		attach(p, u);
		if (!p->msg_done)
			http_resume(p->r);
		return;
	}
	memset(&ss, 0, sizeof(ss));
	if (evutil_parse_sockaddr_port(key, (struct sockaddr *)&ss, &sslen) < 0) {
		finish_page(p, 502, "bad_gateway", "The app cannot be reached",
		            "the instance's address is not an IP address", NULL, 0);
		return;
	}
	u = upstream_new(ev_base, key);
	if (!u) {
		finish_page(p, 503, "unavailable", "Busy", "out of memory", NULL, 2);
		return;
	}
	attach(p, u);
	/* while connecting, the write timeout is the connect timeout */
	bufferevent_set_timeouts(u->bev, NULL, &ct);
	if (bufferevent_socket_connect(u->bev, (struct sockaddr *)&ss, sslen) < 0) {
		up_failed(p, "connect failed", 0);
		return;
	}
}

/* ---- the request head for the app ---- */

/* 1 when the client's request header i goes on to the app: not
 * hop-by-hop, not what the proxy sets itself (length, credentials, the
 * forwarding headers), not a value with a line break (a folded one). */
static int req_header_passes(const struct http_req *r, int i)
{
	const char *n = r->hdr[i].name;
	size_t len = strlen(n);

	if (forward_hop_by_hop(n) || forward_in_connection(r->hdr, r->nhdr, n) ||
	    !forward_value_ok(r->hdr[i].value))
		return 0;
	return !(FORWARD_NAME_IS(n, len, "Content-Length") ||
	         FORWARD_NAME_IS(n, len, "Authorization") || FORWARD_NAME_IS(n, len, "Cookie") ||
	         FORWARD_NAME_IS(n, len, "Expect") || FORWARD_NAME_IS(n, len, "Forwarded") ||
	         FORWARD_NAME_IS(n, len, "X-Real-IP") ||
	         (len >= 12 && strncasecmp(n, "X-Forwarded-", 12) == 0) ||
	         (len >= 6 && strncasecmp(n, "Proxy-", 6) == 0));
}

/* The head written in pieces, not through printf: it is built for every
 * proxied request. */
#define ADD_LIT(b, lit) evbuffer_add((b), "" lit, sizeof(lit) - 1)
#define ADD_STR(b, s)   evbuffer_add((b), (s), strlen(s))

static int build_head(struct preq *p)
{
	struct http_req *r = p->r;
	struct evbuffer *h = evbuffer_new();
	const char *host = http_header(r, "Host");
	char num[24];

	if (!h)
		return -1;
	ADD_STR(h, http_method_str((enum http_method)r->method));
	ADD_LIT(h, " ");
	ADD_STR(h, r->url);
	ADD_LIT(h, " HTTP/1.1\r\n");
	for (int i = 0; i < r->nhdr; i++)
		if (req_header_passes(r, i))
			forward_put_header(h, r->hdr[i].name, r->hdr[i].value);
	if (!host) {
		ADD_LIT(h, "Host: ");
		ADD_STR(h, p->route);
		ADD_LIT(h, ".");
		ADD_STR(h, cfg.apps_domain);
		ADD_LIT(h, "\r\n");
	}
	forward_app_cookies(r, h);
	ADD_LIT(h, "Authorization: token ");
	ADD_STR(h, p->ck.token);
	ADD_LIT(h, "\r\nX-Forwarded-For: ");
	ADD_STR(h, r->peer);
	ADD_STR(h, r->tls ? "\r\nX-Forwarded-Proto: https\r\nX-Forwarded-Host: "
	                  : "\r\nX-Forwarded-Proto: http\r\nX-Forwarded-Host: ");
	ADD_STR(h, host ? host : "");
	ADD_LIT(h, "\r\n");
	if (p->websocket)
		ADD_LIT(h, "Connection: Upgrade\r\nUpgrade: websocket\r\n");
	if (r->content_length >= 0) {
		snprintf(num, sizeof(num), "%lld", (long long)r->content_length);
		forward_put_header(h, "Content-Length", num);
		p->has_body = r->content_length > 0;
	} else if (p->chunked) {
		ADD_LIT(h, "Transfer-Encoding: chunked\r\n");
		p->has_body = 1;
	}
	ADD_LIT(h, "\r\n");
	p->head = h;
	return 0;
}

/* ---- websocket upgrades ---- */

static int is_websocket(const struct http_req *r)
{
	const char *up = http_header(r, "Upgrade");

	return r->method == HTTP_GET && up && strcasecmp(up, "websocket") == 0 &&
	       forward_in_connection(r->hdr, r->nhdr, "upgrade");
}

static void start_tunnel(struct preq *p)
{
	struct tunnel *t;
	struct bufferevent *client, *app;
	struct evbuffer *out;
	struct upstream *u = p->u;
	int eof = u->eof;

	if (!p->websocket) {
		up_failed(p, "switched protocols unasked", 0);
		return;
	}
	t = tunnel_new();
	if (!t) {
		up_failed(p, "out of memory", 0);
		return;
	}
	client = http_upgrade_take(p->r); /* p->r is gone from here on */
	p->r = NULL;
	if (!client) {
		drop_upstream(p, 0);
		preq_free(p);
		free(t);
		return;
	}
	out = bufferevent_get_output(client);
	evbuffer_add_printf(out, "HTTP/1.1 101 Switching Protocols\r\n");
	for (int i = 0; i < p->nrh; i++)
		if (resp_header_passes(p, i, 0))
			forward_put_header(out, p->rh[i].name, p->rh[i].value);
	evbuffer_add_printf(out, "Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n");
	/* frames the app sent right behind its 101 */
	evbuffer_add_buffer(out, bufferevent_get_input(u->bev));
	app = u->bev;
	u->bev = NULL;
	p->u = NULL;
	upstream_free(u);
	tunnel_start(t, client, app, p->route, p->cookie_hash, p->ck.instance_id, eof);
	preq_free(p);
}

/* ---- request phases ---- */

static void checked(struct preq *p)
{
	struct http_req *r = p->r;
	const struct route_check *ck = &p->ck;

	if (!http_req_alive(r)) {
		finish_gone(p);
		return;
	}
	if (!ck->found) {
		finish_page(p, 404, "not_found", "No such app", "there is no app at this address",
		            NULL, 0);
		return;
	}
	if (!ck->allowed) {
		finish_unauthenticated(p);
		return;
	}
	if (strcmp(ck->state, "queued") == 0 || strcmp(ck->state, "pulling") == 0 ||
	    strcmp(ck->state, "creating") == 0 ||
	    (strcmp(ck->state, "running") == 0 && !ck->port)) {
		char title[128];
		snprintf(title, sizeof(title), "%s is starting…", page_app_title(ck->port_name));
		finish_page(p, 503, "unavailable", title,
		            "the instance is starting; this page retries by itself",
		            "wait a few seconds", 2);
		return;
	}
	if (strcmp(ck->state, "running") != 0) {
		finish_page(p, 410, "gone", "This instance is not running",
		            "the instance of this app is stopped or deleted",
		            "start the instance again from gpucloud", 0);
		return;
	}
	if (build_head(p) < 0) {
		finish_page(p, 503, "unavailable", "Busy", "out of memory", NULL, 2);
		return;
	}
	requests++;
	http_req_on_close(r, on_client_close, p);
	connect_upstream(p);
}

static void check_done(const struct route_check *ck, enum rc rc, void *arg)
{
	struct preq *p = arg;

	if (rc != RC_OK) {
		if (!http_req_alive(p->r)) {
			finish_gone(p);
			return;
		}
		finish_page(p, 503, "unavailable", "Try again",
		            "cannot check this app's session now", "retry in a few seconds", 2);
		return;
	}
	p->ck = *ck;
	checked(p);
}

/* ---- the http hooks ---- */

static void on_client_close(struct http_req *r, void *arg)
{
	struct preq *p = arg;

	(void)r;
	/* the client is gone: the app's connection is in an unknown state */
	drop_upstream(p, 0);
	p->resp_done = 1;
	/* the reply frees r; from the loop, not inside the connection's free */
	if (event_base_once(ev_base, -1, EV_TIMEOUT, finish_gone_cb, p, NULL) < 0)
		log_msg(LOG_ERROR, "proxy", NULL, "cannot schedule the end of a request");
}

static void proxy_begin(struct http_req *r)
{
	struct preq *p = calloc(1, sizeof(*p));
	char cookie[128];
	const struct route_check *ck;

	if (!p) {
		http_reply_error(r, RC_NOMEM, NULL, "out of memory");
		return;
	}
	p->r = r;
	r->data = p; /* owned here, freed by the final reply's path (data_free stays NULL) */
	route_from_host(http_header(r, "Host"), p->route, sizeof(p->route));
	if (!route_id_ok(p->route)) {
		finish_page(p, 404, "not_found", "No such app", "there is no app at this address",
		            NULL, 0);
		return;
	}
	if (r->method == HTTP_CONNECT) {
		finish_page(p, 405, "method_not_allowed", "Method not allowed",
		            "CONNECT is not proxied", NULL, 0);
		return;
	}
	p->websocket = is_websocket(r);
	{
		const char *why = route_cross_origin_refusal(
		        r, p->route, p->websocket || http_header(r, "Upgrade"));
		if (why) {
			log_msg(LOG_INFO, "proxy", r->reqid, "refused %s %s on route %s: %s",
			        http_method_str((enum http_method)r->method), r->path, p->route,
			        why);
			preq_free(p);
			r->data = NULL;
			http_add_header(r, "Cache-Control", "no-store");
			http_reply_error(r, RC_FORBIDDEN,
			                 "open the app from its own page; other sites and apps may "
			                 "not drive it",
			                 "%s", why);
			return;
		}
	}
	if (strcmp(r->path, ROUTE_HANDSHAKE_PATH) == 0) {
		char route[64];
		snprintf(route, sizeof(route), "%s", p->route);
		preq_free(p);
		r->data = NULL;
		route_handshake(r, route);
		return;
	}
	p->chunked = r->content_length < 0 && http_header(r, "Transfer-Encoding") != NULL;
	p->head_only = r->method == HTTP_HEAD;
	route_cookie(r, cookie, sizeof(cookie));
	if (!cookie[0]) {
		finish_unauthenticated(p);
		return;
	}
	crypto_sha256_hex(cookie, strlen(cookie), p->cookie_hash);
	ck = route_check_cached(p->route, p->cookie_hash);
	if (ck) {
		p->ck = *ck;
		checked(p);
		return;
	}
	route_check_ask(p->route, p->cookie_hash, check_done, p);
}

static enum rc proxy_on_body(struct http_req *r, const char *data, size_t len)
{
	struct preq *p = r->data;
	struct evbuffer *out;

	if (!p || !p->u)
		return RC_OK; /* the request is being answered with an error */
	out = bufferevent_get_output(p->u->bev);
	if (p->chunked)
		evbuffer_add_printf(out, "%zx\r\n", len);
	evbuffer_add(out, data, len);
	if (p->chunked)
		evbuffer_add(out, "\r\n", 2);
	activity_note(p->route, p->ck.instance_id, len);
	upstream_flush(p->u);
	if (evbuffer_get_length(out) > UP_HIGH) {
		p->body_paused = 1;
		http_body_pause(r);
	}
	return RC_OK;
}

static void proxy_handler(struct http_req *r)
{
	struct preq *p = r->data;

	if (!p) {
		http_reply_error(r, RC_INTERNAL, NULL, "proxy state lost");
		return;
	}
	p->msg_done = 1;
	if (!p->u) {
		finish_gone(p);
		return;
	}
	if (!p->u->eof)
		upstream_read(p->u, 1); /* an early answer may have filled its cap */
	if (p->chunked) {
		evbuffer_add(bufferevent_get_output(p->u->bev), "0\r\n\r\n", 5);
		upstream_flush(p->u);
	}
	up_drive(p);
}

static const struct route proxy_route = {
	.method = HTTP_GET,
	.pattern = "(proxy)",
	.handler = proxy_handler,
	.roles = ROLES_PUBLIC,
	.flags = ROUTE_STREAM | ROUTE_RAW_BODY,
	.max_body = (int64_t)1 << 40,
	.on_body = proxy_on_body,
};

static int proxy_match(const char *host)
{
	char id[64];

	return route_from_host(host, id, sizeof(id));
}

const struct http_vhost proxy_vhost = {
	.match = proxy_match,
	.begin = proxy_begin,
	.route = &proxy_route,
};

/* ---- for the API and metrics ---- */

void proxy_route_origin(const char *route_id, char *out, size_t outlen)
{
	route_origin(route_id, out, outlen);
}

int proxy_route_id_ok(const char *s)
{
	return route_id_ok(s);
}

void proxy_metrics(struct evbuffer *out)
{
	struct upstream_stats us;

	upstream_get_stats(&us);
	evbuffer_add_printf(out,
	                    "# HELP gpucloud_proxy_requests_total Requests proxied to apps.\n"
	                    "# TYPE gpucloud_proxy_requests_total counter\n"
	                    "gpucloud_proxy_requests_total %llu\n"
	                    "# HELP gpucloud_proxy_upstream_connections_total Upstream connections"
	                    " by origin (new or reused from the idle pool).\n"
	                    "# TYPE gpucloud_proxy_upstream_connections_total counter\n"
	                    "gpucloud_proxy_upstream_connections_total{kind=\"new\"} %llu\n"
	                    "gpucloud_proxy_upstream_connections_total{kind=\"reused\"} %llu\n"
	                    "# HELP gpucloud_proxy_upstream_idle Idle upstream connections kept.\n"
	                    "# TYPE gpucloud_proxy_upstream_idle gauge\n"
	                    "gpucloud_proxy_upstream_idle %lld\n"
	                    "# HELP gpucloud_proxy_tunnels_open Websocket tunnels open now.\n"
	                    "# TYPE gpucloud_proxy_tunnels_open gauge\n"
	                    "gpucloud_proxy_tunnels_open %lld\n"
	                    "# HELP gpucloud_proxy_errors_total Upstream failures (502/504).\n"
	                    "# TYPE gpucloud_proxy_errors_total counter\n"
	                    "gpucloud_proxy_errors_total %llu\n",
	                    requests, us.fresh, us.reused, us.idle, tunnel_open_count(), errors);
	evbuffer_add_printf(out,
	                    "# HELP gpucloud_proxy_bytes_total Bytes proxied to and from apps"
	                    " (both directions, all routes).\n"
	                    "# TYPE gpucloud_proxy_bytes_total counter\n"
	                    "gpucloud_proxy_bytes_total %llu\n",
	                    activity_bytes());
}

/* ---- re-checks and life cycle ---- */

static void on_recheck(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	tunnel_recheck(-1);
}

/* A NOTIFY on gc_routes (payload: an instance id), or the listener just
 * (re)connected (payload NULL: changes may have been missed meanwhile). */
static void on_route_notify(const char *payload, void *arg)
{
	char *end = NULL;
	long long id = -1;

	(void)arg;
	if (payload) {
		id = strtoll(payload, &end, 10);
		if (end == payload || *end || id < 0)
			id = -1; /* not ours to parse: forget everything, to be safe */
	}
	LOG_D("proxy", "routes of instance %lld changed", id);
	route_cache_drop(id);
	tunnel_recheck(id);
}

int proxy_init(struct event_base *base, int port)
{
	struct timeval tv = { cfg.proxy_recheck, 0 };

	ev_base = base;
	route_init(port);
	recheck_timer = event_new(base, -1, EV_PERSIST, on_recheck, NULL);
	if (!recheck_timer || event_add(recheck_timer, &tv) < 0)
		return -1;
	/* no listener (no database URL): the cache's TTL and the re-check timer
	 * still bound how long a change goes unseen */
	if (cfg.db_url && cfg.db_url[0] &&
	    !(route_notify = notify_new(base, cfg.db_url, "gc_routes", on_route_notify, NULL)))
		LOG_W("proxy", "cannot listen for route changes; relying on the cache's expiry");
	return 0;
}

void proxy_shutdown(void)
{
	tunnel_close_all();
	upstream_shutdown();
	route_shutdown();
	notify_free(route_notify);
	route_notify = NULL;
	if (recheck_timer) {
		event_free(recheck_timer);
		recheck_timer = NULL;
	}
}
