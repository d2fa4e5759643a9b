/* csv.h — a zero-allocation RFC 4180 CSV record parser (for user import).
 *
 * Shape: (buf, len) in, bytes consumed out; -1 on malformed input, -2 when
 * more input is needed.  No allocation, no I/O.  Fields point into buf;
 * quoted fields keep their doubled quotes until csv_field_copy() unescapes.
 */
#ifndef GPUCLOUD_CSV_H
#define GPUCLOUD_CSV_H

#include <stddef.h>
#include <sys/types.h>

struct csv_field {
	const char *p; /* start of the field's content (inside quotes if quoted) */
	size_t len;    /* raw length of that content */
	int quoted;    /* 1 if the field was quoted (may contain "" pairs) */
};

/* Parses one record (line) from buf[0..len).  Records end in \n or \r\n; at
 * eof (eof != 0) the last record may lack the newline.  Fills up to maxf
 * fields and sets *nfields to the number of fields in the record (which may
 * exceed maxf: then the record is reported as error -1).  Returns bytes
 * consumed including the newline, -1 on error (unbalanced quote, a quote in
 * the middle of an unquoted field, text after a closing quote, NUL byte, too
 * many fields), -2 when the record is incomplete and eof is 0.  An empty
 * line is a record with one empty field. */
ssize_t csv_parse_record(const char *buf, size_t len, int eof, struct csv_field *fields,
                         size_t maxf, size_t *nfields);

/* Copies the field's value into out (NUL-terminated), turning "" into ".
 * Returns the value's length, or -1 if it does not fit in outlen. */
ssize_t csv_field_copy(const struct csv_field *f, char *out, size_t outlen);

#endif
