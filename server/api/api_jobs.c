/* api_jobs.c — /jobs: submit (with Idempotency-Key), list (filters,
 * counts per state, cursor pages), one job, cancel, and its log.
 *
 * Handlers write records and desired states only: a submit records the job
 * and queues its allocation request in one statement (a 201 means both are
 * committed); a cancel writes desired = cancelled.  The job driver on the
 * scheduler leader (work/jobs.c) does the engine work.  The log is read
 * from the job directory (a worker thread), so any replica serves it.
 * A user sees and acts on their own jobs only (admins on all); someone
 * else's job is "not found".
 */
#include <errno.h>
#include <fcntl.h>
#include <regex.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <http_parser.h>

#include "api/admit.h"
#include "api/api.h"
#include "api/job_body.h"
#include "api/jobcursor.h"
#include "auth/auth.h"
#include "base/clock.h"
#include "base/cron.h"
#include "base/events.h"
#include "base/worker.h"
#include "db/db.h"
#include "storage/paths.h"
#include "storage/storage.h"
#include "work/template.h"

/* A distributed job's members (0027), for JOB_JSON; null for one member. */
/* clang-format off */
#define JOB_RANKS \
	" 'members', j.members, 'ranks', CASE WHEN j.members > 1 THEN COALESCE((SELECT" \
	"  json_agg(json_build_object('rank', m.rank, 'node', mn.name, 'state', m.state," \
	"  'exit_code', m.exit_code, 'reason', m.reason, 'reason_code'," \
	"  NULLIF(m.reason_code, ''), 'address', NULLIF(m.address, ''), 'container_name'," \
	"  NULLIF(m.container_name, ''), 'started_at', " DB_TS("m.started_at") "," \
	"  'finished_at', " DB_TS("m.finished_at") ") ORDER BY m.rank) FROM job_members m" \
	"  LEFT JOIN nodes mn ON mn.id = m.node_id WHERE m.job_id = j.id), '[]') END,"
/* clang-format on */

/* A queued request's start estimate, or why it has none (sched/eta.h). */
#define REQ_ETA "'eta', " DB_TS("r.eta_at") ", 'eta_reason', NULLIF(r.eta_reason, '')"

/* One job as a JSON document (text), built by the database. */
#define JOB_JSON                                                                               \
	"json_build_object('id', j.id, 'name', j.name, 'user_id', j.user_id, 'username',"      \
	" u.username, 'tags', to_json(j.tags), 'image_id', j.image_id, 'image', im.reference," \
	" 'image_name', im.display_name, 'command', to_json(j.command), 'env', j.env,"         \
	" 'hyperparameters', j.hyperparameters, 'pool', p.name, 'slices', j.slices,"           \
	" 'class', CASE WHEN cls.id IS NULL THEN NULL ELSE json_build_object('id', cls.id,"    \
	"  'name', cls.name, 'code', cls.code) END,"                                           \
	" 'cpu_millis', j.cpu_millis, 'mem_mib', j.mem_mib, 'shm_mib', j.shm_mib,"             \
	" 'priority', j.priority, 'max_runtime_s', j.max_runtime_s, 'retry_limit',"            \
	" j.retry_limit, 'retries', j.retries, 'state', j.state, 'desired', j.desired,"        \
	" 'cancelled_by', j.cancelled_by, 'reason', j.reason, 'reason_code',"                  \
	" NULLIF(j.reason_code, ''), 'exit_code', j.exit_code, 'node', n.name,"                \
	" 'container_name', NULLIF(j.container_name, ''),"                                     \
	" 'directory', substr(j.directory, length('home/' || u.username || '/') + 1),"         \
	" 'last_metrics', j.last_metrics,"                                                     \
	" 'request', CASE WHEN r.id IS NULL THEN NULL ELSE json_build_object('id', r.id,"      \
	"  'state', r.state, 'reason_code', r.reason_code, 'reason', r.reason, 'position',"    \
	"  r.position, " REQ_ETA ") END, 'sweep_id', j.sweep_id,"                              \
	" 'gpus', COALESCE((SELECT json_agg(json_build_object('uuid', g.uuid, 'index', g.idx," \
	"  'model', g.model, 'util_pct', " GPU_UTIL_NOW ") ORDER BY a.id)"                     \
	"  FROM allocations a JOIN slices s"                                                   \
	"  ON s.id = a.slice_id JOIN gpus g ON g.id = s.gpu_id"                                \
	"  WHERE a.request_id = j.request_id AND a.released_at IS NULL), '[]')," JOB_RANKS     \
	" 'template_id', j.template_id, 'template', jt.name, 'template_title', jt.title,"      \
	" 'created_at', " DB_TS("j.created_at") ", 'started_at', " DB_TS(                      \
	        "j.started_at") ", 'finished_at', " DB_TS("j.finished_at") ")::text"

#define JOB_FROM                                                                                   \
	" FROM jobs j JOIN users u ON u.id = j.user_id"                                            \
	" LEFT JOIN images im ON im.id = j.image_id LEFT JOIN pools p ON p.id = j.pool_id"         \
	" LEFT JOIN nodes n ON n.id = j.node_id LEFT JOIN alloc_requests r ON r.id = j.request_id" \
	" LEFT JOIN job_templates jt ON jt.id = j.template_id"                                     \
	" LEFT JOIN classes cls ON cls.id = j.class_id"

static const char *const states[] = { "queued",    "starting", "running",   "stopping",
	                              "succeeded", "failed",   "cancelled", "lost" };

static int is_admin(const struct http_req *r)
{
	return r->auth->role == ROLE_ADMIN;
}

/* The caller's id as a parameter, or NULL for admins (they see all). */
static const char *owner_param(struct http_req *r, char *buf, size_t len)
{
	snprintf(buf, len, "%lld", (long long)r->auth->user_id);
	return is_admin(r) ? NULL : buf;
}

static void kick(void)
{
	events_publish(EV_ALLOC_CHANGED);    /* a pass of the scheduler... */
	events_publish(EV_WORKLOAD_CHANGED); /* ...and of the driver, on the leader */
}

/* ---- one job ---- */

static void one_reply(PGresult *res, enum rc rc, struct http_req *r, int status)
{
	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "");
		return;
	}
	if (PQntuples(res) != 1) {
		http_reply_error(r, RC_NOTFOUND, "GET /api/v1/jobs lists yours", "no such job");
		return;
	}
	http_reply_json(r, status, json_loads(db_val(res, 0, 0), 0, NULL));
}

static void one_200(PGresult *res, enum rc rc, void *arg)
{
	one_reply(res, rc, arg, 200);
}

static void one_201(PGresult *res, enum rc rc, void *arg)
{
	one_reply(res, rc, arg, 201);
	kick();
}

static void one_202(PGresult *res, enum rc rc, void *arg)
{
	one_reply(res, rc, arg, 202);
	kick();
}

static void reply_job(struct http_req *r, const char *id, db_cb cb)
{
	char uid[24];
	const char *p[2] = { id, owner_param(r, uid, sizeof(uid)) };

	db_query("SELECT " JOB_JSON JOB_FROM
	         " WHERE j.id = $1 AND ($2::bigint IS NULL OR j.user_id = $2::bigint)",
	         2, p, cb, r);
}

static void get(struct http_req *r)
{
	long long id;
	char ids[24];

	if (api_id(r, "id", &id) < 0)
		return;
	snprintf(ids, sizeof(ids), "%lld", id);
	reply_job(r, ids, one_200);
}

/* ---- list ---- */

/* The sorts: their cursor letter, the key (an SQL expression over the job
 * j whose NULLs sort last either way: the sentinel is per direction), the
 * key as the cursor carries it (over the key k), and the cursor's key back
 * in SQL ($15).  created sorts by id alone: ids are handed out in submit
 * order, and its cursor stays the id it always was. */
struct sort_def {
	const char *name;
	char code;
	const char *key_asc, *key_desc; /* %s: "" */
	const char *out;                /* the key k as text for the cursor */
	const char *in;                 /* $15 as a key */
};

static const struct sort_def sorts[] = {
	{ "created", 'c', "j.id", "j.id", "NULL::text", "NULL" },
	{ "started", 's', "COALESCE(j.started_at, 'infinity')",
	  "COALESCE(j.started_at, '-infinity')", "gc_ts_us(k)::text", "gc_us_ts($15::bigint)" },
	{ "finished", 'f', "COALESCE(j.finished_at, 'infinity')",
	  "COALESCE(j.finished_at, '-infinity')", "gc_ts_us(k)::text", "gc_us_ts($15::bigint)" },
	{ "name", 'n', "j.name COLLATE \"C\"", "j.name COLLATE \"C\"", "k::text",
	  "$15::text COLLATE \"C\"" },
	{ "runtime", 'r',
	  "COALESCE((extract(epoch FROM j.finished_at - j.started_at) * 1000000)::bigint,"
	  " 9223372036854775807)",
	  "COALESCE((extract(epoch FROM j.finished_at - j.started_at) * 1000000)::bigint,"
	  " -9223372036854775807)",
	  "k::text", "$15::bigint" },
};

struct list_ctx {
	int limit;
	char sort, dir;
};

static void list_done(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;
	struct list_ctx *c = r->data;
	json_t *items, *keys, *out;
	size_t n;

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "");
		return;
	}
	items = json_loads(db_val(res, 0, 0), 0, NULL);
	if (!json_is_array(items)) {
		json_decref(items);
		items = json_array();
	}
	keys = db_val(res, 0, 2) ? json_loads(db_val(res, 0, 2), 0, NULL) : NULL;
	n = json_array_size(items);
	out = json_object();
	json_object_set_new(out, "next_cursor", json_null());
	if ((int)n > c->limit) {
		json_t *last = json_array_get(items, (size_t)c->limit - 1);
		json_t *key = json_array_get(keys, (size_t)c->limit - 1);
		struct jobcursor cur = { .sort = c->sort, .dir = c->dir };
		char text[128];

		cur.id = (long long)json_integer_value(json_object_get(last, "id"));
		if (json_is_string(key))
			snprintf(cur.key, sizeof(cur.key), "%s", json_string_value(key));
		if (jobcursor_format(&cur, text, sizeof(text)) > 0)
			json_object_set_new(out, "next_cursor", json_string(text));
		json_array_remove(items, (size_t)c->limit);
	}
	json_decref(keys);
	json_object_set_new(out, "items", items);
	json_object_set_new(out, "counts", json_loads(db_val(res, 0, 1), 0, NULL));
	json_object_set_new(out, "sort",
	                    json_string(c->sort == 'c'   ? "created"
	                                : c->sort == 's' ? "started"
	                                : c->sort == 'f' ? "finished"
	                                : c->sort == 'n' ? "name"
	                                                 : "runtime"));
	json_object_set_new(out, "order", json_string(c->dir == 'a' ? "asc" : "desc"));
	http_reply_json(r, 200, out);
}

/* "2026-01-31", "2026-01-31T12:00:00Z" (or without the Z): 1 when s is one. */
static int time_ok(const char *s)
{
	struct tm tm;
	const char *end;

	memset(&tm, 0, sizeof(tm));
	end = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (end && (*end == '\0' || (end[0] == 'Z' && end[1] == '\0')))
		return 1;
	memset(&tm, 0, sizeof(tm));
	end = strptime(s, "%Y-%m-%d", &tm);
	return end && *end == '\0';
}

/* A time filter's value: an ISO date or UTC time as time_ok() takes, or a
 * time that long ago: "7d", "24h", "30m" (1 to 99999 of them), rewritten in
 * s as a UTC time.  Returns 0, or -1 when it is neither. */
static int time_param(char *s, size_t len)
{
	size_t n = strlen(s);
	long long v;
	char num[8];
	time_t t;
	struct tm tm;

	if (time_ok(s))
		return 0;
	if (n < 2 || n > 6 || !strchr("dhm", s[n - 1]))
		return -1;
	memcpy(num, s, n - 1);
	num[n - 1] = '\0';
	if (http_parse_decimal(num, &v) < 0 || v < 1 || v > 99999)
		return -1;
	t = time(NULL) - (time_t)v * (s[n - 1] == 'd' ? 86400 : s[n - 1] == 'h' ? 3600 : 60);
	gmtime_r(&t, &tm);
	strftime(s, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
	return 0;
}

/* A comma-separated list of names (states, tags) as a text[] literal in
 * out; each checked by ok (NULL: the tag shape).  Replies 400 and returns
 * -1 for a bad one. */
static int name_list(struct http_req *r, char *in, const char *what, int states_only, char *out,
                     size_t outlen)
{
	size_t o = 1;
	char *save = NULL, *tok;

	snprintf(out, outlen, "{");
	for (tok = strtok_r(in, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (states_only) {
			size_t k;
			for (k = 0; k < sizeof(states) / sizeof(states[0]); k++)
				if (strcmp(tok, states[k]) == 0)
					break;
			if (k == sizeof(states) / sizeof(states[0])) {
				http_reply_error(r, RC_INVALID,
				                 "queued, starting, running, stopping, succeeded, "
				                 "failed, cancelled or lost (comma-separated)",
				                 "unknown job state '%s'", tok);
				return -1;
			}
		} else if (strlen(tok) > 63 ||
		           strspn(tok, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
		                       "0123456789._:-") != strlen(tok)) {
			http_reply_error(r, RC_INVALID, "letters, digits, '.', '_', ':' or '-'",
			                 "bad %s '%s'", what, tok);
			return -1;
		}
		if (o + strlen(tok) + 4 >= outlen) {
			http_reply_error(r, RC_INVALID, NULL, "too many %ss", what);
			return -1;
		}
		o += (size_t)snprintf(out + o, outlen - o, "%s\"%s\"", o > 1 ? "," : "", tok);
	}
	snprintf(out + o, outlen - o, "}");
	return o > 1 ? 0 : 1;
}

/* GET /jobs: filters (user, q, state, image, pool, tags, since/until on
 * created_at, ended_since/ended_until on finished_at), a sort with cursor
 * pages (keyset on (key, id)), and counts per state under every filter but
 * state.  The page and the counts read jobs each with the same conditions,
 * so the page stays an index scan with a LIMIT. */
static void list(struct http_req *r)
{
	struct list_ctx *c;
	int limit;
	char user[64], q[200], since[40], until[40], st[200], arr[240], uid[24];
	char image[300], pool[80], tags[1100], tagarr[1200], esince[40], euntil[40];
	char sortq[16], order[8], cursor[160];
	long nu, nq, ns, nn, nst, ni, np, nt, nes, neu, nso, nor, ncu;
	struct db_args a = DB_ARGS_INIT;
	struct jobcursor cur;
	const struct sort_def *sd = &sorts[0];
	int asc = 0, have_image_id = 0, have_tags = 0;
	long long image_id = 0, lim;
	char lb[16];
	long nl;
	static char sql[12288];
	int n;

	if ((nl = api_query(r, "limit", lb, sizeof(lb))) == -2)
		return;
	limit = 50;
	if (nl >= 0) {
		if (http_parse_decimal(lb, &lim) < 0 || lim < 1) {
			http_reply_error(r, RC_INVALID, "1 to 500",
			                 "limit must be a positive integer");
			return;
		}
		limit = lim > 500 ? 500 : (int)lim;
	}
	if ((nu = api_query(r, "user", user, sizeof(user))) == -2 ||
	    (nq = api_query(r, "q", q, sizeof(q))) == -2 ||
	    (ns = api_query(r, "since", since, sizeof(since))) == -2 ||
	    (nn = api_query(r, "until", until, sizeof(until))) == -2 ||
	    (nst = api_query(r, "state", st, sizeof(st))) == -2 ||
	    (ni = api_query(r, "image", image, sizeof(image))) == -2 ||
	    (np = api_query(r, "pool", pool, sizeof(pool))) == -2 ||
	    (nt = api_query(r, "tags", tags, sizeof(tags))) == -2 ||
	    (nes = api_query(r, "ended_since", esince, sizeof(esince))) == -2 ||
	    (neu = api_query(r, "ended_until", euntil, sizeof(euntil))) == -2 ||
	    (nso = api_query(r, "sort", sortq, sizeof(sortq))) == -2 ||
	    (nor = api_query(r, "order", order, sizeof(order))) == -2 ||
	    (ncu = api_query(r, "cursor", cursor, sizeof(cursor))) == -2)
		return;
	if (nu >= 0 && !is_admin(r) && strcmp(user, r->auth->username) != 0) {
		http_reply_error(r, RC_FORBIDDEN, "leave user out to see your own jobs",
		                 "only admins may list other users' jobs");
		return;
	}
	if ((ns >= 0 && time_param(since, sizeof(since)) < 0) ||
	    (nn >= 0 && time_param(until, sizeof(until)) < 0) ||
	    (nes >= 0 && time_param(esince, sizeof(esince)) < 0) ||
	    (neu >= 0 && time_param(euntil, sizeof(euntil)) < 0)) {
		http_reply_error(r, RC_INVALID, "e.g. since=2026-01-31T00:00:00Z or ended_since=7d",
		                 "since, until, ended_since and ended_until must be dates or UTC "
		                 "times (ISO 8601), or how long ago (7d, 24h, 30m)");
		return;
	}
	if (nso >= 0) {
		size_t k;
		for (k = 0; k < sizeof(sorts) / sizeof(sorts[0]); k++)
			if (strcmp(sortq, sorts[k].name) == 0)
				break;
		if (k == sizeof(sorts) / sizeof(sorts[0])) {
			http_reply_error(r, RC_INVALID,
			                 "created, started, finished, name or runtime",
			                 "unknown sort '%s'", sortq);
			return;
		}
		sd = &sorts[k];
	}
	if (nor >= 0 && strcmp(order, "asc") != 0 && strcmp(order, "desc") != 0) {
		http_reply_error(r, RC_INVALID, "asc or desc", "order must be asc or desc");
		return;
	}
	asc = nor >= 0 && strcmp(order, "asc") == 0;
	memset(&cur, 0, sizeof(cur));
	if (ncu >= 0 && cursor[0]) {
		if (jobcursor_parse(cursor, strlen(cursor), &cur) < 0) {
			http_reply_error(r, RC_INVALID,
			                 "pass next_cursor from the previous page as is",
			                 "bad cursor");
			return;
		}
		if (cur.sort != sd->code || cur.dir != (asc ? 'a' : 'd')) {
			http_reply_error(r, RC_INVALID,
			                 "keep sort and order as they were for the first page",
			                 "the cursor belongs to another sort");
			return;
		}
	}
	arr[0] = '\0';
	if (nst >= 0 && name_list(r, st, "state", 1, arr, sizeof(arr)) < 0)
		return;
	if (nt >= 0) {
		int e = name_list(r, tags, "tag", 0, tagarr, sizeof(tagarr));
		if (e < 0)
			return;
		have_tags = e == 0;
	}
	if (ni >= 0 && image[0] && strspn(image, "0123456789") == strlen(image)) {
		if (http_parse_decimal(image, &image_id) < 0) {
			http_reply_error(r, RC_INVALID, NULL, "bad image id '%s'", image);
			return;
		}
		have_image_id = 1;
	}
	c = api_state(r, sizeof(*c), NULL);
	if (!c)
		return;
	c->limit = limit;
	c->sort = sd->code;
	c->dir = asc ? 'a' : 'd';
	snprintf(uid, sizeof(uid), "%lld", (long long)r->auth->user_id);
	db_arg_str(&a, is_admin(r) ? NULL : uid);                             /* $1 the caller */
	db_arg_str(&a, nu >= 0 ? user : NULL);                                /* $2 */
	db_arg_str(&a, nq >= 0 && q[0] ? q : NULL);                           /* $3 */
	db_arg_str(&a, ns >= 0 ? since : NULL);                               /* $4 */
	db_arg_str(&a, nn >= 0 ? until : NULL);                               /* $5 */
	db_arg_str(&a, arr[0] ? arr : NULL);                                  /* $6 */
	db_arg_ll_opt(&a, cur.id, cur.id > 0);                                /* $7 */
	db_arg_ll(&a, limit + 1);                                             /* $8 */
	db_arg_ll_opt(&a, image_id, have_image_id);                           /* $9 */
	db_arg_str(&a, ni >= 0 && image[0] && !have_image_id ? image : NULL); /* $10 */
	db_arg_str(&a, np >= 0 && pool[0] ? pool : NULL);                     /* $11 */
	db_arg_str(&a, have_tags ? tagarr : NULL);                            /* $12 */
	db_arg_str(&a, nes >= 0 ? esince : NULL);                             /* $13 */
	db_arg_str(&a, neu >= 0 ? euntil : NULL);                             /* $14 */
	if (sd->code != 'c')                                 /* created's statement has no $15 */
		db_arg_str(&a, cur.id > 0 ? cur.key : NULL); /* $15 */
#define LIST_WHERE                                                                                \
	" ($1::bigint IS NULL OR j.user_id = $1::bigint)"                                         \
	" AND ($2::text IS NULL OR j.user_id = (SELECT id FROM users WHERE username = $2))"       \
	" AND ($3::text IS NULL OR gc_job_search_text(j.name, j.tags, j.command, j.reason)"       \
	"  ILIKE '%%' || replace(replace(replace($3, '\\', '\\\\'), '%%', '\\%%'), '_', '\\_')"   \
	"  || '%%')"                                                                              \
	" AND ($4::timestamptz IS NULL OR j.created_at >= $4::timestamptz)"                       \
	" AND ($5::timestamptz IS NULL OR j.created_at < $5::timestamptz)"                        \
	" AND ($9::bigint IS NULL OR j.image_id = $9::bigint)"                                    \
	" AND ($10::text IS NULL OR j.image_id IN (SELECT id FROM images WHERE reference = $10))" \
	" AND ($11::text IS NULL OR j.pool_id = (SELECT id FROM pools WHERE name = $11))"         \
	" AND ($12::text[] IS NULL OR j.tags @> $12::text[])"                                     \
	" AND ($13::timestamptz IS NULL OR j.finished_at >= $13::timestamptz)"                    \
	" AND ($14::timestamptz IS NULL OR j.finished_at < $14::timestamptz)"
	/* a statement longer than the buffer would be cut, not run: the
	 * buffer is sized with room to spare (checked below) */
	n = snprintf(sql, sizeof(sql),
	             "WITH pg AS (SELECT j.id, %s AS k FROM jobs j WHERE" LIST_WHERE
	             "  AND ($6::text[] IS NULL OR j.state = ANY($6::text[]))"
	             "  AND ($7::bigint IS NULL OR (%s, j.id) %s (%s, $7::bigint))"
	             "  ORDER BY 2 %s, 1 %s LIMIT $8::int),"
	             " pr AS (SELECT id, k, row_number() OVER (ORDER BY k %s, id %s) AS rn FROM pg)"
	             " SELECT (SELECT COALESCE(json_agg(x.doc::json ORDER BY x.rn), '[]')"
	             "  FROM (SELECT pr.rn, " JOB_JSON " AS doc" JOB_FROM
	             "  JOIN pr ON pr.id = j.id) x)::text,"
	             " (SELECT json_object_agg(s.state, COALESCE(c.n, 0))"
	             "  FROM unnest(ARRAY['queued', 'starting', 'running', 'stopping', 'succeeded',"
	             "   'failed', 'cancelled', 'lost']) AS s(state)"
	             "  LEFT JOIN (SELECT j.state, count(*) AS n FROM jobs j WHERE" LIST_WHERE
	             "  GROUP BY j.state) c ON c.state = s.state)::text,"
	             " (SELECT json_agg(%s ORDER BY rn) FROM pr)::text",
	             asc ? sd->key_asc : sd->key_desc, asc ? sd->key_asc : sd->key_desc,
	             asc ? ">" : "<", sd->code == 'c' ? "$7::bigint" : sd->in, asc ? "ASC" : "DESC",
	             asc ? "ASC" : "DESC", asc ? "ASC" : "DESC", asc ? "ASC" : "DESC", sd->out);
#undef LIST_WHERE
	if (n < 0 || (size_t)n >= sizeof(sql)) {
		http_reply_error(r, RC_INTERNAL, NULL, "the job list statement is too long");
		return;
	}
	db_query_args(sql, &a, list_done, r);
}

/* ---- submit ---- */

struct create_ctx {
	json_t *body;
	char *text; /* the body as sent (validated JSON) */
	/* from a template: {"template_id", "command" (expanded),
	 * "hyperparameters" (completed)} as JSON text, else NULL */
	char *expanded;
	char key[208];
	int tries; /* the insert again after a concurrent submit's */
	struct admit fit;
};

static void create_free(void *p)
{
	struct create_ctx *c = p;

	json_decref(c->body);
	free(c->text);
	free(c->expanded);
	free(c);
}

static long long int_or(json_t *body, const char *name, long long def)
{
	json_t *v = json_object_get(body, name);

	return json_is_integer(v) ? (long long)json_integer_value(v) : def;
}

static void create_insert(struct http_req *r);

static void created(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;
	struct create_ctx *c = r->data;
	const char *id;
	char loc[64];

	switch (job_body_submitted(r, res, rc, c->key, &c->tries, "job", &id)) {
	case SUBMIT_REPLIED: return;
	case SUBMIT_AGAIN: create_insert(r); return;
	case SUBMIT_REPLAY: reply_job(r, id, one_200); return;
	case SUBMIT_NEW: break;
	}
	{
		char t[48];
		snprintf(t, sizeof(t), "job:%s", id);
		auth_audit(r, r->auth, "job.submit", t, NULL);
	}
	snprintf(loc, sizeof(loc), "/api/v1/jobs/%s", id);
	http_add_header(r, "Location", loc);
	reply_job(r, id, one_201);
}

static void create_insert(struct http_req *r)
{
	struct create_ctx *c = r->data;
	json_t *b = c->body;
	struct db_args a = DB_ARGS_INIT;
	int has_pool = json_is_string(json_object_get(b, "pool")) ||
	               json_is_integer(json_object_get(b, "class"));

	/* the command, env, hyperparameters, tags and retry_limit come from
	 * the body as sent ($9): numbers stay exactly as written (0.1, not
	 * 0.10000000000000001), and its hash tells a retry from a reuse */
	db_arg_ll(&a, (long long)r->auth->user_id);                    /* $1 */
	db_arg_ll(&a, int_or(b, "image_id", 0));                       /* $2 */
	db_arg_str(&a, json_string_value(json_object_get(b, "pool"))); /* $3 */
	db_arg_str(&a, json_string_value(json_object_get(b, "name"))); /* $4 */
	db_arg_ll(&a, has_pool ? int_or(b, "slices", 1) : 0);          /* $5 */
	db_arg_ll(&a, int_or(b, "cpu_millis", 1000));                  /* $6 */
	db_arg_ll(&a, int_or(b, "mem_mib", 1024));                     /* $7 */
	db_arg_ll(&a, int_or(b, "shm_mib", 64));                       /* $8 */
	db_arg_str(&a, c->text);                                       /* $9 */
	db_arg_str(&a, json_string_value(json_object_get(b, "priority"))
	                       ? json_string_value(json_object_get(b, "priority"))
	                       : "normal");               /* $10 */
	db_arg_str(&a, auth_role_name(r->auth->role));    /* $11 */
	db_arg_str(&a, c->key[0] ? c->key : NULL);        /* $12 */
	db_arg_ll(&a, int_or(b, "max_runtime_s", 86400)); /* $13 */
	db_arg_ll(&a, int_or(b, "members", 1));           /* $14 */
	db_arg_str(&a, c->expanded);                      /* $15: NULL, the body's */
	if (json_is_integer(json_object_get(b, "class")))
		db_arg_ll(&a, int_or(b, "class", 0)); /* $16: a class's work (0030) */
	else
		db_arg_null(&a);
	db_query_args(
	        "WITH prev AS (SELECT id, idempotency_hash = md5($9) AS same FROM jobs"
	        "  WHERE user_id = $1 AND idempotency_key = $12),"
	        " v AS (SELECT nextval('jobs_id_seq') AS jid WHERE NOT EXISTS (SELECT 1 FROM "
	        "prev)),"
	        " body AS (SELECT $9::jsonb AS b),"
	        " usr AS (SELECT username FROM users WHERE id = $1),"
	        " img AS (SELECT id, cuda_min FROM images WHERE id = $2 AND (owner_id = $1"
	        "  OR (owner_id IS NULL AND (visibility = 'everyone' OR $11 = 'admin'"
	        "  OR $11::user_role = ANY (vis_roles) OR gc_in_any_class($1, vis_classes))))),"
	        /* a class's work: the class's pool (admit.c checked it) */
	        " pl AS (SELECT id FROM pools WHERE name = $3 OR ($3 IS NULL"
	        "  AND id = (SELECT pool_id FROM classes WHERE id = $16::bigint))),"
	        /* refused at once when no quota would ever admit it (in a
	         * class: the class's limits, admit.c) */
	        " rq AS (SELECT gc_request_refusal($1, (SELECT id FROM pl), $5, $6, $7) AS why"
	        "  WHERE EXISTS (SELECT 1 FROM v) AND EXISTS (SELECT 1 FROM img)"
	        "  AND $16::bigint IS NULL"
	        "  AND ($3::text IS NULL OR EXISTS (SELECT 1 FROM pl))),"
	        " req AS (INSERT INTO alloc_requests (user_id, pool_id, owner_kind, owner_id,"
	        "  priority, slices, cpu_millis, mem_mib, cuda_min, nodes, class_id)"
	        "  SELECT $1, pl.id, 'job', v.jid::text, $10::alloc_priority,"
	        "  CASE WHEN pl.id IS NULL THEN 0 ELSE $5::int END, $6, $7,"
	        "  CASE WHEN pl.id IS NULL THEN 0 ELSE img.cuda_min END, $14::int, $16::bigint"
	        "  FROM v CROSS JOIN img LEFT JOIN pl ON true"
	        "  WHERE (($3::text IS NULL AND $16::bigint IS NULL) OR pl.id IS NOT NULL)"
	        "  AND NOT EXISTS (SELECT 1 FROM rq WHERE why IS NOT NULL) RETURNING id),"
	        " ins AS (INSERT INTO jobs (id, user_id, name, tags, image_id, command, env,"
	        "  hyperparameters, pool_id, slices, cpu_millis, mem_mib, shm_mib, priority,"
	        "  max_runtime_s, retry_limit, request_id, directory, idempotency_key,"
	        "  idempotency_hash, container_name, members, template_id, class_id)"
	        "  SELECT v.jid, $1, $4,"
	        "  ARRAY(SELECT jsonb_array_elements_text(COALESCE(body.b->'tags', '[]'))),"
	        "  img.id,"
	        "  ARRAY(SELECT jsonb_array_elements_text(COALESCE($15::jsonb->'command', "
	        "body.b->'command'))),"
	        "  COALESCE(body.b->'env', '{}'),"
	        "  COALESCE($15::jsonb->'hyperparameters', body.b->'hyperparameters', '{}'),"
	        "  (SELECT id FROM pl), CASE WHEN (SELECT id FROM pl) IS NULL THEN 0"
	        "  ELSE $5::int END,"
	        "  $6, $7, $8, $10::alloc_priority, $13,"
	        "  COALESCE((body.b->>'retry_limit')::int, 0), (SELECT id FROM req),"
	        "  'home/' || usr.username || '/jobs/' || v.jid || '-' || $4, $12, md5($9),"
	        "  'gc-' || substr((SELECT cluster_id FROM cluster_identity), 1, 8) || '-job-'"
	        "  || v.jid, $14::int, ($15::jsonb->>'template_id')::bigint, $16::bigint"
	        "  FROM v, img, usr, body WHERE EXISTS (SELECT 1 FROM req) RETURNING id),"
	        /* a distributed job's members (0027) */
	        " mem AS (INSERT INTO job_members (job_id, rank) SELECT ins.id, g"
	        "  FROM ins, generate_series(0, $14::int - 1) g WHERE $14::int > 1)"
	        " SELECT (SELECT id FROM ins), (SELECT why FROM rq), (SELECT id FROM prev),"
	        " (SELECT same FROM prev)",
	        &a, created, r);
}

/* Refused at once when no limit would ever admit it or no node could ever
 * hold it (admit.c), as instances are. */
static void admit(struct http_req *r)
{
	struct create_ctx *c = r->data;
	json_t *b = c->body;

	c->fit.pool = json_string_value(json_object_get(b, "pool"));
	c->fit.class_id = int_or(b, "class", 0);
	c->fit.image_id = int_or(b, "image_id", 0);
	c->fit.slices = (int)int_or(b, "slices", c->fit.pool || c->fit.class_id ? 1 : 0);
	c->fit.nodes = (int)int_or(b, "members", 1);
	c->fit.cpu = int_or(b, "cpu_millis", 1000);
	c->fit.mem = int_or(b, "mem_mib", 1024);
	c->fit.ok = create_insert;
	admit_check(r, &c->fit);
}

static void key_seen(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "");
		return;
	}
	/* a retry of a submit that was admitted then: its job, whatever the
	 * limits say now */
	if (PQntuples(res) == 1)
		create_insert(r);
	else
		admit(r);
}

static void create_blocked(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;
	struct create_ctx *c = r->data;
	char uid[24];
	const char *p[2] = { uid, c->key };

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "");
		return;
	}
	if (db_val(res, 0, 0)) {
		http_reply_error(r, RC_CONFLICT, "free some space in your home, then try again",
		                 "%s", db_val(res, 0, 0));
		return;
	}
	if (!c->key[0]) {
		admit(r);
		return;
	}
	snprintf(uid, sizeof(uid), "%lld", (long long)r->auth->user_id);
	db_query("SELECT 1 FROM jobs WHERE user_id = $1 AND idempotency_key = $2", 2, p, key_seen,
	         r);
}

/* ---- submit from a template ---- */

/* The submit is complete (a template expanded): its checks, then the
 * space check, the limits and the insert. */
static void create_checked(struct http_req *r)
{
	struct create_ctx *c = r->data;
	char uid[24];
	const char *p[1] = { uid };

	if (job_body_check(r, c->body) < 0)
		return;
	snprintf(uid, sizeof(uid), "%lld", (long long)r->auth->user_id);
	db_query("SELECT gc_storage_block_reason($1)", 1, p, create_blocked, r);
}

static void template_row(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;
	struct create_ctx *c = r->data;
	struct template_error err;
	json_t *tmpl, *details;
	char home[300], *cmd = NULL, *hp = NULL;
	int ok;

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "");
		return;
	}
	if (PQntuples(res) != 1) {
		http_reply_error_details(
		        r, RC_NOTFOUND,
		        json_pack("[{s:s, s:s}]", "field", "template_id", "reason", "unknown"),
		        "GET /api/v1/job-templates lists them", "no such job template");
		return;
	}
	tmpl = json_loads(db_val(res, 0, 0), 0, NULL);
	snprintf(home, sizeof(home), "/home/%s", r->auth->username);
	/* the one place a submit meets its template (a sweep's runs go
	 * through job_body_expand() as well) */
	ok = tmpl && job_body_expand(c->body, tmpl, home, &cmd, &hp, &err) == 0;
	if (ok) {
		/* one parameter for the insert: the statement has no room for
		 * three more */
		size_t n = strlen(cmd) + strlen(hp) + 96;
		c->expanded = malloc(n);
		if (c->expanded)
			snprintf(
			        c->expanded, n,
			        "{\"template_id\": %lld, \"command\": %s, \"hyperparameters\": %s}",
			        (long long)json_integer_value(
			                json_object_get(c->body, "template_id")),
			        cmd, hp);
	}
	free(cmd);
	free(hp);
	if (ok && !c->expanded) {
		json_decref(tmpl);
		http_reply_error(r, RC_NOMEM, NULL, "out of memory");
		return;
	}
	json_decref(tmpl);
	if (!ok) {
		details = json_pack("[{s:s, s:s}]", "field", err.field, "reason", err.reason);
		if (details && err.has_limit)
			json_object_set_new(json_array_get(details, 0), "limit",
			                    json_real(err.limit));
		http_reply_error_details(
		        r, RC_INVALID, details, "GET /api/v1/job-templates/{id} shows its schema",
		        err.msg[0] ? err.msg : "the template could not be expanded");
		return;
	}
	create_checked(r);
}

static void create(struct http_req *r)
{
	json_t *body = api_json_body(r, job_body_spec);
	const char *key;
	struct create_ctx *c;
	size_t n;

	if (!body)
		return; /* replied: the request is over (its headers too) */
	key = http_header(r, "Idempotency-Key");
	if (key && (!*key || strlen(key) > 200 ||
	            strspn(key, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	                        "-_.:") != strlen(key))) {
		http_reply_error(r, RC_INVALID, "e.g. a UUID",
		                 "Idempotency-Key must be 1 to 200 letters, digits, '-', '_', '.' "
		                 "or ':'");
		goto bad;
	}
	c = api_state(r, sizeof(*c), create_free);
	if (!c)
		goto bad;
	c->body = body;
	c->text = strndup((const char *)evbuffer_pullup(r->body, -1), evbuffer_get_length(r->body));
	if (!c->text) {
		http_reply_error(r, RC_NOMEM, NULL, "out of memory");
		return;
	}
	n = key ? strlen(key) : 0;
	memcpy(c->key, key ? key : "", n);
	c->key[n] = '\0';
	if (json_is_integer(json_object_get(body, "template_id"))) {
		char tid[24];
		const char *p[2] = { tid, is_admin(r) ? "t" : "f" };
		snprintf(tid, sizeof(tid), "%lld",
		         (long long)json_integer_value(json_object_get(body, "template_id")));
		db_query("SELECT " API_JOB_TEMPLATE_JSON API_JOB_TEMPLATE_FROM
		         " WHERE t.id = $1 AND (t.enabled OR $2::bool)",
		         2, p, template_row, r);
		return;
	}
	create_checked(r);
	return;
bad:
	json_decref(body);
}

/* ---- cancel ---- */

static const struct jfield empty_spec[] = { { NULL, 0, 0, 0 } };

static void cancel_done(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;
	const char *id = r->data;

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "could not cancel the job");
		return;
	}
	if (!db_val(res, 0, 0)) {
		http_reply_error(r, RC_NOTFOUND, "GET /api/v1/jobs lists yours", "no such job");
		return;
	}
	if (strcmp(db_val(res, 0, 0), "succeeded") == 0 ||
	    strcmp(db_val(res, 0, 0), "failed") == 0 ||
	    strcmp(db_val(res, 0, 0), "cancelled") == 0 || strcmp(db_val(res, 0, 0), "lost") == 0) {
		http_reply_error(r, RC_CONFLICT, "submit it again to run it again",
		                 "job %s has already ended (%s)", id, db_val(res, 0, 0));
		return;
	}
	if (strcmp(db_val(res, 0, 1), "0") != 0) {
		char t[48];
		snprintf(t, sizeof(t), "job:%s", id);
		auth_audit(r, r->auth, "job.cancel", t, NULL);
	}
	reply_job(r, id, one_202);
}

static void cancel(struct http_req *r)
{
	json_t *body = api_json_body(r, empty_spec);
	long long id;
	char *ids, uid[24];
	const char *p[3];

	if (!body)
		return;
	json_decref(body);
	if (api_id(r, "id", &id) < 0)
		return;
	ids = api_state(r, 24, NULL);
	if (!ids)
		return;
	snprintf(ids, 24, "%lld", id);
	p[0] = ids;
	p[1] = owner_param(r, uid, sizeof(uid));
	p[2] = r->auth->username;
	db_query("WITH j AS (SELECT id, state, desired FROM jobs WHERE id = $1"
	         "  AND ($2::bigint IS NULL OR user_id = $2::bigint) FOR UPDATE),"
	         " u AS (UPDATE jobs SET desired = 'cancelled', cancelled_by = $3,"
	         "  updated_at = now() WHERE id IN (SELECT id FROM j WHERE desired = 'running'"
	         "  AND state IN ('queued', 'starting', 'running', 'stopping')) RETURNING id)"
	         " SELECT (SELECT state FROM j), (SELECT count(*) FROM u)",
	         3, p, cancel_done, r);
}

/* ---- the log ---- */

#define LOG_MAX_BYTES (4 << 20)

#define LOG_LINE_MAX  (64 * 1024) /* a search looks at this much of one line */
#define LOG_SEARCH_MS 10000       /* a search's worker time at most, then timed_out */
#define LOG_MATCH_MAX 1000        /* a search's ?limit= at most */
#define LOG_TEXT_MAX  1024        /* a match's text in the reply, bytes */

struct log_ctx {
	struct http_req *r;
	struct storage_area area;
	char rel[400]; /* the log below the home */
	long tail;     /* lines */
	char *buf;     /* what is sent */
	size_t len;
	int err;        /* errno of a failed read (0: none) */
	int gone;       /* the client left */
	int follow;     /* ?follow=1: Server-Sent Events */
	long long from; /* follow: the Last-Event-ID offset, or -1 */
	/* a byte range (Range: bytes= or ?offset=&length=) */
	int ranged;
	char range[64]; /* the Range header as sent ("" from the query) */
	long long off, want;
	long long size; /* the file's size (range and search) */
	int unsatisfiable;
	/* a search (?q=) */
	int search, regex, limit;
	char q[256];
	regex_t re;
	int re_ok;
	json_t *matches;
	int truncated;
	int timed_out; /* LOG_SEARCH_MS passed: the matches so far (truncated) */
	long rank;     /* ?rank=: a distributed job's member (0027) */
};

static void log_ctx_free(void *p)
{
	struct log_ctx *c = p;

	if (c->re_ok)
		regfree(&c->re);
	json_decref(c->matches);
	free(c->buf);
	free(c);
}

/* 1 when line[0..n) (NUL-terminated at n) matches the search; low is the
 * line in ASCII lower case and c->q is too (text searches ignore case). */
static int line_matches(struct log_ctx *c, const char *line, const char *low, size_t n)
{
	if (c->regex)
		return regexec(&c->re, line, 0, NULL, 0) == 0;
	return memmem(low, n, c->q, strlen(c->q)) != NULL;
}

static void match_add(struct log_ctx *c, long long line, long long off, const char *text, size_t n)
{
	char *t;
	json_t *txt;
	size_t k = n > LOG_TEXT_MAX ? LOG_TEXT_MAX : n;

	/* never cut a UTF-8 sequence in two */
	while (k < n && k > 0 && ((unsigned char)text[k] & 0xC0) == 0x80)
		k--;
	t = strndup(text, k);
	if (!t)
		return;
	k = strlen(t); /* a NUL in the line ends its text */
	for (size_t i = 0; i < k; i++)
		if (t[i] == '\r')
			t[i] = ' ';
	txt = json_stringn(t, k);
	if (!txt) {
		/* not UTF-8: the bytes outside ASCII as '?' */
		for (size_t i = 0; i < k; i++)
			if ((unsigned char)t[i] >= 0x80)
				t[i] = '?';
		txt = json_stringn(t, k);
	}
	free(t);
	json_array_append_new(c->matches,
	                      json_pack("{s:I, s:I, s:I, s:o}", "line", (json_int_t)line, "offset",
	                                (json_int_t)off, "length", (json_int_t)n, "text", txt));
}

/* Milliseconds on the monotonic clock (worker threads too). */
static double mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* worker: the matching lines of the whole log, read in pieces (a 50 MB log
 * costs two small buffers, not 50 MB), line numbers from 1 and the byte
 * offset where each line starts; at most limit, then truncated.  A line
 * longer than LOG_LINE_MAX is matched on its first LOG_LINE_MAX bytes. */
static void log_search(struct log_ctx *c, int fd)
{
	enum { CHUNK = 1 << 20 };
	char *buf = malloc(CHUNK), *line = malloc(LOG_LINE_MAX + 1);
	char *low = malloc(LOG_LINE_MAX + 1);
	size_t ll = 0;
	long long lineno = 1, lstart = 0, pos = 0;
	ssize_t n;

	double until = mono_ms() + LOG_SEARCH_MS;

	c->matches = json_array();
	if (!buf || !line || !low || !c->matches) {
		c->err = ENOMEM;
		goto out;
	}
	for (char *q = c->q; *q; q++)
		if (*q >= 'A' && *q <= 'Z' && !c->regex)
			*q = (char)(*q - 'A' + 'a');
	while ((n = pread(fd, buf, CHUNK, pos)) > 0) {
		for (ssize_t i = 0; i < n; i++) {
			char ch = buf[i];
			if (ch != '\n') {
				if (ll < LOG_LINE_MAX) {
					line[ll] = ch;
					low[ll++] = ch >= 'A' && ch <= 'Z' ? (char)(ch - 'A' + 'a')
					                                   : ch;
				}
				continue;
			}
			line[ll] = '\0';
			if (line_matches(c, line, low, ll)) {
				if ((int)json_array_size(c->matches) >= c->limit) {
					c->truncated = 1;
					goto out;
				}
				match_add(c, lineno, lstart, line, ll);
			}
			lineno++;
			lstart = pos + i + 1;
			ll = 0;
			/* a worker is shared (logins, quota scans): a search that
			 * costs too much stops with what it found */
			if ((lineno & 1023) == 0 && mono_ms() > until) {
				c->truncated = c->timed_out = 1;
				goto out;
			}
		}
		pos += n;
		if (mono_ms() > until) {
			c->truncated = c->timed_out = 1;
			goto out;
		}
	}
	if (n < 0) {
		c->err = errno;
		goto out;
	}
	if (ll > 0) { /* the last line, not ended yet */
		line[ll] = '\0';
		if (line_matches(c, line, low, ll)) {
			if ((int)json_array_size(c->matches) >= c->limit)
				c->truncated = 1;
			else
				match_add(c, lineno, lstart, line, ll);
		}
	}
out:
	free(buf);
	free(line);
	free(low);
}

/* worker: bytes [off, off + want) of the log (at most LOG_MAX_BYTES). */
static void log_range(struct log_ctx *c, int fd)
{
	int64_t from = 0, len = 0;
	int rg;
	ssize_t n;

	if (c->range[0]) {
		rg = api_byte_range(c->range, c->size, &from, &len);
		if (rg == 0) { /* not usable: the whole log, as a 200 would */
			from = 0;
			len = c->size;
			c->ranged = 0;
		}
	} else {
		rg = c->off < c->size ? 1 : -1;
		from = c->off;
		len = c->want < 0 || c->off + c->want > c->size ? c->size - c->off : c->want;
	}
	if (rg < 0 || (c->ranged && len <= 0)) {
		c->unsatisfiable = 1;
		return;
	}
	if (len > LOG_MAX_BYTES)
		len = LOG_MAX_BYTES; /* the Content-Range says what came */
	c->buf = malloc((size_t)len + 1);
	if (!c->buf) {
		c->err = ENOMEM;
		return;
	}
	n = pread(fd, c->buf, (size_t)len, from);
	if (n < 0) {
		c->err = errno;
		return;
	}
	c->off = from;
	c->len = (size_t)n;
}

/* The log of a job's member: rank 0's is output.log, rank r's
 * output.rank<r>.log (work/jobs.c writes them). */
static void log_file(long rank, char *out, size_t outlen)
{
	if (rank > 0)
		snprintf(out, outlen, "output.rank%ld.log", rank);
	else
		snprintf(out, outlen, "output.log");
}

/* worker: the last tail lines (at most LOG_MAX_BYTES) of the log, a
 * range of it, or a search */
static void log_read(void *arg)
{
	struct log_ctx *c = arg;
	int home = storage_area_open(&c->area), fd = -1;
	struct stat st;
	off_t from;
	ssize_t n;
	size_t want, lines = 0, start;

	if (home < 0) {
		c->err = errno;
		return;
	}
	fd = paths_open(home, c->rel, O_RDONLY, 0);
	close(home);
	if (fd < 0) {
		c->err = errno;
		return;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		c->err = EINVAL;
		close(fd);
		return;
	}
	c->size = (long long)st.st_size;
	if (c->search || c->ranged) {
		if (c->search)
			log_search(c, fd);
		else
			log_range(c, fd);
		close(fd);
		return;
	}
	want = st.st_size > LOG_MAX_BYTES ? LOG_MAX_BYTES : (size_t)st.st_size;
	from = st.st_size - (off_t)want;
	c->buf = malloc(want + 1);
	if (!c->buf) {
		c->err = ENOMEM;
		close(fd);
		return;
	}
	n = pread(fd, c->buf, want, from);
	close(fd);
	if (n < 0) {
		c->err = errno;
		return;
	}
	c->len = (size_t)n;
	/* keep the last tail lines (a final line without '\n' counts) */
	start = c->len;
	if (start > 0 && c->buf[start - 1] == '\n')
		start--;
	while (start > 0) {
		if (c->buf[start - 1] == '\n' && ++lines >= (size_t)c->tail)
			break;
		start--;
	}
	if (start == 0 && from > 0) {
		/* the first line read is not whole */
		char *nl = memchr(c->buf, '\n', c->len);
		start = nl ? (size_t)(nl - c->buf) + 1 : 0;
	}
	memmove(c->buf, c->buf + start, c->len - start);
	c->len -= start;
}

static void log_sent(void *arg)
{
	struct log_ctx *c = arg;
	struct http_req *r = c->r;
	char cr[96];

	if (c->gone) {
		log_ctx_free(c);
		return;
	}
	r->data = NULL;
	r->data_free = NULL;
	if (c->err == ENOENT && c->search) {
		c->err = 0; /* no log yet: nothing matches */
		c->matches = json_array();
	}
	if (c->err == ENOENT && c->ranged) {
		c->err = 0;
		c->unsatisfiable = 1;
	}
	if (c->err == ENOENT) {
		http_reply(r, 200, "text/plain; charset=utf-8", "", 0);
	} else if (c->err) {
		http_reply_error(r, RC_DB, NULL, "could not read the job's log: %s",
		                 strerror(c->err));
	} else if (c->search) {
		json_t *out = json_pack("{s:o, s:b, s:b, s:I}", "matches", c->matches, "truncated",
		                        c->truncated, "timed_out", c->timed_out, "size",
		                        (json_int_t)c->size);
		c->matches = NULL; /* handed off */
		http_reply_json(r, 200, out);
	} else if (c->unsatisfiable) {
		snprintf(cr, sizeof(cr), "bytes */%lld", c->size);
		http_add_header(r, "Content-Range", cr);
		/* 416 has no rc of its own: the error shape by hand */
		http_reply_json(
		        r, 416,
		        json_pack("{s:{s:s, s:s, s:s}}", "error", "code", "range_not_satisfiable",
		                  "message", "range not satisfiable", "hint",
		                  "ask for bytes inside the log (its size is in Content-Range)"));
	} else if (c->ranged) {
		snprintf(cr, sizeof(cr), "bytes %lld-%lld/%lld", c->off,
		         c->off + (long long)c->len - 1, c->size);
		http_add_header(r, "Content-Range", cr);
		http_add_header(r, "Accept-Ranges", "bytes");
		http_reply(r, 206, "text/plain; charset=utf-8", c->buf, c->len);
	} else {
		http_add_header(r, "Accept-Ranges", "bytes");
		http_reply(r, 200, "text/plain; charset=utf-8", c->buf, c->len);
	}
	log_ctx_free(c);
}

/* the request ends before the worker: the worker's done frees */
static void log_gone(void *arg)
{
	struct log_ctx *c = arg;

	c->gone = 1;
}

/* -- follow: Server-Sent Events from the growing file --
 *
 * Each whole line is one event whose id is the byte offset just after it,
 * so a client that reconnects with Last-Event-ID goes on where it was.
 * One cron section reads every follower's file: at once (within
 * FOLLOW_SOON ms) when a job driver wrote to a log (EV_JOB_LOG: this
 * process's, or the leader's through db/leader.c's NOTIFY), and every
 * FOLLOW_MS anyway, should a NOTIFY be lost.  It reads each job's state every FOLLOW_CHECK_MS: once it has
 * ended and the file has no more, "event: end" with the state closes the
 * stream. */
#define FOLLOW_MS       250
#define FOLLOW_SOON     15
#define FOLLOW_CHECK_MS 1000
#define FOLLOW_READ     (64 * 1024)
#define FOLLOW_BACKLOG  (1u << 20)

struct follow {
	struct http_req *r;
	struct storage_area area;
	char rel[400];
	char ids[24];
	int fd;
	off_t off;       /* the next byte to send */
	char part[4096]; /* a line not ended yet */
	size_t plen;
	char state[16];  /* the job's state at the last check ("" none yet) */
	double check_at; /* clock_now_ms() of the next state read */
	int checking;    /* a state read is out */
	int gone;        /* the client left */
	int start_tail;  /* lines to start with (no Last-Event-ID) */
	struct follow *next;
};

static struct follow *followers;
static struct cron_section *follow_cron;

static int final_state(const char *st)
{
	return strcmp(st, "succeeded") == 0 || strcmp(st, "failed") == 0 ||
	       strcmp(st, "cancelled") == 0 || strcmp(st, "lost") == 0;
}

static void follow_unlink(struct follow *f)
{
	for (struct follow **pp = &followers; *pp; pp = &(*pp)->next)
		if (*pp == f) {
			*pp = f->next;
			break;
		}
	f->next = NULL;
}

static void follow_free(void *p)
{
	struct follow *f = p;

	follow_unlink(f);
	if (f->fd >= 0)
		close(f->fd);
	free(f);
}

/* Appends one event for line[0..n) ending at offset end to out (carriage
 * returns left out); -1 when out of memory. */
static int follow_event(struct evbuffer *out, const char *line, size_t n, off_t end)
{
	char head[48];
	int k = snprintf(head, sizeof(head), "id: %lld\ndata: ", (long long)end);

	if (evbuffer_add(out, head, (size_t)k) < 0)
		return -1;
	while (n > 0) {
		const char *cr = memchr(line, '\r', n);
		size_t seg = cr ? (size_t)(cr - line) : n;
		if (seg && evbuffer_add(out, line, seg) < 0)
			return -1;
		seg += cr ? 1 : 0;
		line += seg;
		n -= seg;
	}
	return evbuffer_add(out, "\n\n", 2);
}

/* Sends what follow_event() gathered in out (one write for a whole read,
 * not one per line); frees out. */
static void follow_send(struct follow *f, struct evbuffer *out)
{
	size_t len = evbuffer_get_length(out);

	if (len)
		http_stream_write_buffer(f->r, out, len);
	evbuffer_free(out);
}

/* The offset where the last n lines of fd begin (looking back at most
 * 256 KiB; a line cut there is left out). */
static off_t tail_start(int fd, long n)
{
	static char buf[256 * 1024];
	struct stat st;
	off_t from;
	ssize_t got;
	long lines = 0;

	if (fstat(fd, &st) < 0 || st.st_size == 0)
		return 0;
	from = st.st_size > (off_t)sizeof(buf) ? st.st_size - (off_t)sizeof(buf) : 0;
	got = pread(fd, buf, sizeof(buf), from);
	if (got <= 0)
		return st.st_size;
	for (ssize_t i = got - 2; i >= 0; i--)
		if (buf[i] == '\n' && ++lines >= n)
			return from + i + 1;
	if (from == 0)
		return 0;
	{
		char *nl = memchr(buf, '\n', (size_t)got);
		return nl ? from + (nl - buf) + 1 : st.st_size;
	}
}

/* Ends the stream (ended: the job has, say so first); frees f. */
static void follow_stop(struct follow *f, int ended)
{
	if (ended && f->plen) {
		struct evbuffer *out = evbuffer_new();
		if (out) {
			follow_event(out, f->part, f->plen, f->off);
			follow_send(f, out);
		}
		f->plen = 0;
	}
	if (ended) {
		char ev[64];
		snprintf(ev, sizeof(ev), "event: end\ndata: %s\n\n", f->state);
		http_stream_write(f->r, ev, strlen(ev));
	}
	http_stream_end(f->r); /* frees f (data_free) */
}

/* Sends the whole lines the file has beyond f->off; the bytes read. */
static ssize_t follow_read(struct follow *f)
{
	static char buf[FOLLOW_READ];
	struct stat st;
	struct evbuffer *out;
	ssize_t n;
	size_t start = 0;

	if (f->fd < 0) {
		/* not there before the job starts */
		int home = storage_area_open(&f->area);
		if (home < 0)
			return 0;
		f->fd = paths_open(home, f->rel, O_RDONLY, 0);
		close(home);
		if (f->fd < 0)
			return 0;
		if (fstat(f->fd, &st) < 0 || !S_ISREG(st.st_mode)) {
			close(f->fd);
			f->fd = -1;
			return 0;
		}
		if (f->start_tail > 0)
			f->off = tail_start(f->fd, f->start_tail);
	}
	if (fstat(f->fd, &st) < 0)
		return 0;
	if (st.st_size < f->off) {
		/* cut back to a checkpoint (jobs.c): it grows again from there */
		f->off = st.st_size;
		f->plen = 0;
	}
	n = pread(f->fd, buf, sizeof(buf), f->off);
	if (n <= 0)
		return 0;
	if (!(out = evbuffer_new()))
		return 0;
	for (ssize_t i = 0; i < n; i++) {
		if (buf[i] != '\n')
			continue;
		if (f->plen) {
			/* the held beginning, then this piece */
			size_t k = (size_t)i - start;
			if (f->plen + k > sizeof(f->part))
				k = sizeof(f->part) - f->plen;
			memcpy(f->part + f->plen, buf + start, k);
			follow_event(out, f->part, f->plen + k, f->off + i + 1);
			f->plen = 0;
		} else {
			follow_event(out, buf + start, (size_t)i - start, f->off + i + 1);
		}
		start = (size_t)i + 1;
	}
	/* the unended rest waits for its newline (a very long one goes out in
	 * pieces) */
	while (start < (size_t)n) {
		size_t k = (size_t)n - start;
		if (k > sizeof(f->part) - f->plen)
			k = sizeof(f->part) - f->plen;
		memcpy(f->part + f->plen, buf + start, k);
		f->plen += k;
		start += k;
		if (f->plen == sizeof(f->part)) {
			follow_event(out, f->part, f->plen, f->off + (off_t)start);
			f->plen = 0;
		}
	}
	follow_send(f, out);
	f->off += n;
	return n;
}

static void follow_checked(PGresult *res, enum rc rc, void *arg)
{
	struct follow *f = arg;

	f->checking = 0;
	if (f->gone) {
		http_stream_end(f->r);
		return;
	}
	if (rc == RC_OK && PQntuples(res) == 1)
		snprintf(f->state, sizeof(f->state), "%s", db_val(res, 0, 0));
}

/* cron: every follower's file and, now and then, its job's state */
static void follow_tick(struct cron_section *s, void *arg)
{
	struct follow *f, *next;

	(void)s;
	(void)arg;
	for (f = followers; f; f = next) {
		const char *p[1] = { f->ids };
		ssize_t n = 0;
		next = f->next;
		if (f->gone)
			continue;
		if (http_stream_backlog(f->r) < FOLLOW_BACKLOG)
			n = follow_read(f);
		if (n == 0 && !f->checking && f->state[0] && final_state(f->state)) {
			follow_stop(f, 1);
			continue;
		}
		if (!f->checking && clock_now_ms() >= f->check_at) {
			f->check_at = clock_now_ms() + FOLLOW_CHECK_MS;
			f->checking = 1;
			db_query("SELECT state FROM jobs WHERE id = $1", 1, p, follow_checked, f);
		}
	}
}

/* The job driver here wrote to a log: followers read soon (a chatty job
 * wakes them at most every FOLLOW_SOON ms). */
static void log_grew(enum events_kind kind, void *arg)
{
	(void)kind;
	(void)arg;
	if (followers)
		cron_soon(follow_cron, FOLLOW_SOON);
}

static void follow_gone(struct http_req *r, void *arg)
{
	struct follow *f = r->data;

	(void)arg;
	f->gone = 1;
	follow_unlink(f);
	if (!f->checking)
		http_stream_end(r);
	/* else the state read's completion ends it */
}

/* Starts following the log of the row's job (log_row's columns); from:
 * the Last-Event-ID offset, or -1 for the last tail lines. */
static void follow_begin(struct http_req *r, const PGresult *res, long tail, long long from,
                         long rank)
{
	struct follow *f = calloc(1, sizeof(*f));
	char file[40];

	if (!follow_cron) {
		follow_cron = cron_every("job-log-follow", FOLLOW_MS, FOLLOW_MS, follow_tick, NULL);
		if (follow_cron)
			events_subscribe(EV_JOB_LOG, log_grew, NULL);
	}
	if (!f || !follow_cron) {
		free(f);
		http_reply_error(r, RC_NOMEM, NULL, "out of memory");
		return;
	}
	f->r = r;
	f->fd = -1;
	f->off = from >= 0 ? from : 0;
	f->start_tail = from >= 0 ? 0 : (int)tail;
	snprintf(f->ids, sizeof(f->ids), "%s", db_val(res, 0, 3));
	storage_area_home(&f->area, strtoll(db_val(res, 0, 0), NULL, 10), db_val(res, 0, 1));
	log_file(rank, file, sizeof(file));
	snprintf(f->rel, sizeof(f->rel), "jobs/%s/%s", db_val(res, 0, 2), file);
	if (r->data_free)
		r->data_free(r->data);
	r->data = f;
	r->data_free = follow_free;
	f->next = followers;
	followers = f;
	http_add_header(r, "Cache-Control", "no-store");
	http_add_header(r, "X-Accel-Buffering", "no");
	http_stream_begin(r, 200, "text/event-stream; charset=utf-8", -1);
	http_req_on_close(r, follow_gone, NULL);
	cron_soon(follow_cron, 1);
}

static void log_row(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;
	struct log_ctx *c = r->data;
	char file[40];

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "");
		return;
	}
	if (PQntuples(res) != 1) {
		http_reply_error(r, RC_NOTFOUND, "GET /api/v1/jobs lists yours", "no such job");
		return;
	}
	if (c->rank >= strtol(db_val(res, 0, 4), NULL, 10)) {
		http_reply_error(r, RC_NOTFOUND, "rank is 0 to the job's members - 1",
		                 "the job has no member of rank %ld", c->rank);
		return;
	}
	if (c->follow) {
		follow_begin(r, res, c->tail, c->from, c->rank);
		return;
	}
	storage_area_home(&c->area, strtoll(db_val(res, 0, 0), NULL, 10), db_val(res, 0, 1));
	log_file(c->rank, file, sizeof(file));
	snprintf(c->rel, sizeof(c->rel), "jobs/%s/%s", db_val(res, 0, 2), file);
	r->data_free = log_gone;
	if (worker_submit(log_read, log_sent, c) < 0) {
		r->data_free = NULL;
		r->data = NULL;
		log_ctx_free(c);
		http_reply_error(r, RC_UNAVAILABLE, "retry in a few seconds", "the server is busy");
	}
}

/* ?offset=&length=, ?q=&regex=&limit= and the Range header into c; replies
 * 400 and returns -1 on bad values. */
static int log_options(struct http_req *r, struct log_ctx *c, int follow)
{
	char off[24], len[24], q[256], rx[8], lim[16];
	const char *range = http_header(r, "Range");
	long no, nl, nq, nr, nm;
	long long v;

	if ((no = api_query(r, "offset", off, sizeof(off))) == -2 ||
	    (nl = api_query(r, "length", len, sizeof(len))) == -2 ||
	    (nq = api_query(r, "q", q, sizeof(q))) == -2 ||
	    (nr = api_query(r, "regex", rx, sizeof(rx))) == -2 ||
	    (nm = api_query(r, "limit", lim, sizeof(lim))) == -2)
		return -1;
	c->want = -1;
	if (no >= 0) {
		if (http_parse_decimal(off, &v) < 0 || v < 0) {
			http_reply_error(r, RC_INVALID, "e.g. offset=0&length=65536",
			                 "offset must be a byte offset (0 or more)");
			return -1;
		}
		c->off = v;
		c->ranged = 1;
	}
	if (nl >= 0) {
		if (http_parse_decimal(len, &v) < 0 || v < 1) {
			http_reply_error(r, RC_INVALID, "e.g. offset=0&length=65536",
			                 "length must be 1 or more bytes");
			return -1;
		}
		c->want = v;
		c->ranged = 1;
	}
	if (range && !c->ranged) {
		if (strlen(range) >= sizeof(c->range)) {
			http_reply_error(r, RC_INVALID, "e.g. Range: bytes=0-65535",
			                 "the Range header is too long");
			return -1;
		}
		snprintf(c->range, sizeof(c->range), "%s", range);
		c->ranged = 1;
	}
	if (nq >= 0) {
		if (!q[0]) {
			http_reply_error(r, RC_INVALID, "e.g. q=loss", "q must not be empty");
			return -1;
		}
		snprintf(c->q, sizeof(c->q), "%s", q);
		c->search = 1;
	}
	if (nr >= 0 && strcmp(rx, "0") != 0 && strcmp(rx, "1") != 0) {
		http_reply_error(r, RC_INVALID, "regex=1 reads q as a regular expression",
		                 "regex must be 0 or 1");
		return -1;
	}
	c->regex = nr >= 0 && rx[0] == '1';
	c->limit = 100;
	if (nm >= 0) {
		if (http_parse_decimal(lim, &v) < 0 || v < 1 || v > LOG_MATCH_MAX) {
			http_reply_error(r, RC_INVALID, "e.g. limit=100",
			                 "limit must be 1 to %d matches", LOG_MATCH_MAX);
			return -1;
		}
		c->limit = (int)v;
	}
	if ((c->regex || nm >= 0) && !c->search) {
		http_reply_error(r, RC_INVALID, "e.g. q=loss&regex=0&limit=100",
		                 "regex and limit go with a search (q)");
		return -1;
	}
	if ((c->search && c->ranged && !c->range[0]) || (follow && (c->search || c->ranged))) {
		http_reply_error(r, RC_INVALID, "one of them per request",
		                 "follow, a byte range (offset, length, Range) and a search (q) "
		                 "do not mix");
		return -1;
	}
	if (c->search)
		c->ranged = 0; /* a Range header does not apply to search results */
	if (c->regex) {
		int e;
		/* back-references make glibc's matcher backtrack: a pattern could
		 * keep a shared worker busy for long */
		for (const char *q = c->q; *q; q++) {
			if (q[0] == '\\' && q[1] >= '1' && q[1] <= '9') {
				http_reply_error(
				        r, RC_INVALID, "e.g. q=loss [0-9.]+&regex=1",
				        "back-references (\\1 ... \\9) are not supported in "
				        "a log search");
				return -1;
			}
			if (q[0] == '\\' && q[1])
				q++;
		}
		e = regcomp(&c->re, c->q, REG_EXTENDED | REG_ICASE | REG_NOSUB);
		if (e != 0) {
			char why[160];
			regerror(e, &c->re, why, sizeof(why));
			http_reply_error(r, RC_INVALID, "a POSIX extended regular expression",
			                 "bad regular expression: %s", why);
			return -1;
		}
		c->re_ok = 1;
	}
	return 0;
}

static void logs(struct http_req *r)
{
	struct log_ctx *c;
	long long id;
	char tail[16], follow[8], ids[24], uid[24], rank[16];
	const char *p[2], *last;
	long nt, nf, nr;

	if (api_id(r, "id", &id) < 0)
		return;
	if ((nt = api_query(r, "tail", tail, sizeof(tail))) == -2 ||
	    (nf = api_query(r, "follow", follow, sizeof(follow))) == -2 ||
	    (nr = api_query(r, "rank", rank, sizeof(rank))) == -2)
		return;
	if (nf >= 0 && strcmp(follow, "0") != 0 && strcmp(follow, "1") != 0) {
		http_reply_error(r, RC_INVALID, "follow=1 streams the log",
		                 "follow must be 0 or 1");
		return;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		http_reply_error(r, RC_NOMEM, NULL, "out of memory");
		return;
	}
	c->tail = 200;
	if (nt >= 0) {
		long long t;
		if (http_parse_decimal(tail, &t) < 0 || t < 1 || t > 100000) {
			free(c);
			http_reply_error(r, RC_INVALID, "e.g. tail=200",
			                 "tail must be 1 to 100000");
			return;
		}
		c->tail = (long)t;
	}
	if (nr >= 0) {
		long long v;
		if (http_parse_decimal(rank, &v) < 0 || v < 0 || v > 15) {
			free(c);
			http_reply_error(r, RC_INVALID, "e.g. rank=1", "rank must be 0 to 15");
			return;
		}
		c->rank = (long)v;
	}
	c->follow = nf >= 0 && strcmp(follow, "1") == 0;
	c->from = -1;
	last = http_header(r, "Last-Event-ID");
	if (c->follow && last) {
		long long v;
		if (http_parse_decimal(last, &v) < 0) {
			free(c);
			http_reply_error(r, RC_INVALID, NULL,
			                 "Last-Event-ID must be an event id this stream sent");
			return;
		}
		c->from = v;
	}
	if (log_options(r, c, c->follow) < 0) {
		log_ctx_free(c);
		return;
	}
	c->r = r;
	r->data = c;
	r->data_free = log_ctx_free;
	snprintf(ids, sizeof(ids), "%lld", id);
	p[0] = ids;
	p[1] = owner_param(r, uid, sizeof(uid));
	db_query("SELECT j.user_id, u.username, substr(j.directory,"
	         "  length('home/' || u.username || '/jobs/') + 1), j.id, j.members"
	         " FROM jobs j JOIN users u ON u.id = j.user_id"
	         " WHERE j.id = $1 AND ($2::bigint IS NULL OR j.user_id = $2::bigint)",
	         2, p, log_row, r);
}

const struct route api_jobs_routes[] = {
	{ HTTP_GET, "/api/v1/jobs", list, ROLES_ALL, 0, 0, NULL },
	{ HTTP_POST, "/api/v1/jobs", create, ROLES_ALL, 0, 65536, NULL },
	{ HTTP_GET, "/api/v1/jobs/{id}", get, ROLES_ALL, 0, 0, NULL },
	{ HTTP_POST, "/api/v1/jobs/{id}/cancel", cancel, ROLES_ALL, 0, 1024, NULL },
	{ HTTP_GET, "/api/v1/jobs/{id}/logs", logs, ROLES_ALL, 0, 0, NULL },
	{ 0, NULL, NULL, 0, 0, 0, NULL },
};
