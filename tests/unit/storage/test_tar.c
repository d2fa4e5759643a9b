/* test_tar.c — the tar format both ways: a file written by tar_put_file
 * reads back whole, PAX records are stepped over, the end and short
 * buffers are told apart, damaged headers are refused.
 */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "storage/tar.h"

static unsigned char buf[16384];

TEST(a_file_reads_back)
{
	struct tar_entry e;
	const char *text = "root:x:0:0::/root:/bin/sh\n";
	size_t n = tar_put_file(buf, "passwd", text, strlen(text), 0644, 0, 42, 1700000000);

	CHECK(n == tar_file_size(strlen(text)) && n == 1024);
	memset(buf + n, 0, 1024);
	CHECK(tar_next(buf, n + 1024, &e) == (long)n);
	CHECK_STR(e.name, "passwd");
	CHECK(e.type == '0' && e.mode == 0644 && e.uid == 0 && e.gid == 42);
	CHECK(e.mtime == 1700000000 && e.size == strlen(text));
	CHECK(e.data_off == 512 && memcmp(buf + e.data_off, text, strlen(text)) == 0);
	/* then the end */
	CHECK(tar_next(buf + n, 1024, &e) == 0);
	CHECK(tar_next(buf, 0, &e) == 0);
	/* short: the header, or the data, still to come */
	CHECK(tar_next(buf, 100, &e) == -2);
	CHECK(tar_next(buf, 600, &e) == -2);
}

TEST(two_files_and_empty_data)
{
	struct tar_entry e;
	size_t n = tar_put_file(buf, "group", "", 0, 0644, 0, 0, 0);
	long r;

	CHECK(n == 512);
	n += tar_put_file(buf + n, "passwd", "x\n", 2, 0600, 0, 0, 0);
	r = tar_next(buf, n, &e);
	CHECK(r == 512 && e.size == 0);
	CHECK_STR(e.name, "group");
	r = tar_next(buf + 512, n - 512, &e);
	CHECK(r == 1024 && e.mode == 0600);
	CHECK_STR(e.name, "passwd");
	CHECK(tar_put_file(buf,
	                   "a-name-of-a-hundred-bytes-------------------------------------"
	                   "--------------------------------------",
	                   "", 0, 0644, 0, 0, 0) == 0);
}

/* A long name (PAX record first) is stepped over to the entry. */
TEST(pax_records_are_stepped_over)
{
	struct tar_entry e;
	char name[300];
	size_t h;
	long r;

	memset(name, 'n', 250);
	name[250] = '\0';
	h = tar_put_header(buf, name, '0', 3, 0644, 0, NULL);
	CHECK(h == 1536);
	memcpy(buf + h, "abc", 3);
	memset(buf + h + 3, 0, 509);
	r = tar_next(buf, h + 512, &e);
	CHECK(r == (long)(h + 512));
	CHECK(e.type == '0' && e.size == 3 && e.data_off == h);
	CHECK(tar_next(buf, h, &e) == -2);
}

TEST(damaged_headers_are_refused)
{
	struct tar_entry e;
	size_t n = tar_put_file(buf, "passwd", "x\n", 2, 0644, 0, 0, 0);

	buf[0] ^= 1; /* the checksum no longer agrees */
	CHECK(tar_next(buf, n, &e) == -1);
	buf[0] ^= 1;
	CHECK(tar_next(buf, n, &e) == (long)n);
	memcpy(buf + 124, "0000000000x", 11); /* not a number */
	CHECK(tar_next(buf, n, &e) == -1);
	memset(buf, 'x', 512);
	CHECK(tar_next(buf, 512, &e) == -1);
}

int main(void)
{
	RUN(a_file_reads_back);
	RUN(two_files_and_empty_data);
	RUN(pax_records_are_stepped_over);
	RUN(damaged_headers_are_refused);
	return harness_done("test_tar");
}
