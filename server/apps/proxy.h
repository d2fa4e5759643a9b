/* proxy.h — the reverse proxy in front of apps in containers (Jupyter,
 * TensorBoard, any published port), each on its own origin
 * <route>.<apps_domain>.
 *
 * The http layer hands every request whose Host is under the apps domain
 * to the proxy's virtual host (proxy_vhost, instead of the router).  The proxy resolves the route and
 * the route cookie (a route session made by the one-time handshake at
 * /__gpucloud/handshake) against the database, with a short cache, checks
 * that the caller may use the route (owner or admin) and that the instance
 * runs, then forwards the request over HTTP/1.1 to the published port,
 * streaming both ways with backpressure and reusing upstream connections.
 * A websocket Upgrade answered 101 by the app becomes a raw tunnel, re-
 * checked every cfg.proxy_recheck seconds (closed when the session expires
 * or the instance stops).  Instance changes reach every replica at once:
 * a LISTEN on channel gc_routes (notify.h; sent by triggers of
 * db/migrations/0012_route_notify.sql) drops the instance's cached checks
 * and re-checks its tunnels on the spot; the cache's expiry and the
 * periodic re-check remain the fallback while the listener is down.
 *
 * This header is all the rest of the server sees of apps/ proxying; the
 * parts behind it: route.h (route check, cookies, handshake), upstream.h
 * (connections to apps, idle pool), tunnel.h (websockets), forward.h
 * (header rules), page.h (the proxy's own pages), activity.h (traffic).
 */
#ifndef GPUCLOUD_PROXY_H
#define GPUCLOUD_PROXY_H

#include <event2/buffer.h>
#include <event2/event.h>

#include "net/http.h"

/* Starts the proxy's timers.  port: the port the server listens on (for
 * route URLs when cfg.apps_port is 0).  Returns 0 or -1. */
int proxy_init(struct event_base *base, int port);
/* Closes tunnels and idle upstream connections, stops timers. */
void proxy_shutdown(void);

/* The http server's virtual host for every host under cfg.apps_domain
 * (struct http_server_opts.vhost); a host there that is not a route id
 * gets 404, never the API. */
extern const struct http_vhost proxy_vhost;

/* Writes the origin of route id ("http://<id>.localhost:8080") into out. */
void proxy_route_origin(const char *route_id, char *out, size_t outlen);

/* 1 when s is a well-formed route id (a lowercase DNS label). */
int proxy_route_id_ok(const char *s);

/* Appends the proxy's counters (requests, bytes, open tunnels, idle
 * upstream connections; no per-route or per-instance labels, which would
 * list other users' routes) in Prometheus text to out. */
void proxy_metrics(struct evbuffer *out);

#endif
