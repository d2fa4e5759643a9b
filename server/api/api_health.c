/* api_health.c — /healthz (the process answers), /readyz (its dependencies
 * answer: the database and at least one node; ok or not per check, nothing
 * more), /metrics (Prometheus: for the
 * scrape addresses of metrics_allow or an admin's API token) and the OpenAPI
 * document.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <http_parser.h>

#include "api/api.h"
#include "base/config.h"
#include "base/crypto.h"
#include "db/db.h"
#include "api/metrics.h"

static void healthz(struct http_req *r)
{
	static const char ok[] = "{\"status\":\"ok\"}";

	http_reply(r, 200, "application/json", ok, sizeof(ok) - 1);
}

/* The reply: ready when the database answers and at least one node is
 * reachable (SPEC §11).  A platform with no node registered yet is ready:
 * its admin must reach the API to add the first one.  nodes is "ok",
 * "unavailable" (registered, none up), "none" or "unknown" (no database). */
static void readyz_reply(struct http_req *r, int db_ok, const char *nodes)
{
	int ready = db_ok && strcmp(nodes, "unavailable") != 0;

	/* storage never makes the server unready: software quotas always hold */
	http_reply_json(r, ready ? 200 : 503,
	                json_pack("{s:s, s:{s:{s:s}, s:{s:s}, s:{s:s}}}", "status",
	                          ready ? "ready" : "not_ready", "checks", "database", "status",
	                          db_ok ? "ok" : "unavailable", "storage", "status", "ok", "nodes",
	                          "status", nodes));
}

static void readyz_nodes(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;
	long long up, total;

	if (rc != RC_OK || PQntuples(res) != 1) {
		readyz_reply(r, 0, "unknown");
		return;
	}
	up = strtoll(db_val(res, 0, 0), NULL, 10);
	total = strtoll(db_val(res, 0, 1), NULL, 10);
	readyz_reply(r, 1, up > 0 ? "ok" : total > 0 ? "unavailable" : "none");
}

/* ok / not ok per check, nothing else: no paths, no counts, no node names
 * (the endpoint is public, for load balancers). */
static void readyz(struct http_req *r)
{
	if (!db_ready()) {
		readyz_reply(r, 0, "unknown");
		return;
	}
	db_query("SELECT count(*) FILTER (WHERE health = 'up'), count(*) FROM nodes", 0, NULL,
	         readyz_nodes, r);
}

/* 1 when r's peer address is listed in cfg.metrics_allow (comma- or
 * space-separated addresses of Prometheus scrapers). */
static int scrape_address(const struct http_req *r)
{
	const char *s = cfg.metrics_allow;
	size_t plen = strlen(r->peer);

	while (s && *s) {
		size_t n;
		while (*s == ',' || *s == ' ')
			s++;
		n = strcspn(s, ", ");
		if (n && n == plen && strncmp(s, r->peer, n) == 0)
			return 1;
		s += n;
	}
	return 0;
}

static void metrics_render_reply(struct http_req *r)
{
	struct evbuffer *b = evbuffer_new();

	if (!b) {
		http_reply_error(r, RC_NOMEM, NULL, "out of memory");
		return;
	}
	metrics_render(b);
	http_reply_evbuffer(r, 200, "text/plain; version=0.0.4", b);
	evbuffer_free(b);
}

static void metrics_token_done(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "cannot check the token");
		return;
	}
	if (PQntuples(res) != 1) {
		http_reply_error(r, RC_FORBIDDEN,
		                 "use an admin's API token, or list the scraper's address in "
		                 "metrics_allow",
		                 "/metrics needs an admin's API token");
		return;
	}
	metrics_render_reply(r);
}

/* /metrics: for the scrape addresses of cfg.metrics_allow, and otherwise
 * for an admin's API token (Authorization: Bearer, any scope). */
static void metrics(struct http_req *r)
{
	const char *authz = http_header(r, "Authorization");
	const char *tok;
	char hash[65];
	struct db_args a = DB_ARGS_INIT;

	if (scrape_address(r)) {
		metrics_render_reply(r);
		return;
	}
	if (!authz || strncasecmp(authz, "Bearer ", 7) != 0) {
		http_add_header(r, "WWW-Authenticate", "Bearer");
		http_reply_error(r, RC_UNAUTHORIZED,
		                 "send an admin's API token as 'Authorization: Bearer <token>'",
		                 "/metrics needs an admin's API token");
		return;
	}
	for (tok = authz + 7; *tok == ' '; tok++)
		;
	crypto_sha256_hex(tok, strlen(tok), hash);
	db_arg_str(&a, hash);
	db_query_args("SELECT 1 FROM api_tokens t JOIN users u ON u.id = t.user_id"
	              " WHERE t.token_hash = $1 AND t.revoked_at IS NULL AND t.expires_at > now()"
	              " AND NOT u.disabled AND u.role = 'admin'",
	              &a, metrics_token_done, r);
}

/* The API description, served so clients and the docs test read the same. */
static void openapi(struct http_req *r)
{
	FILE *f = fopen(cfg.openapi_file, "r");
	struct evbuffer *b;

	if (!f) {
		http_reply_error(r, RC_NOTFOUND, NULL, "the API description is not installed");
		return;
	}
	b = evbuffer_new();
	if (b) {
		char buf[8192];
		size_t n;
		while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
			evbuffer_add(b, buf, n);
	}
	fclose(f);
	if (!b) {
		http_reply_error(r, RC_NOMEM, NULL, "out of memory");
		return;
	}
	http_reply_evbuffer(r, 200, "application/yaml", b);
	evbuffer_free(b);
}

const struct route api_health_routes[] = {
	{ HTTP_GET, "/healthz", healthz, ROLES_PUBLIC, 0, 0, NULL },
	{ HTTP_GET, "/readyz", readyz, ROLES_PUBLIC, 0, 0, NULL },
	{ HTTP_GET, "/metrics", metrics, ROLES_PUBLIC, 0, 0, NULL },
	{ HTTP_GET, "/api/v1/openapi.yaml", openapi, ROLES_PUBLIC, 0, 0, NULL },
	{ 0, NULL, NULL, 0, 0, 0, NULL },
};
