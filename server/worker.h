/* worker.h — a small pool of threads for work that would block the loop
 * (scrypt password hashing, directory scans).
 *
 * work(arg) runs on a worker thread; done(arg) then runs on the loop thread.
 * Nothing of the loop (bufferevents, db, http) may be touched from work().
 */
#ifndef GPUCLOUD_WORKER_H
#define GPUCLOUD_WORKER_H

#include <event2/event.h>

/* Starts nthreads threads whose completions are delivered on base.
 * queue_max bounds jobs waiting for a thread.  Returns 0 or -1. */
int worker_init(struct event_base *base, int nthreads, int queue_max);

/* Queues a job.  Returns 0, or -1 when the queue is full or the pool is shut
 * down (then neither callback will run: the caller still owns arg). */
int worker_submit(void (*work)(void *arg), void (*done)(void *arg), void *arg);

/* Jobs waiting + running. */
int worker_pending(void);

/* Stops accepting jobs, lets running and queued jobs finish, joins the
 * threads, then runs the done() callbacks not yet delivered on the calling
 * thread, so none is lost.  Call it from the loop thread (or once the loop
 * has stopped), before event_base_free(); never from work().  A no-op when
 * the pool is not running; worker_init() may be called again afterwards. */
void worker_shutdown(void);

#endif
