/* api_job_metrics.c — /jobs/{id}/metrics: the scalars a job reported and
 * the CPU and memory its container used.
 *
 * GET returns each series by name as [[step, value, at], ...] (only
 * ?names=a,b; only steps after ?after_step= for polling; thinned on the
 * server to ?max_points= per series, keeping each series' first and last
 * point), the latest value of each (last_metrics) and the usage samples
 * [[at, cpu_percent, mem_bytes, gpu_percent], ...] thinned alike (GPU use
 * is null: not measurable).  Visibility as GET /jobs/{id}: one's own jobs,
 * admins all; someone else's job is "not found".  Collected by
 * work/jobmetrics.c on the leader; read here from the database, so any
 * replica serves it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <http_parser.h>

#include "api/api.h"
#include "auth/auth.h"
#include "db/db.h"

#define NAMES_MAX 32

static int name_ok(const char *s, size_t n)
{
	if (n < 1 || n > 64)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '.' || c == '/' || c == '-'))
			return 0;
	}
	return 1;
}

static void done(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "");
		return;
	}
	if (PQntuples(res) != 1) {
		http_reply_error(r, RC_NOTFOUND, "GET /api/v1/jobs lists yours", "no such job");
		return;
	}
	http_reply_json(r, 200, json_loads(db_val(res, 0, 0), 0, NULL));
}

/* ?names=a,b as a quoted array literal into arr; -1 after replying 400. */
static int names_param(struct http_req *r, char *arr, size_t arrlen, int *given)
{
	char names[NAMES_MAX * 66];
	long n = api_query(r, "names", names, sizeof(names));
	size_t o = 0, count = 0;
	const char *s;

	*given = 0;
	if (n == -2)
		return -1;
	if (n < 0)
		return 0;
	*given = 1;
	o += (size_t)snprintf(arr + o, arrlen - o, "{");
	for (s = names;;) {
		const char *e = strchr(s, ',');
		size_t l = e ? (size_t)(e - s) : strlen(s);
		if (!name_ok(s, l) || ++count > NAMES_MAX) {
			http_reply_error(
			        r, RC_INVALID,
			        "names=loss,val/acc: up to 32 names of letters, digits and "
			        "_ . / -, 64 at most each",
			        "names must be a comma-separated list of metric names");
			return -1;
		}
		o += (size_t)snprintf(arr + o, arrlen - o, "%s\"%.*s\"", count > 1 ? "," : "",
		                      (int)l, s);
		if (!e)
			break;
		s = e + 1;
	}
	snprintf(arr + o, arrlen - o, "}");
	return 0;
}

/* ?name= as a whole number in [lo, hi] into *v (def when absent); -1
 * after replying 400. */
static int int_param(struct http_req *r, const char *name, long long lo, long long hi,
                     long long def, long long *v)
{
	char buf[32], *end;
	long n = api_query(r, name, buf, sizeof(buf));

	*v = def;
	if (n == -2)
		return -1;
	if (n < 0)
		return 0;
	*v = strtoll(buf, &end, 10);
	if (!buf[0] || *end || *v < lo || *v > hi) {
		http_reply_error(r, RC_INVALID, "a whole number from %lld to %lld",
		                 "%s must be a whole number from %lld to %lld", name, lo, hi);
		return -1;
	}
	return 0;
}

static void get(struct http_req *r)
{
	long long id, after, max;
	char ids[24], uid[24], after_s[24], max_s[24], arr[NAMES_MAX * 70 + 8];
	int given;
	const char *p[5] = { ids, NULL, NULL, after_s, max_s };

	if (api_id(r, "id", &id) < 0 || names_param(r, arr, sizeof(arr), &given) < 0 ||
	    int_param(r, "after_step", -1, 9007199254740991LL, -1, &after) < 0 ||
	    int_param(r, "max_points", 2, 10000, 2000, &max) < 0)
		return;
	snprintf(ids, sizeof(ids), "%lld", id);
	snprintf(uid, sizeof(uid), "%lld", (long long)r->auth->user_id);
	snprintf(after_s, sizeof(after_s), "%lld", after);
	snprintf(max_s, sizeof(max_s), "%lld", max);
	p[1] = r->auth->role == ROLE_ADMIN ? NULL : uid;
	p[2] = given ? arr : NULL;
	/* thinning: every k-th point of a series over max_points (k so that
	 * at most max_points - 1 are taken), and its last */
	db_query("SELECT json_build_object('job_id', j.id, 'state', j.state,"
	         " 'last_metrics', j.last_metrics,"
	         " 'names', (SELECT COALESCE(json_agg(k ORDER BY k), '[]')"
	         "  FROM jsonb_object_keys(j.last_metrics) k),"
	         " 'max_points', $5::int,"
	         " 'series', (SELECT COALESCE(json_object_agg(name, pts), '{}') FROM ("
	         "  SELECT name, json_agg(json_build_array(step, value, " DB_TS_MS(
	                 "at") ")"
	                       "   ORDER BY step) AS pts FROM ("
	                       "   SELECT name, step, value, at,"
	                       "    row_number() OVER (PARTITION BY name ORDER BY step) AS rn,"
	                       "    count(*) OVER (PARTITION BY name) AS c"
	                       "   FROM job_metrics WHERE job_id = j.id"
	                       "   AND ($3::text[] IS NULL OR name = ANY ($3::text[])) AND step > "
	                       "$4::bigint) x"
	                       "  WHERE c <= $5::int OR rn = c"
	                       "   OR (rn - 1) % ceil(c::numeric / ($5::int - 1))::bigint = 0"
	                       "  GROUP BY name) s),"
	                       " 'usage', json_build_object('gpu', 'not measurable', 'samples',"
	                       "  (SELECT COALESCE(json_agg(json_build_array(" DB_TS_MS(
	                               "at") ", cpu_percent,"
	                                     "   mem_bytes, gpu_percent) ORDER BY at), '[]') FROM ("
	                                     "   SELECT at, cpu_percent, mem_bytes, gpu_percent,"
	                                     "    row_number() OVER (ORDER BY at) AS rn, count(*) "
	                                     "OVER () AS c"
	                                     "   FROM job_usage WHERE job_id = j.id) u"
	                                     "   WHERE c <= $5::int OR rn = c"
	                                     "    OR (rn - 1) % ceil(c::numeric / ($5::int - "
	                                     "1))::bigint = 0)))::text"
	                                     " FROM jobs j WHERE j.id = $1 AND ($2::bigint IS NULL "
	                                     "OR j.user_id = $2::bigint)",
	         5, p, done, r);
}

const struct route api_job_metrics_routes[] = {
	{ HTTP_GET, "/api/v1/jobs/{id}/metrics", get, ROLES_ALL, 0, 0, NULL },
	{ 0, NULL, NULL, 0, 0, 0, NULL },
};
