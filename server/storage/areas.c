/* areas.c — storage areas as callers see them, on the loop: resolving an
 * area name ("home", "home:<user>", "shared", "class:<id>", "job:<id>") for a
 * caller with its access, the usage and limits of an area as JSON, and /me's storage
 * columns, which /me's caller extension reads (auth.h).
 * Does not own: the file work itself (files.c, on workers), scans (quota.c),
 * who the caller is (auth/): callers hand in a struct areas_caller.
 */
#include "storage/areas.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db/db.h"
#include "storage/paths.h"

/* ---- resolving an area name for a caller ---- */

struct resolve {
	long long user_id;
	int is_admin;
	int want_write;
	struct storage_area a;
	areas_cb cb;
	void *arg;
};

static void resolve_user_done(PGresult *res, enum rc rc, void *arg)
{
	struct resolve *rs = arg;
	char name[80];

	if (rc != RC_OK) {
		rs->cb(rs->arg, NULL, rc, "the database is unavailable");
	} else if (PQntuples(res) != 1) {
		rs->cb(rs->arg, NULL, RC_NOTFOUND, "no such user");
	} else {
		snprintf(name, sizeof(name), "%s", rs->a.name);
		storage_area_home(&rs->a, strtoll(db_val(res, 0, 0), NULL, 10), db_val(res, 0, 1));
		snprintf(rs->a.name, sizeof(rs->a.name), "%s", name);
		rs->a.writable = 1;
		rs->cb(rs->arg, &rs->a, RC_OK, NULL);
	}
	free(rs);
}

static void resolve_class_done(PGresult *res, enum rc rc, void *arg)
{
	struct resolve *rs = arg;
	char name[80];

	if (rc != RC_OK) {
		rs->cb(rs->arg, NULL, rc, "the database is unavailable");
	} else if (PQntuples(res) != 1) {
		rs->cb(rs->arg, NULL, RC_NOTFOUND, "no such class");
	} else {
		long long teacher = strtoll(db_val(res, 0, 0), NULL, 10);
		const char *role = db_val(res, 0, 1); /* gc_class_role: NULL out or suspended */
		int member = role != NULL;
		int writes = rs->is_admin || teacher == rs->user_id ||
		             (role && !strcmp(role, "teacher"));

		snprintf(name, sizeof(name), "%s", rs->a.name);
		storage_area_class(&rs->a, strtoll(db_val(res, 0, 2), NULL, 10), teacher);
		snprintf(rs->a.name, sizeof(rs->a.name), "%s", name);
		rs->a.writable = writes;
		rs->a.no_private = !rs->is_admin && role && !strcmp(role, "student");
		if (!writes && !member)
			rs->cb(rs->arg, NULL, RC_FORBIDDEN, "you are not a member of this class");
		else if (rs->want_write && !writes)
			rs->cb(rs->arg, NULL, RC_FORBIDDEN,
			       "the class area is read-only for its members");
		else
			rs->cb(rs->arg, &rs->a, RC_OK, NULL);
	}
	free(rs);
}

static int all_digits(const char *s)
{
	return *s && strspn(s, "0123456789") == strlen(s) && strlen(s) < 19;
}

/* job:<id>: the job's folder in its owner's home, read-only here (the
 * owner changes it through home).  Someone else's job is "no such job",
 * so ids say nothing about other users. */
static void resolve_job_done(PGresult *res, enum rc rc, void *arg)
{
	struct resolve *rs = arg;
	char name[80], sub[400];
	const char *why = NULL;

	if (rc != RC_OK) {
		rs->cb(rs->arg, NULL, rc, "the database is unavailable");
	} else if (PQntuples(res) != 1) {
		rs->cb(rs->arg, NULL, RC_NOTFOUND, "no such job");
	} else if (paths_clean_decoded(db_val(res, 0, 2), sub, sizeof(sub), &why) < 0 ||
	           strncmp(sub, "jobs/", 5) != 0) {
		rs->cb(rs->arg, NULL, RC_NOTFOUND, "the job has no folder");
	} else if (rs->want_write) {
		rs->cb(rs->arg, NULL, RC_FORBIDDEN,
		       "a job's folder is read-only here: change its files in the owner's home");
	} else {
		snprintf(name, sizeof(name), "%s", rs->a.name);
		storage_area_home(&rs->a, strtoll(db_val(res, 0, 0), NULL, 10), db_val(res, 0, 1));
		snprintf(rs->a.name, sizeof(rs->a.name), "%s", name);
		snprintf(rs->a.sub, sizeof(rs->a.sub), "%s", sub);
		rs->a.writable = 0;
		rs->cb(rs->arg, &rs->a, RC_OK, NULL);
	}
	free(rs);
}

void areas_resolve(const struct areas_caller *caller, const char *name, int want_write, areas_cb cb,
                   void *arg)
{
	struct storage_area a;
	struct resolve *rs;

	memset(&a, 0, sizeof(a));
	if (!name || strlen(name) >= sizeof(a.name)) {
		cb(arg, NULL, RC_NOTFOUND, "no such area");
		return;
	}
	snprintf(a.name, sizeof(a.name), "%s", name);
	if (!strcmp(name, "home")) {
		storage_area_home(&a, caller->user_id, caller->username);
		a.writable = 1;
		cb(arg, &a, RC_OK, NULL);
		return;
	}
	if (!strcmp(name, "shared")) {
		storage_area_shared(&a);
		a.writable = caller->is_admin;
		if (want_write && !a.writable)
			cb(arg, NULL, RC_FORBIDDEN, "the shared area is read-only for you");
		else
			cb(arg, &a, RC_OK, NULL);
		return;
	}
	rs = calloc(1, sizeof(*rs));
	if (!rs) {
		cb(arg, NULL, RC_NOMEM, "out of memory");
		return;
	}
	rs->user_id = caller->user_id;
	rs->is_admin = caller->is_admin;
	rs->want_write = want_write;
	rs->a = a;
	rs->cb = cb;
	rs->arg = arg;
	if (!strncmp(name, "home:", 5) && name[5]) {
		const char *who = name + 5;
		const char *p[1] = { who };
		char own[24];

		snprintf(own, sizeof(own), "%lld", (long long)caller->user_id);
		if (!strcmp(who, caller->username) || !strcmp(who, own)) {
			storage_area_home(&rs->a, caller->user_id, caller->username);
			rs->a.writable = 1;
			cb(arg, &rs->a, RC_OK, NULL);
			free(rs);
			return;
		}
		if (!caller->is_admin) {
			free(rs);
			cb(arg, NULL, RC_FORBIDDEN, "only admins may open another user's home");
			return;
		}
		db_query(all_digits(who) ? "SELECT id, username FROM users WHERE id = $1::bigint"
		                         : "SELECT id, username FROM users WHERE username = $1",
		         1, p, resolve_user_done, rs);
		return;
	}
	if (!strncmp(name, "class:", 6) && all_digits(name + 6)) {
		char uid[24];
		const char *p[2] = { name + 6, uid };

		snprintf(uid, sizeof(uid), "%lld", (long long)caller->user_id);
		db_query("SELECT c.teacher_id, gc_class_role($2::bigint, c.id), c.id"
		         " FROM classes c WHERE c.id = $1::bigint",
		         2, p, resolve_class_done, rs);
		return;
	}
	if (!strncmp(name, "job:", 4) && all_digits(name + 4)) {
		char uid[24];
		const char *p[2] = { name + 4, caller->is_admin ? NULL : uid };

		snprintf(uid, sizeof(uid), "%lld", (long long)caller->user_id);
		db_query("SELECT j.user_id, u.username,"
		         " substr(j.directory, length('home/' || u.username || '/') + 1)"
		         " FROM jobs j JOIN users u ON u.id = j.user_id"
		         " WHERE j.id = $1::bigint AND ($2::bigint IS NULL OR j.user_id = "
		         "$2::bigint)",
		         2, p, resolve_job_done, rs);
		return;
	}
	free(rs);
	cb(arg, NULL, RC_NOTFOUND, "no such area");
}

/* ---- usage ---- */

static json_t *num_or_null(const char *v)
{
	return v ? json_integer(strtoll(v, NULL, 10)) : json_null();
}

json_t *areas_usage_json(const PGresult *res, int i, int c)
{
	/* c: bytes, files, reserved, bytes_soft, bytes_hard, files_soft, files_hard, scanned */
	long long bytes = strtoll(db_val(res, i, c), NULL, 10);
	long long files = strtoll(db_val(res, i, c + 1), NULL, 10);
	const char *bs = db_val(res, i, c + 3), *bh = db_val(res, i, c + 4);
	const char *fs = db_val(res, i, c + 5), *fh = db_val(res, i, c + 6);

	return json_pack(
	        "{s:I, s:I, s:I, s:o, s:o, s:o, s:o, s:b, s:b, s:o}", "bytes", (json_int_t)bytes,
	        "files", (json_int_t)files, "reserved",
	        (json_int_t)strtoll(db_val(res, i, c + 2), NULL, 10), "bytes_soft", num_or_null(bs),
	        "bytes_hard", num_or_null(bh), "files_soft", num_or_null(fs), "files_hard",
	        num_or_null(fh), "over_soft",
	        (bs && bytes > strtoll(bs, NULL, 10)) || (fs && files > strtoll(fs, NULL, 10)),
	        "over_hard",
	        (bh && bytes > strtoll(bh, NULL, 10)) || (fh && files > strtoll(fh, NULL, 10)),
	        "scanned_at",
	        db_val(res, i, c + 7) ? json_string(db_val(res, i, c + 7)) : json_null());
}

/* AREAS_ME_COLS: has defaults, has a row, then areas_usage_json's eight,
 * then the block reason. */
json_t *areas_me_storage(const PGresult *res, int col, int *missing)
{
	json_t *u;
	const char *why;

	*missing = strcmp(db_val(res, 0, col + 1), "t") != 0;
	if (strcmp(db_val(res, 0, col), "t") != 0)
		return json_null(); /* no storage_defaults row: as before, no figures */
	u = areas_usage_json(res, 0, col + 2);
	why = db_val(res, 0, col + 10);
	json_object_set_new(u, "block_reason", why ? json_string(why) : json_null());
	return u;
}

void areas_home_create(int64_t user_id)
{
	char id[24], area[40];
	const char *p[2] = { area, id };

	snprintf(id, sizeof(id), "%lld", (long long)user_id);
	snprintf(area, sizeof(area), "home:%lld", (long long)user_id);
	db_query("INSERT INTO storage_areas (area, user_id) VALUES ($1, $2::bigint)"
	         " ON CONFLICT DO NOTHING",
	         2, p, db_ignore, NULL);
}
