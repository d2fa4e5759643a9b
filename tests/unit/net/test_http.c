/* test_http.c — the API's own origin (http_own_origin): the one rule that
 * Origin/Referer checks (auth.c, terminal.c) and the proxy's sign-in link
 * (apps/route.c) share.  The rest of http.c is driven over sockets by the
 * integration tests and fuzz_http. */
#include "net/http.h"

#include <string.h>

#include "base/config.h"
#include "harness.h"

TEST(origin_from_public_url)
{
	char o[64];

	cfg.public_url = (char *)"https://gpu.example.org";
	CHECK(http_own_origin(0, "127.0.0.1:8080", o, sizeof(o)) == 0);
	CHECK_STR(o, "https://gpu.example.org"); /* public_url wins over Host and TLS */
	cfg.public_url = (char *)"https://gpu.example.org///";
	CHECK(http_own_origin(1, NULL, o, sizeof(o)) == 0);
	CHECK_STR(o, "https://gpu.example.org");
	cfg.public_url = (char *)"http://a:8443/";
	CHECK(http_own_origin(1, "b", o, sizeof(o)) == 0);
	CHECK_STR(o, "http://a:8443");
	/* only slashes: no origin at all, never "" (an empty Origin would match) */
	cfg.public_url = (char *)"//";
	CHECK(http_own_origin(0, "127.0.0.1", o, sizeof(o)) == -1);
	CHECK_STR(o, "");
	cfg.public_url = (char *)"";
}

TEST(origin_from_host)
{
	char o[64];

	cfg.public_url = (char *)"";
	CHECK(http_own_origin(0, "127.0.0.1:8080", o, sizeof(o)) == 0);
	CHECK_STR(o, "http://127.0.0.1:8080");
	CHECK(http_own_origin(1, "gpu.local", o, sizeof(o)) == 0);
	CHECK_STR(o, "https://gpu.local");
	cfg.public_url = NULL;
	CHECK(http_own_origin(0, "localhost", o, sizeof(o)) == 0);
	CHECK_STR(o, "http://localhost");
	/* no Host (HTTP/1.0) and no public_url: nothing to compare with */
	CHECK(http_own_origin(0, NULL, o, sizeof(o)) == -1);
	CHECK_STR(o, "");
	CHECK(http_own_origin(0, "", o, sizeof(o)) == -1);
	cfg.public_url = (char *)"";
}

/* an origin that does not fit is refused, never cut short: a cut one could
 * prefix-match a longer Referer */
TEST(origin_too_long)
{
	char o[16];

	cfg.public_url = (char *)"";
	CHECK(http_own_origin(0, "abcdefgh", o, sizeof(o)) == 0); /* 15 bytes: fits */
	CHECK_STR(o, "http://abcdefgh");
	CHECK(http_own_origin(0, "abcdefghi", o, sizeof(o)) == -1);
	CHECK_STR(o, "");
	cfg.public_url = (char *)"https://abcdefghij/";
	CHECK(http_own_origin(0, NULL, o, sizeof(o)) == -1);
	CHECK_STR(o, "");
	cfg.public_url = (char *)"https://abcdefg/";
	CHECK(http_own_origin(0, NULL, o, sizeof(o)) == 0);
	CHECK_STR(o, "https://abcdefg");
	cfg.public_url = (char *)"";
}

int main(void)
{
	RUN(origin_from_public_url);
	RUN(origin_from_host);
	RUN(origin_too_long);
	return harness_done("test_http");
}
