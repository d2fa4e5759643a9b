/* worker.c — a fixed pool of threads for blocking work, reporting back to
 * the event loop.
 *
 * Owns the job queue (mutex + condition variable), the threads, and the
 * done-queue that hands finished jobs to the loop: workers append to it and
 * poke an eventfd; a persistent event on the loop's base drains it and runs
 * the done callbacks there.  The loop is only ever touched from its own
 * thread, so libevent needs no locking (no evthread_use_pthreads).
 * Does not own what the jobs do or the memory behind their arguments.
 */
#include "worker.h"

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

/* Everything below is guarded by lock, except base, ev and threads, which
 * only the thread calling worker_init/worker_shutdown touches. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static int accepting; /* 1 between init and shutdown */
static int stopping;  /* threads exit once the queue is empty */
static int waiting, running, queue_limit;
static struct job_list queue;    /* waiting for a thread */
static struct job_list finished; /* waiting for the loop */

static struct event_base *base;
static struct event *ev;
static int efd = -1;
static pthread_t *threads;
static int nthreads_started;

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

static void *thread_main(void *unused)
{
	struct job *j;

	(void)unused;
	for (;;) {
		pthread_mutex_lock(&lock);
		while (!queue.head && !stopping)
			pthread_cond_wait(&wake, &lock);
		j = list_pop(&queue);
		if (!j) {
			pthread_mutex_unlock(&lock);
			return NULL;
		}
		waiting--;
		running++;
		pthread_mutex_unlock(&lock);

		j->work(j->arg);

		pthread_mutex_lock(&lock);
		running--;
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

/* Joins the threads that were started and releases the loop resources. */
static void teardown(void)
{
	int i;

	pthread_mutex_lock(&lock);
	accepting = 0;
	stopping = 1;
	pthread_cond_broadcast(&wake);
	pthread_mutex_unlock(&lock);

	for (i = 0; i < nthreads_started; i++)
		pthread_join(threads[i], NULL);
	free(threads);
	threads = NULL;
	nthreads_started = 0;

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

	pthread_mutex_lock(&lock);
	stopping = 0;
	waiting = running = 0;
	pthread_mutex_unlock(&lock);
}

int worker_init(struct event_base *evbase, int nthreads, int queue_max)
{
	sigset_t all, old;
	int i;

	if (!evbase || nthreads < 1 || nthreads > THREADS_MAX || queue_max < 1)
		return -1;
	pthread_mutex_lock(&lock);
	if (accepting || threads) {
		pthread_mutex_unlock(&lock);
		return -1;
	}
	queue_limit = queue_max;
	pthread_mutex_unlock(&lock);

	threads = calloc((size_t)nthreads, sizeof(*threads));
	if (!threads)
		goto fail;
	efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (efd < 0)
		goto fail;
	base = evbase;
	ev = event_new(base, efd, EV_READ | EV_PERSIST, on_notify, NULL);
	if (!ev || event_add(ev, NULL) != 0)
		goto fail;

	/* Signals belong to the loop thread: workers start with all blocked. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (i = 0; i < nthreads; i++) {
		if (pthread_create(&threads[i], NULL, thread_main, NULL) != 0)
			break;
		nthreads_started++;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (nthreads_started != nthreads)
		goto fail;

	pthread_mutex_lock(&lock);
	accepting = 1;
	pthread_mutex_unlock(&lock);
	return 0;
fail:
	teardown();
	return -1;
}

int worker_submit(void (*work)(void *arg), void (*done)(void *arg), void *arg)
{
	struct job *j;

	if (!work)
		return -1;
	j = malloc(sizeof(*j));
	if (!j)
		return -1;
	j->work = work;
	j->done = done;
	j->arg = arg;

	pthread_mutex_lock(&lock);
	if (!accepting || waiting >= queue_limit) {
		pthread_mutex_unlock(&lock);
		free(j);
		return -1;
	}
	list_push(&queue, j);
	waiting++;
	pthread_cond_signal(&wake);
	pthread_mutex_unlock(&lock);
	return 0;
}

int worker_pending(void)
{
	int n;

	pthread_mutex_lock(&lock);
	n = waiting + running;
	pthread_mutex_unlock(&lock);
	return n;
}

void worker_shutdown(void)
{
	if (!threads && !ev && efd < 0)
		return;
	teardown();
}
