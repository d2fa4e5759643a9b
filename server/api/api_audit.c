/* api_audit.c — /audit: the audit log, newest first (admin only). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <http_parser.h>

#include "api/api.h"
#include "db/db.h"

static void list_done(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;
	int n, limit = (int)(intptr_t)r->data;
	json_t *items, *out;

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "");
		return;
	}
	n = PQntuples(res);
	items = json_array();
	for (int i = 0; i < n && i < limit; i++) {
		const char *actor = db_val(res, i, 2);
		json_array_append_new(
		        items,
		        json_pack("{s:I, s:s, s:o, s:s, s:s, s:s, s:s, s:s, s:o}", "id",
		                  (json_int_t)strtoll(db_val(res, i, 0), NULL, 10), "at",
		                  db_val(res, i, 1), "actor_id",
		                  actor ? json_integer(strtoll(actor, NULL, 10)) : json_null(),
		                  "actor", db_val(res, i, 3), "action", db_val(res, i, 4), "target",
		                  db_val(res, i, 5), "ip", db_val(res, i, 6), "request_id",
		                  db_val(res, i, 7), "details",
		                  json_loads(db_val(res, i, 8), 0, NULL)));
	}
	out = json_pack("{s:o}", "items", items);
	json_object_set_new(out, "next_cursor",
	                    n > limit ? json_string(db_val(res, limit - 1, 0)) : json_null());
	http_reply_json(r, 200, out);
}

static void list(struct http_req *r)
{
	int limit;
	long long cursor;
	long n;
	char action[64], actor[64], lim[16], cur[24];
	const char *p[4];

	if (api_page(r, 50, 500, &limit, &cursor) < 0)
		return;
	snprintf(cur, sizeof(cur), "%lld", cursor);
	snprintf(lim, sizeof(lim), "%d", limit + 1);
	p[0] = cursor ? cur : NULL;
	n = api_query(r, "action", action, sizeof(action));
	if (n == -2)
		return;
	p[1] = n > 0 ? action : NULL;
	n = api_query(r, "actor", actor, sizeof(actor));
	if (n == -2)
		return;
	p[2] = n > 0 ? actor : NULL;
	p[3] = lim;
	r->data = (void *)(intptr_t)limit;
	db_query("SELECT id, to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'),"
	         " actor_id, actor_name, action, target, ip, request_id, details::text"
	         " FROM audit_log WHERE ($1::bigint IS NULL OR id < $1::bigint)"
	         " AND ($2::text IS NULL OR action = $2 OR action LIKE $2 || '.%')"
	         " AND ($3::text IS NULL OR actor_name = $3)"
	         " ORDER BY id DESC LIMIT $4::int",
	         4, p, list_done, r);
}

const struct route api_audit_routes[] = {
	{ HTTP_GET, "/api/v1/audit", list, ROLE_ADMIN, 0, 0, NULL },
	{ 0, NULL, NULL, 0, 0, 0, NULL },
};
