/* passwd.h — the container's account files: the user's line added to the
 * text of an image's /etc/passwd and /etc/group.
 *
 * A container runs as the user's mapped uid (storage_uid), which images
 * do not know: without a line for it a shell says "I have no name!" and
 * tools that look the user up fail.  The driver reads both files out of
 * the created container, adds the user here and writes them back before
 * the start.  Pure text in, text out: no I/O, no allocation.
 *
 * The rules, the same for both files (passwd shown):
 *   - "name:x:uid:gid::home:shell" is added unless a line for this id
 *     already carries the name (or gc-name): adding twice changes nothing,
 *     so a container started again keeps one line;
 *   - it goes before the first line that has the id under another name
 *     (getpwuid answers with the first), else at the end;
 *   - a name the image uses for another id is taken as "gc-<name>"; when
 *     that is taken too, nothing is added (-1).
 */
#ifndef GPUCLOUD_PASSWD_H
#define GPUCLOUD_PASSWD_H

#include <stddef.h>

/* Output room beyond the input's length that is always enough. */
#define PASSWD_GROWTH 512

struct passwd_user {
	const char *name;  /* the user's name (no ':', no newline, < 64 bytes) */
	long long uid;     /* the container's uid */
	long long gid;     /* its primary group */
	const char *home;  /* e.g. "/home/alice" (< 200 bytes) */
	const char *shell; /* e.g. "/bin/sh" (< 100 bytes) */
};

/* One line of an account file: its first and third fields. */
struct passwd_line {
	const char *name; /* field 1 (not NUL-terminated) */
	size_t name_len;
	long long id; /* field 3 as a number, -1 when it is not one */
};

/* Reads the line at buf[0..len) (picohttpparser shape).  Returns the bytes
 * it takes with its newline, -2 when no newline comes (at the end of a
 * file the rest is a last line without one), -1 when it holds a NUL. */
long passwd_line_parse(const char *buf, size_t len, struct passwd_line *l);

/* Adds u to the /etc/passwd text in[0..len) into out (cap bytes, which
 * may not overlap in; len + PASSWD_GROWTH is always enough).  *changed is
 * 1 when a line was added, 0 when out is in unchanged.  Returns out's
 * length, -1 when nothing can be added (an unusable user, a NUL in the
 * text, both names taken), -2 when cap is too small. */
long passwd_add_user(const char *in, size_t len, const struct passwd_user *u, char *out, size_t cap,
                     int *changed);

/* The same for /etc/group: "name:x:gid:" for u's name and gid. */
long passwd_add_group(const char *in, size_t len, const struct passwd_user *u, char *out,
                      size_t cap, int *changed);

#endif
