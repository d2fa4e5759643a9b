/* test_cron.c — the one periodic timer and the typed wake-ups: sections run
 * at their period, a kick brings one forward (never later), a section may
 * re-arm itself; wake-ups reach their subscribers and the bridge, and
 * names travel both ways.
 */
#include <event2/event.h>

#include "base/cron.h"
#include "base/events.h"
#include "harness.h"

static struct event_base *evb;
static int a_runs, b_runs, c_runs;

static void a_fn(struct cron_section *s, void *arg)
{
	(void)s;
	(void)arg;
	a_runs++;
}

static void b_fn(struct cron_section *s, void *arg)
{
	(void)s;
	(void)arg;
	b_runs++;
}

/* asks to run again in 5 ms, overriding its long period */
static void c_fn(struct cron_section *s, void *arg)
{
	(void)arg;
	if (++c_runs < 3)
		cron_next(s, 5);
}

static void run_for(int ms)
{
	struct timeval tv = { 0, ms * 1000 };

	event_base_loopexit(evb, &tv);
	event_base_dispatch(evb);
}

TEST(periods)
{
	struct cron_section *a, *b;

	evb = event_base_new();
	CHECK(cron_every("x", 10, 0, a_fn, NULL) == NULL); /* before cron_init */
	CHECK(cron_init(evb) == 0);
	a = cron_every("a", 20, 0, a_fn, NULL);
	b = cron_every("b", 100000, 100000, b_fn, NULL);
	CHECK(a && b);
	run_for(110);
	/* at 0, 20, 40, 60, 80, 100 ms: allow for a slow machine */
	CHECK(a_runs >= 3 && a_runs <= 7);
	CHECK(cron_runs(a) == a_runs);
	CHECK(b_runs == 0);
	/* a kick: soon, not a period away */
	cron_soon(b, 1);
	run_for(30);
	CHECK(b_runs == 1);
	/* a later "soon" does not postpone a section already due sooner */
	cron_soon(b, 1);
	cron_soon(b, 100000);
	run_for(30);
	CHECK(b_runs == 2);
	cron_shutdown();
	event_base_free(evb);
}

TEST(rearm_itself)
{
	evb = event_base_new();
	CHECK(cron_init(evb) == 0);
	CHECK(cron_every("c", 100000, 0, c_fn, NULL) != NULL);
	run_for(80);
	CHECK(c_runs == 3);
	cron_shutdown();
	cron_shutdown(); /* twice is fine */
	cron_soon(NULL, 1);
	event_base_free(evb);
}

static int got[EV__COUNT], bridged[EV__COUNT];

static void on_ev(enum events_kind k, void *arg)
{
	got[k] += arg ? *(int *)arg : 1;
}

static void bridge(enum events_kind k, void *arg)
{
	(void)arg;
	bridged[k]++;
}

TEST(wakeups)
{
	int two = 2;

	events_reset();
	CHECK(events_subscribe(EV_ALLOC_CHANGED, on_ev, NULL) == 0);
	CHECK(events_subscribe(EV_ALLOC_CHANGED, on_ev, &two) == 0);
	CHECK(events_subscribe(EV_WORKLOAD_CHANGED, on_ev, NULL) == 0);
	CHECK(events_subscribe(EV__COUNT, on_ev, NULL) < 0);
	events_publish(EV_ALLOC_CHANGED);
	CHECK(got[EV_ALLOC_CHANGED] == 3);
	CHECK(got[EV_WORKLOAD_CHANGED] == 0);
	CHECK(got[EV_ALLOC_GRANTED] == 0);
	/* the bridge hears publishes, not deliveries (those came from it) */
	events_set_bridge(bridge, NULL);
	events_publish(EV_WORKLOAD_CHANGED);
	events_deliver(EV_WORKLOAD_CHANGED);
	CHECK(got[EV_WORKLOAD_CHANGED] == 2);
	CHECK(bridged[EV_WORKLOAD_CHANGED] == 1);
	for (int k = 0; k < EV__COUNT; k++)
		CHECK(events_parse(events_name((enum events_kind)k)) == k);
	CHECK(events_parse("nonsense") == -1);
	CHECK(events_parse(NULL) == -1);
	CHECK(events_name(EV__COUNT) == NULL);
	events_reset();
	events_publish(EV_ALLOC_CHANGED);
	CHECK(got[EV_ALLOC_CHANGED] == 3);
}

int main(void)
{
	RUN(periods);
	RUN(rearm_itself);
	RUN(wakeups);
	return harness_done("test_cron");
}
