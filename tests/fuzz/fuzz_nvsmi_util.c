/* fuzz_nvsmi_util.c — libFuzzer target for the sampler's utilisation parsers:
 * nvsmi_parse_util (nvidia-smi --query-gpu=uuid,utilization.gpu,memory.used)
 * and nvsmi_parse_dcgm (a DCGM exporter's metrics), each fed the whole input.
 *
 * Checked: a count in range, every UUID NUL-terminated inside its array and
 * of the "GPU-" shape, no UUID twice, utilisation -1 or 0..100, memory -1 or
 * more, a reason on every -1 and none otherwise, and answers that do not
 * depend on the error buffer or on a roomier array.
 */
#include "engine/nvsmi.c"

#include <assert.h>
#include <stdint.h>
#include <stdlib.h>

static struct nvsmi_util util[NVSMI_MAX_GPUS], again[NVSMI_MAX_GPUS];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef int (*parser)(const char *, size_t, struct nvsmi_util *, int, char *, size_t);

static void run(parser parse, const char *b, size_t size)
{
	char err[128], small[5];
	int n, i, j;

	n = parse(b, size, util, NVSMI_MAX_GPUS, err, sizeof(err));
	assert(n >= -1 && n <= NVSMI_MAX_GPUS);
	assert(memchr(err, '\0', sizeof(err)));
	assert(n == -1 ? strlen(err) > 0 : strlen(err) == 0);
	for (i = 0; i < n; i++) {
		assert(memchr(util[i].uuid, '\0', sizeof(util[i].uuid)));
		assert(strncmp(util[i].uuid, "GPU-", 4) == 0);
		assert(util[i].util_pct >= -1 && util[i].util_pct <= 100);
		assert(util[i].mem_used_mib >= -1);
		for (j = 0; j < i; j++)
			assert(strcmp(util[i].uuid, util[j].uuid) != 0);
	}
	assert(parse(b, size, again, NVSMI_MAX_GPUS, NULL, 0) == n);
	assert(parse(b, size, again, NVSMI_MAX_GPUS, small, sizeof(small)) == n);
	assert(memchr(small, '\0', sizeof(small)));
	if (n > 0) {
		assert(parse(b, size, again, n - 1, NULL, 0) == -1);
		assert(parse(b, size, again, n, NULL, 0) == n);
		assert(memcmp(again, util, sizeof(util[0]) * (size_t)n) == 0);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *b = malloc(size ? size : 1); /* exact size: ASan sees reads past the end */

	if (!b)
		return 0;
	if (size)
		memcpy(b, data, size);
	run(nvsmi_parse_util, b, size);
	run(nvsmi_parse_dcgm, b, size);
	free(b);
	return 0;
}
