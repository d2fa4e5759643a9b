/* route.c — which app a request is for, and whether its caller may use it.
 *
 * Owns: the apps' origins (<route>.<apps_domain>[:port]) and the API's
 * origin as the apps domain sees it; route ids and Host → route; the route
 * cookie and the sign-in state cookie; the rule that refuses cross-origin
 * requests to an app (security-critical: see its comment); the route check
 * (the route, its instance and published port, and whether the cookie is a
 * live route session of someone who may use it), cached for
 * cfg.proxy_cache_ms and invalidated per instance; the sign-in redirect and
 * the handshake that spends a one-time ticket for a route cookie.
 * Does not own: minting tickets (api/api_routes.c), forwarding to the app
 * (proxy.c), the pages it answers with (page.c), when tunnels are checked
 * again (proxy.c, tunnel.c).
 */
#include "apps/route.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <http_parser.h>

#include "apps/page.h"
#include "base/clock.h"
#include "base/config.h"
#include "base/crypto.h"
#include "db/db.h"

#define CACHE_BUCKETS 1024
#define CACHE_MAX     8192

static int listen_port;

/* ---- origins and cookies ---- */

const char *route_cookie_name(void)
{
	return cfg.tls_cert && *cfg.tls_cert ? "__Host-gc_route" : "gc_route";
}

static int tls_on(void)
{
	return cfg.tls_cert && *cfg.tls_cert;
}

/* The sign-in state cookie: __Host- under TLS, so no other origin can toss
 * one in (api_routes.c binds the ticket to its hash). */
const char *route_state_cookie_name(void)
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

void route_origin(const char *route_id, char *out, size_t outlen)
{
	char port[16];

	port_suffix(port, sizeof(port));
	snprintf(out, outlen, "%s://%s.%s%s", tls_on() ? "https" : "http", route_id,
	         cfg.apps_domain, port);
}

int route_api_origin(char *out, size_t outlen)
{
	char port[16], host[300];

	/* the browser is on an app's origin: the API's host, as the apps
	 * domain sees it, is the apps domain itself on the apps' port */
	port_suffix(port, sizeof(port));
	if ((size_t)snprintf(host, sizeof(host), "%s%s", cfg.apps_domain, port) >= sizeof(host)) {
		if (outlen)
			out[0] = '\0';
		return -1;
	}
	return http_own_origin(tls_on(), host, out, outlen);
}

int route_id_ok(const char *s)
{
	size_t n = strlen(s);

	if (n < 16 || n > 63)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9')))
			return 0;
	return 1;
}

int route_from_host(const char *host, char *out, size_t outlen)
{
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

void route_cookie(const struct http_req *r, char *out, size_t outlen)
{
	cookie_value(r, route_cookie_name(), out, outlen);
}

/* Cross-origin requests.
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

const char *route_cross_origin_refusal(const struct http_req *r, const char *route, int upgrade)
{
	const char *origin = http_header(r, "Origin");
	const char *site = http_header(r, "Sec-Fetch-Site");
	const char *mode = http_header(r, "Sec-Fetch-Mode");
	const char *referer = http_header(r, "Referer");
	int unsafe = upgrade || !(r->method == HTTP_GET || r->method == HTTP_HEAD ||
	                          r->method == HTTP_OPTIONS);
	char own[512];

	own[0] = '\0';
	/* formatted only when there is something to compare it with: most
	 * requests carry neither header */
	if (origin || (unsafe && referer))
		route_origin(route, own, sizeof(own));
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

/* ---- the route check, cached ---- */

struct centry {
	char key[132]; /* route ":" cookie hash */
	struct route_check ck;
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

static const struct route_check *cache_get(const char *key)
{
	struct centry *e = cache[hash_str(key) % CACHE_BUCKETS];
	double t = clock_now_s();

	for (; e; e = e->next)
		if (strcmp(e->key, key) == 0)
			return e->expires > t ? &e->ck : NULL;
	return NULL;
}

static void cache_put(const char *key, const struct route_check *ck, unsigned long gen)
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
	e->expires = clock_now_s() + cfg.proxy_cache_ms / 1000.0;
}

void route_cache_drop(long long id)
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

/* One round trip: the route, its instance and published port, and whether
 * the cookie (hash $2) is a live route session of this route whose user is
 * the owner, an admin, or staff of the class the instance runs in whom the
 * class lets open its students' apps (gc_class_reach, 0032), and whose API
 * session or token is still live. */
static const char check_sql[] =
        "SELECT i.id, i.state, i.app_token, p.host, p.host_port, r.port_name,"
        " EXISTS (SELECT 1 FROM route_sessions rs JOIN users u ON u.id = rs.user_id"
        "  LEFT JOIN sessions s ON s.id = rs.session_id"
        "  LEFT JOIN api_tokens t ON t.id = rs.token_id"
        "  WHERE rs.token_hash = $2 AND rs.route_id = r.id AND rs.expires_at > now()"
        "  AND NOT u.disabled AND (u.id = i.user_id OR u.role = 'admin'"
        "   OR gc_class_reach(u.id, i.id, 'open'))"
        "  AND ((s.id IS NOT NULL AND s.revoked_at IS NULL AND s.expires_at > now())"
        "   OR (t.id IS NOT NULL AND t.revoked_at IS NULL AND t.expires_at > now())))"
        " FROM routes r JOIN instances i ON i.id = r.instance_id"
        " LEFT JOIN instance_ports p ON p.instance_id = i.id AND p.name = r.port_name"
        " WHERE r.id = $1";

static void check_from(PGresult *res, struct route_check *ck)
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

/* "route:cookie_hash" into key (132 bytes: a route id is at most 63, a
 * hash 64), without printf: the proxy asks for every request. */
static void cache_key(char key[132], const char *route, const char *cookie_hash)
{
	size_t rl = strnlen(route, 63), hl = strnlen(cookie_hash, 64);

	memcpy(key, route, rl);
	key[rl] = ':';
	memcpy(key + rl + 1, cookie_hash, hl);
	key[rl + 1 + hl] = '\0';
}

const struct route_check *route_check_cached(const char *route, const char *cookie_hash)
{
	char key[132];

	cache_key(key, route, cookie_hash);
	return cache_get(key);
}

/* A question out to the database. */
struct ask {
	char route[64];
	char cookie_hash[65];
	unsigned long gen; /* cache_gen when it was sent */
	route_check_cb done;
	void *arg;
};

static void ask_done(PGresult *res, enum rc rc, void *arg)
{
	struct ask *a = arg;
	struct route_check ck;
	char key[132];

	if (rc != RC_OK) {
		a->done(NULL, rc, a->arg);
		free(a);
		return;
	}
	check_from(res, &ck);
	cache_key(key, a->route, a->cookie_hash);
	cache_put(key, &ck, a->gen);
	a->done(&ck, RC_OK, a->arg);
	free(a);
}

void route_check_ask(const char *route, const char *cookie_hash, route_check_cb done, void *arg)
{
	struct ask *a = calloc(1, sizeof(*a));
	const char *params[2];

	if (!a) {
		done(NULL, RC_NOMEM, arg);
		return;
	}
	snprintf(a->route, sizeof(a->route), "%s", route);
	snprintf(a->cookie_hash, sizeof(a->cookie_hash), "%s", cookie_hash);
	a->gen = cache_gen;
	a->done = done;
	a->arg = arg;
	params[0] = a->route;
	params[1] = a->cookie_hash;
	db_query(check_sql, 2, params, ask_done, a);
}

/* ---- signing in: the redirect, and the handshake (ticket → route cookie) ---- */

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

/* Browsers get a fresh random sign-in state
 * cookie on this origin and go to the API origin's page
 * #/login?open=<route>&state=<sha256 of the state>&path=<where to come
 * back>, which (signed in) POSTs /routes/{id}/open with that state and
 * follows the ticket back to the handshake; API clients get 401. */
void route_sign_in(struct http_req *r, const char *route)
{
	char api[512], next[256], path[8192 * 3], state[64], shash[65], set[256];
	char loc[512 + sizeof(path) + 256];

	if (!page_wants_html(r) || r->method != HTTP_GET) {
		snprintf(next, sizeof(next),
		         "POST /api/v1/routes/%s/open with a state, then follow the URL", route);
		page_reply(r, 401, "unauthorized", "Not signed in",
		           "open this app through gpucloud first", next, 0);
		return;
	}
	if (crypto_token(state, sizeof(state), 32) < 0) {
		page_reply(r, 503, "unavailable", "Busy", "out of memory", NULL, 2);
		return;
	}
	if (route_api_origin(api, sizeof(api)) < 0) {
		page_reply(r, 500, "internal", "Cannot sign in",
		           "the API's address is misconfigured",
		           "set public_url to the API's origin", 0);
		return;
	}
	crypto_sha256_hex(state, strlen(state), shash);
	pct_encode(r->url, path, sizeof(path));
	snprintf(loc, sizeof(loc), "%s/#/login?open=%s&state=%s&path=%s", api, route, shash, path);
	snprintf(set, sizeof(set), "%s=%s; Path=/; HttpOnly; SameSite=Lax; Max-Age=600%s",
	         route_state_cookie_name(), state, tls_on() ? "; Secure" : "");
	http_add_header(r, "Set-Cookie", set);
	http_add_header(r, "Location", loc);
	http_add_header(r, "Cache-Control", "no-store");
	http_add_header(r, "Referrer-Policy", "no-referrer");
	http_reply(r, 302, "text/plain", "sign in first\n", 14);
}

struct hs {
	struct http_req *r;
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
	struct http_req *r = h->r;
	char set[512];
	const char *path;

	if (rc != RC_OK) {
		free(h);
		page_reply(r, 503, "unavailable", "Try again", "cannot open this app now",
		           "retry in a few seconds", 2);
		return;
	}
	if (PQntuples(res) != 1) {
		free(h);
		page_reply(r, 403, "forbidden", "This link has expired",
		           "the sign-in link was already used, has expired or was made for "
		           "another browser",
		           "open the app again from gpucloud", 0);
		return;
	}
	path = db_val(res, 0, 0);
	snprintf(set, sizeof(set), "%s=%s; Path=/; HttpOnly; SameSite=Lax; Max-Age=%d%s",
	         route_cookie_name(), h->cookie, cfg.route_session_ttl, tls_on() ? "; Secure" : "");
	free(h);
	http_add_header(r, "Set-Cookie", set);
	snprintf(set, sizeof(set), "%s=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0%s",
	         route_state_cookie_name(), tls_on() ? "; Secure" : "");
	http_add_header(r, "Set-Cookie", set);
	http_add_header(r, "Location", local_path_ok(path) ? path : "/");
	http_add_header(r, "Cache-Control", "no-store");
	http_add_header(r, "Referrer-Policy", "no-referrer");
	http_reply(r, 302, "text/plain", "signed in\n", 10);
}

void route_handshake(struct http_req *r, const char *route)
{
	char ticket[128], thash[65], chash[65], ttl[24], state[128], shash[65];
	struct hs *h;
	const char *params[5];

	if (r->method != HTTP_GET) {
		page_reply(r, 405, "method_not_allowed", "Method not allowed",
		           "the handshake is a GET", NULL, 0);
		return;
	}
	if (http_query(r, "ticket", ticket, sizeof(ticket)) <= 0) {
		page_reply(r, 400, "invalid", "Bad link", "the sign-in link has no valid ticket",
		           "open the app again from gpucloud", 0);
		return;
	}
	h = calloc(1, sizeof(*h));
	if (!h || crypto_token(h->cookie, sizeof(h->cookie), 32) < 0) {
		free(h);
		page_reply(r, 503, "unavailable", "Busy", "out of memory", NULL, 2);
		return;
	}
	h->r = r;
	crypto_sha256_hex(ticket, strlen(ticket), thash);
	crypto_sha256_hex(h->cookie, strlen(h->cookie), chash);
	snprintf(ttl, sizeof(ttl), "%d", cfg.route_session_ttl);
	params[0] = thash;
	params[1] = route;
	params[2] = chash;
	params[3] = ttl;
	/* the browser that asked for the ticket holds the state cookie whose
	 * hash the ticket carries; exactly one (two: one was tossed in from a
	 * parent domain) */
	if (cookie_value(r, route_state_cookie_name(), state, sizeof(state)) == 1 && state[0]) {
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

/* ---- life cycle ---- */

void route_init(int port)
{
	listen_port = port;
}

void route_shutdown(void)
{
	cache_clear();
}
