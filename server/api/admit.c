/* admit.c — the submit-time check of admit.h: one statement reads the
 * caller's effective limit for the request (gc_request_limit(), 0020) and
 * what each node that is not cordoned could ever give (the pool's slices on
 * it, its cpu and memory), then place_max_fit() — the computation the
 * scheduler uses to mark a waiting request cannot_run_as_asked — decides.
 *
 * Owns neither the request nor its queueing: the caller's statement queues
 * it (and still guards the quota itself, for an admin change in between);
 * a node removed after the check is the scheduler's to explain.
 */
#include "api/admit.h"

#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "auth/auth.h"
#include "db/db.h"
#include "sched/place.h"

#define MAX_CAPS 4096

static json_t *details(const char *what, long long most, long long asked, const char *pool)
{
	return json_pack("[{s:s, s:I, s:I, s:o}]", "what", what, "most", (json_int_t)most, "asked",
	                 (json_int_t)asked, "pool", pool ? json_string(pool) : json_null());
}

static const char *fit_what(enum place_fit f)
{
	switch (f) {
	case FIT_SLICES: return "slices";
	case FIT_CPU: return "cpu_millis";
	case FIT_MEM: return "mem_mib";
	case FIT_NODES: return "nodes";
	default: return "";
	}
}

static void checked(PGresult *res, enum rc rc, void *arg)
{
	struct admit *f = arg;
	struct http_req *r = f->r;
	const char *code, *pool;
	json_t *caps;
	struct place_cap *cv = NULL;
	struct place_fit_r fr = { f->slices, f->nodes, f->cpu, f->mem, FIT_OK, 0 };
	char where[96], msg[240], hint[96];
	size_t i, n;

	if (rc != RC_OK || PQntuples(res) != 1) {
		api_reply_db_error(r, rc, "could not check the request");
		return;
	}
	if (db_val(res, 0, 0)) { /* the pool named does not exist */
		f->ok(r);
		return;
	}
	code = db_val(res, 0, 1);
	pool = db_val(res, 0, 7);
	if (f->class_id && code) {
		/* the class's standing and figures (0030) */
		enum rc why = strcmp(code, "not_found") == 0       ? RC_NOTFOUND
		              : strcmp(code, "exceeds_class") == 0 ? RC_EXCEEDS_QUOTA
		              : strcmp(code, "wrong_pool") == 0    ? RC_INVALID
		              : strcmp(code, "image") == 0         ? RC_FORBIDDEN
		                                                   : RC_CONFLICT;
		const char *what = db_val(res, 0, 4) ? db_val(res, 0, 4) : "";
		long long asked = strcmp(what, "slices") == 0 ? (long long)f->slices * f->nodes
		                  : strcmp(what, "cpu_millis") == 0 ? f->cpu * f->nodes
		                  : strcmp(what, "mem_mib") == 0    ? f->mem * f->nodes
		                                                    : 0;

		if (why == RC_EXCEEDS_QUOTA)
			http_reply_error_details(
			        r, why,
			        details(what,
			                strtoll(db_val(res, 0, 5) ? db_val(res, 0, 5) : "0", NULL,
			                        10),
			                asked, pool),
			        db_val(res, 0, 3), db_val(res, 0, 2));
		else
			http_reply_error(r, why, db_val(res, 0, 3), "%s", db_val(res, 0, 2));
		return;
	}
	if (f->class_id && pool) {
		snprintf(f->pool_buf, sizeof(f->pool_buf), "%s", pool);
		f->pool = f->pool_buf;
	}
	if (code && strcmp(code, "forbidden") == 0) {
		http_reply_error(r, RC_FORBIDDEN, db_val(res, 0, 3), "%s", db_val(res, 0, 2));
		return;
	}
	if (code) {
		long long most = strtoll(db_val(res, 0, 5) ? db_val(res, 0, 5) : "0", NULL, 10);
		const char *what = db_val(res, 0, 4) ? db_val(res, 0, 4) : "";
		long long asked = strcmp(what, "slices") == 0 ? (long long)f->slices * f->nodes
		                  : strcmp(what, "cpu_millis") == 0 ? f->cpu * f->nodes
		                  : strcmp(what, "mem_mib") == 0    ? f->mem * f->nodes
		                                                    : 0;

		http_reply_error_details(r, RC_EXCEEDS_QUOTA, details(what, most, asked, pool),
		                         db_val(res, 0, 3), db_val(res, 0, 2));
		return;
	}
	caps = json_loads(db_val(res, 0, 6), 0, NULL);
	n = json_array_size(caps);
	if (n > MAX_CAPS)
		n = MAX_CAPS;
	cv = calloc(n ? n : 1, sizeof(*cv));
	if (!cv) {
		json_decref(caps);
		http_reply_error(r, RC_NOMEM, NULL, "out of memory");
		return;
	}
	for (i = 0; i < n; i++) {
		json_t *c = json_array_get(caps, i);

		cv[i].slices = (int)json_integer_value(json_array_get(c, 0));
		cv[i].cpu = json_integer_value(json_array_get(c, 1));
		cv[i].mem = json_integer_value(json_array_get(c, 2));
	}
	json_decref(caps);
	place_max_fit(cv, (int)n, &fr);
	free(cv);
	if (fr.fit == FIT_OK || fr.fit == FIT_NO_NODES) {
		/* no node at all: it waits (no_nodes) for an admin to add one */
		f->ok(r);
		return;
	}
	if (pool)
		snprintf(where, sizeof(where), "pool '%s'", pool);
	else
		snprintf(where, sizeof(where), "the cluster");
	place_fit_say(&fr, where, msg, sizeof(msg), hint, sizeof(hint));
	http_reply_error_details(r, RC_NEVER_FITS,
	                         details(fit_what(fr.fit), fr.most,
	                                 fr.fit == FIT_SLICES ? f->slices
	                                 : fr.fit == FIT_CPU  ? f->cpu
	                                 : fr.fit == FIT_MEM  ? f->mem
	                                                      : f->nodes,
	                                 pool),
	                         hint, msg);
}

void admit_check(struct http_req *r, struct admit *f)
{
	struct db_args a = DB_ARGS_INIT;

	f->r = r;
	db_arg_ll(&a, r->auth->user_id);
	db_arg_str(&a, f->pool);
	db_arg_ll(&a, (long long)f->slices * f->nodes);
	db_arg_ll(&a, f->cpu * f->nodes);
	db_arg_ll(&a, f->mem * f->nodes);
	db_arg_ll(&a, f->class_id);
	db_arg_ll(&a, f->image_id);
	/* per node that is not cordoned (down and draining ones may come
	 * back): the pool's slices on it, its cpu and memory (0: not known) */
	db_query_args(
	        "SELECT CASE WHEN $2::text IS NOT NULL AND p.id IS NULL AND $6 = 0 THEN 't' END,"
	        " l.code, l.why, l.hint, l.what, l.most,"
	        " (SELECT COALESCE(json_agg(json_build_array(c.slices, c.cpu, c.mem)), '[]')::text"
	        "  FROM (SELECT count(s.id) AS slices, COALESCE(n.ncpu, 0)::bigint * 1000 AS cpu,"
	        "   COALESCE(n.memory_bytes, 0) / 1048576 AS mem FROM nodes n"
	        "   LEFT JOIN gpus g ON g.node_id = n.id AND p.id IS NOT NULL"
	        "   LEFT JOIN slices s ON s.gpu_id = g.id AND s.pool_id = p.id"
	        "   WHERE n.admin_state <> 'cordoned' GROUP BY n.id"
	        "   HAVING p.id IS NULL OR count(s.id) > 0) c),"
	        " p.name"
	        " FROM (SELECT 1) one LEFT JOIN classes cl ON cl.id = $6"
	        " LEFT JOIN pools p ON p.name = COALESCE($2, (SELECT name FROM pools"
	        "  WHERE id = cl.pool_id))"
	        /* in a class: the class's and the student's limits (0030) */
	        " LEFT JOIN LATERAL (SELECT * FROM gc_request_limit($1, p.id, $3, $4, $5)"
	        "  WHERE $6 = 0 UNION ALL SELECT * FROM gc_class_limit($1, $6, p.id, $7, $3,"
	        "  $4, $5) WHERE $6 <> 0) l ON true",
	        &a, checked, f);
}
