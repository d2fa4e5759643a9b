/* router.c — route tables and path matching.
 *
 * Owns the list of registered tables and the matcher; does not own
 * handlers.  Matching walks the path segment by segment against each
 * pattern, after a plain comparison of the pattern's literal start has
 * refused nearly all of them: with that, a linear scan of a few hundred
 * routes costs less than the request parsing around it.
 */
#include "net/router.h"

#include <http_parser.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TABLES 64

static const struct route *tables[MAX_TABLES];
static int ntables;

int router_add(const struct route *table)
{
	if (ntables >= MAX_TABLES)
		return -1;
	tables[ntables++] = table;
	return 0;
}

void router_reset(void)
{
	ntables = 0;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

long router_decode(const char *src, size_t len, char *out, size_t outlen, int plus_is_space)
{
	size_t o = 0;

	for (size_t i = 0; i < len; i++) {
		int c = (unsigned char)src[i];
		if (c == '%') {
			int hi, lo;
			if (i + 2 >= len)
				return -1;
			hi = hexval(src[i + 1]);
			lo = hexval(src[i + 2]);
			if (hi < 0 || lo < 0)
				return -1;
			c = hi * 16 + lo;
			i += 2;
		} else if (c == '+' && plus_is_space) {
			c = ' ';
		}
		if (c == 0 || o + 1 >= outlen)
			return -1;
		out[o++] = (char)c;
	}
	if (outlen == 0)
		return -1;
	out[o] = '\0';
	return (long)o;
}

void router_params_free(struct route_params *params)
{
	for (int i = 0; i < params->n; i++) {
		free(params->p[i].value);
		params->p[i].value = NULL;
	}
	params->n = 0;
}

const char *router_param(const struct route_params *params, const char *name)
{
	size_t n = strlen(name);

	for (int i = 0; i < params->n; i++)
		if (params->p[i].name_len == n && memcmp(params->p[i].name, name, n) == 0)
			return params->p[i].value;
	return NULL;
}

/* Matches path against pattern.  Returns 1 on match (params filled), 0 on
 * no match, -1 on a capture with bad encoding. */
static int match(const char *pattern, const char *path, struct route_params *params)
{
	const char *pp = pattern, *sp = path;
	size_t i;

	params->n = 0;
	/* Most patterns differ from the path in their literal text before the
	 * first capture: refuse those with a plain comparison.  Only a path
	 * that ends first (/x against /x/{rest...}) needs the walk below. */
	for (i = 0; pattern[i] && pattern[i] != '{'; i++)
		if (pattern[i] != path[i]) {
			if (path[i])
				return 0;
			break;
		}
	while (*pp && *sp) {
		if (*pp != '/' || *sp != '/')
			goto nomatch;
		pp++;
		sp++;
		const char *pend = strchr(pp, '/');
		const char *send = strchr(sp, '/');
		size_t plen = pend ? (size_t)(pend - pp) : strlen(pp);
		size_t slen = send ? (size_t)(send - sp) : strlen(sp);

		if (plen >= 2 && pp[0] == '{' && pp[plen - 1] == '}') {
			int rest = plen > 5 && memcmp(pp + plen - 4, "...}", 4) == 0;
			size_t nlen = plen - 2 - (rest ? 3 : 0);
			char *val;
			if (params->n >= ROUTE_MAX_PARAMS)
				goto nomatch;
			if (rest) {
				/* the rest of the path, raw; may be empty */
				val = strdup(sp);
				if (!val)
					goto nomatch;
				sp += strlen(sp);
				pp += plen;
			} else {
				long d;
				if (slen == 0)
					goto nomatch;
				val = malloc(slen + 1);
				if (!val)
					goto nomatch;
				d = router_decode(sp, slen, val, slen + 1, 0);
				if (d < 0 || memchr(val, '/', (size_t)d)) {
					free(val);
					router_params_free(params);
					return -1;
				}
				sp += slen;
				pp += plen;
			}
			params->p[params->n].name = pp - plen + 1;
			params->p[params->n].name_len = nlen;
			params->p[params->n].value = val;
			params->n++;
			continue;
		}
		if (plen != slen || memcmp(pp, sp, plen) != 0)
			goto nomatch;
		pp += plen;
		sp += slen;
	}
	/* "/x/{p...}" also matches "/x" and "/x/" with an empty rest; only
	 * when the rest capture is all the pattern has left ("/x/{id}/y/{p...}"
	 * does not match "/x") */
	if (*sp == '\0' && *pp == '/') {
		const char *q = pp + 1;
		size_t ql = strlen(q);
		if (ql > 5 && q[0] == '{' && memcmp(q + ql - 4, "...}", 4) == 0 &&
		    !strchr(q, '/') && params->n < ROUTE_MAX_PARAMS) {
			char *val = strdup("");
			if (!val)
				goto nomatch;
			params->p[params->n].name = q + 1;
			params->p[params->n].name_len = ql - 5;
			params->p[params->n].value = val;
			params->n++;
			return 1;
		}
	}
	if (*pp == '\0' && *sp == '\0')
		return 1;
nomatch:
	router_params_free(params);
	return 0;
}

const struct route *router_match(int method, const char *path, struct route_params *params,
                                 enum rc *why)
{
	int want = method == HTTP_HEAD ? HTTP_GET : method;
	int path_matched = 0;

	*why = RC_NOTFOUND;
	params->n = 0;
	for (int t = 0; t < ntables; t++) {
		for (const struct route *rt = tables[t]; rt->pattern; rt++) {
			int m = match(rt->pattern, path, params);
			if (m < 0) {
				*why = RC_INVALID;
				return NULL;
			}
			if (m == 0)
				continue;
			if (rt->method == want)
				return rt;
			path_matched = 1;
			router_params_free(params);
		}
	}
	if (path_matched)
		*why = RC_METHOD;
	return NULL;
}

void router_allowed(const char *path, char *out, size_t outlen)
{
	struct route_params params = { 0 };
	size_t n = 0;

	if (outlen)
		out[0] = '\0';
	for (int t = 0; t < ntables; t++)
		for (const struct route *rt = tables[t]; rt->pattern; rt++) {
			const char *m = http_method_str((enum http_method)rt->method);
			if (match(rt->pattern, path, &params) != 1)
				continue;
			router_params_free(&params);
			if (strstr(out, m))
				continue;
			n += (size_t)snprintf(out + n, n < outlen ? outlen - n : 0, "%s%s",
			                      n ? ", " : "", m);
			if (rt->method == HTTP_GET && n < outlen)
				n += (size_t)snprintf(out + n, outlen - n, ", HEAD");
			if (n >= outlen)
				return;
		}
}

void router_each(void (*fn)(const struct route *rt, void *arg), void *arg)
{
	for (int t = 0; t < ntables; t++)
		for (const struct route *rt = tables[t]; rt->pattern; rt++)
			fn(rt, arg);
}
