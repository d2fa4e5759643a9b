/* place_bench.c — the placement engine on a synthetic cluster, side by side
 * with a deliberately naive placement on the same input.
 *
 * Cluster: 1,000 nodes of pool 1 ("a100", 8 GPUs, one exclusive slice each)
 * and 100 nodes of pool 2 (8 GPUs x 7 shared slots); about 30% of the slices
 * held by running allocations (15% of them scavenger).  Queue: 10,000
 * requests, 80% pool 1; 70% 1 slice, 20% 2, 7% 4, 2% 8, 1% gangs of 2-4
 * nodes x 8; 5% exam, 80% normal, 15% scavenger; 500 users with random
 * recent usage, half of them with a quota.  A second cluster has every slice
 * held (15% by scavengers): nothing is placeable.  Fixed seed.
 *
 * Naive reference: the same order; for each request, one scan of every
 * slice to count free slices per node, then the first nodes in index order
 * with room (slices, cpu, memory), then a scan for their lowest free slices.
 * No quota, reasons, reservations or preemption: less work than the engine.
 *
 * Prints "metric value baseline goal" lines for place.sh:
 *   pass_ms           median of 5 passes; baseline: the naive pass
 *   placements_per_s  placed / pass time, both sides
 *   decision_p99_us   p99 of the time per decision, timed around each
 *                     decision by a build-time hook (PLACE_DECIDE_BEGIN/END)
 *                     in a 6th, separate pass; naive timed per request
 *   idle_pass_ms      median of 5 passes over the full cluster
 *   rss_mib           peak resident set (ru_maxrss) after everything;
 *                     baseline: after building the inputs, before any pass
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <time.h>

static int64_t bench_t0;
static int64_t *bench_lat;
static int bench_nlat, bench_timing;

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#define PLACE_DECIDE_BEGIN()                 \
	do {                                 \
		if (bench_timing)            \
			bench_t0 = now_ns(); \
	} while (0)
#define PLACE_DECIDE_END()                                             \
	do {                                                           \
		if (bench_timing)                                      \
			bench_lat[bench_nlat++] = now_ns() - bench_t0; \
	} while (0)

#include "sched/place.c"

#include <sys/resource.h>

#define NA       1000 /* nodes of pool 1 */
#define NB       100  /* nodes of pool 2 */
#define NQUEUE   10000
#define NUSERS   500
#define ROUNDS   5
#define POOL1    1
#define POOL2    2
#define NODE_CPU 128000
#define NODE_MEM 1048576

struct world {
	struct place_node *nodes;
	int nnodes;
	struct place_slice *slices;
	int nslices;
	struct place_request *queue;
	int nqueue;
	struct place_running *running;
	int nrunning;
	int *first; /* first slice of each node */
};

static uint64_t rng = 0x2545f4914f6cdd1dull;

static uint32_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 16);
}

static void *must(void *p)
{
	if (!p) {
		fprintf(stderr, "place_bench: out of memory\n");
		exit(1);
	}
	return p;
}

static int per_node(int n)
{
	return n < NA ? 8 : 56;
}

static int64_t slice_cpu(int64_t pool)
{
	return pool == POOL1 ? 12000 : 2000;
}

static int64_t slice_mem(int64_t pool)
{
	return pool == POOL1 ? 98304 : 16384;
}

static void cluster(struct world *w)
{
	int n, g, k, s = 0;

	w->nnodes = NA + NB;
	w->nodes = must(calloc((size_t)w->nnodes, sizeof(*w->nodes)));
	w->first = must(calloc((size_t)w->nnodes, sizeof(int)));
	w->nslices = NA * 8 + NB * 56;
	w->slices = must(calloc((size_t)w->nslices, sizeof(*w->slices)));
	for (n = 0; n < w->nnodes; n++) {
		w->nodes[n].id = n + 1;
		w->nodes[n].schedulable = 1;
		w->nodes[n].cpu_total = w->nodes[n].cpu_free = NODE_CPU;
		w->nodes[n].mem_total = w->nodes[n].mem_free = NODE_MEM;
		w->first[n] = s;
		for (g = 0; g < 8; g++)
			for (k = 0; k < per_node(n) / 8; k++) {
				w->slices[s].id = s + 1;
				w->slices[s].node = n;
				w->slices[s].pool_id = n < NA ? POOL1 : POOL2;
				w->slices[s].gpu = g;
				s++;
			}
	}
}

static int free_on(const struct world *w, int n)
{
	int i, f = 0;

	for (i = 0; i < per_node(n); i++)
		f += w->slices[w->first[n] + i].used_by == 0;
	return f;
}

static void allocate(struct world *w, int n, int size, int64_t id)
{
	struct place_running *rn = &w->running[w->nrunning++];
	int u = (int)(rnd() % 100), i, left = size;

	rn->request_id = id;
	rn->user_id = 1 + rnd() % NUSERS;
	rn->pool_id = n < NA ? POOL1 : POOL2;
	rn->priority = u < 15 ? PRIO_SCAVENGER : u < 20 ? PRIO_EXAM : PRIO_NORMAL;
	rn->node = n;
	rn->slices = size;
	rn->cpu = size * slice_cpu(rn->pool_id);
	rn->mem = size * slice_mem(rn->pool_id);
	rn->started = 1000000 + rnd() % 1000000;
	for (i = 0; i < per_node(n) && left > 0; i++)
		if (!w->slices[w->first[n] + i].used_by) {
			w->slices[w->first[n] + i].used_by = id;
			left--;
		}
	w->nodes[n].cpu_free -= rn->cpu;
	w->nodes[n].mem_free -= rn->mem;
}

/* Running allocations until `fill` (0..1) of the slices are held. */
static void load(struct world *w, double fill)
{
	static const int sizes[] = { 1, 1, 1, 2, 2, 4, 8 };
	int used = 0, n, id = 1000000000;

	w->running = must(calloc((size_t)w->nslices, sizeof(*w->running)));
	if (fill >= 1.0) {
		for (n = 0; n < w->nnodes; n++)
			while (free_on(w, n) > 0) {
				int size = sizes[rnd() % 7], f = free_on(w, n);

				allocate(w, n, size < f ? size : f, ++id);
			}
		return;
	}
	while (used < fill * w->nslices) {
		int size = sizes[rnd() % 7];

		n = (int)(rnd() % (uint32_t)w->nnodes);
		if (free_on(w, n) < size)
			continue;
		allocate(w, n, size, ++id);
		used += size;
	}
}

static void enqueue(struct world *w)
{
	int64_t recent[NUSERS + 1];
	int quota[NUSERS + 1];
	int i;

	for (i = 0; i <= NUSERS; i++) {
		recent[i] = rnd() % 360000;
		quota[i] = rnd() % 2 ? -1 : 32;
	}
	w->nqueue = NQUEUE;
	w->queue = must(calloc(NQUEUE, sizeof(*w->queue)));
	for (i = 0; i < NQUEUE; i++) {
		struct place_request *r = &w->queue[i];
		int s = (int)(rnd() % 100), p = (int)(rnd() % 100), heavy = rnd() % 2;

		r->id = i + 1;
		r->user_id = 1 + rnd() % NUSERS;
		r->pool_id = rnd() % 10 < 8 ? POOL1 : POOL2;
		r->priority = p < 5 ? PRIO_EXAM : p < 85 ? PRIO_NORMAL : PRIO_SCAVENGER;
		r->slices = s < 70 ? 1 : s < 90 ? 2 : s < 97 ? 4 : 8;
		r->nodes = s == 99 ? 2 + (int)(rnd() % 3) : 1;
		r->cpu = r->slices * slice_cpu(r->pool_id) * (heavy ? 1 : 2) / 2;
		r->mem = r->slices * slice_mem(r->pool_id) * (heavy ? 1 : 2) / 2;
		r->submitted = 1700000000000000 + (int64_t)i * 1000;
		r->user_recent = recent[r->user_id];
		r->quota_slices = quota[r->user_id];
	}
}

static void world_free(struct world *w)
{
	free(w->nodes);
	free(w->first);
	free(w->slices);
	free(w->queue);
	free(w->running);
}

static struct place_input input_of(const struct world *w)
{
	struct place_input in = { w->nodes, w->nnodes, w->slices,  w->nslices,
		                  w->queue, w->nqueue, w->running, w->nrunning, NULL, 0 };

	return in;
}

/* ------------------------------------------------------------------------ */
/* The naive reference */

struct naive_scratch {
	int *order;
	int *free;
	int64_t *cpu, *mem;
	unsigned char *used;
	int *picked;
};

static int naive_pass(const struct place_input *in, struct naive_scratch *ns, int64_t *lat)
{
	int k, i, placed = 0;

	for (i = 0; i < in->nqueue; i++)
		ns->order[i] = i;
	sort_queue = in->queue;
	qsort(ns->order, (size_t)in->nqueue, sizeof(int), cmp_request);
	for (i = 0; i < in->nslices; i++)
		ns->used[i] = in->slices[i].used_by != 0;
	for (i = 0; i < in->nnodes; i++) {
		ns->cpu[i] = in->nodes[i].cpu_free;
		ns->mem[i] = in->nodes[i].mem_free;
	}
	for (k = 0; k < in->nqueue; k++) {
		const struct place_request *r = &in->queue[ns->order[k]];
		int64_t t0 = lat ? now_ns() : 0;
		int got = 0, n;

		memset(ns->free, 0, (size_t)in->nnodes * sizeof(int));
		for (i = 0; i < in->nslices; i++)
			if (!ns->used[i] && in->slices[i].pool_id == r->pool_id)
				ns->free[in->slices[i].node]++;
		for (n = 0; n < in->nnodes && got < r->nodes; n++)
			if (in->nodes[n].schedulable && ns->free[n] >= r->slices &&
			    ns->cpu[n] >= r->cpu && ns->mem[n] >= r->mem)
				ns->picked[got++] = n;
		if (got == r->nodes) {
			for (n = 0; n < got; n++) {
				int nd = ns->picked[n], left = r->slices;

				for (i = 0; i < in->nslices && left > 0; i++)
					if (!ns->used[i] && in->slices[i].node == nd &&
					    in->slices[i].pool_id == r->pool_id) {
						ns->used[i] = 1;
						left--;
					}
				ns->cpu[nd] -= r->cpu;
				ns->mem[nd] -= r->mem;
			}
			placed++;
		}
		if (lat)
			lat[k] = now_ns() - t0;
	}
	return placed;
}

/* ------------------------------------------------------------------------ */

static int cmp_ll(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

static double median_ms(int64_t *ns, int n)
{
	qsort(ns, (size_t)n, sizeof(*ns), cmp_ll);
	return (double)ns[n / 2] / 1e6;
}

static double p99_us(int64_t *ns, int n)
{
	qsort(ns, (size_t)n, sizeof(*ns), cmp_ll);
	return (double)ns[(n * 99) / 100] / 1e3;
}

static double rss_mib(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_maxrss / 1024.0;
}

/* Median pass time of ours and of the naive one, alternating. */
static void measure(const struct world *w, struct naive_scratch *ns, double *ours_ms,
                    double *naive_ms, int *ours_placed, int *naive_placed)
{
	struct place_input in = input_of(w);
	int64_t a[ROUNDS], b[ROUNDS];
	int i;

	for (i = 0; i < ROUNDS; i++) {
		int64_t t0 = now_ns();
		struct place_result *res = place_run(&in);

		a[i] = now_ns() - t0;
		must(res);
		*ours_placed = res->placed;
		place_result_free(res);
		t0 = now_ns();
		*naive_placed = naive_pass(&in, ns, NULL);
		b[i] = now_ns() - t0;
	}
	*ours_ms = median_ms(a, ROUNDS);
	*naive_ms = median_ms(b, ROUNDS);
}

int main(void)
{
	struct world busy = { 0 }, full = { 0 };
	struct naive_scratch ns;
	struct place_input in;
	struct place_result *res;
	double ours_ms, naive_ms, idle_ms, idle_naive_ms, rss_inputs, ours_p99, naive_p99;
	int ours_placed, naive_placed, idle_placed, idle_naive_placed, i, preempting = 0;
	int64_t *naive_lat;

	cluster(&busy);
	load(&busy, 0.30);
	enqueue(&busy);
	cluster(&full);
	load(&full, 1.0);
	enqueue(&full);

	ns.order = must(calloc(NQUEUE, sizeof(int)));
	ns.free = must(calloc(NA + NB, sizeof(int)));
	ns.cpu = must(calloc(NA + NB, sizeof(int64_t)));
	ns.mem = must(calloc(NA + NB, sizeof(int64_t)));
	ns.used = must(calloc((size_t)busy.nslices, 1));
	ns.picked = must(calloc(NA + NB, sizeof(int)));
	bench_lat = must(calloc(NQUEUE, sizeof(int64_t)));
	naive_lat = must(calloc(NQUEUE, sizeof(int64_t)));
	rss_inputs = rss_mib();

	measure(&busy, &ns, &ours_ms, &naive_ms, &ours_placed, &naive_placed);
	measure(&full, &ns, &idle_ms, &idle_naive_ms, &idle_placed, &idle_naive_placed);

	in = input_of(&busy);
	bench_timing = 1;
	bench_nlat = 0;
	res = must(place_run(&in));
	bench_timing = 0;
	place_result_free(res);
	ours_p99 = p99_us(bench_lat, bench_nlat);
	naive_pass(&in, &ns, naive_lat);
	naive_p99 = p99_us(naive_lat, NQUEUE);

	in = input_of(&full);
	res = must(place_run(&in));
	for (i = 0; i < res->ndecisions; i++)
		preempting += res->decisions[i].reason == REASON_PREEMPTING;
	place_result_free(res);

	fprintf(stderr,
	        "place: %d slices on %d nodes, %d running, %d queued; placed %d (naive %d); "
	        "full cluster: placed %d, %d preempting (naive placed %d)\n",
	        busy.nslices, busy.nnodes, busy.nrunning, NQUEUE, ours_placed, naive_placed,
	        idle_placed, preempting, idle_naive_placed);
	printf("pass_ms %.2f %.2f <1000\n", ours_ms, naive_ms);
	printf("placements_per_s %.0f %.0f >=10000\n", ours_placed / (ours_ms / 1e3),
	       naive_placed / (naive_ms / 1e3));
	printf("decision_p99_us %.2f %.2f <100\n", ours_p99, naive_p99);
	printf("idle_pass_ms %.2f %.2f <50\n", idle_ms, idle_naive_ms);
	printf("rss_mib %.1f %.1f <50\n", rss_mib(), rss_inputs);
	world_free(&busy);
	world_free(&full);
	free(ns.order);
	free(ns.free);
	free(ns.cpu);
	free(ns.mem);
	free(ns.used);
	free(ns.picked);
	free(bench_lat);
	free(naive_lat);
	return 0;
}
