/* test_api_audit.c — the audit log's time filter (iso_time): the ISO 8601
 * forms it takes, and the values PostgreSQL would refuse (they must be a
 * 400, never a database error); and CSV cells (csv_cell): quoting, doubled
 * quotes, formulas defused. */
#include "api/api_audit.c"

#include "harness.h"

TEST(iso_times_taken)
{
	CHECK(iso_time("2026-12-01"));
	CHECK(iso_time("2026-12-01T08:00"));
	CHECK(iso_time("2026-12-01T08:00Z"));
	CHECK(iso_time("2026-12-01 08:00:59"));
	CHECK(iso_time("2026-12-01T08:00:00.123Z"));
	CHECK(iso_time("2026-12-01T08:00:00.123456+08:00"));
	CHECK(iso_time("2026-12-01T23:59:59-0530"));
	CHECK(iso_time("2024-02-29"));
	CHECK(iso_time("2000-02-29T00:00:00Z"));
}

TEST(iso_times_refused)
{
	CHECK(!iso_time(""));
	CHECK(!iso_time("yesterday"));
	CHECK(!iso_time("2026-12-1"));
	CHECK(!iso_time("2026-13-01"));
	CHECK(!iso_time("2026-00-01"));
	CHECK(!iso_time("2026-02-29"));
	CHECK(!iso_time("1900-02-29"));
	CHECK(!iso_time("2026-04-31"));
	CHECK(!iso_time("0000-01-01"));
	CHECK(!iso_time("2026-12-01T24:00"));
	CHECK(!iso_time("2026-12-01T08:60"));
	CHECK(!iso_time("2026-12-01T08:00:60"));
	CHECK(!iso_time("2026-12-01T08:00:00."));
	CHECK(!iso_time("2026-12-01T08:00:00.1234567"));
	CHECK(!iso_time("2026-12-01T08:00:00+0"));
	CHECK(!iso_time("2026-12-01T08:00:00Zjunk"));
	CHECK(!iso_time("2026-12-01X08:00"));
	CHECK(!iso_time("2026-12-01T08:00'; --"));
}

static const char *cells(const char *const *v)
{
	static char out[512];
	struct evbuffer *b = evbuffer_new();
	size_t n;

	for (int i = 0; v[i]; i++)
		csv_cell(b, v[i], !v[i + 1]);
	n = evbuffer_get_length(b);
	if (n >= sizeof(out))
		n = sizeof(out) - 1;
	evbuffer_remove(b, out, n);
	out[n] = '\0';
	evbuffer_free(b);
	return out;
}

TEST(csv_cells)
{
	const char *const plain[] = { "1", "login.failure", "alice", NULL };
	const char *const quoted[] = { "a,b", "say \"hi\"", "two\nlines", "", NULL };
	const char *const formulas[] = { "=1+2", "+x", "-3", "@SUM(A1)", "a=b", NULL };

	CHECK_STR(cells(plain), "1,login.failure,alice\r\n");
	CHECK_STR(cells(quoted), "\"a,b\",\"say \"\"hi\"\"\",\"two\nlines\",\r\n");
	CHECK_STR(cells(formulas), "\"'=1+2\",\"'+x\",\"'-3\",\"'@SUM(A1)\",a=b\r\n");
}

int main(void)
{
	RUN(iso_times_taken);
	RUN(iso_times_refused);
	RUN(csv_cells);
	return harness_done("test_api_audit");
}
