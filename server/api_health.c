/* api_health.c — /healthz (the process answers), /readyz (its dependencies
 * answer), /metrics (Prometheus) and the OpenAPI document.
 */
#include <stdio.h>
#include <stdlib.h>

#include <event2/buffer.h>
#include <http_parser.h>

#include "api.h"
#include "config.h"
#include "db.h"
#include "metrics.h"
#include "storage.h"

static void healthz(struct http_req *r)
{
	static const char ok[] = "{\"status\":\"ok\"}";

	http_reply(r, 200, "application/json", ok, sizeof(ok) - 1);
}

static void readyz(struct http_req *r)
{
	struct db_stats st;
	int ready = db_ready();

	json_t *out;

	db_get_stats(&st);
	out = json_pack("{s:s, s:{s:{s:s, s:i, s:i}}}", "status", ready ? "ready" : "not_ready",
	                "checks", "database", "status", ready ? "ok" : "unavailable",
	                "connections_up", st.up, "connections", st.size);
	/* storage never makes the server unready: software quotas always hold */
	json_t *storage = storage_support_json();
	json_object_set_new(storage, "status", json_string("ok"));
	json_object_set_new(json_object_get(out, "checks"), "storage", storage);
	http_reply_json(r, ready ? 200 : 503, out);
}

static void metrics(struct http_req *r)
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
