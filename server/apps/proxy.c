/* proxy.c — reverse proxy for apps in containers, one origin per route.
 *
 * Owns: recognising route origins (Host = <route>.<apps_domain>), the
 * handshake that turns a one-time ticket into a route cookie, the per-request
 * route and session check (cached for cfg.proxy_cache_ms), forwarding
 * HTTP/1.1 to the published port with hop-by-hop headers removed and
 * X-Forwarded-* set, streaming both ways with backpressure, a small idle pool
 * of upstream connections per host:port, websocket tunnels after a 101 and
 * their re-check (periodic, and at once when a NOTIFY on gc_routes says
 * an instance changed: notify.c), the "starting" / "stopped" pages, activity
 * (instances.last_activity_at, throttled) and per-route counters.
 * Does not own: making routes (database triggers), tickets (api_routes.c),
 * the instances themselves.
 *
 * Flow of one request: proxy_begin (the http layer's hook, like auth) →
 * check → upstream connection (pooled or new) → request head written →
 * http_resume: the body streams through proxy_on_body → the handler runs at
 * the end of the request → the response head and body stream back from the
 * upstream parser, which reads only while the client keeps up.
 * A preq lives until its one final reply; every path ends in finish_*().
 */
#include "apps/proxy.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/uio.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/util.h>
#include <http_parser.h>

#include "base/config.h"
#include "base/crypto.h"
#include "db/db.h"
#include "base/log.h"
#include "db/notify.h"

#define UP_HIGH        (256 * 1024) /* request bytes queued upstream before the client is paused */
#define UP_LOW         (64 * 1024)
#define CLIENT_HIGH    (1024 * 1024) /* response bytes queued to a client before the app is paused */
#define STEP           (64 * 1024)   /* upstream bytes parsed between backpressure checks */
#define TUN_HIGH       (256 * 1024)
#define TUN_LOW        (64 * 1024)
#define TUN_READ       (16 * 1024) /* bytes reserved per tunnel read */
#define IDLE_MAX       128         /* idle upstream connections kept per host:port */
#define IDLE_TIMEOUT   30          /* seconds an idle upstream connection is kept */
#define MAX_RESP_HDRS  100
#define MAX_RESP_BYTES (64 * 1024)
#define CACHE_BUCKETS  1024
#define CACHE_MAX      8192
#define RSTATS_MAX     4096
#define ACTIVITY_EVERY 5.0 /* seconds between last_activity_at updates per route */
#define HANDSHAKE_PATH "/__gpucloud/handshake"

static struct event_base *ev_base;
static int listen_port;
static struct event *recheck_timer;
/* LISTEN gc_routes (db/migrations/0012_route_notify.sql): instance changes
 * from any replica invalidate the cache and re-check tunnels at once */
static struct notify *route_notify;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- origins ---- */

const char *proxy_cookie_name(void)
{
	return cfg.tls_cert && *cfg.tls_cert ? "__Host-gc_route" : "gc_route";
}

static int tls_on(void)
{
	return cfg.tls_cert && *cfg.tls_cert;
}

/* The sign-in state cookie the route's origin sets before sending a browser
 * to the API to mint a ticket (api_routes.c binds the ticket to its hash):
 * __Host- under TLS, so no other origin can toss one in. */
const char *proxy_state_cookie_name(void)
{
	return tls_on() ? "__Host-gc_state" : "gc_state";
}

static int url_port(void)
{
	return cfg.apps_port ? cfg.apps_port : listen_port;
}

static void port_suffix(char *out, size_t outlen)
{
	int port = url_port();

	if ((tls_on() && port == 443) || (!tls_on() && port == 80) || port == 0)
		out[0] = '\0';
	else
		snprintf(out, outlen, ":%d", port);
}

void proxy_route_origin(const char *route_id, char *out, size_t outlen)
{
	char port[16];

	port_suffix(port, sizeof(port));
	snprintf(out, outlen, "%s://%s.%s%s", tls_on() ? "https" : "http", route_id,
	         cfg.apps_domain, port);
}

void proxy_api_origin(char *out, size_t outlen)
{
	char port[16];
	size_t n;

	if (cfg.public_url && *cfg.public_url) {
		snprintf(out, outlen, "%s", cfg.public_url);
		n = strlen(out);
		while (n && out[n - 1] == '/')
			out[--n] = '\0';
		return;
	}
	port_suffix(port, sizeof(port));
	snprintf(out, outlen, "%s://%s%s", tls_on() ? "https" : "http", cfg.apps_domain, port);
}

int proxy_route_id_ok(const char *s)
{
	size_t n = strlen(s);

	if (n < 16 || n > 63)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9')))
			return 0;
	return 1;
}

/* The label in front of ".<apps_domain>" of Host (port ignored, case
 * folded) into out; 1 when Host is under the apps domain at all (even with a
 * malformed label: such hosts must never reach the API), else 0. */
static int host_route(const struct http_req *r, char *out, size_t outlen)
{
	const char *host = http_header(r, "Host");
	const char *dom = cfg.apps_domain;
	size_t hlen, dlen;
	char h[256];

	out[0] = '\0';
	if (!host || !dom || !*dom)
		return 0;
	hlen = strcspn(host, ":");
	if (hlen >= sizeof(h))
		return 0;
	for (size_t i = 0; i < hlen; i++)
		h[i] = (char)tolower((unsigned char)host[i]);
	h[hlen] = '\0';
	if (hlen && h[hlen - 1] == '.')
		h[--hlen] = '\0'; /* "x.localhost." is the same name */
	dlen = strlen(dom);
	if (hlen <= dlen + 1 || h[hlen - dlen - 1] != '.' || strcasecmp(h + hlen - dlen, dom) != 0)
		return 0;
	if (hlen - dlen - 1 < outlen) {
		memcpy(out, h, hlen - dlen - 1);
		out[hlen - dlen - 1] = '\0';
	}
	return 1;
}

int proxy_match(const struct http_req *r)
{
	char id[64];

	return host_route(r, id, sizeof(id));
}

/* ---- the route check, cached ---- */

struct check {
	int found;   /* the route exists */
	int allowed; /* the cookie is a live session of this route for someone who may use it */
	long long instance_id;
	char state[16];
	char host[64];
	int port; /* 0: not published (yet) */
	char token[128];
	char port_name[64];
};

struct centry {
	char key[132]; /* route ":" cookie hash */
	struct check ck;
	double expires;
	struct centry *next;
};

static struct centry *cache[CACHE_BUCKETS];
static int ncache;
/* Bumped by every invalidation: a check answered by the database after an
 * invalidation it raced with is used once but not cached (it may predate
 * the change). */
static unsigned long cache_gen;

static unsigned hash_str(const char *s)
{
	unsigned h = 2166136261u;

	while (*s)
		h = (h ^ (unsigned char)*s++) * 16777619u;
	return h;
}

static void cache_clear(void)
{
	for (int i = 0; i < CACHE_BUCKETS; i++) {
		while (cache[i]) {
			struct centry *e = cache[i];
			cache[i] = e->next;
			free(e);
		}
	}
	ncache = 0;
}

static const struct check *cache_get(const char *key)
{
	struct centry *e = cache[hash_str(key) % CACHE_BUCKETS];
	double t = now_s();

	for (; e; e = e->next)
		if (strcmp(e->key, key) == 0)
			return e->expires > t ? &e->ck : NULL;
	return NULL;
}

static void cache_put(const char *key, const struct check *ck, unsigned long gen)
{
	unsigned b = hash_str(key) % CACHE_BUCKETS;
	struct centry *e;

	if (cfg.proxy_cache_ms <= 0 || gen != cache_gen)
		return;
	for (e = cache[b]; e; e = e->next)
		if (strcmp(e->key, key) == 0)
			break;
	if (!e) {
		if (ncache >= CACHE_MAX)
			cache_clear(); /* crude, but bounded: misses only cost a query */
		e = calloc(1, sizeof(*e));
		if (!e)
			return;
		snprintf(e->key, sizeof(e->key), "%s", key);
		e->next = cache[b];
		cache[b] = e;
		ncache++;
	}
	e->ck = *ck;
	e->expires = now_s() + cfg.proxy_cache_ms / 1000.0;
}

/* One round trip: the route, its instance and published port, and whether
 * the cookie (hash $2) is a live route session of this route whose user is
 * the owner or an admin, and whose API session or token is still live.
 * (Teachers of a class may be added here once classes exist.) */
/* Forgets every entry of instance id (all of them when id < 0). */
static void cache_drop_instance(long long id)
{
	cache_gen++;
	if (id < 0) {
		cache_clear();
		return;
	}
	for (int i = 0; i < CACHE_BUCKETS; i++) {
		struct centry **pp = &cache[i];
		while (*pp) {
			struct centry *e = *pp;
			if (e->ck.instance_id == id) {
				*pp = e->next;
				free(e);
				ncache--;
			} else {
				pp = &e->next;
			}
		}
	}
}

static const char check_sql[] =
        "SELECT i.id, i.state, i.app_token, p.host, p.host_port, r.port_name,"
        " EXISTS (SELECT 1 FROM route_sessions rs JOIN users u ON u.id = rs.user_id"
        "  LEFT JOIN sessions s ON s.id = rs.session_id"
        "  LEFT JOIN api_tokens t ON t.id = rs.token_id"
        "  WHERE rs.token_hash = $2 AND rs.route_id = r.id AND rs.expires_at > now()"
        "  AND NOT u.disabled AND (u.id = i.user_id OR u.role = 'admin')"
        "  AND ((s.id IS NOT NULL AND s.revoked_at IS NULL AND s.expires_at > now())"
        "   OR (t.id IS NOT NULL AND t.revoked_at IS NULL AND t.expires_at > now())))"
        " FROM routes r JOIN instances i ON i.id = r.instance_id"
        " LEFT JOIN instance_ports p ON p.instance_id = i.id AND p.name = r.port_name"
        " WHERE r.id = $1";

static void check_from(PGresult *res, struct check *ck)
{
	memset(ck, 0, sizeof(*ck));
	if (PQntuples(res) != 1)
		return;
	ck->found = 1;
	ck->instance_id = strtoll(db_val(res, 0, 0), NULL, 10);
	snprintf(ck->state, sizeof(ck->state), "%s", db_val(res, 0, 1));
	snprintf(ck->token, sizeof(ck->token), "%s", db_val(res, 0, 2));
	if (db_val(res, 0, 3) && db_val(res, 0, 4)) {
		snprintf(ck->host, sizeof(ck->host), "%s", db_val(res, 0, 3));
		ck->port = (int)strtol(db_val(res, 0, 4), NULL, 10);
	}
	snprintf(ck->port_name, sizeof(ck->port_name), "%s", db_val(res, 0, 5));
	ck->allowed = strcmp(db_val(res, 0, 6), "t") == 0;
}

/* ---- activity and per-route counters ---- */

struct rstat {
	char route[64];
	long long instance_id;
	unsigned long long bytes;
	time_t last_seen;
	double last_db;
};

static struct rstat rstats[RSTATS_MAX];
static int nrstats;

static struct {
	unsigned long long requests, tunnels_total, upstream_new, upstream_reused, errors, bytes;
	long long tunnels_open, idle_open;
} pstats;

/* A db_cb for the activity update: nobody waits for it, failures are only
 * logged. */
static void activity_written(PGresult *res, enum rc rc, void *arg)
{
	(void)res;
	(void)arg;
	if (rc != RC_OK)
		log_msg(LOG_WARN, "proxy", NULL, "cannot record app activity: %s", rc_code(rc));
}

static void activity(const char *route, long long instance_id, size_t bytes)
{
	unsigned b = hash_str(route) % RSTATS_MAX;
	struct rstat *s = NULL;
	double t = now_s();

	pstats.bytes += bytes;
	for (int i = 0; i < RSTATS_MAX; i++) {
		struct rstat *c = &rstats[(b + (unsigned)i) % RSTATS_MAX];
		if (!c->route[0] || strcmp(c->route, route) == 0) {
			s = c;
			break;
		}
	}
	if (!s)
		return; /* full: counters are best effort, activity is not lost for long */
	if (!s->route[0]) {
		snprintf(s->route, sizeof(s->route), "%s", route);
		nrstats++;
	}
	s->instance_id = instance_id;
	s->bytes += bytes;
	s->last_seen = time(NULL);
	if (t - s->last_db >= ACTIVITY_EVERY) {
		char id[24];
		const char *p[1] = { id };
		s->last_db = t;
		snprintf(id, sizeof(id), "%lld", instance_id);
		db_query("UPDATE instances SET last_activity_at = now() WHERE id = $1", 1, p,
		         activity_written, NULL);
	}
}

void proxy_metrics(struct evbuffer *out)
{
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
	                    pstats.requests, pstats.upstream_new, pstats.upstream_reused,
	                    pstats.idle_open, pstats.tunnels_open, pstats.errors);
	evbuffer_add_printf(out,
	                    "# HELP gpucloud_proxy_bytes_total Bytes proxied to and from apps"
	                    " (both directions, all routes).\n"
	                    "# TYPE gpucloud_proxy_bytes_total counter\n"
	                    "gpucloud_proxy_bytes_total %llu\n",
	                    pstats.bytes);
}

/* ---- upstream connections and their idle pool ---- */

struct preq;

struct upconn {
	struct bufferevent *bev;
	http_parser parser;
	struct preq *p; /* NULL while idle */
	char key[96];   /* host:port */
	int reused;
	int eof;
	int connected;
	struct upconn *next; /* idle list */
};

struct pool {
	char key[96];
	struct upconn *idle;
	int nidle;
	struct pool *next;
};

static struct pool *pools;

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

static void upconn_free(struct upconn *u)
{
	if (!u)
		return;
	if (u->bev)
		bufferevent_free(u->bev);
	free(u);
}

static void pool_unlink(struct upconn *u)
{
	struct pool *pl = pool_get(u->key, 0);
	struct upconn **pp;

	if (!pl)
		return;
	for (pp = &pl->idle; *pp; pp = &(*pp)->next)
		if (*pp == u) {
			*pp = u->next;
			pl->nidle--;
			pstats.idle_open--;
			return;
		}
}

static void idle_read(struct bufferevent *bev, void *arg)
{
	struct upconn *u = arg;

	(void)bev;
	/* an idle connection has nothing to say: anything is a protocol error */
	pool_unlink(u);
	upconn_free(u);
}

static void idle_event(struct bufferevent *bev, short what, void *arg)
{
	struct upconn *u = arg;

	(void)bev;
	(void)what;
	pool_unlink(u); /* closed by the app, or idle too long */
	upconn_free(u);
}

static void pool_put(struct upconn *u)
{
	struct pool *pl = pool_get(u->key, 1);
	struct timeval tv = { IDLE_TIMEOUT, 0 };

	if (!pl || pl->nidle >= IDLE_MAX || evbuffer_get_length(bufferevent_get_input(u->bev))) {
		upconn_free(u);
		return;
	}
	u->p = NULL;
	u->next = pl->idle;
	pl->idle = u;
	pl->nidle++;
	pstats.idle_open++;
	bufferevent_setcb(u->bev, idle_read, NULL, idle_event, u);
	bufferevent_setwatermark(u->bev, EV_READ | EV_WRITE, 0, 0);
	bufferevent_set_timeouts(u->bev, &tv, NULL);
	bufferevent_disable(u->bev, EV_WRITE);
	bufferevent_enable(u->bev, EV_READ);
}

static struct upconn *pool_take(const char *key)
{
	struct pool *pl = pool_get(key, 0);
	struct upconn *u;

	if (!pl || !pl->idle)
		return NULL;
	u = pl->idle;
	pl->idle = u->next;
	pl->nidle--;
	pstats.idle_open--;
	u->next = NULL;
	u->reused = 1;
	return u;
}

/* ---- proxied requests ---- */

struct preq {
	struct http_req *r;
	struct upconn *u;
	char route[64];
	char cookie_hash[65];
	struct check ck;
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
	unsigned long gen; /* cache_gen when the check was sent */
	int head_only;     /* HEAD: the response has no body */
	int status;
	uint64_t body_left; /* a Content-Length body still to move (not parsed) */
	struct http_header rh[MAX_RESP_HDRS];
	int nrh;
	size_t rh_bytes;
	int rh_last_value;
	int rh_overflow;
};

static void preq_free(struct preq *p)
{
	if (!p)
		return;
	for (int i = 0; i < p->nrh; i++) {
		free(p->rh[i].name);
		free(p->rh[i].value);
	}
	if (p->head)
		evbuffer_free(p->head);
	free(p);
}

static void resp_headers_clear(struct preq *p)
{
	for (int i = 0; i < p->nrh; i++) {
		free(p->rh[i].name);
		free(p->rh[i].value);
	}
	p->nrh = 0;
	p->rh_bytes = 0;
	p->rh_last_value = 0;
}

/* Detaches and frees p's upstream connection (keep: back to the pool). */
static void drop_upstream(struct preq *p, int keep)
{
	struct upconn *u = p->u;

	if (!u)
		return;
	p->u = NULL;
	u->p = NULL;
	if (keep)
		pool_put(u);
	else
		upconn_free(u);
}

static int wants_html(const struct http_req *r)
{
	const char *accept = http_header(r, "Accept");

	return (r->method == HTTP_GET || r->method == HTTP_HEAD) && accept &&
	       strstr(accept, "text/html");
}

static void html_escape(const char *s, char *out, size_t outlen)
{
	size_t o = 0;

	for (; *s && o + 7 < outlen; s++) {
		const char *e = *s == '<'   ? "&lt;"
		                : *s == '>' ? "&gt;"
		                : *s == '&' ? "&amp;"
		                : *s == '"' ? "&quot;"
		                            : NULL;
		if (e) {
			memcpy(out + o, e, strlen(e));
			o += strlen(e);
		} else {
			out[o++] = *s;
		}
	}
	out[o] = '\0';
}

static const char *app_title(const char *port_name)
{
	if (strcmp(port_name, "jupyter") == 0)
		return "Jupyter";
	if (strcmp(port_name, "tensorboard") == 0)
		return "TensorBoard";
	return port_name[0] ? port_name : "The app";
}

/* The final reply of p (frees p): a page for browsers, the JSON error shape
 * for everyone else.  retry > 0: the page reloads itself (Retry-After). */
static void finish_page(struct preq *p, int status, const char *code, const char *title,
                        const char *message, const char *hint, int retry)
{
	struct http_req *r = p->r;
	char t[256], m[1024], ra[16];

	drop_upstream(p, 0);
	preq_free(p);
	if (retry > 0) {
		snprintf(ra, sizeof(ra), "%d", retry);
		http_add_header(r, "Retry-After", ra);
	}
	http_add_header(r, "Cache-Control", "no-store");
	if (wants_html(r)) {
		struct evbuffer *b = evbuffer_new();
		if (!b) {
			http_reply(r, status, "text/plain", message, strlen(message));
			return;
		}
		html_escape(title, t, sizeof(t));
		html_escape(message, m, sizeof(m));
		evbuffer_add_printf(
		        b,
		        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
		        "<meta name=\"viewport\" content=\"width=device-width\">%s%d%s"
		        "<title>%s</title><style>body{font:16px system-ui,sans-serif;margin:4rem "
		        "auto;"
		        "max-width:36rem;padding:0 1rem;color:#222}p{color:#555}</style></head>"
		        "<body><h1 data-proxy-status=\"%d\">%s</h1><p>%s</p>%s</body></html>\n",
		        retry > 0 ? "<meta http-equiv=\"refresh\" content=\"" : "",
		        retry > 0 ? retry : 0, retry > 0 ? "\">" : "", t, status, t, m,
		        retry > 0 ? "<p>This page reloads by itself.</p>" : "");
		http_reply_evbuffer(r, status, "text/html; charset=utf-8", b);
		evbuffer_free(b);
		return;
	}
	{
		json_t *err = json_pack("{s:s, s:s}", "code", code, "message", message);
		if (err && hint)
			json_object_set_new(err, "hint", json_string(hint));
		http_reply_json(r, status, err ? json_pack("{s:o}", "error", err) : NULL);
	}
}

static void pct_encode(const char *s, char *out, size_t outlen)
{
	size_t o = 0;

	for (; *s && o + 4 < outlen; s++) {
		unsigned char ch = (unsigned char)*s;
		if (isalnum(ch) || strchr("-._~/", ch))
			out[o++] = (char)ch;
		else
			o += (size_t)snprintf(out + o, outlen - o, "%%%02X", ch);
	}
	out[o] = '\0';
}

/* Not logged in to this route: browsers get a fresh random sign-in state
 * cookie on this origin and go to the API origin's page
 * #/login?open=<route>&state=<sha256 of the state>&path=<where to come
 * back>, which (signed in) POSTs /routes/{id}/open with that state and
 * follows the ticket back to the handshake; API clients get 401. */
static void finish_unauthenticated(struct preq *p)
{
	struct http_req *r = p->r;
	char api[512], next[256], path[8192 * 3], state[64], shash[65], set[256];
	char loc[512 + sizeof(path) + 256];

	if (!wants_html(r) || r->method != HTTP_GET) {
		snprintf(next, sizeof(next),
		         "POST /api/v1/routes/%s/open with a state, then follow the URL", p->route);
		finish_page(p, 401, "unauthorized", "Not signed in",
		            "open this app through gpucloud first", next, 0);
		return;
	}
	if (crypto_token(state, sizeof(state), 32) < 0) {
		finish_page(p, 503, "unavailable", "Busy", "out of memory", NULL, 2);
		return;
	}
	crypto_sha256_hex(state, strlen(state), shash);
	proxy_api_origin(api, sizeof(api));
	pct_encode(r->url, path, sizeof(path));
	snprintf(loc, sizeof(loc), "%s/#/login?open=%s&state=%s&path=%s", api, p->route, shash,
	         path);
	snprintf(set, sizeof(set), "%s=%s; Path=/; HttpOnly; SameSite=Lax; Max-Age=600%s",
	         proxy_state_cookie_name(), state, tls_on() ? "; Secure" : "");
	drop_upstream(p, 0);
	preq_free(p);
	http_add_header(r, "Set-Cookie", set);
	http_add_header(r, "Location", loc);
	http_add_header(r, "Cache-Control", "no-store");
	http_add_header(r, "Referrer-Policy", "no-referrer");
	http_reply(r, 302, "text/plain", "sign in first\n", 14);
}

/* ---- cross-origin requests ----
 *
 * Why: the proxy authenticates every request to the app with the app's own
 * token (Authorization: token ...), so apps such as Jupyter believe each
 * request is token-authenticated and skip their own CSRF and websocket-
 * Origin checks.  All <route>.<apps_domain> origins are same-site with each
 * other on a real apps domain, so the route cookie (SameSite=Lax) rides
 * along on requests that another route's page makes: an attacker's app on
 * route A, open in the victim's browser, could POST to the victim's route B
 * or open its websockets (a shell).  The rule, as an attacker would probe it:
 *
 *  - Unsafe methods (anything but GET, HEAD, OPTIONS) and websocket
 *    upgrades: an Origin header must be this route's own origin
 *    (cfg scheme://<route>.<apps_domain>[:port]); "null" and every other
 *    origin are refused.  A Sec-Fetch-Site header, when present, must be
 *    "same-origin".  Without Origin, a Referer, when present, must be on
 *    this origin.  Browsers send Origin on every websocket handshake and on
 *    every cross-origin POST, and Sec-Fetch-Site on every request, so only
 *    a non-browser client (curl, a script holding its own route cookie)
 *    sends none of them; it cannot be driven by a web page and is let
 *    through.
 *  - Safe methods: a CORS request from another origin (an Origin header
 *    that is not ours) and a subresource request another site or route
 *    makes (Sec-Fetch-Site same-site or cross-site, Sec-Fetch-Mode not
 *    "navigate") are refused too, so no other route's page can read or
 *    trigger GET side effects of this one (resource isolation).  Top-level
 *    navigations (links from the gpucloud UI, the handshake) carry no
 *    Origin and pass.
 * Browsers send Sec-Fetch-* only to https (and localhost) origins, so on a
 * plain-http apps domain the Origin rule is what holds; both are checked. 
 * Refusals are 403 with the JSON error shape. */
static int same_origin(const char *v, const char *own)
{
	size_t n = strlen(own);

	return strncmp(v, own, n) == 0 && (v[n] == '\0' || v[n] == '/');
}

/* NULL when r may reach route; else why not. */
static const char *cross_origin_refusal(const struct http_req *r, const char *route, int upgrade)
{
	const char *origin = http_header(r, "Origin");
	const char *site = http_header(r, "Sec-Fetch-Site");
	const char *mode = http_header(r, "Sec-Fetch-Mode");
	const char *referer = http_header(r, "Referer");
	int unsafe = upgrade || !(r->method == HTTP_GET || r->method == HTTP_HEAD ||
	                          r->method == HTTP_OPTIONS);
	char own[512];

	proxy_route_origin(route, own, sizeof(own));
	if (unsafe) {
		if (origin && strcmp(origin, own) != 0)
			return "request origin is not this app's own origin";
		if (site && strcmp(site, "same-origin") != 0)
			return "cross-site requests may not change an app or open its websockets";
		if (!origin && referer && !same_origin(referer, own))
			return "request referer is not this app's own origin";
		return NULL;
	}
	if (origin && strcmp(origin, own) != 0)
		return "another site may not read this app"; /* a CORS read */
	if (site && (strcmp(site, "same-site") == 0 || strcmp(site, "cross-site") == 0) &&
	    (!mode || strcmp(mode, "navigate") != 0))
		return "another site may not load this app's resources";
	return NULL;
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

static int up_header_field(http_parser *hp, const char *at, size_t len)
{
	struct upconn *u = hp->data;
	struct preq *p = u->p;
	char **dst;
	size_t old;

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
		p->rh[p->nrh].name = NULL;
		p->rh[p->nrh].value = NULL;
		p->nrh++;
		p->rh_last_value = 0;
	}
	dst = &p->rh[p->nrh - 1].name;
	old = *dst ? strlen(*dst) : 0;
	{
		char *n = realloc(*dst, old + len + 1);
		if (!n)
			return 1;
		memcpy(n + old, at, len);
		n[old + len] = '\0';
		*dst = n;
	}
	return 0;
}

static int up_header_value(http_parser *hp, const char *at, size_t len)
{
	struct upconn *u = hp->data;
	struct preq *p = u->p;
	char **dst;
	size_t old;

	if (!p || p->nrh == 0)
		return 1;
	p->rh_bytes += len;
	if (p->rh_bytes > MAX_RESP_BYTES)
		return 1;
	p->rh_last_value = 1;
	dst = &p->rh[p->nrh - 1].value;
	old = *dst ? strlen(*dst) : 0;
	{
		char *n = realloc(*dst, old + len + 1);
		if (!n)
			return 1;
		memcpy(n + old, at, len);
		n[old + len] = '\0';
		*dst = n;
	}
	return 0;
}

/* Is name listed in a Connection header among hdrs? */
static int listed_in_connection(const struct http_header *h, int n, const char *name)
{
	size_t nlen = strlen(name);

	for (int i = 0; i < n; i++) {
		const char *v = h[i].value;
		if (!h[i].name || !v || strcasecmp(h[i].name, "Connection") != 0)
			continue;
		while (*v) {
			size_t len;
			while (*v == ' ' || *v == ',' || *v == '\t')
				v++;
			len = strcspn(v, ", \t");
			if (len == nlen && strncasecmp(v, name, nlen) == 0)
				return 1;
			v += len;
		}
	}
	return 0;
}

static int hop_by_hop(const char *name)
{
	static const char *const hop[] = { "Connection",
		                           "Keep-Alive",
		                           "Proxy-Connection",
		                           "TE",
		                           "Trailer",
		                           "Transfer-Encoding",
		                           "Upgrade",
		                           "Proxy-Authenticate",
		                           "Proxy-Authorization",
		                           NULL };

	for (int i = 0; hop[i]; i++)
		if (strcasecmp(name, hop[i]) == 0)
			return 1;
	return 0;
}

static int header_value_ok(const char *v)
{
	return v && !strpbrk(v, "\r\n");
}

/* 1 when an app's Set-Cookie value may reach the browser: host-only
 * cookies only.  A Domain attribute would toss the cookie onto every other
 * route (and the API) under a parent domain; a cookie named like
 * gpucloud's own (gc_*, with or without a __Host-/__Secure- prefix) could
 * shadow the route cookie or the sign-in state.  (Browsers themselves drop
 * __Host-/__Secure- cookies that break their prefix rules.) */
int proxy_set_cookie_ok(const char *v)
{
	const char *name = v, *a;
	size_t nlen;

	while (*name == ' ' || *name == '\t')
		name++;
	nlen = strcspn(name, "=;");
	if (name[nlen] != '=' || nlen == 0)
		return 0; /* not a cookie at all */
	{
		const char *n = name;
		size_t l = nlen;
		if (l > 7 && strncasecmp(n, "__Host-", 7) == 0) {
			n += 7;
			l -= 7;
		} else if (l > 9 && strncasecmp(n, "__Secure-", 9) == 0) {
			n += 9;
			l -= 9;
		}
		if (l >= 3 && strncasecmp(n, "gc_", 3) == 0)
			return 0;
	}
	for (a = strchr(name, ';'); a; a = strchr(a + 1, ';')) {
		const char *k = a + 1;
		while (*k == ' ' || *k == '\t')
			k++;
		if (strncasecmp(k, "domain", 6) == 0) {
			const char *e = k + 6;
			while (*e == ' ' || *e == '\t')
				e++;
			if (*e == '=' || *e == ';' || *e == '\0')
				return 0;
		}
	}
	return 1;
}

static int up_headers_complete(http_parser *hp)
{
	struct upconn *u = hp->data;
	struct preq *p = u->p;
	struct http_req *r;
	int64_t length;

	if (!p)
		return -1;
	r = p->r;
	p->status = hp->status_code;
	if (p->status < 200)
		return 0; /* 1xx: 101 is handled at message end, others are dropped */
	for (int i = 0; i < p->nrh; i++) {
		const char *n = p->rh[i].name, *v = p->rh[i].value;
		if (!n || !header_value_ok(v) || hop_by_hop(n) ||
		    listed_in_connection(p->rh, p->nrh, n) ||
		    strcasecmp(n, "Content-Length") == 0 || strcasecmp(n, "Date") == 0 ||
		    strcasecmp(n, "X-Request-Id") == 0 ||
		    (strcasecmp(n, "Set-Cookie") == 0 && !proxy_set_cookie_ok(v)))
			continue;
		http_add_header(r, n, v);
	}
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
	struct upconn *u = hp->data;
	struct preq *p = u->p;

	if (!p)
		return -1;
	activity(p->route, p->ck.instance_id, len);
	http_stream_write(p->r, at, len);
	return 0;
}

static int up_message_complete(http_parser *hp)
{
	struct upconn *u = hp->data;
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
		pstats.errors++;
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
	pstats.errors++;
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
	if (p->u)
		bufferevent_enable(p->u->bev, EV_READ);
	up_drive(p);
}

/* Parses what the app sent, as far as the client keeps up. */
static void up_drive(struct preq *p)
{
	while (p->u && p->msg_done) {
		struct upconn *u = p->u;
		struct evbuffer *in = bufferevent_get_input(u->bev);
		struct evbuffer_iovec v;
		size_t n, nparsed;
		enum http_errno e;

		if (p->head_sent && http_stream_backlog(p->r) > CLIENT_HIGH) {
			/* the client is slower than the app: stop reading the app */
			bufferevent_disable(u->bev, EV_READ);
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
			activity(p->route, p->ck.instance_id, n);
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

/* libevent reads at most 4 KiB per wakeup; a big response wants more:
 * reads straight into the input buffer, up to max bytes.  0 ok (or would
 * block), 1 end of stream, -1 error. */
static int up_fill(struct upconn *u, size_t max)
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
		int nv = evbuffer_reserve_space(in, STEP, v, 2), used = 0;
		ssize_t n;
		size_t left;

		if (nv <= 0) {
			rc = -1;
			break;
		}
		n = readv(fd, (struct iovec *)v, nv);
		if (n <= 0) {
			evbuffer_commit_space(in, v, 0);
			if (n == 0)
				rc = 1;
			else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
				rc = -1;
			break;
		}
		for (left = (size_t)n; used < nv && left; used++) {
			if (v[used].iov_len > left)
				v[used].iov_len = left;
			left -= v[used].iov_len;
		}
		evbuffer_commit_space(in, v, used);
		got += (size_t)n;
		if ((size_t)n < STEP)
			break; /* drained */
	}
	evbuffer_freeze(in, 0);
	return rc;
}

static void up_read(struct bufferevent *bev, void *arg)
{
	struct upconn *u = arg;
	struct preq *p = u->p;

	if (!p)
		return;
	if (p->msg_done && !u->eof && (!p->head_sent || http_stream_backlog(p->r) < CLIENT_HIGH)) {
		int rc = up_fill(u, CLIENT_HIGH);
		if (rc == 1) {
			u->eof = 1;
			bufferevent_disable(bev, EV_READ);
		} else if (rc < 0) {
			up_failed(p, "read failed", 0);
			return;
		}
	}
	up_drive(p);
}

static void up_write(struct bufferevent *bev, void *arg)
{
	struct upconn *u = arg;
	struct preq *p = u->p;

	if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
		bufferevent_disable(bev, EV_WRITE); /* up_flush writes directly again */
	if (p && p->body_paused) {
		p->body_paused = 0;
		http_body_resume(p->r);
	}
}

static void up_event(struct bufferevent *bev, short what, void *arg)
{
	struct upconn *u = arg;
	struct preq *p = u->p;
	struct timeval rt = { cfg.proxy_timeout, 0 };

	if (what & BEV_EVENT_CONNECTED) {
		int one = 1;
		u->connected = 1;
		setsockopt(bufferevent_getfd(bev), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		bufferevent_set_timeouts(bev, &rt, &rt);
		if (p && !p->msg_done)
			http_resume(p->r); /* now the body may flow */
		return;
	}
	if (!p) {
		upconn_free(u);
		return;
	}
	if ((what & BEV_EVENT_EOF) && !(what & BEV_EVENT_ERROR)) {
		u->eof = 1;
		bufferevent_disable(bev, EV_READ);
		if (p->msg_done) {
			up_drive(p);
		} else if (!p->msg_done && http_req_alive(p->r)) {
			/* the app hung up while the request was still coming: the
			 * answer it may have sent is read once the request is done */
		}
		return;
	}
	if (what & BEV_EVENT_TIMEOUT) {
		up_failed(p, "timed out", 1);
		return;
	}
	up_failed(p, evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()), 0);
}

/* Writes out to fd now.  A socket bufferevent keeps its output's start
 * frozen outside its own writes (evbuffer_write would fail without
 * writing): thaw it for this one write. */
static void write_now(struct evbuffer *out, evutil_socket_t fd)
{
	evbuffer_unfreeze(out, 1);
	evbuffer_write(out, fd); /* errors surface on the next read or write */
	evbuffer_freeze(out, 1);
}

/* Writes what is queued for the app now when its socket takes it; only
 * the rest waits for EV_WRITE (saves two epoll registrations a request). */
static void up_flush(struct upconn *u)
{
	struct evbuffer *out = bufferevent_get_output(u->bev);

	if (evbuffer_get_length(out) == 0)
		return;
	if (u->connected && !(bufferevent_get_enabled(u->bev) & EV_WRITE))
		write_now(out, bufferevent_getfd(u->bev));
	if (evbuffer_get_length(out))
		bufferevent_enable(u->bev, EV_WRITE);
}

/* Writes p->head and points the connection at p. */
static void attach(struct preq *p, struct upconn *u)
{
	struct timeval rt = { cfg.proxy_timeout, 0 };

	p->u = u;
	u->p = p;
	u->eof = 0;
	http_parser_init(&u->parser, HTTP_RESPONSE);
	u->parser.data = u;
	bufferevent_setcb(u->bev, up_read, up_write, up_event, u);
	bufferevent_setwatermark(u->bev, EV_READ, 0, 256 * 1024);
	bufferevent_setwatermark(u->bev, EV_WRITE, UP_LOW, 0);
	bufferevent_set_max_single_read(u->bev, 256 * 1024);
	evbuffer_add(bufferevent_get_output(u->bev), evbuffer_pullup(p->head, -1),
	             evbuffer_get_length(p->head));
	if (u->reused)
		bufferevent_set_timeouts(u->bev, &rt, &rt);
	if (u->connected) {
		bufferevent_enable(u->bev, EV_READ);
		up_flush(u);
	} else {
		bufferevent_enable(u->bev, EV_READ | EV_WRITE); /* connecting */
	}
}

static void connect_upstream(struct preq *p)
{
	char key[96];
	struct upconn *u;
	struct sockaddr_storage ss;
	int sslen = sizeof(ss);
	struct timeval ct = { cfg.proxy_connect_timeout, 0 };

	snprintf(key, sizeof(key), "%s:%d", p->ck.host, p->ck.port);
	if (!p->retried && (u = pool_take(key)) != NULL) {
		pstats.upstream_reused++;
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
	u = calloc(1, sizeof(*u));
	if (!u || !(u->bev = bufferevent_socket_new(ev_base, -1, BEV_OPT_CLOSE_ON_FREE))) {
		free(u);
		finish_page(p, 503, "unavailable", "Busy", "out of memory", NULL, 2);
		return;
	}
	snprintf(u->key, sizeof(u->key), "%s", key);
	pstats.upstream_new++;
	attach(p, u);
	/* while connecting, the write timeout is the connect timeout */
	bufferevent_set_timeouts(u->bev, NULL, &ct);
	if (bufferevent_socket_connect(u->bev, (struct sockaddr *)&ss, sslen) < 0) {
		up_failed(p, "connect failed", 0);
		return;
	}
}

/* ---- the request head for the app ---- */

static int is_our_cookie(const char *name, size_t len)
{
	static const char *const ours[] = { "gc_session", "__Host-gc_session",
		                            "gc_route",   "__Host-gc_route",
		                            "gc_state",   "__Host-gc_state",
		                            NULL };

	for (int i = 0; ours[i]; i++)
		if (strlen(ours[i]) == len && strncmp(name, ours[i], len) == 0)
			return 1;
	return 0;
}

/* The Cookie headers of r without gpucloud's own cookies, joined. */
static void app_cookies(const struct http_req *r, struct evbuffer *out)
{
	int first = 1;

	for (int i = 0; i < r->nhdr; i++) {
		const char *v = r->hdr[i].value;
		if (strcasecmp(r->hdr[i].name, "Cookie") != 0)
			continue;
		while (v && *v) {
			size_t len, nlen;
			while (*v == ' ' || *v == ';')
				v++;
			len = strcspn(v, ";");
			nlen = strcspn(v, "=");
			if (nlen > len)
				nlen = len;
			while (nlen && v[nlen - 1] == ' ')
				nlen--;
			if (len && !is_our_cookie(v, nlen)) {
				if (first)
					evbuffer_add_printf(out, "Cookie: ");
				else
					evbuffer_add(out, "; ", 2);
				evbuffer_add(out, v, len);
				first = 0;
			}
			v += len;
		}
	}
	if (!first)
		evbuffer_add(out, "\r\n", 2);
}

static int build_head(struct preq *p)
{
	struct http_req *r = p->r;
	struct evbuffer *h = evbuffer_new();
	const char *host = http_header(r, "Host");

	if (!h)
		return -1;
	evbuffer_add_printf(h, "%s %s HTTP/1.1\r\n", http_method_str((enum http_method)r->method),
	                    r->url);
	for (int i = 0; i < r->nhdr; i++) {
		const char *n = r->hdr[i].name;
		if (hop_by_hop(n) || listed_in_connection(r->hdr, r->nhdr, n) ||
		    strcasecmp(n, "Content-Length") == 0 || strcasecmp(n, "Authorization") == 0 ||
		    strcasecmp(n, "Cookie") == 0 || strcasecmp(n, "Expect") == 0 ||
		    strcasecmp(n, "Forwarded") == 0 || strncasecmp(n, "X-Forwarded-", 12) == 0 ||
		    strcasecmp(n, "X-Real-IP") == 0 || strncasecmp(n, "Proxy-", 6) == 0 ||
		    !header_value_ok(r->hdr[i].value))
			continue; /* (a folded value with a line break is never passed on) */
		evbuffer_add_printf(h, "%s: %s\r\n", n, r->hdr[i].value);
	}
	if (!host)
		evbuffer_add_printf(h, "Host: %s.%s\r\n", p->route, cfg.apps_domain);
	app_cookies(r, h);
	evbuffer_add_printf(h,
	                    "Authorization: token %s\r\nX-Forwarded-For: %s\r\n"
	                    "X-Forwarded-Proto: %s\r\nX-Forwarded-Host: %s\r\n",
	                    p->ck.token, r->peer, r->tls ? "https" : "http", host ? host : "");
	if (p->websocket)
		evbuffer_add_printf(h, "Connection: Upgrade\r\nUpgrade: websocket\r\n");
	if (r->content_length >= 0) {
		evbuffer_add_printf(h, "Content-Length: %lld\r\n", (long long)r->content_length);
		p->has_body = r->content_length > 0;
	} else if (p->chunked) {
		evbuffer_add_printf(h, "Transfer-Encoding: chunked\r\n");
		p->has_body = 1;
	}
	evbuffer_add(h, "\r\n", 2);
	p->head = h;
	return 0;
}

/* ---- request phases ---- */

static int is_websocket(const struct http_req *r)
{
	const char *up = http_header(r, "Upgrade");

	return r->method == HTTP_GET && up && strcasecmp(up, "websocket") == 0 &&
	       listed_in_connection(r->hdr, r->nhdr, "upgrade");
}

static void checked(struct preq *p)
{
	struct http_req *r = p->r;
	const struct check *ck = &p->ck;

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
		snprintf(title, sizeof(title), "%s is starting…", app_title(ck->port_name));
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
	pstats.requests++;
	http_req_on_close(r, on_client_close, p);
	connect_upstream(p);
}

static void check_done(PGresult *res, enum rc rc, void *arg)
{
	struct preq *p = arg;
	char key[132];

	if (rc != RC_OK) {
		if (!http_req_alive(p->r)) {
			finish_gone(p);
			return;
		}
		finish_page(p, 503, "unavailable", "Try again",
		            "cannot check this app's session now", "retry in a few seconds", 2);
		return;
	}
	check_from(res, &p->ck);
	snprintf(key, sizeof(key), "%s:%s", p->route, p->cookie_hash);
	cache_put(key, &p->ck, p->gen);
	checked(p);
}

/* The value of cookie name in r into out ("" when absent); returns how many
 * cookies of that name r carries (more than one: someone tossed one in). */
static int cookie_value(const struct http_req *r, const char *name, char *out, size_t outlen)
{
	size_t nlen = strlen(name);
	int count = 0;

	out[0] = '\0';
	for (int i = 0; i < r->nhdr; i++) {
		const char *v = r->hdr[i].value;
		if (strcasecmp(r->hdr[i].name, "Cookie") != 0)
			continue;
		while (v && *v) {
			size_t len;
			while (*v == ' ' || *v == ';')
				v++;
			len = strcspn(v, ";");
			if (len > nlen && strncmp(v, name, nlen) == 0 && v[nlen] == '=') {
				if (!count++ && len - nlen - 1 < outlen) {
					memcpy(out, v + nlen + 1, len - nlen - 1);
					out[len - nlen - 1] = '\0';
				}
			}
			v += len;
		}
	}
	return count;
}

/* The value of the route cookie, or "" */
static void route_cookie(const struct http_req *r, char *out, size_t outlen)
{
	cookie_value(r, proxy_cookie_name(), out, outlen);
}

/* ---- the handshake: ticket → route cookie ---- */

struct hs {
	struct preq *p;
	char cookie[64];
};

static int local_path_ok(const char *s)
{
	/* a path on this origin: no scheme, no "//host", no backslash tricks */
	if (!s || s[0] != '/' || s[1] == '/' || s[1] == '\\')
		return 0;
	for (; *s; s++)
		if ((unsigned char)*s < 0x21 || *s == '\\' || (unsigned char)*s >= 0x7f)
			return 0;
	return 1;
}

static void handshake_done(PGresult *res, enum rc rc, void *arg)
{
	struct hs *h = arg;
	struct preq *p = h->p;
	struct http_req *r = p->r;
	char set[512];
	const char *path;

	if (rc != RC_OK) {
		free(h);
		finish_page(p, 503, "unavailable", "Try again", "cannot open this app now",
		            "retry in a few seconds", 2);
		return;
	}
	if (PQntuples(res) != 1) {
		free(h);
		finish_page(p, 403, "forbidden", "This link has expired",
		            "the sign-in link was already used, has expired or was made for "
		            "another browser",
		            "open the app again from gpucloud", 0);
		return;
	}
	path = db_val(res, 0, 0);
	snprintf(set, sizeof(set), "%s=%s; Path=/; HttpOnly; SameSite=Lax; Max-Age=%d%s",
	         proxy_cookie_name(), h->cookie, cfg.route_session_ttl, tls_on() ? "; Secure" : "");
	free(h);
	http_add_header(r, "Set-Cookie", set);
	snprintf(set, sizeof(set), "%s=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0%s",
	         proxy_state_cookie_name(), tls_on() ? "; Secure" : "");
	http_add_header(r, "Set-Cookie", set);
	http_add_header(r, "Location", local_path_ok(path) ? path : "/");
	http_add_header(r, "Cache-Control", "no-store");
	http_add_header(r, "Referrer-Policy", "no-referrer");
	preq_free(p);
	http_reply(r, 302, "text/plain", "signed in\n", 10);
}

static void handshake(struct preq *p)
{
	struct http_req *r = p->r;
	char ticket[128], thash[65], chash[65], ttl[24], state[128], shash[65];
	struct hs *h;
	const char *params[5];

	if (r->method != HTTP_GET) {
		finish_page(p, 405, "method_not_allowed", "Method not allowed",
		            "the handshake is a GET", NULL, 0);
		return;
	}
	if (http_query(r, "ticket", ticket, sizeof(ticket)) <= 0) {
		finish_page(p, 400, "invalid", "Bad link", "the sign-in link has no valid ticket",
		            "open the app again from gpucloud", 0);
		return;
	}
	h = calloc(1, sizeof(*h));
	if (!h || crypto_token(h->cookie, sizeof(h->cookie), 32) < 0) {
		free(h);
		finish_page(p, 503, "unavailable", "Busy", "out of memory", NULL, 2);
		return;
	}
	h->p = p;
	crypto_sha256_hex(ticket, strlen(ticket), thash);
	crypto_sha256_hex(h->cookie, strlen(h->cookie), chash);
	snprintf(ttl, sizeof(ttl), "%d", cfg.route_session_ttl);
	params[0] = thash;
	params[1] = p->route;
	params[2] = chash;
	params[3] = ttl;
	/* the browser that asked for the ticket holds the state cookie whose
	 * hash the ticket carries; exactly one (two: one was tossed in from a
	 * parent domain) */
	if (cookie_value(r, proxy_state_cookie_name(), state, sizeof(state)) == 1 && state[0]) {
		crypto_sha256_hex(state, strlen(state), shash);
		params[4] = shash;
	} else {
		params[4] = NULL;
	}
	/* spend the ticket and make the session in one statement: a ticket
	 * works once, on its own route only, within its lifetime, in the
	 * browser it was minted for; a ticket presented without its state is
	 * spent all the same (it was seen by the wrong browser) */
	db_query("WITH t AS (DELETE FROM route_tickets WHERE token_hash = $1 AND route_id = $2"
	         "  AND expires_at > now() RETURNING *)"
	         " INSERT INTO route_sessions (token_hash, route_id, user_id, session_id, token_id,"
	         "  expires_at)"
	         " SELECT $3, t.route_id, t.user_id, t.session_id, t.token_id,"
	         "  now() + make_interval(secs => $4::int) FROM t WHERE t.state_hash = $5"
	         " RETURNING (SELECT path FROM t)",
	         5, params, handshake_done, h);
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

void proxy_begin(struct http_req *r)
{
	struct preq *p = calloc(1, sizeof(*p));
	char cookie[128], key[132];
	const struct check *ck;

	if (!p) {
		http_reply_error(r, RC_NOMEM, NULL, "out of memory");
		return;
	}
	p->r = r;
	r->data = p; /* owned here, freed by the final reply's path (data_free stays NULL) */
	host_route(r, p->route, sizeof(p->route));
	if (!proxy_route_id_ok(p->route)) {
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
		const char *why = cross_origin_refusal(r, p->route,
		                                       p->websocket || http_header(r, "Upgrade"));
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
	if (strcmp(r->path, HANDSHAKE_PATH) == 0) {
		handshake(p);
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
	snprintf(key, sizeof(key), "%s:%s", p->route, p->cookie_hash);
	ck = cache_get(key);
	if (ck) {
		p->ck = *ck;
		checked(p);
		return;
	}
	{
		const char *params[2] = { p->route, p->cookie_hash };
		p->gen = cache_gen;
		db_query(check_sql, 2, params, check_done, p);
	}
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
	activity(p->route, p->ck.instance_id, len);
	up_flush(p->u);
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
	if (p->chunked) {
		evbuffer_add(bufferevent_get_output(p->u->bev), "0\r\n\r\n", 5);
		up_flush(p->u);
	}
	up_drive(p);
}

const struct route proxy_route = {
	.method = HTTP_GET,
	.pattern = "(proxy)",
	.handler = proxy_handler,
	.roles = ROLES_PUBLIC,
	.flags = ROUTE_STREAM | ROUTE_RAW_BODY,
	.max_body = (int64_t)1 << 40,
	.on_body = proxy_on_body,
};

/* ---- websocket tunnels ---- */

struct tunnel {
	struct bufferevent *c, *u; /* client, app; NULL once that side closed */
	/* Plain sockets are read by these events, straight into the other
	 * side's output (libevent's own read asks FIONREAD first and copies
	 * through the input buffer: a syscall and a copy per message).  NULL
	 * for a TLS side, which its bufferevent reads. */
	struct event *rc, *ru;
	char route[64];
	char cookie_hash[65];
	long long instance_id;
	int closing; /* one side closed: flush the other, then close */
	struct tunnel *prev, *next;
};

static struct tunnel *tunnels;

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
	pstats.tunnels_open--;
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
		write_now(out, bufferevent_getfd(dst));
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
		activity(t->route, t->instance_id, n);
	tun_flush(dst);
	if (evbuffer_get_length(bufferevent_get_output(dst)) >= TUN_HIGH)
		tun_pause(t, bev); /* resumed when dst drains */
}

static void tun_event(struct bufferevent *bev, short what, void *arg);

/* A plain side is readable: read into the other side's output (up to
 * TUN_HIGH a wakeup), then write that out at once. */
static void tun_raw_read(struct tunnel *t, struct bufferevent *bev)
{
	struct bufferevent *dst = tun_other(t, bev);
	evutil_socket_t fd = bufferevent_getfd(bev);
	struct evbuffer *out;
	size_t got = 0;

	if (!dst) {
		tun_pause(t, bev);
		return;
	}
	out = bufferevent_get_output(dst);
	while (got < TUN_HIGH) {
		struct evbuffer_iovec v[2];
		int nv = evbuffer_reserve_space(out, TUN_READ, v, 2), used = 0;
		ssize_t n;
		size_t left;

		if (nv <= 0)
			break;
		n = readv(fd, (struct iovec *)v, nv);
		if (n <= 0) {
			int err = n < 0 ? errno : 0;
			evbuffer_commit_space(out, v, 0);
			if (n < 0 && (err == EAGAIN || err == EWOULDBLOCK || err == EINTR))
				break;
			if (got) {
				activity(t->route, t->instance_id, got);
				tun_flush(dst);
			}
			tun_event(bev,
			          n == 0 ? BEV_EVENT_EOF | BEV_EVENT_READING
			                 : BEV_EVENT_ERROR | BEV_EVENT_READING,
			          t);
			return;
		}
		for (left = (size_t)n; used < nv && left; used++) {
			if (v[used].iov_len > left)
				v[used].iov_len = left;
			left -= v[used].iov_len;
		}
		evbuffer_commit_space(out, v, used);
		got += (size_t)n;
		if ((size_t)n < TUN_READ)
			break; /* drained */
	}
	if (got)
		activity(t->route, t->instance_id, got);
	tun_flush(dst);
	if (evbuffer_get_length(out) >= TUN_HIGH)
		tun_pause(t, bev); /* resumed when dst drains */
}

static void tun_raw_c(evutil_socket_t fd, short what, void *arg)
{
	struct tunnel *t = arg;

	(void)fd;
	(void)what;
	tun_raw_read(t, t->c);
}

static void tun_raw_u(evutil_socket_t fd, short what, void *arg)
{
	struct tunnel *t = arg;

	(void)fd;
	(void)what;
	tun_raw_read(t, t->u);
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

static void start_tunnel(struct preq *p)
{
	struct tunnel *t;
	struct bufferevent *client;
	struct evbuffer *out;
	struct upconn *u = p->u;
	int eof = u->eof;

	if (!p->websocket) {
		up_failed(p, "switched protocols unasked", 0);
		return;
	}
	t = calloc(1, sizeof(*t));
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
	for (int i = 0; i < p->nrh; i++) {
		const char *n = p->rh[i].name, *v = p->rh[i].value;
		if (!n || !header_value_ok(v) || hop_by_hop(n) ||
		    listed_in_connection(p->rh, p->nrh, n) ||
		    strcasecmp(n, "Content-Length") == 0 ||
		    (strcasecmp(n, "Set-Cookie") == 0 && !proxy_set_cookie_ok(v)))
			continue;
		evbuffer_add_printf(out, "%s: %s\r\n", n, v);
	}
	evbuffer_add_printf(out, "Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n");
	/* frames the app sent right behind its 101 */
	evbuffer_add_buffer(out, bufferevent_get_input(u->bev));
	t->c = client;
	t->u = u->bev;
	u->bev = NULL;
	p->u = NULL;
	upconn_free(u);
	snprintf(t->route, sizeof(t->route), "%s", p->route);
	snprintf(t->cookie_hash, sizeof(t->cookie_hash), "%s", p->cookie_hash);
	t->instance_id = p->ck.instance_id;
	preq_free(p);
	t->next = tunnels;
	if (tunnels)
		tunnels->prev = t;
	tunnels = t;
	pstats.tunnels_open++;
	pstats.tunnels_total++;
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
		t->rc = event_new(ev_base, bufferevent_getfd(t->c), EV_READ | EV_PERSIST, tun_raw_c,
		                  t);
	t->ru = event_new(ev_base, bufferevent_getfd(t->u), EV_READ | EV_PERSIST, tun_raw_u, t);
	/* without its event (no memory, or TLS) a side is read by its bufferevent */
	tun_resume(t, t->c);
	tun_resume(t, t->u);
	tun_flush(t->c); /* the 101 and what followed it */
	tun_flush(t->u);
	if (eof) {
		tun_event(t->u, BEV_EVENT_EOF, t);
		return;
	}
	if (evbuffer_get_length(bufferevent_get_input(t->c)))
		tun_read(t->c, t); /* frames the client sent behind its request */
}

/* ---- re-checking open tunnels ---- */

struct recheck {
	char route[64];
	char cookie_hash[65];
	unsigned long gen;
};

static void recheck_done(PGresult *res, enum rc rc, void *arg)
{
	struct recheck *rk = arg;
	struct check ck;
	char key[132];
	struct tunnel *t, *next;

	if (rc != RC_OK) {
		free(rk); /* the database is away: keep what is open */
		return;
	}
	check_from(res, &ck);
	snprintf(key, sizeof(key), "%s:%s", rk->route, rk->cookie_hash);
	cache_put(key, &ck, rk->gen);
	if (ck.found && ck.allowed && strcmp(ck.state, "running") == 0 && ck.port) {
		free(rk);
		return;
	}
	for (t = tunnels; t; t = next) {
		next = t->next;
		if (strcmp(t->route, rk->route) == 0 &&
		    strcmp(t->cookie_hash, rk->cookie_hash) == 0) {
			log_msg(LOG_INFO, "proxy", NULL, "closing a websocket of route %s: %s",
			        t->route,
			        !ck.found     ? "route gone"
			        : !ck.allowed ? "session ended"
			                      : "instance not running");
			tun_free(t);
		}
	}
	free(rk);
}

/* Re-checks the open tunnels of instance id (all when id < 0): one query per
 * distinct (route, session). */
static void recheck_tunnels(long long id)
{
	for (struct tunnel *t = tunnels; t; t = t->next) {
		struct tunnel *o;
		struct recheck *rk;
		const char *params[2];
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
		rk->gen = cache_gen;
		params[0] = rk->route;
		params[1] = rk->cookie_hash;
		db_query(check_sql, 2, params, recheck_done, rk);
	}
}

static void on_recheck(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	recheck_tunnels(-1);
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
	cache_drop_instance(id);
	recheck_tunnels(id);
}

/* ---- life cycle ---- */

int proxy_init(struct event_base *base, int port)
{
	struct timeval tv = { cfg.proxy_recheck, 0 };

	ev_base = base;
	listen_port = port;
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
	while (tunnels)
		tun_free(tunnels);
	while (pools) {
		struct pool *pl = pools;
		pools = pl->next;
		while (pl->idle) {
			struct upconn *u = pl->idle;
			pl->idle = u->next;
			upconn_free(u);
		}
		free(pl);
	}
	pstats.idle_open = 0;
	cache_clear();
	notify_free(route_notify);
	route_notify = NULL;
	if (recheck_timer) {
		event_free(recheck_timer);
		recheck_timer = NULL;
	}
}
