/* terminal.h — the web terminal: a websocket on the API origin
 * (GET /api/v1/instances/{id}/terminal) bridged to a shell started in the
 * instance's container with Docker exec and a TTY.
 *
 * Authenticated like every API call (the session cookie, and an Origin that
 * is the API's own, so other sites cannot open it); owner or admin of a
 * running instance.  Messages: text frames from the browser are keyboard
 * input (UTF-8), binary frames from the browser are control messages
 * ({"cols":N,"rows":N} resizes the TTY); binary frames to the browser are
 * the terminal's output.  Closed when the shell exits, the instance stops
 * or the session or API token that opened it ends (checked every
 * cfg.proxy_recheck seconds).  A token needs the 'write' scope.
 */
#ifndef GPUCLOUD_TERMINAL_H
#define GPUCLOUD_TERMINAL_H

#include <event2/event.h>

#include "net/router.h"

extern const struct route api_terminal_routes[];

/* Starts the re-check timer.  0 or -1. */
int terminal_init(struct event_base *base);
/* Closes every terminal. */
void terminal_shutdown(void);

#endif
