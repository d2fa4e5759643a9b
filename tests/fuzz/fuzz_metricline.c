/* fuzz_metricline.c — libFuzzer target for the metric line parser: the
 * input as a metrics.jsonl line and as a log line.  Checked: a result is
 * -1 or the number of values; values are finite and within the bound,
 * names non-empty and of the alphabet, a step within [0, 2^53 - 1].
 */
#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "work/metricline.h"

static void check(int n, const struct metricline *m)
{
	assert(n == -1 || (n >= 1 && n <= METRICLINE_MAX_VALUES && n == m->n));
	if (n < 0)
		return;
	assert(!m->has_step || (m->step >= 0 && m->step <= METRICLINE_STEP_MAX));
	for (int i = 0; i < n; i++) {
		size_t l = strlen(m->v[i].name);
		assert(l >= 1 && l <= METRICLINE_NAME_MAX);
		assert(strspn(m->v[i].name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
		                            "0123456789_./-") == l);
		assert(isfinite(m->v[i].value) && fabs(m->v[i].value) <= METRICLINE_VALUE_MAX);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct metricline m;

	check(metricline_parse_json((const char *)data, size, &m), &m);
	check(metricline_parse_log((const char *)data, size, &m), &m);
	return 0;
}
