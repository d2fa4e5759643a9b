/* forward.h — the header rules of the app proxy, both ways: what is
 * hop-by-hop, which of gpucloud's cookies never reach an app, which of an
 * app's cookies may reach the browser.  Pure functions, no I/O.
 * Internal to apps/ (the rest of the server uses proxy.h).
 */
#ifndef GPUCLOUD_FORWARD_H
#define GPUCLOUD_FORWARD_H

#include <event2/buffer.h>
#include <strings.h>

#include "net/http.h"

/* 1 when header name (len bytes) is the literal lit, case-insensitively;
 * the lengths are compared first, so a chain of these is cheap. */
#define FORWARD_NAME_IS(name, len, lit) \
	((len) == sizeof(lit) - 1 && strncasecmp((name), "" lit, sizeof(lit) - 1) == 0)

/* Appends "name: value\r\n" to out in one piece. */
void forward_put_header(struct evbuffer *out, const char *name, const char *value);

/* 1 when name is a hop-by-hop header (RFC 9110 §7.6.1, plus
 * Proxy-Connection and Proxy-Authenticate/-Authorization): never forwarded. */
int forward_hop_by_hop(const char *name);

/* 1 when name is listed (case-insensitively) in a Connection header among
 * the n headers h: such a header is hop-by-hop too. */
int forward_in_connection(const struct http_header *h, int n, const char *name);

/* 1 when a header value may be written on one line (no CR or LF; NULL is
 * not). */
int forward_value_ok(const char *v);

/* 1 when an app's Set-Cookie header value may pass to the browser: a
 * host-only cookie (no Domain attribute) whose name is not gpucloud's own
 * (gc_*, also behind a __Host-/__Secure- prefix). */
int forward_set_cookie_ok(const char *value);

/* Appends to out the Cookie headers of r without gpucloud's own cookies
 * (session, route, sign-in state), joined into one "Cookie: ...\r\n"
 * line; nothing when no cookie is left. */
void forward_app_cookies(const struct http_req *r, struct evbuffer *out);

#endif
