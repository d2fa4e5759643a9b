/* test_metricline.c — the metric line parser: what is a metric, what not. */
#include <string.h>

#include "harness.h"
#include "work/metricline.c"

static struct metricline m;

static int json(const char *s)
{
	return metricline_parse_json(s, strlen(s), &m);
}

static int logline(const char *s)
{
	return metricline_parse_log(s, strlen(s), &m);
}

TEST(objects)
{
	CHECK(json("{\"step\":10,\"loss\":0.42}") == 1);
	CHECK(m.has_step && m.step == 10);
	CHECK_STR(m.v[0].name, "loss");
	CHECK(m.v[0].value == 0.42);
	CHECK(json("  { \"loss\" : -1.5e-3 , \"val/acc\":1, \"lr_0.x-y\": 0 }\r\n") == 3);
	CHECK(!m.has_step);
	CHECK(m.v[0].value == -1.5e-3 && m.v[1].value == 1 && m.v[2].value == 0);
	CHECK_STR(m.v[2].name, "lr_0.x-y");
	CHECK(json("{\"step\": 1e3, \"a\": 2}") == 1 && m.step == 1000);
	CHECK(json("{\"step\": 0, \"a\": 1E+300}") == 1 && m.step == 0);
	CHECK(json("{\"step\": 9007199254740991, \"a\": 1}") == 1);
}

TEST(rejected)
{
	const char *bad[] = {
		"",
		"{}",
		"{\"step\": 3}",   /* nothing to report */
		"{\"loss\": NaN}", /* not JSON */
		"{\"loss\": Infinity}",
		"{\"loss\": -Infinity}",
		"{\"loss\": 1e999}",   /* overflows a double */
		"{\"loss\": 2e300}",   /* beyond the bound */
		"{\"loss\": \"0.5\"}", /* a string */
		"{\"loss\": true}",
		"{\"loss\": null}",
		"{\"loss\": [1]}", /* nested */
		"{\"loss\": {\"a\": 1}}",
		"{\"a b\": 1}",      /* a name outside the alphabet */
		"{\"l\\u0073\": 1}", /* escapes */
		"{\"\": 1}",
		"{\"a\": 1, \"a\": 2}", /* twice */
		"{\"step\": 1, \"step\": 2, \"a\": 1}",
		"{\"step\": -1, \"a\": 1}",
		"{\"step\": 1.5, \"a\": 1}",
		"{\"step\": 9007199254740993, \"a\": 1}",
		"{\"a\": 1,}",
		"{\"a\": 01}",
		"{\"a\": .5}",
		"{\"a\": 1.}",
		"{\"a\": +1}",
		"{\"a\": 1} x", /* trailing bytes */
		"{\"a\": 1",
		"[1]",
		"{\"a\": 1}{\"b\": 2}",
	};
	char name[80];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (json(bad[i]) != -1)
			fprintf(stderr, "accepted: %s\n", bad[i]);
		CHECK(json(bad[i]) == -1);
	}
	/* 64-byte names pass, 65 do not; 32 values pass, 33 do not */
	memset(name, 'x', sizeof(name));
	{
		char buf[200];
		snprintf(buf, sizeof(buf), "{\"%.64s\": 1}", name);
		CHECK(json(buf) == 1);
		snprintf(buf, sizeof(buf), "{\"%.65s\": 1}", name);
		CHECK(json(buf) == -1);
	}
	{
		char buf[1000];
		size_t o = 0;
		o += (size_t)snprintf(buf + o, sizeof(buf) - o, "{");
		for (int i = 0; i < 33; i++)
			o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%s\"m%d\": %d",
			                      i ? "," : "", i, i);
		snprintf(buf + o, sizeof(buf) - o, "}");
		CHECK(json(buf) == -1);
		buf[strlen(buf) - strlen(",\"m32\": 32}")] = '\0';
		strncat(buf, "}", sizeof(buf) - strlen(buf) - 1);
		CHECK(json(buf) == 32);
		CHECK(m.v[31].value == 31);
	}
	/* a number token over 64 bytes */
	CHECK(json("{\"a\": "
	           "0.00000000000000000000000000000000000000000000000000000000000000001}") == -1);
}

TEST(log_lines)
{
	CHECK(logline("GPUCLOUD_METRIC {\"step\":1,\"loss\":2}\n") == 1);
	CHECK(m.step == 1 && m.v[0].value == 2);
	CHECK(logline("2026-01-01 12:00 INFO GPUCLOUD_METRIC\t{\"acc\":0.5}") == 1);
	CHECK(logline("GPUCLOUD_METRIC{\"acc\":0.5}") == -1);
	CHECK(logline("GPUCLOUD_METRIC") == -1);
	CHECK(logline("GPUCLOUD_METRIC ") == -1);
	CHECK(logline("GPUCLOUD_METRIC {\"acc\":0.5} and more") == -1);
	CHECK(logline("epoch 1 loss 0.5") == -1);
	CHECK(logline("") == -1);
}

int main(void)
{
	RUN(objects);
	RUN(rejected);
	RUN(log_lines);
	return harness_done("test_metricline");
}
