/* fuzz_csv.c — libFuzzer target for the CSV record parser.
 *
 * Walks the input record by record as an import would, with and without
 * eof, and checks what the parser promises: progress, bounds, fields inside
 * the buffer, copies that fit and unescape, and that more input never
 * changes a decided answer.
 */
#include "base/csv.c"

#include <assert.h>
#include <stdint.h>
#include <stdlib.h>

#define MAXF 16

static char copybuf[1 << 16];

static void check_fields(const char *base, size_t size, const char *rec,
			 ssize_t rc, const struct csv_field *f, size_t n)
{
	size_t k, i, quotes;
	ssize_t c;

	assert(n >= 1 && n <= MAXF);
	for (k = 0; k < n; k++) {
		assert(f[k].p >= rec && f[k].p <= rec + rc);
		assert(f[k].len <= (size_t)(rec + rc - f[k].p));
		assert(f[k].p >= base && f[k].p + f[k].len <= base + size);
		quotes = 0;
		for (i = 0; i < f[k].len; i++) {
			char ch = f[k].p[i];

			assert(ch != '\0');
			if (!f[k].quoted)
				assert(ch != '"' && ch != ',' && ch != '\n' &&
				       ch != '\r');
			if (ch == '"')
				quotes++;
		}
		/* Quotes inside a quoted field come in "" pairs. */
		assert(quotes % 2 == 0);
		if (f[k].len >= sizeof(copybuf))
			continue;
		c = csv_field_copy(&f[k], copybuf, sizeof(copybuf));
		assert(c >= 0);
		assert((size_t)c == f[k].len - quotes / 2);
		assert(copybuf[c] == '\0' && strlen(copybuf) == (size_t)c);
		/* One byte short of the value plus NUL must be refused. */
		assert(csv_field_copy(&f[k], copybuf, (size_t)c) == -1);
	}
}

static int same_fields(const struct csv_field *a, const struct csv_field *b,
		       size_t n)
{
	size_t k;

	for (k = 0; k < n; k++)
		if (a[k].p != b[k].p || a[k].len != b[k].len ||
		    a[k].quoted != b[k].quoted)
			return 0;
	return 1;
}

/* Parses every record of data with the given eof flag. */
static void walk(const char *data, size_t size, int eof)
{
	struct csv_field f[MAXF], g[MAXF];
	size_t off = 0, n, m;
	ssize_t rc, rc2;

	while (off < size) {
		const char *rec = data + off;
		size_t left = size - off;

		rc = csv_parse_record(rec, left, eof, f, MAXF, &n);
		assert(rc >= -2);
		if (eof)
			assert(rc != -2 && rc != 0);
		if (rc > 0) {
			assert((size_t)rc <= left);
			assert(rec[rc - 1] == '\n' || (eof && (size_t)rc == left));
			check_fields(data, size, rec, rc, f, n);
		}

		/* A decided answer does not depend on eof or on what follows:
		 * eof=1 agrees with every non-(-2) eof=0 answer, and so does
		 * any longer buffer. */
		if (!eof && rc != -2) {
			rc2 = csv_parse_record(rec, left, 1, g, MAXF, &m);
			assert(rc2 == rc);
			if (rc > 0) {
				assert(m == n);
				assert(same_fields(f, g, n));
			}
		}
		if (left > 1) {
			size_t cut = left / 2;

			rc2 = csv_parse_record(rec, cut, 0, g, MAXF, &m);
			if (rc2 != -2) {
				assert(rc2 == rc);
				if (rc > 0) {
					assert(m == n);
					assert(same_fields(f, g, n));
				}
			}
		}

		if (rc == -2)
			break;
		if (rc < 0) {
			/* Resynchronise after the next newline, as a tolerant
			 * importer reporting line errors might. */
			const char *nl = memchr(rec, '\n', left);

			if (!nl)
				break;
			off += (size_t)(nl - rec) + 1;
			continue;
		}
		off += (size_t)rc;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* An exact-size heap copy so ASan sees any read past the end. */
	char *buf = malloc(size ? size : 1);
	struct csv_field f[MAXF];
	size_t n;

	if (!buf)
		return 0;
	if (size)
		memcpy(buf, data, size);
	walk(buf, size, 0);
	walk(buf, size, 1);

	/* Too small a field array: counting still works, result is -1. */
	if (csv_parse_record(buf, size, 1, f, 1, &n) > 0)
		assert(n == 1);
	free(buf);
	return 0;
}
