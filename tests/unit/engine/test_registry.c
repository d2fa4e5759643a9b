/* test_registry.c — the pure parts of the registry client: WWW-Authenticate
 * challenges (Docker Hub's, nvcr.io's, docker-registry's htpasswd, and
 * broken ones), references as engines read them, and tags as versions. */
#include "engine/registry.c"

#include "harness.h"

static long parse(const char *s, struct registry_challenge *c)
{
	return registry_challenge_parse(s, strlen(s), c);
}

TEST(challenges)
{
	struct registry_challenge c;

	CHECK(parse("Basic realm=\"gpucloud-test-registry\"", &c) > 0);
	CHECK(c.scheme == REGISTRY_AUTH_BASIC);
	CHECK_STR(c.realm, "gpucloud-test-registry");
	CHECK(parse("Bearer realm=\"https://auth.docker.io/token\",service=\"registry.docker.io\","
	            "scope=\"repository:library/busybox:pull\"",
	            &c) > 0);
	CHECK(c.scheme == REGISTRY_AUTH_BEARER);
	CHECK_STR(c.realm, "https://auth.docker.io/token");
	CHECK_STR(c.service, "registry.docker.io");
	CHECK_STR(c.scope, "repository:library/busybox:pull");
	/* nvcr.io: a realm with a query, spaces after commas, any case */
	CHECK(parse("bearer Realm=\"https://nvcr.io/proxy_auth?x=1\", service=ngc , "
	            "scope=\"repository:nvidia/pytorch:pull,push\"",
	            &c) > 0);
	CHECK(c.scheme == REGISTRY_AUTH_BEARER);
	CHECK_STR(c.realm, "https://nvcr.io/proxy_auth?x=1");
	CHECK_STR(c.service, "ngc");
	CHECK_STR(c.scope, "repository:nvidia/pytorch:pull,push");
	/* escapes in quoted strings */
	CHECK(parse("Basic realm=\"a \\\"b\\\" c\"", &c) > 0);
	CHECK_STR(c.realm, "a \"b\" c");
	/* an unknown scheme first (with a token68), then Bearer */
	CHECK(parse("Negotiate abc==, Bearer realm=\"https://t/x\"", &c) > 0);
	CHECK(c.scheme == REGISTRY_AUTH_BEARER);
	CHECK_STR(c.realm, "https://t/x");
	/* the first known one wins; the next does not overwrite it */
	CHECK(parse("Basic realm=\"r1\", Bearer realm=\"r2\"", &c) > 0);
	CHECK(c.scheme == REGISTRY_AUTH_BASIC);
	CHECK_STR(c.realm, "r1");
	CHECK(parse("Basic", &c) > 0 && c.scheme == REGISTRY_AUTH_BASIC && c.realm[0] == '\0');
	/* broken or unknown */
	CHECK(parse("", &c) == -1);
	CHECK(parse("Negotiate", &c) == -1);
	CHECK(parse("Basic realm=\"unterminated", &c) == -1);
	CHECK(parse("Bearer realm=\"x\" junk", &c) == -1);
	CHECK(parse("=", &c) == -1);
	CHECK(parse("Basic realm=\"a\x01\"", &c) == -1);
	{
		char big[2000];
		memset(big, 'a', sizeof(big));
		memcpy(big, "Bearer realm=\"", 14);
		big[sizeof(big) - 2] = '"';
		big[sizeof(big) - 1] = '\0';
		CHECK(parse(big, &c) == -1); /* longer than realm holds */
	}
	/* not NUL-terminated: only len bytes are read */
	CHECK(registry_challenge_parse("Basic realm=\"ab\"XXXX", 16, &c) > 0);
	CHECK_STR(c.realm, "ab");
}

TEST(references)
{
	char h[256], r[300], t[160];

	CHECK(registry_ref_parse("nvcr.io/nvidia/pytorch:24.08-py3", h, sizeof(h), r, sizeof(r), t,
	                         sizeof(t)) == 0);
	CHECK_STR(h, "nvcr.io");
	CHECK_STR(r, "nvidia/pytorch");
	CHECK_STR(t, "24.08-py3");
	CHECK(registry_ref_parse("127.0.0.1:5055/nvidia/jupyter:1", h, sizeof(h), r, sizeof(r), t,
	                         sizeof(t)) == 0);
	CHECK_STR(h, "127.0.0.1:5055");
	CHECK_STR(r, "nvidia/jupyter");
	CHECK_STR(t, "1");
	CHECK(registry_ref_parse("busybox", h, sizeof(h), r, sizeof(r), t, sizeof(t)) == 0);
	CHECK_STR(h, "registry-1.docker.io");
	CHECK_STR(r, "library/busybox");
	CHECK_STR(t, "latest");
	CHECK(registry_ref_parse("jupyter/base-notebook:x", h, sizeof(h), r, sizeof(r), t,
	                         sizeof(t)) == 0);
	CHECK_STR(h, "registry-1.docker.io");
	CHECK_STR(r, "jupyter/base-notebook");
	CHECK(registry_ref_parse("docker.io/ubuntu", h, sizeof(h), r, sizeof(r), t, sizeof(t)) ==
	      0);
	CHECK_STR(h, "registry-1.docker.io");
	CHECK_STR(r, "library/ubuntu");
	CHECK(registry_ref_parse("localhost/a/b@sha256:00", h, sizeof(h), r, sizeof(r), t,
	                         sizeof(t)) == 0);
	CHECK_STR(h, "localhost");
	CHECK_STR(r, "a/b");
	CHECK_STR(t, "sha256:00");
	/* found by the fuzzer: an empty repository after the host */
	CHECK(registry_ref_parse("bn.hea/:-0sre", h, sizeof(h), r, sizeof(r), t, sizeof(t)) == -1);
	CHECK(registry_ref_parse("nvcr.io/nvidia/pytorch:1", h, 4, r, sizeof(r), t, sizeof(t)) ==
	      -1);
}

TEST(tags)
{
	CHECK(registry_tag_cmp("24.10-py3", "24.9-py3") > 0);
	CHECK(registry_tag_cmp("24.08-py3", "24.8-py3") == 0);
	CHECK(registry_tag_cmp("1.36", "1.36.1") < 0);
	CHECK(registry_tag_cmp("a", "b") < 0);
	CHECK(registry_tag_cmp("", "") == 0);
	CHECK(registry_tag_newer("24.08-py3", "24.09-py3"));
	CHECK(registry_tag_newer("24.08-py3", "25.01-py3"));
	CHECK(!registry_tag_newer("24.08-py3", "24.07-py3"));
	CHECK(!registry_tag_newer("24.08-py3", "24.08-py3"));
	CHECK(!registry_tag_newer("24.08-py3", "24.10-py3-igpu"));
	CHECK(!registry_tag_newer("24.08-py3", "latest"));
	CHECK(!registry_tag_newer("latest", "nightly"));
	CHECK(registry_tag_newer("1", "2"));
	CHECK(!registry_tag_newer("1.36", "2"));
	CHECK(registry_repo_valid("nvidia/pytorch"));
	CHECK(registry_repo_valid("a"));
	CHECK(!registry_repo_valid(""));
	CHECK(!registry_repo_valid("/a"));
	CHECK(!registry_repo_valid("a/"));
	CHECK(!registry_repo_valid("a//b"));
	CHECK(!registry_repo_valid("a/../b"));
	CHECK(!registry_repo_valid("A/b"));
	CHECK(!registry_repo_valid("a?b"));
	CHECK(!registry_repo_valid("a%2fb"));
}

int main(void)
{
	RUN(challenges);
	RUN(references);
	RUN(tags);
	return harness_done("test_registry");
}
