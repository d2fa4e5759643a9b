/* jobmetrics.h — the scalars jobs report, and the CPU and memory they use.
 *
 * On the scheduler leader, two cron sections:
 *   - collect (cfg.job_metrics_interval_ms, sooner when a job's log got a
 *     new line): for each running job (and for a while after it ended) the
 *     new complete lines of its output.log (GPUCLOUD_METRIC lines) and of
 *     metrics.jsonl in its directory are parsed (metricline.h) and stored
 *     with how far they were read, in one transaction (job_metrics_store()
 *     in 0024_job_metrics.sql): a restart resumes exactly there, and a
 *     point read twice overwrites itself.  A point without a step takes its
 *     line's number in that file.  Series over cfg.job_metrics_max_points
 *     are thinned; jobs.last_metrics gets each series' latest value.
 *   - usage (cfg.job_usage_interval_ms): one stats sample of each running
 *     job's container (CPU as reclaim.c reads it, memory without the page
 *     cache) into job_usage; GPU use is left NULL (not measurable).
 * The files belong to the user: they are opened beneath the user's home
 * without following a final symlink, without blocking (a FIFO), regular
 * files only, and read at most JOBMETRICS_READ_MAX bytes per file and pass.
 */
#ifndef GPUCLOUD_JOBMETRICS_H
#define GPUCLOUD_JOBMETRICS_H

#include <stddef.h>

#include <jansson.h>

/* bytes read from one file per pass; lines longer than JOBMETRICS_LINE_MAX
 * are skipped (still counted) */
#define JOBMETRICS_READ_MAX (1 << 20)
#define JOBMETRICS_LINE_MAX 65536

/* Registers the two sections on the cron (cron_init() first).  Returns 0
 * or -1. */
int jobmetrics_init(void);

/* The job driver wrote data to job id's output.log: a complete line makes
 * the next collect come soon. */
void jobmetrics_job_output(long long id, const char *data, size_t len);

/* Pure: memory a container uses in bytes from an engine stats document
 * (usage less the inactive page cache), or -1 when it is not there. */
long long jobmetrics_mem_bytes(const json_t *stats);

/* Pure: scans buf[0..len) of one source for complete lines (a final line
 * without a newline only when last is set).  Each line's number is
 * *lines + 1 (then *lines is incremented); metric lines (log: the log's
 * GPUCLOUD_METRIC form; else a metrics.jsonl line) append
 * {"n": name, "s": step, "v": value} objects (comma-separated, a comma
 * first when *out_len is not 0) to out, at most max_points in all (stops
 * before a line that would exceed it).  Returns the bytes consumed
 * (complete lines; a line over JOBMETRICS_LINE_MAX without its end is consumed
 * uncounted), or -1 when out cannot grow.  out is caller-owned (realloc). */
long jobmetrics_scan(const char *buf, size_t len, int log, int last, long long *lines, char **out,
                     size_t *out_len, size_t *out_cap, long *points, long max_points);

#endif
