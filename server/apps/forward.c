/* forward.c — the header rules of the app proxy.
 *
 * Owns: hop-by-hop headers (fixed ones and those a Connection header
 * lists), header values that would break a line, gpucloud's own cookies
 * (kept from every app: an app must never see the API session or the
 * route cookie), and apps' Set-Cookie (host-only, never named like ours).
 * Does not own: writing the request head or the response (proxy.c).
 */
#include "apps/forward.h"

#include <string.h>
#include <strings.h>

void forward_put_header(struct evbuffer *out, const char *name, const char *value)
{
	size_t nl = strlen(name), vl = strlen(value);
	char line[512];

	/* one copy into the buffer, not printf's pass over a format */
	if (nl + vl + 4 <= sizeof(line)) {
		memcpy(line, name, nl);
		memcpy(line + nl, ": ", 2);
		memcpy(line + nl + 2, value, vl);
		memcpy(line + nl + 2 + vl, "\r\n", 2);
		evbuffer_add(out, line, nl + vl + 4);
		return;
	}
	evbuffer_add(out, name, nl);
	evbuffer_add(out, ": ", 2);
	evbuffer_add(out, value, vl);
	evbuffer_add(out, "\r\n", 2);
}

int forward_hop_by_hop(const char *name)
{
	size_t n = strlen(name);

	/* lengths first: every header of every proxied message comes here */
	return FORWARD_NAME_IS(name, n, "Connection") || FORWARD_NAME_IS(name, n, "Keep-Alive") ||
	       FORWARD_NAME_IS(name, n, "Proxy-Connection") || FORWARD_NAME_IS(name, n, "TE") ||
	       FORWARD_NAME_IS(name, n, "Trailer") ||
	       FORWARD_NAME_IS(name, n, "Transfer-Encoding") ||
	       FORWARD_NAME_IS(name, n, "Upgrade") ||
	       FORWARD_NAME_IS(name, n, "Proxy-Authenticate") ||
	       FORWARD_NAME_IS(name, n, "Proxy-Authorization");
}

/* Is name listed in a Connection header among hdrs? */
int forward_in_connection(const struct http_header *h, int n, const char *name)
{
	size_t nlen = strlen(name);

	for (int i = 0; i < n; i++) {
		const char *v = h[i].value;
		const char *hn = h[i].name;
		/* "conn" before the whole name: called for every header, with
		 * every header, and many begin with "c" (each test stops at a
		 * NUL, so a short name is never read past) */
		if (!hn || !v || (hn[0] | 0x20) != 'c' || (hn[1] | 0x20) != 'o' ||
		    (hn[2] | 0x20) != 'n' || (hn[3] | 0x20) != 'n' ||
		    strcasecmp(hn, "Connection") != 0)
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

int forward_value_ok(const char *v)
{
	return v && !strpbrk(v, "\r\n");
}

/* 1 when an app's Set-Cookie value may reach the browser: host-only
 * cookies only.  A Domain attribute would toss the cookie onto every other
 * route (and the API) under a parent domain; a cookie named like
 * gpucloud's own (gc_*, with or without a __Host-/__Secure- prefix) could
 * shadow the route cookie or the sign-in state.  (Browsers themselves drop
 * __Host-/__Secure- cookies that break their prefix rules.) */
int forward_set_cookie_ok(const char *v)
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
void forward_app_cookies(const struct http_req *r, struct evbuffer *out)
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
					evbuffer_add(out, "Cookie: ", 8);
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
