/* jobs.h — training jobs: the job kind of the leader's workload driver.
 *
 * A job is a command in a catalog image that runs to its end.  Users (the
 * API) write the record, its allocation request and the desired state
 * (running, or cancelled); on the scheduler leader the driver (driver.c)
 * reads the jobs whose state and desire disagree and jobs.c takes each
 * one further on the workload state machine (workload.h):
 *   queued → starting (images_ensure on the allocated node, the job
 *   directory and hyperparameters.json, the launcher's network, create,
 *   start) → running (the log streamed into <jobdir>/output.log) → on exit
 *   succeeded (0) or failed (the exit code, OOM-killed, the cause the log
 *   tail shows) — the container removed, the allocation released at once,
 *   the directory kept.  A cancel or the runtime limit goes through
 *   stopping (SIGTERM, a grace, SIGKILL) to cancelled or failed.
 * A job whose process died (kill -9, a new leader) is resumed from the
 * database: a starting job's create finds its container by its
 * deterministic name (gc-<cluster8>-job-<id>); a running job's log is
 * followed again from its last checkpoint, so output.log stays complete
 * and in order, without a line twice.
 * A distributed job (members N > 1, 0027_job_members.sql) runs the same
 * way once per member: rank r on the r-th node of its gang allocation, as
 * its own operation, container gc-<cluster8>-job-<id>[-r<r>], log
 * output.log (rank 0) or output.rank<r>.log, on the node's distributed-job
 * network with the torchrun-style variables (ddp.h).  The job runs when
 * all members run and succeeds when all exit 0; a member that fails puts
 * the job in stopping with its reason ("rank r: ..."), the others are
 * stopped, and the job ends (allocation released) once no member is live.
 */
#ifndef GPUCLOUD_JOBS_H
#define GPUCLOUD_JOBS_H

#include <stddef.h>

#include <event2/event.h>

/* Registers the job kind with the driver (cfg.instance_tick_ms).  Returns
 * 0 or -1. */
int jobs_init(struct event_base *base);

/* Cancels this process's engine calls and timers (operations stay
 * allocated until exit: database callbacks may still name them). */
void jobs_shutdown(void);

/* The job's directory below the data root, into out:
 * home/<username>/jobs/<id>-<name>. */
void jobs_directory(const char *username, long long id, const char *name, char *out, size_t outlen);

/* 1 while a launch on the node is under way in this process (it may be
 * about to use a network the listing shows as empty). */
int jobs_launching(long long node_id);

/* 1 when this process runs an operation on job id. */
int jobs_op_busy(long long id);

#endif
