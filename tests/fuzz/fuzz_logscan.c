/* fuzz_logscan.c — libFuzzer target for the log-tail failure scanner.
 *
 * The first byte picks the out buffer's size (0 to 255) and whether the
 * input is a tail; the rest is the log.  Checked: -1 exactly when out has
 * no room, else the length returned is strlen(out) and below the size, out
 * holds no control byte and is valid UTF-8 (it goes into a JSON reason and
 * a database text column), and the answer does not depend on the bytes
 * after the reason's size (a roomier buffer gives the same text or a longer
 * one that starts with it).
 */
#include "work/logscan.c"

#include <assert.h>
#include <stdint.h>
#include <stdlib.h>

static void valid(const char *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		size_t k = utf8_len((const unsigned char *)s + i, n - i);
		assert(k > 0);
		assert(!(k == 1 && ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)));
		i += k;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char out[256], big[1024];
	size_t cap;
	int tail;
	long n, m;

	if (size < 1)
		return 0;
	cap = data[0] >> 1;
	tail = data[0] & 1;
	n = logscan_reason((const char *)data + 1, size - 1, tail, out, cap);
	if (cap == 0) {
		assert(n == -1);
		return 0;
	}
	assert(n >= 0 && (size_t)n < cap && strlen(out) == (size_t)n);
	valid(out, (size_t)n);
	m = logscan_reason((const char *)data + 1, size - 1, tail, big, sizeof(big));
	assert(m >= n && strncmp(big, out, (size_t)n) == 0);
	return 0;
}
