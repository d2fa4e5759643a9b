/* test_worker.c — the worker pool: every job runs once off the loop, every
 * completion once on it; bounds, shutdown and restart. */
#include "base/worker.c"

#include "harness.h"

#include <event2/event.h>

#define NJOBS 100

struct job_arg {
	int n;
	long result;
	int work_runs, done_runs;
	pthread_t work_thread;
	int done_on_loop;
};

static pthread_t loop_thread;
static int done_total, done_target;
static struct event_base *test_base;

static void square_work(void *p)
{
	struct job_arg *a = p;
	long i, sum = 0;

	/* Something the optimiser cannot fold, a little slow. */
	for (i = 1; i <= a->n * 1000L; i++)
		sum += i % 7;
	a->result = (long)a->n * a->n + sum - sum;
	a->work_thread = pthread_self();
	__atomic_add_fetch(&a->work_runs, 1, __ATOMIC_SEQ_CST);
}

static void count_done(void *p)
{
	struct job_arg *a = p;

	a->done_runs++;
	a->done_on_loop = pthread_equal(pthread_self(), loop_thread);
	if (++done_total == done_target && test_base)
		event_base_loopbreak(test_base);
}

/* Runs the loop until done_target completions or 10 s, whichever first. */
static void run_loop(struct event_base *b)
{
	struct timeval limit = { 10, 0 };

	test_base = b;
	event_base_loopexit(b, &limit);
	event_base_dispatch(b);
	test_base = NULL;
}

TEST(shutdown_without_init)
{
	worker_shutdown();
	worker_shutdown();
	CHECK(worker_pending() == 0);
	CHECK(worker_submit(square_work, count_done, NULL) == -1);
}

TEST(init_rejects_bad_arguments)
{
	struct event_base *b = event_base_new();

	CHECK(worker_init(NULL, 2, 10) == -1);
	CHECK(worker_init(b, 0, 10) == -1);
	CHECK(worker_init(b, -1, 10) == -1);
	CHECK(worker_init(b, 2, 0) == -1);
	CHECK(worker_init(b, 100000, 10) == -1);
	CHECK(worker_init(b, 2, 10) == 0);
	CHECK(worker_init(b, 2, 10) == -1); /* already running */
	CHECK(worker_submit(NULL, count_done, NULL) == -1);
	worker_shutdown();
	event_base_free(b);
}

TEST(hundred_jobs_complete_once_on_loop)
{
	static struct job_arg args[NJOBS];
	struct event_base *b = event_base_new();
	int i, ok_result = 1, ok_once = 1, ok_loop = 1, off_loop = 1;

	loop_thread = pthread_self();
	done_total = 0;
	done_target = NJOBS;
	CHECK(b != NULL);
	CHECK(worker_init(b, 4, NJOBS) == 0);
	for (i = 0; i < NJOBS; i++) {
		memset(&args[i], 0, sizeof(args[i]));
		args[i].n = i;
		CHECK(worker_submit(square_work, count_done, &args[i]) == 0);
	}
	run_loop(b);
	CHECK(done_total == NJOBS);
	for (i = 0; i < NJOBS; i++) {
		if (args[i].result != (long)i * i)
			ok_result = 0;
		if (args[i].work_runs != 1 || args[i].done_runs != 1)
			ok_once = 0;
		if (!args[i].done_on_loop)
			ok_loop = 0;
		if (args[i].work_runs && pthread_equal(args[i].work_thread, loop_thread))
			off_loop = 0;
	}
	CHECK(ok_result);
	CHECK(ok_once);
	CHECK(ok_loop);
	CHECK(off_loop);
	CHECK(worker_pending() == 0);

	worker_shutdown();
	/* After shutdown nothing is accepted and nothing runs again. */
	CHECK(worker_submit(square_work, count_done, &args[0]) == -1);
	CHECK(args[0].work_runs == 1 && args[0].done_runs == 1);
	CHECK(done_total == NJOBS);
	event_base_free(b);
}

/* A job that holds its thread until the test opens the gate. */
static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cond = PTHREAD_COND_INITIALIZER;
static int gate_open, gate_entered;

static void gated_work(void *p)
{
	struct job_arg *a = p;

	pthread_mutex_lock(&gate_lock);
	gate_entered++;
	pthread_cond_broadcast(&gate_cond);
	while (!gate_open)
		pthread_cond_wait(&gate_cond, &gate_lock);
	pthread_mutex_unlock(&gate_lock);
	a->result = a->n;
	__atomic_add_fetch(&a->work_runs, 1, __ATOMIC_SEQ_CST);
}

TEST(queue_bound_and_pending)
{
	struct job_arg args[4];
	struct event_base *b = event_base_new();
	int i;

	memset(args, 0, sizeof(args));
	for (i = 0; i < 4; i++)
		args[i].n = i + 1;
	loop_thread = pthread_self();
	done_total = 0;
	done_target = 3;
	gate_open = 0;
	gate_entered = 0;
	CHECK(worker_init(b, 1, 2) == 0);

	/* The one thread takes the first job and blocks in it... */
	CHECK(worker_submit(gated_work, count_done, &args[0]) == 0);
	pthread_mutex_lock(&gate_lock);
	while (!gate_entered)
		pthread_cond_wait(&gate_cond, &gate_lock);
	pthread_mutex_unlock(&gate_lock);
	CHECK(worker_pending() == 1);

	/* ...so two more wait, and the queue is full. */
	CHECK(worker_submit(gated_work, count_done, &args[1]) == 0);
	CHECK(worker_submit(gated_work, count_done, &args[2]) == 0);
	CHECK(worker_submit(gated_work, count_done, &args[3]) == -1);
	CHECK(worker_pending() == 3);

	pthread_mutex_lock(&gate_lock);
	gate_open = 1;
	pthread_cond_broadcast(&gate_cond);
	pthread_mutex_unlock(&gate_lock);
	run_loop(b);

	CHECK(done_total == 3);
	CHECK(worker_pending() == 0);
	for (i = 0; i < 3; i++)
		CHECK(args[i].work_runs == 1 && args[i].done_runs == 1 && args[i].result == i + 1 &&
		      args[i].done_on_loop);
	/* The refused job stayed the caller's: neither callback ran. */
	CHECK(args[3].work_runs == 0 && args[3].done_runs == 0);
	worker_shutdown();
	event_base_free(b);
}

TEST(shutdown_finishes_queued_jobs)
{
	static struct job_arg args[20];
	struct event_base *b = event_base_new();
	int i, ok = 1;

	loop_thread = pthread_self();
	done_total = 0;
	done_target = -1;
	CHECK(worker_init(b, 2, 20) == 0);
	for (i = 0; i < 20; i++) {
		memset(&args[i], 0, sizeof(args[i]));
		args[i].n = i;
		CHECK(worker_submit(square_work, count_done, &args[i]) == 0);
	}
	/* The loop never ran: shutdown drains the queue, joins the threads
	 * and runs the done callbacks on this (the loop's) thread. */
	worker_shutdown();
	CHECK(done_total == 20);
	for (i = 0; i < 20; i++)
		if (args[i].work_runs != 1 || args[i].done_runs != 1 || !args[i].done_on_loop ||
		    args[i].result != (long)i * i)
			ok = 0;
	CHECK(ok);
	CHECK(worker_pending() == 0);
	/* Nothing is left to deliver on the loop either. */
	CHECK(event_base_loop(b, EVLOOP_NONBLOCK) == 1);
	CHECK(done_total == 20);
	event_base_free(b);
}

/* done() that queues the next step: chains of work across the loop. */
static int chain_left;
static struct job_arg chain_arg;

static void chain_done(void *p)
{
	struct job_arg *a = p;

	a->done_runs++;
	if (!pthread_equal(pthread_self(), loop_thread))
		a->done_on_loop = -1;
	if (--chain_left > 0) {
		if (worker_submit(square_work, chain_done, a) != 0)
			event_base_loopbreak(test_base);
	} else {
		event_base_loopbreak(test_base);
	}
}

TEST(done_may_submit_and_restart)
{
	struct event_base *b = event_base_new();

	loop_thread = pthread_self();
	/* A second init after a shutdown starts a fresh pool. */
	CHECK(worker_init(b, 3, 4) == 0);
	memset(&chain_arg, 0, sizeof(chain_arg));
	chain_arg.n = 5;
	chain_left = 10;
	CHECK(worker_submit(square_work, chain_done, &chain_arg) == 0);
	run_loop(b);
	CHECK(chain_left == 0);
	CHECK(chain_arg.work_runs == 10 && chain_arg.done_runs == 10);
	CHECK(chain_arg.done_on_loop == 0);
	worker_shutdown();
	event_base_free(b);
}

static void null_done_work(void *p)
{
	__atomic_add_fetch((int *)p, 1, __ATOMIC_SEQ_CST);
}

TEST(done_may_be_null)
{
	struct event_base *b = event_base_new();
	int runs = 0;

	CHECK(worker_init(b, 2, 8) == 0);
	CHECK(worker_submit(null_done_work, NULL, &runs) == 0);
	CHECK(worker_submit(null_done_work, NULL, &runs) == 0);
	worker_shutdown();
	CHECK(runs == 2);
	event_base_free(b);
}

/* A full password lane (its one thread stuck, its queue full) leaves the
 * general lane's threads and queue alone, and the other way round. */
TEST(lanes_do_not_starve_each_other)
{
	static struct job_arg stuck[3], gen[10], more;
	struct event_base *b = event_base_new();
	int i, ok = 1;

	loop_thread = pthread_self();
	done_total = 0;
	done_target = 10;
	gate_open = 0;
	gate_entered = 0;
	memset(stuck, 0, sizeof(stuck));
	memset(&more, 0, sizeof(more));
	CHECK(worker_lane_init(WORKER_PASSWORD, 1, 2) == -1); /* no worker_init yet */
	CHECK(worker_init(b, 2, 10) == 0);
	CHECK(worker_lane_init(WORKER_PASSWORD, 0, 2) == -1);
	CHECK(worker_lane_init(WORKER_LANES, 1, 2) == -1);
	CHECK(worker_lane_init(WORKER_PASSWORD, 1, 2) == 0);
	CHECK(worker_lane_init(WORKER_PASSWORD, 5, 50) == 0); /* already running */

	CHECK(worker_submit_lane(WORKER_PASSWORD, gated_work, count_done, &stuck[0]) == 0);
	pthread_mutex_lock(&gate_lock);
	while (!gate_entered)
		pthread_cond_wait(&gate_cond, &gate_lock);
	pthread_mutex_unlock(&gate_lock);
	for (i = 1; i < 3; i++)
		CHECK(worker_submit_lane(WORKER_PASSWORD, gated_work, count_done, &stuck[i]) == 0);
	CHECK(worker_submit_lane(WORKER_PASSWORD, gated_work, count_done, &more) == -1);
	CHECK(worker_lane_pending(WORKER_PASSWORD) == 3);
	CHECK(worker_lane_pending(WORKER_GENERAL) == 0);

	/* the general lane has its full queue and its threads */
	for (i = 0; i < 10; i++) {
		memset(&gen[i], 0, sizeof(gen[i]));
		gen[i].n = i;
		CHECK(worker_submit(square_work, count_done, &gen[i]) == 0);
	}
	run_loop(b);
	CHECK(done_total == 10);
	for (i = 0; i < 10; i++)
		if (gen[i].done_runs != 1 || gen[i].result != (long)i * i)
			ok = 0;
	CHECK(ok);
	CHECK(worker_lane_pending(WORKER_PASSWORD) == 3);
	CHECK(worker_pending() == 3);

	/* shutdown lets the stuck lane finish too */
	pthread_mutex_lock(&gate_lock);
	gate_open = 1;
	pthread_cond_broadcast(&gate_cond);
	pthread_mutex_unlock(&gate_lock);
	worker_shutdown();
	for (i = 0; i < 3; i++)
		CHECK(stuck[i].work_runs == 1 && stuck[i].done_runs == 1);
	CHECK(more.work_runs == 0 && more.done_runs == 0);
	CHECK(worker_pending() == 0);
	CHECK(worker_submit_lane(WORKER_PASSWORD, gated_work, count_done, &more) == -1);
	event_base_free(b);
}

int main(void)
{
	RUN(shutdown_without_init);
	RUN(init_rejects_bad_arguments);
	RUN(hundred_jobs_complete_once_on_loop);
	RUN(queue_bound_and_pending);
	RUN(shutdown_finishes_queued_jobs);
	RUN(done_may_submit_and_restart);
	RUN(done_may_be_null);
	RUN(lanes_do_not_starve_each_other);
	return harness_done("test_worker");
}
