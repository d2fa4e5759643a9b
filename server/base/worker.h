/* worker.h — small pools of threads for work that would block the loop
 * (scrypt password hashing, directory scans).
 *
 * work(arg) runs on a worker thread; done(arg) then runs on the loop thread.
 * Nothing of the loop (bufferevents, db, http) may be touched from work().
 *
 * Work runs in lanes, each with its own threads and its own bounded queue, so
 * that one kind of work cannot starve another: WORKER_GENERAL (file listings,
 * downloads, uploads, quota scans) and WORKER_PASSWORD (scrypt: a login flood
 * fills only this lane's queue and keeps only its threads busy).
 */
#ifndef GPUCLOUD_WORKER_H
#define GPUCLOUD_WORKER_H

#include <event2/event.h>

enum worker_lane { WORKER_GENERAL, WORKER_PASSWORD, WORKER_LANES };

/* Starts the general lane's nthreads threads, whose completions (and every
 * other lane's) are delivered on base.  queue_max bounds jobs waiting for a
 * thread.  Returns 0 or -1. */
int worker_init(struct event_base *base, int nthreads, int queue_max);

/* Starts another lane (after worker_init, on the loop thread) with threads
 * and a queue of its own.  Returns 0, also when the lane already runs (its
 * size then stays), or -1 (bad arguments, worker_init not called, no
 * threads). */
int worker_lane_init(enum worker_lane lane, int nthreads, int queue_max);

/* Queues a job on the general lane / on lane.  Returns 0, or -1 when the
 * lane's queue is full, the lane is not running or the pool is shut down
 * (then neither callback will run: the caller still owns arg). */
int worker_submit(void (*work)(void *arg), void (*done)(void *arg), void *arg);
int worker_submit_lane(enum worker_lane lane, void (*work)(void *arg), void (*done)(void *arg),
                       void *arg);

/* Jobs waiting + running, in every lane / in lane. */
int worker_pending(void);
int worker_lane_pending(enum worker_lane lane);

/* Stops accepting jobs, lets running and queued jobs of every lane finish,
 * joins the threads, then runs the done() callbacks not yet delivered on the
 * calling thread, so none is lost.  Call it from the loop thread (or once
 * the loop has stopped), before event_base_free(); never from work().  A
 * no-op when the pool is not running; worker_init() may be called again
 * afterwards. */
void worker_shutdown(void);

#endif
