/* api_usage.c — /usage and /usage/waste: accounting (issue 15).
 *
 * Owns: reading the query (group_by, period, from, to, format, class), the
 * tenant rules (an admin sees everything; a class's owner, co-teachers and
 * TAs see its class-context work; everyone sees their own), and the two
 * reports, each one statement that clips the history to [from, to) and to
 * each UTC calendar bucket, to the second, and writes the JSON or CSV.
 * Does not own: the history itself (usage_intervals, usage_idle_periods,
 * usage_storage_days: kept by the triggers of 0034_usage.sql) nor the GPU
 * samples (engine/gpusample.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <http_parser.h>

#include "api/api.h"
#include "auth/auth.h"
#include "db/db.h"

#define DAY_S 86400.0
/* a span of at most 3 years of buckets; one bucket (total, waste): 10 */
#define SPAN_MAX_S       (1096 * DAY_S)
#define SPAN_MAX_TOTAL_S (3653 * DAY_S)
#define SPAN_DEFAULT_S   (30 * DAY_S)

struct usage_q {
	char group[8];         /* user | class | pool | image */
	char period[8];        /* day | week | month | total ("" for waste) */
	char from[32], to[32]; /* seconds since the epoch, as text */
	int csv;
	long long class_id; /* 0: every class */
};

/* "2026-01-31", "2026-01-31T12:00:00", with ".fff" and "Z" optional (UTC),
 * a real calendar time: the seconds since the epoch in *out.  0 or -1. */
static int parse_time(const char *s, double *out)
{
	struct tm tm, back;
	const char *end;
	double frac = 0, scale = 0.1;
	time_t t;

	memset(&tm, 0, sizeof(tm));
	end = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!end) {
		memset(&tm, 0, sizeof(tm));
		end = strptime(s, "%Y-%m-%d", &tm);
		if (!end || *end)
			return -1;
	} else if (*end == '.') {
		if (end[1] < '0' || end[1] > '9')
			return -1;
		for (end++; *end >= '0' && *end <= '9' && scale > 1e-7; end++, scale /= 10)
			frac += (*end - '0') * scale;
	}
	if (*end == 'Z')
		end++;
	if (*end)
		return -1;
	back = tm;
	t = timegm(&tm);
	gmtime_r(&t, &tm);
	if (t == (time_t)-1 || tm.tm_mday != back.tm_mday || tm.tm_mon != back.tm_mon ||
	    tm.tm_year != back.tm_year || tm.tm_year < 70 || tm.tm_year > 8099)
		return -1; /* 2026-02-30 and its kind */
	*out = (double)t + frac;
	return 0;
}

/* One of the names in list (NULL-ended) or absent (def): 0, else replies
 * 400 naming the choices and returns -1. */
static int choice(struct http_req *r, const char *name, const char *const *list, const char *def,
                  char *out, size_t outlen)
{
	long n = api_query(r, name, out, outlen);
	char all[80] = "";

	if (n == -2)
		return -1;
	if (n == -1) {
		snprintf(out, outlen, "%s", def);
		return 0;
	}
	for (int i = 0; list[i]; i++) {
		if (!strcmp(out, list[i]))
			return 0;
		snprintf(all + strlen(all), sizeof(all) - strlen(all), "%s%s", i ? ", " : "",
		         list[i]);
	}
	http_reply_error(r, RC_INVALID, all, "'%s' must be one of: %s", name, all);
	return -1;
}

/* Reads and checks the query; replies 400 and returns -1 on bad input. */
static int read_query(struct http_req *r, int waste, struct usage_q *q)
{
	static const char *const groups[] = { "user", "class", "pool", "image", NULL };
	static const char *const wgroups[] = { "user", "class", NULL };
	static const char *const periods[] = { "day", "week", "month", "total", NULL };
	static const char *const formats[] = { "json", "csv", NULL };
	char buf[64], fmt[8];
	double from, to, max;
	long n;

	memset(q, 0, sizeof(*q));
	if (choice(r, "group_by", waste ? wgroups : groups, "user", q->group, sizeof(q->group)) <
	            0 ||
	    choice(r, "format", formats, "json", fmt, sizeof(fmt)) < 0)
		return -1;
	q->csv = !strcmp(fmt, "csv");
	if (waste) {
		if (http_query(r, "period", buf, sizeof(buf)) != -1) {
			http_reply_error(r, RC_INVALID, "leave 'period' out",
			                 "the waste report has no periods: it lists idle periods");
			return -1;
		}
	} else if (choice(r, "period", periods, "day", q->period, sizeof(q->period)) < 0) {
		return -1;
	}
	n = api_query(r, "to", buf, sizeof(buf));
	if (n == -2)
		return -1;
	if (n == -1) {
		to = (double)time(NULL);
	} else if (parse_time(buf, &to) < 0) {
		http_reply_error(r, RC_INVALID, "use an ISO 8601 UTC time: 2026-11-30T00:00:00Z",
		                 "'to' is not a time: '%s'", buf);
		return -1;
	}
	n = api_query(r, "from", buf, sizeof(buf));
	if (n == -2)
		return -1;
	if (n == -1) {
		from = to - SPAN_DEFAULT_S;
	} else if (parse_time(buf, &from) < 0) {
		http_reply_error(r, RC_INVALID, "use an ISO 8601 UTC time: 2026-11-01T00:00:00Z",
		                 "'from' is not a time: '%s'", buf);
		return -1;
	}
	if (from >= to) {
		http_reply_error(r, RC_INVALID, "give a 'from' before 'to'",
		                 "'from' must be before 'to'");
		return -1;
	}
	max = waste || !strcmp(q->period, "total") ? SPAN_MAX_TOTAL_S : SPAN_MAX_S;
	if (to - from > max) {
		http_reply_error(
		        r, RC_INVALID,
		        "ask for a shorter span, or period=total for one sum over up to 10 "
		        "years",
		        "the span from 'from' to 'to' is longer than %d years",
		        max == SPAN_MAX_S ? 3 : 10);
		return -1;
	}
	snprintf(q->from, sizeof(q->from), "%.6f", from);
	snprintf(q->to, sizeof(q->to), "%.6f", to);
	n = api_query(r, "class", buf, sizeof(buf));
	if (n == -2)
		return -1;
	if (n >= 0 && (http_parse_decimal(buf, &q->class_id) < 0 || q->class_id <= 0)) {
		http_reply_error(r, RC_INVALID, "give a class id: class=12",
		                 "'%s' is not a class id", buf);
		return -1;
	}
	return 0;
}

/* The parameters every report reads (after the SQL, in gc_usage_exec()'s
 * call; inside the report they are): $1 group_by, $2 period, $3 from, $4
 * to, $5 the caller, $6 admin, $7 class (NULL: all). */
static void bind_query(const struct http_req *r, const struct usage_q *q, struct db_args *a)
{
	db_arg_str(a, q->group);
	db_arg_str(a, q->period);
	db_arg_str(a, q->from);
	db_arg_str(a, q->to);
	db_arg_ll(a, (long long)r->auth->user_id);
	db_arg_str(a, r->auth->role == ROLE_ADMIN ? "t" : "f");
	db_arg_ll_opt(a, q->class_id, q->class_id != 0);
}

/* clang-format off */
/* chk: 'ok', 'nf' (no such class) or 'no' (the caller does not teach it);
 * vis: the classes whose class-context work the caller sees beyond their
 * own (an array, so "mine or my classes'" can use both indexes); F and T:
 * from and to (immutable expressions: the planner sees the span). */
#define F "to_timestamp($3::float8)"
#define T "to_timestamp($4::float8)"
#define USAGE_CHK \
	"WITH chk AS (SELECT CASE WHEN $7::bigint IS NULL THEN 'ok'" \
	"  WHEN NOT EXISTS (SELECT 1 FROM classes WHERE id = $7::bigint) THEN 'nf'" \
	"  WHEN $6::boolean OR gc_class_role($5::bigint, $7::bigint) IN ('owner', 'teacher', 'ta')" \
	"  THEN 'ok' ELSE 'no' END AS st, $2::text AS per)," \
	" vis AS (SELECT COALESCE(array_agg(c.id), '{}') AS ids FROM classes c WHERE NOT $6::boolean" \
	"  AND gc_class_role($5::bigint, c.id) IN ('owner', 'teacher', 'ta')),"

/* The key of a row grouped by key_id and snap (the name it had when
 * recorded): the current name of what is grouped by, else the name it had
 * (it was deleted), else "(no ...)". */
#define USAGE_KEY \
	" CASE $1 WHEN 'user' THEN COALESCE((SELECT username FROM users WHERE id = key_id), snap)" \
	" WHEN 'class' THEN COALESCE((SELECT name FROM classes WHERE id = key_id), snap, '(no class)')" \
	" WHEN 'pool' THEN COALESCE((SELECT name FROM pools WHERE id = key_id), snap, '(no pool)')" \
	" ELSE COALESCE((SELECT reference FROM images WHERE id = key_id), snap, '(no image)') END"

/* The days wholly inside [from, to): FD (the first) up to TD (excluded);
 * FD_TS, TD_TS: their starts.  BK(ts): the bucket of the day starting at ts. */
#define FD "((" F " AT TIME ZONE 'UTC')::date + CASE WHEN " F " = date_trunc('day', " F ", 'UTC') THEN 0 ELSE 1 END)"
#define TD "((" T " AT TIME ZONE 'UTC')::date)"
#define FD_TS "(" FD "::timestamp AT TIME ZONE 'UTC')"
#define TD_TS "(" TD "::timestamp AT TIME ZONE 'UTC')"
#define BK(ts) "CASE WHEN $2 = 'total' THEN " F " ELSE date_trunc($2, (" ts ") AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' END"
#define SEES(x) \
	"($6::boolean OR " x ".user_id = $5::bigint OR " x ".class_id = ANY ((SELECT ids FROM vis)::bigint[]))" \
	"  AND ($7::bigint IS NULL OR " x ".class_id = $7::bigint) AND (SELECT st FROM chk) = 'ok'"

/* A storage day's part inside [from, to) and before now.  A UTC day lies in
 * one day, week or month bucket, so only the days at from and to are cut
 * (BK() names the bucket; no per-row bucket series: 1.8M storage days a
 * year took 12 s through gc_usage_buckets()). */
#define SD_LO "greatest(d.day::timestamp AT TIME ZONE 'UTC', " F ")"
#define SD_HI "least((d.day + 1)::timestamp AT TIME ZONE 'UTC', " T ", now())"

/* rw: one row per key and bucket with the raw sums: gs allocated
 * GPU-seconds, used utilisation-weighted GPU-seconds (NULL: nothing
 * measured), gm the allocated GPU-seconds that were measured, cpu_h, mem_h,
 * sd GiB-days (user rows).  Every interval is cut into UTC day parts; the
 * parts of ended intervals on the days wholly inside [from, to) are read
 * from usage_days (worked out when they ended), the rest (live intervals,
 * the partial days at from and to) clipped here (pc), each part weighted by
 * the mean utilisation of its GPU's samples in it (NULL: declared, CPU-only,
 * or no sample). */
#define USAGE_ROWS \
	USAGE_CHK \
	" pc AS (SELECT u.user_id, u.username, u.class_id, u.class_name, u.pool_id, u.pool_name," \
	"  u.image_id, u.image_ref, " BK("b.b_start") " AS b_start, u.gpus * x.secs AS gs," \
	"  u.gpus * x.secs * sm.util / 100 AS used," \
	"  CASE WHEN sm.util IS NULL THEN 0 ELSE u.gpus * x.secs END AS gm," \
	"  u.cpu_millis * x.secs / 3600000 AS cpu_h, u.mem_mib * x.secs / (1024 * 3600.0) AS mem_h" \
	"  FROM usage_intervals u" \
	"  CROSS JOIN LATERAL gc_usage_buckets('day', " F ", greatest(u.started_at, " F ")," \
	"   least(COALESCE(u.ended_at, now()), now(), " T ")) b" \
	"  CROSS JOIN LATERAL (SELECT extract(epoch FROM b.b_hi - b.b_lo)::float8 AS secs) x" \
	"  CROSS JOIN LATERAL (SELECT avg(s.util_pct)::float8 AS util FROM gpu_samples s" \
	"   WHERE u.gpus > 0 AND NOT u.gpu_declared AND s.gpu_uuid = u.gpu_uuid" \
	"   AND s.at >= b.b_lo AND s.at < b.b_hi) sm" \
	"  WHERE (tstzrange(u.started_at, u.ended_at) && tstzrange(" F ", " FD_TS ")" \
	"   OR tstzrange(u.started_at, u.ended_at) && tstzrange(" TD_TS ", " T ")" \
	"   OR u.ended_at IS NULL)" \
	"  AND tstzrange(u.started_at, u.ended_at) && tstzrange(" F ", " T ")" \
	"  AND (u.ended_at IS NULL OR b.b_start < " FD_TS " OR b.b_start >= " TD_TS ")" \
	"  AND " SEES("u") \
	"  UNION ALL SELECT d.user_id, d.username, d.class_id, d.class_name, d.pool_id, d.pool_name," \
	"  d.image_id, d.image_ref, " BK("d.day::timestamp AT TIME ZONE 'UTC'") ", d.gpu_seconds," \
	"  d.gpu_used_seconds, d.gpu_measured_seconds, d.cpu_milli_seconds / 3600000," \
	"  d.mem_mib_seconds / (1024 * 3600.0)" \
	"  FROM usage_days d WHERE d.day >= " FD " AND d.day < " TD " AND " SEES("d") ")," \
	" k AS (SELECT CASE $1 WHEN 'user' THEN user_id WHEN 'class' THEN class_id" \
	"  WHEN 'pool' THEN pool_id ELSE image_id END AS key_id," \
	"  CASE $1 WHEN 'user' THEN username WHEN 'class' THEN class_name" \
	"  WHEN 'pool' THEN pool_name ELSE image_ref END AS snap, b_start," \
	"  sum(gs) AS gs, sum(used) AS used, sum(gm) AS gm, sum(cpu_h) AS cpu_h, sum(mem_h) AS mem_h" \
	"  FROM pc GROUP BY 1, 2, 3)," \
	" st AS (SELECT d.user_id AS key_id, d.username AS snap," \
	"  " BK("d.day::timestamp AT TIME ZONE 'UTC'") " AS b_start," \
	"  sum(d.bytes::float8 / 1073741824 * extract(epoch FROM " SD_HI " - " SD_LO ")::float8 / 86400) AS sd" \
	"  FROM usage_storage_days d" \
	"  WHERE $1 = 'user' AND $7::bigint IS NULL AND ($6::boolean OR d.user_id = $5::bigint)" \
	"  AND d.day >= (" F " AT TIME ZONE 'UTC')::date AND d.day <= (" T " AT TIME ZONE 'UTC')::date" \
	"  AND " SD_HI " > " SD_LO \
	"  GROUP BY 1, 2, 3)," \
	" al AS (SELECT key_id, snap, b_start, gs, used, gm, cpu_h, mem_h, NULL::float8 AS sd FROM k" \
	"  UNION ALL SELECT key_id, snap, b_start, 0, NULL, 0, 0, 0, sd FROM st)," \
	" rw AS (SELECT key_id, key, b_start, sum(gs) AS gs, sum(used) AS used, sum(gm) AS gm," \
	"  sum(cpu_h) AS cpu_h, sum(mem_h) AS mem_h, sum(sd) AS sd" \
	"  FROM (SELECT al.*," USAGE_KEY " AS key FROM al) x GROUP BY key_id, key, b_start)"
/* clang-format on */

/* A CSV field that may be NULL: empty (concat_ws() would drop it). */
#define CSVN(x) "COALESCE((" x ")::text, '')"
/* A rounded figure (NULL stays NULL). */
#define R3(x) "round((" x ")::numeric, 3)"
#define R6(x) "round((" x ")::numeric, 6)"
/* "measured" when every allocated GPU-second was sampled, "not measurable"
 * when none was (declared GPUs, CPU-only work), else "partly measured". */
#define MEASURED(GS, GM)                                                                       \
	"CASE WHEN " GM " <= 0 THEN 'not measurable' WHEN " GM " >= " GS " * (1 - 1e-9) THEN " \
	"'measured' ELSE 'partly measured' END"

/* clang-format off */
static const char usage_json_sql[] =
	USAGE_ROWS
	" SELECT (SELECT st FROM chk), json_build_object('group_by', $1, 'period', $2,"
	" 'from', gc_ts(to_timestamp($3::float8)), 'to', gc_ts(to_timestamp($4::float8)),"
	" 'rows', COALESCE(json_agg(json_build_object('key', key, 'key_id', key_id,"
	"  'period_start', gc_ts(b_start), 'gpu_seconds', " R3("gs") ","
	"  'gpu_used_seconds', " R3("used") ", 'gpu_measured', " MEASURED("gs", "gm") ","
	"  'cpu_hours', " R6("cpu_h") ", 'memory_gib_hours', " R6("mem_h") ","
	"  'storage_gib_days', " R6("sd") ") ORDER BY b_start, key, key_id), '[]'),"
	" 'totals', json_build_object('gpu_seconds', " R3("COALESCE(sum(gs), 0)") ","
	"  'gpu_used_seconds', " R3("sum(used)") ","
	"  'gpu_measured', " MEASURED("COALESCE(sum(gs), 0)", "COALESCE(sum(gm), 0)") ","
	"  'cpu_hours', " R6("COALESCE(sum(cpu_h), 0)") ","
	"  'memory_gib_hours', " R6("COALESCE(sum(mem_h), 0)") ","
	"  'storage_gib_days', " R6("CASE WHEN $1 = 'user' THEN sum(sd) END") "))::text"
	" FROM rw";

static const char usage_csv_sql[] =
	USAGE_ROWS
	" SELECT (SELECT st FROM chk), 'key,period_start,gpu_seconds,gpu_used_seconds,"
	"gpu_measured,cpu_hours,memory_gib_hours,storage_gib_days' || E'\\r\\n' ||"
	" COALESCE(string_agg(concat_ws(',', gc_csv(key), gc_ts(b_start), " R3("gs") ","
	"  " CSVN(R3("used")) ", " MEASURED("gs", "gm") ", " R6("cpu_h") ", " R6("mem_h") ","
	"  " CSVN(R6("sd")) ") || E'\\r\\n', '' ORDER BY b_start, key, key_id), '')"
	" FROM rw";
/* clang-format on */

/* wp: the idle periods the caller sees, clipped to [from, to), with the
 * GPU-equivalents their instance held and the GPU-seconds allocated while
 * idle (the overlap of the period with each of its allocation intervals). */
/* clang-format off */
#define WASTE_ROWS \
	USAGE_CHK \
	" p AS (SELECT ip.*, greatest(ip.started_at, " F ") AS lo," \
	"  least(COALESCE(ip.ended_at, now()), now(), " T ") AS hi," \
	"  CASE $1 WHEN 'user' THEN ip.user_id ELSE ip.class_id END AS key_id," \
	"  CASE $1 WHEN 'user' THEN COALESCE((SELECT username FROM users WHERE id = ip.user_id)," \
	"  ip.username) ELSE COALESCE((SELECT name FROM classes WHERE id = ip.class_id)," \
	"  ip.class_name, '(no class)') END AS key" \
	"  FROM usage_idle_periods ip" \
	"  WHERE tstzrange(ip.started_at, ip.ended_at) && tstzrange(" F ", " T ")" \
	"  AND ($6::boolean OR ip.user_id = $5::bigint OR ip.class_id = ANY ((SELECT ids FROM vis)::bigint[]))" \
	"  AND ($7::bigint IS NULL OR ip.class_id = $7::bigint)" \
	"  AND (SELECT st FROM chk) = 'ok')," \
	" wp AS (SELECT p.id, p.key_id, p.key, p.instance_id, p.instance_name, p.started_at," \
	"  p.warned_at, p.ended_at, p.end_reason, sum(u.gpus) AS gpus," \
	"  extract(epoch FROM p.hi - p.lo)::float8 AS secs," \
	"  sum(u.gpus * extract(epoch FROM least(p.hi, COALESCE(u.ended_at, now()))" \
	"  - greatest(p.lo, u.started_at))::float8) AS gsec" \
	"  FROM p JOIN usage_intervals u ON u.request_id = p.request_id AND u.gpus > 0" \
	"  AND u.started_at < p.hi AND COALESCE(u.ended_at, now()) > p.lo" \
	"  WHERE p.hi > p.lo GROUP BY p.id, p.key_id, p.key, p.instance_id, p.instance_name," \
	"  p.started_at, p.warned_at, p.ended_at, p.end_reason, p.lo, p.hi)"
/* clang-format on */

#define WASTE_PERIOD                                                                            \
	"json_build_object('kind', 'instance', 'id', instance_id::text, 'name', instance_name," \
	" 'started_at', gc_ts(started_at), 'warned_at', gc_ts(warned_at), 'ended_at',"          \
	" gc_ts(ended_at), 'end_reason', end_reason, 'gpus', " R6("gpus") ", 'seconds', " R3(   \
	        "secs") ", 'gpu_seconds', " R3("gsec") ")"

/* clang-format off */
static const char waste_json_sql[] =
	WASTE_ROWS ","
	" g AS (SELECT key_id, key, sum(gsec) AS gsec,"
	"  json_agg(" WASTE_PERIOD " ORDER BY started_at, instance_id) AS periods"
	"  FROM wp GROUP BY key_id, key)"
	" SELECT (SELECT st FROM chk), json_build_object('group_by', $1,"
	" 'from', gc_ts(to_timestamp($3::float8)), 'to', gc_ts(to_timestamp($4::float8)),"
	" 'rows', COALESCE(json_agg(json_build_object('key', key, 'key_id', key_id,"
	"  'allocated_idle_seconds', " R3("gsec") ", 'periods', periods)"
	"  ORDER BY gsec DESC, key), '[]'),"
	" 'totals', json_build_object('allocated_idle_seconds', "
	R3("COALESCE(sum(gsec), 0)") "))::text"
	" FROM g";

static const char waste_csv_sql[] =
	WASTE_ROWS
	" SELECT (SELECT st FROM chk), 'key,kind,id,name,started_at,warned_at,ended_at,"
	"end_reason,gpus,seconds,allocated_idle_seconds' || E'\\r\\n' ||"
	" COALESCE(string_agg(concat_ws(',', gc_csv(key), 'instance', instance_id,"
	"  gc_csv(instance_name), gc_ts(started_at), gc_ts(warned_at), "
	CSVN("gc_ts(ended_at)") ", " CSVN("end_reason") ", " R6("gpus") ", " R3("secs") ","
	"  " R3("gsec") ") || E'\\r\\n', '' ORDER BY key, started_at, instance_id), '')"
	" FROM wp";
/* clang-format on */

static void report_done(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;
	const char *st, *body;
	int csv;

	if (rc != RC_OK || PQntuples(res) != 1) {
		api_reply_db_error(r, rc == RC_OK ? RC_DB : rc, "could not read the usage");
		return;
	}
	st = db_val(res, 0, 0);
	if (st && !strcmp(st, "nf")) {
		http_reply_error(r, RC_NOTFOUND, NULL, "no such class");
		return;
	}
	if (st && !strcmp(st, "no")) {
		http_reply_error(r, RC_FORBIDDEN, "ask a teacher of the class, or an admin",
		                 "you do not teach that class");
		return;
	}
	body = db_val(res, 0, 1);
	csv = body && body[0] == 'k'; /* the CSV starts with its header, "key,..." */
	if (csv) {
		http_add_header(r, "Content-Disposition", "attachment; filename=\"usage.csv\"");
		http_add_header(r, "Cache-Control", "no-store");
		http_reply(r, 200, "text/csv; charset=utf-8", body, strlen(body));
	} else {
		http_reply(r, 200, "application/json", body ? body : "{}", body ? strlen(body) : 2);
	}
}

/* Runs report sql through gc_usage_exec() (0034: without JIT). */
static void run_report(struct http_req *r, const struct usage_q *q, const char *sql)
{
	struct db_args a = DB_ARGS_INIT;

	db_arg_str(&a, sql);
	bind_query(r, q, &a);
	db_query_args("SELECT st, body FROM gc_usage_exec($1, $2, $3, $4, $5, $6::bigint,"
	              " $7::boolean, $8::bigint)",
	              &a, report_done, r);
}

static void usage(struct http_req *r)
{
	struct usage_q q;

	if (read_query(r, 0, &q) < 0)
		return;
	run_report(r, &q, q.csv ? usage_csv_sql : usage_json_sql);
}

static void waste(struct http_req *r)
{
	struct usage_q q;

	if (read_query(r, 1, &q) < 0)
		return;
	run_report(r, &q, q.csv ? waste_csv_sql : waste_json_sql);
}

const struct route api_usage_routes[] = {
	{ HTTP_GET, "/api/v1/usage", usage, ROLES_ALL, 0, 0, NULL },
	{ HTTP_GET, "/api/v1/usage/waste", waste, ROLES_ALL, 0, 0, NULL },
	{ 0, NULL, NULL, 0, 0, 0, NULL },
};
