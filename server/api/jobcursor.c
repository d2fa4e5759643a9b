/* jobcursor.c — the jobs list's page cursor (jobcursor.h): parsing and
 * writing its text.  Owns nothing else: which SQL a sort means stays in
 * api_jobs.c.
 */
#include "api/jobcursor.h"

#include <stdio.h>
#include <string.h>

static int digits(const char *s, size_t n, size_t max)
{
	if (n == 0 || n > max || (n > 1 && s[0] == '0')) /* one spelling per number */
		return 0;
	for (size_t i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return 0;
	return 1;
}

/* a decimal of s[0..n) (digits() said so) */
static long long decimal(const char *s, size_t n)
{
	long long v = 0;

	for (size_t i = 0; i < n; i++)
		v = v * 10 + (s[i] - '0');
	return v;
}

static int name_shape(const char *s, size_t n)
{
	if (n == 0 || n > 63 || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= '0' && s[0] <= '9')))
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '.' ||
		      s[i] == '_' || s[i] == '-'))
			return 0;
	return 1;
}

int jobcursor_parse(const char *s, size_t len, struct jobcursor *c)
{
	const char *dot, *key;
	size_t idn, keyn;

	memset(c, 0, sizeof(*c));
	if (digits(s, len, 18)) {
		c->sort = 'c';
		c->dir = 'd';
		c->id = decimal(s, len);
		return c->id > 0 ? 0 : -1;
	}
	if (len < 5 || !memchr("csfnr", s[0], 5) || (s[1] != 'a' && s[1] != 'd') || s[2] != '.')
		return -1;
	dot = memchr(s + 3, '.', len - 3);
	if (!dot)
		return -1;
	idn = (size_t)(dot - (s + 3));
	if (!digits(s + 3, idn, 18))
		return -1;
	key = dot + 1;
	keyn = len - (size_t)(key - s);
	if (s[0] == 'c') {
		if (keyn != 0)
			return -1;
	} else if (s[0] == 'n') {
		if (!name_shape(key, keyn))
			return -1;
	} else {
		size_t neg = keyn > 0 && key[0] == '-';
		if (!digits(key + neg, keyn - neg, 19))
			return -1;
		/* 19 digits may pass the bigint's range: no more than its limit */
		if (keyn - neg == 19 && memcmp(key + neg, "9223372036854775807", 19) > 0)
			return -1;
	}
	c->sort = s[0];
	c->dir = s[1];
	c->id = decimal(s + 3, idn);
	if (c->id <= 0)
		return -1;
	memcpy(c->key, key, keyn);
	c->key[keyn] = '\0';
	return 0;
}

int jobcursor_format(const struct jobcursor *c, char *out, size_t outlen)
{
	int n;

	if (c->sort == 'c' && c->dir == 'd')
		n = snprintf(out, outlen, "%lld", c->id);
	else
		n = snprintf(out, outlen, "%c%c.%lld.%s", c->sort, c->dir, c->id, c->key);
	return n < 0 || (size_t)n >= outlen ? -1 : n;
}
