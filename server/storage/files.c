/* files.c — what can be done to files in an area, on worker threads.
 *
 * Owns: listing (with a small cache of sorted name lists, so paging a
 * folder of 100,000 files does not re-read it per page), stat, mkdir, move,
 * copy, trash/restore/purge, previews, the tar producer for folder
 * downloads, final placement of uploads, and usage measurement.
 * Everything resolves beneath an area's directory fd (paths.c); recursive
 * walks go from fd to fd with O_NOFOLLOW, so a symlink met on the way is
 * handled as a link, never followed.
 * Does not own: HTTP (api_files.c, api_uploads.c) or quotas (quota.c).
 */
#include "storage/files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/rand.h>

#include "base/csv.h"
#include "storage/paths.h"
#include "storage/tar.h"

enum rc files_fail(struct files_result *res, int err, const char *path)
{
	const char *p = path && *path ? path : "/";

	res->hint = NULL;
	switch (err) {
	case EXDEV:
	case ELOOP:
		res->rc = RC_FORBIDDEN;
		snprintf(res->msg, sizeof(res->msg), "'%s' leads outside the area", p);
		res->hint = "symbolic links may only point inside the same area";
		break;
	case ENOENT:
		res->rc = RC_NOTFOUND;
		snprintf(res->msg, sizeof(res->msg), "no such file or folder '%s'", p);
		break;
	case EEXIST:
	case ENOTEMPTY:
		res->rc = RC_CONFLICT;
		snprintf(res->msg, sizeof(res->msg), "'%s' already exists", p);
		res->hint = "pick another name, or delete it first";
		break;
	case ENOTDIR:
		res->rc = RC_CONFLICT;
		snprintf(res->msg, sizeof(res->msg), "a part of '%s' is not a folder", p);
		break;
	case EISDIR:
		res->rc = RC_CONFLICT;
		snprintf(res->msg, sizeof(res->msg), "'%s' is a folder", p);
		break;
	case ENOSPC:
	case EDQUOT:
		res->rc = RC_INSUFFICIENT_STORAGE;
		snprintf(res->msg, sizeof(res->msg), "no space left for '%s'", p);
		break;
	case EACCES:
	case EPERM:
		res->rc = RC_FORBIDDEN;
		snprintf(res->msg, sizeof(res->msg), "'%s' may not be changed", p);
		break;
	case ENAMETOOLONG:
		res->rc = RC_INVALID;
		snprintf(res->msg, sizeof(res->msg), "the path '%s' is too long", p);
		break;
	case EINVAL:
		res->rc = RC_INVALID;
		snprintf(res->msg, sizeof(res->msg), "cannot do that with '%s'", p);
		res->hint = "a folder cannot be moved into itself";
		break;
	/* what users can provoke from a container (FIFOs, sockets, devices,
	 * busy or read-only files): their fault or state, never a 500 */
	case ENXIO:
	case ENODEV:
	case EOPNOTSUPP:
	case ETXTBSY:
	case EBUSY:
	case EAGAIN:
		res->rc = RC_CONFLICT;
		snprintf(res->msg, sizeof(res->msg),
		         "'%s' is not a regular file or folder, or is busy", p);
		break;
	case EROFS:
		res->rc = RC_FORBIDDEN;
		snprintf(res->msg, sizeof(res->msg), "'%s' is on a read-only file system", p);
		break;
	case EMLINK:
	case EFBIG:
	case EOVERFLOW:
		res->rc = RC_INSUFFICIENT_STORAGE;
		snprintf(res->msg, sizeof(res->msg), "'%s' is too large or has too many entries",
		         p);
		break;
	default:
		res->rc = RC_INTERNAL;
		snprintf(res->msg, sizeof(res->msg), "file operation on '%s' failed: %s", p,
		         strerror(err));
	}
	return res->rc;
}

static const char *type_of(mode_t m)
{
	return S_ISREG(m) ? "file" : S_ISDIR(m) ? "dir" : S_ISLNK(m) ? "symlink" : "other";
}

json_t *files_entry_json(const char *name, const struct stat *st)
{
	char when[40];
	struct tm tm;

	gmtime_r(&st->st_mtim.tv_sec, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	return json_pack("{s:s, s:s, s:I, s:s}", "name", name, "type", type_of(st->st_mode), "size",
	                 (json_int_t)(S_ISDIR(st->st_mode) ? 0 : st->st_size), "mtime", when);
}

/* ---- listing, with a cache of sorted name lists ---- */

struct names {
	dev_t dev;
	ino_t ino;
	struct timespec mtime, ctime;
	char *block; /* names, NUL-separated */
	char **v;    /* sorted */
	size_t n;
	unsigned long used; /* LRU clock */
	int refs;
};

#define CACHE_SLOTS 8
/* Most names one listing reads: a folder filled from a container (no
 * kernel quota here) must not make the daemon hold gigabytes of names
 * (times CACHE_SLOTS).  A variable so tests can lower it. */
static size_t files_list_max = 2u << 20;
static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;
static struct names *cache[CACHE_SLOTS];
static unsigned long cache_clock;

static void names_unref(struct names *nm)
{
	int gone;

	if (!nm)
		return;
	pthread_mutex_lock(&cache_mu);
	gone = --nm->refs == 0;
	pthread_mutex_unlock(&cache_mu);
	if (gone) {
		free(nm->block);
		free(nm->v);
		free(nm);
	}
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int same_ts(struct timespec a, struct timespec b)
{
	return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

/* Sorted names of the open directory dfd (whose stat is st). */
static struct names *names_get(int dfd, const struct stat *st)
{
	struct names *nm = NULL;
	size_t cap = 1 << 16, len = 0, n = 0, vcap = 1024;
	DIR *d;
	struct dirent *e;
	int slot = 0;

	pthread_mutex_lock(&cache_mu);
	for (int i = 0; i < CACHE_SLOTS; i++) {
		struct names *c = cache[i];
		if (c && c->dev == st->st_dev && c->ino == st->st_ino &&
		    same_ts(c->mtime, st->st_mtim) && same_ts(c->ctime, st->st_ctim)) {
			c->refs++;
			c->used = ++cache_clock;
			pthread_mutex_unlock(&cache_mu);
			return c;
		}
	}
	pthread_mutex_unlock(&cache_mu);

	nm = calloc(1, sizeof(*nm));
	if (!nm)
		return NULL;
	nm->block = malloc(cap);
	{
		int dup = fcntl(dfd, F_DUPFD_CLOEXEC, 0);
		d = dup >= 0 ? fdopendir(dup) : NULL;
		if (dup >= 0 && !d)
			close(dup); /* fdopendir failed: the dup is still ours */
	}
	if (!nm->block || !d) {
		if (d)
			closedir(d);
		free(nm->block);
		free(nm);
		return NULL;
	}
	rewinddir(d);
	while ((e = readdir(d))) {
		size_t l = strlen(e->d_name);
		if ((l == 1 && e->d_name[0] == '.') || (l == 2 && !strcmp(e->d_name, "..")))
			continue;
		if (n >= files_list_max) {
			errno = EFBIG;
			goto fail;
		}
		if (len + l + 1 > cap) {
			char *nb;
			while (len + l + 1 > cap)
				cap *= 2;
			nb = realloc(nm->block, cap);
			if (!nb)
				goto fail;
			nm->block = nb;
		}
		memcpy(nm->block + len, e->d_name, l + 1);
		len += l + 1;
		n++;
	}
	closedir(d);
	d = NULL;
	if (n > vcap)
		vcap = n;
	nm->v = malloc(vcap * sizeof(char *));
	if (!nm->v)
		goto fail;
	for (size_t off = 0, i = 0; i < n; i++) {
		nm->v[i] = nm->block + off;
		off += strlen(nm->block + off) + 1;
	}
	qsort(nm->v, n, sizeof(char *), cmp_names);
	nm->n = n;
	nm->dev = st->st_dev;
	nm->ino = st->st_ino;
	nm->mtime = st->st_mtim;
	nm->ctime = st->st_ctim;
	nm->refs = 2; /* the cache's and the caller's */
	pthread_mutex_lock(&cache_mu);
	nm->used = ++cache_clock;
	for (int i = 0; i < CACHE_SLOTS; i++) {
		if (!cache[i]) {
			slot = i;
			break;
		}
		if (cache[i]->used < cache[slot]->used)
			slot = i;
	}
	{
		struct names *old = cache[slot];
		cache[slot] = nm;
		pthread_mutex_unlock(&cache_mu);
		names_unref(old);
	}
	return nm;
fail:
	if (d)
		closedir(d);
	free(nm->block);
	free(nm->v);
	free(nm);
	return NULL;
}

enum rc files_list(int rootfd, const char *path, const char *cursor, int limit, int flags,
                   struct files_result *res)
{
	int dfd = paths_open(rootfd, path, O_RDONLY | O_DIRECTORY, 0);
	struct stat st;
	struct names *nm;
	json_t *items;
	size_t lo, hi, i, last = 0, hidden = 0;
	int got = 0;

	if (dfd < 0)
		return files_fail(res, errno, path);
	errno = 0;
	if (fstat(dfd, &st) < 0 || !(nm = names_get(dfd, &st))) {
		int e = errno ? errno : ENOMEM;
		close(dfd);
		if (e == EFBIG) {
			res->rc = RC_CONFLICT;
			res->hint = "list or split it from inside an instance";
			snprintf(res->msg, sizeof(res->msg),
			         "the folder '%s' holds more than %zu entries", path,
			         files_list_max);
			return res->rc;
		}
		return files_fail(res, e, path);
	}
	/* first name > cursor */
	lo = 0;
	hi = nm->n;
	if (cursor && *cursor) {
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			if (strcmp(nm->v[mid], cursor) <= 0)
				lo = mid + 1;
			else
				hi = mid;
		}
	}
	/* '.' sorts before letters and digits: the dot-names are a prefix
	 * of most folders, but not of names such as "-x" or "+y" */
	for (i = 0; i < nm->n; i++)
		hidden += nm->v[i][0] == '.';
	items = json_array();
	for (i = lo; i < nm->n && got < limit; i++) {
		struct stat es;
		if ((flags & FILES_LIST_NO_HIDDEN) && nm->v[i][0] == '.')
			continue;
		last = i;
		if (fstatat(dfd, nm->v[i], &es, AT_SYMLINK_NOFOLLOW) < 0)
			continue; /* removed since the list was read */
		json_array_append_new(items, files_entry_json(nm->v[i], &es));
		got++;
	}
	/* more to come only when a later name would be listed */
	{
		size_t k = i;
		while (k < nm->n && (flags & FILES_LIST_NO_HIDDEN) && nm->v[k][0] == '.')
			k++;
		res->out = json_pack("{s:s, s:o, s:o, s:I, s:I}", "path", path, "items", items,
		                     "next_cursor",
		                     k < nm->n && got ? json_string(nm->v[last]) : json_null(),
		                     "total", (json_int_t)nm->n, "hidden", (json_int_t)hidden);
	}
	names_unref(nm);
	close(dfd);
	res->rc = RC_OK;
	return RC_OK;
}

enum rc files_stat(int rootfd, const char *path, struct files_result *res)
{
	char leaf[PATHS_NAME_MAX + 1];
	struct stat st;
	int pfd;

	if (!*path) {
		int fd = paths_open(rootfd, "", O_RDONLY | O_DIRECTORY, 0);
		if (fd < 0)
			return files_fail(res, errno, path);
		if (fstat(fd, &st) < 0) {
			int e = errno;
			close(fd);
			return files_fail(res, e, path);
		}
		close(fd);
		res->out = files_entry_json("", &st);
		return res->rc = RC_OK;
	}
	pfd = paths_open_parent(rootfd, path, leaf, sizeof(leaf));
	if (pfd < 0)
		return files_fail(res, errno, path);
	if (fstatat(pfd, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		int e = errno;
		close(pfd);
		return files_fail(res, e, path);
	}
	close(pfd);
	res->out = files_entry_json(leaf, &st);
	json_object_set_new(res->out, "path", json_string(path));
	return res->rc = RC_OK;
}

enum rc files_mkdir(int rootfd, const char *path, long long uid, long long gid,
                    struct files_result *res)
{
	char leaf[PATHS_NAME_MAX + 1];
	struct stat st;
	int pfd;

	if (!*path) {
		res->rc = RC_CONFLICT;
		snprintf(res->msg, sizeof(res->msg), "the area's folder already exists");
		return res->rc;
	}
	pfd = paths_open_parent(rootfd, path, leaf, sizeof(leaf));
	if (pfd < 0)
		return files_fail(res, errno, path);
	if (mkdirat(pfd, leaf, 0755) < 0 ||
	    fchownat(pfd, leaf, (uid_t)uid, (gid_t)gid, AT_SYMLINK_NOFOLLOW) < 0 ||
	    fstatat(pfd, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		int e = errno;
		close(pfd);
		return files_fail(res, e, path);
	}
	close(pfd);
	res->out = files_entry_json(leaf, &st);
	json_object_set_new(res->out, "path", json_string(path));
	return res->rc = RC_OK;
}

enum rc files_move(int rootfd, const char *from, const char *to, struct files_result *res)
{
	char la[PATHS_NAME_MAX + 1], lb[PATHS_NAME_MAX + 1];
	struct stat st;
	int a, b;

	if (!*from || !*to) {
		res->rc = RC_INVALID;
		snprintf(res->msg, sizeof(res->msg), "the area's own folder cannot be moved");
		return res->rc;
	}
	a = paths_open_parent(rootfd, from, la, sizeof(la));
	if (a < 0)
		return files_fail(res, errno, from);
	b = paths_open_parent(rootfd, to, lb, sizeof(lb));
	if (b < 0) {
		int e = errno;
		close(a);
		return files_fail(res, e, to);
	}
	if (renameat2(a, la, b, lb, RENAME_NOREPLACE) < 0) {
		int e = errno;
		close(a);
		close(b);
		return files_fail(res, e, e == EEXIST ? to : from);
	}
	if (fstatat(b, lb, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		res->out = files_entry_json(lb, &st);
		json_object_set_new(res->out, "path", json_string(to));
	}
	close(a);
	close(b);
	return res->rc = RC_OK;
}

/* ---- recursive walks, fd to fd ---- */

struct inoset {
	struct {
		dev_t dev;
		ino_t ino;
	} * v;
	size_t n, cap;
};

/* 1 when (dev, ino) was seen before; records it otherwise.  Only inodes
 * with more than one link go in, so the set stays small. */
static int inoset_seen(struct inoset *s, dev_t dev, ino_t ino)
{
	size_t h, mask;

	if (s->n * 2 >= s->cap) {
		size_t ncap = s->cap ? s->cap * 2 : 1024;
		struct inoset ns = { calloc(ncap, sizeof(*s->v)), 0, ncap };
		if (!ns.v)
			return 0;
		for (size_t i = 0; i < s->cap; i++)
			if (s->v[i].ino)
				inoset_seen(&ns, s->v[i].dev, s->v[i].ino);
		free(s->v);
		*s = ns;
	}
	mask = s->cap - 1;
	h = ((size_t)ino * 0x9e3779b97f4a7c15ULL ^ (size_t)dev) & mask;
	while (s->v[h].ino) {
		if (s->v[h].ino == ino && s->v[h].dev == dev)
			return 1;
		h = (h + 1) & mask;
	}
	s->v[h].dev = dev;
	s->v[h].ino = ino;
	s->n++;
	return 0;
}

/* Adds the usage of everything inside directory dfd (consumed). */
static int walk_usage(int dfd, dev_t dev, struct inoset *seen, int64_t *bytes, int64_t *count,
                      int depth)
{
	DIR *d = fdopendir(dfd);
	struct dirent *e;

	if (!d) {
		close(dfd);
		return -1;
	}
	while ((e = readdir(d))) {
		struct stat st;
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (st.st_nlink > 1 && !S_ISDIR(st.st_mode) &&
		    inoset_seen(seen, st.st_dev, st.st_ino))
			continue;
		*bytes += (int64_t)st.st_blocks * 512;
		*count += 1;
		if (S_ISDIR(st.st_mode) && st.st_dev == dev && depth < 256) {
			int c = openat(dirfd(d), e->d_name,
			               O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (c >= 0)
				walk_usage(c, dev, seen, bytes, count, depth + 1);
		}
	}
	closedir(d);
	return 0;
}

int files_usage(const char *dir, int64_t *bytes, int64_t *count)
{
	struct inoset seen = { NULL, 0, 0 };
	struct stat st;
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		return errno == ENOENT ? 0 : -1;
	if (fstat(fd, &st) < 0) {
		close(fd);
		return -1;
	}
	walk_usage(fd, st.st_dev, &seen, bytes, count, 0);
	free(seen.v);
	return 0;
}

enum rc files_measure(int rootfd, const char *path, int64_t *bytes, int64_t *count,
                      struct files_result *res)
{
	struct inoset seen = { NULL, 0, 0 };
	struct stat st;
	int fd = paths_open(rootfd, path, O_RDONLY | O_NOFOLLOW, 0);

	*bytes = *count = 0;
	if (fd < 0)
		return files_fail(res, errno, path);
	if (fstat(fd, &st) < 0) {
		int e = errno;
		close(fd);
		return files_fail(res, e, path);
	}
	*bytes = (int64_t)st.st_blocks * 512;
	*count = 1;
	if (S_ISDIR(st.st_mode))
		walk_usage(fd, st.st_dev, &seen, bytes, count, 0);
	else
		close(fd);
	free(seen.v);
	return res->rc = RC_OK;
}

/* What a copy may write: budget bytes of file data in all (the bytes
 * reserved for it; < 0 = no limit), so a source that grows while it is
 * copied cannot push the area past its reservation. */
struct copy_ctx {
	long long uid, gid;
	int64_t *bytes;  /* allocated bytes of what was made */
	int64_t written; /* file data written */
	int64_t budget;
};

/* Copies the data regions of in (size bytes) to out and leaves the holes
 * as holes: a sparse file stays sparse, instead of gpucloudd writing
 * terabytes of zeros that its reservation (st_blocks) never covered. */
static int copy_fd(int in, int out, int64_t size, struct copy_ctx *cx)
{
	static __thread char buf[1 << 17];
	off_t pos = 0;

	while (pos < size) {
		off_t data = lseek(in, pos, SEEK_DATA), hole;
		if (data < 0) {
			if (errno == ENXIO)
				break; /* only a hole is left */
			return -1;
		}
		if (data >= size)
			break;
		hole = lseek(in, data, SEEK_HOLE);
		if (hole < 0)
			return -1;
		if (hole > size)
			hole = size; /* grew meanwhile: the size read first is copied */
		pos = data;
		while (pos < hole) {
			size_t want =
			        (size_t)(hole - pos < (off_t)sizeof(buf) ? hole - pos
			                                                 : (off_t)sizeof(buf));
			off_t oin = pos, oout = pos;
			ssize_t n;

			if (cx->budget >= 0 && cx->written + (int64_t)want > cx->budget) {
				errno = EDQUOT;
				return -1;
			}
			n = copy_file_range(in, &oin, out, &oout, want, 0);
			if (n < 0) {
				/* not supported here: plain read/write */
				n = pread(in, buf, want, pos);
				if (n > 0 && pwrite(out, buf, (size_t)n, pos) != n)
					return -1;
			}
			if (n < 0)
				return -1;
			if (n == 0)
				break; /* shrank meanwhile */
			pos += n;
			cx->written += n;
		}
	}
	if (ftruncate(out, size) < 0)
		return -1;
	{
		struct stat st;
		if (fstat(out, &st) == 0)
			*cx->bytes += (int64_t)st.st_blocks * 512;
	}
	return 0;
}

/* Copies sdir/sname (not followed) to ddir/dname. */
static int copy_tree(int sdir, const char *sname, int ddir, const char *dname, struct copy_ctx *cx,
                     int depth)
{
	struct stat st;
	int rc = 0;

	if (fstatat(sdir, sname, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -1;
	if (S_ISREG(st.st_mode)) {
		/* O_NONBLOCK and the fstat check: swapped for a FIFO since
		 * fstatat, it must neither block the worker nor be read */
		int in = openat(sdir, sname, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC),
		    out = -1;
		struct stat is = { 0 };

		if (in >= 0 && (fstat(in, &is) < 0 || !S_ISREG(is.st_mode))) {
			close(in);
			return 0; /* not a regular file any more: skipped like one */
		}
		if (in >= 0)
			out = openat(ddir, dname, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (in < 0 || out < 0 || copy_fd(in, out, (int64_t)is.st_size, cx) < 0 ||
		    fchown(out, (uid_t)cx->uid, (gid_t)cx->gid) < 0)
			rc = -1;
		if (in >= 0)
			close(in);
		if (out >= 0) {
			int e = errno;
			close(out);
			errno = e;
		}
		return rc;
	}
	if (S_ISLNK(st.st_mode)) {
		char target[PATHS_MAX + 1];
		ssize_t n = readlinkat(sdir, sname, target, sizeof(target) - 1);
		if (n < 0)
			return -1;
		target[n] = '\0';
		if (symlinkat(target, ddir, dname) < 0)
			return -1;
		return fchownat(ddir, dname, (uid_t)cx->uid, (gid_t)cx->gid, AT_SYMLINK_NOFOLLOW);
	}
	if (S_ISDIR(st.st_mode) && depth < 256) {
		int s = openat(sdir, sname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), d;
		DIR *dir;
		struct dirent *e;

		if (s < 0)
			return -1;
		if (mkdirat(ddir, dname, 0755) < 0 ||
		    fchownat(ddir, dname, (uid_t)cx->uid, (gid_t)cx->gid, AT_SYMLINK_NOFOLLOW) <
		            0 ||
		    (d = openat(ddir, dname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) <
		            0) {
			close(s);
			return -1;
		}
		*cx->bytes += 4096;
		dir = fdopendir(s);
		if (!dir) {
			close(s);
			close(d);
			return -1;
		}
		while (rc == 0 && (e = readdir(dir))) {
			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
				continue;
			rc = copy_tree(dirfd(dir), e->d_name, d, e->d_name, cx, depth + 1);
		}
		{
			int err = errno;
			closedir(dir);
			close(d);
			errno = err;
		}
		return rc;
	}
	return 0; /* devices, fifos, sockets: not copied */
}

enum rc files_purge(int dirfd, const char *name, struct files_result *res);

enum rc files_copy(int rootfd, int stagefd, const char *stage_name, const char *from,
                   const char *to, long long uid, long long gid, int64_t budget, int64_t *bytes,
                   struct files_result *res)
{
	return files_copy_into(rootfd, from, rootfd, to, 0, stagefd, stage_name, uid, gid, budget,
	                       bytes, res);
}

enum rc files_copy_into(int srcroot, const char *from, int dstroot, const char *to, int replace,
                        int stagefd, const char *stage_name, long long uid, long long gid,
                        int64_t budget, int64_t *bytes, struct files_result *res)
{
	char la[PATHS_NAME_MAX + 1], lb[PATHS_NAME_MAX + 1];
	struct copy_ctx cx = { uid, gid, bytes, 0, budget };
	int a, b, exists;

	*bytes = 0;
	if (!*from || !*to) {
		res->rc = RC_INVALID;
		snprintf(res->msg, sizeof(res->msg), "the area's own folder cannot be copied");
		return res->rc;
	}
	a = paths_open_parent(srcroot, from, la, sizeof(la));
	if (a < 0)
		return files_fail(res, errno, from);
	b = paths_open_parent(dstroot, to, lb, sizeof(lb));
	if (b < 0) {
		int e = errno;
		close(a);
		return files_fail(res, e, to);
	}
	exists = faccessat(b, lb, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
	if (exists && !replace) {
		close(a);
		close(b);
		return files_fail(res, EEXIST, to);
	}
	errno = 0;
	if (copy_tree(a, la, stagefd, stage_name, &cx, 0) < 0) {
		int e = errno ? errno : EIO;
		struct files_result tmp = { 0 };
		files_purge(stagefd, stage_name, &tmp);
		close(a);
		close(b);
		return files_fail(res, e, from);
	}
	/* replacing: the new copy and the old swap in one step (no moment
	 * without either), and the old one, now staged, goes */
	if (renameat2(stagefd, stage_name, b, lb, exists ? RENAME_EXCHANGE : RENAME_NOREPLACE) <
	    0) {
		int e = errno;
		struct files_result tmp = { 0 };
		files_purge(stagefd, stage_name, &tmp);
		close(a);
		close(b);
		return files_fail(res, e, to);
	}
	if (exists) {
		struct files_result tmp = { 0 };
		files_purge(stagefd, stage_name, &tmp);
	}
	{
		struct stat st;
		if (fstatat(b, lb, &st, AT_SYMLINK_NOFOLLOW) == 0) {
			res->out = files_entry_json(lb, &st);
			json_object_set_new(res->out, "path", json_string(to));
		}
	}
	close(a);
	close(b);
	return res->rc = RC_OK;
}

enum rc files_mkdirs(int rootfd, const char *path, long long uid, long long gid,
                     struct files_result *res)
{
	char part[PATHS_MAX + 1];
	size_t n = strlen(path);

	if (n >= sizeof(part))
		return files_fail(res, ENAMETOOLONG, path);
	for (size_t i = 1; i <= n; i++) {
		char leaf[PATHS_NAME_MAX + 1];
		int pfd;

		if (path[i] != '/' && path[i] != '\0')
			continue;
		memcpy(part, path, i);
		part[i] = '\0';
		pfd = paths_open_parent(rootfd, part, leaf, sizeof(leaf));
		if (pfd < 0)
			return files_fail(res, errno, part);
		if (mkdirat(pfd, leaf, 0755) == 0) {
			if (fchownat(pfd, leaf, (uid_t)uid, (gid_t)gid, AT_SYMLINK_NOFOLLOW) < 0) {
				int e = errno;
				close(pfd);
				return files_fail(res, e, part);
			}
		} else if (errno != EEXIST) {
			int e = errno;
			close(pfd);
			return files_fail(res, e, part);
		}
		close(pfd);
	}
	return res->rc = RC_OK;
}

/* The newest st_ctim (ns) inside directory dfd (consumed). */
static void walk_newest(int dfd, int64_t *newest, int depth)
{
	DIR *d = fdopendir(dfd);
	struct dirent *e;

	if (!d) {
		close(dfd);
		return;
	}
	while ((e = readdir(d))) {
		struct stat st;
		int64_t t;
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		t = (int64_t)st.st_ctim.tv_sec * 1000000000LL + st.st_ctim.tv_nsec;
		if (t > *newest)
			*newest = t;
		if (S_ISDIR(st.st_mode) && depth < 256) {
			int c = openat(dirfd(d), e->d_name,
			               O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (c >= 0)
				walk_newest(c, newest, depth + 1);
		}
	}
	closedir(d);
}

enum rc files_newest(int rootfd, const char *path, int64_t *newest, struct files_result *res)
{
	struct stat st;
	int fd = paths_open(rootfd, path, O_RDONLY | O_NOFOLLOW, 0);

	*newest = 0;
	if (fd < 0)
		return files_fail(res, errno, path);
	if (fstat(fd, &st) < 0) {
		int e = errno;
		close(fd);
		return files_fail(res, e, path);
	}
	*newest = (int64_t)st.st_ctim.tv_sec * 1000000000LL + st.st_ctim.tv_nsec;
	if (S_ISDIR(st.st_mode))
		walk_newest(fd, newest, 0);
	else
		close(fd);
	return res->rc = RC_OK;
}

void files_random_name(const char *prefix, char *out, size_t outlen)
{
	unsigned char r[16];
	size_t n;

	RAND_bytes(r, sizeof(r));
	n = (size_t)snprintf(out, outlen, "%s", prefix);
	for (size_t i = 0; i < sizeof(r) && n + 2 < outlen; i++)
		n += (size_t)snprintf(out + n, outlen - n, "%02x", r[i]);
}

enum rc files_trash(int rootfd, int trashfd, const char *path, char *trash_name, int *is_dir,
                    int64_t *bytes, struct files_result *res)
{
	char leaf[PATHS_NAME_MAX + 1];
	struct stat st;
	int pfd;

	*bytes = 0;
	if (!*path) {
		res->rc = RC_INVALID;
		snprintf(res->msg, sizeof(res->msg), "the area's own folder cannot be deleted");
		return res->rc;
	}
	pfd = paths_open_parent(rootfd, path, leaf, sizeof(leaf));
	if (pfd < 0)
		return files_fail(res, errno, path);
	if (fstatat(pfd, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		int e = errno;
		close(pfd);
		return files_fail(res, e, path);
	}
	*is_dir = S_ISDIR(st.st_mode);
	*bytes = S_ISDIR(st.st_mode) ? 0 : (int64_t)st.st_size;
	files_random_name("t", trash_name, 48);
	if (renameat2(pfd, leaf, trashfd, trash_name, RENAME_NOREPLACE) < 0) {
		int e = errno;
		close(pfd);
		return files_fail(res, e, path);
	}
	close(pfd);
	return res->rc = RC_OK;
}

enum rc files_restore(int trashfd, const char *name, int rootfd, const char *path,
                      struct files_result *res)
{
	char leaf[PATHS_NAME_MAX + 1];
	int pfd = paths_open_parent(rootfd, path, leaf, sizeof(leaf));

	if (pfd < 0) {
		files_fail(res, errno, path);
		if (res->rc == RC_NOTFOUND) {
			res->rc = RC_CONFLICT;
			snprintf(res->msg, sizeof(res->msg), "the folder '%s' was in is gone",
			         path);
			res->hint = "make the folder again, then restore";
		}
		return res->rc;
	}
	if (renameat2(trashfd, name, pfd, leaf, RENAME_NOREPLACE) < 0) {
		int e = errno;
		close(pfd);
		return files_fail(res, e, path);
	}
	close(pfd);
	return res->rc = RC_OK;
}

static int purge_at(int dfd, const char *name, int depth)
{
	struct stat st;

	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -1;
	if (S_ISDIR(st.st_mode) && depth < 512) {
		int c = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		DIR *d = c >= 0 ? fdopendir(c) : NULL;
		struct dirent *e;

		if (!d) {
			if (c >= 0)
				close(c);
			return -1;
		}
		while ((e = readdir(d)))
			if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
				purge_at(dirfd(d), e->d_name, depth + 1);
		closedir(d);
		return unlinkat(dfd, name, AT_REMOVEDIR);
	}
	return unlinkat(dfd, name, 0);
}

enum rc files_purge(int dirfd, const char *name, struct files_result *res)
{
	if (purge_at(dirfd, name, 0) < 0)
		return files_fail(res, errno, name);
	return res->rc = RC_OK;
}

int files_open_read(int rootfd, const char *path, struct stat *st, struct files_result *res)
{
	int fd = paths_open(rootfd, path, O_RDONLY, 0);

	if (fd < 0) {
		files_fail(res, errno, path);
		return -1;
	}
	if (fstat(fd, st) < 0) {
		files_fail(res, errno, path);
		close(fd);
		return -1;
	}
	res->rc = RC_OK;
	return fd;
}

enum rc files_place(int stagefd, const char *stage_name, int rootfd, const char *path,
                    int overwrite, long long uid, long long gid, struct files_result *res)
{
	char leaf[PATHS_NAME_MAX + 1];
	struct stat st;
	int pfd, fd;

	fd = openat(stagefd, stage_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return files_fail(res, errno, path);
	if (fsync(fd) < 0 || fchown(fd, (uid_t)uid, (gid_t)gid) < 0 || fchmod(fd, 0644) < 0) {
		int e = errno;
		close(fd);
		return files_fail(res, e, path);
	}
	close(fd);
	pfd = paths_open_parent(rootfd, path, leaf, sizeof(leaf));
	if (pfd < 0)
		return files_fail(res, errno, path);
	if (fstatat(pfd, leaf, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
		close(pfd);
		return files_fail(res, EISDIR, path);
	}
	if (renameat2(stagefd, stage_name, pfd, leaf, overwrite ? 0 : RENAME_NOREPLACE) < 0) {
		int e = errno;
		close(pfd);
		return files_fail(res, e, path);
	}
	if (fstatat(pfd, leaf, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		res->out = files_entry_json(leaf, &st);
		json_object_set_new(res->out, "path", json_string(path));
	}
	fsync(pfd);
	close(pfd);
	return res->rc = RC_OK;
}

/* ---- previews ---- */

static const char *ext_of(const char *path)
{
	const char *slash = strrchr(path, '/'), *dot = strrchr(path, '.');

	return dot && (!slash || dot > slash) ? dot + 1 : "";
}

static const char *image_mime(const char *ext)
{
	if (!strcasecmp(ext, "png"))
		return "image/png";
	if (!strcasecmp(ext, "jpg") || !strcasecmp(ext, "jpeg"))
		return "image/jpeg";
	if (!strcasecmp(ext, "gif"))
		return "image/gif";
	if (!strcasecmp(ext, "webp"))
		return "image/webp";
	return NULL;
}

/* Bytes of buf that are whole, valid UTF-8 text (a sequence cut by the
 * size cap at the end is dropped); -1 when it is not text. */
static long text_len(const char *buf, size_t n, int cut)
{
	size_t i = 0;

	while (i < n) {
		unsigned char c = (unsigned char)buf[i];
		size_t k;
		if (c == 0)
			return -1;
		k = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
		if (!k)
			return -1;
		if (i + k > n)
			return cut ? (long)i : -1;
		for (size_t j = 1; j < k; j++)
			if (((unsigned char)buf[i + j] & 0xc0) != 0x80)
				return -1;
		i += k;
	}
	return (long)n;
}

static json_t *csv_rows(const char *buf, size_t n, int eof)
{
	json_t *rows = json_array();
	struct csv_field f[64];
	size_t off = 0, nf;
	char cell[4096];

	while (off < n && json_array_size(rows) < 200) {
		ssize_t rc = csv_parse_record(buf + off, n - off, eof, f, 64, &nf);
		json_t *row;
		if (rc <= 0)
			break;
		row = json_array();
		for (size_t k = 0; k < nf; k++) {
			if (csv_field_copy(&f[k], cell, sizeof(cell)) < 0)
				cell[0] = '\0';
			json_array_append_new(
			        row, json_string(text_len(cell, strlen(cell), 0) >= 0 ? cell : ""));
		}
		json_array_append_new(rows, row);
		off += (size_t)rc;
	}
	return rows;
}

enum rc files_preview(int rootfd, const char *path, int64_t max, struct files_result *res)
{
	struct stat st;
	int fd = files_open_read(rootfd, path, &st, res);
	const char *ext = ext_of(path), *mime;
	char *buf;
	ssize_t n = 0, got;
	int truncated;
	long tl;

	if (fd < 0)
		return res->rc;
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		if (S_ISDIR(st.st_mode))
			return files_fail(res, EISDIR, path);
		res->rc = RC_CONFLICT;
		res->hint = NULL;
		snprintf(res->msg, sizeof(res->msg), "'%s' is not a regular file", path);
		return res->rc;
	}
	if ((mime = image_mime(ext))) {
		close(fd);
		res->out = json_pack("{s:s, s:s, s:I}", "kind", "image", "mime", mime, "size",
		                     (json_int_t)st.st_size);
		return res->rc = RC_OK;
	}
	buf = malloc((size_t)max + 1);
	if (!buf) {
		close(fd);
		return files_fail(res, ENOMEM, path);
	}
	while (n < max && (got = read(fd, buf + n, (size_t)(max - n))) > 0)
		n += got;
	close(fd);
	truncated = st.st_size > n;
	tl = text_len(buf, (size_t)n, truncated);
	if (tl < 0) {
		res->out =
		        json_pack("{s:s, s:I}", "kind", "binary", "size", (json_int_t)st.st_size);
	} else if (!strcasecmp(ext, "csv")) {
		res->out = json_pack("{s:s, s:o, s:b, s:I}", "kind", "csv", "rows",
		                     csv_rows(buf, (size_t)tl, !truncated), "truncated", truncated,
		                     "size", (json_int_t)st.st_size);
	} else {
		json_t *v = NULL;
		if (!strcasecmp(ext, "json") && !truncated)
			v = json_loadb(buf, (size_t)tl, JSON_DECODE_ANY, NULL);
		if (v)
			res->out = json_pack("{s:s, s:o, s:I}", "kind", "json", "value", v, "size",
			                     (json_int_t)st.st_size);
		else
			res->out = json_pack("{s:s, s:s%, s:b, s:I}", "kind", "text", "text", buf,
			                     (size_t)tl, "truncated", truncated, "size",
			                     (json_int_t)st.st_size);
	}
	free(buf);
	return res->rc = RC_OK;
}

/* ---- tar ---- */

#define TAR_DEPTH 128

struct files_tar {
	struct {
		DIR *d;
		size_t plen; /* length of prefix for this level */
	} st[TAR_DEPTH];
	int depth;
	char prefix[PATHS_MAX * 2 + 2];
	int fd;       /* file being copied */
	int64_t left; /* its bytes still to send */
	int64_t pad;  /* zero bytes after it */
	int shrank;   /* it ended early: the rest of it is sent as zeros */
	int finished; /* trailer written */
	int started;  /* the top folder's own entry written */
};

struct files_tar *files_tar_new(int dirfd, const char *base)
{
	struct files_tar *t = calloc(1, sizeof(*t));

	if (!t) {
		close(dirfd);
		return NULL;
	}
	t->st[0].d = fdopendir(dirfd);
	if (!t->st[0].d) {
		close(dirfd);
		free(t);
		return NULL;
	}
	snprintf(t->prefix, sizeof(t->prefix), "%s/", base && *base ? base : "files");
	t->st[0].plen = strlen(t->prefix);
	t->depth = 1;
	t->fd = -1;
	return t;
}

int files_tar_step(struct files_tar *t, unsigned char *buf, size_t cap, size_t *len)
{
	size_t n = 0;

	*len = 0;
	if (t->finished)
		return 1;
	if (!t->started) {
		t->started = 1;
		n += tar_put_header(buf, t->prefix, '5', 0, 0755, time(NULL), NULL);
	}
	while (n + 4096 <= cap) {
		if (t->fd >= 0) {
			size_t want = cap - n, p;
			ssize_t got = 0;
			if ((int64_t)want > t->left)
				want = (size_t)t->left;
			if (want && !t->shrank) {
				got = read(t->fd, buf + n, want);
				if (got < 0)
					return -1;
			}
			if ((size_t)got < want) {
				/* a short read of a regular file is its end: it
				 * shrank while being sent. The header fixed its size,
				 * so the rest of the member is zeros, and nothing is
				 * read again (a file growing back would otherwise
				 * leave the output unaligned) */
				t->shrank = 1;
				memset(buf + n + got, 0, want - (size_t)got);
				got = (ssize_t)want;
			}
			n += (size_t)got;
			t->left -= got;
			if (t->left == 0) {
				/* the padding may not fit: what does not goes out
				 * with the next step */
				p = (int64_t)(cap - n) < t->pad ? cap - n : (size_t)t->pad;
				memset(buf + n, 0, p);
				n += p;
				t->pad -= (int64_t)p;
				if (t->pad == 0) {
					close(t->fd);
					t->fd = -1;
					t->shrank = 0;
				}
			}
			continue;
		}
		if (t->depth == 0) {
			memset(buf + n, 0, 1024);
			n += 1024;
			t->finished = 1;
			*len = n;
			return 1;
		}
		{
			int lv = t->depth - 1;
			DIR *d = t->st[lv].d;
			struct dirent *e = readdir(d);
			struct stat st;
			size_t plen = t->st[lv].plen;

			if (!e) {
				closedir(d);
				t->st[lv].d = NULL;
				t->depth--;
				continue;
			}
			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
				continue;
			if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
				continue;
			t->prefix[plen] = '\0';
			if (plen + strlen(e->d_name) + 2 >= sizeof(t->prefix) - 1)
				continue;
			memcpy(t->prefix + plen, e->d_name, strlen(e->d_name) + 1);
			if (S_ISDIR(st.st_mode)) {
				int c;
				size_t h;
				{
					size_t pl = strlen(t->prefix); /* room checked above */
					t->prefix[pl] = '/';
					t->prefix[pl + 1] = '\0';
				}
				h = tar_put_header(buf + n, t->prefix, '5', 0, st.st_mode,
				                   st.st_mtime, NULL);
				if (!h)
					continue; /* name too long to record; so are its children's */
				n += h;
				if (t->depth < TAR_DEPTH &&
				    (c = openat(dirfd(d), e->d_name,
				                O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) >=
				            0) {
					t->st[t->depth].d = fdopendir(c);
					if (t->st[t->depth].d) {
						t->st[t->depth].plen = strlen(t->prefix);
						t->depth++;
					} else {
						close(c);
					}
				}
			} else if (S_ISREG(st.st_mode)) {
				/* O_NONBLOCK and a second fstat: a FIFO swapped in
				 * since fstatat must not block the worker */
				int fd = openat(dirfd(d), e->d_name,
				                O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
				if (fd < 0)
					continue;
				if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
					close(fd);
					continue;
				}
				{
					/* no header (a name too long to record): no
					 * bytes either, or the content would be read as
					 * headers the user forged */
					size_t h = tar_put_header(buf + n, t->prefix, '0',
					                          (uint64_t)st.st_size, st.st_mode,
					                          st.st_mtime, NULL);
					if (!h) {
						close(fd);
						continue;
					}
					n += h;
				}
				t->fd = fd;
				t->left = st.st_size;
				t->pad = (512 - st.st_size % 512) % 512;
				if (t->left == 0) {
					close(fd);
					t->fd = -1;
				}
			} else if (S_ISLNK(st.st_mode)) {
				char target[101];
				ssize_t l = readlinkat(dirfd(d), e->d_name, target, sizeof(target));
				if (l <= 0 || l >= 100)
					continue;
				target[l] = '\0';
				n += tar_put_header(buf + n, t->prefix, '2', 0, 0777, st.st_mtime,
				                    target);
			}
		}
	}
	*len = n;
	return 0;
}

void files_tar_free(struct files_tar *t)
{
	if (!t)
		return;
	for (int i = 0; i < t->depth; i++)
		if (t->st[i].d)
			closedir(t->st[i].d);
	if (t->fd >= 0)
		close(t->fd);
	free(t);
}
