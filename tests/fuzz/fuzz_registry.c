/* fuzz_registry.c — libFuzzer target for the registry client's parsers.
 *
 * The input is a WWW-Authenticate value; it is also read as two strings
 * (split at the first 0xff byte) for references, tags and repository
 * names.  Checked: the challenge parser consumes at most len bytes, reads
 * nothing past them (the input is copied to an exact-size buffer, so ASan
 * sees an overrun), leaves every field NUL-terminated inside its array and
 * sets a scheme when it succeeds; reference parts are NUL-terminated and
 * fit; the tag order is antisymmetric and "newer" implies "greater".
 */
#include "engine/registry.c"

#include <assert.h>
#include <stdint.h>
#include <stdlib.h>

static void bounded(const char *a, size_t cap)
{
	assert(memchr(a, '\0', cap));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct registry_challenge c;
	char *buf = malloc(size ? size : 1), a[300], b[300], h[256], r[300], t[160];
	const uint8_t *ff = memchr(data, 0xff, size);
	size_t na, nb;
	long n;

	if (!buf)
		return 0;
	memcpy(buf, data, size);
	n = registry_challenge_parse(buf, size, &c);
	assert(n == -1 || (n > 0 && (size_t)n <= size));
	if (n > 0)
		assert(c.scheme == REGISTRY_AUTH_BASIC || c.scheme == REGISTRY_AUTH_BEARER);
	bounded(c.realm, sizeof(c.realm));
	bounded(c.service, sizeof(c.service));
	bounded(c.scope, sizeof(c.scope));
	free(buf);

	na = ff ? (size_t)(ff - data) : size;
	nb = ff ? size - na - 1 : 0;
	if (na >= sizeof(a))
		na = sizeof(a) - 1;
	if (nb >= sizeof(b))
		nb = sizeof(b) - 1;
	memcpy(a, data, na);
	a[na] = '\0';
	memcpy(b, ff ? ff + 1 : data, nb);
	b[nb] = '\0';
	if (strlen(a) == na && images_ref_valid(a) &&
	    registry_ref_parse(a, h, sizeof(h), r, sizeof(r), t, sizeof(t)) == 0) {
		bounded(h, sizeof(h));
		bounded(r, sizeof(r));
		bounded(t, sizeof(t));
		assert(h[0] && r[0] && t[0]);
	}
	{
		int ab = registry_tag_cmp(a, b), ba = registry_tag_cmp(b, a);
		assert((ab > 0) == (ba < 0) && (ab == 0) == (ba == 0));
		if (registry_tag_newer(a, b))
			assert(ab < 0);
	}
	(void)registry_repo_valid(a);
	return 0;
}
