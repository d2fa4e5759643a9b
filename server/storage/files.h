/* files.h — file operations on an area, for worker threads.
 *
 * Every function here blocks (directory scans, copies, deletes, reads) and
 * runs on a worker thread; none touches the loop.  Paths are cleaned
 * relative paths (paths_clean) and are resolved beneath rootfd with
 * paths_open(), so nothing leaves the area.  Failures fill a files_result
 * with an rc and a message a user can act on.
 */
#ifndef GPUCLOUD_FILES_H
#define GPUCLOUD_FILES_H

#include <stdint.h>
#include <sys/stat.h>
#include <jansson.h>

#include "base/rc.h"
#include "storage/storage.h"

struct files_result {
	enum rc rc;
	char msg[400];
	const char *hint; /* static, may be NULL */
	json_t *out;      /* on success, the JSON answer (caller frees) */
};

/* Fills res from errno err for an operation on path; returns res->rc. */
enum rc files_fail(struct files_result *res, int err, const char *path);

/* {"name","type":"file"|"dir"|"symlink"|"other","size","mtime"}. */
json_t *files_entry_json(const char *name, const struct stat *st);

/* files_list flags */
enum {
	FILES_LIST_NO_HIDDEN = (1 << 0), /* leave out names that start with '.' */
};

/* A page of a directory, sorted by name (bytes): entries after cursor
 * (NULL = from the start), at most limit.  out = {"path","items",
 * "next_cursor","total","hidden"}: hidden counts the folder's dot-names
 * (all of them, listed or not), so a client that hides them can say how
 * many there are.  Name lists are cached per directory and reused while
 * its mtime and ctime are unchanged. */
enum rc files_list(int rootfd, const char *path, const char *cursor, int limit, int flags,
                   struct files_result *res);
enum rc files_stat(int rootfd, const char *path, struct files_result *res);
enum rc files_mkdir(int rootfd, const char *path, long long uid, long long gid,
                    struct files_result *res);
/* Rename within the area; never replaces. */
enum rc files_move(int rootfd, const char *from, const char *to, struct files_result *res);
/* Allocated bytes (st_blocks) and entries under path, hard links once. */
enum rc files_measure(int rootfd, const char *path, int64_t *bytes, int64_t *count,
                      struct files_result *res);
/* Copies from (file or tree) into the staging directory as stage_name,
 * owned by uid:gid, then renames it to to (never replaces).  Holes stay
 * holes; at most budget bytes of file data are written (< 0: no limit),
 * else it fails with RC_INSUFFICIENT_STORAGE.  *bytes: the allocated
 * bytes written. */
enum rc files_copy(int rootfd, int stagefd, const char *stage_name, const char *from,
                   const char *to, long long uid, long long gid, int64_t budget, int64_t *bytes,
                   struct files_result *res);
/* files_copy() from one area (srcroot/from) into another (dstroot/to),
 * both on the data root's filesystem (the staging directory is there
 * too).  replace: an existing to is swapped for the copy in one rename
 * (RENAME_EXCHANGE) and then removed, else it is EEXIST. */
enum rc files_copy_into(int srcroot, const char *from, int dstroot, const char *to, int replace,
                        int stagefd, const char *stage_name, long long uid, long long gid,
                        int64_t budget, int64_t *bytes, struct files_result *res);
/* mkdir -p of path (each new folder owned by uid:gid); existing ones are
 * fine.  Nothing is followed (paths_open_parent). */
enum rc files_mkdirs(int rootfd, const char *path, long long uid, long long gid,
                     struct files_result *res);
/* The newest change (st_ctim, ns since the epoch: what a user cannot set
 * back) of path and everything under it. */
enum rc files_newest(int rootfd, const char *path, int64_t *newest, struct files_result *res);
/* Moves path into trashfd as trash_name (random, made here, >= 40
 * bytes); *is_dir and *bytes describe it. */
enum rc files_trash(int rootfd, int trashfd, const char *path, char *trash_name, int *is_dir,
                    int64_t *bytes, struct files_result *res);
/* Moves trash entry name back to path (never replaces). */
enum rc files_restore(int trashfd, const char *name, int rootfd, const char *path,
                      struct files_result *res);
/* Removes dirfd/name, recursively. */
enum rc files_purge(int dirfd, const char *name, struct files_result *res);
/* {"kind":"text"|"csv"|"json"|"image"|"binary", ...} of at most max bytes. */
enum rc files_preview(int rootfd, const char *path, int64_t max, struct files_result *res);
/* Opens a regular file for reading; fills st.  Returns the fd or -1. */
int files_open_read(int rootfd, const char *path, struct stat *st, struct files_result *res);
/* Makes stagefd/stage_name durable (fsync) and owned by uid:gid, then
 * renames it to path (replacing only when overwrite).  The parent folder
 * must exist. */
enum rc files_place(int stagefd, const char *stage_name, int rootfd, const char *path,
                    int overwrite, long long uid, long long gid, struct files_result *res);
/* Random hex name of 2*nbytes characters into out. */
void files_random_name(const char *prefix, char *out, size_t outlen);

/* Streamed tar of a directory, produced a buffer at a time. */
struct files_tar;
/* Takes ownership of dirfd; base is the top folder's name in the archive. */
struct files_tar *files_tar_new(int dirfd, const char *base);
/* Appends up to cap bytes (cap >= 16 KiB) to buf; *len = bytes written.
 * Returns 1 when the archive is complete, 0 when there is more, -1 on an
 * error (the archive is then cut short). */
int files_tar_step(struct files_tar *t, unsigned char *buf, size_t cap, size_t *len);
void files_tar_free(struct files_tar *t);

/* Allocated bytes and entries under an absolute directory (quota scans):
 * st_blocks, each hard-linked inode once, not following symlinks or
 * crossing mounts.  Missing directory = 0.  Returns 0 or -1. */
int files_usage(const char *dir, int64_t *bytes, int64_t *count);

#endif
