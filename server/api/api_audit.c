/* api_audit.c — /audit: the audit log, newest first (admin only). */
#include <stdlib.h>
#include <string.h>

#include <http_parser.h>

#include "api/api.h"
#include "db/db.h"

/* An audit entry's columns, by name (DB_COLS_*: db.h). */
#define AUDIT_COLS(FIRST, COL)              \
	FIRST(AUDIT_ID, "id")               \
	COL(AUDIT_AT, DB_TS_MS("at"))       \
	COL(AUDIT_ACTOR_ID, "actor_id")     \
	COL(AUDIT_ACTOR, "actor_name")      \
	COL(AUDIT_ACTION, "action")         \
	COL(AUDIT_TARGET, "target")         \
	COL(AUDIT_IP, "ip")                 \
	COL(AUDIT_REQUEST_ID, "request_id") \
	COL(AUDIT_DETAILS, "details::text")
enum audit_col { DB_COLS_ENUM(AUDIT_COLS) };
#define AUDIT_LIST DB_COLS_SQL(AUDIT_COLS)

static json_t *audit_row(const PGresult *res, int i)
{
	const char *actor = db_val(res, i, AUDIT_ACTOR_ID);

	return json_pack("{s:I, s:s, s:o, s:s, s:s, s:s, s:s, s:s, s:o}", "id",
	                 (json_int_t)strtoll(db_val(res, i, AUDIT_ID), NULL, 10), "at",
	                 db_val(res, i, AUDIT_AT), "actor_id",
	                 actor ? json_integer(strtoll(actor, NULL, 10)) : json_null(), "actor",
	                 db_val(res, i, AUDIT_ACTOR), "action", db_val(res, i, AUDIT_ACTION),
	                 "target", db_val(res, i, AUDIT_TARGET), "ip", db_val(res, i, AUDIT_IP),
	                 "request_id", db_val(res, i, AUDIT_REQUEST_ID), "details",
	                 json_loads(db_val(res, i, AUDIT_DETAILS), 0, NULL));
}

static const struct api_resource audit_resource = { "audit entry", audit_row, 0 };

static void list(struct http_req *r)
{
	int limit;
	long long cursor;
	long n;
	char action[64], actor[64];
	struct db_args a = DB_ARGS_INIT;

	if (api_page(r, 50, 500, &limit, &cursor) < 0)
		return;
	db_arg_ll_opt(&a, cursor, cursor != 0);
	n = api_query(r, "action", action, sizeof(action));
	if (n == -2)
		return;
	db_arg_str(&a, n > 0 ? action : NULL);
	n = api_query(r, "actor", actor, sizeof(actor));
	if (n == -2)
		return;
	db_arg_str(&a, n > 0 ? actor : NULL);
	db_arg_ll(&a, limit + 1);
	api_list_page(r, &audit_resource, limit,
	              "SELECT " AUDIT_LIST " FROM audit_log"
	              " WHERE ($1::bigint IS NULL OR id < $1::bigint)"
	              " AND ($2::text IS NULL OR action = $2 OR action "
	              "LIKE $2 || '.%')"
	              " AND ($3::text IS NULL OR actor_name = $3)"
	              " ORDER BY id DESC LIMIT $4::int",
	              &a);
}

const struct route api_audit_routes[] = {
	{ HTTP_GET, "/api/v1/audit", list, ROLE_ADMIN, 0, 0, NULL },
	{ 0, NULL, NULL, 0, 0, 0, NULL },
};
