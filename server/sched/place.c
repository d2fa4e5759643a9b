/* place.c — the placement engine: one pass from a snapshot of nodes, slices,
 * running allocations and the queue to one decision per queued request.
 *
 * Owns the policy of place.h and the per-pass indexes that make it cheap:
 * per pool, the schedulable nodes carrying it as bitmaps bucketed by their
 * free-slice count (best fit looks at buckets, not at every node), a
 * reservation bitmap, quota counts per (user, pool), scavenger allocations
 * per node youngest first, and per-pool memories of shapes that found no
 * room (nothing frees within a pass, so a shape that found none finds none
 * later in the pass, nor does any larger shape).
 *
 * Does not own the database, the clock, the engines or stopping victims:
 * scheduler.c fills the input, commits the decisions and stops the victims.
 *
 * Policy choices place.h leaves open:
 *  - Checks run in this order: no node that is not cordoned could ever hold
 *    it (CANNOT_RUN), pool has no schedulable node (NO_NODES, or DEGRADED
 *    when a node carrying it is up and active but degraded), no schedulable
 *    node could hold it (TOO_BIG: only a down, draining or degraded one
 *    could), quota (QUOTA), then room.  "Could ever hold" for CANNOT_RUN
 *    ignores CUDA (REASON_CUDA says that) and counts a node whose cpu or
 *    memory is not known (0) as holding any amount.
 *  - Slices are picked one at a time: a free slice on a GPU that has a used
 *    slice (counting slices picked earlier in this pass and this request),
 *    else the lowest free slice index; so a request keeps to one GPU.
 *  - The node reserved for a blocked request is the unreserved node that
 *    could ever hold it with the most free slices of the pool now (ties:
 *    lowest index); a gang reserves its best `nodes` such nodes, or none
 *    when fewer are unreserved.  Reservations are per node, for all pools.
 *  - Preemption is for single-node exam/normal requests; gangs wait.  A
 *    user's own scavenger allocations are never victims (place.h: "of other
 *    users").  Reserved nodes are not preempted on.  On one node the victim
 *    set is the smaller of two irredundant sets: youngest first, and most
 *    slices of the pool first (the fewest for the slice shortfall); ties to
 *    the youngest-first set.  Across nodes: fewest victims, then the set
 *    whose oldest victim started latest, then the lowest node index.  The
 *    request reserves the node it preempts on; its victims, on every node
 *    they hold, count as stopping for the rest of the pass.
 *  - Quota counts running[].slices; what a victim frees is counted from the
 *    slices whose used_by is its request on that node.
 *  - Only requests waiting for room (not QUOTA, TOO_BIG, NO_NODES) reserve
 *    or preempt; preemption is tried before RESERVED/CAPACITY/GANG.  "Most
 *    free" in a message and "has room" count reserved nodes too.
 *  - A placed request has an empty message and position 0.
 */
#include "sched/place.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Benchmarks define these to time each decision; the engine has no clock. */
#ifndef PLACE_DECIDE_BEGIN
#define PLACE_DECIDE_BEGIN() \
	do {                 \
	} while (0)
#endif
#ifndef PLACE_DECIDE_END
#define PLACE_DECIDE_END() \
	do {               \
	} while (0)
#endif

#define FAIL_RING  16
#define MAX_ALLOCS 40

/* A request's shape, remembered when it found no room; for one user only
 * when one_user is set. */
struct shape {
	int slices, nodes, one_user, cuda;
	int64_t cpu, mem, user;
};

struct ring {
	struct shape e[FAIL_RING];
	int n, next;
};

struct pool {
	int64_t id;
	int first;        /* its first entry in ctx.pn */
	int n;            /* schedulable nodes carrying it (local index j) */
	int degraded;     /* degraded nodes carrying it (not in n) */
	int words;        /* bitmap words per bucket */
	int maxtotal;     /* most slices of it on one node */
	int mintotal;     /* fewest slices of it on one node */
	int64_t mincpu;   /* smallest cpu_total among its nodes */
	int64_t minmem;   /* smallest mem_total among its nodes */
	int cfirst, cn;   /* its nodes that are not cordoned, in ctx.cap */
	uint64_t *bucket; /* (maxtotal + 1) * words: nodes by free slices */
	uint64_t *res;    /* words: reserved nodes */
	int unreserved;
	int *scav; /* local indices of nodes with scavenger allocations */
	int nscav;
	int pending;         /* positions handed out so far */
	int free_total;      /* free slices of it on schedulable nodes */
	int has_res;         /* a class's lab-session window holds slices of it now */
	struct ring fit;     /* no room, reservations respected */
	struct ring nores;   /* no room even on reserved nodes */
	struct ring preempt; /* no victims would make room */
};

/* One pool on one schedulable node. */
struct pn {
	int pool, node;
	int total, free;
	int soff, scount;  /* its slices in ctx.sl_order, by slice index */
	int64_t scav_held; /* slices of the pool held by live scavenger allocations */
};

struct nodex {
	int64_t cpu_left, mem_left;
	int64_t scav_cpu, scav_mem; /* held by live scavenger allocations */
	int pnoff, npn;             /* its pools in ctx.node_pn */
	int scavoff, nscav;         /* its scavenger allocations in ctx.scav, youngest first */
	int reserved;
};

struct run {
	int pool;     /* pool index, -1 when unknown */
	int grp;      /* where its request's entries start in ctx.run_by_id */
	int64_t held; /* slices of its pool on its node with used_by == its request */
};

struct quota_ent {
	int64_t user, pool, live;
	int64_t cpu, mem; /* live millicores and MiB */
	int used;
};

/* What a class's work holds now (place_input.classes order). */
struct cls_use {
	int64_t live, cpu, mem;
};

struct cand {
	int ri; /* running index */
	int order;
	int64_t s, c, m;
};

struct ctx {
	const struct place_input *in;
	void *allocs[MAX_ALLOCS];
	int nallocs, nomem;

	struct pool *pools;
	int npools;
	struct pn *pn;
	int npn;
	struct nodex *nx;
	int *node_pn;
	struct place_cap *cap;  /* per pool, its nodes that are not cordoned */
	struct place_cap *cap0; /* every node that is not cordoned (CPU-only) */
	int ncap0;

	int *sl_order;
	int *sl_gpu; /* GPU slot per slice, -1 when not on a schedulable node */
	unsigned char *sl_used;
	int *gpu_used;

	struct run *run;
	int *run_by_id;
	unsigned char *doomed; /* by position in run_by_id (group start) */
	int *scav;

	struct quota_ent *quota;
	size_t qmask;
	struct cls_use *cls; /* per place_input.classes */

	int *pick; /* local node indices chosen by a search */
	struct cand *cand, *cy, *cl, *cs, *best;
	int64_t *ids; /* chosen slice ids and victims, handed to the result */
	int nids;
};

static void *ctx_alloc(struct ctx *c, size_t n, size_t size)
{
	void *p;

	if (c->nomem || c->nallocs == MAX_ALLOCS) {
		c->nomem = 1;
		return NULL;
	}
	p = calloc(n ? n : 1, size);
	if (!p) {
		c->nomem = 1;
		return NULL;
	}
	c->allocs[c->nallocs++] = p;
	return p;
}

static void ctx_release(struct ctx *c)
{
	int i;

	for (i = 0; i < c->nallocs; i++)
		free(c->allocs[i]);
	c->nallocs = 0;
}

/* ------------------------------------------------------------------------ */
/* Sorting keys */

struct slice_key {
	int64_t pool;
	int node, gpu, idx;
};

static int cmp_i64(int64_t a, int64_t b)
{
	return (a > b) - (a < b);
}

static int cmp_slice_pool(const void *a, const void *b)
{
	const struct slice_key *x = a, *y = b;
	int r;

	if ((r = cmp_i64(x->pool, y->pool)) != 0)
		return r;
	if (x->node != y->node)
		return x->node < y->node ? -1 : 1;
	return (x->idx > y->idx) - (x->idx < y->idx);
}

static int cmp_slice_gpu(const void *a, const void *b)
{
	const struct slice_key *x = a, *y = b;

	if (x->node != y->node)
		return x->node < y->node ? -1 : 1;
	if (x->gpu != y->gpu)
		return x->gpu < y->gpu ? -1 : 1;
	return (x->idx > y->idx) - (x->idx < y->idx);
}

/* qsort has no context argument; a pass runs on one thread at a time per
 * input, and these point at the input being sorted. */
static _Thread_local const struct place_request *sort_queue;
static _Thread_local const struct place_running *sort_running;

static int cmp_request(const void *a, const void *b)
{
	const struct place_request *x = &sort_queue[*(const int *)a];
	const struct place_request *y = &sort_queue[*(const int *)b];
	int r;

	if (x->priority != y->priority)
		return (int)x->priority < (int)y->priority ? -1 : 1;
	if ((r = cmp_i64(x->user_recent, y->user_recent)) != 0)
		return r;
	if ((r = cmp_i64(x->submitted, y->submitted)) != 0)
		return r;
	if ((r = cmp_i64(x->id, y->id)) != 0)
		return r;
	return cmp_i64(*(const int *)a, *(const int *)b);
}

static int cmp_run_id(const void *a, const void *b)
{
	const struct place_running *x = &sort_running[*(const int *)a];
	const struct place_running *y = &sort_running[*(const int *)b];
	int r;

	if ((r = cmp_i64(x->request_id, y->request_id)) != 0)
		return r;
	if (x->node != y->node)
		return x->node < y->node ? -1 : 1;
	return cmp_i64(*(const int *)a, *(const int *)b);
}

/* By node, then youngest first. */
static int cmp_run_scav(const void *a, const void *b)
{
	const struct place_running *x = &sort_running[*(const int *)a];
	const struct place_running *y = &sort_running[*(const int *)b];
	int r;

	if (x->node != y->node)
		return x->node < y->node ? -1 : 1;
	if ((r = cmp_i64(y->started, x->started)) != 0)
		return r;
	if ((r = cmp_i64(y->request_id, x->request_id)) != 0)
		return r;
	return cmp_i64(*(const int *)a, *(const int *)b);
}

static int pool_find(const struct ctx *c, int64_t id)
{
	int lo = 0, hi = c->npools - 1;

	while (lo <= hi) {
		int mid = lo + (hi - lo) / 2;

		if (c->pools[mid].id == id)
			return mid;
		if (c->pools[mid].id < id)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return -1;
}

static int class_find(const struct place_input *in, int64_t id)
{
	int lo = 0, hi = in->nclasses - 1;

	while (lo <= hi && id) {
		int mid = lo + (hi - lo) / 2;

		if (in->classes[mid].id == id)
			return mid;
		if (in->classes[mid].id < id)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return -1;
}

/* ------------------------------------------------------------------------ */
/* Quota counts: live slices per (user, pool); a student's class work per
 * (user, -class id) */

static size_t quota_hash(int64_t user, int64_t pool)
{
	uint64_t h =
	        (uint64_t)user * 0x9e3779b97f4a7c15ull ^ (uint64_t)pool * 0xc2b2ae3d27d4eb4full;

	return (size_t)(h ^ (h >> 29));
}

static struct quota_ent *quota_slot(struct ctx *c, int64_t user, int64_t pool)
{
	size_t i = quota_hash(user, pool) & c->qmask;

	while (c->quota[i].used && (c->quota[i].user != user || c->quota[i].pool != pool))
		i = (i + 1) & c->qmask;
	if (!c->quota[i].used) {
		c->quota[i].used = 1;
		c->quota[i].user = user;
		c->quota[i].pool = pool;
	}
	return &c->quota[i];
}

/* ------------------------------------------------------------------------ */
/* Bitmaps */

static void bit_set(uint64_t *bm, int j)
{
	bm[j >> 6] |= 1ull << (j & 63);
}

static void bit_clr(uint64_t *bm, int j)
{
	bm[j >> 6] &= ~(1ull << (j & 63));
}

static uint64_t *bucket_of(const struct pool *pl, int b)
{
	return pl->bucket + (size_t)b * (size_t)pl->words;
}

/* ------------------------------------------------------------------------ */
/* Building the indexes */

static int cmp_id(const void *a, const void *b)
{
	return cmp_i64(*(const int64_t *)a, *(const int64_t *)b);
}

/* The distinct pool ids of slices and requests, sorted, into c->pools. */
static int pool_ids(struct ctx *c, int64_t *ids)
{
	const struct place_input *in = c->in;
	size_t cap, mask, h;
	int64_t *set;
	unsigned char *has;
	int i, n = 0, total = in->nslices + in->nqueue;

	for (cap = 16; cap < 2 * (size_t)total; cap <<= 1)
		;
	mask = cap - 1;
	set = ctx_alloc(c, cap, sizeof(int64_t));
	has = ctx_alloc(c, cap, 1);
	if (c->nomem)
		return -1;
	for (i = 0; i < total; i++) {
		int64_t v = i < in->nslices ? in->slices[i].pool_id
		                            : in->queue[i - in->nslices].pool_id;

		for (h = quota_hash(v, 0) & mask; has[h] && set[h] != v; h = (h + 1) & mask)
			;
		if (has[h])
			continue;
		has[h] = 1;
		set[h] = v;
		ids[n++] = v;
	}
	qsort(ids, (size_t)n, sizeof(int64_t), cmp_id);
	c->npools = n;
	c->pools = ctx_alloc(c, (size_t)n, sizeof(*c->pools));
	if (c->nomem)
		return -1;
	for (i = 0; i < n; i++)
		c->pools[i].id = ids[i];
	return 0;
}

/* What "could it ever fit" counts: per pool its nodes that are not
 * cordoned, schedulable or not, with the pool's slices on each; and every
 * node that is not cordoned.  Built the first time a request finds no
 * schedulable node that could hold it (rare: a pass that places everything
 * never sorts the slices twice).  Returns 0, or -1 when out of memory (the
 * caller then says TOO_BIG, as if every node might come back). */
static int index_caps(struct ctx *c)
{
	const struct place_input *in = c->in;
	struct slice_key *keys;
	int i, nkeys = 0, k = -1;

	if (c->cap)
		return 0;
	if (c->nomem)
		return -1;
	keys = ctx_alloc(c, (size_t)in->nslices, sizeof(*keys));
	c->cap0 = ctx_alloc(c, (size_t)in->nnodes, sizeof(*c->cap0));
	c->cap = ctx_alloc(c, (size_t)in->nslices, sizeof(*c->cap));
	if (c->nomem) {
		c->cap = NULL;
		return -1;
	}
	for (i = 0; i < in->nnodes; i++)
		if (!in->nodes[i].cordoned) {
			c->cap0[c->ncap0].cpu = in->nodes[i].cpu_total;
			c->cap0[c->ncap0].mem = in->nodes[i].mem_total;
			c->ncap0++;
		}
	for (i = 0; i < in->nslices; i++) {
		const struct place_slice *s = &in->slices[i];

		if (s->node < 0 || s->node >= in->nnodes || in->nodes[s->node].cordoned)
			continue;
		keys[nkeys].pool = s->pool_id;
		keys[nkeys].node = s->node;
		keys[nkeys].gpu = s->gpu;
		keys[nkeys].idx = i;
		nkeys++;
	}
	qsort(keys, (size_t)nkeys, sizeof(*keys), cmp_slice_pool);
	for (i = 0; i < nkeys; i++) {
		if (i == 0 || keys[i].pool != keys[i - 1].pool ||
		    keys[i].node != keys[i - 1].node) {
			const struct place_node *nd = &in->nodes[keys[i].node];
			struct pool *pl = &c->pools[pool_find(c, keys[i].pool)];

			k++;
			c->cap[k].cpu = nd->cpu_total;
			c->cap[k].mem = nd->mem_total;
			if (pl->cn == 0)
				pl->cfirst = k;
			pl->cn++;
		}
		c->cap[k].slices++;
	}
	return 0;
}

/* Nodes, pools and slices: per (pool, node) its slices and free count, per
 * pool the bucket and reservation bitmaps, per GPU its used slices. */
static int index_slices(struct ctx *c)
{
	const struct place_input *in = c->in;
	struct slice_key *keys;
	int64_t *ids;
	int i, k, nkeys = 0, nslots = 0;
	size_t total_words = 0;

	c->nx = ctx_alloc(c, (size_t)in->nnodes, sizeof(*c->nx));
	c->sl_gpu = ctx_alloc(c, (size_t)in->nslices, sizeof(int));
	c->sl_used = ctx_alloc(c, (size_t)in->nslices, 1);
	c->sl_order = ctx_alloc(c, (size_t)in->nslices, sizeof(int));
	keys = ctx_alloc(c, (size_t)in->nslices, sizeof(*keys));
	ids = ctx_alloc(c, (size_t)in->nslices + (size_t)in->nqueue, sizeof(int64_t));
	if (c->nomem)
		return -1;

	for (i = 0; i < in->nnodes; i++) {
		c->nx[i].cpu_left = in->nodes[i].cpu_free;
		c->nx[i].mem_left = in->nodes[i].mem_free;
	}

	/* Pools: every id named by a slice or a request, sorted. */
	if (pool_ids(c, ids) < 0)
		return -1;

	/* Slices on schedulable nodes, grouped by (pool, node). */
	for (i = 0; i < in->nslices; i++) {
		const struct place_slice *s = &in->slices[i];

		c->sl_gpu[i] = -1;
		c->sl_used[i] = s->used_by != 0;
		if (s->node >= 0 && s->node < in->nnodes && in->nodes[s->node].degraded) {
			int pi = pool_find(c, s->pool_id);
			if (pi >= 0)
				c->pools[pi].degraded = 1;
		}
		if (s->node < 0 || s->node >= in->nnodes || !in->nodes[s->node].schedulable)
			continue;
		keys[nkeys].pool = s->pool_id;
		keys[nkeys].node = s->node;
		keys[nkeys].gpu = s->gpu;
		keys[nkeys].idx = i;
		nkeys++;
	}
	qsort(keys, (size_t)nkeys, sizeof(*keys), cmp_slice_gpu);
	for (i = 0; i < nkeys; i++) {
		if (i > 0 && (keys[i].node != keys[i - 1].node || keys[i].gpu != keys[i - 1].gpu))
			nslots++;
		c->sl_gpu[keys[i].idx] = nslots;
	}
	c->gpu_used = ctx_alloc(c, (size_t)nslots + 1, sizeof(int));
	if (c->nomem)
		return -1;
	for (i = 0; i < nkeys; i++)
		if (c->sl_used[keys[i].idx])
			c->gpu_used[c->sl_gpu[keys[i].idx]]++;

	qsort(keys, (size_t)nkeys, sizeof(*keys), cmp_slice_pool);
	c->npn = 0;
	for (i = 0; i < nkeys; i++)
		if (i == 0 || keys[i].pool != keys[i - 1].pool || keys[i].node != keys[i - 1].node)
			c->npn++;
	c->pn = ctx_alloc(c, (size_t)c->npn, sizeof(*c->pn));
	c->node_pn = ctx_alloc(c, (size_t)c->npn, sizeof(int));
	c->pick = ctx_alloc(c, (size_t)c->npn, sizeof(int));
	if (c->nomem)
		return -1;
	k = -1;
	for (i = 0; i < nkeys; i++) {
		struct pn *p;

		if (i == 0 || keys[i].pool != keys[i - 1].pool ||
		    keys[i].node != keys[i - 1].node) {
			k++;
			p = &c->pn[k];
			p->pool = pool_find(c, keys[i].pool);
			p->node = keys[i].node;
			p->soff = i;
			c->nx[p->node].npn++;
		}
		p = &c->pn[k];
		c->sl_order[i] = keys[i].idx;
		p->scount++;
		p->total++;
		if (!c->sl_used[keys[i].idx]) {
			p->free++;
			c->pools[p->pool].free_total++;
		}
	}
	for (i = 0; i < in->nclasses; i++) {
		int pi = in->classes[i].reserved > 0 ? pool_find(c, in->classes[i].pool_id) : -1;

		if (pi >= 0)
			c->pools[pi].has_res = 1;
	}

	/* Pools: local node ranges, bounds, bitmaps. */
	for (i = 0; i < c->npn; i++) {
		struct pool *pl = &c->pools[c->pn[i].pool];
		const struct place_node *nd = &in->nodes[c->pn[i].node];

		if (pl->n == 0) {
			pl->first = i;
			pl->mintotal = c->pn[i].total;
			pl->mincpu = nd->cpu_total;
			pl->minmem = nd->mem_total;
		}
		pl->n++;
		if (c->pn[i].total > pl->maxtotal)
			pl->maxtotal = c->pn[i].total;
		if (c->pn[i].total < pl->mintotal)
			pl->mintotal = c->pn[i].total;
		if (nd->cpu_total < pl->mincpu)
			pl->mincpu = nd->cpu_total;
		if (nd->mem_total < pl->minmem)
			pl->minmem = nd->mem_total;
	}
	for (i = 0; i < c->npools; i++) {
		struct pool *pl = &c->pools[i];

		pl->words = (pl->n + 63) / 64;
		pl->unreserved = pl->n;
		total_words += (size_t)pl->words * (size_t)(pl->maxtotal + 2);
	}
	{
		uint64_t *words = ctx_alloc(c, total_words, sizeof(uint64_t));

		if (c->nomem)
			return -1;
		for (i = 0; i < c->npools; i++) {
			struct pool *pl = &c->pools[i];

			pl->bucket = words;
			words += (size_t)pl->words * (size_t)(pl->maxtotal + 1);
			pl->res = words;
			words += pl->words;
		}
	}
	for (i = 0; i < c->npn; i++) {
		struct pool *pl = &c->pools[c->pn[i].pool];

		bit_set(bucket_of(pl, c->pn[i].free), i - pl->first);
	}

	/* Nodes: their pools. */
	k = 0;
	for (i = 0; i < in->nnodes; i++) {
		c->nx[i].pnoff = k;
		k += c->nx[i].npn;
		c->nx[i].npn = 0;
	}
	for (i = 0; i < c->npn; i++) {
		struct nodex *x = &c->nx[c->pn[i].node];

		c->node_pn[x->pnoff + x->npn++] = i;
	}

	return 0;
}

/* Running allocations: grouped by request, the slices each holds, quota
 * counts, and the scavenger ones per node (youngest first) and per pool. */
static int index_running(struct ctx *c)
{
	const struct place_input *in = c->in;
	int i, k, nscav = 0;
	size_t qcap;
	int *pool_scav;

	c->run = ctx_alloc(c, (size_t)in->nrunning, sizeof(*c->run));
	c->run_by_id = ctx_alloc(c, (size_t)in->nrunning, sizeof(int));
	c->doomed = ctx_alloc(c, (size_t)in->nrunning, 1);
	c->scav = ctx_alloc(c, (size_t)in->nrunning, sizeof(int));
	c->cand = ctx_alloc(c, (size_t)in->nrunning, sizeof(*c->cand));
	c->cy = ctx_alloc(c, (size_t)in->nrunning, sizeof(*c->cy));
	c->cl = ctx_alloc(c, (size_t)in->nrunning, sizeof(*c->cl));
	c->cs = ctx_alloc(c, (size_t)in->nrunning, sizeof(*c->cs));
	c->best = ctx_alloc(c, (size_t)in->nrunning, sizeof(*c->best));
	pool_scav = ctx_alloc(c, (size_t)c->npn, sizeof(int));
	/* (user, pool) and (user, -class) per entry, at most half full */
	for (qcap = 16; qcap < 4 * ((size_t)in->nrunning + (size_t)in->nqueue); qcap <<= 1)
		;
	c->quota = ctx_alloc(c, qcap, sizeof(*c->quota));
	c->qmask = qcap - 1;
	c->cls = ctx_alloc(c, (size_t)(in->nclasses > 0 ? in->nclasses : 0), sizeof(*c->cls));
	if (c->nomem)
		return -1;
	for (i = 0; i < in->nrunning; i++) {
		const struct place_running *rn = &in->running[i];
		/* class work counts against the student's class limits and the
		 * class, not the user's own quota */
		struct quota_ent *qe =
		        quota_slot(c, rn->user_id, rn->class_id ? -rn->class_id : rn->pool_id);
		int ci = class_find(in, rn->class_id);

		c->run_by_id[i] = i;
		c->run[i].pool = pool_find(c, rn->pool_id);
		qe->live += rn->slices;
		qe->cpu += rn->cpu;
		qe->mem += rn->mem;
		if (ci >= 0) {
			c->cls[ci].live += rn->slices;
			c->cls[ci].cpu += rn->cpu;
			c->cls[ci].mem += rn->mem;
		}
	}
	sort_running = in->running;
	qsort(c->run_by_id, (size_t)in->nrunning, sizeof(int), cmp_run_id);
	for (i = 0; i < in->nrunning; i++) {
		int ri = c->run_by_id[i];

		if (i > 0 &&
		    in->running[c->run_by_id[i - 1]].request_id == in->running[ri].request_id)
			c->run[ri].grp = c->run[c->run_by_id[i - 1]].grp;
		else
			c->run[ri].grp = i;
	}
	for (i = 0; i < in->nslices && in->nrunning > 0; i++) {
		const struct place_slice *s = &in->slices[i];
		int lo = 0, hi = in->nrunning - 1;

		if (!s->used_by)
			continue;
		while (lo < hi) { /* first entry with (request_id, node) >= the slice's */
			int mid = lo + (hi - lo) / 2;
			const struct place_running *rn = &in->running[c->run_by_id[mid]];

			if (rn->request_id < s->used_by ||
			    (rn->request_id == s->used_by && rn->node < s->node))
				lo = mid + 1;
			else
				hi = mid;
		}
		{
			int ri = c->run_by_id[lo];
			const struct place_running *rn = &in->running[ri];

			if (rn->request_id == s->used_by && rn->node == s->node &&
			    rn->pool_id == s->pool_id)
				c->run[ri].held++;
		}
	}

	/* Scavenger allocations on schedulable nodes, per node youngest first. */
	for (i = 0; i < in->nrunning; i++) {
		const struct place_running *rn = &in->running[i];

		if (rn->priority == PRIO_SCAVENGER && rn->node >= 0 && rn->node < in->nnodes &&
		    in->nodes[rn->node].schedulable)
			c->scav[nscav++] = i;
	}
	qsort(c->scav, (size_t)nscav, sizeof(int), cmp_run_scav);
	for (i = 0; i < nscav; i++) {
		const struct place_running *rn = &in->running[c->scav[i]];
		struct nodex *x = &c->nx[rn->node];
		int p = c->run[c->scav[i]].pool;

		if (x->nscav == 0)
			x->scavoff = i;
		x->nscav++;
		x->scav_cpu += rn->cpu;
		x->scav_mem += rn->mem;
		for (k = 0; k < x->npn && p >= 0; k++)
			if (c->pn[c->node_pn[x->pnoff + k]].pool == p)
				c->pn[c->node_pn[x->pnoff + k]].scav_held +=
				        c->run[c->scav[i]].held;
	}
	k = 0;
	for (i = 0; i < c->npn; i++) {
		struct pool *pl = &c->pools[c->pn[i].pool];

		if (i == pl->first)
			pl->scav = pool_scav + k;
		if (c->nx[c->pn[i].node].nscav > 0) {
			pl->scav[pl->nscav++] = i - pl->first;
			k++;
		}
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Room */

static int ring_covers(const struct ring *rg, const struct place_request *r, int nodes)
{
	int i;

	for (i = 0; i < rg->n; i++) {
		const struct shape *e = &rg->e[i];

		if (r->slices >= e->slices && nodes >= e->nodes && r->cpu >= e->cpu &&
		    r->mem >= e->mem && r->cuda_min >= e->cuda &&
		    (!e->one_user || e->user == r->user_id))
			return 1;
	}
	return 0;
}

static void ring_add(struct ring *rg, const struct place_request *r, int nodes, int one_user)
{
	struct shape *e = &rg->e[rg->next];

	e->slices = r->slices;
	e->nodes = nodes;
	e->cpu = r->cpu;
	e->mem = r->mem;
	e->cuda = r->cuda_min;
	e->one_user = one_user;
	e->user = r->user_id;
	rg->next = (rg->next + 1) % FAIL_RING;
	if (rg->n < FAIL_RING)
		rg->n++;
}

/* An unknown driver (cuda_max 0) does not limit: the admin did not say. */
static int cuda_ok(const struct place_node *nd, const struct place_request *r)
{
	return r->cuda_min <= 0 || nd->cuda_max <= 0 || nd->cuda_max >= r->cuda_min;
}

static int ever_holds(const struct ctx *c, const struct pn *p, const struct place_request *r)
{
	const struct place_node *nd = &c->in->nodes[p->node];

	return p->total >= r->slices && nd->cpu_total >= r->cpu && nd->mem_total >= r->mem &&
	       cuda_ok(nd, r);
}

/* Best fit: up to `want` nodes with room now, fewest free slices first,
 * then lowest index, into c->pick.  Returns how many were found. */
static int find_room(struct ctx *c, const struct pool *pl, const struct place_request *r,
                     int respect_res, int want)
{
	int b, w, got = 0;

	for (b = r->slices; b <= pl->maxtotal; b++) {
		const uint64_t *bm = bucket_of(pl, b);

		for (w = 0; w < pl->words; w++) {
			uint64_t x = bm[w] & (respect_res ? ~pl->res[w] : ~0ull);

			while (x) {
				int j = w * 64 + __builtin_ctzll(x);
				const struct nodex *nx = &c->nx[c->pn[pl->first + j].node];

				x &= x - 1;
				if (nx->cpu_left < r->cpu || nx->mem_left < r->mem ||
				    !cuda_ok(&c->in->nodes[c->pn[pl->first + j].node], r))
					continue;
				c->pick[got++] = j;
				if (got == want)
					return got;
			}
		}
	}
	return got;
}

static int most_free(const struct pool *pl)
{
	int b, w;

	for (b = pl->maxtotal; b > 0; b--) {
		const uint64_t *bm = bucket_of(pl, b);

		for (w = 0; w < pl->words; w++)
			if (bm[w])
				return b;
	}
	return 0;
}

/* Takes r->slices slices of the pool on local node j into ids. */
static void take(struct ctx *c, struct pool *pl, int j, const struct place_request *r)
{
	struct pn *p = &c->pn[pl->first + j];
	struct nodex *nx = &c->nx[p->node];
	int n, i;

	for (n = 0; n < r->slices; n++) {
		int got = -1, fresh = -1;

		for (i = 0; i < p->scount; i++) {
			int si = c->sl_order[p->soff + i];

			if (c->sl_used[si])
				continue;
			if (c->gpu_used[c->sl_gpu[si]] > 0) {
				got = si;
				break;
			}
			if (fresh < 0)
				fresh = si;
		}
		if (got < 0)
			got = fresh;
		c->sl_used[got] = 1;
		c->gpu_used[c->sl_gpu[got]]++;
		c->ids[c->nids++] = c->in->slices[got].id;
	}
	bit_clr(bucket_of(pl, p->free), j);
	p->free -= r->slices;
	pl->free_total -= r->slices;
	bit_set(bucket_of(pl, p->free), j);
	nx->cpu_left -= r->cpu;
	nx->mem_left -= r->mem;
}

static void reserve_node(struct ctx *c, int node)
{
	struct nodex *nx = &c->nx[node];
	int k;

	if (nx->reserved)
		return;
	nx->reserved = 1;
	for (k = 0; k < nx->npn; k++) {
		const struct pn *p = &c->pn[c->node_pn[nx->pnoff + k]];
		struct pool *pl = &c->pools[p->pool];

		bit_set(pl->res, (int)(p - c->pn) - pl->first);
		pl->unreserved--;
	}
}

/* The unreserved nodes that could ever hold r with the most free slices now;
 * reserves r->nodes of them, or none when there are fewer. */
static void reserve_best(struct ctx *c, const struct pool *pl, const struct place_request *r)
{
	int b, w, got = 0, i;

	if (pl->unreserved < r->nodes)
		return;
	for (b = pl->maxtotal; b >= 0 && got < r->nodes; b--) {
		const uint64_t *bm = bucket_of(pl, b);

		for (w = 0; w < pl->words && got < r->nodes; w++) {
			uint64_t x = bm[w] & ~pl->res[w];

			while (x && got < r->nodes) {
				int j = w * 64 + __builtin_ctzll(x);

				x &= x - 1;
				if (ever_holds(c, &c->pn[pl->first + j], r))
					c->pick[got++] = j;
			}
		}
	}
	if (got < r->nodes)
		return;
	for (i = 0; i < got; i++)
		reserve_node(c, c->pn[pl->first + c->pick[i]].node);
}

/* How many schedulable nodes of the pool could ever hold r (stops at need). */
static int ever_count(const struct ctx *c, const struct pool *pl, const struct place_request *r,
                      int need)
{
	int j, n = 0;

	if (r->slices <= pl->mintotal && r->cpu <= pl->mincpu && r->mem <= pl->minmem &&
	    r->cuda_min <= 0)
		return pl->n;
	for (j = 0; j < pl->n && n < need; j++)
		if (ever_holds(c, &c->pn[pl->first + j], r))
			n++;
	return n;
}

/* ------------------------------------------------------------------------ */
/* Preemption */

static int covers(const struct cand *set, int n, int64_t ds, int64_t dc, int64_t dm, int skip)
{
	int i;

	for (i = 0; i < n; i++) {
		if (i == skip)
			continue;
		ds -= set[i].s;
		dc -= set[i].c;
		dm -= set[i].m;
	}
	return ds <= 0 && dc <= 0 && dm <= 0;
}

/* Takes candidates in the given order until they cover the shortfall, then
 * drops, oldest first, any the rest do without.  Returns the set's size, or
 * 0 when all of them do not cover it. */
static int irredundant(struct cand *set, const struct cand *from, int n, int64_t ds, int64_t dc,
                       int64_t dm)
{
	int k = 0, i, j;
	int64_t s = ds, cc = dc, m = dm;

	for (i = 0; i < n && (s > 0 || cc > 0 || m > 0); i++) {
		set[k++] = from[i];
		s -= from[i].s;
		cc -= from[i].c;
		m -= from[i].m;
	}
	if (s > 0 || cc > 0 || m > 0)
		return 0;
	for (;;) {
		int drop = -1;

		for (i = 0; i < k; i++) /* the oldest that is not needed */
			if (covers(set, k, ds, dc, dm, i) &&
			    (drop < 0 || set[i].order > set[drop].order))
				drop = i;
		if (drop < 0)
			break;
		for (j = drop; j + 1 < k; j++)
			set[j] = set[j + 1];
		k--;
	}
	return k;
}

/* Victims on one node for r; the set goes to c->cy.  Returns its size (0:
 * none would do) and the start of its oldest member in *oldest. */
static int victims_on(struct ctx *c, int pi, const struct pn *p, const struct place_request *r,
                      int64_t *oldest)
{
	const struct place_input *in = c->in;
	const struct nodex *nx = &c->nx[p->node];
	int64_t ds = r->slices - p->free, dc = r->cpu - nx->cpu_left, dm = r->mem - nx->mem_left;
	int i, j, n = 0, ky, kl;

	for (i = 0; i < nx->nscav; i++) {
		int ri = c->scav[nx->scavoff + i];
		const struct place_running *rn = &in->running[ri];

		if (c->doomed[c->run[ri].grp] || rn->user_id == r->user_id)
			continue;
		c->cand[n].ri = ri;
		c->cand[n].order = n;
		c->cand[n].s = c->run[ri].pool == pi ? c->run[ri].held : 0;
		c->cand[n].c = rn->cpu;
		c->cand[n].m = rn->mem;
		n++;
	}
	/* most slices first, then youngest: insertion sort, a node holds few */
	for (i = 0; i < n; i++) {
		struct cand v = c->cand[i];

		for (j = i - 1; j >= 0 && c->cl[j].s < v.s; j--)
			c->cl[j + 1] = c->cl[j];
		c->cl[j + 1] = v;
	}
	kl = irredundant(c->cs, c->cl, n, ds, dc, dm);
	ky = irredundant(c->cy, c->cand, n, ds, dc, dm);
	if (ky == 0)
		return 0;
	if (kl > 0 && kl < ky) {
		memcpy(c->cy, c->cs, (size_t)kl * sizeof(*c->cy));
		ky = kl;
	}
	*oldest = INT64_MAX;
	for (i = 0; i < ky; i++)
		if (in->running[c->cy[i].ri].started < *oldest)
			*oldest = in->running[c->cy[i].ri].started;
	return ky;
}

static void doom(struct ctx *c, int ri)
{
	const struct place_input *in = c->in;
	int g = c->run[ri].grp, i, k;

	if (c->doomed[g])
		return;
	c->doomed[g] = 1;
	for (i = g; i < in->nrunning &&
	            in->running[c->run_by_id[i]].request_id == in->running[ri].request_id;
	     i++) {
		int e = c->run_by_id[i];
		const struct place_running *rn = &in->running[e];
		struct nodex *nx;

		if (rn->priority != PRIO_SCAVENGER || rn->node < 0 || rn->node >= in->nnodes ||
		    !in->nodes[rn->node].schedulable)
			continue;
		nx = &c->nx[rn->node];
		nx->scav_cpu -= rn->cpu;
		nx->scav_mem -= rn->mem;
		for (k = 0; k < nx->npn; k++) {
			struct pn *p = &c->pn[c->node_pn[nx->pnoff + k]];

			if (p->pool == c->run[e].pool)
				p->scav_held -= c->run[e].held;
		}
	}
}

/* Names victims for a blocked single-node exam or normal request.  Returns
 * how many (0: none would make room). */
static int preempt(struct ctx *c, int pi, const struct place_request *r, struct place_decision *d)
{
	struct pool *pl = &c->pools[pi];
	int t, i, quick = 0, best_k = 0, best_j = -1;
	int64_t best_old = 0;

	if (pl->nscav == 0 || ring_covers(&pl->preempt, r, 1))
		return 0;
	for (t = 0; t < pl->nscav; t++) {
		int j = pl->scav[t];
		const struct pn *p = &c->pn[pl->first + j];
		const struct nodex *nx = &c->nx[p->node];
		int k;
		int64_t old;

		if (nx->reserved || !ever_holds(c, p, r))
			continue;
		if (r->slices - p->free > p->scav_held || r->cpu - nx->cpu_left > nx->scav_cpu ||
		    r->mem - nx->mem_left > nx->scav_mem)
			continue;
		quick = 1;
		k = victims_on(c, pi, p, r, &old);
		if (k == 0 || (best_j >= 0 && (k > best_k || (k == best_k && old <= best_old))))
			continue;
		best_k = k;
		best_j = j;
		best_old = old;
		memcpy(c->best, c->cy, (size_t)k * sizeof(*c->best));
	}
	if (best_j < 0) {
		/* nothing frees in a pass: this shape finds no victims later either
		 * (for this user only when some node had other users' victims) */
		ring_add(&pl->preempt, r, 1, quick);
		return 0;
	}
	d->victims = c->ids + c->nids;
	for (i = 0; i < best_k; i++) {
		int ri = c->best[i].ri;

		if (c->doomed[c->run[ri].grp])
			continue; /* two entries of one request */
		doom(c, ri);
		c->ids[c->nids++] = c->in->running[ri].request_id;
		d->nvictims++;
	}
	reserve_node(c, c->pn[pl->first + best_j].node);
	return d->nvictims;
}

/* ------------------------------------------------------------------------ */
/* Decisions */

static const char *plural(int64_t n, const char *one, const char *many)
{
	return n == 1 ? one : many;
}

static void say_too_big(const struct ctx *c, const struct pool *pl, const struct place_request *r,
                        int ever, struct place_decision *d)
{
	int64_t cpu = 0, mem = 0;
	int j;

	/* some node that is down or draining could hold it: it waits for one */
	d->reason = REASON_TOO_BIG;
	if (ever > 0) {
		snprintf(
		        d->message, sizeof(d->message),
		        "needs %d nodes that can each hold %d %s of this pool; only %d taking work "
		        "now can",
		        r->nodes, r->slices, plural(r->slices, "slice", "slices"), ever);
		return;
	}
	if (pl->maxtotal < r->slices) {
		snprintf(d->message, sizeof(d->message),
		         "no node taking work now can hold %d %s of this pool (largest: %d)",
		         r->slices, plural(r->slices, "slice", "slices"), pl->maxtotal);
		return;
	}
	for (j = 0; j < pl->n; j++) {
		const struct pn *p = &c->pn[pl->first + j];
		const struct place_node *nd = &c->in->nodes[p->node];

		if (p->total < r->slices)
			continue;
		if (nd->cpu_total > cpu)
			cpu = nd->cpu_total;
		if (nd->mem_total > mem)
			mem = nd->mem_total;
	}
	if (cpu < r->cpu)
		snprintf(d->message, sizeof(d->message),
		         "no node with %d %s of this pool taking work now can give %lld millicores "
		         "of cpu (largest: %lld)",
		         r->slices, plural(r->slices, "slice", "slices"), (long long)r->cpu,
		         (long long)cpu);
	else if (mem < r->mem)
		snprintf(d->message, sizeof(d->message),
		         "no node with %d %s of this pool taking work now can give %lld MiB of "
		         "memory (largest: %lld)",
		         r->slices, plural(r->slices, "slice", "slices"), (long long)r->mem,
		         (long long)mem);
	else
		snprintf(d->message, sizeof(d->message),
		         "no node taking work now can hold %d %s of this pool with %lld millicores "
		         "of cpu and %lld MiB of memory",
		         r->slices, plural(r->slices, "slice", "slices"), (long long)r->cpu,
		         (long long)r->mem);
}

/* CANNOT_RUN when no node that is not cordoned could ever hold r (of pool
 * pl, or any node for CPU-only work: pl NULL).  Returns 1 when it set d. */
static int cannot_run(struct ctx *c, const struct pool *pl, const struct place_request *r,
                      struct place_decision *d)
{
	struct place_fit_r f = { r->slices, r->nodes, r->cpu, r->mem, FIT_OK, 0 };
	char hint[96];

	if (index_caps(c) < 0)
		return 0;
	if (pl)
		place_max_fit(c->cap + pl->cfirst, pl->cn, &f);
	else
		place_max_fit(c->cap0, c->ncap0, &f);
	if (f.fit == FIT_OK || f.fit == FIT_NO_NODES)
		return 0;
	d->reason = REASON_CANNOT_RUN;
	place_fit_say(&f, pl ? "this pool" : "the cluster", d->message, sizeof(d->message), hint,
	              sizeof(hint));
	snprintf(d->message + strlen(d->message), sizeof(d->message) - strlen(d->message), "; %s",
	         hint);
	return 1;
}

/* Decides a request without a pool (cpu and memory on one node).  Returns
 * 1 when placed. */
static int decide_cpu(struct ctx *c, const struct place_request *r, struct place_decision *d)
{
	const struct place_input *in = c->in;
	struct quota_ent *q = quota_slot(c, r->user_id, 0);
	int j, best = -1, sched = 0, ever = 0, reserved_fit = 0;

	if (r->quota_block) {
		d->reason = r->quota_block == 2 ? REASON_CANNOT_RUN : REASON_QUOTA;
		snprintf(d->message, sizeof(d->message), "user quota: none for CPU-only work");
		return 0;
	}
	if ((r->quota_cpu > 0 && q->cpu + r->cpu > r->quota_cpu) ||
	    (r->quota_mem > 0 && q->mem + r->mem > r->quota_mem)) {
		int cpu = r->quota_cpu > 0 && q->cpu + r->cpu > r->quota_cpu;
		d->reason = REASON_QUOTA;
		snprintf(d->message, sizeof(d->message),
		         "user quota: %lld of %lld %s of CPU-only work in use; this needs %lld",
		         (long long)(cpu ? q->cpu : q->mem),
		         (long long)(cpu ? r->quota_cpu : r->quota_mem),
		         cpu ? "millicores of cpu" : "MiB of memory",
		         (long long)(cpu ? r->cpu : r->mem));
		return 0;
	}
	for (j = 0; j < in->nnodes; j++) {
		const struct place_node *nd = &in->nodes[j];
		const struct nodex *nx = &c->nx[j];

		if (!nd->schedulable)
			continue;
		sched++;
		if (nd->cpu_total < r->cpu || nd->mem_total < r->mem)
			continue;
		ever++;
		if (nx->cpu_left < r->cpu || nx->mem_left < r->mem)
			continue;
		if (nx->reserved) {
			reserved_fit = 1;
			continue;
		}
		if (best < 0 || nx->cpu_left < c->nx[best].cpu_left)
			best = j;
	}
	if (best >= 0) {
		c->nx[best].cpu_left -= r->cpu;
		c->nx[best].mem_left -= r->mem;
		q->cpu += r->cpu;
		q->mem += r->mem;
		d->node_id = in->nodes[best].id;
		return 1;
	}
	if (ever == 0 && cannot_run(c, NULL, r, d))
		return 0;
	if (sched == 0) {
		int degraded = 0;
		for (j = 0; j < in->nnodes; j++)
			degraded += in->nodes[j].degraded != 0;
		d->reason = degraded ? REASON_DEGRADED : REASON_NO_NODES;
		if (degraded)
			snprintf(d->message, sizeof(d->message),
			         "no node is schedulable; degraded (engines failing to start "
			         "containers): %d",
			         degraded);
		else
			snprintf(d->message, sizeof(d->message), "no node is schedulable");
	} else if (ever == 0) {
		d->reason = REASON_TOO_BIG;
		snprintf(d->message, sizeof(d->message),
		         "no node taking work now can give %lld millicores of cpu and %lld MiB of "
		         "memory",
		         (long long)r->cpu, (long long)r->mem);
	} else if (reserved_fit) {
		d->reason = REASON_RESERVED;
		snprintf(d->message, sizeof(d->message), "room is reserved for an earlier request");
	} else {
		d->reason = REASON_CAPACITY;
		snprintf(d->message, sizeof(d->message),
		         "no node has %lld millicores of cpu and %lld MiB of memory free now",
		         (long long)r->cpu, (long long)r->mem);
	}
	return 0;
}

/* "your class limit: 1/1 slice", "...: 1/2 slices in use; this needs 2" */
static void say_use(struct place_decision *d, enum place_reason why, const char *what, int64_t used,
                    int64_t cap, int64_t need, const char *one, const char *many, const char *tail)
{
	d->reason = why;
	if (used >= cap)
		snprintf(d->message, sizeof(d->message), "%s: %lld/%lld %s%s", what,
		         (long long)used, (long long)cap, plural(cap, one, many), tail);
	else
		snprintf(d->message, sizeof(d->message),
		         "%s: %lld/%lld %s in use%s; this needs %lld", what, (long long)used,
		         (long long)cap, plural(cap, one, many), tail, (long long)need);
}

/* The slices of the pool held now by other classes' open lab windows and
 * not used by their work; *who names the first such class. */
static int64_t held_others(const struct ctx *c, const struct place_request *r,
                           const struct place_class **who)
{
	const struct place_input *in = c->in;
	int64_t held = 0;
	int i;

	*who = NULL;
	for (i = 0; i < in->nclasses; i++) {
		const struct place_class *k = &in->classes[i];
		int64_t res = k->reserved < k->alloc_slices ? k->reserved : k->alloc_slices;

		if (k->reserved <= 0 || k->pool_id != r->pool_id || k->id == r->class_id ||
		    c->cls[i].live >= res)
			continue;
		held += res - c->cls[i].live;
		if (!*who)
			*who = k;
	}
	return held;
}

/* Student ⊂ class for work in a class's context.  Returns 1 when it waits
 * (d set); else 0 and *ignore_res: inside its own open window, under the
 * reservation (backfill reservations of other work do not hold it back). */
static int class_checks(struct ctx *c, const struct place_request *r, int64_t need,
                        struct place_decision *d, int *ignore_res)
{
	int ci = class_find(c->in, r->class_id);
	const struct place_class *k;
	const struct cls_use *u;
	const struct quota_ent *s;
	int64_t cpu = r->cpu * r->nodes, mem = r->mem * r->nodes, off, cap, res;

	*ignore_res = 0;
	if (r->class_block == 1) {
		d->reason = REASON_CLASS_BUDGET;
		snprintf(d->message, sizeof(d->message), "class GPU-hour budget spent");
		return 1;
	}
	if (ci < 0 || r->class_block == 2 || c->in->classes[ci].pool_id != r->pool_id) {
		d->reason = REASON_CLASS_CLOSED;
		snprintf(d->message, sizeof(d->message),
		         "the class has no allocation in this pool for this work");
		return 1;
	}
	k = &c->in->classes[ci];
	u = &c->cls[ci];
	s = quota_slot(c, r->user_id, -r->class_id);
	if (r->student_slices >= 0 && s->live + need > r->student_slices) {
		say_use(d, REASON_CLASS_LIMIT, "your class limit", s->live, r->student_slices, need,
		        "slice", "slices", "");
		return 1;
	}
	if (r->student_cpu > 0 && s->cpu + cpu > r->student_cpu) {
		say_use(d, REASON_CLASS_LIMIT, "your class limit", s->cpu, r->student_cpu, cpu,
		        "millicores of cpu", "millicores of cpu", "");
		return 1;
	}
	if (r->student_mem > 0 && s->mem + mem > r->student_mem) {
		say_use(d, REASON_CLASS_LIMIT, "your class limit", s->mem, r->student_mem, mem,
		        "MiB of memory", "MiB of memory", "");
		return 1;
	}
	if (u->live + need > k->alloc_slices) {
		say_use(d, REASON_CLASS_FULL, "class allocation full", u->live, k->alloc_slices,
		        need, "slice", "slices", "");
		return 1;
	}
	if (k->alloc_cpu > 0 && u->cpu + cpu > k->alloc_cpu) {
		say_use(d, REASON_CLASS_FULL, "class allocation full", u->cpu, k->alloc_cpu, cpu,
		        "millicores of cpu", "millicores of cpu", "");
		return 1;
	}
	if (k->alloc_mem > 0 && u->mem + mem > k->alloc_mem) {
		say_use(d, REASON_CLASS_FULL, "class allocation full", u->mem, k->alloc_mem, mem,
		        "MiB of memory", "MiB of memory", "");
		return 1;
	}
	off = k->offhours < 0 || k->offhours > k->alloc_slices ? k->alloc_slices : k->offhours;
	res = k->reserved < k->alloc_slices ? k->reserved : k->alloc_slices;
	cap = res > off ? res : off;
	if (u->live + need > cap) {
		char tail[64];

		if (res > 0) {
			snprintf(tail, sizeof(tail), " until %s",
			         k->until ? k->until : "the window ends");
			say_use(d, REASON_CLASS_SESSION, "class lab-session share full", u->live,
			        cap, need, "slice", "slices", tail);
		} else {
			say_use(d, REASON_CLASS_SESSION, "class off-hours share full", u->live, cap,
			        need, "slice", "slices", " outside lab sessions");
		}
		return 1;
	}
	*ignore_res = res > 0 && u->live + need <= res;
	return 0;
}

/* Decides r.  Returns 1 when placed. */
static int decide(struct ctx *c, const struct place_request *r, struct place_decision *d)
{
	int pi = pool_find(c, r->pool_id), ever, got, i, room, own_window = 0;
	struct pool *pl = &c->pools[pi]; /* every queued pool id is a pool */
	struct quota_ent *q;
	int64_t need;

	d->request_id = r->id;
	if (r->pool_id == 0)
		return decide_cpu(c, r, d);
	if (r->slices < 1 || r->nodes < 1) {
		d->reason = REASON_TOO_BIG;
		snprintf(d->message, sizeof(d->message),
		         "asks for %d slices on %d nodes; both must be at least 1", r->slices,
		         r->nodes);
		return 0;
	}
	/* schedulable nodes alone cannot hold it: could any that is not
	 * cordoned ever? */
	ever = pl->n > 0 ? ever_count(c, pl, r, r->nodes) : 0;
	if (ever < r->nodes && cannot_run(c, pl, r, d))
		return 0;
	if (pl->n == 0) {
		d->reason = pl->degraded ? REASON_DEGRADED : REASON_NO_NODES;
		snprintf(d->message, sizeof(d->message), "%s",
		         pl->degraded
		                 ? "the pool has no schedulable node: its nodes that are up are "
		                   "degraded (their engines fail to start containers)"
		                 : "the pool has no schedulable node");
		return 0;
	}
	if (r->cuda_min > 0) {
		int ok = 0, newest = 0;
		for (i = 0; i < pl->n; i++) {
			const struct place_node *nd = &c->in->nodes[c->pn[pl->first + i].node];
			ok += cuda_ok(nd, r);
			if (nd->cuda_max > newest)
				newest = nd->cuda_max;
		}
		if (ok < r->nodes) {
			d->reason = REASON_CUDA;
			if (r->nodes == 1)
				snprintf(d->message, sizeof(d->message),
				         "no node's driver supports CUDA %d.%d (newest: %d.%d)",
				         r->cuda_min / 1000, r->cuda_min % 1000 / 10, newest / 1000,
				         newest % 1000 / 10);
			else
				snprintf(d->message, sizeof(d->message),
				         "needs %d nodes whose driver supports CUDA %d.%d; %d %s",
				         r->nodes, r->cuda_min / 1000, r->cuda_min % 1000 / 10, ok,
				         plural(ok, "has", "have"));
			return 0;
		}
	}
	if (ever < r->nodes) {
		say_too_big(c, pl, r, ever, d);
		return 0;
	}
	need = (int64_t)r->slices * r->nodes;
	if (r->class_id) {
		q = quota_slot(c, r->user_id, -r->class_id);
		if (class_checks(c, r, need, d, &own_window))
			return 0;
		goto room;
	}
	q = quota_slot(c, r->user_id, r->pool_id);
	if (r->quota_block) {
		d->reason = r->quota_block == 2 ? REASON_CANNOT_RUN : REASON_QUOTA;
		snprintf(d->message, sizeof(d->message), "user quota: none for this pool");
		return 0;
	}
	if (r->quota_slices >= 0 && q->live + need > r->quota_slices) {
		d->reason = REASON_QUOTA;
		if (q->live >= r->quota_slices)
			snprintf(d->message, sizeof(d->message),
			         "user quota: %lld of %d slices of this pool in use",
			         (long long)q->live, r->quota_slices);
		else
			snprintf(d->message, sizeof(d->message),
			         "user quota: %lld of %d slices of this pool in use; this needs "
			         "%lld",
			         (long long)q->live, r->quota_slices, (long long)need);
		return 0;
	}
	if ((r->quota_cpu > 0 && q->cpu + r->cpu * r->nodes > r->quota_cpu) ||
	    (r->quota_mem > 0 && q->mem + r->mem * r->nodes > r->quota_mem)) {
		int cpu = r->quota_cpu > 0 && q->cpu + r->cpu * r->nodes > r->quota_cpu;
		d->reason = REASON_QUOTA;
		snprintf(d->message, sizeof(d->message),
		         "user quota: %lld of %lld %s of this pool in use; this needs %lld",
		         (long long)(cpu ? q->cpu : q->mem),
		         (long long)(cpu ? r->quota_cpu : r->quota_mem),
		         cpu ? "millicores of cpu" : "MiB of memory",
		         (long long)(cpu ? r->cpu : r->mem) * r->nodes);
		return 0;
	}

room:
	/* free slices held by other classes' lab sessions are not for it */
	if (pl->has_res && pl->free_total >= need) {
		const struct place_class *who;
		int64_t held = held_others(c, r, &who);

		if (held > 0 && pl->free_total - held < need) {
			d->reason = REASON_RESERVED_CLASS;
			snprintf(d->message, sizeof(d->message),
			         "%lld free %s reserved for class '%s' until %s", (long long)held,
			         plural(held, "slice is", "slices are"),
			         who->name ? who->name : "?", who->until ? who->until : "later");
			return 0;
		}
	}
	if (own_window || !ring_covers(&pl->fit, r, r->nodes)) {
		got = find_room(c, pl, r, !own_window, r->nodes);
		if (got == r->nodes) {
			int ci = class_find(c->in, r->class_id);

			d->chosen = c->ids + c->nids;
			for (i = 0; i < got; i++)
				take(c, pl, c->pick[i], r);
			d->nchosen = (int)need;
			q->live += need;
			q->cpu += r->cpu * r->nodes;
			q->mem += r->mem * r->nodes;
			if (ci >= 0) {
				c->cls[ci].live += need;
				c->cls[ci].cpu += r->cpu * r->nodes;
				c->cls[ci].mem += r->mem * r->nodes;
			}
			return 1;
		}
		if (!own_window)
			ring_add(&pl->fit, r, r->nodes, 0);
	}

	if (r->nodes == 1 && (r->priority == PRIO_EXAM || r->priority == PRIO_NORMAL) &&
	    preempt(c, pi, r, d) > 0) {
		d->reason = REASON_PREEMPTING;
		snprintf(d->message, sizeof(d->message), "waiting for %d scavenger %s to stop",
		         d->nvictims, plural(d->nvictims, "allocation", "allocations"));
		return 0;
	}

	room = 0;
	if (r->nodes > 1 || !ring_covers(&pl->nores, r, r->nodes)) {
		room = find_room(c, pl, r, 0, r->nodes);
		if (room < r->nodes)
			ring_add(&pl->nores, r, r->nodes, 0);
	}
	if (room == r->nodes) {
		d->reason = REASON_RESERVED;
		snprintf(d->message, sizeof(d->message), "room is reserved for an earlier request");
	} else if (r->nodes > 1) {
		d->reason = REASON_GANG;
		if (room == 0)
			snprintf(d->message, sizeof(d->message),
			         "needs %d nodes with %d free %s each; none has room", r->nodes,
			         r->slices, plural(r->slices, "slice", "slices"));
		else
			snprintf(d->message, sizeof(d->message),
			         "needs %d nodes with %d free %s each; %d %s room", r->nodes,
			         r->slices, plural(r->slices, "slice", "slices"), room,
			         plural(room, "has", "have"));
	} else {
		int most = most_free(pl);

		d->reason = REASON_CAPACITY;
		if (most < r->slices)
			snprintf(d->message, sizeof(d->message),
			         "no node has %d free %s of this pool now (most free: %d)",
			         r->slices, plural(r->slices, "slice", "slices"), most);
		else
			snprintf(d->message, sizeof(d->message),
			         "no node has %d free %s of this pool with %lld millicores of cpu "
			         "and "
			         "%lld MiB of memory free now",
			         r->slices, plural(r->slices, "slice", "slices"), (long long)r->cpu,
			         (long long)r->mem);
	}
	if (r->priority != PRIO_SCAVENGER)
		reserve_best(c, pl, r);
	return 0;
}

struct place_result *place_run(const struct place_input *in)
{
	struct ctx c;
	struct place_result *res = NULL, *ret = NULL;
	int *order;
	size_t nq = in->nqueue > 0 ? (size_t)in->nqueue : 0;
	size_t nid = (size_t)(in->nslices > 0 ? in->nslices : 0) +
	             (size_t)(in->nrunning > 0 ? in->nrunning : 0);
	int k;

	memset(&c, 0, sizeof(c));
	c.in = in;
	/* One block: the result, its decisions, then every chosen slice id and
	 * victim (each slice is chosen once, each running request named once). */
	res = calloc(1, sizeof(*res) + nq * sizeof(*res->decisions) + nid * sizeof(int64_t));
	if (!res)
		goto out;
	res->decisions = (struct place_decision *)(res + 1);
	res->ndecisions = (int)nq;
	c.ids = (int64_t *)(res->decisions + nq);
	order = ctx_alloc(&c, nq, sizeof(int));
	if (!order || index_slices(&c) < 0 || index_running(&c) < 0)
		goto out;

	for (k = 0; k < (int)nq; k++)
		order[k] = k;
	sort_queue = in->queue;
	qsort(order, nq, sizeof(int), cmp_request);

	for (k = 0; k < (int)nq; k++) {
		const struct place_request *r = &in->queue[order[k]];
		struct place_decision *d = &res->decisions[k];
		int placed;

		PLACE_DECIDE_BEGIN();
		placed = decide(&c, r, d);
		PLACE_DECIDE_END();
		if (placed)
			res->placed++;
		else
			d->position = ++c.pools[pool_find(&c, r->pool_id)].pending;
	}
	ret = res;
	res = NULL; /* handed off */
out:
	ctx_release(&c);
	free(res);
	return ret;
}

void place_result_free(struct place_result *r)
{
	free(r);
}

const char *place_reason_code(enum place_reason r)
{
	switch (r) {
	case REASON_NONE: return "none";
	case REASON_QUOTA: return "quota";
	case REASON_NO_NODES: return "no_nodes";
	case REASON_CUDA: return "cuda";
	case REASON_TOO_BIG: return "too_big";
	case REASON_CAPACITY: return "capacity";
	case REASON_GANG: return "gang";
	case REASON_RESERVED: return "reserved";
	case REASON_PREEMPTING: return "preempting";
	case REASON_CANNOT_RUN: return "cannot_run_as_asked";
	case REASON_DEGRADED: return "degraded";
	case REASON_CLASS_LIMIT: return "class_limit";
	case REASON_CLASS_FULL: return "class_full";
	case REASON_CLASS_SESSION: return "class_session";
	case REASON_CLASS_BUDGET: return "class_budget";
	case REASON_CLASS_CLOSED: return "class_closed";
	case REASON_RESERVED_CLASS: return "reserved_for_class";
	}
	return "unknown";
}

/* ------------------------------------------------------------------------ */
/* Could it ever fit? */

/* cpu or memory 0: not known, holds any amount */
static int holds(int64_t have, int64_t want)
{
	return have <= 0 || have >= want;
}

enum place_fit place_max_fit(const struct place_cap *caps, int n, struct place_fit_r *f)
{
	int64_t best = -1;
	int i, count = 0;

	f->most = 0;
	if (n <= 0)
		return f->fit = FIT_NO_NODES;
	for (i = 0; i < n; i++)
		if (caps[i].slices > best)
			best = caps[i].slices;
	if (f->slices > best) {
		f->most = best;
		return f->fit = FIT_SLICES;
	}
	best = -1;
	for (i = 0; i < n; i++)
		if (caps[i].slices >= f->slices)
			best = caps[i].cpu <= 0     ? INT64_MAX
			       : best > caps[i].cpu ? best
			                            : caps[i].cpu;
	if (f->cpu > best) {
		f->most = best;
		return f->fit = FIT_CPU;
	}
	best = -1;
	for (i = 0; i < n; i++)
		if (caps[i].slices >= f->slices && holds(caps[i].cpu, f->cpu))
			best = caps[i].mem <= 0     ? INT64_MAX
			       : best > caps[i].mem ? best
			                            : caps[i].mem;
	if (f->mem > best) {
		f->most = best;
		return f->fit = FIT_MEM;
	}
	for (i = 0; i < n; i++)
		if (caps[i].slices >= f->slices && holds(caps[i].cpu, f->cpu) &&
		    holds(caps[i].mem, f->mem))
			count++;
	if (count < f->nodes) {
		f->most = count;
		return f->fit = FIT_NODES;
	}
	return f->fit = FIT_OK;
}

/* "2 CPU cores", "1.5 CPU cores", "1 CPU core" */
static void cores(int64_t millis, char *out, size_t len)
{
	if (millis % 1000 == 0)
		snprintf(out, len, "%lld CPU %s", (long long)(millis / 1000),
		         millis == 1000 ? "core" : "cores");
	else
		snprintf(out, len, "%.1f CPU cores", (double)millis / 1000.0);
}

void place_fit_say(const struct place_fit_r *f, const char *where, char *msg, size_t mlen,
                   char *hint, size_t hlen)
{
	char with[64] = "", c[32];
	char m[240] = "", h[96] = "";

	if (f->slices > 0)
		snprintf(with, sizeof(with), " with %d %s", f->slices,
		         plural(f->slices, "slice", "slices"));
	switch (f->fit) {
	case FIT_SLICES:
		snprintf(m, sizeof(m), "no node in %s has %d slices: the largest has %lld", where,
		         f->slices, (long long)f->most);
		snprintf(h, sizeof(h), "ask for at most %lld %s", (long long)f->most,
		         plural(f->most, "slice", "slices"));
		break;
	case FIT_CPU:
		cores(f->most, c, sizeof(c));
		snprintf(m, sizeof(m),
		         "no node in %s%s can ever give %lld millicores of cpu: the largest has %s",
		         where, with, (long long)f->cpu, c);
		snprintf(h, sizeof(h), "ask for at most %lld millicores of cpu",
		         (long long)f->most);
		break;
	case FIT_MEM:
		snprintf(m, sizeof(m),
		         "no node in %s%s can ever give %lld MiB of memory: the largest has %lld "
		         "MiB",
		         where, with, (long long)f->mem, (long long)f->most);
		snprintf(h, sizeof(h), "ask for at most %lld MiB of memory", (long long)f->most);
		break;
	case FIT_NODES:
		snprintf(m, sizeof(m), "needs %d nodes in %s that can each hold it; only %lld can",
		         f->nodes, where, (long long)f->most);
		snprintf(h, sizeof(h), "ask for at most %lld %s", (long long)f->most,
		         plural(f->most, "node", "nodes"));
		break;
	case FIT_OK:
	case FIT_NO_NODES: break;
	}
	if (msg && mlen)
		snprintf(msg, mlen, "%s", m);
	if (hint && hlen)
		snprintf(hint, hlen, "%s", h);
}
