/* passwd.c — the user's line in a container's /etc/passwd and /etc/group
 * (see passwd.h).
 *
 * Owns: reading and editing the text of those two files.  Does not own:
 * getting them out of a container or back in (driver.c, with tar.c's
 * archives), nor the uid (storage_uid).
 */
#include "work/passwd.h"

#include <stdio.h>
#include <string.h>

long passwd_line_parse(const char *buf, size_t len, struct passwd_line *l)
{
	const char *nl = memchr(buf, '\n', len), *f2, *f3;
	size_t n = nl ? (size_t)(nl - buf) : len, i, colons = 0;
	long long id = 0;

	if (memchr(buf, '\0', n))
		return -1;
	l->name = buf;
	l->name_len = n;
	l->id = -1;
	f2 = memchr(buf, ':', n);
	if (f2) {
		l->name_len = (size_t)(f2 - buf);
		f2++;
		f3 = memchr(f2, ':', n - (size_t)(f2 - buf));
		if (f3) {
			f3++;
			for (i = (size_t)(f3 - buf); i < n && buf[i] != ':'; i++, colons++) {
				if (buf[i] < '0' || buf[i] > '9' || colons >= 10) {
					colons = 0;
					break;
				}
				id = id * 10 + (buf[i] - '0');
			}
			if (colons > 0)
				l->id = id;
		}
	}
	if (!nl)
		return -2;
	return (long)(n + 1);
}

/* name is usable in a line: non-empty, short, no separator or newline. */
static int usable(const char *s, size_t max)
{
	size_t n = s ? strlen(s) : 0;

	return n > 0 && n < max && !strpbrk(s, ":\n");
}

static int same(const struct passwd_line *l, const char *name)
{
	return l->name_len == strlen(name) && memcmp(l->name, name, l->name_len) == 0;
}

/* The shared walk over either file: id is the number the third field
 * carries (the uid in passwd, the gid in group). */
static long add(const char *in, size_t len, const struct passwd_user *u, int group, char *out,
                size_t cap, int *changed)
{
	char alt[80], line[PASSWD_GROWTH];
	const char *chosen;
	size_t off = 0, at = len;
	const char *name = u->name;
	long long id = group ? u->gid : u->uid;
	int name_taken = 0, alt_taken = 0, n;

	*changed = 0;
	if (!usable(name, 64) || id < 0 || name[0] == '+' || name[0] == '-')
		return -1;
	snprintf(alt, sizeof(alt), "gc-%s", name);
	while (off < len) {
		struct passwd_line l;
		long r = passwd_line_parse(in + off, len - off, &l);
		if (r == -1)
			return -1;
		if (l.name_len == 0 || strchr("#+-", l.name[0])) {
			/* a comment or a NIS entry: not an account of its own */
			off += r == -2 ? len - off : (size_t)r;
			continue;
		}
		if (l.id == id && (same(&l, name) || same(&l, alt))) {
			/* already there: the text stays as it is */
			if (cap < len)
				return -2;
			memcpy(out, in, len);
			return (long)len;
		}
		if (same(&l, name))
			name_taken = 1;
		if (same(&l, alt))
			alt_taken = 1;
		if (l.id == id && at == len)
			at = off;
		off += r == -2 ? len - off : (size_t)r;
	}
	if (name_taken && alt_taken)
		return -1;
	chosen = name_taken ? alt : name;
	if (group)
		n = snprintf(line, sizeof(line), "%s:x:%lld:\n", chosen, id);
	else
		n = snprintf(line, sizeof(line), "%s:x:%lld:%lld::%s:%s\n", chosen, u->uid, u->gid,
		             u->home, u->shell);
	if (n < 0 || (size_t)n >= sizeof(line))
		return -1;
	/* a last line without its newline gets one before ours */
	int fix = at == len && len > 0 && in[len - 1] != '\n';
	if (cap < len + (size_t)fix + (size_t)n)
		return -2;
	memcpy(out, in, at);
	off = at;
	if (fix)
		out[off++] = '\n';
	memcpy(out + off, line, (size_t)n);
	off += (size_t)n;
	memcpy(out + off, in + at, len - at);
	*changed = 1;
	return (long)(off + len - at);
}

long passwd_add_user(const char *in, size_t len, const struct passwd_user *u, char *out, size_t cap,
                     int *changed)
{
	*changed = 0;
	if (!u || !usable(u->home, 200) || !usable(u->shell, 100) || u->gid < 0)
		return -1;
	return add(in, len, u, 0, out, cap, changed);
}

long passwd_add_group(const char *in, size_t len, const struct passwd_user *u, char *out,
                      size_t cap, int *changed)
{
	*changed = 0;
	if (!u)
		return -1;
	return add(in, len, u, 1, out, cap, changed);
}
