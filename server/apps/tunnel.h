/* tunnel.h — websocket tunnels of the app proxy: after an app answered a
 * websocket Upgrade with 101, the client's and the app's connections are
 * spliced, bytes flow both ways with backpressure, and the tunnel is
 * closed when its route check fails later.
 * Internal to apps/ (the rest of the server uses proxy.h).
 */
#ifndef GPUCLOUD_TUNNEL_H
#define GPUCLOUD_TUNNEL_H

#include <event2/bufferevent.h>

struct tunnel;

/* Allocates a tunnel to start with tunnel_start(); NULL without memory.
 * One that is not started is released with free(). */
struct tunnel *tunnel_new(void);

/* Splices client and app (takes ownership of t and of both bufferevents,
 * whose callbacks, watermarks and timeouts it replaces): what is already
 * queued on either side's output goes out first, bytes already in the
 * client's input are forwarded.  route, cookie_hash and instance_id are
 * what tunnel_recheck() checks again.  app_eof: the app already hung up
 * (what it sent is delivered, then the tunnel closes). */
void tunnel_start(struct tunnel *t, struct bufferevent *client, struct bufferevent *app,
                  const char *route, const char *cookie_hash, long long instance_id, int app_eof);

/* Checks the open tunnels of instance id again (all when id < 0), one
 * route check per distinct (route, session), and closes those whose route
 * is gone, whose session ended or whose instance is not running.  While
 * the database is unreachable, open tunnels stay open. */
void tunnel_recheck(long long id);

/* Websocket tunnels open now. */
long long tunnel_open_count(void);

/* Closes every tunnel (at shutdown). */
void tunnel_close_all(void);

#endif
