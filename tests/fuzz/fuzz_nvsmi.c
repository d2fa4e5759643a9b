/* fuzz_nvsmi.c — libFuzzer target for the nvidia-smi parsers.
 *
 * The input is a --query-gpu text, a 0xff byte, an `nvidia-smi -L` text, and
 * optionally a second 0xff byte and a plain `nvidia-smi` text for the CUDA
 * header (without a 0xff the whole input is all three; without the second,
 * the whole input is the header text).  Discovery's order is kept: the
 * list is parsed against the GPUs the query found.  Checked: counts in
 * range, every string NUL-terminated inside its array and of the shape the
 * parsers promise, no duplicates, a reason on every -1, no MIG device left
 * attached after a failed list, and answers that do not depend on the error
 * buffer or on a roomier GPU array; a CUDA version in range and encoded as
 * nodes.cuda_max holds it, 0 unless read.
 */
#include "engine/nvsmi.c"

#include <assert.h>
#include <stdint.h>
#include <stdlib.h>

static struct nvsmi_gpu gpus[NVSMI_MAX_GPUS], again[NVSMI_MAX_GPUS];

/* The string in a[cap] ends inside it; returns its length. */
static size_t bounded(const char *a, size_t cap)
{
	const char *z = memchr(a, '\0', cap);

	assert(z);
	return (size_t)(z - a);
}

static void check_err(int rc, const char *err, size_t cap)
{
	size_t n = bounded(err, cap);

	assert(rc == -1 ? n > 0 : n == 0);
}

static void check_gpus(const struct nvsmi_gpu *g, int n)
{
	int i, j;

	for (i = 0; i < n; i++) {
		size_t u = bounded(g[i].uuid, sizeof(g[i].uuid));
		size_t m = bounded(g[i].name, sizeof(g[i].name));

		assert(g[i].index >= 0);
		assert(u > 4 && memcmp(g[i].uuid, "GPU-", 4) == 0);
		assert(strcspn(g[i].uuid, ", \t\r\n") == u);
		assert(m > 0 && printable((struct span){ g[i].name, m }));
		assert(g[i].memory_mib >= 0);
		assert(g[i].mig_enabled == 0 || g[i].mig_enabled == 1);
		assert(g[i].nmig == 0);
		for (j = 0; j < i; j++) {
			assert(g[i].index != g[j].index);
			assert(strcmp(g[i].uuid, g[j].uuid) != 0);
		}
	}
}

/* Returns the number of MIG devices attached over all GPUs. */
static int check_migs(const struct nvsmi_gpu *g, int n)
{
	int i, k, total = 0;

	for (i = 0; i < n; i++) {
		assert(g[i].nmig >= 0 && g[i].nmig <= NVSMI_MAX_MIG);
		assert(g[i].nmig == 0 || g[i].mig_enabled);
		for (k = 0; k < g[i].nmig; k++) {
			const struct nvsmi_mig *m = &g[i].mig[k];
			size_t p = bounded(m->profile, sizeof(m->profile));
			size_t u = bounded(m->uuid, sizeof(m->uuid));

			assert(m->gpu_index == g[i].index && m->index >= 0);
			assert(p > 0 && strcspn(m->profile, ", \t\r\n") == p);
			assert(u > 4 && memcmp(m->uuid, "MIG-", 4) == 0);
			assert(strcspn(m->uuid, ", \t\r\n") == u);
		}
		total += g[i].nmig;
	}
	return total;
}

static void run(const char *q, size_t qlen, const char *l, size_t llen)
{
	char err[128], small[5];
	int n, n2, m, m2;

	n = nvsmi_parse_query(q, qlen, gpus, NVSMI_MAX_GPUS, err, sizeof(err));
	assert(n >= -1 && n <= NVSMI_MAX_GPUS);
	check_err(n, err, sizeof(err));
	if (n > 0)
		check_gpus(gpus, n);

	/* the error buffer does not change the answer; a short one still ends */
	assert(nvsmi_parse_query(q, qlen, again, NVSMI_MAX_GPUS, NULL, 0) == n);
	n2 = nvsmi_parse_query(q, qlen, again, NVSMI_MAX_GPUS, small, sizeof(small));
	assert(n2 == n);
	bounded(small, sizeof(small));
	/* with room for fewer GPUs: the same answer when they fit, else -1 */
	if (n > 0) {
		n2 = nvsmi_parse_query(q, qlen, again, n - 1, err, sizeof(err));
		assert(n2 == -1);
		n2 = nvsmi_parse_query(q, qlen, again, n, err, sizeof(err));
		assert(n2 == n);
		assert(memcmp(again, gpus, sizeof(gpus[0]) * (size_t)n) == 0);
	}

	/* the list against what the query found, or against no GPUs */
	if (n < 0)
		n = 0;
	m = nvsmi_parse_list(l, llen, gpus, n, err, sizeof(err));
	assert(m >= -1 && m <= n * NVSMI_MAX_MIG);
	check_err(m, err, sizeof(err));
	assert(check_migs(gpus, n) == (m < 0 ? 0 : m));
	/* parsing again gives the same, not twice as many */
	m2 = nvsmi_parse_list(l, llen, gpus, n, NULL, 0);
	assert(m2 == m);
	assert(check_migs(gpus, n) == (m < 0 ? 0 : m));
}

static void run_cuda(const char *h, size_t hlen)
{
	char err[128], small[5];
	int rc, v = -1, v2 = -1;

	rc = nvsmi_parse_cuda(h, hlen, &v, err, sizeof(err));
	assert(rc >= -1 && rc <= 1);
	check_err(rc, err, sizeof(err));
	if (rc == 1)
		assert(v >= 1000 && v <= 99990 && v % 10 == 0 && (v % 1000) / 10 <= 99);
	else
		assert(v == 0);
	assert(nvsmi_parse_cuda(h, hlen, NULL, NULL, 0) == rc);
	assert(nvsmi_parse_cuda(h, hlen, &v2, small, sizeof(small)) == rc);
	bounded(small, sizeof(small));
	assert(v2 == v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *cut = size ? memchr(data, 0xff, size) : NULL;
	const uint8_t *cut2 = cut ? memchr(cut + 1, 0xff, size - (size_t)(cut + 1 - data)) : NULL;
	size_t qlen = cut ? (size_t)(cut - data) : size;
	size_t llen = cut2 ? (size_t)(cut2 - cut - 1) : cut ? size - qlen - 1 : size;
	size_t hlen = cut2 ? size - (size_t)(cut2 + 1 - data) : size;
	/* exact-size heap copies, so ASan sees any read past either end */
	char *q = malloc(qlen ? qlen : 1);
	char *l = malloc(llen ? llen : 1);
	char *h = malloc(hlen ? hlen : 1);

	if (q && l && h) {
		if (qlen)
			memcpy(q, data, qlen);
		if (llen)
			memcpy(l, cut ? cut + 1 : data, llen);
		if (hlen)
			memcpy(h, cut2 ? cut2 + 1 : data, hlen);
		run(q, qlen, l, llen);
		run_cuda(h, hlen);
	}
	free(q);
	free(l);
	free(h);
	return 0;
}
