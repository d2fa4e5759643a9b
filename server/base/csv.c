/* csv.c — an RFC 4180 record parser for CSV imports (user rosters).
 *
 * Owns the grammar only: one record at a time out of a caller's buffer, no
 * allocation, no I/O, so it can be fuzzed alone.  Does not own reading the
 * file, a byte-order mark, header rows or what the columns mean.
 *
 * Grammar accepted: fields separated by ',', records ended by "\n" or
 * "\r\n" (or the end of input at eof).  A quoted field may hold ',', CR, LF
 * and "" (one quote).  Rejected: NUL anywhere, a quote inside an unquoted
 * field, anything but ',' or a record end after a closing quote, a CR not
 * followed by LF outside quotes, an unterminated quote at eof.
 */
#include "base/csv.h"

#include <limits.h>
#include <string.h>

#define NEED_MORE (-2)
#define BAD       (-1)

/* What follows a field at buf[i]: 0 another field (i advanced past ','),
 * 1 end of record (i advanced past the terminator), BAD or NEED_MORE. */
static int field_end(const char *buf, size_t len, int eof, size_t *i)
{
	size_t k = *i;

	if (k == len)
		return eof ? 1 : NEED_MORE;
	switch (buf[k]) {
	case ',': *i = k + 1; return 0;
	case '\n': *i = k + 1; return 1;
	case '\r':
		if (k + 1 == len)
			return eof ? BAD : NEED_MORE;
		if (buf[k + 1] != '\n')
			return BAD;
		*i = k + 2;
		return 1;
	default: return BAD;
	}
}

ssize_t csv_parse_record(const char *buf, size_t len, int eof, struct csv_field *fields,
                         size_t maxf, size_t *nfields)
{
	size_t i = 0, n = 0;
	int end;

	*nfields = 0;
	if (len > (size_t)SSIZE_MAX)
		return BAD;
	if (len == 0)
		return eof ? 0 : NEED_MORE;

	do {
		const char *start;
		size_t flen;
		int quoted;

		if (i < len && buf[i] == '"') {
			size_t j = i + 1;

			quoted = 1;
			start = buf + j;
			for (;;) {
				if (j == len)
					return eof ? BAD : NEED_MORE;
				if (buf[j] == '\0')
					return BAD;
				if (buf[j] == '"') {
					/* A quote as the last byte closes the
					 * field; without eof field_end() then
					 * asks for more, as it would for "". */
					if (j + 1 < len && buf[j + 1] == '"') {
						j += 2;
						continue;
					}
					break;
				}
				j++;
			}
			flen = (size_t)(buf + j - start);
			i = j + 1;
		} else {
			size_t j = i;

			quoted = 0;
			start = buf + i;
			while (j < len && buf[j] != ',' && buf[j] != '\n' && buf[j] != '\r') {
				if (buf[j] == '"' || buf[j] == '\0')
					return BAD;
				j++;
			}
			flen = j - i;
			i = j;
		}

		if (n < maxf) {
			fields[n].p = start;
			fields[n].len = flen;
			fields[n].quoted = quoted;
		}
		n++;
		*nfields = n;
		end = field_end(buf, len, eof, &i);
		if (end < 0)
			return end;
	} while (end == 0);

	if (n > maxf)
		return BAD;
	return (ssize_t)i;
}

ssize_t csv_field_copy(const struct csv_field *f, char *out, size_t outlen)
{
	size_t i, o = 0;

	if (!f->quoted) {
		if (f->len >= outlen || f->len > (size_t)SSIZE_MAX)
			return -1;
		memcpy(out, f->p, f->len);
		out[f->len] = '\0';
		return (ssize_t)f->len;
	}
	for (i = 0; i < f->len; i++) {
		if (o + 1 >= outlen)
			return -1;
		out[o++] = f->p[i];
		if (f->p[i] == '"' && i + 1 < f->len && f->p[i + 1] == '"')
			i++;
	}
	if (o >= outlen)
		return -1;
	out[o] = '\0';
	return (ssize_t)o;
}
