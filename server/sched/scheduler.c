/* scheduler.c — the scheduler's database side: the pass.
 *
 * Owns: the pass, run on the leader's pinned connection (db/leader.h: the
 * session that holds the lock, so a pass never commits after losing it) in
 * one REPEATABLE READ transaction:
 * read the quotas' maximum runtimes and the cluster shape's version,
 * release preempted scavenger requests whose grace is over and work past
 * its runtime, read nodes, slices (the shape only when its version moved:
 * the leader keeps it between passes), the queue and the running
 * allocations, ask place.c, write the
 * allocations and every request's state, reason and position (and the
 * start estimate of each waiting one, sched/eta.c), mark preemption
 * victims, commit.  The unique index on live allocations makes a
 * second grant of a slice impossible even if two replicas ever both ran.
 * The pass is the cron section "sched" (cfg.sched_interval_ms); an
 * EV_ALLOC_CHANGED wake-up brings it forward, and a pass that allocated
 * publishes EV_ALLOC_GRANTED.
 * Does not own: leadership (db/leader.c), the policy (place.c) or the API
 * (api_allocations.c).
 */
#include "sched/scheduler.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>

#include "base/clock.h"
#include "base/config.h"
#include "base/cron.h"
#include "base/events.h"
#include "base/jsonw.h"
#include "base/log.h"
#include "db/db.h"
#include "db/leader.h"
#include "sched/eta.h"
#include "sched/place.h"

enum step {
	S_IDLE,
	S_BEGIN,
	S_RUNTIME,
	S_PREEMPT,
	S_NODES,
	S_SLICES,
	S_SHAPES,
	S_QUEUE,
	S_RUNNING,
	S_CLASSES,
	S_WRITE,
	S_VICTIMS,
	S_ANALYZE,
	S_COMMIT,
	S_ROLLBACK
};

static struct cron_section *section;
static struct db_conn *held; /* leader_conn() for the pass under way */
static enum step step = S_IDLE;
static int kicked;

/* the snapshot of one pass */
static struct place_input in;
static char *victims_doc;
/* the maximum runtime each user's quota allows in each pool they hold work
 * in (only where there is one): three array literals, user ids, pool ids
 * (0: CPU-only) and seconds, read once and used by the release and the
 * running reads, which each computed it (3 ms apiece on a full cluster) */
static char *rt[3];
/* A statement's q(user_id, pk, max_runtime_s) from rt[] passed as its
 * parameters $a, $b and $c. */
#define RUNTIME_CTE(a, b, c)                                                                    \
	"WITH q AS (SELECT * FROM unnest($" a "::bigint[], $" b "::bigint[], $" c "::bigint[])" \
	" AS q(user_id, pk, max_runtime_s))"
/* The cluster's shape (which slices exist, of which pool, on which GPU of
 * which node) as the last full slices read found it, with the version of
 * sched_topology (0043) read in that read's snapshot.  A pass that finds
 * the same version reads only which request holds each slice: the shape
 * read was ~4 ms of every pass with 8,000 slices.  Kept across passes;
 * dropped with leadership. */
struct topo_slice {
	int64_t id, node_id, pool_id;
	int gpu;
};
static struct topo_slice *topo;
static int ntopo;
static int64_t topo_version = -1;      /* of topo (-1: none kept) */
static int64_t pass_topo_version = -2; /* this pass's (S_RUNTIME) */
static int slices_full;                /* this pass's S_SLICES reads the shape */
static double t_begin, t_engine;       /* monotonic seconds: pass start, engine time */
/* milliseconds each step's statement took (from its send to its result),
 * for the pass's debug line: where a slow pass spends its time */
static double t_sent, t_step[S_ROLLBACK + 1];
static double t_eta, t_doc; /* ms: the start estimates, the decisions' JSON */
static int n_placed;
/* what each queued request (in.queue order, by id) says now: a pass writes
 * only the decisions that change it */
struct prev {
	char code[24];
	char *reason;
	int position;
	char budget[240]; /* set when the user's GPU-hour budget is spent, when
	                   * no quota admits the request at all, or when it asks
	                   * more than the limit by itself */
	int64_t eta;      /* its start estimate (unix s; 0 none) and why none */
	char eta_why[200];
};
static struct prev *prev;
/* for the start estimates (eta.h): per in.queue its maximum runtime, per
 * in.running its latest end; this pass's estimates per in.queue */
static int64_t *queue_dur, *run_end;
static struct eta_out *etas;
/* the classes with an allocation (place.h), their names and window ends */
static struct place_class *classes;
static char *class_text;

/* What a queued request's owner may use, once per shape of request rather
 * than per request: the per-user answers (quota, limits, usage, class
 * rules) of a queue of 10,000 from 100 users are a few hundred rows, and
 * joining them onto every request in SQL (sorts and merges of 10,000 wide
 * rows) was most of the queue's read.  Read first, in the pass's snapshot;
 * each request finds its shape by key (shape_find). */
struct shape {
	int64_t user_id, pool_key, class_key, s, c, m; /* the key: pool and class 0 for none */
	int64_t user_recent, quota_cpu, quota_mem, runtime;
	int quota_slices;
	double hours_cap, hours_used;    /* GPU-hour budget; hours_cap < 0: none */
	const char *forbidden, *exceeds; /* NULL: not blocked (in shape_text) */
	int64_t student_cpu, student_mem, student_runtime;
	int student_slices, class_block;
	const char *class_why;
};
static struct shape *shapes;
static int nshapes;
static char *shape_text; /* the shapes' sentences */

static void next(void);

/* Ends s before a character that a fixed buffer cut short (a class name of
 * 100 CJK characters outgrows a 240-byte reason).  The stored reason then
 * equals what the next pass makes, so it is not written again every pass;
 * put_text() would have stored the stray bytes as U+FFFD. */
static void cut_utf8(char *s)
{
	unsigned char *p = (unsigned char *)s;

	while (*p) {
		int n = jsonw_utf8_len(p);
		if (n == 0) {
			if (*p >= 0xc0 && strlen((char *)p) < 4)
				*p = '\0';
			return;
		}
		p += n;
	}
}

static void snapshot_free(void)
{
	for (int i = 0; prev && i < in.nqueue; i++)
		free(prev[i].reason);
	free(prev);
	prev = NULL;
	free(queue_dur);
	free(run_end);
	free(etas);
	queue_dur = run_end = NULL;
	etas = NULL;
	free(in.nodes);
	free(in.slices);
	free(in.queue);
	free(in.running);
	free(classes);
	free(class_text);
	classes = NULL;
	class_text = NULL;
	free(shapes);
	shapes = NULL;
	nshapes = 0;
	free(shape_text);
	shape_text = NULL;
	memset(&in, 0, sizeof(in));
	free(victims_doc);
	victims_doc = NULL;
	for (int i = 0; i < 3; i++) {
		free(rt[i]);
		rt[i] = NULL;
	}
}

static void topo_forget(void)
{
	free(topo);
	topo = NULL;
	ntopo = 0;
	topo_version = -1;
}

/* The pinned connection broke (or the database is down): leadership is gone
 * with the session; leader.c tells us (on_leader) and tries again later. */
static void lost(const char *why)
{
	held = NULL;
	step = S_IDLE;
	snapshot_free();
	topo_forget();
	leader_lost(why);
}

static void pass_over(void)
{
	step = S_IDLE;
	held = NULL;
	snapshot_free();
	cron_next(section, kicked ? 50 : cfg.sched_interval_ms);
	kicked = 0;
}

static void query(const char *sql, int n, const char *const *p, db_cb cb)
{
	if (!held) {
		/* shutting down, or the lock went with the pass under way */
		step = S_IDLE;
		snapshot_free();
		return;
	}
	t_sent = clock_now_s();
	db_conn_query(held, sql, n, p, cb, NULL);
}

static int node_index(int64_t id)
{
	int lo = 0, hi = in.nnodes - 1;

	while (lo <= hi) {
		int mid = (lo + hi) / 2;
		if (in.nodes[mid].id == id)
			return mid;
		if (in.nodes[mid].id < id)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return -1;
}

/* slices were read ordered by id */
static int slice_index(int64_t id)
{
	int lo = 0, hi = in.nslices - 1;

	while (lo <= hi) {
		int mid = (lo + hi) / 2;
		if (in.slices[mid].id == id)
			return mid;
		if (in.slices[mid].id < id)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return -1;
}

static int64_t ll(const PGresult *res, int r, int c)
{
	const char *v = db_val(res, r, c);

	return v ? strtoll(v, NULL, 10) : 0;
}

static enum place_priority prio(const char *s);

static int topo_cmp(const void *a, const void *b)
{
	const struct topo_slice *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

/* in.slices (by id, for slice_index) from the kept shape, its shape read
 * first when slices_full (columns: id, node, pool, GPU index, holder), and
 * each slice's holder (else columns: slice, holder).  Leaves in.slices NULL
 * when out of memory. */
static void read_slices(const PGresult *res)
{
	int n = PQntuples(res);

	in.nslices = 0;
	if (slices_full) {
		struct topo_slice *t = calloc((size_t)n + 1, sizeof(*t));

		topo_forget();
		if (!t)
			return;
		for (int i = 0; i < n; i++)
			t[i] = (struct topo_slice){ ll(res, i, 0), ll(res, i, 1), ll(res, i, 2),
				                    (int)ll(res, i, 3) };
		qsort(t, (size_t)n, sizeof(*t), topo_cmp);
		topo = t;
		ntopo = n;
		topo_version = pass_topo_version;
	}
	in.slices = calloc((size_t)ntopo + 1, sizeof(*in.slices));
	if (!in.slices)
		return;
	for (int i = 0; i < ntopo; i++) {
		int k = node_index(topo[i].node_id);
		if (k >= 0)
			in.slices[in.nslices++] =
			        (struct place_slice){ topo[i].id, k, topo[i].pool_id, topo[i].gpu,
				                      0 };
	}
	for (int i = 0; i < n; i++) {
		int64_t by = ll(res, i, slices_full ? 4 : 1);
		int j = by ? slice_index(ll(res, i, 0)) : -1;
		if (j >= 0)
			in.slices[j].used_by = by;
	}
}

/* An allocated request as S_RUNNING reads it, before it is split by node. */
struct areq {
	int64_t id, user_id, pool_id, cpu, mem, started, end, class_id;
	enum place_priority priority;
};

static int areq_cmp(const void *a, const void *b)
{
	const struct areq *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

/* What a request holds on a node: n slices (0 for a CPU-only allocation). */
struct hold_at {
	int64_t req;
	int node, n;
};

static int hold_cmp(const void *a, const void *b)
{
	const struct hold_at *x = a, *y = b;

	if (x->req != y->req)
		return x->req < y->req ? -1 : 1;
	return (x->node > y->node) - (x->node < y->node);
}

/* in.running and run_end: one entry per allocated request and node it
 * holds anything on, its slices there counted from the slices' holders
 * (in.slices, read in this snapshot) rather than by grouping the live
 * allocations again in SQL (3 of the read's 8 ms with a full cluster).
 * res: the allocated requests, a row per CPU-only node they hold (column
 * 4, NULL: none).  Leaves in.running NULL when out of memory. */
static void read_running(const PGresult *res)
{
	int nr = PQntuples(res), nh = 0;
	struct areq *a = calloc((size_t)nr + 1, sizeof(*a));
	struct hold_at *h = calloc((size_t)in.nslices + (size_t)nr + 1, sizeof(*h));

	in.nrunning = 0;
	if (!a || !h)
		goto out;
	for (int i = 0; i < nr; i++) {
		int n = node_index(ll(res, i, 4));

		a[i] = (struct areq){ ll(res, i, 0), ll(res, i, 1), ll(res, i, 2),
			              ll(res, i, 5), ll(res, i, 6), ll(res, i, 7),
			              ll(res, i, 8), ll(res, i, 9), prio(db_val(res, i, 3)) };
		if (n >= 0)
			h[nh++] = (struct hold_at){ a[i].id, n, 0 };
	}
	qsort(a, (size_t)nr, sizeof(*a), areq_cmp);
	for (int i = 0; i < in.nslices; i++)
		if (in.slices[i].used_by)
			h[nh++] = (struct hold_at){ in.slices[i].used_by, in.slices[i].node, 1 };
	qsort(h, (size_t)nh, sizeof(*h), hold_cmp);
	in.running = calloc((size_t)nh + 1, sizeof(*in.running));
	run_end = calloc((size_t)nh + 1, sizeof(*run_end));
	if (!in.running || !run_end) {
		free(in.running);
		in.running = NULL;
		goto out;
	}
	for (int i = 0, j; i < nh; i = j) {
		struct areq key = { .id = h[i].req }, *q;
		int slices = 0;

		for (j = i; j < nh && h[j].req == h[i].req && h[j].node == h[i].node; j++)
			slices += h[j].n;
		/* (a slice held by a request that is no longer allocated) */
		q = bsearch(&key, a, (size_t)nr, sizeof(*a), areq_cmp);
		if (!q)
			continue;
		in.running[in.nrunning] =
		        (struct place_running){ q->id,      q->user_id, q->pool_id, q->priority,
			                        h[i].node,  slices,     q->cpu,     q->mem,
			                        q->started, q->class_id };
		run_end[in.nrunning] = q->end;
		in.nodes[h[i].node].cpu_free -= q->cpu;
		in.nodes[h[i].node].mem_free -= q->mem;
		in.nrunning++;
	}
out:
	free(a);
	free(h);
}

static enum place_priority prio(const char *s)
{
	return strcmp(s, "exam") == 0        ? PRIO_EXAM
	       : strcmp(s, "scavenger") == 0 ? PRIO_SCAVENGER
	                                     : PRIO_NORMAL;
}

/* S_SHAPES: the owners' answers per shape of request (struct shape). */
static void read_shapes(const PGresult *res)
{
	static const int text_cols[] = { 12, 13, 19 };
	size_t text = 0, at = 0;
	int n = PQntuples(res);

	for (int i = 0; i < n; i++)
		for (size_t k = 0; k < sizeof(text_cols) / sizeof(text_cols[0]); k++)
			if (db_val(res, i, text_cols[k]))
				text += strlen(db_val(res, i, text_cols[k])) + 1;
	shapes = calloc((size_t)n + 1, sizeof(*shapes));
	shape_text = malloc(text + 1);
	if (!shapes || !shape_text) {
		free(shapes);
		shapes = NULL;
		return;
	}
	for (int i = 0; i < n; i++) {
		struct shape *h = &shapes[i];
		const char *t[3];

		for (int k = 0; k < 3; k++) {
			const char *v = db_val(res, i, text_cols[k]);
			size_t l = v ? strlen(v) + 1 : 0;
			t[k] = v ? memcpy(shape_text + at, v, l) : NULL;
			at += l;
		}
		h->user_id = ll(res, i, 0);
		h->pool_key = ll(res, i, 1);
		h->class_key = ll(res, i, 2);
		h->s = ll(res, i, 3);
		h->c = ll(res, i, 4);
		h->m = ll(res, i, 5);
		h->user_recent = ll(res, i, 6);
		h->quota_slices = (int)ll(res, i, 7);
		h->quota_cpu = ll(res, i, 8);
		h->quota_mem = ll(res, i, 9);
		h->hours_cap = db_val(res, i, 10) ? strtod(db_val(res, i, 10), NULL) : -1;
		h->hours_used = strtod(db_val(res, i, 11), NULL);
		h->forbidden = t[0];
		h->exceeds = t[1];
		h->runtime = db_val(res, i, 14) ? ll(res, i, 14) : -1;
		h->student_slices = (int)ll(res, i, 15);
		h->student_cpu = ll(res, i, 16);
		h->student_mem = ll(res, i, 17);
		h->class_block = (int)ll(res, i, 18);
		h->class_why = t[2];
	}
	nshapes = n;
}

/* Orders shapes as the SQL's ORDER BY 1..6 does. */
static int shape_cmp(const struct shape *a, const struct shape *b)
{
	const int64_t x[6] = { a->user_id, a->pool_key, a->class_key, a->s, a->c, a->m };
	const int64_t y[6] = { b->user_id, b->pool_key, b->class_key, b->s, b->c, b->m };

	for (int i = 0; i < 6; i++)
		if (x[i] != y[i])
			return x[i] < y[i] ? -1 : 1;
	return 0;
}

static const struct shape *shape_find(const struct place_request *q)
{
	struct shape key = { .user_id = q->user_id,
		             .pool_key = q->pool_id,
		             .class_key = q->class_id,
		             .s = (int64_t)q->slices * q->nodes,
		             .c = q->cpu * q->nodes,
		             .m = q->mem * q->nodes };
	int lo = 0, hi = nshapes - 1;

	while (lo <= hi) {
		int mid = (lo + hi) / 2, c = shape_cmp(&shapes[mid], &key);
		if (c == 0)
			return &shapes[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return NULL;
}

/* The smaller of two runtimes, either < 0 for none. */
static int64_t runtime_min(int64_t a, int64_t b)
{
	return a < 0 ? b : b < 0 ? a : a < b ? a : b;
}

/* S_QUEUE: the queued requests, each with its shape's answers. */
static void read_queue(const PGresult *res)
{
	in.nqueue = PQntuples(res);
	in.queue = calloc((size_t)in.nqueue + 1, sizeof(*in.queue));
	prev = calloc((size_t)in.nqueue + 1, sizeof(*prev));
	queue_dur = calloc((size_t)in.nqueue + 1, sizeof(*queue_dur));
	if (!prev || !queue_dur) {
		free(in.queue);
		in.queue = NULL;
	}
	for (int i = 0; i < in.nqueue && in.queue; i++) {
		struct place_request *q = &in.queue[i];
		const struct shape *h;

		snprintf(prev[i].code, sizeof(prev[i].code), "%s", db_val(res, i, 9));
		prev[i].reason = strdup(db_val(res, i, 10));
		prev[i].position = (int)ll(res, i, 11);
		q->id = ll(res, i, 0);
		q->user_id = ll(res, i, 1);
		q->pool_id = ll(res, i, 2);
		q->priority = prio(db_val(res, i, 3));
		q->slices = (int)ll(res, i, 4);
		q->nodes = (int)ll(res, i, 5);
		q->cpu = ll(res, i, 6);
		q->mem = ll(res, i, 7);
		q->submitted = ll(res, i, 8);
		q->cuda_min = (int)ll(res, i, 12);
		prev[i].eta = ll(res, i, 14);
		snprintf(prev[i].eta_why, sizeof(prev[i].eta_why), "%s", db_val(res, i, 15));
		q->class_id = ll(res, i, 16);
		h = shape_find(q);
		if (!h) {
			/* both reads share the pass's snapshot: cannot happen */
			log_msg(LOG_ERROR, "sched", NULL,
			        "request %lld has no shape in the snapshot", (long long)q->id);
			free(in.queue);
			in.queue = NULL;
			break;
		}
		q->user_recent = h->user_recent;
		q->quota_slices = h->quota_slices;
		q->quota_cpu = h->quota_cpu;
		q->quota_mem = h->quota_mem;
		queue_dur[i] = runtime_min(db_val(res, i, 13) ? ll(res, i, 13) : -1, h->runtime);
		if (queue_dur[i] < 0)
			queue_dur[i] = 0;
		if (q->class_id) {
			/* class work: the student's class limits, not the user's
			 * own quota (place.h 6c) */
			q->quota_slices = -1;
			q->quota_cpu = q->quota_mem = 0;
			q->student_slices = h->student_slices;
			q->student_cpu = h->student_cpu;
			q->student_mem = h->student_mem;
			q->class_block = h->class_block;
			if (h->class_why) {
				snprintf(prev[i].budget, sizeof(prev[i].budget), "%s",
				         h->class_why);
				cut_utf8(prev[i].budget);
			}
		} else if (h->forbidden || h->exceeds) {
			/* no quota at all, or the pool is closed to the role; or
			 * more than the limit allows by itself (0020) */
			q->quota_block = h->forbidden ? 1 : 2;
			snprintf(prev[i].budget, sizeof(prev[i].budget), "%s",
			         h->forbidden ? h->forbidden : h->exceeds);
			cut_utf8(prev[i].budget);
		} else if (q->pool_id && h->hours_cap >= 0 && h->hours_used >= h->hours_cap) {
			/* the GPU-hour budget is spent: wait like a full quota */
			q->quota_slices = 0;
			snprintf(prev[i].budget, sizeof(prev[i].budget),
			         "GPU-hour budget: %.1f of %.1f h of this pool used in the last 7 "
			         "days",
			         h->hours_used, h->hours_cap);
		}
	}
}

/* ---- the steps, each the callback of the previous one's statement ---- */

static void done_generic(PGresult *res, enum rc rc, void *arg)
{
	(void)arg;
	t_step[step] = (clock_now_s() - t_sent) * 1000.0;
	if (rc == RC_UNAVAILABLE) {
		lost("the database connection broke");
		return;
	}
	if (rc != RC_OK) {
		log_msg(LOG_WARN, "sched", NULL, "pass step %d failed (%s): rolling back",
		        (int)step, rc_code(rc));
		step = S_ROLLBACK;
		query("ROLLBACK", 0, NULL, done_generic);
		return;
	}
	if (step == S_ROLLBACK) {
		pass_over();
		return;
	}
	switch (step) {
	case S_RUNTIME:
		for (int i = 0; i < 3; i++)
			if (!(rt[i] = strdup(PQntuples(res) == 1 ? db_val(res, 0, i) : "{}")))
				break;
		/* (no version row: the shape is read every pass) */
		pass_topo_version = db_val(res, 0, 3) ? ll(res, 0, 3) : -2;
		break;
	case S_NODES:
		in.nnodes = PQntuples(res);
		in.nodes = calloc((size_t)in.nnodes + 1, sizeof(*in.nodes));
		for (int i = 0; i < in.nnodes && in.nodes; i++) {
			in.nodes[i].id = ll(res, i, 0);
			in.nodes[i].schedulable = strcmp(db_val(res, i, 1), "t") == 0;
			in.nodes[i].cpu_total = in.nodes[i].cpu_free = ll(res, i, 2);
			in.nodes[i].mem_total = in.nodes[i].mem_free = ll(res, i, 3);
			in.nodes[i].cuda_max = (int)ll(res, i, 4);
			in.nodes[i].cordoned = strcmp(db_val(res, i, 5), "t") == 0;
			in.nodes[i].degraded = strcmp(db_val(res, i, 6), "t") == 0;
		}
		break;
	case S_SLICES: read_slices(res); break;
	case S_SHAPES: read_shapes(res); break;
	case S_QUEUE: read_queue(res); break;
	case S_RUNNING: read_running(res); break;
	case S_CLASSES: {
		size_t text = 0, at = 0;
		int n = PQntuples(res);

		for (int i = 0; i < n; i++)
			text += strlen(db_val(res, i, 1)) + strlen(db_val(res, i, 8)) + 2;
		classes = calloc((size_t)n + 1, sizeof(*classes));
		class_text = malloc(text + 1);
		if (!classes || !class_text) {
			free(classes);
			classes = NULL;
			break;
		}
		for (int i = 0; i < n; i++) {
			struct place_class *k = &classes[i];
			size_t l1 = strlen(db_val(res, i, 1)) + 1,
			       l2 = strlen(db_val(res, i, 8)) + 1;

			k->id = ll(res, i, 0);
			memcpy(class_text + at, db_val(res, i, 1), l1);
			k->name = class_text + at;
			at += l1;
			k->pool_id = ll(res, i, 2);
			k->alloc_slices = (int)ll(res, i, 3);
			k->alloc_cpu = ll(res, i, 4);
			k->alloc_mem = ll(res, i, 5);
			k->offhours = (int)ll(res, i, 6);
			k->reserved = (int)ll(res, i, 7);
			memcpy(class_text + at, db_val(res, i, 8), l2);
			k->until = class_text + at;
			at += l2;
		}
		in.classes = classes;
		in.nclasses = n;
		break;
	}
	default: break;
	}
	if (step == S_CLASSES && !classes) {
		log_msg(LOG_ERROR, "sched", NULL, "out of memory for the scheduling snapshot");
		step = S_ROLLBACK;
		query("ROLLBACK", 0, NULL, done_generic);
		return;
	}
	if ((step == S_RUNTIME && !rt[2]) || (step == S_NODES && !in.nodes) ||
	    (step == S_SLICES && !in.slices) || (step == S_SHAPES && !shapes) ||
	    (step == S_QUEUE && !in.queue) || (step == S_RUNNING && !in.running)) {
		log_msg(LOG_ERROR, "sched", NULL, "out of memory for the scheduling snapshot");
		step = S_ROLLBACK;
		query("ROLLBACK", 0, NULL, done_generic);
		return;
	}
	next();
}

/* Index of a queued request (the queue was read ordered by id), or -1. */
static int queue_index(int64_t id)
{
	int lo = 0, hi = in.nqueue - 1;

	while (lo <= hi) {
		int mid = (lo + hi) / 2;
		if (in.queue[mid].id == id)
			return mid;
		if (in.queue[mid].id < id)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return -1;
}

/* The sentence to store for a decision: a spent GPU-hour budget explains a
 * quota wait better than the slice count the engine saw. */
static const char *message_of(const struct place_decision *d)
{
	int i = queue_index(d->request_id);

	if (i >= 0 && d->reason == REASON_QUOTA && prev[i].budget[0])
		return prev[i].budget;
	if (i >= 0 && (d->reason == REASON_CLASS_BUDGET || d->reason == REASON_CLASS_CLOSED) &&
	    prev[i].budget[0])
		return prev[i].budget;
	/* over the limit by itself: the limit's sentence, unless no node
	 * could hold it either (the engine's, checked first) */
	if (i >= 0 && d->reason == REASON_CANNOT_RUN && in.queue[i].quota_block == 2 &&
	    strncmp(d->message, "user quota", 10) == 0)
		return prev[i].budget;
	return d->message;
}

/* Seconds an estimate may move before it is written again (a request that
 * could start now would otherwise be rewritten every pass). */
#define ETA_SLACK_S 5

/* 1 when a pending decision says what its request says already. */
static int unchanged(const struct place_decision *d)
{
	int i = queue_index(d->request_id);
	const struct prev *p = i >= 0 ? &prev[i] : NULL;

	const struct eta_out *e = i >= 0 && etas ? &etas[i] : NULL;

	/* an estimate that moved by less than ETA_SLACK_S is not rewritten */
	return p && d->nvictims == 0 && p->position == d->position &&
	       strcmp(p->code, place_reason_code(d->reason)) == 0 && p->reason &&
	       strcmp(p->reason, message_of(d)) == 0 &&
	       (!e || ((e->at == 0) == (p->eta == 0) && llabs(e->at - p->eta) < ETA_SLACK_S &&
	               strcmp(e->why, p->eta_why) == 0));
}

/* b's bytes as a NUL-terminated string (caller frees), or NULL. */
static char *buffer_text(struct evbuffer *b)
{
	size_t len = evbuffer_get_length(b);
	char *t = malloc(len + 1);

	if (t) {
		evbuffer_remove(b, t, len);
		t[len] = '\0';
	}
	return t;
}

/* Appends v in decimal. */
static int put_int(struct evbuffer *b, long long v)
{
	char t[24], *p = t + sizeof(t);
	unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;

	do
		*--p = (char)('0' + u % 10);
	while (u /= 10);
	if (v < 0)
		*--p = '-';
	return evbuffer_add(b, p, (size_t)(t + sizeof(t) - p));
}

/* Appends s as an element of a PostgreSQL array literal: quoted, '"' and
 * '\\' escaped, and every byte that is not part of valid UTF-8 written as
 * U+FFFD (a reason cut short in a fixed buffer may end inside a character,
 * and one bad element would refuse the whole write). */
static int put_text(struct evbuffer *b, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	int err = evbuffer_add(b, "\"", 1);

	while (*p && !err) {
		const unsigned char *run = p;
		int n;

		while (*p && *p != '"' && *p != '\\' && (n = jsonw_utf8_len(p)) > 0)
			p += n;
		if (p > run)
			err |= evbuffer_add(b, run, (size_t)(p - run));
		if (!*p || err)
			break;
		if (*p == '"' || *p == '\\') {
			char e[2] = { '\\', (char)*p++ };
			err |= evbuffer_add(b, e, 2);
		} else {
			err |= evbuffer_add(b, "\xef\xbf\xbd", 3);
			p++;
		}
	}
	return err | evbuffer_add(b, "\"", 1);
}

/* The write's parameters, each a PostgreSQL array literal: per request
 * written, its id, reason code, message, position, estimate (NULL: none)
 * and the estimate's reason; per allocation row, its request, slice (NULL:
 * the node alone) and node. */
enum { W_ID, W_CODE, W_MSG, W_POS, W_ETA, W_ETA_WHY, W_AREQ, W_ASLICE, W_ANODE, W_NCOLS };

/* Turns place.c's decisions into the arrays of the one statement that
 * writes them (W_*): placements, and pending requests whose reason or
 * position changed.  Array literals rather than JSON: PostgreSQL reads
 * 10,000 rows of them in ~20 ms, where jsonb_to_recordset took ~70 ms
 * (the same rows in psql), and a text element needs no JSON escapes.
 * Fills col[] (caller frees each); 0, or -1 when out of memory. */
static int decisions_cols(const struct place_result *res, int *placed, char *col[W_NCOLS])
{
	struct evbuffer *b[W_NCOLS], *v = evbuffer_new();
	int err = !v, nd = 0, na = 0, nv = 0;

	*placed = 0;
	for (int k = 0; k < W_NCOLS; k++) {
		b[k] = evbuffer_new();
		col[k] = NULL;
		err |= !b[k] || evbuffer_add(b[k], "{", 1);
	}
	err |= !v || jsonw_lit(v, "[");
	for (int i = 0; i < res->ndecisions && !err; i++) {
		const struct place_decision *d = &res->decisions[i];
		const char *sep = nd++ ? "," : "";
		int qi;
		const struct eta_out *e;

		for (int k = 0; k < d->nvictims; k++)
			err |= (nv++ ? jsonw_lit(v, ",") : 0) | put_int(v, d->victims[k]);
		if (d->reason == REASON_NONE)
			(*placed)++;
		if (d->reason != REASON_NONE && unchanged(d)) {
			nd--;
			continue;
		}
		qi = queue_index(d->request_id);
		e = qi >= 0 && etas ? &etas[qi] : NULL;
		for (int k = W_ID; k <= W_ETA_WHY; k++)
			err |= evbuffer_add(b[k], sep, strlen(sep));
		err |= put_int(b[W_ID], d->request_id) |
		       put_text(b[W_CODE], place_reason_code(d->reason)) |
		       put_text(b[W_MSG], message_of(d)) | put_int(b[W_POS], d->position) |
		       (e && e->at ? put_int(b[W_ETA], e->at) : jsonw_lit(b[W_ETA], "NULL")) |
		       put_text(b[W_ETA_WHY], e ? e->why : "");
		if (d->reason != REASON_NONE)
			continue;
		/* no slices: the allocation names the node only */
		if (d->node_id) {
			const char *s = na++ ? "," : "";
			err |= evbuffer_add(b[W_AREQ], s, strlen(s)) |
			       put_int(b[W_AREQ], d->request_id) |
			       evbuffer_add(b[W_ASLICE], s, strlen(s)) |
			       jsonw_lit(b[W_ASLICE], "NULL") |
			       evbuffer_add(b[W_ANODE], s, strlen(s)) |
			       put_int(b[W_ANODE], d->node_id);
		}
		for (int k = 0; k < d->nchosen; k++) {
			int j = slice_index(d->chosen[k]);
			const char *s = na++ ? "," : "";

			if (j < 0) {
				na--;
				continue;
			}
			err |= evbuffer_add(b[W_AREQ], s, strlen(s)) |
			       put_int(b[W_AREQ], d->request_id) |
			       evbuffer_add(b[W_ASLICE], s, strlen(s)) |
			       put_int(b[W_ASLICE], d->chosen[k]) |
			       evbuffer_add(b[W_ANODE], s, strlen(s)) |
			       put_int(b[W_ANODE], in.nodes[in.slices[j].node].id);
		}
	}
	err |= !v || jsonw_lit(v, "]");
	for (int k = 0; k < W_NCOLS; k++)
		if (!err && !(err = evbuffer_add(b[k], "}", 1)))
			err = !(col[k] = buffer_text(b[k]));
	if (!err)
		err = !(victims_doc = buffer_text(v));
	for (int k = 0; k < W_NCOLS; k++) {
		if (err) {
			free(col[k]);
			col[k] = NULL;
		}
		if (b[k])
			evbuffer_free(b[k]);
	}
	if (v)
		evbuffer_free(v);
	return err ? -1 : 0;
}

static void next(void)
{
	char grace[24];
	const char *p[4];

	switch (step) {
	case S_BEGIN:
		t_begin = clock_now_s();
		n_placed = 0;
		step = S_RUNTIME;
		query("SELECT COALESCE(array_agg(k.user_id), '{}'), COALESCE(array_agg(k.pk), "
		      "'{}'),"
		      " COALESCE(array_agg(x.max_runtime_s), '{}'),"
		      " (SELECT version FROM sched_topology) FROM"
		      " (SELECT DISTINCT user_id, COALESCE(pool_id, 0) AS pk, pool_id"
		      "  FROM alloc_requests WHERE state = 'allocated') k"
		      " CROSS JOIN LATERAL gc_quota_for(k.user_id, k.pool_id) x"
		      " WHERE x.max_runtime_s IS NOT NULL",
		      0, NULL, done_generic);
		return;
	case S_RUNTIME:
		step = S_PREEMPT;
		snprintf(grace, sizeof(grace), "%d", cfg.preempt_grace);
		p[0] = grace;
		p[1] = rt[0];
		p[2] = rt[1];
		p[3] = rt[2];
		/* scavenger work asked to stop whose grace is over: its owner (the
		 * API here) lets the scheduler end it */
		/* ... and allocations past their owner's maximum runtime; each
		 * release is audited as the system's action (0035) */
		query(RUNTIME_CTE("2", "3", "4") /* $1: the grace */
		      " SELECT gc_release_audited(id, 'preempted by higher-priority work',"
		      " 'allocation.preempt')"
		      " FROM alloc_requests WHERE state = 'allocated' AND owner_kind = 'api'"
		      " AND preempt_requested_at < now() - make_interval(secs => $1::int)"
		      /* (the quota once per user and pool, not per allocation:
		       * 4,800 calls were 7 ms of every pass with a full pool;
		       * S_RUNTIME read it) */
		      " UNION ALL"
		      " SELECT gc_release_audited(r.id, 'reached the maximum runtime of ' ||"
		      "  q.max_runtime_s || ' s', 'allocation.max_runtime') FROM alloc_requests r"
		      "  JOIN q ON q.user_id = r.user_id AND q.pk = COALESCE(r.pool_id, 0)"
		      " WHERE r.state = 'allocated'"
		      " AND r.allocated_at < now() - make_interval(secs => q.max_runtime_s)"
		      /* ... and a student's class work past the class's maximum
		       * session length */
		      " UNION ALL"
		      " SELECT gc_release_audited(r.id, 'reached the class''s maximum session of '"
		      "  || c.student_max_session_s || ' s', 'allocation.max_session')"
		      "  FROM alloc_requests r JOIN classes c ON c.id = r.class_id"
		      " WHERE r.state = 'allocated' AND r.class_id IS NOT NULL"
		      " AND c.student_max_session_s IS NOT NULL"
		      " AND r.allocated_at < now() - make_interval(secs => c.student_max_session_s)"
		      " AND gc_class_role(r.user_id, r.class_id) = 'student'"
		      /* ... and raw allocations whose lease ended */
		      " UNION ALL"
		      " SELECT gc_release_audited(id, 'its lease of ' || lease_s || ' s ended',"
		      " 'allocation.lease_end')"
		      " FROM alloc_requests WHERE state = 'allocated' AND lease_s IS NOT NULL"
		      " AND allocated_at < now() - make_interval(secs => lease_s)",
		      4, p, done_generic);
		return;
	case S_PREEMPT:
		step = S_NODES;
		/* a degraded node (0019) is up and active but gets no work */
		query("SELECT id, health = 'up' AND admin_state = 'active' AND degraded_since IS "
		      "NULL,"
		      " COALESCE(ncpu, 0)::bigint * 1000, COALESCE(memory_bytes, 0) / 1048576,"
		      " COALESCE(cuda_max, 0), admin_state = 'cordoned',"
		      " health = 'up' AND admin_state = 'active' AND degraded_since IS NOT NULL"
		      " FROM nodes ORDER BY id",
		      0, NULL, done_generic);
		return;
	case S_NODES:
		step = S_SLICES;
		slices_full = !topo || pass_topo_version < 0 || topo_version != pass_topo_version;
		if (slices_full)
			query("SELECT s.id, g.node_id, s.pool_id, g.idx, COALESCE(a.request_id, 0)"
			      " FROM slices s JOIN gpus g ON g.id = s.gpu_id"
			      " LEFT JOIN allocations a ON a.slice_id = s.id AND a.released_at IS "
			      "NULL",
			      0, NULL, done_generic);
		else
			query("SELECT slice_id, request_id FROM allocations"
			      " WHERE released_at IS NULL AND slice_id IS NOT NULL",
			      0, NULL, done_generic);
		return;
	case S_SLICES:
		step = S_SHAPES;
		/* The per-user answers (quota, limit, class rules) are computed
		 * once per distinct key, not per request: a queue of 10,000
		 * requests from 100 users has ~100 keys, and the limit's text
		 * alone cost 30 us a row (370 -> 45 ms for that queue). */
		query("WITH k AS (SELECT DISTINCT user_id, pool_id, COALESCE(pool_id, 0) AS pk,"
		      "  COALESCE(class_id, 0) AS ck, slices::bigint * nodes AS s,"
		      "  cpu_millis::bigint * nodes AS c, mem_mib::bigint * nodes AS m"
		      "  FROM alloc_requests WHERE state = 'queued'),"
		      " lim AS (SELECT k.*, l.code, l.why, l.hint FROM"
		      "  (SELECT DISTINCT user_id, pk, pool_id, s, c, m FROM k WHERE ck = 0) k"
		      "  CROSS JOIN LATERAL gc_request_limit(k.user_id, k.pool_id, k.s, k.c, k.m) "
		      "l),"
		      " q AS (SELECT k.*, x.* FROM (SELECT DISTINCT user_id, pk, pool_id FROM k) k"
		      "  CROSS JOIN LATERAL gc_quota_for(k.user_id, k.pool_id) x),"
		      " gu AS (SELECT user_id, pool_id, sum(gpu_seconds) AS secs FROM gpu_usage"
		      "  WHERE day > current_date - 7 GROUP BY user_id, pool_id),"
		      " u AS (SELECT user_id, sum(secs) AS secs FROM gu GROUP BY user_id),"
		      /* class work (0030): the student's limits and a block, and
		       * a student's maximum session */
		      " cq AS (SELECT k.*, x.*, (SELECT CASE WHEN gc_class_role(k.user_id, c.id)"
		      "  = 'student' THEN c.student_max_session_s END FROM classes c"
		      "  WHERE c.id = k.ck) AS student_max_s"
		      "  FROM (SELECT DISTINCT user_id, ck FROM k WHERE ck <> 0) k"
		      "  LEFT JOIN LATERAL gc_class_queue(k.user_id, k.ck) x ON true)"
		      " SELECT k.user_id, k.pk, k.ck, k.s, k.c, k.m,"
		      " COALESCE(u.secs, 0)::bigint, COALESCE(q.max_slices, -1),"
		      " COALESCE(q.max_cpu_millis, 0), COALESCE(q.max_mem_mib, 0),"
		      " q.gpu_hours_per_week, COALESCE(gu.secs, 0) / 3600,"
		      /* what no amount of waiting for others would change (0015,
		       * 0020): a block, or more than the limit allows by itself */
		      " CASE WHEN lim.code = 'forbidden' THEN lim.why END,"
		      " CASE WHEN lim.code = 'exceeds_quota' THEN lim.why || '; ' || lim.hint END,"
		      /* the runtime its owner's limits allow (eta.h) */
		      " LEAST(q.max_runtime_s, cq.student_max_s),"
		      " cq.student_slices, cq.student_cpu, cq.student_mem, cq.block, cq.why"
		      " FROM k LEFT JOIN u ON u.user_id = k.user_id"
		      " LEFT JOIN gu ON gu.user_id = k.user_id AND gu.pool_id = k.pool_id"
		      " LEFT JOIN q ON q.user_id = k.user_id AND q.pk = k.pk"
		      " LEFT JOIN lim ON k.ck = 0 AND lim.user_id = k.user_id AND lim.pk = k.pk"
		      "  AND lim.s = k.s AND lim.c = k.c AND lim.m = k.m"
		      " LEFT JOIN cq ON cq.user_id = k.user_id AND cq.ck = k.ck"
		      " ORDER BY 1, 2, 3, 4, 5, 6",
		      0, NULL, done_generic);
		return;
	case S_SHAPES:
		step = S_QUEUE;
		/* (date_part, not extract: extract's numeric cost ~0.8 ms per
		 * 5,000 rows and column; a double holds today's microseconds
		 * exactly until the year 2255) */
		query("SELECT r.id, r.user_id, r.pool_id, r.priority, r.slices, r.nodes,"
		      " r.cpu_millis, r.mem_mib, (date_part('epoch', r.created_at) * 1e6)::bigint,"
		      " r.reason_code, r.reason, COALESCE(r.position, 0), r.cuda_min,"
		      /* its own maximum runtime (eta.h), and the estimate it has */
		      " LEAST(jj.max_runtime_s, r.lease_s),"
		      " COALESCE(date_part('epoch', r.eta_at)::bigint, 0), r.eta_reason, r.class_id"
		      " FROM alloc_requests r"
		      " LEFT JOIN jobs jj ON r.owner_kind = 'job'"
		      "  AND jj.id = CASE WHEN r.owner_kind = 'job' THEN r.owner_id::bigint END"
		      " WHERE r.state = 'queued' ORDER BY r.id",
		      0, NULL, done_generic);
		return;
	case S_QUEUE:
		step = S_RUNNING;
		/* the allocated requests, a row per node a CPU-only allocation of
		 * theirs holds (read_running counts their slices per node from
		 * the slices' holders); the quota's runtime once per user and
		 * pool (S_RUNTIME) */
		p[0] = rt[0];
		p[1] = rt[1];
		p[2] = rt[2];
		query(RUNTIME_CTE("1", "2", "3") /* (S_RUNTIME) */
		      " SELECT r.id, r.user_id, r.pool_id, r.priority, c.node_id, r.cpu_millis,"
		      " r.mem_mib, (date_part('epoch', r.allocated_at) * 1e6)::bigint,"
		      /* its latest end (eta.h): a job's start + its runtime, the
		       * quota's runtime, a lease; 0 when none limits it */
		      " COALESCE(date_part('epoch', LEAST(COALESCE(jj.started_at, now())"
		      "  + make_interval(secs => jj.max_runtime_s), r.allocated_at"
		      "  + make_interval(secs => q.max_runtime_s), r.allocated_at"
		      "  + make_interval(secs => r.lease_s)))::bigint, 0),"
		      " COALESCE(r.class_id, 0)"
		      " FROM alloc_requests r"
		      " LEFT JOIN (SELECT DISTINCT request_id, node_id FROM allocations"
		      "  WHERE released_at IS NULL AND slice_id IS NULL) c ON c.request_id = r.id"
		      " LEFT JOIN jobs jj ON r.owner_kind = 'job'"
		      "  AND jj.id = CASE WHEN r.owner_kind = 'job' THEN r.owner_id::bigint END"
		      " LEFT JOIN q ON q.user_id = r.user_id AND q.pk = COALESCE(r.pool_id, 0)"
		      " WHERE r.state = 'allocated'",
		      3, p, done_generic);
		return;
	case S_RUNNING:
		if (in.nqueue == 0) {
			step = S_COMMIT;
			query("COMMIT", 0, NULL, done_generic);
			return;
		}
		step = S_CLASSES;
		/* classes with an allocation, the slices their open lab windows
		 * hold now and when the last of them closes */
		query("SELECT c.id, c.name, c.pool_id, c.alloc_slices,"
		      " COALESCE(c.alloc_cpu_millis, 0), COALESCE(c.alloc_mem_mib, 0),"
		      " COALESCE(c.offhours_slices, -1), COALESCE(w.slices, 0),"
		      " COALESCE(to_char(w.ends_at AT TIME ZONE 'UTC', 'HH24:MI') || ' UTC', '')"
		      " FROM classes c LEFT JOIN (SELECT class_id, sum(slices)::int AS slices,"
		      "  max(ends_at) AS ends_at FROM gc_class_reserved_now() GROUP BY class_id) w"
		      "  ON w.class_id = c.id"
		      " WHERE c.state = 'active' AND c.pool_id IS NOT NULL AND c.alloc_slices > 0"
		      " ORDER BY c.id",
		      0, NULL, done_generic);
		return;
	case S_CLASSES: {
		struct place_result *res;
		char *col[W_NCOLS];
		int placed = 0, ok;

		t_engine = clock_now_s();
		res = place_run(&in);
		t_engine = clock_now_s() - t_engine;
		for (int i = 0; res && i < res->ndecisions; i++)
			cut_utf8(res->decisions[i].message);
		t_eta = clock_now_s();
		etas = res ? calloc((size_t)in.nqueue + 1, sizeof(*etas)) : NULL;
		if (etas) {
			struct eta_input e = {
				&in, res, run_end, queue_dur, (int64_t)time(NULL), cfg.preempt_grace
			};
			if (eta_run(&e, etas) < 0) {
				free(etas);
				etas = NULL;
			}
		}
		t_doc = clock_now_s();
		t_eta = (t_doc - t_eta) * 1000.0;
		ok = res && decisions_cols(res, &placed, col) == 0;
		t_doc = (clock_now_s() - t_doc) * 1000.0;
		place_result_free(res);
		n_placed = placed;
		if (!ok) {
			log_msg(LOG_ERROR, "sched", NULL,
			        "out of memory for the scheduling decisions");
			step = S_ROLLBACK;
			query("ROLLBACK", 0, NULL, done_generic);
			return;
		}
		step = S_WRITE;
		query("WITH d AS (SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[],"
		      "  $4::int[], $5::bigint[], $6::text[]) AS x(id, r, m, p, e, er)),"
		      " a AS (INSERT INTO allocations (request_id, slice_id, node_id, cpu_only)"
		      "  SELECT u.q, u.s, u.n, u.s IS NULL"
		      "  FROM unnest($7::bigint[], $8::bigint[], $9::bigint[]) AS u(q, s, n)),"
		      " w AS (UPDATE alloc_requests q SET"
		      "  state = CASE WHEN d.r = 'none' THEN 'allocated'::alloc_state ELSE q.state "
		      "END,"
		      "  allocated_at = CASE WHEN d.r = 'none' THEN now() ELSE q.allocated_at END,"
		      "  reason_code = d.r, reason = CASE WHEN d.r = 'none' THEN '' ELSE d.m END,"
		      "  position = CASE WHEN d.r = 'none' THEN NULL ELSE d.p END,"
		      "  eta_at = CASE WHEN d.r = 'none' OR d.e IS NULL THEN NULL"
		      "  ELSE to_timestamp(d.e) END,"
		      "  eta_reason = CASE WHEN d.r = 'none' THEN '' ELSE COALESCE(d.er, '') END"
		      "  FROM d WHERE q.id = d.id AND q.state = 'queued' RETURNING 1)"
		      " SELECT count(*) FROM w",
		      W_NCOLS, (const char *const *)col, done_generic);
		for (int k = 0; k < W_NCOLS; k++)
			free(col[k]);
		return;
	}
	case S_WRITE:
		step = S_VICTIMS;
		p[0] = victims_doc;
		/* asking work to make way is the system's action: audited */
		query("WITH u AS (UPDATE alloc_requests SET preempt_requested_at = now()"
		      " WHERE id IN (SELECT x::bigint FROM jsonb_array_elements_text($1::jsonb) AS "
		      "x)"
		      " AND state = 'allocated' AND preempt_requested_at IS NULL"
		      " RETURNING id, owner_kind, owner_id, class_id)"
		      " INSERT INTO audit_log (actor_name, action, target, details, class_id)"
		      " SELECT 'system', 'allocation.preempt_request',"
		      "  CASE WHEN owner_kind <> 'api' AND owner_id <> ''"
		      "  THEN owner_kind || ':' || owner_id ELSE 'allocation:' || id END,"
		      "  jsonb_build_object('reason', 'asked to make way for higher-priority work',"
		      "  'allocation_id', id), class_id FROM u",
		      1, p, done_generic);
		return;
	case S_VICTIMS:
		step = S_COMMIT;
		query("COMMIT", 0, NULL, done_generic);
		return;
	case S_COMMIT:
		if (in.nqueue)
			log_msg(n_placed ? LOG_INFO : LOG_DEBUG, "sched", NULL,
			        "pass: %d placed, %d waiting, %.1f ms (placement %.1f ms)",
			        n_placed, in.nqueue - n_placed, (clock_now_s() - t_begin) * 1000.0,
			        t_engine * 1000.0);
		if (n_placed)
			events_publish(EV_ALLOC_GRANTED); /* their workloads start now */
		if (n_placed >= 500) {
			/* a burst of allocations: fresh statistics keep the next
			 * snapshot's joins on good plans (autovacuum comes later).
			 * After the commit, so the grants do not wait for it. */
			step = S_ANALYZE;
			query("ANALYZE allocations, alloc_requests", 0, NULL, done_generic);
			return;
		}
		/* fall through */
	case S_ANALYZE:
		if (in.nqueue)
			log_msg(LOG_DEBUG, "sched", NULL,
			        "pass steps (ms): runtime %.1f, release %.1f, nodes %.1f,"
			        " slices %.1f%s, shapes %.1f, queue %.1f,"
			        " running %.1f, classes %.1f, estimates %.1f, decisions %.1f,"
			        " write %.1f, victims %.1f, commit %.1f (then analyze %.1f)",
			        t_step[S_RUNTIME], t_step[S_PREEMPT], t_step[S_NODES],
			        t_step[S_SLICES], slices_full ? " (with the shape)" : "",
			        t_step[S_SHAPES], t_step[S_QUEUE], t_step[S_RUNNING],
			        t_step[S_CLASSES], t_eta, t_doc, t_step[S_WRITE], t_step[S_VICTIMS],
			        t_step[S_COMMIT], t_step[S_ANALYZE]);
		memset(t_step, 0, sizeof(t_step));
		t_eta = t_doc = 0;
		pass_over();
		return;
	default: return;
	}
}

/* cron: a pass, on the leader only. */
static void on_cron(struct cron_section *sec, void *arg)
{
	(void)sec;
	(void)arg;
	if (step != S_IDLE || !leader_is())
		return;
	held = leader_conn();
	if (!held)
		return;
	step = S_BEGIN;
	query("BEGIN ISOLATION LEVEL REPEATABLE READ", 0, NULL, done_generic);
}

/* Became the leader: a pass at once (the queue may have waited); lost it:
 * leader.c gave the connection back, a pass under way is over. */
static void on_leader(int is_leader, void *arg)
{
	(void)arg;
	if (is_leader) {
		cron_soon(section, 0);
		return;
	}
	held = NULL;
	step = S_IDLE;
	snapshot_free();
	topo_forget();
}

static void on_alloc_changed(enum events_kind kind, void *arg)
{
	(void)kind;
	(void)arg;
	kicked = 1;
	/* soon, not at once: requests arriving together share a pass (a
	 * start waits for this; instances measure it in their benchmark) */
	if (step == S_IDLE)
		cron_soon(section, 2);
}

int sched_init(void)
{
	section = cron_every("sched", cfg.sched_interval_ms, 100, on_cron, NULL);
	if (!section || leader_watch(on_leader, NULL) < 0 ||
	    events_subscribe(EV_ALLOC_CHANGED, on_alloc_changed, NULL) < 0)
		return -1;
	return 0;
}

void sched_kick(void)
{
	events_publish(EV_ALLOC_CHANGED);
}

void sched_shutdown(void)
{
	section = NULL; /* freed with the cron */
	held = NULL;    /* leader.c gives it back */
	step = S_IDLE;
	snapshot_free();
	topo_forget();
}
