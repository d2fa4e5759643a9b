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

/* Appends the whole exposition to out. */
void metrics_render(struct evbuffer *out);

#endif
