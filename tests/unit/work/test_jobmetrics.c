/* test_jobmetrics.c — the collector's pure parts: scanning a file's new
 * bytes into points (complete lines only, line numbers as steps, long
 * lines skipped, the point cap) and memory from an engine stats document. */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "harness.h"
#include "work/jobmetrics.h"

static char *out;
static size_t out_len, out_cap;
static long points;
static long long lines;

static long scan(const char *s, int log, int last, long max)
{
	out_len = 0;
	points = 0;
	if (out)
		out[0] = '\0';
	return jobmetrics_scan(s, strlen(s), log, last, &lines, &out, &out_len, &out_cap, &points,
	                       max);
}

TEST(log_lines)
{
	const char *s =
	        "hello\nGPUCLOUD_METRIC {\"step\":5,\"loss\":0.5}\nGPUCLOUD_METRIC {\"acc\":1}\n"
	        "GPUCLOUD_METRIC {\"loss\":NaN}\npartial GPUCLOUD_METRIC {\"x\":1}";
	lines = 0;
	CHECK(scan(s, 1, 0, 100) ==
	      (long)(strlen(s) - strlen("partial GPUCLOUD_METRIC {\"x\":1}")));
	CHECK(lines == 4);
	CHECK(points == 2);
	CHECK_STR(out, "{\"n\":\"loss\",\"s\":5,\"v\":0.5},{\"n\":\"acc\",\"s\":3,\"v\":1}");
	/* the end of the file of an ended job: the last line counts too */
	lines = 4;
	CHECK(scan("partial GPUCLOUD_METRIC {\"x\":1}", 1, 1, 100) == 31);
	CHECK(lines == 5);
	CHECK_STR(out, "{\"n\":\"x\",\"s\":5,\"v\":1}");
}

TEST(jsonl_lines)
{
	const char *s = "{\"a\":1,\"b\":2}\nGPUCLOUD_METRIC {\"c\":1}\n{\"d\":-0.25}\n";

	lines = 0;
	CHECK(scan(s, 0, 0, 100) == (long)strlen(s));
	CHECK(lines == 3 && points == 3);
	CHECK_STR(out, "{\"n\":\"a\",\"s\":1,\"v\":1},{\"n\":\"b\",\"s\":1,\"v\":2},"
	               "{\"n\":\"d\",\"s\":3,\"v\":-0.25}");
}

TEST(caps)
{
	char *big = malloc(JOBMETRICS_LINE_MAX + 100);

	/* the point cap stops before the line that would pass it */
	lines = 0;
	CHECK(scan("{\"a\":1,\"b\":2}\n{\"c\":3,\"d\":4}\n", 0, 0, 3) == 14);
	CHECK(points == 2 && lines == 1);
	/* a line over the limit without its end yet: consumed, not counted */
	memset(big, 'x', JOBMETRICS_LINE_MAX + 10);
	big[JOBMETRICS_LINE_MAX + 10] = '\0';
	lines = 0;
	CHECK(scan(big, 0, 0, 100) == JOBMETRICS_LINE_MAX + 10);
	CHECK(lines == 0 && points == 0);
	/* with its end: skipped, counted */
	big[JOBMETRICS_LINE_MAX + 5] = '\n';
	big[JOBMETRICS_LINE_MAX + 6] = '\0';
	CHECK(scan(big, 0, 0, 100) == JOBMETRICS_LINE_MAX + 6);
	CHECK(lines == 1 && points == 0);
	/* a short partial line waits */
	CHECK(scan("{\"a\":1}", 0, 0, 100) == 0);
	free(big);
}

TEST(memory)
{
	json_t *v2 = json_loads(
	        "{\"memory_stats\":{\"usage\":1000,\"stats\":{\"inactive_file\":300}}}", 0, NULL);
	json_t *v1 = json_loads(
	        "{\"memory_stats\":{\"usage\":1000,\"stats\":{\"total_inactive_file\":100}}}", 0,
	        NULL);
	json_t *none = json_loads("{\"memory_stats\":{}}", 0, NULL);
	json_t *odd = json_loads(
	        "{\"memory_stats\":{\"usage\":10,\"stats\":{\"inactive_file\":50}}}", 0, NULL);

	CHECK(jobmetrics_mem_bytes(v2) == 700);
	CHECK(jobmetrics_mem_bytes(v1) == 900);
	CHECK(jobmetrics_mem_bytes(none) == -1);
	CHECK(jobmetrics_mem_bytes(NULL) == -1);
	CHECK(jobmetrics_mem_bytes(odd) == 10);
	json_decref(v2);
	json_decref(v1);
	json_decref(none);
	json_decref(odd);
}

int main(void)
{
	RUN(log_lines);
	RUN(jsonl_lines);
	RUN(caps);
	RUN(memory);
	free(out);
	return harness_done("test_jobmetrics");
}
