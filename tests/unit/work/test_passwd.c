/* test_passwd.c — the user's line in an image's /etc/passwd and
 * /etc/group: added once, found again, ahead of another name for the same
 * id, renamed gc-<name> when the image uses the name, refused when the
 * text or the user cannot make a line.
 */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "work/passwd.h"

static const struct passwd_user alice = { "alice", 200042, 200042, "/home/alice", "/bin/sh" };

static char out[8192], again[8192];

/* passwd_add_user on a C string; the result as a C string in out. */
static long add_user(const char *in, const struct passwd_user *u, int *changed)
{
	long n = passwd_add_user(in, strlen(in), u, out, sizeof(out) - 1, changed);
	if (n >= 0)
		out[n] = '\0';
	return n;
}

static long add_group(const char *in, const struct passwd_user *u, int *changed)
{
	long n = passwd_add_group(in, strlen(in), u, out, sizeof(out) - 1, changed);
	if (n >= 0)
		out[n] = '\0';
	return n;
}

TEST(appends_to_an_image_file)
{
	int ch = -1;
	CHECK(add_user("root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000::/home/user:/bin/sh\n",
	               &alice, &ch) > 0);
	CHECK(ch == 1);
	CHECK_STR(out, "root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000::/home/user:/bin/sh\n"
	               "alice:x:200042:200042::/home/alice:/bin/sh\n");
	CHECK(add_group("root:x:0:\nusers:x:100:user\n", &alice, &ch) > 0);
	CHECK(ch == 1);
	CHECK_STR(out, "root:x:0:\nusers:x:100:user\nalice:x:200042:\n");
}

TEST(twice_is_once)
{
	int ch = -1;
	long n;

	CHECK(add_user("root:x:0:0:root:/root:/bin/sh\n", &alice, &ch) > 0);
	snprintf(again, sizeof(again), "%s", out);
	n = add_user(again, &alice, &ch);
	CHECK(n == (long)strlen(again));
	CHECK(ch == 0);
	CHECK_STR(out, again);
	CHECK(add_group("root:x:0:\n", &alice, &ch) > 0);
	snprintf(again, sizeof(again), "%s", out);
	CHECK(add_group(again, &alice, &ch) == (long)strlen(again));
	CHECK(ch == 0);
}

TEST(an_empty_or_missing_file_gets_the_line)
{
	int ch = -1;
	CHECK(add_user("", &alice, &ch) > 0);
	CHECK(ch == 1);
	CHECK_STR(out, "alice:x:200042:200042::/home/alice:/bin/sh\n");
}

TEST(a_last_line_without_newline)
{
	int ch = -1;
	CHECK(add_user("root:x:0:0:root:/root:/bin/sh", &alice, &ch) > 0);
	CHECK_STR(out,
	          "root:x:0:0:root:/root:/bin/sh\nalice:x:200042:200042::/home/alice:/bin/sh\n");
	CHECK(add_group("root:x:0:", &alice, &ch) > 0);
	CHECK_STR(out, "root:x:0:\nalice:x:200042:\n");
}

/* The image has the uid under another name: ours goes first, so getpwuid
 * answers with it; the image's line stays for lookups by its name. */
TEST(the_id_under_another_name)
{
	int ch = -1;
	CHECK(add_user("root:x:0:0::/root:/bin/sh\njovyan:x:200042:100::/home/jovyan:/bin/bash\n"
	               "x:x:9:9::/:/bin/sh\n",
	               &alice, &ch) > 0);
	CHECK(ch == 1);
	CHECK_STR(out, "root:x:0:0::/root:/bin/sh\nalice:x:200042:200042::/home/alice:/bin/sh\n"
	               "jovyan:x:200042:100::/home/jovyan:/bin/bash\nx:x:9:9::/:/bin/sh\n");
	snprintf(again, sizeof(again), "%s", out);
	CHECK(add_user(again, &alice, &ch) == (long)strlen(again) && ch == 0);
	CHECK(add_group("root:x:0:\nstaff:x:200042:\n", &alice, &ch) > 0);
	CHECK_STR(out, "root:x:0:\nalice:x:200042:\nstaff:x:200042:\n");
}

/* The image uses the name for another id: gc-<name>, found again next time. */
TEST(the_name_under_another_id)
{
	int ch = -1;
	const char *img = "root:x:0:0::/root:/bin/sh\nalice:x:1000:1000::/home/alice:/bin/sh\n";

	CHECK(add_user(img, &alice, &ch) > 0);
	CHECK(ch == 1);
	CHECK_STR(out, "root:x:0:0::/root:/bin/sh\nalice:x:1000:1000::/home/alice:/bin/sh\n"
	               "gc-alice:x:200042:200042::/home/alice:/bin/sh\n");
	snprintf(again, sizeof(again), "%s", out);
	CHECK(add_user(again, &alice, &ch) == (long)strlen(again) && ch == 0);
	/* both taken: nothing is added */
	CHECK(add_user("alice:x:1:1::/:/bin/sh\ngc-alice:x:2:2::/:/bin/sh\n", &alice, &ch) == -1);
	CHECK(ch == 0);
	CHECK(add_group("alice:x:1000:\n", &alice, &ch) > 0);
	CHECK_STR(out, "alice:x:1000:\ngc-alice:x:200042:\n");
}

/* Lines that are not accounts (comments, NIS "+", short lines) are kept and
 * never mistaken for ours. */
TEST(odd_lines_are_kept)
{
	int ch = -1;
	const char *img = "# comment alice:x:200042\n+alice::::::\n\nbob\nalic:x:200042x:1::/:/x\n";

	CHECK(add_user(img, &alice, &ch) > 0);
	CHECK(ch == 1);
	CHECK(strncmp(out, img, strlen(img)) == 0);
	CHECK_STR(out + strlen(img), "alice:x:200042:200042::/home/alice:/bin/sh\n");
	/* "alice" alone is a line named alice (with no id): the name is taken */
	CHECK(add_user("alice\n", &alice, &ch) > 0);
	CHECK_STR(out, "alice\ngc-alice:x:200042:200042::/home/alice:/bin/sh\n");
}

TEST(refuses_what_cannot_make_a_line)
{
	int ch = -1;
	struct passwd_user u = alice;

	CHECK(add_user("a:x:1:1::/:/bin/sh\n", NULL, &ch) == -1);
	u.name = "al:ice";
	CHECK(add_user("", &u, &ch) == -1);
	u.name = "al\nice";
	CHECK(add_user("", &u, &ch) == -1);
	u.name = "";
	CHECK(add_user("", &u, &ch) == -1);
	u.name = "+alice";
	CHECK(add_user("", &u, &ch) == -1);
	u = alice;
	u.home = "/home/a:b";
	CHECK(add_user("", &u, &ch) == -1);
	u = alice;
	u.uid = -1;
	CHECK(add_user("", &u, &ch) == -1);
	/* a NUL in the text: not an account file */
	CHECK(passwd_add_user("a:x:1:1\0::/:/bin/sh\n", 19, &alice, out, sizeof(out), &ch) == -1);
	CHECK(ch == 0);
}

TEST(too_small_an_output)
{
	int ch = -1;
	const char *img = "root:x:0:0::/root:/bin/sh\n";

	CHECK(passwd_add_user(img, strlen(img), &alice, out, strlen(img) + 10, &ch) == -2);
	CHECK(passwd_add_user(img, strlen(img), &alice, out, strlen(img) + PASSWD_GROWTH, &ch) > 0);
}

TEST(line_parser)
{
	struct passwd_line l;

	CHECK(passwd_line_parse("bob:x:12:34::/:/bin/sh\nrest", 27, &l) == 23);
	CHECK(l.name_len == 3 && memcmp(l.name, "bob", 3) == 0 && l.id == 12);
	CHECK(passwd_line_parse("bob:x:12", 8, &l) == -2);
	CHECK(l.id == 12);
	CHECK(passwd_line_parse("bob:x:99999999999:1\n", 20, &l) == 20);
	CHECK(l.id == -1); /* more than 10 digits: not an id */
	CHECK(passwd_line_parse("bob:x::1\n", 9, &l) == 9 && l.id == -1);
	CHECK(passwd_line_parse("bob\n", 4, &l) == 4 && l.name_len == 3 && l.id == -1);
	CHECK(passwd_line_parse("b\0b\n", 4, &l) == -1);
}

int main(void)
{
	RUN(appends_to_an_image_file);
	RUN(twice_is_once);
	RUN(an_empty_or_missing_file_gets_the_line);
	RUN(a_last_line_without_newline);
	RUN(the_id_under_another_name);
	RUN(the_name_under_another_id);
	RUN(odd_lines_are_kept);
	RUN(refuses_what_cannot_make_a_line);
	RUN(too_small_an_output);
	RUN(line_parser);
	return harness_done("test_passwd");
}
