/* metrics.c — counters and histograms, rendered in Prometheus text format.
 *
 * Owns the request counters keyed by (route pattern, method, status) and a
 * latency histogram per route pattern (patterns come from the route table,
 * never raw paths, so the label set is bounded), and the cached platform
 * gauges: one statement every cfg.metrics_refresh_ms reads queue depth,
 * allocations and slices per pool, node health and GPU counts, the latest
 * GPU samples, instance and job states and image pulls, and the scheduler
 * waits of requests allocated since the last read (the wait histogram).
 * Each scrape renders from memory: no query per scrape.  Reads gauges from
 * the http layer, the database pool, the worker pool and the proxy when
 * rendering.
 *
 * Labels are bounded: route patterns, methods and statuses; pool and node
 * names (admin-made, few); GPU index and UUID (bounded by the hardware);
 * fixed state lists.  No user, instance, job or image label.  Every replica
 * reports the same database-derived series (query one, or max() over them).
 */
#include "api/metrics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <http_parser.h>
#include <jansson.h>

#include "db/db.h"
#include "apps/proxy.h"
#include "base/config.h"
#include "base/cron.h"
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

/* ---- the cached platform gauges ---- */

#define MAX_POOLS 256
#define NWAIT     12

static const double wait_buckets[NWAIT] = { 1,   5,   15,   30,   60,    120,
	                                    300, 600, 1800, 3600, 14400, 86400 };

struct pool_wait {
	char name[72];
	unsigned long long b[NWAIT];
	unsigned long long count;
	double sum;
};

static json_t *gauges; /* the last read (NULL until the first) */
static struct pool_wait waits[MAX_POOLS];
static int nwaits;
static char watermark[64]; /* allocated_at of the newest wait counted */
static int refreshing;
static long long refreshes, refresh_errors;

static void wait_observe(const char *pool, double seconds)
{
	int i;

	for (i = 0; i < nwaits; i++)
		if (strcmp(waits[i].name, pool) == 0)
			break;
	if (i == nwaits) {
		if (nwaits == MAX_POOLS)
			return;
		snprintf(waits[nwaits++].name, sizeof(waits[0].name), "%s", pool);
	}
	for (int b = 0; b < NWAIT; b++)
		if (seconds <= wait_buckets[b])
			waits[i].b[b]++;
	waits[i].count++;
	waits[i].sum += seconds;
}

static void refreshed(PGresult *res, enum rc rc, void *arg)
{
	json_t *j, *w;
	size_t i;
	json_t *row;

	(void)arg;
	refreshing = 0;
	refreshes++;
	if (rc != RC_OK || PQntuples(res) != 1 || !(j = json_loads(db_val(res, 0, 0), 0, NULL))) {
		refresh_errors++;
		return;
	}
	w = json_object_get(j, "waits");
	json_array_foreach(w, i, row)
	{
		const char *pool = json_string_value(json_array_get(row, 0));
		if (pool && *watermark)
			wait_observe(pool, json_number_value(json_array_get(row, 1)));
	}
	if (json_string_value(json_object_get(j, "watermark")))
		snprintf(watermark, sizeof(watermark), "%s",
		         json_string_value(json_object_get(j, "watermark")));
	json_decref(gauges);
	gauges = j;
}

/* One statement: everything the gauges need, as one JSON document. */
static void refresh(void)
{
	char window[16], pct[16];
	const char *p[3] = { *watermark ? watermark : NULL, window, pct };

	if (refreshing || !db_ready())
		return;
	refreshing = 1;
	snprintf(window, sizeof(window), "%d",
	         3 * (cfg.gpu_sample_interval_s > 0 ? cfg.gpu_sample_interval_s : 30));
	snprintf(pct, sizeof(pct), "%d", cfg.idle_gpu_percent);
	db_query("SELECT json_build_object("
	         " 'pools', (SELECT COALESCE(json_agg(json_build_array(p.name,"
	         "   (SELECT count(*) FROM alloc_requests r WHERE r.pool_id = p.id"
	         "     AND r.state = 'queued'),"
	         "   (SELECT count(*) FROM alloc_requests r WHERE r.pool_id = p.id"
	         "     AND r.state = 'allocated'),"
	         "   (SELECT COALESCE(extract(epoch FROM now() - min(r.created_at)), 0)"
	         "     FROM alloc_requests r WHERE r.pool_id = p.id AND r.state = 'queued'),"
	         "   (SELECT count(*) FROM slices s WHERE s.pool_id = p.id),"
	         "   (SELECT count(*) FROM slices s JOIN allocations a ON a.slice_id = s.id"
	         "     AND a.released_at IS NULL WHERE s.pool_id = p.id),"
	         /* measured GPUs: mean latest utilisation, and those allocated
	          * whose latest sample is below idle_gpu_percent (live waste) */
	         "   (SELECT avg(l.util_pct) FROM gpus g CROSS JOIN LATERAL (SELECT util_pct"
	         "     FROM gpu_samples x WHERE x.gpu_uuid = g.uuid"
	         "     AND x.at > now() - make_interval(secs => $2::int) ORDER BY x.at DESC LIMIT "
	         "1) l"
	         "     WHERE g.pool_id = p.id AND NOT g.simulated),"
	         "   (SELECT count(*) FROM gpus g CROSS JOIN LATERAL (SELECT util_pct"
	         "     FROM gpu_samples x WHERE x.gpu_uuid = g.uuid"
	         "     AND x.at > now() - make_interval(secs => $2::int) ORDER BY x.at DESC LIMIT "
	         "1) l"
	         "     WHERE g.pool_id = p.id AND NOT g.simulated AND l.util_pct < $3::int"
	         "     AND EXISTS (SELECT 1 FROM slices sl JOIN allocations a ON a.slice_id = sl.id"
	         "      AND a.released_at IS NULL WHERE sl.gpu_id = g.id)))"
	         "   ORDER BY p.name), '[]')"
	         "   FROM pools p),"
	         /* (the GPUs counted in one aggregate: two counts per node were
	          * 2,000 index scans, 23 of this statement's ms at 1,000 nodes) */
	         " 'nodes', (SELECT COALESCE(json_agg(json_build_array(n.name, n.health::text,"
	         "   n.admin_state::text, n.degraded_since IS NOT NULL,"
	         "   COALESCE(g.declared, 0), COALESCE(g.measured, 0))"
	         "   ORDER BY n.name), '[]') FROM nodes n"
	         "   LEFT JOIN (SELECT node_id, count(*) FILTER (WHERE simulated) AS declared,"
	         "    count(*) FILTER (WHERE NOT simulated) AS measured FROM gpus"
	         "    GROUP BY node_id) g ON g.node_id = n.id),"
	         " 'gpus', (SELECT COALESCE(json_agg(json_build_array(n.name, g.idx, g.uuid,"
	         "   s.util_pct, s.mem_used_mib) ORDER BY n.name, g.idx), '[]')"
	         "   FROM gpus g JOIN nodes n ON n.id = g.node_id"
	         "   CROSS JOIN LATERAL (SELECT util_pct, mem_used_mib FROM gpu_samples x"
	         "    WHERE x.gpu_uuid = g.uuid AND x.at > now() - make_interval(secs => $2::int)"
	         "    ORDER BY x.at DESC LIMIT 1) s WHERE NOT g.simulated),"
	         " 'instances', (SELECT COALESCE(json_object_agg(state, c), '{}') FROM"
	         "   (SELECT state, count(*) AS c FROM instances WHERE state <> 'deleted'"
	         "    GROUP BY state) x),"
	         " 'jobs', (SELECT COALESCE(json_object_agg(state, c), '{}') FROM"
	         "   (SELECT state, count(*) AS c FROM jobs"
	         "    WHERE state IN ('queued', 'starting', 'running', 'stopping')"
	         "    GROUP BY state) x),"
	         " 'pulls', (SELECT json_build_object('pulling',"
	         "   count(*) FILTER (WHERE state = 'pulling'),"
	         "   'failed', count(*) FILTER (WHERE state = 'failed'),"
	         "   'present', count(*) FILTER (WHERE state = 'present'),"
	         "   'progress', COALESCE(avg(progress) FILTER (WHERE state = 'pulling'), 0))"
	         "   FROM image_nodes),"
	         /* the scheduler's waits since the last read (the first read only
	         * sets the watermark: the histogram counts from this process' start).
	         * Rows settle for 2 s first: allocated_at is the allocating
	         * transaction's start, which may commit after this snapshot */
	         " 'waits', (SELECT COALESCE(json_agg(json_build_array(p.name,"
	         "   extract(epoch FROM r.allocated_at - r.created_at))), '[]')"
	         "   FROM alloc_requests r JOIN pools p ON p.id = r.pool_id"
	         "   WHERE $1::timestamptz IS NOT NULL AND r.allocated_at > $1::timestamptz"
	         "   AND r.allocated_at <= now() - interval '2 seconds'),"
	         " 'watermark', to_char((now() - interval '2 seconds') AT TIME ZONE 'UTC',"
	         "   'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'))::text",
	         3, p, refreshed, NULL);
}

static void on_cron(struct cron_section *s, void *arg)
{
	(void)s;
	(void)arg;
	refresh();
}

int metrics_init(void)
{
	return cron_every("metrics", cfg.metrics_refresh_ms, 0, on_cron, NULL) ? 0 : -1;
}

static const char *str(json_t *row, size_t i);

int metrics_nodes(int *up, int *total)
{
	size_t i;
	json_t *n;

	*up = *total = 0;
	if (!gauges)
		return -1;
	json_array_foreach(json_object_get(gauges, "nodes"), i, n)
	{
		(*total)++;
		if (strcmp(str(n, 1), "up") == 0)
			(*up)++;
	}
	return 0;
}

/* A label value as the exposition format wants it: \\, \" and \n escaped. */
static void label(struct evbuffer *out, const char *v)
{
	for (; v && *v; v++) {
		if (*v == '\\' || *v == '"')
			evbuffer_add_printf(out, "\\%c", *v);
		else if (*v == '\n')
			evbuffer_add(out, "\\n", 2);
		else
			evbuffer_add(out, v, 1);
	}
}

static void help(struct evbuffer *out, const char *name, const char *type, const char *text)
{
	evbuffer_add_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, text, name, type);
}

static long long num(json_t *row, size_t i)
{
	return (long long)json_number_value(json_array_get(row, i));
}

static const char *str(json_t *row, size_t i)
{
	const char *s = json_string_value(json_array_get(row, i));

	return s ? s : "";
}

static void render_pools(struct evbuffer *out, json_t *pools)
{
	static const struct {
		const char *name, *type, *help;
		size_t col;
	} g[] = {
		{ "gpucloud_sched_queue_depth", "gauge", "Requests waiting in the queue, per pool.",
		  1 },
		{ "gpucloud_sched_allocated_requests", "gauge",
		  "Requests holding an allocation, per pool.", 2 },
		{ "gpucloud_sched_oldest_wait_seconds", "gauge",
		  "How long the oldest queued request has waited, per pool.", 3 },
		{ "gpucloud_pool_slices", "gauge", "Slices (GPU shares) in the pool.", 4 },
		{ "gpucloud_pool_slices_allocated", "gauge",
		  "Slices held by live allocations, per pool.", 5 },
		{ "gpucloud_pool_gpus_allocated_idle", "gauge",
		  "Measured GPUs of the pool that are allocated but were idle (below "
		  "idle_gpu_percent) "
		  "at their latest sample.",
		  7 },
	};
	size_t i, k;
	json_t *row;

	for (k = 0; k < sizeof(g) / sizeof(g[0]); k++) {
		help(out, g[k].name, g[k].type, g[k].help);
		json_array_foreach(pools, i, row)
		{
			evbuffer_add_printf(out, "%s{pool=\"", g[k].name);
			label(out, str(row, 0));
			if (g[k].col == 3)
				evbuffer_add_printf(out, "\"} %.3f\n",
				                    json_number_value(json_array_get(row, 3)));
			else
				evbuffer_add_printf(out, "\"} %lld\n", num(row, g[k].col));
		}
	}
	help(out, "gpucloud_pool_gpu_utilization_ratio", "gauge",
	     "Mean latest utilisation (0-1) of the pool's measured GPUs; absent without samples.");
	json_array_foreach(pools, i, row)
	{
		if (json_is_null(json_array_get(row, 6)))
			continue;
		evbuffer_add_printf(out, "gpucloud_pool_gpu_utilization_ratio{pool=\"");
		label(out, str(row, 0));
		evbuffer_add_printf(out, "\"} %.3f\n",
		                    json_number_value(json_array_get(row, 6)) / 100.0);
	}
	help(out, "gpucloud_sched_wait_seconds", "histogram",
	     "Time from request to allocation, per pool (allocations seen by this process).");
	json_array_foreach(pools, i, row)
	{
		static const struct pool_wait none;
		const struct pool_wait *pw = &none;
		const char *name = str(row, 0);

		for (int w = 0; w < nwaits; w++)
			if (strcmp(waits[w].name, name) == 0)
				pw = &waits[w];
		for (int b = 0; b <= NWAIT; b++) {
			evbuffer_add_printf(out, "gpucloud_sched_wait_seconds_bucket{pool=\"");
			label(out, name);
			if (b < NWAIT)
				evbuffer_add_printf(out, "\",le=\"%g\"} %llu\n", wait_buckets[b],
				                    pw->b[b]);
			else
				evbuffer_add_printf(out, "\",le=\"+Inf\"} %llu\n", pw->count);
		}
		evbuffer_add_printf(out, "gpucloud_sched_wait_seconds_sum{pool=\"");
		label(out, name);
		evbuffer_add_printf(out, "\"} %.3f\n", pw->sum);
		evbuffer_add_printf(out, "gpucloud_sched_wait_seconds_count{pool=\"");
		label(out, name);
		evbuffer_add_printf(out, "\"} %llu\n", pw->count);
	}
}

static void render_nodes(struct evbuffer *out, json_t *nodes, json_t *gpus)
{
	static const char *const health[] = { "up", "down", "unknown" };
	static const char *const states[] = { "active", "draining", "cordoned" };
	size_t i;
	json_t *row;

	help(out, "gpucloud_node_up", "gauge",
	     "1 when the node's engine answers its health check.");
	json_array_foreach(nodes, i, row)
	{
		evbuffer_add_printf(out, "gpucloud_node_up{node=\"");
		label(out, str(row, 0));
		evbuffer_add_printf(out, "\"} %d\n", strcmp(str(row, 1), "up") == 0);
	}
	help(out, "gpucloud_node_degraded", "gauge",
	     "1 when the node's engine failed to start work repeatedly (nothing is placed there).");
	json_array_foreach(nodes, i, row)
	{
		evbuffer_add_printf(out, "gpucloud_node_degraded{node=\"");
		label(out, str(row, 0));
		evbuffer_add_printf(out, "\"} %d\n", json_is_true(json_array_get(row, 3)));
	}
	help(out, "gpucloud_nodes", "gauge", "Nodes by health and by admin state.");
	for (size_t h = 0; h < 3; h++)
		for (size_t st = 0; st < 3; st++) {
			int c = 0;
			json_array_foreach(nodes, i, row) c +=
			        strcmp(str(row, 1), health[h]) == 0 &&
			        strcmp(str(row, 2), states[st]) == 0;
			evbuffer_add_printf(out, "gpucloud_nodes{health=\"%s\",state=\"%s\"} %d\n",
			                    health[h], states[st], c);
		}
	help(out, "gpucloud_node_gpus", "gauge",
	     "GPUs per node: declared by an admin, or measured (discovered with nvidia-smi).");
	json_array_foreach(nodes, i, row)
	{
		for (int k = 0; k < 2; k++) {
			evbuffer_add_printf(out, "gpucloud_node_gpus{node=\"");
			label(out, str(row, 0));
			evbuffer_add_printf(out, "\",kind=\"%s\"} %lld\n",
			                    k ? "measured" : "declared", num(row, 4 + (size_t)k));
		}
	}
	help(out, "gpucloud_gpu_utilization_ratio", "gauge",
	     "Latest sampled utilisation (0-1) of a measured GPU; declared GPUs have none.");
	json_array_foreach(gpus, i, row)
	{
		evbuffer_add_printf(out, "gpucloud_gpu_utilization_ratio{node=\"");
		label(out, str(row, 0));
		evbuffer_add_printf(out, "\",gpu=\"%lld\",uuid=\"", num(row, 1));
		label(out, str(row, 2));
		evbuffer_add_printf(out, "\"} %.2f\n",
		                    json_number_value(json_array_get(row, 3)) / 100.0);
	}
	help(out, "gpucloud_gpu_memory_used_bytes", "gauge",
	     "Latest sampled memory in use of a measured GPU.");
	json_array_foreach(gpus, i, row)
	{
		if (json_is_null(json_array_get(row, 4)))
			continue;
		evbuffer_add_printf(out, "gpucloud_gpu_memory_used_bytes{node=\"");
		label(out, str(row, 0));
		evbuffer_add_printf(out, "\",gpu=\"%lld\",uuid=\"", num(row, 1));
		label(out, str(row, 2));
		evbuffer_add_printf(out, "\"} %lld\n", num(row, 4) * 1048576LL);
	}
}

/* Every state of the list, 0 when none is in it: stable series. */
static void render_states(struct evbuffer *out, const char *name, const char *text, json_t *counts,
                          const char *const *list)
{
	help(out, name, "gauge", text);
	for (; *list; list++)
		evbuffer_add_printf(out, "%s{state=\"%s\"} %lld\n", name, *list,
		                    (long long)json_integer_value(json_object_get(counts, *list)));
}

static void render_gauges(struct evbuffer *out)
{
	static const char *const inst[] = { "queued",  "pulling", "creating", "running", "stopping",
		                            "stopped", "failed",  "lost",     NULL };
	static const char *const jobs[] = { "queued", "starting", "running", "stopping", NULL };
	json_t *pulls;

	help(out, "gpucloud_metrics_refreshes_total", "counter",
	     "Reads of the platform gauges below from the database.");
	evbuffer_add_printf(out, "gpucloud_metrics_refreshes_total %lld\n", refreshes);
	help(out, "gpucloud_metrics_refresh_errors_total", "counter",
	     "Reads of the platform gauges that failed (the last good values are shown).");
	evbuffer_add_printf(out, "gpucloud_metrics_refresh_errors_total %lld\n", refresh_errors);
	if (!gauges)
		return;
	render_pools(out, json_object_get(gauges, "pools"));
	render_nodes(out, json_object_get(gauges, "nodes"), json_object_get(gauges, "gpus"));
	render_states(out, "gpucloud_instances", "Instances by state (deleted ones not counted).",
	              json_object_get(gauges, "instances"), inst);
	render_states(out, "gpucloud_jobs", "Jobs not finished yet, by state.",
	              json_object_get(gauges, "jobs"), jobs);
	pulls = json_object_get(gauges, "pulls");
	help(out, "gpucloud_image_pulls", "gauge", "Images on nodes by pull state.");
	evbuffer_add_printf(out,
	                    "gpucloud_image_pulls{state=\"pulling\"} %lld\n"
	                    "gpucloud_image_pulls{state=\"failed\"} %lld\n"
	                    "gpucloud_image_pulls{state=\"present\"} %lld\n",
	                    (long long)json_integer_value(json_object_get(pulls, "pulling")),
	                    (long long)json_integer_value(json_object_get(pulls, "failed")),
	                    (long long)json_integer_value(json_object_get(pulls, "present")));
	help(out, "gpucloud_image_pull_progress_ratio", "gauge",
	     "Mean progress (0-1) of the pulls in flight; 0 when none.");
	evbuffer_add_printf(out, "gpucloud_image_pull_progress_ratio %.3f\n",
	                    json_number_value(json_object_get(pulls, "progress")) / 100.0);
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
	        "# HELP gpucloud_worker_jobs Tasks queued or running on worker threads.\n"
	        "# TYPE gpucloud_worker_jobs gauge\n"
	        "gpucloud_worker_jobs %d\n",
	        hs.connections_open, hs.connections_total, ds.size, ds.up, ds.busy, ds.waiting,
	        ds.queries, ds.errors, worker_pending());
	proxy_metrics(out);
	render_gauges(out);
}
