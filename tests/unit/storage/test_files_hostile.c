/* test_files_hostile.c — hostile inputs to files.c/paths.c, each a case
 * that failed before its fix: a FIFO planted in an area (mkfifo needs no
 * privilege inside a container) must not block a worker in open() on
 * preview, download, measure or copy; a copy keeps a sparse file sparse
 * instead of writing its holes as zeros; a copy never writes more than its
 * budget (the bytes reserved for it); errno values a user can provoke map
 * to 4xx, never 500; a folder archive never emits a file's bytes without
 * its header (a path too long for the PAX record made the file's content
 * read as tar headers: entries the user forged, for whoever downloads); a
 * listing of a folder with millions of entries is refused instead of held
 * in memory. */
#include "storage/files.c"

#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "harness.h"

static char dir[64];
static int root;

static void on_alarm(int sig)
{
	static const char m[] = "FAIL: a file operation blocked (FIFO opened without O_NONBLOCK)\n";

	(void)sig;
	if (write(2, m, sizeof(m) - 1) < 0)
		_exit(2);
	_exit(1);
}

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/test_files_hostile_XXXXXX");
	CHECK(mkdtemp(dir) != NULL);
	root = open(dir, O_RDONLY | O_DIRECTORY);
	CHECK(root >= 0);
	signal(SIGALRM, on_alarm);
}

TEST(fifo_never_blocks_a_worker)
{
	struct files_result res = { 0 };
	char p[256];
	struct stat st;
	int64_t b, c;
	int fd;

	snprintf(p, sizeof(p), "%s/pipe.txt", dir);
	CHECK(mkfifo(p, 0644) == 0);
	alarm(5);
	CHECK(files_preview(root, "pipe.txt", 4096, &res) == RC_CONFLICT);
	fd = files_open_read(root, "pipe.txt", &st, &res);
	CHECK(fd >= 0 && S_ISFIFO(st.st_mode)); /* the caller refuses it by type */
	if (fd >= 0)
		close(fd);
	CHECK(files_measure(root, "pipe.txt", &b, &c, &res) == RC_OK);
	fd = paths_open(root, "pipe.txt", O_RDONLY, 0);
	CHECK(fd >= 0);
	if (fd >= 0)
		close(fd);
	alarm(0);
	unlink(p);
}

/* 256 MiB apparent, 64 KiB of data at 100 MiB. */
static void make_sparse(const char *rel)
{
	char p[256], data[65536];
	int fd;

	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	fd = open(p, O_CREAT | O_WRONLY | O_TRUNC, 0644);
	CHECK(fd >= 0);
	memset(data, 'z', sizeof(data));
	CHECK(ftruncate(fd, 256LL << 20) == 0);
	CHECK(pwrite(fd, data, sizeof(data), 100LL << 20) == (ssize_t)sizeof(data));
	close(fd);
}

TEST(copy_keeps_sparse_files_sparse)
{
	struct files_result res = { 0 };
	char p[256], got[16];
	struct stat st;
	int64_t bytes = 0;
	int fd;

	make_sparse("sparse.img");
	CHECK(files_copy(root, root, "stage-s", "sparse.img", "copy.img", 0, 0, 1 << 20, &bytes,
	                 &res) == RC_OK);
	json_decref(res.out);
	res.out = NULL;
	snprintf(p, sizeof(p), "%s/copy.img", dir);
	CHECK(stat(p, &st) == 0);
	CHECK(st.st_size == 256LL << 20);
	CHECK((int64_t)st.st_blocks * 512 < (1LL << 20)); /* not 256 MiB of zeros */
	CHECK(bytes < (1LL << 20));
	fd = open(p, O_RDONLY);
	CHECK(fd >= 0 && pread(fd, got, 4, 100LL << 20) == 4 && !memcmp(got, "zzzz", 4));
	CHECK(fd >= 0 && pread(fd, got, 4, 10LL << 20) == 4 && !memcmp(got, "\0\0\0\0", 4));
	if (fd >= 0)
		close(fd);
	unlink(p);
}

TEST(copy_stops_at_its_budget)
{
	struct files_result res = { 0 };
	char p[256], buf[65536];
	int64_t bytes = 0;
	int fd;

	snprintf(p, sizeof(p), "%s/dense.bin", dir);
	fd = open(p, O_CREAT | O_WRONLY | O_TRUNC, 0644);
	memset(buf, 'd', sizeof(buf));
	for (int i = 0; i < 32; i++) /* 2 MiB */
		CHECK(write(fd, buf, sizeof(buf)) == (ssize_t)sizeof(buf));
	close(fd);
	CHECK(files_copy(root, root, "stage-d", "dense.bin", "dense2.bin", 0, 0, 1 << 20, &bytes,
	                 &res) == RC_INSUFFICIENT_STORAGE);
	CHECK(faccessat(root, "dense2.bin", F_OK, 0) != 0);
	CHECK(faccessat(root, "stage-d", F_OK, 0) != 0); /* staging removed */
	/* a folder of hard links: measured once, but each copy is real data */
	CHECK(mkdirat(root, "links", 0755) == 0);
	for (int i = 0; i < 4; i++) {
		char l[256];
		snprintf(l, sizeof(l), "%s/links/l%d", dir, i);
		CHECK(link(p, l) == 0);
	}
	CHECK(files_copy(root, root, "stage-l", "links", "links2", 0, 0, (2 << 20) + (1 << 20),
	                 &bytes, &res) == RC_INSUFFICIENT_STORAGE);
	CHECK(faccessat(root, "links2", F_OK, 0) != 0);
}

TEST(user_provoked_errnos_are_not_500)
{
	struct files_result res = { 0 };
	const int errs[] = { ENXIO, EMLINK, EROFS, EBUSY, ETXTBSY, EFBIG, EOPNOTSUPP, EAGAIN };

	for (size_t i = 0; i < sizeof(errs) / sizeof(errs[0]); i++) {
		files_fail(&res, errs[i], "x");
		CHECK(res.rc != RC_INTERNAL);
	}
}

TEST(tar_never_emits_a_file_without_its_header)
{
	char p[2048], name[251], cmd[2200], line[4096];
	unsigned char *buf = malloc(1 << 16);
	struct files_tar *t;
	size_t len, plen;
	int rc, fd, out, n = 0, evil = 0;
	FILE *f;

	memset(name, 'n', 250);
	name[250] = '\0';
	plen = (size_t)snprintf(p, sizeof(p), "%s/deep", dir);
	CHECK(mkdir(p, 0755) == 0);
	for (int i = 0; i < 6; i++) { /* 6 x 251 bytes: past the 1300-byte PAX record */
		plen += (size_t)snprintf(p + plen, sizeof(p) - plen, "/%s", name);
		CHECK(mkdir(p, 0755) == 0);
	}
	snprintf(p + plen, sizeof(p) - plen, "/f");
	fd = open(p, O_CREAT | O_WRONLY | O_TRUNC, 0644);
	CHECK(fd >= 0);
	{
		/* content shaped as a tar header naming a file the user forged */
		unsigned char h[512];
		tar_header(h, "FORGED-ENTRY", '0', 0, 0644, 0, 0, 0, NULL);
		CHECK(write(fd, h, 512) == 512);
	}
	close(fd);
	fd = paths_open(root, "deep", O_RDONLY | O_DIRECTORY, 0);
	t = files_tar_new(fd, "deep");
	snprintf(p, sizeof(p), "%s.deep.tar", dir);
	out = open(p, O_CREAT | O_WRONLY | O_TRUNC, 0600);
	do {
		rc = files_tar_step(t, buf, 1 << 16, &len);
		CHECK(write(out, buf, len) == (ssize_t)len);
	} while (rc == 0);
	close(out);
	files_tar_free(t);
	free(buf);
	snprintf(cmd, sizeof(cmd), "tar -tf %s 2>&1", p);
	f = popen(cmd, "r");
	while (f && fgets(line, sizeof(line), f)) {
		n++;
		if (strstr(line, "FORGED-ENTRY"))
			evil = 1;
	}
	CHECK(f && pclose(f) == 0);
	CHECK(!evil);
	CHECK(n >= 1);
	unlink(p);
	snprintf(cmd, sizeof(cmd), "rm -rf %s/deep", dir);
	f = popen(cmd, "r");
	if (f)
		pclose(f);
}

/* A file that shrinks between two steps and grows back before the next: the
 * short read left the output unaligned, and the member's padding was then
 * written past the end of the caller's buffer (up to 511 bytes; a heap
 * overflow any user could trigger from their own home). Sizes are chosen so
 * the last chunk plus its padding crosses the buffer's end. */
TEST(tar_survives_a_file_that_shrinks_and_grows)
{
	enum { CAP = 1 << 16, SLACK = 1024 };
	const off_t full = 192038, shrunk = 126512; /* see the arithmetic below */
	unsigned char *buf = malloc(CAP + SLACK), *chunk = calloc(1, 4096);
	struct files_tar *t;
	size_t len, total = 0;
	char p[256], cmd[300], line[300];
	int fd, out, rc, over = 0, steps = 0, listed = 0;
	FILE *f;

	CHECK(buf && chunk);
	CHECK(mkdirat(root, "grow", 0755) == 0);
	snprintf(p, sizeof(p), "%s/grow/f", dir);
	fd = open(p, O_CREAT | O_WRONLY | O_TRUNC, 0644);
	CHECK(fd >= 0);
	memset(chunk, 'x', 4096);
	for (off_t o = 0; o < full; o += 4096)
		CHECK(write(fd, chunk, (size_t)(full - o < 4096 ? full - o : 4096)) > 0);
	close(fd);
	t = files_tar_new(paths_open(root, "grow", O_RDONLY | O_DIRECTORY, 0), "grow");
	snprintf(p, sizeof(p), "%s.grow.tar", dir);
	out = open(p, O_CREAT | O_WRONLY | O_TRUNC, 0600);
	snprintf(p, sizeof(p), "%s/grow/f", dir);
	do {
		memset(buf + CAP, 0xAA, SLACK);
		/* step 1: two headers + 64512 bytes; before step 2 the file
		 * shrinks to 126512 (a 62000-byte short read, output now
		 * unaligned); before step 3 it grows back: 65526 bytes left +
		 * 474 of padding would cross the 64 KiB buffer */
		if (steps == 1)
			CHECK(truncate(p, shrunk) == 0);
		if (steps == 2)
			CHECK(truncate(p, full) == 0);
		rc = files_tar_step(t, buf, CAP, &len);
		for (int i = 0; i < SLACK; i++)
			over |= buf[CAP + i] != 0xAA;
		CHECK(len <= CAP);
		CHECK(write(out, buf, len) == (ssize_t)len);
		total += len;
		steps++;
	} while (rc == 0 && steps < 100);
	close(out);
	files_tar_free(t);
	CHECK(!over);
	CHECK(rc == 1);
	CHECK(total % 512 == 0);
	/* the archive is whole: the member keeps the size its header gave */
	snprintf(cmd, sizeof(cmd), "tar -tvf %s.grow.tar 2>&1", dir);
	f = popen(cmd, "r");
	while (f && fgets(line, sizeof(line), f))
		if (strstr(line, " 192038 ") && strstr(line, "grow/f"))
			listed = 1;
	CHECK(f && pclose(f) == 0);
	CHECK(listed);
	snprintf(cmd, sizeof(cmd), "%s.grow.tar", dir);
	unlink(cmd);
	free(buf);
	free(chunk);
}

TEST(listing_a_huge_folder_is_refused_not_held)
{
	struct files_result res = { 0 };
	char p[256];

	files_list_max = 100; /* stands for the 2 Mi of production */
	CHECK(mkdirat(root, "many", 0755) == 0);
	for (int i = 0; i < 150; i++) {
		int fd;
		snprintf(p, sizeof(p), "%s/many/f%03d", dir, i);
		fd = open(p, O_CREAT | O_WRONLY, 0644);
		CHECK(fd >= 0);
		close(fd);
	}
	CHECK(files_list(root, "many", NULL, 10, 0, &res) == RC_CONFLICT);
	CHECK(strstr(res.msg, "more than 100 entries") != NULL);
	files_list_max = 2u << 20;
	CHECK(files_list(root, "many", NULL, 10, 0, &res) == RC_OK);
	json_decref(res.out);
}

int main(void)
{
	setup();
	RUN(fifo_never_blocks_a_worker);
	RUN(copy_keeps_sparse_files_sparse);
	RUN(copy_stops_at_its_budget);
	RUN(user_provoked_errnos_are_not_500);
	RUN(tar_never_emits_a_file_without_its_header);
	RUN(tar_survives_a_file_that_shrinks_and_grows);
	RUN(listing_a_huge_folder_is_refused_not_held);
	{
		char cmd[200];
		FILE *f;
		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		f = popen(cmd, "r");
		if (f)
			pclose(f);
	}
	return harness_done("test_files_hostile");
}
