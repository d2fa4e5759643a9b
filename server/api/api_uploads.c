/* api_uploads.c — uploads that stream to disk: PUT /files/{area}/{path}
 * (one request, Content-Length required) and resumable uploads
 * (/uploads: create with size and target, parts at fixed offsets in any
 * order and as often as needed, status, complete, abort).
 *
 * Bytes go to a staging file under the data root's .uploads directory and
 * are renamed into the area only when complete (fsync first), so a
 * partial file is never visible.  The whole size is reserved against the
 * area's hard limit before the first byte is written (507 otherwise), so
 * racing uploads cannot overshoot it.  Memory stays flat: the body is
 * copied into two 1 MiB buffers written by worker threads; while both are
 * busy the request body is paused (http_body_pause), so a fast client
 * waits for the disk rather than filling memory.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include <http_parser.h>
#include <openssl/evp.h>

#include "api/api.h"
#include "auth/auth.h"
#include "base/config.h"
#include "db/db.h"
#include "storage/files.h"
#include "base/log.h"
#include "storage/paths.h"
#include "storage/quota.h"
#include "base/worker.h"

#define WBUF        (1u << 20)
#define MAX_BODY    (1LL << 50)
#define CHECK_EVERY (64LL << 20) /* bytes written between usage checks */

enum wstate { W_NEW, W_PREP, W_READY, W_FINISHING, W_DONE, W_FAILED };

struct upw {
	int refs;
	struct http_req *r; /* NULL once the request is gone */
	int kind;           /* 'f': PUT /files, 'p': a part */
	enum wstate state;
	struct auth_info *auth; /* borrowed from r while it lives */
	long long user_id;
	struct storage_area a;
	char area_name[80];
	char path[PATHS_MAX + 1];
	char stage[64];
	int staged; /* the staging file is ours to remove on failure */
	int fd;
	int64_t expect, got, base, wrote;
	unsigned char *buf[2];
	size_t len[2], cap[2];
	int cur, inflight, paused, body_done, overwrite;
	long long reservation;
	long long upload_id;
	int64_t part;
	int checking; /* a usage check is in flight */
	/* worker I/O */
	int wop; /* 'o' open, 'w' write, 'p' place */
	int wbuf, werr;
	struct files_result res;
};

static void ignore(PGresult *res, enum rc rc, void *arg)
{
	(void)res;
	(void)arg;
	if (rc != RC_OK)
		log_msg(LOG_WARN, "uploads", NULL, "upload bookkeeping failed: %s", rc_code(rc));
}

static void release_reservation(long long id, int64_t bytes, int64_t files)
{
	struct db_args a = DB_ARGS_INIT;

	if (!id)
		return;
	db_arg_ll(&a, id);
	db_arg_ll(&a, bytes);
	db_arg_ll(&a, files);
	db_query_args("SELECT gc_storage_release($1::bigint, $2::bigint, $3::bigint)", &a, ignore,
	              NULL);
}

static void w_unref(struct upw *w)
{
	if (--w->refs > 0)
		return;
	if (w->fd >= 0)
		close(w->fd);
	if (w->state != W_DONE && w->kind == 'f') {
		if (w->staged)
			quota_unlink_staging(w->stage);
		release_reservation(w->reservation, 0, 0);
	}
	json_decref(w->res.out);
	free(w->buf[0]);
	free(w->buf[1]);
	free(w);
}

static void w_detach(void *p)
{
	struct upw *w = p;

	w->r = NULL;
	w->auth = NULL;
	w_unref(w);
}

/* Ends the request with an error (when it still lives); w stays valid for
 * the caller only if it holds a reference. */
static void w_fail(struct upw *w, enum rc rc, const char *hint, const char *msg)
{
	w->state = W_FAILED;
	if (w->r) {
		struct http_req *r = w->r;
		http_reply_error(r, rc, hint, "%s", msg);
	}
}

static void w_kick(struct upw *w);

/* ---- worker side ---- */

static void w_work(void *arg)
{
	struct upw *w = arg;
	int sfd, root;

	switch (w->wop) {
	case 'o':
		sfd = storage_staging_open();
		if (sfd < 0) {
			files_fail(&w->res, errno, w->path);
			return;
		}
		if (w->kind == 'f') {
			char leaf[PATHS_NAME_MAX + 1];
			int pfd;
			struct stat st;

			root = storage_area_open(&w->a);
			if (root < 0) {
				files_fail(&w->res, errno, "");
				close(sfd);
				return;
			}
			/* refuse at once what the final rename would refuse */
			pfd = *w->path ? paths_open_parent(root, w->path, leaf, sizeof(leaf)) : -1;
			if (pfd < 0) {
				files_fail(&w->res, *w->path ? errno : EISDIR, w->path);
			} else if (fstatat(pfd, leaf, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
			           (S_ISDIR(st.st_mode) || !w->overwrite)) {
				files_fail(&w->res, S_ISDIR(st.st_mode) ? EISDIR : EEXIST, w->path);
			} else {
				w->fd = openat(sfd, w->stage,
				               O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
				if (w->fd < 0)
					files_fail(&w->res, errno, w->path);
				else
					w->res.rc = RC_OK;
			}
			if (pfd >= 0)
				close(pfd);
			close(root);
		} else {
			/* a part holds a shared lock on the staging file while it
			 * writes (until its fd closes); completion takes it
			 * exclusively, so a part sent again cannot write into the
			 * file after it was placed in the area */
			struct stat a, b;
			w->fd = openat(sfd, w->stage, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
			if (w->fd < 0) {
				files_fail(&w->res, errno, w->path);
			} else if (flock(w->fd, LOCK_SH | LOCK_NB) < 0 || fstat(w->fd, &a) < 0 ||
			           fstatat(sfd, w->stage, &b, AT_SYMLINK_NOFOLLOW) < 0 ||
			           a.st_ino != b.st_ino || a.st_dev != b.st_dev) {
				/* being completed, or completed (renamed away) already */
				close(w->fd);
				w->fd = -1;
				w->res.rc = RC_CONFLICT;
				w->res.hint = "ask GET /uploads/{id} for its state";
				snprintf(w->res.msg, sizeof(w->res.msg),
				         "the upload is being completed or is complete");
			} else {
				w->res.rc = RC_OK;
			}
		}
		close(sfd);
		return;
	case 'w': {
		size_t n = w->len[w->wbuf], off = 0;
		int64_t at = w->base + w->wrote;
		while (off < n) {
			ssize_t k = pwrite(w->fd, w->buf[w->wbuf] + off, n - off,
			                   (off_t)(at + (int64_t)off));
			if (k < 0) {
				if (errno == EINTR)
					continue;
				w->werr = errno;
				return;
			}
			off += (size_t)k;
		}
		return;
	}
	case 'p':
		sfd = storage_staging_open();
		root = sfd < 0 ? -1 : storage_area_open(&w->a);
		if (sfd < 0 || root < 0) {
			files_fail(&w->res, errno, w->path);
		} else {
			close(w->fd); /* placement reopens it */
			w->fd = -1;
			files_place(sfd, w->stage, root, w->path, w->overwrite, w->a.uid, w->a.gid,
			            &w->res);
		}
		if (sfd >= 0)
			close(sfd);
		if (root >= 0)
			close(root);
		return;
	}
}

static void w_done(void *arg);

static int w_submit(struct upw *w, int op)
{
	w->wop = op;
	w->refs++;
	if (worker_submit(w_work, w_done, w) < 0) {
		w->refs--;
		return -1;
	}
	return 0;
}

/* ---- finishing ---- */

static void part_marked(PGresult *res, enum rc rc, void *arg)
{
	struct upw *w = arg;

	if (w->r) {
		if (rc != RC_OK)
			api_reply_db_error(w->r, rc, "");
		else if (PQntuples(res) != 1)
			http_reply_error(w->r, RC_CONFLICT, NULL, "the upload is no longer open");
		else {
			w->state = W_DONE;
			http_reply_json(
			        w->r, 200,
			        json_pack("{s:I, s:I, s:I, s:I}", "id", (json_int_t)w->upload_id,
			                  "part", (json_int_t)w->part, "received",
			                  (json_int_t)strtoll(db_val(res, 0, 0), NULL, 10), "parts",
			                  (json_int_t)strtoll(db_val(res, 0, 1), NULL, 10)));
		}
	}
	w_unref(w);
}

static void w_finish(struct upw *w)
{
	w->state = W_FINISHING;
	if (w->kind == 'f') {
		if (w_submit(w, 'p') < 0)
			w_fail(w, RC_UNAVAILABLE, "try again in a moment",
			       "the file workers are busy");
		return;
	}
	{
		struct db_args a = DB_ARGS_INIT;
		db_arg_ll(&a, w->upload_id);
		db_arg_ll(&a, w->part);
		w->refs++;
		db_query_args("UPDATE uploads SET received = set_bit(received, $2::int, 1)"
		              " WHERE id = $1::bigint AND state = 'open'"
		              " RETURNING bit_count(received), parts",
		              &a, part_marked, w);
	}
}

/* While writing: the reservation covers this upload, but writes from
 * containers may have pushed the area over its hard limit since; then the
 * upload stops (507) rather than add to it. */
static void usage_checked(PGresult *res, enum rc rc, void *arg)
{
	struct upw *w = arg;

	w->checking = 0;
	if (w->r && w->state == W_READY && rc == RC_OK && PQntuples(res) == 1 &&
	    db_val(res, 0, 0) && !strcmp(db_val(res, 0, 0), "t")) {
		char msg[200];
		snprintf(msg, sizeof(msg), "storage quota of '%s' exceeded while writing",
		         w->area_name);
		w_fail(w, RC_INSUFFICIENT_STORAGE,
		       "delete files and empty the trash, or ask for a larger quota", msg);
	}
	w_unref(w);
}

static void check_usage(struct upw *w)
{
	struct db_args a = DB_ARGS_INIT;

	if (w->checking)
		return;
	w->checking = 1;
	w->refs++;
	db_arg_str(&a, w->a.key);
	db_query_args("SELECT bytes > bytes_hard FROM storage_effective WHERE area = $1", &a,
	              usage_checked, w);
}

static void w_done(void *arg)
{
	struct upw *w = arg;
	int op = w->wop;

	if (op == 'w')
		w->inflight = 0;
	if (!w->r || w->state == W_FAILED) {
		w_unref(w);
		return;
	}
	if (op == 'o') {
		if (w->res.rc != RC_OK) {
			w_fail(w, w->res.rc, w->res.hint, w->res.msg);
		} else {
			w->staged = w->kind == 'f';
			w->state = W_READY;
			w_kick(w);
		}
	} else if (op == 'w') {
		if (w->werr) {
			files_fail(&w->res, w->werr, w->path);
			w_fail(w, w->res.rc, NULL, w->res.msg);
		} else {
			int64_t before = w->wrote;
			w->wrote += (int64_t)w->len[w->wbuf];
			w->len[w->wbuf] = 0;
			if (w->kind == 'f' && before / CHECK_EVERY != w->wrote / CHECK_EVERY)
				check_usage(w);
			w_kick(w);
		}
	} else if (op == 'p') {
		if (w->res.rc != RC_OK) {
			w_fail(w, w->res.rc, w->res.hint, w->res.msg);
		} else {
			struct http_req *r = w->r;
			w->state = W_DONE;
			w->staged = 0;
			/* what the file really takes is measured by the next scan */
			release_reservation(w->reservation, (w->wrote + 4095) / 4096 * 4096, 1);
			w->reservation = 0;
			quota_dirty(&w->a);
			json_t *out = w->res.out;
			w->res.out = NULL;
			http_reply_json(r, 201, out);
		}
	}
	w_unref(w);
}

/* Moves data along: writes a full buffer when no write is in flight,
 * pauses or resumes the body, finishes once everything is on disk. */
static void w_kick(struct upw *w)
{
	if (w->state != W_READY || !w->r)
		return;
	if (!w->inflight && (w->len[w->cur] >= WBUF || (w->body_done && w->len[w->cur] > 0))) {
		w->wbuf = w->cur;
		w->cur ^= 1;
		w->inflight = 1;
		if (w_submit(w, 'w') < 0) {
			w->inflight = 0;
			w_fail(w, RC_UNAVAILABLE, "try again in a moment",
			       "the file workers are busy");
			return;
		}
	}
	if (w->paused && w->len[w->cur] < WBUF) {
		w->paused = 0;
		http_body_resume(w->r);
		return; /* more body may arrive now; on_body kicks again */
	}
	if (w->body_done && !w->inflight && w->len[0] == 0 && w->len[1] == 0)
		w_finish(w);
}

static int w_append(struct upw *w, const char *data, size_t len)
{
	int b = w->cur;

	if (w->len[b] + len > w->cap[b]) {
		size_t nc = w->len[b] + len > WBUF ? w->len[b] + len : WBUF;
		unsigned char *nb = realloc(w->buf[b], nc);
		if (!nb)
			return -1;
		w->buf[b] = nb;
		w->cap[b] = nc;
	}
	memcpy(w->buf[b] + w->len[b], data, len);
	w->len[b] += len;
	w->got += (int64_t)len;
	return 0;
}

/* ---- preparing: area, reservation, staging file ---- */

static void reserved(PGresult *res, enum rc rc, void *arg)
{
	struct upw *w = arg;

	if (!w->r || w->state == W_FAILED) {
		if (rc == RC_OK && db_val(res, 0, 0))
			release_reservation(strtoll(db_val(res, 0, 0), NULL, 10), 0, 0);
		w_unref(w);
		return;
	}
	if (rc != RC_OK) {
		w->state = W_FAILED;
		api_reply_db_error(w->r, rc, "");
	} else if (!db_val(res, 0, 0)) {
		char msg[300];
		snprintf(msg, sizeof(msg),
		         "storage quota of '%s' exceeded: %s bytes in use or reserved, limit %s, "
		         "upload %lld",
		         w->area_name, db_val(res, 0, 2) ? db_val(res, 0, 2) : "?",
		         db_val(res, 0, 1) ? db_val(res, 0, 1) : "?", (long long)w->expect);
		w_fail(w, RC_INSUFFICIENT_STORAGE,
		       "delete files and empty the trash, or ask for a larger quota", msg);
	} else {
		w->reservation = strtoll(db_val(res, 0, 0), NULL, 10);
		if (w_submit(w, 'o') < 0)
			w_fail(w, RC_UNAVAILABLE, "try again in a moment",
			       "the file workers are busy");
	}
	w_unref(w);
}

/* Reserves size bytes and one file in area a; cb receives (res, rc, arg) with
 * column 0 the reservation id (NULL: over the hard limit), 1 the limit, 2
 * the use. */
static void reserve_bytes(const struct storage_area *a, int64_t size, int ttl, db_cb cb, void *arg)
{
	char t[32];
	struct db_args q = DB_ARGS_INIT;

	snprintf(t, sizeof(t), "%d seconds", ttl);
	db_arg_str(&q, !strcmp(a->key, "shared") ? "shared" : a->key);
	db_arg_ll_opt(&q, a->user_id, a->user_id != 0);
	db_arg_ll_opt(&q, a->class_id, a->class_id != 0);
	db_arg_ll(&q, size);
	db_arg_str(&q, t);
	db_query_args(
	        "SELECT CASE WHEN $1 = 'shared' THEN 0 ELSE gc_storage_reserve($1, $2::bigint,"
	        " $3::bigint, $4::bigint, 1, $5::interval) END,"
	        " (SELECT bytes_hard FROM storage_effective WHERE area = $1),"
	        " (SELECT bytes + reserved FROM storage_effective WHERE area = $1)",
	        &q, cb, arg);
}

static void area_ok(void *arg, const struct storage_area *a, enum rc rc, const char *msg)
{
	struct upw *w = arg;

	if (!w->r || w->state == W_FAILED) {
		w_unref(w);
		return;
	}
	if (rc != RC_OK) {
		w->state = W_FAILED;
		if (rc == RC_UNAVAILABLE || rc == RC_DB)
			api_reply_db_error(w->r, rc, "");
		else
			http_reply_error(w->r, rc, NULL, "%s", msg);
		w_unref(w);
		return;
	}
	w->a = *a;
	/* held for an hour plus the time of a 1 MiB/s client */
	reserve_bytes(a, w->expect, 3600 + (int)(w->expect >> 20), reserved,
	              w); /* our reference moves on */
}

/* The upload a part belongs to, by name (DB_COLS_*: db.h). */
#define PART_COLS(FIRST, COL)            \
	FIRST(PART_USER_ID, "user_id")   \
	COL(PART_STAGING, "staging")     \
	COL(PART_SIZE, "size")           \
	COL(PART_PART_SIZE, "part_size") \
	COL(PART_PARTS, "parts")         \
	COL(PART_STATE, "state")
enum part_col { DB_COLS_ENUM(PART_COLS) };
#define PART_LIST DB_COLS_SQL(PART_COLS)

static void part_found(PGresult *res, enum rc rc, void *arg)
{
	struct upw *w = arg;

	if (!w->r || w->state == W_FAILED) {
		w_unref(w);
		return;
	}
	if (rc != RC_OK) {
		w->state = W_FAILED;
		api_reply_db_error(w->r, rc, "");
	} else if (PQntuples(res) != 1) {
		w_fail(w, RC_NOTFOUND, NULL, "no such upload");
	} else {
		long long owner = strtoll(db_val(res, 0, PART_USER_ID), NULL, 10);
		int64_t size = strtoll(db_val(res, 0, PART_SIZE), NULL, 10);
		int64_t psz = strtoll(db_val(res, 0, PART_PART_SIZE), NULL, 10);
		int64_t parts = strtoll(db_val(res, 0, PART_PARTS), NULL, 10);
		int64_t want;
		char msg[200];

		if (owner != w->user_id) {
			w_fail(w, RC_NOTFOUND, NULL, "no such upload");
		} else if (strcmp(db_val(res, 0, PART_STATE), "open") != 0) {
			snprintf(msg, sizeof(msg), "the upload is %s", db_val(res, 0, PART_STATE));
			w_fail(w, RC_CONFLICT, "start a new upload", msg);
		} else if (w->part >= parts) {
			snprintf(msg, sizeof(msg), "part %lld is past the last part (%lld parts)",
			         (long long)w->part, (long long)parts);
			w_fail(w, RC_INVALID, NULL, msg);
		} else {
			want = w->part == parts - 1 ? size - w->part * psz : psz;
			if (w->expect != want) {
				snprintf(msg, sizeof(msg), "part %lld must be %lld bytes, not %lld",
				         (long long)w->part, (long long)want, (long long)w->expect);
				w_fail(w, RC_INVALID,
				       "send each part whole with its Content-Length", msg);
			} else {
				snprintf(w->stage, sizeof(w->stage), "%s",
				         db_val(res, 0, PART_STAGING));
				w->base = w->part * psz;
				if (w_submit(w, 'o') < 0)
					w_fail(w, RC_UNAVAILABLE, NULL,
					       "the file workers are busy");
			}
		}
	}
	w_unref(w);
}

static void noop(void *arg)
{
	(void)arg;
}

/* Runs on the loop outside the parser (after a no-op worker round trip),
 * so errors can be replied to. */
static void w_prepare(void *arg)
{
	struct upw *w = arg;
	const char *why = NULL;

	if (!w->r || w->state == W_FAILED) {
		w_unref(w);
		return;
	}
	if (w->kind == 'f') {
		const char *raw = http_param(w->r, "path");
		char ow[8];
		long n = http_query(w->r, "overwrite", ow, sizeof(ow));

		w->overwrite = n > 0 && strcmp(ow, "0") && strcmp(ow, "false");
		if (w->r->content_length < 0) {
			w_fail(w, RC_INVALID, "send the size in Content-Length (or use /uploads)",
			       "uploads need a Content-Length");
		} else if (w->r->content_length > cfg.upload_max_bytes) {
			w_fail(w, RC_TOOLARGE, NULL, "the file is larger than uploads may be");
		} else if (paths_clean(raw ? raw : "", raw ? strlen(raw) : 0, w->path,
		                       sizeof(w->path), &why) < 0) {
			char msg[200];
			snprintf(msg, sizeof(msg), "bad path: %s", why);
			w_fail(w, RC_INVALID, "name files in UTF-8 without '..', '\\' or NUL", msg);
		} else if (!*w->path) {
			w_fail(w, RC_INVALID, NULL, "name the file to upload after the area");
		} else if (paths_trailing_slash(raw, strlen(raw))) {
			char msg[PATHS_MAX + 80];
			snprintf(msg, sizeof(msg), "'%s/' names a folder, not a file to upload",
			         w->path);
			w_fail(w, RC_INVALID, "drop the trailing '/' from the file's path", msg);
		} else {
			w->expect = w->r->content_length;
			snprintf(w->area_name, sizeof(w->area_name), "%s",
			         http_param(w->r, "area") ? http_param(w->r, "area") : "");
			files_random_name("u", w->stage, sizeof(w->stage));
			api_area_resolve(w->auth, w->area_name, 1, area_ok, w);
			return; /* reference moves on */
		}
	} else {
		struct db_args a = DB_ARGS_INIT;

		if (w->r->content_length < 0) {
			w_fail(w, RC_INVALID, "send the part's size in Content-Length",
			       "parts need a Content-Length");
		} else {
			w->expect = w->r->content_length;
			db_arg_ll(&a, w->upload_id);
			db_query_args("SELECT " PART_LIST " FROM uploads WHERE id = $1::bigint", &a,
			              part_found, w);
			return;
		}
	}
	w_unref(w);
}

static struct upw *w_begin(struct http_req *r, int kind)
{
	struct upw *w = calloc(1, sizeof(*w));
	long long id = 0, part = 0;

	if (!w)
		return NULL;
	if (kind == 'p') {
		const char *ids = http_param(r, "id"), *ps = http_param(r, "n");
		char *end;
		id = ids ? strtoll(ids, &end, 10) : 0;
		if (!ids || *end || id <= 0)
			id = -1;
		part = ps ? strtoll(ps, &end, 10) : -1;
		if (!ps || *end || part < 0 || strlen(ps) > 12)
			part = -1;
	}
	w->refs = 2; /* the request's, and the preparation's */
	w->r = r;
	w->auth = r->auth;
	w->user_id = r->auth->user_id;
	w->kind = kind;
	w->fd = -1;
	w->upload_id = id;
	w->part = part;
	w->state = W_PREP;
	r->data = w;
	r->data_free = w_detach;
	http_body_read_max(r, 256 * 1024);
	if (kind == 'p' && (id < 0 || part < 0)) {
		w->state = W_FAILED;
		w->refs--;
		return w;
	}
	if (worker_submit(noop, w_prepare, w) < 0) {
		w->state = W_FAILED;
		w->refs--;
	}
	return w;
}

static enum rc body(struct http_req *r, const char *data, size_t len, int kind)
{
	struct upw *w = r->data;

	if (!w) {
		w = w_begin(r, kind);
		if (!w)
			return RC_NOMEM;
	}
	if (w->state == W_FAILED)
		return kind == 'p' && (w->upload_id < 0 || w->part < 0) ? RC_NOTFOUND
		                                                        : RC_UNAVAILABLE;
	if (len && w_append(w, data, len) < 0) /* len 0: ROUTE_PREPARE's call */
		return RC_NOMEM;
	if (w->state != W_READY || (w->len[w->cur] >= WBUF && w->inflight)) {
		if (!w->paused) {
			w->paused = 1;
			http_body_pause(r);
		}
		return RC_OK;
	}
	w_kick(w);
	return RC_OK;
}

static enum rc file_body(struct http_req *r, const char *data, size_t len)
{
	return body(r, data, len, 'f');
}

static enum rc part_body(struct http_req *r, const char *data, size_t len)
{
	return body(r, data, len, 'p');
}

/* The whole body has arrived (or there was none). */
static void body_end(struct http_req *r, int kind)
{
	struct upw *w = r->data;

	if (!w) {
		w = w_begin(r, kind);
		if (!w) {
			http_reply_error(r, RC_NOMEM, NULL, "out of memory");
			return;
		}
	}
	if (w->state == W_FAILED && w->refs == 1) {
		http_reply_error(r, RC_NOTFOUND, NULL, "no such upload part");
		return;
	}
	w->body_done = 1;
	w_kick(w);
}

static void file_put(struct http_req *r)
{
	body_end(r, 'f');
}

static void part_put(struct http_req *r)
{
	body_end(r, 'p');
}

/* ---- /uploads: create, status, complete, abort ---- */

struct up {
	struct http_req *r;
	struct storage_area a;
	char path[PATHS_MAX + 1];
	char stage[64];
	char sha[65];
	int64_t size, part_size, parts;
	int overwrite;
	long long id, reservation;
	struct files_result res;
	int step;
	char got_sha[65];
};

static void up_free(void *p)
{
	struct up *u = p;

	json_decref(u->res.out);
	free(u);
}

/* An upload's status columns, by name (DB_COLS_*: db.h); received is the
 * bitmap of parts that arrived, as hex. */
#define STATUS_COLS(FIRST, COL)            \
	FIRST(STATUS_ID, "id")             \
	COL(STATUS_AREA, "area")           \
	COL(STATUS_PATH, "path")           \
	COL(STATUS_SIZE, "size")           \
	COL(STATUS_PART_SIZE, "part_size") \
	COL(STATUS_PARTS, "parts")         \
	COL(STATUS_RECEIVED, "received")   \
	COL(STATUS_STATE, "state")         \
	COL(STATUS_EXPIRES_AT, DB_TS("expires_at"))
enum status_col { DB_COLS_ENUM(STATUS_COLS) };
#define STATUS_LIST DB_COLS_SQL(STATUS_COLS)

static json_t *status_json(const PGresult *res, int i)
{
	json_t *recv = json_array();
	const char *hex = db_val(res, i, STATUS_RECEIVED);
	int64_t parts = strtoll(db_val(res, i, STATUS_PARTS), NULL, 10);
	int64_t n = 0;

	for (int64_t k = 0; k < parts; k++) {
		unsigned int byte = 0;
		sscanf(hex + 2 + (k / 8) * 2, "%2x", &byte);
		if (byte & (1 << (k % 8))) {
			json_array_append_new(recv, json_integer(k));
			n++;
		}
	}
	return json_pack("{s:I, s:s, s:s, s:I, s:I, s:I, s:o, s:I, s:s, s:s}", "id",
	                 (json_int_t)strtoll(db_val(res, i, STATUS_ID), NULL, 10), "area",
	                 db_val(res, i, STATUS_AREA), "path", db_val(res, i, STATUS_PATH), "size",
	                 (json_int_t)strtoll(db_val(res, i, STATUS_SIZE), NULL, 10), "part_size",
	                 (json_int_t)strtoll(db_val(res, i, STATUS_PART_SIZE), NULL, 10), "parts",
	                 (json_int_t)parts, "received", recv, "missing", (json_int_t)(parts - n),
	                 "state", db_val(res, i, STATUS_STATE), "expires_at",
	                 db_val(res, i, STATUS_EXPIRES_AT));
}

static void created(PGresult *res, enum rc rc, void *arg)
{
	struct up *u = arg;

	if (rc != RC_OK) {
		release_reservation(u->reservation, 0, 0);
		quota_unlink_staging(u->stage);
		api_reply_db_error(u->r, rc, "");
		return;
	}
	http_reply_json(u->r, 201, status_json(res, 0));
}

static void up_work(void *arg)
{
	struct up *u = arg;
	int sfd = storage_staging_open(), root = -1, pfd = -1, fd;
	char leaf[PATHS_NAME_MAX + 1];
	struct stat st;

	if (sfd < 0) {
		files_fail(&u->res, errno, u->path);
		return;
	}
	if (u->step == 'c') {
		/* create: the target must be placeable, then an empty staging file */
		root = storage_area_open(&u->a);
		pfd = root < 0 ? -1 : paths_open_parent(root, u->path, leaf, sizeof(leaf));
		if (pfd < 0)
			files_fail(&u->res, errno, u->path);
		else if (fstatat(pfd, leaf, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		         (S_ISDIR(st.st_mode) || !u->overwrite))
			files_fail(&u->res, S_ISDIR(st.st_mode) ? EISDIR : EEXIST, u->path);
		else if ((fd = openat(sfd, u->stage, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
		                      0600)) < 0)
			files_fail(&u->res, errno, u->path);
		else {
			close(fd);
			u->res.rc = RC_OK;
		}
	} else {
		/* complete: no part may be writing (their shared locks), and
		 * none may start until the file is placed (this exclusive one,
		 * held to the end) */
		int lk = openat(sfd, u->stage, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

		if (lk < 0) {
			files_fail(&u->res, errno, u->path);
			close(sfd);
			return;
		}
		if (flock(lk, LOCK_EX | LOCK_NB) < 0) {
			u->res.rc = RC_CONFLICT;
			u->res.hint = "complete again once the part in flight has finished";
			snprintf(u->res.msg, sizeof(u->res.msg), "a part is still being written");
			close(lk);
			close(sfd);
			return;
		}
		/* verify the digest when one was promised, then place */
		if (*u->sha) {
			EVP_MD_CTX *ctx = EVP_MD_CTX_new();
			unsigned char md[32], *buf = malloc(1 << 20);
			unsigned int mdl = 0;
			ssize_t n;

			fd = openat(sfd, u->stage, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
			if (fd >= 0 && ctx && buf && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL)) {
				while ((n = read(fd, buf, 1 << 20)) > 0)
					EVP_DigestUpdate(ctx, buf, (size_t)n);
				EVP_DigestFinal_ex(ctx, md, &mdl);
				for (unsigned i = 0; i < mdl; i++)
					snprintf(u->got_sha + 2 * i, 3, "%02x", md[i]);
			}
			if (fd >= 0)
				close(fd);
			EVP_MD_CTX_free(ctx);
			free(buf);
			if (strcmp(u->got_sha, u->sha) != 0) {
				u->res.rc = RC_CONFLICT;
				snprintf(u->res.msg, sizeof(u->res.msg),
				         "the uploaded bytes have SHA-256 %s, not %s", u->got_sha,
				         u->sha);
				u->res.hint = "send the parts again, then complete";
				close(lk);
				close(sfd);
				return;
			}
		}
		root = storage_area_open(&u->a);
		if (root < 0)
			files_fail(&u->res, errno, "");
		else
			files_place(sfd, u->stage, root, u->path, u->overwrite, u->a.uid, u->a.gid,
			            &u->res);
		close(lk);
	}
	if (pfd >= 0)
		close(pfd);
	if (root >= 0)
		close(root);
	close(sfd);
}

static void create_staged(void *arg)
{
	struct up *u = arg;
	char ttl[32];
	struct db_args a = DB_ARGS_INIT;

	if (u->res.rc != RC_OK) {
		release_reservation(u->reservation, 0, 0);
		http_reply_error(u->r, u->res.rc, u->res.hint, "%s", u->res.msg);
		return;
	}
	snprintf(ttl, sizeof(ttl), "%d seconds", cfg.upload_expiry_s);
	db_arg_ll(&a, u->r->auth->user_id);
	db_arg_str(&a, u->a.name);
	db_arg_str(&a, u->a.key);
	db_arg_str(&a, u->path);
	db_arg_ll(&a, u->size);
	db_arg_ll(&a, u->part_size);
	db_arg_ll(&a, u->parts);
	db_arg_ll(&a, (u->parts + 7) / 8);
	db_arg_str(&a, u->overwrite ? "t" : "f");
	db_arg_str(&a, *u->sha ? u->sha : NULL);
	db_arg_ll_opt(&a, u->reservation, u->reservation != 0);
	db_arg_str(&a, u->stage);
	db_arg_str(&a, ttl);
	db_query_args(
	        "INSERT INTO uploads (user_id, area, usage_area, path, size, part_size, parts,"
	        " received, overwrite, sha256, reservation_id, staging, expires_at)"
	        " VALUES ($1::bigint, $2, $3, $4, $5::bigint, $6::bigint, $7::int,"
	        " decode(repeat('00', $8::int), 'hex'), $9::boolean, $10, $11::bigint, $12,"
	        " now() + $13::interval) RETURNING " STATUS_LIST,
	        &a, created, u);
}

static void create_reserved(PGresult *res, enum rc rc, void *arg)
{
	struct up *u = arg;

	if (rc != RC_OK) {
		api_reply_db_error(u->r, rc, "");
		return;
	}
	if (!db_val(res, 0, 0)) {
		http_reply_error(
		        u->r, RC_INSUFFICIENT_STORAGE,
		        "delete files and empty the trash, or ask for a larger quota",
		        "storage quota of '%s' exceeded: %s bytes in use or reserved, limit "
		        "%s, upload %lld",
		        u->a.name, db_val(res, 0, 2) ? db_val(res, 0, 2) : "?",
		        db_val(res, 0, 1) ? db_val(res, 0, 1) : "?", (long long)u->size);
		return;
	}
	u->reservation = strtoll(db_val(res, 0, 0), NULL, 10);
	u->step = 'c';
	if (worker_submit(up_work, create_staged, u) < 0) {
		release_reservation(u->reservation, 0, 0);
		http_reply_error(u->r, RC_UNAVAILABLE, NULL, "the file workers are busy");
	}
}

static void create_area(void *arg, const struct storage_area *a, enum rc rc, const char *msg)
{
	struct up *u = arg;

	if (rc != RC_OK) {
		if (rc == RC_UNAVAILABLE || rc == RC_DB)
			api_reply_db_error(u->r, rc, "");
		else
			http_reply_error(u->r, rc, NULL, "%s", msg);
		return;
	}
	u->a = *a;
	reserve_bytes(a, u->size, cfg.upload_expiry_s + 3600, create_reserved, u);
}

static const struct jfield create_spec[] = {
	{ "area", J_STRING, 1, 79 },   { "path", J_STRING, 1, PATHS_MAX }, { "size", J_INT, 1, 0 },
	{ "overwrite", J_BOOL, 0, 0 }, { "sha256", J_STRING, 0, 64 },      { NULL, 0, 0, 0 },
};

static void upload_create(struct http_req *r)
{
	json_t *body = api_json_body(r, create_spec);
	struct up *u;
	const char *why = NULL, *sha;
	json_int_t size;

	if (!body)
		return;
	u = api_state(r, sizeof(*u), up_free);
	if (!u)
		goto out;
	u->r = r;
	size = json_integer_value(json_object_get(body, "size"));
	sha = json_string_value(json_object_get(body, "sha256"));
	if (paths_clean_decoded(json_string_value(json_object_get(body, "path")), u->path,
	                        sizeof(u->path), &why) < 0 ||
	    !*u->path) {
		http_reply_error(r, RC_INVALID, "name files in UTF-8 without '..', '\\' or NUL",
		                 "bad path: %s", why ? why : "name the file to upload");
		goto out;
	}
	if (size < 0 || size > cfg.upload_max_bytes) {
		http_reply_error(r, RC_INVALID, NULL, "size must be from 0 to %lld bytes",
		                 (long long)cfg.upload_max_bytes);
		goto out;
	}
	if (sha && (strlen(sha) != 64 || strspn(sha, "0123456789abcdef") != 64)) {
		http_reply_error(r, RC_INVALID, "64 lower-case hex digits",
		                 "sha256 must be a hex SHA-256 digest");
		goto out;
	}
	snprintf(u->sha, sizeof(u->sha), "%s", sha ? sha : "");
	u->size = size;
	u->part_size = cfg.upload_part_size;
	u->parts = (size + u->part_size - 1) / u->part_size;
	u->overwrite = json_is_true(json_object_get(body, "overwrite"));
	files_random_name("r", u->stage, sizeof(u->stage));
	api_area_resolve(r->auth, json_string_value(json_object_get(body, "area")), 1, create_area,
	                 u);
out:
	json_decref(body);
}

static void status_done(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;

	if (api_one_row(r, res, rc, "upload", "") < 0)
		return;
	http_reply_json(r, 200, status_json(res, 0));
}

static void upload_status(struct http_req *r)
{
	long long id;
	struct db_args a = DB_ARGS_INIT;

	if (api_id(r, "id", &id) < 0)
		return;
	db_arg_ll(&a, id);
	db_arg_ll(&a, r->auth->user_id);
	db_query_args("SELECT " STATUS_LIST
	              " FROM uploads WHERE id = $1::bigint AND user_id = $2::bigint",
	              &a, status_done, r);
}

/* complete: claim (open -> completing), area, worker, record */

static void completed(PGresult *res, enum rc rc, void *arg)
{
	struct up *u = arg;

	(void)res;
	if (rc != RC_OK) {
		api_reply_db_error(u->r, rc, "");
		return;
	}
	quota_dirty(&u->a);
	if (u->res.out && *u->got_sha)
		json_object_set_new(u->res.out, "sha256", json_string(u->got_sha));
	{
		json_t *out = u->res.out;
		u->res.out = NULL; /* the reply frees u */
		http_reply_json(u->r, 201, out ? out : json_object());
	}
}

/* A completion that failed: the upload is open again before the client
 * hears, so a part or a completion sent right after the error is taken. */
static void reopened(PGresult *res, enum rc rc, void *arg)
{
	struct up *u = arg;

	(void)res;
	if (rc != RC_OK)
		log_msg(LOG_WARN, "uploads", NULL, "cannot reopen upload %lld: %s", u->id,
		        rc_code(rc));
	http_reply_error(u->r, u->res.rc, u->res.hint, "%s", u->res.msg);
}

static void reopen(struct up *u)
{
	struct db_args a = DB_ARGS_INIT;

	db_arg_ll(&a, u->id);
	db_query_args(
	        "UPDATE uploads SET state = 'open' WHERE id = $1::bigint AND state = 'completing'",
	        &a, reopened, u);
}

static void complete_placed(void *arg)
{
	struct up *u = arg;
	struct db_args a = DB_ARGS_INIT;

	if (u->res.rc != RC_OK) {
		reopen(u);
		return;
	}
	db_arg_ll(&a, u->id);
	db_query_args("WITH u AS (UPDATE uploads SET state = 'completed' WHERE id = $1::bigint"
	              "  RETURNING reservation_id, size)"
	              " SELECT gc_storage_release(reservation_id, (size + 4095) / 4096 * 4096, 1)"
	              " FROM u",
	              &a, completed, u);
}

static void complete_area(void *arg, const struct storage_area *a, enum rc rc, const char *msg)
{
	struct up *u = arg;

	if (rc != RC_OK) {
		u->res.rc = rc;
		u->res.hint = NULL;
		snprintf(u->res.msg, sizeof(u->res.msg), "%s",
		         msg ? msg : "the area is unavailable");
		reopen(u);
		return;
	}
	u->a = *a;
	u->step = 'p';
	if (worker_submit(up_work, complete_placed, u) < 0) {
		/* it was claimed: give it back, or it stays 'completing' */
		u->res.rc = RC_UNAVAILABLE;
		u->res.hint = "try again in a moment";
		snprintf(u->res.msg, sizeof(u->res.msg), "the file workers are busy");
		reopen(u);
	}
}

/* An upload being claimed for completion, by name (DB_COLS_*: db.h). */
#define CLAIM_COLS(FIRST, COL)                                            \
	FIRST(CLAIM_CLAIMED, "(EXISTS (SELECT 1 FROM c))::text = 'true'") \
	COL(CLAIM_WHOLE, "(bit_count(received) = parts)")                 \
	COL(CLAIM_STAGING, "staging")                                     \
	COL(CLAIM_PATH, "path")                                           \
	COL(CLAIM_SHA256, "sha256")                                       \
	COL(CLAIM_STATE, "state")                                         \
	COL(CLAIM_RECEIVED, "bit_count(received)")                        \
	COL(CLAIM_PARTS, "parts")                                         \
	COL(CLAIM_OVERWRITE, "overwrite")                                 \
	COL(CLAIM_AREA, "area")
enum claim_col { DB_COLS_ENUM(CLAIM_COLS) };
#define CLAIM_LIST DB_COLS_SQL(CLAIM_COLS)

static void complete_claimed(PGresult *res, enum rc rc, void *arg)
{
	struct up *u = arg;

	if (rc != RC_OK) {
		api_reply_db_error(u->r, rc, "");
		return;
	}
	if (PQntuples(res) != 1) {
		http_reply_error(u->r, RC_NOTFOUND, NULL, "no such upload");
		return;
	}
	if (strcmp(db_val(res, 0, CLAIM_CLAIMED), "t") != 0) {
		if (strcmp(db_val(res, 0, CLAIM_STATE), "open") != 0)
			http_reply_error(u->r, RC_CONFLICT, NULL, "the upload is %s",
			                 db_val(res, 0, CLAIM_STATE));
		else
			http_reply_error(u->r, RC_CONFLICT, "send the missing parts, then complete",
			                 "%s of %s parts have arrived",
			                 db_val(res, 0, CLAIM_RECEIVED),
			                 db_val(res, 0, CLAIM_PARTS));
		return;
	}
	snprintf(u->stage, sizeof(u->stage), "%s", db_val(res, 0, CLAIM_STAGING));
	snprintf(u->path, sizeof(u->path), "%s", db_val(res, 0, CLAIM_PATH));
	snprintf(u->sha, sizeof(u->sha), "%s",
	         db_val(res, 0, CLAIM_SHA256) ? db_val(res, 0, CLAIM_SHA256) : "");
	u->overwrite = !strcmp(db_val(res, 0, CLAIM_OVERWRITE), "t");
	api_area_resolve(u->r->auth, db_val(res, 0, CLAIM_AREA), 1, complete_area, u);
}

static void upload_complete(struct http_req *r)
{
	struct up *u;
	long long id;
	struct db_args a = DB_ARGS_INIT;

	if (api_id(r, "id", &id) < 0 || !(u = api_state(r, sizeof(*u), up_free)))
		return;
	u->r = r;
	u->id = id;
	db_arg_ll(&a, id);
	db_arg_ll(&a, r->auth->user_id);
	/* claims it only when open and whole: one completion at a time */
	db_query_args(
	        "WITH c AS (UPDATE uploads SET state = 'completing' WHERE id = $1::bigint"
	        "  AND user_id = $2::bigint AND state = 'open' AND bit_count(received) = parts"
	        "  RETURNING id)"
	        " SELECT " CLAIM_LIST
	        " FROM uploads WHERE id = $1::bigint AND user_id = $2::bigint",
	        &a, complete_claimed, u);
}

static void aborted(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "");
		return;
	}
	if (PQntuples(res) != 1) {
		http_reply_error(r, RC_NOTFOUND, NULL, "no open upload with this id");
		return;
	}
	quota_unlink_staging(db_val(res, 0, 0));
	http_reply_json(r, 200, json_pack("{s:b}", "aborted", 1));
}

static void upload_abort(struct http_req *r)
{
	long long id;
	struct db_args a = DB_ARGS_INIT;

	if (api_id(r, "id", &id) < 0)
		return;
	db_arg_ll(&a, id);
	db_arg_ll(&a, r->auth->user_id);
	db_query_args(
	        "WITH a AS (UPDATE uploads SET state = 'aborted' WHERE id = $1::bigint"
	        "  AND user_id = $2::bigint AND state = 'open' RETURNING staging, reservation_id)"
	        " SELECT staging, gc_storage_release(reservation_id, 0, 0) FROM a",
	        &a, aborted, r);
}

const struct route api_uploads_routes[] = {
	{ HTTP_PUT, "/api/v1/files/{area}/{path...}", file_put, ROLES_ALL,
	  ROUTE_STREAM | ROUTE_RAW_BODY | ROUTE_PREPARE, MAX_BODY, file_body },
	{ HTTP_POST, "/api/v1/uploads", upload_create, ROLES_ALL, 0, 16384, NULL },
	{ HTTP_GET, "/api/v1/uploads/{id}", upload_status, ROLES_ALL, 0, 0, NULL },
	{ HTTP_PUT, "/api/v1/uploads/{id}/parts/{n}", part_put, ROLES_ALL,
	  ROUTE_STREAM | ROUTE_RAW_BODY | ROUTE_PREPARE, MAX_BODY, part_body },
	{ HTTP_POST, "/api/v1/uploads/{id}/complete", upload_complete, ROLES_ALL, 0, 0, NULL },
	{ HTTP_DELETE, "/api/v1/uploads/{id}", upload_abort, ROLES_ALL, 0, 0, NULL },
	{ 0, NULL, NULL, 0, 0, 0, NULL },
};
