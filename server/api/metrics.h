/* metrics.h — Prometheus text exposition of the server's counters.
 *
 * The http layer reports every finished request; /metrics renders request
 * counts by route and status, a latency histogram by route, open
 * connections, the database pool and the worker queue.
 */
#ifndef GPUCLOUD_METRICS_H
#define GPUCLOUD_METRICS_H

#include <event2/buffer.h>
#include "net/http.h"

/* The http observe hook. */
void metrics_observe(const struct http_req *r, int status, double seconds);

/* Starts the periodic read of the platform gauges (every
 * cfg.metrics_refresh_ms, the first at once).  Returns 0 or -1. */
int metrics_init(void);

/* Nodes registered and nodes up as of the last read; -1 before the first. */
int metrics_nodes(int *up, int *total);

/* Appends the whole exposition to out. */
void metrics_render(struct evbuffer *out);

#endif
