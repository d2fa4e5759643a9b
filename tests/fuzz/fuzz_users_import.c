/* fuzz_users_import.c — libFuzzer target for the user CSV import's file
 * check (api_users.c's import_parse): the whole file, every line, with the
 * resynchronisation after a malformed line and the line numbers of records
 * that span lines.
 *
 * Checks what the import promises: it ends; every problem names a line of
 * the file; rows come in file order, each with its fields; a file reported
 * clean has at least one row and no row marked bad; a row not marked bad
 * passes the field checks.
 */
#include "api/api_users.c"

#include <assert.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct import *im = calloc(1, sizeof(*im));
	size_t lines = 1, n;
	int rc, last = 0;

	if (!im)
		return 0;
	im->rows = calloc(IMPORT_MAX_ROWS, sizeof(*im->rows));
	im->errors = json_array();
	if (!im->rows || !im->errors) {
		import_free(im);
		return 0;
	}
	for (size_t i = 0; i < size; i++)
		if (data[i] == '\n')
			lines++;
	rc = import_parse(im, (const char *)data, size);
	n = json_array_size(im->errors);
	assert((rc == 0) == (n == 0));
	for (size_t i = 0; i < n; i++) {
		json_t *e = json_array_get(im->errors, i);
		json_int_t line = json_integer_value(json_object_get(e, "line"));
		const char *msg = json_string_value(json_object_get(e, "message"));
		assert(line >= 1 && (size_t)line <= lines);
		assert(msg && *msg);
	}
	assert(im->n >= 0 && im->n <= IMPORT_MAX_ROWS);
	if (rc == 0)
		assert(im->n > 0);
	for (int i = 0; i < im->n; i++) {
		struct import_row *row = &im->rows[i];
		assert(row->line > last && (size_t)row->line <= lines);
		last = row->line;
		for (int k = 0; k < C__N; k++)
			assert(row->v[k]);
		if (rc == 0)
			assert(!row->bad);
		if (!row->bad) {
			assert(!api_users_check_username(row->v[C_USERNAME]));
			assert(auth_role_parse(row->v[C_ROLE]) >= 0);
		}
	}
	import_free(im);
	return 0;
}
