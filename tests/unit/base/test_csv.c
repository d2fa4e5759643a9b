/* test_csv.c — the CSV record parser: records, quoting, errors, and the
 * incremental (-2) contract. */
#include "base/csv.c"

#include "harness.h"

#include <stdarg.h>
#include <stdlib.h>

#define MAXF 8

/* Parses one record of s (strlen) and compares its field values with the
 * NULL-terminated list after want_rc.  Returns 1 when everything matches. */
static int record_is(const char *s, int eof, ssize_t want_rc, ...)
{
	struct csv_field f[MAXF];
	size_t n = 0, k = 0;
	ssize_t rc;
	const char *want;
	char out[256];
	va_list ap;
	int ok = 1;

	rc = csv_parse_record(s, strlen(s), eof, f, MAXF, &n);
	if (rc != want_rc) {
		fprintf(stderr, "  '%s': rc %zd, want %zd\n", s, rc, want_rc);
		return 0;
	}
	if (rc < 0)
		return 1;
	va_start(ap, want_rc);
	while ((want = va_arg(ap, const char *)) != NULL) {
		if (k >= n || csv_field_copy(&f[k], out, sizeof(out)) < 0 ||
		    strcmp(out, want) != 0) {
			fprintf(stderr, "  '%s': field %zu is '%s', want '%s'\n",
				s, k, k < n ? out : "(none)", want);
			ok = 0;
			break;
		}
		k++;
	}
	va_end(ap);
	if (ok && k != n) {
		fprintf(stderr, "  '%s': %zu fields, want %zu\n", s, n, k);
		ok = 0;
	}
	return ok;
}

TEST(simple_records)
{
	CHECK(record_is("a,b,c\n", 0, 6, "a", "b", "c", NULL));
	CHECK(record_is("a,b,c\r\n", 0, 7, "a", "b", "c", NULL));
	CHECK(record_is("alice,alice@example.edu,student\n", 0, 32,
			"alice", "alice@example.edu", "student", NULL));
	CHECK(record_is("one\n", 0, 4, "one", NULL));
	CHECK(record_is(" spaced , kept \n", 0, 16, " spaced ", " kept ",
			NULL));
}

TEST(empty_fields_and_lines)
{
	CHECK(record_is("\n", 0, 1, "", NULL));
	CHECK(record_is("\r\n", 0, 2, "", NULL));
	CHECK(record_is(",\n", 0, 2, "", "", NULL));
	CHECK(record_is(",,\n", 0, 3, "", "", "", NULL));
	CHECK(record_is("a,\n", 0, 3, "a", "", NULL));
	CHECK(record_is(",b\n", 0, 3, "", "b", NULL));
	CHECK(record_is("\"\"\n", 0, 3, "", NULL));
	CHECK(record_is("\"\",\"\"\n", 0, 6, "", "", NULL));
}

TEST(quoted_fields)
{
	CHECK(record_is("\"a\",\"b\"\n", 0, 8, "a", "b", NULL));
	CHECK(record_is("\"a,b\",c\n", 0, 8, "a,b", "c", NULL));
	CHECK(record_is("\"say \"\"hi\"\"\",x\n", 0, 15, "say \"hi\"", "x",
			NULL));
	CHECK(record_is("\"\"\"\"\n", 0, 5, "\"", NULL));
	CHECK(record_is("\"\"\"\"\"\"\n", 0, 7, "\"\"", NULL));
	CHECK(record_is("\"line1\nline2\",z\n", 0, 16, "line1\nline2", "z",
			NULL));
	CHECK(record_is("\"crlf\r\ninside\"\r\n", 0, 16, "crlf\r\ninside",
			NULL));
	CHECK(record_is("\"lone\rcr\"\n", 0, 10, "lone\rcr", NULL));
	CHECK(record_is("a,\"b\"\r\n", 0, 7, "a", "b", NULL));
}

TEST(raw_fields_point_into_buffer)
{
	const char *s = "x,\"a\"\"b\",\n";
	struct csv_field f[MAXF];
	size_t n = 0;

	CHECK(csv_parse_record(s, strlen(s), 0, f, MAXF, &n) == 10);
	CHECK(n == 3);
	CHECK(f[0].p == s && f[0].len == 1 && !f[0].quoted);
	/* Quoted content starts after the quote and keeps the "" pair. */
	CHECK(f[1].p == s + 3 && f[1].len == 4 && f[1].quoted);
	CHECK(memcmp(f[1].p, "a\"\"b", 4) == 0);
	CHECK(f[2].p == s + 9 && f[2].len == 0 && !f[2].quoted);
}

TEST(eof_without_newline)
{
	CHECK(record_is("a,b", 1, 3, "a", "b", NULL));
	CHECK(record_is("\"a\"", 1, 3, "a", NULL));
	CHECK(record_is("a,", 1, 2, "a", "", NULL));
	CHECK(record_is("\"x\"\"\"", 1, 5, "x\"", NULL));
	CHECK(record_is("last\n", 1, 5, "last", NULL));
}

TEST(empty_input)
{
	struct csv_field f[MAXF];
	size_t n = 7;

	CHECK(csv_parse_record("", 0, 0, f, MAXF, &n) == -2);
	n = 7;
	CHECK(csv_parse_record("", 0, 1, f, MAXF, &n) == 0);
	CHECK(n == 0);
}

TEST(incomplete_needs_more)
{
	CHECK(record_is("a,b", 0, -2, NULL));
	CHECK(record_is("a,", 0, -2, NULL));
	CHECK(record_is("abc", 0, -2, NULL));
	CHECK(record_is("\"abc", 0, -2, NULL));
	CHECK(record_is("\"abc\n", 0, -2, NULL));
	/* The quote could still become "" with the next byte. */
	CHECK(record_is("\"abc\"", 0, -2, NULL));
	CHECK(record_is("\"abc\"\"", 0, -2, NULL));
	CHECK(record_is("a,b\r", 0, -2, NULL));
	CHECK(record_is("\"a\"\r", 0, -2, NULL));
	CHECK(record_is("\"", 0, -2, NULL));
}

TEST(malformed)
{
	CHECK(record_is("a\"b\n", 0, -1, NULL));
	CHECK(record_is("ab\"\n", 0, -1, NULL));
	CHECK(record_is("a,b\"c\",d\n", 0, -1, NULL));
	CHECK(record_is("\"a\"b\n", 0, -1, NULL));
	CHECK(record_is("\"a\" ,b\n", 0, -1, NULL));
	CHECK(record_is("x,\"a\"\"\"b\n", 0, -1, NULL));
	CHECK(record_is("a\rb\n", 0, -1, NULL));
	CHECK(record_is("\"a\"\rb\n", 0, -1, NULL));
	/* Unterminated at end of input. */
	CHECK(record_is("\"abc", 1, -1, NULL));
	CHECK(record_is("\"abc\"\"", 1, -1, NULL));
	CHECK(record_is("a,\"b\nc", 1, -1, NULL));
	CHECK(record_is("a\r", 1, -1, NULL));
	CHECK(record_is("\"", 1, -1, NULL));
}

TEST(nul_bytes)
{
	static const char unq[] = "a\0b\n";
	static const char quo[] = "\"a\0b\"\n";
	static const char sep[] = "a,\0\n";
	struct csv_field f[MAXF];
	size_t n;

	CHECK(csv_parse_record(unq, sizeof(unq) - 1, 0, f, MAXF, &n) == -1);
	CHECK(csv_parse_record(quo, sizeof(quo) - 1, 0, f, MAXF, &n) == -1);
	CHECK(csv_parse_record(sep, sizeof(sep) - 1, 1, f, MAXF, &n) == -1);
	CHECK(csv_parse_record("\0", 1, 1, f, MAXF, &n) == -1);
}

TEST(error_before_end_wins_over_need_more)
{
	/* A decided error is reported even though the record is unfinished. */
	CHECK(record_is("a\"b", 0, -1, NULL));
	CHECK(record_is("\"a\"x", 0, -1, NULL));
}

TEST(too_many_fields)
{
	struct csv_field f[3];
	size_t n = 0;

	CHECK(csv_parse_record("a,b,c\n", 6, 0, f, 3, &n) == 6);
	CHECK(n == 3);
	CHECK(csv_parse_record("a,b,c,d,e\n", 10, 0, f, 3, &n) == -1);
	CHECK(n == 5);
	/* The first maxf fields were filled, nothing past them. */
	CHECK(f[2].p[0] == 'c' && f[2].len == 1);
	CHECK(csv_parse_record("a,b,c,d", 7, 0, f, 3, &n) == -2);
	CHECK(csv_parse_record("\n", 1, 0, NULL, 0, &n) == -1);
	CHECK(n == 1);
}

TEST(multi_record_buffer)
{
	const char *s = "user,email,role\r\n"
			"alice,a@x.edu,student\r\n"
			"\"Bob, Jr.\",\"b@x.edu\",\"teacher\"\n"
			"\n"
			"\"multi\nline\",\"q\"\"q\",\n"
			"tail,no,newline";
	static const char *want[][3] = {
		{ "user", "email", "role" },
		{ "alice", "a@x.edu", "student" },
		{ "Bob, Jr.", "b@x.edu", "teacher" },
		{ "", NULL, NULL },
		{ "multi\nline", "q\"q", "" },
		{ "tail", "no", "newline" },
	};
	static const size_t want_n[] = { 3, 3, 3, 1, 3, 3 };
	size_t len = strlen(s), off = 0, rec = 0, n, k;
	struct csv_field f[MAXF];
	char out[64];
	ssize_t rc;

	while (off < len) {
		rc = csv_parse_record(s + off, len - off, 1, f, MAXF, &n);
		CHECK(rc > 0);
		if (rc <= 0 || rec >= 6)
			break;
		CHECK(n == want_n[rec]);
		for (k = 0; k < n && k < 3; k++) {
			CHECK(csv_field_copy(&f[k], out, sizeof(out)) >= 0);
			CHECK_STR(out, want[rec][k]);
		}
		off += (size_t)rc;
		rec++;
	}
	CHECK(rec == 6);
	CHECK(off == len);
}

TEST(incremental_feed_matches_whole)
{
	/* Feeding the buffer one byte at a time yields -2 until the record is
	 * complete, then exactly the whole-buffer result. */
	const char *s = "\"a\"\"b\",c\r\n\"x\ny\",,z\nlast";
	size_t len = strlen(s), off = 0, have, n, nw;
	struct csv_field f[MAXF], fw[MAXF];
	ssize_t rc, whole;
	int records = 0;

	while (off < len) {
		whole = csv_parse_record(s + off, len - off, 1, fw, MAXF, &nw);
		CHECK(whole > 0);
		if (whole <= 0)
			break;
		for (have = 0; have <= len - off; have++) {
			rc = csv_parse_record(s + off, have, 0, f, MAXF, &n);
			if (rc != -2)
				break;
		}
		if (off + (size_t)whole < len) {
			/* A record followed by more data completes early. */
			CHECK(rc == whole);
			CHECK(n == nw);
			CHECK(have == (size_t)whole);
		} else {
			/* The last record needs eof. */
			CHECK(rc == -2);
		}
		off += (size_t)whole;
		records++;
	}
	CHECK(records == 3);
}

TEST(field_copy)
{
	struct csv_field f;
	char out[8];

	f.p = "a\"\"b";
	f.len = 4;
	f.quoted = 1;
	CHECK(csv_field_copy(&f, out, sizeof(out)) == 3);
	CHECK_STR(out, "a\"b");
	CHECK(csv_field_copy(&f, out, 4) == 3);
	CHECK(csv_field_copy(&f, out, 3) == -1);
	CHECK(csv_field_copy(&f, out, 0) == -1);

	/* Unquoted fields are copied byte for byte. */
	f.quoted = 0;
	CHECK(csv_field_copy(&f, out, sizeof(out)) == 4);
	CHECK_STR(out, "a\"\"b");
	CHECK(csv_field_copy(&f, out, 4) == -1);
	CHECK(csv_field_copy(&f, out, 5) == 4);

	f.p = "";
	f.len = 0;
	CHECK(csv_field_copy(&f, out, 1) == 0);
	CHECK_STR(out, "");
	CHECK(csv_field_copy(&f, out, 0) == -1);
}

TEST(long_field)
{
	size_t len = 100000, n;
	char *s = malloc(len + 3), *out = malloc(len);
	struct csv_field f[MAXF];

	CHECK(s && out);
	if (!s || !out)
		goto out;
	s[0] = '"';
	memset(s + 1, 'q', len - 2);
	s[len - 1] = '"';
	s[len] = '\n';
	CHECK(csv_parse_record(s, len + 1, 0, f, MAXF, &n) == (ssize_t)len + 1);
	CHECK(n == 1 && f[0].len == len - 2);
	CHECK(csv_field_copy(&f[0], out, len) == (ssize_t)len - 2);
	CHECK(csv_field_copy(&f[0], out, len - 2) == -1);
out:
	free(s);
	free(out);
}

int main(void)
{
	RUN(simple_records);
	RUN(empty_fields_and_lines);
	RUN(quoted_fields);
	RUN(raw_fields_point_into_buffer);
	RUN(eof_without_newline);
	RUN(empty_input);
	RUN(incomplete_needs_more);
	RUN(malformed);
	RUN(nul_bytes);
	RUN(error_before_end_wins_over_need_more);
	RUN(too_many_fields);
	RUN(multi_record_buffer);
	RUN(incremental_feed_matches_whole);
	RUN(field_copy);
	RUN(long_field);
	return harness_done("test_csv");
}
