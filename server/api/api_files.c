/* api_files.c — /files/{area}/{path}: list, stat, preview, download (Range,
 * ETag, sendfile), folder archives, mkdir, move, copy, delete to trash;
 * /trash: list, restore, purge, empty; /storage: usage, limits and kernel
 * quota support for admins; the storage part of /me.
 *
 * Handlers check the caller's access to the area on the loop (a database
 * lookup for classes), then hand the file work to a worker thread
 * (files.c) and reply when it is done.  Writes that add bytes or files
 * reserve them first (gc_storage_reserve), so the hard limit holds.
 * Uploads live in api_uploads.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <http_parser.h>

#include "api/api.h"
#include "auth/auth.h"
#include "base/config.h"
#include "db/db.h"
#include "storage/areas.h"
#include "storage/files.h"
#include "base/log.h"
#include "storage/paths.h"
#include "storage/quota.h"
#include "net/router.h"
#include "base/worker.h"

/* ---- jobs: request state, worker work, loop continuation ---- */

enum op {
	OP_GET,
	OP_MKDIR,
	OP_MOVE,
	OP_MEASURE,
	OP_COPY,
	OP_TRASH,
	OP_RESTORE,
	OP_PURGE,
	OP_TAR,
};

struct job {
	struct http_req *r;
	enum op op;
	struct storage_area a;
	char path[PATHS_MAX + 1], path2[PATHS_MAX + 1];
	char cursor[PATHS_NAME_MAX + 1];
	int limit;
	int want;       /* OP_GET: 's' stat, 'p' preview, 'd' download, 'l' list/inline */
	int list_flags; /* OP_GET listing: FILES_LIST_* */
	int is_inline;
	struct files_result res;
	/* results */
	int fd;
	struct stat st;
	char trash_name[48];
	int is_dir;
	int dir_only; /* the path ended with '/': it must name a folder */
	int64_t bytes, count;
	char *purge_names; /* OP_PURGE: NUL-separated, ends with "" */
	long long trash_id;
	long long reservation;
	/* streaming */
	struct files_tar *tar;
	unsigned char *tbuf;
	size_t tlen;
	int tdone, busy, ended;
	int64_t off, left;
	void (*next)(struct job *j);
};

static void job_free(void *p)
{
	struct job *j = p;

	if (j->fd >= 0)
		close(j->fd);
	json_decref(j->res.out);
	files_tar_free(j->tar);
	free(j->tbuf);
	free(j->purge_names);
	free(j);
}

static struct job *job_new(struct http_req *r, enum op op)
{
	struct job *j = calloc(1, sizeof(*j));

	if (!j) {
		http_reply_error(r, RC_NOMEM, NULL, "out of memory");
		return NULL;
	}
	j->r = r;
	j->op = op;
	j->fd = -1;
	r->data = j;
	r->data_free = job_free;
	return j;
}

static void reply_res(struct job *j, int status)
{
	if (j->res.rc != RC_OK) {
		http_reply_error(j->r, j->res.rc, j->res.hint, "%s", j->res.msg);
		return;
	}
	json_t *out = j->res.out;

	j->res.out = NULL; /* the reply frees j */
	http_reply_json(j->r, status, out ? out : json_object());
}

static void work(void *arg)
{
	struct job *j = arg;
	int root, tfd, sfd;

	if (j->op == OP_TAR) {
		if (files_tar_step(j->tar, j->tbuf, 1 << 20, &j->tlen) != 0)
			j->tdone = 1;
		return;
	}
	root = storage_area_open(&j->a);
	if (root < 0 && j->a.sub[0] && errno != ENOMEM && errno != EMFILE) {
		/* a job's folder its owner removed, or replaced with a link or a
		 * file: never followed */
		j->res.rc = RC_NOTFOUND;
		j->res.hint = "a job's folder must be a plain folder in its owner's home";
		snprintf(j->res.msg, sizeof(j->res.msg), "the job's folder '%.300s' is gone",
		         j->a.sub);
		return;
	}
	if (root < 0) {
		files_fail(&j->res, errno, "");
		return;
	}
	if (j->dir_only && j->op != OP_MKDIR) {
		/* "a.txt/" names a folder: never act on the file a.txt */
		int dfd = paths_open(root, j->path, O_RDONLY | O_DIRECTORY, 0);
		if (dfd < 0) {
			if (errno == ENOTDIR) {
				j->res.rc = RC_INVALID;
				j->res.hint = "drop the trailing '/' to name the file";
				snprintf(j->res.msg, sizeof(j->res.msg),
				         "'%.300s/' is not a folder", j->path);
			} else {
				files_fail(&j->res, errno, j->path);
			}
			close(root);
			return;
		}
		close(dfd);
	}
	switch (j->op) {
	case OP_GET:
		if (j->want == 'l') {
			int fd = paths_open(root, j->path, O_RDONLY, 0);
			struct stat st;
			if (fd < 0) {
				files_fail(&j->res, errno, j->path);
				break;
			}
			if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
				close(fd);
				files_list(root, j->path, j->cursor, j->limit, j->list_flags,
				           &j->res);
				break;
			}
			j->fd = fd;
			j->st = st;
			j->res.rc = RC_OK;
			break;
		}
		if (j->want == 's') {
			files_stat(root, j->path, &j->res);
			break;
		}
		if (j->want == 'p') {
			files_preview(root, j->path, cfg.preview_max_bytes, &j->res);
			break;
		}
		/* download: a file, or a folder as tar */
		j->fd = files_open_read(root, j->path, &j->st, &j->res);
		if (j->fd >= 0 && S_ISDIR(j->st.st_mode)) {
			const char *base = strrchr(j->path, '/');
			base = base ? base + 1 : *j->path ? j->path : j->a.name;
			if (!*j->path && j->a.sub[0]) /* a job's folder: its own name */
				base = strrchr(j->a.sub, '/') + 1;
			j->tar = files_tar_new(j->fd, base);
			j->fd = -1;
			j->tbuf = malloc(1 << 20);
			if (!j->tar || !j->tbuf)
				files_fail(&j->res, ENOMEM, j->path);
		}
		break;
	case OP_MKDIR: files_mkdir(root, j->path, j->a.uid, j->a.gid, &j->res); break;
	case OP_MOVE: files_move(root, j->path, j->path2, &j->res); break;
	case OP_MEASURE: files_measure(root, j->path, &j->bytes, &j->count, &j->res); break;
	case OP_COPY:
		sfd = storage_staging_open();
		if (sfd < 0) {
			files_fail(&j->res, errno, j->path2);
			break;
		}
		files_random_name("c", j->trash_name, sizeof(j->trash_name));
		/* the copy may write what was measured and reserved (plus a
		 * little for rounding), no more: a source grown since, or
		 * hard links (measured once, copied each), fail with 507 */
		files_copy(root, sfd, j->trash_name, j->path, j->path2, j->a.uid, j->a.gid,
		           j->bytes + (1 << 20), &j->bytes, &j->res);
		close(sfd);
		break;
	case OP_TRASH:
	case OP_RESTORE:
	case OP_PURGE:
		tfd = storage_trash_open(&j->a);
		if (tfd < 0) {
			files_fail(&j->res, errno, "");
			break;
		}
		if (j->op == OP_TRASH)
			files_trash(root, tfd, j->path, j->trash_name, &j->is_dir, &j->bytes,
			            &j->res);
		else if (j->op == OP_RESTORE)
			files_restore(tfd, j->trash_name, root, j->path, &j->res);
		else
			for (char *n = j->purge_names; n && *n; n += strlen(n) + 1)
				files_purge(tfd, n, &j->res);
		close(tfd);
		break;
	case OP_TAR: break;
	}
	close(root);
}

static void work_done(void *arg)
{
	struct job *j = arg;

	j->busy = 0;
	j->next(j);
}

static void submit(struct job *j, void (*next)(struct job *j))
{
	j->next = next;
	j->busy = 1;
	if (worker_submit(work, work_done, j) < 0) {
		j->busy = 0;
		http_reply_error(j->r, RC_UNAVAILABLE, "try again in a moment",
		                 "the file workers are busy");
	}
}

/* Cleans the {path...} capture; replies 400 and returns -1 when refused. */
static int req_path(struct http_req *r, char *out, int *dir_only)
{
	const char *raw = http_param(r, "path");
	const char *why = NULL;

	if (paths_clean(raw ? raw : "", raw ? strlen(raw) : 0, out, PATHS_MAX + 1, &why) < 0) {
		http_reply_error(r, RC_INVALID, "name files in UTF-8 without '..', '\\' or NUL",
		                 "bad path: %s", why);
		return -1;
	}
	*dir_only = raw && paths_trailing_slash(raw, strlen(raw));
	return 0;
}

static int body_path(struct http_req *r, const char *raw, char *out)
{
	const char *why = NULL;

	if (paths_clean_decoded(raw, out, PATHS_MAX + 1, &why) < 0) {
		http_reply_error(r, RC_INVALID, "name files in UTF-8 without '..', '\\' or NUL",
		                 "bad path: %s", why);
		return -1;
	}
	return 0;
}

/* Resolution continuing into a job. */
static void area_then(void *arg, const struct storage_area *a, enum rc rc, const char *msg);

static void start(struct job *j, int want_write)
{
	api_area_resolve(j->r->auth, http_param(j->r, "area"), want_write, area_then, j);
}

/* ---- reservations ---- */

static void reserve_done(PGresult *res, enum rc rc, void *arg);

static void reserve(struct job *j, int64_t bytes, int64_t files, void (*next)(struct job *j))
{
	char b[24], f[24], u[24], c[24];
	const char *p[5] = { j->a.key, j->a.user_id ? u : NULL, j->a.class_id ? c : NULL, b, f };

	snprintf(b, sizeof(b), "%lld", (long long)bytes);
	snprintf(f, sizeof(f), "%lld", (long long)files);
	snprintf(u, sizeof(u), "%lld", j->a.user_id);
	snprintf(c, sizeof(c), "%lld", j->a.class_id);
	j->next = next;
	if (!strcmp(j->a.key, "shared")) {
		/* no quota on the shared area (admins write it) */
		j->reservation = 0;
		next(j);
		return;
	}
	db_query("SELECT gc_storage_reserve($1, $2::bigint, $3::bigint, $4::bigint, $5::bigint,"
	         " '1 hour'), (SELECT bytes_hard FROM storage_effective WHERE area = $1),"
	         " (SELECT bytes + reserved FROM storage_effective WHERE area = $1)",
	         5, p, reserve_done, j);
}

static void reserve_done(PGresult *res, enum rc rc, void *arg)
{
	struct job *j = arg;
	const char *id;

	if (rc != RC_OK) {
		api_reply_db_error(j->r, rc, "");
		return;
	}
	id = db_val(res, 0, 0);
	if (!id) {
		http_reply_error(j->r, RC_INSUFFICIENT_STORAGE,
		                 "delete files and empty the trash, or ask for a larger quota",
		                 "storage quota of '%s' exceeded (%s of %s bytes in use)",
		                 j->a.name, db_val(res, 0, 2) ? db_val(res, 0, 2) : "?",
		                 db_val(res, 0, 1) ? db_val(res, 0, 1) : "?");
		return;
	}
	j->reservation = strtoll(id, NULL, 10);
	j->next(j);
}

static void ignore(PGresult *res, enum rc rc, void *arg)
{
	(void)res;
	(void)arg;
	if (rc != RC_OK)
		log_msg(LOG_WARN, "files", NULL, "storage bookkeeping failed: %s", rc_code(rc));
}

/* Ends j's reservation, counting what was written at once. */
static void release(struct job *j, int64_t bytes, int64_t files)
{
	char id[24], b[24], f[24];
	const char *p[3] = { id, b, f };

	if (j->reservation) {
		snprintf(id, sizeof(id), "%lld", j->reservation);
		snprintf(b, sizeof(b), "%lld", (long long)bytes);
		snprintf(f, sizeof(f), "%lld", (long long)files);
		db_query("SELECT gc_storage_release($1::bigint, $2::bigint, $3::bigint)", 3, p,
		         ignore, NULL);
		j->reservation = 0;
	}
	quota_dirty(&j->a);
}

/* ---- GET / HEAD ---- */

static void pump_file(struct http_req *r, void *arg);
static void pump_tar(struct http_req *r, void *arg);
static void tar_step_done(struct job *j);

static void on_gone(struct http_req *r, void *arg)
{
	struct job *j = arg;

	(void)r;
	if (!j->busy && !j->ended) {
		j->ended = 1;
		http_stream_end(j->r);
	}
}

static void pump_file(struct http_req *r, void *arg)
{
	struct job *j = arg;

	if (j->ended)
		return;
	while (j->left > 0 && http_stream_backlog(r) < (8u << 20)) {
		int64_t n = j->left < (4 << 20) ? j->left : (4 << 20);
		if (http_stream_file(r, j->fd, j->off, n) < 0) {
			j->left = 0;
			break;
		}
		j->off += n;
		j->left -= n;
	}
	if (j->left <= 0 || !http_req_alive(r)) {
		j->ended = 1;
		http_stream_end(r);
	}
}

static void pump_tar(struct http_req *r, void *arg)
{
	struct job *j = arg;

	(void)r;
	if (j->busy || j->ended)
		return;
	if (http_stream_backlog(j->r) >= (2u << 20))
		return; /* on_drain calls again */
	j->next = tar_step_done;
	j->busy = 1;
	if (worker_submit(work, work_done, j) < 0) {
		j->busy = 0;
		j->ended = 1;
		http_stream_end(j->r);
	}
}

static void tar_step_done(struct job *j)
{
	if (j->ended)
		return;
	if (!http_req_alive(j->r) || http_stream_write(j->r, j->tbuf, j->tlen) < 0 || j->tdone) {
		j->ended = 1;
		http_stream_end(j->r);
		return;
	}
	pump_tar(j->r, j);
}

static void content_disposition(struct http_req *r, const char *name, int attach)
{
	char v[1200];
	size_t n = (size_t)snprintf(v, sizeof(v), "%s; filename*=UTF-8''",
	                            attach ? "attachment" : "inline");

	for (const unsigned char *p = (const unsigned char *)name; *p && n + 4 < sizeof(v); p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || strchr("._-", *p))
			v[n++] = (char)*p;
		else
			n += (size_t)snprintf(v + n, sizeof(v) - n, "%%%02X", *p);
	}
	v[n] = '\0';
	http_add_header(r, "Content-Disposition", v);
}

static const char *mime_of(const char *path, int *safe_inline)
{
	const char *dot = strrchr(path, '.');
	static const struct {
		const char *ext, *mime;
	} t[] = {
		{ "png", "image/png" },
		{ "jpg", "image/jpeg" },
		{ "jpeg", "image/jpeg" },
		{ "gif", "image/gif" },
		{ "webp", "image/webp" },
		{ "txt", "text/plain; charset=utf-8" },
		{ "csv", "text/csv; charset=utf-8" },
		{ "json", "application/json" },
	};

	*safe_inline = 0;
	if (dot && !strchr(dot, '/'))
		for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
			if (!strcasecmp(dot + 1, t[i].ext)) {
				*safe_inline = 1;
				return t[i].mime;
			}
	return "application/octet-stream";
}

static void get_done(struct job *j)
{
	struct http_req *r = j->r;
	char etag[80], cr[100], lm[64];
	int64_t from = 0, len;
	int rg, safe;
	const char *inm, *name, *mime;
	struct tm tm;

	if (j->res.rc != RC_OK || j->res.out) {
		/* a listing says whether the caller may change the folder, so
		 * a client shows write actions only where they can work */
		if (j->res.rc == RC_OK && j->want == 'l')
			json_object_set_new(j->res.out, "writable", json_boolean(j->a.writable));
		reply_res(j, 200);
		return;
	}
	if (j->tar) {
		char disp[PATHS_MAX + 8];
		snprintf(disp, sizeof(disp), "%s.tar",
		         strrchr(j->path, '/') ? strrchr(j->path, '/') + 1
		         : *j->path            ? j->path
		         : j->a.sub[0]         ? strrchr(j->a.sub, '/') + 1
		                               : "files");
		content_disposition(r, disp, 1);
		http_add_header(r, "X-Content-Type-Options", "nosniff");
		http_stream_begin(r, 200, "application/x-tar", -1);
		if (r->method == HTTP_HEAD) {
			j->ended = 1;
			http_stream_end(r);
			return;
		}
		j->op = OP_TAR;
		http_req_on_close(r, on_gone, j);
		http_stream_on_drain(r, pump_tar, j);
		pump_tar(r, j);
		return;
	}
	if (!S_ISREG(j->st.st_mode)) {
		http_reply_error(r, RC_CONFLICT, NULL, "'%s' is not a regular file", j->path);
		return;
	}
	snprintf(etag, sizeof(etag), "\"%llx-%llx-%llx%09ld\"", (unsigned long long)j->st.st_ino,
	         (unsigned long long)j->st.st_size, (unsigned long long)j->st.st_mtim.tv_sec,
	         j->st.st_mtim.tv_nsec);
	gmtime_r(&j->st.st_mtim.tv_sec, &tm);
	strftime(lm, sizeof(lm), "%a, %d %b %Y %H:%M:%S GMT", &tm);
	http_add_header(r, "ETag", etag);
	http_add_header(r, "Last-Modified", lm);
	http_add_header(r, "Accept-Ranges", "bytes");
	http_add_header(r, "Cache-Control", "private, no-cache");
	http_add_header(r, "X-Content-Type-Options", "nosniff");
	/* user content never runs as the API's origin */
	http_add_header(r, "Content-Security-Policy", "sandbox; default-src 'none'");
	inm = http_header(r, "If-None-Match");
	if (inm && (strstr(inm, etag) || !strcmp(inm, "*"))) {
		http_stream_begin(r, 304, NULL, -2);
		http_stream_end(r);
		return;
	}
	name = strrchr(j->path, '/') ? strrchr(j->path, '/') + 1 : j->path;
	mime = mime_of(j->path, &safe);
	content_disposition(r, name, !(j->is_inline && safe));
	len = j->st.st_size;
	rg = api_byte_range(http_header(r, "Range"), j->st.st_size, &from, &len);
	if (rg < 0) {
		snprintf(cr, sizeof(cr), "bytes */%lld", (long long)j->st.st_size);
		http_add_header(r, "Content-Range", cr);
		/* 416 has no rc of its own: the error shape by hand */
		http_reply_json(r, 416,
		                json_pack("{s:{s:s, s:s, s:s}}", "error", "code",
		                          "range_not_satisfiable", "message",
		                          "range not satisfiable", "hint",
		                          "ask for bytes inside the file"));
		return;
	}
	if (rg > 0) {
		snprintf(cr, sizeof(cr), "bytes %lld-%lld/%lld", (long long)from,
		         (long long)(from + len - 1), (long long)j->st.st_size);
		http_add_header(r, "Content-Range", cr);
	}
	j->off = from;
	j->left = len;
	http_stream_begin(r, rg > 0 ? 206 : 200, mime, len);
	if (r->method == HTTP_HEAD) {
		j->ended = 1;
		http_stream_end(r);
		return;
	}
	http_req_on_close(r, on_gone, j);
	http_stream_on_drain(r, pump_file, j);
	pump_file(r, j);
}

static void get_go(struct job *j)
{
	submit(j, get_done);
}

static int flag(struct http_req *r, const char *name, int *v)
{
	char b[8];
	long n = api_query(r, name, b, sizeof(b));

	if (n == -2)
		return -1;
	*v = n > 0 && strcmp(b, "0") && strcmp(b, "false");
	return 0;
}

static void files_get(struct http_req *r)
{
	struct job *j;
	int stat_, preview, download, inl, hidden = 1;
	long long dummy;
	char cur[PATHS_NAME_MAX + 1] = "";
	long n;

	if (flag(r, "stat", &stat_) < 0 || flag(r, "preview", &preview) < 0 ||
	    flag(r, "download", &download) < 0 || flag(r, "inline", &inl) < 0)
		return;
	{
		char hb[8];
		long hn = api_query(r, "hidden", hb, sizeof(hb));
		if (hn == -2)
			return;
		if (hn >= 0) /* hidden=0 (or false) leaves out the dot-names */
			hidden = strcmp(hb, "0") && strcmp(hb, "false");
	}
	(void)dummy;
	n = api_query(r, "cursor", cur, sizeof(cur));
	if (n == -2)
		return;
	j = job_new(r, OP_GET);
	if (!j)
		return;
	if (req_path(r, j->path, &j->dir_only) < 0)
		return;
	{
		char lb[16];
		long ln = api_query(r, "limit", lb, sizeof(lb));
		char *end;
		long v = 200;
		if (ln == -2)
			return;
		if (ln > 0) {
			v = strtol(lb, &end, 10);
			if (*end || v < 1) {
				http_reply_error(r, RC_INVALID, "1 to 1000",
				                 "limit must be a positive integer");
				return;
			}
			if (v > 1000)
				v = 1000;
		}
		j->limit = (int)v;
	}
	snprintf(j->cursor, sizeof(j->cursor), "%s", cur);
	j->want = stat_ ? 's' : preview ? 'p' : download ? 'd' : 'l';
	j->list_flags = hidden ? 0 : FILES_LIST_NO_HIDDEN;
	j->is_inline = inl;
	j->next = get_go;
	start(j, 0);
}

static void area_then(void *arg, const struct storage_area *a, enum rc rc, const char *msg)
{
	struct job *j = arg;

	if (rc != RC_OK) {
		if (rc == RC_UNAVAILABLE || rc == RC_DB)
			api_reply_db_error(j->r, rc, "");
		else
			http_reply_error(j->r, rc, NULL, "%s", msg);
		return;
	}
	j->a = *a;
	if (a->no_private && storage_class_private_path(j->path)) {
		/* classmates' collected work and feedback: as if not there */
		http_reply_error(j->r, RC_NOTFOUND, NULL, "no such file or folder '%s'", j->path);
		return;
	}
	if (a->no_private && !*j->path && j->op == OP_GET && j->want == 'd') {
		http_reply_error(j->r, RC_FORBIDDEN, "download its folders one by one",
		                 "the class area cannot be downloaded whole");
		return;
	}
	j->next(j);
}

/* ---- POST: mkdir, move, copy ---- */

static void mkdir_done(struct job *j)
{
	release(j, j->res.rc == RC_OK ? 4096 : 0, j->res.rc == RC_OK ? 1 : 0);
	reply_res(j, 201);
}

static void mkdir_reserved(struct job *j)
{
	submit(j, mkdir_done);
}

static void mkdir_go(struct job *j)
{
	reserve(j, 4096, 1, mkdir_reserved);
}

static void move_done(struct job *j)
{
	quota_dirty(&j->a);
	reply_res(j, 200);
}

static void move_go(struct job *j)
{
	submit(j, move_done);
}

static void copy_done(struct job *j)
{
	release(j, j->res.rc == RC_OK ? j->bytes : 0, j->res.rc == RC_OK ? j->count : 0);
	reply_res(j, 201);
}

static void copy_reserved(struct job *j)
{
	j->op = OP_COPY;
	submit(j, copy_done);
}

static void copy_measured(struct job *j)
{
	if (j->res.rc != RC_OK) {
		reply_res(j, 200);
		return;
	}
	reserve(j, j->bytes, j->count, copy_reserved);
}

static void copy_go(struct job *j)
{
	submit(j, copy_measured);
}

static const struct jfield post_spec[] = {
	{ "op", J_STRING, 1, 16 },
	{ "to", J_STRING, 0, PATHS_MAX },
	{ NULL, 0, 0, 0 },
};

static void files_post(struct http_req *r)
{
	json_t *body = api_json_body(r, post_spec);
	const char *op, *to;
	struct job *j;

	if (!body)
		return;
	op = json_string_value(json_object_get(body, "op"));
	to = json_string_value(json_object_get(body, "to"));
	j = job_new(r, OP_MKDIR);
	if (!j || req_path(r, j->path, &j->dir_only) < 0)
		goto out;
	if (!strcmp(op, "mkdir")) {
		j->next = mkdir_go;
	} else if (!strcmp(op, "move") || !strcmp(op, "copy")) {
		if (!to) {
			http_reply_error(r, RC_INVALID,
			                 "e.g. {\"op\":\"move\",\"to\":\"data/new.csv\"}",
			                 "%s needs 'to', the new path in the same area", op);
			goto out;
		}
		if (body_path(r, to, j->path2) < 0)
			goto out;
		j->op = op[0] == 'm' ? OP_MOVE : OP_MEASURE;
		j->next = op[0] == 'm' ? move_go : copy_go;
	} else {
		http_reply_error(r, RC_INVALID, "use mkdir, move or copy", "unknown op '%s'", op);
		goto out;
	}
	start(j, 1);
out:
	json_decref(body);
}

/* ---- DELETE: to the trash ---- */

/* Deletions in the shared area, a class's area or another user's home are
 * audited (one's own home is one's own business). */
static void audit_file(struct job *j, const char *action, const char *path, json_t *details)
{
	char target[PATHS_MAX + 64];

	if (strncmp(j->a.key, "home:", 5) == 0 && strcmp(j->a.name, "home") == 0) {
		json_decref(details);
		return;
	}
	if (!details)
		details = json_object();
	json_object_set_new(details, "area", json_string(j->a.name));
	json_object_set_new(details, "path", json_string(path));
	if (strncmp(j->a.key, "class:", 6) == 0)
		json_object_set_new(details, "class_id",
		                    json_integer(strtoll(j->a.key + 6, NULL, 10)));
	snprintf(target, sizeof(target), "files:%s/%s", j->a.key, path);
	auth_audit(j->r, j->r->auth, action, target, details);
}

static void trash_recorded(PGresult *res, enum rc rc, void *arg)
{
	struct job *j = arg;

	if (rc != RC_OK) {
		api_reply_db_error(j->r, rc, "");
		return;
	}
	audit_file(j, "file.delete", j->path, json_pack("{s:b}", "is_dir", j->is_dir));
	http_reply_json(j->r, 200,
	                json_pack("{s:I, s:s, s:s, s:b}", "trash_id",
	                          (json_int_t)strtoll(db_val(res, 0, 0), NULL, 10), "area",
	                          j->a.name, "path", j->path, "is_dir", j->is_dir));
}

static void trash_done(struct job *j)
{
	char b[24], uid[24];
	const char *p[6] = { j->a.key, j->path, j->trash_name, j->is_dir ? "t" : "f", b, uid };

	if (j->res.rc != RC_OK) {
		reply_res(j, 200);
		return;
	}
	snprintf(b, sizeof(b), "%lld", (long long)j->bytes);
	snprintf(uid, sizeof(uid), "%lld", (long long)j->r->auth->user_id);
	db_query("INSERT INTO trash_items (area, path, trash_name, is_dir, bytes, deleted_by)"
	         " VALUES ($1, $2, $3, $4::boolean, $5::bigint, $6::bigint) RETURNING id",
	         6, p, trash_recorded, j);
}

static void trash_go(struct job *j)
{
	submit(j, trash_done);
}

static void files_delete(struct http_req *r)
{
	struct job *j = job_new(r, OP_TRASH);

	if (!j || req_path(r, j->path, &j->dir_only) < 0)
		return;
	j->next = trash_go;
	start(j, 1);
}

/* ---- /trash ---- */

static void trash_list_done(PGresult *res, enum rc rc, void *arg)
{
	struct job *j = arg;
	json_t *items = json_array();

	if (rc != RC_OK) {
		json_decref(items);
		api_reply_db_error(j->r, rc, "");
		return;
	}
	for (int i = 0; i < PQntuples(res); i++)
		json_array_append_new(items,
		                      json_pack("{s:I, s:s, s:s, s:b, s:I, s:s}", "id",
		                                (json_int_t)strtoll(db_val(res, i, 0), NULL, 10),
		                                "area", j->a.name, "path", db_val(res, i, 1),
		                                "is_dir", !strcmp(db_val(res, i, 2), "t"), "size",
		                                (json_int_t)strtoll(db_val(res, i, 3), NULL, 10),
		                                "deleted_at", db_val(res, i, 4)));
	http_reply_json(j->r, 200, json_pack("{s:s, s:o}", "area", j->a.name, "items", items));
}

static void trash_list_go(struct job *j)
{
	const char *p[1] = { j->a.key };

	db_query("SELECT id, path, is_dir, bytes,"
	         " " DB_TS("deleted_at") " FROM trash_items WHERE area = $1 ORDER BY deleted_at "
	                                 "DESC, id DESC LIMIT 1000",
	         1, p, trash_list_done, j);
}

static int area_query(struct http_req *r, char *out, size_t outlen)
{
	long n = api_query(r, "area", out, outlen);

	if (n == -2)
		return -1;
	if (n <= 0)
		snprintf(out, outlen, "home");
	return 0;
}

static void trash_list(struct http_req *r)
{
	char area[80];
	struct job *j;

	if (area_query(r, area, sizeof(area)) < 0 || !(j = job_new(r, OP_TRASH)))
		return;
	j->next = trash_list_go;
	api_area_resolve(r->auth, area, 1, area_then, j);
}

/* restore and purge of one item: find it, check the area, then the worker */

static void item_removed(PGresult *res, enum rc rc, void *arg)
{
	struct job *j = arg;

	(void)res;
	if (rc != RC_OK) {
		api_reply_db_error(j->r, rc, "");
		return;
	}
	quota_dirty(&j->a);
	audit_file(j, j->op == OP_RESTORE ? "file.restore" : "file.purge", j->path, NULL);
	http_reply_json(j->r, 200,
	                json_pack("{s:s, s:s, s:b}", "area", j->a.name, "path", j->path, "restored",
	                          j->op == OP_RESTORE));
}

static void item_worked(struct job *j)
{
	char id[24];
	const char *p[1] = { id };

	if (j->res.rc != RC_OK) {
		reply_res(j, 200);
		return;
	}
	snprintf(id, sizeof(id), "%lld", j->trash_id);
	db_query("DELETE FROM trash_items WHERE id = $1::bigint", 1, p, item_removed, j);
}

static void item_go(struct job *j)
{
	submit(j, item_worked);
}

static void item_found(PGresult *res, enum rc rc, void *arg)
{
	struct job *j = arg;

	if (rc != RC_OK) {
		api_reply_db_error(j->r, rc, "");
		return;
	}
	if (PQntuples(res) != 1) {
		http_reply_error(j->r, RC_NOTFOUND, NULL, "no such item in the trash");
		return;
	}
	snprintf(j->path, sizeof(j->path), "%s", db_val(res, 0, 1));
	snprintf(j->trash_name, sizeof(j->trash_name), "%s", db_val(res, 0, 2));
	if (j->op == OP_PURGE) {
		size_t l = strlen(j->trash_name);
		j->purge_names = calloc(1, l + 2);
		if (!j->purge_names) {
			http_reply_error(j->r, RC_NOMEM, NULL, "out of memory");
			return;
		}
		memcpy(j->purge_names, j->trash_name, l);
	}
	j->next = item_go;
	api_area_resolve(j->r->auth, db_val(res, 0, 0), 1, area_then, j);
}

static void trash_item(struct http_req *r, enum op op)
{
	struct job *j;
	long long id;
	char ids[24];
	const char *p[1] = { ids };

	if (api_id(r, "id", &id) < 0 || !(j = job_new(r, op)))
		return;
	j->trash_id = id;
	snprintf(ids, sizeof(ids), "%lld", id);
	db_query("SELECT area, path, trash_name FROM trash_items WHERE id = $1::bigint", 1, p,
	         item_found, j);
}

static void trash_restore(struct http_req *r)
{
	trash_item(r, OP_RESTORE);
}

static void trash_purge_one(struct http_req *r)
{
	trash_item(r, OP_PURGE);
}

/* empty: every item of the area */

static void emptied(PGresult *res, enum rc rc, void *arg)
{
	struct job *j = arg;

	if (rc != RC_OK) {
		api_reply_db_error(j->r, rc, "");
		return;
	}
	quota_dirty(&j->a);
	audit_file(j, "file.empty_trash", "", json_pack("{s:i}", "purged", PQntuples(res)));
	http_reply_json(j->r, 200,
	                json_pack("{s:s, s:i}", "area", j->a.name, "purged", PQntuples(res)));
}

static void empty_worked(struct job *j)
{
	const char *p[1] = { j->purge_names };

	/* the names purged, as one array literal built below */
	db_query("DELETE FROM trash_items WHERE trash_name = ANY (string_to_array($1, '/'))"
	         " RETURNING id",
	         1, p, emptied, j);
}

static void empty_worked_join(struct job *j);

static void empty_listed(PGresult *res, enum rc rc, void *arg)
{
	struct job *j = arg;
	size_t len = 2, o = 0;

	if (rc != RC_OK) {
		api_reply_db_error(j->r, rc, "");
		return;
	}
	for (int i = 0; i < PQntuples(res); i++)
		len += strlen(db_val(res, i, 0)) + 1;
	j->purge_names = calloc(1, len);
	if (!j->purge_names) {
		http_reply_error(j->r, RC_NOMEM, NULL, "out of memory");
		return;
	}
	for (int i = 0; i < PQntuples(res); i++) {
		size_t l = strlen(db_val(res, i, 0));
		memcpy(j->purge_names + o, db_val(res, i, 0), l + 1);
		o += l + 1;
	}
	j->op = OP_PURGE;
	j->next = empty_worked_join;
	j->busy = 1;
	if (worker_submit(work, work_done, j) < 0) {
		j->busy = 0;
		http_reply_error(j->r, RC_UNAVAILABLE, NULL, "the file workers are busy");
		return;
	}
}

static void empty_go(struct job *j)
{
	const char *p[1] = { j->a.key };

	db_query("SELECT trash_name FROM trash_items WHERE area = $1", 1, p, empty_listed, j);
}

static void trash_empty(struct http_req *r)
{
	char area[80];
	struct job *j;

	if (area_query(r, area, sizeof(area)) < 0 || !(j = job_new(r, OP_PURGE)))
		return;
	j->next = empty_go;
	api_area_resolve(r->auth, area, 1, area_then, j);
}

/* empty_worked passes names joined by '/' (never inside a trash name) */
static void join_names(struct job *j)
{
	char *n = j->purge_names;

	for (;;) {
		size_t l = strlen(n);
		if (!n[l + 1])
			break;
		n[l] = '/';
		n += l + 1;
	}
}

static void empty_worked_join(struct job *j)
{
	join_names(j);
	empty_worked(j);
}

/* ---- /storage (admins) and /me ---- */

#define LIMIT_COLS "bytes_soft, bytes_hard, files_soft, files_hard"

#define USAGE_COLS                                                                \
	"e.bytes, e.files, e.reserved, e.bytes_soft, e.bytes_hard, e.files_soft," \
	" e.files_hard, " DB_TS("e.scanned_at")

static void storage_done(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;
	json_t *areas = json_array(), *defaults = NULL;

	if (rc != RC_OK) {
		json_decref(areas);
		api_reply_db_error(r, rc, "");
		return;
	}
	for (int i = 0; i < PQntuples(res); i++) {
		json_t *u = areas_usage_json(res, i, 2);
		json_object_set_new(u, "area", json_string(db_val(res, i, 0)));
		json_object_set_new(u, "name",
		                    db_val(res, i, 1) ? json_string(db_val(res, i, 1))
		                                      : json_null());
		if (!defaults)
			defaults = json_loads(db_val(res, i, 10), 0, NULL);
		if (strcmp(db_val(res, i, 0), "~"))
			json_array_append_new(areas, u);
		else
			json_decref(u);
	}
	http_reply_json(r, 200,
	                json_pack("{s:o, s:o, s:o}", "support", storage_support_json(), "defaults",
	                          defaults ? defaults : json_object(), "areas", areas));
}

static void storage_get(struct http_req *r)
{
	db_query("SELECT e.area, COALESCE(u.username, c.name), " USAGE_COLS ","
	         " (SELECT row_to_json(d)::text FROM (SELECT user_bytes_soft, user_bytes_hard,"
	         " user_files_soft, user_files_hard, class_bytes_soft, class_bytes_hard,"
	         " class_files_soft, class_files_hard FROM storage_defaults) d)"
	         " FROM storage_effective e LEFT JOIN users u ON u.id = e.user_id"
	         " LEFT JOIN classes c ON c.id = e.class_id"
	         " UNION ALL SELECT '~', NULL, 0, 0, 0, NULL, NULL, NULL, NULL, NULL,"
	         " (SELECT row_to_json(d)::text FROM (SELECT user_bytes_soft, user_bytes_hard,"
	         " user_files_soft, user_files_hard, class_bytes_soft, class_bytes_hard,"
	         " class_files_soft, class_files_hard FROM storage_defaults) d)"
	         " ORDER BY 1 LIMIT 10001",
	         0, NULL, storage_done, r);
}

static const char *const default_names[] = {
	"user_bytes_soft",  "user_bytes_hard",  "user_files_soft",  "user_files_hard",
	"class_bytes_soft", "class_bytes_hard", "class_files_soft", "class_files_hard",
};

static const char *const limit_names[] = { "bytes_soft", "bytes_hard", "files_soft", "files_hard" };

/* Reads nullable non-negative integers; replies 400 on a bad one. */
static int limits_from(struct http_req *r, json_t *body, const char *const *names, int n,
                       char vals[][24], const char **p, const char **set)
{
	for (int i = 0; i < n; i++) {
		json_t *v = json_object_get(body, names[i]);
		set[i] = v ? "t" : "f";
		p[i] = NULL;
		if (!v || json_is_null(v))
			continue;
		if (!json_is_integer(v) || json_integer_value(v) < 0) {
			http_reply_error(r, RC_INVALID, "bytes or files, or null for the default",
			                 "'%s' must be a non-negative integer or null", names[i]);
			return -1;
		}
		snprintf(vals[i], 24, "%lld", (long long)json_integer_value(v));
		p[i] = vals[i];
	}
	return 0;
}

/* Strict decoding by hand: these fields may be null. */
static json_t *limits_body(struct http_req *r, const char *const *names, int n)
{
	json_t *body;
	const char *k;
	json_t *v;
	char err[200];
	struct jfield none[] = { { NULL, 0, 0, 0 } };

	(void)none;
	body = json_loadb((const char *)evbuffer_pullup(r->body, -1), evbuffer_get_length(r->body),
	                  JSON_REJECT_DUPLICATES, NULL);
	if (!json_is_object(body)) {
		json_decref(body);
		http_reply_error(r, RC_INVALID, "send a JSON object", "malformed JSON body");
		return NULL;
	}
	json_object_foreach(body, k, v)
	{
		int known = 0;
		for (int i = 0; i < n; i++)
			known |= !strcmp(k, names[i]);
		if (!known) {
			snprintf(err, sizeof(err), "unknown field '%s'", k);
			json_decref(body);
			http_reply_error(r, RC_INVALID, NULL, "%s", err);
			return NULL;
		}
	}
	return body;
}

static void limits_saved(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;

	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "");
		return;
	}
	if (PQntuples(res) != 1) {
		http_reply_error(r, RC_NOTFOUND, NULL, "no such area");
		return;
	}
	auth_audit(r, r->auth, "storage.limits", db_val(res, 0, 0), NULL);
	storage_get(r);
}

static void defaults_put(struct http_req *r)
{
	json_t *body = limits_body(r, default_names, 8);
	char vals[8][24];
	const char *p[16], *set[8];

	if (!body)
		return;
	if (limits_from(r, body, default_names, 8, vals, p, set) < 0) {
		json_decref(body);
		return;
	}
	for (int i = 0; i < 8; i++)
		p[8 + i] = set[i];
	db_query("UPDATE storage_defaults SET"
	         " user_bytes_soft = CASE WHEN $9 THEN $1::bigint ELSE user_bytes_soft END,"
	         " user_bytes_hard = CASE WHEN $10 THEN $2::bigint ELSE user_bytes_hard END,"
	         " user_files_soft = CASE WHEN $11 THEN $3::bigint ELSE user_files_soft END,"
	         " user_files_hard = CASE WHEN $12 THEN $4::bigint ELSE user_files_hard END,"
	         " class_bytes_soft = CASE WHEN $13 THEN $5::bigint ELSE class_bytes_soft END,"
	         " class_bytes_hard = CASE WHEN $14 THEN $6::bigint ELSE class_bytes_hard END,"
	         " class_files_soft = CASE WHEN $15 THEN $7::bigint ELSE class_files_soft END,"
	         " class_files_hard = CASE WHEN $16 THEN $8::bigint ELSE class_files_hard END"
	         " RETURNING 'defaults'",
	         16, p, limits_saved, r);
	json_decref(body);
}

static void quota_put(struct http_req *r)
{
	json_t *body = limits_body(r, limit_names, 4);
	char vals[4][24];
	const char *p[10], *set[4];
	const char *area = http_param(r, "area");

	if (!body)
		return;
	if (limits_from(r, body, limit_names, 4, vals, p, set) < 0) {
		json_decref(body);
		return;
	}
	for (int i = 0; i < 4; i++)
		p[4 + i] = set[i];
	p[8] = area;
	p[9] = NULL;
	/* home:<username> or home:<id> or class:<id> */
	db_query("WITH t AS (SELECT 'home:' || u.id AS area, u.id AS uid, NULL::bigint AS cid"
	         "  FROM users u WHERE $9 = 'home:' || u.username OR $9 = 'home:' || u.id"
	         "  UNION ALL SELECT 'class:' || c.id, NULL, c.id FROM classes c"
	         "  WHERE $9 = 'class:' || c.id),"
	         " i AS (INSERT INTO storage_areas (area, user_id, class_id)"
	         "  SELECT area, uid, cid FROM t ON CONFLICT DO NOTHING)"
	         " UPDATE storage_areas a SET"
	         " bytes_soft = CASE WHEN $5 THEN $1::bigint ELSE a.bytes_soft END,"
	         " bytes_hard = CASE WHEN $6 THEN $2::bigint ELSE a.bytes_hard END,"
	         " files_soft = CASE WHEN $7 THEN $3::bigint ELSE a.files_soft END,"
	         " files_hard = CASE WHEN $8 THEN $4::bigint ELSE a.files_hard END"
	         " FROM t WHERE a.area = t.area RETURNING a.area",
	         9, p, limits_saved, r);
	json_decref(body);
}

/* The area row may not exist yet when the override is set: the INSERT in
 * the same statement is not visible to its UPDATE, so create rows first. */
static void quota_put_ensure_done(PGresult *res, enum rc rc, void *arg)
{
	struct http_req *r = arg;

	(void)res;
	if (rc != RC_OK) {
		api_reply_db_error(r, rc, "");
		return;
	}
	quota_put(r);
}

static void quota_put_first(struct http_req *r)
{
	const char *p[1] = { http_param(r, "area") };

	db_query("INSERT INTO storage_areas (area, user_id, class_id)"
	         " SELECT 'home:' || u.id, u.id, NULL FROM users u"
	         "  WHERE $1 = 'home:' || u.username OR $1 = 'home:' || u.id"
	         " UNION ALL SELECT 'class:' || c.id, NULL, c.id FROM classes c"
	         "  WHERE $1 = 'class:' || c.id ON CONFLICT DO NOTHING",
	         1, p, quota_put_ensure_done, r);
}

const struct route api_files_routes[] = {
	{ HTTP_GET, "/api/v1/files/{area}/{path...}", files_get, ROLES_ALL, 0, 0, NULL },
	{ HTTP_POST, "/api/v1/files/{area}/{path...}", files_post, ROLES_ALL, 0, 16384, NULL },
	{ HTTP_DELETE, "/api/v1/files/{area}/{path...}", files_delete, ROLES_ALL, 0, 0, NULL },
	{ HTTP_GET, "/api/v1/trash", trash_list, ROLES_ALL, 0, 0, NULL },
	{ HTTP_DELETE, "/api/v1/trash", trash_empty, ROLES_ALL, 0, 0, NULL },
	{ HTTP_POST, "/api/v1/trash/{id}/restore", trash_restore, ROLES_ALL, 0, 0, NULL },
	{ HTTP_DELETE, "/api/v1/trash/{id}", trash_purge_one, ROLES_ALL, 0, 0, NULL },
	{ HTTP_GET, "/api/v1/storage", storage_get, ROLE_ADMIN, 0, 0, NULL },
	{ HTTP_PUT, "/api/v1/storage/defaults", defaults_put, ROLE_ADMIN, 0, 8192, NULL },
	{ HTTP_PUT, "/api/v1/storage/quotas/{area}", quota_put_first, ROLE_ADMIN, 0, 8192, NULL },
	{ 0, NULL, NULL, 0, 0, 0, NULL },
};
