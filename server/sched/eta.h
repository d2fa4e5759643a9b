/* eta.h — when may a waiting request start?  A pure estimate made after
 * each placement pass from the same snapshot (struct place_input) and the
 * pass's decisions.
 *
 * Conservative simulation: every running allocation ends at the latest
 * moment its limits allow (a job's start + its max_runtime_s, a quota's
 * maximum runtime, a raw allocation's lease); the requests still waiting are
 * walked in the order the pass considered them, each starting at the first
 * of those end times (or now) when a schedulable node has room for it (and
 * its quota), then holding that room for its own maximum runtime.  Nodes
 * that do not take work now (down, draining, cordoned, degraded) give
 * nothing.  Work without a known end holds its room for good, so anything
 * waiting for that room has no estimate, and says why.
 *
 * No I/O, no clock (the caller passes now): testable with exact outcomes.
 */
#ifndef GPUCLOUD_ETA_H
#define GPUCLOUD_ETA_H

#include <stdint.h>

#include "sched/place.h"

/* At most this many waiting requests get an estimate per pass (the first
 * ones in the order they were considered); the rest say they are too far
 * back. */
#define ETA_MAX 128

struct eta_input {
	const struct place_input *in;
	const struct place_result *res; /* the pass's decisions, in their order */
	const int64_t *run_end;         /* per in->running[i]: latest end, unix s; 0 unknown */
	const int64_t *queue_dur;       /* per in->queue[i]: max runtime, s; 0 unknown */
	int64_t now;                    /* unix s */
	int64_t grace_s;                /* preemption grace (a PREEMPTING request's wait) */
};

struct eta_out {
	int64_t at;    /* unix s; 0: no estimate */
	char why[200]; /* at == 0: why not (English, lower-case) */
};

/* Fills out[i] for each in->queue[i] (placed ones get at = 0, why "").
 * Returns 0, or -1 when out of memory (out then says nothing). */
int eta_run(const struct eta_input *e, struct eta_out *out);

#endif
