/* cron.c — one timer for every periodic pass (see cron.h).
 *
 * Owns: the list of sections, each with its period and the monotonic time
 * it is next due, and the one evtimer armed for the earliest of them.
 * Does not own: what a section does, nor whether it should run on this
 * replica (a leader-only section asks db/leader.h itself).
 */
#include "base/clock.h"
#include "base/cron.h"

#include <stdlib.h>
#include <time.h>

struct cron_section {
	const char *name;
	int period_ms;
	double due; /* monotonic ms */
	long long runs;
	cron_fn fn;
	void *arg;
	struct cron_section *next;
};

static struct event *timer;
static struct cron_section *sections;
static int running; /* inside on_timer: it re-arms once at the end */

static void rearm(void)
{
	struct cron_section *s, *first = NULL;
	struct timeval tv;
	double wait;

	if (!timer || running)
		return;
	for (s = sections; s; s = s->next)
		if (!first || s->due < first->due)
			first = s;
	if (!first) {
		evtimer_del(timer);
		return;
	}
	wait = first->due - clock_now_ms();
	if (wait < 0)
		wait = 0;
	tv.tv_sec = (long)(wait / 1000.0);
	tv.tv_usec = (long)((wait - (double)tv.tv_sec * 1000.0) * 1000.0);
	evtimer_add(timer, &tv);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
	double now = clock_now_ms();

	(void)fd;
	(void)what;
	(void)arg;
	running = 1;
	for (struct cron_section *s = sections; s; s = s->next) {
		if (s->due > now)
			continue;
		s->due = now + s->period_ms;
		s->runs++;
		s->fn(s, s->arg);
	}
	running = 0;
	rearm();
}

int cron_init(struct event_base *base)
{
	timer = evtimer_new(base, on_timer, NULL);
	return timer ? 0 : -1;
}

struct cron_section *cron_every(const char *name, int period_ms, int first_ms, cron_fn fn,
                                void *arg)
{
	struct cron_section *s, **pp;

	if (!timer || !fn)
		return NULL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->name = name;
	s->period_ms = period_ms > 0 ? period_ms : 1;
	s->due = clock_now_ms() + (first_ms > 0 ? first_ms : 0);
	s->fn = fn;
	s->arg = arg;
	/* registration order is run order within one tick */
	for (pp = &sections; *pp; pp = &(*pp)->next)
		;
	*pp = s;
	rearm();
	return s;
}

void cron_soon(struct cron_section *s, int ms)
{
	double due;

	if (!s)
		return;
	due = clock_now_ms() + (ms > 0 ? ms : 0);
	if (due < s->due) {
		s->due = due;
		rearm();
	}
}

void cron_next(struct cron_section *s, int ms)
{
	if (!s)
		return;
	s->due = clock_now_ms() + (ms > 0 ? ms : 0);
	rearm();
}

long long cron_runs(const struct cron_section *s)
{
	return s ? s->runs : 0;
}

void cron_shutdown(void)
{
	while (sections) {
		struct cron_section *s = sections;
		sections = s->next;
		free(s);
	}
	if (timer)
		event_free(timer);
	timer = NULL;
}
