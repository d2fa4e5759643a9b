/* paths.h — turning a user-supplied path into a file descriptor that is
 * provably beneath an area root.
 *
 * Two halves: paths_clean() is pure (bytes in, a canonical relative path
 * out, or a refusal) and small enough to fuzz alone; paths_open*() hand the
 * cleaned path to openat2() with RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS |
 * RESOLVE_NO_XDEV, so the kernel — not a check done earlier — decides that
 * no symlink, however planted or swapped, leads outside the root.
 */
#ifndef GPUCLOUD_PATHS_H
#define GPUCLOUD_PATHS_H

#include <stddef.h>
#include <sys/types.h>

#define PATHS_MAX      4096 /* cleaned path, bytes */
#define PATHS_NAME_MAX 255  /* one component, bytes */

/* Percent-decodes raw[0..len) exactly once and checks the result: valid
 * shortest-form UTF-8, no NUL or control characters, no backslash, no
 * absolute path, no "." or ".." component, no "%XX" left (a second level of
 * encoding), components of at most PATHS_NAME_MAX bytes.  Empty components
 * (a trailing or doubled '/') are dropped.  The empty path names the root.
 * Writes the result (NUL-terminated, no leading or trailing '/') into out.
 * Returns its length, or -1 with a reason (static string) in *why. */
long paths_clean(const char *raw, size_t len, char *out, size_t outlen, const char **why);

/* 1 when raw[0..len) ends with '/' (or its escape %2F): the path names a
 * folder, which paths_clean() does not keep.  A file operation given one
 * must refuse a file there (POSIX: "a/" is ENOTDIR for a regular file). */
int paths_trailing_slash(const char *raw, size_t len);

/* Same checks on an already-decoded path (JSON bodies): no decoding. */
long paths_clean_decoded(const char *path, char *out, size_t outlen, const char **why);

/* 1 when name is a valid single component (what paths_clean accepts
 * between slashes), else 0. */
int paths_name_ok(const char *name);

/* openat2(rootfd, path, flags | O_NONBLOCK, mode) resolved beneath rootfd
 * (O_NONBLOCK so opening a FIFO never blocks; check the type with fstat
 * before reading); path "" opens the root itself.  Returns the fd or -1 with errno (EXDEV/ELOOP for an
 * escape attempt). */
int paths_open(int rootfd, const char *path, int flags, mode_t mode);

/* paths_open() that also refuses every symbolic link on the way
 * (RESOLVE_NO_SYMLINKS: ELOOP), even one that stays beneath rootfd: for
 * a folder whose very name must be the real thing (a job's folder inside
 * a home its owner controls).  No O_CREAT. */
int paths_open_nofollow(int rootfd, const char *path, int flags);

/* Opens the directory that holds path's last component (O_DIRECTORY |
 * O_PATH-free, readable) and copies that component into leaf.  path must
 * not be empty.  Returns the directory fd or -1 with errno. */
int paths_open_parent(int rootfd, const char *path, char *leaf, size_t leaflen);

/* 1 when errno after a failed paths_open* means "tried to leave the root". */
int paths_escape_errno(int err);

#endif
