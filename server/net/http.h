/* http.h — the HTTP/1.1 connection layer (libevent bufferevents + http-parser).
 *
 * Owns client connections: accepting (plain or TLS), parsing with
 * http-parser, limits and timeouts, routing, the authentication hook, request
 * bodies (buffered up to the route's limit, or streamed to the route), and
 * writing responses (whole, or streamed with backpressure), keep-alive,
 * pipelining and graceful shutdown.  It knows nothing of users, the
 * database or the app proxy: authentication and other origins (virtual
 * hosts) are hooks set at start-up.
 *
 * Request lifetime: a request is created when its first byte arrives and is
 * freed when its response is complete.  A handler may reply later (after a
 * database or worker completion).  If the client goes away first, the
 * request is marked closed (http_req_alive() == 0), the on_close callback
 * fires, and the eventual reply call frees it without writing anything.
 * Exactly one reply (http_reply*, or http_stream_begin ... http_stream_end)
 * must be made for every request handed to a handler or hook.
 */
#ifndef GPUCLOUD_HTTP_H
#define GPUCLOUD_HTTP_H

#include <stddef.h>
#include <stdint.h>
#include <stdarg.h>
#include <event2/event.h>
#include <jansson.h>

#include "base/rc.h"
#include "net/router.h"

struct http_server;
struct http_conn;
struct auth_info;
struct bufferevent;
struct evbuffer;

struct http_header {
	char *name;
	char *value;
};

struct http_req {
	struct http_conn *conn; /* NULL once the client is gone */
	int method;             /* enum http_method; -1 before it is parsed */
	char *url;              /* request target as sent */
	char *path;             /* path part of url, raw (not decoded) */
	char *query;            /* query part without '?', or NULL */
	struct http_header *hdr;
	int nhdr;
	char reqid[17]; /* random hex id, also in logs and X-Request-Id */
	char peer[64];  /* client IP address */
	int tls;
	int64_t content_length; /* -1 when absent or chunked */
	const struct route *route;
	struct route_params params;
	struct evbuffer *body;         /* whole body, for non-stream routes */
	struct auth_info *auth;        /* set by the auth hook; freed with the request */
	void *data;                    /* handler state */
	void (*data_free)(void *data); /* called when the request is freed */

	/* Internal below. */
	struct http_server *srv;
	int status;
	char out_inline[640]; /* extra response header lines, first part */
	size_t out_inline_len;
	struct evbuffer *out_hdrs; /* extra response header lines beyond */
	int phase;
	int closed;
	int close_after;
	int streaming;
	int stream_chunked;
	int64_t body_bytes;
	int held;      /* the route paused the body (http_body_pause) */
	int continued; /* "100 Continue" sent, or not needed */
	uint64_t out_bytes;
	double t_start;
	char *hname; /* header being parsed */
	size_t hdr_bytes;
	int last_was_value;
	void (*on_drain)(struct http_req *r, void *arg);
	void *on_drain_arg;
	void (*on_close)(struct http_req *r, void *arg);
	void *on_close_arg;
};

/* Authentication hook: called for every route whose roles are not
 * ROLES_PUBLIC, after the headers and before the body is read.  It must end
 * with either http_resume(r) (allowed: r->auth set) or an http_reply*()
 * error.  It may complete asynchronously. */
typedef void (*http_auth_hook)(struct http_req *r);

/* Called when no route matches a GET/HEAD (static files); may be NULL. */
typedef void (*http_fallback_hook)(struct http_req *r);

/* Called once per finished request for metrics: route pattern (or "-"),
 * method, status, seconds, bytes written. */
typedef void (*http_observe_hook)(const struct http_req *r, int status, double seconds);

/* A virtual host: requests for other origins, recognised by their Host
 * header, that a module serves instead of the router (the app proxy's
 * <route>.<apps_domain>).  They pass the same framing checks as every
 * request first (target, duplicate and Host headers, transfer codings),
 * then the same body limit (route->max_body) and Expect check. */
struct http_vhost {
	/* 1 when host (the Host header, well-formed; NULL when absent) is
	 * this virtual host's.  Called once per request, after the headers. */
	int (*match)(const char *host);
	/* Runs for each of its requests in place of the auth hook, before
	 * the body is read: must end with http_resume(r) or an http_reply*(),
	 * and may complete asynchronously. */
	http_auth_hook begin;
	/* The route every such request gets: its handler runs once the body
	 * has been read (ROUTE_STREAM hands the body to on_body). */
	const struct route *route;
};

struct http_server_opts {
	http_auth_hook auth;
	void (*auth_free)(struct auth_info *a);
	http_fallback_hook fallback;
	http_observe_hook observe;
	const struct http_vhost *vhost; /* NULL: every request goes to the router */
};

/* Binds cfg.listen:cfg.port (TLS when cfg.tls_cert is set) and starts
 * accepting.  Returns NULL on error (logged). */
struct http_server *http_server_new(struct event_base *base, const struct http_server_opts *opts);
/* Port actually bound (useful with port 0). */
int http_server_port(const struct http_server *s);
/* Graceful shutdown: stop accepting, close idle connections, let in-flight
 * requests finish (then close), and call done() once no connection is left or
 * after cfg.shutdown_timeout seconds. */
void http_server_shutdown(struct http_server *s, void (*done)(void *arg), void *arg);
void http_server_free(struct http_server *s);

struct http_stats {
	long long connections_open;
	long long connections_total;
	long long requests_total;
	long long orphaned; /* requests whose client left mid-handler */
};
void http_get_stats(struct http_stats *st);

/* Continue after the auth hook allowed the request. */
void http_resume(struct http_req *r);

/* Request accessors. */
const char *http_header(const struct http_req *r, const char *name);
const char *http_param(const struct http_req *r, const char *name);
/* Decoded value of query parameter name into out; returns its length, -1
 * when absent, -2 when malformed (bad escape, NUL, too long for out). */
long http_query(const struct http_req *r, const char *name, char *out, size_t outlen);
int http_req_alive(const struct http_req *r);
void http_req_on_close(struct http_req *r, void (*cb)(struct http_req *r, void *arg), void *arg);

/* Response.  Headers added with http_add_header go out with the reply. */
void http_add_header(struct http_req *r, const char *name, const char *value);
void http_reply(struct http_req *r, int status, const char *ctype, const void *body, size_t len);
/* Moves the content of body into the response. */
void http_reply_evbuffer(struct http_req *r, int status, const char *ctype, struct evbuffer *body);
/* Steals j (may be NULL for an empty 204-style reply with no body). */
void http_reply_json(struct http_req *r, int status, json_t *j);
/* {"error":{"code":rc_code(rc),"message":...,"hint":...}} with
 * rc_http_status(rc).  hint may be NULL. */
void http_reply_error(struct http_req *r, enum rc rc, const char *hint, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
/* Same, with an extra "details" member (stolen). */
void http_reply_error_details(struct http_req *r, enum rc rc, json_t *details, const char *hint,
                              const char *message);

/* The API's own origin, as browsers name it ("https://gpu.example.org"):
 * what the Origin and Referer of a cookie-authenticated request must be,
 * and where links back to the API point.  One rule for every caller:
 * cfg.public_url without its trailing slashes when it is set; otherwise
 * "https://" (tls) or "http://" followed by host, the API's host[:port] as
 * the browser sends it (for a request to the API, its own Host header).
 * Returns 0, or -1 with out "" when there is no host, public_url is only
 * slashes, or the origin does not fit in out: callers refuse then. */
int http_own_origin(int tls, const char *host, char *out, size_t outlen);

/* Reply for a failed database call: 503 (with Retry-After) when the
 * database is unavailable, 409 for RC_CONFLICT and 400 for RC_INVALID (with
 * what as the message), else 500. */
void http_reply_db_error(struct http_req *r, enum rc rc, const char *what);

/* Parses the route capture name as a positive id (canonical decimal: no
 * sign, space or leading zero) into id.  Returns 0, or replies 404 and
 * returns -1 (the request is then finished) when it is not one. */
int http_param_id(struct http_req *r, const char *name, long long *id);

/* Parses s as a canonical non-negative decimal (no sign, space or leading
 * zero, at most 18 digits, so one resource has one URL) into *out.
 * Returns 0, or -1 when s is not one. */
int http_parse_decimal(const char *s, long long *out);

/* Streaming responses.  length -1 means chunked transfer encoding, -2 no
 * body framing at all (204, 304, a reply to HEAD without a length).
 * http_stream_write returns 0, or -1 when the client is gone (then call
 * http_stream_end and stop producing).  Use http_stream_backlog and
 * http_stream_on_drain to stop producing while the client is slow. */
void http_stream_begin(struct http_req *r, int status, const char *ctype, int64_t length);
int http_stream_write(struct http_req *r, const void *data, size_t len);
/* The same, moving the first len bytes of src (no copy when possible). */
int http_stream_write_buffer(struct http_req *r, struct evbuffer *src, size_t len);
size_t http_stream_backlog(const struct http_req *r);
void http_stream_on_drain(struct http_req *r, void (*cb)(struct http_req *r, void *arg), void *arg);
void http_stream_end(struct http_req *r);
/* Ends a streamed response that could not be completed (its source
 * failed): closes the connection without the final chunk. */
void http_stream_abort(struct http_req *r);

/* Request bodies of ROUTE_STREAM routes: stop handing body bytes to
 * on_body (the next piece waits in the connection, and reading stops at
 * the read watermark) until http_body_resume().  For a consumer that is
 * slower than the client (the reverse proxy's upstream).
 * ROUTE_PREPARE routes get on_body(r, NULL, 0) once after the auth hook,
 * before any body byte is read and before "100 Continue" is sent; it must
 * not reply there (a non-OK rc is replied with), but may call
 * http_body_pause(r) and decide later: reply with an error (the client
 * never sent its body), or http_body_resume(r) (Continue goes out then).
 * A client that half-closes after sending its whole body still gets its
 * answer: what it sent is handled first. */
void http_body_pause(struct http_req *r);
void http_body_resume(struct http_req *r);

/* Reads up to bytes per socket read for r's connection (libevent's
 * default is 16 KiB): for large streamed uploads.  The connection keeps it
 * for later requests. */
void http_body_read_max(struct http_req *r, size_t bytes);

/* Adds len bytes of fd from offset off to a response begun with
 * http_stream_begin() and a known length (not chunked): sendfile() on plain
 * connections, read in by libevent under TLS.  fd is duplicated, so the
 * caller may close it at once.  Returns 0, or -1 when the client is gone or
 * the segment cannot be made.  Pace large files with http_stream_backlog()
 * and http_stream_on_drain() (a few MiB per call). */
int http_stream_file(struct http_req *r, int fd, int64_t off, int64_t len);

/* Connection handover after an Upgrade (a 101 the caller writes itself):
 * finishes r (logged with status 101; r is freed) and returns the client's
 * bufferevent, with its callbacks, timeouts and watermarks cleared and any
 * bytes that followed the request still in its input buffer.  The caller
 * owns it (bufferevent_free closes the client).  Returns NULL, and finishes
 * r, when the client is already gone.  Only from a handler (PH_HANDLER). */
struct bufferevent *http_upgrade_take(struct http_req *r);

/* Method name for logs and metrics: "-" before the request line named
 * one (r->method is -1 then). */
const char *http_method_name(int method);

/* Bare-CR scan of request framing bytes (RFC 9112 §2.2), in the parser
 * shape: returns how many leading bytes of buf are safe for http-parser
 * (every CR among them is followed by LF), -1 when buf starts with a CR
 * followed by something else, -2 when buf is a lone CR (the next byte
 * decides).  No allocation, no state. */
long http_scan_cr(const char *buf, size_t len);

/* Status reason phrase. */
const char *http_reason(int status);

/* For the fuzz target and unit tests: serve one already-connected socket. */
void http_server_adopt(struct http_server *s, int fd);
/* A server without a listener (fuzzing, tests). */
struct http_server *http_server_new_unbound(struct event_base *base,
                                            const struct http_server_opts *opts);

#endif
