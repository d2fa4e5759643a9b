/* api_tokens.c — /tokens: named, scoped, expiring API tokens for scripts
 * and the CLI.
 *
 * A token is "gct_" + 43 base64url characters (256 random bits).  It is
 * shown once, at creation; only its SHA-256 is stored.  Tokens are minted
 * from a browser session only, so a leaked token cannot mint more.
 */
#include <stdlib.h>
#include <string.h>

#include <http_parser.h>

#include "api/api.h"
#include "auth/auth.h"
#include "base/crypto.h"
#include "db/db.h"

/* A token's columns, by name (DB_COLS_*: db.h). */
#define TOKEN_COLS(FIRST, COL)                           \
	FIRST(TOKEN_ID, "id")                            \
	COL(TOKEN_NAME, "name")                          \
	COL(TOKEN_SCOPES, "array_to_json(scopes)::text") \
	COL(TOKEN_PREFIX, "prefix")                      \
	COL(TOKEN_CREATED_AT, DB_TS("created_at"))       \
	COL(TOKEN_EXPIRES_AT, DB_TS("expires_at"))       \
	COL(TOKEN_LAST_USED_AT, DB_TS("last_used_at"))
enum token_col { DB_COLS_ENUM(TOKEN_COLS) };
#define TOKEN_LIST DB_COLS_SQL(TOKEN_COLS)

static json_t *token_row(const PGresult *res, int i)
{
	const char *used = db_val(res, i, TOKEN_LAST_USED_AT);

	return json_pack("{s:I, s:s, s:o, s:s, s:s, s:s, s:o}", "id",
	                 (json_int_t)strtoll(db_val(res, i, TOKEN_ID), NULL, 10), "name",
	                 db_val(res, i, TOKEN_NAME), "scopes",
	                 json_loads(db_val(res, i, TOKEN_SCOPES), 0, NULL), "prefix",
	                 db_val(res, i, TOKEN_PREFIX), "created_at",
	                 db_val(res, i, TOKEN_CREATED_AT), "expires_at",
	                 db_val(res, i, TOKEN_EXPIRES_AT), "last_used_at",
	                 used ? json_string(used) : json_null());
}

static const struct api_resource token_resource = { "token", token_row, 1 };

static void list(struct http_req *r)
{
	struct db_args a = DB_ARGS_INIT;

	db_arg_ll(&a, r->auth->user_id);
	api_list(r, &token_resource,
	         "SELECT " TOKEN_LIST " FROM api_tokens WHERE user_id = $1"
	         " AND revoked_at IS NULL AND expires_at > now() ORDER BY id",
	         &a);
}

struct create {
	struct http_req *r;
	char token[64];
};

static void create_done(PGresult *res, enum rc rc, void *arg)
{
	struct create *c = arg;
	json_t *out;

	if (rc == RC_CONFLICT) {
		http_reply_error(c->r, RC_CONFLICT, "pick another name or revoke the old token",
		                 "you already have a token with this name");
		return;
	}
	if (rc != RC_OK) {
		api_reply_db_error(c->r, rc, "could not create the token");
		return;
	}
	out = token_row(res, 0);
	json_object_set_new(out, "token", json_string(c->token));
	auth_audit(c->r, c->r->auth, "token.create", db_val(res, 0, TOKEN_NAME), NULL);
	http_reply_json(c->r, 201, out);
}

static const struct jfield create_spec[] = {
	{ "name", J_STRING, 1, 100 },
	{ "scopes", J_STRINGS, 1, 2 },
	{ "expires_in_days", J_INT, 0, 0 },
	{ NULL, 0, 0, 0 },
};

static void create(struct http_req *r)
{
	json_t *body, *e;
	struct create *c;
	size_t i;
	int read = 0, write = 0;
	long long days = 90;
	char hash[65], prefix[16], scopes[32];
	const char *name;
	struct db_args a = DB_ARGS_INIT;

	body = api_json_body(r, create_spec);
	if (!body)
		return;
	if (!r->auth->session_id) {
		json_decref(body);
		http_reply_error(r, RC_FORBIDDEN, "create tokens from a browser session",
		                 "an API token cannot create tokens");
		return;
	}
	name = json_string_value(json_object_get(body, "name"));
	json_array_foreach(json_object_get(body, "scopes"), i, e)
	{
		const char *s = json_string_value(e);
		if (strcmp(s, "read") == 0)
			read = 1;
		else if (strcmp(s, "write") == 0)
			write = 1;
		else {
			http_reply_error(r, RC_INVALID, "use 'read' and/or 'write'",
			                 "unknown scope '%.32s'", s);
			json_decref(body);
			return;
		}
	}
	if (!read && !write) {
		json_decref(body);
		http_reply_error(r, RC_INVALID, "use 'read' and/or 'write'",
		                 "a token needs at least one scope");
		return;
	}
	if (json_is_integer(json_object_get(body, "expires_in_days")))
		days = json_integer_value(json_object_get(body, "expires_in_days"));
	if (days < 1 || days > 365) {
		json_decref(body);
		http_reply_error(r, RC_INVALID, NULL, "expires_in_days must be from 1 to 365");
		return;
	}
	if (!*name || strlen(name) > 100) {
		json_decref(body);
		http_reply_error(r, RC_INVALID, NULL, "name must be 1 to 100 bytes");
		return;
	}
	c = api_state(r, sizeof(*c), free);
	if (!c) {
		json_decref(body);
		return;
	}
	c->r = r;
	memcpy(c->token, "gct_", 4);
	if (crypto_token(c->token + 4, sizeof(c->token) - 4, 32) < 0) {
		json_decref(body);
		http_reply_error(r, RC_INTERNAL, NULL, "no randomness available");
		return;
	}
	crypto_sha256_hex(c->token, strlen(c->token), hash);
	snprintf(prefix, sizeof(prefix), "%.10s", c->token);
	snprintf(scopes, sizeof(scopes), "{%s%s%s}", read ? "read" : "", read && write ? "," : "",
	         write ? "write" : "");
	db_arg_ll(&a, r->auth->user_id);
	db_arg_str(&a, name);
	db_arg_str(&a, hash);
	db_arg_str(&a, prefix);
	db_arg_str(&a, scopes);
	db_arg_ll(&a, days);
	db_query_args(
	        "INSERT INTO api_tokens (user_id, name, token_hash, prefix, scopes, expires_at)"
	        " VALUES ($1, $2, $3, $4, $5::text[], now() + make_interval(days => $6::int))"
	        " RETURNING " TOKEN_LIST,
	        &a, create_done, c);
	json_decref(body);
}

static void revoke_done(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "");
		return;
	}
	if (PQntuples(res) != 1) {
		http_reply_error(r, RC_NOTFOUND, NULL, "no such token '%s'", http_param(r, "id"));
		return;
	}
	auth_audit(r, r->auth, "token.revoke", db_val(res, 0, 0), NULL);
	http_reply(r, 204, NULL, NULL, 0);
}

static void revoke(struct http_req *r)
{
	long long id;
	struct db_args a = DB_ARGS_INIT;

	if (api_id(r, "id", &id) < 0)
		return;
	db_arg_ll(&a, id);
	db_arg_ll(&a, r->auth->user_id);
	db_query_args("UPDATE api_tokens SET revoked_at = now()"
	              " WHERE id = $1 AND user_id = $2 AND revoked_at IS NULL RETURNING name",
	              &a, revoke_done, r);
}

const struct route api_tokens_routes[] = {
	{ HTTP_GET, "/api/v1/tokens", list, ROLES_ALL, 0, 0, NULL },
	{ HTTP_POST, "/api/v1/tokens", create, ROLES_ALL, 0, 8192, NULL },
	{ HTTP_DELETE, "/api/v1/tokens/{id}", revoke, ROLES_ALL, 0, 0, NULL },
	{ 0, NULL, NULL, 0, 0, 0, NULL },
};
