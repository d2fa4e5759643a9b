/* reclaim.h — idle reclamation of instances.
 *
 * Policies per role (table idle_policies, admin API /idle-policies): an
 * instance is idle when no activity was seen for idle_seconds — activity
 * being proxied traffic (the proxy writes instances.last_activity_at), CPU
 * use at or above cfg.idle_cpu_percent in the engine's stats, or GPU use
 * where a node can report it (declared GPUs cannot: not a signal there).
 * An idle instance is warned (idle_warning_at and idle_message, visible in
 * the API and UI), then stopped warn_seconds later unless activity came
 * back; any instance running longer than max_lifetime_seconds is stopped.
 * Runs on the scheduler leader every cfg.reclaim_interval seconds (a cron
 * section).
 */
#ifndef GPUCLOUD_RECLAIM_H
#define GPUCLOUD_RECLAIM_H

#include <jansson.h>

/* Registers the round on the cron (leader only; cron_init() first).
 * Returns 0 or -1. */
int reclaim_init(void);

/* One round (does nothing while a round is under way). */
void reclaim_run(void);

/* Pure: CPU use in percent of one core from an engine stats document
 * (cpu_stats against precpu_stats), or -1 when it cannot be computed. */
double reclaim_cpu_percent(const json_t *stats);

#endif
