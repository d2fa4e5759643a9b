/* quota.c — measuring what areas use, and expiring abandoned uploads.
 *
 * One timer (every second): rescans areas gpucloudd changed ("dirty"),
 * otherwise the area scanned longest ago once it is older than
 * cfg.storage_scan_interval; one scan at a time, each on a worker thread
 * (files_usage: st_blocks, hard links once, no symlink or mount crossing),
 * so the loop never walks a directory.  Every cfg.storage_scan_interval it
 * also ends resumable uploads past their expiry (their staging files are
 * removed on a worker and their reservations released) and reservations
 * whose owner died.
 * Does not own: limits and reservations (SQL in 0009_storage.sql).
 */
#include "storage/quota.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/config.h"
#include "base/cron.h"
#include "db/db.h"
#include "storage/files.h"
#include "base/log.h"
#include "base/worker.h"

#define DIRTY_MAX 64

struct scan {
	struct storage_area a;
	int64_t bytes, files;
	int ok;
};

static struct cron_section *section;
static struct storage_area dirty[DIRTY_MAX];
static int ndirty;
static int scanning, querying, expiring;
static time_t last_periodic, last_expiry, last_homes;

void quota_dirty(const struct storage_area *a)
{
	for (int i = 0; i < ndirty; i++)
		if (!strcmp(dirty[i].key, a->key))
			return;
	if (ndirty < DIRTY_MAX)
		dirty[ndirty++] = *a;
}

static void scan_work(void *arg)
{
	struct scan *s = arg;
	int64_t b = 0, f = 0;

	s->ok = files_usage(s->a.dir, &b, &f) == 0 && files_usage(s->a.trash, &b, &f) == 0;
	s->bytes = b;
	s->files = f;
}

static void scan_saved(PGresult *res, enum rc rc, void *arg)
{
	(void)res;
	(void)arg;
	scanning = 0;
	if (rc != RC_OK)
		log_msg(LOG_WARN, "quota", NULL, "cannot record usage: %s", rc_code(rc));
}

static void scan_done(void *arg)
{
	struct scan *s = arg;
	char b[24], f[24];
	const char *p[5] = { s->a.key, b, f, NULL, NULL };
	char u[24], c[24];

	if (!s->ok) {
		log_msg(LOG_WARN, "quota", NULL, "cannot measure %s (%s)", s->a.key, s->a.dir);
		scanning = 0;
		free(s);
		return;
	}
	snprintf(b, sizeof(b), "%lld", (long long)s->bytes);
	snprintf(f, sizeof(f), "%lld", (long long)s->files);
	if (s->a.user_id) {
		snprintf(u, sizeof(u), "%lld", s->a.user_id);
		p[3] = u;
	}
	if (s->a.class_id) {
		snprintf(c, sizeof(c), "%lld", s->a.class_id);
		p[4] = c;
	}
	db_query("INSERT INTO storage_areas (area, bytes, files, scanned_at, user_id, class_id)"
	         " VALUES ($1, $2, $3, now(), $4, $5) ON CONFLICT (area) DO UPDATE"
	         " SET bytes = $2, files = $3, scanned_at = now()",
	         5, p, scan_saved, NULL);
	free(s);
}

static void scan_start(const struct storage_area *a)
{
	struct scan *s = calloc(1, sizeof(*s));

	if (!s)
		return;
	s->a = *a;
	scanning = 1;
	if (worker_submit(scan_work, scan_done, s) < 0) {
		scanning = 0;
		free(s);
	}
}

static void oldest_done(PGresult *res, enum rc rc, void *arg)
{
	struct storage_area a;
	const char *area, *name;

	(void)arg;
	querying = 0;
	if (rc != RC_OK || PQntuples(res) < 1 || scanning)
		return;
	memset(&a, 0, sizeof(a));
	area = db_val(res, 0, 0);
	name = db_val(res, 0, 1);
	if (!strncmp(area, "home:", 5) && name)
		storage_area_home(&a, strtoll(area + 5, NULL, 10), name);
	else if (!strncmp(area, "class:", 6))
		storage_area_class(&a, strtoll(area + 6, NULL, 10), 0);
	else if (!strcmp(area, "shared"))
		storage_area_shared(&a);
	else
		return;
	scan_start(&a);
}

/* ---- expiry ---- */

static void unlink_work(void *arg)
{
	int fd = storage_staging_open();
	struct files_result res = { 0 };

	if (fd >= 0) {
		files_purge(fd, arg, &res);
		close(fd);
	}
}

void quota_unlink_staging(const char *name)
{
	char *n = strdup(name);

	if (n && worker_submit(unlink_work, free, n) < 0)
		free(n);
}

static void expired_done(PGresult *res, enum rc rc, void *arg)
{
	(void)arg;
	expiring = 0;
	if (rc != RC_OK) {
		log_msg(LOG_WARN, "quota", NULL, "cannot expire uploads: %s", rc_code(rc));
		return;
	}
	for (int i = 0; i < PQntuples(res); i++) {
		quota_unlink_staging(db_val(res, i, 0));
		log_msg(LOG_INFO, "quota", NULL, "upload %s expired", db_val(res, i, 1));
	}
}

static void ignore(PGresult *res, enum rc rc, void *arg)
{
	(void)res;
	(void)rc;
	(void)arg;
}

static void expire(void)
{
	expiring = 1;
	db_query("WITH e AS (UPDATE uploads SET state = 'expired'"
	         "  WHERE state = 'open' AND expires_at < now()"
	         "  RETURNING id, staging, reservation_id),"
	         " r AS (SELECT gc_storage_release(reservation_id, 0, 0) FROM e"
	         "  WHERE reservation_id IS NOT NULL)"
	         " SELECT e.staging, e.id, (SELECT count(*) FROM r) FROM e",
	         0, NULL, expired_done, NULL);
	db_query("SELECT gc_storage_expire()", 0, NULL, ignore, NULL);
}

static void tick(struct cron_section *s, void *arg)
{
	time_t now = time(NULL);
	(void)s;
	(void)arg;

	if (!expiring && now - last_expiry >= (cfg.storage_scan_interval < 10 ? 1 : 10)) {
		last_expiry = now;
		expire();
	}
	if (scanning || querying)
		return;
	if (ndirty) {
		struct storage_area a = dirty[0];
		memmove(dirty, dirty + 1, sizeof(dirty[0]) * (size_t)--ndirty);
		scan_start(&a);
		return;
	}
	/* look for a stale area every second or few; new homes get their rows
	 * (and so a scan and a limit) once per scan interval */
	if (now - last_periodic >= (cfg.storage_scan_interval < 30 ? 1 : 5)) {
		char iv[32];
		const char *p[2] = { iv,
			             now - last_homes >= cfg.storage_scan_interval ? "t" : "f" };

		last_periodic = now;
		if (p[1][0] == 't')
			last_homes = now;
		snprintf(iv, sizeof(iv), "%d seconds", cfg.storage_scan_interval);
		querying = 1;
		db_query("WITH h AS (INSERT INTO storage_areas (area, user_id)"
		         "  SELECT 'home:' || id, id FROM users WHERE $2::boolean"
		         "  ON CONFLICT DO NOTHING)"
		         " SELECT s.area, u.username FROM storage_areas s"
		         " LEFT JOIN users u ON u.id = s.user_id"
		         " WHERE s.scanned_at IS NULL OR s.scanned_at < now() - $1::interval"
		         " ORDER BY s.scanned_at NULLS FIRST LIMIT 1",
		         2, p, oldest_done, NULL);
	}
}

int quota_init(struct event_base *base)
{
	(void)base;
	/* a cron section: every second, the first a second after start-up */
	section = cron_every("quota", 1000, 1000, tick, NULL);
	return section ? 0 : -1;
}

void quota_shutdown(void)
{
	section = NULL; /* freed with the cron */
}
