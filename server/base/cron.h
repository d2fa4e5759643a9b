/* cron.h — the server's one periodic timer (in the manner of redis
 * serverCron): every periodic pass registers a section with its period,
 * and one libevent timer is armed for the earliest section due.
 *
 * A section runs at most once per due time; before it runs its next run is
 * set one period ahead, so a section may call cron_soon()/cron_next() on
 * itself to say otherwise (an asynchronous pass that re-arms when it ends,
 * or one that could not run yet and wants to try again sooner).  A wake-up
 * ("kick") is cron_soon(section, a few ms): sooner, never later.
 * Sections run on the event loop's thread and must not block.
 */
#ifndef GPUCLOUD_CRON_H
#define GPUCLOUD_CRON_H

#include <event2/event.h>

struct cron_section;
typedef void (*cron_fn)(struct cron_section *s, void *arg);

/* Creates the timer.  Returns 0 or -1. */
int cron_init(struct event_base *base);

/* Registers fn to run every period_ms (at least 1), the first time after
 * first_ms.  name is a static string (logs).  Returns the section (owned by
 * cron, valid until cron_shutdown()) or NULL (out of memory, or
 * cron_init() not called). */
struct cron_section *cron_every(const char *name, int period_ms, int first_ms, cron_fn fn,
                                void *arg);

/* The section runs within ms from now: sooner than planned, never later. */
void cron_soon(struct cron_section *s, int ms);

/* The section's next run is exactly ms from now (sooner or later). */
void cron_next(struct cron_section *s, int ms);

/* How many times the section ran (metrics, tests). */
long long cron_runs(const struct cron_section *s);

/* Frees the timer and every section; NULL-safe to call twice. */
void cron_shutdown(void);

#endif
