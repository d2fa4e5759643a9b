/* test_router.c — path patterns, captures, decoding, 404 vs 405. */
#include "net/router.c"
#include "harness.h"

static void h(struct http_req *r)
{
	(void)r;
}

static const struct route table[] = {
	{ HTTP_GET, "/api/v1/users", h, ROLES_ALL, 0, 0, NULL },
	{ HTTP_POST, "/api/v1/users", h, ROLE_ADMIN, 0, 0, NULL },
	{ HTTP_POST, "/api/v1/users/import", h, ROLE_ADMIN, 0, 0, NULL },
	{ HTTP_GET, "/api/v1/users/{id}", h, ROLE_ADMIN, 0, 0, NULL },
	{ HTTP_POST, "/api/v1/users/{id}/password", h, ROLE_ADMIN, 0, 0, NULL },
	{ HTTP_GET, "/api/v1/files/{area}/{path...}", h, ROLES_ALL, 0, 0, NULL },
	{ HTTP_GET, "/api/v1/regs/{id}/tags/{repository...}", h, ROLE_ADMIN, 0, 0, NULL },
	{ 0, NULL, NULL, 0, 0, 0, NULL },
};

TEST(literal_and_methods)
{
	struct route_params p;
	enum rc why;
	const struct route *rt;

	rt = router_match(HTTP_GET, "/api/v1/users", &p, &why);
	CHECK(rt == &table[0]);
	rt = router_match(HTTP_HEAD, "/api/v1/users", &p, &why);
	CHECK(rt == &table[0]); /* HEAD is served by GET routes */
	rt = router_match(HTTP_POST, "/api/v1/users", &p, &why);
	CHECK(rt == &table[1]);
	rt = router_match(HTTP_DELETE, "/api/v1/users", &p, &why);
	CHECK(rt == NULL && why == RC_METHOD);
	rt = router_match(HTTP_GET, "/api/v1/user", &p, &why);
	CHECK(rt == NULL && why == RC_NOTFOUND);
	rt = router_match(HTTP_GET, "/api/v1/users/", &p, &why);
	CHECK(rt == NULL && why == RC_NOTFOUND);
	rt = router_match(HTTP_GET, "/api/v1/users/1/x", &p, &why);
	CHECK(rt == NULL && why == RC_NOTFOUND);
	rt = router_match(HTTP_GET, "", &p, &why);
	CHECK(rt == NULL);
}

TEST(captures)
{
	struct route_params p;
	enum rc why;
	const struct route *rt;

	rt = router_match(HTTP_GET, "/api/v1/users/42", &p, &why);
	CHECK(rt == &table[3]);
	CHECK_STR(router_param(&p, "id"), "42");
	CHECK(router_param(&p, "nope") == NULL);
	router_params_free(&p);
	/* a literal route wins only by method: POST import is the literal */
	rt = router_match(HTTP_POST, "/api/v1/users/import", &p, &why);
	CHECK(rt == &table[2]);
	router_params_free(&p);
	rt = router_match(HTTP_POST, "/api/v1/users/a%20b/password", &p, &why);
	CHECK(rt == &table[4]);
	CHECK_STR(router_param(&p, "id"), "a b");
	router_params_free(&p);
}

TEST(bad_captures)
{
	struct route_params p;
	enum rc why;

	CHECK(router_match(HTTP_GET, "/api/v1/users/%zz", &p, &why) == NULL && why == RC_INVALID);
	CHECK(router_match(HTTP_GET, "/api/v1/users/%00", &p, &why) == NULL && why == RC_INVALID);
	CHECK(router_match(HTTP_GET, "/api/v1/users/a%2fb", &p, &why) == NULL && why == RC_INVALID);
	CHECK(router_match(HTTP_GET, "/api/v1/users/%4", &p, &why) == NULL && why == RC_INVALID);
	CHECK(p.n == 0);
}

TEST(rest_capture)
{
	struct route_params p;
	enum rc why;
	const struct route *rt;

	rt = router_match(HTTP_GET, "/api/v1/files/home/a/b%2e/c", &p, &why);
	CHECK(rt == &table[5]);
	CHECK_STR(router_param(&p, "area"), "home");
	CHECK_STR(router_param(&p, "path"), "a/b%2e/c"); /* raw: the files module decodes */
	router_params_free(&p);
	rt = router_match(HTTP_GET, "/api/v1/files/home", &p, &why);
	CHECK(rt == &table[5]);
	CHECK_STR(router_param(&p, "path"), "");
	router_params_free(&p);
}

/* A rest capture after other segments: it may be empty, but the segments
 * before it must be there ("/regs" once matched, as if it were
 * "/regs/{id}/tags/"). */
TEST(rest_capture_deep)
{
	struct route_params p;
	enum rc why;
	const struct route *rt;

	rt = router_match(HTTP_GET, "/api/v1/regs/3/tags/nvidia/pytorch", &p, &why);
	CHECK(rt == &table[6]);
	CHECK_STR(router_param(&p, "id"), "3");
	CHECK_STR(router_param(&p, "repository"), "nvidia/pytorch");
	router_params_free(&p);
	rt = router_match(HTTP_GET, "/api/v1/regs/3/tags", &p, &why);
	CHECK(rt == &table[6]);
	CHECK_STR(router_param(&p, "repository"), "");
	router_params_free(&p);
	CHECK(router_match(HTTP_GET, "/api/v1/regs", &p, &why) == NULL && why == RC_NOTFOUND);
	CHECK(router_match(HTTP_GET, "/api/v1/regs/3", &p, &why) == NULL && why == RC_NOTFOUND);
	CHECK(router_match(HTTP_GET, "/api/v1/regs/3/tag", &p, &why) == NULL);
	CHECK(p.n == 0);
}

TEST(decode)
{
	char out[16];

	CHECK(router_decode("a%41b", 5, out, sizeof(out), 0) == 3);
	CHECK_STR(out, "aAb");
	CHECK(router_decode("a+b", 3, out, sizeof(out), 0) == 3);
	CHECK_STR(out, "a+b");
	CHECK(router_decode("a+b", 3, out, sizeof(out), 1) == 3);
	CHECK_STR(out, "a b");
	CHECK(router_decode("%", 1, out, sizeof(out), 0) == -1);
	CHECK(router_decode("%4", 2, out, sizeof(out), 0) == -1);
	CHECK(router_decode("%g0", 3, out, sizeof(out), 0) == -1);
	CHECK(router_decode("%00", 3, out, sizeof(out), 0) == -1);
	CHECK(router_decode("0123456789abcdef", 16, out, sizeof(out), 0) ==
	      -1); /* no room for NUL */
	CHECK(router_decode("", 0, out, sizeof(out), 0) == 0);
	CHECK(router_decode("x", 1, out, 0, 0) == -1);
}

static int counted;
static void count(const struct route *rt, void *arg)
{
	(void)rt;
	(void)arg;
	counted++;
}

TEST(each)
{
	counted = 0;
	router_each(count, NULL);
	CHECK(counted == 7);
}

int main(void)
{
	router_add(table);
	RUN(literal_and_methods);
	RUN(captures);
	RUN(bad_captures);
	RUN(rest_capture);
	RUN(rest_capture_deep);
	RUN(decode);
	RUN(each);
	return harness_done("test_router");
}
