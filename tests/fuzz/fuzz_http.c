/* fuzz_http.c — the request path under libFuzzer: bytes from a client
 * socket through http-parser, limits, the router, the auth hook and the
 * handlers' JSON body decoding, with the real route table.
 *
 * Each input is written into one end of a socketpair whose other end the
 * server adopts; the loop runs until the server has nothing left to do; the
 * client end is then closed so the connection is torn down.  The database
 * points at a socket that does not exist, so every query fails fast with
 * 503 — deterministic, and the handlers' error paths are exercised too.
 * A request carrying "X-Fuzz-As: admin" skips the database lookup of the
 * caller and reaches admin handlers directly (their JSON and CSV decoding).
 *
 * The first input byte also selects one of the JSON specs, and the rest is
 * fed to api_json_decode() alone, to fuzz that decoder without HTTP around;
 * the whole input also goes through http_scan_cr() alone (bare CRs).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <fcntl.h>

#include <event2/event.h>

#include "api/api.h"
#include "auth/auth.h"
#include "base/config.h"
#include "db/db.h"
#include "net/http.h"
#include "base/log.h"
#include "api/metrics.h"
#include "net/static.h"

static struct event_base *base;
static struct http_server *srv;

static void fuzz_auth(struct http_req *r)
{
	const char *as = http_header(r, "X-Fuzz-As");
	struct auth_info *a;

	if (!as) {
		auth_request(r);
		return;
	}
	a = calloc(1, sizeof(*a));
	if (!a)
		abort();
	a->user_id = 1;
	memcpy(a->username, "admin", 6);
	a->display_name = strdup("Admin");
	a->email = strdup("");
	a->role = auth_role_parse(as) > 0 ? auth_role_parse(as) : ROLE_STUDENT;
	a->session_id = 1;
	a->scopes = SCOPE_READ | SCOPE_WRITE;
	r->auth = a;
	if (!(r->route->roles & (unsigned)a->role)) {
		http_reply_error(r, RC_FORBIDDEN, NULL, "role");
		return;
	}
	http_resume(r);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static char *args[] = {"fuzz", "--log-level=error", "--web-root=web",
			       "--db-url=postgresql:///none?host=/nonexistent-gpucloud-fuzz",
			       "--db-pool-size=1", "--state-dir=/tmp", NULL};
	struct http_server_opts opts = {
		.auth = fuzz_auth,
		.auth_free = auth_info_free,
		.fallback = static_serve,
		.observe = metrics_observe,
	};

	(void)argc;
	(void)argv;
	if (config_load(6, args) != 0)
		abort();
	log_set_level(LOG_ERROR);
	base = event_base_new();
	if (!base || db_init(base, cfg.db_url, 1, 16) < 0)
		abort();
	/* let the pool learn the database is down, so queries fail fast */
	for (int i = 0; i < 20 && !db_ready(); i++)
		event_base_loop(base, EVLOOP_NONBLOCK);
	api_register_all();
	srv = http_server_new_unbound(base, &opts);
	if (!srv)
		abort();
	return 0;
}

static void spin(int rounds)
{
	for (int i = 0; i < rounds; i++)
		event_base_loop(base, EVLOOP_NONBLOCK);
}

static const struct jfield spec_a[] = {
	{"username", J_STRING, 1, 64}, {"password", J_STRING, 1, 1024}, {NULL, 0, 0, 0}};
static const struct jfield spec_b[] = {
	{"name", J_STRING, 1, 100}, {"scopes", J_STRINGS, 1, 2},
	{"expires_in_days", J_INT, 0, 0}, {"disabled", J_BOOL, 0, 0},
	{"o", J_OBJECT, 0, 0}, {NULL, 0, 0, 0}};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int sv[2];
	char err[256], sink[65536];
	json_t *j;

	{
		/* the bare-CR scanner alone: what it lets through never holds
		 * a CR that is not followed by LF */
		long n = http_scan_cr((const char *)data, size);
		if (n < -2 || n > (long)size || (n == -2 && !(size == 1 && data[0] == '\r')) ||
		    (n == -1 && (size < 2 || data[0] != '\r' || data[1] == '\n')))
			abort();
		for (long i = 0; i < n; i++)
			if (data[i] == '\r' && (i + 1 >= n || data[i + 1] != '\n'))
				abort();
	}
	if (size > 0) {
		j = api_json_decode((const char *)data + 1, size - 1, data[0] & 1 ? spec_a : spec_b,
				    err, sizeof(err));
		if (!j && !err[0])
			abort(); /* a rejection always says why */
		json_decref(j);
	}
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
		return 0;
	fcntl(sv[1], F_SETFL, O_NONBLOCK);
	http_server_adopt(srv, sv[0]);
	for (size_t off = 0; off < size;) {
		ssize_t n = write(sv[1], data + off, size - off);
		if (n <= 0) {
			spin(4);
			while (read(sv[1], sink, sizeof(sink)) > 0)
				;
			n = write(sv[1], data + off, size - off);
			if (n <= 0)
				break;
		}
		off += (size_t)n;
	}
	spin(16);
	while (read(sv[1], sink, sizeof(sink)) > 0)
		;
	close(sv[1]);
	spin(16);
	return 0;
}
