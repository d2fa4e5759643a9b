/* api_audit.c — /audit: the audit log, newest first, as JSON pages or CSV.
 *
 * Admins read every entry; teachers the entries about the classes they
 * own or co-teach (audit_log.class_id, filled on insert: 0035).  Filters:
 * from/to (ISO 8601 times), actor (a username, or "system"), action and
 * target (exact, or a prefix: a trailing '*', or for action a trailing
 * '.'), class_id.  Does not own: writing entries (auth_audit(), gc_audit_system()). */
#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <http_parser.h>

#include "api/api.h"
#include "auth/auth.h"
#include "db/db.h"
#include "net/ws.h"

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
	COL(AUDIT_DETAILS, "details::text") \
	COL(AUDIT_CLASS_ID, "class_id")
enum audit_col { DB_COLS_ENUM(AUDIT_COLS) };
#define AUDIT_LIST DB_COLS_SQL(AUDIT_COLS)

static json_t *id_or_null(const char *v)
{
	return v ? json_integer(strtoll(v, NULL, 10)) : json_null();
}

static json_t *audit_row(const PGresult *res, int i)
{
	return json_pack("{s:I, s:s, s:o, s:s, s:s, s:s, s:s, s:s, s:o, s:o}", "id",
	                 (json_int_t)strtoll(db_val(res, i, AUDIT_ID), NULL, 10), "at",
	                 db_val(res, i, AUDIT_AT), "actor_id",
	                 id_or_null(db_val(res, i, AUDIT_ACTOR_ID)), "actor",
	                 db_val(res, i, AUDIT_ACTOR), "action", db_val(res, i, AUDIT_ACTION),
	                 "target", db_val(res, i, AUDIT_TARGET), "ip", db_val(res, i, AUDIT_IP),
	                 "request_id", db_val(res, i, AUDIT_REQUEST_ID), "details",
	                 json_loads(db_val(res, i, AUDIT_DETAILS), 0, NULL), "class_id",
	                 id_or_null(db_val(res, i, AUDIT_CLASS_ID)));
}

static const struct api_resource audit_resource = { "audit entry", audit_row, 0 };

/* Is s an ISO 8601 date or time PostgreSQL reads the same way:
 * YYYY-MM-DD[(T| )HH:MM[:SS[.f...]]][Z|(+|-)HH[:MM]]? */
static int iso_time(const char *s)
{
	static const char date[] = "dddd-dd-dd", hm[] = "dd:dd";
	static const int mdays[] = { 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	size_t i;
	int y, mo, d;

	/* digits first, then values PostgreSQL accepts: a 400, never a 500 */
	if (strlen(s) >= 10 && isdigit((unsigned char)s[0]) && isdigit((unsigned char)s[5]) &&
	    isdigit((unsigned char)s[6]) && isdigit((unsigned char)s[8]) &&
	    isdigit((unsigned char)s[9])) {
		y = (int)strtol(s, NULL, 10);
		mo = (s[5] - '0') * 10 + (s[6] - '0');
		d = (s[8] - '0') * 10 + (s[9] - '0');
		if (y < 1 || mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] ||
		    (mo == 2 && d == 29 && !((y % 4 == 0 && y % 100 != 0) || y % 400 == 0)))
			return 0;
	}
	if (strlen(s) >= 16 && isdigit((unsigned char)s[11]) && isdigit((unsigned char)s[14]) &&
	    ((s[11] - '0') * 10 + (s[12] - '0') > 23 || s[14] > '5'))
		return 0;
	if (strlen(s) >= 19 && s[16] == ':' && s[17] > '5')
		return 0;

	for (i = 0; date[i]; i++, s++)
		if (date[i] == 'd' ? !isdigit((unsigned char)*s) : *s != date[i])
			return 0;
	if (!*s)
		return 1;
	if (*s != 'T' && *s != ' ')
		return 0;
	s++;
	for (i = 0; hm[i]; i++, s++)
		if (hm[i] == 'd' ? !isdigit((unsigned char)*s) : *s != hm[i])
			return 0;
	if (*s == ':') {
		if (!isdigit((unsigned char)s[1]) || !isdigit((unsigned char)s[2]))
			return 0;
		s += 3;
		if (*s == '.') {
			s++;
			for (i = 0; isdigit((unsigned char)*s); i++, s++)
				;
			if (i == 0 || i > 6)
				return 0;
		}
	}
	if (*s == 'Z')
		return s[1] == '\0';
	if (*s == '+' || *s == '-') {
		s++;
		if (!isdigit((unsigned char)s[0]) || !isdigit((unsigned char)s[1]))
			return 0;
		s += 2;
		if (*s == ':')
			s++;
		if (*s && (!isdigit((unsigned char)s[0]) || !isdigit((unsigned char)s[1]) || s[2]))
			return 0;
		return 1;
	}
	return *s == '\0';
}

/* Reads an optional time filter; -1 when the request is finished (400). */
static int time_query(struct http_req *r, const char *name, char *out, size_t outlen, int *set)
{
	long n = api_query(r, name, out, outlen);

	*set = n > 0;
	if (n == -2)
		return -1;
	if (n > 0 && !iso_time(out)) {
		http_reply_error(r, RC_INVALID,
		                 "an ISO 8601 time such as 2026-12-01T08:00:00Z or a date such as "
		                 "2026-12-01",
		                 "%s '%s' is not a time", name, out);
		return -1;
	}
	return 0;
}

/* Reads an optional text filter; -1 when the request is finished (400:
 * malformed or not UTF-8). */
static int text_query(struct http_req *r, const char *name, char *out, size_t outlen, int *set)
{
	long n = api_query(r, name, out, outlen);

	*set = n > 0;
	if (n == -2)
		return -1;
	if (n > 0 && !ws_utf8_ok((const uint8_t *)out, (size_t)n)) {
		http_reply_error(r, RC_INVALID, "percent-encode the value as UTF-8",
		                 "query parameter '%s' is not UTF-8", name);
		return -1;
	}
	return 0;
}

/* A CSV cell: quoted when needed; a leading = + - @ is defused with a
 * quote so a spreadsheet shows it as text, not a formula. */
static void csv_cell(struct evbuffer *b, const char *v, int last)
{
	const char *p;
	int quote = strpbrk(v, ",\"\r\n") != NULL;

	if (strchr("=+-@\t", v[0]) && v[0])
		quote = 1;
	if (quote) {
		evbuffer_add(b, "\"", 1);
		if (strchr("=+-@\t", v[0]) && v[0])
			evbuffer_add(b, "'", 1);
		for (p = v; *p; p++) {
			if (*p == '"')
				evbuffer_add(b, "\"", 1);
			evbuffer_add(b, p, 1);
		}
		evbuffer_add(b, "\"", 1);
	} else {
		evbuffer_add(b, v, strlen(v));
	}
	evbuffer_add(b, last ? "\r\n" : ",", last ? 2 : 1);
}

struct csv_state {
	int limit;
};

static void csv_done(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;
	struct csv_state *st = r->data;
	struct evbuffer *b = NULL;
	int n;
	size_t len;

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "could not read the audit log");
		return;
	}
	if (!(b = evbuffer_new())) {
		http_reply_error(r, RC_NOMEM, NULL, "out of memory");
		return;
	}
	n = PQntuples(res);
	csv_cell(b, "id", 0);
	csv_cell(b, "at", 0);
	csv_cell(b, "actor", 0);
	csv_cell(b, "action", 0);
	csv_cell(b, "target", 0);
	csv_cell(b, "ip", 0);
	csv_cell(b, "class_id", 0);
	csv_cell(b, "request_id", 0);
	csv_cell(b, "details", 1);
	for (int i = 0; i < n && i < st->limit; i++) {
		const char *cid = db_val(res, i, AUDIT_CLASS_ID);
		csv_cell(b, db_val(res, i, AUDIT_ID), 0);
		csv_cell(b, db_val(res, i, AUDIT_AT), 0);
		csv_cell(b, db_val(res, i, AUDIT_ACTOR), 0);
		csv_cell(b, db_val(res, i, AUDIT_ACTION), 0);
		csv_cell(b, db_val(res, i, AUDIT_TARGET), 0);
		csv_cell(b, db_val(res, i, AUDIT_IP), 0);
		csv_cell(b, cid ? cid : "", 0);
		csv_cell(b, db_val(res, i, AUDIT_REQUEST_ID), 0);
		csv_cell(b, db_val(res, i, AUDIT_DETAILS), 1);
	}
	/* more than one export's worth: where the next one starts */
	if (n > st->limit)
		http_add_header(r, "X-Next-Cursor", db_val(res, st->limit - 1, AUDIT_ID));
	http_add_header(r, "Content-Disposition", "attachment; filename=\"audit.csv\"");
	http_add_header(r, "Cache-Control", "no-store");
	len = evbuffer_get_length(b);
	http_reply(r, 200, "text/csv; charset=utf-8", (const char *)evbuffer_pullup(b, -1), len);
	evbuffer_free(b);
}

#define AUDIT_SQL                                                                 \
	"SELECT " AUDIT_LIST " FROM audit_log"                                    \
	" WHERE ($1::bigint IS NULL OR id < $1::bigint)"                          \
	" AND ($2::text IS NULL OR action = $2 OR starts_with(action, $2 || '.')" \
	"  OR ($3::boolean AND starts_with(action, rtrim($2, '*'))))"             \
	" AND ($4::text IS NULL OR actor_name = $4)"                              \
	" AND ($5::text IS NULL OR target = $5"                                   \
	"  OR ($6::boolean AND starts_with(target, rtrim($5, '*'))))"             \
	" AND ($7::timestamptz IS NULL OR at >= $7::timestamptz)"                 \
	" AND ($8::timestamptz IS NULL OR at < $8::timestamptz)"                  \
	" AND ($9::bigint IS NULL OR class_id IN (SELECT c.id FROM classes c"     \
	"  WHERE gc_class_role($9::bigint, c.id) IN ('owner', 'teacher')))"       \
	" AND ($11::bigint IS NULL OR class_id = $11::bigint)"                    \
	" ORDER BY id DESC LIMIT $10::int"

static void list(struct http_req *r)
{
	int limit, csv = 0, set;
	long long cursor;
	long n;
	char action[80], actor[80], target[320], from[48], to[48], format[16], cid[24];
	long long class_id = 0;
	struct db_args a = DB_ARGS_INIT;
	size_t l;

	if (text_query(r, "format", format, sizeof(format), &set) < 0)
		return;
	n = http_query(r, "format", format, sizeof(format));
	if (n >= 0) {
		if (strcmp(format, "csv") != 0 && strcmp(format, "json") != 0) {
			http_reply_error(r, RC_INVALID, "use format=csv or format=json",
			                 "unknown format '%s'", format);
			return;
		}
		csv = strcmp(format, "csv") == 0;
	}
	if (api_page(r, csv ? 10000 : 50, csv ? 10000 : 500, &limit, &cursor) < 0)
		return;
	db_arg_ll_opt(&a, cursor, cursor != 0);
	if (text_query(r, "action", action, sizeof(action), &set) < 0)
		return;
	l = set ? strlen(action) : 0;
	db_arg_str(&a, set ? action : NULL);
	/* a trailing '*' or '.' asks for a prefix */
	db_arg_str(&a, l && (action[l - 1] == '*' || action[l - 1] == '.') ? "true" : "false");
	if (text_query(r, "actor", actor, sizeof(actor), &set) < 0)
		return;
	db_arg_str(&a, set ? actor : NULL);
	if (text_query(r, "target", target, sizeof(target), &set) < 0)
		return;
	l = set ? strlen(target) : 0;
	db_arg_str(&a, set ? target : NULL);
	db_arg_str(&a, l && target[l - 1] == '*' ? "true" : "false");
	if (time_query(r, "from", from, sizeof(from), &set) < 0)
		return;
	db_arg_str(&a, set ? from : NULL);
	if (time_query(r, "to", to, sizeof(to), &set) < 0)
		return;
	db_arg_str(&a, set ? to : NULL);
	/* a teacher: only the classes they own or co-teach */
	db_arg_ll_opt(&a, r->auth->user_id, r->auth->role != ROLE_ADMIN);
	db_arg_ll(&a, limit + 1);
	n = api_query(r, "class_id", cid, sizeof(cid));
	if (n == -2)
		return;
	if (n >= 0 && (http_parse_decimal(cid, &class_id) < 0 || class_id < 1)) {
		http_reply_error(r, RC_INVALID, NULL, "class_id must be a positive integer");
		return;
	}
	db_arg_ll_opt(&a, class_id, n >= 0);
	if (!csv) {
		api_list_page(r, &audit_resource, limit, AUDIT_SQL, &a);
		return;
	}
	{
		struct csv_state *st = api_state(r, sizeof(*st), NULL);
		if (!st)
			return;
		st->limit = limit;
		db_query_args(AUDIT_SQL, &a, csv_done, r);
	}
}

const struct route api_audit_routes[] = {
	{ HTTP_GET, "/api/v1/audit", list, ROLE_ADMIN | ROLE_TEACHER, 0, 0, NULL },
	{ 0, NULL, NULL, 0, 0, 0, NULL },
};
