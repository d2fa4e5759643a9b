/* worker.c — fixed pools of threads for blocking work, reporting back to
 * the event loop.
 *
 * Owns the lanes (each a job queue with its own bound, condition variable
 * and threads: a flood of one kind of work cannot take the threads or the
 * queue of another), and the
 * done-queue that hands finished jobs to the loop: workers append to it and
 * poke an eventfd; a persistent event on the loop's base drains it and runs
 * the done callbacks there.  The loop is only ever touched from its own
 * thread, so libevent needs no locking (no evthread_use_pthreads).
 * Does not own what the jobs do or the memory behind their arguments.
 */
#include "base/worker.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define THREADS_MAX 256

struct job {
	void (*work)(void *arg);
	void (*done)(void *arg);
	void *arg;
	struct job *next;
};

struct job_list {
	struct job *head, *tail;
};

/* One lane: its threads and its queue.  Everything in it is guarded by
 * lock, except threads and nthreads_started, which only the loop thread
 * (worker_init, worker_lane_init, worker_shutdown) touches. */
struct lane {
	pthread_cond_t wake;
	int accepting; /* 1 between init and shutdown */
	int stopping;  /* threads exit once the queue is empty */
	int waiting, running, queue_limit;
	struct job_list queue; /* waiting for a thread */
	pthread_t *threads;
	int nthreads_started;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct lane lanes[WORKER_LANES] = {
	{ .wake = PTHREAD_COND_INITIALIZER },
	{ .wake = PTHREAD_COND_INITIALIZER },
};
static struct job_list finished; /* every lane's, waiting for the loop; guarded by lock */

/* Only the loop thread touches these. */
static struct event_base *base;
static struct event *ev;
static int efd = -1;

static void list_push(struct job_list *l, struct job *j)
{
	j->next = NULL;
	if (l->tail)
		l->tail->next = j;
	else
		l->head = j;
	l->tail = j;
}

static struct job *list_pop(struct job_list *l)
{
	struct job *j = l->head;

	if (j) {
		l->head = j->next;
		if (!l->head)
			l->tail = NULL;
		j->next = NULL;
	}
	return j;
}

static void notify_loop(void)
{
	uint64_t one = 1;
	ssize_t n;

	/* EAGAIN means the counter is saturated: the loop is due anyway. */
	do
		n = write(efd, &one, sizeof(one));
	while (n < 0 && errno == EINTR);
}

static void *thread_main(void *arg)
{
	struct lane *l = arg;
	struct job *j;

	for (;;) {
		pthread_mutex_lock(&lock);
		while (!l->queue.head && !l->stopping)
			pthread_cond_wait(&l->wake, &lock);
		j = list_pop(&l->queue);
		if (!j) {
			pthread_mutex_unlock(&lock);
			return NULL;
		}
		l->waiting--;
		l->running++;
		pthread_mutex_unlock(&lock);

		j->work(j->arg);

		pthread_mutex_lock(&lock);
		l->running--;
		list_push(&finished, j);
		pthread_mutex_unlock(&lock);
		notify_loop();
	}
}

/* Runs the done callbacks of every finished job, in completion order, on the
 * calling thread.  The lock is not held while callbacks run, so they may
 * submit more work. */
static void deliver(void)
{
	struct job_list batch;
	struct job *j;

	pthread_mutex_lock(&lock);
	batch = finished;
	finished.head = finished.tail = NULL;
	pthread_mutex_unlock(&lock);

	while ((j = list_pop(&batch)) != NULL) {
		if (j->done)
			j->done(j->arg);
		free(j);
	}
}

static void on_notify(evutil_socket_t fd, short what, void *unused)
{
	uint64_t count;
	ssize_t n;

	(void)what;
	(void)unused;
	do
		n = read(fd, &count, sizeof(count));
	while (n < 0 && errno == EINTR);
	deliver();
}

/* Joins the threads of lane l that were started. */
static void lane_stop(struct lane *l)
{
	pthread_mutex_lock(&lock);
	l->accepting = 0;
	l->stopping = 1;
	pthread_cond_broadcast(&l->wake);
	pthread_mutex_unlock(&lock);

	for (int i = 0; i < l->nthreads_started; i++)
		pthread_join(l->threads[i], NULL);
	free(l->threads);
	l->threads = NULL;
	l->nthreads_started = 0;

	pthread_mutex_lock(&lock);
	l->stopping = 0;
	l->waiting = l->running = 0;
	pthread_mutex_unlock(&lock);
}

/* Joins every lane's threads and releases the loop resources. */
static void teardown(void)
{
	for (int i = 0; i < WORKER_LANES; i++)
		lane_stop(&lanes[i]);

	/* Every thread is gone: what finished after the loop's last look is
	 * delivered here, so no job and no argument is lost. */
	deliver();

	if (ev) {
		event_free(ev);
		ev = NULL;
	}
	if (efd >= 0) {
		close(efd);
		efd = -1;
	}
	base = NULL;
}

/* Starts nthreads threads for lane l; 0, or -1 with none left running. */
static int lane_start(struct lane *l, int nthreads, int queue_max)
{
	sigset_t all, old;
	int i;

	l->threads = calloc((size_t)nthreads, sizeof(*l->threads));
	if (!l->threads)
		return -1;
	pthread_mutex_lock(&lock);
	l->queue_limit = queue_max;
	pthread_mutex_unlock(&lock);

	/* Signals belong to the loop thread: workers start with all blocked. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (i = 0; i < nthreads; i++) {
		if (pthread_create(&l->threads[i], NULL, thread_main, l) != 0)
			break;
		l->nthreads_started++;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (l->nthreads_started != nthreads) {
		lane_stop(l);
		return -1;
	}
	pthread_mutex_lock(&lock);
	l->accepting = 1;
	pthread_mutex_unlock(&lock);
	return 0;
}

int worker_init(struct event_base *evbase, int nthreads, int queue_max)
{
	if (!evbase || nthreads < 1 || nthreads > THREADS_MAX || queue_max < 1)
		return -1;
	if (base || lanes[WORKER_GENERAL].threads)
		return -1;

	efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (efd < 0)
		goto fail;
	base = evbase;
	ev = event_new(base, efd, EV_READ | EV_PERSIST, on_notify, NULL);
	if (!ev || event_add(ev, NULL) != 0)
		goto fail;
	if (lane_start(&lanes[WORKER_GENERAL], nthreads, queue_max) < 0)
		goto fail;
	return 0;
fail:
	teardown();
	return -1;
}

int worker_lane_init(enum worker_lane lane, int nthreads, int queue_max)
{
	if ((int)lane < 0 || lane >= WORKER_LANES || nthreads < 1 || nthreads > THREADS_MAX ||
	    queue_max < 1 || !base)
		return -1;
	if (lanes[lane].threads)
		return 0;
	return lane_start(&lanes[lane], nthreads, queue_max);
}

int worker_submit_lane(enum worker_lane lane, void (*work)(void *arg), void (*done)(void *arg),
                       void *arg)
{
	struct lane *l;
	struct job *j;

	if (!work || (int)lane < 0 || lane >= WORKER_LANES)
		return -1;
	l = &lanes[lane];
	j = malloc(sizeof(*j));
	if (!j)
		return -1;
	j->work = work;
	j->done = done;
	j->arg = arg;

	pthread_mutex_lock(&lock);
	if (!l->accepting || l->waiting >= l->queue_limit) {
		pthread_mutex_unlock(&lock);
		free(j);
		return -1;
	}
	list_push(&l->queue, j);
	l->waiting++;
	pthread_cond_signal(&l->wake);
	pthread_mutex_unlock(&lock);
	return 0;
}

int worker_submit(void (*work)(void *arg), void (*done)(void *arg), void *arg)
{
	return worker_submit_lane(WORKER_GENERAL, work, done, arg);
}

int worker_lane_pending(enum worker_lane lane)
{
	int n;

	if ((int)lane < 0 || lane >= WORKER_LANES)
		return 0;
	pthread_mutex_lock(&lock);
	n = lanes[lane].waiting + lanes[lane].running;
	pthread_mutex_unlock(&lock);
	return n;
}

int worker_pending(void)
{
	int n = 0;

	for (int i = 0; i < WORKER_LANES; i++)
		n += worker_lane_pending((enum worker_lane)i);
	return n;
}

void worker_shutdown(void)
{
	int any = ev || efd >= 0;

	for (int i = 0; i < WORKER_LANES; i++)
		any |= lanes[i].threads != NULL;
	if (!any)
		return;
	teardown();
}
