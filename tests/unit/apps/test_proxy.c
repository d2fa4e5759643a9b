/* test_proxy.c — the proxy's pure parts: which hosts are app origins and
 * which route they name, route ids, hop-by-hop headers and the Connection
 * list, gpucloud's cookies stripped from what the app sees, redirect paths
 * (route.c, included for its statics; forward.c). */
#include "apps/route.c"

#include "apps/forward.h"

#include "harness.h"

static struct http_req *req_with(const char *host, const char *cookie)
{
	static struct http_header h[4];
	static struct http_req r;
	int n = 0;

	memset(&r, 0, sizeof(r));
	if (host) {
		h[n].name = (char *)"Host";
		h[n++].value = (char *)host;
	}
	if (cookie) {
		h[n].name = (char *)"Cookie";
		h[n++].value = (char *)cookie;
	}
	r.hdr = h;
	r.nhdr = n;
	return &r;
}

TEST(app_hosts)
{
	char id[64];

	cfg.apps_domain = (char *)"localhost";
	CHECK(route_from_host("abcdef0123456789.localhost:8080", id, sizeof(id)) == 1);
	CHECK_STR(id, "abcdef0123456789");
	CHECK(route_from_host("ABCDEF0123456789.LocalHost", id, sizeof(id)) == 1);
	CHECK_STR(id, "abcdef0123456789");
	CHECK(route_from_host("abcdef0123456789.localhost.", id, sizeof(id)) == 1);
	CHECK(route_from_host("localhost:8080", id, sizeof(id)) == 0);
	CHECK(route_from_host("127.0.0.1:8080", id, sizeof(id)) == 0);
	CHECK(route_from_host("x.localhost.evil.example", id, sizeof(id)) == 0);
	CHECK(route_from_host("xlocalhost", id, sizeof(id)) == 0);
	CHECK(route_from_host(NULL, id, sizeof(id)) == 0);
	/* under the domain but not a route id: still the proxy's (404 there) */
	CHECK(route_from_host("a.b.localhost", id, sizeof(id)) == 1);
	CHECK(!route_id_ok(id));
	cfg.apps_domain = (char *)"";
	CHECK(route_from_host("abcdef0123456789.localhost", id, sizeof(id)) == 0);
	cfg.apps_domain = (char *)"localhost";
}

TEST(route_ids)
{
	CHECK(route_id_ok("0123456789abcdef0123456789abcdef"));
	CHECK(!route_id_ok("0123456789ABCDEF"));
	CHECK(!route_id_ok("short"));
	CHECK(!route_id_ok("0123456789abcdef-"));
	CHECK(!route_id_ok(""));
}

TEST(hop_headers)
{
	struct http_header h[2] = { { (char *)"Connection",
		                      (char *)"keep-alive, X-Secret ,Upgrade" },
		                    { (char *)"X-Secret", (char *)"1" } };

	CHECK(forward_hop_by_hop("transfer-encoding") && forward_hop_by_hop("Keep-Alive") &&
	      forward_hop_by_hop("TE"));
	CHECK(forward_hop_by_hop("Proxy-Authorization") && !forward_hop_by_hop("Authorization"));
	CHECK(forward_in_connection(h, 2, "x-secret"));
	CHECK(forward_in_connection(h, 2, "upgrade"));
	CHECK(!forward_in_connection(h, 2, "x-sec"));
	CHECK(!forward_in_connection(h, 2, "Cookie"));
	/* every hop-by-hop name in any case; names of the same lengths that
	 * are not (the check goes by length first) */
	{
		static const char *const hop[] = { "Connection",         "KEEP-ALIVE",
			                           "proxy-connection",   "te",
			                           "TRAILER",            "Transfer-Encoding",
			                           "upgrade",            "Proxy-Authenticate",
			                           "PROXY-AUTHORIZATION" },
			                 *not[] = { "TF",         "Trailers", "Upgradf",
			                            "Connexion",  "Keep-Alivf",
			                            "Proxy-Connectiom", "Transfer-Encodinf",
			                            "Proxy-Authenticatf", "Proxy-Authorizatiom",
			                            "", "Content-Type", "Date" };
		for (size_t i = 0; i < sizeof(hop) / sizeof(hop[0]); i++)
			CHECK(forward_hop_by_hop(hop[i]));
		for (size_t i = 0; i < sizeof(not) / sizeof(not[0]); i++)
			CHECK(!forward_hop_by_hop(not[i]));
	}
	/* the Connection header is found in any case, past other c-headers */
	{
		struct http_header c[3] = { { (char *)"Content-Type", (char *)"text/plain" },
			                    { (char *)"cOnNeCtIoN", (char *)"x-hop" },
			                    { (char *)"X-Hop", (char *)"1" } };
		CHECK(forward_in_connection(c, 3, "X-HOP"));
		CHECK(!forward_in_connection(c, 3, "Content-Type"));
	}
}

TEST(cookie_filter)
{
	struct evbuffer *b = evbuffer_new();
	char out[256] = "";
	size_t n;

	forward_app_cookies(
	        req_with("x", "gc_session=a; theme=dark; gc_route=b;__Host-gc_route=c; _xsrf=2|x"),
	        b);
	n = evbuffer_get_length(b);
	evbuffer_remove(b, out, n < sizeof(out) - 1 ? n : sizeof(out) - 1);
	CHECK_STR(out, "Cookie: theme=dark; _xsrf=2|x\r\n");
	evbuffer_drain(b, evbuffer_get_length(b));
	forward_app_cookies(req_with("x", "gc_session=a"), b);
	CHECK(evbuffer_get_length(b) == 0);
	evbuffer_free(b);
	{
		char v[64];
		cfg.tls_cert = (char *)"";
		route_cookie(req_with("x", "a=1; gc_route=tok-1; gc_routex=2"), v, sizeof(v));
		CHECK_STR(v, "tok-1");
		route_cookie(req_with("x", "gc_routex=2"), v, sizeof(v));
		CHECK_STR(v, "");
	}
}

TEST(redirect_paths)
{
	CHECK(local_path_ok("/tree?x=1"));
	CHECK(!local_path_ok("//evil.example/"));
	CHECK(!local_path_ok("/\\evil"));
	CHECK(!local_path_ok("http://evil/"));
	CHECK(!local_path_ok("/a b"));
	CHECK(!local_path_ok("/a\r\nSet-Cookie: x"));
	CHECK(!local_path_ok(NULL));
}

/* apps may set host-only cookies only: no Domain (cookie tossing onto other
 * routes), nothing named like gpucloud's own */
TEST(app_set_cookie)
{
	CHECK(forward_set_cookie_ok("a=1; Path=/; HttpOnly"));
	CHECK(forward_set_cookie_ok("_xsrf=2|abc; expires=Tue, 01 Dec 2026 10:00:00 GMT; Path=/"));
	CHECK(!forward_set_cookie_ok("a=1; Domain=apps.gpucloud.test; Path=/"));
	CHECK(!forward_set_cookie_ok("a=1; path=/;domain=.localhost"));
	CHECK(!forward_set_cookie_ok("a=1; DOMAIN = x"));
	CHECK(!forward_set_cookie_ok("gc_route=x; Path=/"));
	CHECK(!forward_set_cookie_ok("__Host-gc_state=x; Path=/; Secure"));
	CHECK(!forward_set_cookie_ok("__Secure-gc_session=x"));
	CHECK(!forward_set_cookie_ok("noequals"));
	CHECK(forward_set_cookie_ok("domainish=1; Path=/"));
}

/* the sign-in link's API origin follows http_own_origin(): public_url, else
 * the apps domain itself on the apps' port */
TEST(api_origin)
{
	char o[128];

	cfg.tls_cert = (char *)"";
	cfg.apps_domain = (char *)"localhost";
	cfg.apps_port = 0;
	cfg.public_url = (char *)"";
	route_init(8080);
	CHECK(route_api_origin(o, sizeof(o)) == 0);
	CHECK_STR(o, "http://localhost:8080");
	cfg.apps_port = 80;
	CHECK(route_api_origin(o, sizeof(o)) == 0);
	CHECK_STR(o, "http://localhost");
	cfg.public_url = (char *)"https://gpu.example.org/";
	CHECK(route_api_origin(o, sizeof(o)) == 0);
	CHECK_STR(o, "https://gpu.example.org");
	CHECK(route_api_origin(o, 8) == -1);
	CHECK_STR(o, "");
	cfg.public_url = (char *)"";
	cfg.apps_port = 0;
	route_init(0);
}

int main(void)
{
	RUN(app_set_cookie);
	RUN(app_hosts);
	RUN(route_ids);
	RUN(hop_headers);
	RUN(cookie_filter);
	RUN(redirect_paths);
	RUN(api_origin);
	return harness_done("test_proxy");
}
