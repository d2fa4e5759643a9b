/* test_files.c — file operations beneath an area fd: listing pages and the
 * name cache (invalidated by changes), usage (sparse files by their
 * blocks, hard links once), mkdir/move/copy/trash/restore/purge, previews,
 * and the tar producer (read back by tar(1)). */
#include "storage/files.c"

#include <stdlib.h>
#include <sys/stat.h>

#include "harness.h"

static char dir[64];
static int root;

static void put(const char *rel, const char *text)
{
	char p[512];
	int fd;

	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	fd = open(p, O_CREAT | O_WRONLY | O_TRUNC, 0644);
	if (fd >= 0) {
		if (write(fd, text, strlen(text)) < 0)
			CHECK(0);
		close(fd);
	}
}

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/test_files_XXXXXX");
	CHECK(mkdtemp(dir) != NULL);
	root = open(dir, O_RDONLY | O_DIRECTORY);
	CHECK(root >= 0);
}

TEST(lists_in_pages_and_sees_changes)
{
	struct files_result res = { 0 };
	char name[32];

	for (int i = 0; i < 25; i++) {
		snprintf(name, sizeof(name), "f%02d", 24 - i);
		put(name, "x");
	}
	CHECK(files_list(root, "", NULL, 10, 0, &res) == RC_OK);
	CHECK(json_array_size(json_object_get(res.out, "items")) == 10);
	CHECK_STR(json_string_value(json_object_get(res.out, "next_cursor")), "f09");
	CHECK_STR(json_string_value(json_object_get(
	                  json_array_get(json_object_get(res.out, "items"), 0), "name")),
	          "f00");
	json_decref(res.out);
	res.out = NULL;
	CHECK(files_list(root, "", "f19", 10, 0, &res) == RC_OK);
	CHECK(json_array_size(json_object_get(res.out, "items")) == 5);
	CHECK(json_is_null(json_object_get(res.out, "next_cursor")));
	json_decref(res.out);
	res.out = NULL;
	put("a-new", "y"); /* the cached list must not hide it */
	CHECK(files_list(root, "", NULL, 1, 0, &res) == RC_OK);
	CHECK_STR(json_string_value(json_object_get(
	                  json_array_get(json_object_get(res.out, "items"), 0), "name")),
	          "a-new");
	CHECK(json_integer_value(json_object_get(res.out, "total")) == 26);
	json_decref(res.out);
	res.out = NULL;
	CHECK(files_list(root, "nope", NULL, 1, 0, &res) == RC_NOTFOUND);
}

TEST(hides_dot_names_on_request)
{
	struct files_result res = { 0 };
	char p[512];
	json_t *items;

	snprintf(p, sizeof(p), "%s/h", dir);
	CHECK(mkdir(p, 0755) == 0);
	put("h/.cache", "x");
	put("h/.local", "x");
	put("h/-dash", "x"); /* sorts before '.': hiding must not be a prefix cut */
	put("h/data", "x");
	put("h/zeta", "x");
	CHECK(files_list(root, "h", NULL, 10, 0, &res) == RC_OK);
	CHECK(json_array_size(json_object_get(res.out, "items")) == 5);
	CHECK(json_integer_value(json_object_get(res.out, "hidden")) == 2);
	json_decref(res.out);
	res.out = NULL;
	CHECK(files_list(root, "h", NULL, 10, FILES_LIST_NO_HIDDEN, &res) == RC_OK);
	items = json_object_get(res.out, "items");
	CHECK(json_array_size(items) == 3);
	CHECK_STR(json_string_value(json_object_get(json_array_get(items, 0), "name")), "-dash");
	CHECK_STR(json_string_value(json_object_get(json_array_get(items, 1), "name")), "data");
	CHECK(json_integer_value(json_object_get(res.out, "hidden")) == 2);
	CHECK(json_integer_value(json_object_get(res.out, "total")) == 5);
	json_decref(res.out);
	res.out = NULL;
	/* pages of one skip the dot-names and end without an empty page */
	CHECK(files_list(root, "h", NULL, 1, FILES_LIST_NO_HIDDEN, &res) == RC_OK);
	CHECK_STR(json_string_value(json_object_get(res.out, "next_cursor")), "-dash");
	json_decref(res.out);
	res.out = NULL;
	CHECK(files_list(root, "h", "-dash", 1, FILES_LIST_NO_HIDDEN, &res) == RC_OK);
	items = json_object_get(res.out, "items");
	CHECK_STR(json_string_value(json_object_get(json_array_get(items, 0), "name")), "data");
	CHECK_STR(json_string_value(json_object_get(res.out, "next_cursor")), "data");
	json_decref(res.out);
	res.out = NULL;
	CHECK(files_list(root, "h", "data", 1, FILES_LIST_NO_HIDDEN, &res) == RC_OK);
	CHECK(json_is_null(json_object_get(res.out, "next_cursor")));
	json_decref(res.out);
	res.out = NULL;
	CHECK(files_list(root, "h", "zeta", 1, FILES_LIST_NO_HIDDEN, &res) == RC_OK);
	CHECK(json_array_size(json_object_get(res.out, "items")) == 0);
	json_decref(res.out);
}

TEST(counts_blocks_and_links_once)
{
	char p[512], q[512];
	int64_t bytes = 0, count = 0;
	int fd;

	snprintf(p, sizeof(p), "%s/u", dir);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/u/sparse", dir);
	fd = open(p, O_CREAT | O_WRONLY, 0644);
	CHECK(fd >= 0 && ftruncate(fd, 1LL << 33) == 0 && pwrite(fd, "z", 1, 0) == 1);
	close(fd);
	snprintf(p, sizeof(p), "%s/u/data", dir);
	fd = open(p, O_CREAT | O_WRONLY, 0644);
	{
		static char buf[1 << 20];
		memset(buf, 1, sizeof(buf));
		CHECK(write(fd, buf, sizeof(buf)) == (ssize_t)sizeof(buf));
	}
	fsync(fd);
	close(fd);
	for (int i = 0; i < 100; i++) {
		snprintf(q, sizeof(q), "%s/u/link%d", dir, i);
		CHECK(link(p, q) == 0);
	}
	snprintf(p, sizeof(p), "%s/u", dir);
	CHECK(files_usage(p, &bytes, &count) == 0);
	CHECK(bytes >= (1 << 20) && bytes < (1 << 20) + (1 << 17));
	CHECK(count == 2);
}

TEST(moves_copies_trashes_restores)
{
	struct files_result res = { 0 };
	char tname[48];
	int is_dir, tfd;
	int64_t bytes;
	char p[512];

	CHECK(files_mkdir(root, "d", 0, 0, &res) == RC_OK);
	json_decref(res.out);
	res.out = NULL;
	CHECK(files_mkdir(root, "d", 0, 0, &res) == RC_CONFLICT);
	put("d/one.txt", "one");
	CHECK(files_move(root, "d/one.txt", "d/two.txt", &res) == RC_OK);
	json_decref(res.out);
	res.out = NULL;
	CHECK(files_move(root, "d", "d/inner", &res) == RC_INVALID);
	CHECK(files_copy(root, root, "stage-x", "d", "d2", 0, 0, -1, &bytes, &res) == RC_OK);
	json_decref(res.out);
	res.out = NULL;
	snprintf(p, sizeof(p), "%s/d2/two.txt", dir);
	CHECK(access(p, F_OK) == 0);
	snprintf(p, sizeof(p), "%s/trash", dir);
	mkdir(p, 0700);
	tfd = open(p, O_RDONLY | O_DIRECTORY);
	CHECK(files_trash(root, tfd, "d2", tname, &is_dir, &bytes, &res) == RC_OK && is_dir);
	snprintf(p, sizeof(p), "%s/d2", dir);
	CHECK(access(p, F_OK) != 0);
	CHECK(files_restore(tfd, tname, root, "d2", &res) == RC_OK);
	CHECK(access(p, F_OK) == 0);
	CHECK(files_trash(root, tfd, "d2", tname, &is_dir, &bytes, &res) == RC_OK);
	CHECK(files_purge(tfd, tname, &res) == RC_OK);
	CHECK(faccessat(tfd, tname, F_OK, 0) != 0);
	CHECK(files_trash(root, tfd, "", tname, &is_dir, &bytes, &res) == RC_INVALID);
	close(tfd);
}

TEST(previews)
{
	struct files_result res = { 0 };

	put("t.csv", "a,b\n\"x, y\",2\n");
	CHECK(files_preview(root, "t.csv", 1024, &res) == RC_OK);
	CHECK_STR(json_string_value(json_object_get(res.out, "kind")), "csv");
	CHECK_STR(json_string_value(
	                  json_array_get(json_array_get(json_object_get(res.out, "rows"), 1), 0)),
	          "x, y");
	json_decref(res.out);
	res.out = NULL;
	put("long.txt", "0123456789\xe4\xbd\xa0");
	CHECK(files_preview(root, "long.txt", 11, &res) == RC_OK); /* cut inside a character */
	CHECK_STR(json_string_value(json_object_get(res.out, "text")), "0123456789");
	CHECK(json_is_true(json_object_get(res.out, "truncated")));
	json_decref(res.out);
	res.out = NULL;
	CHECK(files_preview(root, "d", 10, &res) == RC_CONFLICT);
}

TEST(tars_a_tree)
{
	char p[600], line[512];
	struct files_tar *t;
	unsigned char *buf = malloc(1 << 16);
	size_t len;
	int rc, fd, out, n = 0;
	FILE *f;

	put("d/big.bin", "");
	snprintf(p, sizeof(p), "%s/d/big.bin", dir);
	fd = open(p, O_WRONLY);
	for (int i = 0; i < 40; i++)
		CHECK(write(fd, "0123456789abcdef0123456789abcdef", 32) == 32);
	close(fd);
	fd = paths_open(root, "d", O_RDONLY | O_DIRECTORY, 0);
	t = files_tar_new(fd, "d");
	snprintf(p, sizeof(p), "%s.tar", dir);
	out = open(p, O_CREAT | O_WRONLY | O_TRUNC, 0600);
	do {
		rc = files_tar_step(t, buf, 1 << 16, &len);
		CHECK(write(out, buf, len) == (ssize_t)len);
	} while (rc == 0);
	CHECK(rc == 1);
	close(out);
	files_tar_free(t);
	free(buf);
	snprintf(line, sizeof(line), "tar -tvf %s.tar", dir);
	f = popen(line, "r");
	while (f && fgets(line, sizeof(line), f))
		n++;
	CHECK(f && pclose(f) == 0);
	CHECK(n == 3); /* d/, d/two.txt, d/big.bin */
}

int main(void)
{
	setup();
	RUN(lists_in_pages_and_sees_changes);
	RUN(hides_dot_names_on_request);
	RUN(counts_blocks_and_links_once);
	RUN(moves_copies_trashes_restores);
	RUN(previews);
	RUN(tars_a_tree);
	{
		char cmd[200];
		FILE *f;
		snprintf(cmd, sizeof(cmd), "rm -rf %s %s.tar", dir, dir);
		f = popen(cmd, "r");
		if (f)
			pclose(f);
	}
	return harness_done("test_files");
}
