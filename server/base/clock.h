/* clock.h — the one monotonic clock of gpucloudd.
 *
 * Timeouts, backoffs, durations and rate windows read CLOCK_MONOTONIC through
 * here, so a wall-clock step (NTP, an admin's `date`) never fires or stalls a
 * timer.  Wall-clock time for people (logs, Date headers, the database) is not
 * this module's: it comes from time(2) or from PostgreSQL's now().
 */
#ifndef GPUCLOUD_CLOCK_H
#define GPUCLOUD_CLOCK_H

/* Seconds since an arbitrary fixed point (boot), with sub-microsecond
 * resolution.  Only differences mean anything. */
double clock_now_s(void);

/* The same instant in milliseconds, with a fraction. */
double clock_now_ms(void);

#endif
