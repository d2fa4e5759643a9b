/* api_sweeps.c — /sweeps: one submit that makes one job per hyperparameter
 * set (a grid's cartesian product, or a list of sets), list, one sweep with
 * its runs and the best of them, and cancel (every live run).
 *
 * Every run is a job a user could have submitted: its POST /jobs body is
 * made by run_body() (the one place a run is shaped; with job.template_id
 * each run's body is expanded there by job_body_expand(), the template
 * loaded once) and checked by job_body_check().  All runs are recorded
 * with their allocation requests in one statement, so a 201 means every run
 * is committed, and none is when any check fails.  The limits are checked
 * as POST /jobs does (admit.c) for the shape all runs share.  Idempotency-Key
 * makes a retried submit find its sweep.  Runs are ordinary jobs afterwards
 * (jobs.sweep_id): the job driver runs them, GET /jobs lists them.
 * A user sees and acts on their own sweeps only (admins on all).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <http_parser.h>

#include "api/admit.h"
#include "api/api.h"
#include "api/job_body.h"
#include "auth/auth.h"
#include "base/events.h"
#include "db/db.h"
#include "work/template.h"

#define SWEEP_MAX_RUNS 256

#define LIVE "('queued', 'starting', 'running', 'stopping')"

/* The best run of sweep s: succeeded, the metric a number, lowest or
 * highest first (ties: the earlier run). */
#define BEST_RUN(s)                                                                      \
	"(SELECT b.id FROM jobs b WHERE b.sweep_id = " s ".id AND b.state = 'succeeded'" \
	" AND jsonb_typeof(b.last_metrics -> " s ".metric) = 'number'"                   \
	" ORDER BY CASE WHEN " s ".goal = 'min' THEN (b.last_metrics ->> " s             \
	".metric)::float8 END,"                                                          \
	" CASE WHEN " s ".goal = 'max' THEN (b.last_metrics ->> " s                      \
	".metric)::float8 END DESC, b.id LIMIT 1)"

/* One sweep without its runs (the list's item), built by the database. */
#define SWEEP_FIELDS                                                                               \
	"'id', s.id, 'name', s.name, 'user_id', s.user_id, 'username', u.username, 'tags',"        \
	" to_json(s.tags), 'metric', s.metric, 'goal', s.goal, 'runs', s.runs,"                    \
	" 'cancelled_by', s.cancelled_by, 'cancelled_at', " DB_TS(                                 \
	        "s.cancelled_at") ","                                                              \
	                          " 'created_at', " DB_TS(                                         \
	                                  "s.created_at") ", 'state', CASE WHEN c.live > 0 THEN"   \
	                                                  " 'running' WHEN s.cancelled_by IS NOT " \
	                                                  "NULL THEN 'cancelled' ELSE 'finished' " \
	                                                  "END,"                                   \
	                                                  " 'counts', c.counts, 'best_job_id', "   \
	                                                  "bj.id, 'best_value', bj.v"

#define SWEEP_FROM                                                                           \
	" FROM sweeps s JOIN users u ON u.id = s.user_id"                                    \
	" CROSS JOIN LATERAL (SELECT (SELECT count(*) FROM jobs l WHERE l.sweep_id = s.id"   \
	"  AND l.state IN " LIVE ") AS live,"                                                \
	"  (SELECT json_object_agg(st.state, COALESCE(k.n, 0)) FROM unnest(ARRAY['queued',"  \
	"   'starting', 'running', 'stopping', 'succeeded', 'failed', 'cancelled', 'lost'])" \
	"   AS st(state) LEFT JOIN (SELECT state, count(*) AS n FROM jobs WHERE sweep_id ="  \
	"   s.id GROUP BY state) k ON k.state = st.state) AS counts) c"                      \
	" LEFT JOIN LATERAL (SELECT x.id, x.last_metrics -> s.metric AS v FROM jobs x"       \
	"  WHERE x.id = " BEST_RUN("s") ") bj ON true"

/* One run of a sweep. */
#define RUN_JSON                                                                               \
	"json_build_object('id', j.id, 'name', j.name, 'hyperparameters', j.hyperparameters,"  \
	" 'state', j.state, 'desired', j.desired, 'reason', j.reason, 'reason_code',"          \
	" NULLIF(j.reason_code, ''), 'exit_code', j.exit_code, 'last_metrics',"                \
	" j.last_metrics, 'max_runtime_s', j.max_runtime_s, 'best', j.id IS NOT DISTINCT FROM" \
	" bj.id, 'request', CASE WHEN r.id IS NULL THEN NULL ELSE json_build_object('state',"  \
	" r.state, 'reason_code', r.reason_code, 'reason', r.reason, 'position', r.position,"  \
	" 'eta', " DB_TS(                                                                      \
	        "r.eta_at") ", 'eta_reason', NULLIF(r.eta_reason, '')) END,"                   \
	                    " 'created_at', " DB_TS("j.created_at") ", 'started_at', " DB_TS(  \
	                            "j.started_at") ", 'finished_at', " DB_TS("j.finished_at") ")"

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
	events_publish(EV_WORKLOAD_CHANGED); /* ...and of the job driver */
}

/* ---- one sweep ---- */

static void one_reply(PGresult *res, enum rc rc, struct http_req *r, int status)
{
	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "");
		return;
	}
	if (PQntuples(res) != 1) {
		http_reply_error(r, RC_NOTFOUND, "GET /api/v1/sweeps lists yours", "no such sweep");
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

static void reply_sweep(struct http_req *r, const char *id, db_cb cb)
{
	char uid[24];
	const char *p[2] = { id, owner_param(r, uid, sizeof(uid)) };

	db_query("SELECT json_build_object(" SWEEP_FIELDS ", 'spec', s.spec, 'jobs',"
	         " (SELECT COALESCE(json_agg(" RUN_JSON " ORDER BY j.id), '[]') FROM jobs j"
	         "  LEFT JOIN alloc_requests r ON r.id = j.request_id WHERE j.sweep_id = s.id)"
	         ")::text" SWEEP_FROM
	         " WHERE s.id = $1 AND ($2::bigint IS NULL OR s.user_id = $2::bigint)",
	         2, p, cb, r);
}

static void get(struct http_req *r)
{
	long long id;
	char ids[24];

	if (api_id(r, "id", &id) < 0)
		return;
	snprintf(ids, sizeof(ids), "%lld", id);
	reply_sweep(r, ids, one_200);
}

/* ---- list ---- */

static void list_done(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;
	int *limit = r->data;
	json_t *items, *out;

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "");
		return;
	}
	items = json_loads(db_val(res, 0, 0), 0, NULL);
	if (!json_is_array(items)) {
		json_decref(items);
		items = json_array();
	}
	out = json_object();
	json_object_set_new(out, "next_cursor", json_null());
	if ((int)json_array_size(items) > *limit) {
		json_t *last = json_array_get(items, (size_t)*limit - 1);
		char cur[24];
		snprintf(cur, sizeof(cur), "%lld",
		         (long long)json_integer_value(json_object_get(last, "id")));
		json_object_set_new(out, "next_cursor", json_string(cur));
		json_array_remove(items, (size_t)*limit);
	}
	json_object_set_new(out, "items", items);
	http_reply_json(r, 200, out);
}

static void list(struct http_req *r)
{
	int limit, *lp;
	long long cursor;
	char uid[24];
	struct db_args a = DB_ARGS_INIT;

	if (api_page(r, 50, 200, &limit, &cursor) < 0)
		return;
	lp = api_state(r, sizeof(*lp), NULL);
	if (!lp)
		return;
	*lp = limit;
	db_arg_str(&a, owner_param(r, uid, sizeof(uid)));
	db_arg_ll_opt(&a, cursor, cursor > 0);
	db_arg_ll(&a, limit + 1);
	db_query_args("SELECT COALESCE(json_agg(x.doc ORDER BY x.id DESC), '[]')::text"
	              " FROM (SELECT s.id, json_build_object(" SWEEP_FIELDS ") AS doc" SWEEP_FROM
	              "  WHERE s.id IN (SELECT id FROM sweeps"
	              "   WHERE ($1::bigint IS NULL OR user_id = $1::bigint)"
	              "   AND ($2::bigint IS NULL OR id < $2::bigint)"
	              "   ORDER BY id DESC LIMIT $3::int)) x",
	              &a, list_done, r);
}

/* ---- submit ---- */

struct create_ctx {
	json_t *body;
	char *text;   /* the body as sent (validated JSON) */
	char *runs;   /* the runs' POST /jobs bodies, a JSON array */
	json_t *base; /* the first run: the shape every run shares */
	json_t *tmpl; /* job.template_id's template (API_JOB_TEMPLATE_JSON), or NULL */
	char key[208];
	int tries;
	struct admit fit;
};

static void create_free(void *p)
{
	struct create_ctx *c = p;

	json_decref(c->body);
	json_decref(c->base);
	json_decref(c->tmpl);
	free(c->text);
	free(c->runs);
	free(c);
}

static const struct jfield sweep_spec[] = {
	{ "name", J_STRING, 1, 56 },   { "job", J_OBJECT, 1, 0 },
	{ "grid", J_OBJECT, 0, 0 },    { "list", J_ARRAY, 0, 0 },
	{ "metric", J_STRING, 1, 64 }, { "goal", J_STRING, 1, 8 },
	{ "tags", J_STRINGS, 0, 16 },  { NULL, 0, 0, 0 },
};

static int name_ok(const char *s, size_t max)
{
	size_t n = s ? strlen(s) : 0;

	if (n == 0 || n > max || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= '0' && s[0] <= '9')))
		return 0;
	return strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789._-") == n;
}

static int metric_ok(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (n == 0 || n > 64 || (s[0] >= '0' && s[0] <= '9') || s[0] == '.' || s[0] == '-' ||
	    s[0] == '/')
		return 0;
	return strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./-") == n;
}

static int scalar(const json_t *v)
{
	return json_is_number(v) || json_is_boolean(v) || json_is_string(v);
}

/* Where a template refused run i's value: the grid's value
 * ("grid.lr[2]"), the list's set ("list[3].lr"), else the run
 * ("runs[3].hyperparameters.lr"). */
static void run_field(char *out, size_t len, json_t *body, size_t i, const json_t *set,
                      const char *field)
{
	const char *pre = "hyperparameters.";
	const char *k = strncmp(field, pre, strlen(pre)) == 0 ? field + strlen(pre) : NULL;
	json_t *vals = k ? json_object_get(json_object_get(body, "grid"), k) : NULL;
	json_t *v = NULL, *g;
	size_t j;

	if (k && (v = json_object_get(set, k)) != NULL) {
		if (json_is_array(vals)) {
			json_array_foreach(vals, j, g)
			{
				if (json_equal(g, v)) {
					snprintf(out, len, "grid.%.96s[%zu]", k, j);
					return;
				}
			}
		} else if (json_object_get(body, "list")) {
			snprintf(out, len, "list[%zu].%.96s", i, k);
			return;
		}
	}
	snprintf(out, len, "runs[%zu].%.96s", i, field);
}

/* Run i's POST /jobs body (new reference): the sweep's job with the run's
 * name and hyperparameters (the job's own, then the set's), expanded from
 * tmpl when there is one (NULL with *err filled when the template refuses
 * the run), every default written out so the insert reads one shape.  Each
 * run is made here. */
static json_t *run_body(const json_t *job, const char *sweep, size_t i, json_t *set,
                        const json_t *tmpl, const char *home, struct template_error *err)
{
	json_t *b = json_deep_copy(job), *hp;
	char name[72], *cmd = NULL, *hps = NULL;
	int has_pool;
	const char *k;
	json_t *v;

	if (!b)
		return NULL;
	snprintf(name, sizeof(name), "%s-%zu", sweep, i + 1);
	json_object_set_new(b, "name", json_string(name));
	hp = json_object_get(b, "hyperparameters");
	if (!json_is_object(hp)) {
		hp = json_object();
		json_object_set_new(b, "hyperparameters", hp);
	}
	json_object_foreach(set, k, v)
	{
		json_object_set(hp, k, v);
	}
	if (tmpl) {
		int bad = job_body_expand(b, tmpl, home, &cmd, &hps, err) < 0;
		free(cmd);
		free(hps);
		if (bad) {
			json_decref(b);
			return NULL;
		}
	}
	has_pool = json_is_string(json_object_get(b, "pool")) ||
	           json_is_integer(json_object_get(b, "class"));
	if (has_pool && !json_object_get(b, "slices"))
		json_object_set_new(b, "slices", json_integer(1));
	if (!json_object_get(b, "cpu_millis"))
		json_object_set_new(b, "cpu_millis", json_integer(1000));
	if (!json_object_get(b, "mem_mib"))
		json_object_set_new(b, "mem_mib", json_integer(1024));
	if (!json_object_get(b, "shm_mib"))
		json_object_set_new(b, "shm_mib", json_integer(64));
	if (!json_object_get(b, "priority"))
		json_object_set_new(b, "priority", json_string("normal"));
	if (!json_object_get(b, "max_runtime_s"))
		json_object_set_new(b, "max_runtime_s", json_integer(86400));
	if (!json_object_get(b, "retry_limit"))
		json_object_set_new(b, "retry_limit", json_integer(0));
	return b;
}

/* A refusal of the sets: what sweep_sets() found wrong. */
struct sets_err {
	enum rc rc;       /* RC_INVALID, RC_TOO_MANY */
	const char *hint; /* static; may be NULL */
	char msg[160];
};

static json_t *sets_fail(struct sets_err *e, enum rc rc, const char *hint, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));

static json_t *sets_fail(struct sets_err *e, enum rc rc, const char *hint, const char *fmt, ...)
{
	va_list ap;

	e->rc = rc;
	e->hint = hint;
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
	return NULL;
}

/* The hyperparameter sets a sweep body asks for (new reference), in a
 * stable order: a list as given; a grid's product with its first key
 * varying slowest and each key's values in their order.  Pure (the fuzz
 * target's subject): NULL with e filled when the body's grid or list is
 * wrong or makes more than SWEEP_MAX_RUNS runs.  The sets' names and values
 * are checked with each run's body (job_body_check()). */
static json_t *sweep_sets(json_t *body, struct sets_err *e)
{
	json_t *grid = json_object_get(body, "grid"), *lst = json_object_get(body, "list");
	json_t *sets, *v;
	const char *k;
	size_t i, n = 1, nkeys;

	if ((grid != NULL) == (lst != NULL))
		return sets_fail(e, RC_INVALID, "e.g. \"grid\": {\"lr\": [0.1, 0.01]}",
		                 "a sweep needs either grid or list (one of them)");
	if (lst) {
		if (!json_is_array(lst) || json_array_size(lst) == 0)
			return sets_fail(e, RC_INVALID, "e.g. \"list\": [{\"lr\": 0.1}]",
			                 "list must have at least one set of hyperparameters");
		if (json_array_size(lst) > SWEEP_MAX_RUNS)
			return sets_fail(e, RC_TOO_MANY, "split it into several sweeps",
			                 "list has %zu sets: a sweep makes at most %d runs",
			                 json_array_size(lst), SWEEP_MAX_RUNS);
		json_array_foreach(lst, i, v)
		{
			if (!json_is_object(v))
				return sets_fail(
				        e, RC_INVALID, "e.g. [{\"lr\": 0.1}, {\"lr\": 0.01}]",
				        "list must hold objects (one set of hyperparameters "
				        "each)");
		}
		return json_incref(lst);
	}
	nkeys = json_object_size(grid);
	if (!json_is_object(grid) || nkeys == 0 || nkeys > 64)
		return sets_fail(e, RC_INVALID, "e.g. \"grid\": {\"lr\": [0.1, 0.01]}",
		                 "grid must name 1 to 64 hyperparameters");
	json_object_foreach(grid, k, v)
	{
		size_t m = json_array_size(v), j;
		if (!json_is_array(v) || m == 0)
			return sets_fail(e, RC_INVALID, "e.g. \"grid\": {\"lr\": [0.1, 0.01]}",
			                 "grid '%.64s' must be a non-empty array of values", k);
		for (j = 0; j < m; j++)
			if (!scalar(json_array_get(v, j)))
				return sets_fail(e, RC_INVALID, NULL,
				                 "grid '%.64s' values must be numbers, booleans or "
				                 "strings",
				                 k);
		if (m > SWEEP_MAX_RUNS || n * m > SWEEP_MAX_RUNS)
			return sets_fail(e, RC_TOO_MANY, "use fewer values or split the sweep",
			                 "the grid makes more than %d runs", SWEEP_MAX_RUNS);
		n *= m;
	}
	sets = json_array();
	for (i = 0; sets && i < n; i++) {
		json_t *set = json_object();
		size_t rest = i, stride = n;
		/* the first key varies slowest: an odometer */
		json_object_foreach(grid, k, v)
		{
			size_t m = json_array_size(v);
			stride /= m;
			json_object_set(set, k, json_array_get(v, rest / stride));
			rest %= stride;
		}
		json_array_append_new(sets, set);
	}
	return sets;
}

/* sweep_sets(), replying 4xx itself on NULL. */
static json_t *sets_of(struct http_req *r, json_t *body)
{
	struct sets_err e = { RC_OK, NULL, "" };
	json_t *sets = sweep_sets(body, &e);

	if (!sets)
		http_reply_error(r, e.rc != RC_OK ? e.rc : RC_NOMEM, e.hint, "%s",
		                 e.msg[0] ? e.msg : "out of memory");
	return sets;
}

static void create_insert(struct http_req *r);

static void created(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;
	struct create_ctx *c = r->data;
	const char *id;
	char loc[64];

	switch (job_body_submitted(r, res, rc, c->key, &c->tries, "sweep", &id)) {
	case SUBMIT_REPLIED: return;
	case SUBMIT_AGAIN: create_insert(r); return;
	case SUBMIT_REPLAY: reply_sweep(r, id, one_200); return;
	case SUBMIT_NEW: break;
	}
	auth_audit(r, r->auth, "sweep.submit", id, NULL);
	snprintf(loc, sizeof(loc), "/api/v1/sweeps/%s", id);
	http_add_header(r, "Location", loc);
	reply_sweep(r, id, one_201);
}

static long long int_of(json_t *b, const char *name)
{
	return (long long)json_integer_value(json_object_get(b, name));
}

static void create_insert(struct http_req *r)
{
	struct create_ctx *c = r->data;
	json_t *b = c->base;
	struct db_args a = DB_ARGS_INIT;

	db_arg_ll(&a, (long long)r->auth->user_id);                            /* $1 */
	db_arg_ll(&a, int_of(b, "image_id"));                                  /* $2 */
	db_arg_str(&a, json_string_value(json_object_get(b, "pool")));         /* $3 */
	db_arg_str(&a, json_string_value(json_object_get(c->body, "name")));   /* $4 */
	db_arg_ll(&a, int_of(b, "slices"));                                    /* $5 */
	db_arg_ll(&a, int_of(b, "cpu_millis"));                                /* $6 */
	db_arg_ll(&a, int_of(b, "mem_mib"));                                   /* $7 */
	db_arg_str(&a, c->text);                                               /* $8 */
	db_arg_str(&a, auth_role_name(r->auth->role));                         /* $9 */
	db_arg_str(&a, c->key[0] ? c->key : NULL);                             /* $10 */
	db_arg_str(&a, c->runs);                                               /* $11 */
	db_arg_str(&a, json_string_value(json_object_get(c->body, "metric"))); /* $12 */
	db_arg_str(&a, json_string_value(json_object_get(c->body, "goal")));   /* $13 */
	if (json_is_integer(json_object_get(b, "class")))
		db_arg_ll(&a, int_of(b, "class")); /* $14: a class's work (0030) */
	else
		db_arg_null(&a);
	db_query_args(
	        "WITH prev AS (SELECT id, idempotency_hash = md5($8) AS same FROM sweeps"
	        "  WHERE user_id = $1 AND idempotency_key = $10),"
	        " usr AS (SELECT username FROM users WHERE id = $1),"
	        " img AS (SELECT id, cuda_min FROM images WHERE id = $2 AND (owner_id = $1"
	        "  OR (owner_id IS NULL AND (visibility = 'everyone' OR $9 = 'admin'"
	        "  OR $9::user_role = ANY (vis_roles) OR gc_in_any_class($1, vis_classes))))),"
	        /* a class's runs: the class's pool (admit.c checked it) */
	        " pl AS (SELECT id FROM pools WHERE name = $3 OR ($3 IS NULL"
	        "  AND id = (SELECT pool_id FROM classes WHERE id = $14::bigint))),"
	        " ok AS (SELECT 1 AS one WHERE NOT EXISTS (SELECT 1 FROM prev)"
	        "  AND EXISTS (SELECT 1 FROM img) AND (($3::text IS NULL AND $14::bigint IS NULL)"
	        "  OR EXISTS (SELECT 1 FROM pl))),"
	        " rq AS (SELECT gc_request_refusal($1, (SELECT id FROM pl), $5, $6, $7) AS why"
	        "  FROM ok WHERE $14::bigint IS NULL),"
	        " sw AS (INSERT INTO sweeps (user_id, name, tags, metric, goal, spec, runs,"
	        "  idempotency_key, idempotency_hash)"
	        "  SELECT $1, $4, ARRAY(SELECT "
	        "jsonb_array_elements_text(COALESCE($8::jsonb->'tags',"
	        "  '[]'))), $12, $13, $8::jsonb, jsonb_array_length($11::jsonb), $10, md5($8)"
	        "  FROM ok WHERE NOT EXISTS (SELECT 1 FROM rq WHERE why IS NOT NULL) RETURNING id),"
	        /* the runs' ids in the sets' order */
	        " runs AS MATERIALIZED (SELECT nextval('jobs_id_seq') AS jid, x.b, x.i FROM sw,"
	        "  jsonb_array_elements($11::jsonb) WITH ORDINALITY AS x(b, i) ORDER BY x.i),"
	        " req AS (INSERT INTO alloc_requests (user_id, pool_id, owner_kind, owner_id,"
	        "  priority, slices, cpu_millis, mem_mib, cuda_min, class_id)"
	        "  SELECT $1, pl.id, 'job', runs.jid::text, (runs.b->>'priority')::alloc_priority,"
	        "  CASE WHEN pl.id IS NULL THEN 0 ELSE (runs.b->>'slices')::int END,"
	        "  (runs.b->>'cpu_millis')::bigint, (runs.b->>'mem_mib')::bigint,"
	        "  CASE WHEN pl.id IS NULL THEN 0 ELSE img.cuda_min END, $14::bigint"
	        "  FROM runs CROSS JOIN img LEFT JOIN pl ON true RETURNING id, owner_id),"
	        " ins AS (INSERT INTO jobs (id, user_id, name, tags, image_id, command, env,"
	        "  hyperparameters, pool_id, slices, cpu_millis, mem_mib, shm_mib, priority,"
	        "  max_runtime_s, retry_limit, request_id, directory, container_name, sweep_id,"
	        "  template_id, class_id)"
	        "  SELECT runs.jid, $1, runs.b->>'name',"
	        "  ARRAY(SELECT jsonb_array_elements_text(COALESCE(runs.b->'tags', '[]'))),"
	        "  img.id, ARRAY(SELECT jsonb_array_elements_text(runs.b->'command')),"
	        "  COALESCE(runs.b->'env', '{}'), COALESCE(runs.b->'hyperparameters', '{}'),"
	        "  (SELECT id FROM pl), CASE WHEN (SELECT id FROM pl) IS NULL THEN 0"
	        "  ELSE (runs.b->>'slices')::int END, (runs.b->>'cpu_millis')::bigint,"
	        "  (runs.b->>'mem_mib')::bigint, (runs.b->>'shm_mib')::bigint,"
	        "  (runs.b->>'priority')::alloc_priority, (runs.b->>'max_runtime_s')::int,"
	        "  (runs.b->>'retry_limit')::int, req.id,"
	        "  'home/' || usr.username || '/jobs/' || runs.jid || '-' || (runs.b->>'name'),"
	        "  'gc-' || substr((SELECT cluster_id FROM cluster_identity), 1, 8) || '-job-'"
	        "  || runs.jid, (SELECT id FROM sw), (runs.b->>'template_id')::bigint, $14::bigint"
	        "  FROM runs JOIN req ON req.owner_id = runs.jid::text, img, usr RETURNING id)"
	        " SELECT (SELECT id FROM sw), (SELECT why FROM rq), (SELECT id FROM prev),"
	        " (SELECT same FROM prev), (SELECT count(*) FROM ins)",
	        &a, created, r);
}

static void key_seen(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "");
		return;
	}
	/* a retry of a submit admitted then: its sweep, whatever the limits
	 * say now */
	if (PQntuples(res) == 1)
		create_insert(r);
	else
		admit_check(r, &((struct create_ctx *)r->data)->fit);
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
		admit_check(r, &c->fit);
		return;
	}
	snprintf(uid, sizeof(uid), "%lld", (long long)r->auth->user_id);
	db_query("SELECT 1 FROM sweeps WHERE user_id = $1 AND idempotency_key = $2", 2, p, key_seen,
	         r);
}

/* Every run's body, checked as POST /jobs checks one (a JSON array, caller
 * frees); *base the first run (new reference).  Replies 4xx itself and
 * returns NULL. */
static char *runs_of(struct http_req *r, json_t *body, json_t **base, const json_t *tmpl)
{
	const char *sweep = json_string_value(json_object_get(body, "name"));
	json_t *job = json_object_get(body, "job"), *sets, *runs = NULL, *typed = NULL, *set;
	char err[256], *text = NULL, home[300];
	size_t i;

	*base = NULL;
	if (json_object_get(job, "name"))
		json_object_del(job, "name"); /* runs are named after the sweep */
	/* the job's fields and their types, as POST /jobs decodes them */
	json_object_set_new(job, "name", json_string("x"));
	text = json_dumps(job, JSON_COMPACT);
	typed = text ? api_json_decode(text, strlen(text), job_body_spec, err, sizeof(err)) : NULL;
	json_object_del(job, "name");
	free(text);
	text = NULL;
	if (!typed) {
		http_reply_error(r, RC_INVALID, "job takes what POST /api/v1/jobs takes", "job: %s",
		                 err);
		return NULL;
	}
	json_decref(typed);
	if (json_integer_value(json_object_get(job, "members")) > 1) {
		/* (runs are inserted without members: 0027 is POST /jobs only) */
		http_reply_error(r, RC_INVALID, "submit distributed jobs one by one",
		                 "job: a sweep's runs are not distributed (members must be 1)");
		return NULL;
	}
	sets = sets_of(r, body);
	if (!sets)
		return NULL;
	snprintf(home, sizeof(home), "/home/%s", r->auth->username);
	runs = json_array();
	json_array_foreach(sets, i, set)
	{
		struct template_error te = { "", "", "", 0, 0 };
		json_t *b = run_body(job, sweep, i, set, tmpl, home, &te), *details;
		if (!b && (te.field[0] || te.msg[0])) {
			char field[192], msg[640];
			run_field(field, sizeof(field), body, i, set, te.field);
			details = json_pack("[{s:s, s:s, s:I}]", "field", field, "reason",
			                    te.reason, "run", (json_int_t)i);
			if (details && te.has_limit)
				json_object_set_new(json_array_get(details, 0), "limit",
				                    json_real(te.limit));
			snprintf(msg, sizeof(msg), "%s: %s", field,
			         te.msg[0] ? te.msg : "the template could not be expanded");
			http_reply_error_details(r, RC_INVALID, details,
			                         "GET /api/v1/job-templates/{id} shows its schema",
			                         msg);
			goto out;
		}
		if (b && json_integer_value(json_object_get(b, "members")) > 1) {
			json_decref(b);
			http_reply_error(r, RC_INVALID, "submit distributed jobs one by one",
			                 "job: the template makes distributed jobs; a sweep's runs "
			                 "are not distributed");
			goto out;
		}
		if (!b || job_body_check(r, b) < 0) {
			if (!b)
				http_reply_error(r, RC_NOMEM, NULL, "out of memory");
			json_decref(b);
			goto out;
		}
		json_array_append_new(runs, b);
	}
	*base = json_incref(json_array_get(runs, 0));
	/* 15 digits: 0.1 stays "0.1" (17 would write 0.10000000000000001) */
	text = json_dumps(runs, JSON_COMPACT | JSON_REAL_PRECISION(15));
	if (!text) {
		json_decref(*base);
		*base = NULL;
		http_reply_error(r, RC_NOMEM, NULL, "out of memory");
	}
out:
	json_decref(sets);
	json_decref(runs);
	return text;
}

static void template_row(PGresult *res, enum rc rc, void *arg);
static void create_runs(struct http_req *r);

static void create(struct http_req *r)
{
	json_t *body = api_json_body(r, sweep_spec), *v, *tid;
	const char *key, *goal;
	struct create_ctx *c;
	size_t n, i;

	if (!body)
		return;
	key = http_header(r, "Idempotency-Key");
	if (!name_ok(json_string_value(json_object_get(body, "name")), 56)) {
		http_reply_error(
		        r, RC_INVALID, "e.g. \"resnet-lr\"",
		        "name must be 1 to 56 lower-case letters, digits, '.', '_' or '-', "
		        "starting with a letter or digit");
		goto bad;
	}
	if (!metric_ok(json_string_value(json_object_get(body, "metric")))) {
		http_reply_error(r, RC_INVALID, "e.g. \"loss\" or \"val/acc\"",
		                 "metric must be 1 to 64 letters, digits, '_', '.', '/' or '-', "
		                 "starting with a letter or '_'");
		goto bad;
	}
	goal = json_string_value(json_object_get(body, "goal"));
	if (strcmp(goal, "min") != 0 && strcmp(goal, "max") != 0) {
		http_reply_error(r, RC_INVALID, "min for a loss, max for an accuracy",
		                 "goal must be min or max");
		goto bad;
	}
	json_array_foreach(json_object_get(body, "tags"), i, v)
	{
		if (!name_ok(json_string_value(v), 40)) {
			http_reply_error(
			        r, RC_INVALID, "e.g. [\"resnet\"]",
			        "tags must be 1 to 40 lower-case letters, digits, '.', '_' "
			        "or '-'");
			goto bad;
		}
	}
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
	tid = json_object_get(json_object_get(body, "job"), "template_id");
	if (json_is_integer(tid)) {
		/* the template once for every run; a disabled one for admins
		 * only (as POST /jobs) */
		char ids[24];
		const char *tp[2] = { ids, is_admin(r) ? "t" : "f" };
		snprintf(ids, sizeof(ids), "%lld", (long long)json_integer_value(tid));
		db_query("SELECT " API_JOB_TEMPLATE_JSON API_JOB_TEMPLATE_FROM
		         " WHERE t.id = $1 AND (t.enabled OR $2::bool)",
		         2, tp, template_row, r);
		return;
	}
	create_runs(r);
	return;
bad:
	json_decref(body);
}

static void template_row(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;
	struct create_ctx *c = r->data;

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "");
		return;
	}
	if (PQntuples(res) != 1) {
		http_reply_error_details(
		        r, RC_NOTFOUND,
		        json_pack("[{s:s, s:s}]", "field", "job.template_id", "reason", "unknown"),
		        "GET /api/v1/job-templates lists them", "no such job template");
		return;
	}
	c->tmpl = json_loads(db_val(res, 0, 0), 0, NULL);
	if (!c->tmpl) {
		http_reply_error(r, RC_NOMEM, NULL, "out of memory");
		return;
	}
	create_runs(r);
}

/* Every run's body (expanded from c->tmpl when there is one), then the
 * space check, the limits and the insert. */
static void create_runs(struct http_req *r)
{
	struct create_ctx *c = r->data;
	char uid[24];
	const char *p[1] = { uid };

	c->runs = runs_of(r, c->body, &c->base, c->tmpl);
	if (!c->runs)
		return;
	c->fit.pool = json_string_value(json_object_get(c->base, "pool"));
	c->fit.class_id = int_of(c->base, "class");
	c->fit.image_id = int_of(c->base, "image_id");
	c->fit.slices = (int)int_of(c->base, "slices");
	c->fit.nodes = 1;
	c->fit.cpu = int_of(c->base, "cpu_millis");
	c->fit.mem = int_of(c->base, "mem_mib");
	c->fit.ok = create_insert;
	snprintf(uid, sizeof(uid), "%lld", (long long)r->auth->user_id);
	db_query("SELECT gc_storage_block_reason($1)", 1, p, create_blocked, r);
}

/* ---- cancel ---- */

static const struct jfield empty_spec[] = { { NULL, 0, 0, 0 } };

static void cancel_done(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;
	const char *id = r->data;

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "could not cancel the sweep");
		return;
	}
	if (!db_val(res, 0, 0)) {
		http_reply_error(r, RC_NOTFOUND, "GET /api/v1/sweeps lists yours", "no such sweep");
		return;
	}
	if (strcmp(db_val(res, 0, 1), "0") != 0)
		auth_audit(r, r->auth, "sweep.cancel", id, NULL);
	reply_sweep(r, id, one_202);
}

/* Cancels every live run (as POST /jobs/{id}/cancel does each); a sweep
 * with none left is answered as it is. */
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
	db_query("WITH s AS (SELECT id FROM sweeps WHERE id = $1"
	         "  AND ($2::bigint IS NULL OR user_id = $2::bigint) FOR UPDATE),"
	         " u AS (UPDATE jobs SET desired = 'cancelled', cancelled_by = $3,"
	         "  updated_at = now() WHERE sweep_id IN (SELECT id FROM s)"
	         "  AND desired = 'running' AND state IN " LIVE " RETURNING id),"
	         " w AS (UPDATE sweeps SET cancelled_by = $3, cancelled_at = now()"
	         "  WHERE id IN (SELECT id FROM s) AND cancelled_by IS NULL"
	         "  AND EXISTS (SELECT 1 FROM u) RETURNING id)"
	         " SELECT (SELECT id FROM s), (SELECT count(*) FROM u), (SELECT count(*) FROM w)",
	         3, p, cancel_done, r);
}

const struct route api_sweeps_routes[] = {
	{ HTTP_GET, "/api/v1/sweeps", list, ROLES_ALL, 0, 0, NULL },
	{ HTTP_POST, "/api/v1/sweeps", create, ROLES_ALL, 0, 262144, NULL },
	{ HTTP_GET, "/api/v1/sweeps/{id}", get, ROLES_ALL, 0, 0, NULL },
	{ HTTP_POST, "/api/v1/sweeps/{id}/cancel", cancel, ROLES_ALL, 0, 1024, NULL },
	{ 0, NULL, NULL, 0, 0, 0, NULL },
};
