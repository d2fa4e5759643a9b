/* test_place.c — the placement engine: ordering, quota, packing, gangs,
 * cpu/memory, reasons, backfill with reservations, preemption, positions
 * and determinism, each with an exact outcome. */
#include "sched/place.c"

#include "harness.h"

#include <stdlib.h>

#define POOL_A 7
#define POOL_B 8

struct world {
	struct place_node nodes[64];
	int nnodes;
	struct place_slice slices[2048];
	int nslices;
	struct place_request queue[512];
	int nqueue;
	struct place_running running[256];
	int nrunning;
	struct place_class classes[8];
	int nclasses;
};

static struct world w;

static void reset(void)
{
	memset(&w, 0, sizeof(w));
}

/* A schedulable node with `gpus` GPUs of `per_gpu` slices of pool; slice ids
 * are (node + 1) * 1000 + gpu * 10 + slot.  Returns its index. */
static int node(int64_t pool, int gpus, int per_gpu)
{
	int n = w.nnodes++, g, k;
	struct place_node *nd = &w.nodes[n];

	nd->id = 100 + n;
	nd->schedulable = 1;
	nd->cpu_total = nd->cpu_free = 64000;
	nd->mem_total = nd->mem_free = 512000;
	for (g = 0; g < gpus; g++)
		for (k = 0; k < per_gpu; k++) {
			struct place_slice *s = &w.slices[w.nslices++];

			s->id = (n + 1) * 1000 + g * 10 + k;
			s->node = n;
			s->pool_id = pool;
			s->gpu = g;
		}
	return n;
}

/* Marks the first n free slices of pool on node as held by request. */
static void hold(int nd, int64_t pool, int n, int64_t request)
{
	int i;

	for (i = 0; i < w.nslices && n > 0; i++)
		if (w.slices[i].node == nd && w.slices[i].pool_id == pool && !w.slices[i].used_by) {
			w.slices[i].used_by = request;
			n--;
		}
}

/* A running allocation of `slices` slices (and 1000 millicores, 1000 MiB per
 * slice) of pool on node. */
static void running(int64_t request, int64_t user, int64_t pool, enum place_priority prio, int nd,
                    int slices, int64_t started)
{
	struct place_running *rn = &w.running[w.nrunning++];

	rn->request_id = request;
	rn->user_id = user;
	rn->pool_id = pool;
	rn->priority = prio;
	rn->node = nd;
	rn->slices = slices;
	rn->cpu = 1000 * slices;
	rn->mem = 1000 * slices;
	rn->started = started;
	hold(nd, pool, slices, request);
	w.nodes[nd].cpu_free -= rn->cpu;
	w.nodes[nd].mem_free -= rn->mem;
}

static struct place_request *request(int64_t id, int64_t user, int64_t pool,
                                     enum place_priority prio, int slices, int nodes)
{
	struct place_request *r = &w.queue[w.nqueue++];

	r->id = id;
	r->user_id = user;
	r->pool_id = pool;
	r->priority = prio;
	r->slices = slices;
	r->nodes = nodes;
	r->cpu = 1000;
	r->mem = 1000;
	r->submitted = id;
	r->quota_slices = -1;
	return r;
}

static struct place_result *run(void)
{
	struct place_input in = { w.nodes, w.nnodes,   w.slices,  w.nslices,   w.queue,
		                  w.nqueue, w.running, w.nrunning, w.classes, w.nclasses };

	return place_run(&in);
}

static const struct place_decision *dec(const struct place_result *res, int64_t id)
{
	int i;

	for (i = 0; res && i < res->ndecisions; i++)
		if (res->decisions[i].request_id == id)
			return &res->decisions[i];
	return NULL;
}

/* The node index of a slice id. */
static int slice_node(int64_t id)
{
	return (int)(id / 1000) - 1;
}

static int chosen_has(const struct place_decision *d, int64_t id)
{
	int i;

	for (i = 0; i < d->nchosen; i++)
		if (d->chosen[i] == id)
			return 1;
	return 0;
}

/* ------------------------------------------------------------------------ */

TEST(test_priority_order)
{
	struct place_result *res;

	reset();
	node(POOL_A, 4, 1);
	request(1, 10, POOL_A, PRIO_NORMAL, 4, 1);
	request(2, 11, POOL_A, PRIO_EXAM, 4, 1);
	res = run();
	CHECK(res && res->placed == 1);
	CHECK(res->decisions[0].request_id == 2);
	CHECK(dec(res, 2)->reason == REASON_NONE && dec(res, 2)->nchosen == 4);
	CHECK(dec(res, 1)->reason == REASON_CAPACITY);
	CHECK_STR(dec(res, 1)->message,
	          "no node has 4 free slices of this pool now (most free: 0)");
	CHECK(dec(res, 1)->position == 1);
	place_result_free(res);
}

TEST(test_fair_share)
{
	struct place_result *res;

	reset();
	node(POOL_A, 2, 1);
	request(1, 10, POOL_A, PRIO_NORMAL, 2, 1)->user_recent = 5000;
	request(2, 11, POOL_A, PRIO_NORMAL, 2, 1)->user_recent = 100;
	res = run();
	CHECK(res->placed == 1);
	CHECK(dec(res, 2)->reason == REASON_NONE);
	CHECK(dec(res, 1)->reason == REASON_CAPACITY);
	place_result_free(res);
}

TEST(test_submit_then_id)
{
	struct place_result *res;

	reset();
	node(POOL_A, 1, 1);
	request(5, 10, POOL_A, PRIO_NORMAL, 1, 1)->submitted = 200;
	request(6, 11, POOL_A, PRIO_NORMAL, 1, 1)->submitted = 100;
	res = run();
	CHECK(dec(res, 6)->reason == REASON_NONE);
	CHECK(dec(res, 5)->reason == REASON_CAPACITY);
	place_result_free(res);

	reset();
	node(POOL_A, 1, 1);
	request(9, 10, POOL_A, PRIO_NORMAL, 1, 1)->submitted = 100;
	request(8, 11, POOL_A, PRIO_NORMAL, 1, 1)->submitted = 100;
	res = run();
	CHECK(dec(res, 8)->reason == REASON_NONE);
	CHECK(dec(res, 9)->reason == REASON_CAPACITY);
	CHECK(res->decisions[0].request_id == 8 && res->decisions[1].request_id == 9);
	place_result_free(res);
}

TEST(test_quota_full)
{
	struct place_result *res;
	int n;

	reset();
	n = node(POOL_A, 8, 1);
	running(50, 10, POOL_A, PRIO_NORMAL, n, 4, 1);
	request(1, 10, POOL_A, PRIO_NORMAL, 1, 1)->quota_slices = 4;
	request(2, 11, POOL_A, PRIO_NORMAL, 1, 1)->quota_slices = 4;
	res = run();
	CHECK(dec(res, 1)->reason == REASON_QUOTA);
	CHECK_STR(dec(res, 1)->message, "user quota: 4 of 4 slices of this pool in use");
	CHECK(dec(res, 1)->nchosen == 0);
	CHECK(dec(res, 2)->reason == REASON_NONE);
	CHECK_STR(place_reason_code(dec(res, 1)->reason), "quota");
	place_result_free(res);
}

TEST(test_quota_running_counts)
{
	struct place_result *res;
	int n;

	reset();
	n = node(POOL_A, 8, 1);
	node(POOL_B, 8, 1);
	running(50, 10, POOL_A, PRIO_NORMAL, n, 3, 1);
	running(51, 10, POOL_B, PRIO_NORMAL, 1, 4, 1); /* another pool: not counted */
	request(1, 10, POOL_A, PRIO_NORMAL, 2, 1)->quota_slices = 4;
	request(2, 10, POOL_A, PRIO_NORMAL, 1, 1)->quota_slices = 4;
	res = run();
	CHECK(dec(res, 1)->reason == REASON_QUOTA);
	CHECK_STR(dec(res, 1)->message,
	          "user quota: 3 of 4 slices of this pool in use; this needs 2");
	CHECK(dec(res, 2)->reason == REASON_NONE);
	place_result_free(res);
}

TEST(test_quota_same_pass)
{
	struct place_result *res;

	reset();
	node(POOL_A, 8, 1);
	request(1, 10, POOL_A, PRIO_NORMAL, 3, 1)->quota_slices = 4;
	request(2, 10, POOL_A, PRIO_NORMAL, 2, 1)->quota_slices = 4;
	request(3, 10, POOL_A, PRIO_NORMAL, 1, 1)->quota_slices = 4;
	request(4, 10, POOL_A, PRIO_NORMAL, 1, 1)->quota_slices = 4;
	res = run();
	CHECK(dec(res, 1)->reason == REASON_NONE);
	CHECK(dec(res, 2)->reason == REASON_QUOTA);
	CHECK_STR(dec(res, 2)->message,
	          "user quota: 3 of 4 slices of this pool in use; this needs 2");
	CHECK(dec(res, 3)->reason == REASON_NONE);
	CHECK(dec(res, 4)->reason == REASON_QUOTA);
	CHECK_STR(dec(res, 4)->message, "user quota: 4 of 4 slices of this pool in use");
	CHECK(res->placed == 2);
	place_result_free(res);
}

TEST(test_quota_cpu_mem)
{
	struct place_result *res;

	reset();
	node(POOL_A, 8, 1);
	running(50, 10, POOL_A, PRIO_NORMAL, 0, 1, 1); /* holds 1000 millicores, 1000 MiB */
	request(1, 10, POOL_A, PRIO_NORMAL, 1, 1)->quota_cpu = 2500;
	request(2, 10, POOL_A, PRIO_NORMAL, 1, 1)->quota_cpu = 2500;
	request(3, 11, POOL_A, PRIO_NORMAL, 1, 1)->quota_mem = 500;
	request(4, 12, POOL_A, PRIO_NORMAL, 1, 2)->quota_mem = 1500; /* 2 nodes x 1000 MiB */
	res = run();
	CHECK(dec(res, 1)->reason == REASON_NONE);
	CHECK(dec(res, 2)->reason == REASON_QUOTA);
	CHECK_STR(
	        dec(res, 2)->message,
	        "user quota: 2000 of 2500 millicores of cpu of this pool in use; this needs 1000");
	CHECK(dec(res, 3)->reason == REASON_QUOTA);
	CHECK_STR(dec(res, 3)->message,
	          "user quota: 0 of 500 MiB of memory of this pool in use; this needs 1000");
	CHECK(dec(res, 4)->reason == REASON_CANNOT_RUN); /* 2 nodes of 1 */
	place_result_free(res);
}

TEST(test_best_fit)
{
	struct place_result *res;
	int a, b, c;

	reset();
	a = node(POOL_A, 8, 1); /* empty: 8 free */
	b = node(POOL_A, 8, 1);
	c = node(POOL_A, 8, 1);
	running(50, 90, POOL_A, PRIO_NORMAL, b, 5, 1); /* 3 free */
	running(51, 90, POOL_A, PRIO_NORMAL, c, 6, 1); /* 2 free */
	request(1, 10, POOL_A, PRIO_NORMAL, 3, 1);
	request(2, 11, POOL_A, PRIO_NORMAL, 2, 1);
	request(3, 12, POOL_A, PRIO_NORMAL, 1, 1);
	res = run();
	CHECK(res->placed == 3);
	/* 3 slices: b (0 left) beats a (5 left); c cannot */
	CHECK(slice_node(dec(res, 1)->chosen[0]) == b);
	CHECK(slice_node(dec(res, 1)->chosen[2]) == b);
	/* 2 slices: c, the fullest that fits */
	CHECK(slice_node(dec(res, 2)->chosen[0]) == c);
	/* 1 slice: only a has room now */
	CHECK(slice_node(dec(res, 3)->chosen[0]) == a);
	place_result_free(res);
}

TEST(test_keeps_empty_node)
{
	struct place_result *res;
	int b;

	reset();
	node(POOL_A, 8, 1);
	b = node(POOL_A, 8, 1);
	node(POOL_A, 8, 1);
	running(50, 90, POOL_A, PRIO_NORMAL, b, 1, 1);
	request(1, 10, POOL_A, PRIO_NORMAL, 1, 1);
	request(2, 11, POOL_A, PRIO_NORMAL, 2, 1);
	res = run();
	CHECK(slice_node(dec(res, 1)->chosen[0]) == b);
	CHECK(slice_node(dec(res, 2)->chosen[0]) == b);
	CHECK(slice_node(dec(res, 2)->chosen[1]) == b);
	place_result_free(res);
}

TEST(test_partly_used_gpu_first)
{
	struct place_result *res;
	int n;

	reset();
	n = node(POOL_A, 2, 4); /* 2 GPUs x 4 shared slots */
	/* slot 2 of GPU 1 is in use */
	w.slices[6].used_by = 50;
	running(50, 90, POOL_A, PRIO_NORMAL, n, 0, 1);
	w.running[0].slices = 1;
	request(1, 10, POOL_A, PRIO_NORMAL, 2, 1);
	request(2, 11, POOL_A, PRIO_NORMAL, 3, 1);
	res = run();
	/* GPU 1's free slots, lowest index first */
	CHECK(dec(res, 1)->nchosen == 2);
	CHECK(dec(res, 1)->chosen[0] == 1010 && dec(res, 1)->chosen[1] == 1011);
	/* then its last slot, then GPU 0 from its lowest slot */
	CHECK(dec(res, 2)->chosen[0] == 1013 && dec(res, 2)->chosen[1] == 1000 &&
	      dec(res, 2)->chosen[2] == 1001);
	place_result_free(res);
}

TEST(test_one_request_keeps_to_one_gpu)
{
	struct place_result *res;

	reset();
	node(POOL_A, 2, 2);
	/* slices listed GPU-interleaved: a fresh request still fills one GPU */
	w.slices[1].gpu = 1;
	w.slices[2].gpu = 0;
	request(1, 10, POOL_A, PRIO_NORMAL, 2, 1);
	res = run();
	CHECK(dec(res, 1)->chosen[0] == w.slices[0].id && dec(res, 1)->chosen[1] == w.slices[2].id);
	place_result_free(res);
}

TEST(test_gang_all_or_nothing)
{
	struct place_result *res;
	const struct place_decision *d;
	int i, j, n3;

	reset();
	node(POOL_A, 8, 1);
	node(POOL_A, 8, 1);
	n3 = node(POOL_A, 8, 1);
	running(50, 90, POOL_A, PRIO_NORMAL, n3, 6, 1);
	request(1, 10, POOL_A, PRIO_NORMAL, 2, 4);
	res = run();
	d = dec(res, 1);
	CHECK(res->placed == 0);
	/* three nodes could ever hold it: fewer than 4 can never run */
	CHECK(d->reason == REASON_CANNOT_RUN);
	CHECK_STR(d->message, "needs 4 nodes in this pool that can each hold it; only 3 can; ask "
	                      "for at most 3 nodes");
	place_result_free(res);

	node(POOL_A, 8, 1);
	running(51, 90, POOL_A, PRIO_NORMAL, 3, 7, 1); /* the fourth: 1 free */
	res = run();
	d = dec(res, 1);
	CHECK(res->placed == 0 && d->nchosen == 0);
	CHECK(d->reason == REASON_GANG);
	CHECK_STR(d->message, "needs 4 nodes with 2 free slices each; 3 have room");
	place_result_free(res);

	w.nrunning = 1;
	for (i = 0; i < w.nslices; i++)
		if (w.slices[i].used_by == 51)
			w.slices[i].used_by = 0;
	w.nodes[3].cpu_free = w.nodes[3].cpu_total;
	w.nodes[3].mem_free = w.nodes[3].mem_total;
	res = run();
	d = dec(res, 1);
	CHECK(res->placed == 1 && d->reason == REASON_NONE && d->nchosen == 8);
	for (i = 0; i < 8; i += 2) {
		CHECK(slice_node(d->chosen[i]) == slice_node(d->chosen[i + 1]));
		for (j = i + 2; j < 8; j += 2)
			CHECK(slice_node(d->chosen[i]) != slice_node(d->chosen[j]));
	}
	/* best fit: the fullest node (n3) comes first */
	CHECK(slice_node(d->chosen[0]) == n3);
	place_result_free(res);
}

TEST(test_gang_no_slices_consumed)
{
	struct place_result *res;

	reset();
	node(POOL_A, 2, 1);
	node(POOL_A, 2, 1);
	node(POOL_A, 2, 1);
	running(50, 90, POOL_A, PRIO_NORMAL, 2, 1, 1);
	/* a scavenger gang: no reservation, so what it did not take stays usable */
	request(1, 10, POOL_A, PRIO_SCAVENGER, 2, 3);
	request(2, 11, POOL_A, PRIO_SCAVENGER, 2, 2);
	res = run();
	CHECK(dec(res, 1)->reason == REASON_GANG && dec(res, 1)->nchosen == 0);
	CHECK_STR(dec(res, 1)->message, "needs 3 nodes with 2 free slices each; 2 have room");
	CHECK(dec(res, 2)->reason == REASON_NONE && dec(res, 2)->nchosen == 4);
	place_result_free(res);
}

TEST(test_cpu_mem)
{
	struct place_result *res;
	int a, b;

	reset();
	a = node(POOL_A, 8, 1);
	b = node(POOL_A, 8, 1);
	running(50, 90, POOL_A, PRIO_NORMAL, a, 4, 1); /* a is the best fit by slices */
	w.nodes[a].cpu_free = 2000;
	request(1, 10, POOL_A, PRIO_NORMAL, 2, 1)->cpu = 4000;
	request(2, 11, POOL_A, PRIO_NORMAL, 2, 1)->mem = 600000;
	res = run();
	CHECK(slice_node(dec(res, 1)->chosen[0]) == b);
	CHECK(dec(res, 2)->reason == REASON_CANNOT_RUN);
	CHECK_STR(dec(res, 2)->message,
	          "no node in this pool with 2 slices can ever give 600000 MiB of memory: the "
	          "largest has 512000 MiB; ask for at most 512000 MiB of memory");
	place_result_free(res);

	reset();
	a = node(POOL_A, 8, 1);
	w.nodes[a].cpu_free = 1000;
	request(1, 10, POOL_A, PRIO_NORMAL, 2, 1)->cpu = 4000;
	res = run();
	CHECK(dec(res, 1)->reason == REASON_CAPACITY);
	CHECK_STR(dec(res, 1)->message,
	          "no node has 2 free slices of this pool with 4000 millicores "
	          "of cpu and 1000 MiB of memory free now");
	place_result_free(res);
}

/* A request without a pool (CPU-only work) takes cpu and memory of a node:
 * best fit on cpu, counted for later requests of the pass, waits with a
 * reason when no node has room, and counts under pool 0 for quota. */
TEST(test_cpu_only)
{
	struct place_result *res;
	struct place_request *r;
	int a, b;

	reset();
	a = node(POOL_A, 2, 1);
	b = node(POOL_A, 2, 1);
	w.nodes[a].cpu_free = 3000;
	w.nodes[b].cpu_free = 1500;
	r = request(1, 10, 0, PRIO_NORMAL, 0, 1);
	r->cpu = 1000;
	r = request(2, 10, 0, PRIO_NORMAL, 0, 1);
	r->cpu = 1000;
	r = request(3, 11, 0, PRIO_NORMAL, 0, 1);
	r->cpu = 2500;
	r = request(4, 12, 0, PRIO_NORMAL, 0, 1);
	r->cpu = 100000;
	r = request(5, 13, 0, PRIO_NORMAL, 0, 1);
	r->quota_block = 1;
	r = request(6, 10, 0, PRIO_NORMAL, 0, 1);
	r->cpu = 100;
	r->quota_cpu = 2000; /* 1 and 2 hold 2000 already */
	res = run();
	CHECK(dec(res, 1)->reason == REASON_NONE);
	CHECK(dec(res, 1)->node_id == w.nodes[b].id); /* best fit: least cpu left */
	CHECK(dec(res, 1)->nchosen == 0);
	CHECK(dec(res, 2)->reason == REASON_NONE);
	CHECK(dec(res, 2)->node_id == w.nodes[a].id); /* b has 500 left */
	CHECK(dec(res, 3)->reason == REASON_CAPACITY);
	CHECK_STR(dec(res, 3)->message,
	          "no node has 2500 millicores of cpu and 1000 MiB of memory free now");
	CHECK(dec(res, 3)->position == 1);
	CHECK(dec(res, 4)->reason == REASON_CANNOT_RUN);
	CHECK_STR(dec(res, 4)->message,
	          "no node in the cluster can ever give 100000 millicores of cpu: the largest "
	          "has 64 CPU cores; ask for at most 64000 millicores of cpu");
	CHECK(dec(res, 5)->reason == REASON_QUOTA);
	CHECK(dec(res, 6)->reason == REASON_QUOTA);
	CHECK(res->placed == 2);
	place_result_free(res);

	/* CPU-only work that runs counts against the node for GPU requests */
	reset();
	a = node(POOL_A, 2, 1);
	w.nodes[a].cpu_free = 500;
	request(1, 10, POOL_A, PRIO_NORMAL, 1, 1);
	res = run();
	CHECK(dec(res, 1)->reason == REASON_CAPACITY);
	place_result_free(res);
}

TEST(test_too_big)
{
	struct place_result *res;

	reset();
	node(POOL_A, 8, 1);
	node(POOL_A, 4, 1);
	request(1, 10, POOL_A, PRIO_NORMAL, 9, 1);
	request(2, 10, POOL_A, PRIO_NORMAL, 2, 1)->cpu = 100000;
	request(3, 10, POOL_A, PRIO_NORMAL, 8, 2);
	res = run();
	CHECK(dec(res, 1)->reason == REASON_CANNOT_RUN);
	CHECK_STR(dec(res, 1)->message,
	          "no node in this pool has 9 slices: the largest has 8; ask for at most 8 slices");
	CHECK(dec(res, 2)->reason == REASON_CANNOT_RUN);
	CHECK_STR(dec(res, 2)->message,
	          "no node in this pool with 2 slices can ever give 100000 millicores of cpu: the "
	          "largest has 64 CPU cores; ask for at most 64000 millicores of cpu");
	CHECK(dec(res, 3)->reason == REASON_CANNOT_RUN);
	CHECK_STR(dec(res, 3)->message, "needs 2 nodes in this pool that can each hold it; only 1 "
	                                "can; ask for at most 1 node");
	CHECK_STR(place_reason_code(REASON_CANNOT_RUN), "cannot_run_as_asked");
	CHECK(res->placed == 0);
	CHECK(dec(res, 1)->position == 1 && dec(res, 3)->position == 3);
	place_result_free(res);

	/* the big node is down (it may come back): too big for now, not for
	 * ever; cordoned (declared dead), it counts no more */
	reset();
	node(POOL_A, 8, 1);
	node(POOL_A, 4, 1);
	w.nodes[0].schedulable = 0;
	request(1, 10, POOL_A, PRIO_NORMAL, 6, 1);
	request(2, 10, 0, PRIO_NORMAL, 0, 1)->cpu = 100000;
	res = run();
	CHECK(dec(res, 1)->reason == REASON_TOO_BIG);
	CHECK_STR(dec(res, 1)->message,
	          "no node taking work now can hold 6 slices of this pool (largest: 4)");
	CHECK(dec(res, 2)->reason == REASON_CANNOT_RUN);
	CHECK_STR(place_reason_code(REASON_TOO_BIG), "too_big");
	place_result_free(res);
	w.nodes[0].cordoned = 1;
	res = run();
	CHECK(dec(res, 1)->reason == REASON_CANNOT_RUN);
	CHECK_STR(dec(res, 1)->message,
	          "no node in this pool has 6 slices: the largest has 4; ask for at most 4 slices");
	place_result_free(res);

	/* a node whose cpu and memory are not known yet limits nothing: it may
	 * be big enough (too big for now) */
	w.nodes[0].cordoned = 0;
	w.nodes[0].cpu_total = w.nodes[0].mem_total = 0;
	res = run();
	CHECK(dec(res, 1)->reason == REASON_TOO_BIG);
	CHECK(dec(res, 2)->reason == REASON_TOO_BIG);
	place_result_free(res);

	/* every node of the pool cordoned: nothing to compare with, it waits
	 * for a node (an admin may add one) */
	w.nodes[0].cordoned = w.nodes[1].cordoned = 1;
	w.nodes[1].schedulable = 0;
	res = run();
	CHECK(dec(res, 1)->reason == REASON_NO_NODES);
	place_result_free(res);
}

/* The pure "could it ever fit" computation: the first dimension that no
 * node could give, and the most it could be with the others as asked. */
TEST(test_max_fit)
{
	struct place_cap caps[] = {
		{ 8, 2000, 16384 }, /* many slices, little cpu */
		{ 2, 64000, 4096 }, /* much cpu, little memory */
		{ 4, 16000, 65536 },
	};
	struct place_fit_r f = { 9, 1, 100, 100, FIT_OK, 0 };
	char msg[240], hint[96];

	CHECK(place_max_fit(caps, 3, &f) == FIT_SLICES && f.most == 8);
	place_fit_say(&f, "pool 'a100'", msg, sizeof(msg), hint, sizeof(hint));
	CHECK_STR(msg, "no node in pool 'a100' has 9 slices: the largest has 8");
	CHECK_STR(hint, "ask for at most 8 slices");
	/* 5 slices: only the 8-slice node, with 2 cores */
	f = (struct place_fit_r){ 5, 1, 16000, 100, FIT_OK, 0 };
	CHECK(place_max_fit(caps, 3, &f) == FIT_CPU && f.most == 2000);
	place_fit_say(&f, "pool 'a100'", msg, sizeof(msg), hint, sizeof(hint));
	CHECK_STR(msg, "no node in pool 'a100' with 5 slices can ever give 16000 millicores of "
	               "cpu: the largest has 2 CPU cores");
	CHECK_STR(hint, "ask for at most 2000 millicores of cpu");
	/* 2 slices and 32 cores: only the 2-slice node, with 4 GiB */
	f = (struct place_fit_r){ 2, 1, 32000, 8192, FIT_OK, 0 };
	CHECK(place_max_fit(caps, 3, &f) == FIT_MEM && f.most == 4096);
	/* 2 slices, 4 cores, 8 GiB: nodes 0 and 2 hold it (any one each) */
	f = (struct place_fit_r){ 2, 2, 1500, 8192, FIT_OK, 0 };
	CHECK(place_max_fit(caps, 3, &f) == FIT_OK);
	f.nodes = 4;
	CHECK(place_max_fit(caps, 3, &f) == FIT_NODES && f.most == 2);
	place_fit_say(&f, "pool 'a100'", msg, sizeof(msg), NULL, 0);
	CHECK_STR(msg, "needs 4 nodes in pool 'a100' that can each hold it; only 2 can");
	/* CPU-only work (no slices) and a fractional core count */
	struct place_cap small[] = { { 0, 1500, 2048 }, { 0, 1000, 1024 } };
	f = (struct place_fit_r){ 0, 1, 16000, 64, FIT_OK, 0 };
	CHECK(place_max_fit(small, 2, &f) == FIT_CPU && f.most == 1500);
	place_fit_say(&f, "the cluster", msg, sizeof(msg), hint, sizeof(hint));
	CHECK_STR(msg, "no node in the cluster can ever give 16000 millicores of cpu: the largest "
	               "has 1.5 CPU cores");
	/* exactly the largest fits; no node at all has nothing to say */
	f = (struct place_fit_r){ 0, 1, 1500, 2048, FIT_OK, 0 };
	CHECK(place_max_fit(small, 2, &f) == FIT_OK);
	CHECK(place_max_fit(small, 0, &f) == FIT_NO_NODES);
	/* unknown cpu or memory (0) limits nothing */
	small[1].cpu = 0;
	f = (struct place_fit_r){ 0, 1, 16000, 64, FIT_OK, 0 };
	CHECK(place_max_fit(small, 2, &f) == FIT_OK);
	small[1].mem = 0;
	f = (struct place_fit_r){ 0, 2, 1000, 1 << 30, FIT_OK, 0 };
	CHECK(place_max_fit(small, 2, &f) == FIT_NODES && f.most == 1);
}

/* A request over the user's own limit by itself can never run as asked:
 * the caller says so (quota_block 2). */
TEST(test_quota_never)
{
	struct place_result *res;

	reset();
	node(POOL_A, 4, 1);
	request(1, 10, POOL_A, PRIO_NORMAL, 1, 1)->quota_block = 2;
	request(2, 10, 0, PRIO_NORMAL, 0, 1)->quota_block = 2;
	request(3, 10, POOL_A, PRIO_NORMAL, 1, 1)->quota_block = 1;
	res = run();
	CHECK(dec(res, 1)->reason == REASON_CANNOT_RUN);
	CHECK(dec(res, 2)->reason == REASON_CANNOT_RUN);
	CHECK(dec(res, 3)->reason == REASON_QUOTA);
	CHECK(res->placed == 0);
	place_result_free(res);
}

TEST(test_no_nodes)
{
	struct place_result *res;

	reset();
	node(POOL_A, 8, 1);
	node(POOL_A, 8, 1);
	w.nodes[0].schedulable = 0;
	w.nodes[1].schedulable = 0;
	request(1, 10, POOL_A, PRIO_NORMAL, 1, 1);
	request(2, 10, 999, PRIO_NORMAL, 1, 1); /* a pool with no slices at all */
	res = run();
	CHECK(dec(res, 1)->reason == REASON_NO_NODES);
	CHECK_STR(dec(res, 1)->message, "the pool has no schedulable node");
	CHECK(dec(res, 2)->reason == REASON_NO_NODES);
	CHECK(dec(res, 1)->position == 1 && dec(res, 2)->position == 1);
	place_result_free(res);
}

/* A degraded node (up, active, its engine failing to start containers) is
 * not schedulable; the pool says why (0019).  Capacity elsewhere wins. */
TEST(test_degraded)
{
	struct place_result *res;
	int a, b;

	reset();
	a = node(POOL_A, 8, 1);
	b = node(POOL_A, 8, 1);
	w.nodes[a].schedulable = 0;
	w.nodes[b].schedulable = 0;
	w.nodes[b].degraded = 1;
	request(1, 10, POOL_A, PRIO_NORMAL, 1, 1);
	request(2, 11, 0, PRIO_NORMAL, 0, 1); /* CPU only: any node */
	res = run();
	CHECK(dec(res, 1)->reason == REASON_DEGRADED);
	CHECK_STR(place_reason_code(dec(res, 1)->reason), "degraded");
	CHECK(strstr(dec(res, 1)->message, "degraded") != NULL);
	CHECK(dec(res, 2)->reason == REASON_DEGRADED);
	CHECK(strstr(dec(res, 2)->message, "): 1") != NULL);
	place_result_free(res);

	/* the other node is schedulable again: placed there, never on b */
	w.nodes[a].schedulable = 1;
	res = run();
	CHECK(dec(res, 1)->reason == REASON_NONE);
	CHECK(dec(res, 1)->nchosen == 1);
	CHECK(slice_node(dec(res, 1)->chosen[0]) == a);
	CHECK(dec(res, 2)->reason == REASON_NONE && dec(res, 2)->node_id == w.nodes[a].id);
	place_result_free(res);
}

TEST(test_backfill)
{
	struct place_result *res;
	int a, b, i, k;

	reset();
	a = node(POOL_A, 8, 1);
	b = node(POOL_A, 8, 1);
	running(50, 90, POOL_A, PRIO_NORMAL, a, 5, 1);
	running(51, 90, POOL_A, PRIO_NORMAL, b, 5, 1);
	request(1, 10, POOL_A, PRIO_NORMAL, 4, 1);
	for (i = 0; i < 4; i++)
		request(2 + i, 11 + i, POOL_A, PRIO_NORMAL, 1, 1);
	request(6, 20, POOL_A, PRIO_NORMAL, 3, 1);
	res = run();
	CHECK(dec(res, 1)->reason == REASON_CAPACITY);
	CHECK_STR(dec(res, 1)->message,
	          "no node has 4 free slices of this pool now (most free: 3)");
	/* a (lowest index among the most free) is reserved: small ones go to b */
	CHECK(dec(res, 2)->reason == REASON_NONE && slice_node(dec(res, 2)->chosen[0]) == b);
	CHECK(dec(res, 3)->reason == REASON_NONE && slice_node(dec(res, 3)->chosen[0]) == b);
	CHECK(dec(res, 4)->reason == REASON_NONE && slice_node(dec(res, 4)->chosen[0]) == b);
	CHECK(dec(res, 5)->reason == REASON_RESERVED);
	CHECK_STR(dec(res, 5)->message, "room is reserved for an earlier request");
	CHECK(dec(res, 6)->reason == REASON_RESERVED);
	/* no starvation: nothing in the pass took the head's node */
	for (i = 0; i < res->ndecisions; i++)
		for (k = 0; k < res->decisions[i].nchosen; k++)
			CHECK(slice_node(res->decisions[i].chosen[k]) != a);
	CHECK(dec(res, 1)->position == 1 && dec(res, 5)->position == 2 &&
	      dec(res, 6)->position == 3);
	place_result_free(res);
}

TEST(test_scavenger_no_reservation)
{
	struct place_result *res;
	int a, b;

	reset();
	a = node(POOL_A, 8, 1);
	b = node(POOL_A, 8, 1);
	running(50, 90, POOL_A, PRIO_NORMAL, a, 5, 1);
	running(51, 90, POOL_A, PRIO_NORMAL, b, 5, 1);
	request(1, 10, POOL_A, PRIO_SCAVENGER, 4, 1);
	request(2, 11, POOL_A, PRIO_SCAVENGER, 1, 1);
	res = run();
	CHECK(dec(res, 1)->reason == REASON_CAPACITY);
	/* nothing reserved: best fit ties to the lowest index, a */
	CHECK(dec(res, 2)->reason == REASON_NONE && slice_node(dec(res, 2)->chosen[0]) == a);
	place_result_free(res);
}

TEST(test_preempt_youngest_minimal)
{
	struct place_result *res;
	const struct place_decision *d;
	int n;

	reset();
	n = node(POOL_A, 8, 1);
	running(60, 90, POOL_A, PRIO_SCAVENGER, n, 2, 10);
	running(61, 91, POOL_A, PRIO_SCAVENGER, n, 2, 20);
	running(62, 92, POOL_A, PRIO_SCAVENGER, n, 4, 30);
	request(1, 10, POOL_A, PRIO_EXAM, 6, 1);
	res = run();
	d = dec(res, 1);
	CHECK(d->reason == REASON_PREEMPTING);
	CHECK_STR(d->message, "waiting for 2 scavenger allocations to stop");
	CHECK(d->nvictims == 2 && d->victims[0] == 62 && d->victims[1] == 61);
	CHECK(d->nchosen == 0 && res->placed == 0);
	CHECK_STR(place_reason_code(d->reason), "preempting");
	place_result_free(res);

	/* 2 slices: one victim does; the youngest */
	w.queue[0].slices = 2;
	res = run();
	d = dec(res, 1);
	CHECK(d->reason == REASON_PREEMPTING && d->nvictims == 1 && d->victims[0] == 62);
	CHECK_STR(d->message, "waiting for 1 scavenger allocation to stop");
	place_result_free(res);
}

TEST(test_preempt_prunes_oldest_unneeded)
{
	struct place_result *res;
	const struct place_decision *d;
	int n;

	reset();
	n = node(POOL_A, 7, 1);
	running(60, 90, POOL_A, PRIO_SCAVENGER, n, 2, 30);
	running(61, 91, POOL_A, PRIO_SCAVENGER, n, 2, 20);
	running(62, 92, POOL_A, PRIO_SCAVENGER, n, 3, 10);
	/* 5 slices: youngest first takes all three; 61 is the oldest not needed */
	request(1, 10, POOL_A, PRIO_NORMAL, 5, 1);
	res = run();
	d = dec(res, 1);
	CHECK(d->reason == REASON_PREEMPTING && d->nvictims == 2);
	CHECK(d->victims[0] == 60 && d->victims[1] == 62);
	place_result_free(res);

	/* 3 slices: youngest first needs two (60, 61); the 3-slice one alone does */
	w.queue[0].slices = 3;
	res = run();
	d = dec(res, 1);
	CHECK(d->reason == REASON_PREEMPTING && d->nvictims == 1 && d->victims[0] == 62);
	place_result_free(res);
}

TEST(test_preempt_fewest_victims)
{
	struct place_result *res;
	const struct place_decision *d;
	int a, b;

	reset();
	a = node(POOL_A, 4, 1);
	b = node(POOL_A, 4, 1);
	/* a: four young 1-slice scavengers; b: one old 4-slice one */
	running(60, 90, POOL_A, PRIO_SCAVENGER, a, 1, 50);
	running(61, 90, POOL_A, PRIO_SCAVENGER, a, 1, 51);
	running(62, 90, POOL_A, PRIO_SCAVENGER, a, 1, 52);
	running(63, 90, POOL_A, PRIO_SCAVENGER, a, 1, 53);
	running(64, 91, POOL_A, PRIO_SCAVENGER, b, 4, 5);
	request(1, 10, POOL_A, PRIO_NORMAL, 3, 1);
	request(2, 11, POOL_A, PRIO_NORMAL, 1, 1);
	res = run();
	d = dec(res, 1);
	CHECK(d->reason == REASON_PREEMPTING && d->nvictims == 1 && d->victims[0] == 64);
	/* the next one may not preempt on b (reserved, its victim is going) */
	d = dec(res, 2);
	CHECK(d->reason == REASON_PREEMPTING && d->nvictims == 1 && d->victims[0] == 63);
	place_result_free(res);
}

TEST(test_preempt_only_scavengers_of_others)
{
	struct place_result *res;
	int n;

	reset();
	n = node(POOL_A, 4, 1);
	running(60, 90, POOL_A, PRIO_NORMAL, n, 2, 10);
	running(61, 10, POOL_A, PRIO_SCAVENGER, n, 2, 20); /* request 1's own user */
	request(1, 10, POOL_A, PRIO_EXAM, 2, 1);
	request(2, 12, POOL_A, PRIO_SCAVENGER, 2, 1);
	res = run();
	CHECK(dec(res, 1)->reason == REASON_CAPACITY && dec(res, 1)->nvictims == 0);
	CHECK(dec(res, 2)->reason == REASON_CAPACITY && dec(res, 2)->nvictims == 0);
	place_result_free(res);

	/* another user's normal request may stop the scavenger, never the normal one */
	w.queue[0].user_id = 11;
	w.queue[0].slices = 4;
	res = run();
	CHECK(dec(res, 1)->reason == REASON_CAPACITY && dec(res, 1)->nvictims == 0);
	w.queue[0].slices = 2;
	place_result_free(res);
	res = run();
	CHECK(dec(res, 1)->reason == REASON_PREEMPTING && dec(res, 1)->nvictims == 1 &&
	      dec(res, 1)->victims[0] == 61);
	/* a scavenger request never preempts */
	CHECK(dec(res, 2)->reason == REASON_CAPACITY && dec(res, 2)->nvictims == 0);
	place_result_free(res);
}

TEST(test_preempt_gang_victim_once)
{
	struct place_result *res;
	int a, b;

	reset();
	a = node(POOL_A, 2, 1);
	b = node(POOL_A, 2, 1);
	/* one scavenger gang on both nodes */
	running(60, 90, POOL_A, PRIO_SCAVENGER, a, 2, 10);
	running(60, 90, POOL_A, PRIO_SCAVENGER, b, 2, 10);
	request(1, 10, POOL_A, PRIO_NORMAL, 2, 1);
	request(2, 11, POOL_A, PRIO_NORMAL, 2, 1);
	res = run();
	CHECK(dec(res, 1)->reason == REASON_PREEMPTING && dec(res, 1)->nvictims == 1 &&
	      dec(res, 1)->victims[0] == 60);
	/* its stop frees b too, but not within this pass: no second victim */
	CHECK(dec(res, 2)->reason == REASON_CAPACITY && dec(res, 2)->nvictims == 0);
	place_result_free(res);
}

TEST(test_positions_per_pool)
{
	struct place_result *res;

	reset();
	node(POOL_A, 1, 1);
	node(POOL_B, 1, 1);
	request(1, 10, POOL_A, PRIO_NORMAL, 1, 1);
	request(2, 11, POOL_B, PRIO_NORMAL, 1, 1);
	request(3, 12, POOL_A, PRIO_NORMAL, 1, 1);
	request(4, 13, POOL_B, PRIO_NORMAL, 1, 1);
	request(5, 14, POOL_A, PRIO_NORMAL, 1, 1);
	res = run();
	CHECK(dec(res, 1)->position == 0 && dec(res, 2)->position == 0);
	CHECK(dec(res, 3)->position == 1 && dec(res, 5)->position == 2);
	CHECK(dec(res, 4)->position == 1);
	place_result_free(res);
}

static void random_world(unsigned seed)
{
	int i, n;

	reset();
	srand(seed);
	for (n = 0; n < 12; n++)
		node(n < 9 ? POOL_A : POOL_B, 4, n < 9 ? 1 : 3);
	for (i = 0; i < 20; i++) {
		int nd = rand() % 12;

		running(500 + i, 90 + rand() % 5, nd < 9 ? POOL_A : POOL_B,
		        rand() % 3 == 0 ? PRIO_SCAVENGER : PRIO_NORMAL, nd, 1, rand() % 100);
	}
	for (i = 0; i < 200; i++) {
		struct place_request *r =
		        request(1 + i, 10 + rand() % 7, rand() % 4 ? POOL_A : POOL_B,
		                (enum place_priority)(rand() % 3), 1 + rand() % 3,
		                rand() % 10 == 0 ? 2 : 1);

		r->user_recent = rand() % 4;
		r->submitted = rand() % 50;
		r->quota_slices = rand() % 2 ? -1 : 6;
	}
}

TEST(test_deterministic)
{
	struct place_result *x, *y;
	int i, k, same = 1;

	random_world(42);
	x = run();
	y = run();
	CHECK(x && y && x->ndecisions == 200 && x->placed == y->placed && x->placed > 0);
	for (i = 0; x && y && i < x->ndecisions; i++) {
		const struct place_decision *a = &x->decisions[i], *b = &y->decisions[i];

		if (a->request_id != b->request_id || a->reason != b->reason ||
		    a->position != b->position || strcmp(a->message, b->message) != 0 ||
		    a->nchosen != b->nchosen || a->nvictims != b->nvictims)
			same = 0;
		for (k = 0; same && k < a->nchosen; k++)
			same = a->chosen[k] == b->chosen[k];
		for (k = 0; same && k < a->nvictims; k++)
			same = a->victims[k] == b->victims[k];
	}
	CHECK(same);
	place_result_free(x);
	place_result_free(y);
}

TEST(test_input_untouched)
{
	static struct world before;
	struct place_result *res;

	random_world(7);
	memcpy(&before, &w, sizeof(w));
	res = run();
	CHECK(res != NULL);
	CHECK(memcmp(&before, &w, sizeof(w)) == 0);
	place_result_free(res);
}

TEST(test_200_requests_12_slices)
{
	struct place_result *res;
	int64_t seen[12];
	int i, k, nseen = 0, unique = 1;

	reset();
	node(POOL_A, 4, 1);
	node(POOL_A, 4, 1);
	node(POOL_A, 4, 1);
	for (i = 0; i < 200; i++)
		request(1 + i, 10 + i, POOL_A, PRIO_NORMAL, 1, 1);
	res = run();
	CHECK(res->placed == 12 && res->ndecisions == 200);
	for (i = 0; i < res->ndecisions; i++) {
		const struct place_decision *d = &res->decisions[i];

		if (d->reason != REASON_NONE)
			continue;
		CHECK(d->nchosen == 1);
		for (k = 0; k < nseen; k++)
			if (seen[k] == d->chosen[0])
				unique = 0;
		if (nseen < 12)
			seen[nseen++] = d->chosen[0];
	}
	CHECK(unique && nseen == 12);
	/* 188 pending, positions 1..188 in order */
	for (i = 12; i < 200; i++) {
		CHECK(res->decisions[i].reason == REASON_CAPACITY);
		CHECK(res->decisions[i].position == i - 11);
	}
	CHECK(chosen_has(&res->decisions[0], 1000));
	place_result_free(res);
}

TEST(test_empty)
{
	struct place_result *res;
	struct place_input in;

	reset();
	node(POOL_A, 8, 1);
	res = run();
	CHECK(res && res->ndecisions == 0 && res->placed == 0);
	place_result_free(res);

	memset(&in, 0, sizeof(in));
	res = place_run(&in);
	CHECK(res && res->ndecisions == 0 && res->placed == 0);
	place_result_free(res);
	place_result_free(NULL);
}

/* CUDA: a node whose driver is known to be older than a request's CUDA is
 * never a candidate (nor reserved, nor preempted on); unknown drivers do not
 * limit; when too few nodes qualify the reason says so. */
TEST(test_cuda_filter)
{
	struct place_result *res;
	int old, fresh;

	reset();
	old = node(POOL_A, 4, 1); /* best fit would pick it: fewer free slices */
	fresh = node(POOL_A, 8, 1);
	w.nodes[old].cuda_max = 12020;
	w.nodes[fresh].cuda_max = 12080;
	hold(old, POOL_A, 2, 99);
	request(1, 10, POOL_A, PRIO_NORMAL, 1, 1)->cuda_min = 12060;
	request(2, 11, POOL_A, PRIO_NORMAL, 1, 1)->cuda_min = 12000;
	res = run();
	CHECK(res && res->placed == 2);
	CHECK(dec(res, 1)->reason == REASON_NONE && slice_node(dec(res, 1)->chosen[0]) == fresh);
	CHECK(dec(res, 2)->reason == REASON_NONE && slice_node(dec(res, 2)->chosen[0]) == old);
	place_result_free(res);

	/* room only on the old-driver node: waits for capacity, not placed there */
	reset();
	old = node(POOL_A, 4, 1);
	fresh = node(POOL_A, 1, 1);
	w.nodes[old].cuda_max = 12020;
	w.nodes[fresh].cuda_max = 12080;
	hold(fresh, POOL_A, 1, 99);
	request(1, 10, POOL_A, PRIO_NORMAL, 1, 1)->cuda_min = 12060;
	request(2, 11, POOL_A, PRIO_NORMAL, 1, 1);
	res = run();
	CHECK(dec(res, 1)->reason == REASON_CAPACITY);
	CHECK(dec(res, 2)->reason == REASON_NONE && slice_node(dec(res, 2)->chosen[0]) == old);
	place_result_free(res);

	/* an unknown driver (0) does not limit */
	reset();
	old = node(POOL_A, 1, 1);
	request(1, 10, POOL_A, PRIO_NORMAL, 1, 1)->cuda_min = 13000;
	res = run();
	CHECK(dec(res, 1)->reason == REASON_NONE);
	place_result_free(res);
}

TEST(test_cuda_reason)
{
	struct place_result *res;

	reset();
	w.nodes[node(POOL_A, 4, 1)].cuda_max = 12020;
	w.nodes[node(POOL_A, 4, 1)].cuda_max = 12040;
	request(1, 10, POOL_A, PRIO_EXAM, 1, 1)->cuda_min = 12060;
	request(2, 11, POOL_A, PRIO_NORMAL, 1, 2)->cuda_min = 12040;
	request(3, 12, POOL_A, PRIO_NORMAL, 1, 1)->cuda_min = 12040;
	res = run();
	CHECK(dec(res, 1)->reason == REASON_CUDA);
	CHECK_STR(dec(res, 1)->message, "no node's driver supports CUDA 12.6 (newest: 12.4)");
	CHECK_STR(place_reason_code(REASON_CUDA), "cuda");
	CHECK(dec(res, 2)->reason == REASON_CUDA);
	CHECK_STR(dec(res, 2)->message, "needs 2 nodes whose driver supports CUDA 12.4; 1 has");
	/* the blocked CUDA request reserved nothing: 3 still lands */
	CHECK(dec(res, 3)->reason == REASON_NONE && slice_node(dec(res, 3)->chosen[0]) == 1);
	place_result_free(res);
}

/* ------------------------------------------------------------------------ */
/* Classes: student ⊂ class ⊂ pool, lab-session reservations */

#define CLS 40

static struct place_class *klass(int64_t id, int alloc, int offhours, int reserved)
{
	struct place_class *k = &w.classes[w.nclasses++];

	k->id = id;
	k->pool_id = POOL_A;
	k->name = id == CLS ? "ml101" : "cv201";
	k->alloc_slices = alloc;
	k->offhours = offhours;
	k->reserved = reserved;
	k->until = "11:30 UTC";
	return k;
}

static struct place_request *creq(int64_t id, int64_t user, int64_t cls, int slices)
{
	struct place_request *r = request(id, user, POOL_A, PRIO_NORMAL, slices, 1);

	r->class_id = cls;
	r->student_slices = -1;
	return r;
}

static void crunning(int64_t request, int64_t user, int64_t cls, int nd, int slices)
{
	running(request, user, POOL_A, PRIO_NORMAL, nd, slices, request);
	w.running[w.nrunning - 1].class_id = cls;
}

TEST(test_class_full_56)
{
	struct place_result *res;
	int i;

	reset();
	node(POOL_A, 4, 7);
	node(POOL_A, 4, 7);
	klass(CLS, 56, -1, 0);
	for (i = 0; i < 57; i++)
		creq(1 + i, 100 + i, CLS, 1)->student_slices = 1;
	res = run();
	CHECK(res->placed == 56);
	CHECK(dec(res, 57)->reason == REASON_CLASS_FULL);
	CHECK_STR(dec(res, 57)->message, "class allocation full: 56/56 slices");
	CHECK(dec(res, 57)->position == 1);
	CHECK_STR(place_reason_code(REASON_CLASS_FULL), "class_full");
	place_result_free(res);
}

TEST(test_class_student_limit)
{
	struct place_result *res;

	reset();
	node(POOL_A, 2, 4);
	klass(CLS, 8, -1, 0);
	crunning(1, 10, CLS, 0, 1);
	creq(2, 10, CLS, 1)->student_slices = 1; /* at the limit */
	creq(3, 11, CLS, 2)->student_slices = 1; /* more than the limit by itself */
	creq(4, 12, CLS, 1)->student_slices = 1; /* fits exactly */
	creq(5, 12, CLS, 1)->student_slices = 2; /* the same student, its own limit 2 */
	res = run();
	CHECK(dec(res, 2)->reason == REASON_CLASS_LIMIT);
	CHECK_STR(dec(res, 2)->message, "your class limit: 1/1 slice");
	CHECK(dec(res, 3)->reason == REASON_CLASS_LIMIT);
	CHECK_STR(dec(res, 3)->message, "your class limit: 0/1 slice in use; this needs 2");
	CHECK(dec(res, 4)->reason == REASON_NONE);
	CHECK(dec(res, 5)->reason == REASON_NONE);
	CHECK_STR(place_reason_code(REASON_CLASS_LIMIT), "class_limit");
	place_result_free(res);

	/* cpu and memory */
	reset();
	node(POOL_A, 2, 4);
	klass(CLS, 8, -1, 0);
	crunning(1, 10, CLS, 0, 1); /* 1000 millicores, 1000 MiB */
	creq(2, 10, CLS, 1)->student_cpu = 2000;
	creq(3, 11, CLS, 1)->student_cpu = 999;
	creq(4, 10, CLS, 1)->student_mem = 1500;
	res = run();
	CHECK(dec(res, 2)->reason == REASON_NONE);
	CHECK(dec(res, 3)->reason == REASON_CLASS_LIMIT);
	CHECK_STR(dec(res, 3)->message,
	          "your class limit: 0/999 millicores of cpu in use; this needs 1000");
	/* 2 (placed) + 1 running: 2000 MiB of 1500 */
	CHECK(dec(res, 4)->reason == REASON_CLASS_LIMIT);
	CHECK_STR(dec(res, 4)->message, "your class limit: 2000/1500 MiB of memory");
	place_result_free(res);
}

TEST(test_class_alloc_cpu_mem)
{
	struct place_result *res;

	reset();
	node(POOL_A, 2, 4);
	klass(CLS, 8, -1, 0)->alloc_cpu = 2000;
	w.classes[0].alloc_mem = 10000;
	crunning(1, 10, CLS, 0, 1);
	creq(2, 11, CLS, 1);
	creq(3, 12, CLS, 1);
	res = run();
	CHECK(dec(res, 2)->reason == REASON_NONE);
	CHECK(dec(res, 3)->reason == REASON_CLASS_FULL);
	CHECK_STR(dec(res, 3)->message, "class allocation full: 2000/2000 millicores of cpu");
	place_result_free(res);
}

TEST(test_class_ignores_user_quota)
{
	struct place_result *res;

	reset();
	node(POOL_A, 2, 4);
	klass(CLS, 8, -1, 0);
	/* the user's own quota of 1 slice is full with personal work: class
	 * work counts against the class instead, and the other way round */
	running(1, 10, POOL_A, PRIO_NORMAL, 0, 1, 1);
	crunning(2, 11, CLS, 0, 2);
	creq(3, 10, CLS, 1)->quota_slices = 1;
	request(4, 11, POOL_A, PRIO_NORMAL, 1, 1)->quota_slices = 1;
	res = run();
	CHECK(dec(res, 3)->reason == REASON_NONE);
	CHECK(dec(res, 4)->reason == REASON_NONE);
	place_result_free(res);
}

TEST(test_class_offhours)
{
	struct place_result *res;

	reset();
	node(POOL_A, 2, 4);
	klass(CLS, 6, 2, 0); /* outside windows: 2 of 6 */
	crunning(1, 10, CLS, 0, 1);
	creq(2, 11, CLS, 1); /* 2/2: fits */
	creq(3, 12, CLS, 1); /* over the off-hours share */
	res = run();
	CHECK(dec(res, 2)->reason == REASON_NONE);
	CHECK(dec(res, 3)->reason == REASON_CLASS_SESSION);
	CHECK_STR(dec(res, 3)->message,
	          "class off-hours share full: 2/2 slices outside lab sessions");
	CHECK_STR(place_reason_code(REASON_CLASS_SESSION), "class_session");
	place_result_free(res);

	/* 0 off-hours: only inside sessions */
	reset();
	node(POOL_A, 2, 4);
	klass(CLS, 6, 0, 0);
	creq(1, 11, CLS, 1);
	res = run();
	CHECK(dec(res, 1)->reason == REASON_CLASS_SESSION);
	CHECK_STR(dec(res, 1)->message,
	          "class off-hours share full: 0/0 slices outside lab sessions");
	place_result_free(res);
}

TEST(test_class_window)
{
	struct place_result *res;

	reset();
	node(POOL_A, 2, 4);
	klass(CLS, 6, 2, 4); /* a window holds 4: beyond the off-hours share */
	crunning(1, 10, CLS, 0, 3);
	creq(2, 11, CLS, 1); /* 4/4 */
	creq(3, 12, CLS, 1); /* past the reservation */
	request(4, 20, POOL_A, PRIO_NORMAL, 4, 1); /* not a member: the 4 free are its */
	res = run();
	CHECK(dec(res, 2)->reason == REASON_NONE);
	CHECK(dec(res, 3)->reason == REASON_CLASS_SESSION);
	CHECK_STR(dec(res, 3)->message,
	          "class lab-session share full: 4/4 slices until 11:30 UTC");
	CHECK(dec(res, 4)->reason == REASON_NONE);
	place_result_free(res);
}

TEST(test_reserved_for_class)
{
	struct place_result *res;

	reset();
	node(POOL_A, 2, 4);
	klass(CLS, 8, 0, 5); /* 5 held; nothing in use */
	request(1, 20, POOL_A, PRIO_NORMAL, 3, 1); /* 8 free - 5 held = 3: fits */
	request(2, 21, POOL_A, PRIO_NORMAL, 1, 1); /* the rest are held */
	creq(3, 10, CLS, 2);                      /* a member takes its own */
	res = run();
	CHECK(dec(res, 1)->reason == REASON_NONE);
	CHECK(dec(res, 2)->reason == REASON_RESERVED_CLASS);
	CHECK_STR(dec(res, 2)->message,
	          "5 free slices are reserved for class 'ml101' until 11:30 UTC");
	CHECK(dec(res, 2)->position == 1);
	CHECK(dec(res, 3)->reason == REASON_NONE);
	CHECK_STR(place_reason_code(REASON_RESERVED_CLASS), "reserved_for_class");
	place_result_free(res);

	/* another class's work is held back too; a used reservation holds
	 * nothing more */
	reset();
	node(POOL_A, 2, 4);
	klass(CLS, 8, 0, 3);
	klass(CLS + 1, 8, -1, 0);
	crunning(1, 10, CLS, 0, 3);
	creq(2, 30, CLS + 1, 5); /* 5 free, none held */
	res = run();
	CHECK(dec(res, 2)->reason == REASON_NONE);
	place_result_free(res);

	reset();
	node(POOL_A, 2, 4);
	klass(CLS, 8, 0, 3);
	klass(CLS + 1, 8, -1, 0);
	crunning(1, 10, CLS, 0, 1); /* 2 of 3 still held */
	creq(2, 30, CLS + 1, 6);    /* 7 free - 2 held = 5 */
	creq(3, 31, CLS + 1, 5);
	res = run();
	CHECK(dec(res, 3)->reason == REASON_NONE);
	CHECK(dec(res, 2)->reason == REASON_RESERVED_CLASS);
	CHECK_STR(dec(res, 2)->message,
	          "2 free slices are reserved for class 'ml101' until 11:30 UTC");
	place_result_free(res);

	/* a full pool is capacity, not the reservation */
	reset();
	node(POOL_A, 1, 4);
	klass(CLS, 4, 0, 2);
	running(1, 20, POOL_A, PRIO_NORMAL, 0, 4, 1);
	request(2, 21, POOL_A, PRIO_NORMAL, 1, 1);
	res = run();
	CHECK(dec(res, 2)->reason == REASON_CAPACITY);
	place_result_free(res);
}

TEST(test_class_blocks)
{
	struct place_result *res;

	reset();
	node(POOL_A, 2, 4);
	klass(CLS, 8, -1, 0);
	creq(1, 10, CLS, 1)->class_block = 1;
	creq(2, 11, CLS, 1)->class_block = 2;
	creq(3, 12, CLS + 5, 1); /* a class with no allocation */
	res = run();
	CHECK(dec(res, 1)->reason == REASON_CLASS_BUDGET);
	CHECK(dec(res, 2)->reason == REASON_CLASS_CLOSED);
	CHECK(dec(res, 3)->reason == REASON_CLASS_CLOSED);
	CHECK(res->placed == 0);
	place_result_free(res);
}

/* A start storm: more students than slices, each placed once, the rest
 * waiting in submit order with positions 1.. */
TEST(test_class_storm)
{
	struct place_result *res;
	int i;

	reset();
	node(POOL_A, 4, 7);
	node(POOL_A, 4, 7);
	klass(CLS, 56, -1, 56);
	for (i = 0; i < 60; i++)
		creq(1 + i, 100 + i, CLS, 1)->student_slices = 1;
	request(100, 999, POOL_A, PRIO_NORMAL, 1, 1);
	res = run();
	CHECK(res->placed == 56);
	for (i = 57; i <= 60; i++) {
		CHECK(dec(res, i)->reason == REASON_CLASS_SESSION ||
		      dec(res, i)->reason == REASON_CLASS_FULL);
		CHECK(dec(res, i)->position == i - 56);
	}
	CHECK(dec(res, 100)->reason == REASON_CAPACITY);
	place_result_free(res);
}

int main(void)
{
	RUN(test_cuda_filter);
	RUN(test_cuda_reason);
	RUN(test_priority_order);
	RUN(test_fair_share);
	RUN(test_submit_then_id);
	RUN(test_quota_full);
	RUN(test_quota_running_counts);
	RUN(test_quota_same_pass);
	RUN(test_quota_cpu_mem);
	RUN(test_best_fit);
	RUN(test_keeps_empty_node);
	RUN(test_partly_used_gpu_first);
	RUN(test_one_request_keeps_to_one_gpu);
	RUN(test_gang_all_or_nothing);
	RUN(test_gang_no_slices_consumed);
	RUN(test_cpu_mem);
	RUN(test_cpu_only);
	RUN(test_too_big);
	RUN(test_max_fit);
	RUN(test_quota_never);
	RUN(test_no_nodes);
	RUN(test_degraded);
	RUN(test_backfill);
	RUN(test_scavenger_no_reservation);
	RUN(test_preempt_youngest_minimal);
	RUN(test_preempt_prunes_oldest_unneeded);
	RUN(test_preempt_fewest_victims);
	RUN(test_preempt_only_scavengers_of_others);
	RUN(test_preempt_gang_victim_once);
	RUN(test_positions_per_pool);
	RUN(test_deterministic);
	RUN(test_input_untouched);
	RUN(test_200_requests_12_slices);
	RUN(test_empty);
	RUN(test_class_full_56);
	RUN(test_class_student_limit);
	RUN(test_class_alloc_cpu_mem);
	RUN(test_class_ignores_user_quota);
	RUN(test_class_offhours);
	RUN(test_class_window);
	RUN(test_reserved_for_class);
	RUN(test_class_blocks);
	RUN(test_class_storm);
	return harness_done("test_place");
}
