/* http.c — HTTP/1.1 connections on libevent bufferevents, parsed by
 * http-parser.
 *
 * Owns: accepting (plain and TLS), one http_parser per connection, limits
 * (URL, header bytes and count, body per route), phase timeouts (header
 * deadline, body silence, keep-alive idle, write stall), routing, the auth
 * hook, buffered or streamed request bodies, responses (whole or streamed
 * with backpressure), pipelining and graceful shutdown.
 * Does not own: what handlers do, users, sessions, the database.
 *
 * Pipelining: the parser is paused after each message's headers and after
 * each complete message, so exactly one request per connection is being
 * handled at a time; bytes of the next request wait in the input buffer
 * (bounded by a read watermark) until the response is complete.
 * Parser callbacks only record; the driving loop (drive()) acts after
 * http_parser_execute returns, so nothing re-enters the parser.
 * Connections are freed only from event callbacks, never inside a handler.
 */
#include "net/http.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/listener.h>
#include <http_parser.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "base/clock.h"
#include "base/config.h"
#include "base/crypto.h"
#include "base/jsonw.h"
#include "base/log.h"

enum phase {
	PH_HEADERS = 0,  /* reading request line and headers */
	PH_HEADERS_DONE, /* parser paused after headers */
	PH_AUTH,         /* waiting for the auth hook */
	PH_BODY,         /* reading the body */
	PH_MSG_DONE,     /* parser paused after the message */
	PH_HANDLER,      /* handler owns the request */
	PH_ERROR,        /* an error reply is due (parse/limit) */
};

#define READ_HIGH_WATERMARK  (256 * 1024)
#define READ_CHUNK           (16 * 1024) /* bytes reserved per plain read */
#define STREAM_LOW_WATERMARK (64 * 1024)
/* Output queued beyond this stops parsing further pipelined requests. */
#define OUT_HIGH_WATERMARK (256 * 1024)

struct http_server {
	struct event_base *base;
	struct evconnlistener *lis;
	SSL_CTX *ssl;
	struct http_server_opts opts;
	int port;
	int draining;
	struct http_conn *conns;
	void (*drain_done)(void *arg);
	void *drain_arg;
	struct event *drain_timer;
};

struct http_conn {
	struct http_server *srv;
	struct bufferevent *bev;
	http_parser parser;
	struct http_req *req;
	struct event *timer; /* header deadline */
	struct event *kick;  /* deferred drive() / close */
	struct event *flush; /* deferred conn_flush() of a streamed head */
	char peer[64];
	int tls;
	int paused;  /* parser paused, waiting for hook/handler/reply */
	int closing; /* close once the output is flushed */
	int linger;  /* a request body may still be arriving: close gently */
	int lingering;
	int keep_alive;
	int out_blocked;     /* parsing stopped until the output drains */
	struct event *rd;    /* plain connections: reads the socket (raw_read) */
	int reading;         /* plain: reading wanted (not after EOF) */
	size_t read_max;     /* plain: bytes reserved per read (READ_CHUNK) */
	int rd_timeout;      /* plain: rd is added with this timeout; -1 not added */
	int driving;         /* inside drive(): it goes on by itself, no kick */
	int read_timeout;    /* the read timeout set on bev, seconds (0 none) */
	int want_timeout;    /* the one drive() sets when it ends */
	int eof;             /* the client half-closed: nothing more will arrive */
	uint64_t chunk_left; /* chunked body: data bytes left in this chunk */
	int chunk_crlf;      /* chunked body: the CRLF after a chunk's data is next */
	enum rc err_rc;      /* error recorded by a parser callback */
	struct http_conn *prev, *next;
};

static struct http_stats stats;
static struct http_parser_settings settings;
static struct route fallback_route;

static void drive(struct http_conn *c);
static int http_header_out_has(const struct http_req *r, const char *name);
static void conn_free(struct http_conn *c);
static void request_done(struct http_req *r);
static void body_open(struct http_req *r);

/* ---- small helpers ---- */

static const char *date_header(void)
{
	static char buf[64];
	static time_t last;
	time_t t = time(NULL);
	struct tm tm;

	if (t != last) {
		gmtime_r(&t, &tm);
		strftime(buf, sizeof(buf), "%a, %d %b %Y %H:%M:%S GMT", &tm);
		last = t;
	}
	return buf;
}

const char *http_method_name(int method)
{
	return method < 0 ? "-" : http_method_str((enum http_method)method);
}

const char *http_reason(int status)
{
	switch (status) {
	case 100: return "Continue";
	case 101: return "Switching Protocols";
	case 200: return "OK";
	case 201: return "Created";
	case 202: return "Accepted";
	case 204: return "No Content";
	case 206: return "Partial Content";
	case 301: return "Moved Permanently";
	case 302: return "Found";
	case 303: return "See Other";
	case 304: return "Not Modified";
	case 307: return "Temporary Redirect";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 409: return "Conflict";
	case 410: return "Gone";
	case 411: return "Length Required";
	case 413: return "Content Too Large";
	case 414: return "URI Too Long";
	case 415: return "Unsupported Media Type";
	case 416: return "Range Not Satisfiable";
	case 422: return "Unprocessable Content";
	case 429: return "Too Many Requests";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 501: return "Not Implemented";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	case 507: return "Insufficient Storage";
	default: return "Unknown";
	}
}

/* Plain connections are read by c->rd straight into the bufferevent's
 * input: libevent's own read asks FIONREAD before every read, a syscall
 * per request.  c->rd is added while reading is wanted and the input is
 * under READ_HIGH_WATERMARK (what the bufferevent's watermark did), with
 * the read timeout as its inactivity timeout (a persistent event's timeout
 * restarts whenever it fires).  TLS connections are read by their
 * bufferevent. */
static void read_update(struct http_conn *c)
{
	int want;

	if (!c->rd)
		return;
	want = c->reading &&
	       evbuffer_get_length(bufferevent_get_input(c->bev)) < READ_HIGH_WATERMARK;
	if (want && c->rd_timeout != c->read_timeout) {
		struct timeval tv = { c->read_timeout, 0 };
		event_add(c->rd, c->read_timeout > 0 ? &tv : NULL);
		c->rd_timeout = c->read_timeout;
	} else if (!want && c->rd_timeout >= 0) {
		event_del(c->rd);
		c->rd_timeout = -1;
	}
}

static void read_stop(struct http_conn *c)
{
	if (c->rd) {
		c->reading = 0;
		read_update(c);
	} else {
		bufferevent_disable(c->bev, EV_READ);
	}
}

static void apply_read_timeout(struct http_conn *c, int seconds)
{
	struct timeval rt = { seconds, 0 }, wt = { cfg.write_timeout, 0 };

	if (seconds == c->read_timeout)
		return;
	c->read_timeout = seconds;
	if (c->rd)
		read_update(c);
	else
		bufferevent_set_timeouts(c->bev, seconds > 0 ? &rt : NULL, &wt);
}

/* The read timeout for what comes next.  Inside drive() only the last one
 * asked for counts, set when drive() ends: a request answered at once goes
 * keep-alive → handler (none) → keep-alive without touching the timers. */
static void set_read_timeout(struct http_conn *c, int seconds)
{
	if (c->driving)
		c->want_timeout = seconds;
	else
		apply_read_timeout(c, seconds);
}

/* drive() again from the loop; not needed from inside drive(), whose loop
 * goes on once the parser is unpaused. */
static void kick(struct http_conn *c)
{
	if (!c->driving)
		event_active(c->kick, EV_TIMEOUT, 0);
}

/* Writes queued output now when the socket takes it, and asks the loop to
 * write (EV_WRITE) only for what is left: most responses then cost one
 * send and no epoll registration.  Plain connections only; TLS keeps
 * EV_WRITE enabled and lets the bufferevent write. */
static void conn_flush(struct http_conn *c)
{
	struct evbuffer *out = bufferevent_get_output(c->bev);

	if (evbuffer_get_length(out) == 0)
		return;
	if (!c->tls && !(bufferevent_get_enabled(c->bev) & EV_WRITE)) {
		/* a socket bufferevent keeps its output's start frozen outside
		 * its own writes (evbuffer_write would write nothing): thaw it */
		evbuffer_unfreeze(out, 1);
		evbuffer_write(out, bufferevent_getfd(c->bev)); /* errors surface below */
		evbuffer_freeze(out, 1);
	}
	if (evbuffer_get_length(out))
		bufferevent_enable(c->bev, EV_WRITE);
}

/* ---- requests ---- */

/* Request ids: unique and unguessable enough to correlate logs, cheap
 * enough for every request (a random seed, then splitmix64 of a counter). */
static void reqid_next(char out[17])
{
	static uint64_t seed, n;
	uint64_t z;

	if (!seed && crypto_random(&seed, sizeof(seed)) < 0)
		seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
	z = seed + 0x9e3779b97f4a7c15ULL * ++n;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	z ^= z >> 31;
	for (int i = 15; i >= 0; i--, z >>= 4)
		out[i] = "0123456789abcdef"[z & 15];
	out[16] = '\0';
}

static struct http_req *req_new(struct http_conn *c)
{
	struct http_req *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->conn = c;
	r->srv = c->srv;
	r->method = -1; /* until the request line names one */
	r->content_length = -1;
	r->t_start = clock_now_s();
	r->tls = c->tls;
	memcpy(r->peer, c->peer, sizeof(r->peer));
	reqid_next(r->reqid);
	stats.requests_total++;
	return r;
}

static void req_free(struct http_req *r)
{
	if (!r)
		return;
	if (r->data_free)
		r->data_free(r->data);
	for (int i = 0; i < r->nhdr; i++) {
		free(r->hdr[i].name);
		free(r->hdr[i].value);
	}
	free(r->hdr);
	free(r->hname);
	free(r->url);
	free(r->path);
	free(r->query);
	router_params_free(&r->params);
	if (r->body)
		evbuffer_free(r->body);
	if (r->out_hdrs)
		evbuffer_free(r->out_hdrs);
	free(r);
}

static void req_release(struct http_server *srv, struct http_req *r)
{
	if (r->auth && srv && srv->opts.auth_free)
		srv->opts.auth_free(r->auth);
	r->auth = NULL;
	req_free(r);
}

const char *http_header(const struct http_req *r, const char *name)
{
	int first = name[0] | 0x20; /* equal names have equal first bytes after this */

	/* the first letter before the whole name: handlers look up headers
	 * most requests do not carry */
	for (int i = 0; i < r->nhdr; i++)
		if ((r->hdr[i].name[0] | 0x20) == first && strcasecmp(r->hdr[i].name, name) == 0)
			return r->hdr[i].value;
	return NULL;
}

const char *http_param(const struct http_req *r, const char *name)
{
	return router_param(&r->params, name);
}

long http_query(const struct http_req *r, const char *name, char *out, size_t outlen)
{
	const char *p = r->query;
	size_t nlen = strlen(name);

	while (p && *p) {
		const char *amp = strchr(p, '&');
		const char *end = amp ? amp : p + strlen(p);
		const char *eq = memchr(p, '=', (size_t)(end - p));
		const char *kend = eq ? eq : end;
		if ((size_t)(kend - p) == nlen && memcmp(p, name, nlen) == 0) {
			if (!eq) {
				if (outlen)
					out[0] = '\0';
				return 0;
			}
			long n = router_decode(eq + 1, (size_t)(end - eq - 1), out, outlen, 1);
			return n < 0 ? -2 : n;
		}
		p = amp ? amp + 1 : NULL;
	}
	return -1;
}

int http_req_alive(const struct http_req *r)
{
	return !r->closed;
}

void http_req_on_close(struct http_req *r, void (*cb)(struct http_req *r, void *arg), void *arg)
{
	r->on_close = cb;
	r->on_close_arg = arg;
}

/* ---- parser callbacks: they only record ---- */

static int append(char **dst, const char *at, size_t len)
{
	size_t old = *dst ? strlen(*dst) : 0;
	char *n = realloc(*dst, old + len + 1);

	if (!n)
		return -1;
	memcpy(n + old, at, len);
	n[old + len] = '\0';
	*dst = n;
	return 0;
}

static int fail(struct http_conn *c, enum rc rc)
{
	c->err_rc = rc;
	return 1;
}

static int count_bytes(struct http_conn *c, size_t len)
{
	c->req->hdr_bytes += len;
	return c->req->hdr_bytes > (size_t)cfg.max_header_bytes;
}

static int on_message_begin(http_parser *p)
{
	struct http_conn *c = p->data;
	struct timeval tv = { cfg.header_timeout, 0 };

	c->req = req_new(c);
	if (!c->req)
		return fail(c, RC_NOMEM);
	c->chunk_left = 0;
	c->chunk_crlf = 0;
	/* the header deadline covers idle gaps inside the headers too: the
	 * read timeout stays what it was (keep-alive's) */
	evtimer_add(c->timer, &tv);
	return 0;
}

static int on_url(http_parser *p, const char *at, size_t len)
{
	struct http_conn *c = p->data;
	struct http_req *r = c->req;

	r->method = (int)p->method; /* known once the URL begins */
	if ((r->url ? strlen(r->url) : 0) + len > (size_t)cfg.max_url)
		return fail(c, RC_URITOOLONG);
	if (count_bytes(c, len))
		return fail(c, RC_HEADERS);
	return append(&r->url, at, len) < 0 ? fail(c, RC_NOMEM) : 0;
}

/* RFC 9110 token characters; anything else in a field name (a space
 * before the colon, say) is how requests get smuggled past proxies. */
static int is_tchar(unsigned char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
	       (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

static int on_header_field(http_parser *p, const char *at, size_t len)
{
	struct http_conn *c = p->data;
	struct http_req *r = c->req;

	if (count_bytes(c, len))
		return fail(c, RC_HEADERS);
	for (size_t i = 0; i < len; i++)
		if (!is_tchar((unsigned char)at[i]))
			return fail(c, RC_INVALID);
	if (r->last_was_value || !r->hname) {
		if (r->last_was_value) {
			/* previous header complete; start a new name */
			free(r->hname);
			r->hname = NULL;
		}
		r->last_was_value = 0;
	}
	return append(&r->hname, at, len) < 0 ? fail(c, RC_NOMEM) : 0;
}

static int on_header_value(http_parser *p, const char *at, size_t len)
{
	struct http_conn *c = p->data;
	struct http_req *r = c->req;

	if (count_bytes(c, len))
		return fail(c, RC_HEADERS);
	if (!r->last_was_value) {
		struct http_header *n;
		if (r->nhdr >= cfg.max_headers)
			return fail(c, RC_HEADERS);
		n = realloc(r->hdr, sizeof(*n) * (size_t)(r->nhdr + 1));
		if (!n)
			return fail(c, RC_NOMEM);
		r->hdr = n;
		r->hdr[r->nhdr].name = r->hname ? r->hname : strdup("");
		r->hdr[r->nhdr].value = NULL;
		r->hname = NULL;
		r->nhdr++;
		r->last_was_value = 1;
		if (!r->hdr[r->nhdr - 1].name)
			return fail(c, RC_NOMEM);
	}
	return append(&r->hdr[r->nhdr - 1].value, at, len) < 0 ? fail(c, RC_NOMEM) : 0;
}

static int on_headers_complete(http_parser *p)
{
	struct http_conn *c = p->data;
	struct http_req *r = c->req;

	/* a header with an empty value never reached on_header_value */
	if (r->hname && !r->last_was_value) {
		if (on_header_value(p, "", 0))
			return 1;
		if (r->hdr[r->nhdr - 1].value == NULL &&
		    append(&r->hdr[r->nhdr - 1].value, "", 0) < 0)
			return fail(c, RC_NOMEM);
	}
	evtimer_del(c->timer);
	if (p->http_major != 1 || p->http_minor > 1)
		return fail(c, RC_INVALID); /* HTTP/0.9 and 2+ are not spoken here */
	r->method = (int)p->method;
	if ((p->flags & F_CONTENTLENGTH) && !(p->flags & F_CHUNKED))
		r->content_length = (int64_t)p->content_length;
	c->keep_alive = http_should_keep_alive(p);
	r->phase = PH_HEADERS_DONE;
	http_parser_pause(p, 1);
	return 0;
}

static int on_body(http_parser *p, const char *at, size_t len)
{
	struct http_conn *c = p->data;
	struct http_req *r = c->req;
	int64_t limit = r->route->max_body ? r->route->max_body : cfg.max_body;

	r->body_bytes += (int64_t)len;
	if (p->flags & F_CHUNKED) {
		/* drive() hands the parser at most the rest of the chunk */
		c->chunk_left -= len <= c->chunk_left ? len : c->chunk_left;
		c->chunk_crlf = c->chunk_left == 0;
	}
	if (r->body_bytes > limit)
		return fail(c, RC_TOOLARGE);
	if (r->route->flags & ROUTE_STREAM) {
		enum rc rc = r->route->on_body(r, at, len);
		if (rc != RC_OK)
			return fail(c, rc);
		return 0;
	}
	if (evbuffer_add(r->body, at, len) < 0)
		return fail(c, RC_NOMEM);
	return 0;
}

/* A chunk-size line is complete: its data follows (none for the last). */
static int on_chunk_header(http_parser *p)
{
	struct http_conn *c = p->data;

	c->chunk_left = p->content_length;
	c->chunk_crlf = 0;
	return 0;
}

static int on_message_complete(http_parser *p)
{
	struct http_conn *c = p->data;

	/* HTTP/0.9 ("GET /x" and nothing else) completes without headers */
	if (!c->req->route || c->req->phase != PH_BODY)
		return fail(c, RC_INVALID);
	c->req->phase = PH_MSG_DONE;
	http_parser_pause(p, 1);
	return 0;
}

/* ---- responses ---- */

void http_add_header(struct http_req *r, const char *name, const char *value)
{
	size_t nl = strlen(name), vl = strlen(value);

	/* the first few hundred bytes live in the request: no allocation for
	 * the usual handful of headers; the rest goes to an evbuffer */
	if (!r->out_hdrs && nl + vl + 4 <= sizeof(r->out_inline) - r->out_inline_len) {
		char *p = r->out_inline + r->out_inline_len;
		memcpy(p, name, nl);
		memcpy(p + nl, ": ", 2);
		memcpy(p + nl + 2, value, vl);
		memcpy(p + nl + 2 + vl, "\r\n", 2);
		r->out_inline_len += nl + vl + 4;
		return;
	}
	if (!r->out_hdrs)
		r->out_hdrs = evbuffer_new();
	if (r->out_hdrs)
		evbuffer_add_printf(r->out_hdrs, "%s: %s\r\n", name, value);
}

static int wants_close(struct http_req *r)
{
	struct http_conn *c = r->conn;

	return !c || !c->keep_alive || c->srv->draining || r->close_after ||
	       r->phase != PH_HANDLER ||
	       (c->eof && evbuffer_get_length(bufferevent_get_input(c->bev)) == 0);
}

static char *put(char *p, const char *s)
{
	size_t n = strlen(s);

	memcpy(p, s, n);
	return p + n;
}

static char *put_uint(char *p, unsigned long long v)
{
	char tmp[24];
	int n = 0;

	do
		tmp[n++] = (char)('0' + v % 10);
	while ((v /= 10) != 0);
	while (n)
		*p++ = tmp[--n];
	return p;
}

/* Writes the status line and headers.  length < 0: chunked; length == -2:
 * no body framing (1xx/204/304). */
static void write_head(struct http_req *r, int status, const char *ctype, int64_t length)
{
	struct evbuffer *out = bufferevent_get_output(r->conn->bev);
	int close = wants_close(r);

	const char *reason = http_reason(status), *conn = "";
	/* status line and Date, X-Request-Id ~120 bytes, Content-Type <= 272,
	 * framing <= 38, HSTS 46, Connection 24, inline headers <= 640, end 2 */
	char head[1280], *p = head;

	r->status = status;
	if (close)
		r->close_after = 1;
	if (close)
		conn = "Connection: close\r\n";
	else if (r->conn->parser.http_major == 1 && r->conn->parser.http_minor == 0)
		conn = "Connection: keep-alive\r\n";
	if (ctype && strlen(ctype) > 256) {
		/* a content type too long for the stack (none of ours is) */
		evbuffer_add_printf(out, "HTTP/1.1 %d %s\r\nDate: %s\r\nX-Request-Id: %s\r\n",
		                    status, reason, date_header(), r->reqid);
		evbuffer_add_printf(out, "Content-Type: %s\r\n", ctype);
		ctype = NULL;
	} else {
		/* the whole head built in one stack buffer, copied once */
		p = put(p, "HTTP/1.1 ");
		p = put_uint(p, (unsigned long long)status);
		*p++ = ' ';
		p = put(p, reason);
		p = put(p, "\r\nDate: ");
		p = put(p, date_header());
		p = put(p, "\r\nX-Request-Id: ");
		p = put(p, r->reqid);
		p = put(p, "\r\n");
	}
	if (ctype) {
		p = put(p, "Content-Type: ");
		p = put(p, ctype);
		p = put(p, "\r\n");
	}
	if (length >= 0) {
		p = put(p, "Content-Length: ");
		p = put_uint(p, (unsigned long long)length);
		p = put(p, "\r\n");
	} else if (length == -1) {
		p = put(p, "Transfer-Encoding: chunked\r\n");
	}
	if (r->tls)
		/* a browser that once came over TLS never falls back to http */
		p = put(p, "Strict-Transport-Security: max-age=31536000\r\n");
	p = put(p, conn);
	memcpy(p, r->out_inline, r->out_inline_len); /* <= sizeof(out_inline) */
	p += r->out_inline_len;
	if (!r->out_hdrs) {
		p = put(p, "\r\n");
		evbuffer_add(out, head, (size_t)(p - head));
		return;
	}
	evbuffer_add(out, head, (size_t)(p - head));
	if (r->out_hdrs)
		evbuffer_add_buffer(out, r->out_hdrs);
	evbuffer_add(out, "\r\n", 2);
}

static int no_body_status(int status)
{
	return status == 204 || status == 304 || (status >= 100 && status < 200);
}

void http_reply_evbuffer(struct http_req *r, int status, const char *ctype, struct evbuffer *body)
{
	size_t len = body ? evbuffer_get_length(body) : 0;

	if (r->conn && !r->closed) {
		if (no_body_status(status)) {
			write_head(r, status, NULL, -2);
		} else {
			write_head(r, status, ctype, (int64_t)len);
			if (body && r->method != HTTP_HEAD) {
				r->out_bytes += len;
				evbuffer_add_buffer(bufferevent_get_output(r->conn->bev), body);
			}
		}
	}
	if (body)
		evbuffer_drain(body, evbuffer_get_length(body));
	r->status = status;
	request_done(r);
}

void http_reply(struct http_req *r, int status, const char *ctype, const void *body, size_t len)
{
	if (r->conn && !r->closed) {
		if (no_body_status(status)) {
			write_head(r, status, NULL, -2);
		} else {
			write_head(r, status, ctype, (int64_t)len);
			if (len && r->method != HTTP_HEAD) {
				r->out_bytes += len;
				evbuffer_add(bufferevent_get_output(r->conn->bev), body, len);
			}
		}
	}
	r->status = status;
	request_done(r);
}

void http_reply_json(struct http_req *r, int status, json_t *j)
{
	char *s;

	if (!j) {
		http_reply(r, status, NULL, NULL, 0);
		return;
	}
	s = json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII);
	json_decref(j);
	if (!s) {
		http_reply_error(r, RC_NOMEM, NULL, "could not encode the response");
		return;
	}
	http_add_header(r, "Cache-Control", "no-store");
	http_reply(r, status, "application/json", s, strlen(s));
	free(s);
}

/* Copies s into out, replacing every byte that is not part of valid UTF-8
 * (or is a control character) with '?', so any message can go into JSON. */
static void utf8_clean(const char *s, char *out, size_t outlen)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t o = 0;

	while (*p && o + 5 < outlen) {
		int n = *p < 0x80 ? *p >= 0x20 && *p != 0x7f : jsonw_utf8_len(p);

		if (n == 0) {
			out[o++] = '?';
			p++;
			continue;
		}
		memcpy(out + o, p, (size_t)n);
		o += (size_t)n;
		p += n;
	}
	out[o] = '\0';
}

void http_reply_error_details(struct http_req *r, enum rc rc, json_t *details, const char *hint,
                              const char *message)
{
	char clean[1024];
	json_t *err;

	utf8_clean(message ? message : rc_code(rc), clean, sizeof(clean));
	err = json_pack("{s:s, s:s}", "code", rc_code(rc), "message", clean);
	int status = rc_http_status(rc);

	if (err && hint)
		json_object_set_new(err, "hint", json_string(hint));
	if (err && details)
		json_object_set_new(err, "details", details);
	else
		json_decref(details);
	if (status == 503 && !http_header_out_has(r, "Retry-After"))
		http_add_header(r, "Retry-After", "2");
	if (status == 405 || status == 413 || status == 414 || status == 431 || status == 408 ||
	    status == 400)
		r->close_after = r->close_after || r->phase != PH_HANDLER;
	log_msg(status >= 500 ? LOG_WARN : LOG_DEBUG, "http", r->reqid, "%d %s: %s", status,
	        rc_code(rc), clean);
	http_reply_json(r, status,
	                err ? json_pack("{s:o}", "error", err)
	                    : json_pack("{s:{s:s}}", "error", "code", "internal"));
}

void http_reply_error(struct http_req *r, enum rc rc, const char *hint, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	http_reply_error_details(r, rc, NULL, hint, msg);
}

int http_own_origin(int tls, const char *host, char *out, size_t outlen)
{
	const char *pub = cfg.public_url;
	size_t n;
	int len;

	if (outlen)
		out[0] = '\0';
	if (pub && *pub) {
		n = strlen(pub);
		while (n && pub[n - 1] == '/')
			n--;
		if (n == 0 || n >= outlen)
			return -1;
		memcpy(out, pub, n);
		out[n] = '\0';
		return 0;
	}
	if (!host || !*host || outlen == 0)
		return -1;
	len = snprintf(out, outlen, "%s://%s", tls ? "https" : "http", host);
	if (len < 0 || (size_t)len >= outlen) {
		out[0] = '\0';
		return -1;
	}
	return 0;
}

void http_reply_db_error(struct http_req *r, enum rc rc, const char *what)
{
	if (rc == RC_UNAVAILABLE)
		http_reply_error(r, RC_UNAVAILABLE, "retry in a few seconds",
		                 "the database is unavailable");
	else if (rc == RC_CONFLICT)
		http_reply_error(r, RC_CONFLICT, NULL, "%s", what);
	else if (rc == RC_INVALID)
		http_reply_error(r, RC_INVALID, NULL, "%s", what);
	else
		http_reply_error(r, RC_DB, NULL, "database error");
}

int http_parse_decimal(const char *s, long long *out)
{
	char *end;
	long long v;
	size_t n = strlen(s);

	if (n == 0 || n > 18 || strspn(s, "0123456789") != n || (n > 1 && s[0] == '0'))
		return -1;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || *end != '\0')
		return -1;
	*out = v;
	return 0;
}

int http_param_id(struct http_req *r, const char *name, long long *id)
{
	const char *s = http_param(r, name);

	if (!s || http_parse_decimal(s, id) < 0 || *id <= 0) {
		http_reply_error(r, RC_NOTFOUND, NULL, "no such %s '%s'", name, s ? s : "");
		return -1;
	}
	return 0;
}

static int http_header_out_has(const struct http_req *r, const char *name)
{
	struct evbuffer_ptr p;
	size_t n = strlen(name);
	char line[128];

	if (n + 2 >= sizeof(line))
		return 0;
	snprintf(line, sizeof(line), "%s:", name);
	/* header lines start the inline part or follow a CRLF in it */
	for (size_t i = 0; i + n + 1 <= r->out_inline_len;) {
		if (memcmp(r->out_inline + i, line, n + 1) == 0)
			return 1;
		const char *nl = memchr(r->out_inline + i, '\n', r->out_inline_len - i);
		if (!nl)
			break;
		i = (size_t)(nl - r->out_inline) + 1;
	}
	if (!r->out_hdrs)
		return 0;
	p = evbuffer_search(r->out_hdrs, line, n + 1, NULL);
	return p.pos >= 0;
}

void http_stream_begin(struct http_req *r, int status, const char *ctype, int64_t length)
{
	r->streaming = 1;
	r->stream_chunked = length == -1;
	r->status = status;
	if (!r->conn || r->closed)
		return;
	write_head(r, status, ctype, length < -1 ? -2 : length);
	bufferevent_setwatermark(r->conn->bev, EV_WRITE, STREAM_LOW_WATERMARK, 0);
	/* the head goes out with the first body bytes when they follow in
	 * this callback (a proxied response: one write, not two), else once
	 * the loop comes round (a stream that waits for its events) */
	event_active(r->conn->flush, EV_TIMEOUT, 0);
	/* big responses: fewer, larger writes than libevent's 16 KiB default */
	bufferevent_set_max_single_write(r->conn->bev, 256 * 1024);
}

int http_stream_write(struct http_req *r, const void *data, size_t len)
{
	struct evbuffer *out;

	if (!r->conn || r->closed)
		return -1;
	if (len == 0 || r->method == HTTP_HEAD)
		return 0;
	out = bufferevent_get_output(r->conn->bev);
	if (r->stream_chunked)
		evbuffer_add_printf(out, "%zx\r\n", len);
	evbuffer_add(out, data, len);
	if (r->stream_chunked)
		evbuffer_add(out, "\r\n", 2);
	r->out_bytes += len;
	conn_flush(r->conn);
	return 0;
}

int http_stream_write_buffer(struct http_req *r, struct evbuffer *src, size_t len)
{
	struct evbuffer *out;

	if (!r->conn || r->closed)
		return -1;
	if (len == 0 || r->method == HTTP_HEAD) {
		evbuffer_drain(src, len);
		return 0;
	}
	out = bufferevent_get_output(r->conn->bev);
	if (r->stream_chunked)
		evbuffer_add_printf(out, "%zx\r\n", len);
	evbuffer_remove_buffer(src, out, len);
	if (r->stream_chunked)
		evbuffer_add(out, "\r\n", 2);
	r->out_bytes += len;
	conn_flush(r->conn);
	return 0;
}

size_t http_stream_backlog(const struct http_req *r)
{
	if (!r->conn || r->closed)
		return 0;
	return evbuffer_get_length(bufferevent_get_output(r->conn->bev));
}

void http_stream_on_drain(struct http_req *r, void (*cb)(struct http_req *r, void *arg), void *arg)
{
	r->on_drain = cb;
	r->on_drain_arg = arg;
}

void http_stream_end(struct http_req *r)
{
	if (r->conn && !r->closed) {
		if (r->stream_chunked && r->method != HTTP_HEAD)
			evbuffer_add(bufferevent_get_output(r->conn->bev), "0\r\n\r\n", 5);
		bufferevent_setwatermark(r->conn->bev, EV_WRITE, 0, 0);
	}
	request_done(r);
}

void http_stream_abort(struct http_req *r)
{
	/* no terminating chunk, and the connection closes: the client sees a
	 * truncated body, never a complete-looking one */
	r->stream_chunked = 0;
	r->close_after = 1;
	if (r->conn && !r->closed)
		bufferevent_setwatermark(r->conn->bev, EV_WRITE, 0, 0);
	request_done(r);
}

void http_body_pause(struct http_req *r)
{
	if (r->conn && !r->closed && r->phase == PH_BODY) {
		r->held = 1;
		http_parser_pause(&r->conn->parser, 1);
	}
}

void http_body_resume(struct http_req *r)
{
	struct http_conn *c = r->conn;

	if (!c || r->closed || r->phase != PH_BODY)
		return;
	body_open(r);
}

void http_body_read_max(struct http_req *r, size_t bytes)
{
	if (r->conn && !r->closed) {
		/* the raw read of a plain connection, the bufferevent's of TLS */
		r->conn->read_max = bytes > READ_CHUNK ? bytes : READ_CHUNK;
		bufferevent_set_max_single_read(r->conn->bev, (ev_ssize_t)bytes);
	}
}

int http_stream_file(struct http_req *r, int fd, int64_t off, int64_t len)
{
	struct evbuffer_file_segment *seg;
	unsigned flags = EVBUF_FS_CLOSE_ON_FREE | EVBUF_FS_DISABLE_MMAP;
	int dfd, rc;

	if (!r->conn || r->closed || r->stream_chunked)
		return -1;
	if (len <= 0 || r->method == HTTP_HEAD)
		return 0;
	/* TLS needs the bytes in memory; plain sockets get sendfile() */
	if (r->conn->tls)
		flags |= EVBUF_FS_DISABLE_SENDFILE;
	dfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (dfd < 0)
		return -1;
	seg = evbuffer_file_segment_new(dfd, off, len, flags);
	if (!seg) {
		close(dfd);
		return -1;
	}
	/* libevent writes 16 KiB per event by default: too little for files */
	bufferevent_set_max_single_write(r->conn->bev, 1 << 20);
	rc = evbuffer_add_file_segment(bufferevent_get_output(r->conn->bev), seg, 0, len);
	evbuffer_file_segment_free(seg); /* the buffer keeps its own reference */
	if (rc == 0) {
		r->out_bytes += (uint64_t)len;
		conn_flush(r->conn);
	}
	return rc;
}

struct bufferevent *http_upgrade_take(struct http_req *r)
{
	struct http_conn *c = r->conn;
	struct bufferevent *bev;

	r->status = 101;
	r->close_after = 1;
	if (!c || r->closed) {
		request_done(r);
		return NULL;
	}
	bev = c->bev;
	if (c->rd) {
		/* the new owner reads bev itself (same descriptor) */
		event_free(c->rd);
		c->rd = NULL;
	}
	request_done(r); /* r is gone; c closes from its kick event */
	bufferevent_setcb(bev, NULL, NULL, NULL, NULL);
	bufferevent_setwatermark(bev, EV_READ | EV_WRITE, 0, 0);
	bufferevent_set_timeouts(bev, NULL, NULL);
	c->bev = NULL;
	return bev;
}

enum access_log { ACCESS_ALL, ACCESS_CHANGES, ACCESS_ERRORS, ACCESS_NONE };
static enum access_log access_mode = ACCESS_CHANGES;

/* The level of a request's access-log line (cfg.access_log): the rest
 * goes to debug, so health checks, metrics scrapes and static files do
 * not flood the log at info. */
static enum log_level access_level(const struct http_req *r)
{
	int safe = r->method == HTTP_GET || r->method == HTTP_HEAD || r->method == HTTP_OPTIONS;

	switch (access_mode) {
	case ACCESS_ALL: return LOG_INFO;
	case ACCESS_CHANGES:
		return r->status >= 400 || r->status == 101 || !safe ? LOG_INFO : LOG_DEBUG;
	case ACCESS_ERRORS: return r->status >= 400 ? LOG_INFO : LOG_DEBUG;
	case ACCESS_NONE: break;
	}
	return LOG_DEBUG;
}

/* The response is complete (or the client is gone): account, free, and
 * let the connection go on with the next request or close. */
static void request_done(struct http_req *r)
{
	struct http_conn *c = r->conn;
	struct http_server *srv = r->srv;
	double dt = clock_now_s() - r->t_start;

	if (r->srv->opts.observe)
		r->srv->opts.observe(r, r->status, dt);
	if (c) {
		log_msg(access_level(r), "http", r->reqid, "%s %s %d %.1fms %llu bytes peer=%s",
		        http_method_name(r->method), r->path ? r->path : "-", r->status,
		        dt * 1000.0, (unsigned long long)r->out_bytes, r->peer);
		c->req = NULL;
		if (r->close_after || !c->keep_alive || srv->draining) {
			c->closing = 1;
			c->linger = r->phase != PH_HANDLER && !c->eof;
			bufferevent_setwatermark(c->bev, EV_WRITE, 0, 0);
		} else {
			c->paused = 0;
			c->err_rc = RC_OK;
			http_parser_pause(&c->parser, 0);
			set_read_timeout(c, cfg.keepalive_timeout);
			bufferevent_setwatermark(c->bev, EV_WRITE, 0, 0);
		}
		conn_flush(c);
		kick(c);
	}
	req_release(srv, r);
}

/* ---- driving the parser ---- */

static void error_reply(struct http_conn *c, enum rc rc, const char *msg)
{
	struct http_req *r = c->req;

	if (!r) {
		r = req_new(c);
		if (!r) {
			c->closing = 1;
			kick(c);
			return;
		}
		c->req = r;
	}
	r->phase = PH_ERROR;
	r->close_after = 1;
	evtimer_del(c->timer);
	c->paused = 1;
	http_reply_error(r, rc, NULL, "%s", msg);
}

static int parse_target(struct http_req *r)
{
	struct http_parser_url u;
	const char *url = r->url ? r->url : "";

	http_parser_url_init(&u);
	if (http_parser_parse_url(url, strlen(url), r->method == HTTP_CONNECT, &u) != 0)
		return -1;
	if (!(u.field_set & (1 << UF_PATH)))
		return -1;
	if (u.field_set & (1 << UF_SCHEMA))
		return -1; /* absolute-form is for proxies, not origin servers */
	r->path = strndup(url + u.field_data[UF_PATH].off, u.field_data[UF_PATH].len);
	if (!r->path || r->path[0] != '/')
		return -1;
	if (u.field_set & (1 << UF_QUERY)) {
		r->query = strndup(url + u.field_data[UF_QUERY].off, u.field_data[UF_QUERY].len);
		if (!r->query)
			return -1;
	}
	return 0;
}

/* RFC 3986 host [ ":" port ] as Host carries it: a reg-name or IPv4
 * address (unreserved, %XX, sub-delims), or an IP literal in brackets;
 * the port, when there is one, digits.  Anything else ("a@b", "a b",
 * "a/b", "a:xx") is not a host: a proxy in front may route on it
 * differently than we do. */
static int host_ok(const char *h)
{
	const char *p = h;

	if (*p == '[') {
		for (p++; *p && *p != ']'; p++)
			if (!strchr("0123456789abcdefABCDEF:.vV-_~!$&'()*+,;=", *p))
				return 0;
		if (*p++ != ']' || p - h < 3)
			return 0;
	} else {
		for (; *p && *p != ':'; p++) {
			unsigned char ch = (unsigned char)*p;
			if (ch == '%') {
				if (!isxdigit((unsigned char)p[1]) ||
				    !isxdigit((unsigned char)p[2]))
					return 0;
				p += 2;
			} else if (!isalnum(ch) && !strchr("-._~!$&'()*+,;=", ch)) {
				return 0;
			}
		}
	}
	if (*p == ':') {
		long port = 0;
		for (p++; *p; p++) {
			if (!isdigit((unsigned char)*p) || (port = port * 10 + (*p - '0')) > 65535)
				return 0;
		}
	}
	return *p == '\0';
}

/* Transfer-Encoding must be exactly "chunked" (RFC 9112 §6.1): other
 * codings are not implemented here.  Returns NULL when it is, or absent;
 * otherwise the first coding not understood (into buf). */
static const char *te_unsupported(const struct http_req *r, char *buf, size_t buflen)
{
	int chunked = 0;

	for (int i = 0; i < r->nhdr; i++) {
		const char *v = r->hdr[i].value;
		if (strcasecmp(r->hdr[i].name, "Transfer-Encoding") != 0)
			continue;
		while (*v) {
			size_t n;
			while (*v == ' ' || *v == '\t' || *v == ',')
				v++;
			n = strcspn(v, ",");
			while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
				n--;
			if (n == 0)
				break;
			if (n != 7 || strncasecmp(v, "chunked", 7) != 0 || chunked++) {
				snprintf(buf, buflen, "%.*s", (int)(n < 64 ? n : 64), v);
				return buf;
			}
			v += n;
			while (*v == ' ' || *v == '\t')
				v++;
		}
	}
	return NULL;
}

/* Headers whose second copy would make two readers disagree. */
static const char *const single_headers[] = { "Host",   "Authorization", "Content-Type",
	                                      "Expect", "Origin",        "X-CSRF-Token" };

static void reply_not_implemented(struct http_conn *c, const char *msg)
{
	struct http_req *r = c->req;

	r->phase = PH_ERROR;
	r->close_after = 1;
	c->paused = 1;
	http_reply_json(r, 501,
	                json_pack("{s:{s:s, s:s, s:s}}", "error", "code", "not_implemented",
	                          "message", msg, "hint", "send the body with Content-Length"));
}

/* Called once headers are parsed: checks, route (or virtual host), then
 * for either the body limit and Expect, then the auth (or virtual host's)
 * hook, which ends in http_resume(). */
static void headers_ready(struct http_conn *c)
{
	struct http_req *r = c->req;
	const char *expect, *host, *te;
	char tebuf[80];
	int64_t limit;
	http_auth_hook hook = NULL;
	enum rc why = RC_NOTFOUND;

	if (parse_target(r) < 0) {
		error_reply(c, RC_INVALID, "malformed request target");
		return;
	}
	for (size_t k = 0; k < sizeof(single_headers) / sizeof(single_headers[0]); k++) {
		int n = 0;
		for (int i = 0; i < r->nhdr; i++)
			n += strcasecmp(r->hdr[i].name, single_headers[k]) == 0;
		if (n > 1 || (n == 0 && k == 0 && c->parser.http_minor == 1)) {
			char msg[96];
			if (k == 0)
				snprintf(msg, sizeof(msg),
				         "an HTTP/1.1 request needs exactly one Host header");
			else
				snprintf(msg, sizeof(msg), "more than one %s header",
				         single_headers[k]);
			error_reply(c, RC_INVALID, msg);
			return;
		}
	}
	host = http_header(r, "Host");
	if (host && !host_ok(host)) {
		error_reply(c, RC_INVALID, "malformed Host header");
		return;
	}
	te = te_unsupported(r, tebuf, sizeof(tebuf));
	if (te) {
		char msg[160];
		snprintf(msg, sizeof(msg), "transfer coding '%s' is not supported (only chunked)",
		         te);
		reply_not_implemented(c, msg);
		return;
	}
	/* HTTP/1.0 has no chunked framing: a sender using it anyway cannot
	 * be trusted to delimit the next request (RFC 9112 §6.1) */
	if (c->parser.http_minor == 0 && http_header(r, "Transfer-Encoding"))
		c->keep_alive = 0;
	if (c->srv->opts.vhost && c->srv->opts.vhost->match(host)) {
		/* another origin: its virtual host decides, not the router */
		r->route = c->srv->opts.vhost->route;
		hook = c->srv->opts.vhost->begin;
	} else {
		r->route = router_match(r->method, r->path, &r->params, &why);
		if (!r->route) {
			if (why == RC_NOTFOUND &&
			    (r->method == HTTP_GET || r->method == HTTP_HEAD) &&
			    c->srv->opts.fallback && strncmp(r->path, "/api/", 5) != 0) {
				r->route = &fallback_route;
			} else {
				r->phase = PH_ERROR;
				r->close_after = 1;
				if (why == RC_METHOD) {
					char allow[128];
					router_allowed(r->path, allow, sizeof(allow));
					http_add_header(r, "Allow", allow);
					http_reply_error(
					        r, RC_METHOD, NULL,
					        "method %s is not allowed on '%s'",
					        http_method_str((enum http_method)r->method),
					        r->path);
				} else if (why == RC_INVALID)
					http_reply_error(
					        r, RC_INVALID,
					        "encode path segments as UTF-8 with %%XX escapes",
					        "malformed path '%s'", r->path);
				else
					http_reply_error(r, RC_NOTFOUND, NULL,
					                 "no such endpoint '%s'", r->path);
				return;
			}
		}
		if (r->route->roles != ROLES_PUBLIC)
			hook = c->srv->opts.auth;
	}
	limit = r->route->max_body ? r->route->max_body : cfg.max_body;
	if (r->content_length > limit) {
		error_reply(c, RC_TOOLARGE, "request body is larger than this endpoint accepts");
		return;
	}
	expect = http_header(r, "Expect");
	if (expect && strcasecmp(expect, "100-continue") != 0) {
		error_reply(c, RC_INVALID, "unsupported Expect header");
		return;
	}
	if (!(r->route->flags & ROUTE_STREAM)) {
		r->body = evbuffer_new();
		if (!r->body) {
			error_reply(c, RC_NOMEM, "out of memory");
			return;
		}
	}
	if (hook) {
		r->phase = PH_AUTH;
		set_read_timeout(c, 0);
		hook(r);
		return;
	}
	http_resume(r);
}

/* Lets the body in: "100 Continue" first when the client waits for it. */
static void body_open(struct http_req *r)
{
	struct http_conn *c = r->conn;

	if (!r->continued && http_header(r, "Expect") && r->content_length != 0) {
		evbuffer_add_printf(bufferevent_get_output(c->bev),
		                    "HTTP/1.1 100 Continue\r\n\r\n");
		conn_flush(c);
	}
	r->continued = 1;
	r->held = 0;
	if (r->content_length > 0 || (c->parser.flags & F_CHUNKED))
		set_read_timeout(c, cfg.body_timeout);
	c->paused = 0;
	http_parser_pause(&c->parser, 0);
	kick(c);
}

void http_resume(struct http_req *r)
{
	struct http_conn *c = r->conn;

	if (!c || r->closed) {
		/* the client left while the hook ran */
		request_done(r);
		return;
	}
	r->phase = PH_BODY;
	if (r->route->flags & ROUTE_PREPARE) {
		/* the route decides before the client sends its body (a 507
		 * for a file over quota comes before "100 Continue") */
		enum rc rc = r->route->on_body(r, NULL, 0);
		if (rc != RC_OK) {
			error_reply(c, rc, "upload rejected");
			return;
		}
		if (r->held) {
			set_read_timeout(c, 0); /* the route's own work: no client timeout */
			return;                 /* http_body_resume() lets the body in */
		}
	}
	body_open(r);
}

static void run_handler(struct http_conn *c)
{
	struct http_req *r = c->req;

	r->phase = PH_HANDLER;
	set_read_timeout(c, 0);
	r->route->handler(r);
}

static enum rc parser_rc(enum http_errno e)
{
	if (e == HPE_HEADER_OVERFLOW)
		return RC_HEADERS;
	return RC_INVALID;
}

long http_scan_cr(const char *buf, size_t len)
{
	const char *p = buf, *end = buf + len;

	while ((p = memchr(p, '\r', (size_t)(end - p))) != NULL) {
		if (p + 1 == end)
			return p > buf ? p - buf : -2;
		if (p[1] != '\n')
			return p > buf ? p - buf : -1;
		p += 2;
	}
	return (long)len;
}

/* How many of the len bytes at buf the parser may be given now, -1 for
 * bad framing, -2 when the next byte decides.  http-parser (built without
 * HTTP_PARSER_STRICT) takes a CR followed by anything as a line end and
 * eats that byte, and takes any two bytes after a chunk's data as its
 * CRLF: a front proxy that reads the same bytes differently would see
 * other requests than we do.  So the request line, headers, chunk-size
 * lines and trailers go to it only where every CR is followed by LF
 * (RFC 9112 §2.2), a chunk's data ends with exactly CRLF, and a chunked
 * body goes one line at a time outside its data, so that the data is
 * counted exactly (on_chunk_header, on_body). */
static long feed_limit(struct http_conn *c, const char *buf, size_t len)
{
	struct http_req *r = c->req;
	long n;

	if (!r || r->phase != PH_BODY)
		return http_scan_cr(buf, len); /* request line and headers */
	if (!(c->parser.flags & F_CHUNKED))
		return (long)len; /* Content-Length framing, or no body */
	if (c->chunk_left > 0)
		return (long)(len < c->chunk_left ? len : c->chunk_left);
	if (c->chunk_crlf) {
		if (len < 2)
			return buf[0] == '\r' ? -2 : -1;
		if (buf[0] != '\r' || buf[1] != '\n')
			return -1;
		c->chunk_crlf = 0;
	}
	n = http_scan_cr(buf, len);
	if (n > 0) {
		const char *lf = memchr(buf, '\n', (size_t)n);
		if (lf)
			n = lf - buf + 1;
	}
	return n;
}

static void drive_loop(struct http_conn *c);

/* Parses and acts on what the client sent, as far as it can go now.  A
 * reply made inside (a handler that answers at once) needs no kick and
 * changes the read timeout once, at the end. */
static void drive(struct http_conn *c)
{
	if (c->driving) {
		drive_loop(c);
		return;
	}
	c->driving = 1;
	c->want_timeout = c->read_timeout;
	drive_loop(c);
	c->driving = 0;
	if (c->bev) {
		apply_read_timeout(c, c->want_timeout);
		read_update(c); /* the parser drained the input below the mark */
	}
}

static void drive_loop(struct http_conn *c)
{
	struct evbuffer *in = bufferevent_get_input(c->bev);

	while (!c->paused && !c->closing) {
		struct evbuffer_iovec v;
		size_t nparsed;
		long feed;
		enum http_errno e;

		if (!c->req &&
		    evbuffer_get_length(bufferevent_get_output(c->bev)) > OUT_HIGH_WATERMARK) {
			/* the client is not reading its responses: on_write resumes */
			c->out_blocked = 1;
			break;
		}
		if (evbuffer_peek(in, -1, NULL, &v, 1) < 1 || v.iov_len == 0)
			break;
		feed = feed_limit(c, v.iov_base, v.iov_len);
		if (feed == -2) {
			/* a CR ends this piece of the buffer: join it to the next */
			if (evbuffer_get_length(in) < 2 || !evbuffer_pullup(in, 2))
				break;
			continue;
		}
		if (feed < 0) {
			error_reply(c, RC_INVALID,
			            c->req && c->req->phase == PH_BODY
			                    ? "malformed chunked body: a CR not followed by LF, "
			                      "or a chunk not ended by CRLF"
			                    : "malformed request: a CR not followed by LF");
			return;
		}
		nparsed = http_parser_execute(&c->parser, &settings, v.iov_base, (size_t)feed);
		evbuffer_drain(in, nparsed);
		e = HTTP_PARSER_ERRNO(&c->parser);
		if (e == HPE_PAUSED) {
			c->paused = 1;
			if (c->req->phase == PH_HEADERS_DONE)
				headers_ready(c);
			else if (c->req->phase == PH_MSG_DONE)
				run_handler(c);
			continue;
		}
		if (e != HPE_OK) {
			enum rc rc = c->err_rc != RC_OK ? c->err_rc : parser_rc(e);
			const char *msg =
			        rc == RC_HEADERS      ? "request headers are too large"
			        : rc == RC_URITOOLONG ? "request target is too long"
			        : rc == RC_TOOLARGE
			                ? "request body is larger than this endpoint accepts"
			        : rc == RC_NOMEM     ? "out of memory"
			        : c->err_rc != RC_OK ? "request body rejected"
			                             : http_errno_description(e);
			if (c->req && c->req->phase >= PH_AUTH && c->req->route &&
			    (c->req->route->flags & ROUTE_STREAM) && c->err_rc != RC_OK &&
			    rc != RC_TOOLARGE && rc != RC_NOMEM)
				msg = "upload rejected";
			error_reply(c, rc, msg);
			return;
		}
		if (nparsed < (size_t)feed) {
			error_reply(c, RC_INVALID, "unexpected data after the request");
			return;
		}
	}
	if (c->eof && !c->paused && !c->closing && !c->out_blocked) {
		/* the client half-closed and what it sent is all handled: a
		 * request it did not finish is dropped */
		c->closing = 1;
		c->linger = 0;
		if (evbuffer_get_length(in))
			log_msg(LOG_DEBUG, "http", c->req ? c->req->reqid : NULL,
			        "client closed mid-request (peer=%s)", c->peer);
	}
}

/* ---- connection events ---- */

static void conn_unlink(struct http_conn *c)
{
	struct http_server *s = c->srv;

	if (c->prev)
		c->prev->next = c->next;
	else
		s->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->prev = c->next = NULL;
}

static void conn_free(struct http_conn *c)
{
	struct http_server *s = c->srv;
	struct http_req *r = c->req;

	if (r) {
		c->req = NULL;
		r->conn = NULL;
		r->closed = 1;
		if (r->phase == PH_AUTH || r->phase == PH_HANDLER ||
		    (r->phase == PH_BODY && r->on_close)) {
			/* (a streamed body whose consumer set on_close owns r too) */
			stats.orphaned++;
			/* the hook or handler still owns it: it frees on reply */
			if (r->on_close)
				r->on_close(r, r->on_close_arg);
		} else {
			req_release(s, r);
		}
	}
	conn_unlink(c);
	event_free(c->timer);
	event_free(c->kick);
	event_free(c->flush);
	if (c->rd)
		event_free(c->rd); /* before the descriptor closes with bev */
	if (c->bev)
		bufferevent_free(c->bev);
	free(c);
	stats.connections_open--;
	if (s->draining && !s->conns && s->drain_done) {
		void (*done)(void *) = s->drain_done;
		s->drain_done = NULL;
		done(s->drain_arg);
	}
}

static void maybe_close(struct http_conn *c)
{
	if (!c->bev) {
		conn_free(c); /* handed over by http_upgrade_take */
		return;
	}
	if (!c->closing || c->lingering || evbuffer_get_length(bufferevent_get_output(c->bev)) != 0)
		return;
	if (c->linger && !c->lingering && !c->tls) {
		/* The answer went out before the client finished sending its
		 * body (413, 507, a refused upload...).  Closing now, with
		 * unread bytes, makes the kernel send a reset that can destroy
		 * the answer before the client reads it.  Half-close, and
		 * read and discard for a few seconds (nginx's lingering close). */
		struct timeval idle = { 2, 0 }, most = { 5, 0 };

		c->lingering = 1;
		shutdown(bufferevent_getfd(c->bev), SHUT_WR);
		if (c->rd) {
			c->read_timeout = (int)idle.tv_sec;
			c->reading = 1;
			read_update(c);
		} else {
			bufferevent_set_timeouts(c->bev, &idle, NULL);
			bufferevent_enable(c->bev, EV_READ);
		}
		evtimer_add(c->timer, &most);
		return;
	}
	conn_free(c);
}

static void on_flush(evutil_socket_t fd, short what, void *arg)
{
	struct http_conn *c = arg;

	(void)fd;
	(void)what;
	if (c->bev)
		conn_flush(c);
}

static void on_kick(evutil_socket_t fd, short what, void *arg)
{
	struct http_conn *c = arg;

	(void)fd;
	(void)what;
	if (c->closing) {
		maybe_close(c);
		return;
	}
	drive(c);
	if (c->closing)
		maybe_close(c);
}

static void on_read(struct bufferevent *bev, void *arg)
{
	struct http_conn *c = arg;

	(void)bev;
	if (c->closing) {
		evbuffer_drain(bufferevent_get_input(c->bev),
		               evbuffer_get_length(bufferevent_get_input(c->bev)));
		return;
	}
	drive(c);
	if (c->closing)
		maybe_close(c);
}

static void on_event(struct bufferevent *bev, short what, void *arg);

/* A plain connection is readable (or its read timeout passed): read
 * into the input as the bufferevent would, then the same as on_read. */
static void on_raw_read(evutil_socket_t fd, short what, void *arg)
{
	struct http_conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(c->bev);
	struct evbuffer_iovec v[2];
	ssize_t n;
	size_t left;
	int nv;

	if (what & EV_TIMEOUT) {
		read_stop(c); /* as libevent does before it reports a timeout */
		on_event(c->bev, BEV_EVENT_READING | BEV_EVENT_TIMEOUT, c);
		return;
	}
	/* a socket bufferevent keeps its input's end frozen outside its own
	 * reads (as conn_flush does for the output's start) */
	evbuffer_unfreeze(in, 0);
	nv = evbuffer_reserve_space(in, (ev_ssize_t)c->read_max, v, 2);
	n = nv > 0 ? readv(fd, (struct iovec *)v, nv) : -1;
	if (n > 0) {
		left = (size_t)n;
		for (int i = 0; i < nv; i++) {
			if (v[i].iov_len > left)
				v[i].iov_len = left;
			left -= v[i].iov_len;
		}
		evbuffer_commit_space(in, v, nv);
	}
	evbuffer_freeze(in, 0);
	if (n < 0 && nv > 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	if (n <= 0) {
		read_stop(c);
		on_event(c->bev, BEV_EVENT_READING | (n == 0 ? BEV_EVENT_EOF : BEV_EVENT_ERROR), c);
		return;
	}
	read_update(c); /* over the high mark: stop until drive() drains it */
	on_read(c->bev, c);
}

static void on_write(struct bufferevent *bev, void *arg)
{
	struct http_conn *c = arg;
	struct http_req *r = c->req;

	(void)bev;
	if (c->closing) {
		maybe_close(c);
		return;
	}
	if (!c->tls && evbuffer_get_length(bufferevent_get_output(c->bev)) == 0)
		bufferevent_disable(c->bev, EV_WRITE); /* conn_flush writes directly again */
	if (r && r->streaming && r->on_drain)
		r->on_drain(r, r->on_drain_arg);
	else if (c->out_blocked) {
		c->out_blocked = 0;
		drive(c);
		if (c->closing)
			maybe_close(c);
	}
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
	struct http_conn *c = arg;
	struct http_req *r = c->req;

	(void)bev;
	if (what & BEV_EVENT_CONNECTED)
		return; /* TLS handshake done */
	if ((what & BEV_EVENT_TIMEOUT) && (what & BEV_EVENT_READING) && !c->closing) {
		if (r && (r->phase == PH_HEADERS || r->phase == PH_BODY)) {
			log_msg(LOG_INFO, "http", r->reqid, "client too slow, closing (peer=%s)",
			        c->peer);
			error_reply(c, RC_TIMEDOUT_CLIENT, "the request was not received in time");
			return;
		}
	}
	if ((what & BEV_EVENT_EOF) && !(what & BEV_EVENT_ERROR) && !c->lingering) {
		/* The client half-closed (shutdown(SHUT_WR)): what it sent
		 * may still wait in the input buffer — a body paused while
		 * the route's consumer catches up, pipelined requests.  Handle
		 * all of it and answer, then close (drive() decides when). */
		c->eof = 1;
		c->linger = 0;
		read_stop(c);
		if (r && (r->phase == PH_HANDLER || r->phase == PH_AUTH))
			r->close_after = 1;
		if (!c->closing)
			drive(c);
		if (c->closing)
			maybe_close(c);
		return;
	}
	conn_free(c);
}

static void on_header_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct http_conn *c = arg;

	(void)fd;
	(void)what;
	if (c->lingering) {
		conn_free(c); /* lingered long enough */
		return;
	}
	if (c->closing || !c->req || c->req->phase != PH_HEADERS)
		return;
	log_msg(LOG_INFO, "http", c->req->reqid, "headers not received in time (peer=%s)", c->peer);
	error_reply(c, RC_TIMEDOUT_CLIENT, "the request headers were not received in time");
	if (c->closing)
		maybe_close(c);
}

static void conn_start(struct http_server *s, evutil_socket_t fd, const struct sockaddr *sa)
{
	struct http_conn *c = NULL;
	struct bufferevent *bev = NULL;
	int one = 1;

	if (stats.connections_open >= cfg.max_connections || s->draining) {
		evutil_closesocket(fd);
		return;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	evutil_make_socket_nonblocking(fd);
	c = calloc(1, sizeof(*c));
	if (!c)
		goto fail;
	if (s->ssl) {
		SSL *ssl = SSL_new(s->ssl);
		if (!ssl)
			goto fail;
		bev = bufferevent_openssl_socket_new(s->base, fd, ssl, BUFFEREVENT_SSL_ACCEPTING,
		                                     BEV_OPT_CLOSE_ON_FREE |
		                                             BEV_OPT_DEFER_CALLBACKS);
		if (!bev) {
			SSL_free(ssl);
			goto fail;
		}
		bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
		c->tls = 1;
	} else {
		bev = bufferevent_socket_new(s->base, fd, BEV_OPT_CLOSE_ON_FREE);
		if (!bev)
			goto fail;
	}
	c->srv = s;
	c->bev = bev;
	c->timer = evtimer_new(s->base, on_header_deadline, c);
	c->kick = event_new(s->base, -1, 0, on_kick, c);
	c->flush = event_new(s->base, -1, 0, on_flush, c);
	if (!c->timer || !c->kick || !c->flush)
		goto fail_bev;
	if (sa && sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, c->peer,
		          sizeof(c->peer));
	else if (sa && sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, c->peer,
		          sizeof(c->peer));
	else
		snprintf(c->peer, sizeof(c->peer), "local");
	http_parser_init(&c->parser, HTTP_REQUEST);
	c->parser.data = c;
	c->next = s->conns;
	if (s->conns)
		s->conns->prev = c;
	s->conns = c;
	stats.connections_open++;
	stats.connections_total++;
	bufferevent_setcb(bev, on_read, on_write, on_event, c);
	bufferevent_setwatermark(bev, EV_READ, 0, READ_HIGH_WATERMARK);
	c->rd_timeout = -1;
	c->read_max = READ_CHUNK;
	if (c->tls) {
		set_read_timeout(c, cfg.header_timeout); /* a first request is due at once */
		bufferevent_enable(bev, EV_READ | EV_WRITE);
		return;
	}
	/* plain connections read with c->rd (read_update), write directly
	 * (conn_flush) and enable EV_WRITE only for what the socket did not take */
	{
		struct timeval wt = { cfg.write_timeout, 0 };
		bufferevent_set_timeouts(bev, NULL, &wt);
	}
	c->rd = event_new(s->base, fd, EV_READ | EV_PERSIST, on_raw_read, c);
	if (!c->rd) {
		conn_unlink(c);
		stats.connections_open--;
		stats.connections_total--;
		goto fail_bev;
	}
	c->reading = 1;
	set_read_timeout(c, cfg.header_timeout); /* a first request is due at once */
	return;
fail_bev:
	if (c->timer)
		event_free(c->timer);
	if (c->kick)
		event_free(c->kick);
	if (c->flush)
		event_free(c->flush);
	bufferevent_free(bev);
	free(c);
	return;
fail:
	free(c);
	evutil_closesocket(fd);
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int salen,
                      void *arg)
{
	(void)l;
	(void)salen;
	conn_start(arg, fd, sa);
}

static void on_accept_error(struct evconnlistener *l, void *arg)
{
	(void)l;
	(void)arg;
	log_msg(LOG_WARN, "http", NULL, "accept failed: %s", strerror(errno));
}

void http_server_adopt(struct http_server *s, int fd)
{
	conn_start(s, fd, NULL);
}

static void init_settings(void)
{
	memset(&settings, 0, sizeof(settings));
	settings.on_message_begin = on_message_begin;
	settings.on_url = on_url;
	settings.on_header_field = on_header_field;
	settings.on_header_value = on_header_value;
	settings.on_headers_complete = on_headers_complete;
	settings.on_body = on_body;
	settings.on_chunk_header = on_chunk_header;
	settings.on_message_complete = on_message_complete;
}

#define TLS12_CIPHERS                                                \
	"ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:" \
	"ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:" \
	"ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"

static SSL_CTX *tls_context(void)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());

	if (!ctx)
		return NULL;
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
	/* TLS 1.2: only AEAD suites with forward secrecy (no static RSA key
	 * exchange, no CBC: LUCKY13); TLS 1.3 keeps OpenSSL's defaults, all
	 * of which are both */
	if (SSL_CTX_set_cipher_list(ctx, TLS12_CIPHERS) != 1) {
		log_msg(LOG_ERROR, "http", NULL, "cannot set the TLS 1.2 cipher list");
		SSL_CTX_free(ctx);
		return NULL;
	}
	if (SSL_CTX_use_certificate_chain_file(ctx, cfg.tls_cert) != 1 ||
	    SSL_CTX_use_PrivateKey_file(ctx, cfg.tls_key, SSL_FILETYPE_PEM) != 1 ||
	    SSL_CTX_check_private_key(ctx) != 1) {
		char buf[256];
		ERR_error_string_n(ERR_get_error(), buf, sizeof(buf));
		log_msg(LOG_ERROR, "http", NULL, "cannot load TLS certificate '%s' / key '%s': %s",
		        cfg.tls_cert, cfg.tls_key, buf);
		SSL_CTX_free(ctx);
		return NULL;
	}
	return ctx;
}

struct http_server *http_server_new_unbound(struct event_base *base,
                                            const struct http_server_opts *opts)
{
	struct http_server *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	if (!cfg.access_log || !strcmp(cfg.access_log, "changes"))
		access_mode = ACCESS_CHANGES;
	else if (!strcmp(cfg.access_log, "all"))
		access_mode = ACCESS_ALL;
	else if (!strcmp(cfg.access_log, "errors"))
		access_mode = ACCESS_ERRORS;
	else if (!strcmp(cfg.access_log, "none"))
		access_mode = ACCESS_NONE;
	else {
		log_msg(LOG_ERROR, "http", NULL,
		        "access_log must be all, changes, errors or none, not '%s'",
		        cfg.access_log);
		free(s);
		return NULL;
	}
	init_settings();
	s->base = base;
	s->opts = *opts;
	fallback_route.method = HTTP_GET;
	fallback_route.pattern = "(static)";
	fallback_route.handler = opts->fallback;
	fallback_route.roles = ROLES_PUBLIC;
	return s;
}

struct http_server *http_server_new(struct event_base *base, const struct http_server_opts *opts)
{
	struct http_server *s = http_server_new_unbound(base, opts);
	struct sockaddr_storage ss;
	int sslen = sizeof(ss);
	socklen_t len = sizeof(ss);
	char addr[128];

	if (!s)
		return NULL;
	if (cfg.tls_cert && *cfg.tls_cert) {
		s->ssl = tls_context();
		if (!s->ssl)
			goto fail;
	}
	memset(&ss, 0, sizeof(ss));
	snprintf(addr, sizeof(addr), "%s port %d", cfg.listen, cfg.port);
	if (inet_pton(AF_INET, cfg.listen, &((struct sockaddr_in *)&ss)->sin_addr) == 1) {
		((struct sockaddr_in *)&ss)->sin_family = AF_INET;
		((struct sockaddr_in *)&ss)->sin_port = htons((uint16_t)cfg.port);
		sslen = sizeof(struct sockaddr_in);
	} else if (inet_pton(AF_INET6, cfg.listen, &((struct sockaddr_in6 *)&ss)->sin6_addr) == 1) {
		((struct sockaddr_in6 *)&ss)->sin6_family = AF_INET6;
		((struct sockaddr_in6 *)&ss)->sin6_port = htons((uint16_t)cfg.port);
		sslen = sizeof(struct sockaddr_in6);
	} else {
		log_msg(LOG_ERROR, "http", NULL,
		        "listen address '%s' is not an IPv4 or IPv6 literal", cfg.listen);
		goto fail;
	}
	s->lis = evconnlistener_new_bind(base, on_accept, s,
	                                 LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE |
	                                         LEV_OPT_CLOSE_ON_EXEC,
	                                 1024, (struct sockaddr *)&ss, sslen);
	if (!s->lis) {
		log_msg(LOG_ERROR, "http", NULL, "cannot listen on %s: %s", addr, strerror(errno));
		goto fail;
	}
	evconnlistener_set_error_cb(s->lis, on_accept_error);
	if (getsockname(evconnlistener_get_fd(s->lis), (struct sockaddr *)&ss, &len) == 0)
		s->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
		                                         : ((struct sockaddr_in *)&ss)->sin_port);
	return s;
fail:
	if (s->ssl)
		SSL_CTX_free(s->ssl);
	free(s);
	return NULL;
}

int http_server_port(const struct http_server *s)
{
	return s->port;
}

static void on_drain_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct http_server *s = arg;

	(void)fd;
	(void)what;
	log_msg(LOG_WARN, "http", NULL, "shutdown timeout: closing remaining connections");
	while (s->conns) {
		struct http_conn *c = s->conns;
		conn_free(c); /* calls drain_done when the last one goes */
	}
	if (s->drain_done) {
		void (*done)(void *) = s->drain_done;
		s->drain_done = NULL;
		done(s->drain_arg);
	}
}

void http_server_shutdown(struct http_server *s, void (*done)(void *arg), void *arg)
{
	struct http_conn *c, *next;
	struct timeval tv = { cfg.shutdown_timeout, 0 };

	s->draining = 1;
	s->drain_done = done;
	s->drain_arg = arg;
	if (s->lis) {
		evconnlistener_free(s->lis);
		s->lis = NULL;
	}
	for (c = s->conns; c; c = next) {
		next = c->next;
		if (!c->req) {
			/* idle keep-alive connection */
			c->closing = 1;
			kick(c);
		}
	}
	if (!s->conns) {
		s->drain_done = NULL;
		done(arg);
		return;
	}
	s->drain_timer = evtimer_new(s->base, on_drain_timeout, s);
	if (s->drain_timer)
		evtimer_add(s->drain_timer, &tv);
}

void http_server_free(struct http_server *s)
{
	if (!s)
		return;
	s->drain_done = NULL;
	while (s->conns)
		conn_free(s->conns);
	if (s->lis)
		evconnlistener_free(s->lis);
	if (s->drain_timer)
		event_free(s->drain_timer);
	if (s->ssl)
		SSL_CTX_free(s->ssl);
	free(s);
}

void http_get_stats(struct http_stats *st)
{
	*st = stats;
}
