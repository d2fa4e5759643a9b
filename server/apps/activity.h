/* activity.h — the traffic of apps behind the proxy: bytes counted, and
 * each instance's last_activity_at (what the idle reclaimer reads) kept
 * fresh.  Internal to apps/ (the rest of the server uses proxy.h).
 */
#ifndef GPUCLOUD_ACTIVITY_H
#define GPUCLOUD_ACTIVITY_H

#include <stddef.h>

/* Counts bytes moved (either way) for route of instance instance_id, and
 * sets the instance's last_activity_at at most every few seconds per route
 * (a statement nobody waits for; a failure is logged).  Best effort: when
 * the per-route table is full, only the total counts. */
void activity_note(const char *route, long long instance_id, size_t bytes);

/* The same with route's key from activity_key(route), for a caller that
 * notes one route often (a tunnel, per read). */
unsigned activity_key(const char *route);
void activity_note_key(const char *route, unsigned key, long long instance_id, size_t bytes);

/* Bytes moved through the proxy since start, all routes, both ways. */
unsigned long long activity_bytes(void);

#endif
