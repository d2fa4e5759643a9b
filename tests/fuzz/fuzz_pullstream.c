/* fuzz_pullstream.c — libFuzzer target for the engine's pull/push progress
 * stream parser (images_progress_feed).
 *
 * The first input byte seeds how the rest is cut into pieces; the rest is
 * fed whole and cut up, the caller keeping what a call did not consume, as
 * the streaming path does with curl's chunks.  Checked: a call never
 * consumes more than it was given and only whole lines; the cut never
 * changes the layers, lines, failure or percent left behind; the percent
 * stays within 0..100 and the error message is NUL-terminated.
 */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/images.h"

static struct images_progress whole, cut;

/* Feeds data the way images.c does; returns -1 when a line is too long. */
static int feed(struct images_progress *p, const char *data, size_t len, size_t step)
{
	char *pend = malloc(len + 1);
	size_t have = 0, off = 0;
	int ret = 0;

	assert(pend);
	while (off < len) {
		size_t n = len - off < step ? len - off : step;
		long used;

		memcpy(pend + have, data + off, n);
		have += n;
		off += n;
		used = images_progress_feed(p, pend, have);
		if (used < 0) {
			ret = -1;
			break;
		}
		assert((size_t)used <= have);
		assert(used == 0 || pend[used - 1] == '\n');
		assert(!memchr(pend + used, '\n', have - (size_t)used));
		memmove(pend, pend + used, have - (size_t)used);
		have -= (size_t)used;
		{
			int pct = images_progress_percent(p);
			assert(pct >= 0 && pct <= 100);
		}
	}
	free(pend);
	return ret;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t step;
	int a, b;

	if (size < 1)
		return 0;
	step = (size_t)(data[0] % 17) + 1;
	data++;
	size--;
	memset(&whole, 0, sizeof(whole));
	memset(&cut, 0, sizeof(cut));
	a = feed(&whole, (const char *)data, size, size ? size : 1);
	b = feed(&cut, (const char *)data, size, step);
	assert(memchr(whole.error, '\0', sizeof(whole.error)));
	if (a == 0 && b == 0) {
		assert(whole.nlayers == cut.nlayers);
		assert(whole.lines == cut.lines);
		assert(whole.failed == cut.failed);
		assert(strcmp(whole.error, cut.error) == 0);
		assert(images_progress_percent(&whole) == images_progress_percent(&cut));
	}
	return 0;
}
