/* test_nvsmi.c — the nvidia-smi parsers: every fixture in
 * tests/fixtures/nvidia-smi/ (real H200 captures and hand-written ones)
 * with exact values, the tolerances, and malformed output of the commands
 * (--query-gpu, -L, and plain nvidia-smi's "CUDA Version" header).
 * Runs from the repository root. */
#include "engine/nvsmi.c"

#include "harness.h"

#include <stdlib.h>

#define FIX "tests/fixtures/nvidia-smi/"

#define H200_UUID "GPU-0e29b295-590b-c5e1-92a0-ca0d7d4f108b"
#define U1        "GPU-4d1202b0-c722-e113-4623-1bf8da596117"
#define U2        "GPU-f292521c-ac6c-9930-279e-94bf2686cfdd"
#define X16       "0123456789abcdef"
#define N16       "nnnnnnnnnnnnnnnn"
#define UUID63    "GPU-" X16 X16 X16 "0123456789a"
#define NAME95    N16 N16 N16 N16 N16 "nnnnnnnnnnnnnnn"
#define PROFILE31 "1g.10gb.aaaaaaaaaaaaaaaaaaaaaaa"
#define ROW0      "0, " H200_UUID ", NVIDIA H200, 143771 MiB, Disabled\n"

static char text[1 << 16];
static char err[256];
static struct nvsmi_gpu gpus[NVSMI_MAX_GPUS];

/* Reads a fixture into text.  The capture script appended an "rc=N" line
 * (the exit status) to the real samples; that is not nvidia-smi output and
 * is dropped.  Returns the length, or -1 when the file cannot be read. */
static long load(const char *name)
{
	FILE *f = fopen(name, "rb");
	size_t n, start;

	if (!f) {
		fprintf(stderr, "  cannot open %s (run from the repository root)\n", name);
		return -1;
	}
	n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = '\0';
	/* the last non-empty line */
	start = n;
	while (start > 0 && text[start - 1] == '\n')
		start--;
	while (start > 0 && text[start - 1] != '\n')
		start--;
	if (strncmp(text + start, "rc=", 3) == 0) {
		n = start;
		text[n] = '\0';
	}
	return (long)n;
}

static int query(const char *s)
{
	return nvsmi_parse_query(s, strlen(s), gpus, NVSMI_MAX_GPUS, err, sizeof(err));
}

static int query_file(const char *name)
{
	long n = load(name);

	if (n < 0)
		return -2;
	return nvsmi_parse_query(text, (size_t)n, gpus, NVSMI_MAX_GPUS, err, sizeof(err));
}

static int list(const char *s, int ngpus)
{
	return nvsmi_parse_list(s, strlen(s), gpus, ngpus, err, sizeof(err));
}

static int list_file(const char *name, int ngpus)
{
	long n = load(name);

	if (n < 0)
		return -2;
	return nvsmi_parse_list(text, (size_t)n, gpus, ngpus, err, sizeof(err));
}

static int err_has(const char *want)
{
	if (strstr(err, want))
		return 1;
	fprintf(stderr, "  err '%s' does not contain '%s'\n", err, want);
	return 0;
}

static int gpu_is(int i, int index, const char *uuid, const char *name, long long mib, int mig)
{
	const struct nvsmi_gpu *g = &gpus[i];

	if (g->index == index && strcmp(g->uuid, uuid) == 0 && strcmp(g->name, name) == 0 &&
	    g->memory_mib == mib && g->mig_enabled == mig && g->nmig == 0)
		return 1;
	fprintf(stderr, "  gpu[%d] = %d '%s' '%s' %lld mig %d nmig %d\n", i, g->index, g->uuid,
	        g->name, g->memory_mib, g->mig_enabled, g->nmig);
	return 0;
}

static int mig_is(int gi, int k, const char *profile, const char *uuid)
{
	const struct nvsmi_mig *m = &gpus[gi].mig[k];

	if (m->gpu_index == gpus[gi].index && m->index == k && strcmp(m->profile, profile) == 0 &&
	    strcmp(m->uuid, uuid) == 0)
		return 1;
	fprintf(stderr, "  gpu[%d].mig[%d] = gpu %d dev %d '%s' '%s'\n", gi, k, m->gpu_index,
	        m->index, m->profile, m->uuid);
	return 0;
}

TEST(h200_captured)
{
	CHECK(query_file(FIX "query-gpu.csv") == 1);
	CHECK(err[0] == '\0');
	CHECK(gpu_is(0, 0, H200_UUID, "NVIDIA H200", 143771, 0));
	CHECK(list_file(FIX "list.txt", 1) == 0);
	CHECK(gpus[0].nmig == 0);
}

TEST(h200_captured_errors)
{
	CHECK(query_file(FIX "query-bad.txt") == -1);
	CHECK(err_has("Field \"nonexistent_field\" is not a valid field to query."));
	CHECK(err_has("too old"));
	/* more columns than discovery asks for: refused, not half-read */
	CHECK(query_file(FIX "query-full.csv") == -1);
	CHECK(err_has("line 1: header does not name"));
	CHECK(query_file(FIX "nvidia-smi.txt") == -1);
	CHECK(err_has("line 1:"));
	CHECK(query_file(FIX "mig-lgi.txt") == -1);
	CHECK(query(ROW0) == 1);
	CHECK(list_file(FIX "mig-lgi.txt", 1) == -1);
	CHECK(err_has("not a GPU or MIG line: 'No MIG-enabled devices found.'"));
	CHECK(list_file(FIX "nvidia-smi.txt", 1) == -1);
}

TEST(a100x8)
{
	static const char *uuid[8] = {
		"GPU-41ab9259-0637-ac82-026c-a65266b28984",
		"GPU-28ea491b-1e6d-543d-7202-cf486ea62965",
		"GPU-174b7b0d-8087-fded-efbf-c2f9ddcad0ea",
		"GPU-9fa2fb4b-6eb6-19a9-4826-66f16a2e6057",
		"GPU-1f6dfd8f-d7c1-7ca9-f0d5-acb395561690",
		"GPU-bd31fcaa-809c-f274-b0c8-f56958296786",
		"GPU-7f154411-eee5-2e4a-0819-94729ccfa031",
		"GPU-770d5097-0c03-490b-a324-909ffc5be3a2",
	};
	long n;
	int i;

	CHECK(query_file(FIX "a100x8-query.csv") == 8);
	for (i = 0; i < 8; i++)
		CHECK(gpu_is(i, i, uuid[i], "NVIDIA A100-SXM4-80GB", 81920, 0));

	/* a caller with room for fewer is told, not given a silent prefix */
	n = load(FIX "a100x8-query.csv");
	CHECK(nvsmi_parse_query(text, (size_t)n, gpus, 7, err, sizeof(err)) == -1);
	CHECK(err_has("more than 7 GPUs"));
	CHECK(nvsmi_parse_query(text, (size_t)n, gpus, 8, err, sizeof(err)) == 8);
	CHECK(nvsmi_parse_query(text, (size_t)n, gpus, 0, err, sizeof(err)) == -1);
	CHECK(nvsmi_parse_query(text, (size_t)n, NULL, 0, err, sizeof(err)) == -1);
}

TEST(dgx_h100_with_header)
{
	static const char *uuid[8] = {
		"GPU-827c1ac9-e37a-aaad-fbad-7024e78151b0",
		"GPU-d8336094-80c6-f3de-6cf8-d08af921ebae",
		"GPU-797a6124-068d-650e-68b3-07918377879d",
		"GPU-82b686b0-fb87-0691-48f1-2978fdc04ed5",
		"GPU-55c8b99e-05bb-e4cb-8d74-adc1c5d9c114",
		"GPU-467833b3-f847-dbfb-f0a2-2b3930edb25f",
		"GPU-927f7c70-f641-8319-1d3a-45bcb3d2ad6d",
		"GPU-1bf934f6-fe8a-3189-7617-32a8b7e940b7",
	};
	int i;

	CHECK(query_file(FIX "dgx-h100-query.csv") == 8);
	for (i = 0; i < 8; i++)
		CHECK(gpu_is(i, i, uuid[i], "NVIDIA H100 80GB HBM3", 81559, 0));
}

TEST(t4_mig_na)
{
	static const char *uuid[4] = {
		"GPU-59fec4c9-a3af-3fbe-2116-58710eff1424",
		"GPU-4a08e987-2730-1d49-2edf-53e54f4c299f",
		"GPU-1b462b54-5c16-bb55-48aa-5599348021dd",
		"GPU-d982ab72-7609-6e96-26e0-0b2dd23c1730",
	};
	int i;

	CHECK(query_file(FIX "t4x4-query.csv") == 4);
	for (i = 0; i < 4; i++)
		CHECK(gpu_is(i, i, uuid[i], "Tesla T4", 15360, 0));
}

static void check_mixed_a100(const char *const *u0, const char *const *u1)
{
	static const char *p1[3] = { "3g.40gb", "2g.20gb", "1g.10gb" };
	int k;

	CHECK(gpus[0].nmig == 7);
	CHECK(gpus[1].nmig == 3);
	for (k = 0; k < 7; k++)
		CHECK(mig_is(0, k, "1g.10gb", u0[k]));
	for (k = 0; k < 3; k++)
		CHECK(mig_is(1, k, p1[k], u1[k]));
}

TEST(a100_mig)
{
	static const char *u0[7] = {
		"MIG-971c6845-83c4-1b6b-e5be-df9514080042",
		"MIG-1611d957-56c4-cf32-cc5e-a563072475f5",
		"MIG-793309f4-33d4-f23a-97fa-7c2aaf2c25fe",
		"MIG-28fac1d4-c7d8-1bae-ad9b-a2494ced8b3a",
		"MIG-57442b52-f087-3014-57e1-5f93fd61a073",
		"MIG-6ac3a33f-c51c-7d85-2567-9868094d9b2a",
		"MIG-da50029f-6fac-72e7-b4cb-67e8b808bc40",
	};
	static const char *u1[3] = {
		"MIG-1ce2b8dd-8b0f-90cb-e0f8-6fee0a8e44b9",
		"MIG-6f09547c-52cd-ddab-63ce-54ce65199d61",
		"MIG-44a9cea9-e483-0f96-756e-d50fdb822225",
	};

	CHECK(query_file(FIX "a100-mig-query.csv") == 2);
	CHECK(gpu_is(0, 0, U1, "NVIDIA A100-SXM4-80GB", 81920, 1));
	CHECK(gpu_is(1, 1, U2, "NVIDIA A100-SXM4-80GB", 81920, 1));
	CHECK(list_file(FIX "a100-mig-list.txt", 2) == 10);
	CHECK(err[0] == '\0');
	check_mixed_a100(u0, u1);
	/* parsing again replaces the lists rather than appending */
	CHECK(list_file(FIX "a100-mig-list.txt", 2) == 10);
	check_mixed_a100(u0, u1);
	/* a failed parse leaves no MIG device attached */
	CHECK(list("GPU 0: NVIDIA A100-SXM4-80GB (UUID: " U1 ")\n  MIG junk\n", 2) == -1);
	CHECK(gpus[0].nmig == 0 && gpus[1].nmig == 0);
}

TEST(a100_mig_r450)
{
	static const char *u0[7] = {
		"MIG-" U1 "/7/0",  "MIG-" U1 "/8/0",  "MIG-" U1 "/9/0",  "MIG-" U1 "/10/0",
		"MIG-" U1 "/11/0", "MIG-" U1 "/12/0", "MIG-" U1 "/13/0",
	};
	static const char *u1[3] = { "MIG-" U2 "/2/0", "MIG-" U2 "/3/0", "MIG-" U2 "/9/0" };

	CHECK(query_file(FIX "a100-mig-query-r450.csv") == 2);
	CHECK(gpu_is(0, 0, U1, "A100-SXM4-80GB", 81920, 1));
	CHECK(gpu_is(1, 1, U2, "A100-SXM4-80GB", 81920, 1));
	CHECK(list_file(FIX "a100-mig-list-r450.txt", 2) == 10);
	check_mixed_a100(u0, u1);
}

TEST(smi_failures)
{
	CHECK(query_file(FIX "driver-not-loaded.txt") == -1);
	CHECK(err_has("nvidia-smi failed: 'NVIDIA-SMI has failed because it couldn't"));
	CHECK(err_has("driver loaded"));
	CHECK(query_file(FIX "no-devices.txt") == -1);
	CHECK(err_has("'No devices were found'"));
	CHECK(query(ROW0) == 1);
	CHECK(list_file(FIX "driver-not-loaded.txt", 1) == -1);
	CHECK(err_has("NVIDIA-SMI has failed"));
	CHECK(list_file(FIX "no-devices.txt", 1) == -1);
	CHECK(err_has("No devices were found"));
	CHECK(query("Failed to initialize NVML: Driver/library version mismatch\n") == -1);
	CHECK(err_has("reboot"));
	CHECK(query("Unable to determine the device handle for GPU0000:00:06.0: Unknown Error\n") ==
	      -1);
	CHECK(err_has("fallen off the bus"));
}

TEST(empty_is_no_gpus)
{
	CHECK(query("") == 0);
	CHECK(query("\n\n") == 0);
	CHECK(query("\r\n  \n") == 0);
	CHECK(query("index, uuid, name, memory.total [MiB], mig.mode.current\n") == 0);
	CHECK(nvsmi_parse_query(NULL, 0, NULL, 0, err, sizeof(err)) == 0);
	CHECK(nvsmi_parse_list(NULL, 0, NULL, 0, err, sizeof(err)) == 0);
	CHECK(query(ROW0) == 1);
	CHECK(list("", 1) == 0);
}

TEST(tolerated_variants)
{
	/* CRLF, no final newline, trailing blank lines */
	CHECK(query("0, " H200_UUID ", NVIDIA H200, 143771 MiB, Disabled\r\n\r\n\r\n") == 1);
	CHECK(gpu_is(0, 0, H200_UUID, "NVIDIA H200", 143771, 0));
	CHECK(query("0, " H200_UUID ", NVIDIA H200, 143771 MiB, Disabled") == 1);
	CHECK(gpu_is(0, 0, H200_UUID, "NVIDIA H200", 143771, 0));
	/* --format=csv,noheader,nounits; tabs; odd case */
	CHECK(query("3,\t" H200_UUID " ,  NVIDIA H200 NVL ,143771,ENABLED\n") == 1);
	CHECK(gpu_is(0, 3, H200_UUID, "NVIDIA H200 NVL", 143771, 1));
	CHECK(query("0, " H200_UUID ", NVIDIA H200, 143771 MiB, disabled\n") == 1);
	CHECK(gpus[0].mig_enabled == 0);
	/* unknown memory reads as 0, unknown MIG mode as disabled */
	CHECK(query("0, " H200_UUID ", Tesla T4, [N/A], [Not Supported]\n") == 1);
	CHECK(gpu_is(0, 0, H200_UUID, "Tesla T4", 0, 0));
	CHECK(query("0, " H200_UUID ", Tesla T4, N/A, N/A\n") == 1);
	CHECK(gpu_is(0, 0, H200_UUID, "Tesla T4", 0, 0));
	/* header without units, CRLF */
	CHECK(query("index, uuid, name, memory.total, mig.mode.current\r\n" ROW0) == 1);
	/* upper-case hex, indexes out of order */
	CHECK(query("1, GPU-0E29B295-590B-C5E1-92A0-CA0D7D4F108B, NVIDIA H200, 1 MiB, Disabled\n"
	            "0, " H200_UUID ", NVIDIA H200, 2 MiB, Disabled\n") == 2);
	CHECK(gpus[0].index == 1 && gpus[1].index == 0 && gpus[1].memory_mib == 2);
	/* fields exactly at their limits: 63-byte uuid, 95-byte name */
	CHECK(query("0, " UUID63 ", " NAME95 ", 1 MiB, Disabled\n") == 1);
	CHECK(strlen(gpus[0].uuid) == 63 && strlen(gpus[0].name) == 95);
}

TEST(err_buffer)
{
	char small[8];

	CHECK(nvsmi_parse_query("x", 1, gpus, 1, NULL, 0) == -1);
	CHECK(nvsmi_parse_query("x", 1, gpus, 1, small, sizeof(small)) == -1);
	CHECK(strlen(small) == sizeof(small) - 1);
	CHECK(nvsmi_parse_list("x", 1, gpus, 0, small, 1) == -1);
	CHECK(small[0] == '\0');
	/* reasons never echo control bytes */
	CHECK(query("\x1b[2J\x07 bad\n") == -1);
	CHECK(err_has("'?[2J? bad'"));
}

/* a literal with a NUL inside, and its whole length */
#define WITH_NUL(s) s, sizeof(s) - 1

struct bad {
	const char *in;
	size_t len; /* 0: strlen(in) */
	const char *why;
};

TEST(malformed_query)
{
	static const struct bad cases[] = {
		{ "0, " H200_UUID ", NVIDIA H200, 143771 MiB\n", 0, "line 1: too few columns" },
		{ "0, " H200_UUID ", NVIDIA H200, rev 2, 143771 MiB, Disabled\n", 0,
		  "line 1: too many columns" },
		{ ROW0 "0\n", 0, "line 2: too few columns" },
		{ "x, " H200_UUID ", NVIDIA H200, 143771 MiB, Disabled\n", 0,
		  "index 'x' is not a number" },
		{ "-1, " H200_UUID ", NVIDIA H200, 143771 MiB, Disabled\n", 0, "index '-1'" },
		{ "1.5, " H200_UUID ", NVIDIA H200, 143771 MiB, Disabled\n", 0, "index '1.5'" },
		{ ", " H200_UUID ", NVIDIA H200, 143771 MiB, Disabled\n", 0, "index ''" },
		{ "12345678901, " H200_UUID ", NVIDIA H200, 143771 MiB, Disabled\n", 0,
		  "index '12345678901'" },
		{ "0, 0e29b295-590b-c5e1-92a0-ca0d7d4f108b, NVIDIA H200, 143771 MiB, Disabled\n", 0,
		  "is not a GPU UUID" },
		{ "0, gpu-0e29b295-590b-c5e1-92a0-ca0d7d4f108b, NVIDIA H200, 143771 MiB, "
		  "Disabled\n",
		  0, "is not a GPU UUID" },
		{ "0, GPU-, NVIDIA H200, 143771 MiB, Disabled\n", 0, "uuid 'GPU-' is not" },
		{ "0, GPU-0e29 b295, NVIDIA H200, 143771 MiB, Disabled\n", 0, "is not a GPU UUID" },
		{ "0, MIG-0e29b295-590b-c5e1-92a0-ca0d7d4f108b, NVIDIA H200, 143771 MiB, "
		  "Disabled\n",
		  0, "is not a GPU UUID" },
		{ "0, " UUID63 "b, NVIDIA H200, 143771 MiB, Disabled\n", 0,
		  "is too long (64 bytes, at most 63)" },
		{ "0, " H200_UUID ", , 143771 MiB, Disabled\n", 0, "name '' is empty" },
		{ "0, " H200_UUID ", NVIDIA\rH200, 143771 MiB, Disabled\n", 0, "not printable" },
		{ "0, " H200_UUID ", NVIDIA H200 \xc3\xa9, 143771 MiB, Disabled\n", 0,
		  "not printable" },
		{ "0, " H200_UUID ", " NAME95 "n, 143771 MiB, Disabled\n", 0,
		  "is too long (96 bytes, at most 95)" },
		{ "0, " H200_UUID ", NVIDIA H200, 141 GB, Disabled\n", 0, "memory.total '141 GB'" },
		{ "0, " H200_UUID ", NVIDIA H200, MiB, Disabled\n", 0, "memory.total 'MiB'" },
		{ "0, " H200_UUID ", NVIDIA H200, -1 MiB, Disabled\n", 0, "memory.total '-1 MiB'" },
		{ "0, " H200_UUID ", NVIDIA H200, 1e5 MiB, Disabled\n", 0,
		  "memory.total '1e5 MiB'" },
		{ "0, " H200_UUID ", NVIDIA H200, , Disabled\n", 0, "memory.total ''" },
		{ "0, " H200_UUID ", NVIDIA H200, 9999999999999 MiB, Disabled\n", 0,
		  "memory.total" },
		{ "0, " H200_UUID ", NVIDIA H200, 143771 MiB, Pending\n", 0,
		  "mig.mode.current 'Pending'" },
		{ "0, " H200_UUID ", NVIDIA H200, 143771 MiB, \n", 0, "mig.mode.current ''" },
		{ ROW0
		  "0, GPU-1e29b295-590b-c5e1-92a0-ca0d7d4f108b, NVIDIA H200, 1 MiB, Disabled\n",
		  0, "line 2: GPU index 0 appears twice" },
		{ ROW0 "1, " H200_UUID ", NVIDIA H200, 143771 MiB, Disabled\n", 0,
		  "line 2: GPU uuid '" H200_UUID "' appears twice" },
		{ WITH_NUL("0, " H200_UUID ", NVIDIA\0H200, 143771 MiB, Disabled\n"),
		  "NUL byte at offset 51" },
		{ ROW0 "\n" ROW0, 0, "line 2: blank line before a row" },
		{ "\n" ROW0, 0, "line 1: blank line before a row" },
		{ ROW0 "index, uuid, name, memory.total [MiB], mig.mode.current\n", 0,
		  "line 2: index 'index' is not a number" },
		{ "index, uuid, name, memory.used [MiB], mig.mode.current\n" ROW0, 0,
		  "line 1: header does not name" },
		{ "index, uuid, name, memory.total [MiB]\n", 0, "header does not name" },
		{ "GPU 0: NVIDIA H200 (UUID: " H200_UUID ")\n", 0, "too few columns" },
	};
	size_t i;
	int rc;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t len = cases[i].len ? cases[i].len : strlen(cases[i].in);

		rc = nvsmi_parse_query(cases[i].in, len, gpus, NVSMI_MAX_GPUS, err, sizeof(err));
		if (rc != -1 || !strstr(err, cases[i].why)) {
			fprintf(stderr, "  case %zu: rc %d err '%s', want -1 '%s'\n", i, rc, err,
			        cases[i].why);
			CHECK(0);
		}
	}
}

TEST(too_many_gpus)
{
	static char big[NVSMI_MAX_GPUS * 2 * 80];
	static struct nvsmi_gpu many[NVSMI_MAX_GPUS + 8];
	size_t off = 0, at_max = 0;
	int i;

	for (i = 0; i <= NVSMI_MAX_GPUS; i++) {
		if (i == NVSMI_MAX_GPUS)
			at_max = off;
		off += (size_t)snprintf(
		        big + off, sizeof(big) - off,
		        "%d, GPU-%08x-0000-0000-0000-000000000000, Tesla T4, 15360 MiB, "
		        "[N/A]\n",
		        i, (unsigned)i);
	}
	/* NVSMI_MAX_GPUS caps a larger max too */
	CHECK(nvsmi_parse_query(big, off, many, NVSMI_MAX_GPUS + 8, err, sizeof(err)) == -1);
	CHECK(err_has("more than 64 GPUs"));
	/* exactly NVSMI_MAX_GPUS: all of them */
	CHECK(nvsmi_parse_query(big, at_max, many, NVSMI_MAX_GPUS, err, sizeof(err)) ==
	      NVSMI_MAX_GPUS);
	CHECK(many[63].index == 63 &&
	      strcmp(many[63].uuid, "GPU-0000003f-0000-0000-0000-000000000000") == 0);
}

/* Two GPUs for the -L cases: 0 with MIG, 1 without. */
#define Q2                                                       \
	"0, " U1 ", NVIDIA A100-SXM4-80GB, 81920 MiB, Enabled\n" \
	"1, " U2 ", NVIDIA A100-SXM4-80GB, 81920 MiB, Disabled\n"
#define G0  "GPU 0: NVIDIA A100-SXM4-80GB (UUID: " U1 ")\n"
#define G1  "GPU 1: NVIDIA A100-SXM4-80GB (UUID: " U2 ")\n"
#define MIG "MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3"

TEST(list_spacing_and_forms)
{
	CHECK(query(Q2) == 2);
	/* tight spacing, tabs, CRLF, a name with parentheses */
	CHECK(list("GPU 0: NVIDIA A100 (rev 2) (UUID: " U1 ")\r\n"
	           "MIG 1g.10gb Device 0: (UUID: " MIG "0)\r\n"
	           "\tMIG  1c.2g.20gb\tDevice\t1:  (UUID: " MIG "1)\r\n" G1 "\r\n",
	           2) == 2);
	CHECK(gpus[0].nmig == 2 && gpus[1].nmig == 0);
	CHECK(mig_is(0, 0, "1g.10gb", MIG "0"));
	CHECK(mig_is(0, 1, "1c.2g.20gb", MIG "1"));
	/* the H200's 1g.18gb, newest form */
	CHECK(list(G0 "  MIG 1g.18gb     Device  0: (UUID: "
	              "MIG-5c2e0a3b-1d7f-5e8a-9b4c-3f2d1e0a9b8c)\n",
	           2) == 1);
	CHECK(mig_is(0, 0, "1g.18gb", "MIG-5c2e0a3b-1d7f-5e8a-9b4c-3f2d1e0a9b8c"));
	/* the longest profile that fits */
	CHECK(list(G0 "MIG " PROFILE31 " Device 6: (UUID: " MIG "0)\n", 2) == 1);
	CHECK(strlen(gpus[0].mig[0].profile) == 31 && gpus[0].mig[0].index == 6);
	/* GPU lines for only some GPUs, and none at all */
	CHECK(list(G1, 2) == 0);
	CHECK(list("\n", 2) == 0);
}

TEST(malformed_list)
{
	static const struct bad cases[] = {
		{ "  MIG 1g.10gb     Device  0: (UUID: " MIG "0)\n" G0, 0,
		  "line 1: MIG device before any GPU line" },
		{ "GPU 0: NVIDIA A100-SXM4-80GB (UUID: " U2 ")\n", 0,
		  "line 1: GPU 0 has uuid '" U2 "', the query said '" U1 "'" },
		{ "GPU 2: NVIDIA A100-SXM4-80GB (UUID: " U1 ")\n", 0,
		  "line 1: GPU 2 is not in the --query-gpu output" },
		{ G0 G1 G0, 0, "line 3: GPU 0 appears twice" },
		{ G0 "  MIG 1g.10gb Device 0: (UUID: " MIG "0)\n"
		     "  MIG 1g.10gb Device 1: (UUID: " MIG "1)\n"
		     "  MIG 1g.10gb Device 2: (UUID: " MIG "2)\n"
		     "  MIG 1g.10gb Device 3: (UUID: " MIG "3)\n"
		     "  MIG 1g.10gb Device 4: (UUID: " MIG "4)\n"
		     "  MIG 1g.10gb Device 5: (UUID: " MIG "5)\n"
		     "  MIG 1g.10gb Device 6: (UUID: " MIG "6)\n"
		     "  MIG 1g.10gb Device 7: (UUID: " MIG "7)\n",
		  0, "line 9: GPU 0 has more than 7 MIG devices" },
		{ G1 "  MIG 1g.10gb Device 0: (UUID: " MIG "0)\n", 0,
		  "line 2: GPU 1 lists MIG devices but its MIG mode is disabled" },
		{ G0 "  MIG 1g.10gb Device 0: (UUID: " MIG "0)\n"
		     "  MIG 1g.10gb Device 1: (UUID: " MIG "0)\n",
		  0, "line 3: MIG uuid '" MIG "0' appears twice" },
		{ G0 "  MIG 1g.10gb Device 0: (UUID: " MIG "0)\n"
		     "  MIG 1g.10gb Device 0: (UUID: " MIG "1)\n",
		  0, "line 3: GPU 0 has MIG device 0 twice" },
		{ G0 "  MIG 1g.10gb Device 0: (UUID: MIG-" U2 "/7/0)\n", 0,
		  "names another GPU than 0" },
		{ G0 "  MIG 1g.10gb Device 0: (UUID: MIG-" U1 "/7)\n", 0, "is not a MIG UUID" },
		{ G0 "  MIG 1g.10gb Device 0: (UUID: MIG-" U1 "/7/x)\n", 0, "is not a MIG UUID" },
		{ G0 "  MIG 1g.10gb Device 0: (UUID: MIG-" U1 "//0)\n", 0, "is not a MIG UUID" },
		{ G0 "  MIG 1g.10gb Device 0: (UUID: " U1 ")\n", 0, "is not a MIG UUID" },
		{ G0 "  MIG 1g.10gb Device 0: (UUID: MIG-)\n", 0, "is not a MIG UUID" },
		{ G0 "  MIG 1g.10gb Device 0: (UUID: MIG-" X16 X16 X16 "0123456789ab)\n", 0,
		  "too long (64 bytes, at most 63)" },
		{ G0 "  MIG 1g.10gb,x Device 0: (UUID: " MIG "0)\n", 0, "profile '1g.10gb,x'" },
		{ G0 "  MIG " PROFILE31 "a Device 0: (UUID: " MIG "0)\n", 0,
		  "MIG profile '" PROFILE31 "a' is not valid" },
		{ G0 "  MIG 1g.10gb Device 0: (UUID: " MIG "0) \x01\n", 0,
		  "not a GPU or MIG line" },
		{ G0 "  MIG 1g.10gb Device x: (UUID: " MIG "0)\n", 0,
		  "line 2: not a GPU or MIG line" },
		{ G0 "  MIG 1g.10gb Device 0: (UUID: " MIG "0\n", 0, "not a GPU or MIG line" },
		{ "GPU 0: (UUID: " U1 ")\n", 0, "line 1: not a GPU or MIG line" },
		{ "GPU 0: NVIDIA A100-SXM4-80GB\n", 0, "not a GPU or MIG line" },
		{ "GPU0: NVIDIA A100-SXM4-80GB (UUID: " U1 ")\n", 0, "not a GPU or MIG line" },
		{ G0 "\n" G1, 0, "line 2: blank line" },
		{ WITH_NUL(G0 "  MIG 1g.10gb Device 0: (UUID: " MIG "0)\0\n"),
		  "NUL byte at offset 150" },
	};
	size_t i;
	int rc;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t len = cases[i].len ? cases[i].len : strlen(cases[i].in);

		CHECK(query(Q2) == 2);
		rc = nvsmi_parse_list(cases[i].in, len, gpus, 2, err, sizeof(err));
		if (rc != -1 || !strstr(err, cases[i].why) || gpus[0].nmig || gpus[1].nmig) {
			fprintf(stderr, "  case %zu: rc %d err '%s' nmig %d, want -1 '%s'\n", i, rc,
			        err, gpus[0].nmig, cases[i].why);
			CHECK(0);
		}
	}
	CHECK(nvsmi_parse_list(G0, strlen(G0), gpus, NVSMI_MAX_GPUS + 1, err, sizeof(err)) == -1);
}

static int cuda_v;

static int cuda(const char *s)
{
	cuda_v = -7;
	return nvsmi_parse_cuda(s, strlen(s), &cuda_v, err, sizeof(err));
}

static int cuda_file(const char *name)
{
	long n = load(name);

	if (n < 0)
		return -2;
	cuda_v = -7;
	return nvsmi_parse_cuda(text, (size_t)n, &cuda_v, err, sizeof(err));
}

TEST(cuda_header)
{
	/* the real H200 capture: driver 580, CUDA 13.0 */
	CHECK(cuda_file(FIX "nvidia-smi.txt") == 1);
	CHECK(cuda_v == 13000);
	CHECK(err[0] == '\0');
	CHECK(cuda_file(FIX "a100x8-smi.txt") == 1);
	CHECK(cuda_v == 12020);
	CHECK(cuda_file(FIX "a100-mig-smi.txt") == 1);
	CHECK(cuda_v == 12040);
	/* the narrower header of R470 drivers, and two-digit minors */
	CHECK(cuda("| NVIDIA-SMI 470.57.02    Driver Version: 470.57.02    CUDA Version: 11.4     "
	           "|\n") == 1);
	CHECK(cuda_v == 11040);
	CHECK(cuda("| NVIDIA-SMI 999.1  Driver Version: 999.1  CUDA Version: 99.99 |") == 1);
	CHECK(cuda_v == 99990);
	CHECK(cuda("CUDA Version: 12.4") == 1);
	CHECK(cuda_v == 12040);
	CHECK(cuda("x\r\n| NVIDIA-SMI 1  Driver Version: 1  CUDA Version:\t12.6|\r\n") == 1);
	CHECK(cuda_v == 12060);
	/* vGPU guests and some containers say N/A: unknown, not an error */
	CHECK(cuda("| NVIDIA-SMI 550.54.15  Driver Version: 550.54.15  CUDA Version: N/A  |\n") ==
	      0);
	CHECK(cuda_v == 0);
	CHECK(err[0] == '\0');
	/* a GPU fallen off the bus above a header that is still right */
	CHECK(cuda("Unable to determine the device handle for GPU0000:00:06.0: Unknown Error\n"
	           "| NVIDIA-SMI 550.54.15  Driver Version: 550.54.15  CUDA Version: 12.4 |\n") ==
	      1);
	CHECK(cuda_v == 12040);
}

TEST(cuda_header_refused)
{
	CHECK(cuda_file(FIX "driver-not-loaded.txt") == -1);
	CHECK(err_has("nvidia-smi failed: 'NVIDIA-SMI has failed"));
	CHECK(cuda_v == 0);
	CHECK(cuda_file(FIX "no-devices.txt") == -1);
	CHECK(err_has("No devices were found"));
	/* the other commands' outputs have no header */
	CHECK(cuda_file(FIX "query-gpu.csv") == -1);
	CHECK(err_has("no 'CUDA Version' header"));
	CHECK(cuda_file(FIX "list.txt") == -1);
	CHECK(cuda("") == -1);
	CHECK(err_has("no 'CUDA Version' header"));
	CHECK(nvsmi_parse_cuda(NULL, 0, NULL, err, sizeof(err)) == -1);
	/* malformed versions */
	CHECK(cuda("CUDA Version: 12") == -1);
	CHECK(err_has("line 1: 'CUDA Version' is not major.minor"));
	CHECK(cuda("CUDA Version: 12.") == -1);
	CHECK(cuda("CUDA Version: .4") == -1);
	CHECK(cuda("CUDA Version: 12.4.1") == -1);
	CHECK(cuda("CUDA Version: 12.4x |") == -1);
	CHECK(cuda("CUDA Version: 0.9") == -1);
	CHECK(cuda("CUDA Version: 100.0") == -1);
	CHECK(cuda("CUDA Version: 12.100") == -1);
	CHECK(cuda("CUDA Version: -12.4") == -1);
	CHECK(cuda("CUDA Version: 1234567.4") == -1);
	CHECK(cuda("CUDA Version: N/Ax") == -1);
	CHECK(cuda("CUDA Version:") == -1);
	CHECK(cuda("CUDA Version : 12.4") == -1); /* -q's layout, not the header's */
	CHECK(err_has("no 'CUDA Version' header"));
	/* two headers: which one? */
	CHECK(cuda("CUDA Version: 12.4\nCUDA Version: 12.4\n") == -1);
	CHECK(err_has("line 2: a second 'CUDA Version' (the first on line 1)"));
	/* a NUL byte */
	CHECK(nvsmi_parse_cuda("CUDA Version: 12.4\0", 19, &cuda_v, err, sizeof(err)) == -1);
	CHECK(err_has("NUL byte at offset 18"));
	CHECK(cuda_v == 0);
	/* a quoted line has no control bytes */
	CHECK(cuda("CUDA Version: 1\x01.2") == -1);
	CHECK(err_has("'CUDA Version: 1?.2'"));
	/* the error buffer may be small or missing */
	CHECK(nvsmi_parse_cuda("CUDA Version: x", 15, &cuda_v, NULL, 0) == -1);
	CHECK(nvsmi_parse_cuda("CUDA Version: x", 15, &cuda_v, err, 4) == -1);
	CHECK(strlen(err) == 3);
}

/* the sampler's utilisation query: the stand-in's fixtures and variants */
TEST(util_query)
{
	static struct nvsmi_util u[NVSMI_MAX_GPUS];
	long n = load(FIX "a100x8-util.csv");
	const char *hdr =
	        "uuid, utilization.gpu [%], memory.used [MiB]\n" U1 ", 12 %, 100 MiB\r\n\n";
	const char *s;

	CHECK(nvsmi_parse_util(text, (size_t)n, u, NVSMI_MAX_GPUS, err, sizeof(err)) == 8);
	CHECK(strcmp(u[0].uuid, "GPU-41ab9259-0637-ac82-026c-a65266b28984") == 0);
	CHECK(u[0].util_pct == 97 && u[0].mem_used_mib == 61234);
	CHECK(u[1].util_pct == 0 && u[1].mem_used_mib == 0);
	CHECK(nvsmi_parse_util(text, (size_t)n, u, 7, err, sizeof(err)) == -1);
	CHECK(err_has("more than 7 GPUs"));
	/* MIG mode: no whole-GPU utilisation */
	n = load(FIX "a100-mig-util.csv");
	CHECK(nvsmi_parse_util(text, (size_t)n, u, NVSMI_MAX_GPUS, err, sizeof(err)) == 2);
	CHECK(u[0].util_pct == -1 && u[0].mem_used_mib == 11264);
	CHECK(nvsmi_parse_util(hdr, strlen(hdr), u, NVSMI_MAX_GPUS, err, sizeof(err)) == 1);
	CHECK(u[0].util_pct == 12 && u[0].mem_used_mib == 100);
	CHECK(nvsmi_parse_util("", 0, u, NVSMI_MAX_GPUS, err, sizeof(err)) == 0);
	s = U1 ", 101, 5\n";
	CHECK(nvsmi_parse_util(s, strlen(s), u, NVSMI_MAX_GPUS, err, sizeof(err)) == -1);
	CHECK(err_has("not a percentage"));
	s = U1 ", 5, 5\n" U1 ", 6, 6\n";
	CHECK(nvsmi_parse_util(s, strlen(s), u, NVSMI_MAX_GPUS, err, sizeof(err)) == -1);
	CHECK(err_has("appears twice"));
	s = "MIG-abc, 5, 5\n";
	CHECK(nvsmi_parse_util(s, strlen(s), u, NVSMI_MAX_GPUS, err, sizeof(err)) == -1);
	CHECK(err_has("not a GPU UUID"));
	s = U1 ", 5\n";
	CHECK(nvsmi_parse_util(s, strlen(s), u, NVSMI_MAX_GPUS, err, sizeof(err)) == -1);
	CHECK(err_has("three columns"));
	n = load(FIX "driver-not-loaded.txt");
	CHECK(nvsmi_parse_util(text, (size_t)n, u, NVSMI_MAX_GPUS, err, sizeof(err)) == -1);
	CHECK(err_has("nvidia-smi failed"));
}

/* the same from a DCGM exporter */
TEST(dcgm_exporter)
{
	static struct nvsmi_util u[NVSMI_MAX_GPUS];
	long n = load(FIX "dcgm-exporter.txt");
	const char *s;

	CHECK(nvsmi_parse_dcgm(text, (size_t)n, u, NVSMI_MAX_GPUS, err, sizeof(err)) == 2);
	CHECK(strcmp(u[0].uuid, "GPU-41ab9259-0637-ac82-026c-a65266b28984") == 0);
	CHECK(u[0].util_pct == 97 && u[0].mem_used_mib == 61234);
	CHECK(u[1].util_pct == 0 && u[1].mem_used_mib == 0);
	CHECK(nvsmi_parse_dcgm(text, (size_t)n, u, 1, err, sizeof(err)) == -1);
	CHECK(err_has("more than 1 GPUs"));
	s = "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 5\n";
	CHECK(nvsmi_parse_dcgm(s, strlen(s), u, NVSMI_MAX_GPUS, err, sizeof(err)) == -1);
	CHECK(err_has("no GPU UUID"));
	s = "DCGM_FI_DEV_GPU_UTIL{UUID=\"" U1 "\"} 101\n";
	CHECK(nvsmi_parse_dcgm(s, strlen(s), u, NVSMI_MAX_GPUS, err, sizeof(err)) == -1);
	s = "DCGM_FI_DEV_GPU_UTIL{UUID=\"" U1 "\"} 45.6 1700000000\n";
	CHECK(nvsmi_parse_dcgm(s, strlen(s), u, NVSMI_MAX_GPUS, err, sizeof(err)) == 1);
	CHECK(u[0].util_pct == 46 && u[0].mem_used_mib == -1);
	CHECK(nvsmi_parse_dcgm("", 0, u, NVSMI_MAX_GPUS, err, sizeof(err)) == 0);
}

int main(void)
{
	RUN(h200_captured);
	RUN(h200_captured_errors);
	RUN(a100x8);
	RUN(dgx_h100_with_header);
	RUN(t4_mig_na);
	RUN(a100_mig);
	RUN(a100_mig_r450);
	RUN(smi_failures);
	RUN(empty_is_no_gpus);
	RUN(tolerated_variants);
	RUN(err_buffer);
	RUN(malformed_query);
	RUN(too_many_gpus);
	RUN(list_spacing_and_forms);
	RUN(malformed_list);
	RUN(cuda_header);
	RUN(cuda_header_refused);
	RUN(util_query);
	RUN(dcgm_exporter);
	return harness_done("test_nvsmi");
}
