/* route.h — which app a request to the apps domain is for, and whether
 * its caller may use it: origins, route ids, the route and sign-in state
 * cookies, the cross-origin rule, the route check (cached), the sign-in
 * redirect and the ticket handshake.  Internal to apps/ (the rest of the
 * server uses proxy.h).  (A "route" here is a row of the routes table, an
 * app's origin; net/router.h's struct route is an API endpoint.)
 */
#ifndef GPUCLOUD_ROUTE_H
#define GPUCLOUD_ROUTE_H

#include <stddef.h>

#include "net/http.h"

/* Where the handshake is served on every route's origin. */
#define ROUTE_HANDSHAKE_PATH "/__gpucloud/handshake"

/* Remembers the port the server listens on (for origins when
 * cfg.apps_port is 0). */
void route_init(int listen_port);
/* Forgets every cached check (at shutdown). */
void route_shutdown(void);

/* Name of the route cookie: "__Host-gc_route" under TLS, else "gc_route". */
const char *route_cookie_name(void);

/* Name of the sign-in state cookie a route's origin sets before a ticket
 * is minted (the ticket carries its sha256): "__Host-gc_state" under TLS,
 * else "gc_state". */
const char *route_state_cookie_name(void);

/* Writes the origin of route id ("http://<id>.localhost:8080") into out. */
void route_origin(const char *route_id, char *out, size_t outlen);

/* Writes the origin browsers use for the API into out, by the one rule of
 * http_own_origin(): cfg.public_url, else the apps domain itself on the
 * apps' port.  Returns 0, or -1 (out "") when it does not fit. */
int route_api_origin(char *out, size_t outlen);

/* 1 when s is a well-formed route id (a lowercase DNS label of 16 to 63
 * letters and digits). */
int route_id_ok(const char *s);

/* For a Host header value (port ignored, case folded, a trailing dot
 * allowed): 1 when it names a host under cfg.apps_domain at all, even one
 * whose label is not a route id (such hosts must never reach the API),
 * with the label in front of ".<apps_domain>" in out ("" when it does not
 * fit); 0 otherwise (NULL, another host, no apps domain configured). */
int route_from_host(const char *host, char *out, size_t outlen);

/* The value of r's route cookie into out, or "". */
void route_cookie(const struct http_req *r, char *out, size_t outlen);

/* NULL when r may reach route as far as origins go, else why not (for the
 * 403 message).  upgrade: r asks for a protocol upgrade (a websocket).
 * The rule and its reasons are at its definition in route.c. */
const char *route_cross_origin_refusal(const struct http_req *r, const char *route, int upgrade);

/* What the database says about a route and a route cookie. */
struct route_check {
	int found;   /* the route exists */
	int allowed; /* the cookie is a live session of this route for someone who may use it */
	long long instance_id;
	char state[16];
	char host[64];
	int port; /* 0: not published (yet) */
	char token[128];
	char port_name[64];
};

/* done gets the check (borrowed, for the call only) with RC_OK, or NULL
 * with the failure (RC_NOMEM, a database error). */
typedef void (*route_check_cb)(const struct route_check *ck, enum rc rc, void *arg);

/* The cached check of route and the sha256 hex of a route cookie, when one
 * younger than cfg.proxy_cache_ms is cached; else NULL.  Borrowed until the
 * next call into route.c. */
const struct route_check *route_check_cached(const char *route, const char *cookie_hash);

/* Asks the database (one round trip) and caches the answer, unless the
 * cache was invalidated while the question was out; done fires once, from
 * the loop (or at once when the question cannot be sent). */
void route_check_ask(const char *route, const char *cookie_hash, route_check_cb done, void *arg);

/* Forgets every cached check of instance id (all when id < 0); checks
 * already out are then answered once but not cached. */
void route_cache_drop(long long id);

/* The final reply of r, a request to route without a valid route cookie:
 * browsers (GET of HTML) are sent to the API's sign-in page with a fresh
 * sign-in state cookie; other clients get 401. */
void route_sign_in(struct http_req *r, const char *route);

/* The final reply of r, a request to ROUTE_HANDSHAKE_PATH on route: spends
 * the one-time ticket of its query (bound to this route and to the
 * browser's sign-in state cookie) for a route session, sets the route
 * cookie and redirects to the path the ticket names (on this origin only). */
void route_handshake(struct http_req *r, const char *route);

#endif
