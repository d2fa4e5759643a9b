/* test_eta.c — start estimates: a waiting request starts when the work
 * holding its room reaches its maximum runtime, after the work ahead of
 * it; none when that work has no end or no node takes work; quota, gangs,
 * placements of the same pass and the cap, each with an exact outcome. */
#include "sched/eta.c"

#include "harness.h"

#define POOL 7
#define NOW  1000000

static struct place_node nodes[8];
static struct place_slice slices[64];
static struct place_request queue[ETA_MAX + 8];
static struct place_running running[16];
static struct place_decision dec[ETA_MAX + 8];
static int64_t run_end[16], dur[ETA_MAX + 8];
static struct place_input in;
static struct place_result res;
static struct eta_out out[ETA_MAX + 8];

static void reset(void)
{
	memset(nodes, 0, sizeof(nodes));
	memset(slices, 0, sizeof(slices));
	memset(queue, 0, sizeof(queue));
	memset(running, 0, sizeof(running));
	memset(dec, 0, sizeof(dec));
	memset(run_end, 0, sizeof(run_end));
	memset(dur, 0, sizeof(dur));
	memset(&in, 0, sizeof(in));
	memset(&res, 0, sizeof(res));
	in.nodes = nodes;
	in.slices = slices;
	in.queue = queue;
	in.running = running;
	res.decisions = dec;
}

/* A schedulable node with n slices of POOL (ids node*100 + k). */
static int node(int n)
{
	int i = in.nnodes++;

	nodes[i].id = 10 + i;
	nodes[i].schedulable = 1;
	nodes[i].cpu_total = 8000;
	nodes[i].mem_total = 8192;
	for (int k = 0; k < n; k++) {
		slices[in.nslices].id = (i + 1) * 100 + k;
		slices[in.nslices].node = i;
		slices[in.nslices].pool_id = POOL;
		in.nslices++;
	}
	return i;
}

static void run(int64_t user, int nd, int nslices, int64_t end)
{
	struct place_running *r = &running[in.nrunning];

	r->request_id = 900 + in.nrunning;
	r->user_id = user;
	r->pool_id = POOL;
	r->node = nd;
	r->slices = nslices;
	r->cpu = 1000;
	r->mem = 1024;
	run_end[in.nrunning++] = end;
}

/* A waiting request of user (slices on each of nodes nodes), max runtime
 * d, with the pass's reason; decisions in the order added. */
static int wait(int64_t user, int nslices, int nnodes, int64_t d, enum place_reason why)
{
	int i = in.nqueue++;

	queue[i].id = i + 1;
	queue[i].user_id = user;
	queue[i].pool_id = POOL;
	queue[i].slices = nslices;
	queue[i].nodes = nnodes;
	queue[i].cpu = 1000;
	queue[i].mem = 1024;
	queue[i].quota_slices = -1;
	dur[i] = d;
	dec[res.ndecisions].request_id = queue[i].id;
	dec[res.ndecisions].reason = why;
	res.ndecisions++;
	return i;
}

static void go(void)
{
	struct eta_input e = { &in, &res, run_end, dur, NOW, 30 };

	CHECK(eta_run(&e, out) == 0);
}

TEST(after_running_work_and_the_queue_ahead)
{
	int a, b;

	reset();
	node(1);
	run(1, 0, 1, NOW + 600);
	a = wait(2, 1, 1, 300, REASON_CAPACITY);
	b = wait(3, 1, 1, 100, REASON_CAPACITY);
	go();
	CHECK(out[a].at == NOW + 600);
	CHECK(out[b].at == NOW + 900);
}

TEST(past_due_work_ends_now)
{
	int a;

	reset();
	node(1);
	run(1, 0, 1, NOW - 5);
	a = wait(2, 1, 1, 300, REASON_CAPACITY);
	go();
	CHECK(out[a].at == NOW);
}

TEST(none_behind_work_without_an_end)
{
	int a, b;

	reset();
	node(1);
	run(1, 0, 1, 0);
	a = wait(2, 1, 1, 300, REASON_CAPACITY);
	go();
	CHECK(out[a].at == 0);
	CHECK_STR(out[a].why, "it waits for work that has no maximum runtime to end");
	/* and a request without an end holds its room for good */
	reset();
	node(1);
	run(1, 0, 1, NOW + 60);
	a = wait(2, 1, 1, 0, REASON_CAPACITY);
	b = wait(3, 1, 1, 10, REASON_CAPACITY);
	go();
	CHECK(out[a].at == NOW + 60);
	CHECK(out[b].at == 0);
}

TEST(none_without_a_node_that_takes_work)
{
	int a, b;

	reset();
	node(1);
	nodes[0].schedulable = 0; /* down */
	a = wait(2, 1, 1, 300, REASON_NO_NODES);
	b = wait(2, 1, 1, 300, REASON_CAPACITY);
	go();
	CHECK(out[a].at == 0);
	CHECK_STR(out[a].why, "no node of its pool takes work now");
	CHECK(out[b].at == 0);
	CHECK(strstr(out[b].why, "no node that takes work now") != NULL);
}

TEST(none_when_it_can_never_run_or_its_quota_blocks)
{
	int a, b;

	reset();
	node(1);
	a = wait(2, 4, 1, 300, REASON_CANNOT_RUN);
	b = wait(2, 1, 1, 300, REASON_QUOTA);
	queue[b].quota_block = 1;
	go();
	CHECK(out[a].at == 0 && out[a].why[0]);
	CHECK(out[b].at == 0);
	CHECK_STR(out[b].why, "its quota does not admit it");
}

TEST(placements_of_this_pass_hold_their_room)
{
	int p, a;

	reset();
	node(1);
	p = wait(1, 1, 1, 120, REASON_NONE);
	dec[0].nchosen = 1;
	dec[0].chosen = (int64_t[]){ 100 };
	a = wait(2, 1, 1, 60, REASON_CAPACITY);
	go();
	CHECK(out[p].at == 0 && out[p].why[0] == '\0');
	CHECK(out[a].at == NOW + 120);
}

TEST(quota_waits_for_the_users_own_work)
{
	int a;

	reset();
	node(1);
	node(1);
	run(5, 0, 1, NOW + 50);
	a = wait(5, 1, 1, 100, REASON_QUOTA);
	queue[a].quota_slices = 1;
	go();
	/* room on the other node now, but the quota frees at +50 */
	CHECK(out[a].at == NOW + 50);
}

TEST(gang_waits_for_enough_nodes)
{
	int a;

	reset();
	node(1);
	node(1);
	run(1, 0, 1, NOW + 100);
	run(1, 1, 1, NOW + 200);
	a = wait(2, 1, 2, 10, REASON_GANG);
	go();
	CHECK(out[a].at == NOW + 200);
}

TEST(preempting_starts_within_the_grace)
{
	int a;

	reset();
	node(1);
	run(1, 0, 1, 0);
	a = wait(2, 1, 1, 10, REASON_PREEMPTING);
	go();
	CHECK(out[a].at == NOW + 30);
}

TEST(only_the_first_ones_are_estimated)
{
	int i;

	reset();
	node(1);
	for (i = 0; i < ETA_MAX + 2; i++)
		wait(2, 1, 1, 10, REASON_CAPACITY);
	go();
	CHECK(out[0].at == NOW);
	CHECK(out[ETA_MAX - 1].at == NOW + 10 * (ETA_MAX - 1));
	CHECK(out[ETA_MAX].at == 0);
	CHECK_STR(out[ETA_MAX].why, "too far back in the queue to estimate");
}

/* A big cluster and queue (the scheduler benchmark's size): only the
 * first ETA_MAX get an estimate, each after the one before. */
TEST(large)
{
	enum { NODES = 1000, PER = 8, QUEUE = 10000 };
	struct place_node *nd = calloc(NODES, sizeof(*nd));
	struct place_slice *sl = calloc(NODES * PER, sizeof(*sl));
	struct place_running *rn = calloc(NODES * PER, sizeof(*rn));
	struct place_request *qu = calloc(QUEUE, sizeof(*qu));
	struct place_decision *de = calloc(QUEUE, sizeof(*de));
	int64_t *re = calloc(NODES * PER, sizeof(*re)), *du = calloc(QUEUE, sizeof(*du));
	struct eta_out *o = calloc(QUEUE, sizeof(*o));
	struct place_input big = { nd, NODES, sl, NODES * PER, qu, QUEUE, rn, NODES * PER, NULL, 0 };
	struct place_result r = { de, QUEUE, 0 };
	struct eta_input e = { &big, &r, re, du, NOW, 30 };

	CHECK(nd && sl && rn && qu && de && re && du && o);
	if (!(nd && sl && rn && qu && de && re && du && o))
		return;
	for (int n = 0; n < NODES; n++) {
		nd[n] = (struct place_node){
			.id = n + 1, .schedulable = 1, .cpu_total = 64000, .mem_total = 1 << 20
		};
		for (int k = 0; k < PER; k++) {
			int i = n * PER + k;
			sl[i] = (struct place_slice){ .id = i + 1, .node = n, .pool_id = POOL };
			rn[i] = (struct place_running){ .request_id = 100000 + i,
				                        .user_id = 1,
				                        .pool_id = POOL,
				                        .node = n,
				                        .slices = 1,
				                        .cpu = 100,
				                        .mem = 100 };
			re[i] = NOW + 60 + i; /* one slice frees each second */
		}
	}
	for (int i = 0; i < QUEUE; i++) {
		qu[i] = (struct place_request){ .id = i + 1,
			                        .user_id = 2,
			                        .pool_id = POOL,
			                        .slices = 1,
			                        .nodes = 1,
			                        .cpu = 100,
			                        .mem = 100,
			                        .quota_slices = -1 };
		du[i] = 3600;
		de[i] = (struct place_decision){ .request_id = i + 1, .reason = REASON_CAPACITY };
	}
	CHECK(eta_run(&e, o) == 0);
	CHECK(o[0].at == NOW + 60);
	CHECK(o[ETA_MAX - 1].at == NOW + 60 + ETA_MAX - 1);
	CHECK(o[ETA_MAX].at == 0);
	free(nd);
	free(sl);
	free(rn);
	free(qu);
	free(de);
	free(re);
	free(du);
	free(o);
}

int main(void)
{
	RUN(after_running_work_and_the_queue_ahead);
	RUN(past_due_work_ends_now);
	RUN(none_behind_work_without_an_end);
	RUN(none_without_a_node_that_takes_work);
	RUN(none_when_it_can_never_run_or_its_quota_blocks);
	RUN(placements_of_this_pass_hold_their_room);
	RUN(quota_waits_for_the_users_own_work);
	RUN(gang_waits_for_enough_nodes);
	RUN(preempting_starts_within_the_grace);
	RUN(only_the_first_ones_are_estimated);
	RUN(large);
	return harness_done("test_eta");
}
