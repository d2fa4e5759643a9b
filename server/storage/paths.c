/* paths.c — safe paths: decode once, refuse tricks, resolve beneath a root.
 *
 * Owns the only code that turns request paths into file descriptors.  The
 * textual checks refuse what no honest client sends (so they can be
 * reported as 400s); the real guarantee is openat2() with RESOLVE_BENEATH,
 * which the kernel enforces at every step of the walk, symlinks and races
 * included.  Does not own: what is done with the descriptors (files.c).
 */
#include "storage/paths.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Length of the valid shortest-form UTF-8 sequence at s (n bytes left), or
 * 0 when it is not one (overlong forms such as C0 AE for '.', surrogates,
 * code points past U+10FFFF, truncated sequences). */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
	unsigned char c = s[0];

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		return n >= 2 && (s[1] & 0xc0) == 0x80 ? 2 : 0;
	if (c >= 0xe0 && c <= 0xef) {
		if (n < 3 || (s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80)
			return 0;
		if (c == 0xe0 && s[1] < 0xa0)
			return 0; /* overlong */
		if (c == 0xed && s[1] >= 0xa0)
			return 0; /* surrogate */
		return 3;
	}
	if (c >= 0xf0 && c <= 0xf4) {
		if (n < 4 || (s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80 ||
		    (s[3] & 0xc0) != 0x80)
			return 0;
		if (c == 0xf0 && s[1] < 0x90)
			return 0; /* overlong */
		if (c == 0xf4 && s[1] >= 0x90)
			return 0; /* past U+10FFFF */
		return 4;
	}
	return 0; /* 80..C1 and F5..FF never start a sequence */
}

/* Checks a decoded path of n bytes at p and copies it to out without empty
 * components. */
static long check(const char *p, size_t n, char *out, size_t outlen, const char **why)
{
	size_t i = 0, o = 0;

	if (n && p[0] == '/') {
		*why = "absolute paths are not accepted";
		return -1;
	}
	while (i < n) {
		size_t start, clen;

		while (i < n && p[i] == '/')
			i++;
		if (i == n)
			break;
		start = i;
		while (i < n && p[i] != '/') {
			unsigned char c = (unsigned char)p[i];
			size_t k;

			if (c < 0x20 || c == 0x7f) {
				*why = c ? "control characters are not accepted in paths"
				         : "NUL is not accepted in paths";
				return -1;
			}
			if (c == '\\') {
				*why = "backslashes are not accepted in paths";
				return -1;
			}
			if (c == '%' && i + 2 < n && hexval((unsigned char)p[i + 1]) >= 0 &&
			    hexval((unsigned char)p[i + 2]) >= 0) {
				*why = "doubly encoded paths are not accepted";
				return -1;
			}
			k = utf8_seq((const unsigned char *)p + i, n - i);
			if (!k) {
				*why = "paths must be valid UTF-8 (shortest form)";
				return -1;
			}
			i += k;
		}
		clen = i - start;
		if ((clen == 1 && p[start] == '.') ||
		    (clen == 2 && p[start] == '.' && p[start + 1] == '.')) {
			*why = "'.' and '..' are not accepted in paths";
			return -1;
		}
		if (clen > PATHS_NAME_MAX) {
			*why = "a file name is longer than 255 bytes";
			return -1;
		}
		if (o + (o ? 1 : 0) + clen + 1 > outlen || o + clen >= PATHS_MAX) {
			*why = "the path is too long";
			return -1;
		}
		if (o)
			out[o++] = '/';
		memcpy(out + o, p + start, clen);
		o += clen;
	}
	if (!outlen) {
		*why = "the path is too long";
		return -1;
	}
	out[o] = '\0';
	return (long)o;
}

long paths_clean(const char *raw, size_t len, char *out, size_t outlen, const char **why)
{
	char dec[PATHS_MAX + 1];
	size_t i, n = 0;

	for (i = 0; i < len; i++) {
		int c = (unsigned char)raw[i];

		if (c == '%') {
			int hi = i + 2 < len ? hexval((unsigned char)raw[i + 1]) : -1;
			int lo = i + 2 < len ? hexval((unsigned char)raw[i + 2]) : -1;
			if (hi < 0 || lo < 0) {
				*why = "malformed %-escape in the path";
				return -1;
			}
			c = hi * 16 + lo;
			i += 2;
		}
		if (n >= PATHS_MAX) {
			*why = "the path is too long";
			return -1;
		}
		if (c == 0) {
			*why = "NUL is not accepted in paths";
			return -1;
		}
		dec[n++] = (char)c;
	}
	return check(dec, n, out, outlen, why);
}

int paths_trailing_slash(const char *raw, size_t len)
{
	return (len >= 1 && raw[len - 1] == '/') ||
	       (len >= 3 && raw[len - 3] == '%' && raw[len - 2] == '2' &&
	        (raw[len - 1] == 'f' || raw[len - 1] == 'F'));
}

long paths_clean_decoded(const char *path, char *out, size_t outlen, const char **why)
{
	size_t n = strnlen(path, PATHS_MAX + 1);

	if (n > PATHS_MAX) {
		*why = "the path is too long";
		return -1;
	}
	return check(path, n, out, outlen, why);
}

int paths_name_ok(const char *name)
{
	char tmp[PATHS_NAME_MAX + 1];
	const char *why;
	size_t n = strnlen(name, PATHS_NAME_MAX + 1);

	if (n == 0 || n > PATHS_NAME_MAX || memchr(name, '/', n))
		return 0;
	return check(name, n, tmp, sizeof(tmp), &why) == (long)n;
}

int paths_open(int rootfd, const char *path, int flags, mode_t mode)
{
	struct open_how how;
	long fd;

	memset(&how, 0, sizeof(how));
	/* O_NONBLOCK: a FIFO planted from a container (mkfifo needs no
	 * privilege) would otherwise block the worker in open() until some
	 * writer appears — forever.  On regular files and directories it
	 * changes nothing; callers check the type with fstat() before use. */
	how.flags = (unsigned long long)(flags | O_CLOEXEC | O_NONBLOCK);
	if (flags & O_CREAT)
		how.mode = mode;
	how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
	fd = syscall(SYS_openat2, rootfd, *path ? path : ".", &how, sizeof(how));
	return (int)fd;
}

int paths_open_nofollow(int rootfd, const char *path, int flags)
{
	struct open_how how;

	memset(&how, 0, sizeof(how));
	how.flags = (unsigned long long)((flags & ~O_CREAT) | O_CLOEXEC | O_NONBLOCK);
	how.resolve =
	        RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
	return (int)syscall(SYS_openat2, rootfd, *path ? path : ".", &how, sizeof(how));
}

int paths_open_parent(int rootfd, const char *path, char *leaf, size_t leaflen)
{
	const char *slash = strrchr(path, '/');
	char dir[PATHS_MAX + 1];
	size_t dl;

	if (!*path) {
		errno = EINVAL;
		return -1;
	}
	if (!slash) {
		if (strlen(path) >= leaflen) {
			errno = ENAMETOOLONG;
			return -1;
		}
		memcpy(leaf, path, strlen(path) + 1);
		return paths_open(rootfd, "", O_RDONLY | O_DIRECTORY, 0);
	}
	dl = (size_t)(slash - path);
	if (dl >= sizeof(dir) || strlen(slash + 1) >= leaflen) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(dir, path, dl);
	dir[dl] = '\0';
	memcpy(leaf, slash + 1, strlen(slash + 1) + 1);
	return paths_open(rootfd, dir, O_RDONLY | O_DIRECTORY, 0);
}

int paths_escape_errno(int err)
{
	return err == EXDEV || err == ELOOP;
}
