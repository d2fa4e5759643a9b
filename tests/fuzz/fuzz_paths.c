/* fuzz_paths.c — libFuzzer target for paths_clean().
 *
 * Checks what the cleaner promises for any bytes: a bounded, NUL-terminated
 * result with no '.'/'..' component, no NUL, backslash, control character,
 * leading or doubled '/', valid UTF-8, and that cleaning is idempotent on
 * the decoded form (cleaning the result again gives the same result).
 */
#include "storage/paths.c"

#include <assert.h>
#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf = malloc(size ? size : 1);
	char out[PATHS_MAX + 1], again[PATHS_MAX + 1];
	const char *why = NULL;
	long n, m;

	if (!buf)
		return 0;
	if (size)
		memcpy(buf, data, size);
	n = paths_clean(buf, size, out, sizeof(out), &why);
	if (n < 0) {
		assert(why != NULL);
	} else {
		size_t i = 0;

		assert((size_t)n == strlen(out) && n <= PATHS_MAX);
		assert(n == 0 || (out[0] != '/' && out[n - 1] != '/'));
		assert(!strstr(out, "//") && !strchr(out, '\\'));
		while (i < (size_t)n) {
			size_t k = utf8_seq((const unsigned char *)out + i, (size_t)n - i);
			assert(k > 0);
			assert((unsigned char)out[i] >= 0x20 && out[i] != 0x7f);
			i += k;
		}
		for (char *c = out; *c;) {
			char *e = strchr(c, '/');
			size_t cl = e ? (size_t)(e - c) : strlen(c);
			assert(cl > 0 && cl <= PATHS_NAME_MAX);
			assert(!(cl == 1 && c[0] == '.') && !(cl == 2 && c[0] == '.' && c[1] == '.'));
			c += cl + (e ? 1 : 0);
		}
		m = paths_clean_decoded(out, again, sizeof(again), &why);
		assert(m == n && strcmp(out, again) == 0);
	}
	/* a too-small output buffer never overflows */
	n = paths_clean(buf, size, out, 8, &why);
	assert(n < 8);
	free(buf);
	return 0;
}
