/* harness.h — a tiny unit test harness.
 *
 *   TEST(name) { CHECK(x == 1); CHECK_STR(a, "b"); }
 *   int main(void) { RUN(name); return harness_done("test_foo"); }
 *
 * Prints one line per failed check and ends with "N passed, N failed".
 */
#ifndef GPUCLOUD_HARNESS_H
#define GPUCLOUD_HARNESS_H

#include <stdio.h>
#include <string.h>

static int harness_passed, harness_failed, harness_cur_failed;

#define TEST(name) static void name(void)

#define CHECK(cond)                                                            \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, \
				__LINE__, #cond);                              \
			harness_cur_failed = 1;                                \
		}                                                              \
	} while (0)

#define CHECK_STR(a, b)                                                        \
	do {                                                                   \
		const char *a_ = (a), *b_ = (b);                               \
		if (!a_ || !b_ || strcmp(a_, b_) != 0) {                       \
			fprintf(stderr, "%s:%d: \"%s\" != \"%s\"\n", __FILE__, \
				__LINE__, a_ ? a_ : "(null)",                  \
				b_ ? b_ : "(null)");                           \
			harness_cur_failed = 1;                                \
		}                                                              \
	} while (0)

#define RUN(name)                                                              \
	do {                                                                   \
		harness_cur_failed = 0;                                        \
		name();                                                        \
		if (harness_cur_failed) {                                      \
			harness_failed++;                                      \
			fprintf(stderr, "FAIL %s\n", #name);                   \
		} else {                                                       \
			harness_passed++;                                      \
		}                                                              \
	} while (0)

static inline int harness_done(const char *suite)
{
	printf("%s: %d passed, %d failed\n", suite, harness_passed,
	       harness_failed);
	return harness_failed ? 1 : 0;
}

#endif
