/* docker.c — the Docker Engine API client: one curl multi handle driven by
 * the libevent loop.
 *
 * Owns the multi handle (and with it the connection cache every engine's
 * calls share), one event per socket curl asks us to watch, one timer for
 * curl's timeouts, the engines' endpoint settings and the calls in flight
 * with their response buffers and frame demultiplexers.  Does not own the
 * event base, what a response means (callers parse the JSON), or the
 * caller's buffers after docker_request()/docker_stream() return: the body
 * and headers are copied.
 *
 * Completions reach their callbacks through an event made active on the
 * loop, never from inside the function the caller called and never from
 * inside curl: a callback may therefore start calls, cancel calls, free an
 * engine or shut the client down.  on_data, by contrast, runs inside curl's
 * write callback.  From there a caller may start calls, cancel any call
 * (its own included) and free engines: what curl forbids inside its
 * callbacks (adding and removing handles) is postponed to the moment
 * curl_multi_socket_action() returns.  Only docker_shutdown() must not be
 * called from on_data.
 */
#include "engine/docker.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "base/log.h"

/* curl's own default (300 s) is far too patient for a local engine. */
#define CONNECT_TIMEOUT_MS 10000
#define DEFAULT_TLS_PORT   "2376"

struct docker_engine {
	char *url;  /* as given, for messages */
	char *base; /* "http://localhost/v1.41" or "https://host:port/v1.41" */
	char *sock; /* unix socket path, or NULL for TCP */
	char *ca, *cert, *key;
	int web; /* docker_http(): any http(s) URL, the system's CAs */
};

/* The pseudo-engine of docker_http() calls. */
static struct docker_engine web_engine = { .url = "registry", .base = "", .web = 1 };

/* The frame demultiplexer of attach/logs streams: 8-byte headers, then
 * payloads, split across whatever chunks the transport hands over. */
struct demux {
	unsigned char hdr[8];
	size_t hlen; /* header bytes gathered so far */
	size_t left; /* payload bytes still due in the current frame */
	int stream;
	int raw;   /* the data is not framed after all: the rest is stream 0 */
	int marks; /* mark each frame's first piece (DOCKER_FRAME_START) */
	int fresh; /* the current frame's first piece is still due */
};

/* Receives one piece of payload; returns 0 to go on, -1 to stop. */
typedef int (*demux_emit)(void *arg, int stream, const char *p, size_t n);

enum call_state {
	CALL_WAITING,    /* started inside a curl callback: joins the multi after it */
	CALL_RUNNING,    /* in the multi */
	CALL_DONE,       /* out of the multi, its completion queued on the loop */
	CALL_DELIVERING, /* its callback is running */
};

struct docker_call {
	TAILQ_ENTRY(docker_call) link;
	struct docker_engine *e; /* NULL once the engine is gone */
	enum call_state state;
	CURL *easy;
	struct curl_slist *hdrs;
	docker_cb cb;
	docker_data_cb on_data; /* NULL for docker_request() */
	void *arg;
	int timeout_ms;
	int demux_on;
	struct demux dm;
	int unplug;     /* leave the multi as soon as curl allows */
	int cancelled;  /* docker_cancel() came inside curl: free, say nothing */
	int failed;     /* rc and err are decided (engine gone, client stopped) */
	int aborted;    /* on_data asked to stop */
	int nomem;      /* the body could not be stored */
	int toolarge;   /* the body passed body_max */
	int checked;    /* a stream's status was looked at */
	int collecting; /* a stream answered an error: its body is collected */
	char *buf;
	size_t len, cap;
	char *hbuf; /* docker_http(): the response's header lines */
	size_t hlen;
	enum rc rc;
	int status;
	struct event *done;
	char what[128]; /* "GET /info", for messages */
	char errbuf[CURL_ERROR_SIZE];
	char err[CURL_ERROR_SIZE + 256];
};

/* A socket curl asked us to watch. */
struct sock {
	LIST_ENTRY(sock) link;
	struct event *ev;
};

TAILQ_HEAD(call_list, docker_call);
LIST_HEAD(sock_list, sock);

/* A whole body above this is not something the engine should send us;
 * tests lower it. */
static size_t body_max = 64u << 20;

static struct event_base *base;
static CURLM *multi;
static struct event *timer;
static struct call_list calls = TAILQ_HEAD_INITIALIZER(calls);
static struct sock_list socks = LIST_HEAD_INITIALIZER(socks);
/* Inside curl_multi_socket_action(): curl's callbacks, on_data among them,
 * may run, and handles may neither join nor leave the multi. */
static int in_curl;
/* Calls waiting to join or leave the multi once curl returns. */
static int npending;
static int ncalls;

int docker_frame_header(const unsigned char *buf, size_t len, int *stream, size_t *payload)
{
	size_t i;

	/* Decide as early as the bytes allow, as a streaming parser should. */
	if (len >= 1 && buf[0] > 2)
		return -1;
	for (i = 1; i < 4 && i < len; i++)
		if (buf[i] != 0)
			return -1;
	if (len < 8)
		return -2;
	*stream = buf[0];
	*payload =
	        (size_t)buf[4] << 24 | (size_t)buf[5] << 16 | (size_t)buf[6] << 8 | (size_t)buf[7];
	return 8;
}

/* Feeds n bytes of a framed stream; emit gets each run of payload with its
 * stream.  Frames may be cut anywhere: the header bytes seen so far and the
 * payload still due carry over to the next call.  Data that does not start
 * with a frame header (a container with a TTY, an error from a proxy) is
 * passed on whole as stream 0 from there on.  Returns 0, or -1 once emit
 * has asked to stop (then nothing more is emitted from this call). */
static int demux_feed(struct demux *d, const char *p, size_t n, demux_emit emit, void *arg)
{
	size_t k, payload;
	int r, stream;

	while (n > 0) {
		if (d->raw)
			return emit(arg, 0, p, n);
		if (d->left > 0) {
			k = n < d->left ? n : d->left;
			if (emit(arg, d->stream | (d->marks && d->fresh ? DOCKER_FRAME_START : 0),
			         p, k) < 0)
				return -1;
			d->fresh = 0;
			d->left -= k;
			p += k;
			n -= k;
			continue;
		}
		k = sizeof(d->hdr) - d->hlen;
		if (k > n)
			k = n;
		memcpy(d->hdr + d->hlen, p, k);
		r = docker_frame_header(d->hdr, d->hlen + k, &stream, &payload);
		if (r == -2) {
			d->hlen += k;
			return 0; /* k == n: everything is held */
		}
		if (r < 0) {
			/* Not framed: what was held as a header is data too. */
			d->raw = 1;
			if (d->hlen > 0 && emit(arg, 0, (const char *)d->hdr, d->hlen) < 0)
				return -1;
			d->hlen = 0;
			continue;
		}
		p += k;
		n -= k;
		d->hlen = 0;
		d->stream = stream;
		d->left = payload;
		d->fresh = 1;
	}
	return 0;
}

/* ---- engines ---- */

static int readable(const char *what, const char *path, const char *url, char *err, size_t errlen)
{
	if (!path || !*path) {
		snprintf(err, errlen,
		         "docker endpoint '%s' needs mutual TLS but no %s file was given "
		         "(plain TCP is refused: give the CA, client certificate and key)",
		         url, what);
		return 0;
	}
	if (access(path, R_OK) != 0) {
		snprintf(err, errlen,
		         "cannot read the TLS %s file '%s' for docker endpoint '%s': %s", what,
		         path, url, strerror(errno));
		return 0;
	}
	return 1;
}

static char *dupcat(const char *a, const char *b, const char *c)
{
	size_t la = strlen(a), lb = strlen(b), lc = strlen(c);
	char *s = malloc(la + lb + lc + 1);

	if (!s)
		return NULL;
	memcpy(s, a, la);
	memcpy(s + la, b, lb);
	memcpy(s + la + lb, c, lc + 1);
	return s;
}

struct docker_engine *docker_engine_new(const char *url, const char *ca, const char *cert,
                                        const char *key, char *err, size_t errlen)
{
	struct docker_engine *e = NULL;
	char *hostport = NULL;
	const char *rest;
	size_t n, i;

	if (errlen > 0)
		err[0] = '\0';
	if (!url || !*url) {
		snprintf(err, errlen, "docker endpoint is empty (unix:///path or tcp://host:port)");
		return NULL;
	}
	e = calloc(1, sizeof(*e));
	if (!e || !(e->url = strdup(url)))
		goto nomem;
	if (strncmp(url, "unix://", 7) == 0) {
		rest = url + 7;
		if (rest[0] != '/') {
			snprintf(err, errlen,
			         "docker endpoint '%s': the socket path must be absolute "
			         "(unix:///var/run/docker.sock)",
			         url);
			goto fail;
		}
		if (strlen(rest) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
			snprintf(err, errlen,
			         "docker endpoint '%s': the socket path is longer than %zu bytes",
			         url, sizeof(((struct sockaddr_un *)0)->sun_path) - 1);
			goto fail;
		}
		e->sock = strdup(rest);
		e->base = strdup("http://localhost/" DOCKER_API_VERSION);
		if (!e->sock || !e->base)
			goto nomem;
		return e;
	}
	if (strncmp(url, "tcp://", 6) != 0) {
		snprintf(err, errlen,
		         "docker endpoint '%s' is neither unix:///path nor tcp://host:port", url);
		goto fail;
	}
	rest = url + 6;
	n = strlen(rest);
	if (n > 0 && rest[n - 1] == '/')
		n--;
	for (i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)rest[i];

		if (ch <= 0x20 || ch >= 0x7f || strchr("/?#@\\", ch))
			break;
	}
	if (n == 0 || i < n || rest[0] == ':') {
		snprintf(err, errlen, "docker endpoint '%s': expected tcp://host:port", url);
		goto fail;
	}
	if (!readable("CA", ca, url, err, errlen) ||
	    !readable("client certificate", cert, url, err, errlen) ||
	    !readable("client key", key, url, err, errlen))
		goto fail;
	hostport = strndup(rest, n);
	if (!hostport)
		goto nomem;
	{
		/* The port follows the last colon, unless that sits inside [v6]. */
		const char *colon = strrchr(hostport, ':');
		const char *bracket = strrchr(hostport, ']');
		int has_port = colon && (!bracket || colon > bracket);

		e->base = dupcat("https://", hostport,
		                 has_port ? "/" DOCKER_API_VERSION
		                          : ":" DEFAULT_TLS_PORT "/" DOCKER_API_VERSION);
	}
	free(hostport);
	hostport = NULL;
	e->ca = strdup(ca);
	e->cert = strdup(cert);
	e->key = strdup(key);
	if (!e->base || !e->ca || !e->cert || !e->key)
		goto nomem;
	return e;
nomem:
	snprintf(err, errlen, "out of memory for docker endpoint '%s'", url);
fail:
	free(hostport);
	if (e) {
		free(e->url);
		free(e->base);
		free(e->sock);
		free(e->ca);
		free(e->cert);
		free(e->key);
		free(e);
	}
	return NULL;
}

/* ---- calls ---- */

static void call_free(struct docker_call *c)
{
	TAILQ_REMOVE(&calls, c, link);
	if (c->state != CALL_DELIVERING)
		ncalls--;
	if (c->easy)
		curl_easy_cleanup(c->easy);
	curl_slist_free_all(c->hdrs);
	if (c->done)
		event_free(c->done);
	free(c->buf);
	free(c->hbuf);
	free(c);
}

/* c has left the multi (or never joined it): drop what curl held and queue
 * the completion on the loop. */
static void conclude(struct docker_call *c)
{
	if (c->cancelled) {
		call_free(c);
		return;
	}
	if (c->easy) {
		curl_easy_cleanup(c->easy);
		c->easy = NULL;
	}
	curl_slist_free_all(c->hdrs);
	c->hdrs = NULL;
	c->unplug = 0;
	c->state = CALL_DONE;
	event_active(c->done, EV_TIMEOUT, 1);
}

static void on_deliver(evutil_socket_t fd, short what, void *arg)
{
	struct docker_call *c = arg;
	int ok = c->rc == RC_OK && c->buf;

	(void)fd;
	(void)what;
	c->state = CALL_DELIVERING;
	ncalls--;
	/* A partial body is no answer. */
	c->cb(c, c->rc, c->status, ok ? c->buf : "", ok ? c->len : 0, c->rc == RC_OK ? "" : c->err,
	      c->arg);
	call_free(c);
}

/* Ends c with rc UNAVAILABLE, whatever curl is doing with it. */
static void fail(struct docker_call *c, const char *why)
{
	if (c->state == CALL_DONE || c->state == CALL_DELIVERING || c->failed || c->cancelled)
		return;
	c->failed = 1;
	c->rc = RC_UNAVAILABLE;
	snprintf(c->err, sizeof(c->err), "%s: %s", c->what, why);
	if (c->state == CALL_RUNNING && in_curl) {
		c->unplug = 1;
		npending++;
		return;
	}
	if (c->state == CALL_RUNNING)
		curl_multi_remove_handle(multi, c->easy);
	conclude(c);
}

/* Keeps the body, NUL-terminated; 0 when it cannot. */
static int collect(struct docker_call *c, const char *p, size_t n)
{
	size_t cap;
	char *b;

	if (c->len + n + 1 > c->cap) {
		if (c->len + n >= body_max) {
			c->toolarge = 1;
			return 0;
		}
		cap = c->cap ? c->cap : 4096;
		while (cap < c->len + n + 1)
			cap *= 2;
		if (cap > body_max)
			cap = body_max;
		b = realloc(c->buf, cap);
		if (!b) {
			c->nomem = 1;
			return 0;
		}
		c->buf = b;
		c->cap = cap;
	}
	memcpy(c->buf + c->len, p, n);
	c->len += n;
	c->buf[c->len] = '\0';
	return 1;
}

static int emit_data(void *arg, int stream, const char *p, size_t n)
{
	struct docker_call *c = arg;

	if (c->unplug)
		return -1;
	if (c->on_data(c, stream, p, n, c->arg) != 0) {
		c->aborted = 1;
		return -1;
	}
	/* on_data may have cancelled this call or freed its engine. */
	return c->unplug ? -1 : 0;
}

static size_t on_write(char *p, size_t size, size_t nmemb, void *arg)
{
	struct docker_call *c = arg;
	size_t n = size * nmemb;
	long code = 0;
	int raw;

	if (n == 0)
		return 0;
	if (c->unplug || c->aborted)
		return CURL_WRITEFUNC_ERROR;
	if (c->on_data && !c->checked) {
		/* An error answer is a message for cb, not stream data. */
		c->checked = 1;
		curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &code);
		c->collecting = code < 200 || code > 299;
	}
	if (!c->on_data || c->collecting)
		return collect(c, p, n) ? n : CURL_WRITEFUNC_ERROR;
	if (!c->demux_on)
		return emit_data(c, 0, p, n) < 0 ? CURL_WRITEFUNC_ERROR : n;
	raw = c->dm.raw;
	if (demux_feed(&c->dm, p, n, emit_data, c) < 0)
		return CURL_WRITEFUNC_ERROR;
	if (!raw && c->dm.raw && c->e)
		LOG_W("docker", "%s on engine '%s': the stream is not framed; passing it on raw",
		      c->what, c->e->url);
	return n;
}

/* Sets rc, status and err from how curl ended c's transfer. */
static void judge(struct docker_call *c, CURLcode res)
{
	const char *why = c->errbuf[0] ? c->errbuf : curl_easy_strerror(res);
	const char *url = c->e ? c->e->url : "?";
	long code = 0, oserr = 0;

	curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &code);
	c->status = (int)code;
	if (res == CURLE_OK || (res == CURLE_WRITE_ERROR && c->aborted)) {
		c->rc = RC_OK;
	} else if (c->e && c->e->web) {
		c->rc = res == CURLE_OPERATION_TIMEDOUT           ? RC_TIMEOUT
		        : res == CURLE_WRITE_ERROR && c->toolarge ? RC_DOCKER
		        : (res == CURLE_WRITE_ERROR && c->nomem) || res == CURLE_OUT_OF_MEMORY
		                ? RC_NOMEM
		                : RC_UNAVAILABLE;
		snprintf(c->err, sizeof(c->err), "could not reach %s: %s", c->what, why);
	} else if (res == CURLE_WRITE_ERROR && c->toolarge) {
		c->rc = RC_DOCKER;
		snprintf(c->err, sizeof(c->err),
		         "%s on docker engine '%s': the response is larger than %zu bytes", c->what,
		         url, body_max);
	} else if ((res == CURLE_WRITE_ERROR && c->nomem) || res == CURLE_OUT_OF_MEMORY) {
		c->rc = RC_NOMEM;
		snprintf(c->err, sizeof(c->err),
		         "%s on docker engine '%s': out of memory for the response", c->what, url);
	} else if (res == CURLE_OPERATION_TIMEDOUT) {
		c->rc = RC_TIMEOUT;
		snprintf(c->err, sizeof(c->err),
		         "docker engine '%s' did not answer %s within %d ms (%s)", url, c->what,
		         c->timeout_ms > 0 ? c->timeout_ms : CONNECT_TIMEOUT_MS, why);
	} else if (res == CURLE_COULDNT_CONNECT && c->e && c->e->sock &&
	           curl_easy_getinfo(c->easy, CURLINFO_OS_ERRNO, &oserr) == CURLE_OK && oserr) {
		/* curl speaks of "localhost port 80"; the socket is what failed. */
		c->rc = RC_UNAVAILABLE;
		snprintf(c->err, sizeof(c->err),
		         "could not reach docker engine '%s' for %s: cannot connect to '%s': %s",
		         url, c->what, c->e->sock, strerror((int)oserr));
	} else {
		/* Refused, TLS handshake, connection lost: curl's words say which
		 * (e.g. "alert bad certificate", "unable to get local issuer"). */
		c->rc = RC_UNAVAILABLE;
		snprintf(c->err, sizeof(c->err), "could not reach docker engine '%s' for %s: %s",
		         url, c->what, why);
	}
	if (c->rc != RC_OK)
		LOG_D("docker", "%s", c->err);
}

static void check_multi_info(void)
{
	struct docker_call *c;
	CURLMsg *m;
	CURLcode res;
	CURL *easy;
	void *p;
	int left;

	while ((m = curl_multi_info_read(multi, &left))) {
		if (m->msg != CURLMSG_DONE)
			continue;
		/* m does not outlive curl_multi_remove_handle(). */
		easy = m->easy_handle;
		res = m->data.result;
		p = NULL;
		curl_easy_getinfo(easy, CURLINFO_PRIVATE, &p);
		c = p;
		if (!c->failed && !c->cancelled)
			judge(c, res);
		{
			/* where an engine call's time went (debug level) */
			curl_off_t tc = 0, ts = 0, tt = 0;
			curl_easy_getinfo(easy, CURLINFO_CONNECT_TIME_T, &tc);
			curl_easy_getinfo(easy, CURLINFO_STARTTRANSFER_TIME_T, &ts);
			curl_easy_getinfo(easy, CURLINFO_TOTAL_TIME_T, &tt);
			LOG_D("docker", "%s: %d in %.1f ms (connect %.1f, first byte %.1f)",
			      c->what, c->status, tt / 1000.0, tc / 1000.0, ts / 1000.0);
		}
		curl_multi_remove_handle(multi, easy);
		conclude(c);
	}
}

/* What on_data or engine_free asked for while curl was busy. */
static void settle(void)
{
	struct docker_call *c, *next;

	if (!npending)
		return;
	npending = 0;
	for (c = TAILQ_FIRST(&calls); c; c = next) {
		next = TAILQ_NEXT(c, link);
		if (c->state == CALL_RUNNING && c->unplug) {
			curl_multi_remove_handle(multi, c->easy);
			conclude(c);
		} else if (c->state == CALL_WAITING) {
			if (curl_multi_add_handle(multi, c->easy) == CURLM_OK) {
				c->state = CALL_RUNNING;
			} else {
				c->rc = RC_NOMEM;
				snprintf(c->err, sizeof(c->err), "%s: could not start the transfer",
				         c->what);
				conclude(c);
			}
		}
	}
}

static void on_socket(evutil_socket_t fd, short what, void *arg)
{
	int flags = 0, running = 0;

	(void)arg;
	if (what & EV_READ)
		flags |= CURL_CSELECT_IN;
	if (what & EV_WRITE)
		flags |= CURL_CSELECT_OUT;
	in_curl++;
	curl_multi_socket_action(multi, fd, flags, &running);
	in_curl--;
	check_multi_info();
	settle();
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
	int running = 0;

	(void)fd;
	(void)what;
	(void)arg;
	in_curl++;
	curl_multi_socket_action(multi, CURL_SOCKET_TIMEOUT, 0, &running);
	in_curl--;
	check_multi_info();
	settle();
}

/* curl's CURLMOPT_TIMERFUNCTION: only arms the timer, so curl is never
 * re-entered from inside itself. */
static int on_curl_timer(CURLM *m, long timeout_ms, void *arg)
{
	struct timeval tv;

	(void)m;
	(void)arg;
	if (timeout_ms < 0) {
		evtimer_del(timer);
		return 0;
	}
	tv.tv_sec = timeout_ms / 1000;
	tv.tv_usec = (timeout_ms % 1000) * 1000;
	evtimer_add(timer, &tv);
	return 0;
}

/* curl's CURLMOPT_SOCKETFUNCTION: one persistent event per socket. */
static int on_curl_socket(CURL *easy, curl_socket_t s, int what, void *arg, void *sockp)
{
	struct sock *k = sockp;
	short kind = EV_PERSIST;

	(void)easy;
	(void)arg;
	if (what == CURL_POLL_REMOVE) {
		if (k) {
			LIST_REMOVE(k, link);
			event_free(k->ev);
			free(k);
		}
		return 0;
	}
	if (what & CURL_POLL_IN)
		kind |= EV_READ;
	if (what & CURL_POLL_OUT)
		kind |= EV_WRITE;
	if (!k) {
		k = calloc(1, sizeof(*k));
		if (!k || !(k->ev = event_new(base, s, kind, on_socket, NULL))) {
			free(k);
			LOG_E("docker", "out of memory watching a socket");
			return -1;
		}
		LIST_INSERT_HEAD(&socks, k, link);
		curl_multi_assign(multi, s, k);
	} else {
		event_del(k->ev);
		event_assign(k->ev, base, s, kind, on_socket, NULL);
	}
	event_add(k->ev, NULL);
	return 0;
}

static int is_method(const char *m, const char *want)
{
	return strcmp(m, want) == 0;
}

/* docker_http(): keeps the response's header lines (at most 64 KiB). */
static size_t on_header(char *p, size_t size, size_t nmemb, void *arg)
{
	struct docker_call *c = arg;
	size_t n = size * nmemb;
	char *b;

	if (c->hlen + n + 1 > 65536)
		return n; /* ignored, not fatal */
	b = realloc(c->hbuf, c->hlen + n + 1);
	if (!b)
		return n;
	memcpy(b + c->hlen, p, n);
	c->hbuf = b;
	c->hlen += n;
	c->hbuf[c->hlen] = '\0';
	return n;
}

static CURLcode setup(struct docker_call *c, const struct docker_engine *e, const char *url,
                      const char *method, const char *ctype, const char *body, size_t len,
                      const char *const *headers)
{
	CURL *h = c->easy;
	struct curl_slist *l;
	int with_body = body || is_method(method, "POST") || is_method(method, "PUT");
	char line[512];
	CURLcode r;

#define SET(opt, val)                                                \
	do {                                                         \
		if ((r = curl_easy_setopt(h, opt, val)) != CURLE_OK) \
			return r;                                    \
	} while (0)

	SET(CURLOPT_URL, url);
	SET(CURLOPT_PRIVATE, c);
	SET(CURLOPT_ERRORBUFFER, c->errbuf);
	SET(CURLOPT_WRITEFUNCTION, on_write);
	SET(CURLOPT_WRITEDATA, c);
	SET(CURLOPT_NOSIGNAL, 1L);
	SET(CURLOPT_PROTOCOLS_STR, "http,https");
	/* Hijacked streams (attach) are HTTP/1.1 things. */
	SET(CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	SET(CURLOPT_USERAGENT, "gpucloudd");
	SET(CURLOPT_CONNECTTIMEOUT_MS, (long)CONNECT_TIMEOUT_MS);
	SET(CURLOPT_TIMEOUT_MS, (long)c->timeout_ms);
	if (e->web) {
		SET(CURLOPT_HEADERFUNCTION, on_header);
		SET(CURLOPT_HEADERDATA, c);
		SET(CURLOPT_SSL_VERIFYPEER, 1L);
		SET(CURLOPT_SSL_VERIFYHOST, 2L);
	} else if (e->sock) {
		SET(CURLOPT_UNIX_SOCKET_PATH, e->sock);
	} else {
		SET(CURLOPT_CAINFO, e->ca);
		/* Only our CA vouches for an engine, not the system's. */
		SET(CURLOPT_CAPATH, NULL);
		SET(CURLOPT_SSLCERT, e->cert);
		SET(CURLOPT_SSLCERTTYPE, "PEM");
		SET(CURLOPT_SSLKEY, e->key);
		SET(CURLOPT_SSLKEYTYPE, "PEM");
		SET(CURLOPT_SSL_VERIFYPEER, 1L);
		SET(CURLOPT_SSL_VERIFYHOST, 2L);
		SET(CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
		SET(CURLOPT_TCP_KEEPALIVE, 1L);
	}
	if (with_body) {
		SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(body ? len : 0));
		SET(CURLOPT_COPYPOSTFIELDS, body ? body : "");
		if (!is_method(method, "POST"))
			SET(CURLOPT_CUSTOMREQUEST, method);
	} else if (is_method(method, "HEAD")) {
		SET(CURLOPT_NOBODY, 1L);
	} else if (!is_method(method, "GET")) {
		SET(CURLOPT_CUSTOMREQUEST, method);
	}
#undef SET

	/* The engine never asks for 100-continue; waiting for it costs 1 s. */
	l = curl_slist_append(NULL, "Expect:");
	if (l && with_body) {
		if (body && ctype && *ctype) {
			snprintf(line, sizeof(line), "Content-Type: %s", ctype);
		} else {
			/* Not curl's form-urlencoded default. */
			snprintf(line, sizeof(line), "Content-Type:");
		}
		if (!curl_slist_append(l, line)) {
			curl_slist_free_all(l);
			l = NULL;
		}
	}
	for (size_t i = 0; l && headers && headers[i]; i++) {
		if (strpbrk(headers[i], "\r\n")) {
			curl_slist_free_all(l);
			return CURLE_BAD_FUNCTION_ARGUMENT;
		}
		if (!curl_slist_append(l, headers[i])) {
			curl_slist_free_all(l);
			l = NULL;
		}
	}
	if (!l)
		return CURLE_OUT_OF_MEMORY;
	c->hdrs = l;
	return curl_easy_setopt(h, CURLOPT_HTTPHEADER, c->hdrs);
}

/* A method is a token; a path goes into the URL as is and must not smuggle
 * spaces, controls or a second request line. */
static int valid_request(const char *method, const char *path, int web)
{
	const char *s;

	if (!method || !*method || !path)
		return 0;
	if (web ? strncmp(path, "http://", 7) != 0 && strncmp(path, "https://", 8) != 0
	        : path[0] != '/')
		return 0;
	for (s = method; *s; s++)
		if (*s < 'A' || *s > 'Z')
			return 0;
	for (s = path; *s; s++)
		if ((unsigned char)*s <= 0x20 || (unsigned char)*s >= 0x7f)
			return 0;
	return 1;
}

static struct docker_call *start(struct docker_engine *e, const char *method, const char *path,
                                 const char *ctype, const char *body, size_t len,
                                 const char *const *headers, int timeout_ms, int demux,
                                 docker_data_cb on_data, docker_cb cb, void *arg)
{
	struct docker_call *c = NULL;
	char *url = NULL;
	CURLcode r;

	if (!multi) {
		LOG_E("docker", "docker_request() before docker_init() or after docker_shutdown()");
		return NULL;
	}
	if (!e || !cb || !valid_request(method, path, e->web)) {
		LOG_E("docker", "refusing a malformed docker request '%.20s %.80s'",
		      method ? method : "(null)", path ? path : "(null)");
		return NULL;
	}
	url = dupcat(e->base, path, "");
	c = calloc(1, sizeof(*c));
	if (!url || !c)
		goto fail;
	c->e = e;
	c->cb = cb;
	c->on_data = on_data;
	c->arg = arg;
	c->demux_on = demux != 0;
	c->dm.marks = demux == DOCKER_DEMUX_FRAMES;
	c->timeout_ms = timeout_ms > 0 ? timeout_ms : 0;
	snprintf(c->what, sizeof(c->what), "%s %s", method, path);
	c->done = event_new(base, -1, 0, on_deliver, c);
	c->easy = curl_easy_init();
	if (!c->done || !c->easy)
		goto fail;
	r = setup(c, e, url, method, ctype, body, len, headers);
	if (r != CURLE_OK) {
		LOG_E("docker", "cannot set up %s: %s", c->what, curl_easy_strerror(r));
		goto fail;
	}
	free(url);
	url = NULL;
	if (in_curl) {
		/* curl refuses new handles from inside its callbacks. */
		c->state = CALL_WAITING;
		npending++;
	} else if (curl_multi_add_handle(multi, c->easy) != CURLM_OK) {
		LOG_E("docker", "cannot start %s", c->what);
		goto fail;
	} else {
		c->state = CALL_RUNNING;
	}
	TAILQ_INSERT_TAIL(&calls, c, link);
	ncalls++;
	return c;
fail:
	free(url);
	if (c) {
		if (c->easy)
			curl_easy_cleanup(c->easy);
		curl_slist_free_all(c->hdrs);
		if (c->done)
			event_free(c->done);
		free(c);
	}
	return NULL;
}

struct docker_call *docker_request(struct docker_engine *e, const char *method, const char *path,
                                   const char *ctype, const char *body, size_t len,
                                   const char *const *headers, int timeout_ms, docker_cb cb,
                                   void *arg)
{
	return start(e, method, path, ctype, body, len, headers, timeout_ms, 0, NULL, cb, arg);
}

struct docker_call *docker_stream(struct docker_engine *e, const char *method, const char *path,
                                  const char *ctype, const char *body, size_t len,
                                  const char *const *headers, int timeout_ms, int demux,
                                  docker_data_cb on_data, docker_cb cb, void *arg)
{
	if (!on_data) {
		LOG_E("docker", "docker_stream() without on_data");
		return NULL;
	}
	return start(e, method, path, ctype, body, len, headers, timeout_ms, demux, on_data, cb,
	             arg);
}

struct docker_call *docker_http(const char *method, const char *url, const char *const *headers,
                                int timeout_ms, docker_cb cb, void *arg)
{
	return start(&web_engine, method, url, NULL, NULL, 0, headers, timeout_ms, 0, NULL, cb,
	             arg);
}

int docker_call_header(const struct docker_call *c, const char *name, char *out, size_t outlen)
{
	size_t nl = strlen(name);
	const char *p = c->hbuf, *eol, *v;
	int found = 0;

	if (outlen)
		out[0] = '\0';
	for (; p && *p; p = *eol ? eol + 1 : eol) {
		eol = strchr(p, '\n');
		if (!eol)
			eol = p + strlen(p);
		if ((size_t)(eol - p) <= nl || strncasecmp(p, name, nl) != 0 || p[nl] != ':')
			continue;
		v = p + nl + 1;
		while (v < eol && (*v == ' ' || *v == '\t'))
			v++;
		{
			size_t vl = (size_t)(eol - v);
			while (vl && (v[vl - 1] == '\r' || v[vl - 1] == ' '))
				vl--;
			snprintf(out, outlen, "%.*s", (int)vl, v);
		}
		found = 1; /* the last one wins */
	}
	return found;
}

void docker_cancel(struct docker_call *c)
{
	if (!c || c->cancelled)
		return;
	switch (c->state) {
	case CALL_DELIVERING:
		/* Its callback is running; the call ends when it returns. */
		return;
	case CALL_DONE:
		event_del(c->done);
		call_free(c);
		return;
	case CALL_WAITING: call_free(c); return;
	case CALL_RUNNING:
		if (in_curl) {
			c->cancelled = 1;
			c->unplug = 1;
			npending++;
			return;
		}
		curl_multi_remove_handle(multi, c->easy);
		call_free(c);
		return;
	}
}

void docker_engine_free(struct docker_engine *e)
{
	struct docker_call *c, *next;
	char why[300];

	if (!e)
		return;
	snprintf(why, sizeof(why), "docker engine '%s' was removed", e->url);
	for (c = TAILQ_FIRST(&calls); c; c = next) {
		next = TAILQ_NEXT(c, link);
		if (c->e != e)
			continue;
		fail(c, why);
		c->e = NULL;
	}
	free(e->url);
	free(e->base);
	free(e->sock);
	free(e->ca);
	free(e->cert);
	free(e->key);
	free(e);
}

int docker_calls_in_flight(void)
{
	return ncalls;
}

int docker_init(struct event_base *evbase)
{
	CURLcode r;

	if (!evbase || multi)
		return -1;
	r = curl_global_init(CURL_GLOBAL_DEFAULT);
	if (r != CURLE_OK) {
		LOG_E("docker", "cannot initialise libcurl: %s", curl_easy_strerror(r));
		return -1;
	}
	base = evbase;
	timer = evtimer_new(base, on_timer, NULL);
	multi = curl_multi_init();
	if (!timer || !multi ||
	    curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, on_curl_socket) != CURLM_OK ||
	    curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, on_curl_timer) != CURLM_OK) {
		LOG_E("docker", "cannot set up the docker client");
		if (multi)
			curl_multi_cleanup(multi);
		multi = NULL;
		if (timer)
			event_free(timer);
		timer = NULL;
		base = NULL;
		curl_global_cleanup();
		return -1;
	}
	return 0;
}

void docker_shutdown(void)
{
	struct docker_call *c, *next;
	struct sock *k;

	if (!multi)
		return;
	/* curl cannot be torn down from inside itself. */
	assert(!in_curl);
	for (c = TAILQ_FIRST(&calls); c; c = next) {
		next = TAILQ_NEXT(c, link);
		fail(c, "the docker client is shutting down");
	}
	curl_multi_cleanup(multi);
	multi = NULL;
	/* Sockets curl closed without telling us. */
	while ((k = LIST_FIRST(&socks))) {
		LIST_REMOVE(k, link);
		event_free(k->ev);
		free(k);
	}
	event_free(timer);
	timer = NULL;
	npending = 0;
	curl_global_cleanup();
	/* base stays: the completions queued above still run on it. */
}

void docker_ignore(struct docker_call *call, enum rc rc, int status, const char *body, size_t len,
                   const char *err, void *arg)
{
	(void)call;
	(void)rc;
	(void)status;
	(void)body;
	(void)len;
	(void)err;
	(void)arg;
}
