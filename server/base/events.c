/* events.c — typed wake-ups (see events.h).
 *
 * Owns: a small fixed table of subscribers per kind and the bridge hook.
 * Does not own: what a wake-up means (the subscribers) nor how it crosses
 * replicas (db/leader.c).
 */
#include "base/events.h"

#include <stddef.h>
#include <string.h>

#define MAX_SUBS 8

struct sub {
	events_cb cb;
	void *arg;
};

static struct sub subs[EV__COUNT][MAX_SUBS];
static int nsubs[EV__COUNT];
static events_bridge_fn bridge;
static void *bridge_arg;

static const char *const names[EV__COUNT] = {
	[EV_ALLOC_CHANGED] = "alloc_changed",
	[EV_ALLOC_GRANTED] = "alloc_granted",
	[EV_WORKLOAD_CHANGED] = "workload_changed",
	[EV_JOB_LOG] = "job_log",
};

int events_subscribe(enum events_kind kind, events_cb cb, void *arg)
{
	if ((int)kind < 0 || kind >= EV__COUNT || !cb || nsubs[kind] >= MAX_SUBS)
		return -1;
	subs[kind][nsubs[kind]].cb = cb;
	subs[kind][nsubs[kind]].arg = arg;
	nsubs[kind]++;
	return 0;
}

void events_deliver(enum events_kind kind)
{
	if ((int)kind < 0 || kind >= EV__COUNT)
		return;
	for (int i = 0; i < nsubs[kind]; i++)
		subs[kind][i].cb(kind, subs[kind][i].arg);
}

void events_publish(enum events_kind kind)
{
	events_deliver(kind);
	if (bridge && (int)kind >= 0 && kind < EV__COUNT)
		bridge(kind, bridge_arg);
}

void events_set_bridge(events_bridge_fn fn, void *arg)
{
	bridge = fn;
	bridge_arg = arg;
}

const char *events_name(enum events_kind kind)
{
	return (int)kind >= 0 && kind < EV__COUNT ? names[kind] : NULL;
}

int events_parse(const char *name)
{
	for (int i = 0; name && i < EV__COUNT; i++)
		if (strcmp(names[i], name) == 0)
			return i;
	return -1;
}

void events_reset(void)
{
	memset(subs, 0, sizeof(subs));
	memset(nsubs, 0, sizeof(nsubs));
	bridge = NULL;
	bridge_arg = NULL;
}
