/* test_paths.c — the safe-path module: textual refusals of paths_clean()
 * and openat2() resolution beneath a root against real symlinks. */
#include "storage/paths.c"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "harness.h"

static long clean(const char *raw, char *out)
{
	const char *why = NULL;
	return paths_clean(raw, strlen(raw), out, PATHS_MAX + 1, &why);
}

TEST(accepts_plain_paths)
{
	char out[PATHS_MAX + 1];

	CHECK(clean("", out) == 0);
	CHECK_STR(out, "");
	CHECK(clean("a/b.txt", out) == 7);
	CHECK_STR(out, "a/b.txt");
	CHECK(clean("a//b/", out) == 3);
	CHECK_STR(out, "a/b");
	CHECK(clean("d%20x/%E4%BD%A0%E5%A5%BD.csv", out) > 0);
	CHECK_STR(out, "d x/\xe4\xbd\xa0\xe5\xa5\xbd.csv");
	CHECK(clean("...", out) == 3); /* a legal name */
	CHECK(clean(".hidden/..x", out) > 0);
	CHECK(clean("100%", out) == -1); /* a bare % is a malformed escape */
	CHECK(clean("100%25", out) == 4);
	CHECK_STR(out, "100%");
}

TEST(refuses_tricks)
{
	static const char *const bad[] = {
		"..", "../x", "a/../b", "a/..", "%2e%2e", "%2E%2e/x", "a/%2e%2e/b", ".", "./a",
		"a/./b", "%252e%252e", "..%2f", "%2e%2e%2fetc", "/etc/passwd", "%2fetc", "a\\b",
		"..%5c", "%5c", "a%00b", "%c0%ae%c0%ae", "%c0%af", "%e0%80%ae", "%ed%a0%80",
		"%f4%90%80%80", "%ff", "%c3", "a%0ab", "%7f", "%", "%zz", "%2", "a%25%32%65",
		"%25%32%65%25%32%65", "x%2500",
	};
	char out[PATHS_MAX + 1];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (clean(bad[i], out) != -1) {
			fprintf(stderr, "accepted %s as %s\n", bad[i], out);
			CHECK(0);
		}
	}
}

TEST(refuses_long_names)
{
	char raw[5000], out[PATHS_MAX + 1];

	memset(raw, 'a', 256);
	raw[256] = '\0';
	CHECK(clean(raw, out) == -1);
	raw[255] = '\0';
	CHECK(clean(raw, out) == 255);
	for (int i = 0; i < 4999; i++)
		raw[i] = i % 10 == 9 ? '/' : 'b';
	raw[4999] = '\0';
	CHECK(clean(raw, out) == -1);
	CHECK(paths_name_ok("x.txt"));
	CHECK(!paths_name_ok(".."));
	CHECK(!paths_name_ok("a/b"));
	CHECK(!paths_name_ok(""));
}

TEST(resolves_beneath_the_root)
{
	char tmpl[] = "/tmp/test_paths_XXXXXX", p[512], leaf[256];
	int root, fd;

	CHECK(mkdtemp(tmpl) != NULL);
	snprintf(p, sizeof(p), "%s/area", tmpl);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/canary", tmpl);
	close(open(p, O_CREAT | O_WRONLY, 0600));
	snprintf(p, sizeof(p), "%s/area/sub", tmpl);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/area/sub/f", tmpl);
	close(open(p, O_CREAT | O_WRONLY, 0600));
	snprintf(p, sizeof(p), "%s/area/etc", tmpl);
	CHECK(symlink("/etc", p) == 0);
	snprintf(p, sizeof(p), "%s/area/up", tmpl);
	CHECK(symlink("../canary", p) == 0);
	snprintf(p, sizeof(p), "%s/area/in", tmpl);
	CHECK(symlink("sub/f", p) == 0);
	snprintf(p, sizeof(p), "%s/area/chain", tmpl);
	CHECK(symlink("up", p) == 0);
	snprintf(p, sizeof(p), "%s/area", tmpl);
	root = open(p, O_RDONLY | O_DIRECTORY);
	CHECK(root >= 0);

	fd = paths_open(root, "sub/f", O_RDONLY, 0);
	CHECK(fd >= 0);
	close(fd);
	fd = paths_open(root, "in", O_RDONLY, 0); /* a symlink that stays inside */
	CHECK(fd >= 0);
	close(fd);
	errno = 0;
	CHECK(paths_open(root, "etc/passwd", O_RDONLY, 0) == -1 && paths_escape_errno(errno));
	CHECK(paths_open(root, "up", O_RDONLY, 0) == -1 && paths_escape_errno(errno));
	CHECK(paths_open(root, "chain", O_RDONLY, 0) == -1 && paths_escape_errno(errno));
	CHECK(paths_open(root, "../canary", O_RDONLY, 0) == -1);
	CHECK(paths_open(root, "/etc/passwd", O_RDONLY, 0) == -1);
	CHECK(paths_open(root, "proc/self/root", O_RDONLY, 0) == -1);
	fd = paths_open_parent(root, "sub/f", leaf, sizeof(leaf));
	CHECK(fd >= 0);
	CHECK_STR(leaf, "f");
	close(fd);
	CHECK(paths_open_parent(root, "etc/passwd", leaf, sizeof(leaf)) == -1);
	close(root);
	snprintf(p, sizeof(p), "rm -rf '%s'", tmpl);
	{
		FILE *f = popen(p, "r");
		CHECK(f != NULL);
		if (f)
			pclose(f);
	}
}

int main(void)
{
	RUN(accepts_plain_paths);
	RUN(refuses_tricks);
	RUN(refuses_long_names);
	RUN(resolves_beneath_the_root);
	return harness_done("test_paths");
}
