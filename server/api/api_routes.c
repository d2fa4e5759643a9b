/* api_routes.c — /routes: the app ports of a user's instances, each on its
 * own origin, and opening one (a one-time ticket for the handshake on the
 * route's origin, which sets the route cookie there).  The ticket is bound
 * to the browser's sign-in state (the hash of the gc_state cookie the
 * route's origin set, proxy.c) and minted only by POST (CSRF-checked).
 *
 * Routes themselves are made by database triggers (0010_proxy.sql) when an
 * instance is created or publishes a port; the proxy (proxy.c) serves them.
 * Owner or admin may open a route, and the staff of the class an instance
 * runs in as far as the class allows (gc_class_reach, 0032): each such
 * opening is audit-logged (class.open_app).
 */
#include <stdlib.h>
#include <string.h>

#include <http_parser.h>

#include "api/api.h"
#include "auth/auth.h"
#include "base/crypto.h"
#include "db/db.h"
#include "apps/proxy.h"

#define TICKET_SECONDS 60
#define STR_(x)        #x
#define STR(x)         STR_(x)

/* A route's columns, by name (DB_COLS_*: db.h). */
#define ROUTE_COLS(FIRST, COL)                  \
	FIRST(ROUTE_ID, "r.id")                 \
	COL(ROUTE_INSTANCE_ID, "r.instance_id") \
	COL(ROUTE_INSTANCE_NAME, "i.name")      \
	COL(ROUTE_KIND, "i.kind")               \
	COL(ROUTE_PORT_NAME, "r.port_name")     \
	COL(ROUTE_STATE, "i.state")
enum route_col { DB_COLS_ENUM(ROUTE_COLS) };
#define ROUTE_LIST DB_COLS_SQL(ROUTE_COLS)

static json_t *route_json(const PGresult *res, int i)
{
	char origin[512], url[600];
	const char *id = db_val(res, i, ROUTE_ID);

	proxy_route_origin(id, origin, sizeof(origin));
	snprintf(url, sizeof(url), "%s/", origin);
	return json_pack("{s:s, s:I, s:s, s:s, s:s, s:s, s:s}", "id", id, "instance_id",
	                 (json_int_t)strtoll(db_val(res, i, ROUTE_INSTANCE_ID), NULL, 10),
	                 "instance_name", db_val(res, i, ROUTE_INSTANCE_NAME), "kind",
	                 db_val(res, i, ROUTE_KIND), "port_name", db_val(res, i, ROUTE_PORT_NAME),
	                 "state", db_val(res, i, ROUTE_STATE), "url", url);
}

static const struct api_resource route_resource = { "route", route_json, 0 };

static void list(struct http_req *r)
{
	char inst[24];
	long long v = 0;
	long n;
	struct db_args a = DB_ARGS_INIT;

	n = api_query(r, "instance_id", inst, sizeof(inst));
	if (n == -2)
		return;
	if (n >= 0) {
		char *end;
		v = strtoll(inst, &end, 10);
		if (!*inst || *end || v <= 0) {
			http_reply_error(r, RC_INVALID, "give an instance id such as 12",
			                 "malformed instance_id '%s'", inst);
			return;
		}
	}
	db_arg_ll(&a, r->auth->user_id);
	db_arg_ll_opt(&a, v, n >= 0);
	api_list(r, &route_resource,
	         "SELECT " ROUTE_LIST " FROM routes r JOIN instances i ON i.id = r.instance_id"
	         " WHERE i.user_id = $1 AND i.state <> 'deleted'"
	         " AND ($2::bigint IS NULL OR i.id = $2::bigint)"
	         " ORDER BY r.instance_id DESC, r.port_name",
	         &a);
}

struct open_state {
	char ticket[64];
	char path[2048];
	char state[65]; /* sha256 hex of the browser's sign-in state cookie */
};

static int path_ok(const char *s)
{
	if (s[0] != '/' || s[1] == '/' || s[1] == '\\')
		return 0;
	for (; *s; s++)
		if ((unsigned char)*s < 0x21 || *s == '\\' || (unsigned char)*s >= 0x7f)
			return 0;
	return 1;
}

static void open_done(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;
	struct open_state *st = r->data;
	char origin[512], url[700];

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "cannot open the route");
		return;
	}
	if (PQntuples(res) != 1) {
		http_reply_error(r, RC_NOTFOUND, "list your routes with GET /api/v1/routes",
		                 "no route '%s'", http_param(r, "id"));
		return;
	}
	if (strcmp(db_val(res, 0, 2), "t") == 0) /* a teacher opening a student's app */
		auth_audit(r, r->auth, "class.open_app", db_val(res, 0, 1),
		           json_pack("{s:s, s:s?, s:s, s:s}", "student", db_val(res, 0, 3), "class",
		                     db_val(res, 0, 4), "route", http_param(r, "id"), "path",
		                     st->path));
	proxy_route_origin(http_param(r, "id"), origin, sizeof(origin));
	snprintf(url, sizeof(url), "%s/__gpucloud/handshake?ticket=%s", origin, st->ticket);
	http_add_header(r, "Cache-Control", "no-store");
	http_reply_json(r, 200,
	                json_pack("{s:s, s:s, s:i}", "url", url, "route", http_param(r, "id"),
	                          "expires_in", TICKET_SECONDS));
}

static int state_ok(const char *s)
{
	return strlen(s) == 64 && strspn(s, "0123456789abcdef") == 64;
}

static void open_route(struct http_req *r, const char *path, const char *state)
{
	struct open_state *st;
	char hash[65];
	struct db_args a = DB_ARGS_INIT;
	const char *id = http_param(r, "id");

	if (!proxy_route_id_ok(id)) {
		http_reply_error(r, RC_NOTFOUND, "list your routes with GET /api/v1/routes",
		                 "no route '%s'", id);
		return;
	}
	if (!path_ok(path)) {
		http_reply_error(r, RC_INVALID, "give a path on the app such as /tree",
		                 "path must start with a single '/' and hold no spaces or control "
		                 "characters");
		return;
	}
	if (!state_ok(state)) {
		http_reply_error(
		        r, RC_INVALID,
		        "open the app's own address in the browser (it starts the sign-in), "
		        "or send the sha256 hex of a random secret and present the secret "
		        "as the gc_state cookie to the handshake",
		        "state must be 64 lower-case hex digits");
		return;
	}
	st = api_state(r, sizeof(*st), NULL);
	if (!st)
		return;
	snprintf(st->path, sizeof(st->path), "%s", path);
	snprintf(st->state, sizeof(st->state), "%s", state);
	if (crypto_token(st->ticket, sizeof(st->ticket), 32) < 0) {
		http_reply_error(r, RC_INTERNAL, NULL, "cannot make a ticket");
		return;
	}
	crypto_sha256_hex(st->ticket, strlen(st->ticket), hash);
	db_arg_str(&a, hash);
	db_arg_str(&a, id);
	db_arg_ll(&a, r->auth->user_id);
	db_arg_ll_opt(&a, r->auth->session_id, r->auth->session_id != 0);
	db_arg_ll_opt(&a, r->auth->token_id, r->auth->token_id != 0);
	db_arg_str(&a, st->path);
	db_arg_str(&a, r->auth->role == ROLE_ADMIN ? "t" : "f");
	db_arg_str(&a, st->state);
	/* expired tickets and sessions are swept on the way */
	db_query_args(
	        "WITH gc1 AS (DELETE FROM route_tickets WHERE expires_at < now()),"
	        " gc2 AS (DELETE FROM route_sessions WHERE expires_at < now() - interval '1 hour'),"
	        " x AS (SELECT r.id, i.id AS iid, i.class_id, i.user_id, ow.username,"
	        "  i.user_id <> $3 AND NOT $7::boolean AS reach"
	        "  FROM routes r JOIN instances i ON i.id = r.instance_id"
	        "  JOIN users ow ON ow.id = i.user_id"
	        "  WHERE r.id = $2 AND i.state <> 'deleted' AND (i.user_id = $3 OR $7::boolean"
	        "  OR gc_class_reach($3, i.id, 'open'))),"
	        " ins AS (INSERT INTO route_tickets (token_hash, route_id, user_id, session_id,"
	        "  token_id, path, state_hash, expires_at)"
	        " SELECT $1, x.id, $3, $4, $5, $6, $8, now() + interval '" STR(
	                TICKET_SECONDS) " seconds' FROM x RETURNING route_id)"
	                                " SELECT ins.route_id, x.iid, x.reach, x.username,"
	                                " x.class_id FROM ins, x",
	        &a, open_done, r);
}

/* Minting a ticket is a POST: for cookie sessions the auth layer checks the
 * CSRF token and the Origin (a cross-site page cannot make a victim's
 * browser mint one), and a token needs the 'write' scope (an app session is
 * full control of the app).  GET, which once minted with a redirect,
 * answers 405. */
static void open_get(struct http_req *r)
{
	http_add_header(r, "Allow", "POST");
	http_reply_error(r, RC_METHOD,
	                 "POST /api/v1/routes/{id}/open with {\"path\",\"state\"} (and "
	                 "X-CSRF-Token for a browser session)",
	                 "opening an app is a POST");
}

static void open_post(struct http_req *r)
{
	static const struct jfield spec[] = { { "path", J_STRING, 0, 2000 },
		                              { "state", J_STRING, 0, 64 },
		                              { NULL, 0, 0, 0 } };
	json_t *body = api_json_body(r, spec);
	char path[2048], state[72];

	if (!body)
		return;
	snprintf(path, sizeof(path), "%s",
	         json_object_get(body, "path") ? json_string_value(json_object_get(body, "path"))
	                                       : "/");
	snprintf(state, sizeof(state), "%s",
	         json_object_get(body, "state") ? json_string_value(json_object_get(body, "state"))
	                                        : "");
	json_decref(body);
	open_route(r, path, state);
}

const struct route api_routes_routes[] = {
	{ HTTP_GET, "/api/v1/routes", list, ROLES_ALL, 0, 0, NULL },
	{ HTTP_GET, "/api/v1/routes/{id}/open", open_get, ROLES_PUBLIC, 0, 0, NULL },
	{ HTTP_POST, "/api/v1/routes/{id}/open", open_post, ROLES_ALL, 0, 16384, NULL },
	{ 0, NULL, NULL, 0, 0, 0, NULL },
};
