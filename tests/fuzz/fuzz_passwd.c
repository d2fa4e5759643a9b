/* fuzz_passwd.c — libFuzzer target for the account file editor.
 *
 * The input is an image's /etc/passwd (or /etc/group).  Checks what
 * passwd.h promises: lines parse within bounds with progress; adding the
 * user never needs more than PASSWD_GROWTH, keeps the input's bytes in
 * order around one added line, and adding again changes nothing; a cap one
 * byte short is refused (-2), never overrun.
 */
#include "work/passwd.c"

#include <assert.h>
#include <stdint.h>
#include <stdlib.h>

static const struct passwd_user users[] = {
	{ "alice", 200042, 200042, "/home/alice", "/bin/sh" },
	{ "x", 0, 0, "/", "/bin/sh" },
	{ "gc-alice", 1000, 100, "/home/gc-alice", "/bin/bash" },
};

static void walk(const char *buf, size_t len)
{
	size_t off = 0;

	while (off < len) {
		struct passwd_line l;
		long r = passwd_line_parse(buf + off, len - off, &l);
		if (r == -1)
			return;
		assert(l.name == buf + off && l.name_len <= len - off);
		assert(l.id >= -1);
		if (r == -2)
			return;
		assert(r > 0 && (size_t)r <= len - off && buf[off + (size_t)r - 1] == '\n');
		assert(l.name_len < (size_t)r);
		off += (size_t)r;
	}
}

static void edit(const char *in, size_t len, const struct passwd_user *u, int group)
{
	size_t cap = len + PASSWD_GROWTH;
	char *out = malloc(cap), *again = malloc(cap + PASSWD_GROWTH), *small;
	int ch = -1, ch2 = -1;
	long r, r2;

	if (!out || !again)
		goto out;
	r = group ? passwd_add_group(in, len, u, out, cap, &ch)
	          : passwd_add_user(in, len, u, out, cap, &ch);
	assert(r >= -1);
	if (r < 0) {
		assert(ch == 0);
		goto out;
	}
	assert((size_t)r <= cap);
	if (!ch) {
		assert((size_t)r == len && memcmp(out, in, len) == 0);
	} else {
		/* the input's bytes, in order, around one added line: the
		 * common head and tail cover the input, and the newlines are
		 * the input's plus one (two when its last line had none) */
		size_t head = 0, tail = 0, nl_in = 0, nl_out = 0;
		assert((size_t)r > len);
		while (head < len && out[head] == in[head])
			head++;
		while (tail < len && out[(size_t)r - 1 - tail] == in[len - 1 - tail])
			tail++;
		assert(head + tail >= len);
		for (size_t i = 0; i < len; i++)
			nl_in += in[i] == '\n';
		for (size_t i = 0; i < (size_t)r; i++)
			nl_out += out[i] == '\n';
		assert(nl_out == nl_in + 1 || (nl_out == nl_in + 2 && in[len - 1] != '\n'));
		/* a cap one byte short is refused */
		small = malloc((size_t)r - 1);
		if (small) {
			int ch3;
			long r3 = group ? passwd_add_group(in, len, u, small, (size_t)r - 1, &ch3)
			                : passwd_add_user(in, len, u, small, (size_t)r - 1, &ch3);
			assert(r3 == -2);
			free(small);
		}
	}
	/* twice is once */
	r2 = group ? passwd_add_group(out, (size_t)r, u, again, cap + PASSWD_GROWTH, &ch2)
	           : passwd_add_user(out, (size_t)r, u, again, cap + PASSWD_GROWTH, &ch2);
	assert(r2 == r && ch2 == 0 && memcmp(again, out, (size_t)r) == 0);
out:
	free(out);
	free(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* An exact-size heap copy so ASan sees any read past the end. */
	char *buf = malloc(size ? size : 1);

	if (!buf)
		return 0;
	if (size)
		memcpy(buf, data, size);
	walk(buf, size);
	for (size_t i = 0; i < sizeof(users) / sizeof(users[0]); i++) {
		edit(buf, size, &users[i], 0);
		edit(buf, size, &users[i], 1);
	}
	free(buf);
	return 0;
}
