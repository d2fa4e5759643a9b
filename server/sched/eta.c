/* eta.c — the start estimates of eta.h: a conservative simulation of the
 * queue over the end times of the work holding the cluster.
 *
 * Owns: the simulation only.  Does not own: the order of the queue or the
 * reasons (place.c decided them this pass) or where estimates are stored
 * (scheduler.c writes them with the decisions).
 */
#include "sched/eta.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NEVER INT64_MAX

struct hold {
	int node;
	int64_t pool_id;
	int slices;
	int64_t cpu, mem;
	int64_t user_id;
	int64_t end; /* NEVER: no known end */
};

struct idx {
	int64_t id;
	int i;
};

/* A pool's slices per node, and what the holds so far use of them: made
 * the first time a request of the pool is estimated, then kept up to date
 * as holds are added, so an estimate starts from a copy rather than from a
 * walk over every slice and hold (128 estimates x 8,000 slices and 5,000
 * holds were most of the estimates' 7 ms on a full cluster). */
struct pool_room {
	int64_t pool_id;
	int *cap, *used;
};

struct sim {
	const struct eta_input *e;
	struct hold *holds;
	int nholds, cap;
	struct idx *qidx, *sidx; /* queue and slices by id */
	/* per node, for the request being estimated */
	const int *slices_cap;
	int *slices_used;
	int64_t *cpu_used, *mem_used;
	unsigned char *fits; /* node has room for the request now */
	int nfit;            /* how many do */
	int *order;          /* holds by end, kept sorted as they are added */
	/* per node, what all holds so far use (any pool) */
	int64_t *cpu_held, *mem_held;
	struct pool_room *rooms;
	int nrooms;
};

static int idx_cmp(const void *a, const void *b)
{
	const struct idx *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

static int find(const struct idx *v, int n, int64_t id)
{
	struct idx key = { id, 0 };
	const struct idx *hit = bsearch(&key, v, (size_t)n, sizeof(*v), idx_cmp);

	return hit ? hit->i : -1;
}

static int add_hold(struct sim *s, struct hold h)
{
	if (s->nholds == s->cap) {
		int ncap = s->cap ? s->cap * 2 : 64;
		struct hold *nh = realloc(s->holds, (size_t)ncap * sizeof(*nh));
		int *no = realloc(s->order, (size_t)ncap * sizeof(*no));
		if (nh)
			s->holds = nh;
		if (no)
			s->order = no;
		if (!nh || !no)
			return -1;
		s->cap = ncap;
	}
	{
		/* after every hold that ends no later */
		int lo = 0, hi = s->nholds;
		while (lo < hi) {
			int mid = (lo + hi) / 2;
			if (s->holds[s->order[mid]].end <= h.end)
				lo = mid + 1;
			else
				hi = mid;
		}
		memmove(s->order + lo + 1, s->order + lo, (size_t)(s->nholds - lo) * sizeof(int));
		s->order[lo] = s->nholds;
	}
	s->holds[s->nholds++] = h;
	s->cpu_held[h.node] += h.cpu;
	s->mem_held[h.node] += h.mem;
	for (int i = 0; i < s->nrooms; i++)
		if (s->rooms[i].pool_id == h.pool_id)
			s->rooms[i].used[h.node] += h.slices;
	return 0;
}

/* The room of pool_id's slices (pool 0: none), made on first use; NULL when
 * out of memory. */
static struct pool_room *pool_room(struct sim *s, int64_t pool_id)
{
	const struct place_input *in = s->e->in;
	size_t nn = (size_t)in->nnodes + 1;
	struct pool_room *r, *nr;

	for (int i = 0; i < s->nrooms; i++)
		if (s->rooms[i].pool_id == pool_id)
			return &s->rooms[i];
	nr = realloc(s->rooms, (size_t)(s->nrooms + 1) * sizeof(*nr));
	if (!nr)
		return NULL;
	s->rooms = nr;
	r = &s->rooms[s->nrooms];
	r->pool_id = pool_id;
	r->cap = calloc(nn, sizeof(int));
	r->used = calloc(nn, sizeof(int));
	if (!r->cap || !r->used) {
		free(r->cap);
		free(r->used);
		return NULL;
	}
	s->nrooms++;
	if (pool_id)
		for (int i = 0; i < in->nslices; i++)
			if (in->slices[i].pool_id == pool_id)
				r->cap[in->slices[i].node]++;
	for (int i = 0; i < s->nholds; i++)
		if (s->holds[i].pool_id == pool_id)
			r->used[s->holds[i].node] += s->holds[i].slices;
	return r;
}

static int64_t lim(int64_t total)
{
	return total > 0 ? total : INT64_MAX / 4; /* 0: not known, limits nothing */
}

/* Whether node n has room for q given what is used on it. */
static int node_fits(const struct sim *s, const struct place_request *q, int n)
{
	const struct place_node *nd = &s->e->in->nodes[n];

	if (!nd->schedulable || (q->cuda_min && nd->cuda_max && nd->cuda_max < q->cuda_min))
		return 0;
	if (q->pool_id && s->slices_cap[n] - s->slices_used[n] < q->slices)
		return 0;
	return lim(nd->cpu_total) - s->cpu_used[n] >= q->cpu &&
	       lim(nd->mem_total) - s->mem_used[n] >= q->mem;
}

static int quota_ok(const struct place_request *q, int64_t us, int64_t uc, int64_t um)
{
	int64_t k = q->nodes > 0 ? q->nodes : 1;

	return (q->quota_slices < 0 || us + (int64_t)q->slices * k <= q->quota_slices) &&
	       (q->quota_cpu <= 0 || uc + q->cpu * k <= q->quota_cpu) &&
	       (q->quota_mem <= 0 || um + q->mem * k <= q->quota_mem);
}

/* Node n's room changed: keeps fits/nfit true. */
static void refit(struct sim *s, const struct place_request *q, int n)
{
	int f = node_fits(s, q, n);

	s->nfit += f - s->fits[n];
	s->fits[n] = (unsigned char)f;
}

/* Adds (sign 1) or takes back (-1) hold h's use for q. */
static void use(struct sim *s, const struct place_request *q, const struct hold *h, int sign,
                int64_t u[3])
{
	if (h->pool_id == q->pool_id)
		s->slices_used[h->node] += sign * h->slices;
	s->cpu_used[h->node] += sign * h->cpu;
	s->mem_used[h->node] += sign * h->mem;
	if (h->user_id == q->user_id && h->pool_id == q->pool_id) {
		u[0] += sign * h->slices;
		u[1] += sign * h->cpu;
		u[2] += sign * h->mem;
	}
}

/* Estimates q (queue index qi); adds its holds when it gets a start.
 * Costs O(holds + nodes), and O(slices) once per pool (pool_room). */
static int simulate(struct sim *s, int qi, struct eta_out *o)
{
	const struct eta_input *e = s->e;
	const struct place_input *in = e->in;
	const struct place_request *q = &in->queue[qi];
	int nn = in->nnodes, need = q->nodes > 0 ? q->nodes : 1, i, k, n, nholds = s->nholds;
	int64_t u[3] = { 0, 0, 0 }, dur = e->queue_dur ? e->queue_dur[qi] : 0;
	struct pool_room *room = pool_room(s, q->pool_id);

	if (!room)
		return -1;
	s->slices_cap = room->cap;
	memset(s->slices_used, 0, (size_t)nn * sizeof(int));
	memset(s->cpu_used, 0, (size_t)nn * sizeof(int64_t));
	memset(s->mem_used, 0, (size_t)nn * sizeof(int64_t));
	/* nothing held: could it start at all? */
	s->nfit = 0;
	for (n = 0; n < nn; n++) {
		s->fits[n] = 0;
		refit(s, q, n);
	}
	if (s->nfit < need || !quota_ok(q, 0, 0, 0)) {
		snprintf(o->why, sizeof(o->why),
		         "no node that takes work now could hold it, or its quota could not");
		return 0;
	}
	/* what every hold uses now: the kept sums, and the user's own */
	memcpy(s->slices_used, room->used, (size_t)nn * sizeof(int));
	memcpy(s->cpu_used, s->cpu_held, (size_t)nn * sizeof(int64_t));
	memcpy(s->mem_used, s->mem_held, (size_t)nn * sizeof(int64_t));
	for (i = 0; i < nholds; i++) {
		const struct hold *h = &s->holds[i];
		if (h->user_id == q->user_id && h->pool_id == q->pool_id) {
			u[0] += h->slices;
			u[1] += h->cpu;
			u[2] += h->mem;
		}
	}
	for (n = 0; n < nn; n++)
		refit(s, q, n);
	/* now, then each end time in turn */
	for (k = -1; k < nholds; k++) {
		int64_t t = e->now;
		if (k >= 0) {
			const struct hold *h = &s->holds[s->order[k]];
			if (h->end == NEVER)
				break;
			if (h->end > t)
				t = h->end;
			use(s, q, h, -1, u);
			refit(s, q, h->node);
			/* several end together: the last of them decides */
			if (k + 1 < nholds && s->holds[s->order[k + 1]].end <= t)
				continue;
		}
		if (!quota_ok(q, u[0], u[1], u[2]) || s->nfit < need)
			continue;
		o->at = t;
		/* it holds the first nodes with room from then on */
		for (n = 0, i = 0; n < nn && i < need; n++) {
			struct hold h = { n,      q->pool_id, q->pool_id ? q->slices : 0, q->cpu,
				          q->mem, q->user_id, dur > 0 ? t + dur : NEVER };
			if (!s->fits[n])
				continue;
			if (add_hold(s, h) < 0)
				return -1;
			i++;
		}
		return 0;
	}
	snprintf(o->why, sizeof(o->why), "it waits for work that has no maximum runtime to end");
	return 0;
}

static void say(struct eta_out *o, const char *why)
{
	snprintf(o->why, sizeof(o->why), "%s", why);
}

int eta_run(const struct eta_input *e, struct eta_out *out)
{
	const struct place_input *in = e->in;
	struct sim s;
	int i, rc = -1, estimated = 0;
	size_t nn = (size_t)in->nnodes + 1;

	memset(&s, 0, sizeof(s));
	s.e = e;
	memset(out, 0, (size_t)in->nqueue * sizeof(*out));
	s.qidx = calloc((size_t)in->nqueue + 1, sizeof(*s.qidx));
	s.sidx = calloc((size_t)in->nslices + 1, sizeof(*s.sidx));
	s.slices_used = calloc(nn, sizeof(int));
	s.cpu_used = calloc(nn, sizeof(int64_t));
	s.mem_used = calloc(nn, sizeof(int64_t));
	s.cpu_held = calloc(nn, sizeof(int64_t));
	s.mem_held = calloc(nn, sizeof(int64_t));
	s.fits = calloc(nn, 1);
	if (!s.qidx || !s.sidx || !s.slices_used || !s.cpu_used || !s.mem_used || !s.cpu_held ||
	    !s.mem_held || !s.fits)
		goto out;
	for (i = 0; i < in->nqueue; i++)
		s.qidx[i] = (struct idx){ in->queue[i].id, i };
	qsort(s.qidx, (size_t)in->nqueue, sizeof(*s.qidx), idx_cmp);
	for (i = 0; i < in->nslices; i++)
		s.sidx[i] = (struct idx){ in->slices[i].id, in->slices[i].node };
	qsort(s.sidx, (size_t)in->nslices, sizeof(*s.sidx), idx_cmp);
	/* what runs now, until its latest end */
	for (i = 0; i < in->nrunning; i++) {
		const struct place_running *r = &in->running[i];
		int64_t end = e->run_end ? e->run_end[i] : 0;
		struct hold h = { r->node,    r->pool_id,           r->slices, r->cpu, r->mem,
			          r->user_id, end > 0 ? end : NEVER };
		if (add_hold(&s, h) < 0)
			goto out;
	}
	for (i = 0; i < e->res->ndecisions; i++) {
		const struct place_decision *d = &e->res->decisions[i];
		int qi = find(s.qidx, in->nqueue, d->request_id);
		const struct place_request *q;
		struct eta_out *o;
		int64_t dur;

		if (qi < 0)
			continue;
		q = &in->queue[qi];
		o = &out[qi];
		dur = e->queue_dur ? e->queue_dur[qi] : 0;
		if (d->reason == REASON_NONE) {
			/* placed this pass: holds what it was given from now */
			int64_t end = dur > 0 ? e->now + dur : NEVER;
			if (d->nchosen == 0) {
				for (int n = 0; n < in->nnodes; n++)
					if (in->nodes[n].id == d->node_id) {
						struct hold h = { n,      0,          0,  q->cpu,
							          q->mem, q->user_id, end };
						if (add_hold(&s, h) < 0)
							goto out;
					}
				continue;
			}
			for (int k = 0; k < d->nchosen; k++) {
				int n = find(s.sidx, in->nslices, d->chosen[k]);
				int first =
				        k == 0 || find(s.sidx, in->nslices, d->chosen[k - 1]) != n;
				struct hold h = { n,
					          q->pool_id,
					          1,
					          first ? q->cpu : 0,
					          first ? q->mem : 0,
					          q->user_id,
					          end };
				if (n >= 0 && add_hold(&s, h) < 0)
					goto out;
			}
			continue;
		}
		if (estimated >= ETA_MAX) {
			say(o, "too far back in the queue to estimate");
			continue;
		}
		switch (d->reason) {
		case REASON_CANNOT_RUN:
		case REASON_TOO_BIG: say(o, "it cannot start as asked"); continue;
		case REASON_NO_NODES: say(o, "no node of its pool takes work now"); continue;
		case REASON_CLASS_BUDGET:
		case REASON_CLASS_CLOSED: say(o, "its class does not admit it now"); continue;
		case REASON_DEGRADED:
			say(o, "the nodes of its pool are failing to start containers");
			continue;
		case REASON_CUDA:
			say(o, "no node that takes work now has a driver for its CUDA version");
			continue;
		case REASON_QUOTA:
			if (q->quota_block) {
				say(o, "its quota does not admit it");
				continue;
			}
			break;
		case REASON_PREEMPTING: {
			/* the work it preempts stops within the grace */
			o->at = e->now + e->grace_s;
			estimated++;
			continue;
		}
		default: break;
		}
		estimated++;
		if (simulate(&s, qi, o) < 0)
			goto out;
	}
	rc = 0;
out:
	if (rc < 0)
		memset(out, 0, (size_t)in->nqueue * sizeof(*out));
	free(s.holds);
	free(s.order);
	free(s.qidx);
	free(s.sidx);
	for (i = 0; i < s.nrooms; i++) {
		free(s.rooms[i].cap);
		free(s.rooms[i].used);
	}
	free(s.rooms);
	free(s.slices_used);
	free(s.cpu_used);
	free(s.mem_used);
	free(s.cpu_held);
	free(s.mem_held);
	free(s.fits);
	return rc;
}
