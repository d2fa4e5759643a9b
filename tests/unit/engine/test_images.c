/* test_images.c — the pure parts of images.c: the engine's pull/push
 * progress stream (a real capture from the world's engine, cut at every
 * byte), error lines, CUDA versions and image references. */
#include "engine/images.c"

#include "harness.h"

#include <stdio.h>
#include <stdlib.h>

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)n + 1);
	if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	if (buf)
		buf[n] = '\0';
	*len = (size_t)n;
	return buf;
}

/* Feeds buf in pieces of `step` bytes, as curl would, keeping what a call
 * did not consume; records the percent after each piece. */
static int feed_cut(struct images_progress *p, const char *buf, size_t len, size_t step, int *pcts,
                    int maxp)
{
	char *pend = malloc(len + 1);
	size_t have = 0, off = 0;
	int np = 0;

	while (off < len) {
		size_t n = len - off < step ? len - off : step;
		long used;
		memcpy(pend + have, buf + off, n);
		have += n;
		off += n;
		used = images_progress_feed(p, pend, have);
		if (used < 0) {
			free(pend);
			return -1;
		}
		memmove(pend, pend + used, have - (size_t)used);
		have -= (size_t)used;
		if (np < maxp)
			pcts[np++] = images_progress_percent(p);
	}
	free(pend);
	return np;
}

TEST(test_real_pull_stream)
{
	size_t len;
	char *buf = slurp("tests/fixtures/pull/pytorch-3-layers.jsonl", &len);
	static struct images_progress p, q;
	int pcts[4096], np, i, rising = 1, mid = 0;

	CHECK(buf != NULL);
	if (!buf)
		return;
	memset(&p, 0, sizeof(p));
	np = feed_cut(&p, buf, len, len, pcts, 4096);
	CHECK(np == 1);
	CHECK(p.nlayers == 3);
	CHECK(!p.failed);
	CHECK(images_progress_percent(&p) == 100);
	CHECK(p.lines == 26);
	/* byte by byte: same end, percent never goes down, passes through
	 * values between 0 and 100 */
	memset(&q, 0, sizeof(q));
	np = feed_cut(&q, buf, len, 1, pcts, 4096);
	CHECK(np == (int)len || np == 4096);
	CHECK(q.nlayers == 3 && images_progress_percent(&q) == 100 && q.lines == 26);
	for (i = 1; i < np; i++) {
		if (pcts[i] < pcts[i - 1])
			rising = 0;
		if (pcts[i] > 0 && pcts[i] < 100)
			mid = 1;
	}
	CHECK(rising);
	CHECK(mid);
	free(buf);
}

TEST(test_error_line)
{
	static struct images_progress p;
	const char *s = "{\"status\":\"Pulling from nvidia/x\",\"id\":\"1\"}\n"
	                "{\"errorDetail\":{\"message\":\"unauthorized: authentication "
	                "required\"},\"error\":\"unauthorized: authentication required\"}\n";

	memset(&p, 0, sizeof(p));
	CHECK(images_progress_feed(&p, s, strlen(s)) == (long)strlen(s));
	CHECK(p.failed);
	CHECK_STR(p.error, "unauthorized: authentication required");
	CHECK(p.nlayers == 0); /* "Pulling from" is not a layer */
	CHECK(images_progress_percent(&p) == 0);

	memset(&p, 0, sizeof(p));
	s = "{\"errorDetail\":{\"message\":\"manifest unknown\"}}\n";
	images_progress_feed(&p, s, strlen(s));
	CHECK(p.failed);
	CHECK_STR(p.error, "manifest unknown");
}

TEST(test_partial_and_garbage)
{
	static struct images_progress p;
	const char *s = "not json\n\n[1,2]\n{\"status\":\"Downloading\",\"id\":\"a\","
	                "\"progressDetail\":{\"current\":50,\"total\":100}}\n{\"status\":";
	long used;
	char *big;

	memset(&p, 0, sizeof(p));
	used = images_progress_feed(&p, s, strlen(s));
	CHECK(used == (long)(strstr(s, "{\"status\":\"Downloading") - s) +
	                      (long)strlen("{\"status\":\"Downloading\",\"id\":\"a\","
	                                   "\"progressDetail\":{\"current\":50,\"total\":100}}\n"));
	CHECK(p.nlayers == 1);
	CHECK(images_progress_percent(&p) == 35); /* half downloaded: 0.7 * 0.5 */
	CHECK(!p.failed);
	/* an endless line is an error, not a buffer that grows */
	big = malloc(IMAGES_LINE_MAX + 2);
	memset(big, 'x', IMAGES_LINE_MAX + 1);
	CHECK(images_progress_feed(&p, big, IMAGES_LINE_MAX + 1) == -1);
	CHECK(images_progress_feed(&p, big, IMAGES_LINE_MAX) == 0);
	free(big);
}

TEST(test_push_stream)
{
	static struct images_progress p;
	const char *s =
	        "{\"status\":\"The push refers to repository [127.0.0.1:5055/u/x]\"}\n"
	        "{\"status\":\"Preparing\",\"progressDetail\":{},\"id\":\"l1\"}\n"
	        "{\"status\":\"Preparing\",\"progressDetail\":{},\"id\":\"l2\"}\n"
	        "{\"status\":\"Layer already exists\",\"progressDetail\":{},\"id\":\"l1\"}\n"
	        "{\"status\":\"Pushing\",\"progressDetail\":{\"current\":10,\"total\":20},"
	        "\"id\":\"l2\"}\n";

	memset(&p, 0, sizeof(p));
	images_progress_feed(&p, s, strlen(s));
	CHECK(p.nlayers == 2);
	CHECK(images_progress_percent(&p) == 67); /* (1 + 0.35) / 2 */
	s = "{\"status\":\"Pushed\",\"progressDetail\":{},\"id\":\"l2\"}\n"
	    "{\"status\":\"x: digest: sha256:ab size: 1\"}\n";
	images_progress_feed(&p, s, strlen(s));
	CHECK(images_progress_percent(&p) == 100);
}

TEST(test_cuda_versions)
{
	char out[16];

	CHECK(images_cuda_parse("12.4") == 12040);
	CHECK(images_cuda_parse("12.6.0") == 12060);
	CHECK(images_cuda_parse("v11.8") == 11080);
	CHECK(images_cuda_parse("12") == 12000);
	CHECK(images_cuda_parse("12.10") == 12100);
	CHECK(images_cuda_parse("") == -1);
	CHECK(images_cuda_parse("abc") == -1);
	CHECK(images_cuda_parse("12.") == -1);
	CHECK(images_cuda_parse("12.4x") == -1);
	CHECK(images_cuda_parse("0.1") == -1);
	CHECK(images_cuda_parse("-12.4") == -1);
	CHECK(images_cuda_parse(NULL) == -1);
	images_cuda_format(12060, out, sizeof(out));
	CHECK_STR(out, "12.6");
	images_cuda_format(0, out, sizeof(out));
	CHECK_STR(out, "");
}

TEST(test_references)
{
	char repo[300], tag[160];

	CHECK(images_ref_valid("nvcr.io/nvidia/pytorch:24.08-py3"));
	CHECK(images_ref_valid("127.0.0.1:5055/nvidia/busybox:1.36"));
	CHECK(images_ref_valid("busybox"));
	CHECK(images_ref_valid("ubuntu@sha256:0123abcd"));
	CHECK(images_ref_valid("x/y:Tag_With-Caps"));
	CHECK(!images_ref_valid(""));
	CHECK(!images_ref_valid("Nvcr.io/x"));
	CHECK(!images_ref_valid("x/Upper:1"));
	CHECK(!images_ref_valid("x y"));
	CHECK(!images_ref_valid("x//y"));
	CHECK(!images_ref_valid("x/../y"));
	CHECK(!images_ref_valid("x/"));
	CHECK(!images_ref_valid("x:"));
	CHECK(!images_ref_valid("/x"));
	CHECK(!images_ref_valid("x?y"));
	CHECK(!images_ref_valid("a@b@c"));
	CHECK(!images_ref_valid("bn.hea/:-0sre")); /* an empty repository (the registry fuzzer) */
	CHECK(!images_ref_valid("x/@sha256:00"));
	CHECK(images_ref_split("127.0.0.1:5055/nvidia/busybox:1.36", repo, sizeof(repo), tag,
	                       sizeof(tag)) == 0);
	CHECK_STR(repo, "127.0.0.1:5055/nvidia/busybox");
	CHECK_STR(tag, "1.36");
	CHECK(images_ref_split("127.0.0.1:5055/nvidia/busybox", repo, sizeof(repo), tag,
	                       sizeof(tag)) == 0);
	CHECK_STR(repo, "127.0.0.1:5055/nvidia/busybox");
	CHECK_STR(tag, "latest");
	CHECK(images_ref_split("ubuntu@sha256:00ff", repo, sizeof(repo), tag, sizeof(tag)) == 0);
	CHECK_STR(repo, "ubuntu");
	CHECK_STR(tag, "sha256:00ff");
}

TEST(test_secret_aad)
{
	char aad[128];

	images_secret_aad("ngc", "nvcr.io", aad, sizeof(aad));
	CHECK_STR(aad, "registry-secret:ngc@nvcr.io");
}

int main(void)
{
	RUN(test_real_pull_stream);
	RUN(test_error_line);
	RUN(test_partial_and_garbage);
	RUN(test_push_stream);
	RUN(test_cuda_versions);
	RUN(test_references);
	RUN(test_secret_aad);
	return harness_done("test_images");
}
