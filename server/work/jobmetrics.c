/* jobmetrics.c — the job metrics collector and usage sampler (see jobmetrics.h).
 *
 * Owns: reading jobs' output.log and metrics.jsonl from where the last read
 * stopped (job_metric_sources), handing the points to the database in one
 * statement per job and pass, and sampling running jobs' containers into
 * job_usage.  Does not own: the line grammar (metricline.c), the log
 * stream (jobs.c), thinning and last_metrics (job_metrics_store() in SQL),
 * the API (api_job_metrics.c).
 */
#include "work/jobmetrics.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/config.h"
#include "base/cron.h"
#include "base/log.h"
#include "db/db.h"
#include "db/leader.h"
#include "engine/docker.h"
#include "engine/nodes.h"
#include "storage/paths.h"
#include "storage/storage.h"
#include "work/metricline.h"
#include "work/reclaim.h"

/* points handed to the database per job and pass at most */
#define MAX_POINTS 2500

static struct cron_section *collect_cron, *usage_cron;
static int collecting, sampling;
static int more; /* a file had more than one pass's worth: come back soon */

/* ---- the scan (pure) ---- */

static int grow(char **out, size_t *cap, size_t need)
{
	char *p;
	size_t c = *cap ? *cap : 4096;

	if (need <= *cap)
		return 0;
	while (c < need)
		c *= 2;
	p = realloc(*out, c);
	if (!p)
		return -1;
	*out = p;
	*cap = c;
	return 0;
}

long jobmetrics_scan(const char *buf, size_t len, int log, int last, long long *lines, char **out,
                     size_t *out_len, size_t *out_cap, long *points, long max_points)
{
	static struct metricline m;
	size_t at = 0;

	while (at < len) {
		const char *nl = memchr(buf + at, '\n', len - at);
		size_t end = nl ? (size_t)(nl - buf) : len, ll = end - at;
		int n;

		if (!nl && !last) {
			/* no end yet: wait for it, unless it is already too long */
			if (ll >= JOBMETRICS_LINE_MAX)
				at = len;
			break;
		}
		n = ll <= JOBMETRICS_LINE_MAX ? (log ? metricline_parse_log(buf + at, ll, &m)
		                                     : metricline_parse_json(buf + at, ll, &m))
		                              : -1;
		if (n > 0 && *points + n > max_points)
			break;
		(*lines)++;
		for (int i = 0; i < n; i++) {
			char rec[200];
			int k = snprintf(rec, sizeof(rec),
			                 "%s{\"n\":\"%s\",\"s\":%lld,\"v\":%.17g}",
			                 *out_len ? "," : "", m.v[i].name,
			                 m.has_step ? m.step : *lines, m.v[i].value);
			if (k < 0 || (size_t)k >= sizeof(rec))
				continue;
			if (grow(out, out_cap, *out_len + (size_t)k + 1) < 0)
				return -1;
			memcpy(*out + *out_len, rec, (size_t)k + 1);
			*out_len += (size_t)k;
			(*points)++;
		}
		at = nl ? end + 1 : len;
	}
	return (long)at;
}

long long jobmetrics_mem_bytes(const json_t *stats)
{
	const json_t *ms = json_object_get(stats, "memory_stats");
	const json_t *st = json_object_get(ms, "stats");
	const json_t *u = json_object_get(ms, "usage");
	long long usage, cache = 0;
	const char *keys[] = { "inactive_file", "total_inactive_file" };

	if (!json_is_integer(u) || (usage = json_integer_value(u)) < 0)
		return -1;
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		const json_t *c = json_object_get(st, keys[i]);
		if (json_is_integer(c) && json_integer_value(c) >= 0) {
			cache = json_integer_value(c);
			break;
		}
	}
	return cache < usage ? usage - cache : usage;
}

/* ---- collect ---- */

/* one file of one job */
struct source {
	long long offset, lines;
};

/* Opens jobs/<leaf>/<file> beneath the user's home: not through a final
 * symlink, not blocking on a FIFO, a regular file only.  -1 when it is not
 * (yet) there or not a file. */
static int source_open(int home, const char *leaf, const char *file, struct stat *st)
{
	char rel[800];
	int fd;

	snprintf(rel, sizeof(rel), "jobs/%s/%s", leaf, file);
	fd = paths_open(home, rel, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (fstat(fd, st) < 0 || !S_ISREG(st->st_mode)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Reads what is new in one file into the points; s moves on.  A log
 * shorter than the offset is being written again (a new gpucloudd from its
 * checkpoint): wait; a metrics file shorter than it was rewritten: again
 * from its start. */
static void source_read(int home, const char *leaf, const char *file, int log, int ended,
                        struct source *s, char **out, size_t *out_len, size_t *out_cap,
                        long *points)
{
	static char buf[JOBMETRICS_READ_MAX];
	struct stat st;
	int fd = source_open(home, leaf, file, &st);
	ssize_t n;
	long used;

	if (fd < 0)
		return;
	if (st.st_size < s->offset) {
		if (log) {
			close(fd);
			return;
		}
		s->offset = 0;
		s->lines = 0;
	}
	if (st.st_size == s->offset) {
		close(fd);
		return;
	}
	n = pread(fd, buf, sizeof(buf), s->offset);
	close(fd);
	if (n <= 0)
		return;
	used = jobmetrics_scan(buf, (size_t)n, log, ended && s->offset + n >= st.st_size, &s->lines,
	                       out, out_len, out_cap, points, MAX_POINTS);
	if (used < 0)
		return;
	s->offset += used;
	if (s->offset < st.st_size && (used > 0 || n == (ssize_t)sizeof(buf)))
		more = 1;
}

/* one job of a pass */
struct row {
	long long id, user_id;
	char username[64];
	char leaf[300];
	int ended, retries, attempt;
	struct source lg, fl;
};

struct batch {
	struct row *rows;
	int n, i;
};

static void collect_next(struct batch *b);

static void stored(PGresult *res, enum rc rc, void *arg)
{
	struct batch *b = arg;

	(void)res;
	if (rc != RC_OK)
		log_msg(LOG_WARN, "metrics", NULL, "could not store a job's metrics (%s)",
		        rc_code(rc));
	collect_next(b);
}

/* Reads the next job's files and stores what they held; at the end of the
 * pass frees it. */
static void collect_next(struct batch *b)
{
	while (b->i < b->n) {
		struct row *r = &b->rows[b->i++];
		struct storage_area a = { 0 };
		struct source lg = r->lg, fl = r->fl;
		char *out = NULL, *doc;
		size_t out_len = 0, out_cap = 0;
		long points = 0;
		int home;
		char id[24], att[16], lo[24], ll[24], fo[24], fln[24], bound[16];
		const char *p[8] = { id, NULL, att, lo, ll, fo, fln, bound };

		if (r->attempt != r->retries)
			lg.offset = lg.lines = 0; /* a retry's output.log is new */
		storage_area_home(&a, r->user_id, r->username);
		home = storage_area_open(&a);
		if (home < 0)
			continue;
		source_read(home, r->leaf, "output.log", 1, r->ended, &lg, &out, &out_len, &out_cap,
		            &points);
		source_read(home, r->leaf, "metrics.jsonl", 0, r->ended, &fl, &out, &out_len,
		            &out_cap, &points);
		close(home);
		if (r->attempt == r->retries && lg.offset == r->lg.offset &&
		    lg.lines == r->lg.lines && fl.offset == r->fl.offset &&
		    fl.lines == r->fl.lines) {
			free(out);
			continue; /* nothing new */
		}
		/* the points as a JSON array */
		doc = malloc(out_len + 3);
		if (!doc) {
			free(out);
			continue;
		}
		doc[0] = '[';
		if (out_len)
			memcpy(doc + 1, out, out_len);
		doc[out_len + 1] = ']';
		doc[out_len + 2] = '\0';
		free(out);
		snprintf(id, sizeof(id), "%lld", r->id);
		snprintf(att, sizeof(att), "%d", r->retries);
		snprintf(lo, sizeof(lo), "%lld", lg.offset);
		snprintf(ll, sizeof(ll), "%lld", lg.lines);
		snprintf(fo, sizeof(fo), "%lld", fl.offset);
		snprintf(fln, sizeof(fln), "%lld", fl.lines);
		snprintf(bound, sizeof(bound), "%d", cfg.job_metrics_max_points);
		p[1] = doc;
		db_query("SELECT job_metrics_store($1, $2::jsonb, $3, $4, $5, $6, $7, $8)", 8, p,
		         stored, b);
		free(doc);
		return;
	}
	free(b->rows);
	free(b);
	collecting = 0;
	if (more) {
		/* the rest soon, not at once: a huge file is read in steps */
		more = 0;
		cron_soon(collect_cron, 200);
	}
}

/* Columns: 0 id, 1 user_id, 2 username, 3 directory, 4 ended, 5 retries,
 * 6 attempt (-1: none yet), 7 log offset, 8 log lines, 9 file offset,
 * 10 file lines. */
static void collect_rows(PGresult *res, enum rc rc, void *arg)
{
	struct batch *b;
	int n = rc == RC_OK ? PQntuples(res) : 0;

	(void)arg;
	if (rc != RC_OK || !(b = calloc(1, sizeof(*b))) ||
	    (n > 0 && !(b->rows = calloc((size_t)n, sizeof(*b->rows))))) {
		if (rc == RC_OK && b)
			free(b);
		collecting = 0;
		return;
	}
	for (int i = 0; i < n; i++) {
		struct row *r = &b->rows[b->n];
		const char *dir = db_val(res, i, 3), *leaf = strrchr(dir, '/');
		r->id = strtoll(db_val(res, i, 0), NULL, 10);
		r->user_id = strtoll(db_val(res, i, 1), NULL, 10);
		snprintf(r->username, sizeof(r->username), "%s", db_val(res, i, 2));
		snprintf(r->leaf, sizeof(r->leaf), "%s", leaf ? leaf + 1 : dir);
		r->ended = strcmp(db_val(res, i, 4), "t") == 0;
		r->retries = (int)strtol(db_val(res, i, 5), NULL, 10);
		r->attempt = (int)strtol(db_val(res, i, 6), NULL, 10);
		r->lg.offset = strtoll(db_val(res, i, 7), NULL, 10);
		r->lg.lines = strtoll(db_val(res, i, 8), NULL, 10);
		r->fl.offset = strtoll(db_val(res, i, 9), NULL, 10);
		r->fl.lines = strtoll(db_val(res, i, 10), NULL, 10);
		b->n++;
	}
	collect_next(b);
}

static void on_collect(struct cron_section *s, void *arg)
{
	(void)arg;
	if (!leader_is()) {
		cron_soon(s, cfg.instance_tick_ms);
		return;
	}
	if (collecting)
		return;
	collecting = 1;
	/* running jobs, and ended ones a while longer: their last lines */
	db_query("SELECT j.id, j.user_id, u.username, j.directory,"
	         " j.state NOT IN ('running', 'stopping'), j.retries, COALESCE(s.attempt, -1),"
	         " COALESCE(s.log_offset, 0), COALESCE(s.log_lines, 0),"
	         " COALESCE(s.file_offset, 0), COALESCE(s.file_lines, 0)"
	         " FROM jobs j JOIN users u ON u.id = j.user_id"
	         " LEFT JOIN job_metric_sources s ON s.job_id = j.id"
	         " WHERE j.state IN ('running', 'stopping')"
	         " OR (j.state IN ('succeeded', 'failed', 'cancelled', 'lost')"
	         "  AND j.finished_at > now() - interval '2 minutes')"
	         " ORDER BY j.id LIMIT 500",
	         0, NULL, collect_rows, NULL);
}

void jobmetrics_job_output(long long id, const char *data, size_t len)
{
	(void)id;
	if (collect_cron && memchr(data, '\n', len))
		cron_soon(collect_cron, 300);
}

/* ---- usage ---- */

static int usage_pending;

static void usage_done(void)
{
	if (--usage_pending == 0)
		sampling = 0;
}

static void usage_sampled(struct docker_call *call, enum rc rc, int status, const char *body,
                          size_t len, const char *err, void *arg)
{
	long long id = (long long)(intptr_t)arg;
	json_t *j;

	(void)call;
	(void)err;
	if (rc == RC_OK && status == 200 && (j = json_loadb(body, len, 0, NULL))) {
		double pct = reclaim_cpu_percent(j);
		long long mem = jobmetrics_mem_bytes(j);
		char ids[24], cpu[40], mb[24];
		const char *p[3] = { ids, pct >= 0 ? cpu : NULL, mem >= 0 ? mb : NULL };
		snprintf(ids, sizeof(ids), "%lld", id);
		snprintf(cpu, sizeof(cpu), "%.3f", pct);
		snprintf(mb, sizeof(mb), "%lld", mem);
		json_decref(j);
		if (p[1] || p[2])
			/* gpu_percent stays NULL: not measurable here */
			db_query("INSERT INTO job_usage (job_id, at, cpu_percent, mem_bytes)"
			         " SELECT $1, now(), $2, $3 WHERE EXISTS (SELECT 1 FROM jobs"
			         "  WHERE id = $1 AND state IN ('running', 'stopping'))"
			         " ON CONFLICT DO NOTHING",
			         3, p, db_ignore, NULL);
	}
	usage_done();
}

static void usage_rows(PGresult *res, enum rc rc, void *arg)
{
	char path[200];

	(void)arg;
	if (rc != RC_OK) {
		sampling = 0;
		return;
	}
	usage_pending = 1;
	for (int i = 0; i < PQntuples(res); i++) {
		struct docker_engine *e = nodes_engine(strtoll(db_val(res, i, 1), NULL, 10));
		long long id = strtoll(db_val(res, i, 0), NULL, 10);
		if (!e)
			continue;
		snprintf(path, sizeof(path), "/containers/%s/stats?stream=false",
		         db_val(res, i, 2));
		usage_pending++;
		if (!docker_request(e, "GET", path, NULL, NULL, 0, NULL, 15000, usage_sampled,
		                    (void *)(intptr_t)id))
			usage_pending--;
	}
	usage_done();
}

static void on_usage(struct cron_section *s, void *arg)
{
	(void)arg;
	if (!leader_is()) {
		cron_soon(s, cfg.instance_tick_ms);
		return;
	}
	if (sampling)
		return;
	sampling = 1;
	db_query("SELECT j.id, j.node_id, j.container_name FROM jobs j"
	         " WHERE j.state = 'running' AND j.node_id IS NOT NULL AND j.container_name <> ''"
	         " ORDER BY j.id LIMIT 1000",
	         0, NULL, usage_rows, NULL);
}

int jobmetrics_init(void)
{
	collect_cron = cron_every("job-metrics", cfg.job_metrics_interval_ms,
	                          cfg.job_metrics_interval_ms, on_collect, NULL);
	usage_cron = cron_every("job-usage", cfg.job_usage_interval_ms, 1000, on_usage, NULL);
	return collect_cron && usage_cron ? 0 : -1;
}
