/* metrics.c — counters and histograms, rendered in Prometheus text format.
 *
 * Owns the request counters keyed by (route pattern, method, status) and a
 * latency histogram per route pattern.  Reads gauges from the http layer,
 * the database pool and the worker pool when rendering.
 */
#include "api/metrics.h"

#include <string.h>

#include <http_parser.h>

#include "db/db.h"
#include "apps/proxy.h"
#include "base/worker.h"

#define MAX_COUNTERS 1024
#define MAX_ROUTES   256
#define NBUCKETS     13

static const double buckets[NBUCKETS] = { 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
	                                  0.1,    0.25,  0.5,    1,     2.5,  10 };

struct counter {
	const char *pattern;
	int method;
	int status;
	unsigned long long n;
};

struct hist {
	const char *pattern;
	unsigned long long b[NBUCKETS];
	unsigned long long count;
	double sum;
};

static struct counter counters[MAX_COUNTERS];
static int ncounters;
static struct hist hists[MAX_ROUTES];
static int nhists;

void metrics_observe(const struct http_req *r, int status, double seconds)
{
	/* unmatched paths share one label so scanners cannot grow the table */
	const char *pattern = r->route ? r->route->pattern : "unmatched";
	int i;

	for (i = 0; i < ncounters; i++)
		if (counters[i].pattern == pattern && counters[i].method == r->method &&
		    counters[i].status == status)
			break;
	if (i == ncounters && ncounters < MAX_COUNTERS) {
		counters[i].pattern = pattern;
		counters[i].method = r->method;
		counters[i].status = status;
		ncounters++;
	}
	if (i < ncounters)
		counters[i].n++;
	for (i = 0; i < nhists; i++)
		if (hists[i].pattern == pattern)
			break;
	if (i == nhists && nhists < MAX_ROUTES)
		hists[nhists++].pattern = pattern;
	if (i < nhists) {
		for (int b = 0; b < NBUCKETS; b++)
			if (seconds <= buckets[b])
				hists[i].b[b]++;
		hists[i].count++;
		hists[i].sum += seconds;
	}
}

void metrics_render(struct evbuffer *out)
{
	struct http_stats hs;
	struct db_stats ds;

	http_get_stats(&hs);
	db_get_stats(&ds);
	evbuffer_add_printf(
	        out,
	        "# HELP gpucloud_http_requests_total HTTP requests by route, method and status.\n"
	        "# TYPE gpucloud_http_requests_total counter\n");
	for (int i = 0; i < ncounters; i++)
		evbuffer_add_printf(out,
		                    "gpucloud_http_requests_total{route=\"%s\",method=\"%s\","
		                    "status=\"%d\"} %llu\n",
		                    counters[i].pattern, http_method_name(counters[i].method),
		                    counters[i].status, counters[i].n);
	evbuffer_add_printf(
	        out,
	        "# HELP gpucloud_http_request_duration_seconds Time from first byte to response.\n"
	        "# TYPE gpucloud_http_request_duration_seconds histogram\n");
	for (int i = 0; i < nhists; i++) {
		for (int b = 0; b < NBUCKETS; b++)
			evbuffer_add_printf(out,
			                    "gpucloud_http_request_duration_seconds_bucket{route="
			                    "\"%s\",le=\"%g\"} %llu\n",
			                    hists[i].pattern, buckets[b], hists[i].b[b]);
		evbuffer_add_printf(
		        out,
		        "gpucloud_http_request_duration_seconds_bucket{route=\"%s\",le=\"+Inf\"} "
		        "%llu\n"
		        "gpucloud_http_request_duration_seconds_sum{route=\"%s\"} %.6f\n"
		        "gpucloud_http_request_duration_seconds_count{route=\"%s\"} %llu\n",
		        hists[i].pattern, hists[i].count, hists[i].pattern, hists[i].sum,
		        hists[i].pattern, hists[i].count);
	}
	evbuffer_add_printf(
	        out,
	        "# HELP gpucloud_http_connections_open Client connections open now.\n"
	        "# TYPE gpucloud_http_connections_open gauge\n"
	        "gpucloud_http_connections_open %lld\n"
	        "# HELP gpucloud_http_connections_total Client connections accepted.\n"
	        "# TYPE gpucloud_http_connections_total counter\n"
	        "gpucloud_http_connections_total %lld\n"
	        "# HELP gpucloud_db_pool_connections Database connections by state.\n"
	        "# TYPE gpucloud_db_pool_connections gauge\n"
	        "gpucloud_db_pool_connections{state=\"configured\"} %d\n"
	        "gpucloud_db_pool_connections{state=\"up\"} %d\n"
	        "gpucloud_db_pool_connections{state=\"busy\"} %d\n"
	        "# HELP gpucloud_db_queries_waiting Queries waiting for a database connection.\n"
	        "# TYPE gpucloud_db_queries_waiting gauge\n"
	        "gpucloud_db_queries_waiting %d\n"
	        "# HELP gpucloud_db_queries_total Queries completed.\n"
	        "# TYPE gpucloud_db_queries_total counter\n"
	        "gpucloud_db_queries_total %lld\n"
	        "# HELP gpucloud_db_errors_total Queries that completed with an error.\n"
	        "# TYPE gpucloud_db_errors_total counter\n"
	        "gpucloud_db_errors_total %lld\n"
	        "# HELP gpucloud_worker_jobs Jobs queued or running on worker threads.\n"
	        "# TYPE gpucloud_worker_jobs gauge\n"
	        "gpucloud_worker_jobs %d\n",
	        hs.connections_open, hs.connections_total, ds.size, ds.up, ds.busy, ds.waiting,
	        ds.queries, ds.errors, worker_pending());
	proxy_metrics(out);
}
