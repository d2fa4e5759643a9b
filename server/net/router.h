/* router.h — the route table: method + path pattern -> handler + who may call.
 *
 * Patterns are literal segments and captures: "/api/v1/users/{id}" captures
 * one segment, "/api/v1/files/{path...}" captures the rest (raw, undecoded).
 * Single-segment captures are percent-decoded; a capture that decodes to
 * something with NUL or '/' is rejected (400) before any handler runs.
 * Each api_<resource>.c owns its slice of the table and registers it.
 */
#ifndef GPUCLOUD_ROUTER_H
#define GPUCLOUD_ROUTER_H

#include <stdint.h>
#include <stdio.h>
#include "base/rc.h"

struct http_req;

/* Roles as bits, so a route can name several. */
enum role_bits {
	ROLE_STUDENT = 1 << 0,
	ROLE_RESEARCHER = 1 << 1,
	ROLE_TEACHER = 1 << 2,
	ROLE_ADMIN = 1 << 3,
};
#define ROLES_PUBLIC 0u   /* no authentication at all */
#define ROLES_ALL    0xfu /* any authenticated user */

enum route_flags {
	ROUTE_STREAM = 1 << 0,   /* body goes to on_body as it arrives */
	ROUTE_NO_CSRF = 1 << 1,  /* a mutation exempt from CSRF (login) */
	ROUTE_RAW_BODY = 1 << 2, /* body is not JSON (CSV, files); handler checks type */
	ROUTE_PREPARE = 1 << 4,  /* ROUTE_STREAM: on_body(r, NULL, 0) before the body (http.h) */
	/* open to a caller who must change their password first (/me, logout,
	 * the change itself); every other route refuses them (403
	 * password_change_required) */
	ROUTE_PASSWORD_CHANGE = 1 << 5,
};

struct route {
	int method;          /* enum http_method (http_parser.h) */
	const char *pattern; /* NULL ends a table */
	void (*handler)(struct http_req *r);
	unsigned roles; /* ROLES_PUBLIC, ROLES_ALL or role bits */
	unsigned flags;
	int64_t max_body; /* 0 = cfg.max_body */
	/* ROUTE_STREAM only: called with each piece of body; a non-OK rc ends
	 * the request with that error. */
	enum rc (*on_body)(struct http_req *r, const char *data, size_t len);
};

#define ROUTE_MAX_PARAMS 6

struct route_params {
	int n;
	struct {
		const char *name; /* points into the pattern */
		size_t name_len;
		char *value; /* owned by the params */
	} p[ROUTE_MAX_PARAMS];
};

/* Adds a table (terminated by pattern == NULL); the table must outlive the
 * router.  Returns 0, or -1 if the router is full. */
int router_add(const struct route *table);

/* Finds the route for method and raw path.  On success returns it and fills
 * params (release with router_params_free).  Otherwise returns NULL and sets
 * *why: RC_NOTFOUND (no pattern matches), RC_METHOD (a pattern matches with
 * another method) or RC_INVALID (bad percent-encoding in a capture). */
const struct route *router_match(int method, const char *path, struct route_params *params,
                                 enum rc *why);

void router_params_free(struct route_params *params);
/* Value of a named capture, or NULL. */
const char *router_param(const struct route_params *params, const char *name);

/* Writes the methods that have a route for path ("GET, HEAD, POST") into
 * out, for the Allow header of a 405. */
void router_allowed(const char *path, char *out, size_t outlen);

/* Calls fn for every route (for --print-routes and the OpenAPI test). */
void router_each(void (*fn)(const struct route *rt, void *arg), void *arg);

/* Empties the router (tests). */
void router_reset(void);

/* Percent-decodes src[0..len) into out (NUL-terminated).  Rejects bad
 * escapes and NUL bytes; '+' is kept (paths) unless plus_is_space.
 * Returns the decoded length, or -1. */
long router_decode(const char *src, size_t len, char *out, size_t outlen, int plus_is_space);

#endif
