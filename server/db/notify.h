/* notify.h — PostgreSQL LISTEN on the event loop: one dedicated connection
 * (outside the query pool, which must never sit in LISTEN) that delivers
 * NOTIFY payloads of one channel to a callback.
 *
 * The connection is opened asynchronously (PQconnectStart/PQconnectPoll),
 * then sends "LISTEN <channel>"; when it breaks it reconnects with backoff
 * (250 ms doubling up to 2 s).  Notifications sent while it was down are
 * lost, so the owner is told each time the listener comes up (payload NULL)
 * and must treat that as "anything may have changed".
 */
#ifndef GPUCLOUD_NOTIFY_H
#define GPUCLOUD_NOTIFY_H

#include <event2/event.h>

/* payload: the NOTIFY payload, or NULL when the listener (re)connected. */
typedef void (*notify_cb)(const char *payload, void *arg);

struct notify;

/* Starts listening on channel (a plain SQL identifier) with the database at
 * url.  Returns the listener, or NULL (bad arguments, out of memory). */
struct notify *notify_new(struct event_base *base, const char *url, const char *channel,
                          notify_cb cb, void *arg);
/* 1 while the LISTEN is in place. */
int notify_up(const struct notify *n);
/* Closes the connection; NULL is a no-op. */
void notify_free(struct notify *n);

#endif
